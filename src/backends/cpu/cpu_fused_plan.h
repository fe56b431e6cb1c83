/* The cpu backend's fused op as a plan of per-block work (cpu_fused.c's opening comment says how it runs):
 * the body's values, their kinds and roles, and the final op. cpu_fused_plan.c makes the plan from a body
 * graph; cpu_fused.c and its parts run it (cpu_fused_run.h). Private to src/backends/cpu/cpu_fused*.c. */
#ifndef LOOM_BACKENDS_CPU_FUSED_PLAN_H
#define LOOM_BACKENDS_CPU_FUSED_PLAN_H

#include "backends/cpu/cpu_loops.h"
#include "ir/pattern.h"

/* Block length along the last axis: a dozen f32 buffers of FB elements fill about half of a
 * 32 KiB L1, and FB elements amortize one dispatch per op many times over. */
#define FB 1024
/* Rows whose blocks are walked together where the last axis is reduced, so a packed operand
 * that depends only on the column (y^T in a kernel product) is packed once for all of them. */
#define ROW_GROUP 64
#define MAX_K 16

typedef enum { K_F32, K_F64, K_I64 } kind;
typedef enum { R_NONE, R_LEAF, R_CONST, R_EW, R_DOT } role;
typedef enum { F_NONE, F_SUM, F_PROD, F_MEAN, F_MAX, F_MIN, F_ARGMAX, F_ARGMIN, F_TOPK } final_kind;

typedef union scalar {
  float f;
  double d;
  int64_t i;
} scalar;

/* An operand's absorbed scalar op, applied as it is read (see the kernels' TF_A). */
typedef struct tfm {
  bool on;
  double m, a;
} tfm;

/* One body value as the evaluator sees it. */
typedef struct fvalue {
  role role;
  kind kind;
  bool vec; /* varies along the last axis; else one scalar per row */
  loom_dtype dtype;
  int32_t slot; /* vec values: its buffer; leaves read in place have none (-1) */
  /* leaves: the param's data and the element strides over S's axes (0 on broadcast ones) */
  const char *base;
  int64_t strides[LOOM_MAX_RANK];
  scalar c;                 /* constants */
  bool absorbed;            /* a scalar op its one consumer applies as it reads (absorb_scalar_ops) */
  int32_t epi_dot, epi_via; /* dot epilogues: this binary op's dot (and the absorbed op
                               between them), computed in one pass (find_dot_epilogues) */
  bool in_epilogue;         /* a dot computed by its consumer's epilogue */
} fvalue;

typedef struct plan {
  const loom_graph *g;
  fvalue *v;
  int32_t *ops; /* body op indexes run per block, in order */
  int32_t n_ops, n_slots;
  int32_t *leaves; /* value ids of leaves */
  int32_t n_leaves;
  int32_t r;
  int64_t dims[LOOM_MAX_RANK], M, nb; /* S, its last axis, blocks along it */
  int32_t src;                        /* the value folded into the output */
  int32_t prod_b; /* >= 0: src is a mul's first operand, this its second, summed as products */
  bool prod_exp;  /* and the first is exp(src) */
  /* A kernel sum in one pass (find_kernel_sum): sum_j exp(aff(max(via(dot3) + c u, lo))) b_j;
   * value ids, via, lo and aff -1 where the body has no such op */
  bool ks;
  int32_t ks_dot, ks_via, ks_u, ks_lo, ks_aff;
  bool ks_sub;    /* the epilogue is (dot) - u, else an add */
  bool ks_avx512; /* run by kernel_sum_avx512 (the host has AVX-512), else kernel_sum_f32 */
  final_kind fin;
  kind fkind;
  bool reduced[LOOM_MAX_RANK], last_red;
  int32_t axis; /* argmax/argmin/topk */
  int64_t k;
  bool largest;
  int64_t count; /* elements reduced into each output (mean) */
  /* rows: the outer axes, kept ones first, then reduced ones */
  int32_t kax[LOOM_MAX_RANK], rax[LOOM_MAX_RANK], nk, nr;
  int64_t Ok, Or;
  int64_t ostrides[LOOM_MAX_RANK]; /* output element strides per S axis (0 on reduced) */
  int64_t kstride;                 /* topk: the output stride of the k entries */
  const loom__view *out;
} plan;

/* Functions one file of the module calls in another (each documented at its definition). */
loom_status loom__cfz_build_plan(const loom_graph *body, const loom__view *in, const loom__view *out, plan *P,
                                 loom__layout *lay);
int64_t loom__cfz_f64_to_int(double v, int64_t lo, int64_t hi);
void loom__cfz_int_range(loom_dtype dt, int64_t *lo, int64_t *hi);
kind loom__cfz_kind_of(loom_dtype d);
scalar loom__cfz_load_scalar(const char *base, loom_dtype dt, int64_t off);
void loom__cfz_plan_free(plan *P);
float loom__cfz_round_half(float x, loom_dtype dt);
bool loom__cfz_run_ew(const plan *P, const loom__op *op, void *o, const void *const *pin, const bool *vin,
                      const tfm *tf, int64_t n);
int64_t loom__cfz_wrap_int(int64_t x, loom_dtype dt);

#endif
