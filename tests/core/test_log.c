/* LOOM_LOG's log (loom/log.h): levels, one line per event, the handler. */
#include "core/log.h"
#include "harness.h"

typedef struct captured {
  int n;
  loom_log_level level;
  char line[512];
} captured;

static void capture(loom_log_level level, const char *line, void *user) {
  captured *c = user;
  c->n++;
  c->level = level;
  snprintf(c->line, sizeof c->line, "%s", line);
}

TEST(events_at_or_under_the_level_only) {
  captured c = {0};
  loom_log_level saved = loom_log_level_get();
  loom_log_handler_set(capture, &c);
  loom_log_level_set(LOOM_LOG_WARN);
  loom__log(LOOM_LOG_INFO, "not shown");
  ASSERT_EQ(c.n, 0);
  loom__log(LOOM_LOG_WARN, "shown %d", 1);
  ASSERT_EQ(c.n, 1);
  ASSERT_EQ(c.level, LOOM_LOG_WARN);
  ASSERT_STREQ(c.line, "shown 1");
  loom_log_level_set(LOOM_LOG_DEBUG);
  ASSERT_TRUE(loom__log_enabled(LOOM_LOG_DEBUG));
  loom__log(LOOM_LOG_DEBUG, "a build log:\nline 1\nline 2\n");
  ASSERT_STREQ(c.line, "a build log:; line 1; line 2"); /* one event, one line */
  loom_log_level_set((loom_log_level)99);
  ASSERT_EQ(loom_log_level_get(), LOOM_LOG_DEBUG); /* clamped */
  loom_log_handler_set(NULL, NULL);
  loom_log_level_set(saved);
}

TEST(level_names_parse_with_a_suggestion) {
  loom_log_level l = LOOM_LOG_ERROR;
  ASSERT_OK(loom_log_level_parse("info", &l));
  ASSERT_EQ(l, LOOM_LOG_INFO);
  ASSERT_STATUS(loom_log_level_parse("wran", &l), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "did you mean 'warn'?");
  ASSERT_STREQ(loom_log_level_name(LOOM_LOG_DEBUG), "debug");
  ASSERT_STREQ(loom_log_level_name((loom_log_level)7), "?");
}

TEST(version_and_commit) {
  char want[32];
  snprintf(want, sizeof want, "%d.%d.%d", LOOM_VERSION_MAJOR, LOOM_VERSION_MINOR, LOOM_VERSION_PATCH);
  ASSERT_STREQ(loom_version(), want);
  ASSERT_TRUE(loom_version_commit() != NULL && loom_version_commit()[0] != '\0');
}
