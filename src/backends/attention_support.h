/* Which backends of this build run fused attention (attention_support.c). */
#ifndef LOOM_BACKENDS_ATTENTION_SUPPORT_H
#define LOOM_BACKENDS_ATTENTION_SUPPORT_H

#include "ir/attention.h"

/* True when every backend compiled in runs problem `a` as one fused kernel. Thread-safe. */
bool loom__attention_runs_everywhere(const loom__attention *a);

#endif
