/* libFuzzer target: the ONNX reader (loom_graph_from_onnx_bytes) on arbitrary bytes. A model
 * that reads must verify and print; one that does not must leave no graph and say why in one
 * line that starts with the model's name. External-data locations resolve under a folder that
 * does not exist, so no input reaches a file. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom/loom.h"

#define NAME "/nonexistent/fuzz.onnx"

static void check(int ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "fuzz_onnx: %s (%s)\n", what, loom_last_error());
    abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  loom_graph *g = NULL;
  loom_status s = loom_graph_from_onnx_bytes(data, size, NAME, NULL, &g);
  if (s != LOOM_OK) {
    const char *msg = loom_last_error();
    check(g == NULL, "a failed read returns a graph");
    check(!strncmp(msg, NAME ": ", strlen(NAME ": ")), "the message does not start with the model's name");
    check(strchr(msg, '\n') == NULL, "the message is more than one line");
    return 0;
  }
  check(loom_graph_verify(g) == LOOM_OK, "a graph that was read does not verify");
  char *text = NULL;
  check(loom_graph_to_string(g, &text) == LOOM_OK, "a graph that was read does not print");
  free(text);
  loom_graph_destroy(g);
  return 0;
}
