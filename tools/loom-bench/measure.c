/* The measurement layer (measure.h): one-op graphs, one run, and the alternating best-of. */
#include "measure.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "loom/internal/cpu.h"

void bench_op_close(bench_op *op) {
  for (int32_t p = 0; p < op->n_in; p++) loom_tensor_deinit(&op->in[p]);
  loom_graph_destroy(op->g);
  memset(op, 0, sizeof *op);
}

int bench_op_open(bench_op *op, const char *text, uint64_t seed) {
  memset(op, 0, sizeof *op);
  if (loom_graph_parse(text, strlen(text), "bench.lir", &op->g)) return 1;
  int32_t n = loom_graph_param_count(op->g);
  op->n_out = loom_graph_output_count(op->g);
  if (n > BENCH_OP_MAX_IN || op->n_out > 2) {
    loom_graph_destroy(op->g);
    op->g = NULL;
    return 1;
  }
  for (; op->n_in < n; op->n_in++) {
    loom_tensor *t = &op->in[op->n_in];
    if (loom_tensor_init(t, loom_value_type(op->g, loom_graph_param_at(op->g, op->n_in))) ||
        loom_tensor_fill_random(t, seed, (uint64_t)op->n_in)) {
      op->n_in++;
      bench_op_close(op);
      return 1;
    }
  }
  return 0;
}

double bench_op_run(loom_context *ctx, const char *id, const bench_op *op) {
  loom_tensor out[2];
  memset(out, 0, sizeof out);
  double t = bench_now();
  if (loom_graph_run_on_device(ctx, id, op->g, op->in, op->n_in, out, op->n_out, NULL)) return -1;
  t = bench_now() - t;
  for (int32_t i = 0; i < op->n_out; i++) loom_tensor_deinit(&out[i]);
  return t;
}

int bench_measure(loom_context *ctx, const char *id, const bench_op *op, const bench_vendor *v, int32_t reps,
                  bench_times *t, char *why, size_t why_size) {
  *t = (bench_times){0};
  for (int32_t r = 0; r <= reps; r++) { /* run 0 warms up: programs built, plans made */
    double tl = bench_op_run(ctx, id, op);
    if (tl < 0) {
      snprintf(why, why_size, "Loom on %s: %s", id, loom_last_error());
      return 1;
    }
    if (r > 0 || reps == 0) bench_keep(&t->loom_s, tl);
    if (!v) continue;
    double tv = v->run(v->state, op, why, why_size);
    if (tv < 0) return 1;
    if (r > 0 || reps == 0) bench_keep(&t->vendor_s, tv);
  }
  return 0;
}

/* ---- samples ------------------------------------------------------------------------------------ */

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median_of_sorted(const double *v, int32_t n) {
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void bench_sample_summarize(bench_sample *s) {
  if (s->n <= 0) {
    s->min = s->median = s->mad = 0;
    return;
  }
  double v[BENCH_MAX_SAMPLES];
  memcpy(v, s->s, (size_t)s->n * sizeof v[0]);
  qsort(v, (size_t)s->n, sizeof v[0], by_value);
  s->min = v[0];
  s->median = median_of_sorted(v, s->n);
  for (int32_t i = 0; i < s->n; i++) v[i] = fabs(v[i] - s->median);
  qsort(v, (size_t)s->n, sizeof v[0], by_value);
  s->mad = median_of_sorted(v, s->n);
}

void bench_sample_add(bench_sample *s, double t) {
  if (s->n < BENCH_MAX_SAMPLES) s->s[s->n++] = t;
  bench_sample_summarize(s);
}

double bench_sample_dispersion(const bench_sample *s) {
  return s->n > 0 && s->median > 0 ? s->mad / s->median : 0;
}

#define BENCH_WARM_S 0.01 /* seconds of warm-up runs of a case, at least one run */

/* Whether one side's spread looks known: its dispersion at the target, and its fastest run not
 * far below its median. PoCL's kernels run in two modes (1.5 ms and 3 ms for one conv2d, in
 * blocks of runs); five runs in the slow mode have a small MAD, and a report that stopped there
 * differed 2x from its twin. A fastest run more than 10 targets under the median is a mode not
 * yet sampled, so the case goes on (to its budget or maximum) and the median and minimum see it. */
static bool side_settled(const bench_sample *s, double target) {
  if (bench_sample_dispersion(s) > target) return false;
  return s->median <= 0 || (s->median - s->min) / s->median <= 10 * target;
}

/* Whether the samples so far are enough: `added` (this call's) at least the minimum, then the
 * first of the maximum (all of a's), the budget (this call's) or every side settled. */
static bool spread_known(const bench_stop *st, int32_t added, const bench_sample *a, const bench_sample *b,
                         double spent) {
  int32_t most = st->max_samples < BENCH_MAX_SAMPLES ? st->max_samples : BENCH_MAX_SAMPLES;
  if (a->n >= most) return true;
  if (added < st->min_samples) return false;
  if (spent >= st->budget_s) return true;
  return side_settled(a, st->target) && (!b || side_settled(b, st->target));
}

/* Loom's side of one sample: stop->loom_runs runs in a row (1 for the warm-up). */
static double loom_sample(loom_context *ctx, const char *id, const bench_op *op, int32_t runs) {
  double sum = 0;
  for (int32_t k = 0; k < (runs > 1 ? runs : 1); k++) {
    double t = bench_op_run(ctx, id, op);
    if (t < 0) return -1;
    sum += t;
  }
  return sum;
}

int bench_measure_samples(loom_context *ctx, const char *id, const bench_op *op, const bench_vendor *v,
                          const bench_stop *stop, bench_sample *loom, bench_sample *vendor, char *why,
                          size_t why_size) {
  if (loom->n >= stop->max_samples || loom->n >= BENCH_MAX_SAMPLES)
    return 0; /* an earlier call made them all */
  int32_t added = 0;
  double spent = 0, warm = 0;
  for (bool warming = true;;) {
    double t0 = bench_now();
    double tl = loom_sample(ctx, id, op, warming ? 1 : stop->loom_runs);
    if (tl < 0) {
      snprintf(why, why_size, "Loom on %s: %s", id, loom_last_error());
      return 1;
    }
    double tv = v ? v->run(v->state, op, why, why_size) : 0;
    if (tv < 0) return 1;
    /* Warm-up: programs built, plans made, then runs until BENCH_WARM_S have passed, so that
     * a microsecond case does not take its first samples with cold caches and a clock still
     * rising (the first case of a process once had a median 2.5 times its later runs'). */
    if (warming) {
      warm += bench_now() - t0;
      warming = warm < BENCH_WARM_S;
      continue;
    }
    spent += bench_now() - t0;
    bench_sample_add(loom, tl);
    if (v) bench_sample_add(vendor, tv);
    if (spread_known(stop, ++added, loom, v ? vendor : NULL, spent)) return 0;
  }
}

/* ---- transfers ------------------------------------------------------------------------------------ */

static void time_memcpy(void *dst, const void *src, int64_t bytes, bench_transfer *t, bool timed) {
  double s = bench_now();
  memcpy(dst, src, (size_t)bytes);
  if (timed) bench_sample_add(&t->memcpy, bench_now() - s);
  t->memcpy_s = t->memcpy.min;
}

/* A fixed number of timed runs, as the modes that keep the best of --reps want. */
static bench_stop fixed_reps(int32_t reps) {
  return (bench_stop){.min_samples = reps, .max_samples = reps, .budget_s = 1e30, .loom_runs = 1};
}

/* The status as the caller's answer: the message of a failed call, or of bytes that differ. */
static int finish(loom_status s, const void *src, const void *dst, int64_t bytes, const char *what, char *why,
                  size_t why_size) {
  if (!s && memcmp(src, dst, (size_t)bytes) != 0) {
    snprintf(why, why_size, "%s: the bytes read back differ", what);
    return 1;
  }
  if (s) snprintf(why, why_size, "%s: %s", what, loom_last_error());
  return s != LOOM_OK;
}

int bench_measure_host_transfers_until(loom_mem_manager *m, int32_t node, const void *src, void *dst,
                                       int64_t bytes, const bench_stop *stop, bench_transfer *t, char *why,
                                       size_t why_size) {
  memset(t, 0, sizeof *t);
  loom_buffer *b = NULL;
  loom_status s = loom_buffer_allocate(m, bytes, LOOM_U8, node, LOOM_MEM_DEVICE_LOCAL, &b);
  double spent = 0;
  for (int32_t r = 0; !s; r++) { /* run 0 warms up */
    double t0 = bench_now();
    time_memcpy(dst, src, bytes, t, r > 0);
    memset(dst, 0, (size_t)bytes); /* so the check below sees what the read brought */
    double t1 = bench_now();
    s = loom_buffer_write(b, 0, src, bytes);
    double t2 = bench_now();
    if (!s) s = loom_buffer_read(b, 0, dst, bytes);
    double t3 = bench_now();
    if (r == 0 || s) continue;
    bench_sample_add(&t->h2d, t2 - t1);
    bench_sample_add(&t->d2h, t3 - t2);
    spent += t3 - t0;
    if (spread_known(stop, t->h2d.n, &t->h2d, &t->d2h, spent)) break;
  }
  t->h2d_s = t->h2d.min, t->d2h_s = t->d2h.min;
  loom_buffer_free(b);
  return finish(s, src, dst, bytes, "host <-> device", why, why_size);
}

int bench_measure_host_transfers(loom_mem_manager *m, int32_t node, const void *src, void *dst, int64_t bytes,
                                 int32_t reps, bench_transfer *t, char *why, size_t why_size) {
  bench_stop stop = fixed_reps(reps);
  return bench_measure_host_transfers_until(m, node, src, dst, bytes, &stop, t, why, why_size);
}

int bench_measure_peer_transfer_until(loom_mem_manager *m, int32_t a, int32_t b, const void *src, void *dst,
                                      int64_t bytes, const bench_stop *stop, bench_transfer *t, char *why,
                                      size_t why_size) {
  memset(t, 0, sizeof *t);
  loom_buffer *on_a = NULL;
  /* Migration off while measuring: otherwise the buffer moves to b after a few reads and the
   * later ones copy nothing. */
  loom_mem_manager_options mo;
  loom_status s = loom_mem_get_options(m, &mo);
  if (!s) s = loom_mem_set_migration_policy(m, LOOM_MEM_POLICY_NONE);
  if (!s) s = loom_buffer_allocate(m, bytes, LOOM_U8, a, LOOM_MEM_DEVICE_LOCAL, &on_a);
  if (!s) s = loom_buffer_write(on_a, 0, src, bytes);
  double spent = 0;
  for (int32_t r = 0; !s; r++) {
    time_memcpy(dst, src, bytes, t, r > 0);
    loom_mem_handle mh;
    double t0 = bench_now();
    s = loom_buffer_acquire(on_a, b, LOOM_ACCESS_READ, &mh);
    if (!s) s = loom_buffer_release(on_a, &mh);
    if (r == 0 || s) continue;
    bench_sample_add(&t->h2d, bench_now() - t0);
    spent += bench_now() - t0;
    if (spread_known(stop, t->h2d.n, &t->h2d, NULL, spent)) break;
  }
  t->h2d_s = t->h2d.min;
  loom_mem_set_migration_policy(m, mo.migration);
  /* the copy lands where a move puts it too: check the bytes there */
  if (!s) s = loom_buffer_migrate(on_a, b);
  if (!s) memset(dst, 0, (size_t)bytes);
  if (!s) s = loom_buffer_read(on_a, 0, dst, bytes);
  loom_buffer_free(on_a);
  return finish(s, src, dst, bytes, "device to device", why, why_size);
}

int bench_measure_peer_transfer(loom_mem_manager *m, int32_t a, int32_t b, const void *src, void *dst,
                                int64_t bytes, int32_t reps, bench_transfer *t, char *why, size_t why_size) {
  bench_stop stop = fixed_reps(reps);
  return bench_measure_peer_transfer_until(m, a, b, src, dst, bytes, &stop, t, why, why_size);
}

/* ---- peaks ------------------------------------------------------------------------------------------ */

double bench_spec_peak_gflops(const loom_device_info *info, char *source, size_t size) {
  if (size > 0) source[0] = '\0';
  if (info->clock_mhz <= 0 || info->compute_units <= 0) return 0;
  if (info->kind == LOOM_DEVICE_CPU) {
    /* cpu0 and CPU OpenCL devices such as PoCL run on the host's cores */
    loom__cpu_uarch u;
    loom__cpu_uarch_host(&u);
    snprintf(source, size, "table: %d MHz x %d cores x %d f32 FLOPs per cycle (%s)", (int)info->clock_mhz,
             (int)info->compute_units, u.flops_per_cycle_f32, u.source);
    return (double)u.flops_per_cycle_f32 * (double)info->compute_units * info->clock_mhz * 1e-3;
  }
  if (info->compute_capability_major <= 0) return 0; /* an OpenCL GPU does not say its lanes */
  int cc = 10 * info->compute_capability_major + info->compute_capability_minor;
  int lanes = cc == 70 || cc == 72 || cc == 75 || cc == 80 || cc == 60 ? 64 : 128;
  snprintf(source, size,
           "spec: %d MHz x %d units x %d FP32 lanes per multiprocessor of its compute capability x 2",
           (int)info->clock_mhz, (int)info->compute_units, lanes);
  return 2.0 * lanes * (double)info->compute_units * info->clock_mhz * 1e-3;
}
