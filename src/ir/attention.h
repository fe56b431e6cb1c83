/* Softmax attention as one fused op (issue 35, docs/ir-fusion.md "Attention bodies").
 *
 * The "attention" rewrite (attention.c) finds o = softmax(q kt * scale) v, the softmax spelt
 * with or without its max subtraction, and replaces it by a fused op whose body is that chain
 * in one canonical form. Backends recognise the form with loom__attention_body and run it as
 * a streaming kernel (online softmax over blocks of keys): the n x m scores are never stored,
 * so the op holds its operands and its result only.
 */
#ifndef LOOM_IR_ATTENTION_H
#define LOOM_IR_ATTENTION_H

#include "ir/ir.h"

/* What an attention body computes: o[n,dv] = softmax(q[n,d] kt[d,m] * scale, axis 1) v[m,dv]. */
typedef struct loom__attention {
  int64_t n, m, d, dv;
  double scale;
  loom_dtype dtype; /* f32: the only dtype the rewrite matches */
} loom__attention;

/* Whether `body` (a fused op's body) is the canonical attention body: parameters q, kt, v in
 * that order, then dot, an optional mul by a rank-0 constant, reduce_max, sub, exp, reduce_sum,
 * div and dot, one output. Fills *out (may be NULL) when it is. Reads the body only. */
bool loom__attention_body(const loom_graph *body, loom__attention *out);

/* The rewrite, as a rule of the match pass (pattern.h's loom__rule; rewrite_match.c lists it
 * with LOOM__ATTENTION_RULE). The match record: the root dot and the outer values it reads. */
typedef struct loom__attention_match {
  int32_t root;     /* the op o = dot p v */
  int32_t q, kt, v; /* the values that become the fused op's operands */
  double scale;     /* the factor on the scores (1 when none) */
  bool has_max;     /* whether the graph subtracts the row maximum itself */
  int64_t limit;    /* the options' limit (0: none) */
} loom__attention_match;

struct loom__match_ctx;
struct loom__rebuild;
bool loom__attention_find(const struct loom__match_ctx *m, int32_t op, int32_t variant, void *match,
                          char *detail, size_t detail_size);
loom_status loom__attention_emit(struct loom__rebuild *rb, const void *match);
/* Kept where the graph then fits the limit: the chunk rewrite, which runs next, cuts no fused
 * op, so a graph over the limit keeps the unfused chain for it to cut. */
bool loom__attention_keep(const void *match, int64_t peak_before, int64_t peak_after);
#define LOOM__ATTENTION_RULE                                                                \
  {                                                                                         \
    "attention", sizeof(loom__attention_match), loom__attention_find, loom__attention_emit, \
        loom__attention_keep, false                                                         \
  }

#endif
