/* Four host threads allocating, mapping, writing, reading, acquiring and freeing through one
 * manager under small limits (so they evict each other's buffers), plus shared buffers they
 * all read. Run it under ThreadSanitizer too (a -fsanitize=thread build). */
#include <pthread.h>

#include "hmm_test.h"

enum { THREADS = 4, SLOTS = 8, SHARED = 3, ITERATIONS = 400 };

typedef struct worker {
  loom_mem_manager *m;
  int32_t nodes[LOOM_MEM_MAX_NODES];
  int32_t n_nodes;
  loom_buffer **shared;
  int64_t shared_bytes;
  uint32_t seed;
  int ooms, busy;
  char failure[512];
} worker;

typedef struct slot {
  loom_buffer *b;
  int64_t n;
  uint32_t seed;
} slot;

static uint32_t next_rand(uint32_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 17;
  *s ^= *s << 5;
  return *s;
}

/* OUT_OF_MEMORY (everything pinned by others) and UNAVAILABLE are expected outcomes here. */
static bool tolerate(worker *w, loom_status s, const char *what) {
  if (s == LOOM_OK) return true;
  if (s == LOOM_ERR_OUT_OF_MEMORY) {
    w->ooms++;
    return false;
  }
  if (s == LOOM_ERR_UNAVAILABLE) {
    w->busy++;
    return false;
  }
  if (!w->failure[0])
    snprintf(w->failure, sizeof w->failure, "%s: %s: %s", what, loom_status_string(s), loom_last_error());
  return false;
}

static void check(worker *w, bool ok, const char *what) {
  if (!ok && !w->failure[0]) snprintf(w->failure, sizeof w->failure, "%s", what);
}

static void step(worker *w, slot *slots, uint32_t *rng) {
  slot *sl = &slots[next_rand(rng) % SLOTS];
  int32_t node = w->nodes[next_rand(rng) % (uint32_t)w->n_nodes];
  switch (next_rand(rng) % 7) {
    case 0: /* allocate and fill */
      if (sl->b) break;
      sl->n = 4 * (int64_t)(256 + next_rand(rng) % (128 * 1024));
      sl->seed = next_rand(rng);
      if (!tolerate(w, loom_buffer_allocate(w->m, sl->n, LOOM_F32, node, 0, &sl->b), "allocate")) break;
      if (!tolerate(w, hmm_map_fill(sl->b, sl->n, sl->seed), "map fill")) {
        loom_buffer_free(sl->b); /* contents unknown: do not check them later */
        sl->b = NULL;
      }
      break;
    case 1: { /* map and check */
      void *p = NULL;
      if (!sl->b || !tolerate(w, loom_buffer_map(sl->b, LOOM_ACCESS_READ, &p), "map")) break;
      check(w, hmm_mismatch(p, sl->n, sl->seed) == -1, "data changed under a map");
      tolerate(w, loom_buffer_unmap(sl->b, p), "unmap");
      break;
    }
    case 2: { /* use on a device */
      loom_mem_handle h;
      if (!sl->b || !tolerate(w, loom_buffer_acquire(sl->b, node, LOOM_ACCESS_READ, &h), "acquire")) break;
      tolerate(w, loom_buffer_release(sl->b, &h), "release");
      break;
    }
    case 3: /* read back */
      if (sl->b) check(w, hmm_buffer_mismatch(sl->b, sl->n, sl->seed) == -1, "data lost");
      break;
    case 4: { /* rewrite in place */
      if (!sl->b) break;
      uint32_t seed = next_rand(rng);
      if (tolerate(w, hmm_map_fill(sl->b, sl->n, seed), "rewrite")) sl->seed = seed;
      break;
    }
    case 5: /* free */
      loom_buffer_free(sl->b);
      sl->b = NULL;
      break;
    case 6: { /* a shared buffer, read by everyone */
      loom_buffer *b = w->shared[next_rand(rng) % SHARED];
      loom_mem_handle h;
      if (next_rand(rng) % 2) {
        if (tolerate(w, loom_buffer_acquire(b, node, LOOM_ACCESS_READ, &h), "shared acquire"))
          tolerate(w, loom_buffer_release(b, &h), "shared release");
      } else {
        void *p = NULL;
        if (!tolerate(w, loom_buffer_map(b, LOOM_ACCESS_READ, &p), "shared map")) break;
        check(w, hmm_mismatch(p, w->shared_bytes, 77) == -1, "shared data changed");
        tolerate(w, loom_buffer_unmap(b, p), "shared unmap");
      }
      break;
    }
  }
  check(w, hmm_within_limits(w->m), "a limit was passed");
}

static void *run_worker(void *arg) {
  worker *w = arg;
  slot slots[SLOTS];
  memset(slots, 0, sizeof slots);
  uint32_t rng = w->seed;
  for (int i = 0; i < ITERATIONS && !w->failure[0]; i++) step(w, slots, &rng);
  for (int i = 0; i < SLOTS; i++) {
    if (slots[i].b && !w->failure[0])
      check(w, hmm_buffer_mismatch(slots[i].b, slots[i].n, slots[i].seed) == -1, "data lost at the end");
    loom_buffer_free(slots[i].b);
  }
  return NULL;
}

TEST(hmm_threads_alloc_map_free) {
  loom_context *ctx = NULL;
  ASSERT_OK(hmm_test_context(&ctx));
  loom_mem_manager *m = NULL;
  loom_mem_manager_options o;
  hmm_test_options(&o, LOOM_MEM_MODE_AUTO, LOOM_MEM_POLICY_ADAPTIVE);
  o.limits = "host0:96MiB,ocl0:2MiB,ocl1:3MiB,cuda0:2MiB"; /* the devices this machine has */
  ASSERT_OK(loom_mem_manager_create(ctx, &o, &m));
  ASSERT_OK(loom_mem_trace_enable(m, true)); /* the trace is shared state too */
  const int64_t shared_bytes = 256 * 1024;
  loom_buffer *shared[SHARED] = {NULL};
  for (int i = 0; i < SHARED; i++) {
    ASSERT_OK(loom_buffer_allocate(m, shared_bytes, LOOM_U8, 0, 0, &shared[i]));
    ASSERT_OK(hmm_map_fill(shared[i], shared_bytes, 77));
  }
  worker w[THREADS];
  pthread_t tid[THREADS];
  for (int t = 0; t < THREADS; t++) {
    memset(&w[t], 0, sizeof w[t]);
    w[t].m = m;
    w[t].n_nodes = loom_mem_node_count(m);
    for (int32_t i = 0; i < w[t].n_nodes; i++) w[t].nodes[i] = i;
    w[t].shared = shared;
    w[t].shared_bytes = shared_bytes;
    /* HMM_THREADS_SEED varies the work when hunting a rare interleaving. */
    uint32_t base = getenv("HMM_THREADS_SEED") ? (uint32_t)strtoul(getenv("HMM_THREADS_SEED"), NULL, 10) : 0;
    w[t].seed = 0x9e3779b9u * (uint32_t)(t + 1) + base * 7919u + 1u;
    ASSERT_EQ(pthread_create(&tid[t], NULL, run_worker, &w[t]), 0);
  }
  int ooms = 0;
  for (int t = 0; t < THREADS; t++) {
    pthread_join(tid[t], NULL);
    ooms += w[t].ooms;
  }
  for (int t = 0; t < THREADS; t++)
    if (w[t].failure[0]) loom_test_fail(__FILE__, __LINE__, "thread %d: %s", t, w[t].failure);
  for (int i = 0; i < SHARED; i++) ASSERT_EQ(hmm_buffer_mismatch(shared[i], shared_bytes, 77), -1);
  for (int i = 0; i < SHARED; i++) loom_buffer_free(shared[i]);
  ASSERT_TRUE(hmm_within_limits(m));
  int64_t evictions = 0;
  for (int32_t i = 0; i < loom_mem_node_count(m); i++) {
    loom_mem_node_stats st;
    ASSERT_OK(loom_mem_stats(m, i, &st));
    ASSERT_EQ(st.live_bytes, 0);
    evictions += st.evictions;
  }
  if (loom_mem_node_count(m) > 1) ASSERT_TRUE(evictions > 0);
  printf("    %d threads x %d steps: %lld evictions, %d out-of-memory answers\n", THREADS, ITERATIONS,
         (long long)evictions, ooms);
  loom_mem_manager_destroy(m);
  loom_context_destroy(ctx);
}
