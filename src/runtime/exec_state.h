/* The executor's state, shared by its two rooms: exec.c (values, storage, ops, outputs: one
 * graph's run) and exec_loop.c (loop ops: a body per piece, streamed slices, merged results).
 * Private to those two files; the rest of the runtime calls exec.h. */
#ifndef LOOM_RUNTIME_EXEC_STATE_H
#define LOOM_RUNTIME_EXEC_STATE_H

#include "hmm/hmm.h"
#include "runtime/exec.h"

/* How the executor allocates: plain device memory (a cl_mem on OpenCL, which kernels take as
 * it is; host memory on a host node) of exactly the size asked, so the node counts what the
 * meter counts. */
#define EXEC_ALLOC_FLAGS (LOOM_MEM_DEVICE_LOCAL | LOOM_MEM_EXACT_SIZE)

/* One allocation of the executor: an HMM buffer on the device's node, acquired there while
 * the executor uses it (so the HMM never evicts or moves it). */
typedef struct block {
  loom_buffer *buffer; /* NULL: nothing allocated */
  loom_mem_handle handle;
  bool acquired;
  bool borrowed; /* the caller's buffer (an input buffer): never freed here */
  void *ptr;     /* what the backend addresses: the cl_mem, or the host pointer */
} block;

/* Bytes of per-value arrays a state holds in itself (exec_state.small_arrays): about 200 a
 * value, so graphs of up to 9 values. */
enum { EXEC_SMALL_ARRAYS = 2048 };

/* A library's extra temporaries (loom__op_call.temp_take), held while its op runs. */
enum { TEMP_SLOTS = 4 };
typedef struct temp_slot {
  block b;
  int64_t bytes;
  bool used;
} temp_slot;

/* Host memory and graphs a queued write may still read from: freed once the run has
 * synchronized (a loop's body state goes before its run does). */
typedef struct deferred {
  struct deferred *next;
  void *host;
  loom_graph *graph;
} deferred;

/* The state of one execution. Storage is per base value (see loom__layout). A loop's body runs
 * in a state of its own (nested), on the run's meter, device and memory, whose parameters and
 * in-place results are bound to storage the loop owns. */
typedef struct exec_state {
  const loom_graph *g;
  const loom__backend *be;
  void *dev;
  loom_mem_manager *mem;
  int32_t node; /* the device's memory node in mem */
  loom__layout *layouts;
  void **data;            /* per value: its base's storage as the backend addresses it */
  int64_t *bytes;         /* per value: counted bytes of its storage */
  block *blocks;          /* per base value: its buffer, when the executor allocated one */
  int32_t *last_use;      /* per base value: schedule position of its last reader */
  uint8_t (*scalars)[16]; /* per value: a fill's one element (host) */
  int32_t *fill_slot;     /* per fill value on a device: its slot in fills */
  block fills;            /* device copies of the fill scalars, 16 bytes a slot; not metered */
  uint8_t *fill_host;     /* their host copy, written from until the run synchronizes */
  int64_t fill_bytes;
  temp_slot temps[TEMP_SLOTS];
  loom__meter *meter;
  loom_buffer *const *input_buffers; /* exec options' */
  bool keep_pool;                    /* exec options' */
  bool no_wait;                      /* exec options' */
  /* The top state's: a write from host memory was queued (the run must wait for it before
   * that memory may go, so it cannot return without waiting: no_wait). */
  bool queued_host;
  /* Per parameter, the caller's host tensor a loop streams slices of: at the top the inputs;
   * in a body, `passed` (data NULL for a parameter no host tensor stands behind). */
  const loom_tensor *inputs;
  loom_tensor *outputs; /* the caller's outputs (a loop streams pieces into them) */
  /* Nested states only (NULL or false at the top): */
  bool nested;
  loom_tensor *passed;     /* per parameter: the host input its loop passed through whole */
  int64_t *base_off;       /* per base value: element offset of its storage in data[] */
  uint8_t *bound;          /* per value: storage bound by the loop (a bound_kind), never allocated here */
  struct exec_state *root; /* the run's top state (itself at the top) */
  deferred *deferred;      /* the top state's: freed after the run synchronized */
  /* Last, and not cleared with the rest: the per-value arrays of a graph of a few values
   * (state_arrays), so that a small run needs no calloc and free of its own (they were 9% of
   * the instructions of a one-add run, loom-bench overhead's per run). A state is never
   * copied or moved once initialised: the arrays may point into it. */
  _Alignas(16) unsigned char small_arrays[EXEC_SMALL_ARRAYS];
} exec_state;

/* How a nested state's value is bound to storage its loop (or fused op) owns (exec_state.bound). */
enum bound_kind {
  BOUND_NONE,
  BOUND_SLOT, /* a slot of a result: written in place, counted as part of that result */
  /* A dot whose result a loop sums (dot_into_sum): computed in the loop's sum itself, counted
   * as the piece's result all the same, so the meter still follows the estimate; the first
   * piece writes the sum, the others add to it (loom__op_call.accumulate). */
  BOUND_SUM_FIRST,
  BOUND_SUM_ADD,
};

/* exec.c's storage and scheduling steps that a loop's pieces use too (each is documented at its
 * definition). */
void loom__exec_block_drop(block *b);
loom_status loom__exec_block_end_access(block *b);
void loom__exec_block_give(exec_state *st, block *b, int64_t bytes);
loom_status loom__exec_block_take(exec_state *st, int64_t bytes, int32_t id, const char *what,
                                  const void *src, block *out);
void loom__exec_compute_last_use(exec_state *st, const int32_t *order);
void loom__exec_defer_free(exec_state *st, void *host, loom_graph *graph);
void loom__exec_state_deinit(exec_state *st);
loom_status loom__exec_state_init(exec_state *st, const loom_graph *g, const loom__exec_device *dev,
                                  loom__meter *meter);
void loom__exec_fit_pool(exec_state *st, int64_t keep);
loom_status loom__exec_meter_take(exec_state *st, int64_t bytes, int32_t id, const char *what);
void loom__exec_release(exec_state *st, int32_t base);
loom_status loom__exec_run_ops(exec_state *st, const int32_t *order);
void loom__exec_view_of(const exec_state *st, int32_t id, loom__dview *v);

/* Runs a loop op (exec_loop.c): its body once per piece, its results merged in place. */
loom_status loom__exec_run_loop(exec_state *st, const loom__op *op);

#endif
