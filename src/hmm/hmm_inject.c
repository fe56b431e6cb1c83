/* Fault injection in the memory manager's node allocations (loom/testing.h): a device that
 * refuses memory its limit promised, for the tests of loom_plan_run's recovery. The host
 * allocator's own injection (core/alloc.c) fails bookkeeping too; this one fails only the
 * memory that holds tensors, so a run can go on after it. */
#include <stdatomic.h>
#include <string.h>
#include <strings.h>

#include "hmm/hmm.h"
#include "loom/testing.h"

static char inject_node[32]; /* "" : every node; set while injection is off */
static _Atomic int64_t inject_nth;
static _Atomic int64_t inject_max_bytes;
static _Atomic int64_t inject_count;
static _Atomic int64_t inject_failures;

void loom_testing_fail_node_allocations(const char *node, int64_t nth, int64_t max_bytes) {
  atomic_store(&inject_nth, 0);
  snprintf(inject_node, sizeof inject_node, "%s", node ? node : "");
  atomic_store(&inject_count, 0);
  atomic_store(&inject_failures, 0);
  atomic_store(&inject_max_bytes, max_bytes < 0 ? 0 : max_bytes);
  atomic_store(&inject_nth, nth > 0 ? nth : 0);
}

int64_t loom_testing_node_allocation_count(void) {
  return atomic_load(&inject_count);
}

int64_t loom_testing_node_allocation_failures(void) {
  return atomic_load(&inject_failures);
}

LOOM_HOT loom_status loom__hmm_injected_refusal(const loom__hmm_node *n, int64_t bytes) {
  int64_t nth = atomic_load(&inject_nth);
  if (nth == 0 || (inject_node[0] && strcasecmp(inject_node, n->id) != 0)) return LOOM_OK;
  int64_t count = atomic_fetch_add(&inject_count, 1) + 1;
  if (count < nth || bytes <= atomic_load(&inject_max_bytes)) return LOOM_OK;
  atomic_fetch_add(&inject_failures, 1);
  char size[32];
  return loom__error(LOOM_ERR_OUT_OF_MEMORY,
                     "out of memory on %s: the device refused %s (injected for testing)", n->id,
                     loom__format_bytes(bytes, size, sizeof size));
}
