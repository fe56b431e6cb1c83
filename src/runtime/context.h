/* The context's insides, shared by the runtime modules. */
#ifndef LOOM_RUNTIME_CONTEXT_H
#define LOOM_RUNTIME_CONTEXT_H

#include <pthread.h>

#include "core/core.h"
#include "devices/devices.h"
#include "loom/runtime.h"
#include "runtime/stage_history.h"

struct loom__exec_table;
struct loom_mem_manager;

struct loom_context {
  char *device_filter;   /* the selection the context was made with, owned; NULL: all */
  loom__devices devices; /* the selected devices, their memory nodes, the host, the notes */
  /* Devices opened for running graphs (runtime/backends.c), made on first use; owned. */
  struct loom__exec_table *exec;
  /* The default memory manager (loom_context_memory), made with the context. Owned. */
  struct loom_mem_manager *memory;
  /* Stages' measured times by footprint and device, for the shared runner's dmda. */
  loom__stage_history history;
};

/* Makes the context's default manager (loom_context_memory), with the default options:
 * called by loom_context_create once the devices are known (runtime/memory.c). Errors: as
 * loom_mem_manager_create (a LOOM_MEM_LIMIT that does not parse: INVALID_ARGUMENT naming it). */
loom_status loom__context_memory_init(loom_context *ctx);
/* Destroys the context's default manager; called by loom_context_destroy. */
void loom__context_memory_release(loom_context *ctx);

#endif
