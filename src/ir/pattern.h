/* Shared machinery of the match-and-replace and reorder passes (rewrite_match.c,
 * rewrite_reorder.c): what a matcher may ask about the graph it scans, how a value seen
 * through a chain of views maps onto its source, and the driver that applies one match at a
 * time so that every application is reported with the bytes it saved on its own (IR.md
 * "Rewrites": "what it matched, bytes saved").
 */
#ifndef LOOM_PATTERN_H
#define LOOM_PATTERN_H

#include "ir/passes.h"

/* What a matcher reads about the graph it scans. Built once per scan. */
typedef struct loom__match_ctx {
  const loom_graph *g;
  int32_t *uses;         /* per value: readers, counted once per operand, plus returns */
  int32_t *first_reader; /* per value: the first op reading it, -1 when none */
  loom__layout *layouts; /* per value: views and strides (loom__graph_layouts) */
  /* The options the pass runs under (may be NULL): a rule whose best form depends on the
   * limit or on which later rewrites run reads them (distance). */
  const loom_optimize_options *opts;
} loom__match_ctx;

loom_status loom__match_ctx_init(loom__match_ctx *m, const loom_graph *g);
void loom__match_ctx_deinit(loom__match_ctx *m);

/* The op producing value v, or NULL for a parameter. */
static inline const loom__op *loom__producer(const loom_graph *g, int32_t v) {
  int32_t op = g->values[v].op;
  return op >= 0 ? &g->ops[op] : NULL;
}

/* The op producing v when it is of kind `kind`, else NULL. */
static inline const loom__op *loom__producer_is(const loom_graph *g, int32_t v, loom_op kind) {
  const loom__op *op = loom__producer(g, v);
  return op && op->kind == kind ? op : NULL;
}

/* True when v is the only reader's operand: read once by one op and not returned. */
static inline bool loom__single_use(const loom__match_ctx *m, int32_t v) {
  return m->uses[v] == 1;
}

/* True when every element of v is exactly `want`: a fill of that value, or a constant whose
 * elements all equal it (float dtypes f16..f64 only). */
bool loom__value_is_float(const loom_graph *g, int32_t v, double want);

/* A value seen through reshape, broadcast and transpose views (and the implicit NumPy
 * broadcast of an elementwise op) as an index map onto the value at the end of the chain.
 * For each axis k of the target shape, axis[k] is the source axis read at that index, or -1
 * when the value is constant along k (a stretched or inserted axis). A reshape is followed
 * only when it inserts or removes size-1 axes; its size-1 axes map to -1. */
typedef struct loom__lift {
  int32_t source;
  int32_t axis[LOOM_MAX_RANK];
} loom__lift;

/* Lifts v, read by an elementwise op whose result type is `target`. */
void loom__lift_operand(const loom_graph *g, int32_t v, const loom_type *target, loom__lift *out);

/* ---- the driver ------------------------------------------------------------------------- */

/* A rewrite rule: find a match rooted at one op, emit its replacement. */
typedef struct loom__rule {
  const char *name;  /* the --no-rewrite name */
  size_t match_size; /* bytes of the rule's match record */
  /* True when op `op` roots a match. Variants 0, 1, .. are alternative replacements tried in
   * turn until one is kept; a rule with one form finds only variant 0. Fills the match record
   * and a detail for the report (value names, what it became). */
  bool (*find)(const loom__match_ctx *m, int32_t op, int32_t variant, void *match, char *detail,
               size_t detail_size);
  /* Builds the replacement into rb->dst at the root's place, operands taken through the
   * rebuild map, and maps every result of the root op (loom__rebuild_set). */
  loom_status (*emit)(loom__rebuild *rb, const void *match);
  /* NULL: an application is always kept. Else whether to keep it, given the estimated peaks
   * of the graph before and after it. */
  bool (*keep)(const void *match, int64_t peak_before, int64_t peak_after);
  /* True: find clears what it uses of the match record itself, once the op passed its first
   * checks, so the driver does not clear the whole record before every op (reorder's records
   * are tens of KiB; cleared per op they were most of the time spent planning long graphs). */
  bool find_clears;
} loom__rule;

/* Applies each enabled rule of rules[0..n) to g, one application at a time, until none
 * matches; each kept application is estimated and reported. *out is a new graph (a copy of g
 * when nothing applied). */
loom_status loom__rules_run(const loom_graph *g, const loom__rule *rules, int32_t n_rules,
                            const loom_optimize_options *opts, loom_graph **out, loom_rewrite_report *report);

/* g's estimated peak for its own op order. */
loom_status loom__peak_of(const loom_graph *g, int64_t *out_peak);

/* ---- helpers for emitters ---------------------------------------------------------------- */

/* A scalar of dtype: fill value=v (a view, no storage). */
loom_value loom__scalar_fill(loom_graph *g, loom_dtype dtype, double v);
/* The dst graph's sticky error as a status (LOOM_OK when none). */
static inline loom_status loom__dst_status(const loom__rebuild *rb) {
  return rb->dst->error;
}

/* Formats "name" of value v of g followed by its type ("x f32[20000,3]"). Returns buf. */
const char *loom__describe(const loom_graph *g, int32_t v, char *buf, size_t size);

#endif
