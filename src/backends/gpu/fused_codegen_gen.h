/* The fused-kernel generator's state (fused_codegen.h), shared by its rooms: fused_codegen_text.c (the text
 * buffer and the dtypes' spellings), fused_codegen_analysis.c (what the body computes and which final op ends
 * it) and fused_codegen.c (the preludes and the body written out). Private to those files. */
#ifndef LOOM_BACKENDS_GPU_FUSED_CODEGEN_GEN_H
#define LOOM_BACKENDS_GPU_FUSED_CODEGEN_GEN_H

#include "backends/gpu/fused_codegen.h"

typedef struct sbuf {
  char *p;
  size_t len, cap;
  bool failed;
} sbuf;

enum { FINAL_NONE, FINAL_REDUCE, FINAL_ARG, FINAL_TOPK };

typedef struct gen {
  const loom_graph *g;
  const loom__dview *in;
  loom__fz_target target;
  bool fp64;
  loom__layout *lay;
  int32_t *param_of; /* value id -> parameter index, or -1 */
  bool *used;        /* value read by an expression */
  int32_t rank;      /* of the space S */
  int64_t dims[LOOM_MAX_RANK];
  int32_t final_kind, final_op; /* final_op: op index, -1 without one */
  int32_t last;                 /* the value the final op consumes (or the output) */
  bool reduced[LOOM_MAX_RANK];
  int64_t topk_k;
  bool largest;
  int32_t vec;   /* lanes of fz_evalv (0: the scalar fz_eval is being written) */
  int32_t vaxis; /* the axis the lanes run along */
  sbuf *b;
} gen;

/* Functions one file of the module calls in another (each documented at its definition). */
const char *loom__fzg_ctype(loom_dtype t);
bool loom__fzg_dtype_ok(loom_dtype t, bool fp64);
loom_status loom__fzg_emit_binary(const gen *G, int32_t i, int32_t v, int32_t x, int32_t y);
loom_status loom__fzg_emit_cast(const gen *G, int32_t i, int32_t v, int32_t x);
loom_status loom__fzg_emit_dot(const gen *G, int32_t i, int32_t v);
void loom__fzg_emit_leaf(const gen *G, int32_t v);
loom_status loom__fzg_emit_unary(const gen *G, int32_t i, int32_t v, int32_t x);
bool loom__fzg_fits_space(const gen *G, const loom_type *t);
const char *loom__fzg_fn(loom__fz_target target, loom_dtype t, const char *name, char *buf, size_t size);
const char *loom__fzg_int_hi(loom_dtype t);
const char *loom__fzg_int_lo(loom_dtype t);
bool loom__fzg_is_float(loom_dtype t);
bool loom__fzg_is_int(loom_dtype t);
bool loom__fzg_is_sint(loom_dtype t);
bool loom__fzg_leaf_base(const gen *G, int32_t v, int32_t *param, int32_t *fill_op);
void loom__fzg_literal(sbuf *b, loom_dtype t, double v, int64_t iv, bool is_int_value);
void loom__fzg_put(sbuf *b, const char *fmt, ...) LOOM_PRINTF(2, 3);
void loom__fzg_scalar_literal(const gen *G, const loom__op *op, loom_dtype t);
const char *loom__fzg_tname(const gen *G, loom_dtype t);
loom_status loom__fzg_unsupported_op(const gen *G, int32_t i, const char *why);
const char *loom__fzg_wrap_type(loom_dtype t);

#endif
