/* The vendor-independent part of loom-bench's GPU modes (gpu_bench.h): options, Loom's side,
 * the timing loop, the device loop and the figures. */
#include "gpu_bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "measure.h"

/* ---- the command line -------------------------------------------------------------------------- */

static void usage(const gpu_mode *mode, FILE *out) {
  fprintf(
      out,
      "usage: loom-bench %s [--devices LIST] [--size N] [--fft-log2 K]%s [--reps N] [--json FILE]\n\n%s\n\n",
      mode->name, mode->bandwidth ? " [--bw-size BYTES]" : "", mode->summary);
  fprintf(out, "  --devices LIST  %s device ids, as %s0,%s1 (default: every %s device)\n", mode->kind,
          mode->id_prefix, mode->id_prefix, mode->kind);
  fprintf(out, "  --size N        the SGEMM's N (default %lld)\n", (long long)mode->default_n);
  fprintf(out, "  --fft-log2 K    the FFT's length is 2^K (default %d)\n", (int)mode->default_fft_log2);
  if (mode->bandwidth)
    fputs("  --bw-size BYTES bytes per transfer of the bandwidth figures (default 256MiB)\n", out);
  fputs(
      "  --reps N        timed runs per figure after one warm-up; the best is kept (default 5)\n"
      "  --json FILE     also write the figures as JSON\n",
      out);
}

/* bench_args's usage callback takes no mode: the one parsing now (one per process). */
static const gpu_mode *usage_mode;

static void usage_of_mode(FILE *out) {
  usage(usage_mode, out);
}

static int parse_args(const gpu_mode *mode, int argc, char **argv, gpu_options *o) {
  *o = (gpu_options){
      .n = mode->default_n, .fft_log2 = mode->default_fft_log2, .reps = 5, .bw_bytes = (int64_t)256 << 20};
  char size_want[64], fft_want[64], synopsis[160];
  snprintf(size_want, sizeof size_want, "a size from 1 to %lld", (long long)mode->max_n);
  snprintf(fft_want, sizeof fft_want, "an exponent from 1 to %d", (int)mode->max_fft_log2);
  snprintf(synopsis, sizeof synopsis, "loom-bench %s [options]", mode->name);
  const bench_opt opts[] = {
      BENCH_OPT_TEXT("devices", &o->devices, "a list of devices"),
      BENCH_OPT_TEXT("json", &o->json, "a file name"),
      BENCH_OPT_INT("size", BENCH_I64, &o->n, 1, mode->max_n, size_want),
      BENCH_OPT_INT("fft-log2", BENCH_I32, &o->fft_log2, 1, mode->max_fft_log2, fft_want),
      BENCH_OPT_INT("reps", BENCH_I32, &o->reps, 1, 1000, "a count from 1 to 1000"),
      /* last: left out of the table where the mode has no bandwidth figures */
      BENCH_OPT_BYTES(mode->bandwidth ? "bw-size" : NULL, &o->bw_bytes, 1, INT64_MAX),
      BENCH_OPT_END,
  };
  usage_mode = mode;
  bench_cli b = {.mode = mode->name, .synopsis = synopsis, .usage = usage_of_mode, .opts = opts};
  return bench_args(&b, argc, argv);
}

/* ---- one workload: both sides, alternately ------------------------------------------------------ */

/* sgemm (fft false) or fft on the context's device `device` (id `id`). */
static int bench_workload(const gpu_mode *mode, const gpu_options *o, loom_context *ctx, int32_t device,
                          const char *id, bool fft, gpu_result *r) {
  int64_t n = fft ? (int64_t)1 << o->fft_log2 : o->n;
  char text[256];
  if (fft)
    snprintf(text, sizeof text, "graph fft(x: c64[%lld]) { f = fft x axis=0\n return f }", (long long)n);
  else
    snprintf(text, sizeof text,
             "graph sgemm(a: f32[%lld,%lld], b: f32[%lld,%lld]) { c = dot a b\n return c }", (long long)n,
             (long long)n, (long long)n, (long long)n);
  int64_t bytes = fft ? n * 8 : n * n * 4;
  *r = (gpu_result){.what = fft ? "fft" : "sgemm",
                    .loom_s = 1e30,
                    .lib_s = 1e30,
                    .lib_device_s = 1e30,
                    .flops = fft ? 5.0 * (double)n * o->fft_log2 : 2.0 * (double)n * n * n};
  bench_op L;
  gpu_lib *S = NULL;
  int rc = bench_op_open(&L, text, 1) || mode->open(&S, ctx, device, bytes, fft ? 8 : bytes, bytes);
  void *result = rc ? NULL : malloc((size_t)bytes);
  rc |= !result;
  for (int32_t i = 0; !rc && i <= o->reps; i++) { /* run 0 warms up (programs, plans, handles) */
    double warm = 1e30, warm_d = 1e30;
    double *best = i ? &r->lib_s : &warm, *best_d = i ? &r->lib_device_s : &warm_d;
    double tl = bench_op_run(ctx, id, &L);
    rc |= tl < 0;
    gpu_keep(i ? &r->loom_s : &warm, tl);
    gpu_fft shape = {1, n, false};
    rc |= fft ? mode->fft(S, &shape, L.in[0].data, result, best, best_d)
              : mode->gemm(S, LOOM_F32, n, L.in[0].data, L.in[1].data, result, best, best_d);
  }
  if (r->lib_device_s >= 1e30) r->lib_device_s = 0;
  free(result);
  if (S) mode->close(S);
  bench_op_close(&L);
  return rc;
}

/* ---- the figures -------------------------------------------------------------------------------- */

static void print_result(const gpu_mode *mode, const char *id, const gpu_result *r, const gpu_options *o) {
  bool fft = strcmp(r->what, "fft") == 0;
  const char *lib = mode->lib_names[fft];
  char size[64];
  if (fft)
    snprintf(size, sizeof size, "2^%d points", (int)o->fft_log2);
  else
    snprintf(size, sizeof size, "%lld^3", (long long)o->n);
  printf("  %-6s %-6s %-12s Loom %9.3f ms (%6.1f GFLOPS)   %-7s %9.3f ms (%6.1f GFLOPS)   ratio %.2f", id,
         r->what, size, r->loom_s * 1e3, r->flops / r->loom_s * 1e-9, lib, r->lib_s * 1e3,
         r->flops / r->lib_s * 1e-9, r->lib_s / r->loom_s);
  if (r->lib_device_s > 0)
    printf("   (%s on the device alone: %.3f ms, %.1f GFLOPS)", lib, r->lib_device_s * 1e3,
           r->flops / r->lib_device_s * 1e-9);
  printf("\n");
}

static void json_result(loom__json *j, const char *id, const char *name, const gpu_result *r) {
  loom__json_begin_object(j);
  loom__json_kv_string(j, "device", id);
  loom__json_kv_string(j, "name", name);
  loom__json_kv_string(j, "workload", r->what);
  loom__json_kv_double(j, "loom_seconds", r->loom_s);
  loom__json_kv_double(j, "library_seconds", r->lib_s);
  if (r->lib_device_s > 0) loom__json_kv_double(j, "library_device_seconds", r->lib_device_s);
  loom__json_kv_double(j, "ratio", r->lib_s / r->loom_s);
  loom__json_end_object(j);
}

/* ---- the devices -------------------------------------------------------------------------------- */

/* The device's id the mode uses: its own when it has the mode's prefix, else such an alias
 * ("ocl0" of a GPU listed as cuda0); false when it has none. */
static bool mode_id(const gpu_mode *mode, const loom_device_info *d, char *id, size_t size) {
  size_t pre = strlen(mode->id_prefix);
  if (strncmp(d->id, mode->id_prefix, pre) == 0) return snprintf(id, size, "%s", d->id) > 0;
  for (const char *p = d->also_known_as; p && *p;) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len > pre && len < size && strncmp(p, mode->id_prefix, pre) == 0) {
      memcpy(id, p, len);
      id[len] = '\0';
      return true;
    }
    p = end ? end + 1 : NULL;
  }
  return false;
}

/* Every figure of one device; 1 on a failed run. */
static int bench_device(const gpu_mode *mode, const gpu_options *o, loom_context *ctx, int32_t device,
                        const char *id, const char *name, loom__json *j) {
  printf("%s: %s\n", id, name);
  if (mode->check && mode->check(id)) return 1;
  gpu_result r[2];
  if (bench_workload(mode, o, ctx, device, id, false, &r[0]) ||
      bench_workload(mode, o, ctx, device, id, true, &r[1])) {
    fprintf(stderr, "loom-bench %s: %s: a run failed: %s\n", mode->name, id, loom_last_error());
    return 1;
  }
  for (int32_t k = 0; k < 2; k++) {
    print_result(mode, id, &r[k], o);
    if (j) json_result(j, id, name, &r[k]);
  }
  return mode->extra ? mode->extra(o, ctx, device, id, j) : 0;
}

/* Measures every wanted device; *measured counts them. */
static int bench_devices(const gpu_mode *mode, const gpu_options *o, loom_context *ctx, loom__json *j,
                         int32_t *measured) {
  for (int32_t i = 0; i < loom_context_device_count(ctx); i++) {
    loom_device_info d;
    char id[32];
    if (loom_context_device_info(ctx, i, &d)) return 1;
    if (!(d.backends & mode->backend) || !mode_id(mode, &d, id, sizeof id) ||
        !bench_id_listed(o->devices, id))
      continue;
    if (bench_device(mode, o, ctx, i, id, d.name ? d.name : "", j)) return 1;
    (*measured)++;
  }
  return 0;
}

int gpu_bench_run(const gpu_mode *mode, int argc, char **argv) {
  gpu_options o;
  int rc = parse_args(mode, argc, argv, &o);
  if (rc) return rc < 0 ? 0 : rc;
  loom_context *ctx = NULL;
  if (loom_context_create(NULL, &ctx)) {
    fprintf(stderr, "loom-bench %s: %s\n", mode->name, loom_last_error());
    return 1;
  }
  FILE *jf = o.json ? fopen(o.json, "w") : NULL;
  if (o.json && !jf) {
    fprintf(stderr, "loom-bench %s: cannot write %s\n", mode->name, o.json);
    loom_context_destroy(ctx);
    return 1;
  }
  loom__json j;
  if (jf) {
    loom__json_init(&j, jf, true);
    loom__json_begin_object(&j);
    loom__json_key(&j, mode->name);
    loom__json_begin_array(&j);
  }
  printf("loom-bench %s: best of %d runs, end to end (host -> device -> host); ratio = library / Loom\n",
         mode->name, (int)o.reps);
  int32_t measured = 0;
  rc = bench_devices(mode, &o, ctx, jf ? &j : NULL, &measured);
  if (!rc && measured == 0) {
    printf("no %s device%s", mode->kind, o.devices ? " matches --devices" : " found");
    if (mode->why_none) mode->why_none(ctx);
    printf("\n");
  }
  if (jf) {
    loom__json_end_array(&j);
    loom__json_end_object(&j);
    if (loom__json_finish(&j) || fclose(jf)) rc = 1;
  }
  loom_context_destroy(ctx);
  return rc;
}
