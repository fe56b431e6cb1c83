/* The executor's loop ops (exec.h; the shared state in exec_state.h): a loop's body runs once
 * per piece through the executor itself, its operands streamed in slices and its results merged
 * in place. */
#include <string.h>

#include "io/mapped.h"
#include "runtime/exec_state.h"

/* ---- loops ------------------------------------------------------------------------------------
 *
 * A loop op runs its body once per piece, through the executor itself: a nested state per body
 * (the full piece's, and the last shorter piece's), made once per run of the loop and reset
 * after each piece, on the run's meter, device and memory. What it holds follows the estimate
 * (ir/estimate.c, loom__loop_scratch_bytes) step for step:
 * - the body's parameters read the operands where they are (views: nothing counted), but the
 *   slices of a streamed operand count their bytes for the loop's whole run, two slices where
 *   it has more than one piece and double buffers (the loop's slices, slice_slots): read in
 *   place where its storage is reachable (host memory, a caller's buffer, an outer loop's
 *   operand), else written into the device's buffers from the caller's host tensor: with two,
 *   in turn, the next piece's while a piece computes (double buffering); with one, each
 *   piece's behind the piece before it; a slice reachable in place but not dense there, which
 *   the body would lay out otherwise than dense (a reshape of a block of columns), is copied
 *   into one buffer each piece (slice_copied), as the estimate lays it out; an input an outer loop
 *   passes whole to a body that streams it is not held at all, and the body's state keeps the
 *   host tensor behind it (pass_inputs), so the inner loop writes its slices from there;
 * - a concat result the body computes into storage of its own is computed straight into its
 *   slot of the loop's result (loom__loop_result_in_place); the others are copied there, or
 *   passed out, never held, an inner loop streaming them into the caller's output (out_bind);
 * - a dot whose result the loop sums is computed into the loop's result itself, where the
 *   backend can add a product to what is there (dot_into_sum);
 * - the other results of piece 0 are copied into the loop's results, which then accumulate:
 *   sum, prod, max and min by the binary op in place; argmax/argmin and topk pairs by the ops
 *   of a small merge graph built once per run, and the backend's merge_index for the indices.
 * Each merge allocates its temporaries through the meter as any op does. */

/* The merge graph of a loop: ops of the IR whose types and attributes the backends read;
 * the executor runs them on views it makes. */
typedef struct loop_merge {
  loom_graph *g;
  int32_t first[LOOM_LOOP_MAX_RESULTS]; /* result j's first op in g */
} loop_merge;

typedef struct loop_body {
  exec_state st;
  loom_graph *tail; /* the last piece's body (loom__loop_body_for); NULL for full pieces */
  int32_t *order;   /* the body's ops in graph order, as the estimate takes them */
  loom_tensor *out; /* per result: its block of the caller's output where passed out (out_bind) */
  bool ready;
} loop_body;

/* A streamed operand's slices, held for the whole run of the loop: the meter counts one
 * full piece's slice, two where the loop has more than one piece and its slices say 2
 * (loom__loop_scratch_bytes: the next piece's slice is brought in while a piece runs). Where
 * the slices are written from the caller's host tensor (`from`), they go into the device
 * buffers in turn: with two, piece i + 1's is written ahead (loom__buffer_write_ahead, on the
 * device's transfer queue) while piece i's kernels run, and joined to the device's queue when
 * piece i + 1 begins; with one, piece i's is written when it begins, behind piece i - 1's
 * kernels. Elsewhere (host memory, a caller's buffer, an outer loop's slice) they are read in
 * place and only counted, unless the slice is not dense in the operand and the body would lay
 * it out otherwise than the estimate does (slice_copied): then each piece's is copied into one
 * buffer of its own, dense, on the device's queue. */
typedef struct slice_slots {
  block b[2];              /* the device buffers of the written slices */
  int32_t count;           /* how many: 1, or 2 to double buffer */
  int64_t slice;           /* one full piece's slice, in bytes */
  int64_t counted;         /* what the meter counts for them: count slices */
  const loom_tensor *from; /* the caller's host tensor written from; NULL: read in place */
  bool copied;             /* reachable, but copied dense into b[0] each piece (slice_copied) */
} slice_slots;

/* A window's parameter for a piece whose window passes its operand's ends (loom__loop_window_pads):
 * a dense copy, zeros where the window reads padding, the part in reach copied in. Held through
 * the piece. Counted on the meter for an operand held whole (the estimate adds one piece's
 * copy); a streamed operand's counted slices already hold it. */
typedef struct pad_copy {
  block b;
  int64_t bytes;
  bool metered;
} pad_copy;

typedef struct loop_run {
  exec_state *outer;
  const loom__op *op;
  const loom__loop *l;
  int64_t trips;
  loom__dview *operands; /* the outer views of the operands */
  bool *streamed;        /* per operand: a streamed graph input (loom__value_streamed) */
  slice_slots *slots;    /* per operand: its slices where it is streamed */
  loom__dview results[LOOM_LOOP_MAX_RESULTS];
  bool streams_out[LOOM_LOOP_MAX_RESULTS]; /* per result: streamed out (stream_out) */
  bool passes_out[LOOM_LOOP_MAX_RESULTS];  /* per result: passed out by the body (body_passes_out) */
  loop_body body[2];                       /* full pieces, the last shorter piece */
  loop_merge merge;
  pad_copy *pads; /* per operand: its padded copy for the piece (a window passing its ends) */
  void *zeros;    /* host zeros, as long as the largest such copy: the padding written in */
  int64_t zeros_bytes;
} loop_run;

static int64_t elements_of(const loom_type *t) {
  int64_t n = 1;
  for (int32_t d = 0; d < t->rank; d++) n *= t->dims[d];
  return n;
}

static bool dview_dense(const loom__dview *v) {
  int64_t dense[LOOM_MAX_RANK];
  loom__view_dense_strides(&v->type, dense);
  for (int32_t d = 0; d < v->type.rank; d++)
    if (v->type.dims[d] > 1 && v->strides[d] != dense[d]) return false;
  return true;
}

/* A dense view of type t at the start of block b. */
static loom__dview block_view(const block *b, const loom_type *t) {
  loom__dview v;
  memset(&v, 0, sizeof v);
  v.type = *t;
  v.buffer = b->ptr;
  loom__view_dense_strides(t, v.strides);
  return v;
}

/* A q4 view copied as bytes: rows of whole bytes (an even start, unit nibble stride along the
 * last axis, even strides elsewhere), which is what a loop's q4 pieces are (loom_graph_add_loop
 * refuses odd pieces along a q4 row). */
static loom_status q4_view_copy(exec_state *st, const loom__dview *dst, const loom__dview *src) {
  int32_t rank = src->type.rank;
  int64_t dims[LOOM_MAX_RANK], ds[LOOM_MAX_RANK], ss[LOOM_MAX_RANK];
  bool ok = rank > 0 && src->offset % 2 == 0 && dst->offset % 2 == 0 && src->strides[rank - 1] == 1 &&
            dst->strides[rank - 1] == 1;
  for (int32_t d = 0; ok && d < rank; d++) {
    ok = d == rank - 1 || (src->strides[d] % 2 == 0 && dst->strides[d] % 2 == 0);
    dims[d] = d == rank - 1 ? loom__q4_row_nibbles(src->type.dims[d]) / 2 : src->type.dims[d];
    ds[d] = d == rank - 1 ? 1 : dst->strides[d] / 2;
    ss[d] = d == rank - 1 ? 1 : src->strides[d] / 2;
  }
  if (!ok)
    return loom__error(LOOM_ERR_UNSUPPORTED,
                       "a copy of a q4 view that is not made of whole bytes (docs/ir-quant.md)");
  return st->be->copy(st->dev, 1, rank, dims, dst->buffer, dst->offset / 2, ds, src->buffer, src->offset / 2,
                      ss);
}

/* Copies view src into view dst (same dims) through the backend, in order with the ops. */
static loom_status view_copy(exec_state *st, const loom__dview *dst, const loom__dview *src) {
  if (elements_of(&src->type) == 0) return LOOM_OK;
  if (src->type.dtype == LOOM_Q4) return q4_view_copy(st, dst, src);
  static const int64_t one = 1;
  int32_t rank = src->type.rank;
  bool scalar = rank == 0; /* a copy walks at least one dimension */
  return st->be->copy(st->dev, loom_dtype_size(src->type.dtype), scalar ? 1 : rank,
                      scalar ? &one : src->type.dims, dst->buffer, dst->offset, scalar ? &one : dst->strides,
                      src->buffer, src->offset, scalar ? &one : src->strides);
}

/* Runs op of graph g (the merge graph) on the views given, with its scratch from the meter. */
static loom_status view_run(exec_state *st, const loom_graph *g, const loom__op *op, const loom__dview *in,
                            const loom__dview *out) {
  int64_t scratch_bytes = loom__op_scratch_bytes(g, op);
  block scratch = {0};
  if (scratch_bytes > 0) {
    loom_status s =
        loom__exec_block_take(st, scratch_bytes, -1, "the temporaries of a loop's merge", NULL, &scratch);
    if (s) return s;
  }
  loom__op_call call = {
      .g = g, .op = op, .in = in, .out = out, .scratch = scratch.ptr, .scratch_bytes = scratch_bytes};
  loom_status s = st->be->run_op(st->dev, &call);
  if (scratch_bytes > 0) loom__exec_block_give(st, &scratch, scratch_bytes);
  return s;
}

/* ---- the merge graph ---- */

/* The merge ops of every combined result (none for concat and index results). */
static loom_status merge_build(loop_run *lr) {
  const loom__op *op = lr->op;
  const loom_graph *g = lr->outer->g;
  loom_value a[LOOM_LOOP_MAX_RESULTS], b[LOOM_LOOP_MAX_RESULTS];
  loom_status s = loom_graph_create("loop_merge", &lr->merge.g);
  if (s) return s;
  loom_graph *m = lr->merge.g;
  for (int32_t j = 0; j < op->n_outputs; j++) { /* parameters come before ops */
    const loom_type *t = &g->values[op->outputs[j]].type;
    a[j] = loom_graph_param(m, NULL, t);
    b[j] = loom_graph_param(m, NULL, t);
  }
  for (int32_t j = 0; j < op->n_outputs; j++) {
    lr->merge.first[j] = m->n_ops;
    loom__loop_merge_ops(m, &lr->l->combines[j], a[j], b[j]);
  }
  if (m->error) {
    loom__error_prefix("a loop's merge: ");
    return m->error;
  }
  return LOOM_OK;
}

/* ---- the bodies ---- */

/* The caller's host tensor behind value v of state o, where it is a parameter the run does not
 * hold in a buffer of its own and one stands behind it: at the top a streamed input given as a
 * host tensor (not as a buffer), in a body a parameter its loop passed through whole from such
 * an input. NULL otherwise. */
static const loom_tensor *host_source(const exec_state *o, int32_t v) {
  if (!o->inputs || o->g->values[v].op >= 0) return NULL;
  int32_t p = o->g->values[v].result;
  if (o->input_buffers && o->input_buffers[p]) return NULL;
  return o->inputs[p].data ? &o->inputs[p] : NULL;
}

/* A parameter the loop passes whole, or whose slice it passes on (loom__loop_slice_passed),
 * keeps the host tensor behind its operand, level after level: an inner loop that streams it
 * writes each slice in from there. The tensor is whole and the parameter's strides its dense
 * ones (body_init copies the operand's, and an input's are dense), so an element offset into
 * the parameter (a passed slice's is the piece's, piece_bind) is one into the tensor. On host
 * memory every slice is read in place: nothing to keep. */
static loom_status pass_inputs(loop_run *lr, exec_state *st) {
  const loom_graph *g = st->g;
  for (int32_t p = 0; p < g->n_params && !st->be->host_memory; p++) {
    bool through = lr->l->rules[p].axis < 0 || loom__loop_slice_passed(lr->outer->g, lr->op, p);
    const loom_tensor *t = through ? host_source(lr->outer, lr->op->inputs[p]) : NULL;
    if (!t) continue;
    if (!st->passed && !(st->passed = loom__calloc((size_t)g->n_params, sizeof *st->passed)))
      return loom__oom("a loop's body state");
    st->passed[p] = *t;
  }
  st->inputs = st->passed;
  return LOOM_OK;
}

/* Whether result j of the loop, summed across pieces, is a dot the backend can compute into the
 * loop's sum itself (BOUND_SUM_*): the body's own storage for it (not a view, returned once,
 * read by nothing else in the body, which would see the running sum), and the sum dense and of
 * its type. A nested dot's inner loop (k in pieces) then clears no piece buffer and runs no add:
 * OpenBLAS's clearing of each piece's output (beta = 0) was about a sixth of its time. */
static bool dot_into_sum(const loop_run *lr, const exec_state *st, int32_t j) {
  const loom_graph *g = st->g;
  const loom__dview *res = &lr->results[j];
  int32_t v = g->outputs[j], o = g->values[v].op;
  if (!st->be->dot_accumulates || lr->l->combines[j].combine != LOOM_COMBINE_SUM || o < 0 ||
      g->ops[o].kind != LOOM_OP_DOT || st->layouts[v].base != v || !st->layouts[v].owns ||
      st->layouts[v].offset != 0 || !res->buffer || !dview_dense(res) ||
      !loom_type_equal(&res->type, &g->values[v].type))
    return false;
  for (int32_t k = 0; k < g->n_outputs; k++)
    if (k != j && g->outputs[k] == v) return false;
  for (int32_t i = 0; i < g->n_ops; i++)
    for (int32_t k = 0; k < g->ops[i].n_inputs; k++)
      if (g->ops[i].inputs[k] == v) return false;
  return true;
}

/* The body's results passed out (loom__loop_result_passed_out): bound, never allocated, each a
 * block of the caller's output (out_bind) that the inner loop computing it streams into. */
static loom_status body_passes_out(loop_run *lr, loop_body *b) {
  exec_state *st = &b->st;
  const loom_graph *g = st->g;
  for (int32_t j = 0; j < lr->op->n_outputs; j++) {
    if (!lr->passes_out[j]) continue;
    if (!b->out && !(b->out = loom__calloc((size_t)g->n_outputs, sizeof *b->out)))
      return loom__oom("a loop's body state");
    b->out[j].type = g->values[g->outputs[j]].type;
    st->bound[g->outputs[j]] = BOUND_SLOT;
    st->outputs = b->out;
  }
  return LOOM_OK;
}

/* The state for body g: parameters laid out as the operands are (their strides), held through
 * the piece (the estimate counts a streamed slice so), in-place results bound. */
static loom_status body_init(loop_run *lr, loop_body *b, const loom_graph *g) {
  exec_state *o = lr->outer;
  loom__exec_device dev = {.backend = o->be, .dev = o->dev, .memory = o->mem, .node = o->node};
  loom_status s = loom__exec_state_init(&b->st, g, &dev, o->meter);
  exec_state *st = &b->st;
  st->nested = true;
  st->root = o->root;
  b->ready = true; /* deinit from here on */
  if (s) return s;
  st->fill_bytes += o->fill_bytes; /* the node holds both */
  size_t n = (size_t)LOOM_MAX(g->n_values, 1);
  st->base_off = loom__calloc(n, sizeof *st->base_off);
  st->bound = loom__calloc(n, sizeof *st->bound);
  b->order = loom__malloc(sizeof *b->order * (size_t)LOOM_MAX(g->n_ops, 1));
  if (!st->base_off || !st->bound || !b->order) return loom__oom("a loop's body state");
  for (int32_t p = 0; p < g->n_params; p++) {
    loom__layout *l = &st->layouts[g->params[p]];
    memcpy(l->strides, lr->operands[p].strides, sizeof l->strides);
    /* a streamed slice written into a buffer of its own is dense there (a block of columns is
     * not a run of the operand): its views in the body follow those strides */
    if (lr->streamed[p] && lr->slots && (lr->slots[p].from || lr->slots[p].copied) &&
        !loom__loop_windowed(&lr->l->rules[p]))
      loom__view_dense_strides(&g->values[g->params[p]].type, l->strides);
  }
  if ((s = loom__graph_layouts_given(g, st->layouts)) || (s = pass_inputs(lr, st))) return s;
  for (int32_t i = 0; i < g->n_ops; i++) b->order[i] = i;
  loom__exec_compute_last_use(st, b->order);
  for (int32_t p = 0; p < g->n_params; p++) st->last_use[g->params[p]] = INT32_MAX;
  for (int32_t j = 0; j < lr->op->n_outputs; j++) {
    if (loom__loop_result_in_place(lr->outer->g, lr->op, j)) st->bound[g->outputs[j]] = BOUND_SLOT;
    if (dot_into_sum(lr, st, j)) st->bound[g->outputs[j]] = BOUND_SUM_FIRST;
  }
  return body_passes_out(lr, b);
}

static void body_deinit(loop_run *lr, loop_body *b) {
  if (b->ready) loom__exec_state_deinit(&b->st);
  loom__free(b->out);
  loom__exec_defer_free(lr->outer, NULL, b->tail); /* its constants may still be read by queued writes */
  loom__free(b->order);
  memset(b, 0, sizeof *b);
}

/* The body for a piece of len elements, made on first use. */
static loom_status body_for(loop_run *lr, int64_t len, loop_body **out) {
  loop_body *b = &lr->body[len == lr->l->piece ? 0 : 1];
  *out = b;
  if (b->ready) return LOOM_OK;
  if (b == &lr->body[1]) {
    loom_status s = loom__loop_body_for(lr->l, len, &b->tail);
    if (s) return s;
  }
  return body_init(lr, b, b->tail ? b->tail : lr->l->body);
}

/* Element offset of piece [lo, ...)'s slice of operand p in the operand's storage (for a
 * window, of its first element, which may be padding outside the storage). */
static int64_t slice_offset(const loop_run *lr, int32_t p, int64_t lo) {
  const loom_loop_input *r = &lr->l->rules[p];
  const loom__dview *ov = &lr->operands[p];
  int64_t first = 0, count;
  if (r->axis >= 0) loom__loop_window(r, lo, 1, &first, &count);
  return ov->offset + (r->axis >= 0 ? first * ov->strides[r->axis] : 0);
}

/* The window of operand p that piece [lo, lo + len) reads, clipped to the operand: elements
 * [*from, *to) along the rule's axis, *head of padding before them (the window's first); true
 * when the window passes an end (reads padding). A plain slice never does. */
static bool window_clip(const loop_run *lr, int32_t p, int64_t lo, int64_t len, int64_t *from, int64_t *to,
                        int64_t *head) {
  const loom_loop_input *r = &lr->l->rules[p];
  int64_t first, count, dim = lr->operands[p].type.dims[r->axis];
  loom__loop_window(r, lo, len, &first, &count);
  *from = LOOM_MAX(first, 0);
  *to = LOOM_MAX(LOOM_MIN(first + count, dim), *from);
  *head = *from - first;
  return loom__loop_windowed(r) && (first < 0 || first + count > dim);
}

/* Rows [from, to) of operand p along its axis into buffer b, dense, where p is a block an outer
 * loop passed on (B's columns) not dense in the tensor behind it: a write per last-axis run. */
static loom_status strided_write(loop_run *lr, int32_t p, block *b, int64_t from, int64_t to) {
  const loom__dview *ov = &lr->operands[p];
  int32_t rank = ov->type.rank, axis = lr->l->rules[p].axis;
  int64_t es = loom_dtype_size(ov->type.dtype), dims[LOOM_MAX_RANK], at[LOOM_MAX_RANK] = {0}, runs = 1;
  memcpy(dims, ov->type.dims, sizeof dims);
  dims[axis] = to - from;
  for (int32_t d = 0; d + 1 < rank; d++) runs *= dims[d];
  int64_t run = dims[rank - 1] * es;
  const char *base = (const char *)lr->slots[p].from->data;
  loom_status s = LOOM_OK;
  lr->outer->root->queued_host |= runs * run > 0;
  for (int64_t r = 0; !s && run > 0 && r < runs; r++) {
    int64_t off = ov->offset + from * ov->strides[axis];
    for (int32_t d = 0; d + 1 < rank; d++) off += at[d] * ov->strides[d];
    s = loom__buffer_write_ahead(b->buffer, r * run, base + off * es, run);
    for (int32_t d = rank - 2; d >= 0 && ++at[d] == dims[d]; d--) at[d] = 0; /* the next run */
  }
  return s;
}

/* Writes piece i's slice of operand p into its buffer (slot i % count), from the caller's
 * host tensor: ahead, beside the kernels queued so far (the buffer's last readers, piece
 * i - count, are among them). The slice is one run of that tensor's bytes: it is C-order and whole, and a
 * streamed slice's axes before the sliced one have length 1 (loom__value_streamed); a block an
 * outer loop passed on that is not dense there (B's columns) goes run by run (strided_write). */
static loom_status slice_write(loop_run *lr, int32_t p, int64_t i) {
  slice_slots *sl = &lr->slots[p];
  block *b = &sl->b[i % sl->count];
  const loom__dview *ov = &lr->operands[p];
  int32_t axis = lr->l->rules[p].axis;
  int64_t lo = i * lr->l->piece, len = LOOM_MIN(lr->l->piece, lr->l->n - lo), from, to, head, first, count;
  bool pads = window_clip(lr, p, lo, len, &from, &to, &head);
  loom__loop_window(&lr->l->rules[p], lo, len, &first, &count);
  bool dense = dview_dense(ov);
  if (!dense && (pads || ov->type.dtype == LOOM_Q4)) /* never so when passed on */
    return loom__error(LOOM_ERR_INTERNAL, "parameter %d: a streamed operand that is not the caller's tensor",
                       (int)p + 1);
  loom_status s = loom__exec_block_end_access(b); /* its readers are queued: the write goes behind them */
  if (!dense) return s ? s : strided_write(lr, p, b, from, to);
  if (ov->type.dtype == LOOM_Q4) {
    /* packed two to a byte: a plain slice (windows are a conv's x), one run of whole bytes */
    int64_t bytes = sl->slice / lr->l->piece * len;
    if (s || bytes == 0) return s;
    lr->outer->root->queued_host = true;
    const char *src =
        (const char *)sl->from->data + loom__dtype_offset_bytes(ov->type.dtype, slice_offset(lr, p, lo));
    return loom__buffer_write_ahead(b->buffer, 0, src, bytes);
  }
  /* the slice is one run per index before its axis (one run where those axes have length 1, as a
   * plain slice's always do; a window's need not): rows of `row` bytes, `dim` of them a run in
   * the tensor, `count` in the slice */
  int64_t row = loom_dtype_size(ov->type.dtype), runs = 1, dim = ov->type.dims[axis];
  for (int32_t d = 0; d < ov->type.rank; d++)
    if (d < axis)
      runs *= ov->type.dims[d];
    else if (d > axis)
      row *= ov->type.dims[d];
  if (s || count * row * runs == 0) return s;
  lr->outer->root->queued_host = true;
  const char *base = (const char *)sl->from->data + ov->offset * loom_dtype_size(ov->type.dtype);
  /* a window passing an end: its padding from the zeros, then the part in reach (each write
   * after a run's first waits for the one before it) */
  int64_t tail = count - head - (to - from);
  for (int64_t r = 0; !s && r < runs; r++) {
    int64_t at = r * count * row;
    if (pads && head > 0) s = loom__buffer_write_ahead(b->buffer, at, lr->zeros, head * row);
    if (!s && to > from)
      s = loom__buffer_write_ahead(b->buffer, at + head * row, base + (r * dim + from) * row,
                                   (to - from) * row);
    if (!s && pads && tail > 0)
      s = loom__buffer_write_ahead(b->buffer, at + (head + to - from) * row, lr->zeros, tail * row);
  }
  return s;
}

/* "the two streamed slices of value 'x' (double buffered)", for messages. */
static void slots_what(const loop_run *lr, int32_t p, int32_t count, char *buf, size_t size) {
  char tmp[32];
  const char *label = loom__value_label(lr->outer->g, lr->op->inputs[p], tmp, sizeof tmp);
  if (count > 1)
    snprintf(buf, size, "the two streamed slices of value '%s' (double buffered)", label);
  else
    snprintf(buf, size, "the streamed slice of value '%s'", label);
}

/* Whether streamed operand p's slice, reachable where it is, is still copied into a buffer of
 * its own: where it is not dense in the operand (a block of columns) and the body, over the
 * operand's strides, would lay out its values otherwise than over a dense slice (a reshape of
 * it would copy) or pass a view of it to an inner loop (whose body's layouts follow it). The
 * estimate lays a body out over dense parameters (loom__loop_scratch_bytes) and counts the
 * slice: the copy is what it counts, where reading in place would hold the reshape's copy
 * beside it, uncounted. A window's readers are never views (loop.c): it is read in place. */
static loom_status slice_copied(const loop_run *lr, int32_t p, bool *out) {
  const loom_graph *b = lr->l->body;
  int32_t id = b->params[p];
  loom__layout in_place = {.base = id, .owns = true};
  memcpy(in_place.strides, lr->operands[p].strides, sizeof in_place.strides);
  *out = false;
  if (loom__loop_windowed(&lr->l->rules[p]) || loom__layout_contiguous(&in_place, &b->values[id].type))
    return LOOM_OK;
  size_t n = (size_t)LOOM_MAX(b->n_values, 1);
  loom__layout *dense = loom__malloc(n * sizeof *dense), *strided = loom__malloc(n * sizeof *strided);
  if (!dense || !strided) {
    loom__free(dense);
    loom__free(strided);
    return loom__oom("a loop's slice layouts");
  }
  loom_status s = loom__graph_layouts(b, dense);
  if (!s) s = loom__graph_layouts(b, strided);
  memcpy(strided[id].strides, in_place.strides, sizeof in_place.strides);
  if (!s) s = loom__graph_layouts_given(b, strided);
  for (int32_t v = 0; !s && v < b->n_values && !*out; v++) *out = dense[v].owns != strided[v].owns;
  for (int32_t o = 0; !s && o < b->n_ops && !*out; o++)
    for (int32_t i = 0; b->ops[o].loop && i < b->ops[o].n_inputs; i++)
      *out |= strided[b->ops[o].inputs[i]].base == id;
  loom__free(dense);
  loom__free(strided);
  return s;
}

/* The slices of the streamed operands for the run of the loop: counted (what the estimate
 * says), their buffers taken where they are written in, and piece 0's written. A buffer the
 * estimate promised but the device refuses fails the loop, naming it. */
static loom_status slots_init(loop_run *lr) {
  exec_state *o = lr->outer;
  const loom_graph *b = lr->l->body;
  for (int32_t p = 0; p < lr->op->n_inputs; p++) {
    if (!lr->streamed[p]) continue;
    slice_slots *sl = &lr->slots[p];
    loom_status s = loom_type_bytes(&b->values[b->params[p]].type, &sl->slice);
    if (s) return s;
    int32_t count = lr->trips > 1 ? lr->l->slices : 1;
    char what[96] = "";
    bool fits = o->meter->limit <= 0 || count * sl->slice <= o->meter->limit - o->meter->in_use;
    if (!fits) slots_what(lr, p, count, what, sizeof what); /* labels only for messages */
    if ((s = loom__meter_take(o->meter, count * sl->slice, what))) return s;
    sl->counted = count * sl->slice;
    sl->count = count;
    sl->from = lr->operands[p].buffer || o->be->host_memory ? NULL : host_source(o, lr->op->inputs[p]);
    if (!sl->from && sl->slice > 0 && lr->operands[p].buffer && (s = slice_copied(lr, p, &sl->copied)))
      return s;
    if ((!sl->from && !sl->copied) || sl->slice == 0) {
      sl->from = NULL;
      sl->copied = false;
      continue;
    }
    /* each piece's copy is queued behind the kernels of the piece before: one buffer does */
    for (int32_t k = 0; k < (sl->copied ? 1 : count); k++) {
      loom__exec_fit_pool(o, sl->slice);
      s = loom_buffer_allocate(o->mem, sl->slice, LOOM_U8, o->node, EXEC_ALLOC_FLAGS, &sl->b[k].buffer);
      if (s) {
        sl->b[k].buffer = NULL;
        slots_what(lr, p, count, what, sizeof what);
        loom__error_prefix("%s, its %s buffer (the estimate counts it): ", what, k ? "second" : "first");
        return s;
      }
    }
    if (sl->from && (s = slice_write(lr, p, 0))) return s;
  }
  return LOOM_OK;
}

static void slots_deinit(loop_run *lr) {
  for (int32_t p = 0; lr->slots && p < lr->op->n_inputs; p++) {
    slice_slots *sl = &lr->slots[p];
    for (int32_t k = 0; k < 2; k++)
      if (sl->b[k].buffer) loom__exec_block_drop(&sl->b[k]); /* a pending write is waited for (settle) */
    loom__meter_give(lr->outer->meter, sl->counted);
    memset(sl, 0, sizeof *sl);
  }
  loom__exec_fit_pool(lr->outer, -1);
}

/* Parameter p's slice at element offset off of the operand, copied dense into its buffer (a
 * slice the slots copy: slice_copied), behind the kernels of the piece before, which read it. */
static loom_status slice_copy(loop_run *lr, exec_state *st, int32_t p, int64_t off) {
  int32_t id = st->g->params[p];
  block *b = &lr->slots[p].b[0];
  loom_status s = loom__exec_block_end_access(b);
  if (!s) s = loom_buffer_acquire(b->buffer, st->node, LOOM_ACCESS_READ | LOOM_ACCESS_WRITE, &b->handle);
  if (s) return s;
  b->acquired = true;
  b->ptr = b->handle.object ? b->handle.object : b->handle.ptr;
  st->data[id] = b->ptr;
  st->base_off[id] = 0;
  loom__dview src = lr->operands[p];
  src.type = st->g->values[id].type;
  src.offset = off;
  loom__dview dst = block_view(b, &src.type);
  return view_copy(st, &dst, &src);
}

/* Parameter p's slice for piece i: read in place at element offset off of the operand's
 * storage where it is reachable (host memory, a caller's buffer, an outer loop's slice;
 * without a buffer or a host tensor behind it the operand is empty), else its buffer, whose
 * write the device's queue now waits for (with one buffer, written now: piece 0's was in
 * slots_init); then, with two, piece i + 1's slice is written ahead into the other buffer,
 * beside piece i's kernels (queued after this). The slots hold the counts. */
static loom_status bring_slice(loop_run *lr, exec_state *st, int32_t p, int64_t i, int64_t off) {
  int32_t id = st->g->params[p];
  slice_slots *sl = &lr->slots[p];
  if (sl->copied) return slice_copy(lr, st, p, off);
  st->base_off[id] = sl->from ? 0 : off;
  if (!sl->from) {
    st->data[id] = lr->operands[p].buffer;
    return LOOM_OK;
  }
  block *b = &sl->b[i % sl->count];
  loom_status s = sl->count == 1 && i > 0 ? slice_write(lr, p, i) : LOOM_OK;
  if (!s) s = loom__buffer_join(b->buffer);
  if (!s) s = loom_buffer_acquire(b->buffer, st->node, LOOM_ACCESS_READ, &b->handle);
  if (s) return s;
  b->acquired = true;
  b->ptr = b->handle.object ? b->handle.object : b->handle.ptr;
  st->data[id] = b->ptr;
  /* a window's slice is dense in its buffer, whose strides differ from the operand's where
   * axes before the window's are longer than 1 (its readers are never views: loop.c) */
  if (loom__loop_windowed(&lr->l->rules[p]))
    loom__view_dense_strides(&st->g->values[id].type, st->layouts[id].strides);
  return sl->count == 2 && i + 1 < lr->trips ? slice_write(lr, p, i + 1) : LOOM_OK;
}

/* Parameter p for a piece whose window passes its operand's ends: a dense copy of the body's
 * parameter type, written with zeros first (the padding), then the part in reach copied in
 * on the device's queue. The parameter is read through the copy's dense strides for this
 * piece (its readers are elementwise ops and a conv, never views, so no other layout follows
 * them). */
static loom_status pad_bind(loop_run *lr, exec_state *st, int32_t p, int64_t lo, int64_t len) {
  int32_t id = st->g->params[p], axis = lr->l->rules[p].axis;
  const loom_type *t = &st->g->values[id].type;
  pad_copy *pc = &lr->pads[p];
  int64_t from, to, head, bytes = 0;
  window_clip(lr, p, lo, len, &from, &to, &head);
  loom_status s = loom_type_bytes(t, &bytes);
  if (s) return s;
  const char *what = "a window's padded copy (the padding and the part in reach)";
  pc->metered = !lr->streamed[p]; /* a streamed operand's counted slices hold it */
  if (pc->metered && (s = loom__exec_meter_take(st, bytes, -1, what))) return s;
  pc->bytes = bytes;
  loom__exec_fit_pool(st, bytes);
  memset(&pc->b, 0, sizeof pc->b);
  s = loom_buffer_allocate(st->mem, LOOM_MAX(bytes, 1), LOOM_U8, st->node, EXEC_ALLOC_FLAGS, &pc->b.buffer);
  if (!s && bytes > 0) s = loom__buffer_write_queued(pc->b.buffer, 0, lr->zeros, bytes);
  if (!s)
    s = loom_buffer_acquire(pc->b.buffer, st->node, LOOM_ACCESS_READ | LOOM_ACCESS_WRITE, &pc->b.handle);
  if (s) {
    loom_buffer_free(pc->b.buffer);
    memset(&pc->b, 0, sizeof pc->b);
    if (pc->metered) loom__meter_give(st->meter, bytes);
    pc->bytes = 0;
    loom__error_prefix("%s of parameter %d: ", what, (int)p + 1);
    return s;
  }
  pc->b.acquired = true;
  pc->b.ptr = pc->b.handle.object ? pc->b.handle.object : pc->b.handle.ptr;
  loom__dview dst = block_view(&pc->b, t), src = lr->operands[p];
  memcpy(st->layouts[id].strides, dst.strides, sizeof dst.strides);
  st->data[id] = pc->b.ptr;
  st->base_off[id] = 0;
  if (to == from) return LOOM_OK;
  src.type = *t;
  src.type.dims[axis] = dst.type.dims[axis] = to - from;
  src.offset += from * src.strides[axis];
  dst.offset += head * dst.strides[axis];
  return view_copy(st, &dst, &src);
}

/* Gives back the piece's padded copies. */
static void pads_give(loop_run *lr, exec_state *st) {
  for (int32_t p = 0; lr->pads && p < lr->op->n_inputs; p++) {
    pad_copy *pc = &lr->pads[p];
    if (!pc->b.buffer) continue;
    if (pc->metered)
      loom__exec_block_give(st, &pc->b, pc->bytes);
    else
      loom__exec_block_drop(&pc->b);
    memset(pc, 0, sizeof *pc);
  }
}

/* Binds the body's parameters and in-place results to piece i, [lo, lo + len). */
static loom_status piece_bind(loop_run *lr, exec_state *st, int64_t i, int64_t lo) {
  const loom_graph *g = st->g;
  int64_t len = LOOM_MIN(lr->l->piece, lr->l->n - lo);
  for (int32_t p = 0; p < g->n_params; p++) {
    int64_t off = slice_offset(lr, p, lo), from, to, head;
    bool pads = lr->l->rules[p].axis >= 0 && window_clip(lr, p, lo, len, &from, &to, &head);
    if (loom__loop_windowed(&lr->l->rules[p])) /* a padded copy's strides may be left from the last piece */
      memcpy(st->layouts[g->params[p]].strides, lr->operands[p].strides, sizeof lr->operands[p].strides);
    if (pads && !(lr->streamed[p] && lr->slots[p].from)) {
      loom_status s = pad_bind(lr, st, p, lo, len);
      if (s) return s;
      continue;
    }
    if (lr->streamed[p]) {
      loom_status s = bring_slice(lr, st, p, i, off);
      if (s) return s;
      continue;
    }
    st->data[g->params[p]] = lr->operands[p].buffer;
    st->base_off[g->params[p]] = off;
  }
  for (int32_t j = 0; j < g->n_outputs; j++) {
    int32_t v = g->outputs[j];
    if (!st->bound[v]) continue;
    const loom__dview *res = &lr->results[j];
    st->data[v] = res->buffer;
    if (st->bound[v] >= BOUND_SUM_FIRST) { /* the sum itself: written by piece 0, added to after */
      st->bound[v] = i == 0 ? BOUND_SUM_FIRST : BOUND_SUM_ADD;
      st->base_off[v] = res->offset;
      continue;
    }
    st->base_off[v] = res->offset + lo * res->strides[lr->l->combines[j].axis];
  }
  return LOOM_OK;
}

/* Points body b's passed-out results at piece [lo, ...)'s block (a dense one) of the output. */
static void out_bind(loop_run *lr, loop_body *b, int64_t lo) {
  const exec_state *o = lr->outer;
  for (int32_t j = 0; b->out && j < lr->op->n_outputs; j++) {
    if (!lr->passes_out[j]) continue;
    int32_t v = lr->op->outputs[j], k = 0;
    while (o->g->outputs[k] != v) k++; /* streamed out: returned */
    const loom_type *whole = &o->g->values[v].type;
    int64_t row = loom_dtype_size(whole->dtype);
    for (int32_t d = lr->l->combines[j].axis + 1; d < whole->rank; d++) row *= whole->dims[d];
    b->out[j].data = (char *)o->outputs[k].data + lo * row;
  }
}

/* Once a piece is done, the slices it streamed from a file mapping (a mapped .npy or
 * .safetensors input) leave the process's resident set again (loom__mapped_release), so a
 * file larger than memory streams through in about one piece's pages. Other memory is left
 * alone: the registry knows which is which. */
static void release_streamed(loop_run *lr, exec_state *st, int64_t lo) {
  const loom_graph *g = st->g;
  for (int32_t p = 0; p < g->n_params; p++) {
    /* a passed-on block that is not dense (B's columns): short runs, left resident */
    if (!lr->streamed[p] || !dview_dense(&lr->operands[p])) continue;
    const loom_loop_input *r = &lr->l->rules[p];
    const loom__dview *ov = &lr->operands[p];
    const loom_type *t = &g->values[g->params[p]].type;
    int64_t len = LOOM_MIN(lr->l->piece, lr->l->n - lo), from, to, head, bytes;
    window_clip(lr, p, lo, len, &from, &to, &head); /* a window's part in reach */
    int64_t off = ov->offset + from * ov->strides[r->axis];
    const loom_tensor *in =
        ov->buffer || st->be->host_memory ? NULL : host_source(lr->outer, lr->op->inputs[p]);
    const char *base = in ? in->data : st->be->host_memory ? ov->buffer : NULL;
    if (!base || loom_type_bytes(t, &bytes) || t->dims[r->axis] == 0) continue;
    bytes = bytes / t->dims[r->axis] * (to - from);
    int64_t runs = 1;
    for (int32_t d = 0; d < r->axis; d++) runs *= t->dims[d]; /* a window's slice may be several */
    bytes /= LOOM_MAX(runs, 1);
    for (int64_t k = 0; k < runs; k++)
      loom__mapped_release(
          base + loom__dtype_offset_bytes(t->dtype, off + (r->axis > 0 ? k * ov->strides[r->axis - 1] : 0)),
          (size_t)bytes);
  }
}

/* Gives back everything the piece held. */
static void piece_reset(exec_state *st) {
  for (int32_t v = 0; v < st->g->n_values; v++)
    if (st->data[v] || st->bytes[v] || st->blocks[v].buffer) loom__exec_release(st, v);
}

/* ---- the results ---- */

/* pos (i64 positions among 2k candidates, rows [outer, k, inner]) becomes the candidates'
 * indices: acc's, or the piece's plus lo; then acc = pos. A piece whose indices are not dense
 * is copied dense first. */
static loom_status merge_indices(exec_state *st, const loom__dview *acc, const loom__dview *piece, block *pos,
                                 int64_t k, int64_t inner, int64_t lo) {
  loom__dview pv = block_view(pos, &acc->type), dense = *piece;
  block copy = {0};
  int64_t bytes = elements_of(&acc->type) * 8;
  bool copied = !dview_dense(piece);
  loom_status s = copied
                      ? loom__exec_block_take(st, bytes, -1, "the temporaries of a loop's merge", NULL, &copy)
                      : LOOM_OK;
  if (s) return s;
  if (copied) {
    dense = block_view(&copy, &piece->type);
    s = view_copy(st, &dense, piece);
  }
  if (!s)
    s = st->be->merge_index(st->dev, elements_of(&acc->type), k, inner, pv.buffer, 0, acc->buffer,
                            acc->offset, dense.buffer, dense.offset, lo);
  if (copied) loom__exec_block_give(st, &copy, bytes);
  if (!s) s = view_copy(st, acc, &pv);
  return s;
}

/* argmax/argmin: values V and indices I (the loop's results) against the piece's v and li. */
static loom_status merge_arg(loop_run *lr, exec_state *st, int32_t j, int64_t lo) {
  const loom_graph *m = lr->merge.g;
  const loom__op *ops = &m->ops[lr->merge.first[j]]; /* worse, better, eq, wins, select, cast */
  const loom__dview *V = &lr->results[j], *I = &lr->results[j + 1];
  loom__dview v, li;
  loom__exec_view_of(st, st->g->outputs[j], &v);
  loom__exec_view_of(st, st->g->outputs[j + 1], &li);
  int64_t e = elements_of(&V->type);
  loom_type mask_t = V->type, idx_t = I->type;
  mask_t.dtype = LOOM_BOOL;
  block wins = {0}, eq = {0}, pos = {0};
  const char *what = "the temporaries of a loop's merge";
  loom_status s = loom__exec_block_take(st, e, -1, what, NULL, &wins);
  if (s) return s;
  loom__dview w = block_view(&wins, &mask_t);
  s = view_run(st, m, &ops[0], (loom__dview[]){v, *V}, &w);
  if (!s) s = view_run(st, m, &ops[1], &w, &w);
  if (!s && !(s = loom__exec_block_take(st, e, -1, what, NULL, &eq))) {
    loom__dview q = block_view(&eq, &mask_t);
    s = view_run(st, m, &ops[2], (loom__dview[]){*V, *V}, &q);
    if (!s) s = view_run(st, m, &ops[3], (loom__dview[]){w, q}, &w);
    loom__exec_block_give(st, &eq, e);
  }
  if (!s) s = view_run(st, m, &ops[4], (loom__dview[]){w, v, *V}, V);
  bool posed = false;
  if (!s && !(s = loom__exec_block_take(st, 8 * e, -1, what, NULL, &pos))) {
    posed = true;
    loom__dview pv = block_view(&pos, &idx_t);
    s = view_run(st, m, &ops[5], &w, &pv);
  }
  loom__exec_block_give(st, &wins, e);
  if (!s) s = merge_indices(st, I, &li, &pos, 1, 1, lo);
  if (posed) loom__exec_block_give(st, &pos, 8 * e);
  return s;
}

/* topk: the candidates so far then the piece's, side by side along the axis; the best k of
 * them (ties keep the earlier) go straight into the loop's values. */
static loom_status merge_topk(loop_run *lr, exec_state *st, int32_t j, int64_t lo) {
  const loom_graph *m = lr->merge.g;
  const loom__op *ops = &m->ops[lr->merge.first[j]]; /* concat, topk */
  const loom_loop_output *c = &lr->l->combines[j];
  const loom__dview *V = &lr->results[j], *I = &lr->results[j + 1];
  loom__dview v, li;
  loom__exec_view_of(st, st->g->outputs[j], &v);
  loom__exec_view_of(st, st->g->outputs[j + 1], &li);
  const loom_type *cat_t = &m->values[ops[0].outputs[0]].type;
  int64_t cat_bytes = 0, pos_bytes = elements_of(&I->type) * 8, inner = 1;
  loom_type_bytes(cat_t, &cat_bytes);
  for (int32_t d = c->axis + 1; d < I->type.rank; d++) inner *= I->type.dims[d];
  const char *what = "the temporaries of a loop's merge";
  block cat = {0}, pos = {0};
  loom_status s = loom__exec_block_take(st, cat_bytes, -1, what, NULL, &cat);
  if (s) return s;
  loom__dview cv = block_view(&cat, cat_t);
  s = view_run(st, m, &ops[0], (loom__dview[]){*V, v}, &cv);
  bool posed = false;
  if (!s && !(s = loom__exec_block_take(st, pos_bytes, -1, what, NULL, &pos))) {
    posed = true;
    loom__dview outs[2] = {*V, block_view(&pos, &I->type)};
    s = view_run(st, m, &ops[1], &cv, outs);
  }
  loom__exec_block_give(st, &cat, cat_bytes);
  if (!s) s = merge_indices(st, I, &li, &pos, c->k, inner, lo);
  if (posed) loom__exec_block_give(st, &pos, pos_bytes);
  return s;
}

/* A result the top graph only returns is streamed out (loom__value_streamed_out): the run
 * never holds it whole, and each piece's result, computed into a buffer of its own (dense),
 * is read out into its slot of the caller's output tensor when the piece is done: one run per
 * index before the concat axis (one where those axes have length 1). */
static bool streams_out(const loop_run *lr, int32_t j) { /* decided once, in loop_setup */
  const exec_state *o = lr->outer;
  int32_t v = lr->op->outputs[j], k = 0;
  if (!o->outputs || !loom__value_streamed_out(o->g, v)) return false;
  while (o->nested && o->g->outputs[k] != v) k++;
  return !o->nested || o->outputs[k].data != NULL; /* nested: its loop passed it out (out_bind) */
}

static loom_status stream_out(loop_run *lr, exec_state *st, int32_t j, int64_t lo) {
  const loom_graph *g = lr->outer->g;
  int32_t v = lr->op->outputs[j], k = 0;
  while (g->outputs[k] != v) k++; /* returned: loom__value_streamed_out checked it */
  const loom_type *whole = &g->values[v].type;
  int32_t axis = lr->l->combines[j].axis;
  /* never q4: quantize is not cut into pieces, and no other op makes packed values */
  int64_t es = loom_dtype_size(whole->dtype), row = 1;
  for (int32_t d = axis + 1; d < whole->rank; d++) row *= whole->dims[d];
  loom__dview pv;
  int32_t id = st->g->outputs[j];
  loom__exec_view_of(st, id, &pv);
  int64_t runs = 1, run = pv.type.dims[axis] * row * es; /* a run of the piece's result */
  for (int32_t d = 0; d < axis; d++) runs *= whole->dims[d];
  if (run * runs == 0) return LOOM_OK;
  char *dst = (char *)lr->outer->outputs[k].data + lo * row * es;
  int64_t dst_run = whole->dims[axis] * row * es; /* a run of the whole output */
  if (st->be->host_memory) {
    for (int64_t r = 0; r < runs; r++)
      memcpy(dst + r * dst_run, (const char *)pv.buffer + pv.offset * es + r * run, (size_t)run);
    return LOOM_OK;
  }
  block *b = &st->blocks[st->layouts[id].base];
  loom_status s = loom__exec_block_end_access(b);
  for (int64_t r = 0; !s && r < runs; r++)
    s = loom_buffer_read(b->buffer, pv.offset * es + r * run, dst + r * dst_run, run);
  return s;
}

/* Piece i's result j (and j + 1 for a pair) into the loop's results. */
static loom_status piece_result(loop_run *lr, exec_state *st, int32_t j, int64_t i, int64_t lo) {
  const loom_loop_output *c = &lr->l->combines[j];
  const loom__dview *res = &lr->results[j];
  loom__dview v;
  loom__exec_view_of(st, st->g->outputs[j], &v);
  bool pair = c->combine == LOOM_COMBINE_ARGMAX || c->combine == LOOM_COMBINE_ARGMIN ||
              c->combine == LOOM_COMBINE_TOPK;
  if (c->combine == LOOM_COMBINE_INDEX || elements_of(&res->type) == 0) return LOOM_OK;
  if (st->bound[st->g->outputs[j]]) return LOOM_OK; /* computed in place: its slot, or the sum */
  if (c->combine == LOOM_COMBINE_CONCAT) {
    if (lr->streams_out[j]) return stream_out(lr, st, j, lo);
    loom__dview slot = *res;
    slot.type = v.type;
    slot.offset += lo * res->strides[c->axis];
    return view_copy(st, &slot, &v);
  }
  if (i == 0) { /* the first piece's results are the accumulators */
    loom_status s = view_copy(st, res, &v);
    if (s || !pair) return s;
    loom__exec_view_of(st, st->g->outputs[j + 1], &v);
    return view_copy(st, &lr->results[j + 1], &v); /* lo is 0: its indices are global */
  }
  if (c->combine == LOOM_COMBINE_TOPK) return merge_topk(lr, st, j, lo);
  if (pair) return merge_arg(lr, st, j, lo);
  const loom__op *bin = &lr->merge.g->ops[lr->merge.first[j]];
  return view_run(st, lr->merge.g, bin, (loom__dview[]){*res, v}, res);
}

/* ---- the run ---- */

static loom_status piece_run(loop_run *lr, int64_t i) {
  int64_t lo = i * lr->l->piece, len = LOOM_MIN(lr->l->piece, lr->l->n - lo);
  loop_body *b;
  loom_status s = body_for(lr, len, &b);
  if (s) return s;
  exec_state *st = &b->st;
  s = piece_bind(lr, st, i, lo);
  out_bind(lr, b, lo);
  if (!s) s = loom__exec_run_ops(st, b->order);
  for (int32_t j = 0; !s && j < lr->op->n_outputs; j++) s = piece_result(lr, st, j, i, lo);
  if (!s) release_streamed(lr, st, lo);
  piece_reset(st);
  pads_give(lr, st);
  return s;
}

/* A loop over k of one dot summed, on host memory, every operand read in place (no slice written
 * in or copied), runs as one dot over the whole k (the body for a piece of n): the meter counts
 * the same (the slices, then the sum and the dot's scratch once), and the library gets one call,
 * not one a k-block (each wakes its threads). *next: the first piece left to run. */
static loom_status whole_k(loop_run *lr, int64_t *next) {
  const loom_graph *b = lr->l->body;
  if (!lr->outer->be->host_memory || lr->trips < 2 || b->n_ops != 1 || b->n_outputs != 1 ||
      b->ops[0].kind != LOOM_OP_DOT || b->ops[0].fused || b->outputs[0] != b->ops[0].outputs[0] ||
      lr->l->combines[0].combine != LOOM_COMBINE_SUM)
    return LOOM_OK;
  for (int32_t p = 0; p < lr->op->n_inputs; p++)
    if (loom__loop_windowed(&lr->l->rules[p]) || lr->slots[p].from || lr->slots[p].copied) return LOOM_OK;
  loop_body *wb;
  loom_status s = body_for(lr, lr->l->n, &wb);
  if (!s && wb->st.bound[b->outputs[0]] < BOUND_SUM_FIRST) body_deinit(lr, wb); /* not into the sum */
  if (s || !wb->ready) return s;
  s = piece_bind(lr, &wb->st, 0, 0);
  if (!s) s = loom__exec_run_ops(&wb->st, wb->order);
  for (int64_t i = 0; !s && i < lr->trips; i++) release_streamed(lr, &wb->st, i * lr->l->piece);
  piece_reset(&wb->st);
  if (!s) *next = lr->trips; /* every piece done */
  return s;
}

static loom_status loop_setup(loop_run *lr, exec_state *st, const loom__op *op) {
  memset(lr, 0, sizeof *lr);
  lr->outer = st;
  lr->op = op;
  lr->l = op->loop;
  lr->trips = loom__loop_trips(op->loop);
  size_t n = (size_t)LOOM_MAX(op->n_inputs, 1);
  lr->operands = loom__calloc(n, sizeof *lr->operands);
  lr->streamed = loom__calloc(n, sizeof *lr->streamed);
  lr->slots = loom__calloc(n, sizeof *lr->slots);
  lr->pads = loom__calloc(n, sizeof *lr->pads);
  if (!lr->operands || !lr->streamed || !lr->slots || !lr->pads) return loom__oom("a loop's state");
  for (int32_t i = 0; i < op->n_inputs; i++) {
    loom__exec_view_of(st, op->inputs[i], &lr->operands[i]);
    /* a slice passed on to an inner loop that slices it again is not held: a view, as an
     * operand's slice that is not streamed (the inner loop's slices are what is held) */
    lr->streamed[i] = op->loop->rules[i].axis >= 0 && loom__value_streamed(st->g, op->inputs[i]) &&
                      !loom__loop_slice_passed(st->g, op, i);
    const loom_type *t = &st->g->values[op->inputs[i]].type;
    int64_t bytes = 0;
    if (loom__loop_window_pads(op->loop, i,
                               op->loop->rules[i].axis >= 0 ? t->dims[op->loop->rules[i].axis] : 0))
      loom_type_bytes(&op->loop->body->values[op->loop->body->params[i]].type, &bytes);
    lr->zeros_bytes = LOOM_MAX(lr->zeros_bytes, bytes);
  }
  /* the padding's zeros, written from the host (kept until the run synchronizes) */
  if (lr->zeros_bytes > 0 && !(lr->zeros = loom__calloc(1, (size_t)lr->zeros_bytes)))
    return loom__oom("a loop's window padding");
  for (int32_t j = 0; j < op->n_outputs; j++) loom__exec_view_of(st, op->outputs[j], &lr->results[j]);
  /* a scan of the graph's ops: done once per loop run, not once per piece */
  for (int32_t j = 0; j < op->n_outputs; j++) {
    lr->streams_out[j] = streams_out(lr, j);
    lr->passes_out[j] = loom__loop_result_passed_out(st->g, op, j, lr->streams_out[j]);
  }
  bool merges = false;
  for (int32_t j = 0; j < op->n_outputs; j++)
    merges |=
        lr->l->combines[j].combine != LOOM_COMBINE_CONCAT && lr->l->combines[j].combine != LOOM_COMBINE_INDEX;
  loom_status s = merges ? merge_build(lr) : LOOM_OK;
  return s ? s : slots_init(lr);
}

static void loop_teardown(loop_run *lr) {
  body_deinit(lr, &lr->body[0]);
  body_deinit(lr, &lr->body[1]);
  slots_deinit(lr);
  loom__free(lr->slots);
  loom__free(lr->pads);
  loom__exec_defer_free(lr->outer, lr->zeros, NULL); /* queued writes may still read it */
  loom_graph_destroy(lr->merge.g);
  loom__free(lr->operands);
  loom__free(lr->streamed);
}

loom_status loom__exec_run_loop(exec_state *st, const loom__op *op) {
  if (!st->be->copy || !st->be->merge_index)
    return loom__error(LOOM_ERR_UNSUPPORTED, "loop: the %s backend runs no loops (no copy or merge_index)",
                       st->be->name);
  loop_run lr;
  loom_status s = loop_setup(&lr, st, op);
  int64_t i = 0;
  if (!s) s = whole_k(&lr, &i);
  for (; !s && i < lr.trips; i++) s = piece_run(&lr, i);
  if (s && i > 0) {
    int64_t lo = (i - 1) * lr.l->piece;
    loom__error_prefix("piece %lld of %lld [%lld, %lld): ", (long long)i, (long long)lr.trips, (long long)lo,
                       (long long)LOOM_MIN(lo + lr.l->piece, lr.l->n));
  }
  if (s) loom__error_prefix("loop over %lld in pieces of %lld: ", (long long)lr.l->n, (long long)lr.l->piece);
  loop_teardown(&lr);
  return s;
}
