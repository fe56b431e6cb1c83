/* Reads .lir text (shared/IR.md, "Text format") into a graph.
 *
 * A recursive-descent parser over lex.c's tokens that builds the graph through the public
 * builder (loom_graph_param, loom_graph_add, loom_value_set_name, loom_graph_return), so a
 * parsed graph obeys exactly the rules a graph built from C does. The grammar as read here:
 *
 *   file      = "graph" NAME "(" [param ("," param)*] ")" "{" statement* return "}"
 *   param     = NAME ":" type
 *   statement = NAME ("," NAME)* "=" OP [data] NAME* (KEY "=" value)* [":" type ("," type)*]
 *             | NAME ("," NAME)* "=" "loop" KEY "=" INT KEY "=" INT "{" in* statement* out+ "}"
 *   in        = "in" NAME "=" NAME (KEY "=" INT)*                  (axis, offset)
 *   out       = "out" NAME COMBINE (KEY "=" value)*                (axis, k, largest)
 *   return    = "return" NAME ("," NAME)*
 *   type      = DTYPE "[" [INT ("," INT)*] "]"
 *   value     = INT | FLOAT | true | false | DTYPE | "[" [INT ("," INT)*] "]"
 *   data      = number | "[" [data ("," data)*] "]"        (constant only; nested lists flatten)
 *   number    = INT | FLOAT | inf | -inf | nan | true | false
 *
 * Where IR.md leaves room, this file decides:
 * - A statement ends at the end of its line, at ';' or at the '}' closing the graph (or a
 *   loop's body). Inside (..) and [..], and after a ',' in a list of names, newlines are free.
 *   Without line ends `k=1` followed by `y = ...` could not be told apart, since an attribute
 *   is NAME=VALUE.
 * - A multi-result op (topk) takes either one annotation, which must equal its first result's
 *   type (as loom_graph_add checks it), or one per result: `: f32[4,2], i64[4,2]`. The printer
 *   writes none for it.
 * - Columns count bytes from 1. Outside comments the text is ASCII; comments may hold any
 *   UTF-8. A NUL byte or invalid UTF-8 anywhere fails before parsing starts, at that byte, so
 *   a binary file gets one clear message. A leading UTF-8 byte order mark is skipped.
 * - Loops (docs/ir-loops.md): `in`, `out` and a loop's `n`, `piece` and `slices` are keywords
 *   only where a loop reads them; a value may still be named in, out or loop. A body is a graph
 *   of its own (named "body"): it sees only its own names, outer values entering through its
 *   `in` lines, and its names end with it. Its lines are separated as a graph's are (line ends
 *   or ';'). Bodies nest at most LIR_MAX_LOOP_DEPTH deep. A loop takes no `: TYPE`.
 * - Constants: a scalar is written bare (`constant 2 : f32[]`) or as a one-element list; c64
 *   and c128 take N real parts or 2N numbers interleaved re,im; bool takes true/false/0/1;
 *   integer dtypes take integral numbers in their range; a finite number that overflows its
 *   float dtype is an error. Numbers are read in the C locale whatever the process's locale.
 *
 * Every error is one line, "FILE:LINE:COL: error: MESSAGE", LOOM_ERR_INVALID_ARGUMENT, with
 * the place of the offending token; errors from the builder are placed at the op's name (or at
 * the annotation, for a declared type that differs from the inferred one; a loop's at `loop`,
 * once its body is read); running out of memory is OUT_OF_MEMORY. On any error the partial
 * graph is freed.
 *
 * loom_graph_load: a missing file is NOT_FOUND, other read failures (a directory, say) IO, both
 * "PATH: strerror"; a file over 1 GiB is INVALID_ARGUMENT, refused before it is read.
 */
#include <errno.h>
#include <fcntl.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/hash.h"
#include "ir/ir.h"
#include "ir/lex.h"
#include "ir/parse_state.h"
#include "loom/internal/cli.h"

/* ---- tokens ----------------------------------------------------------------------------- */

loom_status loom__lir_next(parser *p) {
  return loom__lex(&p->lx, &p->tok);
}

/* The token after the current one, without moving. */
loom_status loom__lir_peek(parser *p, token *out) {
  lex_state saved = p->lx.st;
  loom_status s = loom__lex(&p->lx, out);
  p->lx.st = saved;
  return s;
}

/* Skips line ends (and ';' where `semicolons`). */
loom_status loom__lir_skip_newlines(parser *p, bool semicolons) {
  while (p->tok.kind == LOOM_TOK_NEWLINE || (semicolons && loom__tok_punct(&p->tok, ';')))
    TRY(loom__lir_next(p));
  return LOOM_OK;
}

static loom_status expect_punct(parser *p, char c, const char *context) {
  DESC_BUF;
  if (!loom__tok_punct(&p->tok, c))
    return FAIL(&p->tok, "expected '%c' %s, found %s", c, context, DESC(&p->tok));
  return loom__lir_next(p);
}

/* A NUL-terminated copy of an identifier, in the parser's scratch buffer. */
loom_status loom__lir_tok_name(parser *p, const token *t, const char **out) {
  *out = NULL;
  if (t->len >= INT32_MAX) return FAIL(t, "name is too long");
  if (loom__grow((void **)&p->name, &p->cap_name, (int32_t)t->len + 1, 1)) return LOOM_ERR_OUT_OF_MEMORY;
  memcpy(p->name, p->lx.text + t->start, t->len);
  p->name[t->len] = '\0';
  *out = p->name;
  return LOOM_OK;
}

static uint64_t hash_text(const char *s, size_t n) {
  return loom__fnv1a(LOOM__FNV1A_INIT, s, n);
}

/* The slot of name t: where it is, or the empty slot where it would go. */
static name_entry *name_slot(const parser *p, name_entry *table, int32_t cap, const token *t) {
  size_t mask = (size_t)cap - 1, i = (size_t)hash_text(p->lx.text + t->start, t->len) & mask;
  while (table[i].id >= 0 &&
         !(table[i].len == t->len && memcmp(p->lx.text + table[i].start, p->lx.text + t->start, t->len) == 0))
    i = (i + 1) & mask;
  return &table[i];
}

static int32_t name_find(const parser *p, const token *t) {
  return p->cap_names ? name_slot(p, p->names, p->cap_names, t)->id : -1;
}

/* Records that name t is value `id`; the table stays at most half full. */
loom_status loom__lir_name_add(parser *p, const token *t, int32_t id) {
  if (2 * (p->n_names + 1) > p->cap_names) {
    if (p->cap_names > INT32_MAX / 4) return loom__oom("the parser's name table");
    int32_t cap = p->cap_names ? 2 * p->cap_names : 64;
    name_entry *table = loom__malloc(sizeof *table * (size_t)cap);
    if (!table) return loom__oom("the parser's name table");
    for (int32_t i = 0; i < cap; i++) table[i].id = -1;
    for (int32_t i = 0; i < p->cap_names; i++) {
      const name_entry *e = &p->names[i];
      if (e->id >= 0) *name_slot(p, table, cap, &(token){.start = e->start, .len = e->len}) = *e;
    }
    loom__free(p->names);
    p->names = table;
    p->cap_names = cap;
  }
  *name_slot(p, p->names, p->cap_names, t) = (name_entry){t->start, t->len, id};
  p->n_names++;
  return LOOM_OK;
}

int32_t loom__lir_scope_find(const parser *p, const scope *sc, const token *t) {
  return sc->cap_names ? name_slot(p, sc->names, sc->cap_names, t)->id : -1;
}

/* The value a name refers to; "'q' is not defined" otherwise. */
loom_status loom__lir_lookup(parser *p, const token *t, loom_value *out) {
  DESC_BUF;
  out->id = name_find(p, t);
  if (out->id >= 0) return LOOM_OK;
  for (const scope *sc = p->up; sc; sc = sc->up)
    if (loom__lir_scope_find(p, sc, t) >= 0)
      return FAIL(t,
                  "%s is not defined in the %s's body (a value from outside enters it through an 'in' line)",
                  DESC(t), p->body_what ? p->body_what : "loop");
  return FAIL(t, "%s is not defined", DESC(t));
}

loom_status loom__lir_check_undefined(parser *p, const token *t) {
  DESC_BUF;
  if (name_find(p, t) >= 0) return FAIL(t, "%s is already defined", DESC(t));
  return LOOM_OK;
}

static loom_status push_operand(parser *p, int32_t n, loom_value v) {
  if (loom__grow((void **)&p->operands, &p->cap_operands, n + 1, sizeof *p->operands))
    return LOOM_ERR_OUT_OF_MEMORY;
  p->operands[n] = v;
  return LOOM_OK;
}

/* ---- types ------------------------------------------------------------------------------ */

static loom_status parse_dims(parser *p, int64_t *dims, int32_t *rank) {
  DESC_BUF;
  *rank = 0;
  if (loom__tok_punct(&p->tok, ']')) return loom__lir_next(p);
  for (;;) {
    token *t = &p->tok;
    if (t->kind != LOOM_TOK_INT) return FAIL(t, "expected a dimension, found %s", DESC(t));
    if (*rank == LOOM_MAX_RANK) return FAIL(t, "a shape has at most %d dimensions", LOOM_MAX_RANK);
    TRY(loom__tok_i64(&p->lx, t, &dims[*rank]));
    if (dims[*rank] < 0) return FAIL(t, "dimension %s is negative", DESC(t));
    (*rank)++;
    TRY(loom__lir_next(p));
    if (loom__tok_punct(&p->tok, ']')) return loom__lir_next(p);
    if (!loom__tok_punct(&p->tok, ','))
      return FAIL(&p->tok, "expected ',' or ']' in the shape, found %s", DESC(&p->tok));
    TRY(loom__lir_next(p));
  }
}

/* type = DTYPE "[" dims "]". *where gets the dtype's token, where type errors point. */
static loom_status parse_type(parser *p, loom_type *out, token *where) {
  DESC_BUF;
  token t = p->tok;
  if (where) *where = t;
  if (t.kind != LOOM_TOK_IDENT) return FAIL(&t, "expected a type such as f32[3], found %s", DESC(&t));
  loom_dtype dtype;
  if (!loom_dtype_parse(p->lx.text + t.start, t.len, &dtype)) return FAIL(&t, "unknown dtype %s", DESC(&t));
  TRY(loom__lir_next(p));
  if (!loom__tok_punct(&p->tok, '['))
    return FAIL(&p->tok, "expected '[' after %s (a scalar is %s[]), found %s", DESC(&t),
                loom_dtype_name(dtype), DESC2(&p->tok));
  TRY(loom__lir_next(p));
  int64_t dims[LOOM_MAX_RANK];
  int32_t rank;
  TRY(parse_dims(p, dims, &rank));
  if (loom_type_make(dtype, rank, dims, out)) return loom__lex_locate(&p->lx, &t, LOOM_ERR_INVALID_ARGUMENT);
  return LOOM_OK;
}

/* ---- attributes ------------------------------------------------------------------------- */

typedef enum attr_kind { AK_INT, AK_BOOL, AK_DTYPE, AK_NUMBER, AK_LIST } attr_kind;

/* In LOOM_ATTR_* bit order. */
static const struct {
  const char *name;
  attr_kind kind;
} attr_table[] = {
    {"axis", AK_INT},     {"k", AK_INT},         {"n", AK_INT},     {"groups", AK_INT},
    {"largest", AK_BOOL}, {"keepdims", AK_BOOL}, {"to", AK_DTYPE},  {"value", AK_NUMBER},
    {"shape", AK_LIST},   {"perm", AK_LIST},     {"axes", AK_LIST}, {"start", AK_LIST},
    {"stop", AK_LIST},    {"step", AK_LIST},     {"reps", AK_LIST}, {"stride", AK_LIST},
    {"padding", AK_LIST}, {"dilation", AK_LIST},
};
_Static_assert(sizeof attr_table / sizeof attr_table[0] == 18, "one entry per LOOM_ATTR_* bit");

static int64_t *attr_int(loom_attrs *a, uint32_t bit) {
  switch (bit) {
    case LOOM_ATTR_AXIS:
      return &a->axis;
    case LOOM_ATTR_K:
      return &a->k;
    case LOOM_ATTR_N:
      return &a->n;
    default:
      return &a->groups;
  }
}

static loom_status parse_int_list(parser *p, const char *key, loom_int_list *out) {
  DESC_BUF;
  if (!loom__tok_punct(&p->tok, '['))
    return FAIL(&p->tok, "attribute '%s' takes a list of integers such as [1,2], found %s", key,
                DESC(&p->tok));
  TRY(loom__lir_next(p));
  out->count = 0;
  if (loom__tok_punct(&p->tok, ']')) return loom__lir_next(p);
  for (;;) {
    token *t = &p->tok;
    if (t->kind != LOOM_TOK_INT)
      return FAIL(t, "attribute '%s' takes a list of integers, found %s", key, DESC(t));
    if (out->count == LOOM_MAX_RANK)
      return FAIL(t, "attribute '%s' has more than %d entries", key, LOOM_MAX_RANK);
    TRY(loom__tok_i64(&p->lx, t, &out->v[out->count++]));
    TRY(loom__lir_next(p));
    if (loom__tok_punct(&p->tok, ']')) return loom__lir_next(p);
    if (!loom__tok_punct(&p->tok, ','))
      return FAIL(&p->tok, "expected ',' or ']' in '%s', found %s", key, DESC(&p->tok));
    TRY(loom__lir_next(p));
  }
}

/* fill's value=V: an integer is kept exactly; true/false are 1/0. */
static loom_status parse_number_attr(parser *p, loom_attrs *a) {
  DESC_BUF;
  token *t = &p->tok;
  a->value_is_int =
      t->kind == LOOM_TOK_INT || loom__tok_word(&p->lx, t, "true") || loom__tok_word(&p->lx, t, "false");
  if (t->kind == LOOM_TOK_INT) {
    TRY(loom__tok_i64(&p->lx, t, &a->ivalue));
    a->value = (double)a->ivalue;
  } else if (a->value_is_int) {
    a->ivalue = loom__tok_word(&p->lx, t, "true");
    a->value = (double)a->ivalue;
  } else if (loom__tok_number(&p->lx, t)) {
    TRY(loom__tok_f64(&p->lx, t, &a->value));
  } else {
    return FAIL(t, "attribute 'value' takes a number, found %s", DESC(t));
  }
  return loom__lir_next(p);
}

static loom_status parse_attr_value(parser *p, int b, loom_attrs *a) {
  DESC_BUF;
  uint32_t bit = 1u << b;
  const char *key = attr_table[b].name;
  token *t = &p->tok;
  switch (attr_table[b].kind) {
    case AK_INT:
      if (t->kind != LOOM_TOK_INT) return FAIL(t, "attribute '%s' takes an integer, found %s", key, DESC(t));
      TRY(loom__tok_i64(&p->lx, t, attr_int(a, bit)));
      return loom__lir_next(p);
    case AK_BOOL: {
      bool v = loom__tok_word(&p->lx, t, "true");
      if (!v && !loom__tok_word(&p->lx, t, "false"))
        return FAIL(t, "attribute '%s' takes true or false, found %s", key, DESC(t));
      if (bit == LOOM_ATTR_LARGEST)
        a->largest = v;
      else
        a->keepdims = v;
      return loom__lir_next(p);
    }
    case AK_DTYPE:
      if (t->kind != LOOM_TOK_IDENT)
        return FAIL(t, "attribute '%s' takes a dtype such as f32, found %s", key, DESC(t));
      if (!loom_dtype_parse(p->lx.text + t->start, t->len, &a->to))
        return FAIL(t, "unknown dtype %s", DESC(t));
      return loom__lir_next(p);
    case AK_NUMBER:
      return parse_number_attr(p, a);
    case AK_LIST:
      return parse_int_list(p, key, loom__attrs_list(a, bit));
  }
  return LOOM_OK;
}

/* key=value, the current token being the key (an identifier followed by '='). */
static loom_status parse_attr(parser *p, const loom__op_info *info, loom_attrs *a) {
  DESC_BUF;
  token key = p->tok;
  int b = 0;
  while (b < LOOM_ARRAY_SIZE(attr_table) && !loom__tok_word(&p->lx, &key, attr_table[b].name)) b++;
  if (b == LOOM_ARRAY_SIZE(attr_table)) return FAIL(&key, "unknown attribute %s", DESC(&key));
  uint32_t bit = 1u << b;
  if (a->set & bit) return FAIL(&key, "attribute '%s' is given twice", attr_table[b].name);
  /* The builder says the same, but here the message can point at the key. */
  if (!(info->allowed & bit))
    return FAIL(&key, "%s: takes no attribute '%s'", info->name, attr_table[b].name);
  TRY(loom__lir_next(p)); /* the key */
  TRY(loom__lir_next(p)); /* '=' */
  TRY(parse_attr_value(p, b, a));
  a->set |= bit;
  return LOOM_OK;
}

/* ---- constants -------------------------------------------------------------------------- */

static bool is_data_literal(const parser *p, const token *t) {
  return loom__tok_number(&p->lx, t) || loom__tok_word(&p->lx, t, "true") ||
         loom__tok_word(&p->lx, t, "false");
}

/* First pass over a constant's data: checks the syntax and counts the numbers. Iterative, so
 * deeply nested brackets cannot exhaust the stack. */
static loom_status scan_data(parser *p, int64_t *out_count) {
  DESC_BUF;
  int64_t count = 0, depth = 0;
  bool want_item = true, just_opened = false;
  for (;;) {
    token *t = &p->tok;
    if (want_item) {
      if (loom__tok_punct(t, '[')) {
        depth++;
        just_opened = true;
      } else if (just_opened && loom__tok_punct(t, ']')) {
        want_item = false;
        continue; /* the ']' of an empty list, handled below */
      } else if (is_data_literal(p, t)) {
        count++;
        want_item = just_opened = false;
      } else {
        return FAIL(t, "constant: expected a number%s, found %s", depth ? "" : " or a list of numbers",
                    DESC(t));
      }
    } else if (loom__tok_punct(t, ']')) {
      depth--;
    } else if (loom__tok_punct(t, ',')) {
      want_item = true;
    } else {
      return FAIL(t, "constant: expected ',' or ']' in the data, found %s", DESC(t));
    }
    TRY(loom__lir_next(p));
    if (depth == 0 && !want_item) break;
  }
  *out_count = count;
  return LOOM_OK;
}

/* One literal as an integer of dtype dt. */
static loom_status data_int(const parser *p, const token *t, loom_dtype dt, int64_t *out) {
  DESC_BUF;
  static const int64_t lo[] = {[LOOM_I8] = INT8_MIN,
                               [LOOM_U8] = 0,
                               [LOOM_I16] = INT16_MIN,
                               [LOOM_I32] = INT32_MIN,
                               [LOOM_I64] = INT64_MIN};
  static const int64_t hi[] = {[LOOM_I8] = INT8_MAX,
                               [LOOM_U8] = UINT8_MAX,
                               [LOOM_I16] = INT16_MAX,
                               [LOOM_I32] = INT32_MAX,
                               [LOOM_I64] = INT64_MAX};
  const char *dn = loom_dtype_name(dt);
  int64_t v = 0;
  if (t->kind == LOOM_TOK_INT) {
    if (loom__tok_i64(&p->lx, t, &v)) return FAIL(t, "constant: %s is out of range for %s", DESC(t), dn);
  } else if (t->kind == LOOM_TOK_FLOAT) {
    double d;
    TRY(loom__tok_f64(&p->lx, t, &d));
    if (d != floor(d)) return FAIL(t, "constant: %s is not an integer, as %s needs", DESC(t), dn);
    if (!(d >= -0x1p63 && d < 0x1p63)) return FAIL(t, "constant: %s is out of range for %s", DESC(t), dn);
    v = (int64_t)d;
  } else {
    return FAIL(t, "constant: %s takes integers, found %s", dn, DESC(t));
  }
  if (v < lo[dt] || v > hi[dt]) return FAIL(t, "constant: %s is out of range for %s", DESC(t), dn);
  *out = v;
  return LOOM_OK;
}

static loom_status store_bool(const parser *p, const token *t, uint8_t *dst) {
  DESC_BUF;
  bool digit = t->kind == LOOM_TOK_INT && t->len == 1;
  char d = p->lx.text[t->start];
  if (loom__tok_word(&p->lx, t, "true") || (digit && d == '1'))
    *dst = 1;
  else if (loom__tok_word(&p->lx, t, "false") || (digit && d == '0'))
    *dst = 0;
  else
    return FAIL(t, "constant: bool takes true, false, 0 or 1, found %s", DESC(t));
  return LOOM_OK;
}

static loom_status store_int(const parser *p, const token *t, loom_dtype dt, void *buf, int64_t i) {
  int64_t v = 0;
  TRY(data_int(p, t, dt, &v));
  switch (dt) {
    case LOOM_I8:
      ((int8_t *)buf)[i] = (int8_t)v;
      break;
    case LOOM_U8:
      ((uint8_t *)buf)[i] = (uint8_t)v;
      break;
    case LOOM_I16:
      ((int16_t *)buf)[i] = (int16_t)v;
      break;
    case LOOM_I32:
      ((int32_t *)buf)[i] = (int32_t)v;
      break;
    default:
      ((int64_t *)buf)[i] = v;
      break;
  }
  return LOOM_OK;
}

/* A float or complex component; a finite number that overflows the dtype is an error. */
static loom_status store_real(const parser *p, const token *t, loom_dtype dt, void *buf, int64_t i) {
  DESC_BUF;
  if (!loom__tok_number(&p->lx, t))
    return FAIL(t, "constant: %s takes numbers, found %s", loom_dtype_name(dt), DESC(t));
  double d;
  TRY(loom__tok_f64(&p->lx, t, &d));
  float f = (float)d;
  uint16_t h = 0;
  bool overflow;
  switch (dt) {
    case LOOM_F64:
    case LOOM_C128:
      ((double *)buf)[i] = d;
      return LOOM_OK;
    case LOOM_F16:
      ((uint16_t *)buf)[i] = h = loom_f32_to_f16(f);
      overflow = (h & 0x7fff) == 0x7c00;
      break;
    case LOOM_BF16:
      ((uint16_t *)buf)[i] = h = loom_f32_to_bf16(f);
      overflow = (h & 0x7fff) == 0x7f80;
      break;
    default: /* f32, c64 */
      ((float *)buf)[i] = f;
      overflow = !isfinite(f);
      break;
  }
  if (isfinite(d) && (overflow || !isfinite(f)))
    return FAIL(t, "constant: %s overflows %s", DESC(t), loom_dtype_name(dt));
  return LOOM_OK;
}

/* Stores literal t as component i of a constant of dtype dt (complex: i counts re and im). */
static loom_status store_literal(const parser *p, const token *t, loom_dtype dt, void *buf, int64_t i) {
  if (dt == LOOM_BOOL) return store_bool(p, t, (uint8_t *)buf + i);
  if (loom_dtype_is_integer(dt)) return store_int(p, t, dt, buf, i);
  return store_real(p, t, dt, buf, i);
}

/* Second pass: converts the `count` literals from `data` on into a buffer for `type`. */
static loom_status read_data(parser *p, const lex_state *data_state, const token *data_tok, int64_t count,
                             const loom_type *type, void **out) {
  DESC_BUF;
  int64_t elements, bytes;
  TRY(loom_type_elements(type, &elements));
  TRY(loom_type_bytes(type, &bytes));
  bool complex = loom_dtype_is_complex(type->dtype);
  char tbuf[LOOM_TYPE_STRING_MAX];
  loom_type_format(type, tbuf, sizeof tbuf);
  if (complex && count != elements && (elements > INT64_MAX / 2 || count != 2 * elements))
    return FAIL(data_tok,
                "constant: %lld numbers for %s, which takes %lld real parts or %lld (re,im) numbers",
                (long long)count, tbuf, (long long)elements, (long long)elements * 2);
  if (!complex && count != elements)
    return FAIL(data_tok, "constant: %lld number%s for %s, which has %lld element%s", (long long)count,
                count == 1 ? "" : "s", tbuf, (long long)elements, elements == 1 ? "" : "s");
  /* The count matches the text, so the size is bounded by the input's length. */
  void *buf = loom__calloc(1, (size_t)bytes);
  if (!buf) return loom__oom("constant data");
  int64_t stride = complex && count == elements ? 2 : 1;
  p->lx.st = *data_state;
  p->tok = *data_tok;
  loom_status s = LOOM_OK;
  for (int64_t i = 0; !s && i < count;) {
    if (is_data_literal(p, &p->tok)) s = store_literal(p, &p->tok, type->dtype, buf, stride * i++);
    if (!s) s = loom__lir_next(p);
  }
  if (s) {
    loom__free(buf);
    return s;
  }
  *out = buf;
  return LOOM_OK;
}

/* ---- statements ------------------------------------------------------------------------- */

/* NAME ("," NAME)* "=" */
static loom_status parse_names(parser *p, stmt *st) {
  DESC_BUF;
  for (;;) {
    token *t = &p->tok;
    if (t->kind != LOOM_TOK_IDENT) return FAIL(t, "expected a name, found %s", DESC(t));
    if (st->n_names == LIR_MAX_NAMES) return FAIL(t, "more than %d names in one statement", LIR_MAX_NAMES);
    for (int32_t i = 0; i < st->n_names; i++)
      if (loom__tok_same(&p->lx, t, &st->names[i])) return FAIL(t, "%s is already defined", DESC(t));
    TRY(loom__lir_check_undefined(p, t));
    st->names[st->n_names++] = *t;
    TRY(loom__lir_next(p));
    if (loom__tok_punct(&p->tok, '=')) return loom__lir_next(p);
    if (!loom__tok_punct(&p->tok, ','))
      return FAIL(&p->tok, "expected '=' after %s, found %s", DESC(&st->names[st->n_names - 1]),
                  DESC2(&p->tok));
    TRY(loom__lir_next(p));
    TRY(loom__lir_skip_newlines(p, false));
  }
}

/* "unknown op 'ad' (did you mean 'add'?)": the closest op name, where one is near. */
static loom_status unknown_op(parser *p, const token *t) {
  DESC_BUF;
  const char *names[LOOM_OP_COUNT];
  for (int i = 0; i < LOOM_OP_COUNT; i++) names[i] = loom_op_name((loom_op)i);
  char word[64], hint[96];
  snprintf(word, sizeof word, "%.*s", (int)(t->len < 63 ? t->len : 63), p->lx.text + t->start);
  loom__did_you_mean(word, names, LOOM_OP_COUNT, hint, sizeof hint);
  return FAIL(t, "unknown op %s%s", DESC(t), hint);
}

static loom_status parse_op(parser *p, stmt *st) {
  DESC_BUF;
  token *t = &p->tok;
  if (t->kind != LOOM_TOK_IDENT) return FAIL(t, "expected an op name after '=', found %s", DESC(t));
  if (!loom_op_parse(p->lx.text + t->start, t->len, &st->op)) return unknown_op(p, t);
  st->op_tok = *t;
  st->info = loom__op_info_of(st->op);
  /* A loop's count is its body's 'out' lines, checked once the body is read. */
  if (st->op != LOOM_OP_LOOP && st->op != LOOM_OP_FUSED && st->n_names != st->info->n_results)
    return FAIL(&st->names[0], "%s gives %d result%s, but %d name%s given", st->info->name,
                (int)st->info->n_results, st->info->n_results == 1 ? "" : "s", (int)st->n_names,
                st->n_names == 1 ? " is" : "s are");
  return loom__lir_next(p);
}

/* Operand names, then key=value attributes, then the optional ": TYPE". */
static loom_status parse_operands_attrs(parser *p, stmt *st) {
  token after;
  for (;;) {
    if (p->tok.kind != LOOM_TOK_IDENT) break;
    TRY(loom__lir_peek(p, &after));
    if (loom__tok_punct(&after, '=')) break;
    loom_value v;
    TRY(loom__lir_lookup(p, &p->tok, &v));
    TRY(push_operand(p, st->n_operands++, v));
    TRY(loom__lir_next(p));
  }
  loom_attrs_init(&st->attrs);
  for (;;) {
    if (p->tok.kind != LOOM_TOK_IDENT) break;
    TRY(loom__lir_peek(p, &after));
    if (!loom__tok_punct(&after, '=')) break;
    TRY(parse_attr(p, st->info, &st->attrs));
  }
  if (!loom__tok_punct(&p->tok, ':')) return LOOM_OK;
  TRY(loom__lir_next(p));
  for (;;) {
    TRY(parse_type(p, &st->types[st->n_types], &st->type_toks[st->n_types]));
    st->n_types++;
    if (!loom__tok_punct(&p->tok, ',') || st->n_types == st->info->n_results) return LOOM_OK;
    TRY(loom__lir_next(p));
  }
}

/* A statement ends at a line end, ';', the closing '}' or the end of input (reported later). */
loom_status loom__lir_expect_statement_end(parser *p) {
  DESC_BUF;
  token *t = &p->tok;
  if (t->kind == LOOM_TOK_NEWLINE || t->kind == LOOM_TOK_EOF || loom__tok_punct(t, ';') ||
      loom__tok_punct(t, '}'))
    return LOOM_OK;
  return FAIL(t, "expected the end of the statement, found %s", DESC(t));
}

/* Gives the statement's results its names. */
loom_status loom__lir_name_results(parser *p, const stmt *st, const loom_value *outs) {
  for (int32_t r = 0; r < st->n_names; r++) {
    const char *name;
    TRY(loom__lir_tok_name(p, &st->names[r], &name));
    loom_status s = loom_value_set_name(p->g, outs[r], name);
    if (s) return loom__lex_locate(&p->lx, &st->names[r], s);
    TRY(loom__lir_name_add(p, &st->names[r], outs[r].id));
  }
  return LOOM_OK;
}

/* Adds the parsed statement to the graph and names its results. */
static loom_status build_statement(parser *p, stmt *st) {
  const loom__op_info *info = st->info;
  bool source = info->cls == LOOM_CLASS_SOURCE;
  if (source && st->n_types == 0)
    return FAIL(&st->op_tok, "%s: needs its result type, as in 'x = %s ... : f32[4]'", info->name,
                info->name);
  void *data = NULL;
  /* no literal is a quantized element: the builder's rule, said before the data is read */
  if (source && loom_dtype_is_quantized(st->types[0].dtype))
    return FAIL(&st->op_tok, "%s: cannot make %s values (quantize makes them, with their scale)", info->name,
                loom_dtype_name(st->types[0].dtype));
  if (st->op == LOOM_OP_CONSTANT) {
    lex_state resume = p->lx.st;
    token resume_tok = p->tok;
    TRY(read_data(p, &st->data_state, &st->data_tok, st->data_count, &st->types[0], &data));
    p->lx.st = resume;
    p->tok = resume_tok;
  }
  loom_value outs[2];
  p->g->cur_line = st->op_tok.line;
  p->g->cur_col = st->op_tok.col;
  loom_status s = loom_graph_add(p->g, st->op, p->operands, st->n_operands, &st->attrs,
                                 source ? &st->types[0] : NULL, data, outs, info->n_results);
  loom__free(data);
  if (s) return loom__lex_locate(&p->lx, &st->op_tok, s);
  /* The annotation is checked here rather than by loom_graph_add, to point at it. */
  for (int32_t r = 0; !source && r < st->n_types; r++) {
    const loom_type *inferred = loom_value_type(p->g, outs[r]);
    if (!loom_type_equal(inferred, &st->types[r])) {
      char want[LOOM_TYPE_STRING_MAX], got[LOOM_TYPE_STRING_MAX];
      return FAIL(&st->type_toks[r], "%s: declared type %s does not equal the inferred type %s", info->name,
                  loom_type_format(&st->types[r], want, sizeof want),
                  loom_type_format(inferred, got, sizeof got));
    }
  }
  return loom__lir_name_results(p, st, outs);
}

loom_status loom__lir_parse_statement(parser *p) {
  stmt st;
  memset(&st, 0, sizeof st);
  TRY(parse_names(p, &st));
  TRY(parse_op(p, &st));
  if (st.op == LOOM_OP_LOOP || st.op == LOOM_OP_FUSED) return loom__lir_parse_loop(p, &st);
  if (st.op == LOOM_OP_CONSTANT) {
    st.data_state = p->lx.st;
    st.data_tok = p->tok;
    TRY(scan_data(p, &st.data_count));
  }
  TRY(parse_operands_attrs(p, &st));
  TRY(loom__lir_expect_statement_end(p));
  return build_statement(p, &st);
}

/* "return" NAME ("," NAME)* */
static loom_status parse_return(parser *p) {
  DESC_BUF;
  token ret = p->tok;
  int32_t n = 0;
  TRY(loom__lir_next(p));
  for (;;) {
    token *t = &p->tok;
    if (t->kind != LOOM_TOK_IDENT) return FAIL(t, "expected a name to return, found %s", DESC(t));
    loom_value v;
    TRY(loom__lir_lookup(p, t, &v));
    TRY(push_operand(p, n++, v));
    TRY(loom__lir_next(p));
    if (!loom__tok_punct(&p->tok, ',')) break;
    TRY(loom__lir_next(p));
    TRY(loom__lir_skip_newlines(p, false));
  }
  TRY(loom__lir_expect_statement_end(p));
  loom_status s = loom_graph_return(p->g, p->operands, n);
  return s ? loom__lex_locate(&p->lx, &ret, s) : LOOM_OK;
}

line_kind loom__lir_line_kind_of(const parser *p, const token *t, const token *after) {
  if (loom__tok_punct(after, '=') || loom__tok_punct(after, ',')) return LINE_STATEMENT;
  if (loom__tok_word(&p->lx, t, "return")) return LINE_RETURN;
  if (after->kind == LOOM_TOK_IDENT && loom__tok_word(&p->lx, t, "in")) return LINE_IN;
  if (after->kind == LOOM_TOK_IDENT && loom__tok_word(&p->lx, t, "out")) return LINE_OUT;
  return LINE_STATEMENT;
}

/* ---- the graph -------------------------------------------------------------------------- */

/* Statements up to the closing '}', which stays the current token. */
static loom_status parse_body(parser *p) {
  DESC_BUF;
  for (;;) {
    TRY(loom__lir_skip_newlines(p, true));
    token *t = &p->tok;
    if (loom__tok_punct(t, '}')) {
      if (!p->g->returned) return FAIL(t, "graph '%s' has no return", p->g->name);
      return LOOM_OK;
    }
    if (t->kind == LOOM_TOK_EOF) return FAIL(t, "end of input before the '}' closing graph '%s'", p->g->name);
    if (p->g->returned) return FAIL(t, "%s after the return: 'return' is the last statement", DESC(t));
    token after;
    TRY(loom__lir_peek(p, &after));
    switch (loom__lir_line_kind_of(p, t, &after)) {
      case LINE_RETURN:
        TRY(parse_return(p));
        break;
      case LINE_IN:
      case LINE_OUT:
        return FAIL(t, "%s outside a loop's body: only a body has 'in' and 'out' lines", DESC(t));
      case LINE_STATEMENT:
        TRY(loom__lir_parse_statement(p));
        break;
    }
  }
}

/* "(" [NAME ":" type ("," NAME ":" type)*] ")" */
static loom_status parse_params(parser *p) {
  DESC_BUF;
  TRY(expect_punct(p, '(', "after the graph's name"));
  if (loom__tok_punct(&p->tok, ')')) return loom__lir_next(p);
  for (;;) {
    token name = p->tok;
    if (name.kind != LOOM_TOK_IDENT) return FAIL(&name, "expected a parameter name, found %s", DESC(&name));
    TRY(loom__lir_check_undefined(p, &name));
    TRY(loom__lir_next(p));
    if (!loom__tok_punct(&p->tok, ':'))
      return FAIL(&p->tok, "expected ':' after parameter %s, found %s", DESC(&name), DESC2(&p->tok));
    TRY(loom__lir_next(p));
    loom_type type;
    TRY(parse_type(p, &type, NULL));
    const char *cname;
    TRY(loom__lir_tok_name(p, &name, &cname));
    loom_value v = loom_graph_param(p->g, cname, &type);
    if (v.id < 0)
      return loom__lex_locate(&p->lx, &name, p->g->error ? p->g->error : LOOM_ERR_INVALID_ARGUMENT);
    TRY(loom__lir_name_add(p, &name, v.id));
    if (loom__tok_punct(&p->tok, ')')) return loom__lir_next(p);
    if (!loom__tok_punct(&p->tok, ','))
      return FAIL(&p->tok, "expected ',' or ')' in the parameters, found %s", DESC(&p->tok));
    TRY(loom__lir_next(p));
  }
}

static loom_status parse_file(parser *p) {
  DESC_BUF;
  TRY(loom__lir_next(p));
  TRY(loom__lir_skip_newlines(p, false));
  if (!loom__tok_word(&p->lx, &p->tok, "graph"))
    return FAIL(&p->tok, "expected 'graph NAME(...) { ... }', found %s", DESC(&p->tok));
  TRY(loom__lir_next(p));
  token name = p->tok;
  if (name.kind != LOOM_TOK_IDENT)
    return FAIL(&name, "expected the graph's name after 'graph', found %s", DESC(&name));
  const char *cname;
  TRY(loom__lir_tok_name(p, &name, &cname));
  loom_status s = loom_graph_create(cname, &p->g);
  if (s) return loom__lex_locate(&p->lx, &name, s);
  TRY(loom__lir_next(p));
  TRY(parse_params(p));
  TRY(loom__lir_skip_newlines(p, false));
  TRY(expect_punct(p, '{', "to open the graph's body"));
  TRY(parse_body(p));
  TRY(loom__lir_next(p)); /* the '}' */
  TRY(loom__lir_skip_newlines(p, true));
  if (p->tok.kind != LOOM_TOK_EOF)
    return FAIL(&p->tok, "%s after the end of graph '%s' (a file holds one graph)", DESC(&p->tok),
                p->g->name);
  p->g->cur_line = p->g->cur_col = 0;
  s = loom_graph_verify(p->g);
  if (s) loom__error_prefix("%s: error: ", p->lx.file);
  return s;
}

/* Numbers are read with strtod, which follows LC_NUMERIC; .lir always uses '.'. */
typedef struct c_locale_scope {
  locale_t c, old;
} c_locale_scope;

static void c_locale_enter(c_locale_scope *s) {
  s->c = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
  s->old = s->c ? uselocale(s->c) : (locale_t)0;
}

static void c_locale_leave(c_locale_scope *s) {
  if (!s->c) return;
  uselocale(s->old);
  freelocale(s->c);
}

loom_status loom_graph_parse(const char *text, size_t len, const char *filename, loom_graph **out_graph) {
  if (!out_graph) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_graph_parse: out_graph is NULL");
  *out_graph = NULL;
  if (!text && len > 0) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_graph_parse: text is NULL");
  parser p;
  memset(&p, 0, sizeof p);
  loom_status s = loom__lexer_init(&p.lx, text, len, filename);
  if (!s) {
    c_locale_scope loc;
    c_locale_enter(&loc);
    s = parse_file(&p);
    c_locale_leave(&loc);
  }
  loom__free(p.operands);
  loom__free(p.name);
  loom__free(p.names);
  if (s) {
    loom_graph_destroy(p.g);
    return s;
  }
  *out_graph = p.g;
  return LOOM_OK;
}

/* ---- files ------------------------------------------------------------------------------ */

/* A missing file is NOT_FOUND, so a caller can tell it from a failing disk (IO). */
static loom_status io_error(const char *path, int err) {
  return loom__error(err == ENOENT ? LOOM_ERR_NOT_FOUND : LOOM_ERR_IO, "%s: %s", path, strerror(err));
}

static loom_status too_large(const char *path) {
  return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: larger than 1 GiB, the most a .lir file may have", path);
}

/* Reads fd to its end into a new buffer. A pipe has no size to check up front, so reading
 * stops one byte past the limit. */
static loom_status read_all(int fd, const char *path, char **out, size_t *out_len) {
  const size_t limit = (size_t)LIR_MAX_FILE_BYTES + 1;
  size_t cap = 1 << 16, len = 0;
  char *buf = loom__malloc(cap);
  if (!buf) return loom__oom("reading a .lir file");
  for (;;) {
    if (len == cap) {
      size_t bigger_cap = LOOM_MIN(cap * 2, limit);
      char *bigger = len < limit ? loom__realloc(buf, bigger_cap) : NULL;
      if (!bigger) {
        loom__free(buf);
        return len < limit ? loom__oom("reading a .lir file") : too_large(path);
      }
      buf = bigger;
      cap = bigger_cap;
    }
    ssize_t n = read(fd, buf + len, cap - len);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      loom__free(buf);
      return io_error(path, err);
    }
    if (n == 0) break;
    len += (size_t)n;
  }
  if (len >= limit) {
    loom__free(buf);
    return too_large(path);
  }
  *out = buf;
  *out_len = len;
  return LOOM_OK;
}

loom_status loom_graph_load(const char *path, loom_graph **out_graph) {
  if (!out_graph) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_graph_load: out_graph is NULL");
  *out_graph = NULL;
  if (!path) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_graph_load: path is NULL");
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return io_error(path, errno);
  struct stat sb;
  loom_status s = LOOM_OK;
  if (fstat(fd, &sb) != 0)
    s = io_error(path, errno);
  else if (S_ISDIR(sb.st_mode))
    s = io_error(path, EISDIR);
  else if (S_ISREG(sb.st_mode) && (int64_t)sb.st_size > LIR_MAX_FILE_BYTES)
    s = too_large(path);
  char *text = NULL;
  size_t len = 0;
  if (!s) s = read_all(fd, path, &text, &len);
  close(fd);
  if (s) return s;
  s = loom_graph_parse(text, len, path, out_graph);
  loom__free(text);
  return s;
}
