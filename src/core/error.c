/* Status strings and the per-thread last-error message. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/core.h"

/* One message per thread, like errno: a failure on one thread never clobbers another's. */
static _Thread_local char last_error[1024];

const char *loom_status_string(loom_status status) {
  switch (status) {
#define LOOM_X(name, text) \
  case LOOM_STATUS_##name: \
    return text;
    LOOM_STATUS_MAP(LOOM_X)
#undef LOOM_X
    default:
      return "unknown status";
  }
}

const char *loom_last_error(void) {
  return last_error;
}

void loom_clear_error(void) {
  last_error[0] = '\0';
}

loom_status loom__error(loom_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  return status;
}

void loom__error_prefix(const char *fmt, ...) {
  char prefix[512];
  char old[sizeof last_error];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  memcpy(old, last_error, sizeof old);
  size_t np = strlen(prefix), no = strlen(old);
  if (np > sizeof last_error - 1) np = sizeof last_error - 1;
  if (no > sizeof last_error - 1 - np) no = sizeof last_error - 1 - np;
  memcpy(last_error, prefix, np);
  memcpy(last_error + np, old, no);
  last_error[np + no] = '\0';
}

loom_status loom__oom(const char *what) {
  return loom__error(LOOM_ERR_OUT_OF_MEMORY, "out of memory: %s", what);
}

double loom__now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
