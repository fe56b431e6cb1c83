/* libFuzzer target: .lir text through parse, print, re-parse, estimate, optimize and split.
 * Properties checked (abort() is the finding): what parses prints as text that parses again
 * and prints the same; an estimate and a plan either succeed or fail with a status, never
 * crash; an optimized graph fits the limit it was chunked to. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom/loom.h"

/* Inputs past this length add nothing the corpus lacks and slow every run down. */
enum { MAX_TEXT = 1 << 14 };

static void check(int ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "fuzz_lir: %s (%s)\n", what, loom_last_error());
    abort();
  }
}

/* Optimizes g chunked to `limit`, then plans it for two runners of that limit. */
static void optimize_and_split(const loom_graph *g, int64_t limit) {
  loom_optimize_options o;
  loom_optimize_options_init(&o);
  o.limit = limit;
  loom_graph *opt = NULL;
  loom_rewrite_report report = {0};
  loom_status s = loom_graph_optimize(g, &o, &opt, &report);
  loom_rewrite_report_deinit(&report);
  if (s) return;
  loom_estimate e;
  check(loom_graph_estimate(opt, NULL, &e) == LOOM_OK, "an optimized graph does not estimate");
  check(e.peak_bytes <= limit, "an optimized graph passes its limit");
  loom_estimate_deinit(&e);
  loom_runner runners[2] = {{"cpu0", limit}, {"cpu0", limit / 2 + 1}};
  loom_plan *plan = NULL;
  if (loom_plan_split_by_memory(opt, runners, 2, &plan) == LOOM_OK) {
    check(loom_plan_stage_count(plan) >= 0, "a plan has a negative stage count");
    loom_plan_destroy(plan);
  }
  loom_graph_destroy(opt);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > MAX_TEXT) return 0;
  loom_graph *g = NULL;
  if (loom_graph_parse((const char *)data, size, "fuzz.lir", &g) != LOOM_OK) return 0;
  char *text = NULL, *again = NULL;
  check(loom_graph_to_string(g, &text) == LOOM_OK, "a parsed graph does not print");
  loom_graph *back = NULL;
  check(loom_graph_parse(text, strlen(text), "printed.lir", &back) == LOOM_OK,
        "a printed graph does not parse");
  check(loom_graph_to_string(back, &again) == LOOM_OK, "a re-parsed graph does not print");
  check(strcmp(text, again) == 0, "printing is not stable across a re-parse");
  loom_estimate e;
  if (loom_graph_estimate(g, NULL, &e) == LOOM_OK) {
    int64_t peak = e.peak_bytes;
    loom_estimate_deinit(&e);
    optimize_and_split(g, peak > 0 ? peak : 1);
    /* A limit below the peak makes the chunker and the splitter work. */
    if (peak > 1) optimize_and_split(g, peak / 2);
  }
  free(text);
  free(again);
  loom_graph_destroy(back);
  loom_graph_destroy(g);
  return 0;
}
