/* Fused ops on OpenCL devices (docs/ir-fusion.md): the body's kernel from the shared generator
 * (backends/gpu/fused_codegen.h), built through the program cache (opencl_program.c, keyed by
 * the source text, so a later process loads the binary) and kept per device in memory, keyed
 * by the same text; enqueued on the device's queue like every other kernel. */
#include <stdio.h>
#include <string.h>

#include "backends/gpu/fused_codegen.h"
#include "backends/opencl/opencl_attention.h"
#include "backends/opencl/opencl_backend.h"

/* Work-groups per launch at most (the kernels loop over the rest), as opencl_kernels.c. */
#define FUSED_MAX_GROUPS 8192
/* A reduction over at least this many elements per output takes a work-group per output on
 * a GPU; below it, and on CPU devices (where a work-item walking its output's elements in
 * order is what the compiler vectorizes), a work-item per output. */
#define FUSED_GROUP_MIN_REDUCED 256
#define FUSED_GROUP 128

typedef struct fused_entry {
  char *source;
  cl_program program;
  cl_kernel kernel;
  size_t max_wg;
} fused_entry;

struct loom__cl_fused_cache {
  fused_entry *entries;
  int32_t n, cap;
};

static int32_t testing_layout; /* 0 by size and device, 1 group, 2 item, 3 vector */

void loom__cl_fused_testing_layout(int32_t layout) {
  testing_layout = layout;
}

void loom__cl_fused_release(loom__cl_device *d) {
  struct loom__cl_fused_cache *c = d->fused;
  if (!c) return;
  for (int32_t i = 0; i < c->n; i++) {
    clReleaseKernel(c->entries[i].kernel);
    clReleaseProgram(c->entries[i].program);
    loom__free(c->entries[i].source);
  }
  loom__free(c->entries);
  loom__free(c);
  d->fused = NULL;
}

/* The kernel of `source`, built (or loaded from the disk cache) on first use. */
static loom_status fused_kernel(loom__cl_device *d, const loom_graph *body, const char *source,
                                fused_entry **out) {
  if (!d->fused && !(d->fused = loom__calloc(1, sizeof *d->fused)))
    return loom__oom("the fused kernel cache");
  struct loom__cl_fused_cache *c = d->fused;
  for (int32_t i = 0; i < c->n; i++)
    if (strcmp(c->entries[i].source, source) == 0) {
      *out = &c->entries[i];
      return LOOM_OK;
    }
  if (c->n == c->cap) {
    loom_status s = loom__grow((void **)&c->entries, &c->cap, c->n + 1, sizeof *c->entries);
    if (s) return s;
  }
  char label[160];
  snprintf(label, sizeof label, "of the fused op (body %s, %d ops)", loom_graph_name(body), (int)body->n_ops);
  fused_entry e = {0};
  const char *parts[] = {source};
  loom_status s = loom__cl_program_build(d, label, parts, 1, "-cl-std=CL1.2", &e.program);
  if (s) return s;
  cl_int err = CL_SUCCESS;
  e.kernel = clCreateKernel(e.program, "loom_fused", &err);
  if (err != CL_SUCCESS) {
    clReleaseProgram(e.program);
    s = loom__cl_status(err, "clCreateKernel");
    loom__error_prefix("%s: the fused op's kernel: ", d->id);
    return s;
  }
  size_t wg = 0;
  clGetKernelWorkGroupInfo(e.kernel, d->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof wg, &wg, NULL);
  e.max_wg = wg ? wg : d->max_wg;
  if (!(e.source = loom__strdup(source))) {
    clReleaseKernel(e.kernel);
    clReleaseProgram(e.program);
    return loom__oom("the fused kernel cache");
  }
  c->entries[c->n] = e;
  *out = &c->entries[c->n++];
  return LOOM_OK;
}

/* The group size the kernel is generated for: a power of 2 the device allows, or 1. */
static int32_t group_for(const loom__cl_device *d, int64_t n_reduced) {
  bool group =
      testing_layout == 1 || (testing_layout == 0 && !d->is_cpu && n_reduced >= FUSED_GROUP_MIN_REDUCED);
  if (!group) return 1;
  int32_t g = FUSED_GROUP;
  while (g > 2 && (size_t)g > d->max_wg) g /= 2;
  return g;
}

loom_status loom__cl_fused(loom__cl_device *d, const loom_graph *body, const loom__dview *in,
                           const loom__dview *out, void *scratch, int64_t scratch_bytes) {
  (void)scratch; /* intermediates live in registers and local memory: no scratch */
  (void)scratch_bytes;
  int32_t group = group_for(d, loom__fz_reduced_count(body));
  /* CPU devices: rounds a driver vectorizes across work-items, or explicit vectors. */
  uint32_t flags = (d->is_cpu ? LOOM__FZ_LOCKSTEP : 0) |
                   ((testing_layout == 0 && d->is_cpu) || testing_layout == 3 ? LOOM__FZ_VECTOR : 0);
  for (;;) {
    loom__fz_kernel gk;
    loom_status s = loom__fz_generate(body, in, LOOM__FZ_OPENCL, d->fp64, group, flags, &gk);
    if (s) {
      loom__error_prefix("%s (%s): ", d->id, d->name);
      return s;
    }
    if (gk.n_units == 0) {
      loom__fz_kernel_free(&gk);
      return LOOM_OK;
    }
    fused_entry *e = NULL;
    s = fused_kernel(d, body, gk.source, &e);
    if (!s && gk.shape == LOOM__FZ_GROUP && (size_t)gk.group > e->max_wg) {
      /* The compiled kernel takes fewer work-items than asked: generated again for what it takes. */
      loom__fz_kernel_free(&gk);
      while (group > 2 && (size_t)group > e->max_wg) group /= 2;
      if (group <= 2) group = 1;
      continue;
    }
    if (s) {
      loom__fz_kernel_free(&gk);
      return s;
    }
    cl_uint arg = 0;
    cl_int err = CL_SUCCESS;
    for (int32_t p = 0; p < gk.n_params && err == CL_SUCCESS; p++) {
      cl_mem m = (cl_mem)in[p].buffer;
      cl_long off = in[p].offset;
      err = clSetKernelArg(e->kernel, arg++, sizeof m, &m);
      if (err == CL_SUCCESS) err = clSetKernelArg(e->kernel, arg++, sizeof off, &off);
    }
    for (int32_t r = 0; r < gk.n_results && err == CL_SUCCESS; r++) {
      cl_mem m = (cl_mem)out[r].buffer;
      cl_long off = out[r].offset;
      err = clSetKernelArg(e->kernel, arg++, sizeof m, &m);
      if (err == CL_SUCCESS) err = clSetKernelArg(e->kernel, arg++, sizeof off, &off);
    }
    if (err != CL_SUCCESS) {
      loom__fz_kernel_free(&gk);
      s = loom__cl_status(err, "clSetKernelArg");
      loom__error_prefix("%s: the fused op's kernel, argument %u: ", d->id, (unsigned)(arg - 1));
      return s;
    }
    size_t local;
    int64_t groups;
    if (gk.shape == LOOM__FZ_GROUP) {
      local = (size_t)gk.group;
      groups = gk.n_units;
    } else {
      local = d->is_cpu ? 1 : 64;
      while (local > 1 && local > e->max_wg) local /= 2;
      groups = (gk.n_units + (int64_t)local - 1) / (int64_t)local;
    }
    size_t global = (size_t)LOOM_MIN(groups, FUSED_MAX_GROUPS) * local;
    loom__fz_kernel_free(&gk);
    s = loom__cl_status(clEnqueueNDRangeKernel(d->queue, e->kernel, 1, NULL, &global, &local, 0, NULL, NULL),
                        "clEnqueueNDRangeKernel");
    if (s) loom__error_prefix("%s: the fused op's kernel: ", d->id);
    return s;
  }
}

/* The fused family's launcher (loom__dispatch holds the device's lock, as loom__cl_fused needs). */
loom_status loom__cl_fused_op(void *dev, const loom__op_call *c) {
  loom__attention att;
  if (loom__attention_body(c->op->fused, &att)) return loom__cl_attention(dev, &att, c->in, c->out);
  return loom__cl_fused(dev, c->op->fused, c->in, c->out, c->scratch, c->scratch_bytes);
}
