/* The branch cut of a shared run (share_cut.h), made when the plan is (loom_share_cut).
 *
 * Groups are kept as a union-find over the ops and rebuilt into a small graph of groups (a
 * bit row of direct successors and one of descendants per group) after every merge: graphs
 * reach this with their loops already cut, so a few hundred top-level ops at most, and the
 * rebuild is cheap beside the run it plans.
 */
#include "splitter/share_cut.h"

#include <stdlib.h>
#include <string.h>

#include "ir/rebuild.h"
#include "loom/sched.h"

/* Rough seconds of top-level op `op` of g (its work by class at fixed rates): only the ratios
 * between ops matter, to tell heavy groups from light ones. */
static double rough_seconds(const loom_graph *g, int32_t op) {
  /* Seconds per unit of each class (flops, elements, bytes) on a device of the kind Loom runs
   * on: rough, since only the ratios between ops matter; and a few microseconds per kernel. */
  static const double per_unit[LOOM_OP_CLASS_COUNT] = {
      [LOOM_OP_CLASS_GEMM] = 1 / 50e9,       [LOOM_OP_CLASS_FFT] = 1 / 5e9,
      [LOOM_OP_CLASS_ELEMENTWISE] = 1 / 1e9, [LOOM_OP_CLASS_REDUCTION] = 1 / 2e9,
      [LOOM_OP_CLASS_TOPK] = 1 / 0.5e9,      [LOOM_OP_CLASS_CONV] = 1 / 20e9,
      [LOOM_OP_CLASS_COPY] = 1 / 5e9};
  double sizes[LOOM_OP_CLASS_COUNT] = {0};
  int32_t kernels[LOOM_OP_CLASS_COUNT] = {0};
  if (loom__op_work(g, op, sizes, kernels) != LOOM_OK) return 0;
  double t = 0;
  for (int c = 0; c < LOOM_OP_CLASS_COUNT; c++) t += sizes[c] * per_unit[c] + kernels[c] * 5e-6;
  return t;
}

typedef struct grouping {
  const loom_graph *g;
  int32_t *root; /* union-find over ops */
  int32_t *gid;  /* per op: its group, numbered by the groups' first ops */
  int32_t k;     /* groups */
  int32_t words; /* 64-bit words per bit row */
  double *op_work, *work, total;
  bool *loop;       /* per group: holds a loop */
  bool *light_only; /* per group: holds sources and views only */
  uint64_t *succ;   /* k rows: direct successors */
  uint64_t *reach;  /* k rows: descendants */
  int32_t *order;   /* the groups in a topological order */
} grouping;

static int32_t find(int32_t *root, int32_t x) {
  while (root[x] != x) {
    root[x] = root[root[x]];
    x = root[x];
  }
  return x;
}

static bool bit(const uint64_t *row, int32_t i) {
  return (row[i / 64] >> (i % 64)) & 1;
}
static void set_bit(uint64_t *row, int32_t i) {
  row[i / 64] |= (uint64_t)1 << (i % 64);
}

static void grouping_free(grouping *gr) {
  loom__free(gr->root);
  loom__free(gr->gid);
  loom__free(gr->op_work);
  loom__free(gr->work);
  loom__free(gr->loop);
  loom__free(gr->light_only);
  loom__free(gr->succ);
  loom__free(gr->reach);
  loom__free(gr->order);
  memset(gr, 0, sizeof *gr);
}

/* Numbers the groups, sums their work, and builds their successor and descendant rows and a
 * topological order (the ready group whose first op comes first, each time). False when there
 * are too many groups, or (never expected) the groups make a cycle. */
static bool rebuild_groups(grouping *gr) {
  const loom_graph *g = gr->g;
  int32_t n = g->n_ops, k = 0;
  for (int32_t o = 0; o < n; o++) gr->gid[o] = -1;
  for (int32_t o = 0; o < n; o++) {
    int32_t r = find(gr->root, o);
    if (gr->gid[r] < 0) gr->gid[r] = k++;
    gr->gid[o] = gr->gid[r];
  }
  if (k > LOOM__BRANCH_MAX_GROUPS) return false;
  gr->k = k;
  gr->words = (k + 63) / 64;
  memset(gr->work, 0, sizeof *gr->work * (size_t)k);
  memset(gr->succ, 0, sizeof *gr->succ * (size_t)k * (size_t)gr->words);
  memset(gr->reach, 0, sizeof *gr->reach * (size_t)k * (size_t)gr->words);
  for (int32_t c = 0; c < k; c++) {
    gr->loop[c] = false;
    gr->light_only[c] = true;
  }
  for (int32_t o = 0; o < n; o++) {
    int32_t c = gr->gid[o];
    gr->work[c] += gr->op_work[o];
    gr->loop[c] |= g->ops[o].loop != NULL;
    gr->light_only[c] &= loom__op_is_light(g->ops[o].kind);
    for (int32_t i = 0; i < g->ops[o].n_inputs; i++) {
      int32_t p = g->values[g->ops[o].inputs[i]].op;
      if (p >= 0 && gr->gid[p] != c) set_bit(&gr->succ[(size_t)gr->gid[p] * (size_t)gr->words], c);
    }
  }
  /* Kahn's order; groups are numbered by first op, so the lowest ready number comes first. */
  int32_t *preds = loom__calloc((size_t)k, sizeof *preds);
  bool *placed = loom__calloc((size_t)k, sizeof *placed);
  bool ok = preds && placed;
  for (int32_t a = 0; ok && a < k; a++)
    for (int32_t b = 0; b < k; b++) preds[b] += bit(&gr->succ[(size_t)a * (size_t)gr->words], b);
  for (int32_t at = 0; ok && at < k; at++) {
    int32_t next = -1;
    for (int32_t c = 0; c < k && next < 0; c++)
      if (!placed[c] && preds[c] == 0) next = c;
    if (next < 0) {
      ok = false;
      break;
    }
    placed[next] = true;
    gr->order[at] = next;
    for (int32_t b = 0; b < k; b++) preds[b] -= bit(&gr->succ[(size_t)next * (size_t)gr->words], b);
  }
  for (int32_t at = k - 1; ok && at >= 0; at--) {
    int32_t a = gr->order[at];
    uint64_t *ra = &gr->reach[(size_t)a * (size_t)gr->words];
    const uint64_t *sa = &gr->succ[(size_t)a * (size_t)gr->words];
    for (int32_t b = 0; b < k; b++) {
      if (!bit(sa, b)) continue;
      const uint64_t *rb = &gr->reach[(size_t)b * (size_t)gr->words];
      for (int32_t w = 0; w < gr->words; w++) ra[w] |= sa[w] | rb[w];
    }
  }
  loom__free(preds);
  loom__free(placed);
  return ok;
}

/* Whether two groups that each hold a real part of the work are independent (neither reads
 * what the other makes, even through others). */
static bool has_independent_heavy(const grouping *gr) {
  double heavy = LOOM__BRANCH_MIN_SHARE * gr->total;
  for (int32_t a = 0; a < gr->k; a++) {
    if (gr->work[a] < heavy || gr->work[a] <= 0) continue;
    for (int32_t b = a + 1; b < gr->k; b++)
      if (gr->work[b] >= heavy && !bit(&gr->reach[(size_t)a * (size_t)gr->words], b) &&
          !bit(&gr->reach[(size_t)b * (size_t)gr->words], a))
        return true;
  }
  return false;
}

/* The one successor (succ) or predecessor group of c; -1 when it has none or several. */
static int32_t only_neighbour(const grouping *gr, int32_t c, bool succ) {
  int32_t one = -1;
  for (int32_t b = 0; b < gr->k; b++) {
    bool edge = succ ? bit(&gr->succ[(size_t)c * (size_t)gr->words], b)
                     : bit(&gr->succ[(size_t)b * (size_t)gr->words], c);
    if (!edge) continue;
    if (one >= 0) return -1;
    one = b;
  }
  return one;
}

/* Merges one light group into a neighbour where that delays nothing but itself: into its only
 * successor (which waited for it anyway; into a loop only a group of sources and views, which
 * the loop's stage makes for its ranges), else into its only predecessor (not a loop: a
 * loop's stage holds the loop alone). Neither can make a cycle: a group with one successor
 * has no other path to it, and one with one predecessor no other path from it. False when no
 * group merges. */
static bool merge_one(grouping *gr) {
  double cheap = LOOM__BRANCH_CHEAP_SHARE * gr->total;
  for (int32_t at = 0; at < gr->k; at++) {
    int32_t c = gr->order[at];
    if (gr->loop[c] || gr->work[c] >= cheap) continue;
    int32_t into = only_neighbour(gr, c, true);
    if (into >= 0 && gr->loop[into] && !gr->light_only[c]) into = -1;
    if (into < 0) {
      into = only_neighbour(gr, c, false);
      if (into >= 0 && gr->loop[into]) into = -1;
    }
    if (into < 0) continue;
    int32_t a = -1, b = -1;
    for (int32_t o = 0; o < gr->g->n_ops && (a < 0 || b < 0); o++) {
      if (gr->gid[o] == c && a < 0) a = o;
      if (gr->gid[o] == into && b < 0) b = o;
    }
    gr->root[find(gr->root, a)] = find(gr->root, b);
    return true;
  }
  return false;
}

/* Chains: an op whose operands come from one op only, which nothing else reads, joins that
 * op's group (loops stay alone). */
static void chain_ops(grouping *gr) {
  const loom_graph *g = gr->g;
  int32_t n = g->n_ops;
  int32_t *readers = gr->gid; /* per op: distinct ops reading it (gid is rebuilt after) */
  int32_t *last = gr->order;  /* per op: the last op counted as its reader */
  for (int32_t o = 0; o < n; o++) readers[o] = 0, last[o] = -1;
  for (int32_t o = 0; o < n; o++)
    for (int32_t i = 0; i < g->ops[o].n_inputs; i++) {
      int32_t p = g->values[g->ops[o].inputs[i]].op;
      if (p >= 0 && last[p] != o) readers[p]++, last[p] = o;
    }
  for (int32_t o = 0; o < n; o++) {
    int32_t p = -1;
    bool one = true;
    for (int32_t i = 0; i < g->ops[o].n_inputs && one; i++) {
      int32_t q = g->values[g->ops[o].inputs[i]].op;
      if (q < 0 || q == p) continue;
      if (p >= 0) one = false;
      p = q;
    }
    if (one && p >= 0 && readers[p] == 1 && !g->ops[o].loop && !g->ops[p].loop)
      gr->root[find(gr->root, o)] = find(gr->root, p);
  }
}

/* The graph with its ops in the groups' order, and each op's stage. */
static loom_status reorder(const grouping *gr, loom__branch_cut *out) {
  const loom_graph *g = gr->g;
  loom__rebuild rb;
  memset(&rb, 0, sizeof rb);
  out->stage_of_op = loom__malloc(sizeof *out->stage_of_op * (size_t)g->n_ops);
  out->stage_work = loom__malloc(sizeof *out->stage_work * (size_t)gr->k);
  loom_status s = out->stage_of_op && out->stage_work ? LOOM_OK : loom__oom("the branch cut");
  if (!s) s = loom__rebuild_init(&rb, g);
  int32_t at = 0;
  for (int32_t st = 0; !s && st < gr->k; st++) {
    int32_t c = gr->order[st];
    out->stage_work[st] = gr->work[c];
    for (int32_t o = 0; !s && o < g->n_ops; o++) {
      if (gr->gid[o] != c) continue;
      out->stage_of_op[at++] = st;
      s = loom__rebuild_copy(&rb, o);
    }
  }
  if (!s) s = loom__rebuild_finish(&rb, &out->graph);
  loom__rebuild_deinit(&rb);
  out->n_stages = gr->k;
  if (!s && out->graph->n_ops != g->n_ops)
    s = loom__error(LOOM_ERR_INTERNAL, "the branch cut lost %d ops", (int)(g->n_ops - out->graph->n_ops));
  return s;
}

loom_status loom__branch_cut_make(const loom_graph *g, loom__branch_cut *out, bool *found) {
  memset(out, 0, sizeof *out);
  *found = false;
  int32_t n = g->n_ops;
  if (n < 2) return LOOM_OK;
  grouping gr = {.g = g};
  size_t rows = (size_t)LOOM__BRANCH_MAX_GROUPS * (size_t)((LOOM__BRANCH_MAX_GROUPS + 63) / 64);
  gr.root = loom__malloc(sizeof *gr.root * (size_t)n);
  gr.gid = loom__malloc(sizeof *gr.gid * (size_t)n);
  gr.order = loom__malloc(sizeof *gr.order * (size_t)n);
  gr.op_work = loom__malloc(sizeof *gr.op_work * (size_t)n);
  gr.work = loom__malloc(sizeof *gr.work * (size_t)n);
  gr.loop = loom__malloc(sizeof *gr.loop * (size_t)n);
  gr.light_only = loom__malloc(sizeof *gr.light_only * (size_t)n);
  gr.succ = loom__malloc(sizeof *gr.succ * rows);
  gr.reach = loom__malloc(sizeof *gr.reach * rows);
  if (!gr.root || !gr.gid || !gr.order || !gr.op_work || !gr.work || !gr.loop || !gr.light_only || !gr.succ ||
      !gr.reach) {
    grouping_free(&gr);
    return loom__oom("the branch cut");
  }
  for (int32_t o = 0; o < n; o++) {
    gr.root[o] = o;
    gr.op_work[o] = rough_seconds(g, o);
    gr.total += gr.op_work[o];
  }
  chain_ops(&gr);
  bool ok = rebuild_groups(&gr) && has_independent_heavy(&gr);
  while (ok && merge_one(&gr)) ok = rebuild_groups(&gr);
  loom_status s = LOOM_OK;
  if (ok && gr.k > 1) {
    s = reorder(&gr, out);
    if (s) loom__branch_cut_deinit(out);
    *found = !s;
  }
  grouping_free(&gr);
  return s;
}

void loom__branch_cut_deinit(loom__branch_cut *cut) {
  if (!cut) return;
  loom_graph_destroy(cut->graph);
  loom__free(cut->stage_of_op);
  loom__free(cut->stage_work);
  memset(cut, 0, sizeof *cut);
}
