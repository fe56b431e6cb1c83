/* The compute backends' one front-end: the checks every backend makes of a call, and the
 * dispatch by op class to a backend's launcher of that family, so a backend only launches.
 *
 * Every op class maps to one family (loom__family_of). A GPU backend (opencl, cuda) gives
 * loom__dispatch a table of its launchers; the cpu backend, whose entry point takes host
 * views (loom__cpu_run_op), dispatches its own family table through loom__family_of and
 * shares the output check (loom__strides_dense).
 */
#ifndef LOOM_DISPATCH_H
#define LOOM_DISPATCH_H

#include <pthread.h>

#include "backends/backend.h"

/* The kernel families, each launched by one function of a backend. */
typedef enum loom__family {
  LOOM__FAMILY_ELEMENTWISE, /* source (iota), unary, binary, compare, logic, select, cast */
  LOOM__FAMILY_LAYOUT,      /* reshape transpose broadcast slice concat tile */
  LOOM__FAMILY_REDUCE,      /* reduce_*, argmax, argmin */
  LOOM__FAMILY_TOPK,
  LOOM__FAMILY_DOT,
  LOOM__FAMILY_CONV,
  LOOM__FAMILY_FOURIER,
  LOOM__FAMILY_FUSED, /* a fused op's body (docs/ir-fusion.md); a backend without one returns
                         UNSUPPORTED and the executor runs the body op by op */
  LOOM__FAMILY_QUANT, /* quantize dequantize (docs/ir-quant.md) */
  LOOM__FAMILY_COUNT
} loom__family;

/* The family that runs ops of class cls; LOOM__FAMILY_COUNT for a class no family runs. */
loom__family loom__family_of(loom__op_class cls);

/* INTERNAL "<id>: <op>: no kernel family": a class the dispatch table does not cover. */
loom_status loom__no_family(const char *id, const char *op_name);

/* UNSUPPORTED "<id>: fused: no fused evaluator on this backend": the executor then runs the
 * body op by op (runtime/exec.c). */
loom_status loom__no_fused(const char *id);

/* True when a view of type t through element strides is dense C order: dimensions of size 1
 * may have any stride, and an empty view is dense whatever its strides. */
bool loom__strides_dense(const loom_type *t, const int64_t *strides);
/* INVALID_ARGUMENT "<id>: <op>: output <r+1> is not dense" unless loom__strides_dense. */
loom_status loom__check_output_dense(const char *id, const char *op_name, int32_t r, const loom_type *t,
                                     const int64_t *strides);

typedef loom_status (*loom__launch_fn)(void *dev, const loom__op_call *c);

/* A backend's launchers, one per family, and its hooks (each may be NULL):
 * - check: the backend's own refusal of a call (opencl: fp64 dtypes on a device without
 *   fp64), after the shared checks and before the lock;
 * - enter: under the lock, before the launch (cuda: make the device current). */
typedef struct loom__launchers {
  loom__launch_fn family[LOOM__FAMILY_COUNT];
  loom_status (*check)(void *dev, const loom__op_call *c);
  loom_status (*enter)(void *dev);
} loom__launchers;

/* Runs call c on device `dev` (named `id` in messages): checks that the op is well formed
 * (its result count) and that every output is dense, runs the backend's check, then, holding
 * `lock` (NULL: none), enters and launches the family of the op's class. INVALID_ARGUMENT for
 * a malformed call; otherwise the launcher's status. */
loom_status loom__dispatch(const loom__launchers *t, void *dev, const char *id, pthread_mutex_t *lock,
                           const loom__op_call *c);

#endif
