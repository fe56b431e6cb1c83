/* The .lir parser's loops and fused ops (docs/ir-loops.md, docs/ir-fusion.md; parse_state.h): a body is a
 * graph of its own with its own names, read by the statement parser recursively, its operands bound by the
 * enclosing statement. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ir/parse_state.h"

/* ---- loops (docs/ir-loops.md) ----------------------------------------------------------- */

/* Makes *other the parser's current scope, and the current one *other. */
static void scope_swap(parser *p, scope *other) {
  scope cur = {p->g, p->names, p->cap_names, p->n_names, p->up};
  p->g = other->g;
  p->names = other->names;
  p->cap_names = other->cap_names;
  p->n_names = other->n_names;
  p->up = other->up;
  *other = cur;
}

/* A loop being read: its figures and what its 'in' and 'out' lines gave. */
typedef struct loop_parts {
  token loop_tok;
  bool fused;       /* a fused op's block (docs/ir-fusion.md): no attributes, rules or combines */
  const char *what; /* "loop" or "fused op", for messages */
  int64_t n, piece;
  int64_t slices;       /* 0: not given (the default, LOOM_LOOP_SLICES_DEFAULT) */
  loom_value *operands; /* the outer values, one per 'in' line */
  loom_loop_input *rules;
  int32_t n_in, cap_operands, cap_rules;
  loom_value outs[LOOM_LOOP_MAX_RESULTS]; /* the body's values, one per 'out' line */
  loom_loop_output combines[LOOM_LOOP_MAX_RESULTS];
  int32_t n_out;
} loop_parts;

/* An integer attribute's value (the current token); negative values are refused, since a
 * loop's figures and axes count from 0. */
static loom_status loop_int(parser *p, const char *context, const char *key, int64_t *out) {
  DESC_BUF;
  token *t = &p->tok;
  if (t->kind != LOOM_TOK_INT)
    return FAIL(t, "%s: attribute '%s' takes an integer, found %s", context, key, DESC(t));
  TRY(loom__tok_i64(&p->lx, t, out));
  if (*out < 0) return FAIL(t, "%s: %s=%lld is negative", context, key, (long long)*out);
  return loom__lir_next(p);
}

/* A fused op's header: "{" alone; the '{' is consumed. */
static loom_status parse_fused_header(parser *p) {
  DESC_BUF;
  token *t = &p->tok;
  if (loom__tok_punct(t, ':'))
    return FAIL(t, "fused: takes no ': TYPE' annotation (its results' types follow from its body)");
  if (t->kind == LOOM_TOK_IDENT)
    return FAIL(t,
                "fused: takes no operands or attributes, found %s (the body's 'in' lines name what it reads)",
                DESC(t));
  if (!loom__tok_punct(t, '{')) return FAIL(t, "expected '{' to open the fused op's body, found %s", DESC(t));
  return loom__lir_next(p);
}

/* "n" "=" INT "piece" "=" INT ["slices" "=" INT] "{", in any order; the '{' is consumed. */
static loom_status parse_loop_header(parser *p, loop_parts *lp) {
  DESC_BUF;
  if (lp->fused) return parse_fused_header(p);
  bool have[3] = {false, false, false}; /* n, piece, slices */
  static const char *const names[3] = {"n", "piece", "slices"};
  token after;
  while (p->tok.kind == LOOM_TOK_IDENT) {
    token key = p->tok;
    TRY(loom__lir_peek(p, &after));
    if (!loom__tok_punct(&after, '='))
      return FAIL(&key, "loop: takes no operands, found %s (the body's 'in' lines name what it reads)",
                  DESC(&key));
    int which = -1;
    for (int k = 0; k < 3 && which < 0; k++)
      if (loom__tok_word(&p->lx, &key, names[k])) which = k;
    if (which < 0)
      return FAIL(&key, "loop: unknown attribute %s (a loop takes n=N piece=P and optionally slices=S)",
                  DESC(&key));
    const char *name = names[which];
    if (have[which]) return FAIL(&key, "attribute '%s' is given twice", name);
    TRY(loom__lir_next(p)); /* the key */
    TRY(loom__lir_next(p)); /* '=' */
    token value = p->tok;
    TRY(loop_int(p, "loop", name, which == 0 ? &lp->n : which == 1 ? &lp->piece : &lp->slices));
    if (which == 2 && lp->slices != 1 && lp->slices != 2)
      return FAIL(&value,
                  "loop: slices=%lld: a loop holds 1 or 2 slices of a streamed operand (2: the next "
                  "piece's is brought in while a piece runs)",
                  (long long)lp->slices);
    have[which] = true;
  }
  token *t = &p->tok;
  if (loom__tok_punct(t, ':'))
    return FAIL(t, "loop: takes no ': TYPE' annotation (its results' types follow from its body)");
  if (!loom__tok_punct(t, '{')) return FAIL(t, "expected '{' to open the loop's body, found %s", DESC(t));
  if (!have[0] || !have[1])
    return FAIL(&lp->loop_tok, "loop: needs %s",
                !have[0] ? "n=N, the length it runs over" : "piece=P, the length of a piece");
  return loom__lir_next(p);
}

/* An 'in' line's offset: an integer, negative only for a window (which reads padding there:
 * the builder checks it against the stride and halo). */
static loom_status loop_offset(parser *p, int64_t *out) {
  DESC_BUF;
  token *t = &p->tok;
  if (t->kind != LOOM_TOK_INT) return FAIL(t, "in: attribute 'offset' takes an integer, found %s", DESC(t));
  TRY(loom__tok_i64(&p->lx, t, out));
  return loom__lir_next(p);
}

/* Reads the optional axis=A offset=O stride=S halo=H of an 'in' line reading `src` (of type t). */
static loom_status parse_in_rule(parser *p, const token *src, const loom_type *t, loom_loop_input *rule) {
  DESC_BUF;
  static const char *const keys[4] = {"axis", "offset", "stride", "halo"};
  bool have[4] = {false, false, false, false};
  token offset_key = {0};
  token after;
  while (p->tok.kind == LOOM_TOK_IDENT) {
    token key = p->tok;
    TRY(loom__lir_peek(p, &after));
    if (!loom__tok_punct(&after, '=')) break; /* expect_statement_end names it */
    int which = -1;
    for (int k = 0; k < 4 && which < 0; k++)
      if (loom__tok_word(&p->lx, &key, keys[k])) which = k;
    if (which < 0)
      return FAIL(&key, "in: unknown attribute %s (in takes axis=A, offset=O, stride=S and halo=H)",
                  DESC(&key));
    const char *name = keys[which];
    if (have[which]) return FAIL(&key, "attribute '%s' is given twice", name);
    TRY(loom__lir_next(p));
    TRY(loom__lir_next(p));
    token value = p->tok;
    int64_t v;
    if (which == 1)
      TRY(loop_offset(p, &v));
    else
      TRY(loop_int(p, "in", name, &v));
    if (which == 0 && v >= t->rank) {
      char tb[LOOM_TYPE_STRING_MAX];
      return FAIL(&value, "in: axis %lld is out of range for %s (%s)", (long long)v, DESC(src),
                  loom_type_format(t, tb, sizeof tb));
    }
    if (which == 0) rule->axis = (int32_t)v;
    if (which == 1 || which == 2 || which == 3) {
      if (!have[1] && !have[2] && !have[3]) offset_key = key;
      if (which == 1) rule->offset = v;
      if (which == 2) rule->stride = v;
      if (which == 3) rule->halo = v;
    }
    have[which] = true;
  }
  if ((have[1] || have[2] || have[3]) && !have[0])
    return FAIL(&offset_key, "in: %s=%s needs axis=A (a value passed whole has no %s)",
                have[1]   ? "offset"
                : have[2] ? "stride"
                          : "halo",
                have[1]   ? "O"
                : have[2] ? "S"
                          : "H",
                have[1] ? "offset" : "window");
  return LOOM_OK;
}

/* "in" NAME "=" OUTER [axis=A] [offset=O]: the body's next parameter, which reads OUTER, a name
 * of the enclosing graph `outer`: sliced along axis (a full piece long there), or whole. */
static loom_status parse_in(parser *p, const scope *outer, loop_parts *lp) {
  DESC_BUF;
  TRY(loom__lir_next(p)); /* 'in' */
  token name = p->tok;
  TRY(loom__lir_check_undefined(p, &name));
  TRY(loom__lir_next(p));
  if (!loom__tok_punct(&p->tok, '='))
    return FAIL(&p->tok, "in: expected '=' after %s, found %s", DESC(&name), DESC2(&p->tok));
  TRY(loom__lir_next(p));
  token src = p->tok;
  if (src.kind != LOOM_TOK_IDENT)
    return FAIL(&src, "expected the name of a value outside the %s, found %s", lp->what, DESC(&src));
  int32_t id = loom__lir_scope_find(p, outer, &src);
  if (id < 0) return FAIL(&src, "%s is not defined outside the %s", DESC(&src), lp->what);
  TRY(loom__lir_next(p));
  loom_type t = outer->g->values[id].type;
  loom_loop_input rule = {-1, 0, 0, 0};
  if (lp->fused && p->tok.kind == LOOM_TOK_IDENT)
    return FAIL(&p->tok, "in: a fused op's 'in' line takes no attributes, found %s", DESC(&p->tok));
  TRY(parse_in_rule(p, &src, &t, &rule));
  TRY(loom__lir_expect_statement_end(p));
  if (rule.axis >= 0) { /* a window is longer than the piece: the builder checks it */
    int64_t first, count;
    loom__loop_window(&rule, 0, lp->piece, &first, &count);
    t.dims[rule.axis] = count;
  }
  const char *cname;
  TRY(loom__lir_tok_name(p, &name, &cname));
  loom_value v = loom_graph_param(p->g, cname, &t);
  if (v.id < 0) return loom__lex_locate(&p->lx, &name, p->g->error ? p->g->error : LOOM_ERR_INVALID_ARGUMENT);
  TRY(loom__lir_name_add(p, &name, v.id));
  if (loom__grow((void **)&lp->operands, &lp->cap_operands, lp->n_in + 1, sizeof *lp->operands) ||
      loom__grow((void **)&lp->rules, &lp->cap_rules, lp->n_in + 1, sizeof *lp->rules))
    return LOOM_ERR_OUT_OF_MEMORY;
  lp->operands[lp->n_in] = (loom_value){id};
  lp->rules[lp->n_in++] = rule;
  return LOOM_OK;
}

/* The attributes a combine takes and needs (LOOM_ATTR_AXIS, _K, _LARGEST bits). */
static void combine_attrs(loom_combine c, uint32_t *allowed, uint32_t *required) {
  *allowed = *required = 0;
  if (c == LOOM_COMBINE_CONCAT) *allowed = *required = LOOM_ATTR_AXIS;
  if (c == LOOM_COMBINE_TOPK) {
    *allowed = LOOM_ATTR_AXIS | LOOM_ATTR_K | LOOM_ATTR_LARGEST;
    *required = LOOM_ATTR_AXIS | LOOM_ATTR_K;
  }
}

/* axis=A k=K largest=B after a combine, as `out` (of combine c, named by token ct) takes them. */
static loom_status parse_combine_attrs(parser *p, const token *ct, loom_loop_output *out) {
  DESC_BUF;
  const char *cn = loom_combine_name(out->combine);
  uint32_t allowed, required, seen = 0;
  combine_attrs(out->combine, &allowed, &required);
  token after;
  while (p->tok.kind == LOOM_TOK_IDENT) {
    token key = p->tok;
    TRY(loom__lir_peek(p, &after));
    if (!loom__tok_punct(&after, '=')) break; /* expect_statement_end names it */
    uint32_t bit = loom__tok_word(&p->lx, &key, "axis")      ? LOOM_ATTR_AXIS
                   : loom__tok_word(&p->lx, &key, "k")       ? LOOM_ATTR_K
                   : loom__tok_word(&p->lx, &key, "largest") ? LOOM_ATTR_LARGEST
                                                             : 0;
    if (!(allowed & bit)) return FAIL(&key, "out: combine '%s' takes no attribute %s", cn, DESC(&key));
    const char *name = bit == LOOM_ATTR_AXIS ? "axis" : bit == LOOM_ATTR_K ? "k" : "largest";
    if (seen & bit) return FAIL(&key, "attribute '%s' is given twice", name);
    seen |= bit;
    TRY(loom__lir_next(p));
    TRY(loom__lir_next(p));
    token *t = &p->tok;
    if (bit == LOOM_ATTR_LARGEST) {
      out->largest = loom__tok_word(&p->lx, t, "true");
      if (!out->largest && !loom__tok_word(&p->lx, t, "false"))
        return FAIL(t, "out: attribute 'largest' takes true or false, found %s", DESC(t));
      TRY(loom__lir_next(p));
    } else if (bit == LOOM_ATTR_K) {
      TRY(loop_int(p, "out", name, &out->k));
    } else {
      token value = *t;
      int64_t axis;
      TRY(loop_int(p, "out", name, &axis));
      if (axis >= LOOM_MAX_RANK)
        return FAIL(&value, "out: axis=%lld is out of range (a tensor has at most %d axes)", (long long)axis,
                    LOOM_MAX_RANK);
      out->axis = (int32_t)axis;
    }
  }
  if (required & ~seen)
    return FAIL(ct, "out: combine '%s' needs %s", cn, (required & ~seen & LOOM_ATTR_AXIS) ? "axis=A" : "k=K");
  return LOOM_OK;
}

/* "out" NAME COMBINE [attributes]: the loop's next result, the body's value NAME. */
static loom_status parse_out(parser *p, loop_parts *lp) {
  DESC_BUF;
  token out_tok = p->tok;
  int32_t max_out = lp->fused ? LOOM_FUSE_MAX_RESULTS : LOOM_LOOP_MAX_RESULTS;
  if (lp->n_out == max_out) return FAIL(&out_tok, "a %s gives at most %d results", lp->what, (int)max_out);
  TRY(loom__lir_next(p)); /* 'out' */
  token name = p->tok;
  loom_value v;
  TRY(loom__lir_lookup(p, &name, &v));
  TRY(loom__lir_next(p));
  token ct = p->tok;
  if (lp->fused) { /* its results are the body's values as they are: nothing to combine */
    if (ct.kind == LOOM_TOK_IDENT)
      return FAIL(&ct, "out: a fused op's 'out' line names one value, found %s after %s", DESC(&ct),
                  DESC2(&name));
    TRY(loom__lir_expect_statement_end(p));
    lp->outs[lp->n_out++] = v;
    return LOOM_OK;
  }
  if (ct.kind != LOOM_TOK_IDENT)
    return FAIL(&ct,
                "out: expected how the pieces of %s combine (concat, sum, prod, max, min, argmax, argmin, "
                "topk or index), found %s",
                DESC(&name), DESC2(&ct));
  int c = 0;
  while (c < LOOM_COMBINE_COUNT && !loom__tok_word(&p->lx, &ct, loom_combine_name((loom_combine)c))) c++;
  if (c == LOOM_COMBINE_COUNT)
    return FAIL(&ct, "unknown combine %s (concat, sum, prod, max, min, argmax, argmin, topk or index)",
                DESC(&ct));
  TRY(loom__lir_next(p));
  /* Fields a combine does not use stay 0 (graph.h); topk's largest defaults as topk's does. */
  loom_loop_output out = {(loom_combine)c, 0, 0, c == LOOM_COMBINE_TOPK};
  TRY(parse_combine_attrs(p, &ct, &out));
  TRY(loom__lir_expect_statement_end(p));
  lp->outs[lp->n_out] = v;
  lp->combines[lp->n_out++] = out;
  return LOOM_OK;
}

/* The body's lines up to its closing '}', which stays the current token: 'in' lines, then
 * statements, then 'out' lines. `outer` holds the enclosing graph's names. */
static loom_status parse_loop_lines(parser *p, const scope *outer, loop_parts *lp) {
  DESC_BUF;
  enum { INS, STATEMENTS, OUTS } part = INS;
  for (;;) {
    TRY(loom__lir_skip_newlines(p, true));
    token *t = &p->tok;
    if (loom__tok_punct(t, '}')) {
      if (lp->n_out == 0)
        return FAIL(t, "the %s's body has no 'out' line: a %s gives at least one result", lp->what, lp->what);
      return LOOM_OK;
    }
    if (t->kind == LOOM_TOK_EOF)
      return FAIL(t, "end of input before the '}' closing the %s at %d:%d", lp->what, (int)lp->loop_tok.line,
                  (int)lp->loop_tok.col);
    token after;
    TRY(loom__lir_peek(p, &after));
    switch (loom__lir_line_kind_of(p, t, &after)) {
      case LINE_IN:
        if (part != INS)
          return FAIL(t, "'in' after the body's %s: a %s's body starts with its 'in' lines",
                      part == OUTS ? "'out' lines" : "statements", lp->what);
        TRY(parse_in(p, outer, lp));
        break;
      case LINE_OUT:
        part = OUTS;
        TRY(parse_out(p, lp));
        break;
      case LINE_RETURN:
        return FAIL(t, "'return' in a %s's body: the body gives its results with 'out' lines", lp->what);
      case LINE_STATEMENT:
        if (part == OUTS)
          return FAIL(t, "%s after the 'out' lines: they end the %s's body", DESC(t), lp->what);
        part = STATEMENTS;
        TRY(loom__lir_parse_statement(p));
        break;
    }
  }
}

/* After the body: the '}', the count of names, then the loop built on the enclosing graph. */
static loom_status finish_loop(parser *p, const stmt *st, const loop_parts *lp, const loom_graph *body) {
  DESC_BUF;
  const char *op = lp->fused ? "fused" : "loop";
  TRY(loom__lir_next(p)); /* '}' */
  if (loom__tok_punct(&p->tok, ':'))
    return FAIL(&p->tok, "%s: takes no ': TYPE' annotation (its results' types follow from its body)", op);
  TRY(loom__lir_expect_statement_end(p));
  if (st->n_names != lp->n_out)
    return FAIL(&st->names[0], "%s gives %d result%s (its 'out' lines), but %d name%s given", op,
                (int)lp->n_out, lp->n_out == 1 ? "" : "s", (int)st->n_names,
                st->n_names == 1 ? " is" : "s are");
  loom_value outs[LOOM_LOOP_MAX_RESULTS];
  p->g->cur_line = lp->loop_tok.line;
  p->g->cur_col = lp->loop_tok.col;
  loom_status s = lp->fused ? loom__graph_add_fused(p->g, body, lp->operands, lp->n_in, outs)
                            : loom_graph_add_loop(p->g, lp->n, lp->piece, body, lp->operands, lp->rules,
                                                  lp->n_in, lp->combines, lp->n_out, outs);
  if (!s && lp->slices) s = loom_graph_loop_set_slices(p->g, p->g->n_ops - 1, (int32_t)lp->slices);
  if (s) return loom__lex_locate(&p->lx, &lp->loop_tok, s);
  return loom__lir_name_results(p, st, outs);
}

/* NAMES "=" "loop" n=N piece=P "{" in* statement* out+ "}", the current token being the one
 * after "loop". The body is a graph of its own (named "body"), read with its own names; the
 * loop is built from it by loom_graph_add_loop, which copies it. */
loom_status loom__lir_parse_loop(parser *p, stmt *st) {
  DESC_BUF;
  if (p->loop_depth == LIR_MAX_LOOP_DEPTH)
    return FAIL(&st->op_tok, "loops nest more than %d deep", LIR_MAX_LOOP_DEPTH);
  loop_parts lp;
  memset(&lp, 0, sizeof lp);
  lp.loop_tok = st->op_tok;
  lp.fused = st->op == LOOM_OP_FUSED;
  lp.what = lp.fused ? "fused op" : "loop";
  TRY(parse_loop_header(p, &lp));
  scope other = {0};
  loom_status s = loom_graph_create("body", &other.g);
  if (s) return s;
  scope_swap(p, &other); /* `other` is now the enclosing graph's scope */
  p->up = &other;
  p->loop_depth++;
  const char *outer_what = p->body_what;
  p->body_what = lp.what;
  s = parse_loop_lines(p, &other, &lp);
  p->body_what = outer_what;
  if (!s && (s = loom_graph_return(p->g, lp.outs, lp.n_out))) loom__lex_locate(&p->lx, &p->tok, s);
  p->loop_depth--;
  scope_swap(p, &other); /* and the body's again */
  if (!s) s = finish_loop(p, st, &lp, other.g);
  loom_graph_destroy(other.g);
  loom__free(other.names);
  loom__free(lp.operands);
  loom__free(lp.rules);
  return s;
}
