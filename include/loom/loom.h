/* Loom: tensor computations across every device a machine has, under memory limits.
 *
 * Ownership rules, for every header:
 * - `loom_x_create` returns an object the caller owns and frees with `loom_x_destroy`.
 * - `loom_x_retain` / `loom_x_release` count shared references.
 * - `loom_x_init` / `loom_x_deinit` fill and clear storage the caller provides.
 * - Destroy, release and deinit accept NULL.
 * - A fallible call returns loom_status; its `out_` parameters are cleared on entry and
 *   filled only on success. On failure loom_last_error() says what and where.
 * - Strings passed in are copied when kept; strings returned are owned by Loom and live as
 *   long as the object that returned them.
 */
#ifndef LOOM_LOOM_H
#define LOOM_LOOM_H

#include "loom/context.h"
#include "loom/device.h"
#include "loom/estimate.h"
#include "loom/graph.h"
#include "loom/io.h"
#include "loom/memory.h"
#include "loom/onnx.h"
#include "loom/optimize.h"
#include "loom/plan.h"
#include "loom/predict.h"
#include "loom/runner.h"
#include "loom/runtime.h"
#include "loom/sched.h"
#include "loom/share.h"
#include "loom/status.h"
#include "loom/tensor.h"
#include "loom/version.h"

#endif
