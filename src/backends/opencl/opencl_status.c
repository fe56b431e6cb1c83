/* Every OpenCL error code with its name and the Loom status it becomes. */
#include "backends/opencl/opencl_status.h"

/* By value rather than by macro, so the table builds against headers that lack newer codes. */
#define LOOM_CL_ERROR_MAP(X)                                         \
  X(CL_DEVICE_NOT_FOUND, -1, UNAVAILABLE)                            \
  X(CL_DEVICE_NOT_AVAILABLE, -2, UNAVAILABLE)                        \
  X(CL_COMPILER_NOT_AVAILABLE, -3, UNAVAILABLE)                      \
  X(CL_MEM_OBJECT_ALLOCATION_FAILURE, -4, OUT_OF_MEMORY)             \
  X(CL_OUT_OF_RESOURCES, -5, OUT_OF_MEMORY)                          \
  X(CL_OUT_OF_HOST_MEMORY, -6, OUT_OF_MEMORY)                        \
  X(CL_PROFILING_INFO_NOT_AVAILABLE, -7, UNSUPPORTED)                \
  X(CL_MEM_COPY_OVERLAP, -8, INTERNAL)                               \
  X(CL_IMAGE_FORMAT_MISMATCH, -9, INTERNAL)                          \
  X(CL_IMAGE_FORMAT_NOT_SUPPORTED, -10, UNSUPPORTED)                 \
  X(CL_BUILD_PROGRAM_FAILURE, -11, INTERNAL)                         \
  X(CL_MAP_FAILURE, -12, INTERNAL)                                   \
  X(CL_MISALIGNED_SUB_BUFFER_OFFSET, -13, INTERNAL)                  \
  X(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST, -14, INTERNAL)     \
  X(CL_COMPILE_PROGRAM_FAILURE, -15, INTERNAL)                       \
  X(CL_LINKER_NOT_AVAILABLE, -16, UNAVAILABLE)                       \
  X(CL_LINK_PROGRAM_FAILURE, -17, INTERNAL)                          \
  X(CL_DEVICE_PARTITION_FAILED, -18, UNSUPPORTED)                    \
  X(CL_KERNEL_ARG_INFO_NOT_AVAILABLE, -19, UNSUPPORTED)              \
  X(CL_INVALID_VALUE, -30, INTERNAL)                                 \
  X(CL_INVALID_DEVICE_TYPE, -31, INTERNAL)                           \
  X(CL_INVALID_PLATFORM, -32, INTERNAL)                              \
  X(CL_INVALID_DEVICE, -33, INTERNAL)                                \
  X(CL_INVALID_CONTEXT, -34, INTERNAL)                               \
  X(CL_INVALID_QUEUE_PROPERTIES, -35, UNSUPPORTED)                   \
  X(CL_INVALID_COMMAND_QUEUE, -36, INTERNAL)                         \
  X(CL_INVALID_HOST_PTR, -37, INTERNAL)                              \
  X(CL_INVALID_MEM_OBJECT, -38, INTERNAL)                            \
  X(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR, -39, INTERNAL)               \
  X(CL_INVALID_IMAGE_SIZE, -40, INTERNAL)                            \
  X(CL_INVALID_SAMPLER, -41, INTERNAL)                               \
  X(CL_INVALID_BINARY, -42, INTERNAL)                                \
  X(CL_INVALID_BUILD_OPTIONS, -43, INTERNAL)                         \
  X(CL_INVALID_PROGRAM, -44, INTERNAL)                               \
  X(CL_INVALID_PROGRAM_EXECUTABLE, -45, INTERNAL)                    \
  X(CL_INVALID_KERNEL_NAME, -46, INTERNAL)                           \
  X(CL_INVALID_KERNEL_DEFINITION, -47, INTERNAL)                     \
  X(CL_INVALID_KERNEL, -48, INTERNAL)                                \
  X(CL_INVALID_ARG_INDEX, -49, INTERNAL)                             \
  X(CL_INVALID_ARG_VALUE, -50, INTERNAL)                             \
  X(CL_INVALID_ARG_SIZE, -51, INTERNAL)                              \
  X(CL_INVALID_KERNEL_ARGS, -52, INTERNAL)                           \
  X(CL_INVALID_WORK_DIMENSION, -53, INTERNAL)                        \
  X(CL_INVALID_WORK_GROUP_SIZE, -54, INTERNAL)                       \
  X(CL_INVALID_WORK_ITEM_SIZE, -55, INTERNAL)                        \
  X(CL_INVALID_GLOBAL_OFFSET, -56, INTERNAL)                         \
  X(CL_INVALID_EVENT_WAIT_LIST, -57, INTERNAL)                       \
  X(CL_INVALID_EVENT, -58, INTERNAL)                                 \
  X(CL_INVALID_OPERATION, -59, INTERNAL)                             \
  X(CL_INVALID_GL_OBJECT, -60, INTERNAL)                             \
  X(CL_INVALID_BUFFER_SIZE, -61, OUT_OF_MEMORY)                      \
  X(CL_INVALID_MIP_LEVEL, -62, INTERNAL)                             \
  X(CL_INVALID_GLOBAL_WORK_SIZE, -63, INTERNAL)                      \
  X(CL_INVALID_PROPERTY, -64, INTERNAL)                              \
  X(CL_INVALID_IMAGE_DESCRIPTOR, -65, INTERNAL)                      \
  X(CL_INVALID_COMPILER_OPTIONS, -66, INTERNAL)                      \
  X(CL_INVALID_LINKER_OPTIONS, -67, INTERNAL)                        \
  X(CL_INVALID_DEVICE_PARTITION_COUNT, -68, INTERNAL)                \
  X(CL_INVALID_PIPE_SIZE, -69, INTERNAL)                             \
  X(CL_INVALID_DEVICE_QUEUE, -70, INTERNAL)                          \
  X(CL_INVALID_SPEC_ID, -71, INTERNAL)                               \
  X(CL_MAX_SIZE_RESTRICTION_EXCEEDED, -72, OUT_OF_MEMORY)            \
  X(CL_INVALID_GL_SHAREGROUP_REFERENCE_KHR, -1000, INTERNAL)         \
  X(CL_PLATFORM_NOT_FOUND_KHR, -1001, UNAVAILABLE)                   \
  X(CL_INVALID_D3D10_DEVICE_KHR, -1002, INTERNAL)                    \
  X(CL_INVALID_D3D10_RESOURCE_KHR, -1003, INTERNAL)                  \
  X(CL_D3D10_RESOURCE_ALREADY_ACQUIRED_KHR, -1004, INTERNAL)         \
  X(CL_D3D10_RESOURCE_NOT_ACQUIRED_KHR, -1005, INTERNAL)             \
  X(CL_INVALID_D3D11_DEVICE_KHR, -1006, INTERNAL)                    \
  X(CL_INVALID_D3D11_RESOURCE_KHR, -1007, INTERNAL)                  \
  X(CL_D3D11_RESOURCE_ALREADY_ACQUIRED_KHR, -1008, INTERNAL)         \
  X(CL_D3D11_RESOURCE_NOT_ACQUIRED_KHR, -1009, INTERNAL)             \
  X(CL_INVALID_DX9_MEDIA_ADAPTER_KHR, -1010, INTERNAL)               \
  X(CL_INVALID_DX9_MEDIA_SURFACE_KHR, -1011, INTERNAL)               \
  X(CL_DX9_MEDIA_SURFACE_ALREADY_ACQUIRED_KHR, -1012, INTERNAL)      \
  X(CL_DX9_MEDIA_SURFACE_NOT_ACQUIRED_KHR, -1013, INTERNAL)          \
  X(CL_DEVICE_PARTITION_FAILED_EXT, -1057, UNSUPPORTED)              \
  X(CL_INVALID_PARTITION_COUNT_EXT, -1058, INTERNAL)                 \
  X(CL_INVALID_PARTITION_NAME_EXT, -1059, INTERNAL)                  \
  X(CL_EGL_RESOURCE_NOT_ACQUIRED_KHR, -1092, INTERNAL)               \
  X(CL_INVALID_EGL_OBJECT_KHR, -1093, INTERNAL)                      \
  X(CL_INVALID_ACCELERATOR_INTEL, -1094, INTERNAL)                   \
  X(CL_INVALID_ACCELERATOR_TYPE_INTEL, -1095, INTERNAL)              \
  X(CL_INVALID_ACCELERATOR_DESCRIPTOR_INTEL, -1096, INTERNAL)        \
  X(CL_ACCELERATOR_TYPE_NOT_SUPPORTED_INTEL, -1097, UNSUPPORTED)     \
  X(CL_INVALID_VA_API_MEDIA_ADAPTER_INTEL, -1098, INTERNAL)          \
  X(CL_INVALID_VA_API_MEDIA_SURFACE_INTEL, -1099, INTERNAL)          \
  X(CL_VA_API_MEDIA_SURFACE_ALREADY_ACQUIRED_INTEL, -1100, INTERNAL) \
  X(CL_VA_API_MEDIA_SURFACE_NOT_ACQUIRED_INTEL, -1101, INTERNAL)     \
  X(CL_COMMAND_TERMINATED_ITSELF_WITH_FAILURE_ARM, -1108, INTERNAL)  \
  X(CL_CONTEXT_TERMINATED_KHR, -1121, UNAVAILABLE)                   \
  X(CL_INVALID_COMMAND_BUFFER_KHR, -1138, INTERNAL)                  \
  X(CL_INVALID_SYNC_POINT_WAIT_LIST_KHR, -1139, INTERNAL)            \
  X(CL_INCOMPATIBLE_COMMAND_QUEUE_KHR, -1140, INTERNAL)              \
  X(CL_INVALID_MUTABLE_COMMAND_KHR, -1141, INTERNAL)                 \
  X(CL_INVALID_SEMAPHORE_KHR, -1142, INTERNAL)

const char *loom__cl_error_name(cl_int err) {
  switch (err) {
    case 0:
      return "CL_SUCCESS";
#define LOOM_X(name, value, status) \
  case value:                       \
    return #name;
      LOOM_CL_ERROR_MAP(LOOM_X)
#undef LOOM_X
    default:
      return NULL;
  }
}

loom_status loom__cl_status_code(cl_int err) {
  switch (err) {
    case 0:
      return LOOM_OK;
#define LOOM_X(name, value, status) \
  case value:                       \
    return LOOM_STATUS_##status;
      LOOM_CL_ERROR_MAP(LOOM_X)
#undef LOOM_X
    default:
      return LOOM_ERR_INTERNAL;
  }
}

loom_status loom__cl_status(cl_int err, const char *call) {
  if (err == 0) return LOOM_OK;
  const char *name = loom__cl_error_name(err);
  if (name)
    return loom__error(loom__cl_status_code(err), "%s: %s (%d)", call ? call : "OpenCL", name, (int)err);
  return loom__error(LOOM_ERR_INTERNAL, "%s: unknown OpenCL error %d", call ? call : "OpenCL", (int)err);
}
