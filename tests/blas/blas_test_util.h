/* What the tests of Loom's libblas.so.3 share: OpenBLAS's own routines (the reference), the
 * shim opened by path, and matrices. Header-only: tests/blas and tests/blas_limit each include
 * it into their own executable.
 */
#ifndef LOOM_TESTS_BLAS_TEST_UTIL_H
#define LOOM_TESTS_BLAS_TEST_UTIL_H

#include <cblas.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom/loom.h"

typedef void dgemm_fn(const char *, const char *, const int *, const int *, const int *, const double *,
                      const double *, const int *, const double *, const int *, const double *, double *,
                      const int *, size_t, size_t);
typedef void dtrsm_fn(const char *, const char *, const char *, const char *, const int *, const int *,
                      const double *, const double *, const int *, double *, const int *, size_t, size_t,
                      size_t, size_t);

/* OpenBLAS's routines by dlsym on its own handle: never the shim's, whatever is preloaded. */
typedef struct blas_test_host {
  __typeof__(cblas_dgemm) *cblas_dgemm;
  dgemm_fn *dgemm_;
  dtrsm_fn *dtrsm_;
} blas_test_host;

static inline bool blas_test_host_open(blas_test_host *h) {
  Dl_info info;
  if (!dladdr((void *)openblas_get_config, &info)) return false;
  void *lib = dlopen(info.dli_fname, RTLD_NOW | RTLD_LOCAL);
  if (!lib) return false;
  *(void **)&h->cblas_dgemm = dlsym(lib, "cblas_dgemm");
  *(void **)&h->dgemm_ = dlsym(lib, "dgemm_");
  *(void **)&h->dtrsm_ = dlsym(lib, "dtrsm_");
  return h->cblas_dgemm && h->dgemm_ && h->dtrsm_;
}

/* The shim, opened by path (LOOM_BLAS_SHIM, else the build tree's blas/libblas.so.3), and the
 * Loom calls of the libloom.so it runs on, found through its handle. */
typedef struct blas_test_shim {
  dgemm_fn *dgemm_;
  dtrsm_fn *dtrsm_;
  loom_context *(*context)(void);
  __typeof__(loom_context_memory) *context_memory;
  __typeof__(loom_mem_node_find) *node_find;
  __typeof__(loom_mem_stats) *stats;
  char error[512];
} blas_test_shim;

static inline bool blas_test_shim_open(blas_test_shim *s) {
  memset(s, 0, sizeof *s);
  char path[4096];
  const char *env = getenv("LOOM_BLAS_SHIM"), *bin = getenv("LOOM_BINARY_DIR");
  if (env && *env)
    snprintf(path, sizeof path, "%s", env);
  else
    snprintf(path, sizeof path, "%s/blas/libblas.so.3", bin ? bin : ".");
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    snprintf(s->error, sizeof s->error, "cannot open the shim %.200s: %.200s", path, dlerror());
    return false;
  }
  *(void **)&s->dgemm_ = dlsym(lib, "dgemm_");
  *(void **)&s->dtrsm_ = dlsym(lib, "dtrsm_");
  *(void **)&s->context = dlsym(lib, "loom_blas_context");
  *(void **)&s->context_memory = dlsym(lib, "loom_context_memory");
  *(void **)&s->node_find = dlsym(lib, "loom_mem_node_find");
  *(void **)&s->stats = dlsym(lib, "loom_mem_stats");
  if (!s->dgemm_ || !s->dtrsm_ || !s->context || !s->context_memory || !s->node_find || !s->stats) {
    snprintf(s->error, sizeof s->error, "%.400s lacks the shim's symbols", path);
    return false;
  }
  return true;
}

/* n values in [-1, 1), the same for a seed on every machine. */
static inline double *blas_test_random(int64_t n, uint64_t seed) {
  double *v = malloc((size_t)n * sizeof *v);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t i = 0; i < n; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    v[i] = (double)(x >> 11) / 9007199254740992.0 * 2 - 1;
  }
  return v;
}

static inline double *blas_test_copy(const double *v, int64_t n) {
  double *c = malloc((size_t)n * sizeof *c);
  memcpy(c, v, (size_t)n * sizeof *c);
  return c;
}

/* An n x n matrix whose upper triangle is well conditioned for a solve (diagonal n + ...). */
static inline double *blas_test_triangular(int n, uint64_t seed) {
  double *t = blas_test_random((int64_t)n * n, seed);
  for (int i = 0; i < n; i++) t[(int64_t)i * n + i] += n;
  return t;
}

/* The largest |a - b| over the largest |b|. */
static inline double blas_test_max_rel_diff(const double *a, const double *b, int64_t n) {
  double d = 0, m = 0;
  for (int64_t i = 0; i < n; i++) {
    double e = fabs(a[i] - b[i]);
    d = e > d || e != e ? e : d;
    m = fabs(b[i]) > m ? fabs(b[i]) : m;
  }
  return d / (m > 0 ? m : 1);
}

#endif
