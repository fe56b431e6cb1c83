/* CUDA runtime errors become Loom statuses here, at the boundary (STYLE.md): the message names
 * the call and CUDA's own name for the error, so a user can look it up. */
#include "backends/cuda/cuda_backend.h"

static loom_status status_of(cudaError_t err) {
  switch (err) {
    case cudaErrorMemoryAllocation:
      return LOOM_ERR_OUT_OF_MEMORY;
    case cudaErrorInsufficientDriver:
    case cudaErrorNoDevice:
    case cudaErrorInvalidDevice:
    case cudaErrorDevicesUnavailable:
    case cudaErrorDeviceUninitialized:
    case cudaErrorSystemNotReady:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
    case cudaErrorStubLibrary:
    case cudaErrorUnsupportedPtxVersion:
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorCudartUnloading:
      return LOOM_ERR_UNAVAILABLE;
    case cudaErrorNotSupported:
      return LOOM_ERR_UNSUPPORTED;
    default:
      return LOOM_ERR_INTERNAL;
  }
}

loom_status loom__cuda_status(cudaError_t err, const char *call) {
  if (err == cudaSuccess) return LOOM_OK;
  /* The error is returned, not left behind to fail an unrelated later call (a sticky error, a
   * device fault, stays whatever we do). */
  cudaGetLastError();
  return loom__error(status_of(err), "%s failed: %s (%s)", call, cudaGetErrorName(err),
                     cudaGetErrorString(err));
}

loom_status loom__cu_check(const loom__cu_device *d, cudaError_t err, const char *call) {
  loom_status s = loom__cuda_status(err, call);
  if (s) loom__error_prefix("%s: ", d->id);
  return s;
}

loom_status loom__cu_enter(const loom__cu_device *d) {
  return loom__cu_check(d, cudaSetDevice(d->ordinal), "cudaSetDevice");
}
