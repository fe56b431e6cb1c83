/* What opencl_fft.c (the transforms, the DFT kernel) and opencl_clfft.c (clFFT) share. */
#ifndef LOOM_OPENCL_FFT_H
#define LOOM_OPENCL_FFT_H

#include "backends/opencl/opencl_backend.h"

typedef enum fft_kind { FFT_FORWARD, FFT_INVERSE, FFT_R2C, FFT_C2R } fft_kind;

/* One transform along an axis of data seen as [outer, len, inner]. */
typedef struct fft_problem {
  fft_kind kind;
  bool dbl;
  int32_t axis;
  int64_t n, len_in, len_out, outer, inner;
  bool merged;              /* the outer dims, and the inner dims, each walk as one stride: */
  int64_t is_o, is_a, is_i; /* the input's strides over [outer, len, inner] */
  int64_t in_es, out_es;    /* element sizes */
} fft_problem;

/* Runs the transform through clFFT when clFFT takes its length and the memory fits; *ran
 * false (nothing enqueued) otherwise. */
loom_status loom__cl_clfft_run(loom__cl_device *d, const loom__op_call *c, const fft_problem *p, bool *ran);

#endif
