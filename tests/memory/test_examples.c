/* The graphs of examples/ not covered by test_limits.c (kernel_mv.lir and knn.lir are written
 * out there), run as loaded under 4 to 24 MiB with measured peaks checked and results
 * against a float64 reference. */
#include <stdlib.h>

#include "mem_util.h"

static const int64_t limits[] = {4 * MIB, 8 * MIB, 16 * MIB, 24 * MIB};
enum { N_LIMITS = sizeof limits / sizeof limits[0] };

/* conv_small.lir: r = relu(conv(x, w, padding 1)) [2,8,32,32], p = mean of r over [2,3]. */
TEST(example_conv_small_under_4_to_24_mib) {
  enum { B = 2, C = 3, H = 32, W = 32, O = 8, KH = 3, KW = 3 };
  loom_graph *g = mem_load_example("conv_small.lir", __FILE__, __LINE__);
  ASSERT_TRUE(g != NULL);
  loom_tensor *in = NULL;
  ASSERT_OK(mem_inputs(g, 11, -1.0, 1.0, &in));
  const float *x = in[0].data, *w = in[1].data;
  double *r = calloc((size_t)B * O * H * W, sizeof *r), *p = calloc(B * O, sizeof *p);
  ASSERT_TRUE(r && p);
  double scale_r = 0;
  for (int b = 0; b < B; b++)
    for (int o = 0; o < O; o++)
      for (int i = 0; i < H; i++)
        for (int j = 0; j < W; j++) {
          double s = 0, a = 0;
          for (int c = 0; c < C; c++)
            for (int u = 0; u < KH; u++)
              for (int v = 0; v < KW; v++) {
                int ii = i + u - 1, jj = j + v - 1;
                if (ii < 0 || ii >= H || jj < 0 || jj >= W) continue;
                double t = (double)x[((b * C + c) * H + ii) * W + jj] * w[((o * C + c) * KH + u) * KW + v];
                s += t;
                a += fabs(t);
              }
          r[((b * O + o) * H + i) * W + j] = s > 0 ? s : 0;
          p[b * O + o] += (s > 0 ? s : 0) / (H * W);
          scale_r = fmax(scale_r, a);
        }
  for (int l = 0; l < N_LIMITS; l++) {
    loom_tensor *out = NULL;
    MEM_RUN(g, limits[l], in, &out, NULL);
    bool ok = mem_check_close("conv_small r", out[0].data, r, (int64_t)B * O * H * W, scale_r, 1e-4, __FILE__,
                              __LINE__) &&
              mem_check_close("conv_small p", out[1].data, p, B * O, scale_r, 1e-4, __FILE__, __LINE__);
    mem_tensors_free(out, 2);
    if (!ok) return;
  }
  free(r);
  free(p);
  mem_tensors_free(in, 2);
  loom_graph_destroy(g);
}

/* dot_chain.lir: (a.b).v with a [4000,64], b [64,4000]: a 61 MiB product as written. */
TEST(example_dot_chain_under_4_to_24_mib) {
  enum { N = 4000, K = 64 };
  loom_graph *g = mem_load_example("dot_chain.lir", __FILE__, __LINE__);
  ASSERT_TRUE(g != NULL);
  loom_tensor *in = NULL;
  ASSERT_OK(mem_inputs(g, 12, -1.0, 1.0, &in));
  const float *a = in[0].data, *b = in[1].data, *v = in[2].data;
  double bv[K] = {0}, abv[K] = {0}, *want = calloc(N, sizeof *want), *mag = calloc(N, sizeof *mag);
  ASSERT_TRUE(want && mag);
  for (int i = 0; i < K; i++)
    for (int j = 0; j < N; j++) {
      bv[i] += (double)b[i * N + j] * v[j];
      abv[i] += fabs((double)b[i * N + j] * v[j]);
    }
  for (int i = 0; i < N; i++)
    for (int j = 0; j < K; j++) {
      want[i] += (double)a[i * K + j] * bv[j];
      mag[i] += fabs((double)a[i * K + j]) * abv[j];
    }
  double scale = mem_max_abs(mag, N);
  for (int l = 0; l < N_LIMITS; l++) {
    loom_tensor *out = NULL;
    MEM_RUN(g, limits[l], in, &out, NULL);
    bool ok = mem_check_close("dot_chain", out[0].data, want, N, scale, 1e-4, __FILE__, __LINE__);
    mem_tensors_free(out, 1);
    if (!ok) return;
  }
  free(want);
  free(mag);
  mem_tensors_free(in, 3);
  loom_graph_destroy(g);
}

/* spectrum.lir: f = rfft x (c64[64,513]), maxe = max |irfft(f) - x| (0 in exact arithmetic),
 * zb = ifft(fft z) (= z). */
TEST(example_spectrum_under_4_to_24_mib) {
  enum { R = 64, N = 1024, NF = N / 2 + 1, ZR = 16, ZN = 256 };
  loom_graph *g = mem_load_example("spectrum.lir", __FILE__, __LINE__);
  ASSERT_TRUE(g != NULL);
  loom_tensor *in = NULL;
  ASSERT_OK(mem_inputs(g, 13, -1.0, 1.0, &in));
  const float *x = in[0].data, *z = in[1].data;
  double *f = malloc(sizeof(double) * R * NF * 2), *zd = malloc(sizeof(double) * ZR * ZN * 2);
  double *cs = malloc(sizeof(double) * N), *sn = malloc(sizeof(double) * N);
  ASSERT_TRUE(f && zd && cs && sn);
  const double pi = 3.14159265358979323846;
  for (int t = 0; t < N; t++) {
    cs[t] = cos(2 * pi * t / N);
    sn[t] = sin(2 * pi * t / N);
  }
  double scale_f = 0;
#pragma omp parallel for reduction(max : scale_f)
  for (int r = 0; r < R; r++) {
    double a = 0;
    for (int n = 0; n < N; n++) a += fabs((double)x[r * N + n]);
    scale_f = fmax(scale_f, a);
    for (int k = 0; k < NF; k++) {
      double re = 0, im = 0;
      for (int n = 0; n < N; n++) {
        int t = (int)(((int64_t)k * n) % N);
        re += x[r * N + n] * cs[t];
        im -= x[r * N + n] * sn[t];
      }
      f[(r * NF + k) * 2] = re;
      f[(r * NF + k) * 2 + 1] = im;
    }
  }
  for (int i = 0; i < ZR * ZN * 2; i++) zd[i] = z[i];
  double zero = 0;
  for (int l = 0; l < N_LIMITS; l++) {
    loom_tensor *out = NULL;
    MEM_RUN(g, limits[l], in, &out, NULL);
    ASSERT_EQ(out[0].type.dtype, LOOM_C64);
    ASSERT_EQ(out[2].type.dtype, LOOM_C64);
    bool ok =
        mem_check_close("spectrum f", out[0].data, f, (int64_t)R * NF * 2, scale_f, 1e-4, __FILE__,
                        __LINE__) &&
        mem_check_close("spectrum maxe", out[1].data, &zero, 1, 1.0, 1e-4, __FILE__, __LINE__) &&
        mem_check_close("spectrum zb", out[2].data, zd, (int64_t)ZR * ZN * 2, 1.0, 1e-4, __FILE__, __LINE__);
    mem_tensors_free(out, 3);
    if (!ok) return;
  }
  free(f);
  free(zd);
  free(cs);
  free(sn);
  mem_tensors_free(in, 2);
  loom_graph_destroy(g);
}
