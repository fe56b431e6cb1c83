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
 * `onnx under 1/D: N passed, N failed, N refused by the planner`; a limited run that fails
 * (results, a stage over its limit, an estimate that is not the measured peak) fails the
 * test. tests/onnx/run_limited.sh runs each case in a process of its own that way. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "onnx_cases.h"

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

typedef struct tally {
  int32_t passed, failed, refused, unnamed, seen;
  int32_t lim_passed, lim_failed, lim_refused;
} tally;

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
  long floor = getenv("LOOM_ONNX_MIN_PASS") ? atol(getenv("LOOM_ONNX_MIN_PASS")) : 0;
  ASSERT_EQ(t.failed, 0);
  ASSERT_EQ(t.lim_failed, 0);
  ASSERT_EQ(t.unnamed, 0);
  ASSERT_TRUE(t.passed >= floor);
}
