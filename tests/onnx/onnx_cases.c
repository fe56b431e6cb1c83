/* Running one ONNX conformance case (onnx_cases.h). */
#include "onnx_cases.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_TENSORS 32
#define MAX_SETS 8

/* The tensors prefix_0.pb, prefix_1.pb, ... of one data set, in order. */
typedef struct tensor_set {
  int32_t n;
  loom_tensor t[MAX_TENSORS];
  char *name[MAX_TENSORS];
} tensor_set;

static void set_free(tensor_set *s) {
  for (int32_t i = 0; i < s->n; i++) {
    loom_tensor_deinit(&s->t[i]);
    free(s->name[i]);
  }
  s->n = 0;
}

static bool set_load(const char *dir, const char *prefix, tensor_set *s, char *why, size_t size) {
  memset(s, 0, sizeof *s);
  for (int32_t k = 0; k < MAX_TENSORS; k++) {
    char path[4096];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s_%d.pb", dir, prefix, k);
    if (stat(path, &st)) break;
    if (loom_tensor_load_onnx_pb(path, &s->t[k], &s->name[k])) {
      snprintf(why, size, "%s", loom_last_error());
      set_free(s);
      return false;
    }
    s->n = k + 1;
  }
  return true;
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The case's test_data_set_* folders, sorted; returns how many (at most MAX_SETS). */
static int32_t data_sets(const char *dir, char sets[MAX_SETS][4096]) {
  DIR *d = opendir(dir);
  char *names[MAX_SETS];
  int32_t n = 0;
  for (struct dirent *e; d && (e = readdir(d)) && n < MAX_SETS;)
    if (!strncmp(e->d_name, "test_data_set_", 14)) names[n++] = strdup(e->d_name);
  if (d) closedir(d);
  qsort(names, (size_t)n, sizeof names[0], by_name);
  for (int32_t i = 0; i < n; i++) {
    snprintf(sets[i], 4096, "%s/%s", dir, names[i]);
    free(names[i]);
  }
  return n;
}

/* Element i of t as a double (complex: part i of the pairs). */
static double element(const loom_tensor *t, int64_t i) {
  const void *p = t->data;
  switch (t->type.dtype) {
    case LOOM_BOOL:
    case LOOM_U8:
      return ((const uint8_t *)p)[i];
    case LOOM_I8:
      return ((const int8_t *)p)[i];
    case LOOM_I16:
      return ((const int16_t *)p)[i];
    case LOOM_I32:
      return ((const int32_t *)p)[i];
    case LOOM_I64:
      return (double)((const int64_t *)p)[i];
    case LOOM_F16:
      return loom_f16_to_f32(((const uint16_t *)p)[i]);
    case LOOM_BF16:
      return loom_bf16_to_f32(((const uint16_t *)p)[i]);
    case LOOM_F32:
    case LOOM_C64:
      return ((const float *)p)[i];
    default:
      return ((const double *)p)[i];
  }
}

/* Compares got with want as numpy.testing.assert_allclose(rtol=1e-3, atol=1e-7) does, NaN
 * equal to NaN; integers exactly (i64 through their bits, not doubles). */
static bool outputs_equal(const loom_tensor *got, const loom_tensor *want, int32_t k, char *why,
                          size_t size) {
  char a[LOOM_TYPE_STRING_MAX], b[LOOM_TYPE_STRING_MAX];
  if (!loom_type_equal(&got->type, &want->type)) {
    snprintf(why, size, "output %d: got %s, expected %s", k, loom_type_format(&got->type, a, sizeof a),
             loom_type_format(&want->type, b, sizeof b));
    return false;
  }
  int64_t n;
  loom_type_elements(&got->type, &n);
  if (loom_dtype_is_complex(got->type.dtype)) n *= 2;
  bool exact = !loom_dtype_is_float(got->type.dtype) && !loom_dtype_is_complex(got->type.dtype);
  for (int64_t i = 0; i < n; i++) {
    if (got->type.dtype == LOOM_I64) {
      int64_t x = ((const int64_t *)got->data)[i], y = ((const int64_t *)want->data)[i];
      if (x == y) continue;
      snprintf(why, size, "output %d element %lld: got %lld, expected %lld", k, (long long)i, (long long)x,
               (long long)y);
      return false;
    }
    double x = element(got, i), y = element(want, i);
    if (isnan(x) && isnan(y)) continue;
    bool ok = exact ? x == y : (x == y || fabs(x - y) <= 1e-7 + 1e-3 * fabs(y));
    if (!ok) {
      snprintf(why, size, "output %d element %lld: got %.9g, expected %.9g", k, (long long)i, x, y);
      return false;
    }
  }
  return true;
}

/* The inputs given as values where a model needs them to fix its shapes: integer tensors
 * (Reshape's shape, a reduction's axes), single numbers (Range's bounds, OneHot's depth) and
 * short lists (Resize's scales, one per axis). */
static bool bindable(const loom_tensor *t) {
  int64_t n = 0;
  loom_type_elements(&t->type, &n);
  return t->type.dtype == LOOM_I64 || t->type.dtype == LOOM_I32 || n == 1 ||
         (t->type.rank == 1 && n > 0 && n <= LOOM_MAX_RANK);
}

/* Reads the model with the data set's input types, and with `bind`, the values of the inputs
 * that fix shapes (bindable) too. */
static loom_status read_model(const char *model, const tensor_set *in, bool bind, loom_graph **out) {
  const char *names[MAX_TENSORS], *vnames[MAX_TENSORS];
  loom_type types[MAX_TENSORS];
  loom_tensor values[MAX_TENSORS];
  int32_t nv = 0;
  for (int32_t i = 0; i < in->n; i++) {
    names[i] = in->name[i], types[i] = in->t[i].type;
    if (bind && bindable(&in->t[i])) vnames[nv] = in->name[i], values[nv++] = in->t[i];
  }
  loom_onnx_options opt;
  loom_onnx_options_init(&opt);
  opt.n_input_types = in->n;
  opt.input_names = names;
  opt.input_types = types;
  opt.n_input_values = nv;
  opt.value_names = vnames;
  opt.input_values = values;
  return loom_graph_from_onnx(model, &opt, out);
}

/* The graph planned for one runner of `device` under its naive peak / divisor: the
 * optimized graph's plan, or REFUSED with the planner's reason. */
static onnx_outcome plan_under(const loom_graph *g, const char *device, onnx_limited *lim,
                               loom_graph **out_graph, loom_plan **out_plan) {
  loom_estimate est;
  memset(&est, 0, sizeof est);
  if (loom_graph_estimate(g, NULL, &est)) {
    snprintf(lim->why, sizeof lim->why, "estimate: %s", loom_last_error());
    return ONNX_FAILED;
  }
  loom_runner r;
  memset(&r, 0, sizeof r);
  snprintf(r.device, sizeof r.device, "%s", device);
  r.limit = est.peak_bytes / lim->divisor > 0 ? est.peak_bytes / lim->divisor : 1;
  lim->limit = r.limit;
  loom_estimate_deinit(&est);
  char note[512];
  if (loom_graph_optimize_for_runners(g, &r, 1, NULL, out_graph, NULL, note, sizeof note) ||
      loom_plan_split_by_memory(*out_graph, &r, 1, out_plan)) {
    snprintf(lim->why, sizeof lim->why, "planner: %s", loom_last_error());
    return ONNX_REFUSED;
  }
  lim->stages = loom_plan_stage_count(*out_plan);
  return ONNX_PASSED;
}

/* The run under a limit (onnx_limited) of a data set that passed. */
static void run_limited(loom_context *ctx, const char *device, const loom_graph *g, const loom_tensor *args,
                        int32_t n_args, const tensor_set *want, onnx_limited *lim) {
  loom_graph *og = NULL;
  loom_plan *plan = NULL;
  loom_tensor got[MAX_TENSORS];
  loom_run_stats st;
  memset(got, 0, sizeof got);
  memset(&st, 0, sizeof st);
  int32_t n_out = want->n;
  lim->outcome = plan_under(g, device, lim, &og, &plan);
  if (lim->outcome == ONNX_PASSED && loom_run(ctx, plan, NULL, args, n_args, got, n_out, &st)) {
    snprintf(lim->why, sizeof lim->why, "run under %lld bytes: %s", (long long)lim->limit, loom_last_error());
    lim->outcome = ONNX_FAILED;
  } else if (lim->outcome == ONNX_PASSED) {
    for (int32_t k = 0; k < n_out && lim->outcome == ONNX_PASSED; k++)
      if (!outputs_equal(&got[k], &want->t[k], k, lim->why, sizeof lim->why)) lim->outcome = ONNX_FAILED;
    for (int32_t k = 0; k < n_out; k++) loom_tensor_deinit(&got[k]);
    for (int32_t i = 0; i < st.n_stages && lim->outcome == ONNX_PASSED; i++) {
      const loom_stage_stats *t = &st.stages[i];
      if (t->peak_bytes <= t->limit_bytes && t->peak_bytes == t->estimated_peak_bytes) continue;
      snprintf(lim->why, sizeof lim->why, "stage %d: measured peak %lld, estimated %lld, limit %lld", i,
               (long long)t->peak_bytes, (long long)t->estimated_peak_bytes, (long long)t->limit_bytes);
      lim->outcome = ONNX_FAILED;
    }
  }
  loom_run_stats_deinit(&st);
  loom_plan_destroy(plan);
  loom_graph_destroy(og);
}

/* Runs the graph on one data set's inputs (less those bound as values) and compares. */
static onnx_outcome run_set(loom_context *ctx, const char *device, const loom_graph *g, tensor_set *in,
                            const tensor_set *want, bool bind, onnx_limited *lim, char *why, size_t size) {
  loom_tensor args[MAX_TENSORS], got[MAX_TENSORS];
  int32_t n_args = 0, n_out = loom_graph_output_count(g);
  for (int32_t i = 0; i < in->n; i++)
    if (!bind || !bindable(&in->t[i])) args[n_args++] = in->t[i];
  memset(got, 0, sizeof got);
  if (n_args != loom_graph_param_count(g) || n_out != want->n || n_out > MAX_TENSORS) {
    snprintf(why, size, "%d inputs and %d outputs in the data, %d and %d in the graph", n_args, want->n,
             loom_graph_param_count(g), n_out);
    return ONNX_FAILED;
  }
  if (loom_graph_run_on_device(ctx, device, g, args, n_args, got, n_out, NULL)) {
    snprintf(why, size, "run: %s", loom_last_error());
    return ONNX_FAILED;
  }
  onnx_outcome r = ONNX_PASSED;
  for (int32_t k = 0; k < n_out && r == ONNX_PASSED; k++)
    if (!outputs_equal(&got[k], &want->t[k], k, why, size)) r = ONNX_FAILED;
  for (int32_t k = 0; k < n_out; k++) loom_tensor_deinit(&got[k]);
  if (r == ONNX_PASSED && lim && lim->outcome == ONNX_PASSED)
    run_limited(ctx, device, g, args, n_args, want, lim);
  return r;
}

/* Data Loom cannot hold (strings, unsigned 16-64 bit, sequences): the model must refuse. */
static onnx_outcome unreadable_data(const char *model, char *why, size_t size) {
  loom_graph *g = NULL;
  loom_status s = loom_graph_from_onnx(model, NULL, &g);
  loom_graph_destroy(g);
  if (s == LOOM_ERR_UNSUPPORTED) snprintf(why, size, "%s", loom_last_error());
  return s == LOOM_ERR_UNSUPPORTED ? ONNX_REFUSED : ONNX_FAILED;
}

/* One data set: the model read for its inputs (again with their integer values where the
 * types alone do not fix the shapes), run and compared. */
static onnx_outcome run_case_set(loom_context *ctx, const char *device, const char *model, const char *set,
                                 bool *bind, onnx_limited *lim, char *why, size_t size) {
  tensor_set in, want;
  if (!set_load(set, "input", &in, why, size)) return unreadable_data(model, why, size);
  if (!set_load(set, "output", &want, why, size)) {
    set_free(&in);
    return unreadable_data(model, why, size);
  }
  loom_graph *g = NULL;
  loom_status s = read_model(model, &in, *bind, &g);
  if (s == LOOM_ERR_UNSUPPORTED && !*bind &&
      strstr(loom_last_error(), "must be known when the model is read")) {
    *bind = true;
    s = read_model(model, &in, true, &g);
  }
  onnx_outcome r;
  if (s) {
    snprintf(why, size, "%s", loom_last_error());
    r = s == LOOM_ERR_UNSUPPORTED ? ONNX_REFUSED : ONNX_FAILED;
  } else {
    r = run_set(ctx, device, g, &in, &want, *bind, lim, why, size);
  }
  loom_graph_destroy(g);
  set_free(&in);
  set_free(&want);
  return r;
}

onnx_outcome onnx_case_run(loom_context *ctx, const char *device, const char *dir, onnx_limited *lim,
                           char *why, size_t size) {
  if (lim) lim->outcome = ONNX_PASSED, lim->why[0] = '\0', lim->limit = 0, lim->stages = 0;
  char sets[MAX_SETS][4096], model[4096];
  int32_t n_sets = data_sets(dir, sets);
  snprintf(model, sizeof model, "%s/model.onnx", dir);
  if (!n_sets) {
    snprintf(why, size, "no test_data_set_* folder");
    return ONNX_FAILED;
  }
  bool bind = false;
  onnx_outcome r = ONNX_PASSED;
  for (int32_t i = 0; i < n_sets && r == ONNX_PASSED; i++)
    r = run_case_set(ctx, device, model, sets[i], &bind, lim, why, size);
  return r;
}

bool onnx_refusal_named(const char *why) {
  const char *node = strstr(why, ": node ");
  if (node) return strstr(node, " (") && strstr(node, "): ");
  return strstr(why, ": opset ") || strstr(why, ": input '") || strstr(why, ": sparse initializers");
}
