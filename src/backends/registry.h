/* The one list of backends built into Loom (registry.c): per backend its name, its device
 * discovery, its compute table (loom__backend, backends/backend.h) and its memory table
 * (loom__hmm_backend, hmm/hmm_backend.h). Which backends are compiled in is CMake's choice
 * (cmake/registry.cmake writes the list into generated/loom_backends.h); no other file names
 * them under #if.
 *
 * The order of the list is the preference rule: a device that several backends show runs and
 * is managed through the first entry that drives it (a GPU both CUDA and OpenCL show goes
 * through CUDA when the cuda backend is built, else through OpenCL).
 *
 * This is the one backends header the HMM may include: it names the tables by their struct
 * tags only, so including it pulls in neither the IR nor the HMM's insides.
 */
#ifndef LOOM_BACKENDS_REGISTRY_H
#define LOOM_BACKENDS_REGISTRY_H

#include "devices/devices.h"

struct loom__backend;
struct loom__hmm_backend;

typedef struct loom__backend_entry {
  const char *name;                       /* "cpu", "cuda", "opencl" */
  uint32_t bit;                           /* the LOOM_BACKEND_* of the devices it shows */
  loom__discover_fn discover;             /* NULL: discovers nothing (cpu) or not built */
  const char *why_not;                    /* not built: the discovery note saying so; else NULL */
  const struct loom__backend *compute;    /* NULL: runs no graph (not built) */
  const struct loom__hmm_backend *memory; /* NULL: the HMM does not manage its devices' memory */
} loom__backend_entry;

/* The entries, in preference order; *out_count of them. */
const loom__backend_entry *loom__backend_entries(int32_t *out_count);

/* The discovery of every entry that has some (built, or a note saying why not) into
 * out[0..cap), in list order; returns how many. */
int32_t loom__backend_discoverers(loom__discoverer *out, int32_t cap);

/* The entry that drives `dev`: the first whose compute table is built and that shows the
 * device with a handle (cpu0; a CUDA ordinal; an OpenCL device id). NULL when none does. */
const loom__backend_entry *loom__backend_for_device(const loom__device *dev);
/* Its compute table, or NULL. */
const struct loom__backend *loom__backend_compute_for(const loom__device *dev);
/* Its memory table, or NULL when the HMM does not manage the device's memory (cpu0 uses its
 * host node). */
const struct loom__hmm_backend *loom__backend_memory_for(const loom__device *dev);

/* The backends' discovery functions (backends/<name>/<name>_device.c), named by the list. */
loom_status loom__opencl_discover(loom__device_list *out, loom__notes *notes);
loom_status loom__cuda_discover(loom__device_list *out, loom__notes *notes);

#endif
