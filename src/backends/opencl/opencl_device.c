/* OpenCL device discovery: every platform and device the ICD loader offers, described for
 * the device table (devices/devices.h). A platform or device that fails a query is skipped
 * with a note, never a crash; only Loom's own out-of-memory stops discovery. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CL/cl.h>

#include "backends/opencl/opencl_status.h"
#include "backends/registry.h" /* loom__opencl_discover */
#include "devices/devices.h"

/* Vendor queries, by value: they are not in every cl_ext.h (hwloc/opencl.h does the same). */
#define LOOM_CL_DEVICE_PCI_BUS_ID_NV 0x4008
#define LOOM_CL_DEVICE_PCI_SLOT_ID_NV 0x4009
#define LOOM_CL_DEVICE_PCI_DOMAIN_ID_NV 0x400A
#define LOOM_CL_DEVICE_TOPOLOGY_AMD 0x4037
#define LOOM_CL_DEVICE_GLOBAL_FREE_MEMORY_AMD 0x4039
#define LOOM_CL_DEVICE_TOPOLOGY_TYPE_PCIE_AMD 1
#define LOOM_CL_DEVICE_PCI_BUS_INFO_KHR 0x410F
#define LOOM_CL_PLATFORM_NOT_FOUND_KHR -1001 /* cl_khr_icd */

typedef union {
  struct {
    cl_uint type;
    cl_uint data[5];
  } raw;
  struct {
    cl_uint type;
    cl_char unused[17];
    cl_char bus, device, function;
  } pcie;
} loom_cl_topology_amd;

typedef struct {
  cl_uint domain, bus, device, function;
} loom_cl_pci_bus_info_khr;

/* One device's queries: the first failing required query is remembered, so a device is
 * described in one pass and skipped at the end with the call that failed. */
typedef struct query {
  cl_device_id device;
  cl_int err;         /* first failure of a required query */
  const char *failed; /* its parameter name */
  bool oom;           /* Loom's allocator failed */
} query;

static void q_scalar(query *q, cl_device_info param, const char *name, void *dst, size_t size) {
  if (q->err || q->oom) return;
  cl_int err = clGetDeviceInfo(q->device, param, size, dst, NULL);
  if (err != CL_SUCCESS) {
    q->err = err;
    q->failed = name;
  }
}

/* An optional query: false (and *dst untouched) on any failure. */
static bool q_optional(query *q, cl_device_info param, void *dst, size_t size) {
  return clGetDeviceInfo(q->device, param, size, dst, NULL) == CL_SUCCESS;
}

/* A string query into a Loom-owned string; NULL on failure. */
static char *q_string(query *q, cl_device_info param, const char *name) {
  if (q->err || q->oom) return NULL;
  size_t size = 0;
  cl_int err = clGetDeviceInfo(q->device, param, 0, NULL, &size);
  char *buf = NULL;
  if (err == CL_SUCCESS) {
    buf = loom__malloc(size + 1);
    if (!buf) {
      q->oom = true;
      return NULL;
    }
    err = clGetDeviceInfo(q->device, param, size, buf, NULL);
    buf[size] = '\0';
  }
  if (err != CL_SUCCESS) {
    loom__free(buf);
    q->err = err;
    q->failed = name;
    return NULL;
  }
  /* Drivers pad some strings with spaces. */
  size_t len = strlen(buf);
  while (len > 0 && buf[len - 1] == ' ') buf[--len] = '\0';
  return buf;
}

/* Whether the space-separated list holds `ext` as a whole word. */
static bool has_extension(const char *list, const char *ext) {
  size_t len = strlen(ext);
  for (const char *p = list ? strstr(list, ext) : NULL; p; p = strstr(p + 1, ext))
    if ((p == list || p[-1] == ' ') && (p[len] == ' ' || p[len] == '\0')) return true;
  return false;
}

/* The PCI bus id through whichever extension the device offers, or "". */
static void query_pci_bus_id(query *q, const char *ext, char out[LOOM__PCI_BUS_ID_LEN]) {
  unsigned domain = 0, bus = 0, dev = 0, func = 0;
  bool found = false;
  if (has_extension(ext, "cl_khr_pci_bus_info")) {
    loom_cl_pci_bus_info_khr info;
    if ((found = q_optional(q, LOOM_CL_DEVICE_PCI_BUS_INFO_KHR, &info, sizeof info))) {
      domain = info.domain, bus = info.bus, dev = info.device, func = info.function;
    }
  }
  if (!found && has_extension(ext, "cl_nv_device_attribute_query")) {
    cl_uint nv_bus, nv_slot, nv_domain = 0;
    if ((found = q_optional(q, LOOM_CL_DEVICE_PCI_BUS_ID_NV, &nv_bus, sizeof nv_bus) &&
                 q_optional(q, LOOM_CL_DEVICE_PCI_SLOT_ID_NV, &nv_slot, sizeof nv_slot))) {
      q_optional(q, LOOM_CL_DEVICE_PCI_DOMAIN_ID_NV, &nv_domain, sizeof nv_domain); /* CUDA >= 10.2 */
      /* The slot packs device and function (as hwloc and other projects read it). */
      domain = nv_domain, bus = nv_bus & 0xff, dev = nv_slot >> 3, func = nv_slot & 7;
    }
  }
  if (!found && has_extension(ext, "cl_amd_device_attribute_query")) {
    loom_cl_topology_amd topo;
    if (q_optional(q, LOOM_CL_DEVICE_TOPOLOGY_AMD, &topo, sizeof topo) &&
        topo.raw.type == LOOM_CL_DEVICE_TOPOLOGY_TYPE_PCIE_AMD) {
      found = true; /* AMD gives no domain */
      bus = (unsigned char)topo.pcie.bus, dev = (unsigned char)topo.pcie.device;
      func = (unsigned char)topo.pcie.function;
    }
  }
  out[0] = '\0';
  if (found) {
    char raw[40];
    snprintf(raw, sizeof raw, "%04x:%02x:%02x.%x", domain, bus, dev, func);
    loom__pci_bus_id_normalize(raw, out);
  }
}

static loom_device_kind kind_of(cl_device_type type) {
  if (type & CL_DEVICE_TYPE_GPU) return LOOM_DEVICE_GPU;
  if (type & CL_DEVICE_TYPE_CPU) return LOOM_DEVICE_CPU;
  return LOOM_DEVICE_ACCELERATOR;
}

/* Free memory: AMD's query where offered; a device on host memory has what the host has
 * (at most its own global size); else none. The CUDA side of a merged GPU fills it later. */
static void query_free_memory(query *q, loom__device *d) {
  if (has_extension(d->extensions, "cl_amd_device_attribute_query")) {
    size_t kib[2] = {0, 0}; /* total free, largest free block; in KiB */
    if (q_optional(q, LOOM_CL_DEVICE_GLOBAL_FREE_MEMORY_AMD, kib, sizeof kib)) {
      d->free_bytes = (int64_t)kib[0] * 1024;
      d->free_source = "CL_DEVICE_GLOBAL_FREE_MEMORY_AMD";
      return;
    }
  }
  if (d->kind == LOOM_DEVICE_CPU || d->host_unified) {
    int64_t avail = loom__meminfo_bytes("/proc/meminfo", "MemAvailable");
    if (avail >= 0) {
      d->free_bytes = LOOM_MIN(avail, d->memory_bytes);
      d->free_source = "/proc/meminfo";
      return;
    }
  }
  d->free_bytes = -1;
  d->free_source = "none";
}

/* Describes one device into *d. Returns OUT_OF_MEMORY only; a failed query leaves q->err. */
static loom_status describe_device(query *q, loom__device *d) {
  cl_device_type type = 0;
  cl_uint units = 0, clock = 0, vendor_id = 0;
  cl_ulong global = 0, max_alloc = 0, local = 0;
  cl_bool unified = CL_FALSE;
  d->name = q_string(q, CL_DEVICE_NAME, "CL_DEVICE_NAME");
  d->vendor = q_string(q, CL_DEVICE_VENDOR, "CL_DEVICE_VENDOR");
  d->version = q_string(q, CL_DEVICE_VERSION, "CL_DEVICE_VERSION");
  d->driver_version = q_string(q, CL_DRIVER_VERSION, "CL_DRIVER_VERSION");
  d->extensions = q_string(q, CL_DEVICE_EXTENSIONS, "CL_DEVICE_EXTENSIONS");
  q_scalar(q, CL_DEVICE_TYPE, "CL_DEVICE_TYPE", &type, sizeof type);
  q_scalar(q, CL_DEVICE_MAX_COMPUTE_UNITS, "CL_DEVICE_MAX_COMPUTE_UNITS", &units, sizeof units);
  q_scalar(q, CL_DEVICE_MAX_CLOCK_FREQUENCY, "CL_DEVICE_MAX_CLOCK_FREQUENCY", &clock, sizeof clock);
  q_scalar(q, CL_DEVICE_GLOBAL_MEM_SIZE, "CL_DEVICE_GLOBAL_MEM_SIZE", &global, sizeof global);
  q_scalar(q, CL_DEVICE_MAX_MEM_ALLOC_SIZE, "CL_DEVICE_MAX_MEM_ALLOC_SIZE", &max_alloc, sizeof max_alloc);
  q_scalar(q, CL_DEVICE_LOCAL_MEM_SIZE, "CL_DEVICE_LOCAL_MEM_SIZE", &local, sizeof local);
  if (q->oom) return loom__oom("an OpenCL device's description");
  if (q->err) return LOOM_OK;
  d->kind = kind_of(type);
  d->compute_units = (int32_t)units;
  d->clock_mhz = (int32_t)clock;
  d->memory_bytes = (int64_t)global;
  d->max_alloc_bytes = (int64_t)max_alloc;
  d->local_memory_bytes = (int64_t)local;
  /* Optional: old or partial drivers may not answer these. */
  if (q_optional(q, CL_DEVICE_VENDOR_ID, &vendor_id, sizeof vendor_id)) d->vendor_id = vendor_id;
  /* Deprecated since OpenCL 2.0 but still answered; a CPU device shares host memory anyway. */
  if (q_optional(q, CL_DEVICE_HOST_UNIFIED_MEMORY, &unified, sizeof unified))
    d->host_unified = unified == CL_TRUE;
  if (d->kind == LOOM_DEVICE_CPU) d->host_unified = true;
  cl_bitfield svm = 0; /* OpenCL >= 2.0 */
  if (q_optional(q, CL_DEVICE_SVM_CAPABILITIES, &svm, sizeof svm)) d->svm = (uint32_t)(svm & 0xf);
  cl_bitfield fp64 = 0;
  q_optional(q, CL_DEVICE_DOUBLE_FP_CONFIG, &fp64, sizeof fp64);
  d->fp64 = fp64 != 0 || has_extension(d->extensions, "cl_khr_fp64");
  d->fp16 = has_extension(d->extensions, "cl_khr_fp16");
  query_pci_bus_id(q, d->extensions, d->pci_bus_id);
  query_free_memory(q, d);
  return LOOM_OK;
}

/* A platform's string, Loom-owned; NULL with *err set on failure. */
static char *platform_string(cl_platform_id p, cl_platform_info param, cl_int *err, bool *oom) {
  size_t size = 0;
  *err = clGetPlatformInfo(p, param, 0, NULL, &size);
  if (*err != CL_SUCCESS) return NULL;
  char *buf = loom__malloc(size + 1);
  if (!buf) {
    *oom = true;
    return NULL;
  }
  *err = clGetPlatformInfo(p, param, size, buf, NULL);
  buf[size] = '\0';
  if (*err != CL_SUCCESS) {
    loom__free(buf);
    return NULL;
  }
  return buf;
}

/* Adds the devices of platform `pi`, numbering them from *next. */
static loom_status discover_platform(cl_platform_id platform, cl_uint pi, int32_t *next,
                                     loom__device_list *out, loom__notes *notes) {
  cl_int err;
  bool oom = false;
  char *pname = platform_string(platform, CL_PLATFORM_NAME, &err, &oom);
  if (oom) return loom__oom("an OpenCL platform name");
  if (!pname)
    return loom__notes_add(notes, "opencl: platform %u skipped: clGetPlatformInfo(CL_PLATFORM_NAME): %s", pi,
                           loom__cl_error_name(err) ? loom__cl_error_name(err) : "unknown error");
  cl_uint n = 0;
  err = clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, NULL, &n);
  cl_device_id *ids = NULL;
  if (err == CL_SUCCESS && n > 0) {
    if (!(ids = loom__calloc(n, sizeof *ids))) {
      loom__free(pname);
      return loom__oom("OpenCL device ids");
    }
    err = clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, n, ids, NULL);
  }
  loom_status s = LOOM_OK;
  if (err == CL_DEVICE_NOT_FOUND || (err == CL_SUCCESS && n == 0))
    s = loom__notes_add(notes, "opencl: platform '%s' has no devices", pname);
  else if (err != CL_SUCCESS)
    s = loom__notes_add(notes, "opencl: platform '%s' skipped: clGetDeviceIDs: %s", pname,
                        loom__cl_error_name(err) ? loom__cl_error_name(err) : "unknown error");
  for (cl_uint i = 0; err == CL_SUCCESS && s == LOOM_OK && i < n; i++) {
    query q = {.device = ids[i]};
    loom__device d;
    loom__device_init(&d);
    s = describe_device(&q, &d);
    if (s == LOOM_OK && q.err) {
      const char *name = loom__cl_error_name(q.err);
      s = loom__notes_add(notes, "opencl: device %u of platform '%s' skipped: clGetDeviceInfo(%s): %s (%d)",
                          i, pname, q.failed, name ? name : "unknown error", (int)q.err);
      loom__device_deinit(&d);
      continue;
    }
    if (s == LOOM_OK) {
      snprintf(d.id, sizeof d.id, "ocl%d", (int)*next);
      d.backends = LOOM_BACKEND_OPENCL;
      d.cl_platform = platform;
      d.cl_device = ids[i];
      d.cl_index = (*next)++;
      s = loom__device_set_string(&d.platform, pname);
    }
    if (s == LOOM_OK)
      s = loom__device_list_push(out, &d);
    else
      loom__device_deinit(&d);
  }
  loom__free(ids);
  loom__free(pname);
  return s;
}

loom_status loom__opencl_discover(loom__device_list *out, loom__notes *notes) {
  cl_uint n = 0;
  cl_int err = clGetPlatformIDs(0, NULL, &n);
  if (err == LOOM_CL_PLATFORM_NOT_FOUND_KHR || (err == CL_SUCCESS && n == 0)) {
    const char *vendors = getenv("OCL_ICD_VENDORS");
    return loom__notes_add(notes,
                           "opencl: no OpenCL platform found (clGetPlatformIDs: %s%s%s): 0 OpenCL devices",
                           err ? "CL_PLATFORM_NOT_FOUND_KHR" : "0 platforms",
                           vendors ? "; OCL_ICD_VENDORS=" : "", vendors ? vendors : "");
  }
  if (err != CL_SUCCESS) {
    const char *name = loom__cl_error_name(err);
    return loom__notes_add(notes, "opencl: clGetPlatformIDs failed: %s (%d): 0 OpenCL devices",
                           name ? name : "unknown error", (int)err);
  }
  cl_platform_id *platforms = loom__calloc(n, sizeof *platforms);
  if (!platforms) return loom__oom("OpenCL platform ids");
  err = clGetPlatformIDs(n, platforms, &n);
  loom_status s = LOOM_OK;
  if (err != CL_SUCCESS) {
    const char *name = loom__cl_error_name(err);
    s = loom__notes_add(notes, "opencl: clGetPlatformIDs failed: %s (%d): 0 OpenCL devices",
                        name ? name : "unknown error", (int)err);
    n = 0;
  }
  int32_t next = 0;
  for (cl_uint i = 0; s == LOOM_OK && i < n; i++) s = discover_platform(platforms[i], i, &next, out, notes);
  loom__free(platforms);
  return s;
}
