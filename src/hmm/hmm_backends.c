/* Which memory backend drives a device: the one list where the backends compiled in are named
 * (their conditional compilation stays here and in CMake, not inside the HMM's functions). */
#include "hmm/hmm.h"

#if LOOM_HAVE_OPENCL
extern const loom__hmm_backend loom__hmm_opencl_backend;
#endif
#if LOOM_HAVE_CUDA
extern const loom__hmm_backend loom__hmm_cuda_backend;
#endif

const loom__hmm_backend *loom__hmm_backend_for(const loom__device *dev) {
  /* A GPU that is both a CUDA and an OpenCL device is managed through CUDA when the cuda backend
   * is built (backends/cuda/cuda_memory.c), as it runs through CUDA (runtime/backends.c). */
#if LOOM_HAVE_CUDA
  if ((dev->backends & LOOM_BACKEND_CUDA) && dev->cuda_ordinal >= 0) return &loom__hmm_cuda_backend;
#endif
#if LOOM_HAVE_OPENCL
  if (dev->backends & LOOM_BACKEND_OPENCL && dev->cl_device) return &loom__hmm_opencl_backend;
#endif
  (void)dev;
  return NULL;
}
