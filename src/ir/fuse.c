/* The "fuse" rewrite (docs/ir-fusion.md, "The pass"): regions of elementwise ops and the
 * reduction that consumes them become one fused op, whose estimate counts no intermediate.
 *
 * A region grows backwards from its root: a final op (reduce_sum/prod/max/min, argmax/argmin,
 * topk, or a matrix-vector dot, which the body computes as a mul and a reduce_sum), or, for a
 * region without a reduction, an elementwise value. It takes every op feeding it that computes
 * over the root's space S (elementwise ops, dots of k <= LOOM_FUSE_MAX_K) and whose results no
 * op outside reads; scalar constants are copied into it; everything else it reads (graph
 * inputs, views, values read outside too) becomes an operand. Ops are visited from the root
 * down in graph order, so when an op is weighed every reader of its result has been decided.
 *
 * The pass runs last, after chunk: the pieces chunk chose were sized for the unfused body, and
 * a loop body's regions are fused the same way (its estimate then shrinks).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ir/passes.h"
#include "ir/view.h"

/* One region: the ops it holds and how its root is computed. */
typedef struct region {
  int32_t root;       /* the op whose results the fused op gives */
  int32_t mv_matrix;  /* a matrix-vector dot root: the value the body multiplies (-1 otherwise) */
  int32_t mv_vector;  /* its vector operand */
  int32_t mv_axis;    /* the axis of S the vector runs along, which the body reduces */
  int32_t transposed; /* the op of a transpose the matrix-vector root reads through, or -1 */
  loom_type space;
  int32_t n_ops; /* compute ops, the root included */
  bool use;      /* fused in the graph emit builds */
} region;

typedef struct fuse_state {
  const loom_graph *g;
  int32_t *owner;      /* per op: the region holding it, -1 */
  int32_t *readers;    /* per value: ops reading it (once per operand) and returns */
  int32_t *in_readers; /* per value: of those, the current region's */
  bool *dot_operand;   /* per value: read by a dot of the current region (stays outside) */
  bool gemm_root;      /* the current region's root is a topk along the last axis of a matrix */
  bool gemm_taken;     /* and it holds its one large dot (gemm_dot) */
  region *regions;
  int32_t n_regions, cap_regions;
} fuse_state;

static bool elementwise_class(loom__op_class c) {
  return c == LOOM_CLASS_UNARY || c == LOOM_CLASS_BINARY || c == LOOM_CLASS_COMPARE ||
         c == LOOM_CLASS_LOGIC || c == LOOM_CLASS_SELECT || c == LOOM_CLASS_CAST;
}

static bool over_space(const loom_type *t, const loom_type *s) {
  if (t->rank != s->rank) return false;
  for (int32_t d = 0; d < t->rank; d++)
    if (t->dims[d] != s->dims[d] && t->dims[d] != 1) return false;
  return true;
}

/* A scalar the body makes itself: a rank-0 constant or a fill over the space. */
static bool scalar_value(const loom_graph *g, int32_t v, const loom_type *s) {
  int32_t o = g->values[v].op;
  if (o < 0) return false;
  const loom_type *t = &g->values[v].type;
  if (g->ops[o].kind == LOOM_OP_CONSTANT) return t->rank == 0;
  return g->ops[o].kind == LOOM_OP_FILL && (t->rank == 0 || over_space(t, s));
}

/* A dot the body computes inline: matrices, k <= LOOM_FUSE_MAX_K, the result over S. */
static bool small_dot(const loom_graph *g, const loom__op *op, const loom_type *s) {
  if (op->kind != LOOM_OP_DOT) return false;
  const loom_type *a = &g->values[op->inputs[0]].type, *b = &g->values[op->inputs[1]].type;
  return a->rank == 2 && b->rank == 2 && a->dims[1] <= LOOM_FUSE_MAX_K &&
         over_space(&g->values[op->outputs[0]].type, s) && s->rank == 2;
}

/* A dot of more than LOOM_FUSE_MAX_K terms joins a region only below a topk along the last axis
 * of a matrix (a kNN's expanded distances, |x|^2 + |y|^2 - 2 x.y^T): the cpu evaluator computes
 * it tile by tile through the host BLAS and merges each tile's rows into the running k best
 * (cpu_fused_gemm.c), so the n x m product is never stored and a chunked loop's pieces are no
 * longer bounded by it. One per region, f32 matrices only. */
static bool gemm_dot(const fuse_state *fs, const loom__op *op, const loom_type *s) {
  const loom_graph *g = fs->g;
  if (!fs->gemm_root || fs->gemm_taken || op->kind != LOOM_OP_DOT) return false;
  const loom_type *a = &g->values[op->inputs[0]].type, *b = &g->values[op->inputs[1]].type;
  const loom_type *t = &g->values[op->outputs[0]].type;
  return a->rank == 2 && b->rank == 2 && t->dtype == LOOM_F32 && a->dtype == LOOM_F32 &&
         b->dtype == LOOM_F32 && a->dims[1] > LOOM_FUSE_MAX_K && t->rank == 2 && t->dims[0] == s->dims[0] &&
         t->dims[1] == s->dims[1];
}

/* Whether op o (producing a value every reader of which is in the current region) joins it. */
static bool joins(const fuse_state *fs, int32_t o, const loom_type *s) {
  const loom_graph *g = fs->g;
  const loom__op *op = &g->ops[o];
  if (fs->owner[o] >= 0 || op->n_outputs != 1 || op->loop || op->fused) return false;
  int32_t v = op->outputs[0];
  /* a value nobody reads (dead code, as an imported model may hold) is no reader's: it joins
   * nothing, else the body would compute a result it never reads */
  if (fs->readers[v] == 0 || fs->dot_operand[v] || fs->in_readers[v] != fs->readers[v]) return false;
  if (small_dot(g, op, s)) return true;
  if (gemm_dot(fs, op, s)) return true;
  return elementwise_class(loom__op_info_of(op->kind)->cls) && over_space(&g->values[v].type, s);
}

static bool final_kind(loom_op k) {
  return k == LOOM_OP_REDUCE_SUM || k == LOOM_OP_REDUCE_PROD || k == LOOM_OP_REDUCE_MAX ||
         k == LOOM_OP_REDUCE_MIN || k == LOOM_OP_ARGMAX || k == LOOM_OP_ARGMIN || k == LOOM_OP_TOPK;
}

/* Counts op o's operands as read by the current region (a dot's stay outside). */
static void take_op(fuse_state *fs, int32_t o, int32_t id) {
  const loom__op *op = &fs->g->ops[o];
  fs->owner[o] = id;
  for (int32_t i = 0; i < op->n_inputs; i++) {
    fs->in_readers[op->inputs[i]]++;
    if (op->kind == LOOM_OP_DOT) fs->dot_operand[op->inputs[i]] = true;
  }
}

/* How a root is computed: S, and for a matrix-vector dot the matrix, vector and reduced axis.
 * False for an op that roots no region. `elementwise` admits roots without a reduction. */
static bool root_of(const fuse_state *fs, int32_t o, bool elementwise, region *r) {
  const loom_graph *g = fs->g;
  const loom__op *op = &g->ops[o];
  memset(r, 0, sizeof *r);
  r->root = o;
  r->mv_matrix = r->mv_vector = r->transposed = -1;
  if (fs->owner[o] >= 0 || op->loop || op->fused) return false;
  if (elementwise) {
    if (op->n_outputs != 1 || !elementwise_class(loom__op_info_of(op->kind)->cls)) return false;
    r->space = g->values[op->outputs[0]].type;
    return r->space.rank >= 1;
  }
  if (final_kind(op->kind)) {
    r->space = g->values[op->inputs[0]].type;
    return r->space.rank >= 1;
  }
  if (op->kind != LOOM_OP_DOT) return false;
  const loom_type *a = &g->values[op->inputs[0]].type, *b = &g->values[op->inputs[1]].type;
  int32_t m = a->rank == 2 && b->rank == 1 ? 0 : a->rank == 1 && b->rank == 2 ? 1 : -1;
  if (m < 0) return false;
  r->mv_matrix = op->inputs[m];
  r->mv_vector = op->inputs[1 - m];
  r->mv_axis = m == 0 ? 1 : 0; /* A.v sums A's columns; v.A its rows */
  /* kernel_mv's `dot kt y`, kt = transpose k: the body reads k and sums along its other axis */
  int32_t t = g->values[r->mv_matrix].op;
  if (t >= 0 && g->ops[t].kind == LOOM_OP_TRANSPOSE && fs->readers[r->mv_matrix] == 1 && fs->owner[t] < 0) {
    r->transposed = t;
    r->mv_matrix = g->ops[t].inputs[0];
    r->mv_axis = 1 - r->mv_axis;
  }
  r->space = g->values[r->mv_matrix].type;
  return true;
}

/* Grows region r (its root set by root_of) backwards; false when it holds one compute op. */
static bool grow(fuse_state *fs, region *r, int32_t id) {
  const loom_graph *g = fs->g;
  memset(fs->in_readers, 0, sizeof(int32_t) * (size_t)g->n_values);
  memset(fs->dot_operand, 0, sizeof(bool) * (size_t)g->n_values);
  take_op(fs, r->root, id);
  r->n_ops = 1;
  const loom__op *root = &g->ops[r->root];
  int32_t axis = -1;
  fs->gemm_root = root->kind == LOOM_OP_TOPK && !root->attrs.largest && root->attrs.k <= 64 &&
                  r->space.rank == 2 && r->space.dtype == LOOM_F32 &&
                  loom__axis_normalize(root->attrs.axis, 2, &axis) && axis == 1;
  fs->gemm_taken = false;
  if (r->transposed >= 0) {
    take_op(fs, r->transposed, id);
    fs->dot_operand[r->mv_vector] = true; /* the vector enters as an operand, viewed */
  }
  if (r->mv_matrix >= 0 && r->transposed < 0) fs->dot_operand[r->mv_vector] = true;
  if (r->mv_matrix >= 0) fs->dot_operand[r->mv_matrix] = false;
  for (int32_t o = r->root - 1; o >= 0; o--) {
    if (o == r->transposed || !joins(fs, o, &r->space)) continue;
    /* a matrix-vector root's matrix is read through the body's mul, not as a dot operand */
    take_op(fs, o, id);
    r->n_ops++;
    fs->gemm_taken = fs->gemm_taken || gemm_dot(fs, &g->ops[o], &r->space);
  }
  bool fed = true;
  if (r->mv_matrix >= 0 || final_kind(g->ops[r->root].kind)) {
    int32_t in = r->mv_matrix >= 0 ? r->mv_matrix : g->ops[r->root].inputs[0];
    int32_t p = g->values[in].op;
    fed = p >= 0 && fs->owner[p] == id; /* the final op reads a value the region computes */
  }
  if (r->n_ops >= 2 && fed) return true;
  for (int32_t o = 0; o <= r->root; o++)
    if (fs->owner[o] == id) fs->owner[o] = -1;
  return false;
}

static loom_status add_region(fuse_state *fs, const region *r) {
  if (loom__grow((void **)&fs->regions, &fs->cap_regions, fs->n_regions + 1, sizeof *fs->regions))
    return loom__oom("the fuse rewrite's regions");
  fs->regions[fs->n_regions++] = *r;
  return LOOM_OK;
}

/* Reduction-rooted regions from the last op back, then elementwise ones among what is left. */
static loom_status find_regions(fuse_state *fs) {
  const loom_graph *g = fs->g;
  for (int32_t pass = 0; pass < 2; pass++)
    for (int32_t o = g->n_ops - 1; o >= 0; o--) {
      region r;
      if (!root_of(fs, o, pass == 1, &r)) continue;
      if (!grow(fs, &r, fs->n_regions)) continue;
      loom_status s = add_region(fs, &r);
      if (s) return s;
    }
  return LOOM_OK;
}

/* ---- the body ---- */

typedef struct body_build {
  const fuse_state *fs;
  const region *r;
  int32_t id;
  loom_graph *b;
  int32_t *map;      /* outer value -> body value (-1) */
  int32_t *operands; /* outer values, one per body parameter */
  int32_t n_operands;
} body_build;

/* An outer value's name where it is a real one (not a printer's v<N>, which the body's own
 * unnamed values would collide with). */
static const char *real_name(const loom_graph *g, int32_t v) {
  const char *n = g->values[v].name;
  if (!n) return NULL;
  if (n[0] == 'v' && n[1] >= '0' && n[1] <= '9') return NULL;
  return n;
}

static loom_status body_fail(body_build *bb) {
  return bb->b->error ? bb->b->error : LOOM_ERR_INTERNAL;
}

/* Whether operand i of region op o is one of the fused op's operands: not computed in the
 * region, not a scalar the body makes, not the transpose a matrix-vector root reads through. */
static bool region_operand(const fuse_state *fs, const region *r, int32_t id, int32_t o, int32_t i) {
  const loom_graph *g = fs->g;
  const loom__op *op = &g->ops[o];
  int32_t v = op->inputs[i], p = g->values[v].op;
  if (p >= 0 && fs->owner[p] == id) return false;
  if (o == r->root && r->transposed >= 0 && v == g->ops[r->transposed].outputs[0]) return false;
  return !(scalar_value(g, v, &r->space) && op->kind != LOOM_OP_DOT);
}

/* Parameters come first in a graph: every operand is found before any op is added. */
static loom_status add_params(body_build *bb) {
  const loom_graph *g = bb->fs->g;
  for (int32_t o = 0; o <= bb->r->root; o++) {
    if (bb->fs->owner[o] != bb->id) continue;
    const loom__op *op = &g->ops[o];
    for (int32_t i = 0; i < op->n_inputs; i++) {
      int32_t v = op->inputs[i];
      if (bb->map[v] >= 0 || !region_operand(bb->fs, bb->r, bb->id, o, i)) continue;
      char name[32];
      const char *n = real_name(g, v);
      for (int32_t k = bb->n_operands; !n || loom_graph_find(bb->b, n).id >= 0; k++) {
        snprintf(name, sizeof name, "in%d", (int)k); /* the first free in<k> */
        n = name;
      }
      loom_value pv = loom_graph_param(bb->b, n, &g->values[v].type);
      if (pv.id < 0) return body_fail(bb);
      bb->map[v] = pv.id;
      bb->operands[bb->n_operands++] = v;
    }
  }
  return LOOM_OK;
}

static void name_like(body_build *bb, loom_value bv, int32_t v) {
  const char *n = real_name(bb->fs->g, v);
  if (n && loom_graph_find(bb->b, n).id < 0) (void)loom_value_set_name(bb->b, bv, n);
}

/* The body value standing for outer value v as an elementwise op reads it: a region value, a
 * scalar made in the body, or a parameter (broadcast to S's rank where it has fewer axes). */
static loom_status body_value(body_build *bb, int32_t v, bool viewed, loom_value *out) {
  const loom_graph *g = bb->fs->g;
  const loom_type *s = &bb->r->space;
  if (bb->map[v] < 0) { /* a scalar constant */
    const loom__op *op = &g->ops[g->values[v].op];
    loom_value nv;
    if (loom_graph_add(bb->b, op->kind, NULL, 0, &op->attrs, &g->values[v].type, op->const_data, &nv, 1))
      return body_fail(bb);
    bb->map[v] = nv.id;
  }
  loom_value bv = {bb->map[v]};
  const loom_type *t = &bb->b->values[bv.id].type;
  bool scalar = t->rank == 0 && bb->b->values[bv.id].op >= 0; /* a rank-0 parameter is viewed */
  if (!viewed || scalar || t->rank >= s->rank) {
    *out = bv;
    return LOOM_OK;
  }
  /* a broadcast view prepends the missing axes whatever the operand's strides */
  loom_attrs a;
  loom_attrs_init(&a);
  a.set |= LOOM_ATTR_SHAPE;
  a.shape.count = s->rank;
  for (int32_t d = 0; d < s->rank; d++) {
    int32_t j = d - (s->rank - t->rank);
    a.shape.v[d] = j < 0 ? 1 : t->dims[j];
  }
  if (loom_graph_add(bb->b, LOOM_OP_BROADCAST, &bv, 1, &a, NULL, NULL, out, 1)) return body_fail(bb);
  return LOOM_OK;
}

/* The matrix-vector root: mul by the vector viewed along mv_axis, then reduce_sum over it. */
static loom_status add_mv(body_build *bb, loom_value *out) {
  const loom_graph *g = bb->fs->g;
  const region *r = bb->r;
  loom_value vec = {bb->map[r->mv_vector]}, view, m;
  loom_attrs a;
  loom_attrs_init(&a);
  a.set |= LOOM_ATTR_SHAPE;
  a.shape.count = 2;
  a.shape.v[0] = 1;
  a.shape.v[1] = g->values[r->mv_vector].type.dims[0];
  if (loom_graph_add(bb->b, LOOM_OP_BROADCAST, &vec, 1, &a, NULL, NULL, &view, 1)) return body_fail(bb);
  if (r->mv_axis == 0) { /* [1,n] -> [n,1], a view whatever the strides */
    loom_attrs t;
    loom_attrs_init(&t);
    t.set |= LOOM_ATTR_PERM;
    t.perm.count = 2;
    t.perm.v[0] = 1;
    t.perm.v[1] = 0;
    loom_value tv;
    if (loom_graph_add(bb->b, LOOM_OP_TRANSPOSE, &view, 1, &t, NULL, NULL, &tv, 1)) return body_fail(bb);
    view = tv;
  }
  loom_value ins[2] = {{bb->map[r->mv_matrix]}, view};
  if (loom_graph_add(bb->b, LOOM_OP_MUL, ins, 2, NULL, NULL, NULL, &m, 1)) return body_fail(bb);
  loom_attrs s;
  loom_attrs_init(&s);
  s.set |= LOOM_ATTR_AXES;
  s.axes.count = 1;
  s.axes.v[0] = r->mv_axis;
  if (loom_graph_add(bb->b, LOOM_OP_REDUCE_SUM, &m, 1, &s, NULL, NULL, out, 1)) return body_fail(bb);
  return LOOM_OK;
}

static loom_status add_op(body_build *bb, int32_t o) {
  const loom_graph *g = bb->fs->g;
  const loom__op *op = &g->ops[o];
  loom_value ins[8], outs[LOOM_FUSE_MAX_RESULTS];
  if (o == bb->r->root && bb->r->mv_matrix >= 0) {
    loom_status s = add_mv(bb, &outs[0]);
    if (s) return s;
  } else {
    if (op->n_inputs > 8)
      return loom__error(LOOM_ERR_INTERNAL, "fuse: %s with %d operands", loom_op_name(op->kind),
                         (int)op->n_inputs);
    for (int32_t i = 0; i < op->n_inputs; i++) {
      loom_status s =
          body_value(bb, op->inputs[i], op->kind != LOOM_OP_DOT && !final_kind(op->kind), &ins[i]);
      if (s) return s;
    }
    if (loom_graph_add(bb->b, op->kind, ins, op->n_inputs, &op->attrs, NULL, NULL, outs, op->n_outputs))
      return body_fail(bb);
  }
  for (int32_t k = 0; k < op->n_outputs; k++) {
    bb->map[op->outputs[k]] = outs[k].id;
    name_like(bb, outs[k], op->outputs[k]);
  }
  return LOOM_OK;
}

/* Region id's body; operands (outer values, one per parameter) into bb->operands. */
static loom_status build_body(body_build *bb) {
  const loom_graph *g = bb->fs->g;
  loom_status s = loom_graph_create("body", &bb->b);
  if (!s) s = add_params(bb);
  for (int32_t o = 0; !s && o <= bb->r->root; o++)
    if (bb->fs->owner[o] == bb->id && o != bb->r->transposed) s = add_op(bb, o);
  const loom__op *root = &g->ops[bb->r->root];
  loom_value rets[LOOM_FUSE_MAX_RESULTS];
  for (int32_t k = 0; !s && k < root->n_outputs; k++) rets[k] = (loom_value){bb->map[root->outputs[k]]};
  if (!s) s = loom_graph_return(bb->b, rets, root->n_outputs);
  return s;
}

/* ---- the cost: fuse only what runs faster fused ----
 *
 * A fused op is not free: the cpu evaluator (cpu_fused.c) sets up a plan over its body on
 * every call and walks S in blocks of up to FUSE_BLOCK elements of its last axis, every body
 * op dispatched once per block; the ops it replaces each cost the executor's dispatch and their
 * intermediates' trips through memory. A region is fused where the estimate below says it runs
 * faster, so fusion never loses to the ops it replaces (loom-bench fusion measures both). The
 * constants are nanoseconds fitted to the times in docs/ir-fusion.md ("When fusing pays"), on
 * the project's 2-core machines.
 * Where the graph does not fit its limit, fusion is kept for the memory it saves whatever the
 * time (loom__rewrite_fuse). */
#define COST_OP_NS 400.0       /* the executor's dispatch of one unfused op */
#define COST_FUSED_NS 1000.0   /* a fused op's call: its plan over the body and its buffers */
#define COST_BODY_OP_NS 60.0   /* each body op, once per call */
#define COST_BLOCK_OP_NS 15.0  /* each body op, once per block */
#define COST_TEAM_NS 4000.0    /* an OpenMP team started for one op */
#define COST_ELEM_NS 0.12      /* a body op on one element, fused (the plain kernels stream faster) */
#define COST_SPACE_NS 0.2      /* an element of S fused: its leaves' loads, its result's store */
#define COST_SLOW_NS 2.0       /* a transcendental on one element, unfused: libm, one at a time */
#define COST_SLOW_FUSED_NS 0.3 /* the same fused: libmvec's vector forms (cpu_fused.c) */
#define CACHE_BW 160.0         /* bytes a ns where the arrays stay in the caches (L3 included) */
#define MEMORY_BW 30.0         /* bytes a ns from memory */
#define CACHED_BYTES (32 << 20)
#define FUSE_BLOCK 1024
#define THREADED_ELEMS 16384             /* an unfused elementwise kernel threads past this */
#define FUSED_THREADED_WORK (16 * 16384) /* the evaluator threads past these elements x ops */

static double bytes_ns(double bytes) {
  return bytes / (bytes <= CACHED_BYTES ? CACHE_BW : MEMORY_BW);
}

static double elems_of(const loom_type *t) {
  int64_t n = 0;
  loom_type_elements(t, &n);
  return (double)n;
}

static double bytes_of(const loom_type *t) {
  int64_t n = 0;
  loom_type_bytes(t, &n);
  return (double)n;
}

static bool slow_op(loom_op k) {
  return k == LOOM_OP_EXP || k == LOOM_OP_LOG || k == LOOM_OP_SIN || k == LOOM_OP_COS || k == LOOM_OP_TANH ||
         k == LOOM_OP_SIGMOID || k == LOOM_OP_POW;
}

/* The region's ops timed one by one (*unfused) and as one fused op (*fused), in ns. OUT_OF_MEMORY. */
static loom_status region_cost(const fuse_state *fs, const region *r, int32_t id, double *unfused,
                               double *fused) {
  const loom_graph *g = fs->g;
  bool *counted = loom__calloc((size_t)LOOM_MAX(g->n_values, 1), sizeof *counted); /* operands, once */
  if (!counted) return loom__oom("the fuse rewrite's cost");
  const loom_type *s = &r->space;
  double elems = elems_of(s), last = (double)s->dims[s->rank - 1];
  double rows = last > 0 ? elems / last : 0, blocks = rows * ceil(last / FUSE_BLOCK);
  /* an elementwise region over rows walked as one axis (cpu_fused.c, merge_rows) */
  if (!final_kind(g->ops[r->root].kind) && r->mv_matrix < 0) blocks = ceil(elems / FUSE_BLOCK);
  double u = 0, f = COST_FUSED_NS, operand_bytes = 0, n_ops = 0;
  for (int32_t o = 0; o <= r->root; o++) {
    if (fs->owner[o] != id || o == r->transposed) continue;
    const loom__op *op = &g->ops[o];
    const loom_type *t = &g->values[op->outputs[0]].type;
    double own = elems_of(t), bytes = bytes_of(t);
    for (int32_t i = 0; i < op->n_inputs; i++) {
      bool operand = region_operand(fs, r, id, o, i);
      double b = scalar_value(g, op->inputs[i], s) ? 0 : bytes_of(&g->values[op->inputs[i]].type);
      bytes += b;
      if (operand && !counted[op->inputs[i]]) operand_bytes += b;
      counted[op->inputs[i]] |= operand;
    }
    bool slow = slow_op(op->kind);
    u += COST_OP_NS + bytes_ns(bytes) + own * (slow ? COST_SLOW_NS : 0) +
         (own > THREADED_ELEMS ? COST_TEAM_NS : 0);
    /* fused, a value constant along the last axis is computed once a block, any other over S */
    bool per_block = t->rank == s->rank && t->dims[t->rank - 1] == 1 && last > 1;
    double computed = per_block ? blocks : elems;
    f += COST_BODY_OP_NS + blocks * COST_BLOCK_OP_NS +
         computed * (COST_ELEM_NS + (slow ? COST_SLOW_FUSED_NS : 0));
    n_ops += 1;
  }
  for (int32_t k = 0; k < g->ops[r->root].n_outputs; k++)
    operand_bytes += bytes_of(&g->values[g->ops[r->root].outputs[k]].type);
  f += elems * COST_SPACE_NS + bytes_ns(operand_bytes) +
       (elems * (n_ops + 1) >= FUSED_THREADED_WORK ? COST_TEAM_NS : 0);
  *unfused = u;
  *fused = f;
  loom__free(counted);
  return LOOM_OK;
}

/* ---- the rewrite ---- */

typedef struct fuse_pass {
  const loom_optimize_options *opts;
  loom_rewrite_report *report;
  const char *where; /* "" or "the body of loop 'x': " */
  bool pressed;      /* the graph passes its limit: fuse for memory, whatever the time */
} fuse_pass;

static loom_status fuse_graph(const fuse_pass *fp, const loom_graph *g, loom_graph **out, bool *changed);

/* g with the regions marked `use` fused (loops' bodies replaced by bodies[o] where not NULL). */
static loom_status emit(const fuse_state *fs, loom_graph *const *bodies, loom_graph **out) {
  const loom_graph *g = fs->g;
  loom__rebuild rb;
  loom_status s = loom__rebuild_init(&rb, g);
  if (s) return s;
  /* A fused op's operands are distinct values; a loop may read one value several times (a
   * stencil's x at three offsets), so its operands can outnumber the graph's values. */
  int32_t most = LOOM_MAX(g->n_values, 1);
  for (int32_t o = 0; o < g->n_ops; o++) most = LOOM_MAX(most, g->ops[o].n_inputs);
  int32_t *map = loom__malloc(sizeof(int32_t) * (size_t)LOOM_MAX(g->n_values, 1));
  int32_t *operands = loom__malloc(sizeof(int32_t) * (size_t)LOOM_MAX(g->n_values, 1));
  loom_value *ins = loom__malloc(sizeof(loom_value) * (size_t)most);
  if (!map || !operands || !ins) s = loom__oom("the fuse rewrite");
  for (int32_t o = 0; !s && o < g->n_ops; o++) {
    int32_t id = fs->owner[o];
    const loom__op *op = &g->ops[o];
    bool fused = id >= 0 && fs->regions[id].use;
    if (fused && fs->regions[id].root != o) continue; /* inside the fused op */
    if (fused) {
      body_build bb = {.fs = fs, .r = &fs->regions[id], .id = id, .map = map, .operands = operands};
      for (int32_t v = 0; v < g->n_values; v++) map[v] = -1;
      s = build_body(&bb);
      for (int32_t i = 0; !s && i < bb.n_operands; i++) ins[i] = loom__rebuild_get(&rb, operands[i]);
      loom_value outs[LOOM_FUSE_MAX_RESULTS];
      rb.dst->cur_line = op->line;
      rb.dst->cur_col = op->col;
      if (!s) s = loom__graph_add_fused(rb.dst, bb.b, ins, bb.n_operands, outs);
      for (int32_t k = 0; !s && k < op->n_outputs; k++) loom__rebuild_set(&rb, op->outputs[k], outs[k]);
      loom_graph_destroy(bb.b);
      continue;
    }
    if (op->loop && bodies[o]) {
      for (int32_t i = 0; i < op->n_inputs; i++) ins[i] = loom__rebuild_get(&rb, op->inputs[i]);
      loom_value outs[LOOM_LOOP_MAX_RESULTS];
      rb.dst->cur_line = op->line;
      rb.dst->cur_col = op->col;
      const loom__loop *l = op->loop;
      s = loom_graph_add_loop(rb.dst, l->n, l->piece, bodies[o], ins, l->rules, op->n_inputs, l->combines,
                              op->n_outputs, outs);
      if (!s) rb.dst->ops[rb.dst->n_ops - 1].loop->slices = l->slices;
      for (int32_t k = 0; !s && k < op->n_outputs; k++) loom__rebuild_set(&rb, op->outputs[k], outs[k]);
      continue;
    }
    s = loom__rebuild_copy(&rb, o);
  }
  if (!s) s = loom__rebuild_finish(&rb, out);
  loom__rebuild_deinit(&rb);
  loom__free(map);
  loom__free(operands);
  loom__free(ins);
  return s;
}

static loom_status peak_of(const loom_graph *g, int64_t *out) {
  loom_estimate e;
  loom_status s = loom_graph_estimate(g, NULL, &e);
  if (s) return s;
  *out = e.peak_bytes;
  loom_estimate_deinit(&e);
  return LOOM_OK;
}

/* "fused 'out' (12 ops: mul, neg, exp, ...; inputs x, y; result out f32[400])" */
static void describe(const fuse_state *fs, const region *r, int32_t id, char *buf, size_t size) {
  const loom_graph *g = fs->g;
  char label[32];
  const loom__op *root = &g->ops[r->root];
  size_t len = (size_t)snprintf(buf, size, "%d ops (", (int)r->n_ops);
  bool first = true;
  for (int32_t o = 0; o <= r->root && len < size; o++) {
    if (fs->owner[o] != id || o == r->transposed) continue;
    len += (size_t)snprintf(buf + len, size - len, "%s%s", first ? "" : " ", loom_op_name(g->ops[o].kind));
    first = false;
  }
  if (len < size) len += (size_t)snprintf(buf + len, size - len, "), inputs");
  for (int32_t o = 0, n = 0; o <= r->root && len < size; o++) {
    if (fs->owner[o] != id || o == r->transposed) continue;
    for (int32_t i = 0; i < g->ops[o].n_inputs && len < size; i++) {
      int32_t v = g->ops[o].inputs[i];
      bool seen = false; /* an operand read twice is one input */
      for (int32_t q = 0; q < o && !seen; q++)
        for (int32_t j = 0; fs->owner[q] == id && j < g->ops[q].n_inputs; j++)
          seen |= g->ops[q].inputs[j] == v && region_operand(fs, r, id, q, j);
      for (int32_t j = 0; j < i; j++) seen |= g->ops[o].inputs[j] == v && region_operand(fs, r, id, o, j);
      if (seen || !region_operand(fs, r, id, o, i)) continue;
      len += (size_t)snprintf(buf + len, size - len, "%s%s", n++ ? ", " : " ",
                              loom__value_label(g, v, label, sizeof label));
    }
  }
  if (len < size) len += (size_t)snprintf(buf + len, size - len, " -> fused");
  for (int32_t k = 0; k < root->n_outputs && len < size; k++) {
    char t[LOOM_TYPE_STRING_MAX];
    len += (size_t)snprintf(buf + len, size - len, "%s'%s' %s", k ? ", " : " ",
                            loom__value_label(g, root->outputs[k], label, sizeof label),
                            loom_type_format(&g->values[root->outputs[k]].type, t, sizeof t));
  }
}

/* What fused op `op` holds while it runs, alone: its operands' storage, its results and its
 * accumulator. */
static loom_status fused_need(const loom_graph *g, const loom__op *op, int64_t *out) {
  loom__layout *layouts = loom__malloc(sizeof *layouts * (size_t)LOOM_MAX(g->n_values, 1));
  bool *seen = loom__calloc((size_t)LOOM_MAX(g->n_values, 1), sizeof *seen);
  loom_status s = (!layouts || !seen) ? loom__oom("the fuse rewrite") : loom__graph_layouts(g, layouts);
  int64_t need = 0;
  for (int32_t i = 0; !s && i < op->n_inputs; i++) {
    int32_t b = layouts[op->inputs[i]].base;
    int64_t bytes = 0;
    if (seen[b] || !layouts[b].owns) continue;
    seen[b] = true;
    loom_type_bytes(&g->values[b].type, &bytes);
    need += bytes;
  }
  for (int32_t r = 0; !s && r < op->n_outputs; r++) {
    int64_t bytes = 0;
    loom_type_bytes(&g->values[op->outputs[r]].type, &bytes);
    need += bytes;
  }
  need += loom__op_scratch_bytes(g, op);
  *out = need;
  loom__free(layouts);
  loom__free(seen);
  return s;
}

/* The largest need of a fused op of g, alone. */
static loom_status largest_fused_need(const loom_graph *g, int64_t *out) {
  *out = 0;
  for (int32_t o = 0; o < g->n_ops; o++) {
    int64_t need;
    if (!g->ops[o].fused) continue;
    loom_status s = fused_need(g, &g->ops[o], &need);
    if (s) return s;
    *out = LOOM_MAX(*out, need);
  }
  return LOOM_OK;
}

/* Each region applied in turn, kept where it does not raise the estimated peak (a fused op
 * holds all its operands at once, which the ops it replaces may not) nor need more than the
 * limit on its own (the splitter could then not place it), and reported with what it saves. */
static loom_status report_regions(const fuse_pass *fp, fuse_state *fs, loom_graph *const *bodies,
                                  bool bodies_changed, loom_graph **out) {
  loom_graph *cur = NULL;
  loom_status s = bodies_changed ? emit(fs, bodies, &cur) : LOOM_OK;
  if (s) return s;
  /* what the loops' bodies saved is theirs (reported with them), not the first region's */
  int64_t before = 0, after = 0, need = 0;
  if ((s = peak_of(cur ? cur : fs->g, &before))) {
    loom_graph_destroy(cur);
    return s;
  }
  int64_t limit = fp->opts ? fp->opts->limit : 0;
  for (int32_t i = 0; !s && i < fs->n_regions; i++) {
    region *r = &fs->regions[i];
    loom_graph *next = NULL;
    double unfused = 0, fused = 0;
    if ((s = region_cost(fs, r, i, &unfused, &fused))) break;
    /* A region rooted in a reduction or a matrix-vector dot is fused whatever this estimate
     * says. It runs in the evaluator's one-pass folds (a product sum, a kernel sum, a top-k that
     * skips the runs it cannot enter), which store nothing over S and whose per-element cost the
     * constants above, fitted on elementwise chains, overstate: weighed by them, regions that ran
     * faster fused at `loom-bench fusion --suite`'s sizes (sums of squares, column sums, argmax
     * rows, (A + B) v, kmv, kNN) were left unfused, and so was the body of a kNN's chunk loop
     * under a limit, each piece then paying every op's dispatch. Fused, such a region lost over
     * tiny spaces, by microseconds, and in one case of the suite at its size: a top-k over rows
     * after two cheap ops (its fold is not written; docs/ir-fusion.md, "When fusing pays", has the
     * figures). */
    bool folds = final_kind(fs->g->ops[r->root].kind) || r->mv_matrix >= 0;
    if (!folds && !fp->pressed && fused >= unfused) continue; /* slower fused: left as it is */
    r->use = true;
    s = emit(fs, bodies, &next);
    if (s) break;
    s = peak_of(next, &after);
    if (!s && limit > 0) s = largest_fused_need(next, &need);
    if (s) {
      loom_graph_destroy(next);
      break;
    }
    if (after > before || need > limit) {
      r->use = false;
      loom_graph_destroy(next);
      continue;
    }
    char detail[240];
    describe(fs, r, i, detail, sizeof detail);
    s = loom__report_add(fp->report, "fuse", before - after, "%s%s", fp->where, detail);
    loom_graph_destroy(cur);
    cur = next;
    before = after;
  }
  if (!s && !cur) s = loom_graph_clone(fs->g, &cur); /* no region kept */
  if (s) {
    loom_graph_destroy(cur);
    return s;
  }
  *out = cur;
  return LOOM_OK;
}

static void fuse_state_deinit(fuse_state *fs) {
  loom__free(fs->owner);
  loom__free(fs->readers);
  loom__free(fs->in_readers);
  loom__free(fs->dot_operand);
  loom__free(fs->regions);
}

static loom_status fuse_state_init(fuse_state *fs, const loom_graph *g) {
  memset(fs, 0, sizeof *fs);
  fs->g = g;
  size_t nv = (size_t)LOOM_MAX(g->n_values, 1), no = (size_t)LOOM_MAX(g->n_ops, 1);
  fs->owner = loom__malloc(sizeof(int32_t) * no);
  fs->readers = loom__malloc(sizeof(int32_t) * nv);
  fs->in_readers = loom__calloc(nv, sizeof(int32_t));
  fs->dot_operand = loom__calloc(nv, sizeof(bool));
  if (!fs->owner || !fs->readers || !fs->in_readers || !fs->dot_operand) return loom__oom("the fuse rewrite");
  for (int32_t o = 0; o < g->n_ops; o++) fs->owner[o] = -1;
  loom__use_counts(g, fs->readers);
  return LOOM_OK;
}

/* The loops' bodies fused (bodies[o] NULL where nothing changed); *changed when any did. */
static loom_status fuse_bodies(const fuse_pass *fp, const loom_graph *g, loom_graph **bodies, bool *changed) {
  for (int32_t o = 0; o < g->n_ops; o++) {
    if (!g->ops[o].loop) continue;
    char where[160], label[32];
    snprintf(where, sizeof where, "%sthe body of loop '%s': ", fp->where,
             loom__value_label(g, g->ops[o].outputs[0], label, sizeof label));
    fuse_pass inner = {fp->opts, fp->report, where, fp->pressed};
    bool body_changed = false;
    loom_graph *b = NULL;
    loom_status s = fuse_graph(&inner, g->ops[o].loop->body, &b, &body_changed);
    if (s) return s;
    if (body_changed) {
      bodies[o] = b;
      *changed = true;
    } else {
      loom_graph_destroy(b);
    }
  }
  return LOOM_OK;
}

static loom_status fuse_graph(const fuse_pass *fp, const loom_graph *g, loom_graph **out, bool *changed) {
  *out = NULL;
  *changed = false;
  fuse_state fs;
  memset(&fs, 0, sizeof fs); /* freed whatever fails first */
  loom_graph **bodies = loom__calloc((size_t)LOOM_MAX(g->n_ops, 1), sizeof *bodies);
  loom_status s = bodies ? fuse_state_init(&fs, g) : loom__oom("the fuse rewrite");
  if (!s) s = fuse_bodies(fp, g, bodies, changed);
  if (!s) s = find_regions(&fs);
  if (!s && fs.n_regions > 0) {
    s = report_regions(fp, &fs, bodies, *changed, out);
    *changed = true;
  } else if (!s) {
    s = *changed ? emit(&fs, bodies, out) : loom_graph_clone(g, out);
  }
  for (int32_t o = 0; bodies && o < g->n_ops; o++) loom_graph_destroy(bodies[o]);
  loom__free(bodies);
  fuse_state_deinit(&fs);
  return s;
}

loom_status loom__rewrite_fuse(const loom_graph *g, const loom_optimize_options *opts, loom_graph **out,
                               loom_rewrite_report *report) {
  *out = NULL;
  if (!loom__rewrite_enabled(opts, "fuse")) return loom_graph_clone(g, out);
  fuse_pass fp = {opts, report, "", false};
  bool changed;
  int32_t reported = report ? report->count : 0;
  int64_t peak = 0;
  loom_status s = opts && opts->limit > 0 ? peak_of(g, &peak) : LOOM_OK;
  if (s) return s;
  fp.pressed = opts && opts->limit > 0 && peak > opts->limit;
  s = fuse_graph(&fp, g, out, &changed);
  if (s || !changed || !opts || opts->limit <= 0) return s;
  /* Each region was kept only where it alone did not raise the peak; together they may, past
   * the limit the graph was chunked to (found by fuzz_lir: chains of adds between FFTs). Then
   * the whole rewrite is dropped. */
  int64_t before = 0, after = 0;
  if ((s = peak_of(g, &before)) || (s = peak_of(*out, &after))) {
    loom_graph_destroy(*out);
    *out = NULL;
    return s;
  }
  if (after <= opts->limit || after <= before) return LOOM_OK;
  loom_graph_destroy(*out);
  if (report) report->count = reported;
  return loom_graph_clone(g, out);
}
