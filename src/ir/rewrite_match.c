/* Match and replace (IR.md "Rewrites"): known expensive forms become cheaper equal forms.
 *
 *   tile_broadcast    tile whose repeated axes all have size 1 -> a broadcast view
 *   reduce_broadcast  reduce_sum/mean/max/min over broadcast (stride-0) axes of a view -> the
 *                     reduction of one slice, times the axes' length for reduce_sum
 *   distance          the pairwise squared distance reduce_sum((a_i - b_j)^2 over features),
 *                     however spelt -> sum(a^2)[:,None] + sum(b^2)[None,:] - 2 a.b^T, >= 0;
 *                     or, under a limit at small d, the direct form feature by feature
 *   dot_transpose     transposes that would be materialized folded into a dot
 *
 * Each rule is a loom__rule run by the driver of pattern.c, one application at a time, so
 * each is reported with its own bytes saved. A rule only matches where the values it removes
 * have no other reader: a value read elsewhere is kept and the form is left alone.
 */
#include <stdio.h>
#include <string.h>

#include "ir/attention.h"
#include "ir/pattern.h"

static const int64_t swap2[2] = {1, 0};

/* transpose perm swapping the last two of `rank` axes. */
static void swap_last_two(int32_t rank, int64_t *perm) {
  for (int32_t i = 0; i < rank; i++) perm[i] = i;
  perm[rank - 2] = rank - 1;
  perm[rank - 1] = rank - 2;
}

static bool is_swap_last_two(const loom_int_list *perm) {
  int32_t r = perm->count;
  if (r < 2) return false;
  for (int32_t i = 0; i < r - 2; i++)
    if (perm->v[i] != i) return false;
  return perm->v[r - 2] == r - 1 && perm->v[r - 1] == r - 2;
}

/* ---- tile_broadcast ---------------------------------------------------------------------- */

typedef struct root_match {
  int32_t root;
} root_match;

static bool tile_find(const loom__match_ctx *m, int32_t o, int32_t variant, void *mv, char *detail,
                      size_t size) {
  const loom_graph *g = m->g;
  const loom__op *op = &g->ops[o];
  if (variant > 0 || op->kind != LOOM_OP_TILE) return false;
  const loom_type *x = &g->values[op->inputs[0]].type;
  const loom_int_list *reps = &op->attrs.reps;
  int32_t lead = x->rank - reps->count;
  for (int32_t i = 0; i < x->rank; i++) {
    int64_t rep = i < lead ? 1 : reps->v[i - lead];
    if (rep != 1 && x->dims[i] != 1) return false;
  }
  ((root_match *)mv)->root = o;
  char in[96], out[96];
  snprintf(detail, size, "%s = tile %s: every repeated axis has size 1 -> broadcast view",
           loom__describe(g, op->outputs[0], out, sizeof out),
           loom__describe(g, op->inputs[0], in, sizeof in));
  return true;
}

static loom_status tile_emit(loom__rebuild *rb, const void *mv) {
  const loom__op *op = &rb->src->ops[((const root_match *)mv)->root];
  const loom_type *t = &rb->src->values[op->outputs[0]].type;
  loom_value v = loom_broadcast(rb->dst, loom__rebuild_get(rb, op->inputs[0]), t->rank, t->dims);
  loom__rebuild_set(rb, op->outputs[0], v);
  return loom__dst_status(rb);
}

/* ---- reduce_broadcast -------------------------------------------------------------------- */

typedef struct reduce_match {
  int32_t root;
  uint32_t axes; /* reduced axes along which the input is a broadcast */
  int64_t count; /* product of their lengths */
} reduce_match;

static bool reduce_find(const loom__match_ctx *m, int32_t o, int32_t variant, void *mv, char *detail,
                        size_t size) {
  const loom_graph *g = m->g;
  const loom__op *op = &g->ops[o];
  if (variant > 0) return false;
  if (op->kind != LOOM_OP_REDUCE_SUM && op->kind != LOOM_OP_REDUCE_MEAN && op->kind != LOOM_OP_REDUCE_MAX &&
      op->kind != LOOM_OP_REDUCE_MIN)
    return false;
  int32_t in = op->inputs[0];
  const loom__layout *l = &m->layouts[in];
  const loom_type *t = &g->values[in].type;
  if (l->owns) return false;
  reduce_match r = {.root = o, .count = 1};
  for (int32_t i = 0; i < op->attrs.axes.count; i++) {
    int32_t a;
    if (!loom__axis_normalize(op->attrs.axes.v[i], t->rank, &a)) return false;
    if (t->dims[a] > 1 && l->strides[a] == 0) {
      r.axes |= 1u << a;
      r.count *= t->dims[a]; /* at most the element count of t: no overflow */
    }
  }
  if (!r.axes) return false;
  *(reduce_match *)mv = r;
  char in_s[96], out_s[96], axes[64];
  size_t len = 0;
  axes[0] = '\0';
  for (int32_t a = 0; a < t->rank; a++)
    if (r.axes & (1u << a))
      len += (size_t)snprintf(axes + len, sizeof axes - len, len ? ",%d" : "%d", (int)a);
  snprintf(detail, size, "%s = %s %s: axes [%s] are broadcast -> one slice reduced%s",
           loom__describe(g, op->outputs[0], out_s, sizeof out_s), loom_op_name(op->kind),
           loom__describe(g, in, in_s, sizeof in_s), axes,
           op->kind == LOOM_OP_REDUCE_SUM ? ", times their length" : "");
  return true;
}

/* The scalar `count` in dtype; integers wrap as the sum they replace does. */
static loom_value count_scalar(loom_graph *g, loom_dtype dtype, int64_t count) {
  if (!loom_dtype_is_integer(dtype)) return loom_scalar_f64(g, dtype, (double)count);
  unsigned char bytes[8];
  for (int i = 0; i < 8; i++) bytes[i] = (unsigned char)(((uint64_t)count >> (8 * i)) & 0xffu);
  loom_type t;
  memset(&t, 0, sizeof t);
  t.dtype = dtype;
  return loom_constant(g, &t, bytes); /* little-endian: the low bytes are the value mod 2^bits */
}

static loom_status reduce_emit(loom__rebuild *rb, const void *mv) {
  const reduce_match *r = mv;
  const loom__op *op = &rb->src->ops[r->root];
  const loom_type *t = &rb->src->values[op->inputs[0]].type;
  int64_t start[LOOM_MAX_RANK] = {0}, stop[LOOM_MAX_RANK];
  for (int32_t i = 0; i < t->rank; i++) stop[i] = (r->axes & (1u << i)) ? 1 : t->dims[i];
  loom_value y = loom_slice(rb->dst, loom__rebuild_get(rb, op->inputs[0]), t->rank, start, stop, NULL);
  bool keep = (op->attrs.set & LOOM_ATTR_KEEPDIMS) && op->attrs.keepdims;
  loom_value v = loom_reduce(rb->dst, op->kind, y, op->attrs.axes.count, op->attrs.axes.v, keep);
  if (op->kind == LOOM_OP_REDUCE_SUM)
    v = loom_binary(rb->dst, LOOM_OP_MUL, v, count_scalar(rb->dst, t->dtype, r->count));
  loom__rebuild_set(rb, op->outputs[0], v);
  return loom__dst_status(rb);
}

/* ---- distance ---------------------------------------------------------------------------- */

/* The cancellation problem: sum(a^2) + sum(b^2) - 2 a.b loses the distance's digits when the
 * points are close compared with their norms (f32 keeps about 7 digits of |a|^2, so two points
 * at distance 1e-3 around norm 1 are at the noise level) and can come out slightly negative.
 * The result is therefore clamped with maximum(.., 0): never negative, so a following sqrt
 * never gives NaN. Where both operands are the same value read the same way (a self-distance)
 * the norms are taken from the dot's own diagonal, so d2[i,i] = G_ii + G_ii - 2 G_ii is exactly
 * 0. Only f32 and f64 are matched: f16/bf16 keep too few digits for the expanded form.
 *
 * The direct form sum_k (a_k - b_k)^2 has no cancellation: each term is one rounded difference
 * squared, so the sum is within (d + 1) roundings of the exact distance, relative. Its n x m x d
 * difference is what the expanded form exists to avoid, but written feature by feature (a
 * column of a minus a row of b^T, squared, added up: d steps over n x m) it needs no more than
 * the expanded form, and the fuse rewrite makes the whole sum and the topk after it one fused
 * op. The choice (loom_distance_form, AUTO): see direct_pays below. */

/* The cost model AUTO chooses by: a kNN's time per pair of points on one cpu0 core, in ns,
 * fitted to CPU times under a limit at d = 2..32 (README, "Exact distances"): the expanded
 * form (norms, inline dot, clamp and topk, fused; past d = 16 a GEMM, cheaper still per
 * feature) 1.54 + 0.065 d; the direct form (per feature a sub folded into a square, and an
 * add; the topk) 1.19 + 0.184 d. The direct form is kept while it costs at most
 * DIRECT_TOLERANCE times the expanded one: up to d = 4 (measured 1.08x at d = 3, 1.10x at 4,
 * 1.15x at 5, 1.6x at 16). Other devices are not measured: the model is cpu0's. */
#define DIRECT_TOLERANCE 1.1

static bool direct_cost_ok(int64_t d) {
  double expanded = 1.54 + 0.065 * (double)d, direct = 1.19 + 0.184 * (double)d;
  return direct <= DIRECT_TOLERANCE * expanded;
}

/* The largest d the cost model keeps the direct form for (4), for the report. */
static int64_t direct_max_d(void) {
  int64_t d = 1;
  while (direct_cost_ok(d + 1)) d++;
  return d;
}

/* Most features the direct form is written out for: its fused op reads a column and a row per
 * feature, and a loop body's ops take at most 64 operands (loop.c). Past it, a forced direct
 * form leaves the graph's own reduce_sum over the features, which the fuse rewrite evaluates
 * well where d is that large (blocks along the features). */
#define LOOM_DISTANCE_UNROLL_MAX_D 32

typedef struct distance_match {
  int32_t root;
  int32_t x, y;     /* sources: the result's rows come from x, its columns from y */
  int32_t xf, yf;   /* feature axis of each source (0 or 1) */
  bool same;        /* x and y are one value read the same way: a self-distance */
  int64_t features; /* d, the length of the feature axis */
  bool direct;      /* this variant emits the direct form */
  int64_t yield_at; /* > 0: the expanded form gives way to the direct one when the graph
                       still passes this limit after it (it is chunked anyway) */
} distance_match;

/* The difference d that sq squares (square d, mul d d, pow d 2), read only there. */
static bool square_of(const loom__match_ctx *m, int32_t sq, int32_t *out_diff) {
  const loom_graph *g = m->g;
  const loom__op *op = loom__producer(g, sq);
  if (!op) return false;
  int32_t d = op->n_inputs > 0 ? op->inputs[0] : -1;
  switch (op->kind) {
    case LOOM_OP_SQUARE:
      if (m->uses[d] != 1) return false;
      break;
    case LOOM_OP_MUL:
      if (op->inputs[1] != d || m->uses[d] != 2) return false;
      break;
    case LOOM_OP_POW:
      if (m->uses[d] != 1 || !loom_type_equal(&g->values[sq].type, &g->values[d].type) ||
          !loom__value_is_float(g, op->inputs[1], 2.0))
        return false;
      break;
    default:
      return false;
  }
  if (!loom__producer_is(g, d, LOOM_OP_SUB)) return false;
  *out_diff = d;
  return true;
}

/* One operand of the difference lifted onto a 2-D source: constant along one axis of the
 * difference, reading source rows along another and source features along `f`. */
typedef struct operand_role {
  int32_t source, row_axis; /* row_axis: the difference's axis along which rows vary */
  int32_t src_feature;      /* the source's feature axis */
} operand_role;

static bool operand_role_of(const loom_graph *g, int32_t v, const loom_type *diff, int32_t f,
                            operand_role *out) {
  loom__lift l;
  loom__lift_operand(g, v, diff, &l);
  if (g->values[l.source].type.rank != 2 || l.axis[f] < 0) return false;
  out->source = l.source;
  out->src_feature = l.axis[f];
  out->row_axis = -1;
  for (int32_t k = 0; k < 3; k++) {
    if (k == f || l.axis[k] < 0) continue;
    if (out->row_axis >= 0 || l.axis[k] == l.axis[f]) return false;
    out->row_axis = k;
  }
  return out->row_axis >= 0;
}

/* The form AUTO would choose, and why, in a few words for the report. The direct form pays
 * where (1) a limit is set and the graph is chunked under it anyway (checked after the
 * expanded form is tried: yield_at), so the expanded form's smaller footprint buys nothing;
 * (2) fuse runs, so the d steps over n x m become one fused loop instead of 3d passes over
 * memory; (3) the cost model above finds it at most 1.1x the expanded form's time; and (4)
 * an order is taken from the distances (decides_order). */
/* Whether value v decides an order: read, directly or through unary and layout ops, by a topk,
 * an argmax/argmin or a comparison (a kNN's neighbours, a radius test). There the expanded
 * form's lost digits swap near neighbours; a Gaussian kernel's exp(-d2/2) moves by about as
 * much as d2 does, far under its tolerance, and takes the cheaper form. */
static bool decides_order(const loom_graph *g, int32_t v, int depth) {
  for (int32_t o = 0; o < g->n_ops; o++) {
    const loom__op *op = &g->ops[o];
    bool reads = false;
    for (int32_t i = 0; i < op->n_inputs; i++) reads |= op->inputs[i] == v;
    if (!reads) continue;
    loom__op_class cls = loom__op_info_of(op->kind)->cls;
    if (cls == LOOM_CLASS_TOPK || cls == LOOM_CLASS_ARGREDUCE || cls == LOOM_CLASS_COMPARE) return true;
    if (depth > 0 && (cls == LOOM_CLASS_UNARY || cls == LOOM_CLASS_LAYOUT) &&
        decides_order(g, op->outputs[0], depth - 1))
      return true;
  }
  return false;
}

static bool direct_pays(const loom__match_ctx *m, int32_t root_value, int64_t d, char *why, size_t size) {
  const loom_optimize_options *o = m->opts;
  why[0] = '\0';
  if (!o || o->limit <= 0 || !loom__rewrite_enabled(o, "chunk")) return false;
  if (!decides_order(m->g, root_value, 3)) {
    snprintf(why, size, "; no order is taken from it (no topk, argmin or comparison reads it)");
    return false;
  }
  if (!loom__rewrite_enabled(o, "fuse")) {
    snprintf(why, size, "; fuse off: the direct form would take %lld passes", (long long)(3 * d));
    return false;
  }
  if (!direct_cost_ok(d)) {
    snprintf(why, size, "; d = %lld > %lld: the dot is cheaper", (long long)d, (long long)direct_max_d());
    return false;
  }
  snprintf(why, size, "; d = %lld but the limit is met unchunked", (long long)d);
  return true;
}

static void expanded_detail(const loom__match_ctx *m, const loom__op *root, int32_t sq, int32_t diff,
                            const distance_match *d, const char *why, char *detail, size_t size) {
  const loom_graph *g = m->g;
  const loom__op *sub = loom__producer(g, diff), *square = loom__producer(g, sq);
  char r[96], s[32], dd[32], a[32], b[32], x[96], y[96], how[128];
  const char *dl = loom__value_label(g, diff, dd, sizeof dd), *sl = loom__value_label(g, sq, s, sizeof s);
  if (square->kind == LOOM_OP_MUL)
    snprintf(how, sizeof how, "mul %s %s", dl, dl);
  else if (square->kind == LOOM_OP_POW)
    snprintf(how, sizeof how, "pow %s 2", dl);
  else
    snprintf(how, sizeof how, "square %s", dl);
  int32_t reader = m->first_reader[root->outputs[0]];
  bool under_sqrt = reader >= 0 && g->ops[reader].kind == LOOM_OP_SQRT;
  snprintf(detail, size,
           "%s = reduce_sum %s, %s = %s, %s = sub %s %s: squared distances of the rows of %s and %s "
           "-> |a|^2 + |b|^2 - 2 a.b^T clamped at 0%s%s%s",
           loom__describe(g, root->outputs[0], r, sizeof r), sl, sl, how, dl,
           loom__value_label(g, sub->inputs[0], a, sizeof a),
           loom__value_label(g, sub->inputs[1], b, sizeof b), loom__describe(g, d->x, x, sizeof x),
           loom__describe(g, d->y, y, sizeof y), d->same ? "; norms from the product's diagonal" : "",
           under_sqrt ? "; under sqrt" : "", why);
}

/* Shorter than the expanded form's: the reason has to fit the report's 256 bytes. */
static void direct_detail(const loom__match_ctx *m, const loom__op *root, const distance_match *d,
                          bool forced, char *detail, size_t size) {
  const loom_graph *g = m->g;
  char r[96], x[96], y[96];
  int n = snprintf(detail, size, "%s: squared distances of the rows of %s and %s -> direct form kept",
                   loom__describe(g, root->outputs[0], r, sizeof r), loom__describe(g, d->x, x, sizeof x),
                   loom__describe(g, d->y, y, sizeof y));
  if (n < 0 || (size_t)n >= size) return;
  if (forced)
    snprintf(detail + n, size - (size_t)n, " (forced), summed over its %lld features: exact to rounding",
             (long long)d->features);
  else
    snprintf(
        detail + n, size - (size_t)n,
        ": d = %lld <= %lld and the expanded graph passes the limit, exact to rounding (summed feature by "
        "feature, fused)",
        (long long)d->features, (long long)direct_max_d());
}

/* Variants: the forced form alone; under AUTO the expanded form first, then, where it gives way
 * (keep), the direct one. */
static bool distance_find(const loom__match_ctx *m, int32_t o, int32_t variant, void *mv, char *detail,
                          size_t size) {
  const loom_graph *g = m->g;
  const loom__op *op = &g->ops[o];
  if (variant > 1 || op->kind != LOOM_OP_REDUCE_SUM || op->attrs.axes.count != 1) return false;
  int32_t sq = op->inputs[0], diff, f;
  const loom_type *t = &g->values[sq].type;
  if (t->rank != 3 || (t->dtype != LOOM_F32 && t->dtype != LOOM_F64) || !loom__single_use(m, sq) ||
      !loom__axis_normalize(op->attrs.axes.v[0], 3, &f) || !square_of(m, sq, &diff))
    return false;
  for (int32_t k = 0; k < 3; k++)
    if (t->dims[k] < 1) return false;
  const loom__op *sub = loom__producer(g, diff);
  operand_role p, q;
  if (!operand_role_of(g, sub->inputs[0], t, f, &p) || !operand_role_of(g, sub->inputs[1], t, f, &q) ||
      p.row_axis == q.row_axis)
    return false;
  /* The result keeps the two other axes in order: its rows are the first one's. */
  int32_t first = f == 0 ? 1 : 0;
  const operand_role *rows = p.row_axis == first ? &p : &q, *cols = p.row_axis == first ? &q : &p;
  distance_match d = {.root = o,
                      .x = rows->source,
                      .y = cols->source,
                      .xf = rows->src_feature,
                      .yf = cols->src_feature,
                      .features = t->dims[f]};
  d.same = d.x == d.y && d.xf == d.yf;
  loom_distance_form form = m->opts ? m->opts->distance_form : LOOM_DISTANCE_AUTO;
  char why[80] = "";
  bool pays =
      form == LOOM_DISTANCE_AUTO && direct_pays(m, m->g->ops[o].outputs[0], d.features, why, sizeof why);
  if (form == LOOM_DISTANCE_DIRECT && d.features > LOOM_DISTANCE_UNROLL_MAX_D) return false;
  if (form == LOOM_DISTANCE_DIRECT || (pays && variant == 1)) {
    if (variant != (form == LOOM_DISTANCE_DIRECT ? 0 : 1)) return false;
    d.direct = true;
    direct_detail(m, op, &d, form == LOOM_DISTANCE_DIRECT, detail, size);
  } else {
    if (variant != 0) return false;
    if (pays) d.yield_at = m->opts->limit;
    expanded_detail(m, op, sq, diff, &d, why, detail, size);
  }
  *(distance_match *)mv = d;
  return true;
}

/* The expanded form gives way to the direct one where the graph passes the limit even with it:
 * then it is chunked anyway. */
static bool distance_keep(const void *mv, int64_t peak_before, int64_t peak_after) {
  (void)peak_before;
  const distance_match *d = mv;
  return d->direct || d->yield_at <= 0 || peak_after <= d->yield_at;
}

/* sum over the features of x^2, as [n] (or [n,1] when column): */
static loom_value norms(loom_graph *g, loom_value x, int32_t feature, int64_t n, bool column) {
  int64_t axis = feature;
  loom_value s = loom_reduce(g, LOOM_OP_REDUCE_SUM, loom_unary(g, LOOM_OP_SQUARE, x), 1, &axis, false);
  int64_t shape[2] = {n, 1};
  return column ? loom_reshape(g, s, 2, shape) : s;
}

/* The diagonal of the square G [n,n], copied out as [n,1]: a strided view of G reshaped,
 * which materializes it, so G itself can be freed early. */
static loom_value diagonal(loom_graph *g, loom_value gram, int64_t n) {
  int64_t nn = n * n, start = 0, step = n + 1, shape[2] = {n, 1};
  loom_value flat = loom_reshape(g, gram, 1, &nn);
  loom_value diag = loom_slice(g, flat, 1, &start, &nn, &step);
  return loom_reshape(g, diag, 2, shape);
}

/* d2 = sum_k (x[:,k][:,None] - y^T[k,:][None,:])^2, k = 0, 1, .. in order. x as [nx,d] and y
 * as [d,ny] are transposed views; their column and row k are slices (views), which the chunk
 * rewrite cuts with the rows, so a streamed x stays streamed. `square` rather than `mul t t`:
 * the cpu fused evaluator folds a sub of a per-row scalar into the one op reading it, which
 * saves a pass per feature (1.24x -> 1.08x the expanded form's time at d = 3). */
static loom_value direct_sum(loom_graph *g, loom_value xc, loom_value yt, int64_t nx, int64_t ny,
                             int64_t features) {
  loom_value acc = LOOM_VALUE_NONE;
  for (int64_t k = 0; k < features; k++) {
    int64_t xs[2] = {0, k}, xe[2] = {nx, k + 1}, ys[2] = {k, 0}, ye[2] = {k + 1, ny};
    loom_value t =
        loom_binary(g, LOOM_OP_SUB, loom_slice(g, xc, 2, xs, xe, NULL), loom_slice(g, yt, 2, ys, ye, NULL));
    loom_value sq = loom_unary(g, LOOM_OP_SQUARE, t);
    acc = k == 0 ? sq : loom_binary(g, LOOM_OP_ADD, acc, sq);
  }
  return acc;
}

/* d2 = max(-2 x.y^T + |x|^2[:,None] + |y|^2[None,:], 0). The -2 scales x (n x d, small)
 * before the dot rather than the n x m product after it: one pass over n x m fewer, and exact,
 * as scaling by a power of two commutes with rounding. */
static loom_value expanded(loom_graph *g, const distance_match *d, loom_value x, loom_value xc, loom_value y,
                           loom_value yt, int64_t nx, int64_t ny, loom_dtype dt) {
  loom_value xm2 = loom_binary(g, LOOM_OP_MUL, xc, loom__scalar_fill(g, dt, -2.0));
  loom_value xn, yn, v;
  if (d->same) { /* |x_i|^2 = G_ii, read off the product itself: d2[i,i] = 0 exactly */
    v = loom_dot(g, xm2, yt);
    xn = loom_binary(g, LOOM_OP_MUL, diagonal(g, v, nx), loom__scalar_fill(g, dt, -0.5));
    yn = loom_reshape(g, xn, 1, &ny);
  } else {
    xn = norms(g, x, d->xf, nx, true);
    yn = norms(g, y, d->yf, ny, false);
    v = loom_dot(g, xm2, yt);
  }
  v = loom_binary(g, LOOM_OP_ADD, v, xn);
  v = loom_binary(g, LOOM_OP_ADD, v, yn);
  return loom_binary(g, LOOM_OP_MAXIMUM, v, loom__scalar_fill(g, dt, 0.0));
}

static loom_status distance_emit(loom__rebuild *rb, const void *mv) {
  const distance_match *d = mv;
  const loom_graph *src = rb->src;
  loom_graph *g = rb->dst;
  const loom__op *root = &src->ops[d->root];
  const loom_type *out_t = &src->values[root->outputs[0]].type;
  int64_t nx = src->values[d->x].type.dims[1 - d->xf], ny = src->values[d->y].type.dims[1 - d->yf];
  loom_value x = loom__rebuild_get(rb, d->x), y = loom__rebuild_get(rb, d->y);
  /* x as [nx,d] and y as [d,ny]: transposes are views the dot kernel folds (CblasTrans). */
  loom_value xc = d->xf == 1 ? x : loom_transpose(g, x, 2, swap2);
  loom_value yt = d->yf == 0 ? y : loom_transpose(g, y, 2, swap2);
  loom_value v = d->direct ? direct_sum(g, xc, yt, nx, ny, d->features)
                           : expanded(g, d, x, xc, y, yt, nx, ny, out_t->dtype);
  if (out_t->rank != 2) v = loom_reshape(g, v, out_t->rank, out_t->dims); /* keepdims */
  loom__rebuild_set(rb, root->outputs[0], v);
  return loom__dst_status(rb);
}

/* ---- dot_transpose ----------------------------------------------------------------------- */

/* Two forms, each only where it saves a materialization (the cpu dot kernel reads a transpose
 * of dense data in place, so a transpose as such costs nothing):
 *   A  t = transpose(dot(a, b)) swapping the last two axes, where a reshape of t materializes
 *      it: t = dot(transpose(b), transpose(a)) is dense, so that reshape becomes a view;
 *   B  dot(reshape(transpose(x)), ..) where the reshape only adds or drops leading size-1 axes
 *      but copies because its input is not contiguous: the dot reads transpose(x) itself. */

typedef struct dt_match {
  int32_t root;
  int32_t form; /* 'A' or 'B' */
  int32_t side; /* B: which operand of the dot */
} dt_match;

/* Some reader of v is a reshape that materializes it. */
static bool materialized_by_reshape(const loom__match_ctx *m, int32_t v) {
  const loom_graph *g = m->g;
  for (int32_t o = m->first_reader[v]; o >= 0 && o < g->n_ops; o++) {
    const loom__op *op = &g->ops[o];
    if (op->kind == LOOM_OP_RESHAPE && op->inputs[0] == v && m->layouts[op->outputs[0]].owns) return true;
  }
  return false;
}

static bool fold_a(const loom__match_ctx *m, int32_t o, dt_match *out) {
  const loom_graph *g = m->g;
  const loom__op *t = &g->ops[o];
  if (t->kind != LOOM_OP_TRANSPOSE || !is_swap_last_two(&t->attrs.perm)) return false;
  const loom__op *dot = loom__producer_is(g, t->inputs[0], LOOM_OP_DOT);
  if (!dot || !loom__single_use(m, t->inputs[0])) return false;
  if (g->values[dot->inputs[0]].type.rank < 2 || g->values[dot->inputs[1]].type.rank < 2) return false;
  if (!materialized_by_reshape(m, t->outputs[0])) return false;
  *out = (dt_match){.root = o, .form = 'A'};
  return true;
}

/* u and t differ at most by leading size-1 axes. */
static bool same_but_leading_ones(const loom_type *u, const loom_type *t) {
  if (u->rank < 2 || t->rank < 2) return false;
  if (u->dims[u->rank - 1] != t->dims[t->rank - 1] || u->dims[u->rank - 2] != t->dims[t->rank - 2])
    return false;
  for (int32_t i = 0; i < u->rank - 2; i++)
    if (u->dims[i] != 1) return false;
  for (int32_t i = 0; i < t->rank - 2; i++)
    if (t->dims[i] != 1) return false;
  return true;
}

static bool fold_b(const loom__match_ctx *m, int32_t o, dt_match *out) {
  const loom_graph *g = m->g;
  const loom__op *dot = &g->ops[o];
  if (dot->kind != LOOM_OP_DOT) return false;
  for (int32_t side = 0; side < 2; side++) {
    int32_t u = dot->inputs[side];
    const loom__op *r = loom__producer_is(g, u, LOOM_OP_RESHAPE);
    if (!r || !m->layouts[u].owns || !loom__single_use(m, u)) continue;
    const loom__op *t = loom__producer_is(g, r->inputs[0], LOOM_OP_TRANSPOSE);
    if (!t || !is_swap_last_two(&t->attrs.perm)) continue;
    if (!same_but_leading_ones(&g->values[u].type, &g->values[r->inputs[0]].type)) continue;
    *out = (dt_match){.root = o, .form = 'B', .side = side};
    return true;
  }
  return false;
}

static bool dot_transpose_find(const loom__match_ctx *m, int32_t o, int32_t variant, void *mv, char *detail,
                               size_t size) {
  dt_match d;
  if (variant > 0 || !(fold_a(m, o, &d) || fold_b(m, o, &d))) return false;
  *(dt_match *)mv = d;
  const loom_graph *g = m->g;
  const loom__op *op = &g->ops[o];
  char a[96], b[96], r[96];
  if (d.form == 'A') {
    const loom__op *dot = loom__producer(g, op->inputs[0]);
    snprintf(detail, size,
             "%s = transpose(dot(%s, %s)) -> dot(transpose(b), transpose(a)): "
             "no transposed copy for its reshape",
             loom__describe(g, op->outputs[0], r, sizeof r), loom__describe(g, dot->inputs[0], a, sizeof a),
             loom__describe(g, dot->inputs[1], b, sizeof b));
  } else {
    int32_t u = op->inputs[d.side];
    const loom__op *t = loom__producer(g, loom__producer(g, u)->inputs[0]);
    snprintf(detail, size,
             "%s = dot(..): operand %d, reshape(transpose(%s)) copied as %s, "
             "read as the transposed view instead",
             loom__describe(g, op->outputs[0], r, sizeof r), (int)d.side + 1,
             loom__describe(g, t->inputs[0], a, sizeof a), loom__describe(g, u, b, sizeof b));
  }
  return true;
}

static loom_status dot_transpose_emit(loom__rebuild *rb, const void *mv) {
  const dt_match *d = mv;
  const loom_graph *src = rb->src;
  const loom__op *op = &src->ops[d->root];
  const loom_type *out_t = &src->values[op->outputs[0]].type;
  loom_graph *g = rb->dst;
  loom_value v;
  if (d->form == 'A') {
    const loom__op *dot = loom__producer(src, op->inputs[0]);
    int64_t pa[LOOM_MAX_RANK], pb[LOOM_MAX_RANK];
    int32_t ra = src->values[dot->inputs[0]].type.rank, rbk = src->values[dot->inputs[1]].type.rank;
    swap_last_two(ra, pa);
    swap_last_two(rbk, pb);
    loom_value ta = loom_transpose(g, loom__rebuild_get(rb, dot->inputs[0]), ra, pa);
    loom_value tb = loom_transpose(g, loom__rebuild_get(rb, dot->inputs[1]), rbk, pb);
    v = loom_dot(g, tb, ta);
  } else {
    int32_t t = loom__producer(src, op->inputs[d->side])->inputs[0];
    loom_value tv = loom__rebuild_get(rb, t), other = loom__rebuild_get(rb, op->inputs[1 - d->side]);
    v = d->side == 0 ? loom_dot(g, tv, other) : loom_dot(g, other, tv);
  }
  const loom_type *vt = loom_value_type(g, v);
  if (vt && !loom_type_equal(vt, out_t)) v = loom_reshape(g, v, out_t->rank, out_t->dims);
  loom__rebuild_set(rb, op->outputs[0], v);
  return loom__dst_status(rb);
}

/* ---- the pass ---------------------------------------------------------------------------- */

/* tile_broadcast first: the broadcast it leaves is what reduce_broadcast and distance read. */
static const loom__rule match_rules[] = {
    {"tile_broadcast", sizeof(root_match), tile_find, tile_emit, NULL, false},
    {"reduce_broadcast", sizeof(reduce_match), reduce_find, reduce_emit, NULL, false},
    {"distance", sizeof(distance_match), distance_find, distance_emit, distance_keep, false},
    LOOM__ATTENTION_RULE,
    {"dot_transpose", sizeof(dt_match), dot_transpose_find, dot_transpose_emit, NULL, false},
};

loom_status loom__rewrite_match(const loom_graph *g, const loom_optimize_options *opts, loom_graph **out,
                                loom_rewrite_report *report) {
  return loom__rules_run(g, match_rules, LOOM_ARRAY_SIZE(match_rules), opts, out, report);
}
