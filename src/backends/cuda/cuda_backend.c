/* The cuda compute backend's table (backend.h): per device, the HMM's stream; device memory
 * (the HMM's) addressed as (pointer, element offset); ops dispatched by class to the kernel
 * families, cuBLAS and cuFFT. See cuda_backend.h for the design. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda_backend.h"
#include "backends/dispatch.h"
#include "devices/devices.h"
#include "loom/memory.h"

/* ---- testing hooks ------------------------------------------------------------------------ */

static int32_t testing_blas, testing_fft;

void loom__cuda_testing_set_paths(int32_t blas, int32_t fft) {
  testing_blas = blas;
  testing_fft = fft;
}
int32_t loom__cu_testing_blas_path(void) {
  return testing_blas;
}
int32_t loom__cu_testing_fft_path(void) {
  return testing_fft;
}

cudaStream_t loom__cuda_stream(void *dev) {
  return dev ? ((loom__cu_device *)dev)->stream : NULL;
}

/* ---- opening a device ----------------------------------------------------------------------- */

static void cu_close(void *dev);

static loom_status cu_open(const loom__device *info, loom_mem_manager *memory, int32_t node, void **out_dev) {
  *out_dev = NULL;
  loom__cu_device *d = loom__calloc(1, sizeof *d);
  if (!d) return loom__oom("a CUDA device");
  snprintf(d->id, sizeof d->id, "%s", info->id);
  d->ordinal = info->cuda_ordinal;
  pthread_mutex_init(&d->lock, NULL);
  d->name = loom__strdup(info->name ? info->name : "");
  if (!d->name) {
    cu_close(d);
    return loom__oom("a CUDA device");
  }
  /* The HMM's stream for the node; the first CUDA call of the process loads the driver, so no
   * driver is UNAVAILABLE here. */
  loom_status s = loom__hmm_cuda_stream(memory, node, &d->stream);
  int sms = 1;
  if (!s && cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, d->ordinal) != cudaSuccess) sms = 1;
  cudaGetLastError();
  d->sm_count = sms;
  if (s) { /* the message names the node, which is the device's id */
    cu_close(d);
    return s;
  }
  *out_dev = d;
  return LOOM_OK;
}

static void cu_close(void *dev) {
  loom__cu_device *d = dev;
  if (!d) return;
  if (d->stream && cudaSetDevice(d->ordinal) == cudaSuccess) {
    cudaStreamSynchronize(d->stream);
    loom__cu_fft_release(d);
    loom__cu_blas_release(d);
    loom__cu_fused_release(d);
  }
  cudaGetLastError();
  pthread_mutex_destroy(&d->lock);
  loom__free(d->name);
  loom__free(d);
}

static loom_status cu_synchronize(void *dev) {
  loom__cu_device *d = dev;
  loom_status s = loom__cu_enter(d);
  if (s) return s;
  return loom__cu_check(d, cudaStreamSynchronize(d->stream), "cudaStreamSynchronize");
}

/* ---- running one op ----------------------------------------------------------------------- */

static loom_status cu_enter_dev(void *dev) {
  return loom__cu_enter(dev);
}

static const loom__launchers launchers = {
    .family =
        {
            [LOOM__FAMILY_ELEMENTWISE] = loom__cu_elementwise,
            [LOOM__FAMILY_LAYOUT] = loom__cu_layout,
            [LOOM__FAMILY_REDUCE] = loom__cu_reduce_op,
            [LOOM__FAMILY_TOPK] = loom__cu_topk_op,
            [LOOM__FAMILY_DOT] = loom__cu_dot,
            [LOOM__FAMILY_CONV] = loom__cu_conv_op,
            [LOOM__FAMILY_FOURIER] = loom__cu_fourier,
            [LOOM__FAMILY_FUSED] = loom__cu_fused_op,
            [LOOM__FAMILY_QUANT] = loom__cu_quant_op,
        },
    .enter = cu_enter_dev,
};

/* Launches under the device's lock, the device current on this thread. */
static loom_status cu_run_op(void *dev, const loom__op_call *c) {
  loom__cu_device *d = dev;
  return loom__dispatch(&launchers, d, d->id, &d->lock, c);
}

/* ---- what loops need besides ops ---------------------------------------------------------- */

static loom_status cu_strided_copy(void *dev, int64_t elem, int32_t rank, const int64_t *dims, void *dst,
                                   int64_t dst_off, const int64_t *dst_strides, void *src, int64_t src_off,
                                   const int64_t *src_strides) {
  loom__cu_device *d = dev;
  if (rank < 0 || rank > LM_COPY_RANK)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: a copy of rank %d (at most %d)", d->id, (int)rank,
                       LM_COPY_RANK);
  pthread_mutex_lock(&d->lock);
  loom_status s = loom__cu_enter(d);
  if (!s)
    s = loom__cu_copy_strided(d, elem, rank, dims, dst, dst_off, dst_strides, src, src_off, src_strides);
  pthread_mutex_unlock(&d->lock);
  return s;
}

static loom_status cu_merge_index(void *dev, int64_t total, int64_t k, int64_t inner, void *pos,
                                  int64_t pos_off, void *acc, int64_t acc_off, void *piece, int64_t piece_off,
                                  int64_t lo) {
  loom__cu_device *d = dev;
  if (total <= 0) return LOOM_OK;
  pthread_mutex_lock(&d->lock);
  loom_status s = loom__cu_enter(d);
  if (!s)
    s = loom__cu_check(
        d,
        loom__cu_merge_index(d->stream, (int64_t *)pos + pos_off, (const int64_t *)acc + acc_off,
                             (const int64_t *)piece + piece_off, total, k, inner, lo),
        "the merge_index kernel");
  pthread_mutex_unlock(&d->lock);
  return s;
}

/* ---- the device's clock ------------------------------------------------------------------ */

/* An event recorded on the device's stream (timing on): it completes when the work before it
 * has, and cudaEventElapsedTime gives the device time between two. */
static loom_status cu_mark(void *dev, void **out_mark) {
  loom__cu_device *d = dev;
  cudaEvent_t ev = NULL;
  pthread_mutex_lock(&d->lock);
  loom_status s = loom__cu_enter(d);
  if (!s) s = loom__cu_check(d, cudaEventCreate(&ev), "cudaEventCreate");
  if (!s) s = loom__cu_check(d, cudaEventRecord(ev, d->stream), "cudaEventRecord");
  pthread_mutex_unlock(&d->lock);
  if (s) {
    if (ev) cudaEventDestroy(ev);
    return s;
  }
  *out_mark = ev;
  return LOOM_OK;
}

static loom_status cu_mark_seconds(void *dev, void *from, void *to, double *seconds) {
  loom__cu_device *d = dev;
  float ms = 0;
  loom_status s = loom__cu_check(d, cudaEventSynchronize((cudaEvent_t)to), "cudaEventSynchronize");
  if (!s)
    s = loom__cu_check(d, cudaEventElapsedTime(&ms, (cudaEvent_t)from, (cudaEvent_t)to),
                       "cudaEventElapsedTime");
  if (!s) *seconds = ms > 0 ? ms * 1e-3 : 0;
  return s;
}

static void cu_mark_release(void *dev, void *mark) {
  (void)dev;
  if (mark) cudaEventDestroy((cudaEvent_t)mark);
}

const loom__backend loom__cuda_backend = {
    .name = "cuda",
    .host_memory = false,
    .open = cu_open,
    .close = cu_close,
    .run_op = cu_run_op,
    .synchronize = cu_synchronize,
    .copy = cu_strided_copy,
    .merge_index = cu_merge_index,
    .mark = cu_mark,
    .mark_seconds = cu_mark_seconds,
    .mark_release = cu_mark_release,
};
