/* Groups of steps for the halo cut (docs/limits.md, "Halos"): a stencil whose one halo loop
 * fits no piece (every step widens each input's window by the stencil's radius, so 50 steps of
 * heat-3d need a window of 100 planes, more than its limit) is cut into groups of steps, each a
 * halo loop of its own over the whole grid: the grids a group leaves (one, or fdtd-2d's three)
 * are the next group's inputs.
 *
 * A group boundary is a place in the op order where every value that depends on an input and
 * is still read later is a whole grid (the results' type), made by an op: the end
 * of a step. The grid between two groups is held whole by the graph, so the graph as a whole
 * passes a limit below a grid; the plan then cuts it into stages at those grids (a stage's
 * results that no op of it reads are written piece by piece to host memory, and the next
 * stage's loop reads them from there in windows), so each stage holds only its pieces.
 *
 * The group size trades the halos' redundant work (a window averages a piece and half its halo,
 * which grows with the steps) against the passes over the whole grid between groups; it is
 * chosen by the work each size's first group predicts, as `work` says. */
#include <stdio.h>
#include <string.h>

#include "ir/chunk_halo.h"
#include "ir/rebuild.h"

/* The ends of steps: positions c (op c is the first after the boundary) where every value that
 * depends on an input, is made before c and read at or after c, is a whole grid made by an op,
 * at most LOOM_LOOP_MAX_RESULTS of them. *out (owned by the caller) lists them in order. */
static loom_status step_ends(const loom_graph *g, int32_t **out, int32_t *n_out) {
  *out = NULL;
  *n_out = 0;
  int32_t nv = LOOM_MAX(g->n_values, 1), no = g->n_ops;
  bool *varies = loom__calloc((size_t)nv, sizeof *varies);
  int32_t *last = loom__malloc(sizeof(int32_t) * (size_t)nv);
  int32_t *live = loom__calloc((size_t)no + 2, sizeof *live),
          *bad = loom__calloc((size_t)no + 2, sizeof *bad);
  int32_t *ends = loom__malloc(sizeof(int32_t) * (size_t)LOOM_MAX(no, 1));
  if (!varies || !last || !live || !bad || !ends) {
    loom__free(varies), loom__free(last), loom__free(live), loom__free(bad), loom__free(ends);
    return loom__oom("a halo cut's groups");
  }
  const loom_type *t0 = &g->values[g->outputs[0]].type;
  for (int32_t v = 0; v < nv; v++) last[v] = -1;
  for (int32_t p = 0; p < g->n_params; p++) varies[g->params[p]] = true;
  for (int32_t o = 0; o < no; o++)
    for (int32_t i = 0; i < g->ops[o].n_inputs; i++) {
      int32_t x = g->ops[o].inputs[i];
      varies[g->ops[o].outputs[0]] |= varies[x];
      last[x] = o;
    }
  for (int32_t k = 0; k < g->n_outputs; k++) last[g->outputs[k]] = no;
  /* value v is live across every boundary c with made < c <= last: counted by differences */
  for (int32_t v = 0; v < g->n_values; v++) {
    if (!varies[v] || last[v] < 0) continue;
    int32_t made = g->values[v].op, from = made + 1, to = LOOM_MIN(last[v], no - 1);
    const loom_type *t = &g->values[v].type;
    bool grid = made >= 0 && loom_type_equal(t, t0);
    if (from > to) continue;
    live[from]++, live[to + 1]--;
    if (!grid) bad[from]++, bad[to + 1]--;
  }
  int32_t n_live = 0, n_bad = 0;
  for (int32_t c = 0; c < no; c++) {
    n_live += live[c];
    n_bad += bad[c];
    if (c > 0 && n_bad == 0 && n_live > 0 && n_live <= LOOM_LOOP_MAX_RESULTS) ends[(*n_out)++] = c;
  }
  loom__free(varies), loom__free(last), loom__free(live), loom__free(bad);
  *out = ends;
  return LOOM_OK;
}

/* The values made before c that depend on an input and are read at or after c (or returned),
 * in id order: the grids crossing boundary c. */
static int32_t crossing(const loom_graph *g, const int32_t *last, const bool *varies, int32_t c,
                        int32_t *vals) {
  int32_t n = 0;
  for (int32_t v = 0; v < g->n_values && n < LOOM_LOOP_MAX_RESULTS; v++)
    if (varies[v] && g->values[v].op >= 0 && g->values[v].op < c && last[v] >= c) vals[n++] = v;
  return n;
}

typedef struct group_build {
  const loom_graph *g;
  int32_t *last;  /* per value: its last reader, n_ops when returned */
  bool *varies;   /* per value: depends on an input */
  int32_t *map;   /* per value of g: the sub-graph's, -1 */
  loom_graph *sg; /* the group's graph */
} group_build;

/* Value x of g in the sub-graph: a source copied on first use. */
static int32_t sub_value(group_build *gb, int32_t x) {
  if (gb->map[x] >= 0) return gb->map[x];
  const loom__op *op = &gb->g->ops[gb->g->values[x].op];
  loom_attrs a = op->attrs;
  loom_value out = LOOM_VALUE_NONE;
  loom_graph_add(gb->sg, op->kind, NULL, 0, &a, &gb->g->values[x].type, op->const_data, &out, 1);
  return gb->map[x] = out.id;
}

/* The graph of ops [a, b) of g: its parameters the grids crossing a (g's parameters at a = 0),
 * its results the grids crossing b (g's results at the end). */
static loom_status group_graph(group_build *gb, int32_t a, int32_t b, loom_graph **out) {
  const loom_graph *g = gb->g;
  loom_status s = loom_graph_create(g->name, &gb->sg);
  if (s) return s;
  for (int32_t v = 0; v < g->n_values; v++) gb->map[v] = -1;
  int32_t ins[LOOM_LOOP_MAX_RESULTS + 64], n_in = 0;
  if (a == 0)
    for (int32_t p = 0; p < g->n_params && n_in < (int32_t)LOOM_ARRAY_SIZE(ins); p++)
      ins[n_in++] = g->params[p];
  else
    n_in = crossing(g, gb->last, gb->varies, a, ins);
  for (int32_t i = 0; i < n_in; i++) {
    char name[32];
    gb->map[ins[i]] =
        loom_graph_param(gb->sg, loom__value_label(g, ins[i], name, sizeof name), &g->values[ins[i]].type).id;
  }
  for (int32_t o = a; o < b && !gb->sg->error; o++) {
    const loom__op *op = &g->ops[o];
    loom_value xs[64], res = LOOM_VALUE_NONE;
    if (!gb->varies[op->outputs[0]] || op->n_inputs > 64) continue; /* sources: copied where read */
    for (int32_t i = 0; i < op->n_inputs; i++) xs[i] = (loom_value){sub_value(gb, op->inputs[i])};
    loom_graph_add(gb->sg, op->kind, xs, op->n_inputs, &op->attrs, NULL, NULL, &res, 1);
    gb->map[op->outputs[0]] = res.id;
    if (res.id >= 0 && g->values[op->outputs[0]].name)
      loom_value_set_name(gb->sg, res, g->values[op->outputs[0]].name);
  }
  int32_t outs[LOOM_LOOP_MAX_RESULTS], n_out = 0;
  if (b == g->n_ops)
    for (int32_t k = 0; k < g->n_outputs; k++) outs[n_out++] = g->outputs[k];
  else
    n_out = crossing(g, gb->last, gb->varies, b, outs);
  loom_value rets[LOOM_LOOP_MAX_RESULTS];
  for (int32_t k = 0; k < n_out; k++) rets[k] = (loom_value){gb->map[outs[k]]};
  s = gb->sg->error ? gb->sg->error : loom_graph_return(gb->sg, rets, n_out);
  if (s) {
    loom_graph_destroy(gb->sg);
    gb->sg = NULL;
    return s;
  }
  *out = gb->sg;
  gb->sg = NULL;
  return LOOM_OK;
}

/* g with its ops in step order: each op after every op of the grids before its operands'. A
 * value's level counts the whole grids (the results' type) on the longest chain
 * from the inputs to it; ops sorted by their operands' level (stably, so operands still come
 * first) put each step's ops between its grids, where the schedule rewrite's depth-first order
 * may have started the next step's slices before the last grid of a step (fdtd-2d's three). */
static loom_status step_order(const loom_graph *g, loom_graph **out) {
  int32_t no = g->n_ops, *lvl = loom__calloc((size_t)LOOM_MAX(g->n_values, 1), sizeof *lvl);
  int32_t *order = loom__malloc(sizeof(int32_t) * (size_t)LOOM_MAX(no, 1));
  int32_t *op_lvl = loom__malloc(sizeof(int32_t) * (size_t)LOOM_MAX(no, 1));
  loom__rebuild rb = {0};
  loom_status s = (!lvl || !order || !op_lvl) ? loom__oom("a halo cut's groups") : LOOM_OK;
  const loom_type *t0 = &g->values[g->outputs[0]].type;
  int32_t top = 0;
  for (int32_t o = 0; !s && o < no; o++) {
    const loom__op *op = &g->ops[o];
    int32_t l = 0;
    for (int32_t i = 0; i < op->n_inputs; i++) l = LOOM_MAX(l, lvl[op->inputs[i]]);
    const loom_type *t = &g->values[op->outputs[0]].type;
    bool grid = op->n_inputs > 0 && loom_type_equal(t, t0);
    op_lvl[o] = l;
    top = LOOM_MAX(top, l);
    for (int32_t r = 0; r < op->n_outputs; r++) lvl[op->outputs[r]] = l + (grid ? 1 : 0);
  }
  int32_t n = 0;
  for (int32_t l = 0; !s && l <= top; l++) /* a counting sort would do; the levels are few */
    for (int32_t o = 0; o < no; o++)
      if (op_lvl[o] == l) order[n++] = o;
  if (!s) s = loom__rebuild_init(&rb, g);
  for (int32_t i = 0; !s && i < n; i++) s = loom__rebuild_copy(&rb, order[i]);
  if (!s) s = loom__rebuild_finish(&rb, out);
  loom__rebuild_deinit(&rb);
  loom__free(lvl);
  loom__free(order);
  loom__free(op_lvl);
  return s;
}

/* Appends halo loop graph lg (a group's cut) to ng, its parameters bound to ng's values `ins`;
 * outs gets its results. */
static loom_status append_group(loom_graph *ng, const loom_graph *lg, const loom_value *ins,
                                loom_value *outs) {
  int32_t *map = loom__malloc(sizeof(int32_t) * (size_t)LOOM_MAX(lg->n_values, 1));
  if (!map) return loom__oom("a halo cut's groups");
  for (int32_t p = 0; p < lg->n_params; p++) map[lg->params[p]] = ins[p].id;
  loom_status s = LOOM_OK;
  for (int32_t o = 0; !s && o < lg->n_ops; o++) {
    const loom__op *op = &lg->ops[o];
    loom_value xs[64], res[LOOM_LOOP_MAX_RESULTS];
    if (op->n_inputs > 64) s = LOOM_ERR_UNSUPPORTED;
    for (int32_t i = 0; !s && i < op->n_inputs; i++) xs[i] = (loom_value){map[op->inputs[i]]};
    if (s) break;
    if (op->loop) {
      const loom__loop *l = op->loop;
      s = loom_graph_add_loop(ng, l->n, l->piece, l->body, xs, l->rules, op->n_inputs, l->combines,
                              op->n_outputs, res);
      if (!s) ng->ops[ng->n_ops - 1].loop->slices = l->slices;
    } else {
      loom_attrs a = op->attrs;
      s = loom_graph_add(ng, op->kind, xs, op->n_inputs, &a,
                         op->n_inputs ? NULL : &lg->values[op->outputs[0]].type, op->const_data, res,
                         op->n_outputs);
    }
    for (int32_t k = 0; !s && k < op->n_outputs; k++) map[op->outputs[k]] = res[k].id;
  }
  for (int32_t k = 0; !s && k < lg->n_outputs; k++) {
    outs[k] = (loom_value){map[lg->outputs[k]]};
    const char *name = lg->values[lg->outputs[k]].name;
    if (name) s = loom_value_set_name(ng, outs[k], name);
  }
  loom__free(map);
  return s;
}

/* The halo cut of the group [a, b) of g: *out its loop graph. */
static loom_status cut_group(group_build *gb, int32_t a, int32_t b, const loom_optimize_options *opts,
                             int64_t limit, int32_t slices, loom_graph **out, char *detail,
                             size_t detail_size) {
  loom_graph *sg = NULL;
  loom_status s = group_graph(gb, a, b, &sg);
  /* the whole graph passes the limit (the grids between groups), so the fuse rewrite fuses
   * every body for memory whatever the time: size the pieces on the fused body */
  if (!s) s = loom__chunk_halo_one(sg, opts, limit, slices, true, out, detail, detail_size);
  loom_graph_destroy(sg);
  return s;
}

/* The work of the whole chain in groups of `size` steps whose first group is cut as lg, in
 * steps of the whole grid: each step's window averages the piece and half the halo, and each
 * group passes over the grid once more (written out, read back: about a step's traffic). */
static double work(const loom_graph *lg, int32_t size, int32_t steps) {
  const loom__loop *l = lg->ops[lg->n_ops - 1].loop;
  int64_t halo = 0;
  for (int32_t i = 0; i < lg->ops[lg->n_ops - 1].n_inputs; i++) halo = LOOM_MAX(halo, l->rules[i].halo);
  double groups = (double)((steps + size - 1) / size);
  return groups * ((double)size * (double)(l->piece + halo / 2) / (double)l->piece + 1.0);
}

/* The group size (in step ends) of least work whose first group fits, or 0. */
static loom_status best_size(group_build *gb, const int32_t *ends, int32_t n_ends,
                             const loom_optimize_options *opts, int64_t limit, int32_t slices, int32_t *out,
                             char *why, size_t why_size) {
  double least = 0;
  *out = 0;
  for (int32_t size = 1; size <= n_ends; size++) {
    loom_graph *lg = NULL;
    char one[256] = "";
    loom_status s = cut_group(gb, 0, ends[size - 1], opts, limit, slices, &lg, one, sizeof one);
    if (s && size == 1)
      snprintf(why, why_size, "in groups of steps, the first group (its first %d ops) %s", (int)ends[0],
               one[0] ? one : "is no chain of steps the halo cut takes");
    if (s == LOOM_ERR_OUT_OF_MEMORY) return s;
    if (s) break; /* a longer group has wider halos still */
    double w = work(lg, size, n_ends + 1);
    loom_graph_destroy(lg);
    if (!*out || w < least) *out = size, least = w;
  }
  return LOOM_OK;
}

/* g in groups of `size` steps, each group's halo loop after the one before. */
static loom_status chain(group_build *gb, const int32_t *ends, int32_t n_ends, int32_t size,
                         const loom_optimize_options *opts, int64_t limit, int32_t slices, loom_graph **out,
                         int32_t *n_groups, int64_t *piece, char *why, size_t why_size) {
  const loom_graph *g = gb->g;
  loom_graph *ng = NULL;
  loom_status s = loom_graph_create(g->name, &ng);
  loom_value cur[LOOM_LOOP_MAX_RESULTS + 64];
  for (int32_t p = 0; !s && p < g->n_params && p < (int32_t)LOOM_ARRAY_SIZE(cur); p++) {
    cur[p] = loom_graph_param(ng, g->values[g->params[p]].name, &g->values[g->params[p]].type);
    s = ng->error;
  }
  *n_groups = 0;
  for (int32_t a = 0, k = 0; !s && a < g->n_ops; k += size) {
    int32_t b = k + size - 1 < n_ends ? ends[k + size - 1] : g->n_ops;
    loom_graph *lg = NULL;
    char one[256] = "";
    s = cut_group(gb, a, b, opts, limit, slices, &lg, one, sizeof one);
    /* only the first group was sized: one that starts elsewhere in a step may need more */
    if (s == LOOM_ERR_UNSUPPORTED)
      snprintf(why, why_size, "in groups of steps, group %d (ops %d to %d) %s", (int)*n_groups + 1, (int)a,
               (int)b - 1, one[0] ? one : "is no chain of steps the halo cut takes");
    if (!s && *n_groups == 0) *piece = lg->ops[lg->n_ops - 1].loop->piece;
    if (!s) s = append_group(ng, lg, cur, cur);
    loom_graph_destroy(lg);
    (*n_groups)++;
    a = b;
  }
  if (!s) s = loom_graph_return(ng, cur, g->n_outputs);
  if (s) {
    loom_graph_destroy(ng);
    return s;
  }
  *out = ng;
  return LOOM_OK;
}

static loom_status groups(const loom_graph *g, const loom_optimize_options *opts, int64_t limit,
                          int32_t slices, loom_graph **out, char *detail, size_t detail_size) {
  int32_t *ends = NULL, n_ends = 0, size = 0, n_groups = 0;
  int64_t piece = 0;
  group_build gb = {.g = g};
  size_t nv = (size_t)LOOM_MAX(g->n_values, 1);
  gb.last = loom__malloc(sizeof(int32_t) * nv);
  gb.varies = loom__calloc(nv, sizeof *gb.varies);
  gb.map = loom__malloc(sizeof(int32_t) * nv);
  loom_status s =
      (!gb.last || !gb.varies || !gb.map) ? loom__oom("a halo cut's groups") : step_ends(g, &ends, &n_ends);
  if (!s) {
    for (int32_t v = 0; v < g->n_values; v++) gb.last[v] = -1;
    for (int32_t p = 0; p < g->n_params; p++) gb.varies[g->params[p]] = true;
    for (int32_t o = 0; o < g->n_ops; o++)
      for (int32_t i = 0; i < g->ops[o].n_inputs; i++) {
        gb.varies[g->ops[o].outputs[0]] |= gb.varies[g->ops[o].inputs[i]];
        gb.last[g->ops[o].inputs[i]] = o;
      }
    for (int32_t k = 0; k < g->n_outputs; k++) gb.last[g->outputs[k]] = g->n_ops;
    if (n_ends > 0)
      s = best_size(&gb, ends, n_ends, opts, limit, slices, &size, detail, detail_size);
    else
      snprintf(detail, detail_size,
               "no place between its steps has only whole grids crossing it, so no groups");
  }
  if (!s && size < 1) s = LOOM_ERR_UNSUPPORTED;
  if (!s)
    s = chain(&gb, ends, n_ends, size, opts, limit, slices, out, &n_groups, &piece, detail, detail_size);
  if (!s) {
    char name[32];
    snprintf(detail, detail_size,
             "'%s' and the %d ops before it in %d groups of steps (%d of the %d places where only whole "
             "grids cross a group), each a halo loop over the whole grid (the first in pieces of %lld), the "
             "grids between them passed between stages",
             loom__value_label(g, g->outputs[0], name, sizeof name), (int)g->n_ops, (int)n_groups, (int)size,
             (int)n_ends, (long long)piece);
  }
  loom__free(ends);
  loom__free(gb.last);
  loom__free(gb.varies);
  loom__free(gb.map);
  return s;
}

loom_status loom__chunk_halo_groups(const loom_graph *g, const loom_optimize_options *opts, int64_t limit,
                                    int32_t slices, loom_graph **out, char *detail, size_t detail_size) {
  *out = NULL;
  if (g->n_outputs < 1 || g->n_ops < 2) return LOOM_ERR_UNSUPPORTED;
  /* A group is a loop: it returns at most LOOM_LOOP_MAX_RESULTS grids, and the chain carries
   * the graph's inputs beside them (found by fuzzing: 17 results overran the arrays). */
  if (g->n_outputs > LOOM_LOOP_MAX_RESULTS || g->n_params > LOOM_LOOP_MAX_RESULTS + 64) {
    snprintf(detail, detail_size,
             "no groups of steps: %d results and %d inputs, where a group returns at most %d "
             "results and reads at most %d inputs",
             (int)g->n_outputs, (int)g->n_params, LOOM_LOOP_MAX_RESULTS, LOOM_LOOP_MAX_RESULTS + 64);
    return LOOM_ERR_UNSUPPORTED;
  }
  loom_graph *ordered = NULL;
  loom_status s = step_order(g, &ordered);
  if (!s) s = groups(ordered, opts, limit, slices, out, detail, detail_size);
  loom_graph_destroy(ordered);
  return s;
}
