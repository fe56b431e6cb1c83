/* Which memory backend drives a device: the one list where the backends compiled in are named
 * (their conditional compilation stays here and in CMake, not inside the HMM's functions). */
#include "hmm/hmm.h"

#if LOOM_HAVE_OPENCL
extern const loom__hmm_backend loom__hmm_opencl_backend;
#endif

const loom__hmm_backend *loom__hmm_backend_for(const loom__device *dev) {
  /* CUDA memory (cudaMalloc, cudaMallocManaged) is not managed yet: a GPU that is both a CUDA
   * and an OpenCL device is managed through OpenCL. TODO(#5): backends/cuda/cuda_memory.c. */
#if LOOM_HAVE_OPENCL
  if (dev->backends & LOOM_BACKEND_OPENCL && dev->cl_device) return &loom__hmm_opencl_backend;
#endif
  (void)dev;
  return NULL;
}
