/* The host through hwloc: packages, cores, NUMA nodes and their memory, caches; and where
 * PCI devices sit in it (loom__topology_place). */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "devices/devices.h"

/* ---- small readers of this machine's files --------------------------------------------- */

int64_t loom__meminfo_bytes(const char *path, const char *key) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  char line[256];
  size_t klen = strlen(key);
  int64_t result = -1;
  while (fgets(line, sizeof line, f)) {
    /* "MemAvailable:   123 kB", or per node "Node 0 MemFree:   123 kB". */
    char *at = strstr(line, key);
    if (!at || at[klen] != ':' || (at != line && at[-1] != ' ')) continue;
    long long kib = 0;
    if (sscanf(at + klen + 1, "%lld", &kib) == 1 && kib >= 0) result = (int64_t)kib * 1024;
    break;
  }
  fclose(f);
  return result;
}

/* The highest clock of cpu0 in MHz, from cpufreq, else /proc/cpuinfo; 0 when neither says. */
static int32_t read_clock_mhz(void) {
  FILE *f = fopen("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", "r");
  if (f) {
    long long khz = 0;
    int ok = fscanf(f, "%lld", &khz);
    fclose(f);
    if (ok == 1 && khz > 0) return (int32_t)(khz / 1000);
  }
  f = fopen("/proc/cpuinfo", "r");
  if (!f) return 0;
  char line[256];
  double best = 0;
  while (fgets(line, sizeof line, f)) {
    double mhz;
    if (strncmp(line, "cpu MHz", 7) == 0 &&
        sscanf(strchr(line, ':') ? strchr(line, ':') + 1 : "", "%lf", &mhz) == 1 && mhz > best)
      best = mhz;
  }
  fclose(f);
  return (int32_t)(best + 0.5);
}

/* ---- loading -------------------------------------------------------------------------- */

static int64_t first_cache_size(hwloc_topology_t topo, hwloc_obj_type_t type) {
  hwloc_obj_t obj = hwloc_get_obj_by_type(topo, type, 0);
  return obj && obj->attr ? (int64_t)obj->attr->cache.size : 0;
}

/* An info attribute of the first package (or of the root when there is no package). */
static const char *cpu_info(hwloc_topology_t topo, const char *name) {
  hwloc_obj_t obj = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PACKAGE, 0);
  const char *v = obj ? hwloc_obj_get_info_by_name(obj, name) : NULL;
  if (!v) v = hwloc_obj_get_info_by_name(hwloc_get_root_obj(topo), name);
  return v ? v : "";
}

/* A copy of s without its leading and trailing blanks: the CPU's brand string pads its 48
 * bytes with spaces on some CPUs ("AMD EPYC 9B45           "), which would reach JSON and the
 * performance models' file names. NULL when out of memory. */
static char *strdup_trimmed(const char *s) {
  while (*s == ' ' || *s == '\t') s++;
  size_t n = strlen(s);
  while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t')) n--;
  return loom__strndup(s, n);
}

static loom_status load_numa_nodes(loom__host *host) {
  hwloc_topology_t topo = host->topology;
  int n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
  int32_t count = n > 0 ? n : 1;
  host->numa = loom__calloc((size_t)count, sizeof *host->numa);
  if (!host->numa) return loom__oom("host NUMA nodes");
  host->numa_count = count;
  for (int32_t i = 0; i < count; i++) {
    loom__numa *node = &host->numa[i];
    hwloc_obj_t obj = n > 0 ? hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, (unsigned)i) : NULL;
    hwloc_const_cpuset_t cpuset = obj ? obj->cpuset : hwloc_topology_get_topology_cpuset(topo);
    node->os_index = obj ? (int32_t)obj->os_index : 0;
    node->memory_bytes = obj ? (int64_t)obj->attr->numanode.local_memory : 0;
    node->free_bytes = -1;
    node->free_source = "none";
    node->cores = hwloc_get_nbobjs_inside_cpuset_by_type(topo, cpuset, HWLOC_OBJ_CORE);
    node->pus = hwloc_get_nbobjs_inside_cpuset_by_type(topo, cpuset, HWLOC_OBJ_PU);
    char *list = NULL;
    if (hwloc_bitmap_list_asprintf(&list, cpuset) < 0 || !list) return loom__oom("a NUMA node's cpu list");
    node->cpus = loom__strdup(list);
    free(list); /* hwloc allocates with malloc */
    if (!node->cpus) return loom__oom("a NUMA node's cpu list");
  }
  return LOOM_OK;
}

/* Memory sizes and free memory. On this machine the total comes from sysconf: hwloc's NUMA
 * memory follows what a lazily booted VM kernel has touched (shared/NOTES.md). With several
 * nodes hwloc's per-node sizes are kept (a node it gives no size gets an equal share). A
 * recorded topology keeps its own sizes and has no free memory to read. */
static void load_memory(loom__host *host) {
  int32_t n = host->numa_count;
  if (host->recorded) {
    host->memory_bytes = 0;
    for (int32_t i = 0; i < n; i++) host->memory_bytes += host->numa[i].memory_bytes;
    host->free_bytes = -1;
    host->free_source = "none";
    return;
  }
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  int64_t total = pages > 0 && page > 0 ? (int64_t)pages * page : 0;
  if (n == 1 && total > 0) host->numa[0].memory_bytes = total;
  int64_t sum = 0;
  for (int32_t i = 0; i < n; i++) {
    if (host->numa[i].memory_bytes <= 0) host->numa[i].memory_bytes = total / n;
    sum += host->numa[i].memory_bytes;
  }
  host->memory_bytes = sum;
  host->free_bytes = loom__meminfo_bytes("/proc/meminfo", "MemAvailable");
  host->free_source = host->free_bytes >= 0 ? "/proc/meminfo" : "none";
  if (n == 1) {
    host->numa[0].free_bytes = host->free_bytes;
    host->numa[0].free_source = host->free_source;
    return;
  }
  for (int32_t i = 0; i < n; i++) {
    char path[96];
    snprintf(path, sizeof path, "/sys/devices/system/node/node%d/meminfo", (int)host->numa[i].os_index);
    host->numa[i].free_bytes = loom__meminfo_bytes(path, "MemFree");
    host->numa[i].free_source = host->numa[i].free_bytes >= 0 ? "/sys/devices/system/node" : "none";
  }
}

loom_status loom__host_load(loom__host *host, const char *xml_path, bool with_io) {
  memset(host, 0, sizeof *host);
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) != 0)
    return loom__error(LOOM_ERR_UNAVAILABLE, "hwloc_topology_init failed: %s", strerror(errno));
  if (xml_path && hwloc_topology_set_xml(topo, xml_path) != 0) {
    int err = errno;
    hwloc_topology_destroy(topo);
    return loom__error(LOOM_ERR_UNAVAILABLE, "hwloc: cannot use the topology file '%s': %s", xml_path,
                       strerror(err));
  }
  hwloc_topology_set_io_types_filter(
      topo, with_io ? HWLOC_TYPE_FILTER_KEEP_IMPORTANT : HWLOC_TYPE_FILTER_KEEP_NONE);
  if (hwloc_topology_load(topo) != 0) {
    int err = errno;
    hwloc_topology_destroy(topo);
    return loom__error(LOOM_ERR_UNAVAILABLE, "hwloc_topology_load failed%s%s: %s", xml_path ? " for " : "",
                       xml_path ? xml_path : "", strerror(err));
  }
  host->topology = topo;
  host->recorded = !hwloc_topology_is_thissystem(topo);
  host->packages = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE);
  host->cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
  host->pus = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
  host->l1d_bytes = first_cache_size(topo, HWLOC_OBJ_L1CACHE);
  host->l2_bytes = first_cache_size(topo, HWLOC_OBJ_L2CACHE);
  host->l3_bytes = first_cache_size(topo, HWLOC_OBJ_L3CACHE);
  host->clock_mhz = host->recorded ? 0 : read_clock_mhz();
  host->cpu_model = strdup_trimmed(cpu_info(topo, "CPUModel"));
  host->cpu_vendor = strdup_trimmed(cpu_info(topo, "CPUVendor"));
  loom_status s = host->cpu_model && host->cpu_vendor ? LOOM_OK : loom__oom("the host's description");
  if (s == LOOM_OK) s = load_numa_nodes(host);
  if (s != LOOM_OK) {
    loom__host_deinit(host);
    return s;
  }
  load_memory(host);
  return LOOM_OK;
}

void loom__host_deinit(loom__host *host) {
  if (!host) return;
  if (host->topology) hwloc_topology_destroy(host->topology);
  for (int32_t i = 0; i < host->numa_count; i++) loom__free(host->numa[i].cpus);
  loom__free(host->numa);
  loom__free(host->cpu_model);
  loom__free(host->cpu_vendor);
  memset(host, 0, sizeof *host);
}

/* ---- PCI placement ------------------------------------------------------------------- */

/* Reads 1 to max_digits hex digits (no sign, no 0x: sscanf's %x takes both). */
static bool read_hex(const char **p, int max_digits, unsigned *out) {
  unsigned v = 0;
  int n = 0;
  for (; n < max_digits && isxdigit((unsigned char)**p); n++, (*p)++) {
    char c = (char)tolower((unsigned char)**p);
    v = v * 16 + (unsigned)(c <= '9' ? c - '0' : c - 'a' + 10);
  }
  *out = v;
  return n > 0;
}

bool loom__pci_bus_id_normalize(const char *in, char out[LOOM__PCI_BUS_ID_LEN]) {
  out[0] = '\0';
  if (!in) return false;
  while (isspace((unsigned char)*in)) in++;
  /* "domain:bus:dev.func" (a domain of 4 or 8 digits, as nvidia-smi writes it) or
   * "bus:dev.func". */
  unsigned f[4];
  int n = 0;
  const char *p = in;
  for (;;) {
    if (n == 4 || !read_hex(&p, 8, &f[n++])) return false;
    if (*p == ':') {
      p++;
    } else if (*p == '.' && n >= 2 && n <= 3) {
      p++;
      if (!read_hex(&p, 1, &f[n++])) return false;
      break;
    } else {
      return false;
    }
  }
  while (isspace((unsigned char)*p)) p++;
  if (*p || n < 3) return false;
  unsigned domain = n == 4 ? f[0] : 0, bus = f[n - 3], dev = f[n - 2], func = f[n - 1];
  if (domain > 0xffff || bus > 0xff || dev > 0x1f || func > 0x7) return false;
  snprintf(out, LOOM__PCI_BUS_ID_LEN, "%04x:%02x:%02x.%x", domain, bus, dev, func);
  return true;
}

/* The nearest NUMA node of a PCI object: the single node local to its first non-I/O
 * ancestor, or -1 when that ancestor spans several nodes (a device under the machine). */
static int32_t pci_numa_node(hwloc_topology_t topo, hwloc_obj_t pci) {
  hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo, pci);
  if (!anc || !anc->nodeset || hwloc_bitmap_weight(anc->nodeset) != 1) return -1;
  return hwloc_bitmap_first(anc->nodeset);
}

void loom__topology_place(hwloc_topology_t topology, const loom__pci_ref *devs, int32_t n,
                          loom__placement *out) {
  for (int32_t i = 0; i < n; i++) {
    loom__placement *p = &out[i];
    memset(p, 0, sizeof *p);
    p->numa_os_index = -1;
    p->same_as = -1;
    if (!devs[i].pci_bus_id || !loom__pci_bus_id_normalize(devs[i].pci_bus_id, p->pci_bus_id)) continue;
    if (!topology) continue;
    unsigned domain, bus, dev, func;
    sscanf(p->pci_bus_id, "%x:%x:%x.%x", &domain, &bus, &dev, &func);
    hwloc_obj_t pci = hwloc_get_pcidev_by_busid(topology, domain, bus, dev, func);
    if (!pci) continue;
    p->in_topology = true;
    p->numa_os_index = pci_numa_node(topology, pci);
  }
  /* One GPU is one device: every device with a bus id points at the first CUDA device with
   * it (CUDA drives the GPU best), else at the first device with it. */
  for (int32_t i = 0; i < n; i++) {
    if (!out[i].pci_bus_id[0]) continue;
    int32_t primary = -1;
    for (int32_t j = 0; j < n && primary < 0; j++)
      if (devs[j].backend == LOOM_BACKEND_CUDA && strcmp(out[j].pci_bus_id, out[i].pci_bus_id) == 0)
        primary = j;
    for (int32_t j = 0; j < n && primary < 0; j++)
      if (strcmp(out[j].pci_bus_id, out[i].pci_bus_id) == 0) primary = j;
    out[i].same_as = primary == i ? -1 : primary;
  }
}

/* ---- cpu0 ---------------------------------------------------------------------------- */

loom_status loom__host_cpu_device(const loom__host *host, loom__device *out_dev) {
  loom__device_init(out_dev);
  loom__device *d = out_dev;
  snprintf(d->id, sizeof d->id, "cpu0");
  d->backends = LOOM_BACKEND_CPU;
  d->kind = LOOM_DEVICE_CPU;
  if (loom__device_set_string(&d->name, host->cpu_model && host->cpu_model[0] ? host->cpu_model : "CPU") ||
      loom__device_set_string(&d->vendor, host->cpu_vendor ? host->cpu_vendor : "")) {
    loom__device_deinit(d);
    return loom__oom("the cpu0 device");
  }
  d->compute_units = host->pus;
  d->clock_mhz = host->clock_mhz;
  d->memory_bytes = host->memory_bytes;
  d->max_alloc_bytes = host->memory_bytes;
  d->free_bytes = host->free_bytes;
  d->free_source = host->free_source;
  d->host_unified = true;
  d->fp64 = true;
  /* Half precision is converted, not computed natively, on the cpu backend. */
  d->fp16 = false;
  d->numa_node = host->numa_count == 1 ? host->numa[0].os_index : -1;
  return LOOM_OK;
}
