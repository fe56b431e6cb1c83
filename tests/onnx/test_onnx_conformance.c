/* ONNX's conformance cases on Loom's devices: every case of node/, pytorch-converted/ and
 * pytorch-operator/ in libonnx-testdata is read, run and compared, or refused. Prints one line
 * per case and the summary `onnx: N passed, N failed, N refused`; fails when an accepted case
 * fails, when a refusal does not say which node and op it is about, or when fewer cases pass
 * than LOOM_ONNX_MIN_PASS (a floor that keeps a regression from passing silently).
 *
 * LOOM_ONNX_DEVICE picks the device (default cpu0; a device this machine lacks skips the
 * test), LOOM_ONNX_EVERY=N runs every Nth case only (a subset for slow devices), and
 * LOOM_ONNX_CASES=substring runs the cases whose folder name contains it. */
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
    bool chosen = (!only || strstr(names[i], only)) && t->seen++ % (every > 0 ? every : 1) == 0;
    if (chosen) {
      char path[8192], why[2048] = "";
      snprintf(path, sizeof path, "%s/%s", dir, names[i]);
      onnx_outcome r = onnx_case_run(ctx, device, path, why, sizeof why);
      static const char *words[] = {"passed", "FAILED", "refused"};
      printf("%s/%s: %s%s%s\n", suite, names[i], words[r], *why ? ": " : "", why);
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
  long floor = getenv("LOOM_ONNX_MIN_PASS") ? atol(getenv("LOOM_ONNX_MIN_PASS")) : 0;
  ASSERT_EQ(t.failed, 0);
  ASSERT_EQ(t.unnamed, 0);
  ASSERT_TRUE(t.passed >= floor);
}
