/* Combining the results of a loop's ranges on the host (combine.h).
 *
 * Each combined result starts as the first range's and takes the others in piece order, the
 * way the loop's executor takes its pieces: elementwise combines by the binary op in place,
 * argmax/argmin by a mask of where the later range is better, topk by a topk of the kept
 * candidates and the range's side by side. The ops are those of a small merge graph run by
 * the cpu kernels on host views, as exec.c's loops run theirs on the device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "backends/cpu/cpu_kernels.h"
#include "runtime/combine.h"

typedef struct combine_run {
  const loom_graph *g;
  const loom__op *op;
  const loom__loop *l;
  const loom__partial **order; /* the partials by their first piece */
  int32_t n;
  loom_tensor *outs;
} combine_run;

static int64_t elements_of(const loom_type *t) {
  int64_t n = 1;
  for (int32_t d = 0; d < t->rank; d++) n *= t->dims[d];
  return n;
}

static loom__view host_view(const loom_type *t, void *data) {
  loom__view v;
  memset(&v, 0, sizeof v);
  v.type = *t;
  v.data = data;
  loom__view_dense_strides(t, v.strides);
  return v;
}

static const char *loop_label(const combine_run *c, char *buf, size_t size) {
  char v[32];
  snprintf(buf, size, "loop %s (op %d, %lld pieces of %lld)",
           loom__value_label(c->g, c->op->outputs[0], v, sizeof v), (int)(c->op - c->g->ops),
           (long long)loom__loop_trips(c->l), (long long)c->l->piece);
  return buf;
}

/* ---- checks ---- */

static int cmp_first(const void *a, const void *b) {
  const loom__partial *x = *(const loom__partial *const *)a, *y = *(const loom__partial *const *)b;
  return x->first < y->first ? -1 : x->first > y->first;
}

/* The partials sorted by their first piece must tile [0, trips) exactly. */
static loom_status check_cover(const combine_run *c) {
  char lb[128];
  int64_t at = 0, trips = loom__loop_trips(c->l);
  for (int32_t i = 0; i < c->n; i++) {
    const loom__partial *p = c->order[i];
    if (p->first >= p->last || p->last > trips || !p->results)
      return loom__error(LOOM_ERR_INVALID_ARGUMENT,
                         "%s: partial of pieces [%lld, %lld): not a range of its pieces%s",
                         loop_label(c, lb, sizeof lb), (long long)p->first, (long long)p->last,
                         p->results ? "" : " (no results)");
    if (p->first != at)
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: the partials %s pieces [%lld, %lld)",
                         loop_label(c, lb, sizeof lb), p->first > at ? "leave out" : "overlap on",
                         (long long)LOOM_MIN(at, p->first), (long long)LOOM_MAX(at, p->first));
    at = p->last;
  }
  if (at != trips)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: the partials leave out pieces [%lld, %lld)",
                       loop_label(c, lb, sizeof lb), (long long)at, (long long)trips);
  return LOOM_OK;
}

/* What result j of a range of `len` elements is: the loop's, with len along a concat axis. */
static loom_type range_type(const combine_run *c, int32_t j, int64_t len) {
  loom_type t = loom__val(c->g, c->op->outputs[j])->type;
  if (c->l->combines[j].combine == LOOM_COMBINE_CONCAT) t.dims[c->l->combines[j].axis] = len;
  return t;
}

static loom_status check_types(const combine_run *c) {
  char lb[128], want[LOOM_TYPE_STRING_MAX], got[LOOM_TYPE_STRING_MAX];
  for (int32_t j = 0; j < c->op->n_outputs; j++) {
    const loom_type *t = &loom__val(c->g, c->op->outputs[j])->type;
    if (t->dtype == LOOM_Q4)
      return loom__error(LOOM_ERR_UNSUPPORTED, "%s: result %d is q4, which partials are not combined in",
                         loop_label(c, lb, sizeof lb), (int)j);
    if (!loom_type_equal(&c->outs[j].type, t) || (!c->outs[j].data && elements_of(t) > 0))
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: output %d is %s%s, the loop's result is %s",
                         loop_label(c, lb, sizeof lb), (int)j,
                         loom_type_format(&c->outs[j].type, got, sizeof got),
                         c->outs[j].data ? "" : " with no data", loom_type_format(t, want, sizeof want));
    for (int32_t i = 0; i < c->n; i++) {
      const loom__partial *p = c->order[i];
      int64_t lo = p->first * c->l->piece, len = LOOM_MIN(p->last * c->l->piece, c->l->n) - lo;
      loom_type rt = range_type(c, j, len);
      const loom_tensor *r = &p->results[j];
      if (!loom_type_equal(&r->type, &rt) || (!r->data && elements_of(&rt) > 0))
        return loom__error(LOOM_ERR_INVALID_ARGUMENT,
                           "%s: the partial of pieces [%lld, %lld): result %d is %s%s, expected %s",
                           loop_label(c, lb, sizeof lb), (long long)p->first, (long long)p->last, (int)j,
                           loom_type_format(&r->type, got, sizeof got), r->data ? "" : " with no data",
                           loom_type_format(&rt, want, sizeof want));
    }
  }
  return LOOM_OK;
}

/* Runs op of merge graph m on host views, with its scratch. */
static loom_status op_run(const loom_graph *m, int32_t i, const loom__view *in, const loom__view *out) {
  const loom__op *op = &m->ops[i];
  int64_t bytes = loom__op_scratch_bytes(m, op);
  void *scratch = bytes > 0 ? loom__malloc((size_t)bytes) : NULL;
  if (bytes > 0 && !scratch) return loom__oom("the scratch of a partials' combine");
  loom_status s = loom__cpu_run_op(m, op, in, out, scratch, bytes);
  loom__free(scratch);
  return s;
}

/* ---- combining ---- */

static int64_t lo_of(const combine_run *c, const loom__partial *p) {
  return p->first * c->l->piece;
}

/* CONCAT: each range's part into its slot along the axis. */
static void combine_concat(const combine_run *c, int32_t j) {
  loom_tensor *out = &c->outs[j];
  int32_t axis = c->l->combines[j].axis, rank = out->type.rank;
  int64_t esize = loom_dtype_size(out->type.dtype), dst_strides[LOOM_MAX_RANK];
  loom__view_dense_strides(&out->type, dst_strides);
  for (int32_t i = 0; i < c->n; i++) {
    const loom_tensor *r = &c->order[i]->results[j];
    if (elements_of(&r->type) == 0) continue;
    char *dst = (char *)out->data + lo_of(c, c->order[i]) * dst_strides[axis] * esize;
    loom__cpu_strided_copy(esize, rank, r->type.dims, dst, dst_strides, r->data, NULL);
  }
}

/* INDEX results count from their range's start; the loop's from 0. */
static void add_start(int64_t *idx, int64_t n, int64_t lo) {
  for (int64_t e = 0; e < n; e++) idx[e] += lo;
}

static loom_status combine_elementwise(const combine_run *c, const loom_graph *m, int32_t j) {
  loom_tensor *out = &c->outs[j];
  loom__view acc = host_view(&out->type, out->data);
  loom_status s = LOOM_OK;
  for (int32_t i = 1; !s && i < c->n; i++) {
    const loom_tensor *r = &c->order[i]->results[j];
    loom__view in[2] = {acc, host_view(&r->type, r->data)};
    s = op_run(m, 0, in, &acc);
  }
  return s;
}

/* argmax/argmin: the kept values and indices against each later range's. */
static loom_status combine_arg(const combine_run *c, const loom_graph *m, int32_t j) {
  loom_tensor *V = &c->outs[j], *I = &c->outs[j + 1];
  int64_t e = elements_of(&V->type);
  loom_type mask_t = V->type;
  mask_t.dtype = LOOM_BOOL;
  bool *wins = loom__malloc((size_t)LOOM_MAX(e, 1)), *eq = loom__malloc((size_t)LOOM_MAX(e, 1));
  loom_status s = wins && eq ? LOOM_OK : loom__oom("the masks of a partials' argmax combine");
  loom__view acc = host_view(&V->type, V->data), w = host_view(&mask_t, wins), q = host_view(&mask_t, eq);
  for (int32_t i = 1; !s && i < c->n; i++) {
    const loom_tensor *v = &c->order[i]->results[j], *li = &c->order[i]->results[j + 1];
    loom__view pv = host_view(&v->type, v->data);
    s = op_run(m, 0, (loom__view[]){pv, acc}, &w); /* worse */
    if (!s) s = op_run(m, 1, &w, &w);              /* better */
    if (!s) s = op_run(m, 2, (loom__view[]){acc, acc}, &q);
    if (!s) s = op_run(m, 3, (loom__view[]){w, q}, &w); /* wins */
    if (!s) s = op_run(m, 4, (loom__view[]){w, pv, acc}, &acc);
    if (s) break;
    int64_t lo = lo_of(c, c->order[i]), *idx = I->data;
    const int64_t *pi = li->data;
    for (int64_t k = 0; k < e; k++)
      if (wins[k]) idx[k] = pi[k] + lo;
  }
  loom__free(wins);
  loom__free(eq);
  return s;
}

/* topk: the kept candidates then the range's, side by side along the axis; the best k of them
 * (ties keep the earlier, so the lower index) become the kept ones. */
static loom_status combine_topk(const combine_run *c, const loom_graph *m, int32_t j) {
  const loom_loop_output *cb = &c->l->combines[j];
  loom_tensor *V = &c->outs[j], *I = &c->outs[j + 1];
  const loom_type *cat_t = &m->values[m->ops[0].outputs[0]].type;
  int64_t e = elements_of(&I->type), inner = 1, k = cb->k, cat_bytes = 0;
  loom_type_bytes(cat_t, &cat_bytes);
  for (int32_t d = cb->axis + 1; d < I->type.rank; d++) inner *= I->type.dims[d];
  void *cat = loom__malloc((size_t)LOOM_MAX(cat_bytes, 1));
  int64_t *pos = loom__malloc(sizeof(int64_t) * (size_t)LOOM_MAX(e, 1));
  loom_status s = cat && pos ? LOOM_OK : loom__oom("the candidates of a partials' topk combine");
  loom__view acc = host_view(&V->type, V->data), cv = host_view(cat_t, cat);
  for (int32_t i = 1; !s && i < c->n; i++) {
    const loom_tensor *v = &c->order[i]->results[j], *li = &c->order[i]->results[j + 1];
    s = op_run(m, 0, (loom__view[]){acc, host_view(&v->type, v->data)}, &cv);
    loom__view outs[2] = {acc, host_view(&I->type, pos)};
    if (!s) s = op_run(m, 1, &cv, outs);
    if (s) break;
    int64_t lo = lo_of(c, c->order[i]), *idx = I->data;
    const int64_t *pi = li->data;
    for (int64_t x = 0; x < e; x++) { /* rows [outer, k, inner], as backend.h's merge_index */
      int64_t row = x / (k * inner) * k * inner + x % inner, p = pos[x];
      pos[x] = p < k ? idx[row + p * inner] : pi[row + (p - k) * inner] + lo;
    }
    memcpy(idx, pos, sizeof(int64_t) * (size_t)e);
  }
  loom__free(cat);
  loom__free(pos);
  return s;
}

/* The first range's result is where a combined result starts. */
static void copy_first(const combine_run *c, int32_t j) {
  int64_t bytes = 0;
  loom_type_bytes(&c->outs[j].type, &bytes);
  if (bytes > 0) memcpy(c->outs[j].data, c->order[0]->results[j].data, (size_t)bytes);
}

static loom_status combine_result(const combine_run *c, int32_t j) {
  const loom_loop_output *cb = &c->l->combines[j];
  if (cb->combine == LOOM_COMBINE_INDEX) return LOOM_OK; /* with its pair */
  if (cb->combine == LOOM_COMBINE_CONCAT) {
    combine_concat(c, j);
    return LOOM_OK;
  }
  bool pair = cb->combine == LOOM_COMBINE_ARGMAX || cb->combine == LOOM_COMBINE_ARGMIN ||
              cb->combine == LOOM_COMBINE_TOPK;
  copy_first(c, j);
  if (pair) {
    copy_first(c, j + 1);
    add_start(c->outs[j + 1].data, elements_of(&c->outs[j + 1].type), lo_of(c, c->order[0]));
  }
  if (c->n == 1 || elements_of(&c->outs[j].type) == 0) return LOOM_OK;
  loom_graph *m = NULL;
  loom_status s = loom_graph_create("partials_merge", &m);
  if (s) return s;
  const loom_type *t = &c->outs[j].type;
  loom__loop_merge_ops(m, cb, loom_graph_param(m, NULL, t), loom_graph_param(m, NULL, t));
  s = m->error;
  if (!s)
    s = cb->combine == LOOM_COMBINE_TOPK ? combine_topk(c, m, j)
        : pair                           ? combine_arg(c, m, j)
                                         : combine_elementwise(c, m, j);
  loom_graph_destroy(m);
  return s;
}

loom_status loom__combine_partials(const loom_graph *g, int32_t op, const loom__partial *parts,
                                   int32_t n_parts, loom_tensor *outs) {
  if (!g || op < 0 || op >= g->n_ops || !g->ops[op].loop)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "combine partials: op %d is not a loop of graph '%s'",
                       (int)op, g ? g->name : "(null)");
  if (n_parts < 1 || !parts || !outs)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "combine partials: %d partials%s", (int)n_parts,
                       outs ? "" : ", NULL outputs");
  combine_run c = {.g = g, .op = &g->ops[op], .l = g->ops[op].loop, .n = n_parts, .outs = outs};
  c.order = loom__malloc(sizeof *c.order * (size_t)n_parts);
  if (!c.order) return loom__oom("the partials' order");
  for (int32_t i = 0; i < n_parts; i++) c.order[i] = &parts[i];
  qsort(c.order, (size_t)n_parts, sizeof *c.order, cmp_first);
  loom_status s = check_cover(&c);
  if (!s) s = check_types(&c);
  for (int32_t j = 0; !s && j < c.op->n_outputs; j++) s = combine_result(&c, j);
  if (s) {
    char lb[128];
    if (s != LOOM_ERR_INVALID_ARGUMENT && s != LOOM_ERR_UNSUPPORTED)
      loom__error_prefix("combining the partials of %s: ", loop_label(&c, lb, sizeof lb));
  }
  loom__free((void *)c.order);
  return s;
}
