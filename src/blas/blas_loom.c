/* Level-3 calls through Loom: the settings, the process's context, the placement, and each call
 * built as a graph of dot, mul and add on the caller's memory.
 *
 * A call becomes R = alpha * sum_t op(X_t) op(Y_t) (+ beta * C), column-major. A column-major
 * matrix of r rows and leading dimension r is, read in C order, the dense tensor [cols, r] of
 * its transpose, so the graph computes R^T = sum_t op(Y_t)^T op(X_t)^T, where op(Y)^T is the
 * parameter itself for 'N' and its transpose (a view) for 'T': the caller's matrices are the
 * graph's inputs with no copy when their leading dimension is their row count. Other leading
 * dimensions, and the full matrix of symm's triangle and trmm's triangular factor, are packed
 * into dense host copies first (docs/blas.md). The result comes back as Loom's output tensor
 * and is copied into C (the triangle of syrk and syr2k only).
 *
 * Not through Loom (the host BLAS runs them, said in the verbose line's reason): trsm (the IR has
 * no triangular solve) and the conjugating forms (hemm, herk, her2k, complex 'C'), since the IR
 * has no conjugate.
 */
#include <complex.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loom/loom.h>
#include <loom/sched.h>

#include "blas/blas.h"
#include "blas/loom_blas.h"

#define MAX_DEVICES 16

/* ---- settings and the context ----------------------------------------------------------- */

static struct {
  bool verbose, force;
  double min_flops;
  char devices[256];
} settings;
static pthread_once_t settings_once = PTHREAD_ONCE_INIT;

static struct {
  loom_context *ctx;
  loom_sched_platform *platform; /* the devices' models; NULL when some device has none */
  int32_t n_devices;
  char ids[MAX_DEVICES][32];
} loom_state;
static pthread_once_t context_once = PTHREAD_ONCE_INIT;

static void settings_read(void) {
  const char *v = getenv("LOOM_BLAS_VERBOSE");
  settings.verbose = v && *v && strcmp(v, "0") != 0;
  v = getenv("LOOM_BLAS_FORCE");
  settings.force = v && *v && strcmp(v, "0") != 0;
  settings.min_flops = 1e9;
  v = getenv("LOOM_BLAS_MIN_FLOPS");
  if (v && *v) {
    char *end;
    double f = strtod(v, &end);
    if (*end || !(f >= 0))
      fprintf(stderr, "loom-blas: LOOM_BLAS_MIN_FLOPS=%s is not a number >= 0; the default 1e9 holds\n", v);
    else
      settings.min_flops = f;
  }
  v = getenv("LOOM_BLAS_DEVICES");
  snprintf(settings.devices, sizeof settings.devices, "%s", v && *v ? v : "all");
}

bool loom__blas_verbose(void) {
  pthread_once(&settings_once, settings_read);
  return settings.verbose;
}

static void context_make(void) {
  pthread_once(&settings_once, settings_read);
  loom_context_options opts;
  loom_context_options_init(&opts);
  opts.devices = settings.devices;
  if (loom_context_create(&opts, &loom_state.ctx) != LOOM_OK) {
    fprintf(stderr,
            "loom-blas: no Loom context for LOOM_BLAS_DEVICES=%s (%s): every call runs on the host BLAS\n",
            settings.devices, loom_last_error());
    loom_state.ctx = NULL;
    return;
  }
  int32_t n = loom_context_device_count(loom_state.ctx);
  for (int32_t i = 0; i < n && loom_state.n_devices < MAX_DEVICES; i++) {
    loom_device_info info;
    if (loom_context_device_info(loom_state.ctx, i, &info) == LOOM_OK)
      snprintf(loom_state.ids[loom_state.n_devices++], 32, "%s", info.id);
  }
  /* Without a model for every device (no `loom-bench calibrate` yet), the first device
   * listed takes every call. */
  if (loom_state.n_devices > 1 &&
      loom_sched_platform_from_context(loom_state.ctx, NULL, &loom_state.platform) != LOOM_OK) {
    if (settings.verbose)
      fprintf(stderr, "loom-blas: no cost models (%s): calls go to %s\n", loom_last_error(),
              loom_state.ids[0]);
    loom_state.platform = NULL;
  }
}

loom_context *loom_blas_context(void) {
  pthread_once(&context_once, context_make);
  return loom_state.ctx;
}

/* ---- which calls, where ---------------------------------------------------------------- */

static double l3_flops(const blas_l3 *c) {
  double m = c->m, n = c->n, k = c->k;
  switch (c->kind) {
    case BLAS_GEMM:
      return 2 * m * n * k;
    case BLAS_SYRK:
    case BLAS_HERK:
      return n * n * k;
    case BLAS_SYR2K:
    case BLAS_HER2K:
      return 2 * n * n * k;
    default: /* symm, hemm, trmm, trsm */
      return (c->side == 'L' ? m : n) * m * n * (c->kind == BLAS_SYMM || c->kind == BLAS_HEMM ? 2 : 1);
  }
}

bool loom__blas_l3_wanted(const blas_l3 *c) {
  pthread_once(&settings_once, settings_read);
  return settings.force || l3_flops(c) >= settings.min_flops;
}

/* The device the models expect to finish first (compute plus the operands' transfers), or
 * the first device when there are no models. */
static int32_t place(const blas_l3 *c, int64_t bytes) {
  if (!loom_state.platform) return 0;
  int32_t best = 0;
  double best_t = INFINITY;
  for (int32_t i = 0; i < loom_state.n_devices; i++) {
    int32_t d = loom_sched_platform_find(loom_state.platform, loom_state.ids[i]);
    if (d < 0) continue;
    const loom_sched_device *dev = loom_sched_platform_device(loom_state.platform, d);
    double t = loom_sched_model_time(&dev->model, LOOM_OP_CLASS_GEMM, l3_flops(c)) +
               2 * loom_sched_platform_transfer_time(loom_state.platform, 0, dev->node, bytes);
    if (t < best_t) best_t = t, best = i;
  }
  return best;
}

/* ---- the call as a product of dense operands -------------------------------------------- */

/* A column-major operand of `rows` x `cols`, used as op(X) ('N' or 'T'). */
typedef struct l3_operand {
  const void *data;
  int rows, cols, ld;
} l3_operand;

typedef struct l3_problem {
  int n_ops, n_terms;
  l3_operand ops[3];
  int x[2], y[2];      /* term t: op(ops[x[t]]) op(ops[y[t]]) */
  char opx[2], opy[2]; /* 'N' or 'T' */
  bool use_c;          /* beta is not zero: C is read */
  char tri;            /* 0: all of C written; 'U' / 'L': that triangle only (syrk, syr2k) */
  void *owned[3];      /* host copies made for the call (symm's and trmm's full A) */
  loom_dtype dtype;
  int64_t esize;
} l3_problem;

static int add_op(l3_problem *p, const void *data, int rows, int cols, int ld) {
  for (int i = 0; i < p->n_ops; i++)
    if (p->ops[i].data == data && p->ops[i].rows == rows && p->ops[i].cols == cols && p->ops[i].ld == ld)
      return i;
  p->ops[p->n_ops] = (l3_operand){data, rows, cols, ld};
  return p->n_ops++;
}

static void add_term(l3_problem *p, int x, char opx, int y, char opy) {
  p->x[p->n_terms] = x, p->opx[p->n_terms] = opx;
  p->y[p->n_terms] = y, p->opy[p->n_terms] = opy;
  p->n_terms++;
}

static bool scalar_is(const blas_l3 *c, const void *s, double v) {
  switch (c->prec) {
    case BLAS_S:
      return *(const float *)s == (float)v;
    case BLAS_D:
      return *(const double *)s == v;
    case BLAS_C:
      return ((const float *)s)[0] == (float)v && ((const float *)s)[1] == 0;
    default:
      return ((const double *)s)[0] == v && ((const double *)s)[1] == 0;
  }
}

/* The full ka x ka matrix of a triangle (symm: mirrored; trmm: zeros, and ones on a unit
 * diagonal), dense column-major: the IR has neither symmetric nor triangular operands. */
static void *full_from_triangle(const blas_l3 *c, int ka, bool symmetric) {
  int64_t es = c->prec == BLAS_S ? 4 : c->prec == BLAS_D || c->prec == BLAS_C ? 8 : 16;
  char *full = calloc((size_t)ka * (size_t)ka + 1, (size_t)es);
  if (!full) return NULL;
  const char *a = c->a;
  for (int j = 0; j < ka; j++)
    for (int i = 0; i < ka; i++) {
      bool stored = c->uplo == 'U' ? i <= j : i >= j;
      char *dst = full + ((int64_t)j * ka + i) * es;
      if (stored) memcpy(dst, a + ((int64_t)j * c->lda + i) * es, (size_t)es);
      if (symmetric && stored && i != j) memcpy(full + ((int64_t)i * ka + j) * es, dst, (size_t)es);
    }
  if (!symmetric && c->diag == 'U')
    for (int i = 0; i < ka; i++) {
      char *d = full + ((int64_t)i * ka + i) * es;
      memset(d, 0, (size_t)es);
      if (c->prec == BLAS_S || c->prec == BLAS_C)
        *(float *)d = 1.0f;
      else
        *(double *)d = 1.0;
    }
  return full;
}

/* The call as sum of products; NULL, or the reason it cannot go through Loom. */
static const char *describe(const blas_l3 *c, l3_problem *p) {
  bool cplx = c->prec == BLAS_C || c->prec == BLAS_Z;
  static const loom_dtype dtypes[] = {LOOM_F32, LOOM_F64, LOOM_C64, LOOM_C128};
  p->dtype = dtypes[c->prec];
  p->esize = loom_dtype_size(p->dtype);
  char ta = c->transa == 'C' && !cplx ? 'T' : c->transa, tb = c->transb == 'C' && !cplx ? 'T' : c->transb;
  int ka = c->side == 'L' ? c->m : c->n;
  p->use_c = c->beta && !scalar_is(c, c->beta, 0); /* trmm and trsm have no beta */
  switch (c->kind) {
    case BLAS_GEMM: {
      if (ta == 'C' || tb == 'C') return "conjugate transposes (the IR has no conjugate)";
      int a = add_op(p, c->a, ta == 'N' ? c->m : c->k, ta == 'N' ? c->k : c->m, c->lda);
      int b = add_op(p, c->b, tb == 'N' ? c->k : c->n, tb == 'N' ? c->n : c->k, c->ldb);
      add_term(p, a, ta, b, tb);
      return NULL;
    }
    case BLAS_SYRK:
    case BLAS_SYR2K: {
      bool n = ta == 'N';
      int a = add_op(p, c->a, n ? c->n : c->k, n ? c->k : c->n, c->lda);
      int b = c->kind == BLAS_SYR2K ? add_op(p, c->b, n ? c->n : c->k, n ? c->k : c->n, c->ldb) : a;
      add_term(p, a, n ? 'N' : 'T', b, n ? 'T' : 'N');
      if (c->kind == BLAS_SYR2K) add_term(p, b, n ? 'N' : 'T', a, n ? 'T' : 'N');
      p->tri = c->uplo;
      return NULL;
    }
    case BLAS_SYMM:
    case BLAS_TRMM: {
      if (c->kind == BLAS_TRMM && ta == 'C') return "conjugate transposes (the IR has no conjugate)";
      void *full = full_from_triangle(c, ka, c->kind == BLAS_SYMM);
      if (!full) return "no host memory for the full matrix of the triangle";
      p->owned[0] = full;
      char op = c->kind == BLAS_SYMM ? 'N' : ta;
      int a = add_op(p, full, ka, ka, ka > 0 ? ka : 1);
      const void *bdata = c->kind == BLAS_SYMM ? c->b : c->c;
      int b = add_op(p, bdata, c->m, c->n, c->kind == BLAS_SYMM ? c->ldb : c->ldc);
      if (c->side == 'L')
        add_term(p, a, op, b, 'N');
      else
        add_term(p, b, 'N', a, op);
      return NULL;
    }
    case BLAS_TRSM:
      return "trsm (the IR has no triangular solve)";
    default:
      return "a Hermitian form (the IR has no conjugate)";
  }
}

/* ---- the graph, its run, and C ---------------------------------------------------------- */

typedef struct l3_run {
  loom_graph *graph, *opt;
  loom_plan *plan;
  loom_tensor in[4], out;
  void *packed[4]; /* dense copies of operands whose leading dimension is not their rows */
  int n_in;
} l3_run;

/* The C-order tensor [cols, rows] of a column-major operand: its memory where it is dense, else
 * a packed copy. */
static bool operand_tensor(const l3_operand *o, int64_t es, loom_dtype dt, l3_run *r) {
  int64_t dims[2] = {o->cols, o->rows};
  loom_tensor *t = &r->in[r->n_in];
  if (loom_type_make(dt, 2, dims, &t->type) != LOOM_OK) return false;
  t->data = (void *)o->data;
  if (o->ld != o->rows && o->cols > 1) {
    char *d = malloc((size_t)(o->rows * (int64_t)o->cols * es) + 1);
    if (!d) return false;
    for (int j = 0; j < o->cols; j++)
      memcpy(d + (int64_t)j * o->rows * es, (const char *)o->data + (int64_t)j * o->ld * es,
             (size_t)(o->rows * es));
    r->packed[r->n_in] = t->data = d;
  }
  r->n_in++;
  return true;
}

static loom_value term_operand(loom_graph *g, loom_value v, char op) {
  static const int64_t perm[2] = {1, 0};
  return op == 'N' ? v : loom_transpose(g, v, 2, perm);
}

/* R^T = alpha * sum op(Y)^T op(X)^T (+ beta C^T), as a graph over r->in. */
static bool build_graph(const blas_l3 *c, const l3_problem *p, l3_run *r) {
  if (loom_graph_create("blas", &r->graph) != LOOM_OK) return false;
  loom_graph *g = r->graph;
  loom_value params[4];
  for (int i = 0; i < r->n_in; i++) {
    char name[16];
    snprintf(name, sizeof name, "x%d", i);
    params[i] = loom_graph_param(g, name, &r->in[i].type);
  }
  loom_value sum = {0};
  for (int t = 0; t < p->n_terms; t++) {
    loom_value d =
        loom_dot(g, term_operand(g, params[p->y[t]], p->opy[t]), term_operand(g, params[p->x[t]], p->opx[t]));
    sum = t == 0 ? d : loom_binary(g, LOOM_OP_ADD, sum, d);
  }
  loom_type scalar;
  loom_type_make(p->dtype, 0, NULL, &scalar);
  if (!scalar_is(c, c->alpha, 1)) sum = loom_binary(g, LOOM_OP_MUL, loom_constant(g, &scalar, c->alpha), sum);
  if (p->use_c) {
    loom_value cv = params[r->n_in - 1];
    if (!scalar_is(c, c->beta, 1)) cv = loom_binary(g, LOOM_OP_MUL, loom_constant(g, &scalar, c->beta), cv);
    sum = loom_binary(g, LOOM_OP_ADD, sum, cv);
  }
  loom_graph_return(g, &sum, 1);
  return loom_graph_verify(g) == LOOM_OK;
}

/* Plans the graph for the device under its memory node's limit and runs it (loom_run). */
static bool plan_and_run(const char *device, l3_run *r) {
  loom_mem_manager *m;
  int32_t node;
  loom_mem_node_info info;
  if (loom_context_memory(loom_state.ctx, &m) != LOOM_OK || loom_mem_node_find(m, device, &node) != LOOM_OK ||
      loom_mem_node_info_get(m, node, &info) != LOOM_OK)
    return false;
  loom_runner runner = {.limit = info.limit_bytes};
  snprintf(runner.device, sizeof runner.device, "%s", device);
  /* The fuse rewrite is left off: the cpu evaluator's fused dot with an f32 epilogue crashed
   * in the reference tests (cpu_fused.c dot3_epilogue, sblat3 under LOOM_BLAS_FORCE=1); a
   * BLAS call's graph gains nothing from it that the dot's own scaling would not give. */
  static const char *const no_fuse[] = {"fuse"};
  loom_optimize_options opts;
  loom_optimize_options_init(&opts);
  opts.disabled = no_fuse, opts.n_disabled = 1;
  char note[256];
  if (loom_graph_optimize_for_runners(r->graph, &runner, 1, &opts, &r->opt, NULL, note, sizeof note) !=
      LOOM_OK)
    return false;
  if (loom_plan_split_by_memory(r->opt, &runner, 1, &r->plan) != LOOM_OK) return false;
  loom_run_options run;
  loom_run_options_init(&run); /* stage after stage on the plan's runner */
  return loom_run(loom_state.ctx, r->plan, &run, r->in, r->n_in, &r->out, 1, NULL) == LOOM_OK;
}

/* Loom's [n, m] result into C (column-major, leading dimension ldc), a triangle or all. */
static void write_back(const blas_l3 *c, const l3_problem *p, const void *out) {
  int64_t es = p->esize;
  for (int j = 0; j < c->n; j++) {
    int i0 = p->tri == 'L' ? j : 0, i1 = p->tri == 'U' ? j + 1 : c->m;
    if (i1 > i0)
      memcpy((char *)c->c + ((int64_t)j * c->ldc + i0) * es,
             (const char *)out + ((int64_t)j * c->m + i0) * es, (size_t)((i1 - i0) * es));
  }
}

static void run_release(l3_run *r, l3_problem *p) {
  loom_tensor_deinit(&r->out);
  loom_plan_destroy(r->plan);
  loom_graph_destroy(r->opt);
  loom_graph_destroy(r->graph);
  for (int i = 0; i < 4; i++) free(r->packed[i]);
  for (int i = 0; i < 3; i++) free(p->owned[i]);
}

bool loom__blas_l3_loom(const blas_l3 *call, char *device, int device_size) {
  blas_l3 c = *call;
  if (c.kind == BLAS_SYRK || c.kind == BLAS_SYR2K) c.m = c.n; /* C is n x n */
  /* Nothing to multiply: the host's quick return (C scaled by beta at most). */
  bool has_k = c.kind == BLAS_GEMM || c.kind == BLAS_SYRK || c.kind == BLAS_SYR2K;
  if (c.m == 0 || c.n == 0 || (has_k && c.k == 0)) return false;
  if (!loom_blas_context()) return false;
  l3_problem p = {0};
  const char *why = describe(&c, &p);
  if (why) {
    /* Said once per routine kind, not per call: the per-call line stays `-> host`. */
    static bool said[BLAS_TRSM + 1][4];
    if (settings.verbose && !said[c.kind][c.prec]) {
      said[c.kind][c.prec] = true;
      fprintf(stderr, "loom-blas: on the host BLAS: %s\n", why);
    }
    for (int i = 0; i < 3; i++) free(p.owned[i]);
    return false;
  }
  int64_t bytes = (int64_t)c.m * c.n * p.esize;
  for (int i = 0; i < p.n_ops; i++) bytes += (int64_t)p.ops[i].rows * p.ops[i].cols * p.esize;
  int32_t d = place(&c, bytes);
  /* The models' pick of cpu0 for a call nobody forced: OpenBLAS on the caller's thread is
   * what Loom would run there, without the graph. */
  if (!settings.force && strcmp(loom_state.ids[d], "cpu0") == 0) return false;
  l3_run r = {0};
  l3_operand cop = {c.c, c.m, c.n, c.ldc};
  bool ok = true;
  for (int i = 0; i < p.n_ops && ok; i++) ok = operand_tensor(&p.ops[i], p.esize, p.dtype, &r);
  if (ok && p.use_c) ok = operand_tensor(&cop, p.esize, p.dtype, &r);
  ok = ok && build_graph(&c, &p, &r) && plan_and_run(loom_state.ids[d], &r);
  if (ok) {
    write_back(&c, &p, r.out.data);
    snprintf(device, (size_t)device_size, "%s", loom_state.ids[d]);
  } else {
    fprintf(stderr, "loom-blas: Loom failed on %s (%s): this call runs on the host BLAS\n", loom_state.ids[d],
            loom_last_error());
  }
  run_release(&r, &p);
  return ok;
}
