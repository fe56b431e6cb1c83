/* NOT STABLE API: an internal header, for Loom's own tools; it may change in any release and
 * is not installed. The symbols are in the static library (hidden in the shared one).
 *
 * Why it exists: the tools' machine-readable output (loom-info --json, loom-plan --json,
 * loom-run --stats-json, loom-bench --json) is written by the same JSON writer as the
 * library's own documents (loom_mem_stats_json), so escaping and number formatting agree
 * everywhere, and loom-run embeds the memory manager's counters in its document with the
 * library's own code. A JSON writer is no part of what Loom offers its users.
 *
The writer: a tiny streaming JSON writer for the tools' machine-readable output (loom-info --json,
 * loom-plan --json, loom-run --stats-json).
 *
 * The writer tracks nesting and commas, so a caller writes values in order:
 *
 *   loom__json j;
 *   loom__json_init(&j, stdout, true);
 *   loom__json_begin_object(&j);
 *   loom__json_key(&j, "devices");
 *   loom__json_begin_array(&j);
 *   ...
 *   loom__json_end_array(&j);
 *   loom__json_kv_int64(&j, "peak_bytes", peak);
 *   loom__json_end_object(&j);
 *   if (loom__json_finish(&j) != LOOM_OK) ...
 *
 * Strings are escaped per RFC 8259 (quotes, backslash, control characters; bytes >= 0x80 are
 * passed through, so UTF-8 stays UTF-8). A NULL string writes null; a non-finite double
 * writes null (JSON has no NaN or Inf). Misuse (a value where a key is due, unbalanced
 * ends, nesting deeper than LOOM__JSON_MAX_DEPTH) is a bug in the caller: it is remembered
 * and reported by loom__json_finish, and nothing more is written after it.
 */
#ifndef LOOM_INTERNAL_JSON_H
#define LOOM_INTERNAL_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "loom/status.h"

#define LOOM__JSON_MAX_DEPTH 32

typedef struct loom__json {
  FILE *out;
  bool pretty;    /* newlines and two-space indents */
  bool misuse;    /* a call out of order; see loom__json_finish */
  bool after_key; /* a key was written, its value is due */
  int32_t depth;
  /* Per open level: 'o' object or 'a' array, and whether it holds an item yet. */
  char kind[LOOM__JSON_MAX_DEPTH];
  bool has_items[LOOM__JSON_MAX_DEPTH];
} loom__json;

/* Starts a document written to `out` (not owned). */
void loom__json_init(loom__json *j, FILE *out, bool pretty);

void loom__json_begin_object(loom__json *j);
void loom__json_end_object(loom__json *j);
void loom__json_begin_array(loom__json *j);
void loom__json_end_array(loom__json *j);
/* The key of the next member; only inside an object. */
void loom__json_key(loom__json *j, const char *key);

void loom__json_string(loom__json *j, const char *s);
/* Writes the first `len` bytes of s as a string (NUL bytes are escaped). */
void loom__json_string_n(loom__json *j, const char *s, size_t len);
void loom__json_int64(loom__json *j, int64_t v);
void loom__json_double(loom__json *j, double v);
void loom__json_bool(loom__json *j, bool v);
void loom__json_null(loom__json *j);

/* key + value in one call. */
void loom__json_kv_string(loom__json *j, const char *key, const char *s);
void loom__json_kv_int64(loom__json *j, const char *key, int64_t v);
void loom__json_kv_double(loom__json *j, const char *key, double v);
void loom__json_kv_bool(loom__json *j, const char *key, bool v);
void loom__json_kv_null(loom__json *j, const char *key);

/* Ends the document with a newline when pretty. Returns INTERNAL when the calls were out of
 * order or the document is not closed, IO when writing failed (ferror), else LOOM_OK. */
loom_status loom__json_finish(loom__json *j);

/* Writes every node's counters of a memory manager as one object value ({"nodes": [...]}),
 * the same document loom_mem_stats_json writes on its own, into a document being written
 * (loom-run --stats-json's "memory" member). Defined by the memory manager (src/hmm). */
struct loom_mem_manager;
void loom__hmm_stats_write(const struct loom_mem_manager *m, loom__json *j);

#endif
