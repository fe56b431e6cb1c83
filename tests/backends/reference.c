/* Helpers for the cpu kernel tests (reference.h). */
#include "reference.h"

#include <complex.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

loom_type ref_type(loom_dtype dt, int32_t rank, const int64_t *dims) {
  loom_type t;
  memset(&t, 0, sizeof t);
  t.dtype = dt;
  t.rank = rank;
  for (int32_t i = 0; i < rank; i++) t.dims[i] = dims[i];
  return t;
}

int64_t ref_elements(const loom_type *t) {
  int64_t n = 1;
  for (int32_t i = 0; i < t->rank; i++) n *= t->dims[i];
  return n;
}

int64_t ref_get_i(loom_dtype dt, const void *p, int64_t i) {
  switch (dt) {
    case LOOM_BOOL:
      return ((const uint8_t *)p)[i];
    case LOOM_I8:
      return ((const int8_t *)p)[i];
    case LOOM_U8:
      return ((const uint8_t *)p)[i];
    case LOOM_I16:
      return ((const int16_t *)p)[i];
    case LOOM_I32:
      return ((const int32_t *)p)[i];
    case LOOM_I64:
      return ((const int64_t *)p)[i];
    default: {
      /* As Loom casts floats to integers: NaN to 0, saturated outside the range (a plain C
       * cast of those is undefined). */
      double v = ref_get(dt, p, i);
      if (v != v) return 0;
      if (v >= 9223372036854775807.0) return INT64_MAX;
      if (v <= -9223372036854775808.0) return INT64_MIN;
      return (int64_t)v;
    }
  }
}

double ref_get(loom_dtype dt, const void *p, int64_t i) {
  switch (dt) {
    case LOOM_F16:
      return loom_f16_to_f32(((const uint16_t *)p)[i]);
    case LOOM_BF16:
      return loom_bf16_to_f32(((const uint16_t *)p)[i]);
    case LOOM_F32:
      return ((const float *)p)[i];
    case LOOM_F64:
      return ((const double *)p)[i];
    case LOOM_C64:
      return ((const float *)p)[2 * i];
    case LOOM_C128:
      return ((const double *)p)[2 * i];
    default:
      return (double)ref_get_i(dt, p, i);
  }
}

double ref_get_im(loom_dtype dt, const void *p, int64_t i) {
  if (dt == LOOM_C64) return ((const float *)p)[2 * i + 1];
  if (dt == LOOM_C128) return ((const double *)p)[2 * i + 1];
  return 0;
}

int64_t ref_wrap(loom_dtype dt, uint64_t v) {
  switch (dt) {
    case LOOM_BOOL:
      return v != 0;
    case LOOM_I8:
      return (int8_t)(uint8_t)v;
    case LOOM_U8:
      return (uint8_t)v;
    case LOOM_I16:
      return (int16_t)(uint16_t)v;
    case LOOM_I32:
      return (int32_t)(uint32_t)v;
    default:
      return (int64_t)v;
  }
}

int64_t ref_int_min(loom_dtype dt) {
  switch (dt) {
    case LOOM_I8:
      return INT8_MIN;
    case LOOM_I16:
      return INT16_MIN;
    case LOOM_I32:
      return INT32_MIN;
    case LOOM_I64:
      return INT64_MIN;
    default:
      return 0;
  }
}

int64_t ref_int_max(loom_dtype dt) {
  switch (dt) {
    case LOOM_BOOL:
      return 1;
    case LOOM_I8:
      return INT8_MAX;
    case LOOM_U8:
      return UINT8_MAX;
    case LOOM_I16:
      return INT16_MAX;
    case LOOM_I32:
      return INT32_MAX;
    default:
      return INT64_MAX;
  }
}

void ref_set_i(loom_dtype dt, void *p, int64_t i, int64_t v) {
  switch (dt) {
    case LOOM_BOOL:
      ((uint8_t *)p)[i] = v != 0;
      break;
    case LOOM_I8:
      ((int8_t *)p)[i] = (int8_t)ref_wrap(dt, (uint64_t)v);
      break;
    case LOOM_U8:
      ((uint8_t *)p)[i] = (uint8_t)ref_wrap(dt, (uint64_t)v);
      break;
    case LOOM_I16:
      ((int16_t *)p)[i] = (int16_t)ref_wrap(dt, (uint64_t)v);
      break;
    case LOOM_I32:
      ((int32_t *)p)[i] = (int32_t)ref_wrap(dt, (uint64_t)v);
      break;
    case LOOM_I64:
      ((int64_t *)p)[i] = v;
      break;
    default:
      ref_set(dt, p, i, (double)v);
      break;
  }
}

void ref_set_c(loom_dtype dt, void *p, int64_t i, double re, double im) {
  switch (dt) {
    case LOOM_F16:
      ((uint16_t *)p)[i] = loom_f32_to_f16((float)re);
      break;
    case LOOM_BF16:
      ((uint16_t *)p)[i] = loom_f32_to_bf16((float)re);
      break;
    case LOOM_F32:
      ((float *)p)[i] = (float)re;
      break;
    case LOOM_F64:
      ((double *)p)[i] = re;
      break;
    case LOOM_C64:
      ((float *)p)[2 * i] = (float)re;
      ((float *)p)[2 * i + 1] = (float)im;
      break;
    case LOOM_C128:
      ((double *)p)[2 * i] = re;
      ((double *)p)[2 * i + 1] = im;
      break;
    default:
      ref_set_i(dt, p, i, (int64_t)re);
      break;
  }
}

void ref_set(loom_dtype dt, void *p, int64_t i, double v) {
  ref_set_c(dt, p, i, v, 0);
}

loom__view ref_view(const loom_type *t, void *data, const int64_t *strides) {
  loom__view v;
  memset(&v, 0, sizeof v);
  v.type = *t;
  v.data = data;
  if (strides)
    memcpy(v.strides, strides, sizeof(int64_t) * (size_t)t->rank);
  else
    loom__view_dense_strides(t, v.strides);
  return v;
}

void *ref_alloc(const loom_type *t) {
  size_t bytes = (size_t)(ref_elements(t) * loom_dtype_size(t->dtype));
  return calloc(bytes ? bytes : 1, 1);
}

static uint64_t rng = 0x2545F4914F6CDD1Dull;
void ref_seed(uint64_t seed) {
  rng = seed ? seed : 1;
}
double ref_rand(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (double)(rng >> 11) / (double)(1ull << 52) - 1.0;
}

loom_graph *ref_graph(int32_t n, const loom_type *types, loom_value *params) {
  loom_graph *g = NULL;
  if (loom_graph_create("t", &g)) return NULL;
  for (int32_t i = 0; i < n; i++) {
    char name[16];
    snprintf(name, sizeof name, "p%d", (int)i);
    params[i] = loom_graph_param(g, name, &types[i]);
  }
  return g;
}

const loom__op *ref_op(const loom_graph *g, loom_value v) {
  return &g->ops[g->values[v.id].op];
}

loom_type ref_value_type(const loom_graph *g, loom_value v) {
  return g->values[v.id].type;
}

loom_status ref_run(const loom_graph *g, const loom__op *op, const loom__view *in, const loom__view *out) {
  int64_t bytes = loom__op_scratch_bytes(g, op);
  void *scratch = bytes ? malloc((size_t)bytes) : NULL;
  loom_status s = loom__cpu_run_op(g, op, in, out, scratch, bytes);
  free(scratch);
  return s;
}

bool ref_close(double got, double want, double tol) {
  if (isnan(want)) return isnan(got);
  if (isinf(want)) return got == want;
  return fabs(got - want) <= tol * fmax(1.0, fabs(want));
}

double ref_tol(loom_dtype dt) {
  switch (dt) {
    case LOOM_F16:
      return 2e-3;
    case LOOM_BF16:
      return 1.6e-2;
    case LOOM_F32:
    case LOOM_C64:
      return 1e-6;
    default:
      return 1e-14;
  }
}
