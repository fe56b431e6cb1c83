/* ONNX's conformance cases on Loom's devices: every case of node/, pytorch-converted/ and
 * pytorch-operator/ in libonnx-testdata is read, run and compared, or refused. Prints one line
 * per case and the summary `onnx: N passed, N failed, N refused`; fails when an accepted case
 * fails, when a refusal does not say which node and op it is about, or when fewer cases pass
 * than LOOM_ONNX_MIN_PASS (a floor that keeps a regression from passing silently).
 *
 * LOOM_ONNX_DEVICE picks the device (default cpu0; a device this machine lacks skips the
 * test), LOOM_ONNX_EVERY=N runs every Nth case only (a subset for slow devices), and
 * LOOM_ONNX_CASES=substring runs the cases whose folder name contains it (=suite/case: that one).
 *
 * LOOM_ONNX_LIMIT_DIV=D runs each passing case again as a plan under its graph's naive peak / D
 * (issue 31's second acceptance point, D = 4): one more line per case, and the summary
 * `onnx under 1/D: N passed, N failed, N refused by the planner`, then the refusals counted
 * by the planner's reason (reason_of); a limited run that fails (results, a stage over its
 * limit, an estimate that is not the measured peak) fails the test, and so do fewer limited
 * passes than LOOM_ONNX_MIN_LIMITED_PASS. tests/onnx/run_limited.sh runs each case in a
 * process of its own that way. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "onnx_cases.h"

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

#define MAX_REASONS 64

/* Refusals under a limit grouped by the planner's reason (reason_of), for the summary. */
typedef struct reason_count {
  char label[128];
  int32_t count;
} reason_count;

typedef struct tally {
  int32_t passed, failed, refused, unnamed, seen;
  int32_t lim_passed, lim_failed, lim_refused;
  reason_count reasons[MAX_REASONS];
  int32_t n_reasons;
} tally;

/* The planner's reason for refusing a limit, without the case's names and sizes: what kind
 * of limit it is (an input held whole, an op the chunk rewrite cannot cut, one cut as far as
 * it goes, an operand read whole) and the op at the peak, so that the summary counts the
 * chunker's limits by cause. */
static void reason_of(const char *why, char *label, size_t size) {
  static const char *const kinds[][2] = {
      {"an input is held whole", "an input larger than the limit is held whole"},
      {"cannot be chunked", "cannot be chunked"},
      {"chunked as far as it goes", "chunked as far as it goes, still over the limit"},
      {"cannot take it in pieces", "an operand read whole by an op that cannot take it in pieces"},
  };
  const char *kind = NULL;
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0] && !kind; i++)
    if (strstr(why, kinds[i][0])) kind = kinds[i][1];
  const char *at = strstr(why, "(chunking: ");
  char op[32] = "";
  if (at) sscanf(at + 11, "%31[a-z_0-9]", op);
  if (kind && op[0])
    snprintf(label, size, "%s (at %s)", kind, op);
  else if (kind)
    snprintf(label, size, "%s", kind);
  else
    snprintf(label, size, "other: %.100s", why);
}

/* Counts a refusal under its reason; past MAX_REASONS - 1 labels, the rest as one. */
static void count_reason(tally *t, const char *why) {
  char label[128];
  reason_of(why, label, sizeof label);
  for (int pass = 0; pass < 2; pass++) {
    for (int32_t i = 0; i < t->n_reasons; i++)
      if (!strcmp(t->reasons[i].label, label)) {
        t->reasons[i].count++;
        return;
      }
    if (t->n_reasons < MAX_REASONS - 1 || pass == 1) break;
    snprintf(label, sizeof label, "other reasons");
  }
  reason_count *r = &t->reasons[t->n_reasons++];
  snprintf(r->label, sizeof r->label, "%s", label);
  r->count = 1;
}

static int by_count(const void *a, const void *b) {
  const reason_count *x = a, *y = b;
  return x->count != y->count ? (y->count > x->count) - (y->count < x->count) : strcmp(x->label, y->label);
}

static void print_reasons(tally *t) {
  qsort(t->reasons, (size_t)t->n_reasons, sizeof t->reasons[0], by_count);
  for (int32_t i = 0; i < t->n_reasons; i++) printf("  %4d  %s\n", t->reasons[i].count, t->reasons[i].label);
}

static void run_suite(loom_context *ctx, const char *device, const char *root, const char *suite, tally *t) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/%s", root, suite);
  DIR *d = opendir(dir);
  if (!d) return;
  char **names = NULL;
  size_t n = 0, cap = 0;
  for (struct dirent *e; (e = readdir(d));) {
    if (strncmp(e->d_name, "test_", 5)) continue;
    if (n == cap) names = realloc(names, (cap = cap ? 2 * cap : 256) * sizeof *names);
    names[n++] = strdup(e->d_name);
  }
  closedir(d);
  qsort(names, n, sizeof *names, by_name);
  const char *only = getenv("LOOM_ONNX_CASES");
  long every = getenv("LOOM_ONNX_EVERY") ? atol(getenv("LOOM_ONNX_EVERY")) : 1;
  for (size_t i = 0; i < n; i++) {
    char full[4096];
    snprintf(full, sizeof full, "%s/%s", suite, names[i]);
    bool match = !only || (only[0] == '=' ? !strcmp(full, only + 1) : strstr(names[i], only) != NULL);
    bool chosen = match && t->seen++ % (every > 0 ? every : 1) == 0;
    if (chosen) {
      char path[8192], why[2048] = "";
      snprintf(path, sizeof path, "%s/%s", dir, names[i]);
      onnx_limited lim = {.divisor = getenv("LOOM_ONNX_LIMIT_DIV") ? atoi(getenv("LOOM_ONNX_LIMIT_DIV")) : 0};
      onnx_outcome r = onnx_case_run(ctx, device, path, lim.divisor > 0 ? &lim : NULL, why, sizeof why);
      static const char *words[] = {"passed", "FAILED", "refused"};
      printf("%s/%s: %s%s%s\n", suite, names[i], words[r], *why ? ": " : "", why);
      if (r == ONNX_PASSED && lim.divisor > 0) {
        static const char *lwords[] = {"passed", "FAILED", "not planned"};
        printf("  under 1/%d (%lld bytes, %d stages): %s%s%s\n", lim.divisor, (long long)lim.limit,
               lim.stages, lwords[lim.outcome], *lim.why ? ": " : "", lim.why);
        t->lim_passed += lim.outcome == ONNX_PASSED;
        t->lim_failed += lim.outcome == ONNX_FAILED;
        t->lim_refused += lim.outcome == ONNX_REFUSED;
        if (lim.outcome == ONNX_REFUSED) count_reason(t, lim.why);
      }
      if (r == ONNX_PASSED) t->passed++;
      if (r == ONNX_FAILED) t->failed++;
      if (r == ONNX_REFUSED) {
        t->refused++;
        if (!onnx_refusal_named(why)) {
          t->unnamed++;
          printf("  ^ this refusal does not name its node and op\n");
        }
      }
      fflush(stdout);
    }
    free(names[i]);
  }
  free(names);
}

TEST(conformance) {
  const char *root = getenv("LOOM_ONNX_TESTDATA") ? getenv("LOOM_ONNX_TESTDATA") : ONNX_TESTDATA_DEFAULT;
  const char *device = getenv("LOOM_ONNX_DEVICE") ? getenv("LOOM_ONNX_DEVICE") : "cpu0";
  char probe[4096];
  snprintf(probe, sizeof probe, "%s/node", root);
  DIR *d = opendir(probe);
  if (!d) {
    loom_test_skip("no ONNX test data at %s (Debian's libonnx-testdata)", root);
    return;
  }
  closedir(d);
  loom_context *ctx = NULL;
  ASSERT_OK(loom_context_create(NULL, &ctx));
  int32_t index;
  if (loom_context_find_device(ctx, device, &index)) {
    loom_context_destroy(ctx);
    loom_test_skip("no device %s here", device);
    return;
  }
  tally t = {0};
  static const char *suites[] = {"node", "pytorch-converted", "pytorch-operator"};
  for (int i = 0; i < 3; i++) run_suite(ctx, device, root, suites[i], &t);
  loom_context_destroy(ctx);
  printf("onnx: %d passed, %d failed, %d refused (on %s)\n", t.passed, t.failed, t.refused, device);
  if (getenv("LOOM_ONNX_LIMIT_DIV"))
    printf("onnx under 1/%s: %d passed, %d failed, %d refused by the planner\n",
           getenv("LOOM_ONNX_LIMIT_DIV"), t.lim_passed, t.lim_failed, t.lim_refused);
  if (t.n_reasons) printf("refused by the planner, by reason:\n");
  print_reasons(&t);
  long floor = getenv("LOOM_ONNX_MIN_PASS") ? atol(getenv("LOOM_ONNX_MIN_PASS")) : 0;
  long lim_floor = getenv("LOOM_ONNX_MIN_LIMITED_PASS") ? atol(getenv("LOOM_ONNX_MIN_LIMITED_PASS")) : 0;
  ASSERT_EQ(t.failed, 0);
  ASSERT_EQ(t.lim_failed, 0);
  ASSERT_EQ(t.unnamed, 0);
  ASSERT_TRUE(t.passed >= floor);
  ASSERT_TRUE(t.lim_passed >= lim_floor);
}
