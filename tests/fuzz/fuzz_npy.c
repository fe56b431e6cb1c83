/* libFuzzer target: the .npy reader (loom_tensor_load_npy) on arbitrary bytes. The reader
 * takes a path, so each input is written to one temporary file first. What loads must have a
 * valid type whose bytes were all read, and saves and loads back to the same bytes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loom/loom.h"

static char in_path[64], out_path[64];

static void check(int ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "fuzz_npy: %s (%s)\n", what, loom_last_error());
    abort();
  }
}

static void make_paths(void) {
  if (in_path[0]) return;
  snprintf(in_path, sizeof in_path, "/tmp/loom-fuzz-npy-%d-in.npy", (int)getpid());
  snprintf(out_path, sizeof out_path, "/tmp/loom-fuzz-npy-%d-out.npy", (int)getpid());
}

static void write_file(const char *path, const uint8_t *data, size_t size) {
  FILE *f = fopen(path, "wb");
  check(f != NULL, "cannot create the temporary file");
  check(fwrite(data, 1, size, f) == size, "cannot write the temporary file");
  fclose(f);
}

/* Saved and loaded back, t gives the same type and bytes. */
static void check_round_trip(const loom_tensor *t, int64_t bytes) {
  if (loom_tensor_save_npy(out_path, t) != LOOM_OK) {
    check(t->type.dtype == LOOM_BF16, "a loaded tensor does not save");
    return;
  }
  loom_tensor back;
  check(loom_tensor_load_npy(out_path, &back) == LOOM_OK, "a saved tensor does not load");
  check(loom_type_equal(&t->type, &back.type), "a saved tensor loads with another type");
  check(bytes == 0 || memcmp(t->data, back.data, (size_t)bytes) == 0, "a saved tensor loads other bytes");
  loom_tensor_deinit(&back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  make_paths();
  write_file(in_path, data, size);
  loom_tensor t;
  if (loom_tensor_load_npy(in_path, &t) != LOOM_OK) return 0;
  int64_t bytes = -1;
  check(loom_type_bytes(&t.type, &bytes) == LOOM_OK && bytes >= 0, "a loaded tensor has an invalid type");
  check(bytes <= (int64_t)size, "a loaded tensor holds more bytes than the file");
  /* every byte is read: ASan reports a read past the end of a short buffer */
  volatile uint8_t sum = 0;
  for (int64_t i = 0; i < bytes; i++) sum ^= ((const uint8_t *)t.data)[i];
  check_round_trip(&t, bytes);
  loom_tensor_deinit(&t);
  return 0;
}
