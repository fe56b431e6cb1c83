/* A stage of a plan planned again for one runner (restage.c): the one entry point through
 * which a run asks the splitter for a stage in other pieces, when the device a shared run
 * placed the stage on has a limit the stage's estimate passes, or when a stage ran out of
 * memory and recovery retries it under a lower limit (loom_plan_run_options.recover). */
#ifndef LOOM_SPLITTER_RESTAGE_H
#define LOOM_SPLITTER_RESTAGE_H

#include "ir/ir.h"
#include "loom/optimize.h"
#include "loom/plan.h"

typedef struct loom__restage {
  /* false: the stage graph as it is, one stage where its estimated peak fits the runner's
   * limit, else cut into stages by memory (chunked where no stage holds an op).
   * true (recovery): its fused ops undone, its loops' pieces made smaller until it fits
   * (ir/repiece.h), what still passes the limit rewritten for it (chunked) by `optimize`. */
  bool refit;
  const loom_optimize_options *optimize; /* refit's rewrites; NULL: the defaults */
  /* refit: where no plan fits the limit (a step that cannot be cut) but the smallest pieces
   * hold less than this, the plan is made for what those hold; 0: never. */
  int64_t ceiling;
} loom__restage;

/* Plans stage graph `g` for `runner` as `how` says (NULL: refit false). *out_limit (may be
 * NULL) receives the limit the plan was made for: runner->limit, or what the smallest pieces
 * hold (how->ceiling). The caller owns *out. Errors: INVALID_ARGUMENT (NULL arguments, a
 * runner without a limit), OUT_OF_MEMORY (no cut fits, as loom_plan_split_by_memory says), and
 * the rewrites'. */
loom_status loom__plan_restage(const loom_graph *g, const loom_runner *runner, const loom__restage *how,
                               loom_plan **out, int64_t *out_limit);

#endif
