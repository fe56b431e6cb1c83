/* A small JSON reader, for the scheduler's platform and model files and loom-bench compare's
 * reports: the whole document into a tree. Loom's own json.h only writes; the files read are small and Loom's
 * own formats, so no more than RFC 8259 is needed (numbers as doubles, \uXXXX escapes of the Basic
 * Multilingual Plane). */
#ifndef LOOM_INTERNAL_JSON_READ_H
#define LOOM_INTERNAL_JSON_READ_H

#include <stddef.h>
#include <stdint.h>

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
  double number; /* LOOM__JR_NUMBER, and LOOM__JR_BOOL as 0 or 1 */
  char *string;  /* LOOM__JR_STRING */
  int32_t n;     /* items of an array or members of an object */
  struct loom__jr_value *items;
  char **keys; /* LOOM__JR_OBJECT: the members' names */
} loom__jr_value;

/* Parses text[0..len) into *out (freed with loom__jr_free). 1 on a syntax error, with where and what
 * in why. */
int loom__jr_parse(const char *text, size_t len, loom__jr_value *out, char *why, size_t why_size);
void loom__jr_free(loom__jr_value *v);

/* The member `key` of an object, or NULL (also when v is not an object). */
const loom__jr_value *loom__jr_get(const loom__jr_value *v, const char *key);
/* The member's string, or "" when it is missing or not a string. */
const char *loom__jr_string(const loom__jr_value *v, const char *key);
/* The member's number, or `otherwise` when it is missing or not a number. */
double loom__jr_number(const loom__jr_value *v, const char *key, double otherwise);

#endif
