/* Shape arithmetic shared by the compute backends (shapes.h). */
#include "backends/shapes.h"

static int64_t abs64(int64_t x) {
  return x < 0 ? -x : x;
}

void loom__sort_by_stride(int32_t n, int64_t *dims, int64_t *strides) {
  for (int32_t i = 1; i < n; i++)
    for (int32_t j = i; j > 0 && abs64(strides[j - 1]) < abs64(strides[j]); j--) {
      int64_t t = dims[j];
      dims[j] = dims[j - 1];
      dims[j - 1] = t;
      t = strides[j];
      strides[j] = strides[j - 1];
      strides[j - 1] = t;
    }
}

int64_t loom__batch_offset(int64_t idx, int32_t nb, const int64_t *dims, const int64_t *strides) {
  int64_t off = 0;
  for (int32_t i = nb - 1; i >= 0; i--) {
    off += (idx % dims[i]) * strides[i];
    idx /= dims[i];
  }
  return off;
}

void loom__batch_strides(const loom_type *t, const int64_t *strides, int32_t mat_rank, int32_t nb,
                         int64_t *bs) {
  int32_t own = t->rank - mat_rank;
  for (int32_t i = 0; i < nb; i++) {
    int32_t j = i - (nb - own);
    bs[i] = (j >= 0 && t->dims[j] != 1) ? strides[j] : 0;
  }
}

bool loom__topk_outputs_fit(const loom__op *op, const loom_type *in, const loom_type *values,
                            const loom_type *indices, int32_t axis) {
  if (values->dtype != in->dtype || indices->dtype != LOOM_I64 || op->attrs.k < 0 ||
      op->attrs.k > in->dims[axis])
    return false;
  const loom_type *out[2] = {values, indices};
  for (int32_t r = 0; r < 2; r++) {
    if (out[r]->rank != in->rank) return false;
    for (int32_t d = 0; d < in->rank; d++)
      if (out[r]->dims[d] != (d == axis ? op->attrs.k : in->dims[d])) return false;
  }
  return true;
}
