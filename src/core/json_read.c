/* The JSON reader of core/json_read.h: recursive descent over text[0..len), every look at a
 * byte guarded by the end, so a buffer with no NUL after it (a mapped header, a fuzzer's
 * input) is never read past. */
#include "core/json_read.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct reader {
  const char *start, *p, *end;
  char *why;
  size_t why_size;
  int depth;
  int64_t values;
  bool failed;
} reader;

static int fail(reader *r, const char *what) {
  if (!r->failed && r->why_size) snprintf(r->why, r->why_size, "%s", what);
  r->failed = true;
  return 1;
}

static void skip_space(reader *r) {
  while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r')) r->p++;
}

static bool literal(reader *r, const char *word) {
  size_t n = strlen(word);
  if ((size_t)(r->end - r->p) < n || memcmp(r->p, word, n)) return false;
  r->p += n;
  return true;
}

static int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Four hex digits at r->p (bounded by the end): false when they are not there. */
static bool hex4(reader *r, unsigned *out) {
  if (r->end - r->p < 4) return false;
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    int h = hex_digit(r->p[i]);
    if (h < 0) return false;
    v = v << 4 | (unsigned)h;
  }
  r->p += 4;
  *out = v;
  return true;
}

static size_t put_utf8(char *o, unsigned cp) {
  if (cp < 0x80) {
    o[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    o[0] = (char)(0xC0 | cp >> 6);
    o[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    o[0] = (char)(0xE0 | cp >> 12);
    o[1] = (char)(0x80 | (cp >> 6 & 0x3F));
    o[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  o[0] = (char)(0xF0 | cp >> 18);
  o[1] = (char)(0x80 | (cp >> 12 & 0x3F));
  o[2] = (char)(0x80 | (cp >> 6 & 0x3F));
  o[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/* The code point of a "\u" escape (r->p just after the 'u'), a surrogate pair joined. */
static int unicode_escape(reader *r, unsigned *cp) {
  if (!hex4(r, cp)) return fail(r, "bad escape in a string");
  if (*cp >= 0xDC00 && *cp < 0xE000) return fail(r, "unpaired surrogate in a string");
  if (*cp >= 0xD800 && *cp < 0xDC00) {
    unsigned lo = 0;
    if (r->end - r->p < 6 || r->p[0] != '\\' || r->p[1] != 'u')
      return fail(r, "unpaired surrogate in a string");
    r->p += 2;
    if (!hex4(r, &lo) || lo < 0xDC00 || lo > 0xDFFF) return fail(r, "unpaired surrogate in a string");
    *cp = 0x10000 + ((*cp - 0xD800) << 10) + (lo - 0xDC00);
  }
  if (*cp == 0) return fail(r, "NUL character (\\u0000) in a string");
  return 0;
}

/* One character of a string at r->p (not the closing quote) appended to o; its length in *n. */
static int string_char(reader *r, char *o, size_t *n) {
  unsigned char c = (unsigned char)*r->p++;
  if (c < 0x20) return fail(r, "control character in a string");
  if (c != '\\') {
    o[0] = (char)c;
    *n = 1;
    return 0;
  }
  char e = r->p < r->end ? *r->p++ : '\0';
  const char *from = "\"\\/bfnrt", *k = e ? strchr(from, e) : NULL;
  if (k) {
    o[0] = "\"\\/\b\f\n\r\t"[k - from];
    *n = 1;
    return 0;
  }
  unsigned cp = 0;
  if (e != 'u') return fail(r, "bad escape in a string");
  if (unicode_escape(r, &cp)) return 1;
  *n = put_utf8(o, cp);
  return 0;
}

static int parse_string(reader *r, char **out) {
  if (r->p >= r->end || *r->p != '"') return fail(r, "expected a string");
  r->p++;
  /* Sized by the escaped text up to the closing quote: unescaping never lengthens ("\uXXXX",
   * 6 bytes, gives at most 3; a pair, 12, gives 4). */
  const char *q = r->p;
  while (q < r->end && *q != '"') q += *q == '\\' && q + 1 < r->end ? 2 : 1;
  if (q >= r->end) return fail(r, "unterminated string");
  char *s = malloc((size_t)(q - r->p) + 1);
  if (!s) return fail(r, "out of memory");
  size_t n = 0;
  while (r->p < q) {
    size_t k = 0;
    if (string_char(r, s + n, &k)) {
      free(s);
      return 1;
    }
    n += k;
  }
  s[n] = '\0';
  r->p = q + 1;
  *out = s;
  return 0;
}

static const char *digits(const char *q, const char *end) {
  while (q < end && *q >= '0' && *q <= '9') q++;
  return q;
}

/* The extent of a number at r->p by RFC 8259's grammar; NULL when there is none. */
static const char *number_end(const reader *r, bool *is_int) {
  const char *q = r->p;
  if (q < r->end && *q == '-') q++;
  if (q >= r->end || *q < '0' || *q > '9') return NULL;
  q = *q == '0' ? q + 1 : digits(q, r->end);
  *is_int = true;
  if (q < r->end && *q == '.') {
    if (q + 1 >= r->end || q[1] < '0' || q[1] > '9') return NULL;
    q = digits(q + 1, r->end);
    *is_int = false;
  }
  if (q < r->end && (*q == 'e' || *q == 'E')) {
    q++;
    if (q < r->end && (*q == '+' || *q == '-')) q++;
    if (q >= r->end || *q < '0' || *q > '9') return NULL;
    q = digits(q, r->end);
    *is_int = false;
  }
  return q;
}

/* An integer's exact value when it fits int64 (the magnitude of INT64_MIN included). */
static bool exact_int64(const char *p, const char *end, int64_t *out) {
  bool neg = *p == '-';
  uint64_t m = 0, limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
  for (p += neg; p < end; p++) {
    uint64_t d = (uint64_t)(*p - '0');
    if (m > (limit - d) / 10) return false;
    m = m * 10 + d;
  }
  *out = neg ? (int64_t)(0 - m) : (int64_t)m;
  return true;
}

static int parse_number(reader *r, loom__jr_value *v) {
  bool is_int = false;
  const char *end = number_end(r, &is_int);
  if (!end)
    return fail(r, r->p < r->end && (*r->p == '-' || (*r->p >= '0' && *r->p <= '9')) ? "bad number"
                                                                                     : "expected a value");
  size_t n = (size_t)(end - r->p);
  /* strtod needs a NUL after the number, which the text need not have: a bounded copy. */
  char small[64], *copy = n < sizeof small ? small : malloc(n + 1);
  if (!copy) return fail(r, "out of memory");
  memcpy(copy, r->p, n);
  copy[n] = '\0';
  v->type = LOOM__JR_NUMBER;
  v->number = strtod(copy, NULL);
  if (copy != small) free(copy);
  v->is_int = is_int && exact_int64(r->p, end, &v->integer);
  r->p = end;
  return 0;
}

static int parse_value(reader *r, loom__jr_value *v);

static int grow(reader *r, loom__jr_value *v, int32_t *cap, bool object) {
  if (v->n < *cap) return 0;
  if (*cap > INT32_MAX / 2) return fail(r, "too many items");
  int32_t want = *cap ? 2 * *cap : 8;
  loom__jr_value *items = realloc(v->items, (size_t)want * sizeof *items);
  if (items) v->items = items;
  char **keys = object ? realloc(v->keys, (size_t)want * sizeof *keys) : NULL;
  if (keys) v->keys = keys;
  if (!items || (object && !keys)) return fail(r, "out of memory");
  *cap = want;
  return 0;
}

/* One member's name and ':' into v->keys[v->n]. */
static int parse_member_name(reader *r, loom__jr_value *v) {
  skip_space(r);
  if (parse_string(r, &v->keys[v->n])) return 1;
  skip_space(r);
  if (r->p >= r->end || *r->p != ':') {
    free(v->keys[v->n]);
    return fail(r, "expected ':'");
  }
  r->p++;
  return 0;
}

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
    if (grow(r, v, &cap, object)) return 1;
    memset(&v->items[v->n], 0, sizeof v->items[0]);
    if (object && parse_member_name(r, v)) return 1;
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
    return fail(r, object ? "expected ',' or '}'" : "expected ',' or ']'");
  }
}

static int parse_value(reader *r, loom__jr_value *v) {
  memset(v, 0, sizeof *v);
  skip_space(r);
  v->at = (size_t)(r->p - r->start);
  if (r->p >= r->end) return fail(r, "expected a value");
  if (++r->values > LOOM__JR_MAX_VALUES) return fail(r, "more values than the reader takes (4194304)");
  if (++r->depth > LOOM__JR_MAX_DEPTH) return fail(r, "nested more than 64 deep");
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
    v->number = c == 't';
  } else {
    rc = parse_number(r, v);
  }
  v->count = (size_t)(r->p - r->start) - v->at;
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

int loom__jr_parse_at(const char *text, size_t len, loom__jr_value *out, char *why, size_t why_size,
                      size_t *at) {
  reader r = {text, text, text + len, why, why_size, 0, 0, false};
  if (why_size) why[0] = '\0';
  if (!text) r.end = r.p = r.start = "";
  int rc = parse_value(&r, out);
  skip_space(&r);
  if (!rc && r.p != r.end)
    rc = fail(&r, out->type == LOOM__JR_OBJECT  ? "text after the closing '}'"
                  : out->type == LOOM__JR_ARRAY ? "text after the closing ']'"
                                                : "text after the value");
  if (at) *at = (size_t)(r.p - r.start);
  if (rc) loom__jr_free(out);
  return rc;
}

int loom__jr_parse(const char *text, size_t len, loom__jr_value *out, char *why, size_t why_size) {
  char what[200];
  size_t at = 0;
  int rc = loom__jr_parse_at(text, len, out, what, sizeof what, &at);
  if (rc && why_size) snprintf(why, why_size, "at byte %zu: %s", at, what);
  return rc;
}

int loom__jr_read_text(const char *path, size_t max_bytes, char **out_text, size_t *out_len, char *why,
                       size_t why_size, int *out_errno) {
  *out_text = NULL;
  *out_len = 0;
  *out_errno = 0;
  if (max_bytes == 0) max_bytes = LOOM__JR_FILE_MAX;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *out_errno = errno;
    snprintf(why, why_size, "%s", strerror(errno));
    return 1;
  }
  size_t cap = 4096, len = 0;
  char *buf = malloc(cap);
  /* Read until the end or one byte past the cap, whatever the file's kind (a regular file, a
   * pipe, /dev/zero): its size is not trusted. */
  while (buf && len <= max_bytes) {
    if (len + 1 >= cap) {
      char *grown = realloc(buf, cap * 2);
      if (!grown) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = grown, cap *= 2;
    }
    ssize_t got = read(fd, buf + len, cap - 1 - len);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) *out_errno = errno;
    if (got <= 0) break;
    len += (size_t)got;
  }
  close(fd);
  int rc = 1;
  if (!buf)
    snprintf(why, why_size, "out of memory reading it");
  else if (*out_errno)
    snprintf(why, why_size, "%s", strerror(*out_errno));
  else if (len > max_bytes)
    snprintf(why, why_size, "larger than %zu bytes, more than a JSON file of Loom's may be", max_bytes);
  else
    rc = 0;
  if (rc) {
    free(buf);
    return rc;
  }
  buf[len] = '\0';
  *out_text = buf;
  *out_len = len;
  return 0;
}

int loom__jr_load(const char *path, size_t max_bytes, loom__jr_value *out, char *why, size_t why_size,
                  int *out_errno) {
  memset(out, 0, sizeof *out);
  char *text = NULL;
  size_t len = 0;
  if (loom__jr_read_text(path, max_bytes, &text, &len, why, why_size, out_errno)) return 1;
  int rc = loom__jr_parse(text, len, out, why, why_size);
  free(text);
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

bool loom__jr_int64(const loom__jr_value *v, int64_t *out) {
  if (!v || v->type != LOOM__JR_NUMBER || !v->is_int) return false;
  *out = v->integer;
  return true;
}
