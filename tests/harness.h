/* A tiny test harness. TEST(name) { ... } defines a test; ASSERT_* stop the test on failure
 * with the file, line and both values. Run `test_<module> [substring]` to filter. */
#ifndef LOOM_TEST_HARNESS_H
#define LOOM_TEST_HARNESS_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "loom/loom.h"
#include "loom/testing.h"

typedef void (*loom_test_fn)(void);
void loom_test_register(const char *name, loom_test_fn fn);
/* Marks the current test failed (the assert macros call it). */
void loom_test_fail(const char *file, int line, const char *fmt, ...);
/* Marks the current test skipped with a reason; return from the test after calling it. */
void loom_test_skip(const char *fmt, ...);
int loom_test_failed(void);

#define TEST(name)                                                 \
  static void test_##name(void);                                   \
  __attribute__((constructor)) static void register_##name(void) { \
    loom_test_register(#name, test_##name);                        \
  }                                                                \
  static void test_##name(void)

#define ASSERT_TRUE(c)                                       \
  do {                                                       \
    if (!(c)) {                                              \
      loom_test_fail(__FILE__, __LINE__, "expected %s", #c); \
      return;                                                \
    }                                                        \
  } while (0)

#define ASSERT_EQ(a, b)                                                             \
  do {                                                                              \
    long long a_ = (long long)(a), b_ = (long long)(b);                             \
    if (a_ != b_) {                                                                 \
      loom_test_fail(__FILE__, __LINE__, "%s == %s: %lld != %lld", #a, #b, a_, b_); \
      return;                                                                       \
    }                                                                               \
  } while (0)

#define ASSERT_NEAR(a, b, tol)                                                                             \
  do {                                                                                                     \
    double a_ = (double)(a), b_ = (double)(b);                                                             \
    if (!(fabs(a_ - b_) <= (tol))) {                                                                       \
      loom_test_fail(__FILE__, __LINE__, "%s ~ %s: %.9g vs %.9g (tol %g)", #a, #b, a_, b_, (double)(tol)); \
      return;                                                                                              \
    }                                                                                                      \
  } while (0)

#define ASSERT_STREQ(a, b)                                                                              \
  do {                                                                                                  \
    const char *a_ = (a), *b_ = (b);                                                                    \
    if (!a_ || !b_ || strcmp(a_, b_) != 0) {                                                            \
      loom_test_fail(__FILE__, __LINE__, "%s == %s:\n    got      \"%s\"\n    expected \"%s\"", #a, #b, \
                     a_ ? a_ : "(null)", b_ ? b_ : "(null)");                                           \
      return;                                                                                           \
    }                                                                                                   \
  } while (0)

/* The string contains the substring. */
#define ASSERT_CONTAINS(s, sub)                                                                       \
  do {                                                                                                \
    const char *s_ = (s), *sub_ = (sub);                                                              \
    if (!s_ || !strstr(s_, sub_)) {                                                                   \
      loom_test_fail(__FILE__, __LINE__, "\"%s\" does not contain \"%s\"", s_ ? s_ : "(null)", sub_); \
      return;                                                                                         \
    }                                                                                                 \
  } while (0)

#define ASSERT_OK(expr)                                                                      \
  do {                                                                                       \
    loom_status s_ = (expr);                                                                 \
    if (s_ != LOOM_OK) {                                                                     \
      loom_test_fail(__FILE__, __LINE__, "%s failed: %s: %s", #expr, loom_status_string(s_), \
                     loom_last_error());                                                     \
      return;                                                                                \
    }                                                                                        \
  } while (0)

/* The call fails with exactly this status. */
#define ASSERT_STATUS(expr, status)                                                                     \
  do {                                                                                                  \
    loom_status s_ = (expr);                                                                            \
    if (s_ != (status)) {                                                                               \
      loom_test_fail(__FILE__, __LINE__, "%s: got %s, expected %s (%s)", #expr, loom_status_string(s_), \
                     loom_status_string(status), loom_last_error());                                    \
      return;                                                                                           \
    }                                                                                                   \
  } while (0)

/* ---- allocation-failure sweeps (libuv's test-loop-oom) ------------------------------------- */

/* The state of one sweep: a piece of work is run again and again with its 1st, 2nd, ... host
 * allocation failing in turn (and, when sticky, every one after it too). */
typedef struct loom_test_sweep {
  const char *file;
  int line;
  int sticky;
  int64_t max_tries;  /* a run that reaches nth == max_tries fails the test */
  loom_status expect; /* what a failing run must return */
  int64_t nth;        /* the allocation that fails in this run, 1-based */
  int64_t live;       /* loom_testing_live_allocations() when the sweep started */
  int64_t reached;    /* allocations the last run made; -1 before it ran */
  loom_status status; /* what the last run returned */
  int64_t failures;   /* runs that returned `expect` */
} loom_test_sweep;

void loom_test_sweep_start(loom_test_sweep *sw, int sticky, int64_t max_tries, loom_status expect,
                           const char *file, int line);
/* Checks the run just made: its status is LOOM_OK or sw->expect, and (after the loop body has
 * freed what the run made) no allocation is live that was not live at the start. True to run
 * again with the next allocation failing; false when a run succeeded without reaching its
 * failing allocation (the sweep is complete), or after marking the test failed. */
bool loom_test_sweep_next(loom_test_sweep *sw);
/* Arms the failure of allocation sw->nth; loom_test_sweep_done disarms it, notes how many
 * allocations the run made and its status, and returns the status. */
void loom_test_sweep_arm(loom_test_sweep *sw);
loom_status loom_test_sweep_done(loom_test_sweep *sw, loom_status s);

/* SWEEP_ALLOCATIONS(&sw, sticky, max_tries) { ... } runs its body once per failing allocation.
 * The body runs the work with SWEEP_RUN(&sw, call) (or loom_test_sweep_arm, the calls, then
 * loom_test_sweep_done), checks what it needs after a failure, and frees everything the run
 * made: at the end of each pass the sweep checks the status (OUT_OF_MEMORY, or `expect` of
 * SWEEP_ALLOCATIONS_EXPECT) and that nothing leaked. After the loop sw.nth is the run that
 * succeeded and sw.failures how many failed; the test has failed if loom_test_failed(). A run
 * that succeeds although its failing allocation was reached (the code absorbed the failure)
 * does not end the sweep. */
#define SWEEP_ALLOCATIONS_EXPECT(sw, sticky, max_tries, expect)                          \
  for (loom_test_sweep_start((sw), (sticky), (max_tries), (expect), __FILE__, __LINE__); \
       loom_test_sweep_next(sw);)
#define SWEEP_ALLOCATIONS(sw, sticky, max_tries) \
  SWEEP_ALLOCATIONS_EXPECT(sw, sticky, max_tries, LOOM_ERR_OUT_OF_MEMORY)
#define SWEEP_RUN(sw, call) (loom_test_sweep_arm(sw), loom_test_sweep_done((sw), (call)))

#endif
