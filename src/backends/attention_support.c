/* Whether every backend of this build runs a fused attention body fused (ir/attention.h), for
 * loom_fused_body_runs_everywhere: a backend that ran it op by op would need the whole scores. */
#include "backends/attention_support.h"

#include "backends/cpu/cpu_attention.h"
#if LOOM_HAVE_OPENCL
#include "backends/opencl/opencl_attention.h"
#endif

bool loom__attention_runs_everywhere(const loom__attention *a) {
  bool ok = loom__cpu_attention_supported(a) == LOOM_OK;
#if LOOM_HAVE_OPENCL
  ok = ok && loom__cl_attention_supported(a) == LOOM_OK;
#endif
#if LOOM_HAVE_CUDA
  /* CUDA has no attention kernel (cuda_fused.c would run the body op by op): none is written
   * until a GPU session can prove one, so the rewrite makes none where a CUDA runner is. */
  ok = false;
#endif
  return ok;
}
