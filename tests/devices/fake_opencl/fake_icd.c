/* A fake OpenCL vendor driver (ICD) for the ICD loader, so the vendor paths of Loom's
 * OpenCL discovery are tested without the vendors' hardware. Register it with
 * OCL_ICD_VENDORS=<folder holding an .icd file naming this library>. It offers:
 *
 *   platform 0 "Loom Fake Platform":
 *     device 0  NVIDIA GPU, PCI 0000:19:00.0 through cl_nv_device_attribute_query
 *     device 1  AMD GPU, PCI 0000:af:00.0 through cl_amd_device_attribute_query, and
 *               CL_DEVICE_GLOBAL_FREE_MEMORY_AMD = 60 GiB
 *     device 2  fails CL_DEVICE_NAME with CL_OUT_OF_RESOURCES (must be skipped)
 *     device 3  GPU with PCI 0000:3b:00.0 through cl_khr_pci_bus_info, OpenCL 1.2 (no SVM)
 *   platform 1: fails CL_PLATFORM_NAME with CL_OUT_OF_HOST_MEMORY (must be skipped)
 *
 * Only clGetExtensionFunctionAddress, clIcdGetPlatformIDsKHR and clGetPlatformInfo (which
 * ocl-icd looks up to check cl_khr_icd) are exported; every other call goes through the
 * dispatch table, as the ICD contract has it.
 */
#define CL_TARGET_OPENCL_VERSION 300
#include <stdio.h>
#include <string.h>

#include <CL/cl.h>
#include <CL/cl_icd.h>

#define EXPORT __attribute__((visibility("default")))
#define GiB ((cl_ulong)1 << 30)

struct _cl_platform_id {
  cl_icd_dispatch *dispatch;
  int index;
};

struct _cl_device_id {
  cl_icd_dispatch *dispatch;
  int index;
};

static cl_icd_dispatch dispatch;
static struct _cl_platform_id platforms[2] = {{&dispatch, 0}, {&dispatch, 1}};
static struct _cl_device_id devices[4] = {{&dispatch, 0}, {&dispatch, 1}, {&dispatch, 2}, {&dispatch, 3}};

/* Copies a value out as clGet*Info do. */
static cl_int answer(const void *value, size_t size, size_t capacity, void *out, size_t *out_size) {
  if (out_size) *out_size = size;
  if (out) {
    if (capacity < size) return CL_INVALID_VALUE;
    memcpy(out, value, size);
  }
  return CL_SUCCESS;
}

static cl_int answer_string(const char *s, size_t capacity, void *out, size_t *out_size) {
  return answer(s, strlen(s) + 1, capacity, out, out_size);
}

static cl_int CL_API_CALL fake_platform_info(cl_platform_id p, cl_platform_info param, size_t capacity,
                                             void *out, size_t *out_size) {
  if (p->index == 1 && param == CL_PLATFORM_NAME) return CL_OUT_OF_HOST_MEMORY;
  switch (param) {
    case CL_PLATFORM_NAME:
      return answer_string(p->index ? "Broken Platform" : "Loom Fake Platform", capacity, out, out_size);
    case CL_PLATFORM_VENDOR:
      return answer_string("Loom tests", capacity, out, out_size);
    case CL_PLATFORM_VERSION:
      return answer_string("OpenCL 3.0 Loom fake", capacity, out, out_size);
    case CL_PLATFORM_PROFILE:
      return answer_string("FULL_PROFILE", capacity, out, out_size);
    case CL_PLATFORM_EXTENSIONS:
      return answer_string("cl_khr_icd", capacity, out, out_size);
    case 0x0920:
      return answer_string("LOOMFAKE", capacity, out, out_size); /* CL_PLATFORM_ICD_SUFFIX_KHR */
    default:
      return CL_INVALID_VALUE;
  }
}

static cl_int CL_API_CALL fake_device_ids(cl_platform_id p, cl_device_type type, cl_uint n, cl_device_id *out,
                                          cl_uint *out_n) {
  (void)type;
  cl_uint have = p->index == 0 ? 4 : 1;
  if (out_n) *out_n = have;
  for (cl_uint i = 0; out && i < n && i < have; i++) out[i] = &devices[i];
  return CL_SUCCESS;
}

static const char *device_name(int i) {
  static const char *names[] = {"NVIDIA A100-SXM4-80GB", "gfx90a:sramecc+:xnack-", "broken", "Fake KHR GPU"};
  return names[i];
}

static const char *device_extensions(int i) {
  static const char *ext[] = {"cl_khr_fp64 cl_khr_fp16 cl_nv_device_attribute_query",
                              "cl_khr_fp64 cl_amd_device_attribute_query", "",
                              "cl_khr_fp16 cl_khr_pci_bus_info"};
  return ext[i];
}

/* Vendor queries (by value, as Loom asks them). */
static cl_int vendor_info(int i, cl_device_info param, size_t capacity, void *out, size_t *out_size) {
  if (i == 0 && param == 0x4008) { /* CL_DEVICE_PCI_BUS_ID_NV */
    cl_uint bus = 0x19;
    return answer(&bus, sizeof bus, capacity, out, out_size);
  }
  if (i == 0 && param == 0x4009) { /* CL_DEVICE_PCI_SLOT_ID_NV: device << 3 | function */
    cl_uint slot = 0;
    return answer(&slot, sizeof slot, capacity, out, out_size);
  }
  if (i == 1 && param == 0x4037) { /* CL_DEVICE_TOPOLOGY_AMD */
    union {
      struct {
        cl_uint type;
        cl_uint data[5];
      } raw;
      struct {
        cl_uint type;
        cl_char unused[17];
        cl_char bus, device, function;
      } pcie;
    } topo;
    memset(&topo, 0, sizeof topo);
    topo.pcie.type = 1;
    topo.pcie.bus = (cl_char)0xaf; /* a bus above 0x7f: signed char on the wire */
    return answer(&topo, sizeof topo, capacity, out, out_size);
  }
  if (i == 1 && param == 0x4039) { /* CL_DEVICE_GLOBAL_FREE_MEMORY_AMD, KiB */
    size_t kib[2] = {(size_t)60 << 20, (size_t)50 << 20};
    return answer(kib, sizeof kib, capacity, out, out_size);
  }
  if (i == 3 && param == 0x410F) { /* CL_DEVICE_PCI_BUS_INFO_KHR */
    cl_uint info[4] = {0, 0x3b, 0, 0};
    return answer(info, sizeof info, capacity, out, out_size);
  }
  return CL_INVALID_VALUE;
}

static cl_int CL_API_CALL fake_device_info(cl_device_id d, cl_device_info param, size_t capacity, void *out,
                                           size_t *out_size) {
  int i = d->index;
  cl_uint u;
  cl_ulong ul;
  cl_bitfield bits;
  cl_device_type type = CL_DEVICE_TYPE_GPU;
  switch (param) {
    case CL_DEVICE_NAME:
      if (i == 2) return CL_OUT_OF_RESOURCES;
      return answer_string(device_name(i), capacity, out, out_size);
    case CL_DEVICE_VENDOR:
      return answer_string(i == 0   ? "NVIDIA Corporation"
                           : i == 1 ? "Advanced Micro Devices, Inc."
                                    : "Loom",
                           capacity, out, out_size);
    case CL_DEVICE_VERSION:
      return answer_string(i == 3 ? "OpenCL 1.2 fake" : "OpenCL 3.0 fake", capacity, out, out_size);
    case CL_DRIVER_VERSION:
      return answer_string("1.0", capacity, out, out_size);
    case CL_DEVICE_EXTENSIONS:
      return answer_string(device_extensions(i), capacity, out, out_size);
    case CL_DEVICE_TYPE:
      return answer(&type, sizeof type, capacity, out, out_size);
    case CL_DEVICE_VENDOR_ID:
      u = i == 0 ? 0x10de : i == 1 ? 0x1002 : 0x8086;
      return answer(&u, sizeof u, capacity, out, out_size);
    case CL_DEVICE_MAX_COMPUTE_UNITS:
      u = 104;
      return answer(&u, sizeof u, capacity, out, out_size);
    case CL_DEVICE_MAX_CLOCK_FREQUENCY:
      u = 1700;
      return answer(&u, sizeof u, capacity, out, out_size);
    case CL_DEVICE_GLOBAL_MEM_SIZE:
      ul = 64 * GiB;
      return answer(&ul, sizeof ul, capacity, out, out_size);
    case CL_DEVICE_MAX_MEM_ALLOC_SIZE:
      ul = 16 * GiB;
      return answer(&ul, sizeof ul, capacity, out, out_size);
    case CL_DEVICE_LOCAL_MEM_SIZE:
      ul = 65536;
      return answer(&ul, sizeof ul, capacity, out, out_size);
    case CL_DEVICE_HOST_UNIFIED_MEMORY:
      u = CL_FALSE;
      return answer(&u, sizeof u, capacity, out, out_size);
    case CL_DEVICE_SVM_CAPABILITIES:
      if (i == 3) return CL_INVALID_VALUE; /* an OpenCL 1.2 device does not know the query */
      bits = CL_DEVICE_SVM_COARSE_GRAIN_BUFFER;
      return answer(&bits, sizeof bits, capacity, out, out_size);
    case CL_DEVICE_DOUBLE_FP_CONFIG:
      bits = i == 3 ? 0 : CL_FP_FMA;
      return answer(&bits, sizeof bits, capacity, out, out_size);
    default:
      return vendor_info(i, param, capacity, out, out_size);
  }
}

static cl_int CL_API_CALL fake_retain_release(cl_device_id d) {
  (void)d;
  return CL_SUCCESS;
}

EXPORT cl_int CL_API_CALL clIcdGetPlatformIDsKHR(cl_uint n, cl_platform_id *out, cl_uint *out_n) {
  dispatch.clGetPlatformInfo = fake_platform_info;
  dispatch.clGetDeviceIDs = fake_device_ids;
  dispatch.clGetDeviceInfo = fake_device_info;
  dispatch.clRetainDevice = fake_retain_release;
  dispatch.clReleaseDevice = fake_retain_release;
  if (out_n) *out_n = 2;
  for (cl_uint i = 0; out && i < n && i < 2; i++) out[i] = &platforms[i];
  return CL_SUCCESS;
}

EXPORT cl_int CL_API_CALL clGetPlatformInfo(cl_platform_id p, cl_platform_info param, size_t capacity,
                                            void *out, size_t *out_size) {
  return fake_platform_info(p, param, capacity, out, out_size);
}

EXPORT void *CL_API_CALL clGetExtensionFunctionAddress(const char *name) {
  if (strcmp(name, "clIcdGetPlatformIDsKHR") == 0) return (void *)clIcdGetPlatformIDsKHR;
  if (strcmp(name, "clGetPlatformInfo") == 0) return (void *)fake_platform_info;
  return NULL;
}
