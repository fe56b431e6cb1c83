/* loom-bench compare A.json B.json: two suite reports (two machines, drivers or Loom versions)
 * side by side. Each case is keyed by device id, name, dtype and size; B/A is B's time over A's
 * (above 1: B is slower), a regression when it exceeds 1 + the threshold. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "loom/internal/json_read.h"

typedef struct compare_options {
  const char *a, *b;
  double threshold;
  double floor; /* cases under this many seconds in both reports are not judged */
  bool fail_on_regression;
} compare_options;

static void usage(FILE *f) {
  fputs(
      "usage: loom-bench compare A.json B.json [--threshold X] [--floor S] [--fail-on-regression]\n"
      "  Every case of two `loom-bench suite --json` reports side by side: Loom's time in each, B/A\n"
      "  (B's time over A's: above 1, B is slower) and each side's ratio to its vendor library.\n"
      "  --threshold X         flag a regression where B/A > 1 + X (default 0.1)\n"
      "  --floor S             judge no case that takes under S seconds in both reports (default\n"
      "                        0.0001: on a shared machine microsecond cases move by more than\n"
      "                        any threshold); 0 judges every case\n"
      "  --fail-on-regression  exit 1 when a case regressed (else 0 whatever the figures)\n",
      f);
}

static int parse_args(int argc, char **argv, compare_options *o) {
  *o = (compare_options){.threshold = 0.1, .floor = 1e-4};
  const bench_opt opts[] = {
      BENCH_OPT_DOUBLE("threshold", &o->threshold, 0, 100, "a fraction from 0 to 100, as 0.1"),
      BENCH_OPT_DOUBLE("floor", &o->floor, 0, 3600, "seconds from 0 to 3600, as 0.0001"),
      BENCH_OPT_FLAG("fail-on-regression", &o->fail_on_regression),
      BENCH_OPT_END,
  };
  bench_cli b = {.mode = "compare",
                 .synopsis = "loom-bench compare A.json B.json [options]",
                 .usage = usage,
                 .opts = opts,
                 .max_operands = 2};
  int rc = bench_args(&b, argc, argv);
  if (rc) return rc;
  if (b.n_operands < 2) return bench_usage_error(&b, "want two reports, A.json and B.json");
  o->a = b.operands[0];
  o->b = b.operands[1];
  return 0;
}

/* Reads and parses a suite report; 1 (with a message) when it is not one. */
static int load(const char *path, loom__jr_value *v) {
  char why[256];
  int err = 0;
  /* Loom's one JSON reader, size-capped: a report is kilobytes, /dev/zero is refused. */
  if (loom__jr_load(path, 0, v, why, sizeof why, &err)) {
    if (err)
      fprintf(stderr, "loom-bench compare: cannot read %s\n", path);
    else
      fprintf(stderr, "loom-bench compare: %s: not JSON: %s\n", path, why);
    return 1;
  }
  const loom__jr_value *devices = loom__jr_get(v, "devices");
  if (strcmp(loom__jr_string(v, "schema"), "loom-bench-suite/1") || !devices ||
      devices->type != LOOM__JR_ARRAY) {
    fprintf(stderr, "loom-bench compare: %s: not a loom-bench suite report (no schema loom-bench-suite/1)\n",
            path);
    loom__jr_free(v);
    return 1;
  }
  return 0;
}

/* The case of report r on device `id` with c's name, dtype and size, or NULL. */
static const loom__jr_value *find_case(const loom__jr_value *r, const char *id, const loom__jr_value *c) {
  const loom__jr_value *devices = loom__jr_get(r, "devices");
  for (int32_t i = 0; i < devices->n; i++) {
    const loom__jr_value *d = &devices->items[i], *cases = loom__jr_get(d, "cases");
    if (strcmp(loom__jr_string(d, "id"), id) || !cases || cases->type != LOOM__JR_ARRAY) continue;
    for (int32_t k = 0; k < cases->n; k++) {
      const loom__jr_value *x = &cases->items[k];
      if (!strcmp(loom__jr_string(x, "name"), loom__jr_string(c, "name")) &&
          !strcmp(loom__jr_string(x, "dtype"), loom__jr_string(c, "dtype")) &&
          !strcmp(loom__jr_string(x, "size"), loom__jr_string(c, "size")))
        return x;
    }
  }
  return NULL;
}

static void print_time(double s) {
  if (s <= 0)
    fputs(" - |", stdout);
  else if (s < 1e-3)
    printf(" %.1f us |", s * 1e6);
  else
    printf(" %.3f ms |", s * 1e3);
}

static void print_vendor_ratio(const loom__jr_value *c) {
  double r = c ? loom__jr_number(c, "ratio", -1) : -1;
  if (r > 0)
    printf(" %.2f |", r);
  else
    fputs(" - |", stdout);
}

/* One row: a case in both reports, or in one (the other NULL). Returns whether it regressed. */
static bool print_row(const char *id, const loom__jr_value *a, const loom__jr_value *b, double threshold,
                      double floor) {
  const loom__jr_value *c = a ? a : b;
  printf("| %s | %s | %s | %s |", id, loom__jr_string(c, "name"), loom__jr_string(c, "dtype"),
         loom__jr_string(c, "size"));
  double ta = a ? loom__jr_number(a, "seconds", -1) : -1, tb = b ? loom__jr_number(b, "seconds", -1) : -1;
  print_time(ta);
  print_time(tb);
  bool regressed = false;
  if (!a || !b) {
    printf(" - | only in %s |", a ? "A" : "B");
  } else if (ta <= 0 || tb <= 0) {
    printf(" - | not measured in %s |", ta <= 0 && tb <= 0 ? "either" : ta <= 0 ? "A" : "B");
  } else if (ta < floor && tb < floor) {
    printf(" %.2f | under the floor |", tb / ta);
  } else {
    regressed = tb / ta > 1 + threshold;
    printf(" %.2f | %s |", tb / ta, regressed ? "REGRESSION" : tb / ta < 1 / (1 + threshold) ? "faster" : "");
  }
  print_vendor_ratio(a);
  print_vendor_ratio(b);
  putchar('\n');
  return regressed;
}

/* Rows of every case of `from`; with `other` absent from the other report only (only_missing). */
static int32_t rows(const loom__jr_value *from, const loom__jr_value *other, bool from_is_a,
                    bool only_missing, double threshold, double floor) {
  const loom__jr_value *devices = loom__jr_get(from, "devices");
  int32_t regressions = 0;
  for (int32_t i = 0; i < devices->n; i++) {
    const loom__jr_value *d = &devices->items[i], *cases = loom__jr_get(d, "cases");
    const char *id = loom__jr_string(d, "id");
    for (int32_t k = 0; cases && cases->type == LOOM__JR_ARRAY && k < cases->n; k++) {
      const loom__jr_value *c = &cases->items[k], *o = find_case(other, id, c);
      if (only_missing && o) continue;
      regressions += print_row(id, from_is_a ? c : o, from_is_a ? o : c, threshold, floor);
    }
  }
  return regressions;
}

static void print_devices(const char *label, const char *path, const loom__jr_value *r) {
  const loom__jr_value *devices = loom__jr_get(r, "devices");
  printf("%s: %s (Loom %s, %s sizes)\n", label, path, loom__jr_string(r, "loom_version"),
         loom__jr_string(r, "profile"));
  for (int32_t i = 0; i < devices->n; i++)
    printf("  %s: %s (%s), driver %s\n", loom__jr_string(&devices->items[i], "id"),
           loom__jr_string(&devices->items[i], "name"), loom__jr_string(&devices->items[i], "vendor"),
           loom__jr_string(&devices->items[i], "driver"));
}

int loom_bench_compare(int argc, char **argv) {
  compare_options o;
  int rc = parse_args(argc, argv, &o);
  if (rc) return rc < 0 ? 0 : rc;
  loom__jr_value a, b;
  if (load(o.a, &a)) return 1;
  if (load(o.b, &b)) {
    loom__jr_free(&a);
    return 1;
  }
  print_devices("A", o.a, &a);
  print_devices("B", o.b, &b);
  printf(
      "\nB/A = B's time / A's time; a regression where it is above %.2f (cases under %g s in both not "
      "judged)\n\n",
      1 + o.threshold, o.floor);
  puts(
      "| device | case | dtype | size | A | B | B/A | | A vs library | B vs library |\n"
      "|---|---|---|---|---|---|---|---|---|---|");
  int32_t regressions = rows(&a, &b, true, false, o.threshold, o.floor);
  rows(&b, &a, false, true, o.threshold, o.floor);
  printf("\n%d regression%s beyond %.0f%%\n", (int)regressions, regressions == 1 ? "" : "s",
         o.threshold * 100);
  loom__jr_free(&a);
  loom__jr_free(&b);
  return regressions && o.fail_on_regression ? 1 : 0;
}
