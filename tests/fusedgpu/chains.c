/* Body graphs of the fused-kernel tests (chains.h). */
#include "chains.h"

#include <string.h>

#include "harness.h"

uint64_t fz_next(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

const char *const final_names[] = {"none",         "reduce_sum",   "reduce_max", "reduce_min",
                                   "reduce_prod",  "reduce_mean",  "argmax",     "argmin",
                                   "topk largest", "topk smallest"};

/* A chain of n_ops elementwise steps over x [CA,CB], y [1,CB], z [CA,1], w [CB] of dtype dt
 * (and constants), ending in `final`. The same seed gives the same chain. */
loom_graph *build_chain(uint64_t seed, loom_dtype dt, int n_ops, int final) {
  const uint64_t seed0 = seed;
  loom_graph *g = NULL;
  if (loom_graph_create("chain", &g)) return NULL;
  loom_type tx = {dt, 2, {CA, CB}}, ty = {dt, 2, {1, CB}}, tz = {dt, 2, {CA, 1}}, tw = {dt, 1, {CB}};
  loom_value ps[4] = {loom_graph_param(g, "x", &tx), loom_graph_param(g, "y", &ty),
                      loom_graph_param(g, "z", &tz), loom_graph_param(g, "w", &tw)};
  loom_value cur = ps[0];
  bool fl = dt == LOOM_F32 || dt == LOOM_F64;
  static const loom_op fun[] = {LOOM_OP_NEG,  LOOM_OP_ABS,  LOOM_OP_TANH,   LOOM_OP_SIGMOID, LOOM_OP_SIN,
                                LOOM_OP_RELU, LOOM_OP_SQRT, LOOM_OP_SQUARE, LOOM_OP_EXP,     LOOM_OP_FLOOR};
  static const loom_op iun[] = {LOOM_OP_NEG, LOOM_OP_ABS, LOOM_OP_SQUARE, LOOM_OP_SIGN, LOOM_OP_RELU};
  static const loom_op bin[] = {LOOM_OP_ADD,     LOOM_OP_SUB,     LOOM_OP_MUL, LOOM_OP_DIV,
                                LOOM_OP_MAXIMUM, LOOM_OP_MINIMUM, LOOM_OP_POW};
  static const loom_op cmp[] = {LOOM_OP_LT, LOOM_OP_GE, LOOM_OP_EQ, LOOM_OP_NE};
  for (int i = 0; i < n_ops; i++) {
    uint64_t r = fz_next(&seed);
    loom_value other = ps[fz_next(&seed) % 4];
    switch (r % 5) {
      case 0: /* unary */
        cur = fl ? loom_unary(g, fun[fz_next(&seed) % 10], cur) : loom_unary(g, iun[fz_next(&seed) % 5], cur);
        break;
      case 1: { /* binary with a parameter (pow only with a small integer constant) */
        loom_op op = bin[fz_next(&seed) % (fl ? 7 : 6)];
        if (op == LOOM_OP_POW) other = loom_scalar_f64(g, dt, 2);
        cur = loom_binary(g, op, cur, other);
        break;
      }
      case 2: /* binary with a scalar constant */
        cur = loom_binary(g, bin[fz_next(&seed) % 3], cur, loom_scalar_f64(g, dt, fl ? 0.75 : 3));
        break;
      case 3: { /* a comparison choosing between two values */
        loom_value c = loom_binary(g, cmp[fz_next(&seed) % 4], cur, other);
        cur = loom_select(g, c, cur, loom_binary(g, LOOM_OP_SUB, other, cur));
        break;
      }
      default: { /* through another dtype and back */
        static const loom_dtype via[] = {LOOM_I32, LOOM_F32, LOOM_I64, LOOM_F64, LOOM_BOOL, LOOM_I16};
        loom_dtype to = via[fz_next(&seed) % 6];
        loom_value c = loom_cast(g, cur, to);
        if (to == LOOM_F32 || to == LOOM_F64) c = loom_unary(g, LOOM_OP_TANH, c);
        if (to == LOOM_I32 || to == LOOM_I64) c = loom_binary(g, LOOM_OP_ADD, c, loom_scalar_f64(g, to, 1));
        cur = loom_cast(g, c, dt);
        break;
      }
    }
  }
  /* Every value reaches the space [CA,CB]: an add with x broadcasts what has not. */
  cur = loom_binary(g, LOOM_OP_ADD, cur, ps[0]);
  loom_value outs[2];
  int n_out = 1;
  int64_t ax1[] = {1}, ax0[] = {0}, ax01[] = {0, 1};
  switch (final) {
    case F_NONE:
      outs[0] = cur;
      break;
    case F_SUM:
      outs[0] = loom_reduce(g, LOOM_OP_REDUCE_SUM, cur, 1, ax1, false);
      break;
    case F_MAX:
      outs[0] = loom_reduce(g, LOOM_OP_REDUCE_MAX, cur, 1, ax0, true);
      break;
    case F_MIN:
      outs[0] = loom_reduce(g, LOOM_OP_REDUCE_MIN, cur, 2, ax01, false);
      break;
    case F_PROD:
      outs[0] = loom_reduce(g, LOOM_OP_REDUCE_PROD, cur, 1, ax0, false);
      break;
    case F_MEAN: /* integers have no mean: their sum over every axis instead */
      outs[0] = fl ? loom_reduce(g, LOOM_OP_REDUCE_MEAN, cur, 1, ax1, false)
                   : loom_reduce(g, LOOM_OP_REDUCE_SUM, cur, 2, ax01, true);
      break;
    case F_ARGMAX:
      outs[0] = loom_argreduce(g, LOOM_OP_ARGMAX, cur, 1);
      break;
    case F_ARGMIN:
      outs[0] = loom_argreduce(g, LOOM_OP_ARGMIN, cur, -2);
      break;
    default:
      loom_topk(g, cur, final == F_TOPK_LARGEST ? 5 : 3, final == F_TOPK_LARGEST ? 1 : 0,
                final == F_TOPK_LARGEST, &outs[0], &outs[1]);
      n_out = 2;
      break;
  }
  loom_graph_return(g, outs, n_out);
  if (loom_graph_verify(g)) {
    loom_test_fail(__FILE__, __LINE__, "chain (seed %llu, %s, %d ops): %s", (unsigned long long)seed0,
                   loom_dtype_name(dt), n_ops, loom_last_error());
    loom_graph_destroy(g);
    return NULL;
  }
  return g;
}

/* a_i = sum_j exp(-0.5 (sx_i + sy_j - 2 x_i . y_j)) b_j over n points in 3-D, as the fusion
 * pass writes it: the dot inline (k = 3), the mat-vec as mul by b broadcast and reduce_sum. */
loom_graph *kmv_body(int64_t n) {
  loom_graph *g = NULL;
  if (loom_graph_create("kmv", &g)) return NULL;
  loom_type t3 = {LOOM_F32, 2, {n, 3}}, t1 = {LOOM_F32, 1, {n}};
  loom_value x = loom_graph_param(g, "x", &t3), y = loom_graph_param(g, "y", &t3),
             sx = loom_graph_param(g, "sx", &t1), sy = loom_graph_param(g, "sy", &t1),
             b = loom_graph_param(g, "b", &t1);
  int64_t col[] = {n, 1}, rowv[] = {1, n}, perm[] = {1, 0}, ax[] = {1};
  loom_value d = loom_dot(g, x, loom_transpose(g, y, 2, perm));
  loom_value s = loom_binary(g, LOOM_OP_ADD, loom_reshape(g, sx, 2, col), loom_reshape(g, sy, 2, rowv));
  loom_value d2 =
      loom_binary(g, LOOM_OP_SUB, s, loom_binary(g, LOOM_OP_MUL, d, loom_scalar_f64(g, LOOM_F32, 2)));
  loom_value k =
      loom_unary(g, LOOM_OP_EXP, loom_binary(g, LOOM_OP_MUL, d2, loom_scalar_f64(g, LOOM_F32, -0.5)));
  loom_value kb = loom_binary(g, LOOM_OP_MUL, k, loom_reshape(g, b, 2, rowv));
  loom_value a = loom_reduce(g, LOOM_OP_REDUCE_SUM, kb, 1, ax, false);
  loom_graph_return(g, &a, 1);
  if (loom_graph_verify(g)) {
    loom_graph_destroy(g);
    return NULL;
  }
  return g;
}
