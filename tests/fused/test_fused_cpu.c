/* The cpu evaluator of fused bodies (loom__cpu_fused, docs/ir-fusion.md) against the same body run
 * unfused, op by op, through the cpu backend's kernels (loom__cpu_run_op, every value
 * materialized): random chains of 1 to 12 elementwise ops over random dtypes, broadcasts and
 * strided operands, ending in each reduction, argmax/argmin, topk or nothing; NaN and infinity
 * where the unfused ops make them; the Gaussian kernel product's body with its inline dot. */
#include <math.h>
#include <stdlib.h>
#include <time.h>

#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_vmath.h"
#include "fused_util.h"
#include "harness.h"

/* ---- the unfused reference ---------------------------------------------------------------- */

typedef struct tensors {
  int32_t n;
  void **data; /* per value of the graph, dense */
} tensors;

static void tensors_free(tensors *t) {
  for (int32_t i = 0; i < t->n; i++) free(t->data[i]);
  free(t->data);
}

/* Runs every op of g on dense buffers; params[] holds the parameters' dense data. */
static loom_status run_unfused(const loom_graph *g, void *const *params, tensors *vals) {
  vals->n = g->n_values;
  vals->data = calloc((size_t)g->n_values, sizeof *vals->data);
  for (int32_t p = 0; p < g->n_params; p++) {
    const loom_type *t = &g->values[g->params[p]].type;
    size_t bytes = (size_t)(elems(t) * loom_dtype_size(t->dtype));
    vals->data[g->params[p]] = malloc(bytes + 16);
    memcpy(vals->data[g->params[p]], params[p], bytes);
  }
  for (int32_t i = 0; i < g->n_ops; i++) {
    const loom__op *op = &g->ops[i];
    loom__view in[4], out[2];
    for (int32_t k = 0; k < op->n_inputs; k++)
      in[k] = dense_view(&g->values[op->inputs[k]].type, vals->data[op->inputs[k]]);
    for (int32_t r = 0; r < op->n_outputs; r++) {
      const loom_type *t = &g->values[op->outputs[r]].type;
      vals->data[op->outputs[r]] = malloc((size_t)(elems(t) * loom_dtype_size(t->dtype)) + 16);
      out[r] = dense_view(t, vals->data[op->outputs[r]]);
    }
    int64_t sb = loom__op_scratch_bytes(g, op);
    void *scratch = sb ? malloc((size_t)sb) : NULL;
    loom_status s = loom__cpu_run_op(g, op, in, out, scratch, sb);
    free(scratch);
    if (s) return s;
  }
  return LOOM_OK;
}

/* ---- random data ---------------------------------------------------------------------------- */

static uint64_t rng_state = 88172645463325252ull;
static uint64_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}
static int64_t rint_in(int64_t lo, int64_t hi) { /* [lo, hi] */
  return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1));
}
static double runif(double lo, double hi) {
  return lo + (hi - lo) * (double)(rnd() >> 11) / 9007199254740992.0;
}

static double get_elem(loom_dtype dt, const void *p, int64_t i) {
  switch (dt) {
    case LOOM_BOOL:
      return ((const uint8_t *)p)[i];
    case LOOM_I8:
      return ((const int8_t *)p)[i];
    case LOOM_U8:
      return ((const uint8_t *)p)[i];
    case LOOM_I16:
      return ((const int16_t *)p)[i];
    case LOOM_I32:
      return ((const int32_t *)p)[i];
    case LOOM_I64:
      return (double)((const int64_t *)p)[i];
    case LOOM_F16:
      return loom_f16_to_f32(((const uint16_t *)p)[i]);
    case LOOM_BF16: {
      uint32_t b = (uint32_t)((const uint16_t *)p)[i] << 16;
      float f;
      memcpy(&f, &b, 4);
      return f;
    }
    case LOOM_F32:
      return ((const float *)p)[i];
    case LOOM_F64:
      return ((const double *)p)[i];
    default:
      return 0;
  }
}

static void set_elem(loom_dtype dt, void *p, int64_t i, double v) {
  switch (dt) {
    case LOOM_BOOL:
      ((uint8_t *)p)[i] = v != 0;
      break;
    case LOOM_I8:
      ((int8_t *)p)[i] = (int8_t)v;
      break;
    case LOOM_U8:
      ((uint8_t *)p)[i] = (uint8_t)v;
      break;
    case LOOM_I16:
      ((int16_t *)p)[i] = (int16_t)v;
      break;
    case LOOM_I32:
      ((int32_t *)p)[i] = (int32_t)v;
      break;
    case LOOM_I64:
      ((int64_t *)p)[i] = (int64_t)v;
      break;
    case LOOM_F16:
      ((uint16_t *)p)[i] = loom_f32_to_f16((float)v);
      break;
    case LOOM_BF16:
      ((uint16_t *)p)[i] = loom_f32_to_bf16((float)v);
      break;
    case LOOM_F32:
      ((float *)p)[i] = (float)v;
      break;
    case LOOM_F64:
      ((double *)p)[i] = v;
      break;
    default:
      break;
  }
}

static bool is_float(loom_dtype dt) {
  return dt == LOOM_F16 || dt == LOOM_BF16 || dt == LOOM_F32 || dt == LOOM_F64;
}

/* Values in [-2, 2] for floats (a few NaN and inf when `special`), small integers. */
static void fill_random(loom_dtype dt, void *p, int64_t n, bool special) {
  for (int64_t i = 0; i < n; i++) {
    double v;
    if (is_float(dt)) {
      v = runif(-2, 2);
      if (special && rnd() % 50 == 0) v = (rnd() & 1) ? NAN : ((rnd() & 1) ? INFINITY : -INFINITY);
    } else if (dt == LOOM_BOOL) {
      v = (double)(rnd() & 1);
    } else if (dt == LOOM_U8) {
      v = (double)rint_in(0, 9);
    } else {
      v = (double)rint_in(-5, 5);
    }
    set_elem(dt, p, i, v);
  }
}

/* ---- random bodies ---------------------------------------------------------------------------- */

static const loom_dtype chain_dtypes[] = {LOOM_F32, LOOM_F64, LOOM_F32, LOOM_F64, LOOM_I32, LOOM_I8,
                                          LOOM_U8,  LOOM_I64, LOOM_I16, LOOM_F16, LOOM_BF16};
#define N_CHAIN_DTYPES ((int)(sizeof chain_dtypes / sizeof chain_dtypes[0]))

static const loom_op float_unary[] = {
    LOOM_OP_NEG, LOOM_OP_ABS, LOOM_OP_SIGN, LOOM_OP_EXP,     LOOM_OP_LOG,  LOOM_OP_SQRT,  LOOM_OP_RSQRT,
    LOOM_OP_SIN, LOOM_OP_COS, LOOM_OP_TANH, LOOM_OP_SIGMOID, LOOM_OP_RELU, LOOM_OP_FLOOR, LOOM_OP_CEIL};
static const loom_op int_unary[] = {LOOM_OP_NEG, LOOM_OP_ABS, LOOM_OP_SIGN, LOOM_OP_RELU};
static const loom_op arith[] = {LOOM_OP_ADD, LOOM_OP_SUB,     LOOM_OP_MUL,    LOOM_OP_DIV,
                                LOOM_OP_POW, LOOM_OP_MAXIMUM, LOOM_OP_MINIMUM};
static const loom_op compares[] = {LOOM_OP_EQ, LOOM_OP_NE, LOOM_OP_LT, LOOM_OP_LE, LOOM_OP_GT, LOOM_OP_GE};
#define PICK(a) (a[rnd() % (sizeof a / sizeof a[0])])

typedef struct chain {
  loom_graph *g;
  int32_t r;
  int64_t dims[LOOM_MAX_RANK];
  loom_value vals[64];
  int32_t n_vals;
  int32_t n_params;
  bool special;
} chain;

/* A shape that broadcasts to S: each axis S's or 1. */
static loom_type sub_shape(const chain *c, loom_dtype dt, bool full) {
  loom_type t;
  int64_t dims[LOOM_MAX_RANK];
  for (int32_t d = 0; d < c->r; d++) dims[d] = (full || rnd() % 3) ? c->dims[d] : 1;
  loom_type_make(dt, c->r, dims, &t);
  return t;
}

static loom_value add_param(chain *c, loom_dtype dt, bool full) {
  char name[16];
  snprintf(name, sizeof name, "p%d", (int)c->n_params++);
  loom_type t = sub_shape(c, dt, full);
  loom_value v = loom_graph_param(c->g, name, &t);
  c->vals[c->n_vals++] = v;
  return v;
}

/* A value of dtype dt among those made, or a new parameter or scalar constant. */
static loom_value operand(chain *c, loom_dtype dt) {
  loom_value pool[64];
  int n = 0;
  for (int i = 0; i < c->n_vals; i++)
    if (loom_value_type(c->g, c->vals[i])->dtype == dt) pool[n++] = c->vals[i];
  uint64_t roll = rnd() % 10;
  if (n && roll < 7) return pool[rnd() % (uint64_t)n];
  double v = is_float(dt) ? runif(-2, 2) : (double)rint_in(dt == LOOM_U8 ? 0 : -3, 3);
  if (dt == LOOM_BOOL) v = (double)(rnd() & 1);
  return loom_scalar_f64(c->g, dt, v);
}

static loom_value last_of(chain *c, loom_value v) {
  c->vals[c->n_vals++] = v;
  return v;
}

/* One random op on x (whose dtype may change: compare, cast). */
static loom_value random_op(chain *c, loom_value x) {
  loom_dtype dt = loom_value_type(c->g, x)->dtype;
  uint64_t roll = rnd() % 20;
  if (dt == LOOM_BOOL) {
    if (roll < 6) return last_of(c, loom_select(c->g, x, operand(c, LOOM_F32), operand(c, LOOM_F32)));
    if (roll < 10) return last_of(c, loom_cast(c->g, x, chain_dtypes[rnd() % N_CHAIN_DTYPES]));
    if (roll < 14) return last_of(c, loom_unary(c->g, LOOM_OP_NOT, x));
    return last_of(c, loom_binary(c->g, (rnd() & 1) ? LOOM_OP_AND : LOOM_OP_OR, x, operand(c, LOOM_BOOL)));
  }
  if (roll < 2) return last_of(c, loom_cast(c->g, x, chain_dtypes[rnd() % N_CHAIN_DTYPES]));
  if (roll < 4) return last_of(c, loom_binary(c->g, PICK(compares), x, operand(c, dt)));
  if (roll < 10 && dt != LOOM_U8) { /* the IR takes no unary arithmetic of u8 */
    loom_op op = is_float(dt) ? PICK(float_unary) : PICK(int_unary);
    return last_of(c, loom_unary(c->g, op, x));
  }
  loom_op op = PICK(arith);
  loom_value y = operand(c, dt);
  return last_of(c, (rnd() & 1) ? loom_binary(c->g, op, x, y) : loom_binary(c->g, op, y, x));
}

typedef enum {
  END_NONE,
  END_SUM,
  END_PROD,
  END_MAX,
  END_MIN,
  END_MEAN,
  END_ARGMAX,
  END_ARGMIN,
  END_TOPK,
  END_COUNT
} ending;
static const char *ending_names[] = {"none", "sum", "prod", "max", "min", "mean", "argmax", "argmin", "topk"};

/* Ends the chain: the final op over random axes; returns its outputs. */
static int32_t finish(chain *c, loom_value x, ending e, loom_value *outs) {
  loom_dtype xdt = loom_value_type(c->g, x)->dtype;
  if (xdt == LOOM_BOOL && e != END_NONE) x = loom_cast(c->g, x, LOOM_I32);
  if (!is_float(xdt) && e == END_MEAN) x = loom_cast(c->g, x, LOOM_F64); /* the IR's mean is of floats */
  /* The final op's input has S's type: a value that does not cover it is widened. */
  const loom_type *t = loom_value_type(c->g, x);
  bool full = t != NULL;
  for (int32_t d = 0; full && d < c->r; d++) full = t->dims[d] == c->dims[d];
  if (t && !full && e != END_NONE) {
    loom_type s;
    loom_type_make(t->dtype, c->r, c->dims, &s);
    x = loom_binary(c->g, LOOM_OP_ADD, x, loom_fill(c->g, &s, 0));
  }
  int32_t axis = (int32_t)(rnd() % (uint64_t)c->r);
  switch (e) {
    case END_NONE:
      outs[0] = x;
      return 1;
    case END_ARGMAX:
    case END_ARGMIN:
      outs[0] = loom_argreduce(c->g, e == END_ARGMAX ? LOOM_OP_ARGMAX : LOOM_OP_ARGMIN, x, axis);
      return 1;
    case END_TOPK: {
      int64_t k = rint_in(0, LOOM_MIN(c->dims[axis], 5));
      loom_topk(c->g, x, k, axis, rnd() & 1, &outs[0], &outs[1]);
      return 2;
    }
    default: {
      static const loom_op ops[] = {[END_SUM] = LOOM_OP_REDUCE_SUM,
                                    [END_PROD] = LOOM_OP_REDUCE_PROD,
                                    [END_MAX] = LOOM_OP_REDUCE_MAX,
                                    [END_MIN] = LOOM_OP_REDUCE_MIN,
                                    [END_MEAN] = LOOM_OP_REDUCE_MEAN};
      int64_t axes[LOOM_MAX_RANK];
      int32_t n = 0;
      for (int32_t d = 0; d < c->r; d++)
        if (rnd() & 1) axes[n++] = d;
      if (n == 0) axes[n++] = axis;
      outs[0] = loom_reduce(c->g, ops[e], x, n, axes, rnd() & 1);
      return 1;
    }
  }
}

/* ---- running both ways and comparing ------------------------------------------------------------ */

/* The operands as the fused evaluator gets them: the dense data, or the same values through
 * other strides: column-major, or broadcast (stride 0) along an axis where the data is constant
 * along it. Writes the dense data the reference reads into dense[]. */
typedef struct operand_data {
  void *dense, *store;
  loom__view view;
} operand_data;

static void make_operand(const loom_type *t, operand_data *o, bool special) {
  int64_t n = elems(t), es = (int64_t)loom_dtype_size(t->dtype);
  o->dense = malloc((size_t)(n * es) + 16);
  fill_random(t->dtype, o->dense, n, special);
  o->store = NULL;
  o->view = dense_view(t, o->dense);
  uint64_t roll = rnd() % 4;
  int32_t d = t->rank ? (int32_t)(rnd() % (uint64_t)t->rank) : 0;
  if (roll == 0 && t->rank && t->dims[d] > 1) { /* constant along d: read through stride 0 */
    int64_t inner = 1;
    for (int32_t e = d + 1; e < t->rank; e++) inner *= t->dims[e];
    for (int64_t i = 0; i < n; i++) {
      int64_t a = i / inner % t->dims[d];
      if (a) memcpy((char *)o->dense + i * es, (char *)o->dense + (i - a * inner) * es, (size_t)es);
    }
    o->view.strides[d] = 0;
  } else if (roll == 1 && t->rank >= 2) { /* column-major */
    o->store = malloc((size_t)(n * es) + 16);
    int64_t s = 1;
    for (int32_t e = 0; e < t->rank; e++) {
      o->view.strides[e] = s;
      s *= t->dims[e];
    }
    for (int64_t i = 0; i < n; i++) {
      int64_t rem = i, off = 0;
      for (int32_t e = t->rank - 1; e >= 0; e--) {
        off += rem % t->dims[e] * o->view.strides[e];
        rem /= t->dims[e];
      }
      memcpy((char *)o->store + off * es, (char *)o->dense + i * es, (size_t)es);
    }
    o->view.data = o->store;
  }
}

static double tol_of(loom_dtype dt) {
  switch (dt) {
    case LOOM_F64:
      return 1e-7;
    case LOOM_F32:
      return 2e-3;
    default:
      return 3e-2;
  }
}

static double max_abs(loom_dtype dt, const void *p, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; i++) {
    double v = fabs(get_elem(dt, p, i));
    if (isfinite(v) && v > m) m = v;
  }
  return m;
}

/* Whether fused value a agrees with unfused b: equal for integers, NaN with NaN, infinities
 * equal, else within the dtype's tolerance of b and of the output's scale. */
static bool agrees(loom_dtype dt, double a, double b, double scale) {
  if (!is_float(dt)) return a == b;
  if (isnan(b) || isnan(a)) return isnan(a) && isnan(b);
  if (isinf(b) || isinf(a)) return a == b || fabs(a - b) <= tol_of(dt) * fmax(fabs(a), fabs(b));
  return fabs(a - b) <= tol_of(dt) * (fabs(b) + scale);
}

/* Runs body both ways on the same operands and compares every output. label names the case. */
static bool check_body(const loom_graph *body, bool special, const char *label) {
  int32_t np = body->n_params;
  operand_data ops[8];
  void *dense[8];
  for (int32_t p = 0; p < np; p++) {
    make_operand(&body->values[body->params[p]].type, &ops[p], special);
    dense[p] = ops[p].dense;
  }
  loom__view in[8], out[2];
  for (int32_t p = 0; p < np; p++) in[p] = ops[p].view;
  tensors ref = {0};
  bool ok = true;
  loom_status s = run_unfused(body, dense, &ref);
  if (s) {
    loom_test_fail(__FILE__, __LINE__, "%s: unfused: %s", label, loom_last_error());
    ok = false;
  }
  void *got[2] = {NULL, NULL};
  for (int32_t r = 0; ok && r < body->n_outputs; r++) {
    const loom_type *t = &body->values[body->outputs[r]].type;
    got[r] = malloc((size_t)(elems(t) * loom_dtype_size(t->dtype)) + 16);
    out[r] = dense_view(t, got[r]);
  }
  if (ok && (s = loom__cpu_fused(body, in, out, NULL, 0))) {
    loom_test_fail(__FILE__, __LINE__, "%s: fused: %s", label, loom_last_error());
    ok = false;
  }
  const loom__op *fin = &body->ops[body->n_ops - 1];
  bool by_index = fin->kind == LOOM_OP_ARGMAX || fin->kind == LOOM_OP_ARGMIN || fin->kind == LOOM_OP_TOPK;
  for (int32_t r = 0; ok && r < body->n_outputs; r++) {
    const loom_type *t = &body->values[body->outputs[r]].type;
    const void *want = ref.data[body->outputs[r]];
    int64_t n = elems(t);
    double scale = max_abs(t->dtype, want, n);
    if (fin->n_inputs && loom__op_info_of(fin->kind)->cls == LOOM_CLASS_REDUCE) {
      const loom_type *st = &body->values[fin->inputs[0]].type;
      scale = fmax(scale, max_abs(st->dtype, ref.data[fin->inputs[0]], elems(st)));
    }
    for (int64_t i = 0; ok && i < n; i++) {
      double a = get_elem(t->dtype, got[r], i), b = get_elem(t->dtype, want, i);
      if (by_index && t->dtype == LOOM_I64 && a != b) {
        /* A float index may differ only between values within the tolerance: the unfused
         * value at the fused index must match the unfused best. */
        const loom_type *st = &body->values[fin->inputs[0]].type;
        if (is_float(st->dtype) && fin->kind != LOOM_OP_TOPK) {
          int32_t axis;
          loom__axis_normalize(fin->attrs.axis, st->rank, &axis);
          int64_t inner = 1;
          for (int32_t d = axis + 1; d < st->rank; d++) inner *= st->dims[d];
          int64_t base = i / inner * inner * st->dims[axis] + i % inner;
          double va = get_elem(st->dtype, ref.data[fin->inputs[0]], base + (int64_t)a * inner);
          double vb = get_elem(st->dtype, ref.data[fin->inputs[0]], base + (int64_t)b * inner);
          /* equal values are a tie, which goes to the lower index: no leeway there */
          if (a >= 0 && a < st->dims[axis] && va != vb && agrees(st->dtype, va, vb, 0)) continue;
        }
        if (is_float(st->dtype) && fin->kind == LOOM_OP_TOPK) {
          double va = get_elem(body->values[body->outputs[0]].type.dtype, got[0], i);
          double vb = get_elem(body->values[body->outputs[0]].type.dtype, ref.data[body->outputs[0]], i);
          if (va != vb && agrees(st->dtype, va, vb, 0)) continue;
        }
      }
      if (!agrees(t->dtype, a, b, scale)) {
        char *text = NULL;
        loom_graph_to_string(body, &text);
        loom_test_fail(__FILE__, __LINE__, "%s: output %d element %lld: fused %.9g, unfused %.9g\n%s", label,
                       (int)r, (long long)i, a, b, text ? text : "");
        free(text);
        ok = false;
      }
    }
  }
  for (int32_t r = 0; r < 2; r++) free(got[r]);
  tensors_free(&ref);
  for (int32_t p = 0; p < np; p++) {
    free(ops[p].dense);
    free(ops[p].store);
  }
  return ok;
}

/* One random chain of 1 to 12 ops over a random space, ending in e. */
static bool random_case(int seed, ending e, bool big) {
  chain c = {0};
  char label[64];
  snprintf(label, sizeof label, "seed %d, %s", seed, ending_names[e]);
  loom_graph_create("body", &c.g);
  c.r = (int32_t)rint_in(1, 3);
  for (int32_t d = 0; d < c.r; d++) c.dims[d] = rint_in(1, 9);
  /* Past a block's length on the last axis, and a few rows. */
  if (big) c.dims[c.r - 1] = rint_in(1000, 2600);
  c.special = rnd() % 3 == 0;
  loom_dtype dt = chain_dtypes[rnd() % N_CHAIN_DTYPES];
  /* Parameters come before ops: the chain's own, one of its dtype that broadcasts, two
   * others for the casts and selects to meet. */
  loom_value x = add_param(&c, dt, true);
  add_param(&c, dt, false);
  add_param(&c, chain_dtypes[rnd() % N_CHAIN_DTYPES], false);
  add_param(&c, LOOM_F32, false);
  int n_ops = (int)rint_in(1, 12);
  for (int i = 0; i < n_ops && c.n_vals < 56 && x.id >= 0; i++) x = random_op(&c, x);
  if (x.id < 0) {
    loom_graph_verify(c.g);
    loom_test_fail(__FILE__, __LINE__, "%s: the body does not build: %s", label, loom_last_error());
    loom_graph_destroy(c.g);
    return false;
  }
  loom_value outs[2];
  int32_t n_out = finish(&c, x, e, outs);
  loom_graph_return(c.g, outs, n_out);
  bool ok = true;
  if (loom_graph_verify(c.g)) {
    loom_test_fail(__FILE__, __LINE__, "%s: the body does not build: %s", label, loom_last_error());
    ok = false;
  }
  if (ok) ok = check_body(c.g, c.special, label);
  loom_graph_destroy(c.g);
  return ok;
}

TEST(fused_cpu_random_chains) {
  int failures = 0;
  for (int seed = 1; seed <= 600; seed++) {
    rng_state = 0x9E3779B97F4A7C15ull * (uint64_t)seed;
    ending e = (ending)(seed % END_COUNT);
    if (!random_case(seed, e, seed % 7 == 0) && ++failures == 5) return;
  }
}

/* Long bodies: 400 ops whose values share the evaluator's buffers by liveness (a value read
 * twice, once far later, keeps its buffer until then), over rows it walks as one axis
 * ([37, 50], dense) and rows it cannot ([37, 50] with a row broadcast operand), with and
 * without a reduction at the end. */
static loom_graph *long_body(bool row_operand, bool reduce) {
  loom_graph *g = NULL;
  loom_graph_create("body", &g);
  loom_type full, row;
  loom_type_make(LOOM_F32, 2, (const int64_t[]){37, 50}, &full);
  loom_type_make(LOOM_F32, 2, (const int64_t[]){37, 1}, &row);
  loom_value x = loom_graph_param(g, "x", &full), y = loom_graph_param(g, "y", row_operand ? &row : &full);
  loom_value v = x, keep = x;
  for (int i = 0; i < 400; i++) {
    loom_op op = i % 3 == 0 ? LOOM_OP_ADD : i % 3 == 1 ? LOOM_OP_MUL : LOOM_OP_SUB;
    v = loom_binary(g, op, v, i % 3 == 1 ? y : x);
    if (i == 10) keep = v;
    if (i % 50 == 49) v = loom_binary(g, LOOM_OP_MINIMUM, loom_unary(g, LOOM_OP_TANH, v), keep);
  }
  if (reduce) {
    loom_attrs a;
    loom_attrs_init(&a);
    a.set |= LOOM_ATTR_AXES;
    a.axes.count = 1;
    a.axes.v[0] = 1;
    loom_value r;
    loom_graph_add(g, LOOM_OP_REDUCE_SUM, &v, 1, &a, NULL, NULL, &r, 1);
    v = r;
  }
  loom_graph_return(g, &v, 1);
  return g;
}

TEST(fused_cpu_long_bodies) {
  for (int k = 0; k < 4 && !loom_test_failed(); k++) {
    loom_graph *g = long_body(k & 1, k & 2);
    ASSERT_OK(loom_graph_verify(g));
    char label[64];
    snprintf(label, sizeof label, "long body, %s, %s", k & 1 ? "row operand" : "dense",
             k & 2 ? "sum" : "none");
    check_body(g, false, label);
    loom_graph_destroy(g);
  }
}

/* ---- the Gaussian kernel product ----------------------------------------------------------------
 * a_i = sum_j exp(-|x_i - y_j|^2 / 2) b_j, as the fusion pass leaves it after the distance
 * rewrite: |x_i|^2 + |y_j|^2 - 2 x_i.y_j with the dot inline (k = 3). */
static loom_graph *kmv_body(int64_t n, int64_t m) {
  char text[1024];
  snprintf(text, sizeof text,
           "graph kmv(x: f32[%lld,3], y: f32[%lld,3], sx: f32[%lld,1], sy: f32[1,%lld], b: f32[%lld]) {\n"
           "  yt = transpose y perm=[1,0]\n"
           "  d = dot x yt\n"
           "  s = add sx sy\n"
           "  two = constant 2 : f32[]\n"
           "  t = mul d two\n"
           "  d2 = sub s t\n"
           "  h = constant -0.5 : f32[]\n"
           "  e = mul d2 h\n"
           "  k = exp e\n"
           "  p = mul k b\n"
           "  a = reduce_sum p axes=[1]\n"
           "  return a\n"
           "}\n",
           (long long)n, (long long)m, (long long)n, (long long)m, (long long)m);
  loom_graph *g = NULL;
  if (loom_graph_parse(text, strlen(text), "kmv.lir", &g)) return NULL;
  return g;
}

typedef struct kmv_data {
  int64_t n, m;
  float *x, *y, *sx, *sy, *b, *a;
} kmv_data;

static void kmv_make(kmv_data *k, int64_t n, int64_t m) {
  k->n = n;
  k->m = m;
  k->x = malloc(sizeof(float) * (size_t)(n * 3));
  k->y = malloc(sizeof(float) * (size_t)(m * 3));
  k->sx = malloc(sizeof(float) * (size_t)n);
  k->sy = malloc(sizeof(float) * (size_t)m);
  k->b = malloc(sizeof(float) * (size_t)m);
  k->a = malloc(sizeof(float) * (size_t)n);
  for (int64_t i = 0; i < n * 3; i++) k->x[i] = (float)runif(0, 2);
  for (int64_t i = 0; i < m * 3; i++) k->y[i] = (float)runif(0, 2);
  for (int64_t i = 0; i < m; i++) k->b[i] = (float)runif(0, 1);
  for (int64_t i = 0; i < n; i++)
    k->sx[i] =
        k->x[3 * i] * k->x[3 * i] + k->x[3 * i + 1] * k->x[3 * i + 1] + k->x[3 * i + 2] * k->x[3 * i + 2];
  for (int64_t i = 0; i < m; i++)
    k->sy[i] =
        k->y[3 * i] * k->y[3 * i] + k->y[3 * i + 1] * k->y[3 * i + 1] + k->y[3 * i + 2] * k->y[3 * i + 2];
}

static void kmv_free(kmv_data *k) {
  free(k->x), free(k->y), free(k->sx), free(k->sy), free(k->b), free(k->a);
}

/* Rows [r0, r0 + body's rows) of the product, fused. */
static loom_status kmv_fused(const loom_graph *body, kmv_data *k, int64_t r0) {
  loom__view in[5], out;
  for (int32_t p = 0; p < 5; p++) in[p] = dense_view(&body->values[body->params[p]].type, NULL);
  in[0].data = k->x + r0 * 3;
  in[1].data = k->y;
  in[2].data = k->sx + r0;
  in[3].data = k->sy;
  in[4].data = k->b;
  out = dense_view(&body->values[body->outputs[0]].type, k->a + r0);
  return loom__cpu_fused(body, in, &out, NULL, 0);
}

TEST(fused_cpu_kmv_against_float64) {
  rng_state = 12345;
  kmv_data k;
  kmv_make(&k, 700, 2500);
  loom_graph *body = kmv_body(k.n, k.m);
  ASSERT_TRUE(body != NULL);
  ASSERT_OK(kmv_fused(body, &k, 0));
  for (int64_t i = 0; i < k.n; i++) {
    double want = 0;
    for (int64_t j = 0; j < k.m; j++) {
      double d2 = 0;
      for (int t = 0; t < 3; t++) {
        double diff = (double)k.x[3 * i + t] - (double)k.y[3 * j + t];
        d2 += diff * diff;
      }
      want += exp(-d2 / 2) * (double)k.b[j];
    }
    if (!(fabs(k.a[i] - want) <= 1e-4 * fabs(want))) {
      loom_test_fail(__FILE__, __LINE__, "row %lld: fused %.9g, float64 %.9g", (long long)i, k.a[i], want);
      break;
    }
  }
  /* and the same body unfused, on the same operands */
  void *params[5] = {k.x, k.y, k.sx, k.sy, k.b};
  tensors ref = {0};
  ASSERT_OK(run_unfused(body, params, &ref));
  const float *u = ref.data[body->outputs[0]];
  for (int64_t i = 0; i < k.n; i++)
    if (!(fabs(k.a[i] - u[i]) <= 1e-5 * fabs(u[i]))) {
      loom_test_fail(__FILE__, __LINE__, "row %lld: fused %.9g, unfused %.9g", (long long)i, k.a[i], u[i]);
      break;
    }
  tensors_free(&ref);
  loom_graph_destroy(body);
  kmv_free(&k);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(getenv("LOOM_FUSED_BENCH_CPU") ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Prints the fused evaluator's time for kmv at N = M = 10,000 and 100,000 (d = 3, f32) beside
 * the unfused cpu ops on the same rows in chunks of 1,000 (as the chunk rewrite runs them;
 * at 100,000 on the first chunks only, scaled to all rows). Runs when LOOM_FUSED_BENCH is set:
 * no assertion on time. */
TEST(fused_cpu_kmv_timing) {
  if (!getenv("LOOM_FUSED_BENCH")) {
    loom_test_skip("set LOOM_FUSED_BENCH=1 to time kmv");
    return;
  }
  const int64_t sizes[] = {10000, 100000};
  for (int s = 0; s < (getenv("LOOM_FUSED_BENCH_SMALL") ? 1 : 2); s++) {
    int64_t n = sizes[s], chunk = 1000;
    rng_state = 777;
    kmv_data k;
    kmv_make(&k, n, n);
    loom_graph *whole = kmv_body(n, n), *piece = kmv_body(chunk, n);
    ASSERT_TRUE(whole && piece);
    double best = 1e30;
    for (int rep = 0; rep < (n > 10000 ? 1 : 3); rep++) {
      double t0 = now_s();
      ASSERT_OK(kmv_fused(whole, &k, 0));
      best = fmin(best, now_s() - t0);
    }
    float a0 = k.a[0];
    /* unfused: every op of the body materialized per chunk of rows */
    int64_t chunks = n / chunk, timed = n > 10000 ? 3 : chunks;
    if (strcmp(getenv("LOOM_FUSED_BENCH"), "fused") == 0) { /* the fused evaluator alone (profiling) */
      printf("    kmv N=%lld: fused %.3f s\n", (long long)n, best);
      timed = 0;
    }
    double t0 = now_s();
    for (int64_t c = 0; c < timed; c++) {
      void *params[5] = {k.x + c * chunk * 3, k.y, k.sx + c * chunk, k.sy, k.b};
      tensors ref = {0};
      ASSERT_OK(run_unfused(piece, params, &ref));
      if (c == 0) ASSERT_TRUE(fabs(((float *)ref.data[piece->outputs[0]])[0] - a0) <= 1e-5 * fabs(a0));
      tensors_free(&ref);
    }
    double unfused = (now_s() - t0) * (double)chunks / (double)(timed ? timed : 1);
    printf("    kmv N=%lld: fused %.3f s (%.2f Gpairs/s), unfused cpu ops %.3f s%s: %.1fx\n", (long long)n,
           best, (double)n * (double)n / best * 1e-9, unfused,
           timed < chunks ? " (scaled from 3 chunks)" : "", unfused / best);
    loom_graph_destroy(whole);
    loom_graph_destroy(piece);
    kmv_free(&k);
  }
}

/* ---- kNN and argmin over the distance: the dot inline, the final op over j ------------------- */
static loom_graph *knn_body(int64_t n, int64_t m, const char *final) {
  char text[1024];
  snprintf(text, sizeof text,
           "graph knn(x: f32[%lld,3], y: f32[%lld,3], sx: f32[%lld,1], sy: f32[1,%lld]) {\n"
           "  yt = transpose y perm=[1,0]\n"
           "  d = dot x yt\n"
           "  s = add sx sy\n"
           "  two = constant 2 : f32[]\n"
           "  t = mul d two\n"
           "  d2 = sub s t\n"
           "  %s\n"
           "}\n",
           (long long)n, (long long)m, (long long)n, (long long)m, final);
  loom_graph *g = NULL;
  if (loom_graph_parse(text, strlen(text), "knn.lir", &g)) return NULL;
  return g;
}

TEST(fused_cpu_knn_topk_and_argmin) {
  static const char *finals[] = {
      "v, i = topk d2 k=5 axis=1 largest=false\n  return v, i",
      "i = argmin d2 axis=1\n  return i",
      "v, i = topk d2 k=3 axis=0 largest=false\n  return v, i", /* the nearest x of every y */
      "m = reduce_min d2 axes=[0]\n  return m",
  };
  for (int f = 0; f < 4; f++) {
    rng_state = 4242 + (uint64_t)f;
    loom_graph *body = knn_body(300, 2100, finals[f]);
    ASSERT_TRUE(body != NULL);
    bool ok = check_body(body, false, finals[f]);
    loom_graph_destroy(body);
    if (!ok) return;
  }
}

/* Two small dots added (a syr2k-like A B^T + B A^T with k = 3, as the BLAS shim builds it):
 * only one of them may become the add's epilogue; the other is computed as any operand. Both
 * once were, and the body read the second product from a NULL buffer. */
TEST(fused_cpu_sum_of_two_small_dots) {
  static const char *text =
      "graph two(a: f32[37,3], bt: f32[3,53], c: f32[37,3], dt: f32[3,53]) {\n"
      "  d1 = dot a bt\n"
      "  d2 = dot c dt\n"
      "  s = add d1 d2\n"
      "  return s\n"
      "}\n";
  rng_state = 777;
  loom_graph *body = NULL;
  ASSERT_OK(loom_graph_parse(text, strlen(text), "two.lir", &body));
  check_body(body, false, "A B + C D");
  loom_graph_destroy(body);
}

TEST(fused_cpu_complex_is_unsupported) {
  const char *text = "graph c(x: c64[4,8]) {\n  y = add x x\n  s = reduce_sum y axes=[1]\n  return s\n}\n";
  loom_graph *g = NULL;
  ASSERT_OK(loom_graph_parse(text, strlen(text), "c.lir", &g));
  float data[64] = {0};
  loom__view in = dense_view(&g->values[g->params[0]].type, data), out;
  out = dense_view(&g->values[g->outputs[0]].type, data);
  ASSERT_STATUS(loom__cpu_fused(g, &in, &out, NULL, 0), LOOM_ERR_UNSUPPORTED);
  ASSERT_CONTAINS(loom_last_error(), "c64");
  loom_graph_destroy(g);
}

/* ---- kernel sums in one pass ---------------------------------------------------------------------
 * cpu_fused.c's find_kernel_sum runs sum_j exp(aff(max(dot3 + u, lo))) b_j in one loop, with the
 * exp written out (cpu_vmath.h, and an AVX-512 form; test_fused_math.c checks the exp alone). */
/* Bodies as the distance rewrite and the fusion pass leave a kernel sum (x holds -2 x_i, sx and
 * sy the squared norms, yt the transposed points), in the forms find_kernel_sum takes and, last,
 * two it must leave to the passes. Every body reads the same seven operands. */
typedef struct ks_case {
  const char *name, *ops; /* ops: the body from d = dot x yt; returns a */
  bool one_pass;
  bool mean; /* reduce_mean, else reduce_sum */
} ks_case;

static const ks_case ks_cases[] = {
    {"gaussian",
     "  s = add d sx\n  t = add s sy\n  z = fill value=0 : f32[]\n  c = maximum t z\n"
     "  h = constant -0.5 : f32[]\n  e = mul c h\n",
     true, false},
    {"sub",
     "  s = add d sx\n  t = sub s sy\n  z = fill value=0 : f32[]\n  c = maximum t z\n"
     "  h = constant -0.5 : f32[]\n  e = mul c h\n",
     true, false},
    {"u_left",
     "  s = sub d sx\n  t = add sy s\n  z = fill value=0 : f32[]\n  c = maximum t z\n"
     "  h = constant -0.25 : f32[]\n  e = mul c h\n",
     true, false},
    {"u_scalar",
     "  s = add d sx\n  t = add s w\n  z = fill value=0 : f32[]\n  c = maximum t z\n"
     "  h = constant -0.5 : f32[]\n  e = mul c h\n",
     true, false},
    {"no_max_add", "  s = add d sx\n  t = add s sy\n  h = constant -30 : f32[]\n  e = add t h\n", true,
     false},
    {"no_via", "  t = add d sy\n  z = fill value=1 : f32[]\n  c = maximum t z\n  e = neg c\n", true, false},
    {"lo_per_row",
     "  s = add d sx\n  t = add s sy\n  c = maximum t lo\n  h = constant -0.5 : f32[]\n"
     "  e = mul c h\n",
     true, false},
    {"neg",
     "  s = add d sx\n  t = add s sy\n  z = fill value=0 : f32[]\n  c = maximum t z\n"
     "  e = neg c\n",
     true, false},
    /* -2 x.y - |x|^2 - |y|^2 = -|x + y|^2: the exp's argument in [-20, 0] with no scalar op */
    {"no_aff", "  s = sub d sx\n  t = sub s sy\n  z = fill value=-20 : f32[]\n  e = maximum t z\n", true,
     false},
    {"mean",
     "  s = add d sx\n  t = add s sy\n  z = fill value=0 : f32[]\n  c = maximum t z\n"
     "  h = constant -0.5 : f32[]\n  e = mul c h\n",
     true, true},
    /* a maximum with a block, and a value read twice: the passes */
    {"max_block",
     "  s = add d sx\n  t = add s sy\n  c = maximum t sy\n  h = constant -0.5 : f32[]\n"
     "  e = mul c h\n",
     false, false},
    {"read_twice",
     "  s = add d sx\n  t = add s sy\n  c = mul t t\n  h = constant -0.01 : f32[]\n"
     "  e = mul c h\n",
     false, false},
};

static loom_graph *ks_body(const ks_case *c, int64_t n, int64_t m) {
  char text[2048];
  long long N = (long long)n, M = (long long)m;
  snprintf(text, sizeof text,
           "graph ks(x: f32[%lld,3], yt: f32[3,%lld], sx: f32[%lld,1], sy: f32[1,%lld], w: f32[%lld,1], "
           "lo: f32[%lld,1], b: f32[%lld]) {\n  d = dot x yt\n%s  k = exp e\n  p = mul k b\n"
           "  a = %s p axes=[1]\n  return a\n}\n",
           N, M, N, M, N, N, M, c->ops, c->mean ? "reduce_mean" : "reduce_sum");
  loom_graph *g = NULL;
  if (loom_graph_parse(text, strlen(text), c->name, &g)) {
    loom_test_fail(__FILE__, __LINE__, "%s: %s", c->name, loom_last_error());
    return NULL;
  }
  return g;
}

TEST(fused_cpu_kernel_sum) {
  const int64_t n = 37, m = 2100; /* columns past a block of 1024 and a tail of 52 */
  rng_state = 2026;
  float *x = malloc(sizeof(float) * 3 * n), *yt = malloc(sizeof(float) * 3 * m);
  float *sx = malloc(sizeof(float) * n), *sy = malloc(sizeof(float) * m), *w = malloc(sizeof(float) * n);
  float *lo = malloc(sizeof(float) * n), *b = malloc(sizeof(float) * m), *a = malloc(sizeof(float) * n);
  for (int64_t i = 0; i < n; i++) {
    float p[3] = {(float)runif(0, 3), (float)runif(0, 3), (float)runif(0, 3)};
    for (int t = 0; t < 3; t++) x[3 * i + t] = -2 * p[t];
    sx[i] = p[0] * p[0] + p[1] * p[1] + p[2] * p[2];
    w[i] = (float)runif(-2, 2);
    lo[i] = (float)runif(0, 4);
  }
  for (int64_t j = 0; j < m; j++) {
    float q[3] = {(float)runif(0, 3), (float)runif(0, 3), (float)runif(0, 3)};
    for (int t = 0; t < 3; t++) yt[t * m + j] = q[t];
    sy[j] = q[0] * q[0] + q[1] * q[1] + q[2] * q[2];
    b[j] = (float)runif(-1, 1);
  }
  double scale = 0;
  for (int64_t j = 0; j < m; j++) scale += fabs(b[j]);
  void *params[7] = {x, yt, sx, sy, w, lo, b};
  /* the second round with what the unfused ops must carry: a NaN row of x, a NaN lower bound,
   * an infinite norm */
  for (int special = 0; special < 2; special++) {
    if (special) {
      x[3 * 5 + 1] = NAN;
      lo[9] = NAN;
      sy[1500] = INFINITY;
    }
    for (size_t c = 0; c < sizeof ks_cases / sizeof ks_cases[0]; c++) {
      const ks_case *K = &ks_cases[c];
      loom_graph *g = ks_body(K, n, m);
      ASSERT_TRUE(g != NULL);
      tensors ref = {0};
      ASSERT_OK(run_unfused(g, params, &ref));
      const float *want = ref.data[g->outputs[0]];
      for (int portable = 0; portable < 2; portable++) {
        loom__cpu_ks_portable = portable;
        loom__view in[7], out = dense_view(&g->values[g->outputs[0]].type, a);
        for (int32_t p = 0; p < 7; p++) in[p] = dense_view(&g->values[g->params[p]].type, params[p]);
        ASSERT_OK(loom__cpu_fused(g, in, &out, NULL, 0));
        if (loom__cpu_ks_taken != K->one_pass)
          loom_test_fail(__FILE__, __LINE__, "%s: %s in one pass", K->name,
                         K->one_pass ? "not run" : "run, wrongly,");
        bool wide = K->one_pass && !portable && loom__cpu_isa_level() >= 4;
        if (loom__cpu_ks_wide_taken != wide)
          loom_test_fail(__FILE__, __LINE__, "%s: %s the AVX-512 loop (ISA level %d)", K->name,
                         wide ? "not run in" : "run, wrongly, in", loom__cpu_isa_level());
        for (int64_t i = 0; i < n; i++) {
          bool ok = isnan(want[i]) ? isnan(a[i])
                    : isinf(want[i])
                        ? a[i] == want[i]
                        : fabs((double)a[i] - want[i]) <= 1e-5 * (K->mean ? scale / (double)m : scale);
          if (!ok) {
            loom_test_fail(__FILE__, __LINE__, "%s%s (%s kernel), row %lld: fused %.9g, unfused %.9g",
                           K->name, special ? " with NaN and infinity" : "",
                           portable ? "portable" : "AVX-512 or portable", (long long)i, a[i], want[i]);
            break;
          }
        }
      }
      loom__cpu_ks_portable = false;
      tensors_free(&ref);
      loom_graph_destroy(g);
    }
  }
  free(x), free(yt), free(sx), free(sy), free(w), free(lo), free(b), free(a);
}

/* Few outputs over many elements: the threads split each output's reduction and merge their
 * partial states (sums, argmax ties to the lower index, topk heaps), over the last axis and
 * over a leading one. */
TEST(fused_cpu_split_reductions) {
  static const char *bodies[] = {
      "graph s(x: f32[4,9000]) {\n  e = exp x\n  i = argmax e axis=1\n  return i\n}\n",
      "graph s(x: f32[4,9000]) {\n  e = floor x\n  i = argmin e axis=1\n  return i\n}\n",
      "graph s(x: f32[4,9000]) {\n  e = floor x\n  v, i = topk e k=7 axis=1 largest=true\n  return v, i\n}\n",
      "graph s(x: f64[3,9000]) {\n  e = sin x\n  r = reduce_sum e axes=[0,1]\n  return r\n}\n",
      "graph s(x: f32[60,3000]) {\n  e = tanh x\n  r = reduce_max e axes=[0]\n  return r\n}\n",
      "graph s(x: f32[60,3000]) {\n  e = floor x\n  v, i = topk e k=4 axis=0 largest=false\n  return v, "
      "i\n}\n",
      "graph s(x: i32[60,3000]) {\n  e = mul x x\n  r = reduce_prod e axes=[0] keepdims=true\n  return "
      "r\n}\n",
  };
  for (size_t b = 0; b < sizeof bodies / sizeof bodies[0]; b++) {
    rng_state = 99 + b;
    loom_graph *g = NULL;
    ASSERT_OK(loom_graph_parse(bodies[b], strlen(bodies[b]), "split.lir", &g));
    bool ok = check_body(g, b % 2 == 1, bodies[b]);
    loom_graph_destroy(g);
    if (!ok) return;
  }
}
