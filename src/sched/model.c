/* Performance models: seconds per kernel of an op class as a function of its size, fitted
 * from measurements, kept as small JSON files in the cache folder. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "sched/sched_impl.h"

static const char *const class_names[] = {
#define LOOM_X(e, name) name,
    LOOM_OP_CLASS_MAP(LOOM_X)
#undef LOOM_X
};

const char *loom_op_class_name(loom_op_class c) {
  return c >= 0 && c < LOOM_OP_CLASS_COUNT ? class_names[c] : "?";
}

bool loom_op_class_parse(const char *name, loom_op_class *out_class) {
  for (int c = 0; name && c < LOOM_OP_CLASS_COUNT; c++) {
    if (strcmp(name, class_names[c]) == 0) {
      *out_class = (loom_op_class)c;
      return true;
    }
  }
  return false;
}

/* The table's time at `size`: linear between points; beyond the last, the call plus the size
 * at the last point's rate over its call (the rate of the largest size measured, not of the
 * last segment: a noisy point between two large sizes tilted every larger kernel's price).
 * Below the first, a kernel costs its call (`latency`, a tiny kernel's time, at most the first
 * point's) plus its size at the first point's rate over that call: a table flat below its
 * first point priced each of a limit's thousands of small pieces as the smallest size
 * calibrated, hundreds of times their cost. */
static double table_time(const loom_sched_class_model *m, double size) {
  int32_t n = m->n_points;
  const double *x = m->point_size, *y = m->point_seconds;
  if (size <= x[0]) {
    double call = m->latency < y[0] ? m->latency : y[0];
    return call + (y[0] - call) * size / x[0];
  }
  for (int32_t i = 1; i < n; i++) {
    if (size <= x[i]) return y[i - 1] + (y[i] - y[i - 1]) * (size - x[i - 1]) / (x[i] - x[i - 1]);
  }
  double call = m->latency < y[n - 1] ? m->latency : y[n - 1];
  return call + (y[n - 1] - call) * size / x[n - 1];
}

double loom__sched_class_time(const loom_sched_class_model *m, double size) {
  if (!(size > 0)) return 0;
  return m->n_points > 0 ? table_time(m, size) : m->latency + size * m->seconds_per_unit;
}

double loom_sched_model_time(const loom_sched_model *model, loom_op_class c, double size) {
  if (!model || c < 0 || c >= LOOM_OP_CLASS_COUNT || !model->cls[c].known) return INFINITY;
  return loom__sched_class_time(&model->cls[c], size);
}

static int by_size(const void *a, const void *b) {
  const double *x = a, *y = b;
  return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* Sorted, repeated sizes averaged, into the table (the first LOOM_SCHED_MAX_POINTS). */
static void keep_points(loom_sched_class_model *m, double (*pts)[2], int32_t n) {
  qsort(pts, (size_t)n, sizeof pts[0], by_size);
  m->n_points = 0;
  for (int32_t i = 0; i < n;) {
    int32_t j = i;
    double sum = 0;
    for (; j < n && pts[j][0] == pts[i][0]; j++) sum += pts[j][1];
    if (m->n_points < LOOM_SCHED_MAX_POINTS) {
      m->point_size[m->n_points] = pts[i][0];
      m->point_seconds[m->n_points++] = sum / (j - i);
    }
    i = j;
  }
}

loom_status loom_sched_model_fit(loom_sched_model *model, loom_op_class c, const double *sizes,
                                 const double *seconds, int32_t n) {
  if (!model || c < 0 || c >= LOOM_OP_CLASS_COUNT || !sizes || !seconds || n < 1 || n > 1024)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "model fit: bad arguments (n = %d)", n);
  double(*pts)[2] = loom__malloc(sizeof *pts * (size_t)n);
  if (!pts) return loom__oom("model fit");
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (int32_t i = 0; i < n; i++) {
    if (!(sizes[i] > 0) || !(seconds[i] > 0) || !isfinite(sizes[i]) || !isfinite(seconds[i])) {
      loom__free(pts);
      return loom__error(LOOM_ERR_INVALID_ARGUMENT,
                         "model fit: %s point %d: size %g, seconds %g (both must be > 0)",
                         loom_op_class_name(c), i, sizes[i], seconds[i]);
    }
    pts[i][0] = sizes[i], pts[i][1] = seconds[i];
    sx += sizes[i], sy += seconds[i], sxx += sizes[i] * sizes[i], sxy += sizes[i] * seconds[i];
  }
  loom_sched_class_model *m = &model->cls[c];
  double den = n * sxx - sx * sx;
  double b = den > 1e-12 * sxx * n ? (n * sxy - sx * sy) / den : sxy / sxx;
  double a = (sy - b * sx) / n;
  if (b < 0 || a < 0) { /* noise: keep the line through the origin, never negative */
    a = a < 0 ? 0 : a;
    b = a == 0 ? sxy / sxx : 0;
    if (b == 0) a = sy / n;
  }
  m->known = true, m->latency = a, m->seconds_per_unit = b;
  keep_points(m, pts, n);
  loom__free(pts);
  return LOOM_OK;
}

/* ---- files ------------------------------------------------------------------------------ */

static void sanitize(const char *s, char *out, size_t size) {
  size_t i = 0;
  for (; s && s[i] && i + 1 < size; i++) {
    unsigned char ch = (unsigned char)s[i];
    out[i] = isalnum(ch) || ch == '.' || ch == '-' || ch == '_' ? (char)ch : '_';
  }
  out[i] = '\0';
}

static loom_status model_dir(char *buf, size_t size) {
  const char *dir = getenv("LOOM_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  int n;
  if (dir && *dir)
    n = snprintf(buf, size, "%s/models", dir);
  else if (xdg && *xdg)
    n = snprintf(buf, size, "%s/loom/models", xdg);
  else if (home && *home)
    n = snprintf(buf, size, "%s/.cache/loom/models", home);
  else
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "models: no cache folder (set LOOM_CACHE_DIR or HOME)");
  if (n < 0 || (size_t)n >= size)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "models: the cache path is too long");
  return LOOM_OK;
}

loom_status loom_sched_model_path(const char *name, const char *driver, char *buf, size_t size) {
  if (!name || !*name || !buf) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "models: no device name");
  char dir[1024], n[128], d[128];
  loom_status s = model_dir(dir, sizeof dir);
  if (s) return s;
  sanitize(name, n, sizeof n);
  sanitize(driver ? driver : "", d, sizeof d);
  int len = snprintf(buf, size, "%s/%s@%s.json", dir, n, d);
  if (len < 0 || (size_t)len >= size)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "models: the path is too long");
  return LOOM_OK;
}

static void write_class(loom__json *j, const char *name, const loom_sched_class_model *m) {
  loom__json_key(j, name);
  loom__json_begin_object(j);
  loom__json_kv_double(j, "latency", m->latency);
  loom__json_kv_double(j, "seconds_per_unit", m->seconds_per_unit);
  if (m->n_points) {
    loom__json_key(j, "points");
    loom__json_begin_array(j);
    for (int32_t i = 0; i < m->n_points; i++) {
      loom__json_begin_array(j);
      loom__json_double(j, m->point_size[i]);
      loom__json_double(j, m->point_seconds[i]);
      loom__json_end_array(j);
    }
    loom__json_end_array(j);
  }
  loom__json_end_object(j);
}

void loom__sched_model_write(const loom_sched_model *model, loom__json *j) {
  for (int c = 0; c < LOOM_OP_CLASS_COUNT; c++)
    if (model->cls[c].known) write_class(j, class_names[c], &model->cls[c]);
}

loom_status loom_sched_model_save(const loom_sched_model *model, const char *name, const char *driver) {
  char path[1100];
  if (!model) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "models: NULL model");
  loom_status s = loom_sched_model_path(name, driver, path, sizeof path);
  if (s) return s;
  if (!loom__make_parents(path))
    return loom__error(LOOM_ERR_IO, "%s: cannot create its folder: %s", path, strerror(errno));
  int fd = -1;
  char *tmp = NULL;
  if ((s = loom__file_create_temp(path, &fd, &tmp))) return s;
  FILE *f = fdopen(fd, "w");
  if (!f) {
    close(fd);
    unlink(tmp);
    loom__free(tmp);
    return loom__error(LOOM_ERR_IO, "%s: %s", path, strerror(errno));
  }
  loom__json j;
  loom__json_init(&j, f, true);
  loom__json_begin_object(&j);
  loom__json_kv_string(&j, "device", name);
  loom__json_kv_string(&j, "driver", driver ? driver : "");
  loom__json_key(&j, "models");
  loom__json_begin_object(&j);
  loom__sched_model_write(model, &j);
  loom__json_end_object(&j);
  if (model->host_bandwidth > 0) {
    loom__json_key(&j, "host_link");
    loom__json_begin_object(&j);
    loom__json_kv_double(&j, "bandwidth", model->host_bandwidth);
    loom__json_kv_double(&j, "latency", model->host_latency);
    loom__json_end_object(&j);
  }
  if (model->piece_seconds > 0 || model->gather_row_seconds > 0) {
    loom__json_key(&j, "loop");
    loom__json_begin_object(&j);
    loom__json_kv_double(&j, "piece_seconds", model->piece_seconds);
    loom__json_kv_double(&j, "gather_row_seconds", model->gather_row_seconds);
    loom__json_end_object(&j);
  }
  if (model->fused_element_seconds > 0 || model->fault_page_seconds > 0) {
    loom__json_key(&j, "fused");
    loom__json_begin_object(&j);
    loom__json_kv_double(&j, "element_seconds", model->fused_element_seconds);
    if (model->fused_small_element_seconds > 0)
      loom__json_kv_double(&j, "small_element_seconds", model->fused_small_element_seconds);
    loom__json_kv_double(&j, "fault_page_seconds", model->fault_page_seconds);
    loom__json_end_object(&j);
  }
  if (model->select_ratio > 0) {
    loom__json_key(&j, "ops");
    loom__json_begin_object(&j);
    loom__json_kv_double(&j, "select_ratio", model->select_ratio);
    loom__json_end_object(&j);
  }
  if (model->thin_gemm.known || model->stream.known) {
    loom__json_key(&j, "pieces");
    loom__json_begin_object(&j);
    if (model->thin_gemm.known) write_class(&j, "thin_gemm", &model->thin_gemm);
    if (model->stream.known) write_class(&j, "stream", &model->stream);
    loom__json_end_object(&j);
  }
  loom__json_end_object(&j);
  s = loom__json_finish(&j);
  if (fclose(f) != 0 && !s) s = loom__error(LOOM_ERR_IO, "%s: %s", path, strerror(errno));
  if (s) {
    unlink(tmp);
  } else {
    s = loom__file_commit(tmp, path);
  }
  loom__free(tmp);
  return s;
}

/* A failed read of a JSON file as a status: a missing file is NOT_FOUND (callers treat it as
 * "no such model yet"), one too large INVALID_ARGUMENT, any other failure IO. */
static loom_status read_failed(const char *path, const char *why, int err) {
  if (err == ENOENT) return loom__error(LOOM_ERR_NOT_FOUND, "%s: %s", path, why);
  return loom__error(err ? LOOM_ERR_IO : LOOM_ERR_INVALID_ARGUMENT, "%s: %s", path, why);
}

loom_status loom__sched_read_text(const char *path, char **out, size_t *out_len) {
  char why[256];
  int err = 0;
  if (loom__jr_read_text(path, 0, out, out_len, why, sizeof why, &err)) return read_failed(path, why, err);
  return LOOM_OK;
}

loom_status loom__sched_read_json(const char *path, loom__jr_value *out) {
  char *text = NULL, why[256] = "";
  size_t len = 0;
  loom_status s = loom__sched_read_text(path, &text, &len);
  if (s) return s;
  int bad = loom__jr_parse(text, len, out, why, sizeof why);
  free(text);
  if (bad) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: not JSON: %s", path, why);
  return LOOM_OK;
}

static loom_status read_pieces(const loom__jr_value *pieces, const char *path, loom_sched_model *out);

loom_status loom_sched_model_load(const char *name, const char *driver, loom_sched_model *out) {
  char path[1100], where[1200];
  if (!out) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "models: NULL out");
  loom_status s = loom_sched_model_path(name, driver, path, sizeof path);
  if (s) return s;
  loom__jr_value doc;
  if ((s = loom__sched_read_json(path, &doc))) return s;
  snprintf(where, sizeof where, "%s: models", path);
  const loom__jr_value *models = loom__jr_get(&doc, "models");
  s = models ? loom__sched_model_read(models, where, out)
             : loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: no \"models\" object", path);
  const loom__jr_value *link = loom__jr_get(&doc, "host_link");
  if (!s && link) {
    out->host_bandwidth = loom__jr_number(link, "bandwidth", -1);
    out->host_latency = loom__jr_number(link, "latency", -1);
    if (!(out->host_bandwidth > 0) || !(out->host_latency >= 0))
      s = loom__error(LOOM_ERR_INVALID_ARGUMENT,
                      "%s: host_link: \"bandwidth\" must be a number > 0 and \"latency\" one >= 0", path);
  }
  const loom__jr_value *loop = loom__jr_get(&doc, "loop");
  if (!s && loop) {
    out->piece_seconds = loom__jr_number(loop, "piece_seconds", -1);
    out->gather_row_seconds = loom__jr_number(loop, "gather_row_seconds", 0);
    if (!(out->piece_seconds >= 0) || !(out->gather_row_seconds >= 0))
      s = loom__error(LOOM_ERR_INVALID_ARGUMENT,
                      "%s: loop: \"piece_seconds\" and \"gather_row_seconds\" must be numbers >= 0", path);
  }
  const loom__jr_value *fused = loom__jr_get(&doc, "fused");
  if (!s && fused) {
    out->fused_element_seconds = loom__jr_number(fused, "element_seconds", -1);
    out->fault_page_seconds = loom__jr_number(fused, "fault_page_seconds", 0);
    out->fused_small_element_seconds = loom__jr_number(fused, "small_element_seconds", 0);
    if (!(out->fused_element_seconds >= 0) || !(out->fault_page_seconds >= 0) ||
        !(out->fused_small_element_seconds >= 0))
      s = loom__error(
          LOOM_ERR_INVALID_ARGUMENT,
          "%s: fused: \"element_seconds\", \"small_element_seconds\" and \"fault_page_seconds\" must "
          "be numbers >= 0",
          path);
  }
  const loom__jr_value *ops = loom__jr_get(&doc, "ops");
  if (!s && ops) {
    out->select_ratio = loom__jr_number(ops, "select_ratio", -1);
    if (!(out->select_ratio > 0))
      s = loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: ops: \"select_ratio\" must be a number > 0", path);
  }
  const loom__jr_value *pieces = loom__jr_get(&doc, "pieces");
  if (!s && pieces) s = read_pieces(pieces, path, out);
  loom__jr_free(&doc);
  return s;
}

/* ---- reading a model object ------------------------------------------------------------ */

static loom_status bad(const char *where, const char *cls, const char *what) {
  return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s.%s: %s", where, cls, what);
}

static loom_status read_points(const loom__jr_value *pts, const char *where, const char *cls,
                               loom_sched_class_model *m) {
  if (pts->type != LOOM__JR_ARRAY || pts->n < 1 || pts->n > LOOM_SCHED_MAX_POINTS)
    return bad(where, cls, "\"points\" must be an array of 1 to 16 [size, seconds] pairs");
  for (int32_t i = 0; i < pts->n; i++) {
    const loom__jr_value *p = &pts->items[i];
    if (p->type != LOOM__JR_ARRAY || p->n != 2 || p->items[0].type != LOOM__JR_NUMBER ||
        p->items[1].type != LOOM__JR_NUMBER || !(p->items[0].number > 0) || !(p->items[1].number > 0))
      return bad(where, cls, "\"points\" items must be [size, seconds] with both numbers > 0");
    if (i > 0 && !(p->items[0].number > m->point_size[i - 1]))
      return bad(where, cls, "\"points\" sizes must be increasing");
    m->point_size[i] = p->items[0].number;
    m->point_seconds[i] = p->items[1].number;
  }
  m->n_points = pts->n;
  return LOOM_OK;
}

static loom_status read_class(const loom__jr_value *v, const char *where, const char *cls,
                              loom_sched_class_model *m) {
  if (v->type != LOOM__JR_OBJECT) return bad(where, cls, "must be an object");
  const loom__jr_value *lat = loom__jr_get(v, "latency"), *spu = loom__jr_get(v, "seconds_per_unit"),
                       *rate = loom__jr_get(v, "rate"), *pts = loom__jr_get(v, "points");
  m->known = true;
  if (lat && (lat->type != LOOM__JR_NUMBER || !(lat->number >= 0)))
    return bad(where, cls, "\"latency\" must be a number >= 0 (seconds per kernel)");
  if (spu && (spu->type != LOOM__JR_NUMBER || !(spu->number >= 0)))
    return bad(where, cls, "\"seconds_per_unit\" must be a number >= 0");
  if (rate && (rate->type != LOOM__JR_NUMBER || !(rate->number > 0)))
    return bad(where, cls, "\"rate\" must be a number > 0 (units per second)");
  if (spu && rate) return bad(where, cls, "give \"rate\" or \"seconds_per_unit\", not both");
  if (!spu && !rate && !pts) return bad(where, cls, "needs \"rate\", \"seconds_per_unit\" or \"points\"");
  m->latency = lat ? lat->number : 0;
  m->seconds_per_unit = spu ? spu->number : rate ? 1.0 / rate->number : 0;
  return pts ? read_points(pts, where, cls, m) : LOOM_OK;
}

/* The file's "pieces": {"thin_gemm": CLASS, "stream": CLASS}, each as a class of "models". */
static loom_status read_pieces(const loom__jr_value *pieces, const char *path, loom_sched_model *out) {
  char where[1200];
  snprintf(where, sizeof where, "%s: pieces", path);
  if (pieces->type != LOOM__JR_OBJECT)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: must be an object", where);
  for (int32_t i = 0; i < pieces->n; i++) {
    const char *key = pieces->keys[i];
    loom_sched_class_model *m = !strcmp(key, "thin_gemm") ? &out->thin_gemm
                                : !strcmp(key, "stream")  ? &out->stream
                                                          : NULL;
    if (!m)
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s.%s: not a piece model (thin_gemm, stream)", where,
                         key);
    loom_status s = read_class(&pieces->items[i], where, key, m);
    if (s) return s;
  }
  return LOOM_OK;
}

loom_status loom__sched_model_read(const loom__jr_value *obj, const char *where, loom_sched_model *out) {
  memset(out, 0, sizeof *out);
  if (obj->type != LOOM__JR_OBJECT)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: must be an object", where);
  for (int32_t i = 0; i < obj->n; i++) {
    loom_op_class c;
    if (!loom_op_class_parse(obj->keys[i], &c)) {
      return loom__error(LOOM_ERR_INVALID_ARGUMENT,
                         "%s.%s: not an op class (gemm, fft, elementwise, reduction, topk, conv, copy)",
                         where, obj->keys[i]);
    }
    loom_status s = read_class(&obj->items[i], where, obj->keys[i], &out->cls[c]);
    if (s) return s;
  }
  return LOOM_OK;
}

const char *loom_sched_device_driver(const loom_device_info *info) {
  if (!info) return "";
  if (info->driver_version && *info->driver_version) return info->driver_version;
  return info->version ? info->version : "";
}

void loom_sched_model_print(const loom_sched_model *model, int indent, FILE *stream) {
  for (int c = 0; model && c < LOOM_OP_CLASS_COUNT; c++) {
    const loom_sched_class_model *m = &model->cls[c];
    if (!m->known) continue;
    double rate = m->seconds_per_unit > 0 ? 1.0 / m->seconds_per_unit : 0;
    fprintf(stream, "%*s%-12s latency %.3g s, %.4g units/s", indent, "", class_names[c], m->latency, rate);
    if (m->n_points) {
      fprintf(stream, ", %d points (%.3g .. %.3g units)", m->n_points, m->point_size[0],
              m->point_size[m->n_points - 1]);
    }
    fputc('\n', stream);
  }
  if (model && model->host_bandwidth > 0) {
    fprintf(stream, "%*s%-12s latency %.3g s, %.4g GB/s each way\n", indent, "", "host link",
            model->host_latency, model->host_bandwidth / 1e9);
  }
  if (model && (model->piece_seconds > 0 || model->gather_row_seconds > 0))
    fprintf(stream, "%*s%-12s %.3g s a piece beyond its kernels, %.3g s a row gathered\n", indent, "", "loop",
            model->piece_seconds, model->gather_row_seconds);
  if (model && (model->fused_element_seconds > 0 || model->fault_page_seconds > 0))
    fprintf(stream,
            "%*s%-12s %.3g s an element of an elementwise op in a fused body, %.3g s a page of a new "
            "result of 32 MiB or more\n",
            indent, "", "fused", model->fused_element_seconds, model->fault_page_seconds);
  if (model && model->fused_small_element_seconds > 0)
    fprintf(stream, "%*s%-12s %.3g s an element of an elementwise op in a small fused body (a piece's)\n",
            indent, "", "fused small", model->fused_small_element_seconds);
  if (model && model->select_ratio > 0)
    fprintf(stream, "%*s%-12s %.3g x an add's time an element\n", indent, "", "select", model->select_ratio);
  const loom_sched_class_model *pieces[2] = {model ? &model->thin_gemm : NULL, model ? &model->stream : NULL};
  static const char *const what[2] = {"thin gemm", "stream"};
  for (int k = 0; k < 2; k++)
    if (pieces[k] && pieces[k]->known && pieces[k]->n_points)
      fprintf(stream, "%*s%-12s %d points, %.3g s at %.3g units .. %.3g s at %.3g units (pieces)\n", indent,
              "", what[k], pieces[k]->n_points, pieces[k]->point_seconds[0], pieces[k]->point_size[0],
              pieces[k]->point_seconds[pieces[k]->n_points - 1],
              pieces[k]->point_size[pieces[k]->n_points - 1]);
}
