/* libFuzzer target: the small languages of the command line and the environment: byte sizes
 * (loom_bytes_parse), runner specs (loom_runners_parse, "--runners") and memory limits
 * (loom_runners_from_mem_limits, LOOM_MEM_LIMIT's syntax). Each either fails with a message
 * or gives values that hold: sizes >= 0, runners with a device id and a positive limit, and a
 * size that prints back (as bytes) parses to itself. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom/loom.h"

enum { MAX_TEXT = 4096 };

static void check(int ok, const char *what, const char *text) {
  if (!ok) {
    fprintf(stderr, "fuzz_specs: %s for \"%s\" (%s)\n", what, text, loom_last_error());
    abort();
  }
}

static void check_runners(const char *text, loom_status s, loom_runner *r, int32_t n) {
  if (s != LOOM_OK) {
    check(loom_last_error()[0] != '\0', "a refusal without a message", text);
    return;
  }
  check(n >= 0 && (n == 0 || r != NULL), "runners without an array", text);
  for (int32_t i = 0; i < n; i++) {
    check(r[i].limit > 0, "a runner with a limit <= 0", text);
    check(r[i].device[0] != '\0' && memchr(r[i].device, '\0', sizeof r[i].device), "a runner without an id",
          text);
  }
  free(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > MAX_TEXT) return 0;
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = '\0';

  int64_t bytes = -1;
  if (loom_bytes_parse(text, &bytes) == LOOM_OK) {
    check(bytes >= 0, "a negative size", text);
    char back[32];
    snprintf(back, sizeof back, "%" PRId64, bytes);
    int64_t again = -1;
    check(loom_bytes_parse(back, &again) == LOOM_OK && again == bytes, "a size that does not parse back",
          text);
  }
  loom_runner *r = NULL;
  int32_t n = -1;
  check_runners(text, loom_runners_parse(text, &r, &n), r, n);
  r = NULL, n = -1;
  check_runners(text, loom_runners_from_mem_limits(text, &r, &n), r, n);
  free(text);
  return 0;
}
