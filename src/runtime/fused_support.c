/* Which fused bodies every backend of this build runs fused (loom_optimize_options.fused_runs):
 * the IR cannot know, since the evaluators are the backends'. A body one of them would run op
 * by op needs its intermediates whole there, which only a chunked graph can afford. */
#include "backends/attention_support.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/gpu/fused_codegen.h"
#include "core/core.h"
#include "loom/plan.h"

bool loom_fused_body_runs_everywhere(const loom_graph *body) {
  if (!body) return false;
  loom__attention att;
  if (loom__attention_body(body, &att)) return loom__attention_runs_everywhere(&att);
  /* The cpu evaluator always; the GPU generator (OpenCL C, and the same text for NVRTC) only
   * where a GPU backend is built: without one, no GPU runs anything. */
  bool ok = loom__cpu_fused_supported(body) == LOOM_OK;
#if LOOM_HAVE_OPENCL || LOOM_HAVE_CUDA
  ok = ok && loom__fz_supported(body, LOOM__FZ_OPENCL) == LOOM_OK;
#endif
  return ok;
}
