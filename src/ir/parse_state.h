/* The .lir parser's state (IR.md, "Text format"), shared by its rooms: parse.c (tokens, types, attributes,
 * constants, statements, the graph, files) and parse_loop.c (loop and fused-op bodies, each a graph of its
 * own read by recursion). Private to those two files. */
#ifndef LOOM_IR_PARSE_STATE_H
#define LOOM_IR_PARSE_STATE_H

#include "ir/ir.h"
#include "ir/lex.h"

/* loom_graph_load refuses larger files: .lir is meant to be written and read by people. */
#define LIR_MAX_FILE_BYTES ((int64_t)1 << 30)
/* Result names in one statement: as many as a loop gives (a plain op gives at most 2). */
#define LIR_MAX_NAMES LOOM_LOOP_MAX_RESULTS
/* Loops nested deeper are refused: no writer (person or rewrite) nests them so far, and the
 * parser reads a body by recursion, which hostile input must not drive through the stack. */
#define LIR_MAX_LOOP_DEPTH 32

typedef loom__token token;
typedef loom__lex_state lex_state;

/* A defined name, by its place in the text. loom_graph_find is a linear scan; looking names
 * up through it would make parsing quadratic in the number of statements. */
typedef struct name_entry {
  size_t start, len;
  int32_t id; /* -1: empty slot */
} name_entry;

/* One graph's names: the file's graph, or a loop's body, which sees only its own. */
typedef struct scope {
  loom_graph *g;
  name_entry *names;
  int32_t cap_names, n_names;
  const struct scope *up; /* the scope around this one (a body's enclosing graph), or NULL */
} scope;

typedef struct parser {
  loom__lexer lx;
  token tok; /* the current token */
  loom_graph *g;
  loom_value *operands; /* scratch: operands of a statement, values of the return */
  int32_t cap_operands;
  char *name; /* scratch: the NUL-terminated copy of a name */
  int32_t cap_name;
  /* The current scope (the graph being built and its names), as struct scope holds it. */
  struct name_entry *names; /* the names defined so far, an open-addressing hash table */
  int32_t cap_names, n_names;
  const struct scope *up;
  int32_t loop_depth;    /* bodies open around the current token */
  const char *body_what; /* the innermost body's op for messages: "loop" or "fused op" */
} parser;

#define TRY(expr)                \
  do {                           \
    loom_status try_s_ = (expr); \
    if (try_s_) return try_s_;   \
  } while (0)

#define FAIL(t, ...) loom__lex_fail(&p->lx, (t), __VA_ARGS__)
#define DESC(t) loom__lex_describe(&p->lx, (t), desc_buf_, sizeof desc_buf_)
#define DESC2(t) loom__lex_describe(&p->lx, (t), desc_buf2_, sizeof desc_buf2_)
#define DESC_BUF                      \
  char desc_buf_[64], desc_buf2_[64]; \
  (void)desc_buf_;                    \
  (void)desc_buf2_

/* One statement as read: its result names and its op (the statements section of parse.c). */
typedef struct stmt {
  token names[LIR_MAX_NAMES];
  int32_t n_names;
  token op_tok;
  loom_op op;
  const loom__op_info *info;
  int32_t n_operands;
  loom_attrs attrs;
  /* constant's data: where it starts, and how many numbers it has */
  lex_state data_state;
  token data_tok;
  int64_t data_count;
  loom_type types[2];
  token type_toks[2];
  int32_t n_types;
} stmt;

/* What a line is, from its first two tokens. A value may be named return, in or out: then
 * an '=' or ',' follows the name. */
typedef enum line_kind { LINE_STATEMENT, LINE_RETURN, LINE_IN, LINE_OUT } line_kind;

/* Functions one file of the module calls in another (each documented at its definition). */
loom_status loom__lir_check_undefined(parser *p, const token *t);
loom_status loom__lir_expect_statement_end(parser *p);
line_kind loom__lir_line_kind_of(const parser *p, const token *t, const token *after);
loom_status loom__lir_lookup(parser *p, const token *t, loom_value *out);
loom_status loom__lir_name_add(parser *p, const token *t, int32_t id);
loom_status loom__lir_name_results(parser *p, const stmt *st, const loom_value *outs);
loom_status loom__lir_next(parser *p);
loom_status loom__lir_parse_loop(parser *p, stmt *st);
loom_status loom__lir_parse_statement(parser *p);
loom_status loom__lir_peek(parser *p, token *out);
int32_t loom__lir_scope_find(const parser *p, const scope *sc, const token *t);
loom_status loom__lir_skip_newlines(parser *p, bool semicolons);
loom_status loom__lir_tok_name(parser *p, const token *t, const char **out);

#endif
