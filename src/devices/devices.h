/* The devices module (src/devices/): the host (topology.c), the table of devices and memory
 * nodes the backends' device lists are put together into (devices.c), the selection
 * (select.c) and the discovery notes. It sits below the backends and the HMM: the backends'
 * discovery functions (backends/registry.h) fill its raw lists, and the runtime hands them in.
 *
 * Discovery runs in three steps, each testable on its own:
 *   1. each backend appends raw devices (one per backend and device, single backend bit,
 *      no id yet for CUDA/cpu, PCI bus id where the runtime offers one) and notes;
 *   2. the host is loaded from hwloc (this machine, or a recorded XML topology);
 *   3. loom__devices_build() places the raw devices in the topology (loom__topology_place,
 *      a pure function over the topology and a list of PCI bus ids), merges devices with
 *      the same PCI bus id, applies the selection and lays out the memory nodes.
 */
#ifndef LOOM_DEVICES_DEVICES_H
#define LOOM_DEVICES_DEVICES_H

#include <hwloc.h>

#include "core/core.h"
#include "loom/device.h"

/* "dddd:bb:dd.f" plus NUL. */
#define LOOM__PCI_BUS_ID_LEN 16

/* ---- notes -------------------------------------------------------------------------- */

typedef struct loom__notes {
  char **items;
  int32_t count, cap;
} loom__notes;

/* Appends a formatted note. Errors: OUT_OF_MEMORY. */
loom_status loom__notes_add(loom__notes *notes, const char *fmt, ...) LOOM_PRINTF(2, 3);
void loom__notes_deinit(loom__notes *notes);

/* ---- one device --------------------------------------------------------------------- */

typedef struct loom__device {
  char id[16];
  char aka[64];      /* other ids, comma-separated */
  uint32_t backends; /* LOOM_BACKEND_* */
  loom_device_kind kind;
  /* Owned strings; NULL reads as "". */
  char *name, *vendor, *version, *driver_version, *platform, *extensions;
  uint32_t vendor_id;
  int32_t compute_units, clock_mhz, cc_major, cc_minor;
  int64_t memory_bytes, max_alloc_bytes, local_memory_bytes;
  int64_t free_bytes;      /* -1: unknown */
  const char *free_source; /* static string; NULL reads as "none" */
  bool host_unified, managed_memory, concurrent_managed_access, fp64, fp16;
  uint32_t svm;
  char pci_bus_id[LOOM__PCI_BUS_ID_LEN]; /* normalized, or "" */
  int32_t numa_node;                     /* OS index, -1 */
  int32_t memory_node;                   /* index in the table's memory nodes */
  /* Handles for the backends that drive the device. */
  void *cl_platform, *cl_device; /* cl_platform_id, cl_device_id; NULL without OpenCL */
  int32_t cl_index;              /* N of oclN, -1 without OpenCL */
  int32_t cuda_ordinal;          /* CUdevice ordinal, -1 without CUDA */
} loom__device;

/* A device with every number unknown: free_bytes -1, numa_node/cl_index/cuda_ordinal -1. */
void loom__device_init(loom__device *dev);
void loom__device_deinit(loom__device *dev);
/* Sets an owned string field (`*field` freed first); s NULL sets NULL. Errors: OUT_OF_MEMORY. */
loom_status loom__device_set_string(char **field, const char *s);

typedef struct loom__device_list {
  loom__device *items;
  int32_t count, cap;
} loom__device_list;

/* Appends a copy of *dev (its strings move into the list; *dev is left initialised-empty).
 * On OUT_OF_MEMORY *dev is deinitialised. */
loom_status loom__device_list_push(loom__device_list *list, loom__device *dev);
void loom__device_list_deinit(loom__device_list *list);

/* ---- backends' discovery -------------------------------------------------------------- */

/* A backend's discovery appends its devices to `out` and says what it could not find in
 * `notes`. Only OUT_OF_MEMORY is returned as an error: a missing runtime, a failing platform
 * or device is a note. The backends' own are listed in backends/registry.h. */
typedef loom_status (*loom__discover_fn)(loom__device_list *out, loom__notes *notes);

/* One backend's discovery as the table's discovery runs it. */
typedef struct loom__discoverer {
  const char *name;           /* "cuda" */
  loom__discover_fn discover; /* NULL: not built */
  const char *why_not;        /* the note when discover is NULL */
} loom__discoverer;

/* ---- the host (topology.c) ------------------------------------------------------------ */

typedef struct loom__numa {
  int32_t os_index;
  int64_t memory_bytes;
  int64_t free_bytes; /* -1: unknown */
  const char *free_source;
  int32_t cores, pus;
  char *cpus; /* owned "0-7,16-23" */
} loom__numa;

typedef struct loom__host {
  hwloc_topology_t topology; /* owned; NULL before load */
  bool recorded;             /* not this machine (XML) */
  int32_t packages, cores, pus;
  int64_t l1d_bytes, l2_bytes, l3_bytes;
  int64_t memory_bytes, free_bytes;
  const char *free_source;
  int32_t clock_mhz;
  char *cpu_model, *cpu_vendor;
  loom__numa *numa; /* at least one: a machine without NUMA info gets one node */
  int32_t numa_count;
} loom__host;

/* Loads the host: this machine when xml_path is NULL (hwloc also honours HWLOC_XMLFILE),
 * else a recorded hwloc XML topology. with_io keeps PCI objects (needed to place GPUs; costs
 * about 30 ms). Errors: UNAVAILABLE (hwloc failed; the message says why), OUT_OF_MEMORY. */
loom_status loom__host_load(loom__host *host, const char *xml_path, bool with_io);
void loom__host_deinit(loom__host *host);

/* Normalizes a PCI bus id ("0000:3B:00.0", "3b:00.0", "00000000:3b:00.0") to
 * "0000:3b:00.0". False when it does not parse. */
bool loom__pci_bus_id_normalize(const char *in, char out[LOOM__PCI_BUS_ID_LEN]);

/* A device as the placement sees it. */
typedef struct loom__pci_ref {
  uint32_t backend;       /* one LOOM_BACKEND_* bit */
  const char *pci_bus_id; /* any form loom__pci_bus_id_normalize reads; NULL or "": none */
} loom__pci_ref;

typedef struct loom__placement {
  char pci_bus_id[LOOM__PCI_BUS_ID_LEN]; /* normalized, or "" */
  bool in_topology;                      /* hwloc has a PCI object with that bus id */
  int32_t numa_os_index;                 /* the nearest NUMA node, -1 when none is nearer / no PCI */
  /* The index of the device this one is the same as (same PCI bus id): the first CUDA
   * device with that id, else the first device with it. -1 when this one is that first. */
  int32_t same_as;
} loom__placement;

/* Places n devices in `topology` (which may be NULL: nothing is in it then): finds the PCI
 * object of each, its nearest NUMA node (the one node in the nodeset of its first non-I/O
 * ancestor), and which devices are the same GPU. Pure: reads only its arguments. */
void loom__topology_place(hwloc_topology_t topology, const loom__pci_ref *devs, int32_t n,
                          loom__placement *out);

/* cpu0, described from the host. Errors: OUT_OF_MEMORY. */
loom_status loom__host_cpu_device(const loom__host *host, loom__device *out_dev);

/* ---- the table ------------------------------------------------------------------------ */

typedef struct loom__memnode {
  char id[16];
  loom_memory_node_kind kind;
  int64_t size_bytes, free_bytes;
  const char *free_source;
  int32_t numa_os_index, cores, pus;
  char *cpus;       /* owned, or NULL */
  int32_t *devices; /* owned indexes into the table's devices */
  int32_t device_count, device_cap;
} loom__memnode;

typedef struct loom__devices {
  loom__host host;
  loom__device *dev;
  int32_t dev_count, dev_cap;
  loom__memnode *mem;
  int32_t mem_count, mem_cap;
  loom__notes notes;
} loom__devices;

/* A parsed selection (LOOM_DEVICES or loom_context_options.devices). */
typedef struct loom__selection {
  bool all;
  uint32_t backends; /* classes: "cpu", "opencl", "cuda" */
  bool gpus;         /* class "gpu" */
  char **ids;        /* owned, lower case */
  int32_t id_count;
  char *text;         /* owned copy of the spec, for messages */
  const char *origin; /* "LOOM_DEVICES" or "loom_context_options.devices" */
} loom__selection;

/* Parses a selection: comma-separated tokens, each all, cpu, opencl (or ocl), cuda, gpu, or
 * a device id (cpu0, ocl1, cuda0). NULL or blank text selects all. Errors: INVALID_ARGUMENT
 * naming the bad token, OUT_OF_MEMORY. */
loom_status loom__selection_parse(const char *text, const char *origin, loom__selection *out);
void loom__selection_deinit(loom__selection *sel);
/* Whether the selection takes `dev`. */
bool loom__selection_takes(const loom__selection *sel, const loom__device *dev);
/* Whether the selection can only take the host (cpu, cpu0): then no backend is discovered. */
bool loom__selection_host_only(const loom__selection *sel);
/* Checks that each id names a device in all[0..n) (by id or alias) and that something is
 * selected. Errors: NOT_FOUND naming the absent id and listing those there are. */
loom_status loom__selection_check(const loom__selection *sel, const loom__device *all, int32_t n);

/* Builds the table from the host (already loaded into t->host) and the raw devices, whose
 * ownership moves to the table (raw is left empty): cpu0 first, then the raw devices in
 * order, placed and merged (loom__topology_place), then selected (sel may be NULL: all), then
 * the memory nodes. Errors: NOT_FOUND (selection), OUT_OF_MEMORY. */
loom_status loom__devices_build(loom__devices *t, loom__device_list *raw, const loom__selection *sel);
void loom__devices_deinit(loom__devices *t);
/* The index of the device with id or alias `id` (case-insensitive), or -1. */
int32_t loom__devices_find(const loom__devices *t, const char *id);

/* Discovers everything on this machine into t: each of list[0..n) in order (a GPU that two
 * of them show keeps the id of the first), the host, then builds the table. Errors: as
 * loom__devices_build, OUT_OF_MEMORY. */
loom_status loom__devices_discover(loom__devices *t, const loom__selection *sel, const loom__discoverer *list,
                                   int32_t n);

/* The /proc/meminfo field `key` ("MemAvailable") in bytes, or -1. */
int64_t loom__meminfo_bytes(const char *path, const char *key);

#endif
