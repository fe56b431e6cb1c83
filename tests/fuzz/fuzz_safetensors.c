/* libFuzzer target: the .safetensors reader (loom_safetensors_open) on arbitrary bytes. Each
 * input is written to a temporary file first. What opens must list tensors of valid types
 * whose bytes lie inside the file; each loads, maps to the same bytes where it maps, and the
 * whole file saved by Loom opens again with the same names, types and bytes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loom/loom.h"

static char in_path[64], out_path[64];

static void check(int ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "fuzz_safetensors: %s (%s)\n", what, loom_last_error());
    abort();
  }
}

static void make_paths(void) {
  if (in_path[0]) return;
  snprintf(in_path, sizeof in_path, "/tmp/loom-fuzz-st-%d-in.safetensors", (int)getpid());
  snprintf(out_path, sizeof out_path, "/tmp/loom-fuzz-st-%d-out.safetensors", (int)getpid());
}

static void write_file(const char *path, const uint8_t *data, size_t size) {
  FILE *f = fopen(path, "wb");
  check(f != NULL, "cannot create the temporary file");
  check(fwrite(data, 1, size, f) == size, "cannot write the temporary file");
  fclose(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  make_paths();
  write_file(in_path, data, size);
  loom_safetensors *st = NULL;
  if (loom_safetensors_open(in_path, &st) != LOOM_OK) {
    check(st == NULL, "a failed open returns a handle");
    return 0;
  }
  int32_t n = loom_safetensors_count(st);
  loom_tensor *ts = calloc((size_t)n + 1, sizeof *ts);
  const char **names = calloc((size_t)n + 1, sizeof *names);
  check(ts && names, "out of memory");
  int64_t total = 0;
  for (int32_t i = 0; i < n; i++) {
    names[i] = loom_safetensors_name(st, i);
    check(loom_safetensors_find(st, names[i]) == i, "find does not return the tensor's index");
    int64_t bytes = -1;
    check(loom_type_bytes(loom_safetensors_type(st, i), &bytes) == LOOM_OK && bytes >= 0, "an invalid type");
    total += bytes;
    check(total <= (int64_t)size, "tensors hold more bytes than the file");
    check(loom_safetensors_load(st, i, &ts[i]) == LOOM_OK, "a tensor does not load");
    loom_tensor m;
    if (loom_safetensors_map(st, i, &m) == LOOM_OK && bytes > 0 && m.type.dtype != LOOM_BOOL)
      check(memcmp(m.data, ts[i].data, (size_t)bytes) == 0, "mapped and loaded bytes differ");
  }
  if (loom_safetensors_save(out_path, names, ts, n) == LOOM_OK) {
    loom_safetensors *back = NULL;
    check(loom_safetensors_open(out_path, &back) == LOOM_OK, "a saved file does not open");
    check(loom_safetensors_count(back) == n, "a saved file has another count");
    for (int32_t i = 0; i < n; i++) {
      loom_tensor t;
      int64_t bytes = 0;
      check(strcmp(loom_safetensors_name(back, i), names[i]) == 0, "a saved file has other names");
      check(loom_safetensors_map(back, i, &t) == LOOM_OK, "a saved tensor does not map");
      check(loom_type_equal(&t.type, &ts[i].type), "a saved tensor has another type");
      (void)loom_type_bytes(&t.type, &bytes);
      check(bytes == 0 || memcmp(t.data, ts[i].data, (size_t)bytes) == 0, "a saved tensor has other bytes");
    }
    loom_safetensors_close(back);
  } else {
    /* only a name Loom's writer refuses: "" (JSON allows it) */
    int empty = 0;
    for (int32_t i = 0; i < n; i++) empty |= names[i][0] == '\0';
    check(empty, "an opened file does not save");
  }
  for (int32_t i = 0; i < n; i++) loom_tensor_deinit(&ts[i]);
  free(ts);
  free(names);
  loom_safetensors_close(st);
  return 0;
}
