/* Programs of the opencl backend: the kernel sources embedded at build time
 * (cmake/embed.cmake: no file is looked up at run time), built per device and per dtype on
 * first use, and kept on disk so a later process loads the device binary instead of compiling.
 *
 * The on-disk cache lives in LOOM_CACHE_DIR, else $XDG_CACHE_HOME/loom, else ~/.cache/loom,
 * under opencl/. A program's file is named by a 128-bit hash of everything that makes the
 * binary: the device's name, its OpenCL and driver versions, the platform, the build options
 * and the source text, so a new driver, device or source gives a new file (stale ones are
 * never read again). Files are written to a temporary name and renamed, so concurrent
 * processes never read half a file; a file that does not load is rebuilt from source. A cache
 * directory that cannot be made is not an error: programs are then built every time.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/opencl/opencl_backend.h"
#include "core/log.h"

/* ---- embedded sources (the generated loom_opencl_sources.c) ------------------------------- */

typedef struct loom__embedded_file {
  const char *name;
  const char *text;
} loom__embedded_file;
extern const loom__embedded_file loom__opencl_sources[];
extern const int loom__opencl_sources_count;

const char *loom__cl_source_text(const char *name) {
  for (int i = 0; i < loom__opencl_sources_count; i++)
    if (strcmp(loom__opencl_sources[i].name, name) == 0) return loom__opencl_sources[i].text;
  return NULL;
}

/* The files of a program, in order. */
static const char *const dtype_files[] = {"gpu_meta.h",   "common.cl", "elementwise.cl", "cast.cl",
                                          "reduce.cl",    "topk.cl",   "dot.cl",         "conv.cl",
                                          "attention.cl", "fft.cl"};
static const char *const layout_files[] = {"gpu_meta.h", "common.cl", "layout.cl", "quant.cl"};

/* ---- the cache key -------------------------------------------------------------------------- */

typedef struct hash128 {
  uint64_t a, b;
} hash128;

/* Two independent 64-bit FNV-1a streams (different offsets and a rotated second one): enough
 * to tell programs apart, not a defence against anyone. */
static void hash_bytes(hash128 *h, const void *data, size_t n) {
  const unsigned char *p = data;
  for (size_t i = 0; i < n; i++) {
    h->a = (h->a ^ p[i]) * 0x100000001b3ull;
    h->b = (h->b ^ (uint64_t)(p[i] + 0x9e)) * 0x100000001b3ull;
    h->b = (h->b << 7) | (h->b >> 57);
  }
}

static void hash_string(hash128 *h, const char *s) {
  hash_bytes(h, s, strlen(s) + 1);
}

/* ---- the cache directory -------------------------------------------------------------------- */

/* The file for key h in buf, or false when there is no usable cache directory. */
static bool cache_path(hash128 h, char *buf, size_t size) {
  const char *dir = getenv("LOOM_CACHE_DIR");
  const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  char base[768];
  if (dir && *dir)
    snprintf(base, sizeof base, "%s/opencl", dir);
  else if (xdg && *xdg)
    snprintf(base, sizeof base, "%s/loom/opencl", xdg);
  else if (home && *home)
    snprintf(base, sizeof base, "%s/.cache/loom/opencl", home);
  else
    return false;
  if (!loom__make_dirs(base)) return false;
  int n =
      snprintf(buf, size, "%s/%016llx%016llx.bin", base, (unsigned long long)h.a, (unsigned long long)h.b);
  return n > 0 && (size_t)n < size;
}

static const char cache_magic[8] = {'L', 'O', 'O', 'M', 'C', 'L', '1', '\n'};

/* The binary stored at path (caller frees), or NULL. */
static unsigned char *cache_read(const char *path, size_t *out_size) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char magic[8];
  uint64_t size = 0;
  unsigned char *bin = NULL;
  if (fread(magic, 1, 8, f) == 8 && memcmp(magic, cache_magic, 8) == 0 &&
      fread(&size, sizeof size, 1, f) == 1 && size > 0 && size < ((uint64_t)1 << 31) &&
      (bin = loom__malloc((size_t)size)) && fread(bin, 1, (size_t)size, f) == size) {
    *out_size = (size_t)size;
  } else {
    loom__free(bin);
    bin = NULL;
  }
  fclose(f);
  return bin;
}

/* Through a fresh temporary name (loom__file_create_temp: pid and a counter), so that two
 * threads of one process building the same program for two devices of one kind (PoCL's
 * "basic basic", the shared runner) never write into one temporary file. */
static void cache_write(const char *path, const unsigned char *bin, size_t size) {
  int fd = -1;
  char *tmp = NULL;
  if (loom__file_create_temp(path, &fd, &tmp) != LOOM_OK) return;
  uint64_t n = size;
  bool ok = loom__file_write_all(fd, cache_magic, 8) && loom__file_write_all(fd, &n, sizeof n) &&
            loom__file_write_all(fd, bin, size);
  ok = close(fd) == 0 && ok;
  if (ok)
    loom__file_commit(tmp, path);
  else
    unlink(tmp);
  loom__free(tmp);
}

/* ---- building ------------------------------------------------------------------------------ */

/* The compiler's messages for d's build of prog, cut to `size` bytes ("" when there are none). */
static void build_log(loom__cl_device *d, cl_program prog, char *log, size_t size) {
  size_t n = 0;
  log[0] = '\0';
  if (prog && clGetProgramBuildInfo(prog, d->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &n) == CL_SUCCESS &&
      n > 0) {
    char *full = loom__malloc(n + 1);
    if (full && clGetProgramBuildInfo(prog, d->device, CL_PROGRAM_BUILD_LOG, n, full, NULL) == CL_SUCCESS) {
      full[n] = '\0';
      snprintf(log, size, "%s", full);
    }
    loom__free(full);
  }
  size_t len = strlen(log); /* drivers end the log with blank lines */
  while (len > 0 && (log[len - 1] == '\n' || log[len - 1] == ' ' || log[len - 1] == '\r')) log[--len] = '\0';
}

static loom_status build_failed(loom__cl_device *d, cl_program prog, const char *label, cl_int err) {
  char log[700];
  build_log(d, prog, log, sizeof log);
  const char *name = loom__cl_error_name(err);
  return loom__error(LOOM_ERR_INTERNAL,
                     "%s (%s): building the OpenCL program %s failed (%s, %d); build log:\n%s", d->id,
                     d->name, label, name ? name : "unknown error", (int)err, log[0] ? log : "(empty)");
}

static cl_program from_binary(loom__cl_device *d, const unsigned char *bin, size_t size,
                              const char *options) {
  cl_int err = CL_SUCCESS, status = CL_SUCCESS;
  cl_program prog = clCreateProgramWithBinary(d->context, 1, &d->device, &size, &bin, &status, &err);
  if (err != CL_SUCCESS || status != CL_SUCCESS) {
    if (prog) clReleaseProgram(prog);
    return NULL;
  }
  if (clBuildProgram(prog, 1, &d->device, options, NULL, NULL) != CL_SUCCESS) {
    clReleaseProgram(prog);
    return NULL;
  }
  return prog;
}

/* Stores the program's binary for d's device. A program made from source belongs to every
 * device of its context (the devices of one platform share a context) and is built for d's
 * only. The spec gives one binary size per device of the program, in CL_PROGRAM_DEVICES
 * order; PoCL 3 gives one entry only, that of the device it was built for, whatever its
 * place. Anything else is not cached. */
static void store_binary(loom__cl_device *d, cl_program prog, const char *path) {
  enum { MAX_DEVICES = 64 };
  cl_uint n = 0;
  size_t sizes_ret = 0;
  if (clGetProgramInfo(prog, CL_PROGRAM_NUM_DEVICES, sizeof n, &n, NULL) != CL_SUCCESS || n == 0 ||
      n > MAX_DEVICES || clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, 0, NULL, &sizes_ret) != CL_SUCCESS)
    return;
  cl_uint entries = (cl_uint)(sizes_ret / sizeof(size_t)), k = 0;
  cl_device_id devices[MAX_DEVICES];
  size_t sizes[MAX_DEVICES] = {0};
  unsigned char *bins[MAX_DEVICES] = {NULL};
  if (entries == n) {
    if (clGetProgramInfo(prog, CL_PROGRAM_DEVICES, sizeof(cl_device_id) * n, devices, NULL) != CL_SUCCESS)
      return;
    while (k < n && devices[k] != d->device) k++;
  } else if (entries != 1) {
    return;
  }
  if (k >= entries ||
      clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof(size_t) * entries, sizes, NULL) != CL_SUCCESS ||
      sizes[k] == 0)
    return;
  bins[k] = loom__malloc(sizes[k]);
  if (bins[k] && clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof(unsigned char *) * entries, bins, NULL) ==
                     CL_SUCCESS)
    cache_write(path, bins[k], sizes[k]);
  loom__free(bins[k]);
}

loom_status loom__cl_program_build(loom__cl_device *d, const char *label, const char *const *parts,
                                   int32_t n_parts, const char *options, cl_program *out) {
  *out = NULL;
  hash128 h = {0xcbf29ce484222325ull, 0x84222325cbf29ce4ull};
  hash_string(&h, d->cache_key);
  hash_string(&h, options);
  for (int32_t i = 0; i < n_parts; i++) hash_string(&h, parts[i]);
  char path[1024];
  bool cached = cache_path(h, path, sizeof path);
  if (cached) {
    size_t size = 0;
    unsigned char *bin = cache_read(path, &size);
    if (bin) {
      *out = from_binary(d, bin, size, options);
      loom__free(bin);
      if (*out) {
        loom__log(LOOM_LOG_DEBUG, "%s: the OpenCL program %s from the cache %s", d->id, label, path);
        return LOOM_OK;
      }
      unlink(path); /* stale or damaged: rebuilt below */
      loom__log(LOOM_LOG_DEBUG, "%s: the cached OpenCL program %s (%s) did not load: rebuilt", d->id, label,
                path);
    }
  }
  cl_int err = CL_SUCCESS;
  cl_program prog = clCreateProgramWithSource(d->context, (cl_uint)n_parts, (const char **)parts, NULL, &err);
  if (err != CL_SUCCESS) {
    loom_status s = loom__cl_status(err, "clCreateProgramWithSource");
    loom__error_prefix("%s: %s: ", d->id, label);
    return s;
  }
  double t0 = loom__now();
  err = clBuildProgram(prog, 1, &d->device, options, NULL, NULL);
  if (err != CL_SUCCESS) {
    loom_status s = build_failed(d, prog, label, err);
    clReleaseProgram(prog);
    return s;
  }
  /* A build that succeeded with warnings: the compiler's words are for whoever debugs Loom's
   * kernels, not for the user's terminal (LOOM_LOG=info shows them). */
  if (loom__log_enabled(LOOM_LOG_INFO)) {
    char log[2048];
    build_log(d, prog, log, sizeof log);
    if (log[0])
      loom__log(LOOM_LOG_INFO, "%s (%s): the OpenCL program %s built with messages: %s", d->id, d->name,
                label, log);
  }
  loom__log(LOOM_LOG_DEBUG, "%s: the OpenCL program %s built in %.3f s (%s)", d->id, label, loom__now() - t0,
            cached ? "then cached" : "no cache folder");
  if (cached) store_binary(d, prog, path);
  *out = prog;
  return LOOM_OK;
}

static loom_status build_program(loom__cl_device *d, int32_t index) {
  const char *texts[16];
  const char *const *files = index == LOOM__CL_PROG_LAYOUT ? layout_files : dtype_files;
  int32_t n = index == LOOM__CL_PROG_LAYOUT ? LOOM_ARRAY_SIZE(layout_files) : LOOM_ARRAY_SIZE(dtype_files);
  for (int32_t i = 0; i < n; i++)
    if (!(texts[i] = loom__cl_source_text(files[i])))
      return loom__error(LOOM_ERR_INTERNAL, "opencl: the kernel source %s is not embedded in this build",
                         files[i]);
  char options[128], label[64];
  int dt = index == LOOM__CL_PROG_LAYOUT ? -1 : (int)index;
  snprintf(options, sizeof options, "-cl-std=CL1.2 -DLOOM_DT=%d -DLOOM_FP64=%d", dt, d->fp64 ? 1 : 0);
  if (dt < 0)
    snprintf(label, sizeof label, "layout.cl");
  else
    snprintf(label, sizeof label, "for %s", loom_dtype_name((loom_dtype)dt));
  return loom__cl_program_build(d, label, texts, n, options, &d->programs[index].program);
}

loom_status loom__cl_kernel_get(loom__cl_device *d, int32_t prog, const char *name, loom__cl_kernel **out) {
  *out = NULL;
  loom__cl_program *p = &d->programs[prog];
  for (int32_t i = 0; i < p->n_kernels; i++)
    if (strcmp(p->kernels[i].name, name) == 0) {
      *out = &p->kernels[i];
      return LOOM_OK;
    }
  if (!p->program) {
    loom_status s = build_program(d, prog);
    if (s) return s;
  }
  cl_int err = CL_SUCCESS;
  cl_kernel k = clCreateKernel(p->program, name, &err);
  if (err == CL_INVALID_KERNEL_NAME) return LOOM_ERR_UNSUPPORTED;
  if (err != CL_SUCCESS) {
    loom_status s = loom__cl_status(err, "clCreateKernel");
    loom__error_prefix("%s: kernel %s: ", d->id, name);
    return s;
  }
  if (p->n_kernels == p->cap_kernels) {
    loom_status s = loom__grow((void **)&p->kernels, &p->cap_kernels, p->n_kernels + 1, sizeof *p->kernels);
    if (s) {
      clReleaseKernel(k);
      return s;
    }
  }
  loom__cl_kernel *e = &p->kernels[p->n_kernels++];
  memset(e, 0, sizeof *e);
  snprintf(e->name, sizeof e->name, "%s", name);
  e->kernel = k;
  size_t wg = 0;
  clGetKernelWorkGroupInfo(k, d->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof wg, &wg, NULL);
  e->max_wg = wg ? wg : d->max_wg;
  *out = e;
  return LOOM_OK;
}

void loom__cl_programs_release(loom__cl_device *d) {
  for (int32_t i = 0; i < LOOM__CL_PROG_COUNT; i++) {
    loom__cl_program *p = &d->programs[i];
    for (int32_t k = 0; k < p->n_kernels; k++) clReleaseKernel(p->kernels[k].kernel);
    loom__free(p->kernels);
    if (p->program) clReleaseProgram(p->program);
    memset(p, 0, sizeof *p);
  }
}
