/* The trace: allocations, frees, copies, migrations and evictions with timestamps, written
 * as Chrome trace JSON (the "JSON Object Format": {"traceEvents": [...]}), which Perfetto
 * and chrome://tracing open. Each memory node is a process (pid = node index + 1, named by a
 * "process_name" metadata event); allocations and frees are instant events on thread 1,
 * copies complete events ("X", with a duration) on thread 2 of the node they go to: copies
 * between nodes, the host's reads and writes of a node's copy (loom_buffer_read/write: "read",
 * "write"), and the runtime's stages and runs (loom__hmm_trace_event: "stage", "run"). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/json.h"
#include "hmm/hmm.h"

static loom__hmm_event *next_event(loom_mem_manager *m) {
  loom__hmm_trace *t = &m->trace;
  if (!t->on) return NULL;
  if (t->count == t->cap) {
    /* A failed allocation here must not fail the operation being traced: the event is
     * dropped and counted instead. */
    int32_t cap = t->cap ? t->cap * 2 : 256;
    loom__hmm_event *items = loom__realloc(t->items, (size_t)cap * sizeof *items);
    if (!items) {
      t->dropped++;
      return NULL;
    }
    t->items = items;
    t->cap = cap;
  }
  loom__hmm_event *e = &t->items[t->count++];
  memset(e, 0, sizeof *e);
  return e;
}

LOOM_HOT void loom__hmm_trace_instant(loom_mem_manager *m, const char *name, int32_t node,
                                      const loom_buffer *b, int64_t bytes) {
  loom__hmm_event *e = next_event(m);
  if (!e) return;
  e->name = name;
  e->ph = 'i';
  e->node = node;
  e->other = -1;
  e->buffer = b ? b->id : 0;
  e->bytes = bytes;
  e->ts = loom__now() - m->t0;
}

void loom__hmm_trace_span(loom_mem_manager *m, const char *name, int32_t node, int32_t other,
                          const loom_buffer *b, int64_t bytes, double start) {
  loom__hmm_event *e = next_event(m);
  if (!e) return;
  e->name = name;
  e->ph = 'X';
  e->node = node;
  e->other = other;
  e->buffer = b ? b->id : 0;
  e->bytes = bytes;
  e->ts = start - m->t0;
  e->dur = loom__now() - start;
}

void loom__hmm_trace_event(loom_mem_manager *m, const char *name, int32_t node, double start) {
  if (!m || node < 0 || node >= m->node_count) return;
  loom__hmm_lock(m);
  loom__hmm_trace_span(m, name, node, -1, NULL, 0, start);
  loom__hmm_unlock(m);
}

double loom_mem_trace_now(void) {
  return loom__now();
}

loom_status loom_mem_trace_span(loom_mem_manager *m, int32_t node, const char *name, double start) {
  if (!m || !name) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_mem_trace_span: NULL argument");
  if (node < 0 || node >= m->node_count)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_mem_trace_span: node %d of %d", (int)node,
                       (int)m->node_count);
  double now = loom__now();
  if (!(start >= m->t0 && start <= now))
    return loom__error(
        LOOM_ERR_INVALID_ARGUMENT,
        "loom_mem_trace_span: start %.6f is not a loom_mem_trace_now() reading since the manager "
        "was made",
        start);
  loom__hmm_lock(m);
  int32_t before = m->trace.count;
  loom__hmm_trace_span(m, name, node, -1, NULL, 0, start);
  if (m->trace.count > before) m->trace.items[m->trace.count - 1].caller = true;
  loom__hmm_unlock(m);
  return LOOM_OK;
}

void loom__hmm_trace_deinit(loom__hmm_trace *t) {
  loom__free(t->items);
  memset(t, 0, sizeof *t);
}

loom_status loom_mem_trace_enable(loom_mem_manager *m, bool on) {
  if (!m) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_mem_trace_enable: manager is NULL");
  loom__hmm_lock(m);
  m->trace.on = on;
  loom__hmm_unlock(m);
  return LOOM_OK;
}

static void write_metadata(loom__json *j, const loom_mem_manager *m) {
  for (int32_t i = 0; i < m->node_count; i++) {
    loom__json_begin_object(j);
    loom__json_kv_string(j, "name", "process_name");
    loom__json_kv_string(j, "ph", "M");
    loom__json_kv_int64(j, "pid", i + 1);
    loom__json_key(j, "args");
    loom__json_begin_object(j);
    loom__json_kv_string(j, "name", m->nodes[i].id);
    loom__json_end_object(j);
    loom__json_end_object(j);
  }
}

static void write_event(loom__json *j, const loom_mem_manager *m, const loom__hmm_event *e) {
  char ph[2] = {e->ph, '\0'};
  loom__json_begin_object(j);
  loom__json_kv_string(j, "name", e->name);
  loom__json_kv_string(j, "cat", e->caller ? "caller" : "hmm");
  loom__json_kv_string(j, "ph", ph);
  loom__json_kv_double(j, "ts", e->ts * 1e6);
  if (e->ph == 'X')
    loom__json_kv_double(j, "dur", e->dur * 1e6);
  else
    loom__json_kv_string(j, "s", "p");
  loom__json_kv_int64(j, "pid", e->node + 1);
  loom__json_kv_int64(j, "tid", e->caller ? 3 : e->ph == 'X' ? 2 : 1);
  loom__json_key(j, "args");
  loom__json_begin_object(j);
  if (e->buffer) loom__json_kv_int64(j, "buffer", (int64_t)e->buffer);
  loom__json_kv_int64(j, "bytes", e->bytes);
  if (e->other >= 0) loom__json_kv_string(j, "from", m->nodes[e->other].id);
  loom__json_end_object(j);
  loom__json_end_object(j);
}

loom_status loom_mem_trace_write(const loom_mem_manager *m, const char *path) {
  if (!m || !path)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_mem_trace_write: NULL %s", m ? "path" : "manager");
  int fd = -1;
  char *temp = NULL;
  loom_status s = loom__file_create_temp(path, &fd, &temp);
  FILE *f = s == LOOM_OK ? fdopen(fd, "w") : NULL;
  if (s == LOOM_OK && !f) {
    s = loom__error(LOOM_ERR_IO, "%s: %s", temp, strerror(errno));
    close(fd);
  }
  if (s == LOOM_OK) {
    loom__json j;
    loom__json_init(&j, f, false);
    loom__hmm_lock(m);
    loom__json_begin_object(&j);
    loom__json_key(&j, "traceEvents");
    loom__json_begin_array(&j);
    write_metadata(&j, m);
    for (int32_t i = 0; i < m->trace.count; i++) write_event(&j, m, &m->trace.items[i]);
    loom__json_end_array(&j);
    loom__json_kv_string(&j, "displayTimeUnit", "ms");
    loom__json_key(&j, "otherData");
    loom__json_begin_object(&j);
    loom__json_kv_int64(&j, "dropped_events", m->trace.dropped);
    loom__json_end_object(&j);
    loom__json_end_object(&j);
    loom__hmm_unlock(m);
    s = loom__json_finish(&j);
    if (fclose(f) != 0 && s == LOOM_OK) s = loom__error(LOOM_ERR_IO, "cannot write '%s'", temp);
    if (s == LOOM_OK) {
      s = loom__file_commit(temp, path);
    } else {
      unlink(temp);
    }
  }
  loom__free(temp);
  if (s != LOOM_OK) loom__error_prefix("loom_mem_trace_write '%s': ", path);
  return s;
}
