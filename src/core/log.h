/* The library's own log (loom/log.h): one line per event on stderr, or to the handler set. */
#ifndef LOOM_CORE_LOG_H
#define LOOM_CORE_LOG_H

#include <stdbool.h>

#include "core/core.h"
#include "loom/log.h"

/* Whether an event at `level` would be written: a caller that must work to build a message
 * (read a build log) asks first. */
bool loom__log_enabled(loom_log_level level);

/* Writes "loom: LEVEL: message" when `level` is at or under the level in force. Newlines in
 * the message become "; ", so an event stays one line. Messages longer than 4 KiB are cut. */
void loom__log(loom_log_level level, const char *fmt, ...) LOOM_PRINTF(2, 3);

#endif
