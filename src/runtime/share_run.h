/* The shared runner's state (loom/share.h), shared by its rooms: share.c (the run: stages, the
 * workers, the entry point), share_loop.c (a loop whose pieces the devices share in ranges) and
 * share_devices.c (the devices a run may use, and the graph rewritten for them). Private to
 * those files. */
#ifndef LOOM_RUNTIME_SHARE_RUN_H
#define LOOM_RUNTIME_SHARE_RUN_H

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "hmm/hmm.h"
#include "ir/loop_range.h"
#include "ir/rebuild.h"
#include "loom/share.h"
#include "runtime/combine.h"
#include "runtime/context.h"
#include "runtime/exec.h"
#include "runtime/run_admit.h"
#include "runtime/stage_history.h"
#include "sched/policy.h"
#include "sched/sched.h"
#include "splitter/restage.h"

#define RANGES_PER_DEVICE_DEFAULT 6
/* A free worker whose device would finish later waits at most this long before it looks again
 * (a change wakes it sooner). */
#define DMDA_WAIT_SECONDS 0.05
/* A range's measured time per piece moves the device's rate this far from the one before (the
 * first sets it): one range, slowed by a neighbour's load, does not decide the rest. */
#define RATE_WEIGHT 0.5

/* ---- the run's state ------------------------------------------------------------------------------ */

typedef struct share_run share_run;
typedef struct shared_loop shared_loop;

/* One device's worker: a host thread feeding the device's in-order queue, for the whole run. */
typedef struct worker {
  share_run *run;
  int32_t index;
  const loom__exec_device *dev;
  loom_runner runner;
  loom_share_device_stats *stats;
  /* A device other than cpu0 that computes on the host's cores (an OpenCL CPU device, PoCL's):
   * beside cpu0, which keeps every core busy already, it adds no compute, only takes cores from
   * cpu0 (on 2 cores cpu0 with PoCL's two devices ran kNN in twice cpu0's time alone), so dmda
   * gives it no work where cpu0 is one of the run's devices. */
  bool host_cores;
  bool is_cpu0;
  bool busy;         /* running a task */
  double busy_until; /* when its task is expected done (now where nothing says) */
  pthread_t thread;
  bool started;
} worker;

/* What one device knows of one shared loop. */
typedef struct lane {
  double rate;   /* seconds per piece: model, then measured; 0 unknown */
  bool measured; /* rate comes from its own ranges */
  bool eligible; /* its limit holds a range, and the policy gives it ranges */
  int32_t ranges;
} lane;

/* A loop stage whose pieces the devices share. */
struct shared_loop {
  const loom_graph *sg; /* the stage's graph: the loop, beside sources and views */
  int32_t op, stage;
  loom_tensor *operands;   /* the loop's, in operand order: the stage's inputs, or made[] */
  loom_tensor *made;       /* the operands the stage makes (owned) */
  loom_tensor *params;     /* the stage's inputs on the host: its ins, or read back (read[k]) */
  bool *read;              /* params[k] was read back from a device's buffer (owned) */
  int64_t trips, chunk;    /* pieces; pieces per range */
  int64_t next;            /* the first piece no range has taken */
  int32_t n_ranges, n_out; /* ranges taken so far */
  int32_t running;         /* ranges being run */
  loom__partial *parts;    /* per range taken: its pieces and results (up to trips of them) */
  loom_tensor *results;    /* trips x n_out: range r's at r * n_out */
  lane *lanes;             /* per worker */
};

typedef enum stage_state {
  STAGE_WAITING, /* for stages it reads from */
  STAGE_READY,
  STAGE_BUSY,   /* run whole by a worker, or a loop being opened or combined */
  STAGE_SHARED, /* a loop whose ranges the workers take */
  STAGE_DONE,
} stage_state;

typedef struct stage {
  int32_t index;
  loom_stage_info st;
  stage_state state;
  int32_t loop_op; /* the loop the devices share; -1: run whole */
  shared_loop *L;  /* while shared */
  loom_tensor *ins, *outs;
  /* per input: the buffer holding it where an earlier stage left it on its device (ins[k] then
   * gives its type); per output: the buffer a whole stage on a device hands it out in */
  loom_buffer **in_bufs, **out_bufs;
  double *seconds;    /* per worker: expected seconds from the models, transfers included; NULL: none */
  uint64_t footprint; /* of its graph: its measured times in the context's history */
} stage;

/* A value between stages: a host tensor, the caller's or ours. */
typedef struct held {
  loom_tensor t;    /* a host tensor; or, with buf, only the value's type */
  loom_buffer *buf; /* where a whole stage on a device left it, resident there: the next
                     * stages read it from there (the memory manager copies it where they
                     * run, ordered behind the work that made it) */
  bool owned;
  bool returned;    /* a graph output: kept to the end */
  int32_t readers;  /* stages that read it and are not done */
  int32_t producer; /* the stage making it; -1: a parameter */
} held;

struct share_run {
  loom_context *ctx;
  const loom_share_options *opts;
  const loom_graph *g;  /* the plan's graph */
  const loom_plan *cut; /* the plan: its stages are the run's */
  held *vals;
  worker *workers;
  int32_t n_workers;
  loom__sched_option *options; /* per worker: what the policy chooses among (takes_stage) */
  bool cpu0_runs;              /* cpu0 is one of the devices */
  loom_share_stats *stats;
  loom_sched_platform *models; /* every device's model, where each has one; else NULL */
  stage *stages;
  int32_t n_stages, n_done;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool failed;
  loom_status status;
  char error[1024];
};

/* Functions one room of the shared runner calls in another (each documented at its
 * definition). */
double loom__share_free_at(const worker *w, double now);
bool loom__share_others_busy(const share_run *r, const worker *w);
loom_status loom__share_combine_stage(shared_loop *L, loom_tensor *outs);
bool loom__share_lone_loop(const loom_graph *sg, int32_t *op);
void loom__share_loop_free(shared_loop *L);
loom_status loom__share_loop_open(share_run *r, stage *st, shared_loop **out);
loom_status loom__share_run_range(shared_loop *L, worker *w, int32_t c, int64_t *peak);
bool loom__share_on_host_cores(const loom_device_info *info);
int32_t loom__share_claim_range(share_run *r, shared_loop *L, worker *w, bool waited, double now);

#endif
