/* LOOM_LOG and the library's events (loom/log.h). The level is read from the environment
 * once, lazily, so a program that calls setenv before its first Loom call is obeyed. */
#include "core/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loom/internal/cli.h"

static const char *const level_names[] = {"error", "warn", "info", "debug"};

/* -1: not read yet. */
static _Atomic int current_level = -1;
static _Atomic(loom_log_handler) handler;
static void *_Atomic handler_user;

const char *loom_log_level_name(loom_log_level level) {
  return level >= LOOM_LOG_ERROR && level <= LOOM_LOG_DEBUG ? level_names[level] : "?";
}

loom_status loom_log_level_parse(const char *text, loom_log_level *out) {
  for (int i = 0; text && i < 4; i++) {
    if (strcmp(text, level_names[i]) == 0) {
      if (out) *out = (loom_log_level)i;
      return LOOM_OK;
    }
  }
  const char *near = text ? loom__closest(text, level_names, 4) : NULL;
  return loom__error(LOOM_ERR_INVALID_ARGUMENT, "log level '%s': want error, warn, info or debug%s%s%s",
                     text ? text : "(null)", near ? " (did you mean '" : "", near ? near : "",
                     near ? "'?)" : "");
}

/* Written with one write(2), straight to the descriptor: stdio's buffer would split a line
 * between threads, and a line must reach the terminal before an abort that follows it. */
static void write_line(const char *text) {
  size_t n = strlen(text);
  while (n > 0) {
    ssize_t w = write(STDERR_FILENO, text, n);
    if (w <= 0) return;
    text += w;
    n -= (size_t)w;
  }
}

static int level_from_env(void) {
  const char *env = getenv("LOOM_LOG");
  loom_log_level level = LOOM_LOG_WARN;
  if (env && *env && loom_log_level_parse(env, &level) != LOOM_OK) {
    char line[512];
    snprintf(line, sizeof line, "loom: warn: LOOM_LOG: %s; using warn\n", loom_last_error());
    write_line(line);
    level = LOOM_LOG_WARN;
  }
  return (int)level;
}

loom_log_level loom_log_level_get(void) {
  int level = atomic_load(&current_level);
  if (level < 0) {
    int expected = -1, read = level_from_env();
    /* Two first callers may both read the environment; the first store wins, the same value. */
    atomic_compare_exchange_strong(&current_level, &expected, read);
    level = atomic_load(&current_level);
  }
  return (loom_log_level)level;
}

void loom_log_level_set(loom_log_level level) {
  if (level < LOOM_LOG_ERROR) level = LOOM_LOG_ERROR;
  if (level > LOOM_LOG_DEBUG) level = LOOM_LOG_DEBUG;
  atomic_store(&current_level, (int)level);
}

void loom_log_handler_set(loom_log_handler fn, void *user) {
  atomic_store(&handler_user, user);
  atomic_store(&handler, fn);
}

bool loom__log_enabled(loom_log_level level) {
  return level <= loom_log_level_get();
}

void loom__log(loom_log_level level, const char *fmt, ...) {
  if (!loom__log_enabled(level)) return;
  char msg[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  /* One event, one line: "a\nb\n" -> "a; b". */
  size_t n = strlen(msg);
  while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '\r')) msg[--n] = '\0';
  char flat[4096];
  size_t k = 0;
  for (size_t i = 0; i < n && k + 3 < sizeof flat; i++) {
    if (msg[i] == '\n') {
      flat[k++] = ';';
      flat[k++] = ' ';
    } else if (msg[i] != '\r') {
      flat[k++] = msg[i];
    }
  }
  flat[k] = '\0';
  loom_log_handler fn = atomic_load(&handler);
  if (fn) {
    fn(level, flat, atomic_load(&handler_user));
    return;
  }
  char line[4200];
  snprintf(line, sizeof line, "loom: %s: %s\n", loom_log_level_name(level), flat);
  write_line(line);
}
