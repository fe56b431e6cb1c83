/* The JSON writer (src/core/json.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/json.h"
#include "harness.h"

/* Runs `write` into a memory stream and returns the text (caller frees). */
static char *capture(void (*write)(loom__json *), bool pretty, loom_status *out_status) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  loom__json j;
  loom__json_init(&j, f, pretty);
  write(&j);
  *out_status = loom__json_finish(&j);
  fclose(f);
  return buf;
}

static void write_mixed(loom__json *j) {
  loom__json_begin_object(j);
  loom__json_kv_string(j, "name", "a \"quoted\"\\ line\n\ttab \x01 end");
  loom__json_kv_int64(j, "big", INT64_MIN);
  loom__json_kv_double(j, "half", 0.5);
  loom__json_kv_double(j, "whole", 3.0);
  loom__json_kv_double(j, "nan", NAN);
  loom__json_kv_bool(j, "yes", true);
  loom__json_kv_string(j, "none", NULL);
  loom__json_key(j, "list");
  loom__json_begin_array(j);
  loom__json_int64(j, 1);
  loom__json_begin_object(j);
  loom__json_end_object(j);
  loom__json_begin_array(j);
  loom__json_end_array(j);
  loom__json_string(j, "\xc3\xa9"); /* UTF-8 passes through */
  loom__json_end_array(j);
  loom__json_end_object(j);
}

TEST(json_compact_escapes_and_types) {
  loom_status s;
  char *text = capture(write_mixed, false, &s);
  ASSERT_OK(s);
  ASSERT_STREQ(text,
               "{\"name\":\"a \\\"quoted\\\"\\\\ line\\n\\ttab \\u0001 end\",\"big\":-9223372036854775808,"
               "\"half\":0.5,\"whole\":3.0,\"nan\":null,\"yes\":true,\"none\":null,"
               "\"list\":[1,{},[],\"\xc3\xa9\"]}");
  free(text);
}

TEST(json_pretty_indents) {
  loom_status s;
  char *text = capture(write_mixed, true, &s);
  ASSERT_OK(s);
  ASSERT_CONTAINS(text, "{\n  \"name\": ");
  ASSERT_CONTAINS(text, "\"list\": [\n    1,\n    {},\n    [],\n    \"\xc3\xa9\"\n  ]\n}\n");
  free(text);
}

static void write_value_without_key(loom__json *j) {
  loom__json_begin_object(j);
  loom__json_int64(j, 1);
  loom__json_end_object(j);
}

static void write_unclosed(loom__json *j) {
  loom__json_begin_array(j);
  loom__json_int64(j, 1);
}

static void write_key_in_array(loom__json *j) {
  loom__json_begin_array(j);
  loom__json_key(j, "k");
  loom__json_end_array(j);
}

static void write_two_documents(loom__json *j) {
  loom__json_int64(j, 1);
  loom__json_int64(j, 2);
}

static void write_mismatched_end(loom__json *j) {
  loom__json_begin_array(j);
  loom__json_end_object(j);
}

TEST(json_misuse_is_reported) {
  void (*cases[])(loom__json *) = {write_value_without_key, write_unclosed, write_key_in_array,
                                   write_two_documents, write_mismatched_end};
  for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++) {
    loom_status s;
    char *text = capture(cases[i], false, &s);
    free(text);
    ASSERT_EQ(s, LOOM_ERR_INTERNAL);
    ASSERT_CONTAINS(loom_last_error(), "out of order");
  }
}

static void write_deep(loom__json *j) {
  for (int i = 0; i < LOOM__JSON_MAX_DEPTH + 2; i++) loom__json_begin_array(j);
  for (int i = 0; i < LOOM__JSON_MAX_DEPTH + 2; i++) loom__json_end_array(j);
}

TEST(json_too_deep_is_misuse) {
  loom_status s;
  free(capture(write_deep, false, &s));
  ASSERT_EQ(s, LOOM_ERR_INTERNAL);
}

static void write_string_n(loom__json *j) {
  loom__json_string_n(j, "a\0b", 3);
}

TEST(json_string_n_escapes_nul) {
  loom_status s;
  char *text = capture(write_string_n, false, &s);
  ASSERT_OK(s);
  ASSERT_STREQ(text, "\"a\\u0000b\"");
  free(text);
}
