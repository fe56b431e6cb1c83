/* Predicted run times (issue 34, point 4): what a plan, or a graph run whole, costs by the
 * device's per-op cost model, so that loom-plan can say what a memory limit costs in time
 * before anything runs, and find the smallest limit that keeps a run within a factor of its
 * whole time.
 *
 * Each op is priced alone, one after the other, each stage on its runner's device: its kernels
 * by the model's class tables (loom_sched_op_work's sizes, as the scheduler prices a task), or
 * its memory traffic at the model's rates from beyond the cache where that takes longer (a
 * roofline: a matrix-vector product is bound by its matrix, a loop piece's slices stream from
 * memory; a product at the rate of the square GEMM of as many bytes; a fused op as one pass;
 * a result of 32 MiB or more its pages faulted in; on a CPU a concat run by run). A loop costs
 * each piece its body's ops, the gathers of slices that are not dense and the runtime's cost of
 * a piece (the model's piece_seconds, `loom-bench calibrate`), and a result its stage returns
 * the copy of each piece out; its full pieces are priced once for all (a loop of 8 million
 * pieces would take seconds and gigabytes as tasks). Transfers are not added: cpu0 has
 * none, and a calibrated model of a device with its own memory is measured end to end from
 * host memory. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/core.h"
#include "ir/ir.h"
#include "ir/view.h"
#include "loom/predict.h"
#include "sched/sched_impl.h"

/* The flops a core of this host's CPU can issue a cycle at most: two FMA units of its widest
 * vectors (16 f32 lanes with AVX-512, 8 with AVX2), 2 flops each. */
static double cpu_flops_per_cycle(void) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return 64;
  if (__builtin_cpu_supports("fma")) return 32;
#endif
  return 16;
}

/* Defaults for a device nobody calibrated, from what its discovery says: bounds on its speed,
 * so that a prediction from them is a lower bound on the time (no measured peak is kept where
 * the library could read it; nominal rates were neither bound, 0.2-3.3x of measured times on
 * the limits kernels, docs/limits.md). A GEMM at the peak of clock x compute
 * units x the widest FMA vectors (a GPU: 128 lanes a multiprocessor); memory-bound classes at
 * 32 bytes a cycle a core (a GPU: 64 a multiprocessor), no core streams faster from beyond its
 * first-level cache; 1 us a kernel, less than any launch measured here; no cost a piece. */
static void default_model(const loom_device_info *info, loom_sched_model *m) {
  memset(m, 0, sizeof *m);
  bool gpu = info->kind != LOOM_DEVICE_CPU;
  double clock = (info->clock_mhz > 0 ? info->clock_mhz : 2500) * 1e6;
  double units = info->compute_units > 0 ? info->compute_units : 1;
  double flops = clock * units * (gpu ? 256.0 : cpu_flops_per_cycle());
  double bytes = clock * units * (gpu ? 64.0 : 32.0);
  /* units per second of each class: GEMM and CONV flops, FFT flops, ELEMENTWISE output
   * elements (about 12 bytes moved each), REDUCTION and TOPK input elements, COPY bytes (read
   * and written) */
  const double rate[LOOM_OP_CLASS_COUNT] = {
      [LOOM_OP_CLASS_GEMM] = flops,
      [LOOM_OP_CLASS_FFT] = flops / 8,
      [LOOM_OP_CLASS_ELEMENTWISE] = bytes / 12,
      [LOOM_OP_CLASS_REDUCTION] = bytes / 4,
      [LOOM_OP_CLASS_TOPK] = bytes / 16,
      [LOOM_OP_CLASS_CONV] = flops / 2,
      [LOOM_OP_CLASS_COPY] = bytes / 2,
  };
  for (int c = 0; c < LOOM_OP_CLASS_COUNT; c++)
    m->cls[c] = (loom_sched_class_model){.known = true, .latency = 1e-6, .seconds_per_unit = 1 / rate[c]};
}

loom_status loom_sched_model_default(const loom_device_info *info, loom_sched_model *out_model) {
  if (!info || !out_model) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "prediction: NULL argument");
  default_model(info, out_model);
  return LOOM_OK;
}

loom_status loom_sched_platform_default(const loom_device_info *info, loom_sched_platform **out_platform) {
  if (out_platform) *out_platform = NULL;
  if (!info || !info->id || !out_platform)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "prediction: NULL argument");
  loom_sched_device d;
  memset(&d, 0, sizeof d);
  snprintf(d.id, sizeof d.id, "%s", info->id);
  snprintf(d.kind, sizeof d.kind, "%s", info->kind == LOOM_DEVICE_CPU ? "cpu" : "device");
  d.memory = info->memory_bytes > 0 ? info->memory_bytes : INT64_MAX / 2;
  default_model(info, &d.model);
  static const char *const nodes[] = {"host"};
  return loom_sched_platform_create(nodes, 1, &d, 1, NULL, 0, out_platform);
}

/* What prices an op: the device's model and its memory rates, seconds per byte read and
 * written, from the model's largest points (past the last-level cache, which calibrate
 * reaches): REDUCTION reads 4 bytes an element, ELEMENTWISE (an f32 add) reads 8 and writes 4. */
/* The layouts of the last two graphs priced (a stage's graph and a loop body), computed where a
 * fused op reads a view (fused_row): one pass over a graph, not one per fused op. */
typedef struct layout_cache {
  const loom_graph *g[2];
  loom__layout *l[2];
  int32_t next;
} layout_cache;

typedef struct pricer {
  const loom_sched_model *m;
  double read, write;
  bool blocks;           /* a CPU: its fused bodies run in blocks along their last axis (fused_blocks) */
  layout_cache *layouts; /* NULL: fused operands are taken as dense */
} pricer;

static double last_rate(const loom_sched_class_model *c) {
  if (!c->known) return 0;
  int32_t n = c->n_points;
  return n ? c->point_seconds[n - 1] / c->point_size[n - 1] : c->seconds_per_unit;
}

static pricer pricer_of(const loom_sched_device *d) {
  const loom_sched_model *m = &d->model;
  pricer p = {.m = m, .read = last_rate(&m->cls[LOOM_OP_CLASS_REDUCTION]) / 4};
  p.blocks = strcmp(d->kind, "cpu") == 0;
  p.write = (last_rate(&m->cls[LOOM_OP_CLASS_ELEMENTWISE]) - 8 * p.read) / 4;
  if (!(p.write > p.read)) p.write = p.read; /* a write costs at least a read */
  return p;
}

static double bytes_of(const loom_graph *g, loom_value v) {
  int64_t logical = 0;
  return loom_value_bytes(g, v, &logical, NULL) ? 0 : (double)logical;
}

static bool is_param(const loom_graph *g, loom_value v) {
  for (int32_t i = 0; i < loom_graph_param_count(g); i++)
    if (loom_graph_param_at(g, i).id == v.id) return true;
  return false;
}

/* The seconds a kernel spends reading `bytes` from memory: at the rate from beyond the cache,
 * or, where the model measured pieces streamed (`stream`), at what a piece of as many bytes
 * took where longer: a piece too small to be split over the threads reads at one core's rate
 * (scaled by `scale`, a shorter last piece). */
static double read_seconds(const pricer *p, double bytes, double scale) {
  double t = scale * bytes * p->read;
  const loom_sched_class_model *s = &p->m->stream;
  if (!s->known || !(bytes > 0)) return t;
  double streamed = loom__sched_class_time(s, scale * bytes);
  return streamed > t ? streamed : t;
}

/* The seconds an op spends moving memory, priced at the rates from beyond the cache: a dot
 * all its operands and its result (a matrix-vector product is bound by its matrix, which its
 * flops alone price as a small, fast GEMM); any other op the operands it reads from its
 * graph's parameters (a loop piece's slices stream from memory, where the model's table at
 * the piece's size was measured in cache). */
static double memory_seconds(const pricer *p, const loom_graph *g, int32_t index, loom_op kind,
                             double scale) {
  double read = 0;
  for (int32_t k = 0;; k++) {
    loom_value v = loom_graph_op_input(g, index, k);
    if (v.id < 0) break;
    if (kind == LOOM_OP_DOT || is_param(g, v)) read += bytes_of(g, v);
  }
  double written = kind == LOOM_OP_DOT ? bytes_of(g, loom_graph_op_output(g, index, 0)) : 0;
  /* A CPU's GEMM packs both operands on every call, reading them once more and writing their
   * packed copies: row slabs of 12 x 2048 times a whole f32[2048,2048] took 1.9 ms a call
   * (gemm at 16.4 MiB, 171 of them), priced 0.55 ms without it. A matrix-vector product packs
   * nothing. */
  if (kind == LOOM_OP_DOT && p->blocks && loom__dot_is_gemm(g, &g->ops[index])) {
    written += read;
    read *= 2;
  }
  return read_seconds(p, read, scale) + scale * written * p->write;
}

static loom_status op_seconds(const pricer *p, const loom_graph *g, int32_t index, double scale, double *t);

/* The seconds of a body's ops, one after the other, each at `scale` of its size (a loop's
 * last, shorter piece). */
static loom_status body_seconds(const pricer *p, const loom_graph *body, double scale, double *t) {
  loom_status s = LOOM_OK;
  for (int32_t i = 0; !s && i < loom_graph_op_count(body); i++) s = op_seconds(p, body, i, scale, t);
  return s;
}

/* The kernels of body that read parameter k's slice in place (through views of it), given
 * strided, the body's layouts over the operand's strides: readers[0] all, readers[1] those
 * that are not products (a product's BLAS call walks the rows itself). */
static void in_place_readers(const loom_graph *body, int32_t id, const loom__layout *strided,
                             int32_t *readers) {
  for (int32_t o = 0; o < body->n_ops; o++) {
    const loom__op *op = &body->ops[o];
    bool view = op->n_outputs > 0 && strided[op->outputs[0]].base == id;
    for (int32_t i = 0; !view && i < op->n_inputs; i++)
      if (strided[op->inputs[i]].base == id) {
        readers[0]++;
        readers[1] += op->kind != LOOM_OP_DOT;
        break;
      }
  }
}

/* Whether the executor copies body parameter k's slice, not dense in operand type t, into a
 * buffer of its own (exec_loop.c's slice_copied): where the body, laid out over the operand's
 * strides, would lay its values out otherwise than over a dense slice (a reshape of it would
 * copy) or passes a view of it to an inner loop. Otherwise readers[0] kernels read it in place,
 * readers[1] of them not products (in_place_readers). */
static bool slice_copied(const loom_graph *body, int32_t k, const loom_type *t, int32_t *readers) {
  int32_t id = body->params[k];
  loom__layout in_place = {.base = id, .owns = true};
  loom__view_dense_strides(t, in_place.strides);
  size_t n = (size_t)LOOM_MAX(body->n_values, 1);
  loom__layout *dense = loom__malloc(n * sizeof *dense), *strided = loom__malloc(n * sizeof *strided);
  bool copied = true; /* without the layouts, the dearer guess */
  if (dense && strided && !loom__graph_layouts(body, dense) && !loom__graph_layouts(body, strided)) {
    memcpy(strided[id].strides, in_place.strides, sizeof in_place.strides);
    if (!loom__graph_layouts_given(body, strided)) {
      copied = false;
      for (int32_t v = 0; v < body->n_values && !copied; v++) copied = dense[v].owns != strided[v].owns;
      for (int32_t o = 0; o < body->n_ops && !copied; o++)
        for (int32_t i = 0; body->ops[o].loop && i < body->ops[o].n_inputs; i++)
          copied |= strided[body->ops[o].inputs[i]].base == id;
      if (!copied) in_place_readers(body, id, strided, readers);
    }
  }
  loom__free(dense);
  loom__free(strided);
  return copied;
}

/* The calibrated row gathered (calibrate's f32[2048,2048], 16 MiB) stays in the last-level
 * cache here. The rows of an operand of more than ROW_CACHED_BYTES come from memory, each on a
 * page of its own where the prefetcher starts afresh: their lines cost ROW_MEMORY_PASSES more
 * reads each at the rate from beyond the cache. Columns of gemver's f32[4096,4096] (64 MiB) in
 * pieces of 23 to 482 read in place (a mul and a sum, one thread) took 34, 20, 31, 110 and
 * 255 ns a row more than rows of as many bytes (priced with the row and its lines: 50, 56, 91,
 * 147, 250); priced at the calibrated row alone, gemver at 1/8 came out 0.37-0.55 of its
 * measured time. A product read
 * in place does not pay it (OpenBLAS's gemv prefetches the rows: bicg's column blocks of A at
 * 1/8 ran faster than whole). */
#define ROW_CACHED_BYTES (32.0 * 1024 * 1024)
#define ROW_MEMORY_PASSES 2.0

/* The seconds the `lines` whole cache lines of a row of operand type t cost beyond their
 * bytes' reads where they come from memory (ROW_CACHED_BYTES), 0 where they stay cached. */
static double row_from_memory(const pricer *p, const loom_type *t, double lines) {
  int64_t n = 0;
  double bytes = loom_type_elements(t, &n) ? 0 : (double)n * (double)loom_dtype_size(t->dtype);
  return bytes > ROW_CACHED_BYTES ? ROW_MEMORY_PASSES * lines * 64 * p->read : 0;
}

/* The seconds a piece spends on operand k of loop `index` where its slice is not dense (the
 * axis is not the outermost of more than one element; a window is read in place). Copied
 * (slice_copied), each row a run of contiguous bytes at the model's cost of a row gathered (a
 * cache and TLB miss: the rows lie a row of the operand apart) plus the whole cache lines of 64
 * bytes around it read and its bytes written. Read in place, each kernel that reads it pays
 * that row's miss and the lines around the row beyond its bytes (memory_seconds prices the
 * bytes), and nothing is written: bicg's blocks of A's columns at 1/8, priced as copies, came
 * out 1.7-2.8x their measured time. */
static double gather_seconds(const pricer *p, const loom_graph *g, int32_t index, int32_t k,
                             const loom_graph *body) {
  loom_loop_input rule;
  const loom_type *t = loom_value_type(g, loom_graph_op_input(g, index, k));
  const loom_type *piece = loom_value_type(body, loom_graph_param_at(body, k));
  if (!t || !piece || loom_graph_loop_input_rule(g, index, k, &rule) || rule.axis <= 0 ||
      rule.axis >= t->rank || loom__loop_windowed(&rule))
    return 0;
  double outer = 1, run = (double)loom_dtype_size(t->dtype);
  for (int32_t d = 0; d < rule.axis; d++) outer *= (double)t->dims[d];
  for (int32_t d = rule.axis; d < piece->rank; d++) run *= (double)piece->dims[d];
  if (outer <= 1) return 0;
  double lines = ceil(run / 64) + 1;
  int32_t readers[2] = {0, 0};
  double row = p->m->gather_row_seconds, memory = row_from_memory(p, t, lines);
  if (!slice_copied(body, k, t, readers))
    return outer * (readers[0] * (row + (lines * 64 - run) * p->read) + readers[1] * memory);
  return outer * (row + memory + lines * 64 * p->read + run * p->write);
}

/* The seconds of one piece of loop `index` at `scale` of a full piece: its body's ops, its
 * gathers and the runtime's cost of a piece. */
static loom_status piece_seconds(const pricer *p, const loom_graph *g, int32_t index, const loom_graph *body,
                                 double scale, double *t) {
  double work = p->m->piece_seconds;
  loom_status s = body_seconds(p, body, scale, &work);
  for (int32_t k = 0; !s && k < loom_graph_param_count(body); k++)
    work += scale * gather_seconds(p, g, index, k, body);
  if (!s) *t += work;
  return s;
}

/* The seconds of loop op `index` of g at `scale` (inside a shorter piece of a loop around it):
 * its full pieces alike, then its last, priced once each (a loop of millions of pieces would
 * take seconds and gigabytes as tasks). */
static loom_status loop_seconds(const pricer *p, const loom_graph *g, int32_t index, double scale,
                                double *t) {
  const loom_graph *body = NULL;
  int64_t n = 0, piece = 1;
  loom_status s = loom_graph_loop_get(g, index, &body, &n, &piece);
  if (s) return s;
  int64_t pieces = (n + piece - 1) / piece, last = n - (pieces - 1) * piece;
  double full = 0, part = 0;
  if (pieces > 1) s = piece_seconds(p, g, index, body, scale, &full);
  if (!s) s = piece_seconds(p, g, index, body, scale * (double)last / (double)piece, &part);
  if (!s) *t += (double)(pieces - 1) * full + part;
  return s;
}

/* The bytes of op `index`'s operands and results. */
static double op_bytes(const loom_graph *g, int32_t index) {
  double b = 0;
  for (int32_t k = 0;; k++) {
    loom_value v = loom_graph_op_output(g, index, k);
    if (v.id < 0) break;
    b += bytes_of(g, v);
  }
  for (int32_t k = 0;; k++) {
    loom_value v = loom_graph_op_input(g, index, k);
    if (v.id < 0) return b;
    b += bytes_of(g, v);
  }
}

/* The seconds of a product of `flops` over operands and result of `bytes`: at the rate the
 * model's table gives the square f32 GEMM of as many bytes (n = sqrt(bytes / 12)), plus the
 * call. A GEMM's rate follows the bytes it works through more than its flops: a piece
 * [1024,2048] x [2048,205] of a limited gemm ran at the rate of a 1024^3 GEMM, not at that of
 * the 512^3 GEMM of as many flops, whose operands stay in the cache that other processes
 * share (priced by flops, the products at 1/8 came out 0.2-0.7 of their measured times). */
static double square_seconds(const pricer *p, double flops, double bytes) {
  double n = sqrt(bytes / 12), square = 2 * n * n * n;
  double whole = loom_sched_model_time(p->m, LOOM_OP_CLASS_GEMM, square > flops ? square : flops);
  const loom_sched_class_model *c = &p->m->cls[LOOM_OP_CLASS_GEMM];
  double call = c->n_points && c->latency > c->point_seconds[0] ? c->point_seconds[0] : c->latency;
  if (!(square > flops) || !(whole > call)) return loom_sched_model_time(p->m, LOOM_OP_CLASS_GEMM, flops);
  return call + (whole - call) * flops / square;
}

/* The seconds of a thin product (m x n of its result at most the model's thinnest table's
 * largest t x t, its inner side k at least twice sqrt(m n)) by the model's `thin_gemm` table,
 * measured at k = 2048: the product of as large a result at k = 2048, its time beyond the
 * call scaled by k / 2048. 0 where the product is not thin or the model has no such table. */
static double thin_seconds(const pricer *p, double flops, double k) {
  const loom_sched_class_model *t = &p->m->thin_gemm;
  if (!t->known || !t->n_points || !(k > 0)) return 0;
  double area = flops / (2 * k), largest = t->point_size[t->n_points - 1] / (2 * 2048);
  if (area > largest || k < 2 * sqrt(area)) return 0;
  double at = loom__sched_class_time(t, 2 * area * 2048);
  double call = t->latency < t->point_seconds[0] ? t->latency : t->point_seconds[0];
  return at > call ? call + (at - call) * k / 2048 : at;
}

/* The seconds of dot `index` of `flops` (at `scale`): the slower of the square GEMM of as many
 * bytes and, for a thin product, the model's thin products (a thin piece does not split over
 * the threads as a square does). */
static double gemm_seconds(const pricer *p, const loom_graph *g, int32_t index, double flops, double scale) {
  double t = square_seconds(p, flops, scale * op_bytes(g, index));
  const loom_type *a = loom_value_type(g, loom_graph_op_input(g, index, 0)),
                  *b = loom_value_type(g, loom_graph_op_input(g, index, 1));
  /* a matrix-vector product is no GEMM: its matrix's bytes price it (memory_seconds) */
  double thin =
      a && b && a->rank >= 2 && b->rank >= 2 ? thin_seconds(p, flops, (double)a->dims[a->rank - 1]) : 0;
  return thin > t ? thin : t;
}

/* The value a chain of slices of v reads from (v itself where no slice makes it). */
static int32_t slice_root(const loom_graph *g, int32_t v) {
  for (int32_t op; (op = g->values[v].op) >= 0 && g->ops[op].kind == LOOM_OP_SLICE;) v = g->ops[op].inputs[0];
  return v;
}

/* The bytes op `index` reads from memory: its operands', but slices of one value (a stencil's
 * shifted views of its grid) at most that value's bytes, as they read the same cache lines:
 * jacobi-1d's whole run, three slices of its grid a step, was priced at twice its time. */
static double read_bytes(const loom_graph *g, int32_t index) {
  const loom__op *op = &g->ops[index];
  double read = 0;
  for (int32_t i = 0; i < op->n_inputs; i++) {
    int32_t root = slice_root(g, op->inputs[i]);
    bool seen = false;
    for (int32_t j = 0; j < i && !seen; j++) seen = slice_root(g, op->inputs[j]) == root;
    if (seen) continue;
    double sum = 0, whole = bytes_of(g, (loom_value){.id = root});
    for (int32_t j = i; j < op->n_inputs; j++)
      if (slice_root(g, op->inputs[j]) == root) sum += bytes_of(g, (loom_value){.id = op->inputs[j]});
    read += whole < sum ? whole : sum;
  }
  return read;
}

/* The CPU's fused evaluator runs each body op over blocks of up to FUSED_BLOCK elements along
 * the iteration space's last axis (cpu_fused_plan.h's FB), and a block of an op costs about
 * FUSED_BLOCK_ELEMENTS elements beyond its own (its leaves packed, the op dispatched, the
 * result stored): gemver's fused body (mul add mul add, with [n,1] and [1,m] operands) took
 * 72 ns a row more over f32[262144,11] than over f32[2816,1024] (one thread; the model's
 * element 0.17 ns: 4 ops x 100 elements, 69 ns), and gemver's 373 pieces of [4096,11] ran 2x
 * slower fused than unfused. */
enum { FUSED_BLOCK = 1024, FUSED_BLOCK_ELEMENTS = 100 };

/* The element-ops below which a fused body gains nothing from the threads: pieces of 8 adds
 * over f32[n,2400] took, an element-op on two threads, 0.22 ns at n = 3 (58,000 element-ops),
 * 0.26 at 10, 0.14 at 30 (576,000), 0.12 at 100 and 0.11 at 300, against 0.21, 0.19, 0.18,
 * 0.17 and 0.19 on one: priced as their first 300,000 at the one-thread rate, the rest at the
 * threads', they come out within 1.3x of each. */
#define FUSED_TEAM_ELEMENTS 300000.0

/* Whether the view l of type t reads its axes from `from` on as one run of elements (a
 * dims-1 axis aside): a slice of a grid's inner rows does not. */
static bool dense_from(const loom__layout *l, const loom_type *t, int32_t from) {
  int64_t expected = t->rank ? l->strides[t->rank - 1] : 0;
  for (int32_t d = t->rank - 1; d >= from && d >= 0; d--) {
    if (t->dims[d] > 1 && l->strides[d] != expected) return false;
    expected *= t->dims[d];
  }
  return true;
}

/* Whether every operand of fused op `index` (right-aligned against its iteration space s)
 * walks s's axes from `axis` on as one: its dims there all s's (dense across them, by its
 * layout in g where `layouts` is given) or all 1 (broadcast over them). */
static bool walk_as_one(const loom_graph *g, int32_t index, const loom_type *s, int32_t axis,
                        const loom__layout *layouts) {
  for (int32_t k = 0;; k++) {
    loom_value v = loom_graph_op_input(g, index, k);
    const loom_type *t = loom_value_type(g, v);
    if (!t) return true;
    bool all_same = true, all_one = true;
    for (int32_t d = axis; d < s->rank; d++) {
      int32_t at = d - (s->rank - t->rank);
      int64_t n = at >= 0 ? t->dims[at] : 1;
      all_same &= n == s->dims[d];
      all_one &= n == 1;
    }
    if (!all_same && !all_one) return false;
    if (all_same && layouts && !dense_from(&layouts[v.id], t, LOOM_MAX(0, axis - (s->rank - t->rank))))
      return false;
  }
}

/* The elements of a block row of fused op `index`: the last axis of its iteration space (its
 * largest operand or result, a reduction's input), and, for an elementwise body (`merge`), the
 * axes before it as long as every operand walks them as one (the CPU plan's merge_rows: a body
 * of operands alike runs in blocks of 1024 whatever its shape; one with a [n,1] column does
 * not, nor one reading a strided slice in place: heat-3d's step over seven shifted views of its
 * grid ran in rows of 198, 1.5x the time priced as blocks of 1024). */
/* g's layouts (loom__graph_layouts) from p's cache, or NULL where they cannot be had. */
static const loom__layout *layouts_of(const pricer *p, const loom_graph *g) {
  layout_cache *c = p->layouts;
  if (!c) return NULL;
  for (int32_t i = 0; i < 2; i++)
    if (c->g[i] == g) return c->l[i];
  int32_t i = c->next;
  c->next ^= 1;
  loom__free(c->l[i]);
  c->g[i] = NULL;
  c->l[i] = loom__malloc((size_t)LOOM_MAX(g->n_values, 1) * sizeof *c->l[i]);
  if (c->l[i] && loom__graph_layouts(g, c->l[i])) {
    loom__free(c->l[i]);
    c->l[i] = NULL;
  }
  if (c->l[i]) c->g[i] = g;
  return c->l[i];
}

/* Whether an operand of op `index` is a view of another value (a slice, a transpose, ...),
 * whose layout may not be dense; any other value owns a dense buffer. */
static bool reads_a_view(const loom_graph *g, int32_t index) {
  const loom__op *op = &g->ops[index];
  for (int32_t i = 0; i < op->n_inputs; i++) {
    int32_t producer = g->values[op->inputs[i]].op;
    if (producer >= 0 && loom__op_is_light(g->ops[producer].kind)) return true;
  }
  return false;
}

static double fused_row(const pricer *p, const loom_graph *g, int32_t index, bool merge) {
  const loom_type *s = NULL;
  double most = -1;
  for (int32_t k = -1;; k++) {
    loom_value v = k < 0 ? loom_graph_op_output(g, index, 0) : loom_graph_op_input(g, index, k);
    const loom_type *t = loom_value_type(g, v);
    int64_t n = 0;
    if (v.id < 0 || !t) break;
    if (t->rank > 0 && !loom_type_elements(t, &n) && (double)n > most) {
      most = (double)n;
      s = t;
    }
  }
  if (!s) return 0;
  int32_t axis = s->rank - 1;
  /* without the layouts (out of memory), by the types alone */
  const loom__layout *layouts = merge && axis > 0 && reads_a_view(g, index) ? layouts_of(p, g) : NULL;
  while (merge && axis > 0 && walk_as_one(g, index, s, axis - 1, layouts)) axis--;
  double m = 1;
  for (int32_t d = axis; d < s->rank; d++) m *= (double)s->dims[d];
  return m;
}

/* The element-ops fused op `index`'s blocks add to its `elements`, beyond those the model's
 * element holds (it was measured in blocks of FUSED_BLOCK): in rows of m elements (fused_row),
 * each element costs FUSED_BLOCK_ELEMENTS / m of an element more (a block of 1,024 none). */
static double fused_blocks(const pricer *p, const loom_graph *g, int32_t index, double elements, bool merge) {
  double m = fused_row(p, g, index, merge);
  if (!(m > 0)) return 0;
  double per = FUSED_BLOCK_ELEMENTS * (ceil(m / FUSED_BLOCK) / m - 1.0 / FUSED_BLOCK);
  return per > 0 ? elements * per : 0;
}

/* The seconds of fused op `index` (its body's work in *task, at `scale`): one pass over its
 * operands (read_bytes) and results at the memory rates, its elementwise ops at the model's
 * cost of an element in a fused body (the evaluator's, measured apart from the pass; on a CPU
 * with its blocks, fused_blocks), any other work (a product it ends, a reduction) by the class
 * tables. Priced as separate kernels, a chain of adds cost a pass each where it makes one. */
static double fused_seconds(const pricer *p, const loom_graph *g, int32_t index, loom_sched_task *task,
                            double scale) {
  double elements = task->size[LOOM_OP_CLASS_ELEMENTWISE];
  if (p->blocks) {
    bool merge = true; /* an elementwise body: no reduction, product or other class */
    for (int c = 0; c < LOOM_OP_CLASS_COUNT; c++)
      merge &= c == LOOM_OP_CLASS_ELEMENTWISE || !(task->size[c] > 0);
    elements += fused_blocks(p, g, index, elements, merge);
  }
  task->size[LOOM_OP_CLASS_ELEMENTWISE] = 0;
  double operands = 0;
  for (int32_t k = 0;; k++) {
    loom_value v = loom_graph_op_input(g, index, k);
    if (v.id < 0) break;
    operands += bytes_of(g, v);
  }
  double written = op_bytes(g, index) - operands, read = read_bytes(g, index);
  const loom_sched_class_model *e = &p->m->cls[LOOM_OP_CLASS_ELEMENTWISE];
  /* A small body runs at about one thread's rate (fused_small_element_seconds): its first
   * FUSED_TEAM_ELEMENTS element-ops at it, the rest at the threads' rate. */
  double element = p->m->fused_element_seconds, small = p->m->fused_small_element_seconds;
  double extra = small > element
                     ? (small - element) * (elements < FUSED_TEAM_ELEMENTS ? elements : FUSED_TEAM_ELEMENTS)
                     : 0;
  return (e->known ? e->latency : 0) + elements * element + extra +
         scale * (read * p->read + written * p->write) + loom__sched_task_time(task, p->m);
}

/* The seconds op `index` spends faulting in the pages of its results of 32 MiB or more: the C
 * library maps such a block afresh on every allocation (a result below it is reused from the
 * heap), and a page costs the model's fault (5 us on these virtual machines under load). */
static double fault_seconds(const pricer *p, const loom_graph *g, int32_t index) {
  double t = 0;
  for (int32_t k = 0; p->m->fault_page_seconds > 0; k++) {
    loom_value v = loom_graph_op_output(g, index, k);
    int64_t physical = 0;
    if (v.id < 0) break;
    /* the logical bytes first: the physical ones cost a pass over the graph's layouts */
    if (bytes_of(g, v) >= (double)((int64_t)32 << 20) && !loom_value_bytes(g, v, NULL, &physical) &&
        physical >= (int64_t)32 << 20)
      t += (double)physical / 4096 * p->m->fault_page_seconds;
  }
  return t;
}

/* Whether an operand of op `index` has fewer elements than its result (it broadcasts). The
 * tables measure adds of operands alike; a select with a broadcast operand (the halo cut's
 * row masks) costs the model's select_ratio of them an element, where one of operands alike
 * costs what an add does (300 selects of f32[420000] by a mask bool[420000] took the CPU time
 * of 300 adds, by a mask bool[420,1] over f32[420,1000] four times it). */
static bool broadcasts(const loom_graph *g, int32_t index) {
  int64_t out = 0, in = 0;
  const loom_type *r = loom_value_type(g, loom_graph_op_output(g, index, 0));
  if (!r || loom_type_elements(r, &out)) return false;
  for (int32_t k = 0;; k++) {
    const loom_type *t = loom_value_type(g, loom_graph_op_input(g, index, k));
    if (!t) return false;
    if (!loom_type_elements(t, &in) && in < out) return true;
  }
}

/* The runs of contiguous elements concat `index` writes: each operand fills one run of the
 * result per index of the axes before the concat's. The CPU copies run by run: heat-3d's
 * concat along its innermost axis (118,000 runs of at most 198 elements) took 2.7x the time of
 * the same bytes along its outermost (3 runs). */
static double concat_runs(const loom_graph *g, int32_t index) {
  const loom__op *op = &g->ops[index];
  const loom_type *o = &g->values[op->outputs[0]].type;
  int32_t axis;
  if (!loom__axis_normalize(op->attrs.axis, o->rank, &axis)) return 0;
  double outer = 1;
  for (int32_t d = 0; d < axis; d++) outer *= (double)o->dims[d];
  return outer * op->n_inputs;
}

/* The seconds of op `index` of g at `scale` of its size: its kernels by the model's class
 * tables (as the scheduler prices them, loom_sched_op_work; a product by gemm_seconds), or its
 * memory traffic where that takes longer. */
static loom_status op_seconds(const pricer *p, const loom_graph *g, int32_t index, double scale, double *t) {
  loom_op_info info;
  loom_status s = loom_graph_op_info_get(g, index, &info);
  if (s) return s;
  *t += fault_seconds(p, g, index);
  if (info.kind == LOOM_OP_LOOP) return loop_seconds(p, g, index, scale, t);
  loom_sched_task task;
  memset(&task, 0, sizeof task);
  if ((s = loom_sched_op_work(g, index, task.size, task.kernels))) return s;
  for (int c = 0; c < LOOM_OP_CLASS_COUNT; c++) task.size[c] *= scale;
  if (info.kind == LOOM_OP_SELECT && p->m->select_ratio > 0 && broadcasts(g, index))
    task.size[LOOM_OP_CLASS_ELEMENTWISE] *= p->m->select_ratio;
  double compute = 0;
  if (info.kind == LOOM_OP_DOT && task.size[LOOM_OP_CLASS_GEMM] > 0) {
    compute = gemm_seconds(p, g, index, task.size[LOOM_OP_CLASS_GEMM], scale);
    task.size[LOOM_OP_CLASS_GEMM] = 0;
  }
  if (info.kind == LOOM_OP_FUSED && p->m->fused_element_seconds > 0) {
    *t += fused_seconds(p, g, index, &task, scale);
    return LOOM_OK;
  }
  compute += loom__sched_task_time(&task, p->m);
  if (compute == 0) return LOOM_OK; /* a view or a constant: no kernel */
  if (info.kind == LOOM_OP_CONCAT && p->blocks)
    compute += scale * concat_runs(g, index) * p->m->gather_row_seconds;
  double memory = memory_seconds(p, g, index, info.kind, scale);
  *t += compute > memory ? compute : memory;
  return LOOM_OK;
}

/* Whether result j of loop op o is streamed out of its stage (the ops in_stage marks): the
 * executor copies each piece's result out of its block into the stage's output, where the
 * stage returns it (a graph output, or a later stage's input) and none of its own ops reads it
 * (loom__value_streamed_out, as the stage's graph sees it). */
static bool streamed_out(const loom_graph *g, const bool *in_stage, int32_t o, int32_t j) {
  const loom__op *op = &g->ops[o];
  int32_t v = op->outputs[j];
  if (op->loop->combines[j].combine != LOOM_COMBINE_CONCAT) return false;
  bool returned = false;
  for (int32_t k = 0; k < g->n_outputs; k++) returned |= g->outputs[k] == v;
  for (int32_t r = 0; r < g->n_ops; r++)
    for (int32_t k = 0; k < g->ops[r].n_inputs; k++)
      if (g->ops[r].inputs[k] == v) {
        if (in_stage[r]) return false;
        returned = true;
      }
  return returned;
}

/* The seconds loop op o spends streaming its results out of its stage (streamed_out): a
 * copy of each piece's result on one thread, its bytes read at a piece's rate (read_seconds:
 * one core's, for a small piece) and written. jacobi-2d's 100 stages of 800 pieces of 3 rows
 * each spent 11% of their run in these copies. */
static double streamed_out_seconds(const pricer *p, const loom_graph *g, const bool *in_stage, int32_t o) {
  const loom__op *op = &g->ops[o];
  const loom__loop *l = op->loop;
  double t = 0, pieces = (double)((l->n + l->piece - 1) / l->piece);
  for (int32_t j = 0; j < op->n_outputs; j++) {
    if (!streamed_out(g, in_stage, o, j)) continue;
    double whole = bytes_of(g, (loom_value){.id = op->outputs[j]});
    t += pieces * read_seconds(p, whole / pieces, 1) + whole * p->write;
  }
  return t;
}

/* The seconds of ops[0..n) of g on device d (its model), one after the other. */
static loom_status ops_seconds(const loom_graph *g, const int32_t *ops, int32_t n, const loom_sched_device *d,
                               double *t) {
  layout_cache layouts = {{NULL, NULL}, {NULL, NULL}, 0};
  pricer p = pricer_of(d);
  p.layouts = &layouts;
  bool *in_stage = loom__calloc((size_t)LOOM_MAX(g->n_ops, 1), sizeof *in_stage);
  loom_status s = in_stage ? LOOM_OK : loom__error(LOOM_ERR_OUT_OF_MEMORY, "prediction: out of memory");
  for (int32_t i = 0; !s && i < n; i++) in_stage[ops[i]] = true;
  for (int32_t i = 0; !s && i < n; i++) {
    s = op_seconds(&p, g, ops[i], 1, t);
    if (!s && g->ops[ops[i]].loop) *t += streamed_out_seconds(&p, g, in_stage, ops[i]);
  }
  loom__free(in_stage);
  loom__free(layouts.l[0]);
  loom__free(layouts.l[1]);
  return s;
}

/* Device `id` of the platform; NULL (and an error) when it has none. */
static const loom_sched_device *device_of(const loom_sched_platform *platform, const char *id) {
  int32_t d = id ? loom_sched_platform_find(platform, id) : -1;
  if (d < 0) {
    loom__error(LOOM_ERR_INVALID_ARGUMENT, "prediction: the platform has no device '%s'", id ? id : "(none)");
    return NULL;
  }
  return loom_sched_platform_device(platform, d);
}

/* A time the model cannot give (a class it does not know) is an error naming the device. */
static loom_status check_finite(double t, const char *id) {
  if (isfinite(t)) return LOOM_OK;
  return loom__error(LOOM_ERR_INVALID_ARGUMENT,
                     "prediction: the model of %s cannot price every op of the plan (a class it has not "
                     "measured: run `loom-bench calibrate`)",
                     id);
}

loom_status loom_plan_predict(const loom_sched_platform *platform, const loom_plan *plan,
                              double *out_seconds) {
  if (out_seconds) *out_seconds = 0;
  if (!platform || !plan || !out_seconds)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "prediction: NULL argument");
  double t = 0;
  loom_status s = LOOM_OK;
  for (int32_t i = 0; !s && i < loom_plan_stage_count(plan); i++) {
    loom_stage_info st;
    const loom_sched_device *m = NULL;
    s = loom_plan_stage(plan, i, &st);
    if (!s && !(m = device_of(platform, st.device))) s = LOOM_ERR_INVALID_ARGUMENT;
    if (!s) s = ops_seconds(loom_plan_graph(plan), st.ops, st.n_ops, m, &t);
    if (!s) s = check_finite(t, st.device);
  }
  if (!s) *out_seconds = t;
  return s;
}

loom_status loom_graph_predict(const loom_sched_platform *platform, const char *device,
                               const loom_graph *graph, double *out_seconds) {
  if (out_seconds) *out_seconds = 0;
  if (!platform || !device || !graph || !out_seconds)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "prediction: NULL argument");
  const loom_sched_device *m = device_of(platform, device);
  if (!m) return LOOM_ERR_INVALID_ARGUMENT;
  int32_t n = loom_graph_op_count(graph);
  int32_t *ops = loom__malloc(sizeof *ops * (size_t)(n > 0 ? n : 1));
  if (!ops) return loom__oom("prediction");
  for (int32_t i = 0; i < n; i++) ops[i] = i;
  double t = 0;
  loom_status s = ops_seconds(graph, ops, n, m, &t);
  loom__free(ops);
  if (!s) s = check_finite(t, device);
  if (!s) *out_seconds = t;
  return s;
}

/* ---- the smallest limit within a factor ------------------------------------------------ */

/* The caller's options with "chunk" disabled too (the whole graph, as run without a limit);
 * names is the caller's array of n + 1. */
static loom_optimize_options whole_options(const loom_optimize_options *opts, const char **names) {
  loom_optimize_options o;
  if (opts)
    o = *opts;
  else
    loom_optimize_options_init(&o);
  for (int32_t i = 0; i < o.n_disabled; i++) names[i] = o.disabled[i];
  names[o.n_disabled] = "chunk";
  o.disabled = names;
  o.n_disabled++;
  o.limit = 0;
  return o;
}

loom_status loom_graph_predict_whole(const loom_sched_platform *platform, const char *device,
                                     const loom_graph *graph, const loom_optimize_options *opts,
                                     int64_t *out_need, double *out_seconds) {
  if (out_need) *out_need = 0;
  if (out_seconds) *out_seconds = 0;
  if (!platform || !device || !graph || !out_need || !out_seconds)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "prediction: NULL argument");
  int32_t n = opts ? opts->n_disabled : 0;
  const char **names = loom__calloc((size_t)n + 1, sizeof *names);
  if (!names) return loom__oom("prediction");
  loom_optimize_options o = whole_options(opts, names);
  loom_graph *whole = NULL;
  loom_estimate e;
  memset(&e, 0, sizeof e);
  loom_status s = loom_graph_optimize(graph, &o, &whole, NULL);
  if (!s) s = loom_graph_estimate(whole, NULL, &e);
  if (!s) *out_need = e.peak_bytes;
  if (!s) s = loom_graph_predict(platform, device, whole, out_seconds);
  loom_estimate_deinit(&e);
  loom_graph_destroy(whole);
  loom__free(names);
  return s;
}

loom_status loom_graph_predict_at(const loom_sched_platform *platform, const char *device,
                                  const loom_graph *graph, int64_t limit, const loom_optimize_options *opts,
                                  double *out_seconds) {
  if (out_seconds) *out_seconds = 0;
  if (!platform || !device || !graph || !out_seconds || limit <= 0)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "prediction: NULL argument or a limit <= 0");
  loom_runner r;
  memset(&r, 0, sizeof r);
  snprintf(r.device, sizeof r.device, "%s", device);
  r.limit = limit;
  loom_graph *g = NULL;
  loom_plan *plan = NULL;
  loom_status s = loom_graph_optimize_for_runners(graph, &r, 1, opts, &g, NULL, NULL, 0);
  if (!s) s = loom_plan_split_by_memory(g, &r, 1, &plan);
  if (!s) s = loom_plan_predict(platform, plan, out_seconds);
  loom_plan_destroy(plan);
  loom_graph_destroy(g);
  return s;
}

/* The predicted seconds at `limit`, INFINITY where the graph cannot be planned under it. */
static double seconds_at(const loom_sched_platform *platform, const char *device, const loom_graph *graph,
                         int64_t limit, const loom_optimize_options *opts, int32_t *steps) {
  double t = 0;
  (*steps)++;
  return loom_graph_predict_at(platform, device, graph, limit, opts, &t) ? INFINITY : t;
}

/* Bisection on the logarithm of the limit between lo (too slow or refused) and hi (within the
 * factor), down to 1%: the predicted time grows as the limit shrinks (pieces get smaller and
 * more), so the first limit within the factor from below is where the two meet. */
static void bisect(const loom_sched_platform *platform, const char *device, const loom_graph *graph,
                   const loom_optimize_options *opts, double budget, int64_t lo, loom_limit_search *out) {
  while ((double)out->limit > 1.01 * (double)lo && out->limit - lo > 4096) {
    int64_t mid = (int64_t)sqrt((double)lo * (double)out->limit);
    double t = seconds_at(platform, device, graph, mid, opts, &out->steps);
    if (t <= budget) {
      out->limit = mid;
      out->seconds = t;
    } else {
      lo = mid;
    }
  }
}

/* The predicted time is not strictly monotonic in the limit (the chunk rewrite's pieces change
 * shape with it), so a limit below the bisection's crossing may be within the factor again:
 * four more at 90% to 60% of it, the smallest within the factor kept. */
static void probe_below(const loom_sched_platform *platform, const char *device, const loom_graph *graph,
                        const loom_optimize_options *opts, double budget, int64_t floor,
                        loom_limit_search *out) {
  int64_t found = out->limit;
  for (int32_t i = 1; i <= 4; i++) {
    int64_t limit = (int64_t)((double)found * (1.0 - 0.1 * i));
    if (limit < floor) break;
    double t = seconds_at(platform, device, graph, limit, opts, &out->steps);
    if (t <= budget) {
      out->limit = limit;
      out->seconds = t;
    }
  }
}

loom_status loom_graph_smallest_limit(const loom_sched_platform *platform, const char *device,
                                      const loom_graph *graph, double factor,
                                      const loom_optimize_options *opts, loom_limit_search *out) {
  if (out) memset(out, 0, sizeof *out);
  if (!platform || !device || !graph || !out || !(factor >= 1))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "prediction: NULL argument or a factor below 1");
  loom_status s =
      loom_graph_predict_whole(platform, device, graph, opts, &out->whole_bytes, &out->whole_seconds);
  if (s) return s;
  double target = factor / LOOM_LIMIT_SEARCH_MARGIN;
  double budget = (target > 1 ? target : 1) * out->whole_seconds;
  out->limit = out->whole_bytes > 0 ? out->whole_bytes : 1;
  out->seconds = seconds_at(platform, device, graph, out->limit, opts, &out->steps);
  if (!(out->seconds <= budget)) /* even the whole need is over: nothing smaller helps */
    return loom__error(LOOM_ERR_UNSUPPORTED,
                       "no limit keeps '%s' within %.3gx of its whole time (%.3gx with the search's margin; "
                       "at its whole need, %lld bytes, %.3g s predicted against %.3g s whole)",
                       loom_graph_name(graph), factor, budget / out->whole_seconds, (long long)out->limit,
                       out->seconds, out->whole_seconds);
  /* 1/4096 of the need, or 64 KiB: below it pieces are too small to be worth a prediction */
  int64_t lo = out->limit / 4096 > 65536 ? out->limit / 4096 : 65536;
  if (lo >= out->limit) return LOOM_OK;
  double t = seconds_at(platform, device, graph, lo, opts, &out->steps);
  if (t <= budget) {
    out->limit = lo;
    out->seconds = t;
    return LOOM_OK;
  }
  bisect(platform, device, graph, opts, budget, lo, out);
  probe_below(platform, device, graph, opts, budget, lo, out);
  return LOOM_OK;
}
