/* A tiny test harness. TEST(name) { ... } defines a test; ASSERT_* stop the test on failure
 * with the file, line and both values. Run `test_<module> [substring]` to filter. */
#ifndef LOOM_TEST_HARNESS_H
#define LOOM_TEST_HARNESS_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "loom/loom.h"

typedef void (*loom_test_fn)(void);
void loom_test_register(const char *name, loom_test_fn fn);
/* Marks the current test failed (the assert macros call it). */
void loom_test_fail(const char *file, int line, const char *fmt, ...);
/* Marks the current test skipped with a reason; return from the test after calling it. */
void loom_test_skip(const char *fmt, ...);
int loom_test_failed(void);

#define TEST(name)                                                              \
  static void test_##name(void);                                                \
  __attribute__((constructor)) static void register_##name(void) {              \
    loom_test_register(#name, test_##name);                                     \
  }                                                                             \
  static void test_##name(void)

#define ASSERT_TRUE(c)                                                          \
  do {                                                                          \
    if (!(c)) {                                                                 \
      loom_test_fail(__FILE__, __LINE__, "expected %s", #c);                    \
      return;                                                                   \
    }                                                                           \
  } while (0)

#define ASSERT_EQ(a, b)                                                         \
  do {                                                                          \
    long long a_ = (long long)(a), b_ = (long long)(b);                         \
    if (a_ != b_) {                                                             \
      loom_test_fail(__FILE__, __LINE__, "%s == %s: %lld != %lld", #a, #b, a_, b_); \
      return;                                                                   \
    }                                                                           \
  } while (0)

#define ASSERT_NEAR(a, b, tol)                                                  \
  do {                                                                          \
    double a_ = (double)(a), b_ = (double)(b);                                  \
    if (!(fabs(a_ - b_) <= (tol))) {                                            \
      loom_test_fail(__FILE__, __LINE__, "%s ~ %s: %.9g vs %.9g (tol %g)", #a, #b, a_, b_, (double)(tol)); \
      return;                                                                   \
    }                                                                           \
  } while (0)

#define ASSERT_STREQ(a, b)                                                      \
  do {                                                                          \
    const char *a_ = (a), *b_ = (b);                                            \
    if (!a_ || !b_ || strcmp(a_, b_) != 0) {                                    \
      loom_test_fail(__FILE__, __LINE__, "%s == %s:\n    got      \"%s\"\n    expected \"%s\"", #a, #b, \
                     a_ ? a_ : "(null)", b_ ? b_ : "(null)");                   \
      return;                                                                   \
    }                                                                           \
  } while (0)

/* The string contains the substring. */
#define ASSERT_CONTAINS(s, sub)                                                 \
  do {                                                                          \
    const char *s_ = (s), *sub_ = (sub);                                        \
    if (!s_ || !strstr(s_, sub_)) {                                             \
      loom_test_fail(__FILE__, __LINE__, "\"%s\" does not contain \"%s\"", s_ ? s_ : "(null)", sub_); \
      return;                                                                   \
    }                                                                           \
  } while (0)

#define ASSERT_OK(expr)                                                         \
  do {                                                                          \
    loom_status s_ = (expr);                                                    \
    if (s_ != LOOM_OK) {                                                        \
      loom_test_fail(__FILE__, __LINE__, "%s failed: %s: %s", #expr, loom_status_string(s_), \
                     loom_last_error());                                        \
      return;                                                                   \
    }                                                                           \
  } while (0)

/* The call fails with exactly this status. */
#define ASSERT_STATUS(expr, status)                                             \
  do {                                                                          \
    loom_status s_ = (expr);                                                    \
    if (s_ != (status)) {                                                       \
      loom_test_fail(__FILE__, __LINE__, "%s: got %s, expected %s (%s)", #expr,  \
                     loom_status_string(s_), loom_status_string(status), loom_last_error()); \
      return;                                                                   \
    }                                                                           \
  } while (0)

#endif
