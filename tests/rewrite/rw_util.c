/* Helpers shared by the rewrite tests (see rw_util.h). */
#include <stdlib.h>

#include "rw_util.h"

static const char *const all_names[] = {LOOM_REWRITE_NAMES};

loom_graph *rw_parse(const char *text) {
  loom_graph *g = NULL;
  if (loom_graph_parse(text, strlen(text), "test.lir", &g)) {
    printf("    parse: %s\n", loom_last_error());
    return NULL;
  }
  return g;
}

loom_status rw_optimize_only(const loom_graph *g, const char *only, loom_graph **out,
                             loom_rewrite_report *report) {
  const char *disabled[16];
  int32_t n = 0;
  for (int32_t i = 0; only && i < (int32_t)(sizeof all_names / sizeof all_names[0]); i++)
    if (strcmp(all_names[i], only) != 0) disabled[n++] = all_names[i];
  loom_optimize_options opts;
  loom_optimize_options_init(&opts);
  opts.disabled = disabled;
  opts.n_disabled = n;
  return loom_graph_optimize(g, &opts, out, report);
}

int rw_count_ops(const loom_graph *g, loom_op kind) {
  int n = 0;
  for (int32_t i = 0; i < g->n_ops; i++) n += g->ops[i].kind == kind;
  return n;
}

const loom_rewrite_entry *rw_entry(const loom_rewrite_report *report, const char *name) {
  for (int32_t i = 0; i < report->count; i++)
    if (strcmp(report->entries[i].name, name) == 0) return &report->entries[i];
  return NULL;
}

int rw_count_entries(const loom_rewrite_report *report, const char *name) {
  int n = 0;
  for (int32_t i = 0; i < report->count; i++) n += strcmp(report->entries[i].name, name) == 0;
  return n;
}

int64_t rw_peak(const loom_graph *g) {
  loom_estimate e;
  if (loom_graph_estimate(g, NULL, &e)) return -1;
  int64_t peak = e.peak_bytes;
  loom_estimate_deinit(&e);
  return peak;
}

double rw_get(const loom_tensor *t, int64_t i) {
  switch (t->type.dtype) {
    case LOOM_F32:
      return ((const float *)t->data)[i];
    case LOOM_F64:
      return ((const double *)t->data)[i];
    case LOOM_F16:
      return loom_f16_to_f32(((const uint16_t *)t->data)[i]);
    case LOOM_BF16:
      return loom_bf16_to_f32(((const uint16_t *)t->data)[i]);
    case LOOM_I8:
      return ((const int8_t *)t->data)[i];
    case LOOM_U8:
    case LOOM_BOOL:
      return ((const uint8_t *)t->data)[i];
    case LOOM_I16:
      return ((const int16_t *)t->data)[i];
    case LOOM_I32:
      return ((const int32_t *)t->data)[i];
    case LOOM_I64:
      return (double)((const int64_t *)t->data)[i];
    default:
      return 0;
  }
}

static uint64_t rng_next(uint64_t *s) {
  *s += 0x9E3779B97F4A7C15ull;
  uint64_t z = *s;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

loom_status rw_random_inputs(const loom_graph *g, uint64_t seed, double scale, loom_tensor *inputs) {
  uint64_t s = seed;
  for (int32_t p = 0; p < g->n_params; p++) {
    const loom_type *t = &g->values[g->params[p]].type;
    loom_status st = loom_tensor_init(&inputs[p], t);
    if (st) return st;
    int64_t n = 0;
    loom_type_elements(t, &n);
    for (int64_t i = 0; i < n; i++) {
      uint64_t r = rng_next(&s);
      double u = ((double)(r >> 11) / 9007199254740992.0 * 2.0 - 1.0) * scale;
      switch (t->dtype) {
        case LOOM_F32:
          ((float *)inputs[p].data)[i] = (float)u;
          break;
        case LOOM_F64:
          ((double *)inputs[p].data)[i] = u;
          break;
        case LOOM_I32:
          ((int32_t *)inputs[p].data)[i] = (int32_t)(r % 100);
          break;
        case LOOM_I64:
          ((int64_t *)inputs[p].data)[i] = (int64_t)(r % 100);
          break;
        case LOOM_I8:
          ((int8_t *)inputs[p].data)[i] = (int8_t)(r % 100);
          break;
        default:
          break;
      }
    }
  }
  return LOOM_OK;
}

loom_status rw_run(const loom_graph *g, const loom_tensor *inputs, int32_t n_inputs, loom_tensor *outputs,
                   int32_t n_outputs) {
  loom_context *ctx = NULL;
  loom_status s = loom_context_create(NULL, &ctx);
  if (!s) s = loom_graph_run(ctx, g, inputs, n_inputs, outputs, n_outputs, NULL);
  loom_context_destroy(ctx);
  return s;
}

static double worst_of(const loom_tensor *a, const loom_tensor *b, double atol, double rtol) {
  if (!loom_type_equal(&a->type, &b->type)) return 1e30;
  int64_t n = 0;
  loom_type_elements(&a->type, &n);
  bool exact = !loom_dtype_is_float(a->type.dtype);
  double worst = 0;
  for (int64_t i = 0; i < n; i++) {
    double x = rw_get(a, i), y = rw_get(b, i);
    double e = exact ? (x == y ? 0 : 1e30) : fabs(x - y) / (atol + rtol * fabs(x));
    if (isnan(x) != isnan(y)) e = 1e30;
    if (e > worst) worst = e;
  }
  return worst;
}

loom_status rw_compare(const loom_graph *ref, const loom_graph *got, uint64_t seed, double scale, double atol,
                       double rtol, double *out_worst) {
  *out_worst = 1e30;
  int32_t np = ref->n_params, no = ref->n_outputs;
  if (np != got->n_params || no != got->n_outputs)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "graphs differ in inputs or outputs");
  loom_tensor *in = calloc((size_t)np + 1, sizeof *in), *ra = calloc((size_t)no, sizeof *ra),
              *rb = calloc((size_t)no, sizeof *rb);
  loom_status s = rw_random_inputs(ref, seed, scale, in);
  if (!s) s = rw_run(ref, in, np, ra, no);
  if (!s) s = rw_run(got, in, np, rb, no);
  if (!s) {
    *out_worst = 0;
    for (int32_t i = 0; i < no; i++) *out_worst = fmax(*out_worst, worst_of(&ra[i], &rb[i], atol, rtol));
  }
  for (int32_t i = 0; i < np; i++) loom_tensor_deinit(&in[i]);
  for (int32_t i = 0; i < no; i++) {
    loom_tensor_deinit(&ra[i]);
    loom_tensor_deinit(&rb[i]);
  }
  free(in);
  free(ra);
  free(rb);
  return s;
}
