/* Measured seconds of stages by footprint and device (stage_history.h). */
#include "runtime/stage_history.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/hash.h"
#include "core/json.h"
#include "ir/ir.h"
#include "runtime/context.h"
#include "sched/sched.h"

/* A time moves the kept one this far (the first sets it): as the shared runner's rates. */
#define HISTORY_WEIGHT 0.5

static uint64_t mix(uint64_t h, const void *data, size_t n) {
  return loom__fnv1a(h, data, n);
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
  uint64_t h = LOOM__FNV1A_INIT;
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
  const char *env = getenv("LOOM_STAGE_HISTORY");
  h->disk = !env || (strcmp(env, "0") != 0 && strcasecmp(env, "off") != 0);
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

/* ---- on disk -------------------------------------------------------------------------- */

/* The history's files are a cache: nothing about them is the caller's error, so the thread's
 * last-error message (which a caller may read after destroying the context) is kept across
 * them. */
typedef struct kept_error {
  char text[1024];
} kept_error;

static void keep_error(kept_error *k) {
  snprintf(k->text, sizeof k->text, "%s", loom_last_error());
}

static void restore_error(const kept_error *k) {
  loom__error(LOOM_OK, "%s", k->text);
}

/* The history file of device `id` of ctx: its model file's name with .stages.json for .json.
 * False when ctx has no such device or there is no cache folder. */
static bool history_path(const loom_context *ctx, const char *id, char *buf, size_t size) {
  for (int32_t i = 0; i < loom_context_device_count(ctx); i++) {
    loom_device_info d;
    if (loom_context_device_info(ctx, i, &d) || strcasecmp(d.id, id) != 0) continue;
    char model[1100];
    if (loom_sched_model_path(d.name, loom_sched_device_driver(&d), model, sizeof model)) return false;
    size_t n = strlen(model);
    if (n < 5 || strcmp(model + n - 5, ".json") != 0) return false;
    return snprintf(buf, size, "%.*s.stages.json", (int)(n - 5), model) < (int)size;
  }
  return false;
}

/* The entries of the history file at `path` into *doc's "stages" array; NULL when there is
 * none (no file, not JSON, not the format). */
static const loom__jr_value *read_file(const char *path, loom__jr_value *doc) {
  if (loom__sched_read_json(path, doc)) return NULL;
  const loom__jr_value *stages = loom__jr_get(doc, "stages");
  if (stages && stages->type == LOOM__JR_ARRAY) return stages;
  loom__jr_free(doc);
  return NULL;
}

/* One entry of a file: false when it is not {"footprint": "<16 hex digits>", "seconds": > 0,
 * "runs": >= 1}. */
static bool read_entry(const loom__jr_value *v, uint64_t *footprint, double *seconds, int32_t *runs) {
  const char *fp = loom__jr_string(v, "footprint");
  *seconds = loom__jr_number(v, "seconds", -1);
  double r = loom__jr_number(v, "runs", 0);
  if (strlen(fp) != 16 || strspn(fp, "0123456789abcdefABCDEF") != 16 || !(*seconds > 0) ||
      !(r >= 1 && r < 1e9))
    return false;
  *footprint = strtoull(fp, NULL, 16);
  *runs = (int32_t)r;
  return true;
}

/* Under h->mu: reads device id's file into the table once per context (entries it already
 * holds win, and the file's only fill free slots: they are older than anything run here). */
static void read_device(loom_context *ctx, loom__stage_history *h, const char *id) {
  if (!h->disk) return;
  for (int32_t i = 0; i < h->n_read; i++)
    if (strcasecmp(h->read[i], id) == 0) return;
  if (h->n_read == LOOM__HISTORY_DEVICES) return;
  snprintf(h->read[h->n_read++], sizeof h->read[0], "%s", id);
  kept_error kept;
  keep_error(&kept);
  char path[1200];
  loom__jr_value doc;
  const loom__jr_value *stages = history_path(ctx, id, path, sizeof path) ? read_file(path, &doc) : NULL;
  for (int32_t k = 0; stages && k < stages->n && h->n < LOOM__HISTORY_SIZE; k++) {
    uint64_t footprint;
    double seconds;
    int32_t runs;
    if (!read_entry(&stages->items[k], &footprint, &seconds, &runs) || find(h, footprint, id)) continue;
    loom__history_entry *e = &h->entries[h->n++];
    memset(e, 0, sizeof *e);
    e->footprint = footprint;
    snprintf(e->device, sizeof e->device, "%s", id);
    e->seconds = seconds;
    e->runs = runs;
  }
  if (stages) loom__jr_free(&doc);
  restore_error(&kept);
}

/* The entries of the devices whose file is `path`, most recently run first (one per
 * footprint: the latest), then the file's own that they do not hold, into `out` (at most
 * LOOM__HISTORY_SIZE); returns how many. */
static int32_t merged(const loom_context *ctx, const loom__stage_history *h, const char *path,
                      loom__history_entry *out) {
  int32_t n = 0;
  for (int32_t i = 0; i < h->n; i++) {
    char p[1200];
    const loom__history_entry *e = &h->entries[i];
    if (!history_path(ctx, e->device, p, sizeof p) || strcmp(p, path) != 0) continue;
    int32_t k = 0;
    while (k < n && out[k].footprint != e->footprint) k++;
    if (k < n && out[k].used >= e->used) continue;
    if (k == n) n++;
    out[k] = *e;
  }
  /* most recent first: a later read keeps the newest when the table is full */
  for (int32_t i = 1; i < n; i++) {
    loom__history_entry e = out[i];
    int32_t k = i;
    for (; k > 0 && out[k - 1].used < e.used; k--) out[k] = out[k - 1];
    out[k] = e;
  }
  loom__jr_value doc;
  const loom__jr_value *stages = read_file(path, &doc);
  for (int32_t k = 0; stages && k < stages->n && n < LOOM__HISTORY_SIZE; k++) {
    loom__history_entry e = {0};
    if (!read_entry(&stages->items[k], &e.footprint, &e.seconds, &e.runs)) continue;
    int32_t j = 0;
    while (j < n && out[j].footprint != e.footprint) j++;
    if (j == n) out[n++] = e;
  }
  if (stages) loom__jr_free(&doc);
  return n;
}

/* Writes entries to `path` through a temporary file; on any failure the file stays as it was. */
static void write_file(const char *path, const loom__history_entry *entries, int32_t n) {
  int fd = -1;
  char *tmp = NULL;
  if (!loom__make_parents(path) || loom__file_create_temp(path, &fd, &tmp)) return;
  FILE *f = fdopen(fd, "w");
  if (!f) {
    close(fd);
    unlink(tmp);
    loom__free(tmp);
    return;
  }
  loom__json j;
  loom__json_init(&j, f, true);
  loom__json_begin_object(&j);
  loom__json_kv_string(&j, "comment", "measured seconds of stages by footprint (docs/sched.md)");
  loom__json_key(&j, "stages");
  loom__json_begin_array(&j);
  for (int32_t i = 0; i < n; i++) {
    char hex[17];
    snprintf(hex, sizeof hex, "%016" PRIx64, entries[i].footprint);
    loom__json_begin_object(&j);
    loom__json_kv_string(&j, "footprint", hex);
    loom__json_kv_double(&j, "seconds", entries[i].seconds);
    loom__json_kv_int64(&j, "runs", entries[i].runs);
    loom__json_end_object(&j);
  }
  loom__json_end_array(&j);
  loom__json_end_object(&j);
  bool ok = loom__json_finish(&j) == LOOM_OK;
  ok = fclose(f) == 0 && ok;
  if (!ok || loom__file_commit(tmp, path)) unlink(tmp);
  loom__free(tmp);
}

void loom__history_save(loom_context *ctx) {
  loom__stage_history *h = ctx ? &ctx->history : NULL;
  if (!h || !h->ready || !h->disk) return;
  kept_error kept;
  keep_error(&kept);
  pthread_mutex_lock(&h->mu);
  loom__history_entry *out = loom__malloc(sizeof *out * LOOM__HISTORY_SIZE);
  char(*done)[1200] = loom__malloc(sizeof *done * LOOM__HISTORY_DEVICES);
  int32_t n_done = 0;
  /* A file per device run on here (entries with used > 0), once however many ids share it. */
  for (int32_t i = 0; out && done && i < h->n; i++) {
    char path[1200];
    if (!h->entries[i].used || !history_path(ctx, h->entries[i].device, path, sizeof path)) continue;
    bool seen = false;
    for (int32_t k = 0; k < n_done && !seen; k++) seen = strcmp(done[k], path) == 0;
    if (seen || n_done == LOOM__HISTORY_DEVICES) continue;
    snprintf(done[n_done++], sizeof done[0], "%s", path);
    write_file(path, out, merged(ctx, h, path, out));
  }
  loom__free(out);
  loom__free(done);
  pthread_mutex_unlock(&h->mu);
  restore_error(&kept);
}

bool loom__history_get(loom_context *ctx, uint64_t footprint, const char *device, double *seconds) {
  loom__stage_history *h = &ctx->history;
  if (!h->ready) return false;
  pthread_mutex_lock(&h->mu);
  read_device(ctx, h, device);
  const loom__history_entry *e = find(h, footprint, device);
  if (e) *seconds = e->seconds;
  pthread_mutex_unlock(&h->mu);
  return e != NULL;
}

void loom__history_put(loom_context *ctx, uint64_t footprint, const char *device, double seconds) {
  loom__stage_history *h = &ctx->history;
  if (!h->ready || !(seconds > 0)) return;
  pthread_mutex_lock(&h->mu);
  read_device(ctx, h, device);
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
