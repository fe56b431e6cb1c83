/* In a build without the cuda backend (LOOM_CUDA=OFF, or no CUDA toolkit found), the cuda tests
 * compile to this one skip. */
#include "harness.h"

#if !LOOM_HAVE_CUDA
TEST(cuda_backend_not_built) {
  loom_test_skip("this build has no cuda backend (LOOM_CUDA=OFF or no CUDA toolkit found)");
}
#endif
