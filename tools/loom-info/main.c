/* loom-info: every device and memory node Loom finds, as a report grouped by memory node or
 * as JSON (--json; keys in docs/loom-info.md), their performance models (--models), or this
 * machine as a platform file for loom-run --simulate (--platform). Exits 0 whatever was or
 * was not found; 1 when no context could be made (a bad LOOM_DEVICES) or --platform lacks a
 * model; 2 on a bad command line. */
#include <stdio.h>
#include <string.h>

#include "loom/device.h"
#include "loom/internal/cli.h"
#include "loom/internal/cpu.h"
#include "loom/internal/json.h"
#include "loom/loom.h"
#include "loom/sched.h"

static void usage(FILE *out) {
  fputs(
      "usage: loom-info [--json | --models | --platform]\n"
      "       loom-info --help | --version\n"
      "\n"
      "Lists the devices and memory nodes Loom finds on this machine: the host (hwloc), every\n"
      "OpenCL platform and device, every CUDA device; their memory, free memory, locality,\n"
      "and what is missing and why.\n"
      "\n"
      "  --json   print one JSON object (host, devices, memory_nodes, notes)\n"
      "  --models print each device's performance model (seconds per op class as a function\n"
      "           of size) from the cache folder, as `loom-bench calibrate` wrote it\n"
      "  --platform print this machine as a platform file (docs/sched.md): each device with\n"
      "           its memory, its model and its link to the host, for `loom-run --simulate`\n"
      "           here or elsewhere (every device needs a model: `loom-bench calibrate`)\n"
      "  --help   print this help\n"
      "  --version print the version of Loom and the commit it was built from\n"
      "\n"
      "Environment: LOOM_DEVICES selects devices (all, cpu, gpu, opencl, cuda, or ids such as\n"
      "cpu0,ocl1,cuda0); HWLOC_XMLFILE reads a recorded hwloc topology instead of this machine;\n"
      "LOOM_LOG=warn|info|debug: how much the library says on stderr (default warn).\n"
      "\n"
      "Exit status: 0 whatever was or was not found, 1 when no context could be made (a bad\n"
      "LOOM_DEVICES) or --platform lacks a model, 2 for a wrong command line.\n",
      out);
}

static const char *bytes(int64_t n, char *buf, size_t size) {
  if (n < 0) return "unknown";
  return loom_bytes_format(n, buf, size);
}

static const char *yes_no(bool v) {
  return v ? "yes" : "no";
}

/* "cuda+opencl" */
static void backend_list(uint32_t backends, char *buf, size_t size) {
  buf[0] = '\0';
  for (uint32_t bit = 1; bit <= LOOM_BACKEND_CUDA; bit <<= 1)
    if (backends & bit)
      snprintf(buf + strlen(buf), size - strlen(buf), "%s%s", buf[0] ? "+" : "", loom_backend_name(bit));
}

static void svm_list(uint32_t svm, char *buf, size_t size) {
  static const char *names[] = {"coarse-grain buffer", "fine-grain buffer", "fine-grain system", "atomics"};
  buf[0] = '\0';
  for (int i = 0; i < 4; i++)
    if (svm & (1u << i))
      snprintf(buf + strlen(buf), size - strlen(buf), "%s%s", buf[0] ? ", " : "", names[i]);
  if (!buf[0]) snprintf(buf, size, "none");
}

/* ---- the readable report ---------------------------------------------------------------- */

static void print_host(const loom_host_info *h) {
  char a[32], b[32], c[32], d[32];
  printf("Host: %s%s%s%s%s\n", h->cpu_model[0] ? h->cpu_model : "unknown CPU", h->cpu_vendor[0] ? " (" : "",
         h->cpu_vendor, h->cpu_vendor[0] ? ")" : "",
         h->recorded ? " [recorded topology, not this machine]" : "");
  printf("  %d package%s, %d cores, %d PUs, %d NUMA node%s, %s memory\n", (int)h->packages,
         h->packages == 1 ? "" : "s", (int)h->cores, (int)h->pus, (int)h->numa_nodes,
         h->numa_nodes == 1 ? "" : "s", bytes(h->memory_bytes, a, sizeof a));
  if (h->l1d_bytes || h->l2_bytes || h->l3_bytes)
    printf("  caches: L1d %s, L2 %s, L3 %s\n", bytes(h->l1d_bytes, b, sizeof b),
           bytes(h->l2_bytes, c, sizeof c), bytes(h->l3_bytes, d, sizeof d));
  loom__cpu_uarch u;
  loom__cpu_uarch_host(&u);
  /* CPUID is this machine's even when the topology is a recording: say so */
  printf("  micro-architecture %s (%s family %d model %d stepping %d), %s%s\n", u.name,
         u.vendor[0] ? u.vendor : "no CPUID", u.family, u.model, u.stepping, u.isa_name,
         h->recorded ? " [this machine's CPU]" : "");
  printf("  FLOPs per cycle per core: f32 %d, f64 %d (%s)\n", u.flops_per_cycle_f32, u.flops_per_cycle_f64,
         u.source);
}

static void print_device(const loom_device_info *d) {
  char a[32], b[32], c[32], e[32], list[128];
  printf("  %-6s %s%s%s%s\n", d->id, d->name, d->also_known_as[0] ? "  (also " : "", d->also_known_as,
         d->also_known_as[0] ? ")" : "");
  backend_list(d->backends, list, sizeof list);
  printf("         %s, backends %s", loom_device_kind_name(d->kind), list);
  if (d->vendor[0]) printf(", vendor %s", d->vendor);
  if (d->vendor_id) printf(" (0x%04x)", (unsigned)d->vendor_id);
  if (d->platform[0]) printf(", platform %s", d->platform);
  printf("\n");
  if (d->version[0] || d->driver_version[0])
    printf("         %s%s%s\n", d->version, d->driver_version[0] ? ", driver " : "", d->driver_version);
  printf("         %d compute units", (int)d->compute_units);
  if (d->clock_mhz) printf(", %d MHz", (int)d->clock_mhz);
  if (d->compute_capability_major)
    printf(", compute capability %d.%d", (int)d->compute_capability_major, (int)d->compute_capability_minor);
  printf("\n         memory %s%s, max alloc %s", bytes(d->memory_bytes, a, sizeof a),
         d->host_unified ? " (shares host memory)" : "", bytes(d->max_alloc_bytes, b, sizeof b));
  if (d->local_memory_bytes) printf(", local %s", bytes(d->local_memory_bytes, c, sizeof c));
  printf(", free %s (%s)\n", bytes(d->free_bytes, e, sizeof e), d->free_source);
  svm_list(d->svm, list, sizeof list);
  printf("         SVM %s; managed memory %s", list, yes_no(d->managed_memory));
  if (d->managed_memory) printf(" (concurrent access %s)", yes_no(d->concurrent_managed_access));
  printf("; fp64 %s; fp16 %s\n", yes_no(d->fp64), yes_no(d->fp16));
  if (d->pci_bus_id[0] || d->numa_node >= 0) {
    printf("         ");
    if (d->pci_bus_id[0]) printf("PCI %s%s", d->pci_bus_id, d->numa_node >= 0 ? ", " : "");
    if (d->numa_node >= 0) printf("NUMA node %d", (int)d->numa_node);
    printf("\n");
  }
}

static void print_memory_node(const loom_context *ctx, const loom_memory_node_info *m) {
  char a[32], b[32];
  printf("\n%s: %s memory", m->id, loom_memory_node_kind_name(m->kind));
  if (m->numa_os_index >= 0)
    printf(", %sNUMA node %d", m->kind == LOOM_MEMORY_HOST ? "" : "near ", (int)m->numa_os_index);
  printf(", %s, %s free (%s)\n", bytes(m->size_bytes, a, sizeof a), bytes(m->free_bytes, b, sizeof b),
         m->free_source);
  if (m->kind == LOOM_MEMORY_HOST)
    printf("  %d cores, %d PUs (cpus %s)\n", (int)m->cores, (int)m->pus, m->cpus[0] ? m->cpus : "none");
  if (m->device_count == 0) printf("  no selected device allocates from it\n");
  for (int32_t i = 0; i < m->device_count; i++) {
    loom_device_info d;
    if (loom_context_device_info(ctx, m->devices[i], &d) == LOOM_OK) print_device(&d);
  }
}

static int print_report(const loom_context *ctx) {
  loom_host_info host;
  loom_context_host_info(ctx, &host);
  print_host(&host);
  for (int32_t i = 0; i < loom_context_memory_node_count(ctx); i++) {
    loom_memory_node_info m;
    if (loom_context_memory_node_info(ctx, i, &m) == LOOM_OK) print_memory_node(ctx, &m);
  }
  int32_t notes = loom_context_note_count(ctx);
  if (notes) printf("\nNotes:\n");
  for (int32_t i = 0; i < notes; i++) printf("  - %s\n", loom_context_note(ctx, i));
  return fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1;
}

/* ---- JSON --------------------------------------------------------------------------------- */

/* The host's micro-architecture (this machine's CPUID, even for a recorded topology). */
static void json_uarch(loom__json *j) {
  loom__cpu_uarch u;
  loom__cpu_uarch_host(&u);
  loom__json_key(j, "cpu_uarch");
  loom__json_begin_object(j);
  loom__json_kv_string(j, "name", u.name);
  loom__json_kv_string(j, "vendor", u.vendor);
  loom__json_kv_int64(j, "family", u.family);
  loom__json_kv_int64(j, "model", u.model);
  loom__json_kv_int64(j, "stepping", u.stepping);
  loom__json_kv_string(j, "isa", u.isa_name);
  loom__json_kv_int64(j, "fma_bits", u.fma_bits);
  loom__json_kv_int64(j, "fma_units", u.fma_units);
  loom__json_kv_int64(j, "flops_per_cycle_f32", u.flops_per_cycle_f32);
  loom__json_kv_int64(j, "flops_per_cycle_f64", u.flops_per_cycle_f64);
  loom__json_kv_bool(j, "from_table", u.from_table);
  loom__json_kv_string(j, "flops_source", u.source);
  loom__json_end_object(j);
}

static void json_host(loom__json *j, const loom_host_info *h) {
  loom__json_key(j, "host");
  loom__json_begin_object(j);
  loom__json_kv_string(j, "cpu_model", h->cpu_model);
  loom__json_kv_string(j, "cpu_vendor", h->cpu_vendor);
  loom__json_kv_int64(j, "packages", h->packages);
  loom__json_kv_int64(j, "cores", h->cores);
  loom__json_kv_int64(j, "pus", h->pus);
  loom__json_kv_int64(j, "numa_nodes", h->numa_nodes);
  loom__json_kv_int64(j, "memory_bytes", h->memory_bytes);
  loom__json_kv_int64(j, "l1d_bytes", h->l1d_bytes);
  loom__json_kv_int64(j, "l2_bytes", h->l2_bytes);
  loom__json_kv_int64(j, "l3_bytes", h->l3_bytes);
  loom__json_kv_bool(j, "recorded_topology", h->recorded);
  json_uarch(j);
  loom__json_end_object(j);
}

/* A space- or comma-separated list as a JSON array of strings. */
static void json_words(loom__json *j, const char *key, const char *text, char sep) {
  loom__json_key(j, key);
  loom__json_begin_array(j);
  const char *p = text;
  while (*p) {
    while (*p == sep || *p == ' ') p++;
    const char *e = p;
    while (*e && *e != sep && *e != ' ') e++;
    if (e > p) loom__json_string_n(j, p, (size_t)(e - p));
    p = e;
  }
  loom__json_end_array(j);
}

static void json_free(loom__json *j, int64_t free_bytes, const char *source) {
  if (free_bytes >= 0)
    loom__json_kv_int64(j, "free_bytes", free_bytes);
  else
    loom__json_kv_null(j, "free_bytes");
  loom__json_kv_string(j, "free_source", source);
}

static void json_device(loom__json *j, const loom_context *ctx, const loom_device_info *d) {
  loom__json_begin_object(j);
  loom__json_kv_string(j, "id", d->id);
  json_words(j, "also_known_as", d->also_known_as, ',');
  loom__json_key(j, "backends");
  loom__json_begin_array(j);
  for (uint32_t bit = 1; bit <= LOOM_BACKEND_CUDA; bit <<= 1)
    if (d->backends & bit) loom__json_string(j, loom_backend_name(bit));
  loom__json_end_array(j);
  loom__json_kv_string(j, "kind", loom_device_kind_name(d->kind));
  loom__json_kv_string(j, "name", d->name);
  loom__json_kv_string(j, "vendor", d->vendor);
  loom__json_kv_int64(j, "vendor_id", d->vendor_id);
  loom__json_kv_string(j, "version", d->version);
  loom__json_kv_string(j, "driver_version", d->driver_version);
  loom__json_kv_string(j, "platform", d->platform);
  loom__json_kv_int64(j, "compute_units", d->compute_units);
  loom__json_kv_int64(j, "clock_mhz", d->clock_mhz);
  if (d->compute_capability_major) {
    char cc[16];
    snprintf(cc, sizeof cc, "%d.%d", (int)d->compute_capability_major, (int)d->compute_capability_minor);
    loom__json_kv_string(j, "compute_capability", cc);
  } else {
    loom__json_kv_null(j, "compute_capability");
  }
  loom__json_kv_int64(j, "memory_bytes", d->memory_bytes);
  loom__json_kv_int64(j, "max_alloc_bytes", d->max_alloc_bytes);
  loom__json_kv_int64(j, "local_memory_bytes", d->local_memory_bytes);
  json_free(j, d->free_bytes, d->free_source);
  loom__json_kv_bool(j, "host_unified_memory", d->host_unified);
  loom__json_key(j, "svm");
  loom__json_begin_object(j);
  loom__json_kv_bool(j, "coarse_grain_buffer", d->svm & LOOM_SVM_COARSE_GRAIN_BUFFER);
  loom__json_kv_bool(j, "fine_grain_buffer", d->svm & LOOM_SVM_FINE_GRAIN_BUFFER);
  loom__json_kv_bool(j, "fine_grain_system", d->svm & LOOM_SVM_FINE_GRAIN_SYSTEM);
  loom__json_kv_bool(j, "atomics", d->svm & LOOM_SVM_ATOMICS);
  loom__json_end_object(j);
  loom__json_kv_bool(j, "managed_memory", d->managed_memory);
  loom__json_kv_bool(j, "concurrent_managed_access", d->concurrent_managed_access);
  loom__json_kv_bool(j, "fp64", d->fp64);
  loom__json_kv_bool(j, "fp16", d->fp16);
  if (d->numa_node >= 0)
    loom__json_kv_int64(j, "numa_node", d->numa_node);
  else
    loom__json_kv_null(j, "numa_node");
  loom__json_kv_string(j, "pci_bus_id", d->pci_bus_id[0] ? d->pci_bus_id : NULL);
  loom_memory_node_info m;
  loom__json_kv_string(j, "memory_node",
                       loom_context_memory_node_info(ctx, d->memory_node, &m) == LOOM_OK ? m.id : NULL);
  json_words(j, "extensions", d->extensions, ' ');
  loom__json_end_object(j);
}

static void json_memory_node(loom__json *j, const loom_context *ctx, const loom_memory_node_info *m) {
  loom__json_begin_object(j);
  loom__json_kv_string(j, "id", m->id);
  loom__json_kv_string(j, "kind", loom_memory_node_kind_name(m->kind));
  loom__json_kv_int64(j, "size_bytes", m->size_bytes);
  json_free(j, m->free_bytes, m->free_source);
  if (m->numa_os_index >= 0)
    loom__json_kv_int64(j, "numa_os_index", m->numa_os_index);
  else
    loom__json_kv_null(j, "numa_os_index");
  loom__json_kv_int64(j, "cores", m->cores);
  loom__json_kv_int64(j, "pus", m->pus);
  loom__json_kv_string(j, "cpus", m->cpus);
  loom__json_key(j, "devices");
  loom__json_begin_array(j);
  for (int32_t i = 0; i < m->device_count; i++) {
    loom_device_info d;
    if (loom_context_device_info(ctx, m->devices[i], &d) == LOOM_OK) loom__json_string(j, d.id);
  }
  loom__json_end_array(j);
  loom__json_end_object(j);
}

static int print_json(const loom_context *ctx) {
  loom__json j;
  loom__json_init(&j, stdout, true);
  loom__json_begin_object(&j);
  loom__json_kv_string(&j, "loom_version", loom_version());
  loom_host_info host;
  loom_context_host_info(ctx, &host);
  json_host(&j, &host);
  loom__json_key(&j, "devices");
  loom__json_begin_array(&j);
  for (int32_t i = 0; i < loom_context_device_count(ctx); i++) {
    loom_device_info d;
    if (loom_context_device_info(ctx, i, &d) == LOOM_OK) json_device(&j, ctx, &d);
  }
  loom__json_end_array(&j);
  loom__json_key(&j, "memory_nodes");
  loom__json_begin_array(&j);
  for (int32_t i = 0; i < loom_context_memory_node_count(ctx); i++) {
    loom_memory_node_info m;
    if (loom_context_memory_node_info(ctx, i, &m) == LOOM_OK) json_memory_node(&j, ctx, &m);
  }
  loom__json_end_array(&j);
  loom__json_key(&j, "notes");
  loom__json_begin_array(&j);
  for (int32_t i = 0; i < loom_context_note_count(ctx); i++) loom__json_string(&j, loom_context_note(ctx, i));
  loom__json_end_array(&j);
  loom__json_end_object(&j);
  if (loom__json_finish(&j) != LOOM_OK) {
    fprintf(stderr, "loom-info: %s\n", loom_last_error());
    return 1;
  }
  return 0;
}

/* ---- performance models ------------------------------------------------------------------ */

static int print_models(const loom_context *ctx) {
  for (int32_t i = 0; i < loom_context_device_count(ctx); i++) {
    loom_device_info d;
    if (loom_context_device_info(ctx, i, &d)) continue;
    const char *driver = loom_sched_device_driver(&d);
    char path[1100];
    if (loom_sched_model_path(d.name, driver, path, sizeof path))
      snprintf(path, sizeof path, "(no cache folder)");
    printf("%s  %s  (driver %s)\n  model %s\n", d.id, d.name, *driver ? driver : "none", path);
    loom_sched_model m;
    loom_status s = loom_sched_model_load(d.name, driver, &m);
    if (s == LOOM_ERR_NOT_FOUND)
      printf("    none yet: `loom-bench calibrate` measures one\n");
    else if (s)
      printf("    unreadable: %s\n", loom_last_error());
    else
      loom_sched_model_print(&m, 4, stdout);
  }
  return 0;
}

/* This machine as a platform file on stdout, its devices named in the comment. */
static int print_platform(const loom_context *ctx) {
  loom_sched_platform *p = NULL;
  if (loom_sched_platform_from_context(ctx, NULL, &p)) {
    fprintf(stderr, "loom-info: --platform: %s\n", loom_last_error());
    return 1;
  }
  char comment[1024];
  int used = snprintf(comment, sizeof comment, "this machine's devices, measured by loom-bench calibrate:");
  for (int32_t i = 0; i < loom_context_device_count(ctx) && used > 0 && (size_t)used < sizeof comment; i++) {
    loom_device_info d;
    if (loom_context_device_info(ctx, i, &d)) continue;
    used += snprintf(comment + used, sizeof comment - (size_t)used, "%s %s %s", i ? ";" : "", d.id, d.name);
  }
  loom_status s = loom_sched_platform_write_json(p, comment, stdout);
  loom_sched_platform_destroy(p);
  if (s) {
    fprintf(stderr, "loom-info: --platform: %s\n", loom_last_error());
    return 1;
  }
  return 0;
}

enum { OPT_JSON = 256, OPT_MODELS, OPT_PLATFORM };

static const struct option info_options[] = {
    {"json", no_argument, NULL, OPT_JSON},         {"models", no_argument, NULL, OPT_MODELS},
    {"platform", no_argument, NULL, OPT_PLATFORM}, {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},           {NULL, 0, NULL, 0},
};

int main(int argc, char **argv) {
  loom__cli cli = {.prog = "loom-info",
                   .synopsis = "loom-info [--json | --models | --platform]",
                   .options = info_options,
                   .short_options = "hV"};
  bool json = false, models = false, platform = false;
  for (int key; (key = loom__cli_next(&cli, argc, argv)) != -1;) {
    switch (key) {
      case OPT_JSON:
        json = true;
        break;
      case OPT_MODELS:
        models = true;
        break;
      case OPT_PLATFORM:
        platform = true;
        break;
      case 'h':
        usage(stdout);
        return 0;
      case 'V':
        loom__cli_print_version(stdout, "loom-info");
        return 0;
      default:
        return LOOM__CLI_USAGE;
    }
  }
  if (cli.index < argc) return loom__cli_usage_error(&cli, "unexpected argument '%s'", argv[cli.index]);
  if (json + models + platform > 1)
    return loom__cli_usage_error(&cli, "give one of --json, --models and --platform");
  loom_context *ctx = NULL;
  loom_status s = loom_context_create(NULL, &ctx);
  if (s != LOOM_OK) {
    fprintf(stderr, "loom-info: %s: %s\n", loom_status_string(s), loom_last_error());
    return 1;
  }
  int rc = platform ? print_platform(ctx)
           : models ? print_models(ctx)
           : json   ? print_json(ctx)
                    : print_report(ctx);
  loom_context_destroy(ctx);
  return rc;
}
