/* Memory-limit specs: "ocl0:256MiB,cpu0:4GiB" (LOOM_MEM_LIMIT, loom_mem_manager_options.limits,
 * a plan's runner limits), parsed once here for the memory manager and the splitter. */
#ifndef LOOM_CORE_LIMITS_H
#define LOOM_CORE_LIMITS_H

#include "core/core.h"

typedef struct loom__mem_limit {
  char id[16];
  int64_t bytes;
} loom__mem_limit;

/* Parses "ocl0:256MiB,cpu0:4GiB" (blanks allowed around items; an empty item, as in "a,,b"
 * or "a,", is refused as loom_runners_parse refuses it; a blank text is no items).
 * *out_items is owned by the caller (loom__free); NULL when there are none.
 * Errors: INVALID_ARGUMENT naming the entry and why, OUT_OF_MEMORY. */
loom_status loom__mem_limits_parse(const char *text, const char *origin, loom__mem_limit **out_items,
                                   int32_t *out_count);
/* Whether `id` has the form of a device or node id (cpu0, ocl12, cuda0, host1). */
bool loom__mem_id_well_formed(const char *id);

#endif
