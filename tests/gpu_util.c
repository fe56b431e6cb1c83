/* Helpers of the GPU tests (gpu_util.h). */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>

#include "gpu_util.h"
#include "runtime/context.h"

const loom_dtype gt_all_dtypes[GT_N_DTYPES] = {LOOM_BOOL, LOOM_I8,   LOOM_U8,  LOOM_I16, LOOM_I32, LOOM_I64,
                                               LOOM_F16,  LOOM_BF16, LOOM_F32, LOOM_F64, LOOM_C64, LOOM_C128};

static loom_context *ctx;

/* The devices of one kind, opened on first use. */
typedef struct gpu_kind {
  uint32_t backend;
  const char *none; /* the skip reason when the machine has none */
  const loom__exec_device *devices[GT_MAX_DEVICES];
  int32_t n_devices; /* -1 before the first look */
  char no_device[512];
} gpu_kind;

static gpu_kind kinds[] = {
    {LOOM_BACKEND_OPENCL,
     "no OpenCL device found (install an OpenCL driver, or PoCL: POCL_DEVICES=\"pthread pthread\")",
     {0},
     -1,
     ""},
    {LOOM_BACKEND_CUDA, "no usable CUDA device", {0}, -1, ""},
};

static gpu_kind *kind_of(uint32_t backend) {
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    if (kinds[i].backend == backend) return &kinds[i];
  fprintf(stderr, "gpu_util: no device kind %u\n", (unsigned)backend);
  exit(1);
}

static void release_context(void) {
  loom_context_destroy(ctx);
  ctx = NULL;
}

loom_context *gt_context(void) {
  if (!ctx) {
    if (loom_context_create(NULL, &ctx)) {
      fprintf(stderr, "cannot create a context: %s\n", loom_last_error());
      exit(1);
    }
    atexit(release_context);
  }
  return ctx;
}

/* Why there is no device of the kind: its sentence and, for CUDA, the context's notes about
 * CUDA, joined. */
static void why_none(gpu_kind *k, loom_context *c) {
  size_t used = (size_t)snprintf(k->no_device, sizeof k->no_device, "%s", k->none);
  for (int32_t i = 0;
       k->backend == LOOM_BACKEND_CUDA && i < loom_context_note_count(c) && used < sizeof k->no_device; i++) {
    const char *note = loom_context_note(c, i);
    if (note && strncmp(note, "cuda", 4) == 0 && !strstr(note, "compute backend built"))
      used += (size_t)snprintf(k->no_device + used, sizeof k->no_device - used, "; %s", note);
  }
}

/* Opens device d of kind k for running, as k->devices[k->n_devices]. False when the device
 * cannot be used, with the reason in k->no_device; exits on any other error. */
static bool open_device(gpu_kind *k, loom_context *c, const loom__device *d) {
  char id[32];
  /* An OpenCL device is run as oclN even where the table names it otherwise (a CUDA device
   * with an OpenCL driver too). */
  if (k->backend == LOOM_BACKEND_OPENCL)
    snprintf(id, sizeof id, "ocl%d", (int)d->cl_index);
  else
    snprintf(id, sizeof id, "%s", d->id);
  loom_status s = loom__context_exec_device(c, id, &k->devices[k->n_devices]);
  if (s == LOOM_ERR_UNAVAILABLE && k->backend == LOOM_BACKEND_CUDA) {
    /* Listed by the driver, refused by the runtime (a driver older than this build's CUDA, a
     * device in use elsewhere): a machine this build cannot run on, said as a skip. */
    snprintf(k->no_device, sizeof k->no_device, "%s cannot be used: %s", id, loom_last_error());
    return false;
  }
  if (s) {
    fprintf(stderr, "%s: %s\n", id, loom_last_error());
    exit(1);
  }
  /* A GPU that both drivers list is one device, run by its preferred backend (cuda0 "also
   * ocl0": an H200 with NVIDIA's OpenCL). The OpenCL tests reach into the opencl backend's
   * device, so such a GPU is theirs only where it runs on OpenCL. */
  const loom__exec_device *xd = k->devices[k->n_devices];
  const char *want = k->backend == LOOM_BACKEND_OPENCL ? "opencl" : "cuda";
  if (!xd->backend || strcmp(xd->backend->name, want) != 0) {
    snprintf(k->no_device, sizeof k->no_device, "%s runs on the %s backend, not %s (the same GPU as %s)", id,
             xd->backend ? xd->backend->name : "cpu", want, d->id);
    return false;
  }
  return true;
}

int32_t gt_device_count(uint32_t backend) {
  gpu_kind *k = kind_of(backend);
  if (k->n_devices >= 0) return k->n_devices;
  loom_context *c = gt_context();
  k->n_devices = 0;
  for (int32_t i = 0; i < c->devices.dev_count && k->n_devices < GT_MAX_DEVICES; i++) {
    const loom__device *d = &c->devices.dev[i];
    int32_t index = backend == LOOM_BACKEND_OPENCL ? d->cl_index : d->cuda_ordinal;
    if (!(d->backends & backend) || index < 0) continue;
    if (open_device(k, c, d)) k->n_devices++;
  }
  if (k->n_devices == 0 && !k->no_device[0]) why_none(k, c);
  /* Registered again after the devices opened (and set up clFFT, cuFFT), so it runs before the
   * libraries' own exit-time destructors; release_context is safe to run twice. */
  atexit(release_context);
  return k->n_devices;
}

const char *gt_no_device(uint32_t backend) {
  gpu_kind *k = kind_of(backend);
  return gt_device_count(backend) ? "" : k->no_device;
}

int32_t gt_devices(uint32_t backend, const loom__exec_device **devs) {
  gpu_kind *k = kind_of(backend);
  if (gt_device_count(backend) == 0) {
    loom_test_skip("%s", k->no_device);
    return 0;
  }
  for (int32_t i = 0; i < k->n_devices; i++) devs[i] = k->devices[i];
  return k->n_devices;
}

bool gt_have_devices(uint32_t backend) {
  if (gt_device_count(backend) > 0) return true;
  loom_test_skip("%s", kind_of(backend)->no_device);
  return false;
}

loom_graph *gt_parse(const char *fmt, ...) {
  char text[8192];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  loom_graph *g = NULL;
  if (loom_graph_parse(text, strlen(text), "t.lir", &g)) {
    loom_test_fail(__FILE__, __LINE__, "parse failed: %s\n%s", loom_last_error(), text);
    return NULL;
  }
  return g;
}

static uint64_t next(uint64_t *s) {
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 0x2545f4914f6cdd1dull;
}

static double uniform(uint64_t *s) {
  return (double)(next(s) >> 11) / 9007199254740992.0 * 4.0 - 2.0;
}

static void fill(loom_tensor *t, uint64_t *s) {
  int64_t n = 0;
  if (loom_dtype_is_quantized(t->type.dtype)) { /* every byte is a valid q8 or pair of q4 values */
    loom_type_bytes(&t->type, &n);
    for (int64_t i = 0; i < n; i++) ((uint8_t *)t->data)[i] = (uint8_t)(next(s) >> 56);
    return;
  }
  loom_type_elements(&t->type, &n);
  for (int64_t i = 0; i < n; i++) {
    switch (t->type.dtype) {
      case LOOM_BOOL:
        ((uint8_t *)t->data)[i] = next(s) & 1;
        break;
      case LOOM_I8:
        ((int8_t *)t->data)[i] = (int8_t)((int64_t)(next(s) % 100) - 50);
        break;
      case LOOM_U8:
        ((uint8_t *)t->data)[i] = (uint8_t)(next(s) % 100);
        break;
      case LOOM_I16:
        ((int16_t *)t->data)[i] = (int16_t)((int64_t)(next(s) % 100) - 50);
        break;
      case LOOM_I32:
        ((int32_t *)t->data)[i] = (int32_t)((int64_t)(next(s) % 100) - 50);
        break;
      case LOOM_I64:
        ((int64_t *)t->data)[i] = (int64_t)(next(s) % 100) - 50;
        break;
      case LOOM_F16:
        ((uint16_t *)t->data)[i] = loom_f32_to_f16((float)uniform(s));
        break;
      case LOOM_BF16:
        ((uint16_t *)t->data)[i] = loom_f32_to_bf16((float)uniform(s));
        break;
      case LOOM_F32:
        ((float *)t->data)[i] = (float)uniform(s);
        break;
      case LOOM_F64:
        ((double *)t->data)[i] = uniform(s);
        break;
      case LOOM_C64:
        ((float *)t->data)[2 * i] = (float)uniform(s);
        ((float *)t->data)[2 * i + 1] = (float)uniform(s);
        break;
      case LOOM_C128:
        ((double *)t->data)[2 * i] = uniform(s);
        ((double *)t->data)[2 * i + 1] = uniform(s);
        break;
      default:
        break;
    }
  }
}

loom_status gt_inputs(const loom_graph *g, uint64_t seed, loom_tensor *out) {
  int32_t n = loom_graph_param_count(g);
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 0x1234567;
  memset(out, 0, sizeof *out * (size_t)n);
  for (int32_t p = 0; p < n; p++) {
    loom_status st = loom_tensor_init(&out[p], loom_value_type(g, loom_graph_param_at(g, p)));
    if (st) {
      gt_tensors_free(out, p);
      return st;
    }
    fill(&out[p], &s);
  }
  return LOOM_OK;
}

void gt_tensors_free(loom_tensor *t, int32_t n) {
  for (int32_t i = 0; t && i < n; i++) loom_tensor_deinit(&t[i]);
}

loom_status gt_run(const loom_graph *g, const loom__exec_device *dev, const loom_tensor *in, loom_tensor *out,
                   int64_t limit, loom__meter *meter) {
  loom__meter local = {0};
  if (!meter) meter = &local;
  memset(meter, 0, sizeof *meter);
  meter->limit = limit;
  loom__exec_options opts = {0};
  opts.device = dev;
  if (!dev) {
    loom_status s = loom__context_exec_device(gt_context(), "cpu0", &opts.device);
    if (s) return s;
  }
  loom_status s = loom__execute(g, &opts, in, out, meter);
  if (!s && meter->in_use != 0) {
    gt_tensors_free(out, loom_graph_output_count(g));
    return loom__error(LOOM_ERR_INTERNAL, "the meter holds %lld bytes after the run",
                       (long long)meter->in_use);
  }
  return s;
}

/* ---- comparing -------------------------------------------------------------------------- */

void gt_tolerance(loom_dtype dtype, double scale, double *rtol, double *atol) {
  double r = 0;
  switch (dtype) {
    case LOOM_F32:
    case LOOM_C64:
      r = 1e-5;
      break;
    case LOOM_F64:
    case LOOM_C128:
      r = 1e-12;
      break;
    case LOOM_F16:
      r = 2e-3;
      break;
    case LOOM_BF16:
      r = 1.6e-2;
      break;
    default:
      r = 0;
      break;
  }
  *rtol = r * scale;
  *atol = r * scale;
}

static double element(const loom_tensor *t, int64_t i) {
  const void *d = t->data;
  switch (t->type.dtype) {
    case LOOM_BOOL:
      return ((const uint8_t *)d)[i];
    case LOOM_I8:
      return ((const int8_t *)d)[i];
    case LOOM_U8:
      return ((const uint8_t *)d)[i];
    case LOOM_I16:
      return ((const int16_t *)d)[i];
    case LOOM_I32:
      return ((const int32_t *)d)[i];
    case LOOM_I64:
      return (double)((const int64_t *)d)[i];
    case LOOM_F16:
      return loom_f16_to_f32(((const uint16_t *)d)[i]);
    case LOOM_BF16:
      return loom_bf16_to_f32(((const uint16_t *)d)[i]);
    case LOOM_F32:
      return ((const float *)d)[i];
    case LOOM_C64:
      return ((const float *)d)[i];
    case LOOM_F64:
    case LOOM_C128:
      return ((const double *)d)[i];
    default:
      return 0;
  }
}

static bool same(double a, double b, double rtol, double atol) {
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
  if (isinf(a) || isinf(b)) return a == b;
  return fabs(a - b) <= atol + rtol * fabs(a);
}

bool gt_close(const loom_tensor *a, const loom_tensor *b, double rtol, double atol, char *msg, size_t size) {
  char ta[LOOM_TYPE_STRING_MAX], tb[LOOM_TYPE_STRING_MAX];
  if (!loom_type_equal(&a->type, &b->type)) {
    snprintf(msg, size, "types differ: %s vs %s", loom_type_format(&a->type, ta, sizeof ta),
             loom_type_format(&b->type, tb, sizeof tb));
    return false;
  }
  int64_t n = 0;
  loom_type_elements(&a->type, &n);
  if (a->type.dtype == LOOM_C64 || a->type.dtype == LOOM_C128) n *= 2;
  bool exact = !loom_dtype_is_float(a->type.dtype) && !loom_dtype_is_complex(a->type.dtype);
  for (int64_t i = 0; i < n; i++) {
    if (exact && a->type.dtype == LOOM_I64) {
      int64_t x = ((const int64_t *)a->data)[i], y = ((const int64_t *)b->data)[i];
      if (x != y) {
        snprintf(msg, size, "element %lld: cpu %lld, device %lld", (long long)i, (long long)x, (long long)y);
        return false;
      }
      continue;
    }
    double x = element(a, i), y = element(b, i);
    if (exact ? x != y : !same(x, y, rtol, atol)) {
      snprintf(msg, size, "element %lld of %lld: cpu %.9g, device %.9g (rtol %g, atol %g)", (long long)i,
               (long long)n, x, y, rtol, atol);
      return false;
    }
  }
  return true;
}

bool gt_check(const loom__exec_device *const *devs, int32_t nd, const char *what, const loom_graph *g,
              uint64_t seed, double scale, const char *file, int line) {
  int32_t np = loom_graph_param_count(g), no = loom_graph_output_count(g);
  loom_tensor in[16], ref[8], got[8];
  if (np > 16 || no > 8) {
    loom_test_fail(file, line, "%s: too many parameters or outputs for the test", what);
    return false;
  }
  if (gt_inputs(g, seed, in)) {
    loom_test_fail(file, line, "%s: inputs: %s", what, loom_last_error());
    return false;
  }
  loom_status cs = gt_run(g, NULL, in, ref, 0, NULL);
  char cpu_msg[1024];
  snprintf(cpu_msg, sizeof cpu_msg, "%s", loom_last_error());
  if (cs && cs != LOOM_ERR_UNSUPPORTED) {
    loom_test_fail(file, line, "%s: cpu0 failed: %s: %s", what, loom_status_string(cs), cpu_msg);
    gt_tensors_free(in, np);
    return false;
  }
  bool ok = true;
  for (int32_t k = 0; ok && k < nd; k++) {
    loom__meter m;
    loom_status s = gt_run(g, devs[k], in, got, 0, &m);
    if (cs == LOOM_ERR_UNSUPPORTED) {
      if (s != LOOM_ERR_UNSUPPORTED) {
        loom_test_fail(file, line, "%s: cpu0 says unsupported (%s), %s says %s", what, cpu_msg, devs[k]->id,
                       loom_status_string(s));
        ok = false;
      }
      if (!s) gt_tensors_free(got, no);
      continue;
    }
    if (s) {
      loom_test_fail(file, line, "%s: %s failed: %s: %s", what, devs[k]->id, loom_status_string(s),
                     loom_last_error());
      ok = false;
      break;
    }
    for (int32_t i = 0; ok && i < no; i++) {
      double rtol, atol;
      char msg[512];
      gt_tolerance(ref[i].type.dtype, scale, &rtol, &atol);
      if (!gt_close(&ref[i], &got[i], rtol, atol, msg, sizeof msg)) {
        char *text = NULL;
        loom_graph_to_string(g, &text);
        loom_test_fail(file, line, "%s on %s, output %d: %s\n%s", what, devs[k]->id, (int)i, msg,
                       text ? text : "");
        free(text);
        ok = false;
      }
    }
    gt_tensors_free(got, no);
  }
  if (!cs) gt_tensors_free(ref, no);
  gt_tensors_free(in, np);
  return ok;
}

const char *const gt_chain_lir =
    "graph chain(x: f32[64,48], y: f32[48,32], z: c64[4,16]) {\n"
    "  a = dot x y\n"
    "  b = exp a\n"
    "  c = reduce_sum b axes=[1]\n"
    "  t = transpose y perm=[1,0]\n"
    "  d = dot a t\n"
    "  e = maximum d x\n"
    "  v, i = topk e k=3 axis=1\n"
    "  f = fft z axis=1\n"
    "  return c, v, i, f, t\n"
    "}\n";

/* The chain's limits on dev against cpu0's meter; in[] its inputs. */
static void limits_hold(const loom_graph *g, const loom__exec_device *dev, const loom_tensor *in,
                        const loom__meter *cpu) {
  loom_tensor out[5];
  loom__meter m;
  /* Under a limit exactly the cpu's peak: it fits, with the same peak and allocations. */
  ASSERT_OK(gt_run(g, dev, in, out, cpu->peak, &m));
  gt_tensors_free(out, 5);
  ASSERT_EQ(m.peak, cpu->peak);
  ASSERT_EQ(m.allocations, cpu->allocations);
  /* A byte less does not fit: OUT_OF_MEMORY naming a value, nothing left allocated. */
  int64_t live = loom_testing_live_allocations();
  ASSERT_STATUS(gt_run(g, dev, in, out, cpu->peak - 1, &m), LOOM_ERR_OUT_OF_MEMORY);
  ASSERT_CONTAINS(loom_last_error(), "limit is free");
  ASSERT_TRUE(m.peak <= cpu->peak - 1);
  ASSERT_EQ(m.in_use, 0);
  ASSERT_EQ(loom_testing_live_allocations(), live);
}

void gt_test_peaks_equal_cpu0(uint32_t kind) {
  const loom__exec_device *devs[GT_MAX_DEVICES];
  int32_t nd = gt_devices(kind, devs);
  if (nd == 0) return;
  loom_graph *g = gt_parse("%s", gt_chain_lir);
  ASSERT_TRUE(g != NULL);
  loom_tensor in[3], out[5];
  loom__meter cpu;
  loom_status s = gt_inputs(g, 3, in);
  if (s == LOOM_OK) {
    s = gt_run(g, NULL, in, out, 0, &cpu);
    if (s == LOOM_OK) gt_tensors_free(out, 5);
    for (int32_t k = 0; s == LOOM_OK && k < nd && !loom_test_failed(); k++) {
      limits_hold(g, devs[k], in, &cpu);
      if (loom_test_failed()) printf("    (on %s)\n", devs[k]->id);
    }
    gt_tensors_free(in, 3);
  }
  loom_graph_destroy(g);
  ASSERT_OK(s);
}
