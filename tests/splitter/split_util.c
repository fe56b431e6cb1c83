/* Helpers shared by the splitter tests (split_util.h). */
#include <math.h>
#include <stdlib.h>

#include "ir/ir.h"
#include "split_util.h"

loom_graph *su_parse(const char *text) {
  loom_graph *g = NULL;
  if (loom_graph_parse(text, strlen(text), "t.lir", &g)) {
    loom_test_fail(__FILE__, __LINE__, "parse failed: %s", loom_last_error());
    return NULL;
  }
  return g;
}

static uint64_t next(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return *s >> 11;
}

static void fill_random(loom_tensor *t, uint64_t *seed) {
  int64_t n = 0;
  loom_type_elements(&t->type, &n);
  if (t->type.dtype == LOOM_C64) n *= 2;
  for (int64_t i = 0; i < n; i++) {
    double u = (double)next(seed) / 9007199254740992.0 * 2.0 - 1.0;
    switch (t->type.dtype) {
      case LOOM_F32:
      case LOOM_C64:
        ((float *)t->data)[i] = (float)u;
        break;
      case LOOM_F64:
        ((double *)t->data)[i] = u;
        break;
      case LOOM_I32:
        ((int32_t *)t->data)[i] = (int32_t)(next(seed) % 100);
        break;
      case LOOM_I64:
        ((int64_t *)t->data)[i] = (int64_t)(next(seed) % 100);
        break;
      default:
        break;
    }
  }
}

loom_status su_inputs(const loom_graph *g, uint64_t seed, loom_tensor **out) {
  int32_t n = loom_graph_param_count(g);
  loom_tensor *t = calloc((size_t)n + 1, sizeof *t);
  if (!t) return LOOM_ERR_OUT_OF_MEMORY;
  uint64_t s = seed * 2654435761u + 1;
  for (int32_t p = 0; p < n; p++) {
    loom_status st = loom_tensor_init(&t[p], loom_value_type(g, loom_graph_param_at(g, p)));
    if (st) {
      su_tensors_free(t, n);
      return st;
    }
    fill_random(&t[p], &s);
  }
  *out = t;
  return LOOM_OK;
}

void su_tensors_free(loom_tensor *t, int32_t n) {
  for (int32_t i = 0; t && i < n; i++) loom_tensor_deinit(&t[i]);
  free(t);
}

loom_status su_run_graph(const loom_graph *g, const loom_tensor *in, loom_tensor **out) {
  loom_context *ctx = NULL;
  int32_t n = loom_graph_output_count(g);
  *out = calloc((size_t)n + 1, sizeof **out);
  loom_status s = *out ? loom_context_create(NULL, &ctx) : LOOM_ERR_OUT_OF_MEMORY;
  if (!s) s = loom_graph_run(ctx, g, in, loom_graph_param_count(g), *out, n, NULL);
  loom_context_destroy(ctx);
  return s;
}

loom_status su_run_plan(const loom_plan *plan, const loom_tensor *in, loom_tensor **out,
                        loom_plan_stats *stats) {
  loom_context *ctx = NULL;
  const loom_graph *g = loom_plan_graph(plan);
  int32_t n = loom_graph_output_count(g);
  *out = calloc((size_t)n + 1, sizeof **out);
  loom_status s = *out ? loom_context_create(NULL, &ctx) : LOOM_ERR_OUT_OF_MEMORY;
  if (!s) s = loom_plan_run(ctx, plan, in, loom_graph_param_count(g), *out, n, stats);
  loom_context_destroy(ctx);
  return s;
}

static double get(const loom_tensor *t, int64_t i) {
  switch (t->type.dtype) {
    case LOOM_F32:
      return ((const float *)t->data)[i];
    case LOOM_F64:
      return ((const double *)t->data)[i];
    case LOOM_C64:
      return ((const float *)t->data)[i];
    case LOOM_I32:
      return ((const int32_t *)t->data)[i];
    case LOOM_I64:
      return (double)((const int64_t *)t->data)[i];
    case LOOM_BOOL:
      return ((const uint8_t *)t->data)[i];
    default:
      return NAN;
  }
}

double su_worst(const loom_tensor *a, const loom_tensor *b, double atol, double rtol) {
  if (!loom_type_equal(&a->type, &b->type)) return 1e30;
  int64_t n = 0;
  loom_type_elements(&a->type, &n);
  if (a->type.dtype == LOOM_C64) n *= 2;
  bool exact = !loom_dtype_is_float(a->type.dtype) && !loom_dtype_is_complex(a->type.dtype);
  double worst = 0;
  for (int64_t i = 0; i < n; i++) {
    double x = get(a, i), y = get(b, i);
    double e = exact ? (x == y ? 0 : 1e30) : fabs(x - y) / (atol + rtol * fabs(x));
    if (isnan(x) != isnan(y)) e = 1e30;
    if (e > worst) worst = e;
  }
  return worst;
}

static bool near(double x, double y, double atol, double rtol) {
  return fabs(x - y) <= atol + rtol * fabs(x);
}

/* Whether index ia[r*k + j] of a, where b holds another, is a tie within tolerance. */
static bool index_tie(const loom_tensor *va, const loom_tensor *ia, const loom_tensor *vb,
                      const loom_tensor *ib, int64_t r, int64_t k, int64_t j, double atol, double rtol) {
  double want = get(ia, r * k + j), v = get(va, r * k + j);
  for (int64_t q = 0; q < k; q++)
    if (get(ib, r * k + q) == want) return near(v, get(vb, r * k + q), atol, rtol);
  return near(v, get(vb, r * k + k - 1), atol, rtol); /* cut off in b: a tie with b's last */
}

int64_t su_knn_mismatches(const loom_tensor *va, const loom_tensor *ia, const loom_tensor *vb,
                          const loom_tensor *ib, double atol, double rtol) {
  if (!loom_type_equal(&va->type, &vb->type) || !loom_type_equal(&ia->type, &ib->type) || va->type.rank < 1)
    return -1;
  int64_t n = 0, k = va->type.dims[va->type.rank - 1], bad = 0;
  loom_type_elements(&va->type, &n);
  for (int64_t e = 0; k > 0 && e < n; e++) {
    if (!near(get(va, e), get(vb, e), atol, rtol))
      bad++;
    else if (get(ia, e) != get(ib, e) && !index_tie(va, ia, vb, ib, e / k, k, e % k, atol, rtol))
      bad++;
  }
  return bad;
}

bool su_check_plan(const loom_plan *plan, bool within_limits, const char *file, int line) {
  const loom_graph *g = loom_plan_graph(plan);
  int32_t next_op = 0;
  /* made[v]: the value is a graph input or an output of a stage already seen. */
  bool *made = calloc((size_t)g->n_values + 1, sizeof *made);
  if (!made) {
    loom_test_fail(file, line, "out of memory");
    return false;
  }
  for (int32_t p = 0; p < loom_graph_param_count(g); p++) made[loom_graph_param_at(g, p).id] = true;
  bool ok = true;
  for (int32_t i = 0; ok && i < loom_plan_stage_count(plan); i++) {
    loom_stage_info st;
    if (loom_plan_stage(plan, i, &st)) {
      loom_test_fail(file, line, "stage %d: %s", i, loom_last_error());
      ok = false;
      break;
    }
    for (int32_t k = 0; ok && k < st.n_ops; k++)
      if (st.ops[k] != next_op++) {
        loom_test_fail(file, line, "stage %d: op %d where op %d was due", i, st.ops[k], next_op - 1);
        ok = false;
      }
    if (ok && within_limits && st.estimated_peak > st.limit) {
      loom_test_fail(file, line, "stage %d: estimated peak %lld over its limit %lld", i,
                     (long long)st.estimated_peak, (long long)st.limit);
      ok = false;
    }
    for (int32_t k = 0; ok && k < st.n_inputs; k++)
      if (!made[st.inputs[k]]) {
        loom_test_fail(file, line, "stage %d: input %d (value %d) is made by no earlier stage", i, k,
                       st.inputs[k]);
        ok = false;
      }
    for (int32_t k = 0; ok && k < st.n_outputs; k++) made[st.outputs[k]] = true;
    if (ok && (st.graph == NULL) != (st.n_outputs == 0)) {
      loom_test_fail(file, line, "stage %d: a stage graph exactly when it has outputs", i);
      ok = false;
    }
  }
  if (ok && next_op != loom_graph_op_count(g)) {
    loom_test_fail(file, line, "the stages hold %d ops of %d", next_op, loom_graph_op_count(g));
    ok = false;
  }
  free(made);
  return ok;
}
