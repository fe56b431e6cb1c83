/* Admission (hmm_admit.c, issue 32): stages under runner limits wait in turn for room on a
 * node. Driven here directly on the host node of a manager of its own, with threads standing
 * for runs: the order of arrival, the deadline, and the refusals that do not wait. */
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "hmm_test.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A manager of its own over ctx's nodes, its host node limited to 8 MiB. */
static loom_mem_manager *admit_manager(loom_context *ctx, int32_t *host) {
  loom_mem_manager_options o;
  hmm_test_options(&o, LOOM_MEM_MODE_MANUAL, LOOM_MEM_POLICY_NONE);
  o.limits = "host0:8MiB";
  loom_mem_manager *m = NULL;
  if (loom_mem_manager_create(ctx, &o, &m) != LOOM_OK) return NULL;
  *host = hmm_node(m, "host0");
  return m;
}

typedef struct waiter {
  loom_mem_manager *m;
  int32_t node;
  loom__hmm_admission a;
  loom_status s;
  int32_t *order, *n_order; /* where it writes its id once admitted (under order_lock) */
  pthread_mutex_t *order_lock;
  int32_t id;
} waiter;

static void *wait_for_room(void *arg) {
  waiter *w = arg;
  w->s = loom__hmm_admit(w->m, w->node, &w->a);
  if (w->s == LOOM_OK) {
    pthread_mutex_lock(w->order_lock);
    w->order[(*w->n_order)++] = w->id;
    pthread_mutex_unlock(w->order_lock);
    loom__hmm_admit_end(w->m, w->node, &w->a);
  }
  return NULL;
}

/* Waits (up to 5 s) until n admissions are queued on the node. */
static bool queued(loom_mem_manager *m, int32_t node, int32_t n) {
  for (double t0 = now_s(); now_s() - t0 < 5;) {
    loom__hmm_lock(m);
    int32_t k = 0;
    for (const loom__hmm_admission *a = m->nodes[node].admit_queue; a; a = a->next) k++;
    loom__hmm_unlock(m);
    if (k >= n) return true;
    nanosleep(&(struct timespec){0, 1000000}, NULL);
  }
  return false;
}

/* A holds 5 MiB of a 6 MiB runner limit; B (5.5 MiB) arrives, then C (1 MiB, which would fit
 * beside A but not beside B): C does not pass B, and both run once A ends, in order. */
TEST(admission_keeps_the_order_of_arrival) {
  loom_context *ctx = NULL;
  ASSERT_OK(hmm_test_context(&ctx));
  int32_t host = -1;
  loom_mem_manager *m = admit_manager(ctx, &host);
  ASSERT_TRUE(m != NULL && host >= 0);
  loom__hmm_admission a = {.limit = {.bytes = 6 * MiB}, .bytes = 5 * MiB};
  ASSERT_OK(loom__hmm_admit(m, host, &a));
  int32_t order[2], n_order = 0;
  pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  waiter w[2];
  pthread_t th[2];
  for (int32_t i = 0; i < 2; i++) {
    w[i] = (waiter){.m = m, .node = host, .order = order, .n_order = &n_order, .order_lock = &lock, .id = i};
    w[i].a.limit.bytes = 6 * MiB;
    w[i].a.bytes = i == 0 ? 11 * MiB / 2 : 1 * MiB;
    ASSERT_EQ(pthread_create(&th[i], NULL, wait_for_room, &w[i]), 0);
    ASSERT_TRUE(queued(m, host, i + 1)); /* B is queued before C arrives */
  }
  nanosleep(&(struct timespec){0, 50000000}, NULL); /* C has had time to pass B, were it to */
  pthread_mutex_lock(&lock);
  ASSERT_EQ(n_order, 0);
  pthread_mutex_unlock(&lock);
  loom__hmm_admit_end(m, host, &a);
  for (int32_t i = 0; i < 2; i++) pthread_join(th[i], NULL);
  ASSERT_OK(w[0].s);
  ASSERT_OK(w[1].s);
  ASSERT_EQ(n_order, 2);
  ASSERT_EQ(order[0], 0);
  loom_mem_node_stats ms;
  ASSERT_OK(loom_mem_stats(m, host, &ms));
  ASSERT_EQ(ms.admission_waits, 2);
  ASSERT_EQ(ms.limit, 8 * MiB); /* every runner limit out of force */
  ASSERT_TRUE(m->nodes[host].admitted == 0 && m->nodes[host].admitted_bytes == 0);
  loom_mem_manager_destroy(m);
  loom_context_destroy(ctx);
}

/* With a deadline, a stage that finds no room gives up after it, saying it waited. */
TEST(admission_gives_up_at_its_deadline) {
  loom_context *ctx = NULL;
  ASSERT_OK(hmm_test_context(&ctx));
  int32_t host = -1;
  loom_mem_manager *m = admit_manager(ctx, &host);
  ASSERT_TRUE(m != NULL);
  loom__hmm_admission a = {.limit = {.bytes = 4 * MiB}, .bytes = 3 * MiB};
  ASSERT_OK(loom__hmm_admit(m, host, &a));
  loom__hmm_admission b = {.limit = {.bytes = 4 * MiB}, .bytes = 2 * MiB, .wait_seconds = 0.2};
  double t0 = now_s();
  ASSERT_EQ(loom__hmm_admit(m, host, &b), LOOM_ERR_OUT_OF_MEMORY);
  double took = now_s() - t0;
  ASSERT_TRUE(took >= 0.19 && took < 5);
  ASSERT_TRUE(strstr(loom_last_error(), "waited") != NULL);
  ASSERT_TRUE(!b.admitted && m->nodes[host].admit_queue == NULL);
  /* Not waiting at all: refused at once. */
  b.wait_seconds = -1;
  t0 = now_s();
  ASSERT_EQ(loom__hmm_admit(m, host, &b), LOOM_ERR_OUT_OF_MEMORY);
  ASSERT_TRUE(now_s() - t0 < 0.15);
  loom__hmm_admit_end(m, host, &a);
  /* Room again: admitted at once. */
  ASSERT_OK(loom__hmm_admit(m, host, &b));
  ASSERT_TRUE(b.waited_seconds < 0.15);
  loom__hmm_admit_end(m, host, &b);
  loom_mem_manager_destroy(m);
  loom_context_destroy(ctx);
}

/* What could never fit (more than the node's own limit, or its runner limit) is refused at
 * once, even with no deadline. */
TEST(admission_refuses_at_once_what_could_never_fit) {
  loom_context *ctx = NULL;
  ASSERT_OK(hmm_test_context(&ctx));
  int32_t host = -1;
  loom_mem_manager *m = admit_manager(ctx, &host);
  ASSERT_TRUE(m != NULL);
  loom__hmm_admission big = {.limit = {.bytes = 16 * MiB}, .bytes = 9 * MiB};
  double t0 = now_s();
  ASSERT_EQ(loom__hmm_admit(m, host, &big), LOOM_ERR_OUT_OF_MEMORY);
  ASSERT_TRUE(now_s() - t0 < 0.15);
  ASSERT_TRUE(strstr(loom_last_error(), "more than its") != NULL);
  loom_mem_manager_destroy(m);
  loom_context_destroy(ctx);
}

/* A buffer held in use with no stage admitted: the stage waits while the node is at work, and
 * gives up once it has stood still for 10 s (nobody is releasing the room). */
TEST(admission_gives_up_when_the_room_is_held_still) {
  loom_context *ctx = NULL;
  ASSERT_OK(hmm_test_context(&ctx));
  int32_t host = -1;
  loom_mem_manager *m = admit_manager(ctx, &host);
  ASSERT_TRUE(m != NULL);
  loom_buffer *b = NULL;
  loom_mem_handle h;
  ASSERT_OK(loom_buffer_allocate(m, 6 * MiB, LOOM_U8, host, 0, &b));
  ASSERT_OK(loom_buffer_acquire(b, host, LOOM_ACCESS_WRITE, &h));
  loom__hmm_admission one = {.limit = {.bytes = 4 * MiB}, .bytes = 1 * MiB};
  double t0 = now_s();
  ASSERT_EQ(loom__hmm_admit(m, host, &one), LOOM_ERR_OUT_OF_MEMORY);
  double took = now_s() - t0;
  ASSERT_TRUE(took >= 9.9 && took < 30);
  ASSERT_TRUE(strstr(loom_last_error(), "freed nothing for 10 s") != NULL);
  ASSERT_OK(loom_buffer_release(b, &h));
  loom_buffer_free(b);
  ASSERT_OK(loom__hmm_admit(m, host, &one));
  loom__hmm_admit_end(m, host, &one);
  loom_mem_manager_destroy(m);
  loom_context_destroy(ctx);
}
