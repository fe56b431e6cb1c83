/* Measured seconds of stages by footprint and device (stage_history.h). */
#include "runtime/stage_history.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "ir/ir.h"
#include "runtime/context.h"

/* A time moves the kept one this far (the first sets it): as the shared runner's rates. */
#define HISTORY_WEIGHT 0.5

/* FNV-1a over bytes. */
static uint64_t mix(uint64_t h, const void *data, size_t n) {
  const unsigned char *p = data;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

static uint64_t mix_i64(uint64_t h, int64_t v) {
  return mix(h, &v, sizeof v);
}

static uint64_t mix_type(uint64_t h, const loom_type *t) {
  h = mix_i64(h, t->dtype);
  h = mix_i64(h, t->rank);
  for (int32_t i = 0; i < t->rank; i++) h = mix_i64(h, t->dims[i]);
  return h;
}

static uint64_t mix_list(uint64_t h, const loom_int_list *l) {
  h = mix_i64(h, l->count);
  for (int32_t i = 0; i < l->count && i < LOOM_MAX_RANK; i++) h = mix_i64(h, l->v[i]);
  return h;
}

/* Field by field: the struct's padding is not hashed. */
static uint64_t mix_attrs(uint64_t h, const loom_attrs *a) {
  int64_t value_bits = 0;
  memcpy(&value_bits, &a->value, sizeof value_bits);
  int64_t fields[] = {a->set,      a->axis, a->k,       a->n,      a->groups,      a->largest,
                      a->keepdims, a->to,   value_bits, a->ivalue, a->value_is_int};
  for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) h = mix_i64(h, fields[i]);
  const loom_int_list *lists[] = {&a->shape, &a->perm, &a->axes,   &a->start,   &a->stop,
                                  &a->step,  &a->reps, &a->stride, &a->padding, &a->dilation};
  for (size_t i = 0; i < sizeof lists / sizeof *lists; i++) h = mix_list(h, lists[i]);
  return h;
}

uint64_t loom__graph_footprint(const loom_graph *g) {
  uint64_t h = 14695981039346656037ull;
  if (!g) return h;
  h = mix_i64(h, g->n_params);
  for (int32_t p = 0; p < g->n_params; p++) h = mix_type(h, &g->values[g->params[p]].type);
  h = mix_i64(h, g->n_ops);
  for (int32_t o = 0; o < g->n_ops; o++) {
    const loom__op *op = &g->ops[o];
    h = mix_i64(h, op->kind);
    h = mix_attrs(h, &op->attrs);
    for (int32_t i = 0; i < op->n_inputs; i++) h = mix_type(h, &g->values[op->inputs[i]].type);
    for (int32_t r = 0; r < op->n_outputs; r++) h = mix_type(h, &g->values[op->outputs[r]].type);
    if (op->loop) h = mix(h, &(uint64_t){loom__graph_footprint(op->loop->body)}, sizeof(uint64_t));
    if (op->fused) h = mix(h, &(uint64_t){loom__graph_footprint(op->fused)}, sizeof(uint64_t));
    h = mix_i64(h, op->const_bytes); /* a constant's size, not its contents: the cost is alike */
  }
  return h;
}

void loom__history_init(loom__stage_history *h) {
  memset(h, 0, sizeof *h);
  h->ready = pthread_mutex_init(&h->mu, NULL) == 0;
}

void loom__history_deinit(loom__stage_history *h) {
  if (h->ready) pthread_mutex_destroy(&h->mu);
  h->ready = false;
}

static loom__history_entry *find(loom__stage_history *h, uint64_t footprint, const char *device) {
  for (int32_t i = 0; i < h->n; i++)
    if (h->entries[i].footprint == footprint && strcasecmp(h->entries[i].device, device) == 0)
      return &h->entries[i];
  return NULL;
}

bool loom__history_get(loom_context *ctx, uint64_t footprint, const char *device, double *seconds) {
  loom__stage_history *h = &ctx->history;
  if (!h->ready) return false;
  pthread_mutex_lock(&h->mu);
  const loom__history_entry *e = find(h, footprint, device);
  if (e) *seconds = e->seconds;
  pthread_mutex_unlock(&h->mu);
  return e != NULL;
}

void loom__history_put(loom_context *ctx, uint64_t footprint, const char *device, double seconds) {
  loom__stage_history *h = &ctx->history;
  if (!h->ready || !(seconds > 0)) return;
  pthread_mutex_lock(&h->mu);
  loom__history_entry *e = find(h, footprint, device);
  if (!e && h->n < LOOM__HISTORY_SIZE) {
    e = &h->entries[h->n++];
    memset(e, 0, sizeof *e);
  } else if (!e) { /* full: the entry written longest ago gives way */
    e = &h->entries[0];
    for (int32_t i = 1; i < h->n; i++)
      if (h->entries[i].used < e->used) e = &h->entries[i];
    memset(e, 0, sizeof *e);
  }
  if (e->runs == 0) {
    e->footprint = footprint;
    snprintf(e->device, sizeof e->device, "%s", device);
    e->seconds = seconds;
  } else {
    e->seconds = HISTORY_WEIGHT * seconds + (1 - HISTORY_WEIGHT) * e->seconds;
  }
  e->runs++;
  e->used = ++h->clock;
  pthread_mutex_unlock(&h->mu);
}

void loom__history_clear(loom_context *ctx) {
  loom__stage_history *h = &ctx->history;
  if (!h->ready) return;
  pthread_mutex_lock(&h->mu);
  h->n = 0;
  pthread_mutex_unlock(&h->mu);
}
