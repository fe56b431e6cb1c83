/* A small JSON reader for loom-bench compare: the whole document into a tree. Loom's own
 * json.h only writes; the reports compare reads are Loom's, so no more than RFC 8259 is
 * needed (numbers as doubles, \uXXXX escapes of the Basic Multilingual Plane). */
#ifndef LOOM_BENCH_JSON_READ_H
#define LOOM_BENCH_JSON_READ_H

#include <stddef.h>
#include <stdint.h>

typedef enum jr_type { JR_NULL, JR_BOOL, JR_NUMBER, JR_STRING, JR_ARRAY, JR_OBJECT } jr_type;

typedef struct jr_value {
  jr_type type;
  double number; /* JR_NUMBER, and JR_BOOL as 0 or 1 */
  char *string;  /* JR_STRING */
  int32_t n;     /* items of an array or members of an object */
  struct jr_value *items;
  char **keys; /* JR_OBJECT: the members' names */
} jr_value;

/* Parses text[0..len) into *out (freed with jr_free). 1 on a syntax error, with where and what
 * in why. */
int jr_parse(const char *text, size_t len, jr_value *out, char *why, size_t why_size);
void jr_free(jr_value *v);

/* The member `key` of an object, or NULL (also when v is not an object). */
const jr_value *jr_get(const jr_value *v, const char *key);
/* The member's string, or "" when it is missing or not a string. */
const char *jr_string(const jr_value *v, const char *key);
/* The member's number, or `otherwise` when it is missing or not a number. */
double jr_number(const jr_value *v, const char *key, double otherwise);

#endif
