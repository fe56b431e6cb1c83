/* Fused ops (docs/ir-fusion.md): a body graph the backends run as one kernel.
 *
 * The body's form is what every evaluator relies on (a cpu block loop, an OpenCL or CUDA kernel
 * generated from the body), so it is checked once, here, where the fusion pass and the parser
 * build the op: a backend may then read the body without checking it again.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ir/attention.h"
#include "ir/ir.h"
#include "ir/rebuild.h"

/* The role a body value plays in the form. */
typedef enum role {
  ROLE_PARAM,
  ROLE_VIEW,    /* a view of a parameter */
  ROLE_SCALAR,  /* a rank-0 constant or a fill */
  ROLE_ELEMENT, /* an elementwise or small dot value, over the space */
  ROLE_FINAL,   /* a result of the final op */
} role;

static loom_status body_fail(const loom_graph *b, const loom__op *op, const char *fmt, ...) LOOM_PRINTF(3, 4);
static loom_status body_fail(const loom_graph *b, const loom__op *op, const char *fmt, ...) {
  char label[32], why[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  return loom__error(LOOM_ERR_INVALID_ARGUMENT, "fused body: %s '%s': %s", loom_op_name(op->kind),
                     loom__value_label(b, op->outputs[0], label, sizeof label), why);
}

static bool is_elementwise(loom__op_class c) {
  return c == LOOM_CLASS_UNARY || c == LOOM_CLASS_BINARY || c == LOOM_CLASS_COMPARE ||
         c == LOOM_CLASS_LOGIC || c == LOOM_CLASS_SELECT || c == LOOM_CLASS_CAST;
}

static bool is_final_kind(loom_op k) {
  return k == LOOM_OP_REDUCE_SUM || k == LOOM_OP_REDUCE_PROD || k == LOOM_OP_REDUCE_MAX ||
         k == LOOM_OP_REDUCE_MIN || k == LOOM_OP_ARGMAX || k == LOOM_OP_ARGMIN || k == LOOM_OP_TOPK;
}

static bool is_view_kind(loom_op k) {
  return k == LOOM_OP_RESHAPE || k == LOOM_OP_BROADCAST || k == LOOM_OP_TRANSPOSE || k == LOOM_OP_SLICE;
}

/* Whether t has S's rank and broadcasts to S (each axis S's or 1). */
static bool over_space(const loom_type *t, const loom_type *s) {
  if (t->rank != s->rank) return false;
  for (int32_t d = 0; d < t->rank; d++)
    if (t->dims[d] != s->dims[d] && t->dims[d] != 1) return false;
  return true;
}

const loom__op *loom__fused_final(const loom_graph *b) {
  if (b->n_ops == 0) return NULL;
  const loom__op *last = &b->ops[b->n_ops - 1];
  return is_final_kind(last->kind) ? last : NULL;
}

const loom_type *loom__fused_space(const loom_graph *b) {
  const loom__op *final = loom__fused_final(b);
  if (final) return &b->values[final->inputs[0]].type;
  return b->n_outputs > 0 ? &b->values[b->outputs[0]].type : NULL;
}

/* The shape of the body: its last op and the value the space is the type of. */
static loom_status check_shape(const loom_graph *b, const loom__op **out_final, int32_t *out_space_value) {
  if (b->n_ops == 0)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "fused body: has no op (a fused op computes something)");
  if (b->n_outputs < 1 || b->n_outputs > LOOM_FUSE_MAX_RESULTS)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "fused body: returns %d values, a fused op gives 1 or %d",
                       (int)b->n_outputs, LOOM_FUSE_MAX_RESULTS);
  const loom__op *last = &b->ops[b->n_ops - 1];
  const loom__op *final = loom__fused_final(b);
  *out_final = final;
  if (final) {
    if (final->n_outputs != b->n_outputs)
      return body_fail(b, final, "the final op's %d results must be the body's outputs (it returns %d)",
                       (int) final->n_outputs, (int)b->n_outputs);
    for (int32_t j = 0; j < b->n_outputs; j++)
      if (b->outputs[j] != final->outputs[j])
        return body_fail(b, final, "the body's output %d is not the final op's result %d", (int)j + 1,
                         (int)j + 1);
    *out_space_value = final->inputs[0];
  } else {
    if (b->n_outputs != 1 || b->outputs[0] != last->outputs[0])
      return body_fail(b, last,
                       "a body without a final reduction returns one value, the result of its last op");
    if (!is_elementwise(loom__op_info_of(last->kind)->cls) && last->kind != LOOM_OP_DOT)
      return body_fail(b, last,
                       "is not an op a fused body may end in (an elementwise op, a small dot, "
                       "reduce_sum/prod/max/min, argmax/argmin or topk)");
    *out_space_value = last->outputs[0];
  }
  const loom_type *s = &b->values[*out_space_value].type;
  if (s->rank < 1) {
    char t[LOOM_TYPE_STRING_MAX];
    return loom__error(LOOM_ERR_INVALID_ARGUMENT,
                       "fused body: its space %s has rank 0 (a fused op needs rank >= 1)",
                       loom_type_format(s, t, sizeof t));
  }
  return LOOM_OK;
}

/* An elementwise op's operand: a parameter or view over the space, a scalar, or an earlier
 * elementwise or dot value. */
static loom_status check_operand(const loom_graph *b, const loom__op *op, int32_t i, const role *roles,
                                 const loom_type *s) {
  int32_t v = op->inputs[i];
  const loom_type *t = &b->values[v].type;
  char ts[LOOM_TYPE_STRING_MAX], ss[LOOM_TYPE_STRING_MAX], label[32];
  if (roles[v] == ROLE_FINAL) return body_fail(b, op, "reads a result of the final op");
  if (roles[v] == ROLE_SCALAR && (t->rank == 0 || over_space(t, s))) return LOOM_OK;
  if (over_space(t, s)) return LOOM_OK;
  return body_fail(b, op,
                   "operand %d '%s' is %s, which does not have the rank of the space %s and broadcast to it",
                   (int)i + 1, loom__value_label(b, v, label, sizeof label),
                   loom_type_format(t, ts, sizeof ts), loom_type_format(s, ss, sizeof ss));
}

static loom_status check_dot(const loom_graph *b, const loom__op *op, const role *roles, const loom_type *s) {
  for (int32_t i = 0; i < 2; i++) {
    int32_t v = op->inputs[i];
    if (roles[v] != ROLE_PARAM && roles[v] != ROLE_VIEW)
      return body_fail(b, op, "operand %d is not a parameter or a view of one (a fused dot reads its inputs)",
                       (int)i + 1);
    if (b->values[v].type.rank != 2) return body_fail(b, op, "operand %d is not a matrix", (int)i + 1);
  }
  int64_t k = b->values[op->inputs[0]].type.dims[1];
  /* Past LOOM_FUSE_MAX_K only below a topk of the smallest along a matrix's rows, as the fuse
   * rewrite takes one (fuse.c, gemm_dot): the cpu evaluator runs it as GEMM tiles */
  const loom__op *fin = loom__fused_final(b);
  bool gemm = fin && fin->kind == LOOM_OP_TOPK && !fin->attrs.largest && s->rank == 2 &&
              s->dtype == LOOM_F32 && b->values[op->outputs[0]].type.dtype == LOOM_F32;
  if (k > LOOM_FUSE_MAX_K && !gemm)
    return body_fail(b, op, "contracts %lld elements; a fused dot contracts at most %d", (long long)k,
                     LOOM_FUSE_MAX_K);
  char ts[LOOM_TYPE_STRING_MAX], ss[LOOM_TYPE_STRING_MAX];
  const loom_type *t = &b->values[op->outputs[0]].type;
  if (!over_space(t, s))
    return body_fail(b, op, "its result %s does not have the rank of the space %s and broadcast to it",
                     loom_type_format(t, ts, sizeof ts), loom_type_format(s, ss, sizeof ss));
  return LOOM_OK;
}

/* One op before the final one: sets the role of its result. */
static loom_status check_op(const loom_graph *b, const loom__op *op, role *roles, const loom_type *s) {
  loom__op_class cls = loom__op_info_of(op->kind)->cls;
  int32_t r = op->outputs[0];
  if (is_view_kind(op->kind)) {
    int32_t in = op->inputs[0];
    if (roles[in] != ROLE_PARAM && roles[in] != ROLE_VIEW)
      return body_fail(b, op, "is a view of a computed value; a fused body views only its parameters");
    roles[r] = ROLE_VIEW;
    return LOOM_OK;
  }
  if (op->kind == LOOM_OP_FILL || (op->kind == LOOM_OP_CONSTANT && b->values[r].type.rank == 0)) {
    roles[r] = ROLE_SCALAR;
    return LOOM_OK;
  }
  if (op->kind == LOOM_OP_DOT) {
    loom_status st = check_dot(b, op, roles, s);
    roles[r] = ROLE_ELEMENT;
    return st;
  }
  if (!is_elementwise(cls)) {
    if (is_final_kind(op->kind))
      return body_fail(b, op,
                       "a reduction before the body's last op (a fused body ends in its one reduction)");
    return body_fail(b, op,
                     "is not allowed in a fused body (views of parameters, scalar constants, "
                     "elementwise ops, dots of k <= %d, then one reduction, argmax/argmin or topk)",
                     LOOM_FUSE_MAX_K);
  }
  for (int32_t i = 0; i < op->n_inputs; i++) {
    loom_status st = check_operand(b, op, i, roles, s);
    if (st) return st;
  }
  char ts[LOOM_TYPE_STRING_MAX], ss[LOOM_TYPE_STRING_MAX];
  if (!over_space(&b->values[r].type, s))
    return body_fail(b, op, "its result %s does not have the rank of the space %s and broadcast to it",
                     loom_type_format(&b->values[r].type, ts, sizeof ts), loom_type_format(s, ss, sizeof ss));
  roles[r] = ROLE_ELEMENT;
  return LOOM_OK;
}

/* Every value but a parameter is read: an unread value is work an evaluator would do for
 * nothing, and the final op's input is then the last elementwise value. */
static loom_status check_read(const loom_graph *b, const role *roles) {
  bool *read = loom__calloc((size_t)LOOM_MAX(b->n_values, 1), sizeof *read);
  if (!read) return loom__oom("checking a fused body");
  for (int32_t o = 0; o < b->n_ops; o++)
    for (int32_t i = 0; i < b->ops[o].n_inputs; i++) read[b->ops[o].inputs[i]] = true;
  for (int32_t j = 0; j < b->n_outputs; j++) read[b->outputs[j]] = true;
  loom_status st = LOOM_OK;
  for (int32_t o = 0; !st && o < b->n_ops; o++)
    for (int32_t r = 0; !st && r < b->ops[o].n_outputs; r++)
      if (!read[b->ops[o].outputs[r]] && roles[b->ops[o].outputs[r]] != ROLE_PARAM)
        st = body_fail(b, &b->ops[o], "its result is never read");
  loom__free(read);
  return st;
}

loom_status loom__fused_check(const loom_graph *b) {
  if (loom__attention_body(b, NULL)) return LOOM_OK; /* the second form (attention.h) */
  const loom__op *final = NULL;
  int32_t space_value = -1;
  loom_status st = check_shape(b, &final, &space_value);
  if (st) return st;
  const loom_type *s = &b->values[space_value].type;
  role *roles = loom__calloc((size_t)LOOM_MAX(b->n_values, 1), sizeof *roles);
  if (!roles) return loom__oom("checking a fused body");
  for (int32_t o = 0; !st && o < b->n_ops; o++) {
    const loom__op *op = &b->ops[o];
    if (op == final) break;
    if (op->n_outputs != 1) st = body_fail(b, op, "has %d results before the final op", (int)op->n_outputs);
    if (!st) st = check_op(b, op, roles, s);
  }
  if (!st && final) {
    int32_t in = final->inputs[0];
    const loom__op *prev = b->n_ops >= 2 ? &b->ops[b->n_ops - 2] : NULL;
    char label[32];
    if (roles[in] != ROLE_ELEMENT || !prev || prev->outputs[0] != in)
      st = body_fail(b, final, "reads '%s', which is not the last elementwise or dot value of the body",
                     loom__value_label(b, in, label, sizeof label));
    for (int32_t r = 0; r < final->n_outputs; r++) roles[final->outputs[r]] = ROLE_FINAL;
  }
  if (!st) st = check_read(b, roles);
  loom__free(roles);
  return st;
}

static loom_status bad(const char *fmt, ...) LOOM_PRINTF(1, 2);
static loom_status bad(const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return loom__error(LOOM_ERR_INVALID_ARGUMENT, "fused: %s", msg);
}

static loom_status check_operands(const loom_graph *g, const loom_graph *body, const loom_value *operands,
                                  int32_t n) {
  if (n != body->n_params)
    return bad("%d operand%s for a body of %d parameter%s", (int)n, n == 1 ? "" : "s", (int)body->n_params,
               body->n_params == 1 ? "" : "s");
  for (int32_t i = 0; i < n; i++) {
    if (!loom__value_ok(g, operands[i]))
      return bad("operand %d is not a value of graph '%s'", (int)i + 1, g->name);
    const loom_type *t = &g->values[operands[i].id].type, *p = &body->values[body->params[i]].type;
    if (!loom_type_equal(t, p)) {
      char a[LOOM_TYPE_STRING_MAX], c[LOOM_TYPE_STRING_MAX], l1[32], l2[32];
      return bad("operand %d '%s' is %s, its body parameter '%s' %s", (int)i + 1,
                 loom__value_label(g, operands[i].id, l1, sizeof l1), loom_type_format(t, a, sizeof a),
                 loom__value_label(body, body->params[i], l2, sizeof l2), loom_type_format(p, c, sizeof c));
    }
  }
  return LOOM_OK;
}

loom_status loom__graph_add_fused(loom_graph *g, const loom_graph *body, const loom_value *operands,
                                  int32_t n, loom_value *outs) {
  if (!g) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom__graph_add_fused: graph is NULL");
  if (g->error) return g->error;
  loom_status s = LOOM_OK;
  if (g->returned)
    s = bad("the graph has already returned");
  else if (!body || n < 0 || (n > 0 && !operands))
    s = bad("missing body or operands");
  else if ((s = loom_graph_verify(body)))
    loom__error_prefix("fused body: ");
  if (!s) s = check_operands(g, body, operands, n);
  if (!s && (s = loom__fused_check(body))) loom__error_prefix("fused: ");
  loom_graph *copy = NULL;
  if (!s && loom_graph_clone(body, &copy)) s = loom__oom("a fused body");
  if (!s) {
    loom_type types[LOOM_FUSE_MAX_RESULTS];
    for (int32_t j = 0; j < body->n_outputs; j++) types[j] = body->values[body->outputs[j]].type;
    loom_value tmp[LOOM_FUSE_MAX_RESULTS];
    s = loom__graph_append(g, LOOM_OP_FUSED, operands, n, NULL, types, body->n_outputs, NULL,
                           outs ? outs : tmp, body->n_outputs);
    if (!s) {
      g->ops[g->n_ops - 1].fused = copy;
      copy = NULL;
    }
  }
  loom_graph_destroy(copy);
  return s ? loom__graph_fail(g, s) : LOOM_OK;
}

loom_status loom_graph_fused_get(const loom_graph *g, int32_t index, const loom_graph **out_body) {
  if (!g || index < 0 || index >= g->n_ops || !g->ops[index].fused || !out_body)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_graph_fused_get: op %d is not a fused op",
                       (int)index);
  *out_body = g->ops[index].fused;
  return LOOM_OK;
}

/* ---- unfusing ------------------------------------------------------------------------------ */

/* Copies fused op `o` of rb's source as its body's ops, the body's parameters standing for the
 * op's operands and its outputs for the op's results. */
static loom_status inline_fused(loom__rebuild *rb, int32_t o) {
  const loom__op *op = &rb->src->ops[o];
  const loom_graph *body = op->fused;
  loom__rebuild in = {.src = body, .dst = rb->dst};
  in.map = loom__malloc(sizeof(int32_t) * (size_t)(body->n_values ? body->n_values : 1));
  if (!in.map) return loom__oom("a fused body's inlining");
  for (int32_t v = 0; v < body->n_values; v++) in.map[v] = -1;
  for (int32_t p = 0; p < body->n_params; p++)
    in.map[body->params[p]] = loom__rebuild_get(rb, op->inputs[p]).id;
  loom_status s = LOOM_OK;
  for (int32_t i = 0; !s && i < body->n_ops; i++) s = loom__rebuild_copy(&in, i);
  for (int32_t r = 0; !s && r < op->n_outputs; r++)
    loom__rebuild_set(rb, op->outputs[r], loom__rebuild_get(&in, body->outputs[r]));
  loom__free(in.map); /* in.dst is rb's graph: not in's to free */
  return s;
}

loom_status loom__graph_unfuse(const loom_graph *g, loom_graph **out) {
  *out = NULL;
  loom__rebuild rb;
  loom_status s = loom__rebuild_init(&rb, g);
  for (int32_t o = 0; !s && o < g->n_ops; o++)
    s = g->ops[o].fused ? inline_fused(&rb, o) : loom__rebuild_copy(&rb, o);
  if (!s) s = loom__rebuild_finish(&rb, out);
  loom__rebuild_deinit(&rb);
  return s;
}
