/* The default manager of each context (loom_context_memory): made on first use, kept in the
 * context, destroyed by loom_context_destroy through loom__context_memory_release. */
#include "hmm/hmm.h"
#include "runtime/context.h"

loom_status loom_context_memory(loom_context *ctx, loom_mem_manager **out_manager) {
  if (!out_manager) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_context_memory: out_manager is NULL");
  *out_manager = NULL;
  if (!ctx) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_context_memory: ctx is NULL");
  pthread_mutex_lock(&ctx->memory_lock);
  loom_status s = LOOM_OK;
  if (!ctx->memory) s = loom_mem_manager_create(ctx, NULL, &ctx->memory);
  *out_manager = ctx->memory;
  pthread_mutex_unlock(&ctx->memory_lock);
  return s;
}

void loom__context_memory_release(loom_context *ctx) {
  loom_mem_manager_destroy(ctx->memory);
  ctx->memory = NULL;
}
