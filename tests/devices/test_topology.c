/* Locality and deduplication from recorded topologies (tests/data/topologies/, hwloc XML), with
 * fake CUDA and OpenCL devices: a two-socket machine with four GPUs tested on a laptop. */
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devices/devices.h"
#include "harness.h"
#include "loom/device.h"
#include "loom/testing.h"
#include "runtime/context.h"

#define GiB (1024LL * 1024 * 1024)

static const char *topology_path(const char *name) {
  static char path[1024];
  const char *data = getenv("LOOM_TEST_DATA");
  if (data) {
    snprintf(path, sizeof path, "%s/topologies/%s", data, name);
  } else {
    char here[1024];
    snprintf(here, sizeof here, "%s", __FILE__);
    snprintf(path, sizeof path, "%s/../data/topologies/%s", dirname(here), name);
  }
  return path;
}

/* ---- fake raw devices -------------------------------------------------------------------- */

static void fake_cuda(loom__device_list *raw, int ordinal, const char *bus_id) {
  loom__device d;
  loom__device_init(&d);
  snprintf(d.id, sizeof d.id, "cuda%d", ordinal);
  d.backends = LOOM_BACKEND_CUDA;
  d.kind = LOOM_DEVICE_GPU;
  d.cuda_ordinal = ordinal;
  loom__device_set_string(&d.name, "NVIDIA A100-SXM4-80GB");
  loom__device_set_string(&d.vendor, "NVIDIA Corporation");
  d.compute_units = 108;
  d.memory_bytes = d.max_alloc_bytes = 80 * GiB;
  d.free_bytes = 79 * GiB;
  d.free_source = "cuMemGetInfo";
  d.managed_memory = d.concurrent_managed_access = true;
  d.cc_major = 8;
  snprintf(d.pci_bus_id, sizeof d.pci_bus_id, "%s", bus_id);
  loom__device_list_push(raw, &d);
}

/* An OpenCL device: a GPU with bus_id, or (bus_id NULL) a PoCL-like CPU device. */
static void fake_ocl(loom__device_list *raw, int index, const char *bus_id, bool host_unified) {
  loom__device d;
  loom__device_init(&d);
  snprintf(d.id, sizeof d.id, "ocl%d", index);
  d.backends = LOOM_BACKEND_OPENCL;
  d.cl_index = index;
  d.cl_device = (void *)(intptr_t)(0x1000 + index);
  d.kind = bus_id ? LOOM_DEVICE_GPU : LOOM_DEVICE_CPU;
  loom__device_set_string(&d.name, bus_id ? "NVIDIA A100-SXM4-80GB" : "pthread-cpu");
  loom__device_set_string(&d.platform, bus_id ? "NVIDIA CUDA" : "Portable Computing Language");
  loom__device_set_string(&d.extensions, "cl_khr_fp64 cl_nv_device_attribute_query");
  d.memory_bytes = bus_id ? 79 * GiB : 1 * GiB; /* OpenCL reports a little less than CUDA */
  d.max_alloc_bytes = d.memory_bytes / 4;
  d.local_memory_bytes = 48 * 1024;
  d.svm = LOOM_SVM_COARSE_GRAIN_BUFFER;
  d.host_unified = host_unified;
  if (bus_id) snprintf(d.pci_bus_id, sizeof d.pci_bus_id, "%s", bus_id);
  loom__device_list_push(raw, &d);
}

/* A context around a table built from `xml` and `raw` (a fake: no discovery). */
static loom_status fake_context(const char *xml, loom__device_list *raw, const char *selection,
                                loom_context *ctx) {
  memset(ctx, 0, sizeof *ctx);
  loom_status s = loom__host_load(&ctx->devices.host, topology_path(xml), true);
  if (s != LOOM_OK) return s;
  loom__selection sel;
  s = loom__selection_parse(selection, "LOOM_DEVICES", &sel);
  if (s == LOOM_OK) {
    s = loom__devices_build(&ctx->devices, raw, &sel);
    loom__selection_deinit(&sel);
  }
  return s;
}

static bool has_note(const loom_context *ctx, const char *text) {
  for (int32_t i = 0; i < loom_context_note_count(ctx); i++)
    if (strstr(loom_context_note(ctx, i), text)) return true;
  return false;
}

/* ---- bus ids ----------------------------------------------------------------------------- */

TEST(pci_bus_id_normalize) {
  char out[LOOM__PCI_BUS_ID_LEN];
  ASSERT_TRUE(loom__pci_bus_id_normalize("0000:3B:00.0", out));
  ASSERT_STREQ(out, "0000:3b:00.0");
  ASSERT_TRUE(loom__pci_bus_id_normalize("00000000:3B:00.0", out)); /* nvidia-smi's form */
  ASSERT_STREQ(out, "0000:3b:00.0");
  ASSERT_TRUE(loom__pci_bus_id_normalize("af:1f.7", out));
  ASSERT_STREQ(out, "0000:af:1f.7");
  ASSERT_TRUE(!loom__pci_bus_id_normalize("", out));
  ASSERT_TRUE(!loom__pci_bus_id_normalize("junk", out));
  ASSERT_TRUE(!loom__pci_bus_id_normalize("0000:3b:00.8", out)); /* function is 0-7 */
  ASSERT_TRUE(!loom__pci_bus_id_normalize("0000:3b:00.0x", out));
  ASSERT_TRUE(!loom__pci_bus_id_normalize("0000:3b:00.10", out));
  ASSERT_TRUE(!loom__pci_bus_id_normalize("1:2:3:4.0", out));
  ASSERT_TRUE(!loom__pci_bus_id_normalize("0x00:3b:00.0", out));
  ASSERT_TRUE(loom__pci_bus_id_normalize(" 0000:3b:00.0\n", out));
  ASSERT_TRUE(!loom__pci_bus_id_normalize(NULL, out));
}

/* ---- the pure placement ------------------------------------------------------------------ */

TEST(place_two_sockets_four_gpus) {
  loom__host host;
  ASSERT_OK(loom__host_load(&host, topology_path("2s-2numa-4gpu.xml"), true));
  const loom__pci_ref devs[] = {
      {LOOM_BACKEND_OPENCL, "0000:AF:00.0"},   /* 0: the same GPU as 5 */
      {LOOM_BACKEND_OPENCL, "0000:19:00.0"},   /* 1: same as 3 */
      {LOOM_BACKEND_OPENCL, NULL},             /* 2: PoCL, no PCI */
      {LOOM_BACKEND_CUDA, "0000:19:00.0"},     /* 3 */
      {LOOM_BACKEND_CUDA, "0000:3b:00.0"},     /* 4 */
      {LOOM_BACKEND_CUDA, "00000000:AF:00.0"}, /* 5 */
      {LOOM_BACKEND_CUDA, "0000:87:00.0"},     /* 6 */
      {LOOM_BACKEND_OPENCL, "0000:03:00.0"},   /* 7: the BMC display, under the machine */
      {LOOM_BACKEND_OPENCL, "0000:ff:00.0"},   /* 8: not in the topology */
      {LOOM_BACKEND_OPENCL, "0000:87:00.0"},   /* 9: same as 6 */
  };
  loom__placement p[10];
  loom__topology_place(host.topology, devs, 10, p);
  int32_t numa[] = {1, 0, -1, 0, 0, 1, 1, -1, -1, 1};
  int32_t same[] = {5, 3, -1, -1, -1, -1, -1, -1, -1, 6};
  bool in_topo[] = {true, true, false, true, true, true, true, true, false, true};
  for (int i = 0; i < 10; i++) {
    ASSERT_EQ(p[i].numa_os_index, numa[i]);
    ASSERT_EQ(p[i].same_as, same[i]);
    ASSERT_EQ(p[i].in_topology, in_topo[i]);
  }
  ASSERT_STREQ(p[5].pci_bus_id, "0000:af:00.0");
  ASSERT_STREQ(p[2].pci_bus_id, "");
  loom__host_deinit(&host);
}

TEST(place_sub_numa_clusters) {
  loom__host host;
  ASSERT_OK(loom__host_load(&host, topology_path("2s-4numa-snc-2gpu.xml"), true));
  ASSERT_EQ(host.numa_count, 4);
  const loom__pci_ref devs[] = {
      {LOOM_BACKEND_CUDA, "0000:19:00.0"},   /* under the group of NUMA node 0 */
      {LOOM_BACKEND_OPENCL, "0000:af:00.0"}, /* under the group of NUMA node 3 */
      {LOOM_BACKEND_OPENCL, "0000:31:00.0"}, /* the NIC: package 0, nodes 0 and 1 */
  };
  loom__placement p[3];
  loom__topology_place(host.topology, devs, 3, p);
  ASSERT_EQ(p[0].numa_os_index, 0);
  ASSERT_EQ(p[1].numa_os_index, 3);
  ASSERT_EQ(p[2].numa_os_index, -1);
  ASSERT_TRUE(p[2].in_topology);
  loom__host_deinit(&host);
}

TEST(place_without_topology_still_dedups) {
  const loom__pci_ref devs[] = {
      {LOOM_BACKEND_OPENCL, "0000:01:00.0"},
      {LOOM_BACKEND_OPENCL, "0000:02:00.0"},
      {LOOM_BACKEND_OPENCL, "01:00.0"}, /* a second OpenCL platform showing the same GPU */
  };
  loom__placement p[3];
  loom__topology_place(NULL, devs, 3, p);
  ASSERT_EQ(p[0].same_as, -1);
  ASSERT_EQ(p[1].same_as, -1);
  ASSERT_EQ(p[2].same_as, 0);
  for (int i = 0; i < 3; i++) ASSERT_EQ(p[i].numa_os_index, -1);
}

/* ---- the whole table --------------------------------------------------------------------- */

/* Four A100s seen by CUDA and by NVIDIA's OpenCL (in another order), plus PoCL. */
static void two_socket_devices(loom__device_list *raw) {
  const char *bus[] = {"0000:19:00.0", "0000:3b:00.0", "0000:87:00.0", "0000:af:00.0"};
  for (int i = 0; i < 4; i++) fake_cuda(raw, i, bus[i]);
  for (int i = 0; i < 4; i++) fake_ocl(raw, i, bus[3 - i], false);
  fake_ocl(raw, 4, NULL, true);
}

TEST(build_two_sockets_one_gpu_is_one_device) {
  loom__device_list raw = {0};
  two_socket_devices(&raw);
  loom_context ctx;
  ASSERT_OK(fake_context("2s-2numa-4gpu.xml", &raw, NULL, &ctx));
  ASSERT_EQ(raw.count, 0); /* moved into the table */

  const char *ids[] = {"cpu0", "cuda0", "cuda1", "cuda2", "cuda3", "ocl4"};
  const char *aka[] = {"", "ocl3", "ocl2", "ocl1", "ocl0", ""};
  int32_t numa[] = {-1, 0, 0, 1, 1, -1};
  ASSERT_EQ(loom_context_device_count(&ctx), 6);
  for (int32_t i = 0; i < 6; i++) {
    loom_device_info d;
    ASSERT_OK(loom_context_device_info(&ctx, i, &d));
    ASSERT_STREQ(d.id, ids[i]);
    ASSERT_STREQ(d.also_known_as, aka[i]);
    ASSERT_EQ(d.numa_node, numa[i]);
  }
  loom_device_info d;
  ASSERT_OK(loom_context_device_info(&ctx, 1, &d));
  ASSERT_EQ(d.backends, LOOM_BACKEND_CUDA | LOOM_BACKEND_OPENCL);
  ASSERT_EQ(d.memory_bytes, 80 * GiB); /* CUDA's number, never the sum */
  ASSERT_EQ(d.free_bytes, 79 * GiB);
  ASSERT_STREQ(d.free_source, "cuMemGetInfo");
  ASSERT_EQ(d.svm, LOOM_SVM_COARSE_GRAIN_BUFFER); /* what only OpenCL knows */
  ASSERT_STREQ(d.platform, "NVIDIA CUDA");
  ASSERT_STREQ(d.pci_bus_id, "0000:19:00.0");
  ASSERT_EQ(ctx.devices.dev[1].cl_index, 3);
  ASSERT_EQ(ctx.devices.dev[1].cuda_ordinal, 0);

  /* host0, host1, then one node per GPU: 4 GPUs' memory, not 8. */
  ASSERT_EQ(loom_context_memory_node_count(&ctx), 6);
  const char *mem_ids[] = {"host0", "host1", "cuda0", "cuda1", "cuda2", "cuda3"};
  int32_t mem_numa[] = {0, 1, 0, 0, 1, 1};
  int64_t device_memory = 0;
  for (int32_t i = 0; i < 6; i++) {
    loom_memory_node_info m;
    ASSERT_OK(loom_context_memory_node_info(&ctx, i, &m));
    ASSERT_STREQ(m.id, mem_ids[i]);
    ASSERT_EQ(m.numa_os_index, mem_numa[i]);
    if (m.kind == LOOM_MEMORY_DEVICE) {
      device_memory += m.size_bytes;
      ASSERT_EQ(m.device_count, 1);
      ASSERT_EQ(m.devices[0], i - 1);
    }
  }
  ASSERT_EQ(device_memory, 4 * 80 * GiB);
  loom_memory_node_info host0, host1;
  ASSERT_OK(loom_context_memory_node_info(&ctx, 0, &host0));
  ASSERT_OK(loom_context_memory_node_info(&ctx, 1, &host1));
  ASSERT_EQ(host0.size_bytes, 128 * GiB);
  ASSERT_EQ(host0.cores, 4);
  ASSERT_EQ(host0.pus, 8);
  ASSERT_STREQ(host0.cpus, "0-7");
  ASSERT_STREQ(host1.cpus, "8-15");
  ASSERT_EQ(host0.free_bytes, -1); /* a recorded machine: no free memory to read */
  ASSERT_STREQ(host0.free_source, "none");
  /* cpu0 and PoCL share host memory and say so: both on host0, none on host1. */
  ASSERT_EQ(host0.device_count, 2);
  ASSERT_EQ(host0.devices[0], 0);
  ASSERT_EQ(host0.devices[1], 5);
  ASSERT_EQ(host1.device_count, 0);

  loom_host_info h;
  ASSERT_OK(loom_context_host_info(&ctx, &h));
  ASSERT_EQ(h.packages, 2);
  ASSERT_EQ(h.cores, 8);
  ASSERT_EQ(h.pus, 16);
  ASSERT_EQ(h.numa_nodes, 2);
  ASSERT_EQ(h.memory_bytes, 256 * GiB);
  ASSERT_EQ(h.l3_bytes, 110100480);
  ASSERT_STREQ(h.cpu_model, "Intel(R) Xeon(R) Platinum 8468");
  ASSERT_TRUE(h.recorded);

  ASSERT_TRUE(has_note(&ctx, "cuda0 and ocl3 are the same GPU (PCI 0000:19:00.0)"));
  int32_t index;
  ASSERT_OK(loom_context_find_device(&ctx, "ocl3", &index)); /* an alias finds the merged GPU */
  ASSERT_EQ(index, 1);
  ASSERT_OK(loom_context_find_device(&ctx, "CUDA3", &index));
  ASSERT_EQ(index, 4);
  ASSERT_STATUS(loom_context_find_device(&ctx, "ocl9", &index), LOOM_ERR_NOT_FOUND);
  ASSERT_EQ(index, -1);
  ASSERT_CONTAINS(loom_last_error(), "ocl9");
  loom__devices_deinit(&ctx.devices);
}

TEST(build_selection_by_alias_and_class) {
  struct {
    const char *selection;
    int32_t count;
    const char *first, *last;
  } cases[] = {
      {"ocl1", 1, "cuda2", "cuda2"}, /* ocl1 is cuda2's OpenCL side */
      {"gpu", 4, "cuda0", "cuda3"},  {"opencl", 5, "cuda0", "ocl4"},    {"cuda", 4, "cuda0", "cuda3"},
      {"cpu", 1, "cpu0", "cpu0"},    {"cpu0, OCL4", 2, "cpu0", "ocl4"}, {"all", 6, "cpu0", "ocl4"},
  };
  for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++) {
    loom__device_list raw = {0};
    two_socket_devices(&raw);
    loom_context ctx;
    ASSERT_OK(fake_context("2s-2numa-4gpu.xml", &raw, cases[i].selection, &ctx));
    int32_t n = loom_context_device_count(&ctx);
    loom_device_info first, last;
    ASSERT_OK(loom_context_device_info(&ctx, 0, &first));
    ASSERT_OK(loom_context_device_info(&ctx, n - 1, &last));
    bool ok = n == cases[i].count && !strcmp(first.id, cases[i].first) && !strcmp(last.id, cases[i].last);
    if (!ok)
      printf("    selection '%s': %d devices, %s .. %s\n", cases[i].selection, (int)n, first.id, last.id);
    /* Memory nodes: the two host nodes, then one per selected GPU. */
    int32_t gpus = 0;
    for (int32_t k = 0; k < n; k++) gpus += ctx.devices.dev[k].kind == LOOM_DEVICE_GPU;
    ok = ok && loom_context_memory_node_count(&ctx) == 2 + gpus;
    loom__devices_deinit(&ctx.devices);
    ASSERT_TRUE(ok);
  }
}

TEST(build_selection_errors) {
  loom__device_list raw = {0};
  two_socket_devices(&raw);
  loom_context ctx;
  ASSERT_STATUS(fake_context("2s-2numa-4gpu.xml", &raw, "cuda7", &ctx), LOOM_ERR_NOT_FOUND);
  ASSERT_CONTAINS(loom_last_error(), "LOOM_DEVICES='cuda7': no device cuda7");
  ASSERT_CONTAINS(loom_last_error(), "cuda0 (also ocl3)");
  ASSERT_EQ(raw.count, 0);
  loom__devices_deinit(&ctx.devices);
}

TEST(build_workstation_integrated_gpu_shares_host_memory) {
  loom__device_list raw = {0};
  fake_cuda(&raw, 0, "0000:01:00.0");
  fake_ocl(&raw, 0, "0000:00:02.0", true); /* the integrated GPU */
  fake_ocl(&raw, 1, "0000:01:00.0", false);
  loom_context ctx;
  ASSERT_OK(fake_context("1s-1numa-igpu-dgpu.xml", &raw, NULL, &ctx));
  ASSERT_EQ(loom_context_device_count(&ctx), 3);
  loom_device_info cpu, cuda, igpu;
  ASSERT_OK(loom_context_device_info(&ctx, 0, &cpu));
  ASSERT_OK(loom_context_device_info(&ctx, 1, &cuda));
  ASSERT_OK(loom_context_device_info(&ctx, 2, &igpu));
  ASSERT_STREQ(cuda.id, "cuda0");
  ASSERT_STREQ(cuda.also_known_as, "ocl1");
  ASSERT_STREQ(igpu.id, "ocl0");
  ASSERT_TRUE(igpu.host_unified);
  ASSERT_EQ(igpu.numa_node, 0);
  ASSERT_EQ(igpu.memory_node, 0);
  ASSERT_EQ(cpu.numa_node, 0); /* one NUMA node: everything is near it */
  ASSERT_EQ(cuda.memory_node, 1);
  ASSERT_EQ(loom_context_memory_node_count(&ctx), 2);
  loom_memory_node_info host0;
  ASSERT_OK(loom_context_memory_node_info(&ctx, 0, &host0));
  ASSERT_EQ(host0.size_bytes, 32 * GiB);
  ASSERT_EQ(host0.device_count, 2);
  loom__devices_deinit(&ctx.devices);
}

TEST(build_vm_without_gpus) {
  loom__device_list raw = {0};
  fake_ocl(&raw, 0, NULL, true);
  fake_ocl(&raw, 1, NULL, true);
  loom_context ctx;
  ASSERT_OK(fake_context("vm-1numa-nogpu.xml", &raw, NULL, &ctx));
  ASSERT_EQ(loom_context_device_count(&ctx), 3);
  ASSERT_EQ(loom_context_memory_node_count(&ctx), 1);
  for (int32_t i = 0; i < 3; i++) {
    loom_device_info d;
    ASSERT_OK(loom_context_device_info(&ctx, i, &d));
    ASSERT_EQ(d.memory_node, 0);
    ASSERT_EQ(d.numa_node, 0); /* no PCI: tied to the host node */
  }
  loom__devices_deinit(&ctx.devices);
}

TEST(build_a_gpu_missing_from_the_topology_is_noted) {
  loom__device_list raw = {0};
  fake_cuda(&raw, 0, "0000:5e:00.0");
  loom_context ctx;
  ASSERT_OK(fake_context("2s-2numa-4gpu.xml", &raw, NULL, &ctx));
  ASSERT_TRUE(has_note(&ctx, "cuda0: PCI 0000:5e:00.0 is not in the hwloc topology"));
  loom_device_info d;
  ASSERT_OK(loom_context_device_info(&ctx, 1, &d));
  ASSERT_EQ(d.numa_node, -1);
  loom__devices_deinit(&ctx.devices);
}

TEST(build_frees_everything_on_allocation_failure) {
  loom_test_sweep sw;
  SWEEP_ALLOCATIONS(&sw, 0, 1000) {
    loom__device_list raw = {0};
    two_socket_devices(&raw);
    loom_context ctx;
    memset(&ctx, 0, sizeof ctx);
    ASSERT_OK(loom__host_load(&ctx.devices.host, topology_path("2s-2numa-4gpu.xml"), true));
    SWEEP_RUN(&sw, loom__devices_build(&ctx.devices, &raw, NULL));
    loom__device_list_deinit(&raw);
    loom__devices_deinit(&ctx.devices);
  }
}

TEST(host_load_bad_file) {
  loom__host host;
  ASSERT_STATUS(loom__host_load(&host, "/nonexistent/topology.xml", false), LOOM_ERR_UNAVAILABLE);
  ASSERT_CONTAINS(loom_last_error(), "/nonexistent/topology.xml");
}
