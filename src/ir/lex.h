/* The .lir lexer, the front half of the parser (parse.c): tokens and their places, the
 * checks on the input's bytes, number literals, and the located one-line messages
 * ("file.lir:5:12: error: ...") that every parse error uses.
 *
 * Tokens point into the text, which must outlive them. Newlines are tokens except inside
 * (..) and [..], where they are whitespace: a statement ends at the end of its line.
 */
#ifndef LOOM_IR_LEX_H
#define LOOM_IR_LEX_H

#include "core/core.h"

typedef enum loom__tok_kind {
  LOOM_TOK_EOF,
  LOOM_TOK_NEWLINE,
  LOOM_TOK_IDENT, /* [A-Za-z_][A-Za-z0-9_]*, including true, false, inf, nan and dtypes */
  LOOM_TOK_INT,   /* [+-]digits */
  LOOM_TOK_FLOAT, /* with a point or an exponent, or [+-]inf, [+-]nan */
  LOOM_TOK_PUNCT, /* one of ( ) { } [ ] , = : ; */
} loom__tok_kind;

typedef struct loom__token {
  loom__tok_kind kind;
  char punct; /* the character of a LOOM_TOK_PUNCT */
  size_t start, len;
  int32_t line, col; /* 1-based; columns count bytes */
} loom__token;

/* Where the lexer stands: saved and restored to look ahead or to read a part twice. */
typedef struct loom__lex_state {
  size_t pos, line_start;
  int32_t line;
  int64_t depth; /* open ( and [ */
} loom__lex_state;

typedef struct loom__lexer {
  const char *text;
  size_t len;
  const char *file; /* for messages */
  loom__lex_state st;
} loom__lexer;

/* Starts lexing text[0..len) (a leading UTF-8 byte order mark is skipped) and checks the
 * bytes first: a NUL byte or invalid UTF-8 anywhere, even in a comment, is an error at that
 * byte, so a binary file gets one clear message. Outside comments the text must be ASCII. */
loom_status loom__lexer_init(loom__lexer *lx, const char *text, size_t len, const char *file);

/* Reads the next token into *t. Errors (a stray character, a malformed number) are located
 * INVALID_ARGUMENT messages. */
loom_status loom__lex(loom__lexer *lx, loom__token *t);

/* "FILE:LINE:COL: error: MESSAGE" at token t, as INVALID_ARGUMENT. */
loom_status loom__lex_fail(const loom__lexer *lx, const loom__token *t, const char *fmt, ...)
    LOOM_PRINTF(3, 4);
/* Puts t's place in front of the current message (one a builder call left); returns s. */
loom_status loom__lex_locate(const loom__lexer *lx, const loom__token *t, loom_status s);
/* A token for messages: 'text' (cut at 40 bytes), "end of line" or "end of input". */
const char *loom__lex_describe(const loom__lexer *lx, const loom__token *t, char *buf, size_t size);

static inline bool loom__tok_punct(const loom__token *t, char c) {
  return t->kind == LOOM_TOK_PUNCT && t->punct == c;
}
/* The identifier `word`. */
bool loom__tok_word(const loom__lexer *lx, const loom__token *t, const char *word);
bool loom__tok_same(const loom__lexer *lx, const loom__token *a, const loom__token *b);
/* An INT or FLOAT token, or inf / nan. */
bool loom__tok_number(const loom__lexer *lx, const loom__token *t);

/* An INT token's value; one beyond int64 is an error. */
loom_status loom__tok_i64(const loom__lexer *lx, const loom__token *t, int64_t *out);
/* A number's value as a double, read in the C locale; one beyond the f64 range is an error. */
loom_status loom__tok_f64(const loom__lexer *lx, const loom__token *t, double *out);

#endif
