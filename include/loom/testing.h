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

#ifdef __cplusplus
}
#endif
#endif
