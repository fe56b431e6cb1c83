/* Host memory as a memory backend: allocations bound to the node's NUMA node through
 * hwloc_alloc_membind where hwloc can bind memory, else plain 64-byte aligned memory (a
 * recorded topology, a system without binding support or with one NUMA node, or a small
 * allocation).
 *
 * Small allocations are not bound: hwloc allocates bound memory with mmap, a page at least,
 * and binding a few bytes buys nothing that first-touch placement does not already give. */
#include <hwloc.h>
#include <string.h>

#include "hmm/hmm.h"

/* Bound allocations from this size up. */
#define HOST_BIND_MIN_BYTES (64 * 1024)

typedef struct host_node {
  hwloc_topology_t topology; /* the context's; not owned */
  hwloc_obj_t numa;          /* NULL: no binding */
} host_node;

static loom_status host_node_init(loom__hmm_node *node) {
  loom_mem_manager *m = node->m;
  node->storages = LOOM_MEM_STORAGE_BIT(LOOM_MEM_STORAGE_HOST);
  const loom__host *host = &m->devices->host;
  if (!host->topology || host->recorded) return LOOM_OK;
  const struct hwloc_topology_support *support = hwloc_topology_get_support(host->topology);
  if (!support || !support->membind || !support->membind->alloc_membind) return LOOM_OK;
  /* With one NUMA node there is nowhere else for memory to go: binding would only cost an
   * mmap, a page fault per page and an munmap per allocation, where the C allocator reuses
   * its heap (the executor allocates thousands of buffers in a chunked graph). */
  if (hwloc_get_nbobjs_by_type(host->topology, HWLOC_OBJ_NUMANODE) <= 1) return LOOM_OK;
  hwloc_obj_t numa = hwloc_get_numanode_obj_by_os_index(host->topology, (unsigned)node->numa_os_index);
  if (!numa) return LOOM_OK;
  host_node *h = loom__calloc(1, sizeof *h);
  if (!h) return loom__oom("a host memory node");
  h->topology = host->topology;
  h->numa = numa;
  node->state = h;
  return LOOM_OK;
}

static void host_node_deinit(loom__hmm_node *node) {
  loom__free(node->state);
  node->state = NULL;
}

/* Asks the host allocator's fault injection (loom/testing.h) whether this allocation fails,
 * so a test's sweep over allocations reaches memory that does not come from loom__malloc. */
static bool injected_failure(void) {
  void *probe = loom__malloc(1);
  if (!probe) return true;
  loom__free(probe);
  return false;
}

static loom_status host_alloc(loom__hmm_node *node, loom_mem_storage storage, int64_t bytes,
                              loom__hmm_alloc *out) {
  memset(out, 0, sizeof *out);
  host_node *h = node->state;
  if (h && bytes >= HOST_BIND_MIN_BYTES) {
    if (injected_failure()) return loom__oom("host memory");
    void *p = hwloc_alloc_membind(h->topology, (size_t)bytes, h->numa->nodeset, HWLOC_MEMBIND_BIND,
                                  HWLOC_MEMBIND_BYNODESET);
    if (p) {
      out->storage = LOOM_MEM_STORAGE_HOST;
      out->bytes = bytes;
      out->ptr = p;
      out->bound = true;
      return LOOM_OK;
    }
    /* Binding refused (policy, cgroup): plain memory is still memory. */
  }
  void *p = loom__aligned_alloc((size_t)bytes);
  if (!p) {
    char size[32];
    return loom__error(LOOM_ERR_OUT_OF_MEMORY, "out of memory: %s of host memory on %s",
                       loom__format_bytes(bytes, size, sizeof size), node->id);
  }
  out->storage = LOOM_MEM_STORAGE_HOST;
  out->bytes = bytes;
  out->ptr = p;
  return LOOM_OK;
}

static void host_free(loom__hmm_node *node, loom__hmm_alloc *a) {
  host_node *h = node->state;
  if (a->bound)
    hwloc_free(h->topology, a->ptr, (size_t)a->bytes);
  else
    loom__aligned_free(a->ptr);
  memset(a, 0, sizeof *a);
}

static loom_status host_write(loom__hmm_node *node, const loom__hmm_alloc *a, int64_t offset, const void *src,
                              int64_t bytes, void **out_event) {
  if (out_event) *out_event = NULL;
  memcpy((char *)a->ptr + offset, src, (size_t)bytes);
  return LOOM_OK;
}

static loom_status host_read(loom__hmm_node *node, const loom__hmm_alloc *a, int64_t offset, void *dst,
                             int64_t bytes) {
  memcpy(dst, (const char *)a->ptr + offset, (size_t)bytes);
  return LOOM_OK;
}

static loom_status host_map(loom__hmm_node *node, const loom__hmm_alloc *a, uint32_t access, void **out_ptr,
                            bool *out_mapped) {
  *out_ptr = a->ptr;
  *out_mapped = false;
  return LOOM_OK;
}

const loom__hmm_backend loom__hmm_host_backend = {
    .name = "host",
    .node_init = host_node_init,
    .node_deinit = host_node_deinit,
    .alloc = host_alloc,
    .free = host_free,
    .write = host_write,
    .read = host_read,
    .map = host_map,
};
