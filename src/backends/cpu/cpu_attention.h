/* The cpu backend's fused attention (cpu_attention.c; the body's form in ir/attention.h). */
#ifndef LOOM_BACKENDS_CPU_ATTENTION_H
#define LOOM_BACKENDS_CPU_ATTENTION_H

#include "backends/backend.h"
#include "ir/attention.h"

/* LOOM_OK when loom__cpu_attention runs problem `a`; UNSUPPORTED naming why not (f64 and other
 * dtypes: the executor then runs the body op by op). Reads no data. */
loom_status loom__cpu_attention_supported(const loom__attention *a);

/* o = softmax(q kt * scale) v over the fused op's operand views in[0..3) (q, kt, v: any
 * strides; layouts BLAS cannot read are packed block by block) into the dense out[0], never
 * holding more of the scores than one block per thread. Errors: UNSUPPORTED as above;
 * INVALID_ARGUMENT for a softmax over 0 keys (as reduce_max over an empty axis);
 * OUT_OF_MEMORY for the per-thread blocks. Thread safety: runs OpenMP threads itself; reads
 * in[], writes only out[0]. */
loom_status loom__cpu_attention(const loom__attention *a, const loom__view *in, const loom__view *out);

#endif
