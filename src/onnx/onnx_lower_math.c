/* Elementwise ONNX ops: the IR's unary, binary, compare and select ops, and the activations and
 * functions composed of them (Clip, Elu, Softplus, Erf, Round, Mod, ...). */
#include <math.h>
#include <string.h>

#include "onnx/onnx_internal.h"

#define G (c->g)
#define IN(k) loom__onnx_value(c, k)
#define UN(op, x) loom_unary(G, LOOM_OP_##op, x)
#define BIN(op, a, b) loom_binary(G, LOOM_OP_##op, a, b)
#define DT(v) (loom__onnx_type(c, v)->dtype)
#define K(v, value) loom__onnx_scalar(c, DT(v), value)

static loom_status lower_unary(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  return loom__onnx_out(c, 0, loom_unary(G, (loom_op)op, IN(0)));
}

/* Before opset 7, B broadcast against A only with broadcast=1, its dims placed from `axis`
 * (default: the trailing ones, as NumPy): B is reshaped to A's rank to say so. */
static loom_value legacy_broadcast(loom__onnx *c, const Onnx__NodeProto *n, loom_value a, loom_value b) {
  const loom_type at = *loom__onnx_type(c, a), bt = *loom__onnx_type(c, b);
  int64_t axis = loom__onnx_attr_i(n, "axis", at.rank - bt.rank), dims[LOOM_MAX_RANK];
  if (!loom__onnx_attr(n, "axis") || axis < 0 || axis + bt.rank > at.rank) return b;
  for (int32_t i = 0; i < at.rank; i++) dims[i] = i >= axis && i < axis + bt.rank ? bt.dims[i - axis] : 1;
  return loom_reshape(G, b, at.rank, dims);
}

static loom_status lower_binary(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  if (c->opset >= 7 && (loom__onnx_attr(n, "broadcast") || loom__onnx_attr(n, "axis")))
    return loom__onnx_refuse(c, "attributes broadcast and axis (dropped in opset 7)");
  loom_value a = IN(0), b = IN(1);
  if (c->opset < 7 && loom__onnx_attr_i(n, "broadcast", 0)) b = legacy_broadcast(c, n, a, b);
  return loom__onnx_out(c, 0, loom_binary(G, (loom_op)op, a, b));
}

/* Max, Min, Sum, Mean: a fold of any number of inputs. */
static loom_status lower_variadic(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  if (!n->n_input) return loom__onnx_invalid(c, "no inputs");
  loom_op bop = op == LOOM_OP_REDUCE_MEAN ? LOOM_OP_ADD : (loom_op)op;
  loom_value acc = IN(0);
  for (int32_t k = 1; k < (int32_t)n->n_input; k++) acc = loom_binary(G, bop, acc, IN(k));
  if (op == LOOM_OP_REDUCE_MEAN) acc = BIN(DIV, acc, K(acc, (double)n->n_input));
  if (n->n_input == 1) {
    const loom_type t_copy = *loom__onnx_type(c, acc), *t = &t_copy;
    acc = loom_reshape(G, acc, t->rank, t->dims); /* its own value, for its own name */
  }
  return loom__onnx_out(c, 0, acc);
}

static loom_status lower_xor(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  return loom__onnx_out(c, 0, BIN(NE, IN(0), IN(1)));
}

static loom_status lower_where(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  return loom__onnx_out(c, 0, loom_select(G, IN(0), IN(1), IN(2)));
}

static loom_status lower_reciprocal(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  loom_value x = IN(0);
  return loom__onnx_out(c, 0, BIN(DIV, K(x, 1), x));
}

static loom_status lower_identity(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  loom__onnx_val *x = loom__onnx_in(c, 0);
  if (!x) return loom__onnx_invalid(c, "input 0 is missing");
  if (x->host && x->v.id < 0) {
    int64_t bytes;
    loom_type_bytes(&x->type, &bytes);
    void *copy = loom__malloc(bytes ? (size_t)bytes : 1);
    if (!copy) return loom__oom("a constant");
    memcpy(copy, x->host, (size_t)bytes);
    return loom__onnx_out_const(c, 0, &x->type, copy);
  }
  loom_value v = loom__onnx_materialize(c, x);
  const loom_type t_copy = *loom__onnx_type(c, v), *t = &t_copy;
  return loom__onnx_out(c, 0, loom_reshape(G, v, t->rank, t->dims));
}

/* Dropout at inference: the input itself, and a mask of all true where one is asked for. */
static loom_status known_number(loom__onnx *c, int32_t k, double *out);

static loom_status lower_dropout(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  loom__onnx_val *train = loom__onnx_in(c, 2);
  if (train && (!train->host || train->type.dtype != LOOM_BOOL))
    return loom__onnx_refuse(c, "training_mode must be known when the model is read");
  if (train && ((const uint8_t *)train->host)[0]) {
    /* Training drops at random, except at ratio 0, where it is the identity too. */
    double ratio = 0.5;
    if (!loom__onnx_in(c, 1) || known_number(c, 1, &ratio) || ratio != 0)
      return loom__onnx_refuse(c,
                               "training_mode with a ratio other than 0 (random; Loom runs inference only)");
  }
  if (c->opset < 7 && !loom__onnx_attr_i(n, "is_test", 0))
    return loom__onnx_refuse(c, "is_test=0 (training)");
  loom_value x = IN(0);
  const loom_type t_copy = *loom__onnx_type(c, x), *t = &t_copy;
  loom_status s = loom__onnx_out(c, 0, loom_reshape(G, x, t->rank, t->dims));
  if (!s && n->n_output > 1 && n->output[1][0]) {
    loom_type bt = *t;
    bt.dtype = LOOM_BOOL;
    s = loom__onnx_out(c, 1, loom_fill(G, &bt, 1));
  }
  return s;
}

static loom_status lower_cast(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  loom_dtype to;
  if (op) {
    to = DT(IN(1)); /* CastLike */
  } else {
    int64_t code = loom__onnx_attr_i(n, "to", 0);
    if (!loom__onnx_dtype((int32_t)code, &to))
      return loom__onnx_refuse(c, "cast to %s: Loom has no such dtype", loom__onnx_dtype_name((int32_t)code));
  }
  loom_value x = IN(0);
  /* ONNX's bfloat16 conversion truncates where Loom's rounds to nearest even. */
  if ((to == LOOM_BF16) != (DT(x) == LOOM_BF16)) return loom__onnx_refuse(c, "casts to or from bfloat16");
  if (DT(x) == to) {
    const loom_type t_copy = *loom__onnx_type(c, x), *t = &t_copy;
    return loom__onnx_out(c, 0, loom_reshape(G, x, t->rank, t->dims));
  }
  /* Float to bool is x != 0, as ONNX says; the IR's cast of a float truncates first. */
  if (to == LOOM_BOOL && loom_dtype_is_float(DT(x))) return loom__onnx_out(c, 0, BIN(NE, x, K(x, 0)));
  return loom__onnx_out(c, 0, loom_cast(G, x, to));
}

/* Clip: bounds from attributes (opset < 11) or optional inputs. */
static loom_status lower_clip(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  loom_value x = IN(0);
  if (c->opset < 11) {
    x = BIN(MAXIMUM, x, K(x, loom__onnx_attr_f(n, "min", -INFINITY)));
    return loom__onnx_out(c, 0, BIN(MINIMUM, x, K(x, loom__onnx_attr_f(n, "max", INFINITY))));
  }
  if (loom__onnx_in(c, 1)) x = BIN(MAXIMUM, x, IN(1));
  if (loom__onnx_in(c, 2)) x = BIN(MINIMUM, x, IN(2));
  if (!loom__onnx_in(c, 1) && !loom__onnx_in(c, 2)) {
    const loom_type t_copy = *loom__onnx_type(c, x), *t = &t_copy;
    x = loom_reshape(G, x, t->rank, t->dims);
  }
  return loom__onnx_out(c, 0, x);
}

enum {
  ACT_LEAKY,
  ACT_ELU,
  ACT_SELU,
  ACT_HSIGMOID,
  ACT_SOFTPLUS,
  ACT_SOFTSIGN,
  ACT_THRESH,
  ACT_CELU,
  ACT_HSWISH
};

/* The activations of one input and float attributes, each as the spec's formula. */
static loom_status lower_activation(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  loom_value x = IN(0), y = LOOM_VALUE_NONE, zero = K(x, 0), one = K(x, 1);
  switch (op) {
    case ACT_LEAKY:
      y = loom_select(G, BIN(LT, x, zero), BIN(MUL, x, K(x, loom__onnx_attr_f(n, "alpha", 0.01f))), x);
      break;
    case ACT_ELU: {
      loom_value e = BIN(MUL, BIN(SUB, UN(EXP, x), one), K(x, loom__onnx_attr_f(n, "alpha", 1.0f)));
      y = loom_select(G, BIN(LT, x, zero), e, x);
      break;
    }
    case ACT_SELU: {
      double alpha = loom__onnx_attr_f(n, "alpha", 1.67326319217681884765625f);
      double gamma = loom__onnx_attr_f(n, "gamma", 1.05070102214813232421875f);
      loom_value e = BIN(SUB, BIN(MUL, UN(EXP, x), K(x, alpha)), K(x, alpha));
      y = BIN(MUL, loom_select(G, BIN(LE, x, zero), e, x), K(x, gamma));
      break;
    }
    case ACT_HSIGMOID: {
      loom_value l = BIN(ADD, BIN(MUL, x, K(x, loom__onnx_attr_f(n, "alpha", 0.2f))),
                         K(x, loom__onnx_attr_f(n, "beta", 0.5f)));
      y = BIN(MAXIMUM, zero, BIN(MINIMUM, one, l));
      break;
    }
    case ACT_SOFTPLUS: /* max(x, 0) + log(1 + exp(-|x|)): no overflow for large x */
      y = BIN(ADD, BIN(MAXIMUM, x, zero), UN(LOG, BIN(ADD, one, UN(EXP, UN(NEG, UN(ABS, x))))));
      break;
    case ACT_SOFTSIGN:
      y = BIN(DIV, x, BIN(ADD, one, UN(ABS, x)));
      break;
    case ACT_THRESH:
      y = loom_select(G, BIN(GT, x, K(x, loom__onnx_attr_f(n, "alpha", 1.0f))), x, zero);
      break;
    case ACT_CELU: {
      loom_value alpha = K(x, loom__onnx_attr_f(n, "alpha", 1.0f));
      loom_value e = BIN(MUL, alpha, BIN(SUB, UN(EXP, BIN(DIV, x, alpha)), one));
      y = BIN(ADD, BIN(MAXIMUM, zero, x), BIN(MINIMUM, zero, e));
      break;
    }
    case ACT_HSWISH: {
      loom_value l = BIN(ADD, BIN(MUL, x, K(x, 1.0 / 6.0)), K(x, 0.5));
      y = BIN(MUL, x, BIN(MAXIMUM, zero, BIN(MINIMUM, one, l)));
      break;
    }
  }
  return loom__onnx_out(c, 0, y);
}

static loom_status lower_prelu(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  loom_value x = IN(0), slope = IN(1);
  const loom_type xt = *loom__onnx_type(c, x), st = *loom__onnx_type(c, slope);
  if (c->opset < 7 && st.rank == 1 && xt.rank > 2 && st.dims[0] == xt.dims[1] && st.dims[0] != 1) {
    /* PRelu-6's slope is per channel (axis 1), not broadcast from the right. */
    int64_t dims[LOOM_MAX_RANK];
    for (int32_t i = 0; i < xt.rank - 1; i++) dims[i] = i == 0 ? st.dims[0] : 1;
    slope = loom_reshape(G, slope, xt.rank - 1, dims);
  }
  return loom__onnx_out(c, 0, loom_select(G, BIN(LT, x, K(x, 0)), BIN(MUL, x, slope), x));
}

static loom_status lower_shrink(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  loom_value x = IN(0);
  double lambd = loom__onnx_attr_f(n, "lambd", 0.5f), bias = loom__onnx_attr_f(n, "bias", 0.0f);
  if (!loom_dtype_is_float(DT(x))) {
    x = loom_cast(G, x, LOOM_F64);
  }
  loom_value hi = loom_select(G, BIN(GT, x, K(x, lambd)), BIN(SUB, x, K(x, bias)), K(x, 0));
  loom_value y = loom_select(G, BIN(LT, x, K(x, -lambd)), BIN(ADD, x, K(x, bias)), hi);
  loom_dtype want = DT(IN(0));
  return loom__onnx_out(c, 0, DT(y) == want ? y : loom_cast(G, y, want));
}

/* erf(x) to float precision: the Taylor series below |x| = 0.5 (where 1 - erfc would lose the
 * relative accuracy of small values), Numerical Recipes' erfc Chebyshev fit above (fractional
 * error under 1.2e-7 everywhere). */
static loom_value erf_of(loom__onnx *c, loom_value x) {
  static const double cheb[] = {-1.26551223, 1.00002368,  0.37409196, 0.09678418,  -0.18628806,
                                0.27886807,  -1.13520398, 1.48851587, -0.82215223, 0.17087277};
  loom_value a = UN(ABS, x), x2 = BIN(MUL, x, x);
  loom_value t = BIN(DIV, K(x, 1), BIN(ADD, K(x, 1), BIN(MUL, K(x, 0.5), a)));
  loom_value p = K(x, cheb[9]);
  for (int i = 8; i >= 0; i--) p = BIN(ADD, BIN(MUL, p, t), K(x, cheb[i]));
  loom_value erfc = BIN(MUL, t, UN(EXP, BIN(SUB, p, x2)));
  loom_value big = BIN(MUL, UN(SIGN, x), BIN(SUB, K(x, 1), erfc));
  /* 2/sqrt(pi) (x - x^3/3 + x^5/10 - x^7/42 + x^9/216 - x^11/1320 + x^13/9360) */
  static const double taylor[] = {1.0, -1.0 / 3, 1.0 / 10, -1.0 / 42, 1.0 / 216, -1.0 / 1320, 1.0 / 9360};
  loom_value s = K(x, taylor[6]);
  for (int i = 5; i >= 0; i--) s = BIN(ADD, BIN(MUL, s, x2), K(x, taylor[i]));
  loom_value small = BIN(MUL, BIN(MUL, s, x), K(x, 1.1283791670955126));
  return loom_select(G, BIN(LT, a, K(x, 0.5)), small, big);
}

static loom_status lower_erf(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  loom_value x = IN(0);
  if (!loom_dtype_is_float(DT(x))) return loom__onnx_refuse(c, "Erf of a non-float dtype");
  return loom__onnx_out(c, 0, erf_of(c, x));
}

static loom_status lower_tan_hyp(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  loom_value x = IN(0), y;
  if (op == 0) {
    y = BIN(DIV, UN(SIN, x), UN(COS, x));
  } else {
    loom_value e = UN(EXP, x), ei = UN(EXP, UN(NEG, x));
    y = BIN(MUL, op == 1 ? BIN(SUB, e, ei) : BIN(ADD, e, ei), K(x, 0.5));
  }
  return loom__onnx_out(c, 0, y);
}

static loom_status lower_isnan(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  loom_value x = IN(0);
  return loom__onnx_out(c, 0, BIN(NE, x, x));
}

static loom_status lower_isinf(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  loom_value x = IN(0);
  bool pos = loom__onnx_attr_i(n, "detect_positive", 1), neg = loom__onnx_attr_i(n, "detect_negative", 1);
  loom_value p = BIN(EQ, x, K(x, INFINITY)), m = BIN(EQ, x, K(x, -INFINITY));
  loom_value y = pos && neg ? BIN(OR, p, m) : pos ? p : neg ? m : BIN(NE, x, x);
  if (!pos && !neg) y = BIN(AND, y, BIN(EQ, x, x)); /* all false */
  return loom__onnx_out(c, 0, y);
}

/* Round half to even: floor(x + 0.5), less one where that lands on an odd number from a tie. */
static loom_value round_even(loom__onnx *c, loom_value x) {
  loom_value r = UN(FLOOR, BIN(ADD, x, K(x, 0.5)));
  loom_value tie = BIN(EQ, BIN(SUB, r, x), K(x, 0.5));
  loom_value odd = BIN(NE, BIN(SUB, r, BIN(MUL, K(x, 2), UN(FLOOR, BIN(MUL, r, K(x, 0.5))))), K(x, 0));
  return loom_select(G, BIN(AND, tie, odd), BIN(SUB, r, K(x, 1)), r);
}

static loom_status lower_round(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  return loom__onnx_out(c, 0, round_even(c, IN(0)));
}

/* A scale or zero point: a scalar, or per index of `axis` (1-D), shaped to broadcast over x. */
static loom_value per_axis(loom__onnx *c, const Onnx__NodeProto *n, loom_value p, const loom_type *x) {
  const loom_type t = *loom__onnx_type(c, p);
  if (t.rank == 0 || x->rank == 0) return p;
  int64_t axis = loom__onnx_attr_i(n, "axis", 1), dims[LOOM_MAX_RANK];
  if (axis < 0) axis += x->rank;
  for (int32_t i = 0; i < x->rank; i++) dims[i] = i == axis ? t.dims[0] : 1;
  return t.rank == 1 && axis >= 0 && axis < x->rank ? loom_reshape(G, p, x->rank, dims) : p;
}

/* QuantizeLinear: round(x / scale) half to even, plus the zero point, saturated to u8 or i8;
 * DequantizeLinear: (x - zero point) * scale. Both per tensor or per index of `axis`. */
static loom_status lower_quantize(loom__onnx *c, const Onnx__NodeProto *n, int64_t dequantize) {
  loom_value x = IN(0), scale = IN(1);
  const loom_type xt = *loom__onnx_type(c, x);
  loom__onnx_val *zpv = loom__onnx_in(c, 2);
  loom_dtype q = zpv ? zpv->type.dtype : LOOM_U8, f = DT(scale);
  if (dequantize) q = xt.dtype;
  if (q != LOOM_U8 && q != LOOM_I8 && !(dequantize && q == LOOM_I32))
    return loom__onnx_refuse(c, "a quantized type other than uint8 and int8");
  scale = per_axis(c, n, scale, &xt);
  loom_value zp =
      zpv ? loom_cast(G, per_axis(c, n, loom__onnx_value(c, 2), &xt), f) : loom__onnx_scalar(c, f, 0);
  if (dequantize) return loom__onnx_out(c, 0, BIN(MUL, BIN(SUB, loom_cast(G, x, f), zp), scale));
  loom_value y = BIN(ADD, round_even(c, BIN(DIV, x, scale)), zp);
  double lo = q == LOOM_U8 ? 0 : -128, hi = q == LOOM_U8 ? 255 : 127;
  y = BIN(MINIMUM, BIN(MAXIMUM, y, K(y, lo)), K(y, hi));
  return loom__onnx_out(c, 0, loom_cast(G, y, q));
}

/* Mod: fmod=1 takes the dividend's sign (C's fmod), fmod=0 the divisor's (Python's %). */
static loom_status lower_mod(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  loom_value a = IN(0), b = IN(1);
  bool fmod = loom__onnx_attr_i(n, "fmod", 0);
  loom_dtype d = DT(a);
  loom_value r;
  if (loom_dtype_is_float(d)) {
    if (!fmod) return loom__onnx_refuse(c, "fmod=0 on floats");
    loom_value q = BIN(DIV, a, b);
    loom_value tq = loom_select(G, BIN(LT, q, K(q, 0)), UN(CEIL, q), UN(FLOOR, q));
    r = BIN(SUB, a, BIN(MUL, b, tq));
  } else {
    r = BIN(SUB, a, BIN(MUL, b, BIN(DIV, a, b))); /* integer div truncates: C's % */
    if (!fmod) {
      loom_value zero = K(a, 0);
      loom_value fix = BIN(AND, BIN(NE, r, zero), BIN(NE, BIN(LT, r, zero), BIN(LT, b, zero)));
      r = loom_select(G, fix, BIN(ADD, r, b), r);
    }
  }
  return loom__onnx_out(c, 0, r);
}

static loom_status lower_pow(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  loom_value x = IN(0), y = IN(1);
  loom_dtype dx = DT(x), dy = DT(y);
  if (dx == dy) return loom__onnx_out(c, 0, BIN(POW, x, y));
  if (loom_dtype_is_float(dx)) return loom__onnx_out(c, 0, BIN(POW, x, loom_cast(G, y, dx)));
  /* An integer base: the power in f64, exact for the integers it can hold, then cast back. */
  loom_value p = BIN(POW, loom_cast(G, x, LOOM_F64), loom_cast(G, y, LOOM_F64));
  return loom__onnx_out(c, 0, loom_cast(G, p, dx));
}

/* Trilu: keeps the elements on and above (upper) or on and below (lower) diagonal k of the last
 * two axes. */
static loom_status lower_trilu(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  loom_value x = IN(0);
  const loom_type t_copy = *loom__onnx_type(c, x), *t = &t_copy;
  int64_t k = 0;
  if (loom__onnx_in(c, 1)) {
    int32_t cnt;
    loom_status s = loom__onnx_in_ints(c, 1, &k, 1, &cnt);
    if (s) return s;
  }
  if (t->rank < 2) return loom__onnx_invalid(c, "Trilu needs rank >= 2");
  loom_type it = {LOOM_I64, 2, {t->dims[t->rank - 2], t->dims[t->rank - 1]}};
  loom_value row = loom_iota(G, &it, 0), col = loom_iota(G, &it, 1);
  loom_value diff = BIN(SUB, col, row), kk = loom__onnx_scalar(c, LOOM_I64, (double)k);
  loom_value keep = loom__onnx_attr_i(n, "upper", 1) ? BIN(GE, diff, kk) : BIN(LE, diff, kk);
  loom_value zero = DT(x) == LOOM_BOOL ? loom__onnx_scalar(c, LOOM_BOOL, 0) : K(x, 0);
  return loom__onnx_out(c, 0, loom_select(G, keep, x, zero));
}

/* The one number a known scalar (or 1-element) input holds, whatever its dtype. */
static loom_status known_number(loom__onnx *c, int32_t k, double *out) {
  loom__onnx_val *v = loom__onnx_in(c, k);
  int64_t n = 0;
  if (v) loom_type_elements(&v->type, &n);
  if (!v || !v->host || n != 1)
    return loom__onnx_refuse(c, "input %d must be one number (it must be known when the model is read)", k);
  switch (v->type.dtype) {
    case LOOM_F32:
      *out = ((const float *)v->host)[0];
      break;
    case LOOM_F64:
      *out = ((const double *)v->host)[0];
      break;
    case LOOM_I32:
      *out = ((const int32_t *)v->host)[0];
      break;
    case LOOM_I64:
      *out = (double)((const int64_t *)v->host)[0];
      break;
    default:
      return loom__onnx_refuse(c, "input %d of %s", k, loom_dtype_name(v->type.dtype));
  }
  return LOOM_OK;
}

/* OneHot: `values` [off, on] where indices (negatives counting from depth) equal an iota over
 * the new axis. */
static loom_status lower_onehot(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  loom_value idx = IN(0), values = IN(2);
  double depth_f = 0;
  loom_status s = known_number(c, 1, &depth_f);
  if (s) return s;
  int64_t depth = (int64_t)depth_f;
  const loom_type it = *loom__onnx_type(c, idx);
  int32_t r = it.rank + 1, axis;
  if ((s = loom__onnx_axis(c, loom__onnx_attr_i(n, "axis", -1), r, &axis))) return s;
  if (r > LOOM_MAX_RANK || depth < 1) return loom__onnx_refuse(c, "a result of rank over 8 or depth below 1");
  if (it.dtype != LOOM_I64) idx = loom_cast(G, idx, LOOM_I64);
  loom_value d = loom__onnx_scalar(c, LOOM_I64, (double)depth);
  idx = loom_select(G, BIN(LT, idx, loom__onnx_scalar(c, LOOM_I64, 0)), BIN(ADD, idx, d), idx);
  loom_type ot = {LOOM_I64, r, {0}};
  int64_t idims[LOOM_MAX_RANK];
  for (int32_t i = 0, j = 0; i < r; i++) {
    ot.dims[i] = i == axis ? depth : it.dims[j];
    idims[i] = i == axis ? 1 : it.dims[j++];
  }
  loom_value hit = BIN(EQ, loom_reshape(G, idx, r, idims), loom_iota(G, &ot, axis));
  int64_t lo0 = 0, hi0 = 1, lo1 = 1, hi1 = 2;
  loom_value off = loom_reshape(G, loom_slice(G, values, 1, &lo0, &hi0, NULL), 0, NULL);
  loom_value on = loom_reshape(G, loom_slice(G, values, 1, &lo1, &hi1, NULL), 0, NULL);
  return loom__onnx_out(c, 0, loom_select(G, hit, on, off));
}

/* EyeLike: ones on diagonal k of a 2-D shape, in the dtype asked (the input's by default). */
static loom_status lower_eyelike(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  loom__onnx_val *x = loom__onnx_in(c, 0);
  if (!x || x->type.rank != 2) return loom__onnx_invalid(c, "EyeLike takes a 2-D input");
  loom_dtype d = x->type.dtype;
  if (loom__onnx_attr(n, "dtype") && !loom__onnx_dtype((int32_t)loom__onnx_attr_i(n, "dtype", 0), &d))
    return loom__onnx_refuse(c, "a dtype Loom does not have");
  loom_type it = x->type;
  it.dtype = LOOM_I64;
  loom_value diff = BIN(SUB, loom_iota(G, &it, 1), loom_iota(G, &it, 0));
  loom_value on = BIN(EQ, diff, loom__onnx_scalar(c, LOOM_I64, (double)loom__onnx_attr_i(n, "k", 0)));
  return loom__onnx_out(c, 0, d == LOOM_BOOL ? on : loom_cast(G, on, d));
}

enum { WIN_HANN, WIN_HAMMING, WIN_BLACKMAN };

/* HannWindow, HammingWindow, BlackmanWindow: a window of a length known when the model is read
 * is a constant, computed here in double as the spec's cosine sums. */
static loom_status lower_window(loom__onnx *c, const Onnx__NodeProto *n, int64_t kind) {
  double size_f = 0;
  loom_status s = known_number(c, 0, &size_f);
  if (s) return s;
  int64_t size = (int64_t)size_f;
  loom_dtype d = LOOM_F32;
  if (!loom__onnx_dtype((int32_t)loom__onnx_attr_i(n, "output_datatype", 1), &d) || size < 0 ||
      size > (1 << 24))
    return loom__onnx_refuse(c, "this output_datatype or size");
  double den = loom__onnx_attr_i(n, "periodic", 1) ? (double)size : (double)(size - 1);
  loom_type t = {d, 1, {size}};
  uint8_t *data = loom__malloc((size_t)(size ? size : 1) * (size_t)loom_dtype_size(d));
  if (!data) return loom__oom("a window");
  const double pi = 3.14159265358979323846;
  for (int64_t i = 0; i < size; i++) {
    double x = den > 0 ? 2 * pi * (double)i / den : 0, v;
    if (kind == WIN_HANN)
      v = 0.5 - 0.5 * cos(x);
    else if (kind == WIN_HAMMING)
      v = 25.0 / 46.0 - (1 - 25.0 / 46.0) * cos(x);
    else
      v = 0.42 - 0.5 * cos(x) + 0.08 * cos(2 * x);
    loom__scalar_store(d, v, (int64_t)v, false, data + i * loom_dtype_size(d));
  }
  return loom__onnx_out_const(c, 0, &t, data);
}

/* DynamicQuantizeLinear: the u8 scale and zero point of x's range widened to hold 0, as the
 * spec's formula, then QuantizeLinear with them. */
static loom_status lower_dynamic_quantize(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  loom_value x = IN(0);
  const loom_type t = *loom__onnx_type(c, x);
  if (t.dtype != LOOM_F32) return loom__onnx_refuse(c, "an input other than float");
  int64_t axes[LOOM_MAX_RANK];
  for (int32_t i = 0; i < t.rank; i++) axes[i] = i;
  loom_value zero = K(x, 0);
  loom_value hi = BIN(MAXIMUM, loom_reduce(G, LOOM_OP_REDUCE_MAX, x, t.rank, axes, false), zero);
  loom_value lo = BIN(MINIMUM, loom_reduce(G, LOOM_OP_REDUCE_MIN, x, t.rank, axes, false), zero);
  loom_value scale = BIN(DIV, BIN(SUB, hi, lo), K(x, 255));
  loom_value zp =
      BIN(MINIMUM, BIN(MAXIMUM, round_even(c, BIN(SUB, zero, BIN(DIV, lo, scale))), zero), K(x, 255));
  loom_value y = BIN(ADD, round_even(c, BIN(DIV, x, scale)), zp);
  y = BIN(MINIMUM, BIN(MAXIMUM, y, zero), K(x, 255));
  loom_status s = loom__onnx_out(c, 0, loom_cast(G, y, LOOM_U8));
  if (!s) s = loom__onnx_out(c, 1, scale);
  if (!s) s = loom__onnx_out(c, 2, loom_cast(G, zp, LOOM_U8));
  return s;
}

/* clang-format off */
const loom__onnx_op loom__onnx_ops_math[] = {
    {"DynamicQuantizeLinear", lower_dynamic_quantize, 0, ""},
    {"HannWindow", lower_window, WIN_HANN, "output_datatype,periodic"},
    {"HammingWindow", lower_window, WIN_HAMMING, "output_datatype,periodic"},
    {"BlackmanWindow", lower_window, WIN_BLACKMAN, "output_datatype,periodic"},
    {"OneHot", lower_onehot, 0, "axis"}, {"EyeLike", lower_eyelike, 0, "dtype,k"},
    {"QuantizeLinear", lower_quantize, 0, "axis"}, {"DequantizeLinear", lower_quantize, 1, "axis"},
    {"Neg", lower_unary, LOOM_OP_NEG, ""}, {"Abs", lower_unary, LOOM_OP_ABS, ""},
    {"Sign", lower_unary, LOOM_OP_SIGN, ""}, {"Exp", lower_unary, LOOM_OP_EXP, ""},
    {"Log", lower_unary, LOOM_OP_LOG, ""}, {"Sqrt", lower_unary, LOOM_OP_SQRT, ""},
    {"Sin", lower_unary, LOOM_OP_SIN, ""}, {"Cos", lower_unary, LOOM_OP_COS, ""},
    {"Tanh", lower_unary, LOOM_OP_TANH, ""}, {"Sigmoid", lower_unary, LOOM_OP_SIGMOID, ""},
    {"Relu", lower_unary, LOOM_OP_RELU, ""}, {"Floor", lower_unary, LOOM_OP_FLOOR, ""},
    {"Ceil", lower_unary, LOOM_OP_CEIL, ""}, {"Not", lower_unary, LOOM_OP_NOT, ""},
    {"Add", lower_binary, LOOM_OP_ADD, "axis,broadcast"}, {"Sub", lower_binary, LOOM_OP_SUB, "axis,broadcast"},
    {"Mul", lower_binary, LOOM_OP_MUL, "axis,broadcast"}, {"Div", lower_binary, LOOM_OP_DIV, "axis,broadcast"},
    {"Pow", lower_pow, 0, ""}, {"Equal", lower_binary, LOOM_OP_EQ, "axis,broadcast"},
    {"Less", lower_binary, LOOM_OP_LT, "axis,broadcast"}, {"LessOrEqual", lower_binary, LOOM_OP_LE, ""},
    {"Greater", lower_binary, LOOM_OP_GT, "axis,broadcast"}, {"GreaterOrEqual", lower_binary, LOOM_OP_GE, ""},
    {"And", lower_binary, LOOM_OP_AND, "axis,broadcast"}, {"Or", lower_binary, LOOM_OP_OR, "axis,broadcast"},
    {"Xor", lower_xor, 0, ""}, {"Where", lower_where, 0, ""},
    {"Max", lower_variadic, LOOM_OP_MAXIMUM, ""}, {"Min", lower_variadic, LOOM_OP_MINIMUM, ""},
    {"Sum", lower_variadic, LOOM_OP_ADD, ""}, {"Mean", lower_variadic, LOOM_OP_REDUCE_MEAN, ""},
    {"Reciprocal", lower_reciprocal, 0, ""}, {"Identity", lower_identity, 0, ""},
    {"Dropout", lower_dropout, 0, "seed,ratio,is_test"}, {"Cast", lower_cast, 0, "to"},
    {"CastLike", lower_cast, 1, ""}, {"Clip", lower_clip, 0, "min,max"},
    {"LeakyRelu", lower_activation, ACT_LEAKY, "alpha"}, {"Elu", lower_activation, ACT_ELU, "alpha"},
    {"Selu", lower_activation, ACT_SELU, "alpha,gamma"},
    {"HardSigmoid", lower_activation, ACT_HSIGMOID, "alpha,beta"},
    {"Softplus", lower_activation, ACT_SOFTPLUS, ""}, {"Softsign", lower_activation, ACT_SOFTSIGN, ""},
    {"ThresholdedRelu", lower_activation, ACT_THRESH, "alpha"}, {"Celu", lower_activation, ACT_CELU, "alpha"},
    {"HardSwish", lower_activation, ACT_HSWISH, ""}, {"PRelu", lower_prelu, 0, ""},
    {"Shrink", lower_shrink, 0, "lambd,bias"}, {"Erf", lower_erf, 0, ""},
    {"Tan", lower_tan_hyp, 0, ""}, {"Sinh", lower_tan_hyp, 1, ""}, {"Cosh", lower_tan_hyp, 2, ""},
    {"IsNaN", lower_isnan, 0, ""}, {"IsInf", lower_isinf, 0, "detect_positive,detect_negative"},
    {"Round", lower_round, 0, ""}, {"Mod", lower_mod, 0, "fmod"}, {"Trilu", lower_trilu, 0, "upper"},
    {NULL, NULL, 0, NULL},
};
/* clang-format on */
