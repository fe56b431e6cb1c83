/* Loom's one JSON reader: the scheduler's platform, model and stage-history files, loom-bench
 * compare's reports and .safetensors headers are all read through it, the whole document into a
 * tree. The text is untrusted input (a safetensors header comes from whoever wrote the file),
 * so the reader is strict RFC 8259 and never reads outside text[0..len): no terminating NUL is
 * needed and none is looked for. Integers are kept exactly (int64) beside their double value;
 * strings may hold every escape, surrogate pairs included, but no NUL (names are C strings).
 * Not thread-hostile: no global state. */
#ifndef LOOM_INTERNAL_JSON_READ_H
#define LOOM_INTERNAL_JSON_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Nesting deeper than this is refused (the recursion is bounded by it). */
#define LOOM__JR_MAX_DEPTH 64
/* Values in one document past this are refused: a tree holds ~64 bytes per value, so 100 MB of
 * "[0,0,0,..." could otherwise ask for gigabytes. */
#define LOOM__JR_MAX_VALUES ((int64_t)1 << 22)
/* The largest file loom__jr_read_text accepts by default: Loom's JSON files are kilobytes. */
#define LOOM__JR_FILE_MAX ((size_t)64 << 20)

typedef enum loom__jr_type {
  LOOM__JR_NULL,
  LOOM__JR_BOOL,
  LOOM__JR_NUMBER,
  LOOM__JR_STRING,
  LOOM__JR_ARRAY,
  LOOM__JR_OBJECT
} loom__jr_type;

typedef struct loom__jr_value {
  loom__jr_type type;
  bool is_int;     /* a NUMBER written as an integer that fits int64: `integer` is exact */
  int32_t n;       /* items of an array or members of an object */
  double number;   /* LOOM__JR_NUMBER (rounded, as strtod), and LOOM__JR_BOOL as 0 or 1 */
  int64_t integer; /* when is_int */
  char *string;    /* LOOM__JR_STRING, unescaped, NUL-terminated */
  struct loom__jr_value *items;
  char **keys;      /* LOOM__JR_OBJECT: the members' names, in the text's order */
  size_t at, count; /* where the value's text starts and how many bytes it spans */
} loom__jr_value;

/* Parses text[0..len) into *out (freed with loom__jr_free; cleared on failure, so freeing it is
 * always safe). Returns 0, or 1 with what went wrong in why ("expected ':'", "bad number") and
 * its byte offset in *at (either may be NULL/0-sized). Reads nothing outside text[0..len). */
int loom__jr_parse_at(const char *text, size_t len, loom__jr_value *out, char *why, size_t why_size,
                      size_t *at);
/* As loom__jr_parse_at, the offset written into why: "at byte 12: expected ':'". */
int loom__jr_parse(const char *text, size_t len, loom__jr_value *out, char *why, size_t why_size);
/* Frees what a parse put in *v and clears it. Accepts NULL. */
void loom__jr_free(loom__jr_value *v);

/* Reads the file at `path` whole into fresh storage (*out_text, free(); NUL-terminated for the
 * caller's convenience, *out_len bytes before the NUL), refusing files over max_bytes (0: use
 * LOOM__JR_FILE_MAX) after reading at most one byte more, so /dev/zero or a runaway pipe fails
 * quickly. Returns 0; or 1 with the reason in why and the errno of a failed open or read in
 * *out_errno (0 for a file too large or out of memory). */
int loom__jr_read_text(const char *path, size_t max_bytes, char **out_text, size_t *out_len, char *why,
                       size_t why_size, int *out_errno);
/* loom__jr_read_text then loom__jr_parse: 0, or 1 with why and *out_errno as they say. */
int loom__jr_load(const char *path, size_t max_bytes, loom__jr_value *out, char *why, size_t why_size,
                  int *out_errno);

/* The member `key` of an object (the first, if the text repeats it), or NULL (also when v is not
 * an object). */
const loom__jr_value *loom__jr_get(const loom__jr_value *v, const char *key);
/* The member's string, or "" when it is missing or not a string. */
const char *loom__jr_string(const loom__jr_value *v, const char *key);
/* The member's number, or `otherwise` when it is missing or not a number. */
double loom__jr_number(const loom__jr_value *v, const char *key, double otherwise);
/* True with *out set when v is a number written as an integer that fits int64. */
bool loom__jr_int64(const loom__jr_value *v, int64_t *out);

#endif
