/* loom-bench suite: every case on every device, each beside the vendor library called directly
 * in the same process and beside the device's peak (issue 19). The measuring is measure.h's,
 * the vendor sides suite_vendor.c's and the reports suite_report.c's. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "suite.h"

/* ---- sizes ------------------------------------------------------------------------------------- */

typedef struct profile {
  const char *name;
  int64_t gemm[3]; /* N of each GEMM */
  int32_t fft_log2;
  int64_t batch, batch_len;
  int64_t vec; /* reduce and add */
  int64_t topk_n, topk_k;
  int64_t conv[5];   /* N, C, H (= W), O, kernel */
  int64_t transfer;  /* bytes */
  bench_stop stop;   /* over all passes; loom_runs unused */
  int32_t passes;    /* rounds over every op case, each adding samples to each */
  int32_t processes; /* default --processes: each pass in a process of its own when > 1 */
  int64_t triad;     /* doubles per array of the triad */
} profile;

static const profile profiles[] = {
    {.name = "full",
     .gemm = {512, 1024, 2048},
     .fft_log2 = 20,
     .batch = 256,
     .batch_len = 4096,
     .vec = (int64_t)1 << 24,
     .topk_n = (int64_t)1 << 20,
     .topk_k = 16,
     .conv = {8, 64, 64, 64, 3},
     .transfer = (int64_t)64 << 20,
     .stop = {.min_samples = 5, .max_samples = 30, .target = 0.02, .budget_s = 5},
     .passes = 5,
     .processes = 1, /* 3 runs in each of 7 processes of a case that takes seconds: minutes */
     .triad = (int64_t)1 << 24},
    {.name = "quick",
     .gemm = {64, 128, 256},
     .fft_log2 = 14,
     .batch = 64,
     .batch_len = 1024,
     .vec = (int64_t)1 << 20,
     .topk_n = (int64_t)1 << 16,
     .topk_k = 16,
     .conv = {1, 16, 32, 16, 3},
     .transfer = (int64_t)4 << 20,
     .stop = {.min_samples = 5, .max_samples = 40, .target = 0.02, .budget_s = 1},
     .passes = 5,
     .processes = 7,
     .triad = (int64_t)1 << 23},
    /* for the tests: every case runs, in well under a second */
    {.name = "tiny",
     .gemm = {8, 16, 32},
     .fft_log2 = 6,
     .batch = 4,
     .batch_len = 64,
     .vec = 1024,
     .topk_n = 256,
     .topk_k = 4,
     .conv = {1, 2, 8, 2, 3},
     .transfer = 64 << 10,
     .stop = {.min_samples = 3, .max_samples = 5, .target = 0.05, .budget_s = 0.05},
     .passes = 1,
     .processes = 1,
     .triad = (int64_t)1 << 18},
};

typedef struct suite_options {
  const profile *p;
  const char *devices, *json, *plot, *cases;
  bench_stop stop;
  int32_t passes;        /* rounds over the cases: the profile's, or one per process */
  int32_t processes;     /* --processes */
  const char *slow_case; /* LOOM_BENCH_SLOW_CASE: for tests only */
} suite_options;

static void usage(FILE *f) {
  fputs(
      "usage: loom-bench suite [--quick] [--devices LIST] [--json FILE] [--plot FILE.svg] [--reps N]\n"
      "                        [--max-reps N] [--target X] [--budget S] [--cases LIST]\n"
      "  Every device found (cpu0, OpenCL, CUDA): GEMM f32/f64 (f16 where the device has it) at three\n"
      "  sizes, FFT (c2c 1-D, batched, r2c), reduce_sum, an elementwise add, topk, conv, transfers\n"
      "  (host to device, device to host, device to device) and per-op latency; each beside the vendor\n"
      "  library called directly (ratio = library time / Loom time) and the device's peak, measured in\n"
      "  the same run (an FMA loop and a triad on the host). Each case is repeated until its spread is\n"
      "  known: at least --reps timed runs of each side, then until the median absolute deviation of\n"
      "  each is at most --target of its median (and its fastest run within 10 x --target of it),\n"
      "  --budget is spent or --max-reps runs were made. Times are medians; the report carries each\n"
      "  case's runs, min, median and MAD. A case without a library has a witness instead (a 64^3\n"
      "  SGEMM through the device's library, run alternately), which compare reads.\n"
      "  --quick         small sizes, cases of at most about 1 s: about a minute on 2 cores (cpu0 and\n"
      "                  two PoCL devices)\n"
      "  --devices LIST  device ids, as cpu0,ocl1 (default: every device)\n"
      "  --json FILE     also write the report as JSON (docs/bench.md has its schema)\n"
      "  --plot FILE     also draw a roofline per device and the ratios as SVG\n"
      "  --reps N        at least N timed runs per case after one warm-up (default 5; --tiny 3)\n"
      "  --max-reps N    at most N timed runs per case (default 30, --quick 40; at most 64)\n"
      "  --target X      stop once MAD / median is at most X on each side (default 0.02)\n"
      "  --budget S      stop once a case's timed runs took S seconds (default 5, --quick 1)\n"
      "  --cases LIST    only these cases: names (gemm, fft, fft_batched, rfft, reduce_sum, add, topk,\n"
      "                  conv2d, latency, h2d, d2h, d2d), or NAME/DTYPE as gemm/f64\n"
      "  --processes N   each of N passes over the cases in a process of its own (default 7 with\n"
      "                  --quick, else 1: every pass in this process), so that the runs hold the\n"
      "                  spread between processes (a case can run at another speed in another\n"
      "                  process) and compare can judge by it; each process makes at least 3 runs of\n"
      "                  a case, with OMP_WAIT_POLICY=passive unless OMP_WAIT_POLICY or GOMP_SPINCOUNT\n"
      "                  is set (OpenMP threads left spinning after a region made speeds differ by\n"
      "                  process)\n"
      "  --tiny          for the tests: tiny sizes, 3 to 5 timed runs (the figures mean nothing)\n"
      "Environment, for tests only: LOOM_BENCH_SLOW_CASE=NAME[/DTYPE] makes Loom's side of that case\n"
      "run its graph three times per timed run (what compare must flag, and nothing else).\n",
      f);
}

/* Every name of --cases is a case the suite has (a typo would silently measure nothing). */
static bool known_cases(const char *list, char *bad, size_t size) {
  static const char *const names[] = {"gemm", "fft",    "fft_batched", "rfft", "reduce_sum", "add",
                                      "topk", "conv2d", "latency",     "h2d",  "d2h",        "d2d"};
  for (const char *p = list; *p;) {
    size_t len = strcspn(p, ",/");
    bool ok = false;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
      ok |= strlen(names[i]) == len && !strncmp(names[i], p, len);
    if (!ok) {
      snprintf(bad, size, "%.*s", (int)strcspn(p, ","), p);
      return false;
    }
    p += strcspn(p, ",");
    if (*p) p++;
  }
  return true;
}

static int parse_args(int argc, char **argv, suite_options *o) {
  *o = (suite_options){.p = &profiles[0]};
  bool quick = false, tiny = false;
  int32_t reps = 0, max_reps = 0, processes = 0;
  double target = -1, budget = -1;
  const bench_opt opts[] = {
      BENCH_OPT_FLAG("quick", &quick),
      BENCH_OPT_FLAG("tiny", &tiny),
      BENCH_OPT_TEXT("devices", &o->devices, "a list of devices"),
      BENCH_OPT_TEXT("json", &o->json, "a file name"),
      BENCH_OPT_TEXT("plot", &o->plot, "a file name"),
      BENCH_OPT_INT("reps", BENCH_I32, &reps, 1, BENCH_MAX_SAMPLES, "a count from 1 to 64"),
      BENCH_OPT_INT("max-reps", BENCH_I32, &max_reps, 1, BENCH_MAX_SAMPLES, "a count from 1 to 64"),
      BENCH_OPT_DOUBLE("target", &target, 0, 1, "a fraction from 0 to 1, as 0.02"),
      BENCH_OPT_DOUBLE("budget", &budget, 0, 3600, "seconds from 0 to 3600, as 1"),
      BENCH_OPT_TEXT("cases", &o->cases, "a list of case names"),
      BENCH_OPT_INT("processes", BENCH_I32, &processes, 1, SUITE_MAX_PROCESSES, "a count from 1 to 16"),
      BENCH_OPT_END,
  };
  bench_cli b = {
      .mode = "suite",
      .synopsis = "loom-bench suite [--quick] [--devices LIST] [--json FILE] [--plot FILE.svg] [--reps N]",
      .usage = usage,
      .opts = opts};
  int rc = bench_args(&b, argc, argv);
  if (rc) return rc;
  if (quick && tiny) return bench_usage_error(&b, "give --quick or --tiny, not both");
  if (quick || tiny) o->p = &profiles[quick ? 1 : 2];
  char bad[64];
  if (o->cases && !known_cases(o->cases, bad, sizeof bad))
    return bench_fail("suite", 2, "--cases: no case '%s' (loom-bench suite --help lists them)", bad);
  o->stop = o->p->stop;
  o->stop.loom_runs = 1;
  if (reps) o->stop.min_samples = reps;
  if (max_reps) o->stop.max_samples = max_reps;
  if (target >= 0) o->stop.target = target;
  if (budget >= 0) o->stop.budget_s = budget;
  if (o->stop.min_samples > o->stop.max_samples)
    return bench_usage_error(&b, "--reps %d is more than --max-reps %d", (int)o->stop.min_samples,
                             (int)o->stop.max_samples);
  o->processes = processes ? processes : o->p->processes;
  o->passes = o->processes > 1 ? o->processes : o->p->passes;
  const char *slow = getenv("LOOM_BENCH_SLOW_CASE");
  o->slow_case = slow && slow[0] ? slow : NULL;
  return 0;
}

/* ---- the cases ------------------------------------------------------------------------------------ */

suite_case *suite_add_case(suite_device *d, suite_kind kind, const char *name, const char *dtype) {
  if (d->n_cases == d->cap_cases) {
    int32_t cap = d->cap_cases ? 2 * d->cap_cases : 32;
    suite_case *c = realloc(d->cases, (size_t)cap * sizeof *c);
    if (!c) return NULL;
    d->cases = c;
    d->cap_cases = cap;
  }
  suite_case *c = &d->cases[d->n_cases++];
  memset(c, 0, sizeof *c);
  c->kind = kind;
  c->fraction = -1;
  snprintf(c->name, sizeof c->name, "%s", name);
  snprintf(c->dtype, sizeof c->dtype, "%s", dtype);
  return c;
}

/* Whether `list` (--cases, LOOM_BENCH_SLOW_CASE) names the case: by name, or as NAME/DTYPE. */
static bool case_listed(const char *list, const char *name, const char *dtype) {
  char both[40];
  snprintf(both, sizeof both, "%s/%s", name, dtype);
  return bench_id_listed(list, name) || bench_id_listed(list, both);
}

static double log2i(int64_t n) {
  double l = 0;
  for (; n > 1; n >>= 1) l += 1;
  return l;
}

static int64_t dtype_bytes(const char *dt) {
  return !strcmp(dt, "f16") ? 2 : !strcmp(dt, "f64") || !strcmp(dt, "c64") ? 8 : !strcmp(dt, "c128") ? 16 : 4;
}

/* The case's graph text, its size label, flops and bytes. */
static void case_graph(const suite_options *o, suite_case *c, int64_t n, char *text, size_t size) {
  const profile *p = o->p;
  const char *t = c->dtype;
  double e = (double)dtype_bytes(t);
  long long N = (long long)n;
  switch (c->kind) {
    case SUITE_GEMM:
      snprintf(text, size, "graph g(a: %s[%lld,%lld], b: %s[%lld,%lld]) { c = dot a b\n return c }", t, N, N,
               t, N, N);
      snprintf(c->size, sizeof c->size, "%lldx%lldx%lld", N, N, N);
      c->flops = 2.0 * (double)n * (double)n * (double)n;
      c->bytes = 3.0 * (double)n * (double)n * e;
      break;
    case SUITE_FFT:
    case SUITE_RFFT:
      snprintf(text, size, "graph g(x: %s[%lld]) { y = %s x axis=0\n return y }", t, N,
               c->kind == SUITE_FFT ? "fft" : "rfft");
      snprintf(c->size, sizeof c->size, "2^%d", (int)log2i(n));
      c->flops = (c->kind == SUITE_FFT ? 5.0 : 2.5) * (double)n * log2i(n);
      c->bytes = c->kind == SUITE_FFT ? 2.0 * (double)n * e : (double)n * e + (double)(n / 2 + 1) * 2 * e;
      break;
    case SUITE_FFT_BATCH:
      snprintf(text, size, "graph g(x: %s[%lld,%lld]) { y = fft x axis=-1\n return y }", t,
               (long long)p->batch, (long long)p->batch_len);
      snprintf(c->size, sizeof c->size, "%lldx%lld", (long long)p->batch, (long long)p->batch_len);
      c->flops = 5.0 * (double)(p->batch * p->batch_len) * log2i(p->batch_len);
      c->bytes = 2.0 * (double)(p->batch * p->batch_len) * e;
      break;
    case SUITE_REDUCE:
      snprintf(text, size, "graph g(x: %s[%lld]) { s = reduce_sum x axes=[0]\n return s }", t, N);
      snprintf(c->size, sizeof c->size, "%lld", N);
      c->flops = (double)n;
      c->bytes = (double)n * e;
      break;
    case SUITE_ADD:
    case SUITE_LATENCY:
      snprintf(text, size, "graph g(x: %s[%lld], y: %s[%lld]) { z = add x y\n return z }", t, N, t, N);
      snprintf(c->size, sizeof c->size, "%lld", N);
      c->flops = (double)n;
      c->bytes = 3.0 * (double)n * e;
      break;
    case SUITE_TOPK:
      snprintf(text, size, "graph g(x: %s[%lld]) { v, i = topk x k=%lld axis=0\n return v, i }", t, N,
               (long long)p->topk_k);
      snprintf(c->size, sizeof c->size, "%lld k=%lld", N, (long long)p->topk_k);
      c->flops = (double)n;
      c->bytes = (double)n * e + (double)p->topk_k * (e + 8);
      break;
    case SUITE_CONV: {
      const int64_t *v = p->conv; /* N, C, H, O, K: padding keeps H */
      snprintf(text, size,
               "graph g(x: %s[%lld,%lld,%lld,%lld], w: %s[%lld,%lld,%lld,%lld]) {\n"
               " y = conv x w stride=[1,1] padding=[%lld,%lld]\n return y }",
               t, (long long)v[0], (long long)v[1], (long long)v[2], (long long)v[2], t, (long long)v[3],
               (long long)v[1], (long long)v[4], (long long)v[4], (long long)(v[4] / 2),
               (long long)(v[4] / 2));
      snprintf(c->size, sizeof c->size, "%lldx%lldx%lldx%lld *%lldx%lld", (long long)v[0], (long long)v[1],
               (long long)v[2], (long long)v[2], (long long)v[3], (long long)v[4]);
      double out = (double)(v[0] * v[3] * v[2] * v[2]);
      c->flops = 2.0 * out * (double)(v[1] * v[4] * v[4]);
      c->bytes = ((double)(v[0] * v[1] * v[2] * v[2]) + (double)(v[3] * v[1] * v[4] * v[4]) + out) * e;
      break;
    }
    default:
      text[0] = '\0';
  }
}

/* Rate, fraction of peak and ratio of a measured case. */
static void case_figures(const suite_device *d, suite_case *c) {
  bool memory = c->kind == SUITE_REDUCE || c->kind == SUITE_ADD || c->kind == SUITE_TOPK ||
                c->kind == SUITE_H2D || c->kind == SUITE_D2H || c->kind == SUITE_D2D;
  if (c->kind == SUITE_LATENCY) {
    c->rate = c->seconds * 1e6;
    c->unit = "us";
  } else if (memory) {
    c->rate = c->bytes / c->seconds * 1e-9;
    c->unit = "GB/s";
    if (d->peak_gbps > 0) c->fraction = c->rate / d->peak_gbps;
  } else {
    c->rate = c->flops / c->seconds * 1e-9;
    c->unit = "GFLOP/s";
    /* f64 at half the f32 lanes: true of the CPUs the spec peak is computed for */
    double peak = !strcmp(c->dtype, "f64") || !strcmp(c->dtype, "c128") ? d->peak_gflops_f64 : d->peak_gflops;
    if (peak > 0) c->fraction = c->rate / peak;
  }
  if (c->library_seconds > 0) c->ratio = c->library_seconds / c->seconds;
}

/* Opens, measures and closes one op case. */
/* The share of o->stop one pass of the op cases has: together the passes make at least the
 * least number of runs and spend the budget. */
static bench_stop pass_stop(const suite_options *o, const suite_case *c) {
  bench_stop st = o->stop;
  int32_t passes = o->passes;
  st.min_samples = (st.min_samples + passes - 1) / passes;
  st.budget_s /= passes;
  if (o->processes > 1) {
    /* A process counts only its own runs, so it gets its share of the maximum; and at least
     * three, so that its median, which compare sets beside the other processes', is one. */
    st.max_samples = (st.max_samples + passes - 1) / passes;
    if (st.min_samples < 3) st.min_samples = 3;
    if (st.max_samples < st.min_samples) st.max_samples = st.min_samples;
  }
  if (c && o->slow_case && case_listed(o->slow_case, c->name, c->dtype)) st.loom_runs = 3;
  return st;
}

/* Opens, measures (adding to the case's samples) and closes one op case. */
static void run_op_case(const suite_options *o, suite_device *d, const loom_device_info *info,
                        loom_context *ctx, int32_t index, suite_case *c) {
  char text[512];
  case_graph(o, c, c->param, text, sizeof text);
  bench_op op;
  if (bench_op_open(&op, text, 1)) {
    snprintf(c->error, sizeof c->error, "graph: %s", loom_last_error());
    return;
  }
  bench_vendor v = {0};
  bool have = !suite_vendor_open(c, d, info, ctx, index, &op, &v, c->reason, sizeof c->reason);
  if (have) snprintf(c->library, sizeof c->library, "%s", v.library);
  char witness[sizeof c->witness];
  bool wit = !have && !suite_witness_open(d, info, ctx, index, &v, witness, sizeof witness);
  if (wit) snprintf(c->witness, sizeof c->witness, "%s", witness);
  bench_sample *side = have ? &c->lib : wit ? &c->wit : NULL;
  bench_stop stop = pass_stop(o, c);
  if (bench_measure_samples(ctx, d->id, &op, side ? &v : NULL, &stop, &c->loom, side, c->error,
                            sizeof c->error) == 0) {
    c->seconds = c->loom.median;
    c->library_seconds = have ? c->lib.median : 0;
  }
  if (side && v.close) v.close(v.state);
  bench_op_close(&op);
}

/* ---- transfers ----------------------------------------------------------------------------------- */

/* The device's memory node, when it is a device node (cpu0 works in host memory: -1). */
static int32_t device_node(loom_mem_manager *m, int32_t index) {
  int32_t node;
  loom_mem_node_info ni;
  if (loom_mem_device_node(m, index, &node) || loom_mem_node_info_get(m, node, &ni)) return -1;
  return ni.kind == LOOM_MEMORY_DEVICE ? node : -1;
}

/* Host buffers of the transfers, src filled with a pattern and dst touched, so no figure pays
 * first-touch page faults. 1 when the host has no memory for them. */
static int host_buffers(int64_t bytes, uint8_t **src, uint8_t **dst) {
  *src = *dst = NULL;
  if (bytes <= 0) return 1;
  *src = malloc((size_t)bytes);
  *dst = malloc((size_t)bytes);
  if (!*src || !*dst) {
    free(*src);
    free(*dst);
    return 1;
  }
  for (int64_t i = 0; i < bytes; i++) (*src)[i] = (uint8_t)(i * 131 + 7);
  memset(*dst, 0, (size_t)bytes);
  return 0;
}

/* Adds one pass's runs of a transfer to its case (made on the first pass), or its error. */
static void transfer_case(const suite_options *o, suite_device *d, suite_kind kind, const char *name,
                          int64_t bytes, const char *to, const bench_sample *loom, const bench_sample *lib,
                          const char *error) {
  if (!case_listed(o->cases, name, "u8")) return;
  char size[48];
  snprintf(size, sizeof size, "%lld KiB%s%s", (long long)(bytes >> 10), to ? " -> " : "", to ? to : "");
  suite_case *c = NULL;
  for (int32_t i = 0; i < d->n_cases && !c; i++)
    if (d->cases[i].kind == kind && !strcmp(d->cases[i].size, size)) c = &d->cases[i];
  if (!c && (c = suite_add_case(d, kind, name, "u8")) != NULL) {
    snprintf(c->size, sizeof c->size, "%s", size);
    c->bytes = 2.0 * (double)bytes; /* a copy reads and writes each byte, as memcpy does */
  }
  if (!c || c->error[0]) return;
  if (error[0]) {
    snprintf(c->error, sizeof c->error, "%s", error);
    return;
  }
  for (int32_t i = 0; i < loom->n; i++) bench_sample_add(&c->loom, loom->s[i]);
  for (int32_t i = 0; i < lib->n; i++) bench_sample_add(&c->lib, lib->s[i]);
  c->seconds = c->loom.median;
  c->library_seconds = c->lib.median;
  snprintf(c->library, sizeof c->library, "memcpy");
}

/* One pass of the device's transfers: to and from the host, and to every other device memory. */
static void run_transfers(const suite_options *o, suite_device *d, loom_context *ctx, int32_t index,
                          const bench_stop *stop) {
  loom_mem_manager *m = NULL;
  int32_t node;
  uint8_t *src, *dst;
  int64_t bytes = o->p->transfer;
  if (loom_context_memory(ctx, &m) || (node = device_node(m, index)) < 0) return;
  bool host = case_listed(o->cases, "h2d", "u8") || case_listed(o->cases, "d2h", "u8"),
       peer = case_listed(o->cases, "d2d", "u8");
  if (!host && !peer) return;
  char why[200] = "no host memory for the transfers' buffers";
  bench_transfer t = {0};
  bool buffers = host_buffers(bytes, &src, &dst) == 0;
  if (buffers) {
    why[0] = '\0';
    if (host) bench_measure_host_transfers_until(m, node, src, dst, bytes, stop, &t, why, sizeof why);
  }
  if (host) {
    transfer_case(o, d, SUITE_H2D, "h2d", bytes, NULL, &t.h2d, &t.memcpy, why);
    transfer_case(o, d, SUITE_D2H, "d2h", bytes, NULL, &t.d2h, &t.memcpy, why);
  }
  for (int32_t j = 0; peer && why[0] == '\0' && j < loom_context_device_count(ctx); j++) {
    loom_device_info other;
    int32_t to = j == index ? -1 : device_node(m, j);
    if (to < 0 || to == node || loom_context_device_info(ctx, j, &other)) continue;
    char err[200] = "";
    bench_measure_peer_transfer_until(m, node, to, src, dst, bytes, stop, &t, err, sizeof err);
    transfer_case(o, d, SUITE_D2D, "d2d", bytes, other.id, &t.h2d, &t.memcpy, err);
  }
  if (buffers) {
    free(src);
    free(dst);
  }
}

/* ---- peaks ------------------------------------------------------------------------------------------ */

/* The table's peak (bench_spec_peak_gflops) beside the one the fractions divide by: a CPU
 * device runs on the host, so the host's peaks measured in this run are its own; another
 * device keeps the table's, and measured_peaks fills what it lacks from the run's cases. */
static void device_peaks(const suite_options *o, suite_device *d, const loom_device_info *info,
                         loom_context *ctx, int32_t index, const suite_peaks *host) {
  d->spec_gflops = bench_spec_peak_gflops(info, d->spec_source, sizeof d->spec_source);
  if (info->backends & LOOM_BACKEND_OPENCL)
    suite_cl_peaks(ctx, index, 2 * o->p->triad, &d->cl_gflops, &d->cl_gbps, d->cl_why, sizeof d->cl_why);
  if (info->kind == LOOM_DEVICE_CPU && host->gflops_f32 > 0) {
    /* cpu0 runs on the suite's OpenMP threads, as the FMA loop did; a CPU OpenCL device (PoCL)
     * on threads of its own, one per compute unit */
    double scale = info->backends == LOOM_BACKEND_CPU || info->compute_units <= 0 || host->threads <= 0
                       ? 1
                       : (double)info->compute_units / host->threads;
    d->peak_gflops = host->gflops_f32 * scale;
    d->peak_gflops_f64 = host->gflops_f64 * scale;
    if (scale == 1)
      snprintf(d->peak_gflops_source, sizeof d->peak_gflops_source, "%s", host->fma_source);
    else
      snprintf(d->peak_gflops_source, sizeof d->peak_gflops_source, "%s; per thread x %d compute units",
               host->fma_source, (int)info->compute_units);
  } else if (d->spec_gflops > 0) {
    d->peak_gflops = d->spec_gflops;
    snprintf(d->peak_gflops_source, sizeof d->peak_gflops_source, "%s", d->spec_source);
  } else if (d->cl_gflops > 0) { /* an OpenCL GPU: no table knows its lanes */
    d->peak_gflops = d->cl_gflops;
    snprintf(d->peak_gflops_source, sizeof d->peak_gflops_source, "measured: OpenCL FMA kernel, f32");
  }
  if (info->kind != LOOM_DEVICE_CPU && d->cl_gbps > 0) {
    d->peak_gbps = d->cl_gbps;
    snprintf(d->peak_gbps_source, sizeof d->peak_gbps_source, "measured: OpenCL triad of 3 x %lld MiB",
             (long long)(o->p->triad * 8 >> 20));
  }
  if (info->kind == LOOM_DEVICE_CPU && info->host_unified && host->triad_gbps > 0) {
    d->peak_gbps = host->triad_gbps;
    snprintf(d->peak_gbps_source, sizeof d->peak_gbps_source, "%s", host->triad_source);
  }
}

/* Peaks the device did not give: the best rate any case reached, either side. Transfers do not
 * count towards the memory peak: they measure the link (PCIe), not the device's memory. */
static void measured_peaks(suite_device *d, double host_gbps, bool host_unified) {
  double flops = 0, gbps = 0;
  if (d->peak_gbps > 0) host_unified = false; /* the triad already measured this memory */
  for (int32_t i = 0; i < d->n_cases; i++) {
    const suite_case *c = &d->cases[i];
    double best = c->library_seconds > 0 && c->library_seconds < c->seconds ? c->library_seconds : c->seconds;
    if (c->seconds <= 0 || c->kind == SUITE_LATENCY) continue;
    /* memcpy beside each transfer is the host's copy rate, as host_gbps is */
    if (host_unified && c->library_seconds > 0 && (c->kind == SUITE_H2D || c->kind == SUITE_D2H))
      host_gbps = fmax(host_gbps, c->bytes / c->library_seconds * 1e-9);
    if (c->kind <= SUITE_FFT_BATCH || c->kind == SUITE_CONV)
      flops = c->flops / best * 1e-9 > flops ? c->flops / best * 1e-9 : flops;
    else if ((c->kind == SUITE_REDUCE || c->kind == SUITE_ADD || c->kind == SUITE_TOPK) &&
             c->bytes / best * 1e-9 > gbps)
      gbps = c->bytes / best * 1e-9;
  }
  if (d->peak_gflops <= 0 && flops > 0) {
    d->peak_gflops = flops;
    snprintf(d->peak_gflops_source, sizeof d->peak_gflops_source,
             "measured: the best GEMM, FFT or conv rate of this run, Loom or library");
  }
  if (host_unified && host_gbps >= gbps) gbps = host_gbps;
  if (gbps > 0 && d->peak_gbps <= 0) {
    d->peak_gbps = gbps;
    snprintf(d->peak_gbps_source, sizeof d->peak_gbps_source, "%s",
             host_unified && gbps == host_gbps ? "measured: memcpy on the host (read + write)"
                                               : "measured: the best memory-bound case of this run");
  }
}

/* memcpy's GB/s (read + write) of the transfer size on the host. */
static double host_memcpy_gbps(const suite_options *o) {
  uint8_t *a = malloc((size_t)o->p->transfer), *b = malloc((size_t)o->p->transfer);
  double best = 0;
  if (a && b) {
    memset(a, 1, (size_t)o->p->transfer);
    memset(b, 0, (size_t)o->p->transfer);
    for (int32_t r = 0; r <= 10; r++) { /* cheap, and the reference of every memory figure */
      double t = bench_now();
      memcpy(b, a, (size_t)o->p->transfer);
      if (r > 0) bench_keep(&best, bench_now() - t);
    }
  }
  free(a);
  free(b);
  return best > 0 ? 2.0 * (double)o->p->transfer / best * 1e-9 : 0;
}

/* ---- one device ------------------------------------------------------------------------------------ */

static bool interactive;

static void progress(const suite_device *d, const suite_case *c, int32_t pass, int32_t passes) {
  if (!interactive) return;
  fprintf(stderr, "\r\033[K loom-bench suite: %s  pass %d of %d  %s %s %s", d->id, (int)(pass + 1),
          (int)passes, c->name, c->dtype, c->size);
  fflush(stderr);
}

static void copy_identity(suite_device *d, const loom_device_info *info) {
  snprintf(d->id, sizeof d->id, "%s", info->id);
  snprintf(d->vendor, sizeof d->vendor, "%s", info->vendor ? info->vendor : "");
  snprintf(d->name, sizeof d->name, "%s", info->name ? info->name : "");
  snprintf(d->driver, sizeof d->driver, "%s", info->driver_version ? info->driver_version : "");
  if (info->backends == LOOM_BACKEND_CPU)
    suite_cpu_runtime(d->runtime, sizeof d->runtime);
  else
    snprintf(d->runtime, sizeof d->runtime, "%s", info->version ? info->version : "");
  snprintf(d->kind, sizeof d->kind, "%s",
           info->kind == LOOM_DEVICE_CPU   ? "cpu"
           : info->kind == LOOM_DEVICE_GPU ? "gpu"
                                           : "accelerator");
  d->compute_units = info->compute_units;
  d->clock_mhz = info->clock_mhz;
}

/* The device's op cases, in the order every process measures them (transfers are added as
 * they are measured); 1 without memory. */
static int build_cases(const suite_options *o, suite_device *d, const loom_device_info *info) {
  const char *gemm_types[3] = {"f32", info->fp64 ? "f64" : NULL, info->fp16 ? "f16" : NULL};
  const profile *p = o->p;
  struct {
    suite_kind kind;
    const char *name, *dtype;
    int64_t n;
  } ops[] = {
      {SUITE_FFT, "fft", "c64", (int64_t)1 << p->fft_log2},
      {SUITE_FFT_BATCH, "fft_batched", "c64", 0},
      {SUITE_RFFT, "rfft", "f32", (int64_t)1 << p->fft_log2},
      {SUITE_REDUCE, "reduce_sum", "f32", p->vec},
      {SUITE_ADD, "add", "f32", p->vec},
      {SUITE_TOPK, "topk", "f32", p->topk_n},
      {SUITE_CONV, "conv2d", "f32", 0},
      {SUITE_LATENCY, "latency", "f32", 1},
  };
  for (int t = 0; t < 3; t++)
    for (int s = 0; gemm_types[t] && s < 3; s++) {
      if (!case_listed(o->cases, "gemm", gemm_types[t])) continue;
      suite_case *c = suite_add_case(d, SUITE_GEMM, "gemm", gemm_types[t]);
      if (!c) return 1;
      c->param = p->gemm[s];
      case_graph(o, c, c->param, (char[512]){0}, 512);
    }
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
    if (!case_listed(o->cases, ops[i].name, ops[i].dtype)) continue;
    suite_case *c = suite_add_case(d, ops[i].kind, ops[i].name, ops[i].dtype);
    if (!c) return 1;
    c->param = ops[i].n;
    case_graph(o, c, c->param, (char[512]){0}, 512);
  }
  return 0;
}

/* Passes first .. first + count - 1 over the device's cases. Rounds over every case rather
 * than each case at once: a case's runs then come from the whole run's time, so its spread
 * holds the machine's slower changes (another process's compile starting) and not only the
 * jitter of one half second. */
static void run_passes(const suite_options *o, suite_device *d, const loom_device_info *info,
                       loom_context *ctx, int32_t index, int32_t first, int32_t count) {
  bench_stop transfers = pass_stop(o, NULL);
  for (int32_t pass = first; pass < first + count; pass++) {
    for (int32_t i = 0; i < d->n_cases; i++) {
      suite_case *c = &d->cases[i];
      if (c->error[0] || (c->kind >= SUITE_H2D && c->kind <= SUITE_D2D)) continue; /* failed, or a transfer */
      progress(d, c, pass, o->passes);
      run_op_case(o, d, info, ctx, index, c);
    }
    if (interactive)
      fprintf(stderr, "\r\033[K loom-bench suite: %s  pass %d  transfers", d->id, (int)(pass + 1));
    run_transfers(o, d, ctx, index, &transfers);
  }
}

/* Medians, peaks the device did not give, rates and ratios, once every run is in. */
static void finish_device(suite_device *d, const loom_device_info *info, double host_gbps) {
  for (int32_t i = 0; i < d->n_cases; i++) {
    suite_case *c = &d->cases[i];
    c->seconds = c->error[0] ? 0 : c->loom.median;
    c->library_seconds = c->library[0] && !c->error[0] ? c->lib.median : 0;
  }
  measured_peaks(d, host_gbps, info->host_unified);
  for (int32_t i = 0; i < d->n_cases; i++)
    if (d->cases[i].seconds > 0) case_figures(d, &d->cases[i]);
}

/* The suite's op cases as cpu0 runs them (GEMM f32 and f64, then the ops), for `loom-bench fusion
 * --suite`; 1 for an unknown profile. */
int suite_each_graph(const char *profile, suite_graph_fn fn, void *user) {
  suite_options o = {0};
  for (size_t i = 0; i < sizeof profiles / sizeof profiles[0]; i++)
    if (!strcmp(profiles[i].name, profile)) o.p = &profiles[i];
  if (!o.p) return 1;
  static const suite_kind kinds[] = {SUITE_FFT, SUITE_FFT_BATCH, SUITE_RFFT, SUITE_REDUCE,
                                     SUITE_ADD, SUITE_TOPK,      SUITE_CONV, SUITE_LATENCY};
  static const char *const names[] = {"fft", "fft_batched", "rfft",   "reduce_sum",
                                      "add", "topk",        "conv2d", "latency"};
  static const char *const types[] = {"c64", "c64", "f32", "f32", "f32", "f32", "f32", "f32"};
  const int64_t sizes[] = {
      (int64_t)1 << o.p->fft_log2, 0, (int64_t)1 << o.p->fft_log2, o.p->vec, o.p->vec, o.p->topk_n, 0, 1};
  char text[512];
  for (int t = 0; t < 2; t++)
    for (int g = 0; g < 3; g++) {
      suite_case c = {.kind = SUITE_GEMM};
      snprintf(c.dtype, sizeof c.dtype, "%s", t ? "f64" : "f32");
      case_graph(&o, &c, o.p->gemm[g], text, sizeof text);
      fn("gemm", c.dtype, c.size, text, user);
    }
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
    suite_case c = {.kind = kinds[i]};
    snprintf(c.dtype, sizeof c.dtype, "%s", types[i]);
    case_graph(&o, &c, sizes[i], text, sizeof text);
    fn(names[i], c.dtype, c.size, text, user);
  }
  return 0;
}

void suite_report_free(suite_report *r) {
  for (int32_t i = 0; i < r->n_devices; i++) free(r->devices[i].cases);
  free(r->devices);
  memset(r, 0, sizeof *r);
}

/* The wanted devices' identities and cases into r (with their peaks, in the parent); 2 when
 * --devices names none of them. */
static int open_devices(const suite_options *o, loom_context *ctx, suite_report *r, bool peaks) {
  int32_t n = loom_context_device_count(ctx);
  r->devices = calloc((size_t)(n ? n : 1), sizeof *r->devices);
  if (!r->devices) return 1;
  for (int32_t i = 0; i < n; i++) {
    loom_device_info info;
    if (loom_context_device_info(ctx, i, &info) || !bench_id_listed(o->devices, info.id)) continue;
    suite_device *d = &r->devices[r->n_devices++];
    copy_identity(d, &info);
    if (peaks) device_peaks(o, d, &info, ctx, i, &r->peaks);
    if (build_cases(o, d, &info)) return 1;
  }
  if (r->n_devices == 0) {
    fprintf(stderr, "loom-bench suite: --devices %s: no such device here\n", o->devices ? o->devices : "");
    return 2;
  }
  return 0;
}

/* Device index of ctx for each of r's devices (they were opened in ctx's order). */
static int32_t device_index(loom_context *ctx, const suite_device *d, loom_device_info *info) {
  for (int32_t i = 0; i < loom_context_device_count(ctx); i++)
    if (!loom_context_device_info(ctx, i, info) && !strcmp(info->id, d->id)) return i;
  return -1;
}

/* Every pass of every wanted device into r: here, or each pass in a child process of its own
 * (--processes), so that compare sees how far one process's speed lies from another's. */
static int run_devices(const suite_options *o, int argc, char **argv, loom_context *ctx, suite_report *r) {
  double host_gbps = host_memcpy_gbps(o);
  if (interactive) fputs("\r\033[K loom-bench suite: the host's peaks (FMA loops, triad)", stderr);
  suite_host_peaks(o->p->triad, &r->peaks);
  int rc = open_devices(o, ctx, r, true);
  loom_device_info info;
  for (int32_t k = 0; !rc && o->processes > 1 && k < o->passes; k++) {
    char why[256];
    if (suite_run_child(argc, argv, k, r, why, sizeof why)) {
      fprintf(stderr, "loom-bench suite: pass %d in a process of its own: %s\n", (int)(k + 1), why);
      rc = 1;
    }
  }
  for (int32_t i = 0; !rc && i < r->n_devices; i++) {
    int32_t index = device_index(ctx, &r->devices[i], &info);
    if (o->processes <= 1) run_passes(o, &r->devices[i], &info, ctx, index, 0, o->passes);
    finish_device(&r->devices[i], &info, host_gbps);
  }
  if (interactive) fputs("\r\033[K", stderr);
  return rc;
}

/* A child of --processes: its one pass of every wanted device, written as a report to `path`. */
static int run_child(const suite_options *o, loom_context *ctx, int32_t pass, const char *path) {
  suite_report r = {.processes = 1, .passes = 1};
  int rc = open_devices(o, ctx, &r, false);
  loom_device_info info;
  for (int32_t i = 0; !rc && i < r.n_devices; i++) {
    run_passes(o, &r.devices[i], &info, ctx, device_index(ctx, &r.devices[i], &info), pass, 1);
    finish_device(&r.devices[i], &info, 0);
  }
  if (!rc) rc = suite_write_json(&r, path);
  suite_report_free(&r);
  return rc;
}

/* The measuring processes' OpenMP threads sleep between parallel regions instead of spinning
 * (OMP_WAIT_POLICY=passive, unless OMP_WAIT_POLICY or GOMP_SPINCOUNT is set): a worker left
 * spinning after a region (OpenBLAS's, FFTW's, Loom's) shared a CPU with the thread that runs
 * the next case in some processes and not in others, so cpu0's fft of 2^14 points ran at
 * 47-118 us by process on the shared machine (28-31 us in every process passive; at 30 or 45
 * us by process idle), and a 128^3 GEMM took 39 ms at a load of 10 against 61 us passive. libgomp
 * reads its environment when it loads, so this reaches the child processes only; set before
 * the report's header is taken, so the header and the JSON's environment say it. */
static void quiet_openmp_waits(const suite_options *o) {
  if (o->processes > 1 && !getenv("OMP_WAIT_POLICY") && !getenv("GOMP_SPINCOUNT"))
    setenv("OMP_WAIT_POLICY", "passive", 0);
}

int loom_bench_suite(int argc, char **argv) {
  suite_options o;
  int rc = parse_args(argc, argv, &o);
  if (rc) return rc < 0 ? 0 : rc;
  interactive = isatty(STDERR_FILENO);
  loom_context *ctx = NULL;
  if (loom_context_create(NULL, &ctx)) {
    fprintf(stderr, "loom-bench suite: %s\n", loom_last_error());
    return 1;
  }
  int32_t pass;
  const char *child_path;
  if (suite_process_child(&pass, &child_path)) {
    rc = pass < o.passes ? run_child(&o, ctx, pass, child_path) : 1;
    loom_context_destroy(ctx);
    return rc;
  }
  quiet_openmp_waits(&o);
  suite_report r = {.reps = o.stop.min_samples, .stop = o.stop, .passes = o.passes, .processes = o.processes};
  snprintf(r.loom_version, sizeof r.loom_version, "%s", loom_version());
  snprintf(r.profile, sizeof r.profile, "%s", o.p->name);
  suite_meta_begin(&r.meta, ctx);
  double t0 = bench_now();
  rc = run_devices(&o, argc, argv, ctx, &r);
  r.wall_seconds = bench_now() - t0;
  suite_meta_end(&r.meta);
  loom_context_destroy(ctx);
  if (!rc) {
    suite_print_markdown(&r, stdout);
    if (o.json) rc |= suite_write_json(&r, o.json);
    if (o.plot) rc |= suite_write_svg(&r, o.plot);
    int32_t failed = 0;
    for (int32_t i = 0; i < r.n_devices; i++)
      for (int32_t k = 0; k < r.devices[i].n_cases; k++) failed += r.devices[i].cases[k].error[0] != '\0';
    if (failed) {
      fprintf(stderr, "loom-bench suite: %d case%s failed (the error is in the table)\n", (int)failed,
              failed == 1 ? "" : "s");
      rc = 1;
    }
  }
  suite_report_free(&r);
  return rc;
}
