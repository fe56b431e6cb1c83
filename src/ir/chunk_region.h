/* The chunk rewrite's regions (chunk.c's opening comment says what they are): the ops around a sink that can
 * run piece by piece along one axis, and the loop emitted for them. chunk_region.c builds regions and emits
 * loops; chunk.c chooses the cut. Private to those two files. */
#ifndef LOOM_IR_CHUNK_REGION_H
#define LOOM_IR_CHUNK_REGION_H

#include "ir/passes.h"
#include "ir/repiece.h"
#include "ir/view.h"

/* AX_WINDOW + a: read through a window along axis a (a conv's x along a spatial axis: each
 * piece of its output reads the rows of its receptive fields, overlapping the next piece's). */
enum { AX_UNSET = -2, AX_WHOLE = -1, AX_FAIL = -3, AX_WINDOW = LOOM_LOOP_WINDOW };
enum { MAX_ROUNDS = 16 };

typedef enum chunk_mode { MODE_PARALLEL, MODE_REDUCED } chunk_mode;

/* How a region may grow (loom__chunk_region_build): readers of its values join as further
 * sinks; transposes of inputs read whole move into the body; cheap ops also read outside the
 * region are computed in the pieces and again after the loop. */
enum { CUT_MORE_SINKS = 1, CUT_VIEWS_INSIDE = 2, CUT_RECOMPUTE = 4 };

typedef struct region {
  const loom_graph *g;
  int32_t sink; /* the sink the cut was chosen for */
  chunk_mode mode;
  int32_t axis;   /* parallel: axis of the sink's results; reduced: of its input */
  int64_t extent; /* length of that axis */
  int32_t *sinks; /* every sink, in op order: the first sink and those that joined it */
  int32_t n_sinks;
  int32_t *sink_axis; /* per op: for a sink, its cut axis (of its results or its input) */
  /* per op: a sink that reduces its input's cut axis (combined across pieces), not one whose
   * results hold the axis (written in place). Every sink of a reduced region reduces, but a
   * returned value that the region reads joins either kind of region as one that does not. */
  bool *reducing;
  int32_t *axis_of;     /* per value: the axis a region value is cut along */
  int32_t *out_axis;    /* per op: the axis its results are cut along (region ops) */
  bool *in_region;      /* per op */
  bool *downstream;     /* per op: reads a region result, so runs after the pieces */
  bool *dup;            /* per op: in the region, and made again after the loop (CUT_RECOMPUTE) */
  int32_t *uses;        /* per value */
  int32_t *region_uses; /* per value: reads by region ops */
  int64_t min_piece;    /* topk merged across pieces needs pieces of at least k */
  bool even_pieces;     /* a q4 value is read along its rows: pieces start on whole bytes */
  /* A region inside a loop's body (g is that body): each candidate body is put back into a
   * copy of `outer` at loop op `outer_op`, and measured there. NULL at the top. */
  const loom_graph *outer;
  int32_t outer_op;
  int32_t slices; /* the loop's streamed slices (loom_optimize_options.slices) */
} region;

/* Functions one file of the module calls in another (each documented at its definition). */
loom_status loom__chunk_emit_loop(const region *r, int64_t c, loom_graph **out);
bool loom__chunk_reduced_by(const loom__op *op, int32_t ax, int32_t rank);
loom_status loom__chunk_region_build(region *r, const loom_graph *g, int32_t sink, chunk_mode mode,
                                     int32_t axis, unsigned how);
void loom__chunk_region_free(region *r);
/* chunk_stream.c: g with a reduction of an input larger than `limit` cut into a loop of its own
 * (pieces of the input's reduced axis, the largest whose loop fits the limit beside the inputs
 * still held whole), where ops after it read both its result and that input, so no one loop
 * streams the input for both (mean-centring: covariance, correlation). `detail` says which.
 * Errors: UNSUPPORTED (no such reduction, or its loop does not fit; *out stays NULL),
 * OUT_OF_MEMORY. The caller owns *out. */
/* chunk_stream.c: g with a product V^T V (covariance's `cent cen`), V made by elementwise ops
 * from an input X [m, n] larger than `limit` and operands constant along X's rows, run as two
 * nested loops: blocks of the product's rows outside, X's rows in dense blocks inside (the
 * product's k, summed), V made again from each block, the elementwise ops after the product in
 * the outer body; the blocks of least predicted time that fit the limit, the loops holding
 * `slices` slices. Where the product is not in that form (V V^T), V is made a second time for
 * the product's own operand instead, so a cut of the product's rows reads the transpose's V in
 * column blocks and makes the other in its body (as syrk's A A^T). `detail` says which.
 * Errors: UNSUPPORTED (no such product; *out stays NULL), OUT_OF_MEMORY. The caller owns *out. */
loom_status loom__chunk_stream_gram(const loom_graph *g, int64_t limit, int32_t slices, loom_graph **out,
                                    char *detail, size_t detail_size);
loom_status loom__chunk_stream_reduction(const loom_graph *g, int64_t limit, int32_t slices, loom_graph **out,
                                         char *detail, size_t detail_size);

#endif
