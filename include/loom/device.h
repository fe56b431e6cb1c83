/* Devices and memory nodes: what a context found on this machine.
 *
 * A context discovers devices once, when it is created (loom_context_create):
 * - the host through hwloc: packages, cores, PUs, NUMA nodes and their memory, caches. The
 *   host is one device, cpu0.
 * - every OpenCL platform and device, through the ICD loader: ocl0, ocl1, ... in platform
 *   then device order.
 * - every CUDA device, through the driver (libcuda.so.1, loaded at run time): cuda0, ...
 *
 * One GPU is one device: a GPU that both CUDA and OpenCL expose (same PCI bus id) is listed
 * once, with both backends, under its CUDA id; its OpenCL id stays valid as an alias
 * (loom_device_info.also_known_as, loom_context_find_device) and it has one memory node.
 *
 * A memory node is one memory: each host NUMA node (host0, host1, ...; host nodes come
 * first), then each device's own memory, named after the device (ocl1, cuda0). A device that
 * shares host memory (the cpu0 device, PoCL, an integrated GPU) has no memory node of its
 * own: it uses a host node and says so (host_unified).
 *
 * The context keeps only the devices selected by loom_context_options.devices or the
 * LOOM_DEVICES environment variable (see loom/runtime.h): ids never change with the
 * selection, so `LOOM_DEVICES=ocl1` gives a context with one device whose id is ocl1.
 * Indexes (0 .. count-1) are positions in the context's own list.
 *
 * What was not found and why (no OpenCL platform, no CUDA driver, a device that failed a
 * query and was skipped) is kept as notes (loom_context_note).
 *
 * Every string returned is owned by the context and lives as long as it. All functions here
 * only read the context and may be called from several threads at once.
 */
#ifndef LOOM_DEVICE_H
#define LOOM_DEVICE_H

#include <stdbool.h>
#include <stdint.h>

#include "loom/context.h"
#include "loom/export.h"
#include "loom/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bits of loom_device_info.backends: which backends can drive the device. */
enum {
  LOOM_BACKEND_CPU = 1u << 0,
  LOOM_BACKEND_OPENCL = 1u << 1,
  LOOM_BACKEND_CUDA = 1u << 2,
};

typedef enum loom_device_kind {
  LOOM_DEVICE_CPU,
  LOOM_DEVICE_GPU,
  LOOM_DEVICE_ACCELERATOR, /* OpenCL accelerators and custom devices */
} loom_device_kind;

/* Bits of loom_device_info.svm, as OpenCL 2.0 defines them (CL_DEVICE_SVM_*). */
enum {
  LOOM_SVM_COARSE_GRAIN_BUFFER = 1u << 0,
  LOOM_SVM_FINE_GRAIN_BUFFER = 1u << 1,
  LOOM_SVM_FINE_GRAIN_SYSTEM = 1u << 2,
  LOOM_SVM_ATOMICS = 1u << 3,
};

/* What a device is. Plain data: strings are owned by the context; none is NULL (an unknown
 * string is ""). */
typedef struct loom_device_info {
  const char *id;            /* "cpu0", "ocl1", "cuda0" */
  const char *also_known_as; /* the device's other ids, comma-separated ("ocl0"), or "" */
  uint32_t backends;         /* LOOM_BACKEND_* bits */
  loom_device_kind kind;
  const char *name;
  const char *vendor;
  uint32_t vendor_id;  /* PCI vendor id where known (0x10de NVIDIA), else 0 */
  const char *version; /* "OpenCL 3.0 ...", "CUDA 12.4" (the driver's), "" for cpu0 */
  const char *driver_version;
  const char *platform;   /* OpenCL platform name, or "" */
  const char *extensions; /* OpenCL extensions, space-separated, or "" */
  int32_t compute_units;  /* PUs, OpenCL compute units, CUDA multiprocessors */
  int32_t clock_mhz;      /* maximum clock; 0 when unknown */
  int32_t compute_capability_major, compute_capability_minor; /* CUDA devices; else 0 */
  int64_t memory_bytes;                                       /* global memory the device may use */
  int64_t max_alloc_bytes;                                    /* the largest single allocation */
  int64_t local_memory_bytes; /* OpenCL local / CUDA shared memory per group; 0 for cpu0 */
  int64_t free_bytes;         /* free now, from free_source; -1 when there is no source */
  /* Where free_bytes came from: "cuMemGetInfo", "CL_DEVICE_GLOBAL_FREE_MEMORY_AMD",
   * "/proc/meminfo", or "none". */
  const char *free_source;
  bool host_unified;              /* shares host memory (cpu0, PoCL, integrated GPUs) */
  uint32_t svm;                   /* LOOM_SVM_* bits; 0 when the device has no SVM */
  bool managed_memory;            /* CUDA managed memory */
  bool concurrent_managed_access; /* CUDA: host and device may touch managed memory at once */
  bool fp64, fp16;                /* double and half precision arithmetic */
  int32_t numa_node;              /* OS index of the nearest NUMA node; -1 when none is nearer */
  const char *pci_bus_id;         /* "0000:3b:00.0", or "" when the device is not on PCI */
  int32_t memory_node;            /* index of the memory node it allocates from */
} loom_device_info;

typedef enum loom_memory_node_kind {
  LOOM_MEMORY_HOST,   /* a host NUMA node */
  LOOM_MEMORY_DEVICE, /* a device's own memory */
} loom_memory_node_kind;

/* One memory. Plain data: strings and the devices array are owned by the context. */
typedef struct loom_memory_node_info {
  const char *id; /* "host0", "ocl1", "cuda0" */
  loom_memory_node_kind kind;
  int64_t size_bytes;
  int64_t free_bytes;      /* -1 when there is no source */
  const char *free_source; /* as loom_device_info.free_source, or "/sys/devices/system/node" */
  /* Host nodes: the NUMA node's OS index. Device memory: the OS index of the nearest NUMA
   * node, -1 when none is nearer. */
  int32_t numa_os_index;
  int32_t cores, pus;     /* host nodes: the cores and PUs local to it; else 0 */
  const char *cpus;       /* host nodes: their PUs' OS indexes ("0-7,16-23"); else "" */
  int32_t device_count;   /* the selected devices that allocate from this node */
  const int32_t *devices; /* their indexes, device_count of them */
} loom_memory_node_info;

/* The host as hwloc sees it. Plain data owned by the context. */
typedef struct loom_host_info {
  int32_t packages, cores, pus, numa_nodes;
  int64_t memory_bytes;                  /* all host nodes together */
  int64_t l1d_bytes, l2_bytes, l3_bytes; /* per cache instance; 0 when absent */
  const char *cpu_model;                 /* "AMD EPYC 7763 64-Core Processor", or "" */
  const char *cpu_vendor;                /* "AuthenticAMD", or "" */
  /* True when the topology is not this machine's (HWLOC_XMLFILE, a recorded topology): then
   * free memory is not read from this machine. */
  bool recorded;
} loom_host_info;

/* Names for printing: "cpu", "gpu", "accelerator"; "host", "device"; and one backend bit's
 * name: "cpu", "opencl", "cuda". Never NULL ("?" when out of range). */
LOOM_API const char *loom_device_kind_name(loom_device_kind kind);
LOOM_API const char *loom_memory_node_kind_name(loom_memory_node_kind kind);
LOOM_API const char *loom_backend_name(uint32_t backend_bit);

/* The number of devices in the context (after selection); 0 for a NULL context. */
LOOM_API int32_t loom_context_device_count(const loom_context *ctx);

/* Fills *out_info with device `index` (0 .. count-1). *out_info is cleared on entry.
 * Errors: INVALID_ARGUMENT (NULL pointer, index out of range). */
LOOM_API loom_status loom_context_device_info(const loom_context *ctx, int32_t index,
                                              loom_device_info *out_info);

/* Finds a device by id or alias ("cpu0", "ocl1", "cuda0"; case-insensitive) and writes its
 * index to *out_index (-1 on failure).
 * Errors: INVALID_ARGUMENT (NULL pointer), NOT_FOUND (no selected device has that id; the
 * message lists the ids there are). */
LOOM_API loom_status loom_context_find_device(const loom_context *ctx, const char *id, int32_t *out_index);

/* The number of memory nodes: the host NUMA nodes, then the own memory of each selected
 * device that has one. 0 for a NULL context. */
LOOM_API int32_t loom_context_memory_node_count(const loom_context *ctx);

/* Fills *out_info with memory node `index`. *out_info is cleared on entry.
 * Errors: INVALID_ARGUMENT (NULL pointer, index out of range). */
LOOM_API loom_status loom_context_memory_node_info(const loom_context *ctx, int32_t index,
                                                   loom_memory_node_info *out_info);

/* Fills *out_info with the host's description. *out_info is cleared on entry.
 * Errors: INVALID_ARGUMENT (NULL pointer). */
LOOM_API loom_status loom_context_host_info(const loom_context *ctx, loom_host_info *out_info);

/* Notes made during discovery, one sentence each: what is missing and why ("opencl: no
 * OpenCL platform found (clGetPlatformIDs: CL_PLATFORM_NOT_FOUND_KHR)", "cuda:
 * libcuda.so.1 not found (no NVIDIA driver): 0 CUDA devices"), devices skipped after a
 * failed query, devices merged or left out by the selection. */
LOOM_API int32_t loom_context_note_count(const loom_context *ctx);
/* Note `index`, or NULL when out of range. */
LOOM_API const char *loom_context_note(const loom_context *ctx, int32_t index);

#ifdef __cplusplus
}
#endif
#endif
