/* Fused ops on CUDA devices (docs/ir-fusion.md): the body's kernel from the shared generator
 * (backends/gpu/fused_codegen.h), compiled at run time to PTX by NVRTC for the device's
 * architecture, loaded with the runtime's library API (cudaLibraryLoadData: the driver JITs the
 * PTX) and kept per device, keyed by the source text; launched on the device's stream.
 *
 * NVRTC is opened with dlopen on first use, like cuBLAS and cuFFT (cuda_libs.c): the soname of
 * the toolkit this build was compiled against (libnvrtc.so.13 with CUDA 13), from the loader's
 * path or the toolkit's library folder. Where it is missing, the fused op is UNSUPPORTED (the
 * runtime runs the body unfused) and discovery notes "fused kernels: no (no NVRTC ...)". */
#include <dlfcn.h>
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda_backend.h"
#include "backends/gpu/fused_codegen.h"
#include "ir/attention.h"

/* ---- NVRTC, loaded at run time ------------------------------------------------------------- */

typedef struct nvrtc_api {
  __typeof__(nvrtcGetErrorString) *error_string;
  __typeof__(nvrtcGetNumSupportedArchs) *num_archs;
  __typeof__(nvrtcGetSupportedArchs) *archs;
  __typeof__(nvrtcCreateProgram) *create;
  __typeof__(nvrtcDestroyProgram) *destroy;
  __typeof__(nvrtcCompileProgram) *compile;
  __typeof__(nvrtcGetPTXSize) *ptx_size;
  __typeof__(nvrtcGetPTX) *ptx;
  __typeof__(nvrtcGetProgramLogSize) *log_size;
  __typeof__(nvrtcGetProgramLog) *log;
} nvrtc_api;

static pthread_once_t nvrtc_once = PTHREAD_ONCE_INIT;
static nvrtc_api nv;
static bool have_nvrtc;
static char nvrtc_why[256];

static void load_nvrtc(void) {
  char soname[64];
  snprintf(soname, sizeof soname, "libnvrtc.so.%d", CUDART_VERSION / 1000);
  void *lib = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
#ifdef LOOM_CUDA_LIBDIR
  if (!lib) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", LOOM_CUDA_LIBDIR, soname);
    lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  }
#endif
  if (!lib) {
    snprintf(nvrtc_why, sizeof nvrtc_why, "%s not found", soname);
    return;
  }
  struct {
    const char *name;
    void **slot;
  } syms[] = {
      {"nvrtcGetErrorString", (void **)&nv.error_string},
      {"nvrtcGetNumSupportedArchs", (void **)&nv.num_archs},
      {"nvrtcGetSupportedArchs", (void **)&nv.archs},
      {"nvrtcCreateProgram", (void **)&nv.create},
      {"nvrtcDestroyProgram", (void **)&nv.destroy},
      {"nvrtcCompileProgram", (void **)&nv.compile},
      {"nvrtcGetPTXSize", (void **)&nv.ptx_size},
      {"nvrtcGetPTX", (void **)&nv.ptx},
      {"nvrtcGetProgramLogSize", (void **)&nv.log_size},
      {"nvrtcGetProgramLog", (void **)&nv.log},
  };
  for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++)
    if (!(*syms[i].slot = dlsym(lib, syms[i].name))) {
      snprintf(nvrtc_why, sizeof nvrtc_why, "%s lacks %s", soname, syms[i].name);
      return;
    }
  have_nvrtc = true;
}

bool loom__cu_have_nvrtc(void) {
  pthread_once(&nvrtc_once, load_nvrtc);
  return have_nvrtc;
}

const char *loom__cu_nvrtc_why(void) {
  pthread_once(&nvrtc_once, load_nvrtc);
  return nvrtc_why;
}

/* The newest virtual architecture NVRTC supports at or below compute capability cc (e.g. 90). */
static int arch_for(int cc) {
  int n = 0, best = 0;
  if (nv.num_archs(&n) != NVRTC_SUCCESS || n <= 0 || n > 256) return cc;
  int archs[256];
  if (nv.archs(archs) != NVRTC_SUCCESS) return cc;
  for (int i = 0; i < n; i++)
    if (archs[i] <= cc && archs[i] > best) best = archs[i];
  return best ? best : archs[0];
}

loom_status loom__cu_fused_compile(const char *source, int cc, const char *label, char **out_ptx) {
  *out_ptx = NULL;
  if (!loom__cu_have_nvrtc())
    return loom__error(LOOM_ERR_UNSUPPORTED, "%s: no NVRTC (%s): fused kernels need it", label, nvrtc_why);
  nvrtcProgram prog = NULL;
  nvrtcResult r = nv.create(&prog, source, "loom_fused.cu", 0, NULL, NULL);
  if (r != NVRTC_SUCCESS)
    return loom__error(r == NVRTC_ERROR_OUT_OF_MEMORY ? LOOM_ERR_OUT_OF_MEMORY : LOOM_ERR_INTERNAL,
                       "%s: nvrtcCreateProgram failed: %s", label, nv.error_string(r));
  char arch[48];
  snprintf(arch, sizeof arch, "--gpu-architecture=compute_%d", arch_for(cc));
  const char *options[] = {arch, "--std=c++17"};
  r = nv.compile(prog, 2, options);
  loom_status s = LOOM_OK;
  if (r != NVRTC_SUCCESS) {
    size_t size = 0;
    char log[1200] = "";
    if (nv.log_size(prog, &size) == NVRTC_SUCCESS && size > 1) {
      char *full = loom__malloc(size);
      if (full && nv.log(prog, full) == NVRTC_SUCCESS) snprintf(log, sizeof log, "%s", full);
      loom__free(full);
    }
    s = loom__error(LOOM_ERR_INTERNAL, "%s: compiling with NVRTC (%s) failed: %s; log:\n%s", label, arch,
                    nv.error_string(r), log[0] ? log : "(empty)");
  } else {
    size_t size = 0;
    char *ptx = NULL;
    if (nv.ptx_size(prog, &size) != NVRTC_SUCCESS || size == 0 || !(ptx = loom__malloc(size)) ||
        nv.ptx(prog, ptx) != NVRTC_SUCCESS) {
      loom__free(ptx);
      s = loom__error(LOOM_ERR_INTERNAL, "%s: NVRTC gave no PTX", label);
    } else {
      *out_ptx = ptx;
    }
  }
  nv.destroy(&prog);
  return s;
}

/* ---- the per-device cache ------------------------------------------------------------------- */

typedef struct cu_fused_entry {
  char *source;
  cudaLibrary_t library;
  cudaKernel_t kernel;
} cu_fused_entry;

struct loom__cu_fused_cache {
  cu_fused_entry *entries;
  int32_t n, cap;
};

void loom__cu_fused_release(loom__cu_device *d) {
  struct loom__cu_fused_cache *c = d->fused;
  if (!c) return;
  for (int32_t i = 0; i < c->n; i++) {
    cudaLibraryUnload(c->entries[i].library);
    loom__free(c->entries[i].source);
  }
  loom__free(c->entries);
  loom__free(c);
  d->fused = NULL;
}

static loom_status fused_kernel(loom__cu_device *d, const loom_graph *body, const char *source,
                                cudaKernel_t *out) {
  if (!d->fused && !(d->fused = loom__calloc(1, sizeof *d->fused)))
    return loom__oom("the fused kernel cache");
  struct loom__cu_fused_cache *c = d->fused;
  for (int32_t i = 0; i < c->n; i++)
    if (strcmp(c->entries[i].source, source) == 0) {
      *out = c->entries[i].kernel;
      return LOOM_OK;
    }
  if (c->n == c->cap) {
    loom_status s = loom__grow((void **)&c->entries, &c->cap, c->n + 1, sizeof *c->entries);
    if (s) return s;
  }
  int major = 0, minor = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, d->ordinal);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, d->ordinal);
  char label[160];
  snprintf(label, sizeof label, "%s (%s): the fused op (body %s, %d ops)", d->id, d->name,
           loom_graph_name(body), (int)body->n_ops);
  char *ptx = NULL;
  loom_status s = loom__cu_fused_compile(source, major * 10 + minor, label, &ptx);
  if (s) return s;
  cu_fused_entry e = {0};
  s = loom__cu_check(d, cudaLibraryLoadData(&e.library, ptx, NULL, NULL, 0, NULL, NULL, 0),
                     "cudaLibraryLoadData (the fused op's PTX)");
  loom__free(ptx);
  if (s) return s;
  s = loom__cu_check(d, cudaLibraryGetKernel(&e.kernel, e.library, "loom_fused"), "cudaLibraryGetKernel");
  if (!s && !(e.source = loom__strdup(source))) s = loom__oom("the fused kernel cache");
  if (s) {
    cudaLibraryUnload(e.library);
    return s;
  }
  c->entries[c->n++] = e;
  *out = e.kernel;
  return LOOM_OK;
}

/* ---- running ------------------------------------------------------------------------------- */

/* Reductions over at least this many elements per output take a block per output, unless
 * there are enough outputs for a thread each to fill the GPU (FUSED_ITEMS_PER_SM per
 * multiprocessor): then the threads of a warp step through the reduced axis together, each
 * operand element they read alike (y_j, b_j of a kernel product) one broadcast load served by
 * the L1 cache, where a block per output reads all of them from L2 once per output (the
 * H200 ran 1e6 x 1e6 pairs at 13% of its peak that way, bound by L2). LOOM_CUDA_FUSED_LAYOUT
 * = group | item forces one (for comparison). */
#define FUSED_GROUP_MIN_REDUCED 256
#define FUSED_ITEMS_PER_SM 1024
#define FUSED_BLOCK 128

/* LOOM_CUDA_FUSED_LAYOUT, read once: 0 none, 1 group, 2 item. */
static int forced_layout(void) {
  static _Atomic int forced = -1;
  int f = forced;
  if (f < 0) {
    const char *env = getenv("LOOM_CUDA_FUSED_LAYOUT");
    f = env && strcmp(env, "group") == 0 ? 1 : env && strcmp(env, "item") == 0 ? 2 : 0;
    forced = f;
  }
  return f;
}

static int32_t group_for(const loom__cu_device *d, const loom_graph *body) {
  int forced = forced_layout();
  if (forced) return forced == 1 ? FUSED_BLOCK : 1;
  int64_t n_red = loom__fz_reduced_count(body), n_out = 1;
  const loom_type *t = &body->values[body->outputs[0]].type;
  for (int32_t i = 0; i < t->rank; i++) n_out *= t->dims[i];
  bool many = n_out >= (int64_t)(d->sm_count > 0 ? d->sm_count : 1) * FUSED_ITEMS_PER_SM;
  return n_red >= FUSED_GROUP_MIN_REDUCED && !many ? FUSED_BLOCK : 1;
}

loom_status loom__cu_fused(loom__cu_device *d, const loom_graph *body, const loom__dview *in,
                           const loom__dview *out, void *scratch, int64_t scratch_bytes) {
  (void)scratch; /* intermediates live in registers and shared memory: no scratch */
  (void)scratch_bytes;
  if (!loom__cu_have_nvrtc())
    return loom__error(LOOM_ERR_UNSUPPORTED, "%s (%s): fused: no NVRTC (%s)", d->id, d->name, nvrtc_why);
  loom_status s = loom__cu_enter(d);
  if (s) return s;
  int32_t group = group_for(d, body);
  loom__fz_kernel gk;
  if ((s = loom__fz_generate(body, in, LOOM__FZ_CUDA, true, group, 0, &gk))) {
    loom__error_prefix("%s (%s): ", d->id, d->name);
    return s;
  }
  if (gk.n_units == 0) {
    loom__fz_kernel_free(&gk);
    return LOOM_OK;
  }
  cudaKernel_t kernel = NULL;
  s = fused_kernel(d, body, gk.source, &kernel);
  int32_t n_args = 2 * (gk.n_params + gk.n_results);
  void **argv = loom__calloc((size_t)n_args + 1, sizeof *argv);
  const void **ptrs = loom__calloc((size_t)n_args / 2 + 1, sizeof *ptrs);
  long long *offs = loom__calloc((size_t)n_args / 2 + 1, sizeof *offs);
  if (!s && (!argv || !ptrs || !offs)) s = loom__oom("a fused kernel's arguments");
  if (!s) {
    for (int32_t k = 0; k < gk.n_params + gk.n_results; k++) {
      const loom__dview *v = k < gk.n_params ? &in[k] : &out[k - gk.n_params];
      ptrs[k] = v->buffer;
      offs[k] = v->offset;
      argv[2 * k] = (void *)&ptrs[k];
      argv[2 * k + 1] = &offs[k];
    }
    int64_t per_block = gk.shape == LOOM__FZ_GROUP ? 1 : FUSED_BLOCK;
    int64_t blocks = (gk.n_units + per_block - 1) / per_block;
    int64_t cap = (int64_t)(d->sm_count > 0 ? d->sm_count : 1) * 64;
    dim3 grid = {(unsigned)LOOM_MIN(blocks, cap), 1, 1};
    dim3 block = {(unsigned)(gk.shape == LOOM__FZ_GROUP ? gk.group : FUSED_BLOCK), 1, 1};
    s = loom__cu_check(d, cudaLaunchKernel((const void *)kernel, grid, block, argv, 0, d->stream),
                       "the fused op's kernel launch");
  }
  loom__free(argv);
  loom__free(ptrs);
  loom__free(offs);
  loom__fz_kernel_free(&gk);
  return s;
}

/* The fused family's launcher (loom__dispatch holds the device's lock, as loom__cu_fused needs). */
loom_status loom__cu_fused_op(void *dev, const loom__op_call *c) {
  /* No CUDA kernel for attention bodies yet (ir/attention.h; cpu_attention.c and
   * kernels/opencl/attention.cl have theirs: this one waits for a GPU to prove it). Until then the executor
   * runs the body op by op, and loom__attention_runs_everywhere keeps the rewrite from making one under a
   * limit. */
  if (loom__attention_body(c->op->fused, NULL))
    return loom__error(LOOM_ERR_UNSUPPORTED, "%s: fused attention has no CUDA kernel yet",
                       ((loom__cu_device *)dev)->id);
  return loom__cu_fused(dev, c->op->fused, c->in, c->out, c->scratch, c->scratch_bytes);
}
