/* The kNN brute-force check shared by test_tools and loom-tool-helper: squared distances in
 * float64, against a kNN result (values f32[n,k], indices i64[n,k], best first). */
#ifndef LOOM_TESTS_KNN_REF_H
#define LOOM_TESTS_KNN_REF_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Tolerance: relative 1e-3 (issue 2's acceptance), plus an absolute 1e-6 so that f32 rounding
 * of near-zero distances (a^2 + b^2 - 2ab cancels to ~1e-7 absolute for points in [0,1)^3)
 * is not counted as a wrong neighbour. */
#define KNN_REL_TOL 1e-3
#define KNN_ABS_TOL 1e-6

static double knn_d2(const float *a, const float *b, int64_t d) {
  double s = 0;
  for (int64_t c = 0; c < d; c++) {
    double t = (double)a[c] - (double)b[c];
    s += t * t;
  }
  return s;
}

static bool knn_close(double got, double want) {
  return fabs(got - want) <= KNN_REL_TOL * fabs(want) + KNN_ABS_TOL;
}

/* Checks row i; on failure writes why into msg. `best` is scratch for k doubles. */
static bool knn_check_row(const float *x, const float *y, int64_t m, int64_t d, int64_t k, int64_t i,
                          const float *val, const int64_t *idx, double *best, char *msg, size_t msg_size) {
  const float *xi = x + i * d;
  int64_t have = 0;
  if (k <= 0) return true;
  for (int64_t j = 0; j < m; j++) { /* the k smallest distances, kept sorted */
    double v = knn_d2(xi, y + j * d, d);
    if (have == k && v >= best[k - 1]) continue;
    int64_t p = have < k ? have++ : k - 1;
    while (p > 0 && best[p - 1] > v) {
      best[p] = best[p - 1];
      p--;
    }
    best[p] = v;
  }
  for (int64_t j = 0; j < k; j++) {
    int64_t id = idx[i * k + j];
    if (id < 0 || id >= m) {
      snprintf(msg, msg_size, "row %lld: index %lld out of range", (long long)i, (long long)id);
      return false;
    }
    for (int64_t q = 0; q < j; q++) {
      if (idx[i * k + q] == id) {
        snprintf(msg, msg_size, "row %lld: index %lld returned twice", (long long)i, (long long)id);
        return false;
      }
    }
    double dist = knn_d2(xi, y + id * d, d);
    if (!knn_close(dist, best[j]) || !knn_close((double)val[i * k + j], dist) ||
        (j > 0 && val[i * k + j] < val[i * k + j - 1])) {
      snprintf(msg, msg_size,
               "row %lld, neighbour %lld: index %lld at distance %.9g (returned value %.9g), "
               "brute force's distance %.9g",
               (long long)i, (long long)j, (long long)id, dist, (double)val[i * k + j], best[j]);
      return false;
    }
  }
  return true;
}

/* Checks every row; returns the number of failing rows and prints the first to stderr. */
static int64_t knn_check(const float *x, const float *y, int64_t n, int64_t m, int64_t d, int64_t k,
                         const float *val, const int64_t *idx) {
  int64_t failures = 0, first = -1;
  char first_msg[512] = "";
#pragma omp parallel
  {
    double *best = malloc((size_t)(k > 0 ? k : 1) * sizeof *best);
    char msg[512];
#pragma omp for reduction(+ : failures) schedule(dynamic, 64)
    for (int64_t i = 0; i < n; i++) {
      if (best && knn_check_row(x, y, m, d, k, i, val, idx, best, msg, sizeof msg)) continue;
      failures++;
#pragma omp critical(knn_first)
      if (first < 0 || i < first) {
        first = i;
        snprintf(first_msg, sizeof first_msg, "%s", best ? msg : "out of memory");
      }
    }
    free(best);
  }
  if (failures)
    fprintf(stderr, "knn check: %lld of %lld rows wrong; first: %s\n", (long long)failures, (long long)n,
            first_msg);
  return failures;
}

#endif
