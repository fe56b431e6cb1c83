/* Building one graph from another: the shared mechanism of every rewrite, of chunking and of
 * the splitter's stage extraction. A pass walks the source graph's ops, copies those it keeps
 * (operands mapped to the new graph) and emits replacements for the others through the
 * ordinary builder calls on rb->dst, then tells the rebuild which new value stands for each
 * replaced source value. */
#ifndef LOOM_REBUILD_H
#define LOOM_REBUILD_H

#include "ir/ir.h"

typedef struct loom__rebuild {
  const loom_graph *src;
  loom_graph *dst;
  int32_t *map; /* src value id -> dst value id, -1 while unmapped */
} loom__rebuild;

/* Starts dst with src's name and parameters (same names and types). */
loom_status loom__rebuild_init(loom__rebuild *rb, const loom_graph *src);
/* As init, but without parameters: the caller adds its own (the splitter's stage inputs). */
loom_status loom__rebuild_init_empty(loom__rebuild *rb, const loom_graph *src, const char *name);
/* Copies src op `op_index` into dst with mapped operands; its results keep their names. */
loom_status loom__rebuild_copy(loom__rebuild *rb, int32_t op_index);
/* The dst value standing for src value id; LOOM_VALUE_NONE when not mapped yet. */
loom_value loom__rebuild_get(const loom__rebuild *rb, int32_t src_value);
/* Makes dst value v stand for src value id, and gives v that value's name when it is free. */
void loom__rebuild_set(loom__rebuild *rb, int32_t src_value, loom_value v);
/* Returns the mapped outputs of src, drops ops nobody needs, and hands dst to *out. */
loom_status loom__rebuild_finish(loom__rebuild *rb, loom_graph **out);
/* Frees what finish did not hand over. Accepts a zeroed rebuild. */
void loom__rebuild_deinit(loom__rebuild *rb);

/* Readers of each value (ops that take it as an operand, counted once per operand, plus one
 * per appearance in the graph's return). out has n_values entries. */
void loom__use_counts(const loom_graph *g, int32_t *out);
/* A copy of g without the ops whose results nobody needs. */
loom_status loom__graph_dce(const loom_graph *g, loom_graph **out);

#endif
