/* The test runner behind harness.h: runs every registered test (or those whose name contains
 * argv[1]), prints one line each and a closing "N passed, N failed" line. Exit 0 when all
 * passed, 77 when every test that ran was skipped, 1 otherwise. */
#include <stdarg.h>
#include <stdlib.h>

#include "harness.h"

#define MAX_TESTS 4096

static struct {
  const char *name;
  loom_test_fn fn;
} tests[MAX_TESTS];
static int n_tests;
static int current_failed, current_skipped;

void loom_test_register(const char *name, loom_test_fn fn) {
  if (n_tests == MAX_TESTS) {
    fprintf(stderr, "harness: more than %d tests\n", MAX_TESTS);
    abort();
  }
  tests[n_tests].name = name;
  tests[n_tests].fn = fn;
  n_tests++;
}

void loom_test_fail(const char *file, int line, const char *fmt, ...) {
  va_list ap;
  fprintf(stdout, "    %s:%d: ", file, line);
  va_start(ap, fmt);
  vfprintf(stdout, fmt, ap);
  va_end(ap);
  fputc('\n', stdout);
  current_failed = 1;
}

void loom_test_skip(const char *fmt, ...) {
  va_list ap;
  fprintf(stdout, "    skipped: ");
  va_start(ap, fmt);
  vfprintf(stdout, fmt, ap);
  va_end(ap);
  fputc('\n', stdout);
  current_skipped = 1;
}

int loom_test_failed(void) { return current_failed; }

int main(int argc, char **argv) {
  const char *filter = argc > 1 ? argv[1] : NULL;
  int passed = 0, failed = 0, skipped = 0;
  for (int i = 0; i < n_tests; i++) {
    if (filter && !strstr(tests[i].name, filter)) continue;
    current_failed = current_skipped = 0;
    loom_clear_error();
    fflush(stdout);
    tests[i].fn();
    if (current_failed) {
      failed++;
      printf("FAIL %s\n", tests[i].name);
    } else if (current_skipped) {
      skipped++;
      printf("skip %s\n", tests[i].name);
    } else {
      passed++;
      printf("ok   %s\n", tests[i].name);
    }
    fflush(stdout);
  }
  printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  if (failed) return 1;
  if (passed == 0 && skipped > 0) return 77;
  return 0;
}
