/* The cpu backend's topk: the k best values along an axis, best first, with their i64
 * indices.
 *
 * Each row keeps a bounded heap of its k best entries so far with the worst at the root, so
 * one comparison with the root rejects most elements: O(n log k) per row and O(k) memory per
 * thread (one heap, allocated once per thread), never a full sort. Rows run on OpenMP
 * threads.
 *
 * Order: largest=true ranks by value, larger first; largest=false smaller first. NaN counts
 * as larger than every number (first for largest=true, last for largest=false) and NaNs tie
 * with each other. Ties go to the lower index: elements arrive in index order and an equal
 * newcomer never displaces an entry already kept.
 */
#include <stdatomic.h>

#include "backends/cpu/cpu_loops.h"
#include "backends/shapes.h"

typedef struct topk_rows {
  loom__cpu_nest rows; /* the dims other than the axis; operand 0: input strides */
  int64_t n, stride;   /* the axis: length and input stride */
  int64_t k, inner;    /* outputs: k per row, and the row's output stride (product of the
                          dims after the axis) */
  bool largest;
  const char *in;
  char *values;
  int64_t *indices;
} topk_rows;

/* Output offset of row r's first entry: rows are (outer, inner) over the dims before and
 * after the axis, and the axis has k entries in the output. */
static int64_t out_offset(const topk_rows *T, int64_t r) {
  return r / T->inner * T->k * T->inner + r % T->inner;
}

/* Generated per dtype (CT: the compute type, f32 for f16/bf16). GT is "ranks above" for
 * largest=true with NaN above every number; `better` adds the direction and the index tie
 * break. */
#define DEF_TOPK(D, E, _)                                                                                \
  typedef struct entry_##D {                                                                             \
    LOOM_CPU_C_##D v;                                                                                    \
    int64_t i;                                                                                           \
  } entry_##D;                                                                                           \
  static inline bool gt_##D(LOOM_CPU_C_##D a, LOOM_CPU_C_##D b) {                                        \
    if (IS_NAN(a)) return !IS_NAN(b);                                                                    \
    return !IS_NAN(b) && a > b;                                                                          \
  }                                                                                                      \
  static inline bool better_##D(const entry_##D *a, const entry_##D *b, bool largest) {                  \
    bool ahead = largest ? gt_##D(a->v, b->v) : gt_##D(b->v, a->v);                                      \
    bool behind = largest ? gt_##D(b->v, a->v) : gt_##D(a->v, b->v);                                     \
    return ahead || (!behind && a->i < b->i);                                                            \
  }                                                                                                      \
  /* Restores the heap (worst at the root) below position at. */                                         \
  static void sift_##D(entry_##D *h, int64_t size, int64_t at, bool largest) {                           \
    entry_##D e = h[at];                                                                                 \
    for (;;) {                                                                                           \
      int64_t c = 2 * at + 1;                                                                            \
      if (c >= size) break;                                                                              \
      if (c + 1 < size && better_##D(&h[c], &h[c + 1], largest)) c++;                                    \
      if (!better_##D(&e, &h[c], largest)) break;                                                        \
      h[at] = h[c];                                                                                      \
      at = c;                                                                                            \
    }                                                                                                    \
    h[at] = e;                                                                                           \
  }                                                                                                      \
  static void row_##D(const topk_rows *T, const LOOM_CPU_S_##D *x, entry_##D *h, int64_t r) {            \
    int64_t k = T->k, s = T->stride, n = T->n, j = 0;                                                    \
    bool largest = T->largest;                                                                           \
    for (; j < k; j++) h[j] = (entry_##D){LOOM_CPU_LD_##D(x[j * s]), j};                                 \
    for (int64_t p = k / 2 - 1; p >= 0; p--) sift_##D(h, k, p, largest);                                 \
    /* A newcomer has the highest index so far: it enters only when its value ranks                      \
     * strictly above the root's, tested inline against the root's value. */                             \
    if (largest) {                                                                                       \
      for (; j < n; j++) {                                                                               \
        LOOM_CPU_C_##D v = LOOM_CPU_LD_##D(x[j * s]), thr = h[0].v;                                      \
        if (v > thr || (IS_NAN(v) && !IS_NAN(thr))) {                                                    \
          h[0] = (entry_##D){v, j};                                                                      \
          sift_##D(h, k, 0, true);                                                                       \
        }                                                                                                \
      }                                                                                                  \
    } else {                                                                                             \
      for (; j < n; j++) {                                                                               \
        LOOM_CPU_C_##D v = LOOM_CPU_LD_##D(x[j * s]), thr = h[0].v;                                      \
        if (v < thr || (IS_NAN(thr) && !IS_NAN(v))) {                                                    \
          h[0] = (entry_##D){v, j};                                                                      \
          sift_##D(h, k, 0, false);                                                                      \
        }                                                                                                \
      }                                                                                                  \
    }                                                                                                    \
    /* Pop the worst to the back until the heap is sorted best first. */                                 \
    for (int64_t end = k - 1; end > 0; end--) {                                                          \
      entry_##D t = h[0];                                                                                \
      h[0] = h[end];                                                                                     \
      h[end] = t;                                                                                        \
      sift_##D(h, end, 0, largest);                                                                      \
    }                                                                                                    \
    LOOM_CPU_S_##D *vo = (LOOM_CPU_S_##D *)T->values;                                                    \
    int64_t o = out_offset(T, r);                                                                        \
    for (int64_t j = 0; j < k; j++) {                                                                    \
      vo[o + j * T->inner] = LOOM_CPU_ST_##D(h[j].v);                                                    \
      T->indices[o + j * T->inner] = h[j].i;                                                             \
    }                                                                                                    \
  }                                                                                                      \
  static bool run_##D(const topk_rows *T) {                                                              \
    atomic_bool failed = false;                                                                          \
    int64_t n_rows = T->rows.total;                                                                      \
    _Pragma("omp parallel if (n_rows > 1 && n_rows * T->n > LOOM_CPU_BLOCK)") {                          \
      entry_##D *h = loom__malloc((size_t)T->k * sizeof *h);                                             \
      if (!h) atomic_store(&failed, true);                                                               \
      _Pragma("omp for schedule(static)") for (int64_t r = 0; r < n_rows; r++) {                         \
        if (!h) continue;                                                                                \
        const LOOM_CPU_S_##D *x = (const LOOM_CPU_S_##D *)T->in + loom__cpu_nest_offset(&T->rows, 0, r); \
        row_##D(T, x, h, r);                                                                             \
      }                                                                                                  \
      loom__free(h);                                                                                     \
    }                                                                                                    \
    return !atomic_load(&failed);                                                                        \
  }
#define IS_NAN(x) ((x) != (x))
LOOM_CPU_REALS(DEF_TOPK, 0)

typedef bool (*topk_fn)(const topk_rows *T);
#define TAB_TOPK(D, E, _) [LOOM_##E] = run_##D,
static const topk_fn topk_kernels[LOOM_DTYPE_COUNT] = {LOOM_CPU_REALS(TAB_TOPK, 0)};

static loom_status check_outputs(const loom__op *op, const loom__view *in, const loom__view *out,
                                 int32_t axis) {
  const loom_type *t = &in->type;
  if (loom__topk_outputs_fit(op, t, &out[0].type, &out[1].type, axis)) return LOOM_OK;
  char a[LOOM_TYPE_STRING_MAX];
  return loom__error(LOOM_ERR_INVALID_ARGUMENT, "cpu: topk: outputs do not match k=%lld of %s",
                     (long long)op->attrs.k, loom_type_format(t, a, sizeof a));
}

loom_status loom__cpu_topk(const loom_graph *g, const loom__op *op, const loom__view *in,
                           const loom__view *out) {
  (void)g;
  const loom_type *t = &in->type;
  int32_t axis;
  if (!loom__axis_normalize(op->attrs.axis, t->rank, &axis))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "cpu: topk: axis %lld is out of range for rank %d",
                       (long long)op->attrs.axis, (int)t->rank);
  loom_status s = check_outputs(op, in, out, axis);
  if (s) return s;
  topk_fn fn = topk_kernels[t->dtype];
  if (!fn) return loom__cpu_unsupported(op, t->dtype);
  topk_rows T;
  memset(&T, 0, sizeof T);
  int64_t dims[LOOM_MAX_RANK], strides[LOOM_MAX_RANK];
  int32_t nr = 0;
  T.inner = 1;
  for (int32_t d = 0; d < t->rank; d++) {
    if (d == axis) continue;
    dims[nr] = t->dims[d];
    strides[nr++] = in->strides[d];
    if (d > axis) T.inner *= t->dims[d];
  }
  loom__cpu_nest_init(&T.rows, nr, dims);
  loom__cpu_nest_add(&T.rows, NULL, strides);
  T.n = t->dims[axis];
  T.stride = in->strides[axis];
  T.k = op->attrs.k;
  T.largest = (op->attrs.set & LOOM_ATTR_LARGEST) ? op->attrs.largest : true;
  T.in = (const char *)in->data;
  T.values = (char *)out[0].data;
  T.indices = (int64_t *)out[1].data;
  if (T.k == 0 || T.rows.total == 0) return LOOM_OK;
  if (!fn(&T)) return loom__oom("topk: a heap of k entries");
  return LOOM_OK;
}
