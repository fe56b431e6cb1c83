/* The branch cut of a shared run (loom/share.h): a graph's top-level ops grouped into stages
 * that may run on different devices at the same time.
 *
 * The plain cut around loops makes contiguous stages, each waiting for the one before it. A
 * graph with independent branches (two towers of GEMMs joined at the end, an FFT beside a
 * kNN) has work two devices could do at once, so its ops are grouped by branch instead: a
 * chain of ops each reading only the one before it is a group, a loop is one, and groups of
 * little work are merged into a neighbour where that delays nothing else much. Where this
 * leaves at least two independent groups that each hold a real part of the graph's work,
 * the graph's ops are reordered so each group's are contiguous (a topological order still),
 * and each group is a stage; the stages a stage reads from are all it waits for.
 */
#ifndef LOOM_SPLITTER_SHARE_CUT_H
#define LOOM_SPLITTER_SHARE_CUT_H

#include <stdbool.h>

#include "ir/ir.h"

/* A group holds a real part of the work when it holds at least this share of the graph's. */
#define LOOM__BRANCH_MIN_SHARE 0.1
/* A group is merged into a neighbour when it holds less than this share. */
#define LOOM__BRANCH_CHEAP_SHARE 0.02
/* Graphs with more groups than this are cut around loops only (the grouping is quadratic). */
#define LOOM__BRANCH_MAX_GROUPS 512

typedef struct loom__branch_cut {
  loom_graph *graph;    /* the graph, ops reordered so each stage's are contiguous; owned */
  int32_t *stage_of_op; /* per op of graph: its stage, nondecreasing; owned */
  int32_t n_stages;
  double *stage_work; /* per stage: its estimated work (rough seconds); owned */
} loom__branch_cut;

/* Groups g's top-level ops by branch (this header's opening comment). *found is false, and
 * *out left empty, where g has no two independent groups holding LOOM__BRANCH_MIN_SHARE of its
 * work each (or more than LOOM__BRANCH_MAX_GROUPS groups): the caller cuts around loops.
 * Errors: OUT_OF_MEMORY, and the builder's while the graph is reordered. */
loom_status loom__branch_cut_make(const loom_graph *g, loom__branch_cut *out, bool *found);
/* Frees what a cut owns. Accepts a zeroed one. */
void loom__branch_cut_deinit(loom__branch_cut *cut);

#endif
