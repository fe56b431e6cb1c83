/* loom_run_submit and loom_run_buffers_submit: a run on a thread of its own, completed by
 * loom_run_wait or loom_run_test. A run waits for the runs its options name in `after` before
 * it reads its inputs, so one run's outputs array may be the next one's inputs; everything
 * else runs side by side, as loom_run does when called from several threads (the memory
 * manager's limits hold for all of them together).
 *
 * A handle is shared by the caller (until it completes the run) and by the thread, and by every
 * later run that waits for it (until that run has started): the last of them frees it, so a
 * caller may complete a run before the runs that wait for it have started. */
#include <pthread.h>
#include <string.h>

#include "core/core.h"
#include "loom/runtime.h"

struct loom_run_handle {
  pthread_mutex_t lock;
  pthread_cond_t finished_cond;
  int32_t refs;   /* the caller (until completed), the thread, each run waiting for this one */
  bool finished;  /* the run returned: status and message are set */
  bool completed; /* the caller called loom_run_wait or a loom_run_test that finished */
  loom_status status;
  char *message; /* the run's loom_last_error where it failed */

  loom_context *ctx;
  const loom_plan *plan;
  loom_run_options opts;     /* a copy, `after` pointing at `after` below */
  loom_run_handle **after;   /* owned array of the runs to wait for (each retained) */
  const loom_tensor *inputs; /* host runs */
  loom_tensor *outputs;
  loom_buffer *const *in_bufs; /* resident runs */
  loom_buffer **out_bufs;
  bool resident; /* a loom_run_buffers_submit run */
  int32_t n_inputs, n_outputs;
  loom_run_stats *stats;
};

static void handle_release(loom_run_handle *h) {
  pthread_mutex_lock(&h->lock);
  bool last = --h->refs == 0;
  pthread_mutex_unlock(&h->lock);
  if (!last) return;
  for (int32_t i = 0; i < h->opts.n_after; i++) handle_release(h->after[i]);
  loom__free(h->after);
  loom__free(h->message);
  pthread_cond_destroy(&h->finished_cond);
  pthread_mutex_destroy(&h->lock);
  loom__free(h);
}

/* Waits until `h` has finished; returns its status, its message in *out_message (borrowed). */
static loom_status wait_finished(loom_run_handle *h, const char **out_message) {
  pthread_mutex_lock(&h->lock);
  while (!h->finished) pthread_cond_wait(&h->finished_cond, &h->lock);
  loom_status s = h->status;
  *out_message = h->message ? h->message : "";
  pthread_mutex_unlock(&h->lock);
  return s;
}

/* The runs `h` waits for, in order; the first failure fails `h` too, naming it. */
static loom_status wait_predecessors(loom_run_handle *h) {
  for (int32_t i = 0; i < h->opts.n_after; i++) {
    const char *msg = NULL;
    loom_status s = wait_finished(h->after[i], &msg);
    if (s) return loom__error(s, "the run this one starts after (options.after[%d]) failed: %s", (int)i, msg);
  }
  return LOOM_OK;
}

static void *run_thread(void *arg) {
  loom_run_handle *h = arg;
  loom_status s = wait_predecessors(h);
  if (!s) {
    loom_run_options o = h->opts;
    o.after = NULL;
    o.n_after = 0;
    if (h->resident)
      s = loom_run_buffers(h->ctx, h->plan, &o, h->in_bufs, h->n_inputs, h->out_bufs, h->n_outputs, h->stats);
    else
      s = loom_run(h->ctx, h->plan, &o, h->inputs, h->n_inputs, h->outputs, h->n_outputs, h->stats);
  }
  char *message = s ? loom__strdup(loom_last_error()) : NULL;
  pthread_mutex_lock(&h->lock);
  h->status = s;
  h->message = message;
  h->finished = true;
  pthread_cond_broadcast(&h->finished_cond);
  pthread_mutex_unlock(&h->lock);
  handle_release(h);
  return NULL;
}

/* Retains each run of opts->after into h->after, checking it is still in flight on ctx. */
static loom_status take_predecessors(loom_run_handle *h, const loom_run_options *opts) {
  if (opts->n_after < 0 || (opts->n_after > 0 && !opts->after))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_run_submit: %d runs in options.after with no array",
                       (int)opts->n_after);
  if (!opts->n_after) return LOOM_OK;
  h->after = loom__calloc((size_t)opts->n_after, sizeof *h->after);
  if (!h->after) return loom__oom("the runs a run starts after");
  for (int32_t i = 0; i < opts->n_after; i++) {
    loom_run_handle *p = opts->after[i];
    if (!p || p->ctx != h->ctx)
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_run_submit: options.after[%d] is %s", (int)i,
                         p ? "a run of another context" : "NULL");
    pthread_mutex_lock(&p->lock);
    bool completed = p->completed;
    if (!completed) p->refs++;
    pthread_mutex_unlock(&p->lock);
    if (completed)
      return loom__error(LOOM_ERR_INVALID_ARGUMENT,
                         "loom_run_submit: options.after[%d] was already completed by loom_run_wait or "
                         "loom_run_test",
                         (int)i);
    h->after[h->opts.n_after++] = p;
  }
  return LOOM_OK;
}

static loom_status handle_create(loom_context *ctx, const loom_plan *plan, const loom_run_options *opts,
                                 loom_run_handle **out) {
  *out = NULL;
  if (!ctx || !plan) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_run_submit: NULL context or plan");
  loom_run_handle *h = loom__calloc(1, sizeof *h);
  if (!h) return loom__oom("a run handle");
  pthread_mutex_init(&h->lock, NULL);
  pthread_cond_init(&h->finished_cond, NULL);
  h->refs = 1;
  h->ctx = ctx;
  h->plan = plan;
  if (opts)
    h->opts = *opts;
  else
    loom_run_options_init(&h->opts);
  h->opts.n_after = 0;
  loom_status s = opts ? take_predecessors(h, opts) : LOOM_OK;
  h->opts.after = h->after;
  if (s) {
    handle_release(h);
    return s;
  }
  *out = h;
  return LOOM_OK;
}

/* Starts h's thread (detached: the handle's references, not a join, say when it is done). */
static loom_status handle_start(loom_run_handle *h, loom_run_handle **out_handle) {
  if (h->stats) memset(h->stats, 0, sizeof *h->stats);
  h->refs++; /* the thread's */
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_t thread;
  int err = pthread_create(&thread, &attr, run_thread, h);
  pthread_attr_destroy(&attr);
  if (err) {
    h->refs--;
    handle_release(h);
    return loom__error(LOOM_ERR_UNAVAILABLE, "loom_run_submit: no thread for the run (%s)", strerror(err));
  }
  *out_handle = h;
  return LOOM_OK;
}

loom_status loom_run_submit(loom_context *ctx, const loom_plan *plan, const loom_run_options *opts,
                            const loom_tensor *inputs, int32_t n_inputs, loom_tensor *outputs,
                            int32_t n_outputs, loom_run_stats *stats, loom_run_handle **out_handle) {
  if (!out_handle) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_run_submit: NULL out_handle");
  *out_handle = NULL;
  loom_run_handle *h = NULL;
  loom_status s = handle_create(ctx, plan, opts, &h);
  if (s) return s;
  h->inputs = inputs;
  h->outputs = outputs;
  h->n_inputs = n_inputs;
  h->n_outputs = n_outputs;
  h->stats = stats;
  return handle_start(h, out_handle);
}

loom_status loom_run_buffers_submit(loom_context *ctx, const loom_plan *plan, const loom_run_options *opts,
                                    loom_buffer *const *inputs, int32_t n_inputs, loom_buffer **outputs,
                                    int32_t n_outputs, loom_run_stats *stats, loom_run_handle **out_handle) {
  if (!out_handle) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_run_buffers_submit: NULL out_handle");
  *out_handle = NULL;
  if (n_outputs > 0 && !outputs)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_run_buffers_submit: NULL outputs");
  loom_run_handle *h = NULL;
  loom_status s = handle_create(ctx, plan, opts, &h);
  if (s) return s;
  h->in_bufs = inputs;
  h->out_bufs = outputs;
  h->n_inputs = n_inputs;
  h->n_outputs = n_outputs;
  h->stats = stats;
  h->resident = true;
  return handle_start(h, out_handle);
}

/* Completes a finished run: its status, and its message as the caller's last error. */
static loom_status complete(loom_run_handle *h) {
  const char *msg = NULL;
  loom_status s = wait_finished(h, &msg);
  if (s) loom__error(s, "%s", msg);
  pthread_mutex_lock(&h->lock);
  h->completed = true;
  pthread_mutex_unlock(&h->lock);
  handle_release(h);
  return s;
}

loom_status loom_run_wait(loom_run_handle *handle) {
  if (!handle) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_run_wait: NULL handle");
  return complete(handle);
}

loom_status loom_run_test(loom_run_handle *handle, bool *out_done) {
  if (out_done) *out_done = false;
  if (!handle || !out_done) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_run_test: NULL argument");
  pthread_mutex_lock(&handle->lock);
  bool finished = handle->finished;
  pthread_mutex_unlock(&handle->lock);
  if (!finished) return LOOM_OK;
  *out_done = true;
  return complete(handle);
}
