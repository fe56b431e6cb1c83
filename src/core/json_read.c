/* The JSON reader of core/json_read.h: recursive descent over the text. */
#include "core/json_read.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct reader {
  const char *p, *end, *start;
  char *why;
  size_t why_size;
  int depth;
} reader;

static int fail(reader *r, const char *what) {
  if (r->why[0] == '\0') snprintf(r->why, r->why_size, "at byte %zu: %s", (size_t)(r->p - r->start), what);
  return 1;
}

static void skip_space(reader *r) {
  while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r')) r->p++;
}

static bool literal(reader *r, const char *word) {
  size_t n = strlen(word);
  if ((size_t)(r->end - r->p) < n || strncmp(r->p, word, n)) return false;
  r->p += n;
  return true;
}

/* Appends the UTF-8 of code point c (< 0x10000) to out. */
static char *put_utf8(char *out, unsigned c) {
  if (c < 0x80) {
    *out++ = (char)c;
  } else if (c < 0x800) {
    *out++ = (char)(0xc0 | (c >> 6));
    *out++ = (char)(0x80 | (c & 0x3f));
  } else {
    *out++ = (char)(0xe0 | (c >> 12));
    *out++ = (char)(0x80 | ((c >> 6) & 0x3f));
    *out++ = (char)(0x80 | (c & 0x3f));
  }
  return out;
}

static int parse_string(reader *r, char **out) {
  r->p++; /* the opening quote */
  const char *q = r->p;
  while (q < r->end && *q != '"') q += *q == '\\' ? 2 : 1;
  if (q >= r->end) return fail(r, "a string without its closing quote");
  char *s = malloc((size_t)(q - r->p) + 1), *o = s;
  if (!s) return fail(r, "out of memory");
  while (r->p < q) {
    char ch = *r->p++;
    if (ch != '\\') {
      *o++ = ch;
      continue;
    }
    ch = *r->p++;
    const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t", *k = strchr(from, ch);
    unsigned c = 0;
    if (ch && k) {
      *o++ = to[k - from];
    } else if (ch == 'u' && q - r->p >= 4 && sscanf(r->p, "%4x", &c) == 1) {
      o = put_utf8(o, c);
      r->p += 4;
    } else {
      free(s);
      return fail(r, "a bad escape in a string");
    }
  }
  *o = '\0';
  r->p = q + 1;
  *out = s;
  return 0;
}

static int parse_value(reader *r, loom__jr_value *v);

/* Items of an array (keys NULL) or members of an object, up to `close`. */
static int parse_items(reader *r, loom__jr_value *v, char close) {
  bool object = close == '}';
  int32_t cap = 0;
  r->p++;
  skip_space(r);
  if (r->p < r->end && *r->p == close) {
    r->p++;
    return 0;
  }
  for (;;) {
    if (v->n == cap) {
      cap = cap ? 2 * cap : 8;
      loom__jr_value *items = realloc(v->items, (size_t)cap * sizeof *items);
      char **keys = object ? realloc(v->keys, (size_t)cap * sizeof *keys) : NULL;
      if (items) v->items = items;
      if (keys) v->keys = keys;
      if (!items || (object && !keys)) return fail(r, "out of memory");
    }
    memset(&v->items[v->n], 0, sizeof v->items[0]);
    if (object) {
      skip_space(r);
      if (r->p >= r->end || *r->p != '"') return fail(r, "an object member without a name");
      if (parse_string(r, &v->keys[v->n])) return 1;
      skip_space(r);
      if (r->p >= r->end || *r->p++ != ':') {
        free(v->keys[v->n]);
        return fail(r, "no ':' after a member's name");
      }
    }
    v->n++;
    if (parse_value(r, &v->items[v->n - 1])) return 1;
    skip_space(r);
    if (r->p < r->end && *r->p == ',') {
      r->p++;
      continue;
    }
    if (r->p < r->end && *r->p == close) {
      r->p++;
      return 0;
    }
    return fail(r, object ? "no ',' or '}' after a member" : "no ',' or ']' after an item");
  }
}

static int parse_value(reader *r, loom__jr_value *v) {
  memset(v, 0, sizeof *v);
  skip_space(r);
  if (r->p >= r->end) return fail(r, "the text ends where a value should be");
  if (++r->depth > 64) return fail(r, "nested deeper than 64");
  int rc = 0;
  char c = *r->p;
  if (c == '{' || c == '[') {
    v->type = c == '{' ? LOOM__JR_OBJECT : LOOM__JR_ARRAY;
    rc = parse_items(r, v, c == '{' ? '}' : ']');
  } else if (c == '"') {
    v->type = LOOM__JR_STRING;
    rc = parse_string(r, &v->string);
  } else if (literal(r, "null")) {
    v->type = LOOM__JR_NULL;
  } else if (literal(r, "true") || literal(r, "false")) {
    v->type = LOOM__JR_BOOL;
    v->number = r->p[-1] == 'e' && r->p[-2] == 'u';
  } else {
    char *end = NULL;
    v->type = LOOM__JR_NUMBER;
    v->number = strtod(r->p, &end);
    if (end == r->p || (c != '-' && (c < '0' || c > '9'))) rc = fail(r, "not a JSON value");
    r->p = end == r->p ? r->p : end;
  }
  r->depth--;
  return rc;
}

void loom__jr_free(loom__jr_value *v) {
  if (!v) return;
  for (int32_t i = 0; i < v->n; i++) {
    loom__jr_free(&v->items[i]);
    if (v->keys) free(v->keys[i]);
  }
  free(v->items);
  free(v->keys);
  free(v->string);
  memset(v, 0, sizeof *v);
}

int loom__jr_parse(const char *text, size_t len, loom__jr_value *out, char *why, size_t why_size) {
  reader r = {text, text + len, text, why, why_size, 0};
  why[0] = '\0';
  int rc = parse_value(&r, out);
  skip_space(&r);
  if (!rc && r.p != r.end) rc = fail(&r, "more after the value");
  if (rc) loom__jr_free(out);
  return rc;
}

const loom__jr_value *loom__jr_get(const loom__jr_value *v, const char *key) {
  if (!v || v->type != LOOM__JR_OBJECT) return NULL;
  for (int32_t i = 0; i < v->n; i++)
    if (!strcmp(v->keys[i], key)) return &v->items[i];
  return NULL;
}

const char *loom__jr_string(const loom__jr_value *v, const char *key) {
  const loom__jr_value *m = loom__jr_get(v, key);
  return m && m->type == LOOM__JR_STRING ? m->string : "";
}

double loom__jr_number(const loom__jr_value *v, const char *key, double otherwise) {
  const loom__jr_value *m = loom__jr_get(v, key);
  return m && m->type == LOOM__JR_NUMBER ? m->number : otherwise;
}
