/* OpenCL error codes become Loom statuses with the vendor's name in the message. */
#include "harness.h"

#if defined(LOOM_HAVE_OPENCL)
#include "backends/opencl/opencl_status.h"

TEST(cl_status_names_the_call_and_the_error) {
  ASSERT_STATUS(loom__cl_status(CL_OUT_OF_RESOURCES, "clEnqueueNDRangeKernel"), LOOM_ERR_OUT_OF_MEMORY);
  ASSERT_STREQ(loom_last_error(), "clEnqueueNDRangeKernel: CL_OUT_OF_RESOURCES (-5)");
  ASSERT_STATUS(loom__cl_status(CL_MEM_OBJECT_ALLOCATION_FAILURE, "clCreateBuffer"), LOOM_ERR_OUT_OF_MEMORY);
  ASSERT_STATUS(loom__cl_status(CL_INVALID_BUFFER_SIZE, "clCreateBuffer"), LOOM_ERR_OUT_OF_MEMORY);
  ASSERT_CONTAINS(loom_last_error(), "CL_INVALID_BUFFER_SIZE");
  ASSERT_STATUS(loom__cl_status(CL_DEVICE_NOT_AVAILABLE, "clCreateContext"), LOOM_ERR_UNAVAILABLE);
  ASSERT_STATUS(loom__cl_status(-1001, "clGetPlatformIDs"), LOOM_ERR_UNAVAILABLE);
  ASSERT_CONTAINS(loom_last_error(), "CL_PLATFORM_NOT_FOUND_KHR");
  ASSERT_STATUS(loom__cl_status(CL_IMAGE_FORMAT_NOT_SUPPORTED, "clCreateImage"), LOOM_ERR_UNSUPPORTED);
  ASSERT_STATUS(loom__cl_status(CL_INVALID_KERNEL_ARGS, "clEnqueueNDRangeKernel"), LOOM_ERR_INTERNAL);
}

TEST(cl_status_success_and_unknown) {
  loom_clear_error();
  ASSERT_OK(loom__cl_status(CL_SUCCESS, "clFinish"));
  ASSERT_STREQ(loom_last_error(), "");
  ASSERT_STATUS(loom__cl_status(-9999, "clFinish"), LOOM_ERR_INTERNAL);
  ASSERT_STREQ(loom_last_error(), "clFinish: unknown OpenCL error -9999");
}

/* Every code cl.h defines has a name (the table uses values; this checks them against the
 * header's macros). */
TEST(cl_status_every_core_code_has_its_name) {
#define CHECK(code) ASSERT_STREQ(loom__cl_error_name(code), #code)
  CHECK(CL_DEVICE_NOT_FOUND);
  CHECK(CL_OUT_OF_RESOURCES);
  CHECK(CL_KERNEL_ARG_INFO_NOT_AVAILABLE);
  CHECK(CL_INVALID_VALUE);
  CHECK(CL_INVALID_BUFFER_SIZE);
  CHECK(CL_INVALID_GLOBAL_WORK_SIZE);
  CHECK(CL_INVALID_PROPERTY);
  CHECK(CL_INVALID_SPEC_ID);
  CHECK(CL_MAX_SIZE_RESTRICTION_EXCEEDED);
#undef CHECK
  for (int code = -1; code >= -72; code--) {
    if (code <= -20 && code >= -29) continue; /* unassigned */
    ASSERT_TRUE(loom__cl_error_name(code) != NULL);
    ASSERT_TRUE(loom__cl_status_code(code) != LOOM_OK);
  }
}
#else
TEST(cl_status_not_built) {
  loom_test_skip("built without OpenCL");
}
#endif
