/* loom-run --devices / --policy for a real run: the devices' runners, and the per-device
 * report (loom/share.h, docs/sched.md "The shared runner"). */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "loom/internal/json.h"
#include "loom_run.h"

int run_share_runners(loom_context *ctx, const run_options *opts, const loom_runner *given, int32_t n_given,
                      loom_runner **out, int32_t *n) {
  /* --limit BYTES is the limit of every device; --runners SPEC names each device's */
  const loom_runner *limits = opts->limit ? NULL : given;
  loom_status s = loom_share_runners(ctx, opts->devices, limits, limits ? n_given : 0, out, n);
  /* a device this machine lacks, or one named twice, is the command line's fault */
  bool usage = s == LOOM_ERR_NOT_FOUND || s == LOOM_ERR_INVALID_ARGUMENT || s == LOOM_ERR_UNSUPPORTED;
  if (s) return run_fail(usage ? EXIT_USAGE : EXIT_RUN, "%s", loom_last_error());
  for (int32_t i = 0; opts->limit && n_given > 0 && i < *n; i++)
    if (given[0].limit < (*out)[i].limit) (*out)[i].limit = given[0].limit;
  for (int32_t k = 0; opts->runners && k < n_given; k++) {
    bool listed = false;
    for (int32_t i = 0; i < *n; i++) listed |= strcasecmp((*out)[i].device, given[k].device) == 0;
    if (!listed)
      fprintf(stderr, "loom-run: note: --runners names %s, which --devices %s leaves out: ignored\n",
              given[k].device, opts->devices);
  }
  if (loom_runners_fit_mem_limits(*out, *n, NULL, NULL)) return run_fail(EXIT_USAGE, "%s", loom_last_error());
  return 0;
}

void run_share_print(FILE *f, const loom_run_stats *st) {
  for (int32_t i = 0; i < st->n_devices; i++) {
    const loom_run_device_stats *d = &st->devices[i];
    char lim[32], peak[32], in[32], out[32];
    fprintf(
        f,
        "  device %-6s busy %9.3f s (%5.1f%%)  %6lld pieces in %4d ranges  %d stages  limit %10s  peak %10s"
        "  in %s  out %s  device clock %d\n",
        d->device, d->busy_seconds, st->seconds > 0 ? 100.0 * d->busy_seconds / st->seconds : 0.0,
        (long long)d->pieces, (int)d->ranges, (int)d->stages,
        loom_bytes_format(d->limit_bytes, lim, sizeof lim),
        loom_bytes_format(d->peak_bytes, peak, sizeof peak), loom_bytes_format(d->bytes_in, in, sizeof in),
        loom_bytes_format(d->bytes_out, out, sizeof out), (int)d->device_timed);
  }
}

void run_share_write_json(loom__json *j, const loom_run_stats *st) {
  loom__json_key(j, "devices");
  loom__json_begin_array(j);
  for (int32_t i = 0; i < st->n_devices; i++) {
    const loom_run_device_stats *d = &st->devices[i];
    loom__json_begin_object(j);
    loom__json_kv_string(j, "device", d->device);
    loom__json_kv_int64(j, "limit_bytes", d->limit_bytes);
    loom__json_kv_double(j, "busy_seconds", d->busy_seconds);
    loom__json_kv_int64(j, "device_timed", d->device_timed);
    loom__json_kv_int64(j, "pieces", d->pieces);
    loom__json_kv_int64(j, "ranges", d->ranges);
    loom__json_kv_int64(j, "stages", d->stages);
    loom__json_kv_int64(j, "peak_bytes", d->peak_bytes);
    loom__json_kv_int64(j, "bytes_in", d->bytes_in);
    loom__json_kv_int64(j, "bytes_out", d->bytes_out);
    loom__json_kv_double(j, "seconds_per_piece", d->seconds_per_piece);
    loom__json_end_object(j);
  }
  loom__json_end_array(j);
}
