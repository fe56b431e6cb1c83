/* Hooks for tests: fault injection in Loom's host allocator. Not for production use. */
#ifndef LOOM_TESTING_H
#define LOOM_TESTING_H

#include <stdint.h>

#include "loom/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Makes the nth host allocation from now (1-based) fail, and every one after it while
 * `sticky` is true. n <= 0 turns injection off. Counts are process-wide and thread-safe. */
LOOM_API void loom_testing_fail_allocation(int64_t nth, int sticky);
/* Allocations made since the last loom_testing_fail_allocation call. */
LOOM_API int64_t loom_testing_allocation_count(void);
/* Host allocations (bookkeeping and tensor data) live now. A leak check compares it before
 * and after a piece of work. */
LOOM_API int64_t loom_testing_live_allocations(void);

/* Makes the memory manager's allocations on a memory node refuse as a device out of memory
 * does, for testing what happens when a device has less memory than its limit promised
 * (another process took some, a driver's own overhead): from the nth allocation on `node`
 * from now (1-based), every allocation there of more than `max_bytes` fails with
 * OUT_OF_MEMORY ("out of memory on ocl0: the device refused 4.00 MiB (injected for
 * testing)"). `node` is a memory node id ("host0" for cpu0's buffers, "ocl0"), or NULL for
 * every node. Allocations served from the node's pool count and fail too: a chunked run takes
 * most of its buffers from the pool, and a sweep over n must reach them. nth <= 0 turns
 * injection off; max_bytes 0 refuses every allocation from the nth on. Independent of
 * loom_testing_fail_allocation. Process-wide; not thread-safe against a run in progress. */
LOOM_API void loom_testing_fail_node_allocations(const char *node, int64_t nth, int64_t max_bytes);
/* Node allocations counted since the last loom_testing_fail_node_allocations call (on the
 * node it named), and how many of them it refused. */
LOOM_API int64_t loom_testing_node_allocation_count(void);
LOOM_API int64_t loom_testing_node_allocation_failures(void);

#ifdef __cplusplus
}
#endif
#endif
