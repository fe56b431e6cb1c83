/* The opencl compute backend's table (backend.h): per device, the HMM's context and in-order
 * queue, cl_mem buffers addressed as (buffer, offset), ops dispatched by class to the kernel
 * families. See opencl_backend.h for the design. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/dispatch.h"
#include "backends/opencl/opencl_backend.h"
#include "devices/devices.h"
#include "hmm/hmm_backend.h"

/* ---- testing hooks ------------------------------------------------------------------------ */

static int32_t testing_blas, testing_fft;

void loom__opencl_testing_set_paths(int32_t blas, int32_t fft) {
  testing_blas = blas;
  testing_fft = fft;
}
int32_t loom__cl_testing_blas_path(void) {
  return testing_blas;
}
int32_t loom__cl_testing_fft_path(void) {
  return testing_fft;
}

void loom__opencl_testing_disable_fp64(void *dev) {
  if (dev) ((loom__cl_device *)dev)->fp64 = false;
}

cl_command_queue loom__opencl_queue(void *dev) {
  return dev ? ((loom__cl_device *)dev)->queue : NULL;
}

/* ---- the libraries' process-wide setup ----------------------------------------------------- */

static pthread_mutex_t libs_lock = PTHREAD_MUTEX_INITIALIZER;
static int32_t libs_users;

loom_status loom__cl_libraries_acquire(void) {
  pthread_mutex_lock(&libs_lock);
  loom_status s = libs_users == 0 ? loom__cl_clfft_setup() : LOOM_OK;
  if (!s) libs_users++;
  pthread_mutex_unlock(&libs_lock);
  return s;
}

void loom__cl_libraries_release(void) {
  pthread_mutex_lock(&libs_lock);
  if (libs_users > 0 && --libs_users == 0) {
    loom__cl_clfft_teardown();
    loom__cl_clblast_release();
  }
  pthread_mutex_unlock(&libs_lock);
}

/* ---- opening a device ----------------------------------------------------------------------- */

static loom_status unavailable(loom__cl_device *d, cl_int err, const char *call) {
  loom_status s = loom__cl_status(err, call);
  loom__error_prefix("%s (%s): ", d->id, d->name ? d->name : "");
  return s == LOOM_ERR_OUT_OF_MEMORY ? s : LOOM_ERR_UNAVAILABLE;
}

/* The HMM's context and in-order queue for the device's node, retained: buffers the executor
 * hands over are cl_mem objects of that context, and the HMM's copies go on that queue, so
 * kernels and copies run in the order they were issued without a wait between them. */
static loom_status share_queue(loom__cl_device *d, loom_mem_manager *memory, int32_t node) {
  void *context = NULL, *queue = NULL;
  loom_status s = loom__hmm_opencl_queue(memory, node, &context, &queue);
  if (s) {
    loom__error_prefix("%s (%s): ", d->id, d->name ? d->name : "");
    return s;
  }
  cl_int err = clRetainContext((cl_context)context);
  if (err != CL_SUCCESS) return unavailable(d, err, "clRetainContext");
  d->context = (cl_context)context;
  err = clRetainCommandQueue((cl_command_queue)queue);
  if (err != CL_SUCCESS) return unavailable(d, err, "clRetainCommandQueue");
  d->queue = (cl_command_queue)queue;
  return LOOM_OK;
}

static void query_limits(loom__cl_device *d) {
  size_t wg = 0;
  cl_uint cu = 1, align_bits = 1024;
  clGetDeviceInfo(d->device, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof wg, &wg, NULL);
  clGetDeviceInfo(d->device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL);
  clGetDeviceInfo(d->device, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof align_bits, &align_bits, NULL);
  d->max_wg = wg ? wg : 1;
  d->compute_units = (int32_t)(cu ? cu : 1);
  d->base_align = LOOM_MAX((int64_t)align_bits / 8, 1);
  cl_device_type type = 0;
  clGetDeviceInfo(d->device, CL_DEVICE_TYPE, sizeof type, &type, NULL);
  d->is_cpu = (type & CL_DEVICE_TYPE_CPU) != 0;
  /* GPUs want neighbouring work-items on neighbouring elements; a CPU device wants each
   * work-item to walk a run of them. */
  d->span = d->is_cpu ? 64 : 1;
}

static void cl_close(void *dev);

static loom_status cl_open(const loom__device *info, loom_mem_manager *memory, int32_t node, void **out_dev) {
  *out_dev = NULL;
  loom__cl_device *d = loom__calloc(1, sizeof *d);
  if (!d) return loom__oom("an OpenCL device");
  snprintf(d->id, sizeof d->id, "%s", info->id);
  d->platform = (cl_platform_id)info->cl_platform;
  d->device = (cl_device_id)info->cl_device;
  d->fp64 = info->fp64;
  pthread_mutex_init(&d->lock, NULL);
  const char *name = info->name ? info->name : "";
  size_t key_len = strlen(name) + 16 + (info->version ? strlen(info->version) : 0) +
                   (info->driver_version ? strlen(info->driver_version) : 0) +
                   (info->platform ? strlen(info->platform) : 0);
  d->name = loom__strdup(name);
  d->cache_key = loom__malloc(key_len);
  if (!d->name || !d->cache_key) {
    cl_close(d);
    return loom__oom("an OpenCL device");
  }
  snprintf(d->cache_key, key_len, "%s|%s|%s|%s", name, info->version ? info->version : "",
           info->driver_version ? info->driver_version : "", info->platform ? info->platform : "");
  loom_status s = share_queue(d, memory, node);
  if (!s) {
    query_limits(d);
    s = loom__cl_libraries_acquire();
    d->libraries = s == LOOM_OK;
    if (s) loom__error_prefix("%s (%s): ", d->id, d->name);
  }
  if (s) {
    cl_close(d);
    return s;
  }
  *out_dev = d;
  return LOOM_OK;
}

static void cl_close(void *dev) {
  loom__cl_device *d = dev;
  if (!d) return;
  if (d->queue) clFinish(d->queue);
  loom__cl_fft_release(d);
  loom__cl_fused_release(d);
  loom__cl_programs_release(d);
  if (d->queue) clReleaseCommandQueue(d->queue);
  if (d->libraries) loom__cl_libraries_release();
  if (d->context) clReleaseContext(d->context);
  pthread_mutex_destroy(&d->lock);
  loom__free(d->name);
  loom__free(d->cache_key);
  loom__free(d);
}

/* ---- the queue ---------------------------------------------------------------------------- */

static loom_status cl_synchronize(void *dev) {
  loom__cl_device *d = dev;
  loom_status s = loom__cl_status(clFinish(d->queue), "clFinish");
  if (s) loom__error_prefix("%s: ", d->id);
  return s;
}

static loom_status cl_flush(void *dev) {
  loom__cl_device *d = dev;
  loom_status s = loom__cl_status(clFlush(d->queue), "clFlush");
  if (s) loom__error_prefix("%s: ", d->id);
  return s;
}

/* ---- running one op ----------------------------------------------------------------------- */

static bool needs_fp64(loom_dtype t) {
  return t == LOOM_F64 || t == LOOM_C128;
}

/* fp64 dtypes need cl_khr_fp64: refused before a program is built for them. */
static loom_status check_fp64(void *dev, const loom__op_call *c) {
  const loom__cl_device *d = dev;
  const loom__op *op = c->op;
  for (int32_t i = 0; i < op->n_inputs + op->n_outputs && !d->fp64; i++) {
    loom_dtype t = i < op->n_inputs ? c->in[i].type.dtype : c->out[i - op->n_inputs].type.dtype;
    if (needs_fp64(t))
      return loom__error(LOOM_ERR_UNSUPPORTED, "%s (%s): %s on %s: the device has no fp64 (cl_khr_fp64)",
                         d->id, d->name, loom_op_name(op->kind), loom_dtype_name(t));
  }
  return LOOM_OK;
}

static const loom__launchers launchers = {
    .family =
        {
            [LOOM__FAMILY_ELEMENTWISE] = loom__cl_elementwise,
            [LOOM__FAMILY_LAYOUT] = loom__cl_layout,
            [LOOM__FAMILY_REDUCE] = loom__cl_reduce,
            [LOOM__FAMILY_TOPK] = loom__cl_topk,
            [LOOM__FAMILY_DOT] = loom__cl_dot,
            [LOOM__FAMILY_CONV] = loom__cl_conv,
            [LOOM__FAMILY_FOURIER] = loom__cl_fourier,
            [LOOM__FAMILY_FUSED] = loom__cl_fused_op,
            [LOOM__FAMILY_QUANT] = loom__cl_quant,
        },
    .check = check_fp64,
};

static loom_status cl_run_op(void *dev, const loom__op_call *c) {
  loom__cl_device *d = dev;
  return loom__dispatch(&launchers, d, d->id, &d->lock, c);
}

/* ---- what loops need besides ops ---------------------------------------------------------- */

static loom_status cl_strided_copy(void *dev, int64_t elem, int32_t rank, const int64_t *dims, void *dst,
                                   int64_t dst_off, const int64_t *dst_strides, void *src, int64_t src_off,
                                   const int64_t *src_strides) {
  loom__cl_device *d = dev;
  if (rank < 0 || rank > LM_COPY_RANK)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: a copy of rank %d (at most %d)", d->id, (int)rank,
                       LM_COPY_RANK);
  pthread_mutex_lock(&d->lock);
  loom_status s = loom__cl_copy(d, elem, rank, dims, (cl_mem)dst, dst_off, dst_strides, (cl_mem)src, src_off,
                                src_strides);
  pthread_mutex_unlock(&d->lock);
  return s;
}

static loom_status cl_merge_index(void *dev, int64_t total, int64_t k, int64_t inner, void *pos,
                                  int64_t pos_off, void *acc, int64_t acc_off, void *piece, int64_t piece_off,
                                  int64_t lo) {
  loom__cl_device *d = dev;
  if (total <= 0) return LOOM_OK;
  pthread_mutex_lock(&d->lock);
  loom__cl_kernel *kern;
  loom_status s = loom__cl_kernel_get(d, LOOM__CL_PROG_LAYOUT, "merge_index", &kern);
  if (s == LOOM_ERR_UNSUPPORTED) s = loom__error(LOOM_ERR_INTERNAL, "%s: no merge_index kernel", d->id);
  if (!s) {
    cl_mem p = pos, a = acc, b = piece;
    cl_long args_v[] = {pos_off, acc_off, piece_off, total, k, inner, lo};
    loom__cl_arg args[] = {LOOM__CL_ARG(p),         LOOM__CL_ARG(args_v[0]), LOOM__CL_ARG(a),
                           LOOM__CL_ARG(args_v[1]), LOOM__CL_ARG(b),         LOOM__CL_ARG(args_v[2]),
                           LOOM__CL_ARG(args_v[3]), LOOM__CL_ARG(args_v[4]), LOOM__CL_ARG(args_v[5]),
                           LOOM__CL_ARG(args_v[6])};
    s = loom__cl_launch(d, kern, args, 10, total, d->is_cpu ? 1 : 64);
  }
  pthread_mutex_unlock(&d->lock);
  return s;
}

/* ---- the device's clock ------------------------------------------------------------------ */

/* A marker: on an in-order queue it ends when every command before it has ended, and its
 * profiling end time (the queue is made with CL_QUEUE_PROFILING_ENABLE) is the device's. */
static loom_status cl_mark(void *dev, void **out_mark) {
  loom__cl_device *d = dev;
  cl_event ev = NULL;
  pthread_mutex_lock(&d->lock);
  cl_int err = clEnqueueMarkerWithWaitList(d->queue, 0, NULL, &ev);
  pthread_mutex_unlock(&d->lock);
  if (err != CL_SUCCESS) {
    loom_status s = loom__cl_status(err, "clEnqueueMarkerWithWaitList");
    loom__error_prefix("%s: ", d->id);
    return s;
  }
  *out_mark = ev;
  return LOOM_OK;
}

static loom_status cl_mark_seconds(void *dev, void *from, void *to, double *seconds) {
  loom__cl_device *d = dev;
  cl_event ev[2] = {from, to};
  cl_ulong end[2] = {0, 0};
  cl_int err = clWaitForEvents(2, ev);
  for (int i = 0; err == CL_SUCCESS && i < 2; i++)
    err = clGetEventProfilingInfo(ev[i], CL_PROFILING_COMMAND_END, sizeof end[i], &end[i], NULL);
  if (err != CL_SUCCESS) {
    loom_status s = loom__cl_status(err, "clGetEventProfilingInfo");
    loom__error_prefix("%s: ", d->id);
    return s;
  }
  *seconds = end[1] >= end[0] ? (double)(end[1] - end[0]) * 1e-9 : 0;
  return LOOM_OK;
}

static void cl_mark_release(void *dev, void *mark) {
  (void)dev;
  if (mark) clReleaseEvent(mark);
}

const loom__backend loom__opencl_backend = {
    .name = "opencl",
    .host_memory = false,
    .open = cl_open,
    .close = cl_close,
    .run_op = cl_run_op,
    .synchronize = cl_synchronize,
    .flush = cl_flush,
    .copy = cl_strided_copy,
    .merge_index = cl_merge_index,
    .mark = cl_mark,
    .mark_seconds = cl_mark_seconds,
    .mark_release = cl_mark_release,
};
