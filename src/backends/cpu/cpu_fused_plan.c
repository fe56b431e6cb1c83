/* The cpu backend's fused op, set up (cpu_fused_plan.h): which body values are leaves, constants, elementwise
 * ops or small dots, in which kind they compute, and which final op ends the body; what cannot run fused is
 * refused here, to run op by op. */
#include "backends/cpu/cpu_fused_plan.h"
#include "backends/cpu/cpu_isa.h"

static bool share_slots(const loom_graph *body, plan *P);
static void merge_rows(const loom_graph *body, plan *P);
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- setting up ---------------------------------------------------------------------------- */

kind loom__cfz_kind_of(loom_dtype d) {
  switch (d) {
    case LOOM_F16:
    case LOOM_BF16:
    case LOOM_F32:
      return K_F32;
    case LOOM_F64:
      return K_F64;
    default:
      return K_I64;
  }
}

static bool supported_dtype(loom_dtype d) {
  return d != LOOM_C64 && d != LOOM_C128;
}

static loom_status unsupported(const loom_graph *body, const loom__op *op, const char *why) {
  return loom__error(LOOM_ERR_UNSUPPORTED, "cpu: fused: %s %s is not run fused on cpu (%s)",
                     loom_op_name(op->kind), loom_dtype_name(body->values[op->outputs[0]].type.dtype), why);
}

/* Reads element `off` of a dtype's storage as a kind's scalar. */
scalar loom__cfz_load_scalar(const char *base, loom_dtype dt, int64_t off) {
  scalar s = {0};
  switch (dt) {
    case LOOM_BOOL:
      s.i = ((const uint8_t *)base)[off] != 0;
      break;
    case LOOM_I8:
      s.i = ((const int8_t *)base)[off];
      break;
    case LOOM_U8:
      s.i = ((const uint8_t *)base)[off];
      break;
    case LOOM_I16:
      s.i = ((const int16_t *)base)[off];
      break;
    case LOOM_I32:
      s.i = ((const int32_t *)base)[off];
      break;
    case LOOM_I64:
      s.i = ((const int64_t *)base)[off];
      break;
    case LOOM_F16:
      s.f = loom_f16_to_f32(((const uint16_t *)base)[off]);
      break;
    case LOOM_BF16:
      s.f = loom__cpu_bf16_to_f32(((const uint16_t *)base)[off]);
      break;
    case LOOM_F32:
      s.f = ((const float *)base)[off];
      break;
    case LOOM_F64:
      s.d = ((const double *)base)[off];
      break;
    default:
      break;
  }
  return s;
}

/* A fill's value in its dtype, as cpu_elementwise.c writes it: integers exactly (wrapped to
 * the width) or from a float truncated and saturated, halves rounded to their precision. */
int64_t loom__cfz_wrap_int(int64_t x, loom_dtype dt);
float loom__cfz_round_half(float x, loom_dtype dt);

static scalar fill_scalar(const loom_attrs *a, loom_dtype dt) {
  scalar s = {0};
  kind k = loom__cfz_kind_of(dt);
  if (k == K_I64) {
    int64_t lo, hi;
    loom__cfz_int_range(dt, &lo, &hi);
    s.i = a->value_is_int   ? loom__cfz_wrap_int(a->ivalue, dt)
          : dt == LOOM_BOOL ? a->value != 0
                            : loom__cfz_f64_to_int(a->value, lo, hi);
  } else if (k == K_F32) {
    s.f = a->value_is_int ? (float)a->ivalue : (float)a->value;
    if (dt != LOOM_F32) s.f = loom__cfz_round_half(s.f, dt);
  } else {
    s.d = a->value_is_int ? (double)a->ivalue : a->value;
  }
  return s;
}

/* The value wrapped or rounded to its dtype, as the unfused kernels store it. */
int64_t loom__cfz_wrap_int(int64_t x, loom_dtype dt) {
  switch (dt) {
    case LOOM_BOOL:
      return x != 0;
    case LOOM_I8:
      return (int8_t)x;
    case LOOM_U8:
      return (uint8_t)x;
    case LOOM_I16:
      return (int16_t)x;
    case LOOM_I32:
      return (int32_t)x;
    default:
      return x;
  }
}

float loom__cfz_round_half(float x, loom_dtype dt) {
  return dt == LOOM_F16 ? loom_f16_to_f32(loom_f32_to_f16(x)) : loom__cpu_bf16_to_f32(loom_f32_to_bf16(x));
}

/* A leaf's strides over S: its own type right-aligned against S, 0 where it broadcasts. */
static void leaf_strides(const plan *P, const loom_type *t, const int64_t *st, int64_t *out) {
  for (int32_t d = 0; d < P->r; d++) {
    int32_t e = d - (P->r - t->rank);
    out[d] = (e >= 0 && t->dims[e] != 1) ? st[e] : 0;
  }
}

static bool varies_last(const plan *P, const loom_type *t) {
  return P->M > 1 && t->rank >= 1 && t->dims[t->rank - 1] != 1;
}

static loom_status classify_final(const loom_graph *body, const loom__op *op, plan *P) {
  const loom_type *st = &body->values[op->inputs[0]].type;
  P->r = st->rank;
  for (int32_t d = 0; d < P->r; d++) P->dims[d] = st->dims[d];
  P->src = op->inputs[0];
  switch (op->kind) {
    case LOOM_OP_REDUCE_SUM:
      P->fin = F_SUM;
      break;
    case LOOM_OP_REDUCE_PROD:
      P->fin = F_PROD;
      break;
    case LOOM_OP_REDUCE_MEAN:
      P->fin = F_MEAN;
      break;
    case LOOM_OP_REDUCE_MAX:
      P->fin = F_MAX;
      break;
    case LOOM_OP_REDUCE_MIN:
      P->fin = F_MIN;
      break;
    case LOOM_OP_ARGMAX:
      P->fin = F_ARGMAX;
      break;
    case LOOM_OP_ARGMIN:
      P->fin = F_ARGMIN;
      break;
    default:
      P->fin = F_TOPK;
      P->k = op->attrs.k;
      P->largest = op->attrs.largest;
      break;
  }
  P->count = 1;
  if (P->fin <= F_MIN) {
    for (int32_t d = 0; d < P->r; d++) {
      P->reduced[d] = loom__axes_contain(&op->attrs, d, P->r);
      if (P->reduced[d]) P->count *= P->dims[d];
    }
  } else {
    if (!loom__axis_normalize(op->attrs.axis, P->r, &P->axis))
      return unsupported(body, op, "its axis is out of range");
    P->reduced[P->axis] = true;
    P->count = P->dims[P->axis];
    if ((P->fin == F_ARGMAX || P->fin == F_ARGMIN) && P->count == 0)
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "cpu: fused: %s over an empty axis",
                         loom_op_name(op->kind));
  }
  if ((P->fin == F_MAX || P->fin == F_MIN) && P->count == 0 && loom__cpu_elements(st) == 0) {
    bool any_out = true;
    for (int32_t d = 0; d < P->r; d++)
      if (!P->reduced[d] && P->dims[d] == 0) any_out = false;
    if (any_out)
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "cpu: fused: %s over an empty axis",
                         loom_op_name(op->kind));
  }
  if (P->fin == F_TOPK && (P->k < 0 || P->k > P->count))
    return unsupported(body, op, "k is larger than its axis");
  return LOOM_OK;
}

/* Output strides per S axis: dense over the kept axes (a kept-dims 1 changes no offset);
 * topk keeps its axis with k entries. */
static void output_strides(plan *P) {
  int64_t s = 1;
  for (int32_t d = P->r - 1; d >= 0; d--) {
    if (P->fin == F_TOPK && d == P->axis) {
      P->ostrides[d] = 0;
      P->kstride = s;
      s *= P->k;
      continue;
    }
    P->ostrides[d] = P->reduced[d] ? 0 : s;
    if (!P->reduced[d]) s *= P->dims[d];
  }
  P->nk = P->nr = 0;
  P->Ok = P->Or = 1;
  for (int32_t d = 0; d + 1 < P->r; d++) {
    if (P->reduced[d]) {
      P->rax[P->nr++] = d;
      P->Or *= P->dims[d];
    } else {
      P->kax[P->nk++] = d;
      P->Ok *= P->dims[d];
    }
  }
  P->last_red = P->reduced[P->r - 1];
  P->M = P->dims[P->r - 1];
  P->nb = (P->M + FB - 1) / FB;
}

/* A parameter or a view of one: where its data is and how it walks S. */
static void setup_leaf(plan *P, const loom_graph *body, const loom__view *in, const loom__layout *lay,
                       int32_t id) {
  fvalue *fv = &P->v[id];
  int32_t p = body->values[lay[id].base].result;
  const loom_type *t = &body->values[id].type;
  fv->role = R_LEAF;
  fv->dtype = t->dtype;
  fv->kind = loom__cfz_kind_of(t->dtype);
  fv->base = (const char *)in[p].data + lay[id].offset * (int64_t)loom_dtype_size(t->dtype);
  fv->slot = -1;
  /* a dot's operands do not align with S, but only the dot reads them, through these too */
  leaf_strides(P, t, lay[id].strides, fv->strides);
  fv->vec = varies_last(P, t) && fv->strides[P->r - 1] != 0;
}

static loom_status check_op(const loom_graph *body, const loom__op *op, const plan *P) {
  for (int32_t i = 0; i < op->n_inputs; i++)
    if (!supported_dtype(body->values[op->inputs[i]].type.dtype)) return unsupported(body, op, "complex");
  if (!supported_dtype(body->values[op->outputs[0]].type.dtype)) return unsupported(body, op, "complex");
  for (int32_t i = 0; i < op->n_inputs; i++)
    if (P->v[op->inputs[i]].role == R_NONE)
      return unsupported(body, op, "an operand outside the body's form");
  return LOOM_OK;
}

static loom_status setup_dot(const loom_graph *body, const loom__op *op, plan *P) {
  const loom_type *a = &body->values[op->inputs[0]].type, *b = &body->values[op->inputs[1]].type;
  fvalue *va = &P->v[op->inputs[0]], *vb = &P->v[op->inputs[1]];
  loom_dtype dt = body->values[op->outputs[0]].type.dtype;
  if (P->r != 2 || a->rank != 2 || b->rank != 2 || va->role != R_LEAF || vb->role != R_LEAF ||
      a->dims[1] > MAX_K || (dt != LOOM_F32 && dt != LOOM_F64))
    return unsupported(body, op, "only small f32/f64 dots of two views are inlined");
  fvalue *o = &P->v[op->outputs[0]];
  o->role = R_DOT;
  o->dtype = dt;
  o->kind = loom__cfz_kind_of(dt);
  o->vec = varies_last(P, &body->values[op->outputs[0]].type);
  if (o->vec) {
    o->slot = P->n_slots;
    P->n_slots += 1 + (int32_t)a->dims[1]; /* its result, then b's k packed rows */
  }
  return LOOM_OK;
}

/* A sum over the last axis of a product of two blocks (kernel_mv's `dot kt y` after the
 * pass's rewrite: mul, then reduce_sum) is summed as products in one pass, without storing
 * the products. Only where the product is read by nothing else. */
static void fuse_product_sum(const loom_graph *body, plan *P) {
  P->prod_b = -1;
  if ((P->fin != F_SUM && P->fin != F_MEAN) || !P->last_red || P->n_ops == 0) return;
  const loom__op *op = &body->ops[P->ops[P->n_ops - 1]];
  if (op->kind != LOOM_OP_MUL || op->outputs[0] != P->src) return;
  loom_dtype dt = P->v[P->src].dtype;
  if ((dt != LOOM_F32 && dt != LOOM_F64) || !P->v[op->inputs[0]].vec || !P->v[op->inputs[1]].vec) return;
  for (int32_t i = 0; i + 1 < body->n_ops; i++)
    for (int32_t k = 0; k < body->ops[i].n_inputs; k++)
      if (body->ops[i].inputs[k] == P->src) return;
  P->n_ops--;
  int32_t a = op->inputs[0], b = op->inputs[1];
  /* exp(e) * b, the exp read by nothing else (a Gaussian kernel's): the exp is taken in the
   * same pass too. */
  const loom__op *e = P->n_ops ? &body->ops[P->ops[P->n_ops - 1]] : NULL;
  if (e && e->kind == LOOM_OP_EXP && a != b && (e->outputs[0] == a || e->outputs[0] == b) &&
      P->v[e->inputs[0]].vec && !P->v[e->inputs[0]].absorbed) {
    int32_t x = e->outputs[0], readers = 0;
    for (int32_t i = 0; i < body->n_ops; i++)
      for (int32_t k = 0; k < body->ops[i].n_inputs; k++) readers += body->ops[i].inputs[k] == x;
    if (readers == 1) {
      if (x == b) b = a;
      a = e->inputs[0];
      P->n_ops--;
      P->prod_exp = true;
    }
  }
  P->src = a;
  P->prod_b = b;
}

/* A binary op of a block and a scalar (add, sub, mul) or a neg, read by one elementwise op
 * only, is not stored: its consumer applies it to the block as it reads it (tfm), with the
 * same rounding. In a kernel product this keeps s = sx + sy, t = 2 d and e = -0.5 d2 out of
 * memory: of the body's seven passes over a block four remain. */
static bool absorbable(const loom_graph *body, const plan *P, const loom__op *op) {
  const fvalue *o = &P->v[op->outputs[0]];
  if ((o->dtype != LOOM_F32 && o->dtype != LOOM_F64) || !o->vec) return false;
  if (op->kind == LOOM_OP_NEG) return !P->v[op->inputs[0]].absorbed;
  if (op->kind != LOOM_OP_ADD && op->kind != LOOM_OP_SUB && op->kind != LOOM_OP_MUL) return false;
  const fvalue *a = &P->v[op->inputs[0]], *b = &P->v[op->inputs[1]];
  return a->vec != b->vec && !(a->vec ? a : b)->absorbed;
}

/* How many times each value is read: by the body's ops, twice more when returned or folded by
 * the final op (so that no rule below takes it as read once). */
static void count_uses(const loom_graph *body, const plan *P, int32_t *uses) {
  memset(uses, 0, sizeof *uses * (size_t)body->n_values);
  for (int32_t i = 0; i < body->n_ops; i++)
    for (int32_t k = 0; k < body->ops[i].n_inputs; k++) uses[body->ops[i].inputs[k]]++;
  for (int32_t r = 0; r < body->n_outputs; r++) uses[body->outputs[r]] += 2;
  if (!P->prod_exp) uses[P->src] += 2;
  if (P->prod_b >= 0) uses[P->prod_b] += 2;
}

/* The op of P->ops after position q that reads value v, or NULL. */
static const loom__op *reader_of(const loom_graph *body, const plan *P, int32_t q, int32_t v) {
  for (int32_t c = q + 1; c < P->n_ops; c++) {
    const loom__op *user = &body->ops[P->ops[c]];
    for (int32_t k = 0; k < user->n_inputs; k++)
      if (user->inputs[k] == v) return user;
  }
  return NULL;
}

/* An f32 dot with k = 3 read once, by a binary op (through at most one absorbed scalar op),
 * is computed inside that op's loop: the distances' sx + sy - 2 x.y in one pass, the dot never
 * stored. */
static void find_dot_epilogues(const loom_graph *body, plan *P, const int32_t *uses) {
  for (int32_t id = 0; id < body->n_values; id++) P->v[id].epi_dot = P->v[id].epi_via = -1;
  for (int32_t q = 0; q < P->n_ops; q++) {
    const loom__op *op = &body->ops[P->ops[q]];
    int32_t d = op->outputs[0], via = -1;
    if (op->kind != LOOM_OP_DOT || !P->v[d].vec || P->v[d].dtype != LOOM_F32 || uses[d] != 1 ||
        body->values[op->inputs[0]].type.dims[1] != 3)
      continue;
    const loom__op *c = reader_of(body, P, q, d);
    if (c && P->v[c->outputs[0]].absorbed) {
      via = c->outputs[0];
      c = uses[via] == 1 ? reader_of(body, P, q, via) : NULL;
    }
    if (!c || loom__op_info_of(c->kind)->cls != LOOM_CLASS_BINARY || c->kind == LOOM_OP_POW) continue;
    fvalue *cv = &P->v[c->outputs[0]];
    int32_t mine = via >= 0 ? via : d;
    if (cv->absorbed || !cv->vec || cv->dtype != LOOM_F32 || c->inputs[0] == c->inputs[1]) continue;
    if (c->inputs[0] != mine && c->inputs[1] != mine) continue;
    /* one epilogue per op: in add(dot, dot) the second dot is computed as any operand */
    if (cv->epi_dot >= 0) continue;
    cv->epi_dot = d;
    cv->epi_via = via;
    P->v[d].in_epilogue = true;
  }
}

static void absorb_scalar_ops(const loom_graph *body, plan *P, const int32_t *uses) {
  for (int32_t q = 0; q < P->n_ops; q++) {
    const loom__op *op = &body->ops[P->ops[q]];
    int32_t o = op->outputs[0];
    if (uses[o] != 1 || !absorbable(body, P, op)) continue;
    if (P->prod_exp && o == P->src) { /* read by the exp of the product sum */
      P->v[o].absorbed = true;
      continue;
    }
    for (int32_t c = q + 1; c < P->n_ops; c++) { /* its one reader, if it is one of these */
      const loom__op *user = &body->ops[P->ops[c]];
      bool reads = false;
      for (int32_t k = 0; k < user->n_inputs; k++) reads |= user->inputs[k] == o;
      if (!reads) continue;
      loom__op_class cls = loom__op_info_of(user->kind)->cls;
      if ((cls == LOOM_CLASS_UNARY || cls == LOOM_CLASS_BINARY) && P->v[user->inputs[0]].kind == P->v[o].kind)
        P->v[o].absorbed = true;
      break;
    }
  }
}

/* An f32 operand the kernel sum reads as it is: a leaf (a block read in place or packed, or one
 * scalar per row) or a constant, with no absorbed op of its own. */
static bool ks_operand(const plan *P, int32_t v) {
  const fvalue *f = &P->v[v];
  return f->dtype == LOOM_F32 && !f->absorbed && (f->role == R_LEAF || f->role == R_CONST);
}

/* A chain value between two of the kernel sum's ops: computed per element, read once. */
static bool ks_link(const plan *P, const int32_t *uses, int32_t v) {
  const fvalue *f = &P->v[v];
  return f->role == R_EW && f->vec && f->dtype == LOOM_F32 && uses[v] == 1;
}

/* A Gaussian (or any exp-of-distance) kernel sum, sum_j exp(c * max(|x_i|^2 + |y_j|^2 - 2 x_i.y_j,
 * 0)) b_j, as the distance rewrite writes it and the peepholes above leave it: a 3-term dot,
 * its absorbed scalar op, the epilogue's add or sub of u, a maximum with a scalar, an absorbed
 * scalar op, the exp, the product with b and the sum. Its three passes over a block become one
 * loop with no store (cpu_fused_ksum.c), the exp computed inline (cpu_vmath.h) rather than
 * called: with AVX-512 or AVX2 as a 2^t whose log2 e and scale are folded into each row's
 * constants (the terms within a few ulp of the argument of the unfused ones), else in a loop
 * where the ops after the dot keep the unfused rounding, the row scalar is added inside the dot
 * and the exp differs (within 2 ulp, libmvec's 2.6). Anything else in the body, or a chain value
 * read twice, keeps the passes. */
static void find_kernel_sum(const loom_graph *body, plan *P, const int32_t *uses) {
  P->ks = false;
  if (!P->prod_exp || P->prod_b < 0 || P->v[P->src].dtype != LOOM_F32) return;
  const fvalue *B = &P->v[P->prod_b];
  if (B->role != R_LEAF || !B->vec || B->dtype != LOOM_F32) return;
  int32_t x = P->src, aff = -1, lo = -1, chain_ops = 0;
  if (P->v[x].absorbed) { /* the exp's input through its scalar op */
    const loom__op *op = loom__producer(body, x);
    aff = x;
    x = op->kind == LOOM_OP_NEG || P->v[op->inputs[0]].vec ? op->inputs[0] : op->inputs[1];
    chain_ops++;
  }
  if (!ks_link(P, uses, x) || P->v[x].absorbed) return;
  const loom__op *op = loom__producer(body, x);
  if (op->kind == LOOM_OP_MAXIMUM && P->v[op->inputs[0]].vec && !P->v[op->inputs[1]].vec &&
      ks_operand(P, op->inputs[1]) && P->v[x].epi_dot < 0) {
    lo = op->inputs[1];
    x = op->inputs[0];
    chain_ops++;
    if (!ks_link(P, uses, x) || P->v[x].absorbed) return;
    op = loom__producer(body, x);
  }
  /* the epilogue: (dot, through its absorbed op if any) + u, u + (dot) or (dot) - u */
  const fvalue *E = &P->v[x];
  if (E->epi_dot < 0 || (op->kind != LOOM_OP_ADD && op->kind != LOOM_OP_SUB)) return;
  int32_t mine = E->epi_via >= 0 ? E->epi_via : E->epi_dot;
  bool left = op->inputs[0] == mine;
  if (op->kind == LOOM_OP_SUB && !left) return;
  int32_t u = op->inputs[left ? 1 : 0];
  if (!ks_operand(P, u)) return;
  if (E->epi_via >= 0) { /* the dot's own absorbed op: d + c or d - c (m = 1) */
    const loom__op *v = loom__producer(body, E->epi_via);
    if (v->kind != LOOM_OP_ADD && !(v->kind == LOOM_OP_SUB && P->v[v->inputs[0]].vec)) return;
    chain_ops++;
  }
  if (P->n_ops != chain_ops + 2) return; /* the dot, the epilogue and the chain: nothing else */
  P->ks = true;
  P->ks_dot = E->epi_dot;
  P->ks_via = E->epi_via;
  P->ks_u = u;
  P->ks_sub = op->kind == LOOM_OP_SUB;
  P->ks_lo = lo;
  P->ks_aff = aff;
  /* The same condition as LOOM_KS_AVX512 in cpu_fused_ksum.c, which defines it for itself: an
   * #ifdef of that macro here was never true, and the kernel sum lost its AVX-512 loop (d0d7e3f;
   * the fused kmv 1.21x slower, docs/sched.md). */
#if defined(__x86_64__) && defined(__GNUC__)
  P->ks_avx512 = !loom__cpu_ks_portable && loom__cpu_isa_level() >= 4;
#endif
}

/* Classifies every body value; the parameters' views come from the caller's strides. */
loom_status loom__cfz_build_plan(const loom_graph *body, const loom__view *in, const loom__view *out, plan *P,
                                 loom__layout *lay) {
  memset(P, 0, sizeof *P);
  P->g = body;
  P->out = out;
  const loom__op *last = body->n_ops ? &body->ops[body->n_ops - 1] : NULL;
  if (!last || body->n_outputs < 1)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "cpu: fused: the body has no op or no output");
  loom__op_class lc = loom__op_info_of(last->kind)->cls;
  if (lc == LOOM_CLASS_REDUCE || lc == LOOM_CLASS_ARGREDUCE || lc == LOOM_CLASS_TOPK) {
    loom_status s = classify_final(body, last, P);
    if (s) return s;
  } else {
    const loom_type *t = &body->values[body->outputs[0]].type;
    P->fin = F_NONE;
    P->r = t->rank;
    for (int32_t d = 0; d < P->r; d++) P->dims[d] = t->dims[d];
    P->src = body->outputs[0];
  }
  if (P->r < 1) return unsupported(body, last, "a rank-0 space");
  output_strides(P);

  for (int32_t p = 0; p < body->n_params; p++) {
    int32_t id = body->params[p];
    memset(&lay[id], 0, sizeof lay[id]);
    lay[id].base = id;
    memcpy(lay[id].strides, in[p].strides, sizeof lay[id].strides);
  }
  loom_status s = loom__graph_layouts_given(body, lay);
  if (s) return s;
  P->v = calloc((size_t)body->n_values, sizeof *P->v);
  P->ops = malloc(sizeof *P->ops * (size_t)(body->n_ops + 1));
  P->leaves = malloc(sizeof *P->leaves * (size_t)(body->n_values + 1));
  if (!P->v || !P->ops || !P->leaves) return loom__error(LOOM_ERR_OUT_OF_MEMORY, "cpu: fused: out of memory");
  for (int32_t p = 0; p < body->n_params; p++) {
    int32_t id = body->params[p];
    if (!supported_dtype(in[p].type.dtype))
      return loom__error(LOOM_ERR_UNSUPPORTED, "cpu: fused: operand %d is %s: complex bodies run unfused",
                         (int)p + 1, loom_dtype_name(in[p].type.dtype));
    setup_leaf(P, body, in, lay, id);
  }
  int32_t n_body = body->n_ops - (P->fin != F_NONE);
  for (int32_t i = 0; i < n_body; i++) {
    const loom__op *op = &body->ops[i];
    const loom__op_class cls = loom__op_info_of(op->kind)->cls;
    int32_t o = op->outputs[0];
    const loom_type *t = &body->values[o].type;
    fvalue *fv = &P->v[o];
    fv->dtype = t->dtype;
    fv->kind = loom__cfz_kind_of(t->dtype);
    fv->slot = -1;
    if ((s = check_op(body, op, P))) return s;
    if (cls == LOOM_CLASS_LAYOUT) {
      int32_t base = lay[o].base;
      if (lay[o].owns || P->v[op->inputs[0]].role != R_LEAF || base < 0 || body->values[base].op != -1)
        return unsupported(body, op, "a layout op that is not a view of an operand");
      setup_leaf(P, body, in, lay, o);
      continue;
    }
    if (op->kind == LOOM_OP_FILL || (op->kind == LOOM_OP_CONSTANT && loom__cpu_elements(t) == 1)) {
      fv->role = R_CONST;
      fv->c = op->kind == LOOM_OP_FILL ? fill_scalar(&op->attrs, t->dtype)
                                       : loom__cfz_load_scalar(op->const_data, t->dtype, 0);
      continue;
    }
    if (op->kind == LOOM_OP_DOT) {
      if ((s = setup_dot(body, op, P))) return s;
      P->ops[P->n_ops++] = i;
      continue;
    }
    if (cls != LOOM_CLASS_UNARY && cls != LOOM_CLASS_BINARY && cls != LOOM_CLASS_COMPARE &&
        cls != LOOM_CLASS_LOGIC && cls != LOOM_CLASS_SELECT && cls != LOOM_CLASS_CAST)
      return unsupported(body, op, "not an op of a fused body");
    fv->role = R_EW;
    /* By its operands, not its type: an operand read through stride 0 is one scalar. */
    for (int32_t k = 0; k < op->n_inputs; k++) fv->vec |= P->v[op->inputs[k]].vec;
    /* An empty run asks whether a kernel exists for the op and its dtypes. */
    scalar dummy[3] = {{0}};
    const void *pin[3] = {&dummy[0], &dummy[1], &dummy[2]};
    bool vin[3] = {false, false, false};
    if (!loom__cfz_run_ew(P, op, &dummy[0], pin, vin, NULL, 0))
      return unsupported(body, op, "no kernel for its dtypes");
    if (fv->vec) fv->slot = P->n_slots++;
    P->ops[P->n_ops++] = i;
  }
  merge_rows(body, P);
  /* Leaves: each parameter or view that an elementwise op reads (or that is the result), read
   * through its base parameter's data; a dot's operands are read by the dot itself. */
  bool *used = calloc((size_t)body->n_values, sizeof *used);
  if (!used) return loom__error(LOOM_ERR_OUT_OF_MEMORY, "cpu: fused: out of memory");
  used[P->src] = true;
  for (int32_t q = 0; q < P->n_ops; q++) {
    const loom__op *op = &body->ops[P->ops[q]];
    for (int32_t i = 0; i < op->n_inputs; i++) used[op->inputs[i]] |= op->kind != LOOM_OP_DOT;
  }
  for (int32_t id = 0; id < body->n_values; id++) {
    fvalue *fv = &P->v[id];
    if (fv->role != R_LEAF) continue;
    bool direct = fv->strides[P->r - 1] == 1 &&
                  (fv->dtype == LOOM_F32 || fv->dtype == LOOM_F64 || fv->dtype == LOOM_I64);
    if (!used[id]) continue;
    if (fv->vec && !direct) fv->slot = P->n_slots++;
    P->leaves[P->n_leaves++] = id;
  }
  free(used);
  fuse_product_sum(body, P);
  int32_t *uses = malloc(sizeof *uses * (size_t)(body->n_values + 1));
  if (!uses) return loom__error(LOOM_ERR_OUT_OF_MEMORY, "cpu: fused: out of memory");
  count_uses(body, P, uses);
  absorb_scalar_ops(body, P, uses);
  find_dot_epilogues(body, P, uses);
  find_kernel_sum(body, P, uses);
  free(uses);
  if (!share_slots(body, P)) return loom__error(LOOM_ERR_OUT_OF_MEMORY, "cpu: fused: out of memory");
  fvalue *src = &P->v[P->src];
  if (src->role == R_NONE)
    return loom__error(LOOM_ERR_UNSUPPORTED, "cpu: fused: the body's result is not computed by its ops");
  P->fkind = src->kind;
  /* A source constant along the last axis still feeds every element of a block: give it a
   * buffer to broadcast into. */
  if (!src->vec && P->M > 1) src->slot = P->n_slots++;
  return LOOM_OK;
}

void loom__cfz_plan_free(plan *P) {
  free(P->v);
  free(P->ops);
  free(P->leaves);
}

/* An elementwise body (no final op, no dot) over S whose last two axes every leaf walks as one
 * (dense across the rows, or broadcast over both) runs over them as one axis: f32[1000,16] in
 * 16 blocks of 1,024 rather than 1,000 rows of 16, each row paying the per-block dispatch of
 * every body op (docs/ir-fusion.md, "When fusing pays", has the times). */
static void merge_rows(const loom_graph *body, plan *P) {
  if (P->fin != F_NONE) return;
  for (int32_t i = 0; i < body->n_ops; i++)
    if (body->ops[i].kind == LOOM_OP_DOT) return;
  while (P->r >= 2) {
    int32_t a = P->r - 2, b = P->r - 1;
    for (int32_t id = 0; id < body->n_values; id++) {
      const fvalue *fv = &P->v[id];
      if (fv->role == R_LEAF && fv->strides[a] != fv->strides[b] * P->dims[b]) return;
    }
    for (int32_t id = 0; id < body->n_values; id++)
      if (P->v[id].role == R_LEAF) P->v[id].strides[a] = P->v[id].strides[b];
    P->dims[a] *= P->dims[b];
    P->r--;
    output_strides(P);
  }
}

/* Marks in share[] the elementwise values whose blocks may share buffers (share_slots): each
 * has one, and only the plain elementwise ops run per block read it (not a dot, an epilogue,
 * an absorbed op, the fold or a one-pass peephole), so it is dead after its last reader. */
static void find_shareable(const loom_graph *body, const plan *P, bool *share) {
  for (int32_t v = 0; v < body->n_values; v++) {
    const fvalue *fv = &P->v[v];
    share[v] = fv->role == R_EW && fv->vec && fv->slot >= 0 && !fv->absorbed && fv->epi_dot < 0 &&
               v != P->src && v != P->prod_b;
  }
  for (int32_t i = 0; i < body->n_ops; i++) {
    const loom__op *op = &body->ops[i];
    const fvalue *o = &P->v[op->outputs[0]];
    bool plain = op->kind != LOOM_OP_DOT && o->role == R_EW && !o->absorbed && o->epi_dot < 0;
    for (int32_t k = 0; k < op->n_inputs && !plain; k++) share[op->inputs[k]] = false;
  }
}

/* Gives the shareable values (find_shareable) buffers by liveness, as registers are allocated: a value
 * takes a free buffer when computed and frees it after its last reader, so a chain of 2,000
 * adds runs in two buffers that stay in L1 rather than 2,000 (16 MiB a thread, whose first
 * touch alone took milliseconds). Every other buffer keeps its place, renumbered in order so a
 * dot's packed rows stay next to its result. False when out of memory. */
static bool share_slots(const loom_graph *body, plan *P) {
  if (P->ks || P->n_slots == 0) return true;
  int32_t nv = body->n_values, ns = P->n_slots;
  int32_t *last = malloc(sizeof *last * (size_t)(nv + 1)), *map = malloc(sizeof *map * (size_t)(ns + 1));
  bool *share = calloc((size_t)nv + 1, sizeof *share), *fixed = calloc((size_t)ns + 1, sizeof *fixed);
  bool ok = last && map && share && fixed;
  for (int32_t v = 0; ok && v < nv; v++) last[v] = -1;
  if (ok) find_shareable(body, P, share);
  for (int32_t q = 0; ok && q < P->n_ops; q++)
    for (int32_t k = 0; k < body->ops[P->ops[q]].n_inputs; k++) last[body->ops[P->ops[q]].inputs[k]] = q;
  for (int32_t s = 0; ok && s < ns; s++) fixed[s] = true;
  for (int32_t v = 0; ok && v < nv; v++)
    if (share[v]) fixed[P->v[v].slot] = false;
  int32_t n = 0, n_free = 0;
  for (int32_t s = 0; ok && s < ns; s++) map[s] = fixed[s] ? n++ : -1;
  for (int32_t v = 0; ok && v < nv; v++)
    if (P->v[v].slot >= 0) P->v[v].slot = share[v] ? -1 : map[P->v[v].slot]; /* -1: not computed per block */
  /* map now serves as the stack of free buffers */
  for (int32_t q = 0; ok && q < P->n_ops; q++) {
    const loom__op *op = &body->ops[P->ops[q]];
    int32_t o = op->outputs[0];
    if (share[o]) P->v[o].slot = n_free > 0 ? map[--n_free] : n++;
    for (int32_t k = 0; k < op->n_inputs; k++) {
      int32_t v = op->inputs[k];
      bool dup = false; /* an operand read twice is freed once */
      for (int32_t j = 0; j < k; j++) dup |= op->inputs[j] == v;
      if (share[v] && last[v] == q && !dup) map[n_free++] = P->v[v].slot;
    }
  }
  if (ok) P->n_slots = n;
  free(last);
  free(map);
  free(share);
  free(fixed);
  return ok;
}
