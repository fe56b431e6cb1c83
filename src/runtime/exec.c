/* The executor (see exec.h). */
#include <stddef.h>
#include <string.h>

#include "hmm/hmm.h"
#include "io/mapped.h"
#include "runtime/exec.h"
#include "runtime/exec_state.h"

LOOM_HOT loom_status loom__meter_take(loom__meter *m, int64_t bytes, const char *what) {
  if (m->limit > 0 && bytes > m->limit - m->in_use) {
    char need[32], lim[32], used[32];
    return loom__error(LOOM_ERR_OUT_OF_MEMORY, "%s needs %s but only %s of the %s limit is free", what,
                       loom__format_bytes_vs(bytes, m->limit - m->in_use, need, sizeof need),
                       loom__format_bytes_vs(m->limit - m->in_use, bytes, used, sizeof used),
                       loom__format_bytes(m->limit, lim, sizeof lim));
  }
  m->in_use += bytes;
  m->allocations++;
  if (m->in_use > m->peak) m->peak = m->in_use;
  return LOOM_OK;
}

void loom__meter_give(loom__meter *m, int64_t bytes) {
  m->in_use -= bytes;
}

static loom_status run_fused_unfused(exec_state *st, const loom__op *op, const loom__dview *in,
                                     const loom__dview *out);

/* What an allocation is for, as messages name it: `what`, or value id's label where what is
 * NULL. Labels are written only into messages, when a take fails: formatting one for every
 * value cost more than running a small op (loom-bench overhead). */
static const char *what_of(const exec_state *st, int32_t id, const char *what, char *buf, size_t size) {
  if (what) return what;
  char tmp[32];
  snprintf(buf, size, "value '%s'", loom__value_label(st->g, id, tmp, sizeof tmp));
  return buf;
}

/* loom__meter_take for value id (what NULL) or `what`. */
LOOM_HOT loom_status loom__exec_meter_take(exec_state *st, int64_t bytes, int32_t id, const char *what) {
  char buf[96];
  const loom__meter *m = st->meter;
  bool fits = m->limit <= 0 || bytes <= m->limit - m->in_use;
  return loom__meter_take(st->meter, bytes, fits ? "" : what_of(st, id, what, buf, sizeof buf));
}

/* Ends the executor's access to a block, leaving the buffer allocated. The work that used it
 * was queued on the HMM's queue for the node, which orders whatever the HMM does next. */
loom_status loom__exec_block_end_access(block *b) {
  if (!b->acquired) return LOOM_OK;
  b->acquired = false;
  return loom__buffer_release_queued(b->buffer, &b->handle);
}

/* Frees a block's buffer (into the node's pool), or ends the access to a borrowed one.
 * Ending an access to a buffer the executor allocated cannot fail: its handles are never
 * mapped, and never temporary copies to write back. A borrowed buffer's copy made for the
 * access is dropped, queued behind the reads of it. */
LOOM_HOT void loom__exec_block_drop(block *b) {
  (void)loom__exec_block_end_access(b);
  if (!b->borrowed) loom_buffer_free(b->buffer);
  memset(b, 0, sizeof *b);
}

/* Under a limit, the node's pool may keep only what the meter leaves free of it (less the
 * fill scalars' buffer, which the node holds too): the stage then holds at most its limit,
 * cache included, as the executor's own block cache did before the HMM. `keep` (-1: none)
 * spares one cached allocation of that size, which the next allocation reuses. */
void loom__exec_fit_pool(exec_state *st, int64_t keep) {
  if (st->meter->limit > 0)
    loom__hmm_pool_fit(st->mem, st->node, st->meter->limit - st->meter->in_use - st->fill_bytes, keep);
}

/* A buffer of `bytes` on the device's node, acquired there: filled from host memory at src
 * first (a queued write: src stays alive until the run synchronizes) and acquired for
 * reading, or (src NULL) acquired for reading and writing. */
LOOM_HOT static loom_status block_alloc(exec_state *st, int64_t bytes, const void *src, block *out) {
  memset(out, 0, sizeof *out);
  uint32_t access = src ? LOOM_ACCESS_READ : LOOM_ACCESS_READ | LOOM_ACCESS_WRITE;
  loom_status s = loom_buffer_allocate(st->mem, bytes, LOOM_U8, st->node, EXEC_ALLOC_FLAGS, &out->buffer);
  if (!s && src && bytes > 0) {
    st->root->queued_host = true;
    s = loom__buffer_write_queued(out->buffer, 0, src, bytes);
  }
  if (!s) s = loom_buffer_acquire(out->buffer, st->node, access, &out->handle);
  if (s) {
    loom_buffer_free(out->buffer);
    memset(out, 0, sizeof *out);
    return s;
  }
  out->acquired = true;
  out->ptr = out->handle.object ? out->handle.object : out->handle.ptr;
  return LOOM_OK;
}

/* Counts `bytes` for value id (what NULL) or `what` and allocates them (filled from src
 * unless it is NULL). Zero bytes on a device take no buffer (devices refuse empty
 * allocations): out->ptr is NULL. */
LOOM_HOT loom_status loom__exec_block_take(exec_state *st, int64_t bytes, int32_t id, const char *what,
                                           const void *src, block *out) {
  memset(out, 0, sizeof *out);
  loom_status s = loom__exec_meter_take(st, bytes, id, what);
  if (s || (bytes == 0 && !st->be->host_memory)) return s;
  loom__exec_fit_pool(st, bytes);
  s = block_alloc(st, bytes, src, out);
  if (s) {
    char buf[96];
    loom__meter_give(st->meter, bytes);
    loom__error_prefix("%s: ", what_of(st, id, what, buf, sizeof buf));
  }
  return s;
}

LOOM_HOT void loom__exec_block_give(exec_state *st, block *b, int64_t bytes) {
  loom__meter_give(st->meter, bytes);
  loom__exec_block_drop(b);
  loom__exec_fit_pool(st, -1);
}

/* Counts host storage read in place (cpu0's inputs and constants). */
static loom_status take(exec_state *st, int32_t id, int64_t bytes) {
  loom_status s = loom__exec_meter_take(st, bytes, id, NULL);
  if (s) return s;
  st->bytes[id] = bytes;
  return LOOM_OK;
}

/* Device storage for value id, written from host memory at src (an input or a constant). */
static loom_status take_written(exec_state *st, int32_t id, int64_t bytes, const void *src) {
  loom_status s = loom__exec_block_take(st, bytes, id, NULL, src, &st->blocks[id]);
  if (s) return s;
  st->bytes[id] = bytes;
  st->data[id] = st->blocks[id].ptr;
  return LOOM_OK;
}

/* Whether a device's handle is shared virtual memory, which the device's kernels do not
 * address (they take OpenCL buffers): the copy of a caller's buffer allocated without
 * LOOM_MEM_DEVICE_LOCAL on a device that offers SVM. */
static bool svm_on_device(const exec_state *st, const loom_mem_handle *h) {
  return !st->be->host_memory &&
         (h->storage == LOOM_MEM_STORAGE_SVM_FINE || h->storage == LOOM_MEM_STORAGE_SVM_COARSE);
}

/* The caller's buffer as a value the kernels can address where its copy is SVM: read into
 * host memory, then written into the executor's own device buffer (two copies, which the
 * memory manager counts: the price of an input not allocated device-local). The host copy
 * lives until the run has synchronized, as the queued write reads it. */
static loom_status take_svm_copied(exec_state *st, int32_t id, int64_t bytes, loom_buffer *buffer) {
  int64_t whole = 0;
  loom_type_bytes(&st->g->values[id].type, &whole);
  if (bytes < whole) { /* streamed by a loop, which reads its slices where the buffer is */
    char what[96];
    return loom__error(LOOM_ERR_UNSUPPORTED,
                       "%s: a loop streams it from the caller's buffer, whose copy on this device is shared "
                       "virtual memory the kernels do not address: allocate it with LOOM_MEM_DEVICE_LOCAL",
                       what_of(st, id, NULL, what, sizeof what));
  }
  void *host = loom__malloc((size_t)LOOM_MAX(bytes, 1));
  if (!host) return loom__oom("a host copy of an input buffer");
  loom_status s = bytes > 0 ? loom_buffer_read(buffer, 0, host, bytes) : LOOM_OK;
  if (!s) s = take_written(st, id, bytes, host);
  if (s) {
    loom__free(host);
    return s;
  }
  loom__exec_defer_free(st, host, NULL);
  return LOOM_OK;
}

/* Device storage for value id read from the caller's buffer: acquired on the device's node
 * for reading, the HMM bringing it there; counted as an input written in would be. */
static loom_status take_borrowed(exec_state *st, int32_t id, int64_t bytes, loom_buffer *buffer) {
  /* The value's label is formatted only into a message: resident runs pass every input this
   * way on every call (loom-bench calls). A buffer's size never changes: read without the
   * manager's lock. */
  char what[96];
  loom_status s = LOOM_OK;
  if (buffer->bytes < bytes)
    s = loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: its buffer holds %lld bytes, the value %lld",
                    what_of(st, id, NULL, what, sizeof what), (long long)buffer->bytes, (long long)bytes);
  if (!s) s = loom__exec_meter_take(st, bytes, id, NULL);
  if (s) return s;
  block *b = &st->blocks[id];
  s = loom_buffer_acquire(buffer, st->node, LOOM_ACCESS_READ, &b->handle);
  if (!s && svm_on_device(st, &b->handle)) {
    s = loom_buffer_release(buffer, &b->handle);
    loom__meter_give(st->meter, bytes);
    return s ? s : take_svm_copied(st, id, bytes, buffer);
  }
  if (s) {
    loom__meter_give(st->meter, bytes);
    loom__error_prefix("%s: ", what_of(st, id, NULL, what, sizeof what));
    return s;
  }
  b->buffer = buffer;
  b->acquired = b->borrowed = true;
  b->ptr = b->handle.object ? b->handle.object : b->handle.ptr;
  st->bytes[id] = bytes;
  st->data[id] = b->ptr;
  return LOOM_OK;
}

LOOM_HOT void loom__exec_release(exec_state *st, int32_t base) {
  if (st->blocks[base].buffer)
    loom__exec_block_give(st, &st->blocks[base], st->bytes[base]);
  else if (st->bytes[base])
    loom__meter_give(st->meter, st->bytes[base]);
  st->data[base] = NULL;
  st->bytes[base] = 0;
}

/* The dview of value id through its layout. A fill is its scalar: on cpu0 the host copy, on
 * a device its slot of the fill buffer. */
LOOM_HOT void loom__exec_view_of(const exec_state *st, int32_t id, loom__dview *v) {
  const loom__layout *l = &st->layouts[id];
  /* Every field is set (the struct has no padding), so no memset: a `rep stos` of its 152
   * bytes was a tenth of a small op's cost (loom-bench overhead). */
  v->type = st->g->values[id].type;
  memcpy(v->strides, l->strides, sizeof v->strides);
  v->buffer = st->data[l->base];
  v->offset = l->offset + (st->base_off ? st->base_off[l->base] : 0);
  if (st->fill_slot && st->fill_slot[l->base] >= 0) {
    v->buffer = st->fills.ptr;
    v->offset = (int64_t)st->fill_slot[l->base] * 16 / loom_dtype_size(v->type.dtype);
  }
}

/* Schedule positions of each base's last reader; graph outputs live to the end. `order` NULL
 * is the graph's own order (as in run_schedule). */
void loom__exec_compute_last_use(exec_state *st, const int32_t *order) {
  const loom_graph *g = st->g;
  for (int32_t v = 0; v < g->n_values; v++) st->last_use[v] = -1;
  for (int32_t pos = 0; pos < g->n_ops; pos++) {
    const loom__op *op = &g->ops[order ? order[pos] : pos];
    for (int32_t r = 0; r < op->n_outputs; r++) {
      int32_t b = st->layouts[op->outputs[r]].base;
      if (st->last_use[b] < pos) st->last_use[b] = pos;
    }
    for (int32_t i = 0; i < op->n_inputs; i++) st->last_use[st->layouts[op->inputs[i]].base] = pos;
  }
  for (int32_t i = 0; i < g->n_outputs; i++) st->last_use[st->layouts[g->outputs[i]].base] = INT32_MAX;
}

static loom_status alloc_outputs(exec_state *st, const loom__op *op) {
  for (int32_t r = 0; r < op->n_outputs; r++) {
    int32_t id = op->outputs[r];
    const loom__layout *l = &st->layouts[id];
    if (op->kind == LOOM_OP_FILL) {
      if (!st->fill_slot) st->data[id] = st->scalars[id]; /* devices: set up front (fills_init) */
      continue;
    }
    if (!l->owns) continue;
    if (st->bound && st->bound[id]) {
      int64_t bytes;
      loom_status s = LOOM_OK;
      if (st->bound[id] >= BOUND_SUM_FIRST && !(s = loom_type_bytes(&st->g->values[id].type, &bytes)))
        s = take(st, id, bytes);
      if (s) return s;
      continue;
    }
    if (op->kind == LOOM_OP_CONSTANT) {
      if (!st->be->host_memory) { /* written in from the graph */
        loom_status s = take_written(st, id, op->const_bytes, op->const_data);
        if (s) return s;
        continue;
      }
      st->data[id] = op->const_data; /* read in place from the graph, counted as held */
      loom_status s = take(st, id, op->const_bytes);
      if (s) return s;
      continue;
    }
    int64_t bytes;
    loom_status s = loom_type_bytes(&st->g->values[id].type, &bytes);
    if (!s) s = loom__exec_block_take(st, bytes, id, NULL, NULL, &st->blocks[id]);
    if (s) return s;
    st->bytes[id] = bytes;
    st->data[id] = st->blocks[id].ptr;
  }
  return LOOM_OK;
}

static loom_status temp_take(void *ctx, int64_t bytes, void **out_buffer) {
  exec_state *st = ctx;
  *out_buffer = NULL;
  for (int32_t i = 0; i < TEMP_SLOTS; i++) {
    temp_slot *t = &st->temps[i];
    if (t->used) continue;
    loom_status s = loom__exec_block_take(st, bytes, -1, "the temporaries of a library call", NULL, &t->b);
    if (s) return s;
    t->bytes = bytes;
    t->used = true;
    *out_buffer = t->b.ptr;
    return LOOM_OK;
  }
  return loom__error(LOOM_ERR_INTERNAL, "a library call holds more than %d temporaries at once", TEMP_SLOTS);
}

static void temp_give(void *ctx, void *buffer, int64_t bytes) {
  exec_state *st = ctx;
  for (int32_t i = 0; i < TEMP_SLOTS; i++) {
    temp_slot *t = &st->temps[i];
    if (!t->used || t->b.ptr != buffer || t->bytes != bytes) continue;
    loom__exec_block_give(st, &t->b, bytes);
    t->used = false;
    return;
  }
}

/* "the temporaries of dot", per op kind: written once here, not per op run. */
static const char *const scratch_what[LOOM_OP_COUNT] = {
#define LOOM_X(e, name) [LOOM_OP_##e] = "the temporaries of " name,
    LOOM_OP_MAP(LOOM_X)
#undef LOOM_X
};

LOOM_HOT static loom_status run_one(exec_state *st, const loom__op *op) {
  loom_status s = alloc_outputs(st, op);
  if (s) return s;
  if (op->kind == LOOM_OP_FILL || op->kind == LOOM_OP_CONSTANT) return LOOM_OK;
  if (!st->layouts[op->outputs[0]].owns) return LOOM_OK; /* a view: nothing to compute */
  if (op->loop) return loom__exec_run_loop(st, op);
  loom__dview in_views[8], out_views[2];
  loom__dview *ins = op->n_inputs <= 8 ? in_views : loom__malloc(sizeof(loom__dview) * (size_t)op->n_inputs);
  if (!ins) return loom__oom("operand views");
  for (int32_t i = 0; i < op->n_inputs; i++) loom__exec_view_of(st, op->inputs[i], &ins[i]);
  for (int32_t r = 0; r < op->n_outputs; r++) loom__exec_view_of(st, op->outputs[r], &out_views[r]);
  int64_t scratch_bytes = loom__op_scratch_bytes(st->g, op);
  block scratch = {0};
  bool scratched = false;
  if (scratch_bytes > 0) {
    s = loom__exec_block_take(st, scratch_bytes, -1, scratch_what[op->kind], NULL, &scratch);
    scratched = s == LOOM_OK;
  }
  if (!s) {
    loom__op_call call = {.g = st->g,
                          .op = op,
                          .in = ins,
                          .out = out_views,
                          .scratch = scratch.ptr,
                          .scratch_bytes = scratch_bytes,
                          .accumulate = st->bound && st->bound[op->outputs[0]] == BOUND_SUM_ADD};
    /* Under a limit the estimate is a promise: no temporaries beyond the scratch. */
    if (st->meter->limit == 0) {
      call.temp_take = temp_take;
      call.temp_give = temp_give;
      call.temp_ctx = st;
    }
    s = st->be->run_op(st->dev, &call);
  }
  if (scratched) loom__exec_block_give(st, &scratch, scratch_bytes);
  /* A backend without a fused evaluator (or without one for this body) leaves the op to the
   * executor, which runs its body op by op. */
  if (s == LOOM_ERR_UNSUPPORTED && op->fused) s = run_fused_unfused(st, op, ins, out_views);
  if (ins != in_views) loom__free(ins);
  return s;
}

/* A dense copy of a host view into out->data: a broadcast to the same shape, which the cpu
 * layout kernel does. */
static loom_status host_copy(const exec_state *st, int32_t id, const loom__view *src, loom_tensor *out) {
  loom__view dst;
  memset(&dst, 0, sizeof dst);
  dst.type = src->type;
  dst.data = out->data;
  loom__view_dense_strides(&dst.type, dst.strides);
  loom__op copy;
  memset(&copy, 0, sizeof copy);
  copy.kind = LOOM_OP_BROADCAST;
  copy.n_inputs = 1;
  copy.inputs = &id;
  copy.n_outputs = 1;
  copy.outputs[0] = id;
  loom_attrs_init(&copy.attrs);
  copy.attrs.set = LOOM_ATTR_SHAPE;
  copy.attrs.shape.count = src->type.rank;
  memcpy(copy.attrs.shape.v, src->type.dims, sizeof(int64_t) * (size_t)src->type.rank);
  return loom__cpu_run_op(st->g, &copy, src, &dst, NULL, 0);
}

/* The elements a strided view reaches: [lo, hi] relative to its offset. */
static void view_extent(const loom__dview *v, int64_t *lo, int64_t *hi) {
  *lo = *hi = 0;
  for (int32_t d = 0; d < v->type.rank; d++) {
    int64_t span = (v->type.dims[d] - 1) * v->strides[d];
    if (span < 0)
      *lo += span;
    else
      *hi += span;
  }
}

/* Copies a device view into the dense host tensor out, through the HMM (loom_buffer_read: a
 * blocking read on the node's queue, after the work queued before it): a dense view in one
 * read, else the range it reaches, then a host copy. The host memory is the caller's, not
 * the device's, so the meter does not count it. The executor's access to the base ends first
 * (the HMM reads no buffer while it is being written); the buffer stays until the run ends. */
static loom_status download_value(exec_state *st, int32_t id, const loom__dview *v, loom_tensor *out) {
  int64_t es = loom_dtype_size(v->type.dtype), n = 1, bytes = 0;
  for (int32_t d = 0; d < v->type.rank; d++) n *= v->type.dims[d];
  if (n == 0) return LOOM_OK;
  block *b = &st->blocks[st->layouts[id].base];
  loom_status s = loom__exec_block_end_access(b);
  if (s) return s;
  loom__layout dense = st->layouts[id];
  memcpy(dense.strides, v->strides, sizeof dense.strides);
  if (loom__layout_contiguous(&dense, &v->type) && !loom_type_bytes(&v->type, &bytes))
    return loom_buffer_read(b->buffer, loom__dtype_offset_bytes(v->type.dtype, v->offset), out->data, bytes);
  if (v->type.dtype == LOOM_Q4) /* no op makes a strided q4 view that could be returned */
    return loom__error(LOOM_ERR_INTERNAL, "a q4 output that is not dense");
  int64_t lo, hi;
  view_extent(v, &lo, &hi);
  int64_t span = (hi - lo + 1) * es;
  char *tmp = (uint64_t)span <= SIZE_MAX ? loom__aligned_alloc((size_t)span) : NULL;
  if (!tmp) return loom__oom("a host copy of an output");
  s = loom_buffer_read(b->buffer, (v->offset + lo) * es, tmp, span);
  if (!s) {
    loom__view hv;
    memset(&hv, 0, sizeof hv);
    hv.type = v->type;
    memcpy(hv.strides, v->strides, sizeof hv.strides);
    hv.data = tmp - lo * es;
    s = host_copy(st, id, &hv, out);
  }
  loom__aligned_free(tmp);
  return s;
}

/* Hands out returned value id's own buffer (exec options' output_buffers) where it has one
 * holding exactly it and no other output reads that buffer, on host memory only where on_host
 * says (exec options' host_buffers); false when it must be read back.
 * The meter keeps counting it until the run ends, as it would a value read back. */
static bool hand_out(exec_state *st, int32_t id, bool on_host, loom_tensor *out, loom_buffer **out_buffer) {
  const loom__layout *l = &st->layouts[id];
  block *b = &st->blocks[l->base];
  int64_t bytes = 0;
  loom_type_bytes(&st->g->values[id].type, &bytes);
  if ((st->be->host_memory && !on_host) || !b->buffer || b->borrowed || l->base != id || l->offset != 0 ||
      !loom__layout_contiguous(l, &st->g->values[id].type) || bytes != st->bytes[id] || bytes == 0)
    return false;
  int32_t readers = 0;
  for (int32_t j = 0; j < st->g->n_outputs; j++) readers += st->layouts[st->g->outputs[j]].base == id;
  if (readers != 1) return false;
  if (loom__exec_block_end_access(b) != LOOM_OK) return false;
  *out_buffer = b->buffer;
  memset(b, 0, sizeof *b);
  memset(out, 0, sizeof *out);
  out->type = st->g->values[id].type;
  return true;
}

/* On host memory, a returned value that owns its whole buffer becomes the caller's tensor: the
 * buffer's memory is handed over (loom__buffer_take_host), not copied. The meter keeps
 * counting it until the run ends, as it would a value copied out. False when it must be
 * copied. */
static bool take_host(exec_state *st, int32_t id, loom_tensor *out) {
  const loom__layout *l = &st->layouts[id];
  block *b = &st->blocks[l->base];
  int64_t bytes = 0;
  loom_type_bytes(&st->g->values[id].type, &bytes);
  if (!st->be->host_memory || !b->buffer || b->borrowed || l->base != id || l->offset != 0 ||
      !loom__layout_contiguous(l, &st->g->values[id].type) || bytes != st->bytes[id] || bytes == 0)
    return false;
  int32_t readers = 0;
  for (int32_t j = 0; j < st->g->n_outputs; j++) readers += st->layouts[st->g->outputs[j]].base == id;
  void *ptr = NULL;
  if (readers != 1 || loom__exec_block_end_access(b) != LOOM_OK) return false;
  if (!loom__buffer_take_host(b->buffer, bytes, &ptr)) return false; /* copied: host memory stays put */
  memset(b, 0, sizeof *b);
  memset(out, 0, sizeof *out);
  out->type = st->g->values[id].type;
  out->data = ptr;
  return true;
}

/* Copies value id into a new dense host tensor. */
static loom_status export_value(exec_state *st, int32_t id, loom_tensor *out) {
  loom_status s = loom__tensor_init_unzeroed(out, &st->g->values[id].type);
  if (s) return s;
  loom__dview v;
  loom__exec_view_of(st, id, &v);
  int32_t base = st->layouts[id].base;
  if (st->be->host_memory || (st->fill_slot && st->fill_slot[base] >= 0)) {
    loom__view hv;
    if (st->fill_slot && st->fill_slot[base] >= 0) { /* a fill: its host scalar */
      v.buffer = st->scalars[base];
      v.offset = 0;
    }
    loom__dview_to_host(&v, &hv);
    int64_t bytes = 0;
    if (loom__layout_contiguous(&st->layouts[id], &v.type) && loom_type_bytes(&v.type, &bytes) == LOOM_OK) {
      /* A contiguous result is one memcpy: the layout kernel's general copy costs a tenth of a
       * small graph's run (loom-bench overhead). */
      if (bytes > 0) memcpy(out->data, hv.data, (size_t)bytes);
      return LOOM_OK;
    }
    return host_copy(st, id, &hv, out);
  }
  return download_value(st, id, &v, out);
}

static loom_status bind_inputs(exec_state *st, const loom_tensor *inputs) {
  st->inputs = inputs;
  for (int32_t p = 0; p < st->g->n_params; p++) {
    int32_t id = st->g->params[p];
    if (st->last_use[id] < 0) continue; /* nobody reads it: never held */
    int64_t bytes;
    loom_status s = loom_type_bytes(&st->g->values[id].type, &bytes);
    if (s) return s;
    /* Inputs count as held from the start to their last use: read in place on cpu0,
     * written into a device, or read from the caller's buffer where the HMM puts it. A
     * streamed input is not held: the loops reading it count each piece's slice
     * (run_loop), read in place where it is reachable, else written in piece by piece. */
    bool streamed = loom__value_streamed(st->g, id);
    if (st->input_buffers && st->input_buffers[p]) {
      if ((s = take_borrowed(st, id, streamed ? 0 : bytes, st->input_buffers[p]))) return s;
      continue;
    }
    if (!st->be->host_memory) {
      if (!streamed && (s = take_written(st, id, bytes, inputs[p].data))) return s;
      continue;
    }
    if ((s = take(st, id, streamed ? 0 : bytes))) return s;
    st->data[id] = inputs[p].data;
  }
  return LOOM_OK;
}

/* Devices: every fill's scalar, computed now and written into one small buffer. */
static loom_status fills_init(exec_state *st) {
  const loom_graph *g = st->g;
  int32_t n = 0;
  for (int32_t i = 0; i < g->n_ops; i++) n += g->ops[i].kind == LOOM_OP_FILL;
  if (n == 0) return LOOM_OK;
  st->fill_slot = loom__malloc(sizeof *st->fill_slot * (size_t)g->n_values);
  uint8_t *host = st->fill_host = loom__malloc(16 * (size_t)n);
  if (!st->fill_slot || !host) return loom__oom("executor state");
  for (int32_t v = 0; v < g->n_values; v++) st->fill_slot[v] = -1;
  int32_t k = 0;
  for (int32_t i = 0; i < g->n_ops; i++) {
    const loom__op *op = &g->ops[i];
    if (op->kind != LOOM_OP_FILL) continue;
    st->fill_slot[op->outputs[0]] = k;
    memcpy(host + 16 * k++, st->scalars[op->outputs[0]], 16);
  }
  loom_status s = block_alloc(st, 16 * (int64_t)n, host, &st->fills);
  if (!s) st->fill_bytes = 16 * (int64_t)n;
  return s;
}

/* The per-value arrays, carved from one block (st->layouts is its start): six allocations per
 * run cost more than a small graph's ops (loom-bench overhead), and a small graph's block is
 * the state's own (small_arrays), with no allocation at all. Each array starts 16-byte
 * aligned, as a fill's scalar of any dtype is read in place. */
static loom_status state_arrays(exec_state *st, size_t n) {
  size_t sizes[6] = {n * sizeof *st->layouts, n * sizeof *st->data,     n * sizeof *st->bytes,
                     n * sizeof *st->blocks,  n * sizeof *st->last_use, n * sizeof *st->scalars};
  size_t at[6], total = 0;
  for (int32_t i = 0; i < 6; i++) {
    at[i] = total;
    total += (sizes[i] + 15) & ~(size_t)15;
  }
  char *p = (char *)st->small_arrays;
  if (total <= sizeof st->small_arrays)
    memset(p, 0, total);
  else if (!(p = loom__calloc(1, total)))
    return loom__oom("executor state");
  st->layouts = (loom__layout *)(void *)p;
  st->data = (void **)(void *)(p + at[1]);
  st->bytes = (int64_t *)(void *)(p + at[2]);
  st->blocks = (block *)(void *)(p + at[3]);
  st->last_use = (int32_t *)(void *)(p + at[4]);
  st->scalars = (uint8_t(*)[16])(void *)(p + at[5]);
  return LOOM_OK;
}

loom_status loom__exec_state_init(exec_state *st, const loom_graph *g, const loom__exec_device *dev,
                                  loom__meter *meter) {
  memset(st, 0, offsetof(exec_state, small_arrays)); /* state_arrays clears what it uses of them */
  st->g = g;
  st->root = st;
  st->be = dev->backend;
  st->dev = dev->dev;
  st->mem = dev->memory;
  st->node = dev->node;
  st->meter = meter;
  loom_status s = state_arrays(st, (size_t)(g->n_values ? g->n_values : 1));
  if (s) return s;
  s = loom__graph_layouts(g, st->layouts);
  if (!s) {
    for (int32_t v = 0; v < g->n_values; v++)
      if (g->values[v].op >= 0 && g->ops[g->values[v].op].kind == LOOM_OP_FILL) {
        const loom_attrs *a = &g->ops[g->values[v].op].attrs;
        loom__scalar_store(g->values[v].type.dtype, a->value, a->ivalue, a->value_is_int, st->scalars[v]);
      }
  }
  if (!s && !st->be->host_memory) s = fills_init(st);
  return s;
}

/* Keeps host memory (or a graph holding constants) that queued writes may still read until
 * the run has synchronized; without the memory to note it, waits for the device now. */
void loom__exec_defer_free(exec_state *st, void *host, loom_graph *graph) {
  if (!host && !graph) return;
  deferred *d = st->be->host_memory ? NULL : loom__malloc(sizeof *d);
  if (!d) {
    if (!st->be->host_memory) (void)st->be->synchronize(st->dev);
    loom__free(host);
    loom_graph_destroy(graph);
    return;
  }
  d->host = host;
  d->graph = graph;
  d->next = st->root->deferred;
  st->root->deferred = d;
}

/* Gives back everything the run still holds, then the node's pool: what the run cached there
 * does not outlive it (as the executor's own cache did not before the HMM). A nested state
 * leaves the pool to its run, and its fill scalars' host copy to the run's end. */
void loom__exec_state_deinit(exec_state *st) {
  if (st->layouts) /* a failed init leaves the arrays NULL */
    for (int32_t v = 0; v < st->g->n_values; v++)
      if (st->data[v] || st->bytes[v] || st->blocks[v].buffer) loom__exec_release(st, v);
  for (int32_t i = 0; i < TEMP_SLOTS; i++)
    if (st->temps[i].used) loom__exec_block_give(st, &st->temps[i].b, st->temps[i].bytes);
  loom__exec_block_drop(&st->fills);
  if (st->nested) {
    loom__exec_defer_free(st, st->fill_host, NULL);
    st->fill_host = NULL;
  }
  while (st->deferred) {
    deferred *d = st->deferred;
    st->deferred = d->next;
    loom__free(d->host);
    loom_graph_destroy(d->graph);
    loom__free(d);
  }
  loom__free(st->base_off);
  loom__free(st->bound);
  loom__free(st->passed);
  if (st->mem && !st->nested && !st->keep_pool) loom_mem_trim(st->mem, st->node);
  if ((void *)st->layouts != (void *)st->small_arrays)
    loom__free(st->layouts); /* and the other per-value arrays (state_arrays) */
  loom__free(st->fill_slot);
  loom__free(st->fill_host);
}

/* Names the op that failed: its line where the graph was parsed; in a loop's body also the
 * op and its result. */
static void op_error_prefix(const exec_state *st, const loom__op *op) {
  if (!st->nested) {
    if (op->line > 0) loom__error_prefix("line %d: ", (int)op->line);
    return;
  }
  char label[32], line[32] = "";
  if (op->line > 0) snprintf(line, sizeof line, " (line %d)", (int)op->line);
  loom__error_prefix("%s '%s'%s: ", loom_op_name(op->kind),
                     loom__value_label(st->g, op->outputs[0], label, sizeof label), line);
}

/* Runs the ops in order, freeing each base after its last reader. */
LOOM_HOT loom_status loom__exec_run_ops(exec_state *st, const int32_t *order) {
  const loom_graph *g = st->g;
  for (int32_t pos = 0; pos < g->n_ops; pos++) {
    const loom__op *op = &g->ops[order ? order[pos] : pos];
    loom_status s = run_one(st, op);
    if (s) {
      op_error_prefix(st, op);
      return s;
    }
    for (int32_t i = 0; i < op->n_inputs; i++) {
      int32_t b = st->layouts[op->inputs[i]].base;
      if (st->last_use[b] == pos) loom__exec_release(st, b);
    }
    for (int32_t r = 0; r < op->n_outputs; r++) {
      int32_t b = st->layouts[op->outputs[r]].base;
      if (st->last_use[b] == pos) loom__exec_release(st, b); /* a result nobody reads */
    }
  }
  return LOOM_OK;
}

static loom_status run_schedule(exec_state *st, const int32_t *order, const loom_tensor *inputs) {
  loom__exec_compute_last_use(st, order);
  loom_status s = bind_inputs(st, inputs);
  return s ? s : loom__exec_run_ops(st, order);
}

/* ---- fused ops, op by op ---------------------------------------------------------------------
 *
 * A fused op whose backend has no evaluator for it runs its body as a nested graph on the same
 * device, meter and memory, as a loop runs a piece: parameters read the operands where they
 * are, and the intermediates are allocated (and metered) as the unfused graph's would be. The
 * op's results are given back first and made by the body's final op, then handed to the op
 * (a result bound to a loop's slot is written there in place), so the run holds what the
 * unfused ops would: the fusion pass runs after chunking, whose pieces were sized for them. */

static loom_status fused_bind(exec_state *st, const loom__op *op, exec_state *b, const loom__dview *in,
                              const loom__dview *out) {
  const loom_graph *g = b->g;
  size_t n = (size_t)LOOM_MAX(g->n_values, 1);
  b->base_off = loom__calloc(n, sizeof *b->base_off);
  b->bound = loom__calloc(n, sizeof *b->bound);
  if (!b->base_off || !b->bound) return loom__oom("a fused op's body state");
  for (int32_t p = 0; p < g->n_params; p++) {
    loom__layout *l = &b->layouts[g->params[p]];
    memcpy(l->strides, in[p].strides, sizeof l->strides);
  }
  loom_status s = loom__graph_layouts_given(g, b->layouts);
  if (s) return s;
  loom__exec_compute_last_use(b, NULL);
  for (int32_t p = 0; p < g->n_params; p++) {
    int32_t v = g->params[p];
    b->last_use[v] = INT32_MAX;
    b->data[v] = in[p].buffer;
    b->base_off[v] = in[p].offset;
  }
  for (int32_t j = 0; j < g->n_outputs; j++) {
    int32_t v = g->outputs[j]; /* the final op's results or an elementwise value: own storage */
    if (!(st->bound && st->bound[op->outputs[j]])) {
      loom__exec_release(st, op->outputs[j]);
      continue;
    }
    b->bound[v] = 1;
    b->data[v] = out[j].buffer;
    b->base_off[v] = out[j].offset;
  }
  return LOOM_OK;
}

/* The body's results become the op's: the blocks move, counted once on the shared meter. */
static void fused_hand_over(exec_state *st, const loom__op *op, exec_state *b) {
  for (int32_t j = 0; j < op->n_outputs; j++) {
    int32_t v = b->g->outputs[j], id = op->outputs[j];
    if (b->bound[v]) continue;
    st->blocks[id] = b->blocks[v];
    st->data[id] = b->data[v];
    st->bytes[id] = b->bytes[v];
    memset(&b->blocks[v], 0, sizeof b->blocks[v]);
    b->data[v] = NULL;
    b->bytes[v] = 0;
  }
}

static loom_status run_fused_unfused(exec_state *st, const loom__op *op, const loom__dview *in,
                                     const loom__dview *out) {
  loom__exec_device dev = {.backend = st->be, .dev = st->dev, .memory = st->mem, .node = st->node};
  exec_state b;
  loom_status s = loom__exec_state_init(&b, op->fused, &dev, st->meter);
  b.nested = true;
  b.root = st->root;
  if (!s) {
    b.fill_bytes += st->fill_bytes; /* the node holds both */
    s = fused_bind(st, op, &b, in, out);
  }
  if (!s) s = loom__exec_run_ops(&b, NULL);
  if (!s) fused_hand_over(st, op, &b);
  if (s) loom__error_prefix("fused (its body op by op): ");
  loom__exec_state_deinit(&b);
  return s;
}

/* Waits for the device; on a failed run the first error's message is kept. With no_wait, a
 * run that queued nothing reading host memory (no write from a host tensor, a constant or a
 * fill's scalar, nothing deferred) on a backend that can submit without waiting (flush)
 * returns with its work submitted: its results are buffers on the device whose later users
 * are ordered behind it on the node's queue. */
static loom_status finish(exec_state *st, loom_status s) {
  if (!st->be || st->be->host_memory) return s;
  if (!s && st->no_wait && st->be->flush && !st->queued_host && !st->deferred && !st->fill_host)
    return st->be->flush(st->dev);
  if (!s) return st->be->synchronize(st->dev);
  char saved[1024];
  snprintf(saved, sizeof saved, "%s", loom_last_error());
  st->be->synchronize(st->dev);
  loom__error(s, "%s", saved);
  return s;
}

/* For output i of the top graph: the first output index returning the same value when that
 * value is streamed out by its loop, else -1. */
static int32_t streamed_first(const exec_state *st, int32_t i) {
  const loom_graph *g = st->g;
  if (!st->bound || !st->bound[g->outputs[i]]) return -1;
  int32_t k = 0;
  while (g->outputs[k] != g->outputs[i]) k++;
  return k;
}

/* The outputs streamed out by loops: the caller's host tensors made now (the caller's memory,
 * not the run's: the meter does not count them), their values bound so no op allocates them. */
static loom_status stream_outputs_init(exec_state *st, loom_tensor *outputs) {
  const loom_graph *g = st->g;
  st->outputs = outputs;
  for (int32_t i = 0; i < g->n_outputs; i++) {
    int32_t v = g->outputs[i];
    if (!loom__value_streamed_out(g, v) || (st->bound && st->bound[v])) continue;
    if (!st->bound && !(st->bound = loom__calloc((size_t)g->n_values, sizeof *st->bound)))
      return loom__oom("the run's streamed outputs");
    loom_status s = loom_tensor_init(&outputs[i], &g->values[v].type);
    if (s) return s;
    st->bound[v] = 1;
  }
  return LOOM_OK;
}

loom_status loom__execute(const loom_graph *g, const loom__exec_options *opts, const loom_tensor *inputs,
                          loom_tensor *outputs, loom__meter *meter) {
  exec_state st;
  for (int32_t i = 0; i < g->n_outputs; i++) memset(&outputs[i], 0, sizeof outputs[i]);
  if (!opts || !opts->device || !opts->device->memory)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom__execute: no device (loom__context_exec_device)");
  for (int32_t i = 0; opts->output_buffers && i < g->n_outputs; i++) opts->output_buffers[i] = NULL;
  loom_status s = loom__exec_state_init(&st, g, opts->device, meter);
  st.input_buffers = opts->input_buffers;
  st.keep_pool = opts->keep_pool;
  st.no_wait = opts->no_wait;
  if (!s) s = stream_outputs_init(&st, outputs);
  if (!s) s = run_schedule(&st, opts->schedule, inputs);
  for (int32_t i = 0; !s && i < g->n_outputs; i++) {
    int32_t first = streamed_first(&st, i);
    if (first == i) continue; /* its loop wrote it piece by piece */
    if (first >= 0) {
      s = loom_tensor_init(&outputs[i], &outputs[first].type);
      int64_t bytes = 0;
      loom_type_bytes(&outputs[i].type, &bytes);
      if (!s && bytes) memcpy(outputs[i].data, outputs[first].data, (size_t)bytes);
      continue;
    }
    if (!(opts->output_buffers && hand_out(&st, g->outputs[i], opts->host_buffers && opts->host_buffers[i],
                                           &outputs[i], &opts->output_buffers[i])) &&
        !take_host(&st, g->outputs[i], &outputs[i]))
      s = export_value(&st, g->outputs[i], &outputs[i]);
  }
  s = finish(&st, s);
  /* An input mapped from a file that shrank meanwhile was read as zeros (io/mapped.h). */
  for (int32_t p = 0; !s && inputs && p < g->n_params; p++) s = loom__mapped_check(inputs[p].data);
  if (s)
    for (int32_t i = 0; i < g->n_outputs; i++) {
      loom_tensor_deinit(&outputs[i]);
      if (opts->output_buffers) {
        loom_buffer_free(opts->output_buffers[i]);
        opts->output_buffers[i] = NULL;
      }
    }
  loom__exec_state_deinit(&st);
  return s;
}

loom_status loom__check_inputs(const loom_graph *g, const loom_tensor *inputs, int32_t n_inputs) {
  if (n_inputs != g->n_params)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "graph '%s' takes %d input%s, got %d", g->name,
                       (int)g->n_params, g->n_params == 1 ? "" : "s", (int)n_inputs);
  for (int32_t p = 0; p < n_inputs; p++) {
    const loom_type *want = &g->values[g->params[p]].type;
    char a[LOOM_TYPE_STRING_MAX], b[LOOM_TYPE_STRING_MAX], tmp[32];
    if (!loom_type_equal(want, &inputs[p].type))
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "input %d (%s): got %s, the graph takes %s", (int)p + 1,
                         loom__value_label(g, g->params[p], tmp, sizeof tmp),
                         loom_type_format(&inputs[p].type, a, sizeof a), loom_type_format(want, b, sizeof b));
    int64_t bytes;
    loom_type_bytes(want, &bytes);
    if (bytes > 0 && !inputs[p].data)
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "input %d (%s): data is NULL", (int)p + 1,
                         loom__value_label(g, g->params[p], tmp, sizeof tmp));
  }
  return LOOM_OK;
}
