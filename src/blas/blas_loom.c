/* Level-3 calls through Loom: the settings, the process's context, the placement, and each call
 * built as a graph of dot, mul and add on the caller's memory.
 *
 * A call becomes R = alpha * sum_t op(X_t) op(Y_t) (+ beta * C), column-major. A column-major
 * matrix of r rows and leading dimension r is, read in C order, the dense tensor [cols, r] of
 * its transpose, so the graph computes R^T = sum_t op(Y_t)^T op(X_t)^T, where op(Y)^T is the
 * parameter itself for 'N' and its transpose (a view) for 'T': the caller's matrices are the
 * graph's inputs with no copy when their leading dimension is their row count. Other leading
 * dimensions, and the full matrix of symm's and hemm's triangle and trmm's triangular factor,
 * are packed into dense host copies first (docs/blas.md). The IR has no conjugate: a conjugated
 * operand (a complex 'C' transpose, the A^H and B^H of herk and her2k) is a conjugated host
 * copy read transposed (blas_copy.c), O(n k) beside the O(n^2 k) product. The result comes back
 * as Loom's output tensor and is copied into C (the triangle of syrk, syr2k, herk and her2k
 * only, the last two with a real diagonal).
 *
 * Not through Loom (the host BLAS runs it, said in the verbose line's reason): trsm as one
 * graph (the IR has no triangular solve: a large one is run blocked, blas_trsm.c, its gemm
 * updates dispatched as gemm calls).
 *
 * A call may be split across several devices: C cut into one block per device (columns, in
 * proportion to the devices' rates), each block a call of its own planned whole for its device
 * and run at once beside the others (loom_run_submit), C written when all have finished.
 */
#include <complex.h>
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <loom/loom.h>
#include <loom/sched.h>
#include <loom/share.h>

#include "blas/blas.h"
#include "blas/loom_blas.h"

#define MAX_DEVICES 16

/* ---- settings and the context ----------------------------------------------------------- */

static struct {
  bool verbose, force;
  bool host_decides; /* cpu0 listed first and no model files: every call's pick is cpu0 */
  double min_flops;
  char devices[256];
} settings;
static pthread_once_t settings_once = PTHREAD_ONCE_INIT;

static struct {
  loom_context *ctx;
  loom_sched_platform *platform; /* the devices' models; NULL when some device has none */
  int32_t n_devices;
  char ids[MAX_DEVICES][32];
  /* The devices a call may be split across (a block of C each): those of the allowed ones
   * the shared runner would give work (loom_share_plan_runners: beside cpu0, an
   * OpenCL CPU device would only take its cores), at their memory nodes' limits. Sharing is
   * considered where there are two or more. */
  char share_list[256];
  loom_runner *share_runners;
  int32_t n_share;
} loom_state;
static pthread_once_t context_once = PTHREAD_ONCE_INIT;

/* Whether the cache folder holds any device model (`loom-bench calibrate`'s files; the stage
 * histories beside them are not models). Without one no platform can be made, so the first
 * device listed takes every call: where that is cpu0, the host BLAS, known without a context.
 * The context's discovery loads every OpenCL driver (PoCL's LLVM: 40 ms on a quiet machine,
 * 0.4 s under load), which would land in the first large call of a program such as hpcc. */
static bool model_files_exist(void) {
  char path[4096];
  if (loom_sched_model_path("x", "", path, sizeof path) != LOOM_OK) return true;
  char *slash = strrchr(path, '/');
  if (!slash) return true;
  *slash = 0;
  DIR *d = opendir(path);
  if (!d) return false;
  bool found = false;
  for (struct dirent *e; !found && (e = readdir(d));) {
    size_t n = strlen(e->d_name);
    found = n > 5 && strcmp(e->d_name + n - 5, ".json") == 0 &&
            !(n > 12 && strcmp(e->d_name + n - 12, ".stages.json") == 0);
  }
  closedir(d);
  return found;
}

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
  const char *d = settings.devices;
  bool cpu0_first =
      strcasecmp(d, "all") == 0 || (strncasecmp(d, "cpu0", 4) == 0 && (d[4] == 0 || d[4] == ','));
  settings.host_decides = cpu0_first && !model_files_exist();
}

bool loom__blas_verbose(void) {
  pthread_once(&settings_once, settings_read);
  return settings.verbose;
}

/* The runner of `device` at its memory node's limit (LOOM_MEM_LIMIT's, else its size). */
static bool device_runner(const char *device, loom_runner *out) {
  loom_mem_manager *m;
  int32_t node;
  loom_mem_node_info info;
  if (loom_context_memory(loom_state.ctx, &m) != LOOM_OK || loom_mem_node_find(m, device, &node) != LOOM_OK ||
      loom_mem_node_info_get(m, node, &info) != LOOM_OK)
    return false;
  *out = (loom_runner){.limit = info.limit_bytes};
  snprintf(out->device, sizeof out->device, "%s", device);
  return true;
}

static void share_set_make(void) {
  if (loom_state.n_devices < 2) return;
  loom_runner *r = calloc((size_t)loom_state.n_devices, sizeof *r);
  int32_t n = 0;
  for (int32_t i = 0; r && i < loom_state.n_devices; i++)
    if (!device_runner(loom_state.ids[i], &r[i])) n = -1;
  if (r && n == 0 &&
      loom_share_plan_runners(loom_state.ctx, r, loom_state.n_devices, LOOM_SCHED_DMDA, r, &n, NULL, 0) ==
          LOOM_OK &&
      n > 1) {
    size_t used = 0;
    for (int32_t i = 0; i < n && used < sizeof loom_state.share_list; i++)
      used += (size_t)snprintf(loom_state.share_list + used, sizeof loom_state.share_list - used, "%s%s",
                               i ? "," : "", r[i].device);
    loom_state.share_runners = r, loom_state.n_share = n;
    return;
  }
  free(r);
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
  share_set_make();
  /* Without a model for every device (no `loom-bench calibrate` yet), the first device
   * listed takes every call, or the shared set where there is one. */
  if (loom_state.n_devices > 1 &&
      loom_sched_platform_from_context(loom_state.ctx, NULL, &loom_state.platform) != LOOM_OK) {
    if (settings.verbose)
      fprintf(stderr, "loom-blas: no cost models (%s): calls go to %s\n", loom_last_error(),
              loom_state.n_share > 1 && strcmp(loom_state.share_runners[0].device, "cpu0") != 0
                  ? loom_state.share_list
                  : loom_state.ids[0]);
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

#define PLACE_SHARED (-1)

static bool in_share_set(const char *id) {
  for (int32_t i = 0; i < loom_state.n_share; i++)
    if (strcmp(loom_state.share_runners[i].device, id) == 0) return true;
  return false;
}

/* Each device of the shared set's part of a call of `flops` (weights summing to 1): in
 * proportion to the models' rates at that size where the set's devices have models, else
 * equal parts (PoCL's basic devices, the set a user gets by excluding cpu0, are alike). */
static void share_weights(double flops, double *w) {
  double sum = 0;
  for (int32_t i = 0; i < loom_state.n_share; i++) {
    w[i] = 1;
    if (loom_state.platform) {
      int32_t d = loom_sched_platform_find(loom_state.platform, loom_state.share_runners[i].device);
      double t = d < 0 ? INFINITY
                       : loom_sched_model_time(&loom_sched_platform_device(loom_state.platform, d)->model,
                                               LOOM_OP_CLASS_GEMM, flops);
      w[i] = t > 0 && isfinite(t) ? 1 / t : 0;
    }
    sum += w[i];
  }
  for (int32_t i = 0; i < loom_state.n_share; i++) w[i] = sum > 0 ? w[i] / sum : 1.0 / loom_state.n_share;
}

/* A shared call must be predicted this much sooner than the best single device: the models'
 * error and the second run's start would otherwise make calls near the break-even point slower
 * than one device (the issue allows 3%). */
#define SHARE_MARGIN 0.85

/* The models' time for the call split across the shared set (split_blocks): the slowest
 * device's part, each moving at most all the operands there and back. */
static double shared_time(double flops, int64_t bytes) {
  double w[MAX_DEVICES], worst = 0;
  share_weights(flops, w);
  for (int32_t i = 0; i < loom_state.n_share; i++) {
    int32_t d = loom_sched_platform_find(loom_state.platform, loom_state.share_runners[i].device);
    if (d < 0) return INFINITY;
    const loom_sched_device *dev = loom_sched_platform_device(loom_state.platform, d);
    double t = loom_sched_model_time(&dev->model, LOOM_OP_CLASS_GEMM, flops * w[i]) +
               2 * loom_sched_platform_transfer_time(loom_state.platform, 0, dev->node, bytes);
    worst = t > worst ? t : worst;
  }
  return worst;
}

/* The device the models expect to finish first (compute plus the operands' transfers), or
 * PLACE_SHARED where the call split across the shared set, a block of C per device, would
 * finish sooner still by SHARE_MARGIN. Without models: the shared set where there is one,
 * else the first device. */
static int32_t place(const blas_l3 *c, int64_t bytes) {
  /* Without models, sharing a call with cpu0 is left alone (its speed against the others is
   * unknown); a set without cpu0 (the host excluded) shares. */
  if (!loom_state.platform) return loom_state.n_share > 1 && !in_share_set("cpu0") ? PLACE_SHARED : 0;
  double flops = l3_flops(c), best_t = INFINITY;
  int32_t best = 0;
  bool cpu0_allowed = false;
  for (int32_t i = 0; i < loom_state.n_devices; i++) cpu0_allowed |= strcmp(loom_state.ids[i], "cpu0") == 0;
  for (int32_t i = 0; i < loom_state.n_devices; i++) {
    int32_t d = loom_sched_platform_find(loom_state.platform, loom_state.ids[i]);
    if (d < 0) continue;
    const loom_sched_device *dev = loom_sched_platform_device(loom_state.platform, d);
    /* A device on the host's cores (PoCL's) never takes a call from cpu0, as dmda's rule has
     * it (src/sched/policy.c): it computes on cpu0's cores with a slower library, and a model
     * fitted on a loaded machine (cpu0's quick calibration: 1.1 GFLOP/s) can misprice it. */
    if (cpu0_allowed && dev->host_cores) continue;
    double compute = loom_sched_model_time(&dev->model, LOOM_OP_CLASS_GEMM, flops);
    double move = 2 * loom_sched_platform_transfer_time(loom_state.platform, 0, dev->node, bytes);
    if (compute + move < best_t) best_t = compute + move, best = i;
  }
  if (loom_state.n_share > 1 && shared_time(flops, bytes) < SHARE_MARGIN * best_t) return PLACE_SHARED;
  return best;
}

bool loom__blas_trsm_offloads(const blas_l3 *t) {
  pthread_once(&settings_once, settings_read);
  if (settings.force) return true;
  if (settings.host_decides || !loom_blas_context()) return false;
  int ka = t->side == 'L' ? t->m : t->n;
  blas_l3 g = {.kind = BLAS_GEMM, .prec = t->prec, .m = t->m, .n = t->n, .k = ka / 2};
  int64_t es = t->prec == BLAS_S ? 4 : t->prec == BLAS_Z ? 16 : 8;
  int64_t bytes = ((int64_t)t->m * t->n * 2 + (int64_t)ka * ka / 2) * es;
  int32_t d = place(&g, bytes);
  return d == PLACE_SHARED || strcmp(loom_state.ids[d], "cpu0") != 0;
}

/* ---- the call as a product of dense operands -------------------------------------------- */

/* A column-major operand of `rows` x `cols`, used as op(X) ('N' or 'T'). */
typedef struct l3_operand {
  const void *data;
  int rows, cols, ld;
} l3_operand;

typedef struct l3_problem {
  int n_ops, n_terms;
  l3_operand ops[4];
  int x[2], y[2];      /* term t: op(ops[x[t]]) op(ops[y[t]]) */
  char opx[2], opy[2]; /* 'N' or 'T' */
  bool use_c;          /* beta is not zero: C is read */
  char tri;            /* 0: all of C written; 'U' / 'L': that triangle only (syrk ... her2k) */
  bool herm;           /* herk, her2k: the diagonal's imaginary parts of C written as zero */
  const void *alpha;   /* the scalar of the sum of products (the call's alpha); NULL: 1 */
  void *owned[3];      /* host copies made for the call (full matrices, conjugated operands) */
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

/* Keeps a host copy made for the call (freed with the problem); false where there is none. */
static bool own(l3_problem *p, void *copy) {
  for (int i = 0; copy && i < 3; i++)
    if (!p->owned[i]) {
      p->owned[i] = copy;
      return true;
    }
  free(copy);
  return false;
}

/* The operand scale * conj(X) as a dense host copy: the IR has no conjugate. -1 when out of
 * host memory. */
static int add_conj_op(const blas_l3 *c, l3_problem *p, const void *x, int rows, int cols, int ld,
                       const double *scale) {
  void *copy = loom__blas_conj_copy(c, x, rows, cols, ld, scale);
  return own(p, copy) ? add_op(p, copy, rows, cols, rows > 0 ? rows : 1) : -1;
}

/* A scalar of the call as a (real, imaginary) pair; `real`: the parameter is real (herk's
 * alpha, the beta of herk and her2k). */
static void scalar_read(const blas_l3 *c, const void *s, bool real, double *v) {
  bool single = c->prec == BLAS_S || c->prec == BLAS_C, cplx = c->prec == BLAS_C || c->prec == BLAS_Z;
  v[0] = single ? ((const float *)s)[0] : ((const double *)s)[0];
  v[1] = real || !cplx ? 0 : single ? ((const float *)s)[1] : ((const double *)s)[1];
}

/* herk's and her2k's real beta as the complex scalar the graph multiplies by, held in buf. */
static const void *complex_from_real(const blas_l3 *c, const void *r, double *buf) {
  if (c->prec == BLAS_C) {
    float v[2] = {*(const float *)r, 0};
    memcpy(buf, v, sizeof v);
  } else {
    double v[2] = {*(const double *)r, 0};
    memcpy(buf, v, sizeof v);
  }
  return buf;
}

static const char *const no_host_memory = "no host memory for a copy of an operand";

/* herk: alpha op(A) op(A)^H; her2k: alpha op(A) op(B)^H + conj(alpha) op(B) op(A)^H ('N': op(X)
 * = X; 'C': op(X) = X^H). The conjugated factor of each term is a host copy with the term's
 * scalar folded in, as reference BLAS forms TEMP = ALPHA*CONJG(B(J,L)), so the graph is a sum
 * of plain products with no alpha (p->alpha NULL). */
static const char *describe_hermitian_rank(const blas_l3 *c, l3_problem *p) {
  bool n = c->transa == 'N', two = c->kind == BLAS_HER2K;
  int rows = n ? c->n : c->k, cols = n ? c->k : c->n;
  double alpha[2], alpha_conj[2];
  scalar_read(c, c->alpha, c->kind == BLAS_HERK, alpha);
  alpha_conj[0] = alpha[0], alpha_conj[1] = -alpha[1];
  const void *b = two ? c->b : c->a;
  int ldb = two ? c->ldb : c->lda;
  int ai = add_op(p, c->a, rows, cols, c->lda), bi = add_op(p, b, rows, cols, ldb);
  /* 'N': A (alpha conj B)^T [+ B (conj(alpha) conj A)^T]; 'C': (alpha conj A)^T B [+ (conj(alpha)
   * conj B)^T A]. */
  int first = add_conj_op(c, p, n ? b : c->a, rows, cols, n ? ldb : c->lda, alpha);
  int second = two ? add_conj_op(c, p, n ? c->a : b, rows, cols, n ? c->lda : ldb, alpha_conj) : 0;
  if (first < 0 || second < 0) return no_host_memory;
  if (n) {
    add_term(p, ai, 'N', first, 'T');
    if (two) add_term(p, bi, 'N', second, 'T');
  } else {
    add_term(p, first, 'T', bi, 'N');
    if (two) add_term(p, second, 'T', ai, 'N');
  }
  p->tri = c->uplo, p->herm = true, p->alpha = NULL;
  return NULL;
}

/* gemm: op(A) op(B), a 'C' operand as a conjugated host copy read transposed. */
static const char *describe_gemm(const blas_l3 *c, l3_problem *p, char ta, char tb) {
  int ar = ta == 'N' ? c->m : c->k, ac = ta == 'N' ? c->k : c->m;
  int br = tb == 'N' ? c->k : c->n, bc = tb == 'N' ? c->n : c->k;
  int a = ta == 'C' ? add_conj_op(c, p, c->a, ar, ac, c->lda, NULL) : add_op(p, c->a, ar, ac, c->lda);
  int b = tb == 'C' ? add_conj_op(c, p, c->b, br, bc, c->ldb, NULL) : add_op(p, c->b, br, bc, c->ldb);
  if (a < 0 || b < 0) return no_host_memory;
  add_term(p, a, ta == 'C' ? 'T' : ta, b, tb == 'C' ? 'T' : tb);
  return NULL;
}

/* symm, hemm and trmm: the full matrix of A's triangle (hemm's conjugated where mirrored; trmm
 * 'C''s conjugated, then read transposed) times B, on B's side. */
static const char *describe_full(const blas_l3 *c, l3_problem *p, char ta) {
  int ka = c->side == 'L' ? c->m : c->n;
  blas_full form = c->kind == BLAS_SYMM   ? BLAS_FULL_SYMMETRIC
                   : c->kind == BLAS_HEMM ? BLAS_FULL_HERMITIAN
                   : ta == 'C'            ? BLAS_FULL_TRIANGULAR_CONJ
                                          : BLAS_FULL_TRIANGULAR;
  void *full = loom__blas_full_matrix(c, ka, form);
  if (!own(p, full)) return "no host memory for the full matrix of the triangle";
  char op = c->kind != BLAS_TRMM ? 'N' : ta == 'C' ? 'T' : ta;
  int a = add_op(p, full, ka, ka, ka > 0 ? ka : 1);
  bool trmm = c->kind == BLAS_TRMM;
  int b = add_op(p, trmm ? c->c : c->b, c->m, c->n, trmm ? c->ldc : c->ldb);
  if (c->side == 'L')
    add_term(p, a, op, b, 'N');
  else
    add_term(p, b, 'N', a, op);
  return NULL;
}

/* The call as sum of products; NULL, or the reason it cannot go through Loom. */
static const char *describe(const blas_l3 *c, l3_problem *p) {
  bool cplx = c->prec == BLAS_C || c->prec == BLAS_Z;
  static const loom_dtype dtypes[] = {LOOM_F32, LOOM_F64, LOOM_C64, LOOM_C128};
  p->dtype = dtypes[c->prec];
  p->esize = loom_dtype_size(p->dtype);
  p->alpha = c->alpha;
  char ta = c->transa == 'C' && !cplx ? 'T' : c->transa, tb = c->transb == 'C' && !cplx ? 'T' : c->transb;
  p->use_c = c->beta && !scalar_is(c, c->beta, 0); /* trmm and trsm have no beta */
  switch (c->kind) {
    case BLAS_GEMM:
      return describe_gemm(c, p, ta, tb);
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
    case BLAS_HERK:
    case BLAS_HER2K:
      return describe_hermitian_rank(c, p);
    case BLAS_TRSM:
      return "trsm under two blocks, or with its updates placed on cpu0 (the IR has no triangular solve)";
    default: /* symm, hemm, trmm */
      return describe_full(c, p, ta);
  }
}

/* ---- a call split across devices: one block each ------------------------------------------ */

/* A block of the call: rows [i0, i1) and columns [j0, j1) of R, from the part [l0, l1) of the
 * inner dimension: {i0, i1, j0, j1, l0, l1}. */
enum { BI0, BI1, BJ0, BJ1, BL0, BL1, BLOCK_INTS };

/* The inner dimension of the call's terms (op(X)'s columns, alike in every term). */
static int problem_inner(const l3_problem *p) {
  const l3_operand *x = &p->ops[p->x[0]];
  return p->opx[0] == 'N' ? x->cols : x->rows;
}

/* The block's call: each use of an operand sliced for its term (op(X)'s rows and inner
 * columns, op(Y)'s inner rows and columns: a column slice of a stored matrix is dense in place,
 * a row slice is packed), and C's block, read by the part holding the inner dimension's start
 * only (beta C counted once). */
static void problem_block(const l3_problem *p, const blas_l3 *c, const int *blk, l3_problem *q,
                          l3_operand *cb) {
  *q = (l3_problem){.dtype = p->dtype,
                    .esize = p->esize,
                    .use_c = p->use_c && blk[BL0] == 0,
                    .tri = p->tri,
                    .herm = p->herm,
                    .alpha = p->alpha};
  int64_t es = p->esize;
  int rows = blk[BI1] - blk[BI0], cols = blk[BJ1] - blk[BJ0], inner = blk[BL1] - blk[BL0];
  for (int t = 0; t < p->n_terms; t++) {
    const l3_operand *x = &p->ops[p->x[t]], *y = &p->ops[p->y[t]];
    const char *xd = x->data, *yd = y->data;
    int xi = p->opx[t] == 'N'
                 ? add_op(q, xd + ((int64_t)blk[BL0] * x->ld + blk[BI0]) * es, rows, inner, x->ld)
                 : add_op(q, xd + ((int64_t)blk[BI0] * x->ld + blk[BL0]) * es, inner, rows, x->ld);
    int yi = p->opy[t] == 'N'
                 ? add_op(q, yd + ((int64_t)blk[BJ0] * y->ld + blk[BL0]) * es, inner, cols, y->ld)
                 : add_op(q, yd + ((int64_t)blk[BL0] * y->ld + blk[BJ0]) * es, cols, inner, y->ld);
    add_term(q, xi, p->opx[t], yi, p->opy[t]);
  }
  *cb = (l3_operand){(char *)c->c + ((int64_t)blk[BJ0] * c->ldc + blk[BI0]) * es, rows, cols, c->ldc};
}

/* Line j's share of the work: a triangle's column holds j + 1 ('U') or n - j ('L') rows. */
static double line_work(char tri, int j, int len) {
  return tri == 'U' ? j + 1.0 : tri == 'L' ? (double)(len - j) : 1.0;
}

/* Blocks of C whose every side is at least this keep the library's fast path though cut within
 * a block's scratch (PoCL's CLBlast at 4096^3: a column half in 8 indirect GEMMs of
 * 1024 x 2048 x 2048, 8.4 CPU s, against 18.0 for the whole and 18.8 for a half along k). */
#define BLOCK_MIN_SIDE 2048

/* Cuts the call among the shared set by the weights w. A product whose inner dimension is at
 * least C's smaller side, and whose blocks of C would be smaller than BLOCK_MIN_SIDE, is cut
 * along the inner dimension: each device computes all of C from its part of it, and the parts
 * are summed into C. Under a limit a library call's temporaries must fit its op's scratch, one
 * output's size: a block of C halves that room, and on PoCL CLBlast then cuts a half of 2048^3
 * into direct-kernel blocks, 2.5x slower per flop, where a half of the inner dimension keeps
 * the whole's room (1.15 CPU s against 2.05 for the whole).
 * Else C is cut into blocks of columns (of rows, where C is taller than wide), a triangle's
 * columns by their length in it, each block only the rows that reach into the triangle (its
 * inner cut would compute the full square on every device). blk[i]: BLOCK_INTS ints; a device
 * whose part rounds to nothing gets an empty block. */
static void split_blocks(const blas_l3 *c, const l3_problem *p, const double *w, int (*blk)[BLOCK_INTS]) {
  int inner = problem_inner(p);
  bool by_rows = !p->tri && c->m > c->n;
  int side = (by_rows ? c->m : c->n) / loom_state.n_share, other = by_rows ? c->n : c->m;
  side = side < other ? side : other;
  bool by_inner =
      !p->tri && inner >= (c->m < c->n ? c->m : c->n) && (side < inner ? side : inner) < BLOCK_MIN_SIDE;
  int len = by_inner ? inner : by_rows ? c->m : c->n, at = 0;
  char tri = by_inner ? 0 : p->tri;
  double total = 0, done = 0, target = 0;
  for (int j = 0; j < len; j++) total += line_work(tri, j, len);
  for (int32_t i = 0; i < loom_state.n_share; i++) {
    int start = at;
    target += w[i] * total;
    if (i == loom_state.n_share - 1) at = len;
    while (at < len && done + line_work(tri, at, len) / 2 < target) done += line_work(tri, at++, len);
    int *b = blk[i];
    b[BI0] = 0, b[BI1] = c->m, b[BJ0] = 0, b[BJ1] = c->n, b[BL0] = 0, b[BL1] = inner;
    if (by_inner)
      b[BL0] = start, b[BL1] = at;
    else if (by_rows)
      b[BI0] = start, b[BI1] = at;
    else
      b[BI0] = tri == 'L' ? start : 0, b[BI1] = tri == 'U' ? at : c->m, b[BJ0] = start, b[BJ1] = at;
  }
}

/* ---- the graph, its run, and C ---------------------------------------------------------- */

typedef struct l3_run {
  loom_graph *graph, *opt;
  loom_plan *plan;
  loom_tensor in[5], out;
  void *packed[5]; /* dense copies of operands whose leading dimension is not their rows */
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
  loom_value params[5];
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
  if (p->alpha && !scalar_is(c, p->alpha, 1))
    sum = loom_binary(g, LOOM_OP_MUL, loom_constant(g, &scalar, p->alpha), sum);
  if (p->use_c) {
    loom_value cv = params[r->n_in - 1];
    if (!scalar_is(c, c->beta, 1)) cv = loom_binary(g, LOOM_OP_MUL, loom_constant(g, &scalar, c->beta), cv);
    sum = loom_binary(g, LOOM_OP_ADD, sum, cv);
  }
  loom_graph_return(g, &sum, 1);
  return loom_graph_verify(g) == LOOM_OK;
}

/* The fuse rewrite is left off: a BLAS call's graph (products, their scalings and a sum) gains
 * nothing from it that the dot's own scaling would not give, and each call would pay for its
 * search. (It once also crashed sblat3 under LOOM_BLAS_FORCE=1: both dots of a syr2k's sum were
 * made the add's epilogue, fixed in cpu_fused_plan.c; with fuse on, xblat3s and xscblat3 pass.) */
static void optimize_options(loom_optimize_options *opts) {
  static const char *const no_fuse[] = {"fuse"};
  loom_optimize_options_init(opts);
  opts->disabled = no_fuse, opts->n_disabled = 1;
}

/* Plans the graph for the device under its memory node's limit (cut into stages, or its
 * operands streamed in pieces, where the call does not fit). */
static bool plan_for(const char *device, l3_run *r) {
  loom_runner runner;
  if (!device_runner(device, &runner)) return false;
  loom_optimize_options opts;
  optimize_options(&opts);
  char note[256];
  if (loom_graph_optimize_for_runners(r->graph, &runner, 1, &opts, &r->opt, NULL, note, sizeof note) !=
      LOOM_OK)
    return false;
  return loom_plan_split_by_memory(r->opt, &runner, 1, &r->plan) == LOOM_OK;
}

/* Loom's [cols, rows] result of block blk into C (column-major, leading dimension ldc): the
 * block's part of the triangle (syrk, syr2k, herk, her2k) or all of it; added to what C holds
 * where `add` (a later part of the inner dimension: real and imaginary parts alike). herk's and
 * her2k's diagonal is real, as reference BLAS writes it (beta C's imaginary parts there are
 * not read; the product's are rounding). */
static void write_back(const blas_l3 *c, const l3_problem *p, const int *blk, const void *out, bool add) {
  int64_t es = p->esize, rows = blk[BI1] - blk[BI0];
  bool single = c->prec == BLAS_S || c->prec == BLAS_C;
  for (int j = blk[BJ0]; j < blk[BJ1]; j++) {
    int i0 = p->tri == 'L' && j > blk[BI0] ? j : blk[BI0],
        i1 = p->tri == 'U' && j + 1 < blk[BI1] ? j + 1 : blk[BI1];
    if (i1 <= i0) continue;
    char *dst = (char *)c->c + ((int64_t)j * c->ldc + i0) * es;
    const char *src = (const char *)out + ((int64_t)(j - blk[BJ0]) * rows + (i0 - blk[BI0])) * es;
    int64_t len = (i1 - i0) * es;
    if (!add)
      memcpy(dst, src, (size_t)len);
    else if (single)
      for (int64_t e = 0; e < len / 4; e++) ((float *)dst)[e] += ((const float *)src)[e];
    else
      for (int64_t e = 0; e < len / 8; e++) ((double *)dst)[e] += ((const double *)src)[e];
    if (p->herm && j >= i0 && j < i1) {
      char *d = (char *)c->c + ((int64_t)j * c->ldc + j) * es;
      if (single)
        ((float *)d)[1] = 0;
      else
        ((double *)d)[1] = 0;
    }
  }
}

/* One device's block of a call: its graph, plan, run and result. */
typedef struct l3_part {
  const char *device;
  int blk[BLOCK_INTS];
  l3_problem q;
  l3_run r;
  loom_run_handle *handle;
  loom_run_stats stats;
} l3_part;

static bool part_prepare(const blas_l3 *c, const l3_problem *p, l3_part *x) {
  l3_operand cb;
  problem_block(p, c, x->blk, &x->q, &cb);
  bool ok = true;
  for (int i = 0; i < x->q.n_ops && ok; i++) ok = operand_tensor(&x->q.ops[i], p->esize, p->dtype, &x->r);
  if (ok && p->use_c) ok = operand_tensor(&cb, p->esize, p->dtype, &x->r);
  return ok && build_graph(c, &x->q, &x->r) && plan_for(x->device, &x->r);
}

/* Runs the parts: one on the caller's thread (loom_run); several at once, each submitted on its
 * own device (loom_run_submit) and all waited for, so that each device makes one whole call of
 * its kernel (on PoCL, one CLBlast gemm: tiles of C through the shared runner's loop made many
 * smaller ones, 2.1-2.4x slower per flop). The first failure's message is kept in `err`. */
static bool parts_run(l3_part *x, int n, char *err, size_t err_size) {
  if (n == 1)
    return loom_run(loom_state.ctx, x->r.plan, NULL, x->r.in, x->r.n_in, &x->r.out, 1, NULL) == LOOM_OK ||
           (snprintf(err, err_size, "%s", loom_last_error()), false);
  bool ok = true;
  for (int i = 0; i < n && ok; i++)
    ok = loom_run_submit(loom_state.ctx, x[i].r.plan, NULL, x[i].r.in, x[i].r.n_in, &x[i].r.out, 1,
                         &x[i].stats, &x[i].handle) == LOOM_OK;
  if (!ok) snprintf(err, err_size, "%s", loom_last_error());
  /* Every run submitted is waited for, whatever the others did: its inputs are ours. */
  for (int i = 0; i < n; i++)
    if (x[i].handle && loom_run_wait(x[i].handle) != LOOM_OK && ok) {
      snprintf(err, err_size, "%s", loom_last_error());
      ok = false;
    }
  for (int i = 0; ok && n > 1 && settings.verbose && i < n; i++)
    fprintf(stderr, "loom-blas:   %s: rows %d-%d, columns %d-%d of C, inner %d-%d, %.3f s\n", x[i].device,
            x[i].blk[BI0], x[i].blk[BI1], x[i].blk[BJ0], x[i].blk[BJ1], x[i].blk[BL0], x[i].blk[BL1],
            x[i].stats.seconds);
  return ok;
}

static void part_release(l3_part *x) {
  loom_run_stats_deinit(&x->stats);
  loom_tensor_deinit(&x->r.out);
  loom_plan_destroy(x->r.plan);
  loom_graph_destroy(x->r.opt);
  loom_graph_destroy(x->r.graph);
  for (int i = 0; i < 5; i++) free(x->r.packed[i]);
}

/* The call on device `d`, or split across the shared set (PLACE_SHARED): C is written only
 * when every part succeeded. `where` receives the devices that took a part. */
static bool run_call(const blas_l3 *c, const l3_problem *p, int32_t d, char *where, size_t where_size,
                     char *err, size_t err_size) {
  l3_part x[MAX_DEVICES] = {{0}};
  int n = 0;
  if (d == PLACE_SHARED) {
    double w[MAX_DEVICES];
    int blk[MAX_DEVICES][BLOCK_INTS];
    share_weights(l3_flops(c), w);
    split_blocks(c, p, w, blk);
    for (int32_t i = 0; i < loom_state.n_share; i++)
      if (blk[i][BI1] > blk[i][BI0] && blk[i][BJ1] > blk[i][BJ0] && blk[i][BL1] > blk[i][BL0]) {
        x[n].device = loom_state.share_runners[i].device;
        memcpy(x[n++].blk, blk[i], sizeof blk[i]);
      }
  } else {
    x[n++] = (l3_part){.device = loom_state.ids[d], .blk = {0, c->m, 0, c->n, 0, problem_inner(p)}};
  }
  size_t used = 0;
  where[0] = 0;
  for (int i = 0; i < n && used < where_size; i++)
    used += (size_t)snprintf(where + used, where_size - used, "%s%s", i ? "," : "", x[i].device);
  bool ok = true;
  for (int i = 0; i < n && ok; i++) ok = part_prepare(c, p, &x[i]);
  if (!ok) snprintf(err, err_size, "%s", loom_last_error());
  ok = ok && parts_run(x, n, err, err_size);
  for (int i = 0; i < n; i++) {
    /* The part holding the inner dimension's start (and beta C) first, so the others add. */
    if (ok) write_back(c, p, x[i].blk, x[i].r.out.data, x[i].blk[BL0] > 0);
    part_release(&x[i]);
  }
  return ok;
}

bool loom__blas_l3_loom(const blas_l3 *call, char *device, int device_size) {
  blas_l3 c = *call;
  bool rank = c.kind == BLAS_SYRK || c.kind == BLAS_SYR2K || c.kind == BLAS_HERK || c.kind == BLAS_HER2K;
  if (rank) c.m = c.n; /* C is n x n */
  /* Nothing to multiply: the host's quick return (C scaled by beta at most). */
  if (c.m == 0 || c.n == 0 || ((rank || c.kind == BLAS_GEMM) && c.k == 0)) return false;
  if (c.kind == BLAS_HERK || c.kind == BLAS_HER2K) {
    c.beta = complex_from_real(&c, c.beta, c.beta_buf);
    /* Reference BLAS returns at once here, leaving C's diagonal as it is; Loom would make it
     * real. */
    double a[2];
    scalar_read(&c, c.alpha, c.kind == BLAS_HERK, a);
    if (a[0] == 0 && a[1] == 0 && scalar_is(&c, c.beta, 1)) return false;
  }
  if ((settings.host_decides && !settings.force) || !loom_blas_context()) return false;
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
  bool ok = false;
  if (settings.force || d == PLACE_SHARED || strcmp(loom_state.ids[d], "cpu0") != 0) {
    char where[256], err[512] = "";
    ok = run_call(&c, &p, d, where, sizeof where, err, sizeof err);
    if (ok)
      snprintf(device, (size_t)device_size, "%s", where);
    else
      fprintf(stderr, "loom-blas: Loom failed on %s (%s): this call runs on the host BLAS\n", where, err);
  }
  for (int i = 0; i < 3; i++) free(p.owned[i]);
  return ok;
}
