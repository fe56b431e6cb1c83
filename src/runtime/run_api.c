/* loom_run: the one entry point for running a plan. It checks the options, hands the plan to
 * the runner its options name (stage after stage on the plan's runners, shared among devices,
 * or over MPI ranks through the hook libloom_mpi provides), and turns that runner's figures into
 * the one loom_run_stats. It never plans: the plan arrives made. */
#include <string.h>

#include "core/core.h"
#include "loom/share.h"
#include "runtime/run_hooks.h"

void loom_run_options_init(loom_run_options *opts) {
  if (!opts) return;
  memset(opts, 0, sizeof *opts);
  opts->policy = LOOM_SCHED_DMDA;
  opts->ranges_per_device = 6;
  opts->recover_tries = 3;
}

void loom_run_stats_deinit(loom_run_stats *stats) {
  if (!stats) return;
  loom__free(stats->stages);
  loom__free(stats->recoveries);
  loom__free(stats->devices);
  loom__free(stats->ranks);
  loom__free(stats->stage_device);
  loom__free(stats->ranges);
  memset(stats, 0, sizeof *stats);
}

/* The older runners' options from loom_run's. */
static void plan_run_options(const loom_run_options *o, loom_plan_run_options *out) {
  loom_plan_run_options_init(out);
  out->recover = o->recover;
  out->recover_tries = o->recover_tries;
  out->optimize = o->optimize;
  out->wait_seconds = o->wait_seconds;
}

static loom_status check_options(const loom_run_options *o, bool resident) {
  if (o->recover && (o->recover_tries < 1 || o->recover_tries > 8))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_run: recover_tries is %d, not 1 to 8",
                       (int)o->recover_tries);
  if (o->devices && (o->ranges_per_device < 1 || o->ranges_per_device > 64))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_run: ranges_per_device is %d, not 1 to 64",
                       (int)o->ranges_per_device);
  if (o->devices && o->mpi)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT,
                       "loom_run: options name both devices to share (\"%s\") and an MPI communicator: "
                       "an MPI run places each rank's stages on the plan's runners",
                       o->devices);
  if (resident && (o->devices || o->mpi))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT,
                       "loom_run_buffers: runs on the plan's runners only (options.devices and options.mpi "
                       "must be NULL)");
  if (o->n_limits < 0 || (o->n_limits > 0 && !o->limits))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_run: %d limits given with no array",
                       (int)o->n_limits);
  return LOOM_OK;
}

/* A plan run's figures moved into the one stats structure (the arrays change owner). */
static void take_plan_stats(loom_plan_stats *p, loom_run_stats *out) {
  out->peak_bytes = p->peak_bytes;
  out->allocations = p->allocations;
  out->seconds = p->seconds;
  out->n_stages = p->n_stages;
  out->stages = p->stages;
  out->n_recoveries = p->n_recoveries;
  out->recoveries = p->recoveries;
  memset(p, 0, sizeof *p);
}

static void take_share_stats(loom_share_stats *sh, loom_run_stats *out) {
  if (sh->plan.stages) { /* FIXED: the plan run's own figures */
    take_plan_stats(&sh->plan, out);
  }
  out->peak_bytes = LOOM_MAX(out->peak_bytes, sh->peak_bytes);
  out->seconds = sh->seconds;
  if (!out->n_stages) out->n_stages = sh->n_stages;
  out->n_shared = sh->n_shared;
  out->stage_device = sh->stage_device;
  sh->stage_device = NULL;
  if (sh->n_devices > 0) {
    out->devices = loom__calloc((size_t)sh->n_devices, sizeof *out->devices);
    if (out->devices) {
      out->n_devices = sh->n_devices;
      /* loom_share_device_stats and loom_run_device_stats hold the same fields in one order. */
      _Static_assert(sizeof(loom_share_device_stats) == sizeof(loom_run_device_stats),
                     "the per-device figures of share.h and runtime.h differ");
      memcpy(out->devices, sh->devices, (size_t)sh->n_devices * sizeof *out->devices);
    }
  }
  loom_share_stats_deinit(sh);
}

static loom_status run_shared(loom_context *ctx, const loom_plan *plan, const loom_run_options *o,
                              const loom_tensor *inputs, int32_t n_inputs, loom_tensor *outputs,
                              int32_t n_outputs, loom_run_stats *stats) {
  loom_plan_run_options ro;
  plan_run_options(o, &ro);
  loom_share_options so;
  loom_share_options_init(&so);
  so.devices = o->devices;
  so.policy = o->policy;
  so.limits = o->limits;
  so.n_limits = o->n_limits;
  so.ranges_per_device = o->ranges_per_device;
  so.run = &ro;
  loom_share_stats sh;
  memset(&sh, 0, sizeof sh);
  loom_status s = loom_plan_run_shared(ctx, plan, &so, inputs, n_inputs, outputs, n_outputs, &sh);
  if (stats) take_share_stats(&sh, stats);
  loom_share_stats_deinit(&sh);
  return s;
}

loom_status loom_run(loom_context *ctx, const loom_plan *plan, const loom_run_options *opts,
                     const loom_tensor *inputs, int32_t n_inputs, loom_tensor *outputs, int32_t n_outputs,
                     loom_run_stats *stats) {
  if (stats) memset(stats, 0, sizeof *stats);
  loom_run_options defaults;
  loom_run_options_init(&defaults);
  const loom_run_options *o = opts ? opts : &defaults;
  if (o->n_after)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT,
                       "loom_run: options.after names %d run%s to wait for: only loom_run_submit waits",
                       (int)o->n_after, o->n_after == 1 ? "" : "s");
  loom_status s = check_options(o, false);
  if (s) return s;
  if (o->mpi) return o->mpi->run(o->mpi, ctx, plan, o, inputs, n_inputs, outputs, n_outputs, stats);
  if (o->devices) return run_shared(ctx, plan, o, inputs, n_inputs, outputs, n_outputs, stats);
  loom_plan_run_options ro;
  plan_run_options(o, &ro);
  loom_plan_stats ps;
  memset(&ps, 0, sizeof ps);
  s = loom_plan_run_with_options(ctx, plan, &ro, inputs, n_inputs, outputs, n_outputs, &ps);
  if (stats) take_plan_stats(&ps, stats);
  loom_plan_stats_deinit(&ps);
  return s;
}

loom_status loom_run_buffers(loom_context *ctx, const loom_plan *plan, const loom_run_options *opts,
                             loom_buffer *const *inputs, int32_t n_inputs, loom_buffer **outputs,
                             int32_t n_outputs, loom_run_stats *stats) {
  if (stats) memset(stats, 0, sizeof *stats);
  loom_run_options defaults;
  loom_run_options_init(&defaults);
  const loom_run_options *o = opts ? opts : &defaults;
  if (o->n_after)
    return loom__error(
        LOOM_ERR_INVALID_ARGUMENT,
        "loom_run_buffers: options.after names runs to wait for: only loom_run_buffers_submit waits");
  loom_status s = check_options(o, true);
  if (s) return s;
  if (o->recover)
    return loom__error(LOOM_ERR_UNSUPPORTED, "loom_run_buffers: recovery is not offered for resident runs");
  loom_plan_stats ps;
  memset(&ps, 0, sizeof ps);
  s = loom_plan_run_buffers(ctx, plan, inputs, n_inputs, outputs, n_outputs, &ps);
  if (stats) take_plan_stats(&ps, stats);
  loom_plan_stats_deinit(&ps);
  return s;
}
