/* Loom's one JSON reader (core/json_read.h): never past the text's end (a guard page right after
 * it), integers exact to int64, strings with every escape, bounded depth and size, and the
 * platform reader on top of it. */
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/json_read.h"
#include "harness.h"
#include "loom/sched.h"

/* Text placed so that its last byte is the last before a PROT_NONE page: reading one byte
 * further faults. */
typedef struct guarded {
  char *map;
  size_t page;
} guarded;

static const char *guard(guarded *g, const char *text, size_t len) {
  g->page = (size_t)sysconf(_SC_PAGESIZE);
  g->map = mmap(NULL, 2 * g->page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (g->map == MAP_FAILED || mprotect(g->map + g->page, g->page, PROT_NONE) != 0) return NULL;
  char *at = g->map + g->page - len;
  memcpy(at, text, len);
  return at;
}

static void unguard(guarded *g) {
  munmap(g->map, 2 * g->page);
}

/* Parses `text` (no NUL after it) against the guard page: 0 or 1 as the reader says. */
static int parse_guarded(const char *text, loom__jr_value *v, char *why, size_t why_size) {
  guarded g;
  const char *t = guard(&g, text, strlen(text));
  if (!t) return -1;
  int rc = loom__jr_parse(t, strlen(text), v, why, why_size);
  unguard(&g);
  return rc;
}

TEST(json_never_reads_past_the_text) {
  /* each ends where a reader that looks for a NUL or calls strtod/sscanf would read on */
  static const char *const cut[] = {
      "12",   "-",   "1.",     "1e",      "1e+", "-0", "tru", "nul", "\"ab", "\"\\u00", "\"\\ud83d\\ude0",
      "\"\\", "[1,", "{\"a\"", "{\"a\":", "[",   "{",  "  "};
  for (size_t i = 0; i < sizeof cut / sizeof *cut; i++) {
    loom__jr_value v;
    char why[200];
    ASSERT_TRUE(parse_guarded(cut[i], &v, why, sizeof why) >= 0);
    loom__jr_free(&v);
  }
  loom__jr_value v;
  char why[200];
  ASSERT_EQ(parse_guarded("12", &v, why, sizeof why), 0);
  ASSERT_EQ(v.type, LOOM__JR_NUMBER);
  ASSERT_TRUE(v.is_int && v.integer == 12 && v.number == 12.0);
  ASSERT_EQ(parse_guarded("1e", &v, why, sizeof why), 1);
  ASSERT_CONTAINS(why, "at byte 0: bad number");
  /* the case: the platform reader over "12" with the guard page after it */
  guarded g;
  const char *t = guard(&g, "12", 2);
  ASSERT_TRUE(t != NULL);
  loom_sched_platform *p = NULL;
  ASSERT_STATUS(loom_sched_platform_parse(t, 2, "twelve.json", &p), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "twelve.json");
  ASSERT_TRUE(p == NULL);
  unguard(&g);
}

TEST(json_integers_are_exact_to_int64) {
  static const struct {
    const char *text;
    bool is_int;
    int64_t value;
  } cases[] = {
      {"9007199254740993", true, 9007199254740993LL}, /* 2^53 + 1: a double would say ...992 */
      {"9223372036854775807", true, INT64_MAX},
      {"-9223372036854775808", true, INT64_MIN},
      {"-0", true, 0},
      {"9223372036854775808", false, 0}, /* one past: a double only */
      {"1.0", false, 0},
      {"1e3", false, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    loom__jr_value v;
    char why[200];
    ASSERT_EQ(parse_guarded(cases[i].text, &v, why, sizeof why), 0);
    int64_t got = 0;
    ASSERT_EQ(loom__jr_int64(&v, &got), cases[i].is_int);
    if (cases[i].is_int) ASSERT_TRUE(got == cases[i].value);
    ASSERT_EQ(v.number, strtod(cases[i].text, NULL)); /* the double as strtod rounds it */
    loom__jr_free(&v);
  }
}

TEST(json_strings_escapes_and_errors) {
  loom__jr_value v;
  char why[200];
  ASSERT_EQ(parse_guarded("[\"a\\u00e9\\ud83d\\ude00\\n\\\"\"]", &v, why, sizeof why), 0);
  ASSERT_EQ(v.n, 1);
  ASSERT_STREQ(v.items[0].string, "a\xc3\xa9\xf0\x9f\x98\x80\n\"");
  ASSERT_EQ(v.items[0].at, 1);
  loom__jr_free(&v);
  static const struct {
    const char *text, *why;
  } bad[] = {
      {"\"\\ud83d\"", "unpaired surrogate"},
      {"\"\\ude00\"", "unpaired surrogate"},
      {"\"a\\u0000b\"", "NUL character"},
      {"\"a\tb\"", "control character"},
      {"\"\\x\"", "bad escape"},
      {"{\"a\" 1}", "at byte 5: expected ':'"},
      {"[1 2]", "expected ',' or ']'"},
      {"{} x", "text after the closing '}'"},
      {"01", "text after the value"},
      {"+1", "expected a value"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    ASSERT_EQ(parse_guarded(bad[i].text, &v, why, sizeof why), 1);
    ASSERT_CONTAINS(why, bad[i].why);
    ASSERT_TRUE(v.items == NULL && v.string == NULL); /* nothing left to free */
  }
}

TEST(json_depth_is_bounded) {
  char deep[2 * LOOM__JR_MAX_DEPTH + 3];
  for (int d = LOOM__JR_MAX_DEPTH; d <= LOOM__JR_MAX_DEPTH + 1; d++) {
    memset(deep, '[', (size_t)d);
    memset(deep + d, ']', (size_t)d);
    deep[2 * d] = '\0';
    loom__jr_value v;
    char why[200];
    ASSERT_EQ(parse_guarded(deep, &v, why, sizeof why), d > LOOM__JR_MAX_DEPTH);
    if (d > LOOM__JR_MAX_DEPTH) ASSERT_CONTAINS(why, "nested more than 64 deep");
    loom__jr_free(&v);
  }
}

TEST(json_files_are_size_capped) {
  char *text = NULL, why[200];
  size_t len = 0;
  int err = 0;
  /* /dev/zero never ends: read one byte past the cap, then refused */
  ASSERT_EQ(loom__jr_read_text("/dev/zero", 1 << 20, &text, &len, why, sizeof why, &err), 1);
  ASSERT_CONTAINS(why, "larger than 1048576 bytes");
  ASSERT_TRUE(text == NULL && err == 0);
  ASSERT_EQ(loom__jr_read_text("/no/such/file.json", 0, &text, &len, why, sizeof why, &err), 1);
  ASSERT_TRUE(err != 0);
  loom_sched_platform *p = NULL;
  ASSERT_STATUS(loom_sched_platform_load("/dev/zero", &p), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "/dev/zero: larger than");
  ASSERT_STATUS(loom_sched_platform_load("/no/such/platform.json", &p), LOOM_ERR_NOT_FOUND);
}

TEST(json_platform_memory_is_exact) {
  /* 2^53 + 1 bytes: read through a double it would lose its last byte */
  const char *text =
      "{\"devices\":[{\"id\":\"cpu0\",\"kind\":\"cpu\",\"memory\":9007199254740993,\"models\":{}}]}";
  loom_sched_platform *p = NULL;
  ASSERT_OK(loom_sched_platform_parse(text, strlen(text), "exact.json", &p));
  ASSERT_TRUE(loom_sched_platform_device(p, 0)->memory == 9007199254740993LL);
  loom_sched_platform_destroy(p);
}
