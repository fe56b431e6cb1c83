/* Products in the forms the chunk rewrite streams (loom__chunk_streamable, passes.h).
 *
 * Two forms of a product keep an operand from ever being streamed, whatever the cut:
 *   A^T v      `dot (transpose A) v` with v a vector: the region of a cut along A's rows reads
 *              A through the transpose, whose piece along the contraction is not a piece of A
 *              the region can slice in place, so A is held whole (mvt's second product). The
 *              same product as `dot v A` sums A's rows, which a cut by A's rows streams.
 *   (A B)(C D) a product of two products: either product's result is read whole by every
 *              piece of the last one, so it is held whole, and at a limit under one matrix
 *              nothing fits (3mm at an eighth). The chain associated along one side,
 *              ((A B) C) D or A (B (C D)), is a row (or column) pass in which each piece reads
 *              one block of the first (last) input and streams the other three.
 * Both are exact rewrites of the sums up to their order (f32 rounding).
 */
#include <stdio.h>
#include <string.h>

#include "ir/passes.h"

static bool is_matrix(const loom_graph *g, int32_t v) {
  return g->values[v].type.rank == 2;
}

/* v when it is `transpose A perm=[1,0]` of a matrix: A; else -1. */
static int32_t transposed_matrix(const loom_graph *g, int32_t v) {
  int32_t o = g->values[v].op;
  if (o < 0 || g->ops[o].kind != LOOM_OP_TRANSPOSE || !is_matrix(g, v)) return -1;
  const loom_int_list *p = &g->ops[o].attrs.perm;
  return p->count == 2 && p->v[0] == 1 && p->v[1] == 0 ? g->ops[o].inputs[0] : -1;
}

/* v when it is a product of two matrices read by one op alone: its op; else -1. */
static int32_t lone_matrix_product(const loom_graph *g, const int32_t *uses, int32_t v) {
  int32_t o = g->values[v].op;
  if (o < 0 || g->ops[o].kind != LOOM_OP_DOT || uses[v] != 1) return -1;
  const loom__op *op = &g->ops[o];
  return is_matrix(g, op->inputs[0]) && is_matrix(g, op->inputs[1]) ? o : -1;
}

static double dim(const loom_graph *g, int32_t v, int32_t axis) {
  return (double)g->values[v].type.dims[axis];
}

static loom_value dot2(loom__rebuild *rb, loom_value a, loom_value b) {
  loom_value v = LOOM_VALUE_NONE;
  loom_value in[2] = {a, b};
  (void)loom_graph_add(rb->dst, LOOM_OP_DOT, in, 2, NULL, NULL, NULL, &v, 1);
  return v;
}

/* dot op o of (A B)(C D) as a chain along one side, the one of fewer flops (rows on a tie). */
static loom_status rewrite_chain(loom__rebuild *rb, int32_t o, int32_t left, int32_t right, char *what,
                                 size_t what_size) {
  const loom_graph *g = rb->src;
  const int32_t *l = g->ops[left].inputs, *r = g->ops[right].inputs;
  double m = dim(g, l[0], 0), k1 = dim(g, l[0], 1), k2 = dim(g, l[1], 1), k3 = dim(g, r[0], 1),
         n = dim(g, r[1], 1);
  double by_rows = m * k1 * k2 + m * k2 * k3 + m * k3 * n, by_cols = k2 * k3 * n + k1 * k2 * n + m * k1 * n;
  loom_value a = loom__rebuild_get(rb, l[0]), b = loom__rebuild_get(rb, l[1]),
             c = loom__rebuild_get(rb, r[0]), d = loom__rebuild_get(rb, r[1]), v;
  if (by_rows <= by_cols)
    v = dot2(rb, dot2(rb, dot2(rb, a, b), c), d);
  else
    v = dot2(rb, a, dot2(rb, b, dot2(rb, c, d)));
  if (v.id < 0) return rb->dst->error ? rb->dst->error : LOOM_ERR_INTERNAL;
  loom__rebuild_set(rb, g->ops[o].outputs[0], v);
  char name[32];
  snprintf(what, what_size, "dot '%s' of two products as %s",
           loom__value_label(g, g->ops[o].outputs[0], name, sizeof name),
           by_rows <= by_cols ? "((A B) C) D" : "A (B (C D))");
  return LOOM_OK;
}

/* Rewrites op o when it has one of the two forms; *done says whether it did. */
static loom_status rewrite_op(loom__rebuild *rb, const int32_t *uses, int32_t o, bool *done, char *what,
                              size_t what_size) {
  const loom_graph *g = rb->src;
  const loom__op *op = &g->ops[o];
  *done = false;
  if (op->kind != LOOM_OP_DOT) return LOOM_OK;
  int32_t a = transposed_matrix(g, op->inputs[0]);
  if (a >= 0 && g->values[op->inputs[1]].type.rank == 1) {
    loom_value v = dot2(rb, loom__rebuild_get(rb, op->inputs[1]), loom__rebuild_get(rb, a));
    if (v.id < 0) return rb->dst->error ? rb->dst->error : LOOM_ERR_INTERNAL;
    loom__rebuild_set(rb, op->outputs[0], v);
    char name[32];
    snprintf(what, what_size, "dot '%s' of a transposed matrix and a vector as the vector's product with it",
             loom__value_label(g, op->outputs[0], name, sizeof name));
    *done = true;
    return LOOM_OK;
  }
  int32_t left = lone_matrix_product(g, uses, op->inputs[0]),
          right = lone_matrix_product(g, uses, op->inputs[1]);
  if (left < 0 || right < 0 || left == right) return LOOM_OK;
  *done = true;
  return rewrite_chain(rb, o, left, right, what, what_size);
}

loom_status loom__chunk_streamable(const loom_graph *g, loom_graph **out, char *what, size_t what_size) {
  *out = NULL;
  what[0] = '\0';
  int32_t *uses = loom__calloc((size_t)g->n_values + 1, sizeof *uses);
  if (!uses) return loom__oom("the chunk rewrite's product forms");
  loom__use_counts(g, uses);
  loom__rebuild rb;
  loom_status s = loom__rebuild_init(&rb, g);
  int32_t changed = 0;
  for (int32_t o = 0; !s && o < g->n_ops; o++) {
    bool done = false;
    char one[200];
    s = rewrite_op(&rb, uses, o, &done, one, sizeof one);
    if (!s && !done) s = loom__rebuild_copy(&rb, o);
    if (!s && done && changed++ == 0) snprintf(what, what_size, "%s", one);
  }
  if (!s && changed > 1) {
    size_t used = strlen(what);
    snprintf(what + used, what_size - used, " (and %d more)", (int)(changed - 1));
  }
  if (!s && changed) s = loom__rebuild_finish(&rb, out);
  loom__rebuild_deinit(&rb);
  loom__free(uses);
  if (!s && !changed) return LOOM_ERR_UNSUPPORTED;
  return s;
}
