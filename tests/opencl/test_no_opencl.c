/* In a build without the opencl backend (LOOM_OPENCL=OFF, or no OpenCL found), the opencl
 * tests compile to this one skip. */
#include "harness.h"

#if !LOOM_HAVE_OPENCL
TEST(opencl_backend_not_built) {
  loom_test_skip("this build has no opencl backend (LOOM_OPENCL=OFF or no OpenCL found)");
}
#endif
