/* loom-bench hmm: host <-> device bandwidth per device node, through the memory manager,
 * for each way the HMM moves data, beside a plain memcpy of the same size in the same run:
 *
 *   explicit    an OpenCL buffer; loom_buffer_write / loom_buffer_read
 *               (clEnqueueWriteBuffer / clEnqueueReadBuffer)
 *   svm-fine    fine-grained SVM; loom_buffer_map, memcpy, unmap (the host touches the SVM)
 *   svm-coarse  coarse-grained SVM; loom_buffer_map (clEnqueueSVMMap), memcpy, unmap
 *
 * Each figure is the best of --reps runs; ratios are against memcpy (1.00 = as fast as a
 * host memcpy). On PoCL every path is host memory underneath, so the ratios show the cost
 * of each API's overhead rather than of a bus.
 *
 * Then, for each ordered pair of device nodes, a buffer read on the second device while it
 * lives on the first: the HMM's copy (device to device where the two share a context, else
 * through host memory) beside the same bytes read to the host and written to the second
 * device by hand (ratio = by hand / HMM). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "loom/device.h"
#include "loom/internal/json.h"
#include "loom/memory.h"
#include "loom/plan.h"
#include "measure.h"

typedef struct options {
  int64_t bytes;
  int reps;
  const char *devices; /* comma-separated node ids, or NULL for every device node */
  const char *json;
} options;

typedef struct path_result {
  const char *path;
  double h2d, d2h; /* best seconds */
  double memcpy_s; /* best plain memcpy, timed in the same runs (the machine may be busy) */
} path_result;

/* Times one plain memcpy of the same size next to each run of a path. */
static void time_memcpy(uint8_t *dst, const uint8_t *src, int64_t bytes, path_result *out) {
  double t = bench_now();
  memcpy(dst, src, (size_t)bytes);
  t = bench_now() - t;
  if (t < out->memcpy_s) out->memcpy_s = t;
}

static void usage(FILE *out) {
  fputs(
      "usage: loom-bench hmm [--size BYTES] [--reps N] [--devices LIST] [--json FILE]\n"
      "\n"
      "Host <-> device bandwidth per device, through the memory manager: explicit copies\n"
      "(OpenCL buffers), fine- and coarse-grained SVM access, beside a plain memcpy; then\n"
      "device to device for each pair of devices, against a copy through the host by hand.\n"
      "\n"
      "  --size BYTES    bytes per transfer (default 64MiB)\n"
      "  --reps N        runs per figure; the best is kept (default 5)\n"
      "  --devices LIST  node ids to measure, as ocl0,ocl1 (default: every device node)\n"
      "  --json FILE     also write the figures as JSON\n",
      out);
}

static int parse_args(int argc, char **argv, options *o) {
  *o = (options){.bytes = 64 << 20, .reps = 5};
  int32_t reps = 5;
  const bench_opt opts[] = {
      /* a transfer of nothing measures nothing: at least one byte */
      BENCH_OPT_BYTES("size", &o->bytes, 1, INT64_MAX),
      BENCH_OPT_INT("reps", BENCH_I32, &reps, 1, 1000, "a count from 1 to 1000"),
      BENCH_OPT_TEXT("devices", &o->devices, "a list of devices"),
      BENCH_OPT_TEXT("json", &o->json, "a file name"),
      BENCH_OPT_END,
  };
  bench_cli b = {.mode = "hmm",
                 .synopsis = "loom-bench hmm [--size BYTES] [--reps N] [--devices LIST] [--json FILE]",
                 .usage = usage,
                 .opts = opts};
  int rc = bench_args(&b, argc, argv);
  o->reps = reps;
  return rc;
}

/* A check of the benchmark's own that failed (the data read back differs): what it was. The
 * messages print it where loom_last_error() says why one of Loom's calls failed. */
static const char *check_failed;

static loom_status data_differs(const char *what) {
  check_failed = what;
  return LOOM_ERR_INTERNAL;
}

static const char *why_failed(void) {
  const char *why = check_failed ? check_failed : loom_last_error();
  check_failed = NULL;
  return why;
}

static bool wanted(const options *o, const char *id) {
  if (!o->devices) return true;
  size_t n = strlen(id);
  for (const char *p = o->devices; (p = strstr(p, id)) != NULL; p += n)
    if ((p == o->devices || p[-1] == ',') && (p[n] == ',' || p[n] == '\0')) return true;
  return false;
}

/* loom_buffer_write / read of a device-local buffer: the measurement layer's (measure.h), so
 * the suite and this mode measure it alike. */
static loom_status measure_explicit(loom_mem_manager *m, int32_t node, const options *o, uint8_t *src,
                                    uint8_t *dst, path_result *out) {
  static char why[256];
  bench_transfer t;
  if (bench_measure_host_transfers(m, node, src, dst, o->bytes, o->reps, &t, why, sizeof why))
    return data_differs(why);
  out->h2d = t.h2d_s;
  out->d2h = t.d2h_s;
  out->memcpy_s = t.memcpy_s;
  return LOOM_OK;
}

/* Map, memcpy, unmap on an SVM buffer. Between runs the device takes the buffer for writing,
 * so each map sees device-owned memory, as after a kernel. */
static loom_status measure_svm(loom_mem_manager *m, int32_t node, uint32_t flags, const options *o,
                               uint8_t *src, uint8_t *dst, path_result *out) {
  loom_buffer *b = NULL;
  loom_status s = loom_buffer_allocate(m, o->bytes, LOOM_U8, node, flags, &b);
  out->h2d = out->d2h = out->memcpy_s = 1e30;
  for (int r = 0; s == LOOM_OK && r < o->reps; r++) {
    void *p = NULL;
    loom_mem_handle h;
    time_memcpy(dst, src, o->bytes, out);
    double t = bench_now();
    s = loom_buffer_map(b, LOOM_ACCESS_WRITE | LOOM_ACCESS_DISCARD, &p);
    if (s == LOOM_OK) {
      memcpy(p, src, (size_t)o->bytes);
      s = loom_buffer_unmap(b, p);
    }
    double w = bench_now() - t;
    if (s == LOOM_OK) s = loom_buffer_acquire(b, node, LOOM_ACCESS_READ | LOOM_ACCESS_WRITE, &h);
    if (s == LOOM_OK) s = loom_buffer_release(b, &h);
    t = bench_now();
    if (s == LOOM_OK) s = loom_buffer_map(b, LOOM_ACCESS_READ, &p);
    if (s == LOOM_OK) {
      memcpy(dst, p, (size_t)o->bytes);
      s = loom_buffer_unmap(b, p);
    }
    double rd = bench_now() - t;
    if (w < out->h2d) out->h2d = w;
    if (rd < out->d2h) out->d2h = rd;
  }
  if (s == LOOM_OK && memcmp(src, dst, (size_t)o->bytes) != 0)
    s = data_differs("SVM access: the data read back differs");
  loom_buffer_free(b);
  return s;
}

typedef struct pair_result {
  char from[16], to[16];
  double hmm_s, by_hand_s, memcpy_s; /* best seconds */
  bool peer;                         /* the HMM copied without the host */
} pair_result;

/* A buffer on node a acquired for reading on node b (policy none: a copy for the access,
 * made and dropped each time), the release waiting for b's queue, against a read to the host
 * and a write into a buffer on b. */
static loom_status measure_pair(loom_mem_manager *m, int32_t a, int32_t b, const options *o, uint8_t *src,
                                uint8_t *dst, pair_result *out) {
  loom_buffer *on_a = NULL, *on_b = NULL;
  out->hmm_s = out->by_hand_s = out->memcpy_s = 1e30;
  loom_mem_node_stats before, after;
  loom_status s = loom_buffer_allocate(m, o->bytes, LOOM_U8, a, LOOM_MEM_DEVICE_LOCAL, &on_a);
  if (s == LOOM_OK) s = loom_buffer_allocate(m, o->bytes, LOOM_U8, b, LOOM_MEM_DEVICE_LOCAL, &on_b);
  if (s == LOOM_OK) s = loom_buffer_write(on_a, 0, src, o->bytes);
  if (s == LOOM_OK) s = loom_mem_stats(m, b, &before);
  for (int r = 0; s == LOOM_OK && r < o->reps; r++) {
    path_result mc = {.memcpy_s = 1e30};
    time_memcpy(dst, src, o->bytes, &mc);
    if (mc.memcpy_s < out->memcpy_s) out->memcpy_s = mc.memcpy_s;
    loom_mem_handle h;
    double t = bench_now();
    s = loom_buffer_acquire(on_a, b, LOOM_ACCESS_READ, &h);
    if (s == LOOM_OK) s = loom_buffer_release(on_a, &h);
    double t_hmm = bench_now() - t;
    t = bench_now();
    if (s == LOOM_OK) s = loom_buffer_read(on_a, 0, dst, o->bytes);
    if (s == LOOM_OK) s = loom_buffer_write(on_b, 0, dst, o->bytes);
    double t_hand = bench_now() - t;
    if (t_hmm < out->hmm_s) out->hmm_s = t_hmm;
    if (t_hand < out->by_hand_s) out->by_hand_s = t_hand;
  }
  if (s == LOOM_OK) s = loom_mem_stats(m, b, &after);
  out->peer = s == LOOM_OK && after.peer_bytes_in > before.peer_bytes_in;
  /* The HMM's copy lands where a move puts it too: check the bytes there. */
  if (s == LOOM_OK) s = loom_buffer_migrate(on_a, b);
  if (s == LOOM_OK) memset(dst, 0, (size_t)o->bytes);
  if (s == LOOM_OK) s = loom_buffer_read(on_a, 0, dst, o->bytes);
  if (s == LOOM_OK && memcmp(src, dst, (size_t)o->bytes) != 0)
    s = data_differs("device to device: the data read back differs");
  loom_buffer_free(on_a);
  loom_buffer_free(on_b);
  return s;
}

static double gbps(int64_t bytes, double seconds) {
  return seconds > 0 ? (double)bytes / seconds / 1e9 : 0;
}

static void print_row(const char *id, const path_result *p, int64_t bytes) {
  printf("%-8s %-11s %9.2f %9.2f %9.2f %10.2f %10.2f\n", id, p->path, gbps(bytes, p->h2d),
         gbps(bytes, p->d2h), gbps(bytes, p->memcpy_s), p->memcpy_s / p->h2d, p->memcpy_s / p->d2h);
}

static void json_paths(loom__json *j, const path_result *paths, int n, int64_t bytes) {
  loom__json_key(j, "paths");
  loom__json_begin_array(j);
  for (int i = 0; i < n; i++) {
    loom__json_begin_object(j);
    loom__json_kv_string(j, "path", paths[i].path);
    loom__json_kv_double(j, "h2d_gbps", gbps(bytes, paths[i].h2d));
    loom__json_kv_double(j, "d2h_gbps", gbps(bytes, paths[i].d2h));
    loom__json_kv_double(j, "memcpy_gbps", gbps(bytes, paths[i].memcpy_s));
    loom__json_kv_double(j, "h2d_vs_memcpy", paths[i].memcpy_s / paths[i].h2d);
    loom__json_kv_double(j, "d2h_vs_memcpy", paths[i].memcpy_s / paths[i].d2h);
    loom__json_end_object(j);
  }
  loom__json_end_array(j);
}

/* Measures every path one device node offers; returns how many were measured. */
static int measure_node(loom_mem_manager *m, int32_t node, const loom_mem_node_info *info, const options *o,
                        uint8_t *src, uint8_t *dst, path_result paths[3], loom_status *out_status) {
  int n = 0;
  loom_status s = LOOM_OK;
  paths[n].path = "explicit";
  if ((s = measure_explicit(m, node, o, src, dst, &paths[n])) == LOOM_OK) n++;
  if (s == LOOM_OK && (info->storages & LOOM_MEM_STORAGE_BIT(LOOM_MEM_STORAGE_SVM_FINE))) {
    paths[n].path = "svm-fine";
    if ((s = measure_svm(m, node, LOOM_MEM_SVM_FINE, o, src, dst, &paths[n])) == LOOM_OK) n++;
  }
  if (s == LOOM_OK && (info->storages & LOOM_MEM_STORAGE_BIT(LOOM_MEM_STORAGE_SVM_COARSE))) {
    paths[n].path = "svm-coarse";
    if ((s = measure_svm(m, node, LOOM_MEM_SVM_COARSE, o, src, dst, &paths[n])) == LOOM_OK) n++;
  }
  *out_status = s;
  return n;
}

/* Every ordered pair of the device nodes measured. */
static int run_pairs(loom_mem_manager *m, const options *o, uint8_t *src, uint8_t *dst, loom__json *j) {
  int32_t nodes[64], n = 0;
  for (int32_t node = 0; node < loom_mem_node_count(m) && n < 64; node++) {
    loom_mem_node_info info;
    if (loom_mem_node_info_get(m, node, &info) == LOOM_OK && info.kind == LOOM_MEMORY_DEVICE &&
        wanted(o, info.id))
      nodes[n++] = node;
  }
  if (n < 2) return 0;
  printf(
      "\ndevice to device: a buffer on one device read on another; ratio = time by hand (read to the\n"
      "host, write to the device) / time through the HMM\n");
  printf("%-8s %-8s %-10s %9s %12s %9s %8s\n", "from", "to", "hmm path", "hmm GB/s", "by hand GB/s", "memcpy",
         "ratio");
  if (j) {
    loom__json_key(j, "pairs");
    loom__json_begin_array(j);
  }
  int rc = 0;
  for (int32_t x = 0; x < n; x++)
    for (int32_t y = 0; y < n; y++) {
      if (x == y) continue;
      pair_result r;
      loom_mem_node_info ia, ib;
      loom_mem_node_info_get(m, nodes[x], &ia);
      loom_mem_node_info_get(m, nodes[y], &ib);
      if (measure_pair(m, nodes[x], nodes[y], o, src, dst, &r) != LOOM_OK) {
        fprintf(stderr, "loom-bench hmm: %s -> %s: %s\n", ia.id, ib.id, why_failed());
        rc = 1;
        continue;
      }
      const char *path = r.peer ? "peer" : "via host";
      printf("%-8s %-8s %-10s %9.2f %12.2f %9.2f %8.2f\n", ia.id, ib.id, path, gbps(o->bytes, r.hmm_s),
             gbps(o->bytes, r.by_hand_s), gbps(o->bytes, r.memcpy_s), r.by_hand_s / r.hmm_s);
      if (j) {
        loom__json_begin_object(j);
        loom__json_kv_string(j, "from", ia.id);
        loom__json_kv_string(j, "to", ib.id);
        loom__json_kv_string(j, "path", path);
        loom__json_kv_double(j, "hmm_gbps", gbps(o->bytes, r.hmm_s));
        loom__json_kv_double(j, "by_hand_gbps", gbps(o->bytes, r.by_hand_s));
        loom__json_kv_double(j, "memcpy_gbps", gbps(o->bytes, r.memcpy_s));
        loom__json_kv_double(j, "by_hand_vs_hmm", r.by_hand_s / r.hmm_s);
        loom__json_end_object(j);
      }
    }
  if (j) loom__json_end_array(j);
  return rc;
}

static int run(loom_mem_manager *m, const options *o, uint8_t *src, uint8_t *dst, loom__json *j) {
  char size[32];
  printf(
      "loom-bench hmm: %s per transfer, best of %d; ratio = memcpy time / path time, memcpy timed in the\n"
      "same runs (1.00 = as fast as a host memcpy)\n",
      loom_bytes_format(o->bytes, size, sizeof size), o->reps);
  printf("%-8s %-11s %9s %9s %9s %10s %10s\n", "device", "path", "h2d GB/s", "d2h GB/s", "memcpy",
         "h2d ratio", "d2h ratio");
  if (j) {
    loom__json_key(j, "devices");
    loom__json_begin_array(j);
  }
  int measured = 0, rc = 0;
  for (int32_t node = 0; node < loom_mem_node_count(m); node++) {
    loom_mem_node_info info;
    if (loom_mem_node_info_get(m, node, &info) != LOOM_OK || info.kind != LOOM_MEMORY_DEVICE ||
        !wanted(o, info.id))
      continue;
    path_result paths[3];
    loom_status s;
    int n = measure_node(m, node, &info, o, src, dst, paths, &s);
    for (int i = 0; i < n; i++) print_row(info.id, &paths[i], o->bytes);
    if (s != LOOM_OK) {
      fprintf(stderr, "loom-bench hmm: %s: %s\n", info.id, why_failed());
      rc = 1;
    }
    if (j) {
      loom__json_begin_object(j);
      loom__json_kv_string(j, "id", info.id);
      json_paths(j, paths, n, o->bytes);
      loom__json_end_object(j);
    }
    measured++;
  }
  if (j) loom__json_end_array(j);
  if (measured == 0) printf("(no device node to measure%s)\n", o->devices ? " among --devices" : "");
  return run_pairs(m, o, src, dst, j) ? 1 : rc;
}

int loom_bench_hmm(int argc, char **argv) {
  options o;
  int rc = parse_args(argc, argv, &o);
  if (rc) return rc < 0 ? 0 : rc;
  loom_context *ctx = NULL;
  if (loom_context_create(NULL, &ctx) != LOOM_OK) {
    fprintf(stderr, "loom-bench hmm: %s\n", loom_last_error());
    return 1;
  }
  loom_mem_manager_options mo;
  loom_mem_manager_options_init(&mo);
  mo.mode = LOOM_MEM_MODE_MANUAL;
  mo.migration = LOOM_MEM_POLICY_NONE;
  mo.limits = "";
  loom_mem_manager *m = NULL;
  uint8_t *src = malloc((size_t)o.bytes), *dst = malloc((size_t)o.bytes);
  FILE *jf = NULL;
  loom__json j;
  if (!src || !dst || loom_mem_manager_create(ctx, &mo, &m) != LOOM_OK) {
    fprintf(stderr, "loom-bench hmm: %s\n", src && dst ? loom_last_error() : "out of memory");
    rc = 1;
  } else if (o.json && !(jf = fopen(o.json, "w"))) {
    fprintf(stderr, "loom-bench hmm: cannot write '%s'\n", o.json);
    rc = 1;
  } else {
    for (int64_t i = 0; i < o.bytes; i++) src[i] = (uint8_t)(i * 131 + 7);
    if (jf) {
      loom__json_init(&j, jf, true);
      loom__json_begin_object(&j);
      loom__json_kv_string(&j, "mode", "hmm");
      loom__json_kv_int64(&j, "bytes", o.bytes);
      loom__json_kv_int64(&j, "reps", o.reps);
    }
    rc = run(m, &o, src, dst, jf ? &j : NULL);
    if (jf) {
      loom__json_end_object(&j);
      if (loom__json_finish(&j) != LOOM_OK) rc = 1;
      fclose(jf);
    }
  }
  free(src);
  free(dst);
  loom_mem_manager_destroy(m);
  loom_context_destroy(ctx);
  return rc;
}
