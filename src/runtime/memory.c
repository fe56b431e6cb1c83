/* The memory managers of a context (loom_mem_manager_create) and its default one
 * (loom_context_memory): made by loom_context_create, kept in the context, destroyed by
 * loom_context_destroy. The HMM knows nothing of contexts: it is handed the context's device
 * table (loom__hmm_create). The default manager is made with the context rather than on
 * first use so that every run finds it there (a run never makes it half-way, and a bad
 * LOOM_MEM_LIMIT is reported where the context is made). */
#include "hmm/hmm.h"
#include "runtime/context.h"

loom_status loom_mem_manager_create(loom_context *ctx, const loom_mem_manager_options *opts,
                                    loom_mem_manager **out_manager) {
  if (!out_manager)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_mem_manager_create: out_manager is NULL");
  *out_manager = NULL;
  if (!ctx) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_mem_manager_create: ctx is NULL");
  return loom__hmm_create(&ctx->devices, opts, out_manager);
}

loom_status loom__context_memory_init(loom_context *ctx) {
  return loom_mem_manager_create(ctx, NULL, &ctx->memory);
}

loom_status loom_context_memory(loom_context *ctx, loom_mem_manager **out_manager) {
  if (!out_manager) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_context_memory: out_manager is NULL");
  *out_manager = NULL;
  if (!ctx) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_context_memory: ctx is NULL");
  *out_manager = ctx->memory;
  return LOOM_OK;
}

void loom__context_memory_release(loom_context *ctx) {
  loom_mem_manager_destroy(ctx->memory);
  ctx->memory = NULL;
}
