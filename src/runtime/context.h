/* The context's insides, shared by the runtime modules. */
#ifndef LOOM_CONTEXT_H
#define LOOM_CONTEXT_H

#include "core/core.h"
#include "loom/runtime.h"
#include "runtime/device.h"

struct loom_context {
  char *device_filter;   /* the selection the context was made with, owned; NULL: all */
  loom__devices devices; /* the selected devices, their memory nodes, the host, the notes */
};

#endif
