/* CUDA device discovery through the driver API, loaded at run time with dlopen: it builds
 * without the CUDA toolkit, and a machine without a driver (libcuda.so.1 absent) or without
 * a GPU simply has zero CUDA devices and a note that says why. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/registry.h" /* loom__cuda_discover */
#include "devices/devices.h"
#if LOOM_HAVE_CUDA
#include "backends/cuda/cuda_backend.h" /* loom__cu_have_nvrtc */
#endif

/* The few driver API types and values used here (cuda.h; the ABI is stable). */
typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;

enum {
  CUDA_SUCCESS = 0,
  CU_ATTR_MAX_SHARED_MEMORY_PER_BLOCK = 8,
  CU_ATTR_CLOCK_RATE = 13, /* kHz */
  CU_ATTR_MULTIPROCESSOR_COUNT = 16,
  CU_ATTR_INTEGRATED = 18,
  CU_ATTR_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_ATTR_COMPUTE_CAPABILITY_MINOR = 76,
  CU_ATTR_MANAGED_MEMORY = 83,
  CU_ATTR_CONCURRENT_MANAGED_ACCESS = 89,
};

/* The driver's entry points this file calls. */
typedef struct cuda_api {
  void *lib;
  CUresult (*cuInit)(unsigned flags);
  CUresult (*cuDriverGetVersion)(int *version);
  CUresult (*cuDeviceGetCount)(int *count);
  CUresult (*cuDeviceGet)(CUdevice *dev, int ordinal);
  CUresult (*cuDeviceGetName)(char *name, int len, CUdevice dev);
  CUresult (*cuDeviceGetAttribute)(int *value, int attrib, CUdevice dev);
  CUresult (*cuDeviceTotalMem_v2)(size_t *bytes, CUdevice dev);
  CUresult (*cuDeviceGetPCIBusId)(char *id, int len, CUdevice dev);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *ctx, CUdevice dev);
  CUresult (*cuDevicePrimaryCtxRelease_v2)(CUdevice dev);
  CUresult (*cuCtxPushCurrent_v2)(CUcontext ctx);
  CUresult (*cuCtxPopCurrent_v2)(CUcontext *ctx);
  CUresult (*cuMemGetInfo_v2)(size_t *free_bytes, size_t *total_bytes);
  CUresult (*cuGetErrorName)(CUresult err, const char **name); /* optional */
} cuda_api;

/* Names of the codes discovery meets, for drivers whose cuGetErrorName is missing. */
static const char *fallback_error_name(CUresult err) {
  switch (err) {
    case 1:
      return "CUDA_ERROR_INVALID_VALUE";
    case 2:
      return "CUDA_ERROR_OUT_OF_MEMORY";
    case 3:
      return "CUDA_ERROR_NOT_INITIALIZED";
    case 4:
      return "CUDA_ERROR_DEINITIALIZED";
    case 34:
      return "CUDA_ERROR_STUB_LIBRARY";
    case 35:
      return "CUDA_ERROR_INSUFFICIENT_DRIVER";
    case 46:
      return "CUDA_ERROR_DEVICE_UNAVAILABLE";
    case 100:
      return "CUDA_ERROR_NO_DEVICE";
    case 101:
      return "CUDA_ERROR_INVALID_DEVICE";
    case 201:
      return "CUDA_ERROR_INVALID_CONTEXT";
    case 216:
      return "CUDA_ERROR_CONTEXT_ALREADY_IN_USE";
    case 304:
      return "CUDA_ERROR_OPERATING_SYSTEM";
    case 801:
      return "CUDA_ERROR_NOT_SUPPORTED";
    case 802:
      return "CUDA_ERROR_SYSTEM_NOT_READY";
    case 803:
      return "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH";
    case 804:
      return "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE";
    case 999:
      return "CUDA_ERROR_UNKNOWN";
    default:
      return NULL;
  }
}

/* "CUDA_ERROR_NO_DEVICE (100)" into buf: the vendor's name for a driver result. */
static const char *error_name(const cuda_api *api, CUresult err, char *buf, size_t size) {
  const char *name = NULL;
  if (api->cuGetErrorName && api->cuGetErrorName(err, &name) != CUDA_SUCCESS) name = NULL;
  if (!name) name = fallback_error_name(err);
  snprintf(buf, size, "%s (%d)", name ? name : "unknown CUDA error", (int)err);
  return buf;
}

/* Loads libcuda.so.1 and its entry points. On failure writes why into `why`. */
static bool load_api(cuda_api *api, char *why, size_t size) {
  memset(api, 0, sizeof *api);
  api->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!api->lib) {
    snprintf(why, size, "libcuda.so.1 not found (no NVIDIA driver)");
    return false;
  }
  struct {
    const char *name;
    void **slot;
  } syms[] = {
#define SYM(f) {#f, (void **)&api->f}
      SYM(cuInit),
      SYM(cuDriverGetVersion),
      SYM(cuDeviceGetCount),
      SYM(cuDeviceGet),
      SYM(cuDeviceGetName),
      SYM(cuDeviceGetAttribute),
      SYM(cuDeviceTotalMem_v2),
      SYM(cuDeviceGetPCIBusId),
      SYM(cuDevicePrimaryCtxRetain),
      SYM(cuDevicePrimaryCtxRelease_v2),
      SYM(cuCtxPushCurrent_v2),
      SYM(cuCtxPopCurrent_v2),
      SYM(cuMemGetInfo_v2),
#undef SYM
  };
  for (int32_t i = 0; i < LOOM_ARRAY_SIZE(syms); i++) {
    /* POSIX: a function pointer travels through void * (dlsym's own contract). */
    *syms[i].slot = dlsym(api->lib, syms[i].name);
    if (!*syms[i].slot) {
      snprintf(why, size, "libcuda.so.1 lacks %s (driver too old)", syms[i].name);
      dlclose(api->lib);
      memset(api, 0, sizeof *api);
      return false;
    }
  }
  *(void **)&api->cuGetErrorName = dlsym(api->lib, "cuGetErrorName");
  return true;
}

/* The kernel module's version ("550.54.15") from /proc, or "" where it cannot be read. */
static void read_kernel_driver_version(char *buf, size_t size) {
  buf[0] = '\0';
  FILE *f = fopen("/proc/driver/nvidia/version", "r");
  if (!f) return;
  char line[256];
  if (fgets(line, sizeof line, f)) {
    /* "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 ..." */
    const char *p = strstr(line, "Module");
    char version[32];
    if (p && sscanf(p + 6, " %31s", version) == 1) snprintf(buf, size, "%.31s", version);
  }
  fclose(f);
}

static int attribute(const cuda_api *api, int attrib, CUdevice dev) {
  int v = 0;
  if (api->cuDeviceGetAttribute(&v, attrib, dev) != CUDA_SUCCESS) v = 0;
  return v;
}

/* Free memory through the device's primary context (the one the runtime API shares), as
 * cudaMemGetInfo does. Returns the failing call's result. */
static CUresult free_memory(const cuda_api *api, CUdevice dev, int64_t *out_free, const char **out_call) {
  CUcontext ctx = NULL, popped = NULL;
  size_t free_bytes = 0, total = 0;
  CUresult r = api->cuDevicePrimaryCtxRetain(&ctx, dev);
  if (r != CUDA_SUCCESS) {
    *out_call = "cuDevicePrimaryCtxRetain";
    return r;
  }
  r = api->cuCtxPushCurrent_v2(ctx);
  if (r == CUDA_SUCCESS) {
    r = api->cuMemGetInfo_v2(&free_bytes, &total);
    if (r != CUDA_SUCCESS) *out_call = "cuMemGetInfo";
    api->cuCtxPopCurrent_v2(&popped);
  } else {
    *out_call = "cuCtxPushCurrent";
  }
  api->cuDevicePrimaryCtxRelease_v2(dev);
  if (r == CUDA_SUCCESS) *out_free = (int64_t)free_bytes;
  return r;
}

/* Describes CUDA device `ordinal`. A failed required query is a note and a skipped device. */
static loom_status describe_device(const cuda_api *api, int ordinal, const char *version,
                                   const char *kernel_version, loom__device_list *out, loom__notes *notes) {
  char err[96], name[256] = "", bus_id[32] = "";
  CUdevice dev;
  size_t total = 0;
  const char *call = "cuDeviceGet";
  CUresult r = api->cuDeviceGet(&dev, ordinal);
  if (r == CUDA_SUCCESS && (r = api->cuDeviceGetName(name, sizeof name, dev)) != CUDA_SUCCESS)
    call = "cuDeviceGetName";
  if (r == CUDA_SUCCESS && (r = api->cuDeviceTotalMem_v2(&total, dev)) != CUDA_SUCCESS)
    call = "cuDeviceTotalMem";
  if (r == CUDA_SUCCESS && (r = api->cuDeviceGetPCIBusId(bus_id, sizeof bus_id, dev)) != CUDA_SUCCESS)
    call = "cuDeviceGetPCIBusId";
  if (r != CUDA_SUCCESS)
    return loom__notes_add(notes, "cuda: device %d skipped: %s: %s", ordinal, call,
                           error_name(api, r, err, sizeof err));
  loom__device d;
  loom__device_init(&d);
  snprintf(d.id, sizeof d.id, "cuda%d", ordinal);
  d.backends = LOOM_BACKEND_CUDA;
  d.kind = LOOM_DEVICE_GPU;
  d.cuda_ordinal = ordinal;
  d.vendor_id = 0x10de;
  d.compute_units = attribute(api, CU_ATTR_MULTIPROCESSOR_COUNT, dev);
  d.clock_mhz = attribute(api, CU_ATTR_CLOCK_RATE, dev) / 1000;
  d.cc_major = attribute(api, CU_ATTR_COMPUTE_CAPABILITY_MAJOR, dev);
  d.cc_minor = attribute(api, CU_ATTR_COMPUTE_CAPABILITY_MINOR, dev);
  d.memory_bytes = (int64_t)total;
  d.max_alloc_bytes = (int64_t)total;
  d.local_memory_bytes = attribute(api, CU_ATTR_MAX_SHARED_MEMORY_PER_BLOCK, dev);
  d.host_unified = attribute(api, CU_ATTR_INTEGRATED, dev) != 0;
  d.managed_memory = attribute(api, CU_ATTR_MANAGED_MEMORY, dev) != 0;
  d.concurrent_managed_access = attribute(api, CU_ATTR_CONCURRENT_MANAGED_ACCESS, dev) != 0;
  d.fp64 = true; /* every CUDA GPU computes in double */
  d.fp16 = d.cc_major > 5 || (d.cc_major == 5 && d.cc_minor >= 3);
  if (!loom__pci_bus_id_normalize(bus_id, d.pci_bus_id)) d.pci_bus_id[0] = '\0';
  loom_status s = LOOM_OK;
  r = free_memory(api, dev, &d.free_bytes, &call);
  if (r == CUDA_SUCCESS) {
    d.free_source = "cuMemGetInfo";
  } else {
    d.free_bytes = -1;
    d.free_source = "none";
    s = loom__notes_add(notes, "cuda%d: free memory unknown: %s: %s", ordinal, call,
                        error_name(api, r, err, sizeof err));
  }
  if (s == LOOM_OK) s = loom__device_set_string(&d.name, name);
  if (s == LOOM_OK) s = loom__device_set_string(&d.vendor, "NVIDIA Corporation");
  if (s == LOOM_OK) s = loom__device_set_string(&d.version, version);
  if (s == LOOM_OK) s = loom__device_set_string(&d.driver_version, kernel_version);
  if (s != LOOM_OK) {
    loom__device_deinit(&d);
    return s;
  }
  return loom__device_list_push(out, &d);
}

loom_status loom__cuda_discover(loom__device_list *out, loom__notes *notes) {
  cuda_api api;
  char why[128], err[96];
#if LOOM_HAVE_CUDA
  /* Whether anything can run on what is found below: the build says. */
  /* Fused ops compile their kernels with NVRTC at run time; without it they run unfused. */
  bool nvrtc = loom__cu_have_nvrtc();
  loom_status built = loom__notes_add(notes,
                                      "cuda: compute backend built (kernels for %s; cuBLAS and cuFFT "
                                      "are loaded when a device is first used); fused kernels: %s%s%s",
                                      LOOM_CUDA_ARCHS, nvrtc ? "yes (NVRTC)" : "no (no NVRTC: ",
                                      nvrtc ? "" : loom__cu_nvrtc_why(), nvrtc ? "" : ")");
  if (built) return built;
#else
  loom_status built = loom__notes_add(notes,
                                      "cuda: no compute backend in this build (no CUDA toolkit at "
                                      "configure time): CUDA devices are listed, not used");
  if (built) return built;
#endif
  if (!load_api(&api, why, sizeof why)) return loom__notes_add(notes, "cuda: %s: 0 CUDA devices", why);
  CUresult r = api.cuInit(0);
  if (r != CUDA_SUCCESS) {
    /* A driver without a GPU says CUDA_ERROR_NO_DEVICE here: zero devices, not an error. */
    loom_status s =
        loom__notes_add(notes, "cuda: cuInit: %s: 0 CUDA devices", error_name(&api, r, err, sizeof err));
    dlclose(api.lib);
    return s;
  }
  /* From here the driver is initialised and stays loaded: unloading an initialised driver
   * is unsafe (its threads outlive dlclose), and the cuda backend uses it next. */
  int count = 0, driver = 0;
  if ((r = api.cuDeviceGetCount(&count)) != CUDA_SUCCESS)
    return loom__notes_add(notes, "cuda: cuDeviceGetCount: %s: 0 CUDA devices",
                           error_name(&api, r, err, sizeof err));
  if (count == 0) return loom__notes_add(notes, "cuda: the driver reports no CUDA device");
  char version[32] = "", kernel_version[32];
  if (api.cuDriverGetVersion(&driver) == CUDA_SUCCESS)
    snprintf(version, sizeof version, "CUDA %d.%d", driver / 1000, (driver % 1000) / 10);
  read_kernel_driver_version(kernel_version, sizeof kernel_version);
  loom_status s = LOOM_OK;
  for (int i = 0; s == LOOM_OK && i < count; i++)
    s = describe_device(&api, i, version, kernel_version, out, notes);
  return s;
}
