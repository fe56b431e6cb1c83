/* The round trip of the IR's text form, for tests/ir: print, parse, print. */
#ifndef LOOM_TESTS_IR_ROUND_TRIP_H
#define LOOM_TESTS_IR_ROUND_TRIP_H

#include <stddef.h>

#include "harness.h"
#include "loom/graph.h"

/* Why two graphs differ (types, names, ops, attributes, constant bytes by bits, loops through
 * their bodies), written into buf; NULL when they are the same graph. */
const char *ir_graph_diff(const loom_graph *a, const loom_graph *b, char *buf, size_t size);

/* print, parse, print: equal prints and equal graphs. Returns the first print (the caller
 * frees it), or NULL with the reason in why. */
char *ir_round_trip(const loom_graph *g, char *why, size_t size);

/* Fails the test (and returns from it) unless g round-trips; *out_text gets the print. */
#define ASSERT_ROUND_TRIP(g, out_text)                            \
  do {                                                            \
    char why_[8192];                                              \
    *(out_text) = ir_round_trip((g), why_, sizeof why_);          \
    if (!*(out_text)) {                                           \
      loom_test_fail(__FILE__, __LINE__, "round trip: %s", why_); \
      return;                                                     \
    }                                                             \
  } while (0)

#endif
