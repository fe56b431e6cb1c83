/* Discovery on this machine: cpu0 and PoCL's devices (POCL_DEVICES="pthread pthread",
 * POCL_MEMORY_LIMIT=1 give two OpenCL devices of 1 GiB), compared with clinfo; selection by
 * LOOM_DEVICES and the options; every allocation failure during discovery. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "loom/device.h"
#include "loom/testing.h"

#define GiB (1024LL * 1024 * 1024)

/* PoCL reads these once per process, at its first call: set them before any test runs
 * (tests/devices.cmake sets them too; an outer setting wins). */
__attribute__((constructor)) static void pocl_environment(void) {
  setenv("POCL_DEVICES", "pthread pthread", 0);
  setenv("POCL_MEMORY_LIMIT", "1", 0);
  unsetenv("LOOM_DEVICES");
}

static loom_context *create(const char *devices, loom_status *out_status) {
  loom_context_options opts;
  loom_context_options_init(&opts);
  opts.devices = devices;
  loom_context *ctx = (loom_context *)0x1; /* must be cleared on failure */
  *out_status = loom_context_create(&opts, &ctx);
  return ctx;
}

static bool has_note(const loom_context *ctx, const char *text) {
  for (int32_t i = 0; i < loom_context_note_count(ctx); i++)
    if (strstr(loom_context_note(ctx, i), text)) return true;
  return false;
}

/* The number of OpenCL devices the context found; -1 (and a skip) when there is no OpenCL
 * platform on this machine. */
static int32_t opencl_devices(const loom_context *ctx) {
  if (has_note(ctx, "opencl: no OpenCL platform") || has_note(ctx, "OpenCL support not built")) {
    loom_test_skip("no OpenCL platform here");
    return -1;
  }
  int32_t n = 0;
  for (int32_t i = 0; i < loom_context_device_count(ctx); i++) {
    loom_device_info d;
    if (loom_context_device_info(ctx, i, &d) == LOOM_OK && (d.backends & LOOM_BACKEND_OPENCL)) n++;
  }
  return n;
}

static bool is_pocl(const loom_device_info *d) {
  return strcmp(d->platform, "Portable Computing Language") == 0;
}

/* tests/devices.cmake shows this test PoCL alone and hides any real GPU, so the machine is
 * cpu0, ocl0, ocl1; run by hand on a GPU machine, other devices may come before PoCL's. */
TEST(discover_cpu0_and_two_pocl_devices) {
  loom_status s;
  loom_context *ctx = create(NULL, &s);
  ASSERT_OK(s);
  if (opencl_devices(ctx) < 0) {
    loom_context_destroy(ctx);
    return;
  }
  loom_device_info cpu;
  ASSERT_OK(loom_context_device_info(ctx, 0, &cpu));
  ASSERT_STREQ(cpu.id, "cpu0");
  ASSERT_EQ(cpu.backends, LOOM_BACKEND_CPU);
  int32_t pocl = 0, first_pocl = -1;
  for (int32_t i = 0; i < loom_context_device_count(ctx); i++) {
    loom_device_info d;
    ASSERT_OK(loom_context_device_info(ctx, i, &d));
    if (i > 0 && !is_pocl(&d)) continue;
    if (i > 0 && first_pocl < 0) first_pocl = atoi(d.id + 3);
    if (i > 0) {
      char id[16];
      snprintf(id, sizeof id, "ocl%d", (int)(first_pocl + pocl++)); /* consecutive ids */
      ASSERT_STREQ(d.id, id);
      ASSERT_EQ(d.backends, LOOM_BACKEND_OPENCL);
      ASSERT_EQ(d.memory_bytes, 1 * GiB); /* POCL_MEMORY_LIMIT=1 */
      ASSERT_EQ(d.max_alloc_bytes, 256LL * 1024 * 1024);
      ASSERT_TRUE(d.free_bytes <= d.memory_bytes);
      ASSERT_TRUE(d.fp64);
      ASSERT_TRUE(d.svm & LOOM_SVM_COARSE_GRAIN_BUFFER);
      ASSERT_CONTAINS(d.extensions, "cl_khr_fp64");
    }
    ASSERT_EQ(d.kind, LOOM_DEVICE_CPU);
    ASSERT_TRUE(d.host_unified);
    ASSERT_EQ(d.memory_node, 0); /* every one of them on host memory */
    ASSERT_TRUE(d.compute_units > 0);
    ASSERT_TRUE(d.free_bytes >= 0);
    ASSERT_STREQ(d.free_source, "/proc/meminfo");
    ASSERT_STREQ(d.pci_bus_id, "");
  }
  ASSERT_EQ(pocl, 2);
  loom_memory_node_info m;
  ASSERT_OK(loom_context_memory_node_info(ctx, 0, &m));
  ASSERT_STREQ(m.id, "host0");
  ASSERT_EQ(m.kind, LOOM_MEMORY_HOST);
  ASSERT_TRUE(m.device_count >= 3);
  ASSERT_TRUE(m.size_bytes > 0);
  ASSERT_TRUE(m.cores > 0 && m.pus >= m.cores);
  loom_host_info h;
  ASSERT_OK(loom_context_host_info(ctx, &h));
  if (h.numa_nodes == 1) ASSERT_EQ(h.memory_bytes, m.size_bytes);
  ASSERT_TRUE(!h.recorded);
  loom_context_destroy(ctx);
}

/* ---- clinfo --json, read for the few fields compared --------------------------------------- */

typedef struct clinfo_device {
  char name[256];
  long long global_mem;
} clinfo_device;

/* Reads the JSON string starting after the opening quote at p into out. */
static void read_json_string(const char *p, char *out, size_t size) {
  size_t n = 0;
  for (; *p && *p != '"' && n + 1 < size; p++) {
    if (*p == '\\' && p[1]) p++;
    out[n++] = *p;
  }
  out[n] = '\0';
}

/* Devices in clinfo's order (platform then device); -1 when clinfo cannot be run. */
static int read_clinfo(clinfo_device *devs, int max) {
  FILE *f = popen("clinfo --json 2>/dev/null", "r");
  if (!f) return -1;
  size_t cap = 1 << 16, len = 0;
  char *text = malloc(cap);
  size_t got;
  while (text && (got = fread(text + len, 1, cap - len - 1, f)) > 0) {
    len += got;
    if (len + 1 == cap) text = realloc(text, cap *= 2);
  }
  int rc = pclose(f);
  if (!text) return -1;
  text[len] = '\0';
  int n = 0;
  if (rc != 0 || len == 0) n = -1;
  const char *name_key = "\"CL_DEVICE_NAME\" : \"", *mem_key = "\"CL_DEVICE_GLOBAL_MEM_SIZE\" : ";
  for (const char *p = text; n >= 0 && n < max && (p = strstr(p, name_key)); n++) {
    p += strlen(name_key);
    read_json_string(p, devs[n].name, sizeof devs[n].name);
    const char *m = strstr(p, mem_key);
    devs[n].global_mem = m ? strtoll(m + strlen(mem_key), NULL, 10) : -1;
  }
  free(text);
  return n;
}

TEST(opencl_devices_match_clinfo) {
#if !LOOM_HAVE_OPENCL
  loom_test_skip("built without OpenCL: clinfo's devices are not Loom's");
  return;
#endif
  clinfo_device cl[16];
  int n = read_clinfo(cl, 16);
  if (n < 0) {
    loom_test_skip("clinfo --json cannot be run");
    return;
  }
  loom_status s;
  loom_context *ctx = create("opencl", &s);
  if (n == 0) {
    /* No platform for clinfo: none for Loom either. */
    ASSERT_EQ(s, LOOM_ERR_NOT_FOUND);
    return;
  }
  ASSERT_OK(s);
  ASSERT_EQ(loom_context_device_count(ctx), n);
  for (int i = 0; i < n; i++) {
    loom_device_info d;
    char id[16];
    snprintf(id, sizeof id, "ocl%d", i);
    int32_t index;
    ASSERT_OK(loom_context_find_device(ctx, id, &index));
    ASSERT_OK(loom_context_device_info(ctx, index, &d));
    ASSERT_STREQ(d.name, cl[i].name);
    /* A GPU CUDA shows too keeps CUDA's memory size (one GPU, one size). */
    if (!(d.backends & LOOM_BACKEND_CUDA)) ASSERT_EQ(d.memory_bytes, cl[i].global_mem);
  }
  loom_context_destroy(ctx);
}

/* ---- selection ------------------------------------------------------------------------------ */

TEST(select_with_loom_devices) {
  setenv("LOOM_DEVICES", "cpu0", 1);
  loom_context *ctx = NULL;
  loom_status s = loom_context_create(NULL, &ctx);
  unsetenv("LOOM_DEVICES");
  ASSERT_OK(s);
  ASSERT_EQ(loom_context_device_count(ctx), 1);
  loom_device_info d;
  ASSERT_OK(loom_context_device_info(ctx, 0, &d));
  ASSERT_STREQ(d.id, "cpu0");
  ASSERT_EQ(loom_context_memory_node_count(ctx), 1);
  loom_memory_node_info m;
  ASSERT_OK(loom_context_memory_node_info(ctx, 0, &m));
  ASSERT_EQ(m.device_count, 1);
  /* The host alone: no backend is started for it. */
  ASSERT_TRUE(has_note(ctx, "cuda, opencl: not discovered: LOOM_DEVICES='cpu0' selects the host only"));
  loom_context_destroy(ctx);
  loom_status st;
  ctx = create("cpu", &st);
  ASSERT_OK(st);
  ASSERT_EQ(loom_context_device_count(ctx), 1);
  loom_context_destroy(ctx);
  ctx = create("cpu1", &st);
  ASSERT_EQ(st, LOOM_ERR_NOT_FOUND);
  ASSERT_CONTAINS(loom_last_error(), "no device cpu1 on this machine (devices: cpu0)");
}

TEST(select_one_opencl_device_keeps_its_id) {
  loom_status s;
  loom_context *ctx = create("all", &s);
  ASSERT_OK(s);
  int32_t n_ocl = opencl_devices(ctx);
  loom_context_destroy(ctx);
  if (n_ocl < 0) return;
  ctx = create("ocl1", &s);
  ASSERT_OK(s);
  ASSERT_EQ(loom_context_device_count(ctx), 1);
  int32_t index = 7;
  ASSERT_OK(loom_context_find_device(ctx, "ocl1", &index));
  ASSERT_EQ(index, 0);
  ASSERT_STATUS(loom_context_find_device(ctx, "ocl0", &index), LOOM_ERR_NOT_FOUND);
  ASSERT_CONTAINS(loom_last_error(), "no device 'ocl0' in this context (devices: ocl1)");
  ASSERT_EQ(index, -1);
  loom_context_destroy(ctx);

  ctx = create(" OpenCL ", &s); /* case and spaces do not matter */
  ASSERT_OK(s);
  ASSERT_EQ(loom_context_device_count(ctx), 2);
  loom_context_destroy(ctx);
}

TEST(select_options_win_over_the_environment) {
  setenv("LOOM_DEVICES", "bogus", 1);
  loom_status s;
  loom_context *ctx = create("cpu0", &s);
  unsetenv("LOOM_DEVICES");
  ASSERT_OK(s);
  ASSERT_EQ(loom_context_device_count(ctx), 1);
  loom_context_destroy(ctx);
}

TEST(select_bad_token_is_invalid_argument) {
  loom_status s;
  loom_context *ctx = create("cpu0,gpu0", &s);
  ASSERT_EQ(s, LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_TRUE(ctx == NULL);
  ASSERT_CONTAINS(loom_last_error(), "loom_context_options.devices='cpu0,gpu0': unknown device 'gpu0'");
  ctx = create("cpu0,,ocl0", &s);
  ASSERT_EQ(s, LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "an empty entry");

  setenv("LOOM_DEVICES", "ocl1;cpu0", 1);
  s = loom_context_create(NULL, &ctx);
  unsetenv("LOOM_DEVICES");
  ASSERT_EQ(s, LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "LOOM_DEVICES='ocl1;cpu0': unknown device 'ocl1;cpu0'");
}

TEST(select_absent_device_is_not_found) {
  loom_status s;
  loom_context *ctx = create("cpu0,ocl7", &s);
  ASSERT_EQ(s, LOOM_ERR_NOT_FOUND);
  ASSERT_TRUE(ctx == NULL);
  ASSERT_CONTAINS(loom_last_error(), "no device ocl7 on this machine (devices: cpu0");
  ctx = create("cuda", &s); /* no CUDA device here: the selection takes nothing */
  if (s == LOOM_OK) {
    loom_context_destroy(ctx); /* a machine with a GPU */
    return;
  }
  ASSERT_EQ(s, LOOM_ERR_NOT_FOUND);
  ASSERT_CONTAINS(loom_last_error(), "selects no device");
}

TEST(select_blank_means_all) {
  loom_status s;
  loom_context *all = create(NULL, &s);
  ASSERT_OK(s);
  loom_context *blank = create("  ", &s);
  ASSERT_OK(s);
  ASSERT_EQ(loom_context_device_count(blank), loom_context_device_count(all));
  loom_context_destroy(all);
  loom_context_destroy(blank);
}

/* ---- notes, arguments, failures ---------------------------------------------------------- */

TEST(notes_say_why_cuda_is_missing) {
  loom_status s;
  loom_context *ctx = create(NULL, &s);
  ASSERT_OK(s);
  bool cuda = false;
  for (int32_t i = 0; i < loom_context_device_count(ctx); i++) {
    loom_device_info d;
    ASSERT_OK(loom_context_device_info(ctx, i, &d));
    cuda |= (d.backends & LOOM_BACKEND_CUDA) != 0;
  }
  if (!cuda) ASSERT_TRUE(has_note(ctx, "cuda: "));
  ASSERT_TRUE(loom_context_note(ctx, -1) == NULL);
  ASSERT_TRUE(loom_context_note(ctx, loom_context_note_count(ctx)) == NULL);
  loom_context_destroy(ctx);
}

TEST(queries_check_their_arguments) {
  loom_status s;
  loom_context *ctx = create("cpu0", &s);
  ASSERT_OK(s);
  loom_device_info d;
  ASSERT_STATUS(loom_context_device_info(ctx, 1, &d), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "index 1 out of range (1 devices)");
  ASSERT_TRUE(d.id == NULL); /* cleared */
  ASSERT_STATUS(loom_context_device_info(ctx, 0, NULL), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(loom_context_device_info(NULL, 0, &d), LOOM_ERR_INVALID_ARGUMENT);
  loom_memory_node_info m;
  ASSERT_STATUS(loom_context_memory_node_info(ctx, -1, &m), LOOM_ERR_INVALID_ARGUMENT);
  int32_t index;
  ASSERT_STATUS(loom_context_find_device(ctx, NULL, &index), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(loom_context_host_info(NULL, NULL), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(loom_context_create(NULL, NULL), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(loom_context_device_count(NULL), 0);
  ASSERT_EQ(loom_context_memory_node_count(NULL), 0);
  ASSERT_EQ(loom_context_note_count(NULL), 0);
  ASSERT_STREQ(loom_device_kind_name(LOOM_DEVICE_ACCELERATOR), "accelerator");
  ASSERT_STREQ(loom_memory_node_kind_name(LOOM_MEMORY_DEVICE), "device");
  ASSERT_STREQ(loom_backend_name(LOOM_BACKEND_CUDA), "cuda");
  ASSERT_STREQ(loom_backend_name(3), "?");
  loom_context_destroy(ctx);
  loom_context_destroy(NULL);
}

TEST(create_frees_everything_on_allocation_failure) {
  loom_test_sweep sw;
  SWEEP_ALLOCATIONS(&sw, 0, 2000) {
    loom_context *ctx = NULL;
    if (SWEEP_RUN(&sw, loom_context_create(NULL, &ctx))) ASSERT_TRUE(ctx == NULL);
    loom_context_destroy(ctx);
  }
}
