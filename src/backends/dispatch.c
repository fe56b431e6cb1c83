/* The compute backends' front-end (dispatch.h): the shared checks of a call and the dispatch
 * by op class to a backend's launchers. */
#include "backends/dispatch.h"

loom__family loom__family_of(loom__op_class cls) {
  switch (cls) {
    case LOOM_CLASS_SOURCE:
    case LOOM_CLASS_UNARY:
    case LOOM_CLASS_BINARY:
    case LOOM_CLASS_COMPARE:
    case LOOM_CLASS_LOGIC:
    case LOOM_CLASS_SELECT:
    case LOOM_CLASS_CAST:
      return LOOM__FAMILY_ELEMENTWISE;
    case LOOM_CLASS_LAYOUT:
      return LOOM__FAMILY_LAYOUT;
    case LOOM_CLASS_REDUCE:
    case LOOM_CLASS_ARGREDUCE:
      return LOOM__FAMILY_REDUCE;
    case LOOM_CLASS_TOPK:
      return LOOM__FAMILY_TOPK;
    case LOOM_CLASS_DOT:
      return LOOM__FAMILY_DOT;
    case LOOM_CLASS_CONV:
      return LOOM__FAMILY_CONV;
    case LOOM_CLASS_FOURIER:
      return LOOM__FAMILY_FOURIER;
    case LOOM_CLASS_FUSED:
      return LOOM__FAMILY_FUSED;
    case LOOM_CLASS_QUANT:
      return LOOM__FAMILY_QUANT;
    case LOOM_CLASS_LOOP: /* the executor runs a loop's body; no backend sees the loop */
      break;
  }
  return LOOM__FAMILY_COUNT;
}

loom_status loom__no_family(const char *id, const char *op_name) {
  return loom__error(LOOM_ERR_INTERNAL, "%s: %s: no kernel family", id, op_name);
}

loom_status loom__no_fused(const char *id) {
  return loom__error(LOOM_ERR_UNSUPPORTED, "%s: fused: no fused evaluator on this backend", id);
}

LOOM_HOT bool loom__strides_dense(const loom_type *t, const int64_t *strides) {
  for (int32_t i = 0; i < t->rank; i++)
    if (t->dims[i] == 0) return true;
  int64_t expect = 1;
  for (int32_t i = t->rank - 1; i >= 0; i--) {
    if (t->dims[i] != 1 && strides[i] != expect) return false;
    /* saturating, as layout.c makes dense strides, so the two agree past int64 */
    expect = loom__sat_mul_i64(
        expect, (t->dtype == LOOM_Q4 && i == t->rank - 1) ? loom__q4_row_nibbles(t->dims[i]) : t->dims[i]);
  }
  return true;
}

LOOM_HOT loom_status loom__check_output_dense(const char *id, const char *op_name, int32_t r,
                                              const loom_type *t, const int64_t *strides) {
  if (loom__strides_dense(t, strides)) return LOOM_OK;
  return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: %s: output %d is not dense", id, op_name, (int)r + 1);
}

/* What every backend refuses: an op whose result count is not its kind's, an output that is
 * not dense (the executor allocates outputs dense; a kernel writes them so). */
static loom_status check_call(const char *id, const loom__op_call *c) {
  const loom__op *op = c->op;
  const loom__op_info *info = loom__op_info_of(op->kind);
  if (!info || op->n_outputs != loom__op_result_count(op))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: %s: malformed op", id, loom_op_name(op->kind));
  for (int32_t r = 0; r < op->n_outputs; r++)
    if (!loom__strides_dense(&c->out[r].type, c->out[r].strides))
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: %s: output %d is not dense", id, info->name,
                         (int)r + 1);
  return LOOM_OK;
}

loom_status loom__dispatch(const loom__launchers *t, void *dev, const char *id, pthread_mutex_t *lock,
                           const loom__op_call *c) {
  loom_status s = check_call(id, c);
  if (!s && t->check) s = t->check(dev, c);
  if (s) return s;
  loom__family f = loom__family_of(loom__op_info_of(c->op->kind)->cls);
  loom__launch_fn launch = f < LOOM__FAMILY_COUNT ? t->family[f] : NULL;
  if (!launch && f == LOOM__FAMILY_FUSED) return loom__no_fused(id);
  if (!launch && f == LOOM__FAMILY_QUANT)
    return loom__error(LOOM_ERR_UNSUPPORTED, "%s: %s: no quantized kernels on this backend", id,
                       loom_op_name(c->op->kind));
  if (!launch) return loom__no_family(id, loom_op_name(c->op->kind));
  if (lock) pthread_mutex_lock(lock);
  s = t->enter ? t->enter(dev) : LOOM_OK;
  if (!s) s = launch(dev, c);
  if (lock) pthread_mutex_unlock(lock);
  return s;
}
