/* The one list of backends built in (registry.h). The entries come from CMake
 * (generated/loom_backends.h, written by cmake/registry.cmake), so no #if is needed here or in
 * any caller: a backend left out is an entry with no tables. */
#include "backends/registry.h"
#include "backends/backend.h"
#include "hmm/hmm_backend.h"

/* The memory tables (backends/<name>/<name>_memory.c); only those built are referenced. */
extern const loom__hmm_backend loom__hmm_opencl_backend;
extern const loom__hmm_backend loom__hmm_cuda_backend;

static const loom__backend_entry entries[] = {
#define LOOM_BACKEND(name, bit, discover, compute, memory) {#name, bit, discover, NULL, compute, memory},
#define LOOM_BACKEND_ABSENT(name, bit, why_not) {#name, bit, NULL, why_not, NULL, NULL},
#include "loom_backends.h"
#undef LOOM_BACKEND
#undef LOOM_BACKEND_ABSENT
};

const loom__backend_entry *loom__backend_entries(int32_t *out_count) {
  *out_count = LOOM_ARRAY_SIZE(entries);
  return entries;
}

int32_t loom__backend_discoverers(loom__discoverer *out, int32_t cap) {
  int32_t n = 0;
  for (int32_t i = 0; i < LOOM_ARRAY_SIZE(entries) && n < cap; i++) {
    if (!entries[i].discover && !entries[i].why_not) continue;
    out[n++] = (loom__discoverer){entries[i].name, entries[i].discover, entries[i].why_not};
  }
  return n;
}

/* Whether the device carries what backend `bit` needs to drive it (discovery sets these). */
static bool has_handle(const loom__device *dev, uint32_t bit) {
  switch (bit) {
    case LOOM_BACKEND_CPU:
      return true;
    case LOOM_BACKEND_CUDA:
      return dev->cuda_ordinal >= 0;
    case LOOM_BACKEND_OPENCL:
      return dev->cl_device != NULL;
  }
  return false;
}

const loom__backend_entry *loom__backend_for_device(const loom__device *dev) {
  for (int32_t i = 0; i < LOOM_ARRAY_SIZE(entries); i++) {
    const loom__backend_entry *e = &entries[i];
    if (e->compute && (dev->backends & e->bit) && has_handle(dev, e->bit)) return e;
  }
  return NULL;
}

const loom__backend *loom__backend_compute_for(const loom__device *dev) {
  const loom__backend_entry *e = loom__backend_for_device(dev);
  return e ? e->compute : NULL;
}

const loom__hmm_backend *loom__backend_memory_for(const loom__device *dev) {
  const loom__backend_entry *e = loom__backend_for_device(dev);
  return e ? e->memory : NULL;
}
