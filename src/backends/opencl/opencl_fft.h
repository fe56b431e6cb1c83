/* What opencl_fft.c (the transforms, the DFT kernel) and opencl_clfft.c (clFFT) share. */
#ifndef LOOM_OPENCL_FFT_H
#define LOOM_OPENCL_FFT_H

#include "backends/opencl/opencl_backend.h"

/* Runs the transform through clFFT when clFFT takes its length and the memory fits; *ran
 * false (nothing enqueued) otherwise. */
loom_status loom__cl_clfft_run(loom__cl_device *d, const loom__op_call *c, const loom__gpu_fft *p, bool *ran);

#endif
