/* What the library says on its own: events a user may want to see (an OpenCL program's build
 * messages, a device left out, a cache that could not be written), one line each, on stderr.
 *
 * LOOM_LOG=error|warn|info|debug picks how much (default warn: only what a user should act
 * on). Each line reads "loom: LEVEL: message" and is written with one write(2), so the lines
 * of several threads or MPI ranks never mix. A program that wants the lines elsewhere (its own
 * log) installs a handler. */
#ifndef LOOM_LOG_H
#define LOOM_LOG_H

#include "loom/export.h"
#include "loom/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum loom_log_level {
  LOOM_LOG_ERROR = 0, /* the library is about to stop the process (corrupted state) */
  LOOM_LOG_WARN = 1,  /* something a user should know and may act on */
  LOOM_LOG_INFO = 2,  /* what the library decided and why (devices, limits, builds) */
  LOOM_LOG_DEBUG = 3, /* details for finding a problem (cache hits, each program built) */
} loom_log_level;

/* Receives one event: `line` is the message without level, prefix or newline; valid for the
 * call only. Called from whichever thread logs, possibly several at once. */
typedef void (*loom_log_handler)(loom_log_level level, const char *line, void *user);

/* The level in force: the last loom_log_set_level, else LOOM_LOG's (read once, on the first
 * call of any loom_log_ function or the first event; a value that is none of the four is said
 * on stderr once and warn is used), else LOOM_LOG_WARN. Thread-safe. */
LOOM_API loom_log_level loom_log_level_get(void);

/* Sets the level for the whole process, over LOOM_LOG. A level out of range is clamped to
 * LOOM_LOG_ERROR..LOOM_LOG_DEBUG. Thread-safe. */
LOOM_API void loom_log_level_set(loom_log_level level);

/* Sends every event at or under the level to `handler` instead of stderr; NULL restores
 * stderr. `user` is passed back untouched. Set it before other threads log: events racing
 * the change go to either. */
LOOM_API void loom_log_handler_set(loom_log_handler handler, void *user);

/* "error", "warn", "info", "debug"; "?" for a value out of range. A static string. */
LOOM_API const char *loom_log_level_name(loom_log_level level);

/* Parses "error", "warn", "info" or "debug" into *out. Returns LOOM_OK or
 * LOOM_ERR_INVALID_ARGUMENT with a message naming the text and the closest name. */
LOOM_API loom_status loom_log_level_parse(const char *text, loom_log_level *out);

#ifdef __cplusplus
}
#endif

#endif
