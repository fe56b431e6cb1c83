/* loom-run --print N: the first rows of an output, as text. */
#include <inttypes.h>

#include "loom_run.h"

/* At most this many elements of a row are printed; the rest is "...". */
#define ROW_ELEMENTS_MAX 16

static void print_element(FILE *f, const loom_tensor *t, int64_t i) {
  const void *d = t->data;
  switch (t->type.dtype) {
    case LOOM_BOOL:
      fputs(((const uint8_t *)d)[i] ? "true" : "false", f);
      break;
    case LOOM_I8:
      fprintf(f, "%d", (int)((const int8_t *)d)[i]);
      break;
    case LOOM_U8:
      fprintf(f, "%u", (unsigned)((const uint8_t *)d)[i]);
      break;
    case LOOM_I16:
      fprintf(f, "%d", (int)((const int16_t *)d)[i]);
      break;
    case LOOM_I32:
      fprintf(f, "%" PRId32, ((const int32_t *)d)[i]);
      break;
    case LOOM_I64:
      fprintf(f, "%" PRId64, ((const int64_t *)d)[i]);
      break;
    case LOOM_F16:
      fprintf(f, "%.6g", (double)loom_f16_to_f32(((const uint16_t *)d)[i]));
      break;
    case LOOM_BF16:
      fprintf(f, "%.6g", (double)loom_bf16_to_f32(((const uint16_t *)d)[i]));
      break;
    case LOOM_F32:
      fprintf(f, "%.7g", (double)((const float *)d)[i]);
      break;
    case LOOM_F64:
      fprintf(f, "%.10g", ((const double *)d)[i]);
      break;
    case LOOM_C64:
      fprintf(f, "%.7g%+.7gj", (double)((const float *)d)[2 * i], (double)((const float *)d)[2 * i + 1]);
      break;
    case LOOM_C128:
      fprintf(f, "%.10g%+.10gj", ((const double *)d)[2 * i], ((const double *)d)[2 * i + 1]);
      break;
    default:
      fputs("?", f);
      break;
  }
}

/* Prints the first `max_shown` of elements [start, start+count) on one line. */
static void print_row(FILE *f, const loom_tensor *t, int64_t start, int64_t count, int64_t max_shown) {
  int64_t shown = count < max_shown ? count : max_shown;
  for (int64_t j = 0; j < shown; j++) {
    if (j) fputc(' ', f);
    print_element(f, t, start + j);
  }
  if (shown < count) fprintf(f, " ... (%" PRId64 " in all)", count);
  fputc('\n', f);
}

void run_print_rows(FILE *f, const loom_tensor *t, int64_t rows) {
  int64_t n = 0;
  if (loom_type_elements(&t->type, &n) != LOOM_OK || rows <= 0) return;
  if (t->type.rank == 0) {
    fputs("    ", f);
    print_row(f, t, 0, 1, 1);
    return;
  }
  if (t->type.rank == 1) { /* a vector is one row: its first `rows` elements */
    fputs("    ", f);
    print_row(f, t, 0, n, rows);
    return;
  }
  int64_t n_rows = t->type.dims[0];
  int64_t row_len = n_rows ? n / n_rows : 0;
  int64_t shown = n_rows < rows ? n_rows : rows;
  for (int64_t r = 0; r < shown; r++) {
    fprintf(f, "    [%" PRId64 "] ", r);
    print_row(f, t, r * row_len, row_len, ROW_ELEMENTS_MAX);
  }
  if (shown < n_rows)
    fprintf(f, "    ... %" PRId64 " more row%s\n", n_rows - shown, n_rows - shown == 1 ? "" : "s");
}
