/* Admission: a stage that runs under a runner limit waits for room on its node instead of
 * failing beside the stages of other runs (issue 32).
 *
 * Each node keeps a queue of the stages that asked to run there, in order of arrival, and the
 * bytes it has admitted (the estimated peaks of the stages running). The oldest waiter is
 * admitted once its peak fits beside what is admitted, under the limit its runner limit would
 * put in force, and the node can be brought under that limit (loom__hmm_runner_limit_begin's
 * rule); a later waiter never passes it, so a large stage is not starved by small ones.
 *
 * No deadlock: a stage is admitted for its whole estimated peak at once, and a run holds no
 * admission while it waits for another (its stages run one after the other; a shared run's
 * worker holds one node's at a time, and never waits for a second). Held values a run keeps on
 * a device between stages are not admitted bytes: they are evictable, and making room evicts
 * them.
 *
 * A stage waits while a stage of another run holds the node. One that could never fit (its
 * peak above the node's own limit or its runner limit) fails at once. Where no stage is
 * admitted, the room is held by buffers in use outside admission: another run without a limit
 * (loom_graph_run), or the program's own; the stage waits while the node's allocations and frees
 * go on, and fails once they have stood still for ADMIT_STALL_SECONDS (buffers nobody is about to
 * release). Waiting wakes on every stage's end, and every few milliseconds besides, so that room
 * made outside stages is seen too. */
#include <errno.h>
#include <time.h>

#include "hmm/hmm.h"

/* How often a waiter looks again without being woken: room may come from a buffer freed
 * outside any stage, which wakes nobody. */
#define ADMIT_POLL_NS 5000000L
/* How long the node may stand still (no allocation, no free) while no stage is admitted before
 * a waiting stage gives up: what holds the room then is not about to release it. */
#define ADMIT_STALL_SECONDS 10.0

static void queue_push(loom__hmm_node *n, loom__hmm_admission *a) {
  loom__hmm_admission **p = &n->admit_queue;
  while (*p) p = &(*p)->next;
  a->next = NULL;
  *p = a;
}

static void queue_remove(loom__hmm_node *n, loom__hmm_admission *a) {
  for (loom__hmm_admission **p = &n->admit_queue; *p; p = &(*p)->next)
    if (*p == a) {
      *p = a->next;
      break;
    }
  a->next = NULL;
}

/* The node's limit were a's runner limit in force beside those already in force. */
static int64_t limit_with(const loom__hmm_node *n, const loom__hmm_admission *a) {
  int64_t bytes = n->own_limit;
  for (const loom__hmm_runner_limit *r = n->runner_limits; r; r = r->next) bytes = LOOM_MIN(bytes, r->bytes);
  return LOOM_MIN(bytes, a->limit.bytes);
}

/* Tries to admit a, the head of the queue: its runner limit put in force (the node brought
 * under it) when its peak fits beside what is admitted. The lock is held. */
static bool try_admit(loom_mem_manager *m, int32_t node, loom__hmm_admission *a) {
  loom__hmm_node *n = &m->nodes[node];
  if (n->admitted_bytes + a->bytes > limit_with(n, a)) return false;
  /* The runner limit's own rule; its failure (what the node holds in use cannot be brought
   * under the new limit yet) is a reason to wait, not an error. */
  if (loom__hmm_runner_limit_begin_locked(m, node, &a->limit) != LOOM_OK) return false;
  a->crowded = n->admitted > 0;
  n->admitted_bytes += a->bytes;
  n->admitted++;
  a->serial = ++n->admissions;
  a->admitted = true;
  return true;
}

static loom_status never_fits(const loom__hmm_node *n, const loom__hmm_admission *a) {
  char need[32], lim[32];
  int64_t cap = LOOM_MIN(n->own_limit, a->limit.bytes);
  return loom__error(LOOM_ERR_OUT_OF_MEMORY, "out of memory on %s: a stage needs %s, more than its %s limit",
                     n->id, loom__format_bytes_vs(a->bytes, cap, need, sizeof need),
                     loom__format_bytes_vs(cap, a->bytes, lim, sizeof lim));
}

/* Why a stage was refused room it could have beside other runs' stages. */
typedef enum refusal { NOTHING_TO_WAIT_FOR, NOT_TO_WAIT, DEADLINE } refusal;

static loom_status no_room(const loom__hmm_node *n, const loom__hmm_admission *a, refusal why) {
  char need[32], used[32], lim[32];
  loom__format_bytes(a->bytes, need, sizeof need);
  loom__format_bytes(n->stats.in_use, used, sizeof used);
  loom__format_bytes(limit_with(n, a), lim, sizeof lim);
  if (why == NOTHING_TO_WAIT_FOR)
    return loom__error(LOOM_ERR_OUT_OF_MEMORY,
                       "out of memory on %s: a stage needs %s, %s of its %s limit held by buffers that are "
                       "pinned or in use outside any run's stage, which freed nothing for %.0f s",
                       n->id, need, used, lim, ADMIT_STALL_SECONDS);
  if (why == NOT_TO_WAIT)
    return loom__error(LOOM_ERR_OUT_OF_MEMORY,
                       "out of memory on %s: a stage needs %s beside what other runs hold (%s of its %s "
                       "limit in use), and was not to wait for it",
                       n->id, need, used, lim);
  return loom__error(LOOM_ERR_OUT_OF_MEMORY,
                     "out of memory on %s: a stage needing %s waited %.3g s for room (its deadline), %s of "
                     "its %s limit still held by other runs",
                     n->id, need, a->wait_seconds, used, lim);
}

/* Waits on the manager's condition until woken, ADMIT_POLL_NS or the deadline, whichever
 * first; false when the deadline has passed. The lock is held. */
static bool wait_a_while(loom_mem_manager *m, double deadline) {
  double now = loom__now();
  if (deadline > 0 && now >= deadline) return false;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  long ns = ADMIT_POLL_NS;
  if (deadline > 0 && (deadline - now) * 1e9 < (double)ns) ns = (long)((deadline - now) * 1e9) + 1;
  ts.tv_nsec += ns;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  int rc = pthread_cond_timedwait(&m->admit_cond, &m->lock, &ts);
  (void)rc; /* woken, timed out or spurious: the caller looks again either way */
  return true;
}

loom_status loom__hmm_admit(loom_mem_manager *m, int32_t node, loom__hmm_admission *a) {
  a->admitted = a->crowded = false;
  a->waited_seconds = 0;
  loom__hmm_lock(m);
  loom__hmm_node *n = &m->nodes[node];
  if (a->whole) a->bytes = LOOM_MIN(n->own_limit, a->limit.bytes);
  if (a->bytes > LOOM_MIN(n->own_limit, a->limit.bytes)) {
    loom_status s = never_fits(n, a);
    loom__hmm_unlock(m);
    return s;
  }
  queue_push(n, a);
  double t0 = loom__now(), deadline = a->wait_seconds > 0 ? t0 + a->wait_seconds : 0, still = t0;
  int64_t activity = n->stats.allocations + n->stats.frees;
  bool counted = false;
  loom_status s = LOOM_OK;
  for (;;) {
    if (n->admit_queue == a && try_admit(m, node, a)) break;
    if (a->wait_seconds < 0) {
      s = no_room(n, a, NOT_TO_WAIT);
      break;
    }
    /* Another run's stage (or a waiter ahead) will make room; else only a node still at work. */
    bool others = n->admitted > 0 || n->admit_queue != a;
    if (others || n->stats.allocations + n->stats.frees != activity) {
      activity = n->stats.allocations + n->stats.frees;
      still = loom__now();
    } else if (loom__now() - still >= ADMIT_STALL_SECONDS) {
      s = no_room(n, a, NOTHING_TO_WAIT_FOR);
      break;
    }
    if (!counted) n->stats.admission_waits++;
    counted = true;
    if (!wait_a_while(m, deadline)) {
      s = no_room(n, a, DEADLINE);
      break;
    }
  }
  queue_remove(n, a);
  a->waited_seconds = loom__now() - t0;
  if (counted) n->stats.admission_wait_us += (int64_t)(a->waited_seconds * 1e6);
  /* The next waiter may fit now (beside a, or because a gave up). */
  pthread_cond_broadcast(&m->admit_cond);
  loom__hmm_unlock(m);
  return s;
}

void loom__hmm_admit_end(loom_mem_manager *m, int32_t node, loom__hmm_admission *a) {
  if (!a->admitted) return;
  loom__hmm_runner_limit_end(m, node, &a->limit);
  loom__hmm_lock(m);
  loom__hmm_node *n = &m->nodes[node];
  n->admitted_bytes -= a->bytes;
  n->admitted--;
  a->crowded = a->crowded || n->admissions != a->serial;
  a->admitted = false;
  pthread_cond_broadcast(&m->admit_cond);
  loom__hmm_unlock(m);
}
