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

int loom_test_failed(void) {
  return current_failed;
}

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

/* ---- allocation-failure sweeps ----------------------------------------------------------- */

void loom_test_sweep_start(loom_test_sweep *sw, int sticky, int64_t max_tries, loom_status expect,
                           const char *file, int line) {
  memset(sw, 0, sizeof *sw);
  sw->file = file;
  sw->line = line;
  sw->sticky = sticky;
  sw->max_tries = max_tries;
  sw->expect = expect;
  sw->reached = -1;
  sw->live = loom_testing_live_allocations();
}

void loom_test_sweep_arm(loom_test_sweep *sw) {
  loom_testing_fail_allocation(sw->nth, sw->sticky);
}

loom_status loom_test_sweep_done(loom_test_sweep *sw, loom_status s) {
  sw->reached = loom_testing_allocation_count();
  loom_testing_fail_allocation(0, 0);
  sw->status = s;
  return s;
}

/* Checks the run of sw->nth; true when the sweep goes on. */
static bool sweep_checked(loom_test_sweep *sw) {
  const char *f = sw->file;
  long long nth = (long long)sw->nth;
  if (sw->reached < 0) {
    loom_test_fail(f, sw->line, "allocation %lld: the sweep's body ran no work (SWEEP_RUN)", nth);
    return false;
  }
  if (sw->status != LOOM_OK && sw->status != sw->expect) {
    loom_test_fail(f, sw->line, "allocation %lld failing (sticky %d) gave %s, expected %s: %s", nth,
                   sw->sticky, loom_status_string(sw->status), loom_status_string(sw->expect),
                   loom_last_error());
    return false;
  }
  int64_t live = loom_testing_live_allocations();
  if (live != sw->live) {
    loom_test_fail(f, sw->line, "allocation %lld failing (sticky %d): %lld allocations leaked", nth,
                   sw->sticky, (long long)(live - sw->live));
    return false;
  }
  bool reached = sw->reached >= sw->nth;
  if (sw->status != LOOM_OK) {
    sw->failures++;
    if (!reached) {
      loom_test_fail(f, sw->line, "allocation %lld was not reached, yet the run gave %s: %s", nth,
                     loom_status_string(sw->status), loom_last_error());
      return false;
    }
  }
  return sw->status != LOOM_OK || reached;
}

bool loom_test_sweep_next(loom_test_sweep *sw) {
  if (loom_test_failed()) return false;
  if (sw->nth > 0 && !sweep_checked(sw)) return false;
  if (sw->nth + 1 >= sw->max_tries) {
    loom_test_fail(sw->file, sw->line, "no run succeeded with one of its first %lld allocations failing",
                   (long long)sw->max_tries - 1);
    return false;
  }
  sw->nth++;
  sw->reached = -1;
  sw->status = LOOM_OK;
  return true;
}
