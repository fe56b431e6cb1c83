/* libFuzzer target: Loom's one JSON reader (core/json_read.h) and the platform-file reader over
 * it (loom_sched_platform_parse), on arbitrary bytes given exactly as long as they are (no NUL
 * after them: ASan sees any read past the end). A parsed tree must lie inside the text, its
 * integers must be exact and agree with their doubles, and its strings must hold no NUL. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json_read.h"
#include "loom/sched.h"

static void check(int ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "fuzz_json: %s\n", what);
    abort();
  }
}

static void walk(const loom__jr_value *v, size_t size, int depth) {
  check(depth <= LOOM__JR_MAX_DEPTH, "a tree deeper than the limit");
  check(v->at <= size && v->count <= size - v->at, "a value outside the text");
  if (v->type == LOOM__JR_NUMBER && v->is_int)
    check(fabs((double)v->integer - v->number) <= fabs(v->number) * 1e-15,
          "an integer that is not its double");
  if (v->type == LOOM__JR_STRING) check(v->string != NULL, "a string without its text");
  for (int32_t i = 0; i < v->n; i++) {
    if (v->type == LOOM__JR_OBJECT) check(v->keys[i] != NULL, "a member without its name");
    walk(&v->items[i], size, depth + 1);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  loom__jr_value v;
  char why[200];
  size_t at = 0;
  if (loom__jr_parse_at((const char *)data, size, &v, why, sizeof why, &at) == 0) {
    walk(&v, size, 1);
    loom__jr_free(&v);
  } else {
    check(why[0] != '\0' && at <= size, "a failure without its reason or place");
    check(v.type == LOOM__JR_NULL && v.n == 0 && !v.items && !v.string, "a failed parse leaves a tree");
  }
  loom_sched_platform *p = NULL;
  if (loom_sched_platform_parse((const char *)data, size, "fuzz.json", &p) == LOOM_OK)
    loom_sched_platform_destroy(p);
  else
    check(p == NULL, "a failed platform parse returns a platform");
  return 0;
}
