/* The fused-kernel generator's analysis (fused_codegen_gen.h): which values the expression needs, the space
 * it runs over, and the final op that ends it. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "backends/gpu/fused_codegen_gen.h"

/* ---- analysis ----------------------------------------------------------------------------- */

/* The type of a value as the expression being written holds it: a vector of `vec` lanes in
 * fz_evalv (floats only), else the scalar. */
const char *loom__fzg_tname(const gen *G, loom_dtype t) {
  if (!G->vec) return loom__fzg_ctype(t);
  return t == LOOM_F32 ? "float8" : "double8";
}

loom_status loom__fzg_unsupported_op(const gen *G, int32_t i, const char *why) {
  const loom__op *op = &G->g->ops[i];
  char label[32];
  return loom__error(LOOM_ERR_UNSUPPORTED, "fused: body op %d (%s -> %s): %s", (int)i, loom_op_name(op->kind),
                     loom__value_label(G->g, op->outputs[0], label, sizeof label), why);
}

/* Whether value v reads through a layout whose base is a parameter or a fill (a leaf). */
bool loom__fzg_leaf_base(const gen *G, int32_t v, int32_t *param, int32_t *fill_op) {
  int32_t base = G->lay[v].base;
  *param = G->param_of[base];
  *fill_op = -1;
  if (*param >= 0) return true;
  int32_t op = G->g->values[base].op;
  if (op >= 0 && G->g->ops[op].kind == LOOM_OP_FILL) {
    *fill_op = op;
    return true;
  }
  return false;
}

/* A value read by the expression must broadcast to S (right-aligned, each axis S's or 1). */
bool loom__fzg_fits_space(const gen *G, const loom_type *t) {
  if (t->rank > G->rank) return false;
  int32_t shift = G->rank - t->rank;
  for (int32_t d = 0; d < t->rank; d++)
    if (t->dims[d] != 1 && t->dims[d] != G->dims[d + shift]) return false;
  return true;
}

/* The element offset expression of leaf value v at the space's indices i0..: its base
 * parameter's offset argument, the layout's offset and its strides on axes longer than 1. */
static void leaf_offset(const gen *G, int32_t v, int32_t param) {
  const loom_type *t = &G->g->values[v].type;
  const loom__layout *l = &G->lay[v];
  int32_t shift = G->rank - t->rank;
  loom__fzg_put(G->b, "o%d + %" PRId64, (int)param, l->offset);
  for (int32_t d = 0; d < t->rank; d++)
    if (t->dims[d] != 1 && l->strides[d] != 0)
      loom__fzg_put(G->b, " + i%d * %" PRId64, (int)(d + shift), l->strides[d]);
}

/* A fill's value (or a rank-0 constant's) as a literal of dtype t. */
void loom__fzg_scalar_literal(const gen *G, const loom__op *op, loom_dtype t) {
  if (op->kind == LOOM_OP_FILL) {
    loom__fzg_literal(G->b, t, op->attrs.value, op->attrs.ivalue, op->attrs.value_is_int);
    return;
  }
  const void *p = op->const_data;
  switch (t) {
    case LOOM_BOOL:
      loom__fzg_literal(G->b, t, 0, *(const uint8_t *)p != 0, true);
      break;
    case LOOM_I8:
      loom__fzg_literal(G->b, t, 0, *(const int8_t *)p, true);
      break;
    case LOOM_U8:
      loom__fzg_literal(G->b, t, 0, *(const uint8_t *)p, true);
      break;
    case LOOM_I16:
      loom__fzg_literal(G->b, t, 0, *(const int16_t *)p, true);
      break;
    case LOOM_I32:
      loom__fzg_literal(G->b, t, 0, *(const int32_t *)p, true);
      break;
    case LOOM_I64:
      loom__fzg_literal(G->b, t, 0, *(const int64_t *)p, true);
      break;
    case LOOM_F32:
      loom__fzg_literal(G->b, t, *(const float *)p, 0, false);
      break;
    default:
      loom__fzg_literal(G->b, t, *(const double *)p, 0, false);
      break;
  }
}

/* A load of leaf v (a parameter or a view of one, or of a fill) into its variable. */
/* The lanes of parameter `param` at element offsets off + k * stride (k < vec): one vector
 * load where they are adjacent, one element broadcast where stride is 0, else gathered. */
static void emit_lanes(const gen *G, int32_t param, const char *off, int64_t stride, const char *VT) {
  if (stride == 1) {
    loom__fzg_put(G->b, "vload8(0, p%d + (%s))", (int)param, off);
  } else if (stride == 0) {
    loom__fzg_put(G->b, "(%s)(p%d[%s])", VT, (int)param, off);
  } else {
    loom__fzg_put(G->b, "(%s)(", VT);
    for (int32_t k = 0; k < G->vec; k++)
      loom__fzg_put(G->b, "%sp%d[%s + %" PRId64 "]", k ? ", " : "", (int)param, off, (int64_t)k * stride);
    loom__fzg_put(G->b, ")");
  }
}

/* A leaf's load in fz_evalv: its offset at lane 0, its stride along the lanes' axis. */
static void emit_leaf_lanes(const gen *G, int32_t v, int32_t param) {
  const loom_type *t = &G->g->values[v].type;
  const loom__layout *l = &G->lay[v];
  int32_t d = G->vaxis - (G->rank - t->rank);
  int64_t stride = d >= 0 && t->dims[d] != 1 ? l->strides[d] : 0;
  sbuf off = {0}, *saved = G->b;
  ((gen *)G)->b = &off;
  leaf_offset(G, v, param);
  ((gen *)G)->b = saved;
  emit_lanes(G, param, off.failed || !off.p ? "0" : off.p, stride, loom__fzg_tname(G, t->dtype));
  if (off.failed) saved->failed = true;
  loom__free(off.p);
}

void loom__fzg_emit_leaf(const gen *G, int32_t v) {
  int32_t param, fill_op;
  loom__fzg_leaf_base(G, v, &param, &fill_op);
  loom_dtype t = G->g->values[v].type.dtype;
  if (G->vec) {
    loom__fzg_put(G->b, "  const %s v%d = ", loom__fzg_tname(G, t), (int)v);
    if (param < 0) {
      loom__fzg_put(G->b, "(%s)(", loom__fzg_tname(G, t));
      loom__fzg_scalar_literal(G, &G->g->ops[fill_op], t);
      loom__fzg_put(G->b, ")");
    } else {
      emit_leaf_lanes(G, v, param);
    }
    loom__fzg_put(G->b, ";\n");
    return;
  }
  loom__fzg_put(G->b, "  const %s v%d = ", loom__fzg_ctype(t), (int)v);
  if (param < 0) {
    loom__fzg_scalar_literal(G, &G->g->ops[fill_op], t);
  } else {
    loom__fzg_put(G->b, t == LOOM_BOOL ? "(fz_b)(p%d[" : "(p%d[", (int)param);
    leaf_offset(G, v, param);
    loom__fzg_put(G->b, t == LOOM_BOOL ? "] != 0);\n" : "]);\n");
    return;
  }
  loom__fzg_put(G->b, ";\n");
}

loom_status loom__fzg_emit_unary(const gen *G, int32_t i, int32_t v, int32_t x) {
  loom_dtype t = G->g->values[v].type.dtype;
  const char *T = loom__fzg_tname(G, t);
  loom_op k = G->g->ops[i].kind;
  sbuf *b = G->b;
  char f[16];
  loom__fzg_put(b, "  const %s v%d = ", T, (int)v);
  if (t == LOOM_BOOL) {
    if (k != LOOM_OP_NOT) return loom__fzg_unsupported_op(G, i, "bool takes only not");
    loom__fzg_put(b, "(fz_b)!v%d;\n", (int)x);
    return LOOM_OK;
  }
  if (loom__fzg_is_int(t)) {
    const char *W = loom__fzg_wrap_type(t);
    switch (k) {
      case LOOM_OP_NEG:
        loom__fzg_put(b, "(%s)((%s)0 - (%s)v%d)", T, W, W, (int)x);
        break;
      case LOOM_OP_FLOOR:
      case LOOM_OP_CEIL:
        loom__fzg_put(b, "v%d", (int)x);
        break;
      case LOOM_OP_NOT:
        loom__fzg_put(b, "(%s)~v%d", T, (int)x);
        break;
      case LOOM_OP_SQUARE:
        loom__fzg_put(b, "(%s)((%s)v%d * (%s)v%d)", T, W, (int)x, W, (int)x);
        break;
      case LOOM_OP_ABS:
        if (loom__fzg_is_sint(t))
          loom__fzg_put(b, "v%d < 0 ? (%s)((%s)0 - (%s)v%d) : v%d", (int)x, T, W, W, (int)x, (int)x);
        else
          loom__fzg_put(b, "v%d", (int)x);
        break;
      case LOOM_OP_SIGN:
        if (loom__fzg_is_sint(t))
          loom__fzg_put(b, "(%s)((v%d > 0) - (v%d < 0))", T, (int)x, (int)x);
        else
          loom__fzg_put(b, "(%s)(v%d > 0)", T, (int)x);
        break;
      case LOOM_OP_RELU:
        if (loom__fzg_is_sint(t))
          loom__fzg_put(b, "v%d < 0 ? (%s)0 : v%d", (int)x, T, (int)x);
        else
          loom__fzg_put(b, "v%d", (int)x);
        break;
      default:
        return loom__fzg_unsupported_op(G, i, "not defined on integers");
    }
    loom__fzg_put(b, ";\n");
    return LOOM_OK;
  }
  const char *name = NULL;
  switch (k) {
    case LOOM_OP_NEG:
      loom__fzg_put(b, "-v%d", (int)x);
      break;
    case LOOM_OP_ABS:
      name = "fabs";
      break;
    case LOOM_OP_SIGN:
      loom__fzg_put(b, "v%d > 0 ? (%s)1 : v%d < 0 ? (%s)-1 : v%d", (int)x, T, (int)x, T, (int)x);
      break;
    case LOOM_OP_EXP:
      name = "exp";
      break;
    case LOOM_OP_LOG:
      name = "log";
      break;
    case LOOM_OP_SQRT:
      name = "sqrt";
      break;
    case LOOM_OP_RSQRT:
      loom__fzg_put(b, "(%s)1 / %s(v%d)", T, loom__fzg_fn(G->target, t, "sqrt", f, sizeof f), (int)x);
      break;
    case LOOM_OP_SIN:
      name = "sin";
      break;
    case LOOM_OP_COS:
      name = "cos";
      break;
    case LOOM_OP_TANH:
      name = "tanh";
      break;
    case LOOM_OP_SIGMOID:
      loom__fzg_put(b, "(%s)1 / ((%s)1 + %s(-v%d))", T, T, loom__fzg_fn(G->target, t, "exp", f, sizeof f),
                    (int)x);
      break;
    case LOOM_OP_RELU:
      loom__fzg_put(b, "v%d < 0 ? (%s)0 : v%d", (int)x, T, (int)x);
      break;
    case LOOM_OP_FLOOR:
      name = "floor";
      break;
    case LOOM_OP_CEIL:
      name = "ceil";
      break;
    case LOOM_OP_SQUARE:
      loom__fzg_put(b, "v%d * v%d", (int)x, (int)x);
      break;
    default:
      return loom__fzg_unsupported_op(G, i, "not defined on floats");
  }
  if (name) loom__fzg_put(b, "%s(v%d)", loom__fzg_fn(G->target, t, name, f, sizeof f), (int)x);
  loom__fzg_put(b, ";\n");
  return LOOM_OK;
}

loom_status loom__fzg_emit_binary(const gen *G, int32_t i, int32_t v, int32_t x, int32_t y) {
  const loom__op *op = &G->g->ops[i];
  loom_dtype t = G->g->values[x].type.dtype;
  const char *T = loom__fzg_tname(G, G->g->values[v].type.dtype);
  loom__op_class cls = loom__op_info_of(op->kind)->cls;
  sbuf *b = G->b;
  loom__fzg_put(b, "  const %s v%d = ", T, (int)v);
  if (cls == LOOM_CLASS_COMPARE || cls == LOOM_CLASS_LOGIC) {
    const char *sym = NULL;
    switch (op->kind) {
      case LOOM_OP_EQ:
        sym = "==";
        break;
      case LOOM_OP_NE:
        sym = "!=";
        break;
      case LOOM_OP_LT:
        sym = "<";
        break;
      case LOOM_OP_LE:
        sym = "<=";
        break;
      case LOOM_OP_GT:
        sym = ">";
        break;
      case LOOM_OP_GE:
        sym = ">=";
        break;
      case LOOM_OP_AND:
        sym = "&";
        break;
      case LOOM_OP_OR:
        sym = "|";
        break;
      default:
        return loom__fzg_unsupported_op(G, i, "an unknown comparison");
    }
    if (cls == LOOM_CLASS_LOGIC && t != LOOM_BOOL)
      return loom__fzg_unsupported_op(G, i, "logic ops take bool");
    loom__fzg_put(b, "(fz_b)(v%d %s v%d);\n", (int)x, sym, (int)y);
    return LOOM_OK;
  }
  if (t == LOOM_BOOL) return loom__fzg_unsupported_op(G, i, "arithmetic on bool");
  char f[16];
  if (loom__fzg_is_int(t)) {
    const char *W = loom__fzg_wrap_type(t);
    switch (op->kind) {
      case LOOM_OP_ADD:
        loom__fzg_put(b, "(%s)((%s)v%d + (%s)v%d)", T, W, (int)x, W, (int)y);
        break;
      case LOOM_OP_SUB:
        loom__fzg_put(b, "(%s)((%s)v%d - (%s)v%d)", T, W, (int)x, W, (int)y);
        break;
      case LOOM_OP_MUL:
        loom__fzg_put(b, "(%s)((%s)v%d * (%s)v%d)", T, W, (int)x, W, (int)y);
        break;
      case LOOM_OP_DIV:
        if (loom__fzg_is_sint(t))
          loom__fzg_put(b, "v%d == 0 ? (%s)0 : v%d == -1 ? (%s)((%s)0 - (%s)v%d) : (%s)(v%d / v%d)", (int)y,
                        T, (int)y, T, W, W, (int)x, T, (int)x, (int)y);
        else
          loom__fzg_put(b, "v%d == 0 ? (%s)0 : (%s)(v%d / v%d)", (int)y, T, T, (int)x, (int)y);
        break;
      case LOOM_OP_POW:
        loom__fzg_put(b, "(%s)fz_ipow((fz_i64)v%d, (fz_i64)v%d)", T, (int)x, (int)y);
        break;
      case LOOM_OP_MAXIMUM:
        loom__fzg_put(b, "v%d >= v%d ? v%d : v%d", (int)x, (int)y, (int)x, (int)y);
        break;
      case LOOM_OP_MINIMUM:
        loom__fzg_put(b, "v%d <= v%d ? v%d : v%d", (int)x, (int)y, (int)x, (int)y);
        break;
      default:
        return loom__fzg_unsupported_op(G, i, "an unknown binary op");
    }
    loom__fzg_put(b, ";\n");
    return LOOM_OK;
  }
  const char *sym = NULL;
  switch (op->kind) {
    case LOOM_OP_ADD:
      sym = "+";
      break;
    case LOOM_OP_SUB:
      sym = "-";
      break;
    case LOOM_OP_MUL:
      sym = "*";
      break;
    case LOOM_OP_DIV:
      sym = "/";
      break;
    case LOOM_OP_POW:
      loom__fzg_put(b, "%s(v%d, v%d);\n", loom__fzg_fn(G->target, t, "pow", f, sizeof f), (int)x, (int)y);
      return LOOM_OK;
    case LOOM_OP_MAXIMUM:
      loom__fzg_put(b, "v%d != v%d ? v%d : v%d >= v%d ? v%d : v%d;\n", (int)x, (int)x, (int)x, (int)x, (int)y,
                    (int)x, (int)y);
      return LOOM_OK;
    case LOOM_OP_MINIMUM:
      loom__fzg_put(b, "v%d != v%d ? v%d : v%d <= v%d ? v%d : v%d;\n", (int)x, (int)x, (int)x, (int)x, (int)y,
                    (int)x, (int)y);
      return LOOM_OK;
    default:
      return loom__fzg_unsupported_op(G, i, "an unknown binary op");
  }
  loom__fzg_put(b, "v%d %s v%d;\n", (int)x, sym, (int)y);
  return LOOM_OK;
}

/* cast as cast.cl: through the widest type of the source's kind; floats to integers truncate,
 * saturate and give 0 for NaN; anything to bool is x != 0 (NaN is true). */
loom_status loom__fzg_emit_cast(const gen *G, int32_t i, int32_t v, int32_t x) {
  loom_dtype from = G->g->values[x].type.dtype, to = G->g->values[v].type.dtype;
  const char *T = loom__fzg_ctype(to);
  sbuf *b = G->b;
  (void)i;
  loom__fzg_put(b, "  const %s v%d = ", T, (int)v);
  if (to == LOOM_BOOL)
    loom__fzg_put(b, "(fz_b)(v%d != 0)", (int)x);
  else if (loom__fzg_is_float(to))
    loom__fzg_put(b, "(%s)%sv%d", T, loom__fzg_is_float(from) ? "" : "(fz_i64)", (int)x);
  else if (!loom__fzg_is_float(from))
    loom__fzg_put(b, "(%s)(fz_i64)v%d", T, (int)x);
  else {
    const char *KR = loom__fzg_ctype(from);
    loom__fzg_put(b, "v%d != v%d ? (%s)0 : v%d <= (%s)%s ? (%s)%s : v%d >= (%s)%s ? (%s)%s : (%s)v%d", (int)x,
                  (int)x, T, (int)x, KR, loom__fzg_int_lo(to), T, loom__fzg_int_lo(to), (int)x, KR,
                  loom__fzg_int_hi(to), T, loom__fzg_int_hi(to), T, (int)x);
  }
  loom__fzg_put(b, ";\n");
  return LOOM_OK;
}

/* A small dot [a,k] x [k,b] of two leaves, per element: k multiply-adds in the dtype (the
 * dot kernels accumulate floats in the dtype too), integers wrapping. */
loom_status loom__fzg_emit_dot(const gen *G, int32_t i, int32_t v) {
  const loom__op *op = &G->g->ops[i];
  int32_t a = op->inputs[0], c = op->inputs[1];
  const loom_type *ta = &G->g->values[a].type, *tc = &G->g->values[c].type;
  loom_dtype t = G->g->values[v].type.dtype;
  int32_t pa, pc, fa, fc;
  if (ta->rank != 2 || tc->rank != 2 || G->rank != 2)
    return loom__fzg_unsupported_op(G, i, "a dot of other than two rank-2 operands in a rank-2 space");
  if (!loom__fzg_leaf_base(G, a, &pa, &fa) || !loom__fzg_leaf_base(G, c, &pc, &fc) || pa < 0 || pc < 0)
    return loom__fzg_unsupported_op(G, i, "a dot operand that is not a parameter or a view of one");
  if (ta->dims[1] > LOOM_FUSE_MAX_K) return loom__fzg_unsupported_op(G, i, "a dot over more than 16 terms");
  if (t == LOOM_BOOL) return loom__fzg_unsupported_op(G, i, "a dot of bool");
  const char *T = loom__fzg_ctype(t), *AT = loom__fzg_is_int(t) ? loom__fzg_wrap_type(t) : T;
  const loom__layout *la = &G->lay[a], *lc = &G->lay[c];
  sbuf *b = G->b;
  /* Rows of a run along S's axis 0, columns of c along axis 1 (size-1 axes broadcast). */
  char ra[64] = "0", rc[64] = "0";
  if (ta->dims[0] != 1) snprintf(ra, sizeof ra, "i0 * %" PRId64, la->strides[0]);
  if (tc->dims[1] != 1) snprintf(rc, sizeof rc, "i1 * %" PRId64, lc->strides[1]);
  if (G->vec) {
    /* Lanes along S's axis 0 move down a's rows, along axis 1 across c's columns. */
    const char *VT = loom__fzg_tname(G, t);
    int64_t sa = G->vaxis == 0 && ta->dims[0] != 1 ? la->strides[0] : 0;
    int64_t sc = G->vaxis == 1 && tc->dims[1] != 1 ? lc->strides[1] : 0;
    int64_t K = ta->dims[1];
    if (G->vec == 8 && sc == K && K >= 2 && K <= 4 && lc->strides[0] == 1) {
      /* c's K rows interleaved along the lanes (a K-column matrix read through its transpose,
       * points in 3-D): the 8 K elements the lanes read are adjacent, so K vector loads and a
       * shuffle per row, where a gather would load and insert every lane apart. */
      char base[160];
      snprintf(base, sizeof base, "o%d + %" PRId64 " + %s", (int)pc, lc->offset, rc);
      for (int64_t m = 0; m < K; m++)
        loom__fzg_put(b, "  const %s v%d_l%d = vload8(%d, p%d + (%s));\n", VT, (int)v, (int)m, (int)m,
                      (int)pc, base);
      loom__fzg_put(b, "  const %s v%d = (%s)(0)", VT, (int)v, VT);
      for (int64_t q = 0; q < K; q++) {
        char oa[160];
        snprintf(oa, sizeof oa, "o%d + %" PRId64 " + %s + %" PRId64, (int)pa, la->offset, ra,
                 q * la->strides[1]);
        loom__fzg_put(b, "\n      + ");
        emit_lanes(G, pa, oa, sa, VT);
        loom__fzg_put(b, " * (%s)(", VT);
        for (int64_t k = 0; k < 8; k++) {
          int64_t e = q + k * K;
          loom__fzg_put(b, "%sv%d_l%d.s%d", k ? ", " : "", (int)v, (int)(e / 8), (int)(e % 8));
        }
        loom__fzg_put(b, ")");
      }
      loom__fzg_put(b, ";\n");
      return LOOM_OK;
    }
    loom__fzg_put(b, "  const %s v%d = (%s)(0)", VT, (int)v, VT);
    for (int64_t q = 0; q < ta->dims[1]; q++) {
      char oa[160], oc[160];
      snprintf(oa, sizeof oa, "o%d + %" PRId64 " + %s + %" PRId64, (int)pa, la->offset, ra,
               q * la->strides[1]);
      snprintf(oc, sizeof oc, "o%d + %" PRId64 " + %s + %" PRId64, (int)pc, lc->offset, rc,
               q * lc->strides[0]);
      loom__fzg_put(b, "\n      + ");
      emit_lanes(G, pa, oa, sa, VT);
      loom__fzg_put(b, " * ");
      emit_lanes(G, pc, oc, sc, VT);
    }
    loom__fzg_put(b, ";\n");
    return LOOM_OK;
  }
  loom__fzg_put(b, "  const %s v%d = (%s)(", T, (int)v, T);
  for (int64_t q = 0; q < ta->dims[1]; q++) {
    loom__fzg_put(
        b, "%s(%s)p%d[o%d + %" PRId64 " + %s + %" PRId64 "] * (%s)p%d[o%d + %" PRId64 " + %s + %" PRId64 "]",
        q ? "\n      + " : "", AT, (int)pa, (int)pa, la->offset, ra, q * la->strides[1], AT, (int)pc, (int)pc,
        lc->offset, rc, q * lc->strides[0]);
  }
  if (ta->dims[1] == 0) loom__fzg_put(b, "0");
  loom__fzg_put(b, ");\n");
  return LOOM_OK;
}
