/* loom-plan's predicted times (issue 34, point 4): the plan's time beside the whole graph's by
 * the scheduler's cost models (loom/predict.h), a warning where a limit makes the run more
 * than WARN_FACTOR times slower, and the search behind --max-slowdown. */
#ifndef LOOM_PLAN_PREDICT_H
#define LOOM_PLAN_PREDICT_H

#include <stdbool.h>
#include <stdint.h>

#include "loom/loom.h"
#include "loom/predict.h"

/* A limit that makes the run this many times slower than whole is warned about. */
#define LOOM_PLAN_WARN_FACTOR 10.0
/* The factor the warning's advice is for ("the smallest limit within 2x"). */
#define LOOM_PLAN_ADVICE_FACTOR 2.0

typedef struct plan_prediction {
  bool ok;         /* predicted; else why says why not */
  bool calibrated; /* the device's model was measured (loom-bench calibrate) */
  char device[32];
  int64_t limit;        /* the runner's limit the plan was made for */
  double seconds;       /* the plan's predicted time */
  double whole_seconds; /* the whole graph's (rewritten without chunking) */
  int64_t whole_need;   /* the whole graph's estimated peak */
  bool warn;            /* seconds > LOOM_PLAN_WARN_FACTOR x whole_seconds */
  bool advice_ok;       /* advice holds the smallest limit within LOOM_PLAN_ADVICE_FACTOR */
  loom_limit_search advice;
  char why[512];
} plan_prediction;

/* Predicts `plan` (made from `graph` for one runner `device`:`limit`) and the whole graph
 * rewritten with `opts` without chunking; where the plan is over the warning factor, also
 * searches the smallest limit within the advice factor. Never fails: a prediction that cannot
 * be made leaves out->ok false and says why. */
void plan_predict(const char *device, int64_t limit, const loom_graph *graph, const loom_plan *plan,
                  const loom_optimize_options *opts, plan_prediction *out);

/* The smallest limit on `device` whose predicted time stays within `factor` of the whole
 * graph's (loom_graph_smallest_limit). 0, or 1 with the error printed as "loom-plan: ...". */
int plan_search_limit(const char *device, const loom_graph *graph, double factor,
                      const loom_optimize_options *opts, loom_limit_search *out, bool *out_calibrated);

/* The prediction's lines of the text report, and its object in the JSON one (key
 * "prediction"). */
void plan_prediction_print(const plan_prediction *p);
struct loom__json;
void plan_prediction_json(struct loom__json *j, const plan_prediction *p);

#endif
