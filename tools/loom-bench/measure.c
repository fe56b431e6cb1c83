/* The measurement layer (measure.h): one-op graphs, one run, and the alternating best-of. */
#include "measure.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

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

/* ---- transfers ------------------------------------------------------------------------------------ */

static void time_memcpy(void *dst, const void *src, int64_t bytes, bench_transfer *t) {
  double s = bench_now();
  memcpy(dst, src, (size_t)bytes);
  bench_keep(&t->memcpy_s, bench_now() - s);
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

int bench_measure_host_transfers(loom_mem_manager *m, int32_t node, const void *src, void *dst, int64_t bytes,
                                 int32_t reps, bench_transfer *t, char *why, size_t why_size) {
  *t = (bench_transfer){0};
  loom_buffer *b = NULL;
  loom_status s = loom_buffer_allocate(m, bytes, LOOM_U8, node, LOOM_MEM_DEVICE_LOCAL, &b);
  for (int32_t r = 0; !s && r <= reps; r++) { /* run 0 warms up */
    time_memcpy(dst, src, bytes, t);
    memset(dst, 0, (size_t)bytes); /* so the check below sees what the read brought */
    double t0 = bench_now();
    s = loom_buffer_write(b, 0, src, bytes);
    double t1 = bench_now();
    if (!s) s = loom_buffer_read(b, 0, dst, bytes);
    double t2 = bench_now();
    if (r > 0 && !s) {
      bench_keep(&t->h2d_s, t1 - t0);
      bench_keep(&t->d2h_s, t2 - t1);
    }
  }
  loom_buffer_free(b);
  return finish(s, src, dst, bytes, "host <-> device", why, why_size);
}

int bench_measure_peer_transfer(loom_mem_manager *m, int32_t a, int32_t b, const void *src, void *dst,
                                int64_t bytes, int32_t reps, bench_transfer *t, char *why, size_t why_size) {
  *t = (bench_transfer){0};
  loom_buffer *on_a = NULL;
  /* Migration off while measuring: otherwise the buffer moves to b after a few reads and the
   * later ones copy nothing. */
  loom_mem_manager_options mo;
  loom_status s = loom_mem_get_options(m, &mo);
  if (!s) s = loom_mem_set_migration_policy(m, LOOM_MEM_POLICY_NONE);
  if (!s) s = loom_buffer_allocate(m, bytes, LOOM_U8, a, LOOM_MEM_DEVICE_LOCAL, &on_a);
  if (!s) s = loom_buffer_write(on_a, 0, src, bytes);
  for (int32_t r = 0; !s && r <= reps; r++) {
    time_memcpy(dst, src, bytes, t);
    loom_mem_handle mh;
    double t0 = bench_now();
    s = loom_buffer_acquire(on_a, b, LOOM_ACCESS_READ, &mh);
    if (!s) s = loom_buffer_release(on_a, &mh);
    if (r > 0 && !s) bench_keep(&t->h2d_s, bench_now() - t0);
  }
  loom_mem_set_migration_policy(m, mo.migration);
  /* the copy lands where a move puts it too: check the bytes there */
  if (!s) s = loom_buffer_migrate(on_a, b);
  if (!s) memset(dst, 0, (size_t)bytes);
  if (!s) s = loom_buffer_read(on_a, 0, dst, bytes);
  loom_buffer_free(on_a);
  return finish(s, src, dst, bytes, "device to device", why, why_size);
}

/* ---- peaks ------------------------------------------------------------------------------------------ */

/* f32 lanes of the host's widest vector unit: cpu0 and CPU OpenCL devices (PoCL) run on it. */
static int host_lanes(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return 16;
  if (__builtin_cpu_supports("avx")) return 8;
#endif
  return 4;
}

double bench_spec_peak_gflops(const loom_device_info *info, char *source, size_t size) {
  int lanes = 0;
  const char *what = "";
  if (size > 0) source[0] = '\0';
  if (info->kind == LOOM_DEVICE_CPU) {
    lanes = host_lanes();
    what = "f32 lanes of the host's vector unit";
  } else if (info->compute_capability_major > 0) {
    int cc = 10 * info->compute_capability_major + info->compute_capability_minor;
    lanes = cc == 70 || cc == 72 || cc == 75 || cc == 80 || cc == 60 ? 64 : 128;
    what = "FP32 lanes per multiprocessor of its compute capability";
  }
  if (lanes == 0 || info->clock_mhz <= 0 || info->compute_units <= 0) return 0;
  snprintf(source, size, "spec: %d MHz x %d units x %d %s x 2", (int)info->clock_mhz,
           (int)info->compute_units, lanes, what);
  return 2.0 * lanes * (double)info->compute_units * info->clock_mhz * 1e-3;
}
