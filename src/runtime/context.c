/* Creating and destroying a context: options, selection, discovery. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/registry.h"
#include "core/log.h"
#include "hmm/hmm.h"
#include "runtime/context.h"
#include "runtime/exec.h"

void loom_context_options_init(loom_context_options *opts) {
  if (!opts) return;
  memset(opts, 0, sizeof *opts);
}

loom_status loom_context_create(const loom_context_options *opts, loom_context **out_ctx) {
  if (!out_ctx) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_context_create: out_ctx is NULL");
  *out_ctx = NULL;
  loom_context_options defaults;
  if (!opts) {
    loom_context_options_init(&defaults);
    opts = &defaults;
  }
  const char *spec = opts->devices;
  const char *origin = "loom_context_options.devices";
  if (!spec) {
    spec = getenv("LOOM_DEVICES");
    origin = "LOOM_DEVICES";
  }
  /* The selection is checked before discovery, so a typo fails fast. */
  loom__selection sel;
  loom_status s = loom__selection_parse(spec, origin, &sel);
  if (s != LOOM_OK) return s;
  loom_context *ctx = loom__calloc(1, sizeof *ctx);
  if (!ctx) s = loom__oom("a context");
  if (ctx) loom__history_init(&ctx->history);
  if (s == LOOM_OK && spec && !sel.all && !(ctx->device_filter = loom__strdup(spec)))
    s = loom__oom("a context");
  /* The backends' discovery in the list's order: CUDA first, so that a GPU both runtimes show
   * keeps its CUDA id. */
  loom__discoverer discoverers[8];
  int32_t n = loom__backend_discoverers(discoverers, LOOM_ARRAY_SIZE(discoverers));
  if (s == LOOM_OK) s = loom__devices_discover(&ctx->devices, &sel, discoverers, n);
  loom__selection_deinit(&sel);
  if (s == LOOM_OK) s = loom__context_memory_init(ctx);
  if (s == LOOM_OK) s = loom__context_exec_init(ctx);
  if (s != LOOM_OK) {
    loom_context_destroy(ctx);
    return s;
  }
  if (loom__log_enabled(LOOM_LOG_INFO)) {
    char ids[512];
    size_t k = 0;
    ids[0] = '\0';
    for (int32_t i = 0; i < loom_context_device_count(ctx) && k < sizeof ids; i++) {
      loom_device_info d;
      if (loom_context_device_info(ctx, i, &d) == LOOM_OK)
        k += (size_t)snprintf(ids + k, sizeof ids - k, "%s%s", k ? ", " : "", d.id);
    }
    loom__log(LOOM_LOG_INFO, "context: %d devices (%s)%s%s", (int)loom_context_device_count(ctx), ids,
              spec ? ", selected by " : "", spec ? origin : "");
  }
  *out_ctx = ctx;
  return LOOM_OK;
}

void loom_context_destroy(loom_context *ctx) {
  if (!ctx) return;
  loom__history_save(ctx);
  loom__context_exec_release(ctx);
  loom__context_memory_release(ctx);
  loom__devices_deinit(&ctx->devices);
  loom__free(ctx->device_filter);
  loom__history_deinit(&ctx->history);
  loom__free(ctx);
}
