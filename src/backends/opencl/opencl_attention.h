/* Fused attention on OpenCL devices (opencl_attention.c, kernels/opencl/attention.cl; the
 * body's form in ir/attention.h). */
#ifndef LOOM_BACKENDS_OPENCL_ATTENTION_H
#define LOOM_BACKENDS_OPENCL_ATTENTION_H

#include "backends/opencl/opencl_backend.h"
#include "ir/attention.h"

/* LOOM_OK when loom__cl_attention runs problem `a` (f32); UNSUPPORTED naming why not. */
loom_status loom__cl_attention_supported(const loom__attention *a);

/* Enqueues o = softmax(q kt * scale) v on d's queue over the fused op's operand views in[0..3)
 * (read in place through their strides) into the dense out[0]; holds no device memory beyond
 * them. The caller holds d's lock (as for every launcher). Errors: UNSUPPORTED as above (the
 * executor then runs the body op by op); INVALID_ARGUMENT for a softmax over 0 keys; the
 * OpenCL runtime's errors, converted, naming the device. */
loom_status loom__cl_attention(loom__cl_device *d, const loom__attention *a, const loom__dview *in,
                               const loom__dview *out);

#endif
