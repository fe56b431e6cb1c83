/* Einsum as a broadcast product and a sum: each operand's axes are put in one order (the
 * output's letters, then the summed ones), missing letters become axes of 1, the operands are
 * multiplied with broadcasting and the summed letters reduced. Exact as written for any number
 * of operands, at the memory of the full product (the chunk rewrite can cut it under a limit).
 * Repeated letters in one operand (diagonals) and ellipses are refused. */
#include <string.h>

#include "onnx/onnx_internal.h"

#define G (c->g)
#define TY(v) loom__onnx_type(c, v)

#define MAX_OPERANDS 8

typedef struct equation {
  int32_t n_in;
  char in[MAX_OPERANDS][LOOM_MAX_RANK + 1];
  char out[LOOM_MAX_RANK + 1];
  bool explicit_out;
} equation;

/* Parses "ij,jk->ik" (spaces ignored); false for what this lowering does not take. */
static bool parse(const char *text, size_t len, equation *e) {
  memset(e, 0, sizeof *e);
  int32_t pos = 0;
  char *cur = e->in[0];
  for (size_t i = 0; i < len; i++) {
    char ch = text[i];
    if (ch == ' ') continue;
    if (ch == ',') {
      if (++e->n_in >= MAX_OPERANDS) return false;
      cur = e->in[e->n_in], pos = 0;
    } else if (ch == '-' && i + 1 < len && text[i + 1] == '>') {
      e->explicit_out = true, cur = e->out, pos = 0, i++;
    } else if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')) {
      if (pos >= LOOM_MAX_RANK || strchr(cur, ch)) return false; /* too many axes, or a diagonal */
      cur[pos++] = ch;
    } else {
      return false; /* an ellipsis, or not an equation */
    }
  }
  e->n_in++;
  if (!e->explicit_out) { /* implicit: the letters seen once, in alphabetical order */
    int32_t o = 0;
    for (int ch = 'A'; ch <= 'z'; ch++) {
      int32_t seen = 0;
      for (int32_t k = 0; k < e->n_in; k++) seen += strchr(e->in[k], ch) != NULL;
      if (seen == 1 && o < LOOM_MAX_RANK) e->out[o++] = (char)ch;
    }
  }
  return true;
}

static loom_status lower_einsum(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  const Onnx__AttributeProto *a = loom__onnx_attr(n, "equation");
  equation e;
  if (!a || !a->has_s || !parse((const char *)a->s.data, a->s.len, &e))
    return loom__onnx_refuse(
        c, "this equation (diagonals, ellipses and more than 8 operands are not supported)");
  if (e.n_in != (int32_t)n->n_input)
    return loom__onnx_invalid(c, "%d operands for %zu inputs", e.n_in, n->n_input);
  char order[2 * LOOM_MAX_RANK + 1] = {0};
  strcpy(order, e.out);
  for (int32_t k = 0; k < e.n_in; k++)
    for (const char *p = e.in[k]; *p; p++)
      if (!strchr(order, *p)) order[strlen(order)] = *p;
  int32_t r = (int32_t)strlen(order), r_out = (int32_t)strlen(e.out);
  for (int32_t j = 0; j < r_out; j++) {
    bool found = false;
    for (int32_t k = 0; k < e.n_in; k++) found = found || strchr(e.in[k], e.out[j]);
    if (!found) return loom__onnx_invalid(c, "output letter '%c' is in no operand", e.out[j]);
  }
  if (r > LOOM_MAX_RANK) return loom__onnx_refuse(c, "more than 8 letters");
  loom_value acc = LOOM_VALUE_NONE;
  for (int32_t k = 0; k < e.n_in; k++) {
    loom_value x = loom__onnx_value(c, k);
    const loom_type t = *TY(x);
    int32_t nk = (int32_t)strlen(e.in[k]);
    if (nk != t.rank)
      return loom__onnx_invalid(c, "operand %d has rank %d, the equation says %d", k, t.rank, nk);
    int64_t perm[LOOM_MAX_RANK], dims[LOOM_MAX_RANK];
    int32_t np = 0;
    for (int32_t j = 0; j < r; j++) {
      const char *at = strchr(e.in[k], order[j]);
      if (at) perm[np++] = at - e.in[k];
      dims[j] = at ? t.dims[at - e.in[k]] : 1;
    }
    x = loom_reshape(G, loom_transpose(G, x, t.rank, perm), r, dims);
    acc = k ? loom_binary(G, LOOM_OP_MUL, acc, x) : x;
  }
  if (r > r_out) {
    int64_t axes[LOOM_MAX_RANK];
    for (int32_t j = r_out; j < r; j++) axes[j - r_out] = j;
    acc = loom_reduce(G, LOOM_OP_REDUCE_SUM, acc, r - r_out, axes, false);
  } else if (e.n_in == 1) {
    acc = loom_reshape(G, acc, TY(acc)->rank, TY(acc)->dims);
  }
  return loom__onnx_out(c, 0, acc);
}

/* clang-format off */
const loom__onnx_op loom__onnx_ops_einsum[] = {
    {"Einsum", lower_einsum, 0, "equation"},
    {NULL, NULL, 0, NULL},
};
/* clang-format on */
