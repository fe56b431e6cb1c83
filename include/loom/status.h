/* Status codes and error messages.
 *
 * Every fallible Loom call returns a loom_status; LOOM_OK (0) is success. On failure the
 * calling thread's last-error message says what failed and where, in words a user can act
 * on; read it with loom_last_error() before the next Loom call on the same thread.
 */
#ifndef LOOM_STATUS_H
#define LOOM_STATUS_H

#include "loom/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* X(NAME, description). The taxonomy follows IREE's: callers branch on the kind of failure,
 * the message carries the detail. */
#define LOOM_STATUS_MAP(X)                \
  X(OK, "ok")                             \
  X(INVALID_ARGUMENT, "invalid argument") \
  X(OUT_OF_MEMORY, "out of memory")       \
  X(UNAVAILABLE, "unavailable")           \
  X(UNSUPPORTED, "unsupported")           \
  X(NOT_FOUND, "not found")               \
  X(IO, "input/output error")             \
  X(INTERNAL, "internal error")

typedef enum loom_status {
#define LOOM_X(name, text) LOOM_STATUS_##name,
  LOOM_STATUS_MAP(LOOM_X)
#undef LOOM_X
      LOOM_STATUS_COUNT_
} loom_status;

#define LOOM_OK LOOM_STATUS_OK

/* The short names callers use. LOOM_STATUS_OK == LOOM_OK == 0. */
#define LOOM_ERR_INVALID_ARGUMENT LOOM_STATUS_INVALID_ARGUMENT
#define LOOM_ERR_OUT_OF_MEMORY LOOM_STATUS_OUT_OF_MEMORY
#define LOOM_ERR_UNAVAILABLE LOOM_STATUS_UNAVAILABLE
#define LOOM_ERR_UNSUPPORTED LOOM_STATUS_UNSUPPORTED
#define LOOM_ERR_NOT_FOUND LOOM_STATUS_NOT_FOUND
#define LOOM_ERR_IO LOOM_STATUS_IO
#define LOOM_ERR_INTERNAL LOOM_STATUS_INTERNAL

/* A static, human-readable name for a status ("out of memory"). Never NULL. */
LOOM_API const char *loom_status_string(loom_status status);

/* The message of the last failed Loom call on this thread, or "" when none failed yet.
 * The storage is thread-local and is overwritten by the next failure on the same thread:
 * copy it if you need to keep it. */
LOOM_API const char *loom_last_error(void);

/* Clears this thread's last-error message. */
LOOM_API void loom_clear_error(void);

#ifdef __cplusplus
}
#endif
#endif
