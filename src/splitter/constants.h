/* Weights placed with their stage: what a runner holds of a model's constants.
 *
 * A model split over several runners (the Nx case: a transformer larger than any one device)
 * is split so that each runner can keep the weights of its layers: split_by_memory with more
 * than one runner counts, beside a stage's running peak, every constant its ops read (through
 * views such as a transposed weight), once, for the whole stage. With one runner there is
 * nothing to place, and a constant counts only while the estimator says it is live (it is made
 * just before its first reader): the runner's limit is the run's peak, as the executor meters
 * it. The stage's estimated peak (what loom_run measures) is unchanged either way; only where
 * a stage ends moves. */
#ifndef LOOM_SPLITTER_CONSTANTS_H
#define LOOM_SPLITTER_CONSTANTS_H

#include "splitter/splitter.h"

/* Bytes of the constants that op o of si->g reads (directly or through a view of one) and
 * that no op of the same stage read before: each constant read is marked with gen in
 * si->stamp, so a stage's ops visited in order with one gen (a fresh ++si->stamp_gen) sum to
 * the stage's weights. A dead op reads nothing. */
int64_t loom__split_constants_read(loom__split_info *si, int32_t o, int32_t gen);

/* The bytes of the distinct constants that the live ops [first, end) read: the weights a
 * runner holds while running the stage. Uses a fresh stamp generation. */
int64_t loom__split_constant_bytes(loom__split_info *si, int32_t first, int32_t end);

#endif
