/* The device table: raw devices from the backends placed in the host's topology, merged so
 * that one GPU is one device, selected, and laid out over memory nodes; and the names of
 * loom/device.h's enums. (The context's queries are runtime/device_info.c.) */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "devices/devices.h"

/* ---- notes ---------------------------------------------------------------------------- */

loom_status loom__notes_add(loom__notes *notes, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  loom_status s = loom__grow((void **)&notes->items, &notes->cap, notes->count + 1, sizeof *notes->items);
  if (s != LOOM_OK) return s;
  if (!(notes->items[notes->count] = loom__strdup(buf))) return loom__oom("a discovery note");
  notes->count++;
  return LOOM_OK;
}

void loom__notes_deinit(loom__notes *notes) {
  for (int32_t i = 0; i < notes->count; i++) loom__free(notes->items[i]);
  loom__free(notes->items);
  memset(notes, 0, sizeof *notes);
}

/* ---- devices -------------------------------------------------------------------------- */

void loom__device_init(loom__device *dev) {
  memset(dev, 0, sizeof *dev);
  dev->free_bytes = -1;
  dev->numa_node = -1;
  dev->memory_node = -1;
  dev->cl_index = -1;
  dev->cuda_ordinal = -1;
}

void loom__device_deinit(loom__device *dev) {
  if (!dev) return;
  loom__free(dev->name);
  loom__free(dev->vendor);
  loom__free(dev->version);
  loom__free(dev->driver_version);
  loom__free(dev->platform);
  loom__free(dev->extensions);
  loom__device_init(dev);
}

loom_status loom__device_set_string(char **field, const char *s) {
  char *copy = NULL;
  if (s && !(copy = loom__strdup(s))) return loom__oom("a device string");
  loom__free(*field);
  *field = copy;
  return LOOM_OK;
}

loom_status loom__device_list_push(loom__device_list *list, loom__device *dev) {
  loom_status s = loom__grow((void **)&list->items, &list->cap, list->count + 1, sizeof *list->items);
  if (s != LOOM_OK) {
    loom__device_deinit(dev);
    return s;
  }
  list->items[list->count++] = *dev;
  loom__device_init(dev);
  return LOOM_OK;
}

void loom__device_list_deinit(loom__device_list *list) {
  for (int32_t i = 0; i < list->count; i++) loom__device_deinit(&list->items[i]);
  loom__free(list->items);
  memset(list, 0, sizeof *list);
}

/* ---- merging: one GPU is one device ---------------------------------------------------- */

static void append_alias(loom__device *dev, const char *id) {
  if (!id[0]) return;
  size_t used = strlen(dev->aka);
  snprintf(dev->aka + used, sizeof dev->aka - used, "%s%s", used ? "," : "", id);
}

/* Folds `other` (the same GPU through another backend) into `dev`: dev keeps its own
 * numbers, memory above all (it is one memory, counted once), and takes what only the other
 * backend knows. `other` is emptied. */
static void merge_device(loom__device *dev, loom__device *other) {
  dev->backends |= other->backends;
  append_alias(dev, other->id);
  append_alias(dev, other->aka);
  if (!dev->svm) dev->svm = other->svm;
  if (!dev->local_memory_bytes) dev->local_memory_bytes = other->local_memory_bytes;
  if (!dev->max_alloc_bytes) dev->max_alloc_bytes = other->max_alloc_bytes;
  if (!dev->compute_units) dev->compute_units = other->compute_units;
  if (!dev->clock_mhz) dev->clock_mhz = other->clock_mhz;
  if (!dev->vendor_id) dev->vendor_id = other->vendor_id;
  dev->fp64 |= other->fp64;
  dev->fp16 |= other->fp16;
  if (dev->free_bytes < 0 && other->free_bytes >= 0) {
    dev->free_bytes = other->free_bytes;
    dev->free_source = other->free_source;
  }
  /* Strings only this side lacks move over. */
  char **mine[] = {&dev->platform, &dev->extensions, &dev->vendor};
  char **theirs[] = {&other->platform, &other->extensions, &other->vendor};
  for (int32_t i = 0; i < LOOM_ARRAY_SIZE(mine); i++) {
    if (*mine[i] && (*mine[i])[0]) continue;
    loom__free(*mine[i]);
    *mine[i] = *theirs[i];
    *theirs[i] = NULL;
  }
  if (!dev->cl_device) {
    dev->cl_platform = other->cl_platform;
    dev->cl_device = other->cl_device;
    dev->cl_index = other->cl_index;
  }
  if (dev->cuda_ordinal < 0) dev->cuda_ordinal = other->cuda_ordinal;
  loom__device_deinit(other);
}

/* The host node a host-sharing device allocates from: the one with its NUMA node, else 0. */
static int32_t host_node_of(const loom__host *host, int32_t numa_os_index) {
  for (int32_t i = 0; i < host->numa_count; i++)
    if (host->numa[i].os_index == numa_os_index) return i;
  return 0;
}

static bool shares_host_memory(const loom__device *dev) {
  return dev->host_unified || dev->kind == LOOM_DEVICE_CPU;
}

/* Places raw devices and merges the ones that are the same GPU; the result goes to `all`
 * (after cpu0, already in it). raw is emptied. */
static loom_status place_and_merge(loom__devices *t, loom__device_list *raw, loom__device_list *all) {
  int32_t n = raw->count;
  loom__pci_ref *refs = loom__calloc((size_t)n, sizeof *refs);
  loom__placement *places = loom__calloc((size_t)n, sizeof *places);
  int32_t *where = loom__calloc((size_t)n, sizeof *where);
  loom_status s = refs && places && where ? LOOM_OK : loom__oom("placing devices");
  for (int32_t i = 0; s == LOOM_OK && i < n; i++) {
    refs[i].backend = raw->items[i].backends;
    refs[i].pci_bus_id = raw->items[i].pci_bus_id;
  }
  if (s == LOOM_OK) loom__topology_place(t->host.topology, refs, n, places);
  /* First every device that is its own, then the others folded into it. */
  for (int32_t i = 0; s == LOOM_OK && i < n; i++) {
    loom__device *d = &raw->items[i];
    where[i] = -1;
    if (places[i].same_as >= 0) continue;
    memcpy(d->pci_bus_id, places[i].pci_bus_id, sizeof d->pci_bus_id);
    if (places[i].pci_bus_id[0])
      d->numa_node = places[i].numa_os_index;
    else if (t->host.numa_count == 1)
      d->numa_node = t->host.numa[0].os_index; /* no PCI: tied to the host node */
    where[i] = all->count;
    s = loom__device_list_push(all, d);
  }
  for (int32_t i = 0; s == LOOM_OK && i < n; i++) {
    if (places[i].same_as < 0) continue;
    loom__device *primary = &all->items[where[places[i].same_as]];
    s = loom__notes_add(&t->notes, "%s and %s are the same GPU (PCI %s): listed once, as %s", primary->id,
                        raw->items[i].id, primary->pci_bus_id, primary->id);
    merge_device(primary, &raw->items[i]);
  }
  for (int32_t i = 0; s == LOOM_OK && i < n; i++)
    if (places[i].pci_bus_id[0] && !places[i].in_topology && places[i].same_as < 0 && t->host.topology)
      s = loom__notes_add(&t->notes, "%s: PCI %s is not in the hwloc topology; its NUMA locality is unknown",
                          all->items[where[i]].id, places[i].pci_bus_id);
  loom__free(refs);
  loom__free(places);
  loom__free(where);
  loom__device_list_deinit(raw);
  return s;
}

/* Keeps the selected devices of `all` in t->dev (moving them) and notes the others. */
static loom_status select_devices(loom__devices *t, loom__device_list *all, const loom__selection *sel) {
  loom_status s = loom__selection_check(sel, all->items, all->count);
  if (s != LOOM_OK) return s;
  char left_out[256] = "";
  size_t used = 0;
  t->dev = loom__calloc((size_t)(all->count ? all->count : 1), sizeof *t->dev);
  if (!t->dev) return loom__oom("the device table");
  t->dev_cap = all->count;
  for (int32_t i = 0; i < all->count; i++) {
    if (loom__selection_takes(sel, &all->items[i])) {
      t->dev[t->dev_count++] = all->items[i];
      loom__device_init(&all->items[i]);
    } else if (used < sizeof left_out) {
      int w = snprintf(left_out + used, sizeof left_out - used, "%s%s", used ? ", " : "", all->items[i].id);
      if (w > 0) used += (size_t)w;
    }
  }
  if (used) s = loom__notes_add(&t->notes, "%s='%s' leaves out %s", sel->origin, sel->text, left_out);
  return s;
}

static loom_status memnode_add_device(loom__memnode *node, int32_t dev_index) {
  loom_status s =
      loom__grow((void **)&node->devices, &node->device_cap, node->device_count + 1, sizeof *node->devices);
  if (s == LOOM_OK) node->devices[node->device_count++] = dev_index;
  return s;
}

/* Host nodes first, then each selected device with memory of its own. */
static loom_status layout_memory_nodes(loom__devices *t) {
  const loom__host *host = &t->host;
  int32_t cap = host->numa_count + t->dev_count;
  t->mem = loom__calloc((size_t)cap, sizeof *t->mem);
  if (!t->mem) return loom__oom("the memory nodes");
  t->mem_cap = cap;
  for (int32_t i = 0; i < host->numa_count; i++) {
    loom__memnode *m = &t->mem[t->mem_count++];
    const loom__numa *numa = &host->numa[i];
    snprintf(m->id, sizeof m->id, "host%d", (int)i);
    m->kind = LOOM_MEMORY_HOST;
    m->size_bytes = numa->memory_bytes;
    m->free_bytes = numa->free_bytes;
    m->free_source = numa->free_source;
    m->numa_os_index = numa->os_index;
    m->cores = numa->cores;
    m->pus = numa->pus;
    if (!(m->cpus = loom__strdup(numa->cpus ? numa->cpus : ""))) return loom__oom("the memory nodes");
  }
  for (int32_t i = 0; i < t->dev_count; i++) {
    loom__device *d = &t->dev[i];
    loom__memnode *m;
    if (shares_host_memory(d)) {
      d->memory_node = host_node_of(host, d->numa_node);
      m = &t->mem[d->memory_node];
    } else {
      d->memory_node = t->mem_count;
      m = &t->mem[t->mem_count++];
      snprintf(m->id, sizeof m->id, "%s", d->id);
      m->kind = LOOM_MEMORY_DEVICE;
      m->size_bytes = d->memory_bytes;
      m->free_bytes = d->free_bytes;
      m->free_source = d->free_source;
      m->numa_os_index = d->numa_node;
    }
    loom_status s = memnode_add_device(m, i);
    if (s != LOOM_OK) return s;
  }
  return LOOM_OK;
}

loom_status loom__devices_build(loom__devices *t, loom__device_list *raw, const loom__selection *sel) {
  loom__device_list all = {0};
  loom__device cpu;
  loom_status s = loom__host_cpu_device(&t->host, &cpu);
  if (s == LOOM_OK) s = loom__device_list_push(&all, &cpu);
  if (s == LOOM_OK) s = place_and_merge(t, raw, &all);
  if (s == LOOM_OK) s = select_devices(t, &all, sel);
  if (s == LOOM_OK) s = layout_memory_nodes(t);
  loom__device_list_deinit(raw);
  loom__device_list_deinit(&all);
  return s;
}

void loom__devices_deinit(loom__devices *t) {
  if (!t) return;
  for (int32_t i = 0; i < t->dev_count; i++) loom__device_deinit(&t->dev[i]);
  loom__free(t->dev);
  for (int32_t i = 0; i < t->mem_count; i++) {
    loom__free(t->mem[i].cpus);
    loom__free(t->mem[i].devices);
  }
  loom__free(t->mem);
  loom__notes_deinit(&t->notes);
  loom__host_deinit(&t->host);
  memset(t, 0, sizeof *t);
}

int32_t loom__devices_find(const loom__devices *t, const char *id) {
  for (int32_t i = 0; i < t->dev_count; i++) {
    loom__selection one = {.ids = (char **)&id, .id_count = 1};
    if (loom__selection_takes(&one, &t->dev[i])) return i;
  }
  return -1;
}

/* ---- discovery ------------------------------------------------------------------------ */

/* "cuda, opencl": the names of the list, for a note. */
static void discoverer_names(const loom__discoverer *list, int32_t n, char *out, size_t cap) {
  size_t used = 0;
  out[0] = '\0';
  for (int32_t i = 0; i < n && used < cap; i++) {
    int w = snprintf(out + used, cap - used, "%s%s", i ? ", " : "", list[i].name);
    if (w > 0) used += (size_t)w;
  }
}

loom_status loom__devices_discover(loom__devices *t, const loom__selection *sel, const loom__discoverer *list,
                                   int32_t n) {
  loom__device_list raw = {0};
  loom_status s = LOOM_OK;
  char names[128];
  discoverer_names(list, n, names, sizeof names);
  /* A selection of the host alone skips the backends: starting an OpenCL platform (PoCL
   * loads LLVM: about 0.8 s) or every GPU's CUDA context is wasted on it. Any other
   * selection discovers everything, so that ids and merged GPUs never depend on it. */
  if (loom__selection_host_only(sel))
    s = loom__notes_add(&t->notes, "%s: not discovered: %s='%s' selects the host only", names, sel->origin,
                        sel->text);
  for (int32_t i = 0; s == LOOM_OK && !loom__selection_host_only(sel) && i < n; i++)
    s = list[i].discover ? list[i].discover(&raw, &t->notes)
                         : loom__notes_add(&t->notes, "%s", list[i].why_not);
  bool with_io = false;
  for (int32_t i = 0; i < raw.count; i++) with_io |= raw.items[i].pci_bus_id[0] != '\0';
  if (s == LOOM_OK) s = loom__host_load(&t->host, NULL, with_io);
  if (s == LOOM_OK) s = loom__devices_build(t, &raw, sel);
  loom__device_list_deinit(&raw);
  return s;
}

/* ---- names of loom/device.h's enums ----------------------------------------------------- */

const char *loom_device_kind_name(loom_device_kind kind) {
  switch (kind) {
    case LOOM_DEVICE_CPU:
      return "cpu";
    case LOOM_DEVICE_GPU:
      return "gpu";
    case LOOM_DEVICE_ACCELERATOR:
      return "accelerator";
  }
  return "?";
}

const char *loom_memory_node_kind_name(loom_memory_node_kind kind) {
  switch (kind) {
    case LOOM_MEMORY_HOST:
      return "host";
    case LOOM_MEMORY_DEVICE:
      return "device";
  }
  return "?";
}

const char *loom_backend_name(uint32_t backend_bit) {
  switch (backend_bit) {
    case LOOM_BACKEND_CPU:
      return "cpu";
    case LOOM_BACKEND_OPENCL:
      return "opencl";
    case LOOM_BACKEND_CUDA:
      return "cuda";
  }
  return "?";
}
