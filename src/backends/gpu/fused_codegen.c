/* The fused-kernel generator (fused_codegen.h). The body is walked once: each op that the
 * expression needs becomes one statement of fz_eval (a function of the space's indices that
 * returns the value the final op consumes), then the kernel around it is the final op's.
 * Every formula below is the unfused kernels' (kernels/opencl/elementwise.cl, cast.cl,
 * reduce.cl, topk.cl), so a fused run rounds, wraps and propagates NaN as the unfused one. */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "backends/gpu/fused_codegen.h"
#include "backends/gpu/fused_codegen_gen.h"

/* ---- text --------------------------------------------------------------------------------- */

/* ---- the preludes ------------------------------------------------------------------------- */

static void prelude(const gen *G) {
  sbuf *b = G->b;
  if (G->target == LOOM__FZ_OPENCL) {
    if (G->fp64) loom__fzg_put(b, "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n");
    /* The unfused kernels round every op's result; contracting a multiply and an add of two
     * ops into one fma would round once, so fused and unfused results would differ. */
    loom__fzg_put(b, "#pragma OPENCL FP_CONTRACT OFF\n");
    loom__fzg_put(
        b,
        "typedef uchar fz_b;\ntypedef char fz_i8;\ntypedef uchar fz_u8;\ntypedef short fz_i16;\n"
        "typedef int fz_i32;\ntypedef long fz_i64;\ntypedef uint fz_u32;\ntypedef ulong fz_u64;\n"
        "#define FZ_KERNEL __kernel void\n#define FZ_GLOBAL __global\n#define FZ_LOCAL __local\n"
        "#define FZ_FN inline\n#define FZ_LID ((fz_i64)get_local_id(0))\n"
        "#define FZ_GROUP ((fz_i64)get_group_id(0))\n#define FZ_GROUPS ((fz_i64)get_num_groups(0))\n"
        "#define FZ_GID ((fz_i64)get_global_id(0))\n#define FZ_GSIZE ((fz_i64)get_global_size(0))\n"
        "#define FZ_BARRIER barrier(CLK_LOCAL_MEM_FENCE)\n"
        "#define FZ_INF_F INFINITY\n#define FZ_NAN_F NAN\n");
    if (G->fp64) loom__fzg_put(b, "#define FZ_INF_D ((double)INFINITY)\n#define FZ_NAN_D ((double)NAN)\n");
  } else {
    loom__fzg_put(
        b,
        "typedef unsigned char fz_b;\ntypedef signed char fz_i8;\ntypedef unsigned char fz_u8;\n"
        "typedef short fz_i16;\ntypedef int fz_i32;\ntypedef long long fz_i64;\ntypedef unsigned int "
        "fz_u32;\n"
        "typedef unsigned long long fz_u64;\n"
        "#define FZ_KERNEL extern \"C\" __global__ void\n#define FZ_GLOBAL\n#define FZ_LOCAL __shared__\n"
        "#define FZ_FN __device__ static inline\n#define FZ_LID ((fz_i64)threadIdx.x)\n"
        "#define FZ_GROUP ((fz_i64)blockIdx.x)\n#define FZ_GROUPS ((fz_i64)gridDim.x)\n"
        "#define FZ_GID ((fz_i64)blockIdx.x * blockDim.x + threadIdx.x)\n"
        "#define FZ_GSIZE ((fz_i64)gridDim.x * blockDim.x)\n#define FZ_BARRIER __syncthreads()\n"
        "#define FZ_INF_F __int_as_float(0x7f800000)\n#define FZ_NAN_F __int_as_float(0x7fc00000)\n"
        "#define FZ_INF_D __longlong_as_double(0x7ff0000000000000LL)\n"
        "#define FZ_NAN_D __longlong_as_double(0x7ff8000000000000LL)\n");
  }
  /* Integer pow by squaring; negative exponents give 0 but for bases 1 and -1. */
  loom__fzg_put(b,
                "FZ_FN fz_i64 fz_ipow(fz_i64 base, fz_i64 e) {\n"
                "  if (e < 0) return base == 1 ? 1 : base == -1 ? ((e & 1) ? -1 : 1) : 0;\n"
                "  fz_u64 r = 1, q = (fz_u64)base;\n"
                "  for (fz_u64 k = (fz_u64)e; k; k >>= 1) {\n    if (k & 1) r *= q;\n    q *= q;\n  }\n"
                "  return (fz_i64)r;\n}\n");
}

/* "FZ_GLOBAL const T *p0, fz_i64 o0, ..." (decl) or "p0, o0, ..." (call). */
static void param_list(const gen *G, bool decl) {
  for (int32_t p = 0; p < G->g->n_params; p++) {
    loom_dtype t = G->g->values[G->g->params[p]].type.dtype;
    if (decl)
      loom__fzg_put(G->b, "%sFZ_GLOBAL const %s *p%d, fz_i64 o%d", p ? ", " : "",
                    t == LOOM_BOOL ? "fz_b" : loom__fzg_ctype(t), (int)p, (int)p);
    else
      loom__fzg_put(G->b, "%sp%d, o%d", p ? ", " : "", (int)p, (int)p);
  }
}

static void index_list(const gen *G, bool decl) {
  for (int32_t d = 0; d < G->rank; d++)
    loom__fzg_put(G->b, "%s%si%d", G->g->n_params || d ? ", " : "", decl ? "fz_i64 " : "", (int)d);
}

/* Statements splitting flat position `var` (destroyed) into the indices of `axes` (C order). */
static void split_index(const gen *G, const char *var, const int32_t *axes, int32_t n) {
  for (int32_t k = n - 1; k >= 0; k--) {
    int32_t a = axes[k];
    if (k == 0)
      loom__fzg_put(G->b, "      const fz_i64 i%d = %s;\n", (int)a, var);
    else
      loom__fzg_put(G->b, "      const fz_i64 i%d = %s %% %" PRId64 "; %s /= %" PRId64 ";\n", (int)a, var,
                    G->dims[a], var, G->dims[a]);
  }
}

/* ---- the body ----------------------------------------------------------------------------- */

static loom_status analyse(gen *G) {
  const loom_graph *g = G->g;
  int32_t n_ops = g->n_ops;
  G->final_op = -1;
  G->final_kind = FINAL_NONE;
  if (n_ops == 0 || g->n_outputs < 1) return loom__error(LOOM_ERR_UNSUPPORTED, "fused: an empty body");
  const loom__op *lastop = &g->ops[n_ops - 1];
  loom__op_class lc = loom__op_info_of(lastop->kind)->cls;
  if (lc == LOOM_CLASS_REDUCE || lc == LOOM_CLASS_ARGREDUCE || lc == LOOM_CLASS_TOPK) {
    G->final_op = n_ops - 1;
    G->final_kind = lc == LOOM_CLASS_REDUCE      ? FINAL_REDUCE
                    : lc == LOOM_CLASS_ARGREDUCE ? FINAL_ARG
                                                 : FINAL_TOPK;
    G->last = lastop->inputs[0];
    if (g->n_outputs != lastop->n_outputs)
      return loom__fzg_unsupported_op(G, n_ops - 1,
                                      "the final op's results are not exactly the body's outputs");
    for (int32_t r = 0; r < g->n_outputs; r++)
      if (g->outputs[r] != lastop->outputs[r])
        return loom__fzg_unsupported_op(G, n_ops - 1,
                                        "the final op's results are not exactly the body's outputs");
  } else {
    if (g->n_outputs != 1)
      return loom__error(LOOM_ERR_UNSUPPORTED,
                         "fused: a body without a final reduction has one output (%d here)",
                         (int)g->n_outputs);
    G->last = g->outputs[0];
  }
  const loom_type *S = &g->values[G->last].type;
  if (S->rank < 1) return loom__error(LOOM_ERR_UNSUPPORTED, "fused: a space of rank 0");
  G->rank = S->rank;
  memcpy(G->dims, S->dims, sizeof G->dims);
  if (!loom__fzg_dtype_ok(S->dtype, G->fp64))
    return loom__error(LOOM_ERR_UNSUPPORTED, "fused: values of %s%s", loom_dtype_name(S->dtype),
                       S->dtype == LOOM_F64 ? " on a device without fp64" : "");
  if (G->final_kind == FINAL_REDUCE) {
    for (int32_t d = 0; d < G->rank; d++) G->reduced[d] = loom__axes_contain(&lastop->attrs, d, G->rank);
    if (S->dtype == LOOM_BOOL) return loom__fzg_unsupported_op(G, n_ops - 1, "a reduction of bool");
    bool empty = false;
    for (int32_t d = 0; d < G->rank; d++) empty |= G->reduced[d] && G->dims[d] == 0;
    if (empty && (lastop->kind == LOOM_OP_REDUCE_MAX || lastop->kind == LOOM_OP_REDUCE_MIN))
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "fused: body op %d (%s) over an empty axis",
                         (int)(n_ops - 1), loom_op_name(lastop->kind));
  } else if (G->final_kind != FINAL_NONE) {
    int32_t ax;
    if (!loom__axis_normalize(lastop->attrs.axis, G->rank, &ax))
      return loom__fzg_unsupported_op(G, n_ops - 1, "a bad axis");
    G->reduced[ax] = true;
    if (S->dtype == LOOM_BOOL) return loom__fzg_unsupported_op(G, n_ops - 1, "bool values");
    if (G->final_kind == FINAL_TOPK) {
      G->topk_k = lastop->attrs.k;
      G->largest = (lastop->attrs.set & LOOM_ATTR_LARGEST) ? lastop->attrs.largest : true;
    } else if (G->dims[ax] == 0) {
      return loom__fzg_unsupported_op(G, n_ops - 1, "an empty axis");
    }
  }
  /* What the expression reads: the final input and, backwards, every operand of an
   * expression op (views and leaves only through them). */
  G->used[G->last] = true;
  int32_t n_expr = G->final_op >= 0 ? G->final_op : n_ops;
  for (int32_t i = n_expr - 1; i >= 0; i--) {
    const loom__op *op = &g->ops[i];
    loom__op_class cls = loom__op_info_of(op->kind)->cls;
    if (!G->used[op->outputs[0]]) continue;
    if (cls == LOOM_CLASS_LAYOUT || cls == LOOM_CLASS_SOURCE || cls == LOOM_CLASS_DOT) continue;
    for (int32_t k = 0; k < op->n_inputs; k++) G->used[op->inputs[k]] = true;
  }
  for (int32_t v = 0; v < g->n_values; v++) {
    if (!G->used[v]) continue;
    const loom_type *t = &g->values[v].type;
    if (!loom__fzg_dtype_ok(t->dtype, G->fp64)) {
      char label[32];
      return loom__error(LOOM_ERR_UNSUPPORTED, "fused: body value %s of %s%s",
                         loom__value_label(g, v, label, sizeof label), loom_dtype_name(t->dtype),
                         t->dtype == LOOM_F64 ? " on a device without fp64" : "");
    }
    if (!loom__fzg_fits_space(G, t)) {
      char label[32];
      return loom__error(LOOM_ERR_UNSUPPORTED, "fused: body value %s does not broadcast to the space",
                         loom__value_label(g, v, label, sizeof label));
    }
  }
  return LOOM_OK;
}

static loom_status emit_eval(const gen *G) {
  const loom_graph *g = G->g;
  loom_dtype t = g->values[G->last].type.dtype;
  loom__fzg_put(G->b, "\nFZ_FN %s fz_eval%s(", loom__fzg_tname(G, t), G->vec ? "v" : "");
  param_list(G, true);
  index_list(G, true);
  loom__fzg_put(G->b, ") {\n");
  for (int32_t p = 0; p < g->n_params; p++)
    if (G->used[g->params[p]]) loom__fzg_emit_leaf(G, g->params[p]);
  int32_t n_expr = G->final_op >= 0 ? G->final_op : g->n_ops;
  for (int32_t i = 0; i < n_expr; i++) {
    const loom__op *op = &g->ops[i];
    int32_t v = op->outputs[0];
    if (!G->used[v]) continue;
    loom__op_class cls = loom__op_info_of(op->kind)->cls;
    loom_status s = LOOM_OK;
    int32_t param, fill_op;
    switch (cls) {
      case LOOM_CLASS_LAYOUT:
        if (op->kind == LOOM_OP_CONCAT || op->kind == LOOM_OP_TILE ||
            !loom__fzg_leaf_base(G, v, &param, &fill_op))
          return loom__fzg_unsupported_op(G, i, "a layout op that is not a view of a parameter");
        loom__fzg_emit_leaf(G, v);
        break;
      case LOOM_CLASS_SOURCE: {
        int64_t n = 1;
        for (int32_t d = 0; d < g->values[v].type.rank; d++) n *= g->values[v].type.dims[d];
        if (op->kind == LOOM_OP_IOTA || (op->kind == LOOM_OP_CONSTANT && n != 1))
          return loom__fzg_unsupported_op(G, i, "a source other than a scalar constant or a fill");
        loom__fzg_put(G->b, "  const %s v%d = (%s)(", loom__fzg_tname(G, g->values[v].type.dtype), (int)v,
                      loom__fzg_tname(G, g->values[v].type.dtype));
        loom__fzg_scalar_literal(G, op, g->values[v].type.dtype);
        loom__fzg_put(G->b, ");\n");
        break;
      }
      case LOOM_CLASS_UNARY:
        s = loom__fzg_emit_unary(G, i, v, op->inputs[0]);
        break;
      case LOOM_CLASS_BINARY:
      case LOOM_CLASS_COMPARE:
      case LOOM_CLASS_LOGIC:
        s = loom__fzg_emit_binary(G, i, v, op->inputs[0], op->inputs[1]);
        break;
      case LOOM_CLASS_SELECT:
        loom__fzg_put(G->b, "  const %s v%d = v%d ? v%d : v%d;\n", loom__fzg_ctype(g->values[v].type.dtype),
                      (int)v, (int)op->inputs[0], (int)op->inputs[1], (int)op->inputs[2]);
        break;
      case LOOM_CLASS_CAST:
        s = loom__fzg_emit_cast(G, i, v, op->inputs[0]);
        break;
      case LOOM_CLASS_DOT:
        s = loom__fzg_emit_dot(G, i, v);
        break;
      default:
        return loom__fzg_unsupported_op(G, i, "not an op a fused body takes");
    }
    if (s) return s;
  }
  loom__fzg_put(G->b, "  return v%d;\n}\n", (int)G->last);
  return LOOM_OK;
}

/* The kernel's arguments: parameters, then results. */
static void kernel_head(const gen *G) {
  loom__fzg_put(G->b, "\nFZ_KERNEL loom_fused(");
  param_list(G, true);
  for (int32_t r = 0; r < G->g->n_outputs; r++) {
    loom_dtype t = G->g->values[G->g->outputs[r]].type.dtype;
    loom__fzg_put(G->b, "%sFZ_GLOBAL %s *r%d, fz_i64 ro%d", G->g->n_params || r ? ", " : "",
                  loom__fzg_ctype(t), (int)r, (int)r);
  }
  loom__fzg_put(G->b, ") {\n");
}

static void eval_call(const gen *G) {
  loom__fzg_put(G->b, "fz_eval%s(", G->vec ? "v" : "");
  param_list(G, false);
  index_list(G, false);
  loom__fzg_put(G->b, ")");
}

/* The reduce kinds as statements over v (accumulator), aux, x (the element), j (its reduced
 * position); MERGE takes bv, baux. */
typedef struct red_kind {
  const char *acc; /* accumulator type */
  char init[160], step[200], merge[260], finish[200];
} red_kind;

static void reduce_kind(const gen *G, red_kind *k) {
  const loom__op *op = &G->g->ops[G->final_op];
  loom_dtype t = G->g->values[G->last].type.dtype;
  const char *T = loom__fzg_ctype(t);
  bool fl = loom__fzg_is_float(t);
  const char *sumt = fl ? (t == LOOM_F64 || G->fp64 ? "double" : "float") : "fz_u64";
  const char *lowest = fl ? (t == LOOM_F32 ? "(-FZ_INF_F)" : "(-FZ_INF_D)") : loom__fzg_int_lo(t);
  const char *highest = fl ? (t == LOOM_F32 ? "FZ_INF_F" : "FZ_INF_D") : loom__fzg_int_hi(t);
  const char *nan = t == LOOM_F32 ? "FZ_NAN_F" : "FZ_NAN_D";
  int64_t n = 1;
  for (int32_t d = 0; d < G->rank; d++)
    if (G->reduced[d]) n *= G->dims[d];
  switch (op->kind) {
    case LOOM_OP_REDUCE_SUM:
    case LOOM_OP_REDUCE_MEAN:
    case LOOM_OP_REDUCE_PROD: {
      bool prod = op->kind == LOOM_OP_REDUCE_PROD;
      k->acc = sumt;
      snprintf(k->init, sizeof k->init, "v = (%s)%d; aux = 0;", sumt, prod ? 1 : 0);
      snprintf(k->step, sizeof k->step, "v %s= (%s)x;", prod ? "*" : "+", sumt);
      snprintf(k->merge, sizeof k->merge, "v %s= bv;", prod ? "*" : "+");
      if (op->kind != LOOM_OP_REDUCE_MEAN)
        snprintf(k->finish, sizeof k->finish, "(%s)v", T);
      else if (fl)
        snprintf(k->finish, sizeof k->finish, "(%s)(v / (%s)%" PRId64 ")", T, sumt, n);
      else
        snprintf(k->finish, sizeof k->finish, "(%s)(%" PRId64 " ? (fz_i64)v / %" PRId64 " : 0)", T, n,
                 n ? n : 1);
      break;
    }
    default: { /* max, min */
      bool mx = op->kind == LOOM_OP_REDUCE_MAX;
      const char *cmp = mx ? ">" : "<";
      k->acc = T;
      snprintf(k->init, sizeof k->init, "v = (%s)%s; aux = 0;", T, mx ? lowest : highest);
      snprintf(k->step, sizeof k->step, "v = x %s v ? x : v;%s", cmp, fl ? " aux |= (x != x);" : "");
      snprintf(k->merge, sizeof k->merge, "v = bv %s v ? bv : v; aux |= baux;", cmp);
      if (fl)
        snprintf(k->finish, sizeof k->finish, "aux ? (%s)%s : v", T, nan);
      else
        snprintf(k->finish, sizeof k->finish, "v");
      break;
    }
  }
}

/* argmax/argmin (reduce.cl's ARG_STEP and ARG_TAKES): the first element is taken, then only a
 * strictly better one or a NaN; merged shares compare values, then indices. */
static void arg_kind(const gen *G, red_kind *k) {
  const loom__op *op = &G->g->ops[G->final_op];
  loom_dtype t = G->g->values[G->last].type.dtype;
  const char *cmp = op->kind == LOOM_OP_ARGMAX ? ">" : "<";
  k->acc = loom__fzg_ctype(t);
  snprintf(k->init, sizeof k->init, "v = (%s)0; aux = -1;", k->acc);
  snprintf(k->step, sizeof k->step, "if (aux < 0 || (v == v && (x %s v || x != x))) { v = x; aux = j; }",
           cmp);
  snprintf(k->merge, sizeof k->merge,
           "if (baux >= 0 && (aux < 0 || (bv != bv ? (v == v || baux < aux) : (v == v && (bv %s v || (bv == "
           "v && baux "
           "< aux)))))) { v = bv; aux = baux; }",
           cmp);
  snprintf(k->finish, sizeof k->finish, "aux");
}

/* One element's step: the reduced indices of j, the expression, the kind's step. */
static void emit_step(const gen *G, const red_kind *k, const int32_t *red, int32_t nr, loom_dtype t) {
  loom__fzg_put(G->b, "      fz_i64 r = j;\n");
  split_index(G, "r", red, nr);
  loom__fzg_put(G->b, "      const %s x = ", loom__fzg_ctype(t));
  eval_call(G);
  loom__fzg_put(G->b, ";\n      %s\n", k->step);
}

static void emit_reduce_kernel(const gen *G, int32_t group, bool lockstep, int64_t n_out, int64_t n_red) {
  red_kind k;
  if (G->final_kind == FINAL_ARG)
    arg_kind(G, &k);
  else
    reduce_kind(G, &k);
  int32_t kept[LOOM_MAX_RANK], red[LOOM_MAX_RANK], nk = 0, nr = 0;
  for (int32_t d = 0; d < G->rank; d++) {
    if (G->reduced[d])
      red[nr++] = d;
    else
      kept[nk++] = d;
  }
  loom_dtype t = G->g->values[G->last].type.dtype;
  sbuf *b = G->b;
  kernel_head(G);
  bool grp = group > 1;
  if (grp) {
    loom__fzg_put(b, "  FZ_LOCAL %s fz_lv[%d];\n  FZ_LOCAL fz_i64 fz_la[%d];\n  const fz_i64 lid = FZ_LID;\n",
                  k.acc, (int)group, (int)group);
    loom__fzg_put(b, "  for (fz_i64 o = FZ_GROUP; o < %" PRId64 "; o += FZ_GROUPS) {\n", n_out);
  } else {
    loom__fzg_put(b, "  for (fz_i64 o = FZ_GID; o < %" PRId64 "; o += FZ_GSIZE) {\n", n_out);
  }
  loom__fzg_put(b, "    fz_i64 q = o;\n");
  split_index(G, "q", kept, nk);
  loom__fzg_put(b, "    %s v;\n    fz_i64 aux;\n    %s\n", k.acc, k.init);
  if (grp && lockstep) {
    /* Work-items step through the reduced elements together, a barrier after each round: a
     * driver that runs a group's work-items as a loop (PoCL) makes that loop the innermost
     * one and vectorizes it, each work-item's accumulator a lane. */
    int64_t full = n_red / group * group, rem = n_red - full;
    loom__fzg_put(b,
                  "    for (fz_i64 jb = 0; jb < %" PRId64 "; jb += %d) {\n      const fz_i64 j = jb + lid;\n",
                  full, (int)group);
    emit_step(G, &k, red, nr, t);
    loom__fzg_put(b, "      FZ_BARRIER;\n    }\n");
    if (rem) {
      loom__fzg_put(b, "    if (lid < %" PRId64 ") {\n      const fz_i64 j = %" PRId64 " + lid;\n", rem,
                    full);
      emit_step(G, &k, red, nr, t);
      loom__fzg_put(b, "    }\n");
    }
  } else {
    if (grp)
      loom__fzg_put(b, "    for (fz_i64 j = lid; j < %" PRId64 "; j += %d) {\n", n_red, (int)group);
    else
      loom__fzg_put(b, "    for (fz_i64 j = 0; j < %" PRId64 "; j++) {\n", n_red);
    emit_step(G, &k, red, nr, t);
    loom__fzg_put(b, "    }\n");
  }
  const char *store_idx = "r0[ro0 + o]";
  if (grp) {
    loom__fzg_put(b, "    fz_lv[lid] = v;\n    fz_la[lid] = aux;\n    FZ_BARRIER;\n");
    loom__fzg_put(b, "    for (fz_i64 s = %d; s > 0; s >>= 1) {\n      if (lid < s) {\n", (int)group / 2);
    loom__fzg_put(b, "        const %s bv = fz_lv[lid + s];\n        const fz_i64 baux = fz_la[lid + s];\n",
                  k.acc);
    loom__fzg_put(
        b,
        "        %s\n        fz_lv[lid] = v;\n        fz_la[lid] = aux;\n      }\n      FZ_BARRIER;\n    }\n",
        k.merge);
    loom__fzg_put(
        b,
        "    if (lid == 0) {\n      v = fz_lv[0];\n      aux = fz_la[0];\n      %s = %s;\n    }\n    "
        "FZ_BARRIER;\n",
        store_idx, k.finish);
  } else {
    loom__fzg_put(b, "    %s = %s;\n", store_idx, k.finish);
  }
  loom__fzg_put(b, "    (void)aux;\n  }\n}\n");
}

/* Whether the body's reduction can run with fz_evalv: one reduced axis, a sum, mean,
 * product, max or min of floats computed by float arithmetic only (no comparison, select or
 * cast, whose vector forms differ from the scalar ones), for OpenCL C's vector types. */
static bool vector_ok(const gen *G) {
  if (G->target != LOOM__FZ_OPENCL || G->final_kind != FINAL_REDUCE) return false;
  int32_t nr = 0;
  for (int32_t d = 0; d < G->rank; d++) nr += G->reduced[d];
  loom_dtype t = G->g->values[G->last].type.dtype;
  if (nr != 1 || !loom__fzg_is_float(t)) return false;
  for (int32_t v = 0; v < G->g->n_values; v++)
    if (G->used[v] && G->g->values[v].type.dtype != t) return false;
  for (int32_t i = 0; i < G->final_op; i++) {
    const loom__op *op = &G->g->ops[i];
    if (!G->used[op->outputs[0]]) continue;
    loom__op_class cls = loom__op_info_of(op->kind)->cls;
    if (cls != LOOM_CLASS_LAYOUT && cls != LOOM_CLASS_SOURCE && cls != LOOM_CLASS_UNARY &&
        cls != LOOM_CLASS_BINARY && cls != LOOM_CLASS_DOT)
      return false;
  }
  return true;
}

/* A work-item per output, the reduced axis walked 8 elements at a time by fz_evalv into 8
 * lane accumulators (merged in lane order at the end), the rest by fz_eval: what a CPU
 * driver runs as SIMD code where it would not vectorize the scalar loop (PoCL: a float sum's
 * order, and exp calls). */
static void emit_vector_kernel(gen *G, int64_t n_out, int64_t n_red) {
  red_kind k;
  reduce_kind(G, &k);
  const loom__op *op = &G->g->ops[G->final_op];
  loom_dtype t = G->g->values[G->last].type.dtype;
  bool f32 = t == LOOM_F32;
  const char *T = loom__fzg_ctype(t), *VT = f32 ? "float8" : "double8", *AV = f32 ? "int8" : "long8";
  int32_t kept[LOOM_MAX_RANK], nk = 0, a = 0;
  for (int32_t d = 0; d < G->rank; d++) {
    if (G->reduced[d])
      a = d;
    else
      kept[nk++] = d;
  }
  int64_t full = n_red / 8 * 8;
  bool sum = op->kind == LOOM_OP_REDUCE_SUM || op->kind == LOOM_OP_REDUCE_MEAN,
       prod = op->kind == LOOM_OP_REDUCE_PROD;
  bool wide = strcmp(k.acc, "double") == 0;
  const char *VA = sum || prod ? (wide ? "double8" : "float8") : VT;
  const char *conv = (sum || prod) && wide && f32 ? "convert_double8" : "";
  sbuf *b = G->b;
  kernel_head(G);
  loom__fzg_put(b, "  for (fz_i64 o = FZ_GID; o < %" PRId64 "; o += FZ_GSIZE) {\n    fz_i64 q = o;\n", n_out);
  split_index(G, "q", kept, nk);
  loom__fzg_put(b, "    %s v;\n    fz_i64 aux = 0;\n", k.acc);
  if (sum || prod)
    loom__fzg_put(b, "    %s vv = (%s)(%d);\n", VA, VA, prod ? 1 : 0);
  else
    loom__fzg_put(
        b, "    %s vv = (%s)(%s);\n    %s av = (%s)(0);\n", VA, VA,
        op->kind == LOOM_OP_REDUCE_MAX ? (f32 ? "-FZ_INF_F" : "-FZ_INF_D") : (f32 ? "FZ_INF_F" : "FZ_INF_D"),
        AV, AV);
  /* An f32 sum adds in float lanes over runs of 1024 elements, each run's lanes then added in
   * double (as the cpu evaluator does): a double add per step would cost as much as a term. */
  bool runs = sum && wide && f32;
  if (runs)
    loom__fzg_put(b,
                  "    for (fz_i64 jr = 0; jr < %" PRId64
                  "; jr += 1024) {\n      float8 fv = (float8)(0);\n"
                  "      const fz_i64 je = jr + 1024 < %" PRId64 " ? jr + 1024 : %" PRId64 ";\n",
                  full, full, full);
  char bound[32] = "je";
  if (!runs) snprintf(bound, sizeof bound, "%" PRId64, full);
  loom__fzg_put(
      b, "    for (fz_i64 jb = %s; jb < %s; jb += 8) {\n      const fz_i64 i%d = jb;\n      const %s x = ",
      runs ? "jr" : "0", bound, (int)a, VT);
  G->vec = 8;
  G->vaxis = a;
  eval_call(G);
  G->vec = 0;
  loom__fzg_put(b, ";\n");
  const char *cmp = op->kind == LOOM_OP_REDUCE_MAX ? ">" : "<";
  if (runs)
    loom__fzg_put(b, "      fv += x;\n    }\n      vv += convert_double8(fv);\n    }\n");
  else if (sum || prod)
    loom__fzg_put(b, "      vv %s= %s(x);\n    }\n", prod ? "*" : "+", conv);
  else
    loom__fzg_put(b, "      vv = x %s vv ? x : vv;\n      av |= isnan(x);\n    }\n", cmp);
  loom__fzg_put(b, "    v = vv.s0;\n");
  for (int l = 1; l < 8; l++) {
    if (sum || prod)
      loom__fzg_put(b, "    v %s= vv.s%d;\n", prod ? "*" : "+", l);
    else
      loom__fzg_put(b, "    v = vv.s%d %s v ? vv.s%d : v;\n", l, cmp, l);
  }
  if (!sum && !prod) loom__fzg_put(b, "    aux = any(av) ? 1 : 0;\n");
  loom__fzg_put(b,
                "    for (fz_i64 j = %" PRId64 "; j < %" PRId64
                "; j++) {\n      const fz_i64 i%d = j;\n      const %s x = ",
                full, n_red, (int)a, T);
  eval_call(G);
  loom__fzg_put(b, ";\n      %s\n    }\n    r0[ro0 + o] = %s;\n  }\n}\n", k.step, k.finish);
}

/* topk (topk.cl): NaN ranks above every number, ties go to the lower index; the row's heap
 * (worst at the root) lives in the row's place in the outputs, then is sorted best first. */
static void emit_topk_kernel(const gen *G, int64_t rows, int32_t axis) {
  loom_dtype t = G->g->values[G->last].type.dtype;
  const char *T = loom__fzg_ctype(t);
  sbuf *b = G->b;
  loom__fzg_put(b, "\nFZ_FN int fz_gt(%s a, %s b) { return a != a ? b == b : (b == b && a > b); }\n", T, T);
  loom__fzg_put(b, "FZ_FN int fz_better(%s av, fz_i64 ai, %s bv, fz_i64 bi) {\n", T, T);
  loom__fzg_put(b, "  int ahead = %s, behind = %s;\n  return ahead || (!behind && ai < bi);\n}\n",
                G->largest ? "fz_gt(av, bv)" : "fz_gt(bv, av)",
                G->largest ? "fz_gt(bv, av)" : "fz_gt(av, bv)");
  loom__fzg_put(
      b,
      "FZ_FN void fz_sift(FZ_GLOBAL %s *hv, FZ_GLOBAL fz_i64 *hi, fz_i64 step, fz_i64 size, fz_i64 at) {\n"
      "  %s ev = hv[at * step];\n  fz_i64 ei = hi[at * step];\n  for (;;) {\n"
      "    fz_i64 c = 2 * at + 1;\n    if (c >= size) break;\n"
      "    if (c + 1 < size && fz_better(hv[c * step], hi[c * step], hv[(c + 1) * step], hi[(c + 1) * "
      "step])) c++;\n"
      "    if (!fz_better(ev, ei, hv[c * step], hi[c * step])) break;\n"
      "    hv[at * step] = hv[c * step];\n    hi[at * step] = hi[c * step];\n    at = c;\n  }\n"
      "  hv[at * step] = ev;\n  hi[at * step] = ei;\n}\n",
      T, T);
  int32_t others[LOOM_MAX_RANK], no = 0;
  int64_t inner = 1;
  for (int32_t d = 0; d < G->rank; d++)
    if (d != axis) others[no++] = d;
  for (int32_t d = axis + 1; d < G->rank; d++) inner *= G->dims[d];
  int64_t k = G->topk_k, n = G->dims[axis];
  kernel_head(G);
  loom__fzg_put(b, "  for (fz_i64 row = FZ_GID; row < %" PRId64 "; row += FZ_GSIZE) {\n    fz_i64 q = row;\n",
                rows);
  split_index(G, "q", others, no);
  loom__fzg_put(b,
                "    const fz_i64 o = (row / %" PRId64 ") * %" PRId64 " + row %% %" PRId64
                ";\n"
                "    FZ_GLOBAL %s *hv = r0 + ro0 + o;\n    FZ_GLOBAL fz_i64 *hi = r1 + ro1 + o;\n"
                "    const fz_i64 step = %" PRId64 ", k = %" PRId64
                ";\n    fz_i64 size = 0;\n"
                "    for (fz_i64 i%d = 0; i%d < %" PRId64 "; i%d++) {\n      const %s x = ",
                inner, k * inner, inner, T, inner, k, (int)axis, (int)axis, n, (int)axis, T);
  eval_call(G);
  loom__fzg_put(
      b,
      ";\n      if (size < k) {\n        hv[size * step] = x;\n        hi[size * step] = i%d;\n"
      "        if (++size == k)\n          for (fz_i64 p = k / 2 - 1; p >= 0; p--) fz_sift(hv, hi, step, k, "
      "p);\n"
      "      } else if (fz_better(x, i%d, hv[0], hi[0])) {\n        hv[0] = x;\n        hi[0] = i%d;\n"
      "        fz_sift(hv, hi, step, k, 0);\n      }\n    }\n"
      "    for (fz_i64 end = k - 1; end > 0; end--) {\n      const %s tv = hv[0];\n      const fz_i64 ti = "
      "hi[0];\n"
      "      hv[0] = hv[end * step];\n      hi[0] = hi[end * step];\n      hv[end * step] = tv;\n"
      "      hi[end * step] = ti;\n      fz_sift(hv, hi, step, end, 0);\n    }\n  }\n}\n",
      (int)axis, (int)axis, (int)axis, T);
}

static void emit_elementwise_kernel(const gen *G, int64_t total) {
  int32_t all[LOOM_MAX_RANK];
  for (int32_t d = 0; d < G->rank; d++) all[d] = d;
  kernel_head(G);
  loom__fzg_put(G->b, "  for (fz_i64 e = FZ_GID; e < %" PRId64 "; e += FZ_GSIZE) {\n    fz_i64 q = e;\n",
                total);
  split_index(G, "q", all, G->rank);
  loom__fzg_put(G->b, "    r0[ro0 + e] = ");
  eval_call(G);
  loom__fzg_put(G->b, ";\n  }\n}\n");
}

loom_status loom__fz_generate(const loom_graph *body, const loom__dview *in, loom__fz_target target,
                              bool fp64, int32_t group, uint32_t flags, loom__fz_kernel *out) {
  memset(out, 0, sizeof *out);
  sbuf b = {0};
  gen G = {.g = body, .in = in, .target = target, .fp64 = fp64, .b = &b};
  G.lay = loom__calloc((size_t)body->n_values + 1, sizeof *G.lay);
  G.param_of = loom__malloc(((size_t)body->n_values + 1) * sizeof *G.param_of);
  G.used = loom__calloc((size_t)body->n_values + 1, sizeof *G.used);
  loom_status s = LOOM_OK;
  if (!G.lay || !G.param_of || !G.used) {
    s = loom__oom("a fused kernel's analysis");
    goto done;
  }
  for (int32_t v = 0; v < body->n_values; v++) G.param_of[v] = -1;
  for (int32_t p = 0; p < body->n_params; p++) {
    int32_t v = body->params[p];
    const loom_type *t = &body->values[v].type;
    if (in[p].type.rank != t->rank || in[p].type.dtype != t->dtype ||
        memcmp(in[p].type.dims, t->dims, sizeof(int64_t) * (size_t)t->rank) != 0) {
      char label[32];
      s = loom__error(LOOM_ERR_INVALID_ARGUMENT, "fused: input %d does not have body parameter %s's type",
                      (int)p, loom__value_label(body, v, label, sizeof label));
      goto done;
    }
    G.param_of[v] = p;
    G.lay[v].base = v;
    G.lay[v].owns = true;
    memcpy(G.lay[v].strides, in[p].strides, sizeof G.lay[v].strides);
  }
  if ((s = loom__graph_layouts_given(body, G.lay)) || (s = analyse(&G))) goto done;
  prelude(&G);
  if ((s = emit_eval(&G))) goto done;
  int64_t n_out = 1, n_red = 1;
  for (int32_t d = 0; d < G.rank; d++) {
    if (G.reduced[d])
      n_red *= G.dims[d];
    else
      n_out *= G.dims[d];
  }
  out->n_reduced = 1;
  out->group = 1;
  switch (G.final_kind) {
    case FINAL_NONE:
      out->shape = LOOM__FZ_ELEMENTWISE;
      out->n_units = n_out;
      emit_elementwise_kernel(&G, n_out);
      break;
    case FINAL_TOPK: {
      int32_t axis = 0;
      while (!G.reduced[axis]) axis++;
      out->shape = LOOM__FZ_ROWS;
      out->n_units = G.topk_k > 0 ? n_out : 0;
      out->n_reduced = n_red;
      emit_topk_kernel(&G, n_out, axis);
      break;
    }
    default:
      if ((flags & LOOM__FZ_VECTOR) && vector_ok(&G)) {
        int32_t a = 0;
        while (!G.reduced[a]) a++;
        G.vec = 8;
        G.vaxis = a;
        s = emit_eval(&G);
        G.vec = 0;
        if (s) goto done;
        out->shape = LOOM__FZ_ITEM;
        out->n_units = n_out;
        out->n_reduced = n_red;
        emit_vector_kernel(&G, n_out, n_red);
        break;
      }
      if (group > 1 && (group & (group - 1))) {
        s = loom__error(LOOM_ERR_INVALID_ARGUMENT, "fused: a group of %d work-items (not a power of 2)",
                        (int)group);
        goto done;
      }
      out->shape = group > 1 ? LOOM__FZ_GROUP : LOOM__FZ_ITEM;
      out->group = group > 1 ? group : 1;
      out->n_units = n_out;
      out->n_reduced = n_red;
      emit_reduce_kernel(&G, out->group, (flags & LOOM__FZ_LOCKSTEP) != 0, n_out, n_red);
      break;
  }
  if (b.failed) {
    s = loom__oom("a fused kernel's source");
    goto done;
  }
  out->source = b.p;
  b.p = NULL;
  out->n_params = body->n_params;
  out->n_results = body->n_outputs;
done:
  loom__free(b.p);
  loom__free(G.lay);
  loom__free(G.param_of);
  loom__free(G.used);
  return s;
}

void loom__fz_kernel_free(loom__fz_kernel *k) {
  loom__free(k->source);
  memset(k, 0, sizeof *k);
}

loom_status loom__fz_supported(const loom_graph *body, loom__fz_target target) {
  if (!body) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "fused: body is NULL");
  loom__dview *in = loom__calloc((size_t)body->n_params + 1, sizeof *in);
  if (!in) return loom__oom("a fused body's check");
  for (int32_t p = 0; p < body->n_params; p++) {
    in[p].type = body->values[body->params[p]].type;
    loom__view_dense_strides(&in[p].type, in[p].strides);
  }
  loom__fz_kernel k;
  loom_status s = loom__fz_generate(body, in, target, true, 64, 0, &k);
  loom__fz_kernel_free(&k);
  loom__free(in);
  return s;
}

int64_t loom__fz_reduced_count(const loom_graph *body) {
  if (body->n_ops == 0) return 1;
  const loom__op *last = &body->ops[body->n_ops - 1];
  loom__op_class cls = loom__op_info_of(last->kind)->cls;
  if (cls != LOOM_CLASS_REDUCE && cls != LOOM_CLASS_ARGREDUCE) return 1;
  const loom_type *t = &body->values[last->inputs[0]].type;
  int64_t n = 1;
  for (int32_t a = 0; a < t->rank; a++) {
    int32_t ax;
    bool red = cls == LOOM_CLASS_REDUCE ? loom__axes_contain(&last->attrs, a, t->rank)
                                        : loom__axis_normalize(last->attrs.axis, t->rank, &ax) && ax == a;
    if (red) n *= t->dims[a];
  }
  return n;
}
