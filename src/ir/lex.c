/* The .lir lexer (see lex.h): bytes to tokens, number literals, located messages. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/lex.h"

/* Longest number literal read (strtod needs a NUL-terminated copy). */
#define LEX_MAX_NUMBER 512

/* ---- messages --------------------------------------------------------------------------- */

static loom_status vfail(const loom__lexer *lx, int32_t line, int32_t col, const char *fmt, va_list ap) {
  char msg[768];
  vsnprintf(msg, sizeof msg, fmt, ap);
  return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s:%d:%d: error: %s", lx->file, (int)line, (int)col, msg);
}

static loom_status fail_at(const loom__lexer *lx, int32_t line, int32_t col, const char *fmt, ...)
    LOOM_PRINTF(4, 5);
static loom_status fail_at(const loom__lexer *lx, int32_t line, int32_t col, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  loom_status s = vfail(lx, line, col, fmt, ap);
  va_end(ap);
  return s;
}

loom_status loom__lex_fail(const loom__lexer *lx, const loom__token *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  loom_status s = vfail(lx, t->line, t->col, fmt, ap);
  va_end(ap);
  return s;
}

loom_status loom__lex_locate(const loom__lexer *lx, const loom__token *t, loom_status s) {
  loom__error_prefix("%s:%d:%d: error: ", lx->file, (int)t->line, (int)t->col);
  return s;
}

const char *loom__lex_describe(const loom__lexer *lx, const loom__token *t, char *buf, size_t size) {
  if (t->kind == LOOM_TOK_EOF) return "end of input";
  if (t->kind == LOOM_TOK_NEWLINE) return "end of line";
  int n = t->len > 40 ? 40 : (int)t->len;
  snprintf(buf, size, "'%.*s%s'", n, lx->text + t->start, t->len > 40 ? "..." : "");
  return buf;
}

#define FAIL(t, ...) fail_at(lx, (t)->line, (t)->col, __VA_ARGS__)
#define DESC(t) loom__lex_describe(lx, (t), desc_buf_, sizeof desc_buf_)
#define DESC2(t) loom__lex_describe(lx, (t), desc_buf2_, sizeof desc_buf2_)
#define DESC_BUF                      \
  char desc_buf_[64], desc_buf2_[64]; \
  (void)desc_buf_;                    \
  (void)desc_buf2_

/* ---- encoding --------------------------------------------------------------------------- */

/* Length of the valid UTF-8 sequence at s[0..n) and its code point, or 0 (RFC 3629: no
 * overlong forms, no surrogates, nothing above U+10FFFF). */
static size_t utf8_decode(const unsigned char *s, size_t n, uint32_t *cp) {
  uint32_t c = s[0], v, min;
  size_t len;
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  if (c >= 0xc2 && c <= 0xdf)
    len = 2, v = c & 0x1f, min = 0x80;
  else if (c >= 0xe0 && c <= 0xef)
    len = 3, v = c & 0x0f, min = 0x800;
  else if (c >= 0xf0 && c <= 0xf4)
    len = 4, v = c & 0x07, min = 0x10000;
  else
    return 0;
  if (n < len) return 0;
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xc0) != 0x80) return 0;
    v = (v << 6) | (s[i] & 0x3f);
  }
  if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return 0;
  *cp = v;
  return len;
}

/* Rejects NUL bytes and invalid UTF-8 anywhere, before the lexer sees the text. */
static loom_status check_encoding(const loom__lexer *lx) {
  const unsigned char *s = (const unsigned char *)lx->text;
  int32_t line = 1;
  size_t line_start = lx->st.pos;
  for (size_t i = lx->st.pos; i < lx->len;) {
    unsigned c = s[i];
    int32_t col = (int32_t)(i - line_start + 1);
    if (c == '\n') {
      line++;
      line_start = ++i;
    } else if (c == 0) {
      return fail_at(lx, line, col, "NUL byte in the text (is this a binary file?)");
    } else if (c < 0x80) {
      i++;
    } else {
      uint32_t cp;
      size_t n = utf8_decode(s + i, lx->len - i, &cp);
      if (!n) return fail_at(lx, line, col, "invalid UTF-8 byte 0x%02x (is this a binary file?)", c);
      i += n;
    }
  }
  return LOOM_OK;
}

/* ---- lexer ------------------------------------------------------------------------------ */

static bool is_alpha(int c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}
static bool is_digit(int c) {
  return c >= '0' && c <= '9';
}
static bool is_alnum(int c) {
  return is_alpha(c) || is_digit(c);
}

/* The byte at i, or -1 past the end. */
static int byte_at(const loom__lexer *lx, size_t i) {
  return i < lx->len ? (unsigned char)lx->text[i] : -1;
}

/* True when the identifier `word` stands alone at i. */
static bool word_at(const loom__lexer *lx, size_t i, const char *word) {
  size_t n = strlen(word);
  return i + n <= lx->len && memcmp(lx->text + i, word, n) == 0 && !is_alnum(byte_at(lx, i + n));
}

static loom_status bad_char(const loom__lexer *lx, const loom__token *t) {
  unsigned c = (unsigned char)lx->text[t->start];
  uint32_t cp;
  if (c >= 0x80 && utf8_decode((const unsigned char *)lx->text + t->start, lx->len - t->start, &cp))
    return FAIL(t, "unexpected character U+%04X (outside comments, .lir text is ASCII)", (unsigned)cp);
  if (c < 0x20 || c == 0x7f) return FAIL(t, "unexpected control character 0x%02x", c);
  return FAIL(t, "unexpected character '%c'", (char)c);
}

/* True when text[a..b) is a decimal number: digits [. digits] [e [+-] digits], at least one
 * digit before the exponent. *is_float says whether it has a point or an exponent. */
static bool valid_number(const loom__lexer *lx, size_t a, size_t b, bool *is_float) {
  size_t i = a, mantissa = 0;
  *is_float = false;
  while (i < b && is_digit(byte_at(lx, i))) i++, mantissa++;
  if (i < b && lx->text[i] == '.') {
    *is_float = true;
    for (i++; i < b && is_digit(byte_at(lx, i)); i++) mantissa++;
  }
  if (mantissa == 0) return false;
  if (i < b && (lx->text[i] == 'e' || lx->text[i] == 'E')) {
    *is_float = true;
    i++;
    if (i < b && (lx->text[i] == '+' || lx->text[i] == '-')) i++;
    if (i == b || !is_digit(byte_at(lx, i))) return false;
    while (i < b && is_digit(byte_at(lx, i))) i++;
  }
  return i == b;
}

/* A number, starting at t->start with a digit, '.', '+' or '-'. */
static loom_status lex_number(loom__lexer *lx, loom__token *t) {
  size_t i = t->start;
  int c = byte_at(lx, i);
  if (c == '-' || c == '+') {
    i++;
    if (word_at(lx, i, "inf") || word_at(lx, i, "nan")) {
      t->kind = LOOM_TOK_FLOAT;
      t->len = i + 3 - t->start;
      lx->st.pos = i + 3;
      return LOOM_OK;
    }
  }
  if (!is_digit(byte_at(lx, i)) && !(byte_at(lx, i) == '.' && is_digit(byte_at(lx, i + 1))))
    return bad_char(lx, t);
  /* Take in everything glued to the number, so "3abc" is one bad loom__token rather than two. */
  size_t end = i;
  for (;;) {
    int d = byte_at(lx, end);
    int prev = byte_at(lx, end - 1);
    if (is_alnum(d) || d == '.' || ((d == '+' || d == '-') && (prev == 'e' || prev == 'E')))
      end++;
    else
      break;
  }
  t->len = end - t->start;
  t->kind = LOOM_TOK_INT; /* for the message, should it be bad */
  lx->st.pos = end;
  bool is_float;
  if (!valid_number(lx, i, end, &is_float)) {
    DESC_BUF;
    return FAIL(t, "bad number %s", DESC(t));
  }
  t->kind = is_float ? LOOM_TOK_FLOAT : LOOM_TOK_INT;
  return LOOM_OK;
}

static void skip_blanks(loom__lexer *lx) {
  loom__lex_state *s = &lx->st;
  for (;;) {
    int c = byte_at(lx, s->pos);
    if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
      s->pos++;
    } else if (c == '#') {
      while (s->pos < lx->len && lx->text[s->pos] != '\n') s->pos++;
    } else if (c == '\n' && s->depth > 0) {
      s->line++;
      s->line_start = ++s->pos;
    } else {
      return;
    }
  }
}

loom_status loom__lex(loom__lexer *lx, loom__token *t) {
  loom__lex_state *s = &lx->st;
  skip_blanks(lx);
  memset(t, 0, sizeof *t);
  t->start = s->pos;
  t->len = 1;
  t->line = s->line;
  t->col = (int32_t)(s->pos - s->line_start + 1);
  int c = byte_at(lx, s->pos);
  if (c < 0) {
    t->kind = LOOM_TOK_EOF;
    t->len = 0;
  } else if (c == '\n') {
    t->kind = LOOM_TOK_NEWLINE;
    s->line++;
    s->line_start = ++s->pos;
  } else if (is_alpha(c)) {
    size_t end = s->pos;
    while (is_alnum(byte_at(lx, end))) end++;
    t->kind = LOOM_TOK_IDENT;
    t->len = end - s->pos;
    s->pos = end;
  } else if (is_digit(c) || c == '.' || c == '-' || c == '+') {
    return lex_number(lx, t);
  } else if (c != 0 && strchr("(){}[],=:;", c)) {
    t->kind = LOOM_TOK_PUNCT;
    t->punct = (char)c;
    s->pos++;
    if (c == '(' || c == '[') s->depth++;
    if ((c == ')' || c == ']') && s->depth > 0) s->depth--;
  } else {
    return bad_char(lx, t);
  }
  return LOOM_OK;
}

/* ---- tokens and literals ----------------------------------------------------------------- */

bool loom__tok_word(const loom__lexer *lx, const loom__token *t, const char *w) {
  return t->kind == LOOM_TOK_IDENT && t->len == strlen(w) && memcmp(lx->text + t->start, w, t->len) == 0;
}

bool loom__tok_same(const loom__lexer *lx, const loom__token *a, const loom__token *b) {
  return a->len == b->len && memcmp(lx->text + a->start, lx->text + b->start, a->len) == 0;
}

loom_status loom__tok_i64(const loom__lexer *lx, const loom__token *t, int64_t *out) {
  const char *s = lx->text + t->start;
  size_t i = 0;
  bool neg = false;
  if (s[0] == '-' || s[0] == '+') neg = s[i++] == '-';
  uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX, v = 0;
  for (; i < t->len; i++) {
    uint64_t d = (uint64_t)(s[i] - '0');
    if (v > (limit - d) / 10) {
      DESC_BUF;
      return FAIL(t, "integer literal %s does not fit in int64", DESC(t));
    }
    v = v * 10 + d;
  }
  *out = !neg ? (int64_t)v : v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
  return LOOM_OK;
}

loom_status loom__tok_f64(const loom__lexer *lx, const loom__token *t, double *out) {
  DESC_BUF;
  if (t->kind == LOOM_TOK_IDENT) {
    *out = loom__tok_word(lx, t, "inf") ? INFINITY : NAN;
    return LOOM_OK;
  }
  char buf[LEX_MAX_NUMBER];
  if (t->len >= sizeof buf)
    return FAIL(t, "number %s is longer than %d characters", DESC(t), LEX_MAX_NUMBER - 1);
  memcpy(buf, lx->text + t->start, t->len);
  buf[t->len] = '\0';
  errno = 0;
  double d = strtod(buf, NULL);
  if (errno == ERANGE && isinf(d)) return FAIL(t, "number %s is out of the range of f64", DESC(t));
  *out = d;
  return LOOM_OK;
}

bool loom__tok_number(const loom__lexer *lx, const loom__token *t) {
  return t->kind == LOOM_TOK_INT || t->kind == LOOM_TOK_FLOAT || loom__tok_word(lx, t, "inf") ||
         loom__tok_word(lx, t, "nan");
}

loom_status loom__lexer_init(loom__lexer *lx, const char *text, size_t len, const char *file) {
  memset(lx, 0, sizeof *lx);
  lx->text = text ? text : "";
  lx->len = len;
  lx->file = file ? file : "<input>";
  lx->st.line = 1;
  /* Lines and columns are int32_t. */
  if (len > (size_t)INT32_MAX) return fail_at(lx, 1, 1, "the text is larger than 2 GiB");
  if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0) lx->st.pos = lx->st.line_start = 3;
  return check_encoding(lx);
}
