/* The default manager of each context (loom_context_memory): made by loom_context_create,
 * kept in the context, destroyed by loom_context_destroy. It is made with the context rather
 * than on first use so that every run finds it there (a run never makes it half-way, and a
 * bad LOOM_MEM_LIMIT is reported where the context is made). */
#include "hmm/hmm.h"
#include "runtime/context.h"

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
