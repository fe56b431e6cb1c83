/* loom-tool-helper: what the shell-level tests of loom-run need and NumPy would otherwise
 * provide (the tests must not depend on Python).
 *
 *   loom-tool-helper fixtures DIR
 *       writes the .npy inputs tests/tools.cmake feeds to loom-run (see write_fixtures)
 *   loom-tool-helper knn-check OUT_DIR (--seed SEED GRAPH.lir | --in X.npy Y.npy)
 *       checks OUT_DIR/val.npy and OUT_DIR/idx.npy, a run of a kNN graph such as
 *       examples/knn.lir, against brute force in float64; with --seed the inputs are
 *       regenerated from GRAPH.lir's parameters as loom-run --random SEED made them
 *   loom-tool-helper npy-equal A.npy B.npy
 *       exit 0 when both files hold the same type and bytes (either may be
 *       FILE.safetensors:TENSOR, here and in npy-close)
 *   loom-tool-helper npy-close A.npy B.npy [RTOL [ATOL]]
 *       exit 0 when both hold the same type and every element of B is within ATOL + RTOL |a| of
 *       A's (floats and complex parts; NaN matches NaN), integers and bool exactly; the defaults
 *       are 1e-4 and 1e-5 (IR.md's tolerance for f32 results). ATOL written "Nmax" is N times
 *       the largest |a| (a normwise bound, for results such as chained FFTs)
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../knn_ref.h"
#include "io/random.h"
#include "loom/io.h"
#include "loom/loom.h"

static int fail(const char *what) {
  fprintf(stderr, "loom-tool-helper: %s: %s\n", what, loom_last_error());
  return 1;
}

static int save(const char *dir, const char *name, loom_dtype dtype, int64_t rows, int64_t cols,
                uint64_t seed) {
  char path[1024];
  int64_t dims[2] = {rows, cols};
  loom_type type;
  loom_tensor t;
  snprintf(path, sizeof path, "%s/%s", dir, name);
  if (loom_type_make(dtype, 2, dims, &type) || loom_tensor_init(&t, &type)) return fail(name);
  loom__tensor_fill_random(&t, seed, 0);
  int rc = loom_tensor_save_npy(path, &t) ? fail(path) : 0;
  loom_tensor_deinit(&t);
  return rc;
}

/* A .safetensors file holding one f32 tensor `name` (rows x cols, seeded as save's). */
static int save_st(const char *dir, const char *file, const char *name, int64_t rows, int64_t cols,
                   uint64_t seed) {
  char path[1024];
  int64_t dims[2] = {rows, cols};
  loom_type type;
  loom_tensor t;
  snprintf(path, sizeof path, "%s/%s", dir, file);
  if (loom_type_make(LOOM_F32, 2, dims, &type) || loom_tensor_init(&t, &type)) return fail(file);
  loom__tensor_fill_random(&t, seed, 0);
  int rc = loom_safetensors_save(path, &name, &t, 1) ? fail(path) : 0;
  loom_tensor_deinit(&t);
  return rc;
}

/* Raw bytes, for the broken files. */
static int write_raw(const char *dir, const char *name, const void *data, size_t n) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f) return 1;
  size_t w = fwrite(data, 1, n, f);
  return (fclose(f) != 0 || w != n) ? 1 : 0;
}

/* A .npy 1.0 file whose header is `dict` and with `n_data` zero bytes of data. */
static int write_npy_raw(const char *dir, const char *name, const char *dict, size_t n_data) {
  unsigned char buf[512] = {0};
  size_t hlen = strlen(dict);
  memcpy(buf, "\x93NUMPY\x01\x00", 8);
  buf[8] = (unsigned char)hlen;
  buf[9] = 0;
  memcpy(buf + 10, dict, hlen);
  return write_raw(dir, name, buf, 10 + hlen + n_data);
}

/* Inputs for tests/tools/data/small.lir (x: f32[4,3], y: f32[5,3]), good and bad. */
static int write_fixtures(const char *dir) {
  int rc = 0;
  rc |= save(dir, "x.npy", LOOM_F32, 4, 3, 1);
  rc |= save(dir, "y.npy", LOOM_F32, 5, 3, 2);
  rc |= save(dir, "x_wrong_shape.npy", LOOM_F32, 5, 3, 3);
  rc |= save(dir, "x_wrong_dtype.npy", LOOM_F64, 4, 3, 4);
  rc |= save(dir, "x_wrong_both.npy", LOOM_I32, 2, 2, 5);
  rc |= write_npy_raw(dir, "x_truncated.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 3), }\n",
                      12);
  rc |=
      write_npy_raw(dir, "x_fortran.npy", "{'descr': '<f4', 'fortran_order': True, 'shape': (4, 3), }\n", 48);
  rc |= write_npy_raw(dir, "x_bad_header.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (4 3), }\n",
                      48);
  rc |= write_raw(dir, "x_bad_magic.npy", "not a numpy file at all", 23);
  rc |= save_st(dir, "x_only.safetensors", "x", 4, 3, 1);
  /* a header length (1000) past the end of the file */
  rc |= write_raw(dir, "bad_length.safetensors", "\xe8\x03\0\0\0\0\0\0{}", 10);
  return rc;
}

/* A .npy file, or FILE.safetensors:TENSOR. */
static int load(const char *path, loom_tensor *t) {
  const char *colon = strstr(path, ".safetensors:");
  if (!colon) return loom_tensor_load_npy(path, t) ? fail(path) : 0;
  char file[1024];
  snprintf(file, sizeof file, "%.*s", (int)(colon - path + strlen(".safetensors")), path);
  const char *name = colon + strlen(".safetensors:");
  loom_safetensors *st = NULL;
  if (loom_safetensors_open(file, &st)) return fail(file);
  int32_t i = loom_safetensors_find(st, name);
  int rc = i < 0 ? (fprintf(stderr, "loom-tool-helper: %s has no tensor '%s'\n", file, name), 1)
           : loom_safetensors_load(st, i, t) ? fail(path)
                                             : 0;
  loom_safetensors_close(st);
  return rc;
}

/* The kNN graph's inputs as loom-run --random SEED made them: each parameter of the graph
 * filled with stream = its index. */
static int regenerate(const char *graph_path, const char *seed_text, loom_tensor *x, loom_tensor *y) {
  loom_graph *g = NULL;
  if (loom_graph_load(graph_path, &g)) return fail(graph_path);
  uint64_t seed = strtoull(seed_text, NULL, 10);
  int rc = loom_graph_param_count(g) == 2 ? 0 : 1;
  loom_tensor *ts[2] = {x, y};
  for (int32_t p = 0; !rc && p < 2; p++) {
    if (loom_tensor_init(ts[p], loom_value_type(g, loom_graph_param_at(g, p))))
      rc = fail("inputs");
    else
      loom__tensor_fill_random(ts[p], seed, (uint64_t)p);
  }
  loom_graph_destroy(g);
  return rc;
}

static int knn_main(int argc, char **argv) {
  if (argc != 6 || (strcmp(argv[3], "--seed") != 0 && strcmp(argv[3], "--in") != 0)) {
    fprintf(stderr, "usage: loom-tool-helper knn-check OUT_DIR (--seed SEED GRAPH.lir | --in X.npy Y.npy)\n");
    return 2;
  }
  loom_tensor x = {0}, y = {0}, val = {0}, idx = {0};
  char path[1024];
  snprintf(path, sizeof path, "%s/val.npy", argv[2]);
  int rc = load(path, &val);
  snprintf(path, sizeof path, "%s/idx.npy", argv[2]);
  if (!rc) rc = load(path, &idx);
  if (!rc && strcmp(argv[3], "--seed") == 0)
    rc = regenerate(argv[5], argv[4], &x, &y);
  else if (!rc)
    rc = load(argv[4], &x) || load(argv[5], &y);
  if (!rc &&
      (val.type.rank != 2 || idx.type.rank != 2 || val.type.dtype != LOOM_F32 || idx.type.dtype != LOOM_I64 ||
       x.type.dtype != LOOM_F32 || y.type.dtype != LOOM_F32 || x.type.rank != 2 || y.type.rank != 2 ||
       x.type.dims[1] != y.type.dims[1] || x.type.dims[0] != val.type.dims[0] ||
       val.type.dims[0] != idx.type.dims[0] || val.type.dims[1] != idx.type.dims[1])) {
    fprintf(stderr, "loom-tool-helper: kNN inputs and outputs have unexpected types\n");
    rc = 1;
  }
  if (!rc) {
    int64_t n = x.type.dims[0], m = y.type.dims[0], d = x.type.dims[1], k = val.type.dims[1];
    if (knn_check(x.data, y.data, n, m, d, k, val.data, idx.data))
      rc = 1;
    else
      printf(
          "knn check: %lld rows x %lld neighbours among %lld match brute force in float64 "
          "(tolerance %g relative + %g)\n",
          (long long)n, (long long)k, (long long)m, KNN_REL_TOL, KNN_ABS_TOL);
  }
  loom_tensor_deinit(&x);
  loom_tensor_deinit(&y);
  loom_tensor_deinit(&val);
  loom_tensor_deinit(&idx);
  return rc;
}

static int npy_equal(const char *a_path, const char *b_path) {
  loom_tensor a, b;
  if (load(a_path, &a)) return 1;
  if (load(b_path, &b)) {
    loom_tensor_deinit(&a);
    return 1;
  }
  int64_t bytes = 0;
  bool same = loom_type_equal(&a.type, &b.type) && !loom_type_bytes(&a.type, &bytes) &&
              memcmp(a.data, b.data, (size_t)bytes) == 0;
  if (!same) fprintf(stderr, "loom-tool-helper: %s and %s differ\n", a_path, b_path);
  loom_tensor_deinit(&a);
  loom_tensor_deinit(&b);
  return same ? 0 : 1;
}

static double element(const loom_tensor *t, int64_t i) {
  const void *d = t->data;
  switch (t->type.dtype) {
    case LOOM_BOOL:
      return ((const uint8_t *)d)[i];
    case LOOM_I8:
      return ((const int8_t *)d)[i];
    case LOOM_U8:
      return ((const uint8_t *)d)[i];
    case LOOM_I16:
      return ((const int16_t *)d)[i];
    case LOOM_I32:
      return ((const int32_t *)d)[i];
    case LOOM_I64:
      return (double)((const int64_t *)d)[i];
    case LOOM_F16:
      return loom_f16_to_f32(((const uint16_t *)d)[i]);
    case LOOM_BF16:
      return loom_bf16_to_f32(((const uint16_t *)d)[i]);
    case LOOM_F32:
    case LOOM_C64:
      return ((const float *)d)[i];
    default:
      return ((const double *)d)[i];
  }
}

static int npy_close(const char *a_path, const char *b_path, double rtol, const char *atol_text) {
  loom_tensor a, b;
  if (load(a_path, &a)) return 1;
  if (load(b_path, &b)) {
    loom_tensor_deinit(&a);
    return 1;
  }
  int rc = 0;
  int64_t n = 0;
  if (!loom_type_equal(&a.type, &b.type) || loom_type_elements(&a.type, &n)) {
    fprintf(stderr, "loom-tool-helper: %s and %s have different types\n", a_path, b_path);
    rc = 1;
  }
  bool exact = !loom_dtype_is_float(a.type.dtype) && !loom_dtype_is_complex(a.type.dtype);
  if (loom_dtype_is_complex(a.type.dtype)) n *= 2;
  char *end = NULL;
  double atol = strtod(atol_text, &end);
  if (end && strcmp(end, "max") == 0) {
    double largest = 0;
    for (int64_t i = 0; !rc && i < n; i++)
      if (isfinite(element(&a, i))) largest = fmax(largest, fabs(element(&a, i)));
    atol *= largest;
  }
  for (int64_t i = 0; !rc && i < n; i++) {
    double x = element(&a, i), y = element(&b, i);
    bool ok = exact ? (a.type.dtype == LOOM_I64 ? ((const int64_t *)a.data)[i] == ((const int64_t *)b.data)[i]
                                                : x == y)
              : (isnan(x) || isnan(y)) ? isnan(x) && isnan(y)
              : (isinf(x) || isinf(y)) ? x == y
                                       : fabs(x - y) <= atol + rtol * fabs(x);
    if (!ok) {
      fprintf(stderr,
              "loom-tool-helper: %s and %s differ at element %lld of %lld: %.9g vs %.9g (rtol %g, atol %g)\n",
              a_path, b_path, (long long)i, (long long)n, x, y, rtol, atol);
      rc = 1;
    }
  }
  loom_tensor_deinit(&a);
  loom_tensor_deinit(&b);
  return rc;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "fixtures") == 0) return write_fixtures(argv[2]);
  if (argc >= 2 && strcmp(argv[1], "knn-check") == 0) return knn_main(argc, argv);
  if (argc == 4 && strcmp(argv[1], "npy-equal") == 0) return npy_equal(argv[2], argv[3]);
  if (argc >= 4 && argc <= 6 && strcmp(argv[1], "npy-close") == 0)
    return npy_close(argv[2], argv[3], argc > 4 ? atof(argv[4]) : 1e-4, argc > 5 ? argv[5] : "1e-5");
  fprintf(
      stderr,
      "usage: loom-tool-helper fixtures DIR | knn-check OUT_DIR (--seed S GRAPH.lir | --in X.npy Y.npy) | "
      "npy-equal A.npy B.npy | npy-close A.npy B.npy [RTOL [ATOL]]\n");
  return 2;
}
