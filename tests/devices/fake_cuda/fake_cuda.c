/* A stand-in for the NVIDIA driver (libcuda.so.1) with the few driver API calls Loom's
 * discovery makes, so src/backends/cuda/cuda_device.c is tested on machines without a GPU.
 * Put its folder first in LD_LIBRARY_PATH. Configured by the environment:
 *   LOOM_FAKE_CUDA_DEVICES  comma-separated PCI bus ids, one device each; unset or empty:
 *                           cuInit fails with CUDA_ERROR_NO_DEVICE, as a driver without a GPU
 *   LOOM_FAKE_CUDA_FAIL     "cuMemGetInfo" (every device), or "cuDeviceGetName:N" (device N)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;

#define EXPORT __attribute__((visibility("default")))
#define MAX_DEVICES 8

static char bus_ids[MAX_DEVICES][32];
static int count = -1;
static int current = -1; /* the device whose primary context is pushed */

static void parse(void) {
  if (count >= 0) return;
  count = 0;
  const char *env = getenv("LOOM_FAKE_CUDA_DEVICES");
  while (env && *env && count < MAX_DEVICES) {
    const char *comma = strchr(env, ',');
    size_t n = comma ? (size_t)(comma - env) : strlen(env);
    snprintf(bus_ids[count++], sizeof bus_ids[0], "%.*s", (int)n, env);
    env = comma ? comma + 1 : env + n;
  }
}

static int fails(const char *call, int dev) {
  const char *f = getenv("LOOM_FAKE_CUDA_FAIL");
  size_t n = strlen(call);
  if (!f || strncmp(f, call, n) != 0) return 0;
  return f[n] == '\0' || (f[n] == ':' && atoi(f + n + 1) == dev);
}

static int valid(CUdevice dev) {
  return dev >= 0 && dev < count;
}

EXPORT CUresult cuInit(unsigned flags) {
  (void)flags;
  parse();
  return count > 0 ? 0 : 100; /* CUDA_ERROR_NO_DEVICE */
}

EXPORT CUresult cuDriverGetVersion(int *v) {
  *v = 12040;
  return 0;
}

EXPORT CUresult cuDeviceGetCount(int *n) {
  *n = count;
  return 0;
}

EXPORT CUresult cuDeviceGet(CUdevice *dev, int ordinal) {
  if (ordinal < 0 || ordinal >= count) return 101; /* CUDA_ERROR_INVALID_DEVICE */
  *dev = ordinal;
  return 0;
}

EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
  if (!valid(dev)) return 101;
  if (fails("cuDeviceGetName", dev)) return 999; /* CUDA_ERROR_UNKNOWN */
  snprintf(name, (size_t)len, "NVIDIA A100-SXM4-80GB");
  return 0;
}

EXPORT CUresult cuDeviceGetAttribute(int *v, int attrib, CUdevice dev) {
  if (!valid(dev)) return 101;
  switch (attrib) {
    case 8:
      *v = 49152;
      break; /* shared memory per block */
    case 13:
      *v = 1410000;
      break; /* clock, kHz */
    case 16:
      *v = 108;
      break; /* multiprocessors */
    case 18:
      *v = 0;
      break; /* integrated */
    case 75:
      *v = 8;
      break; /* compute capability */
    case 76:
      *v = 0;
      break;
    case 83:
      *v = 1;
      break; /* managed memory */
    case 89:
      *v = 1;
      break; /* concurrent managed access */
    default:
      *v = 0;
  }
  return 0;
}

EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
  if (!valid(dev)) return 101;
  *bytes = (size_t)80 << 30;
  return 0;
}

EXPORT CUresult cuDeviceGetPCIBusId(char *id, int len, CUdevice dev) {
  if (!valid(dev)) return 101;
  /* The driver writes capitals: "0000:3B:00.0". */
  snprintf(id, (size_t)len, "%s", bus_ids[dev]);
  for (char *p = id; *p; p++)
    if (*p >= 'a' && *p <= 'f') *p = (char)(*p - 'a' + 'A');
  return 0;
}

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev) {
  if (!valid(dev)) return 101;
  *ctx = (CUcontext)(size_t)(dev + 1);
  return 0;
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  return valid(dev) ? 0 : 101;
}

EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
  current = (int)(size_t)ctx - 1;
  return 0;
}

EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *ctx) {
  if (ctx) *ctx = (CUcontext)(size_t)(current + 1);
  current = -1;
  return 0;
}

EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total) {
  if (current < 0) return 201;                  /* CUDA_ERROR_INVALID_CONTEXT */
  if (fails("cuMemGetInfo", current)) return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
  *free_bytes = ((size_t)79 << 30) - (size_t)current * (1 << 20);
  *total = (size_t)80 << 30;
  return 0;
}

EXPORT CUresult cuGetErrorName(CUresult err, const char **name) {
  switch (err) {
    case 2:
      *name = "CUDA_ERROR_OUT_OF_MEMORY";
      return 0;
    case 100:
      *name = "CUDA_ERROR_NO_DEVICE";
      return 0;
    case 101:
      *name = "CUDA_ERROR_INVALID_DEVICE";
      return 0;
    case 201:
      *name = "CUDA_ERROR_INVALID_CONTEXT";
      return 0;
    case 999:
      *name = "CUDA_ERROR_UNKNOWN";
      return 0;
    default:
      *name = NULL;
      return 1;
  }
}
