/* Printing (src/ir/print.c) and the round trip: print(parse(print(g))) == print(g), and the
 * re-parsed graph equals g (types, ops, attributes and constant bytes). */
#include <limits.h>
#include <locale.h>
#include <stdlib.h>

#include "harness.h"
#include "ir/ir.h"
#include "loom/testing.h"
#include "round_trip.h"

/* tests/data/lir: from LOOM_TEST_DATA under ctest, else next to this source file. */
static const char *lir_path(const char *name) {
  static char buf[PATH_MAX];
  const char *data = getenv("LOOM_TEST_DATA");
  if (data) {
    snprintf(buf, sizeof buf, "%s/lir/%s", data, name);
  } else {
    const char *file = __FILE__;
    const char *cut = strstr(file, "ir/test_roundtrip.c");
    int n = cut ? (int)(cut - file) : 0;
    snprintf(buf, sizeof buf, "%.*sdata/lir/%s", n, file, name);
  }
  return buf;
}

static void round_trip_file(const char *name) {
  loom_graph *g = NULL;
  ASSERT_OK(loom_graph_load(lir_path(name), &g));
  char *text;
  ASSERT_ROUND_TRIP(g, &text);
  free(text);
  loom_graph_destroy(g);
}

TEST(roundtrip_all_ops) {
  round_trip_file("all_ops.lir");
  round_trip_file("quant_ops.lir");
}
TEST(roundtrip_constants_file) {
  round_trip_file("constants.lir");
}
TEST(roundtrip_comments_file) {
  round_trip_file("comments.lir");
}
TEST(roundtrip_passthrough) {
  round_trip_file("passthrough.lir");
}

/* The canonical text of IR.md's example. */
TEST(roundtrip_knn_canonical_text) {
  loom_graph *g = NULL;
  ASSERT_OK(loom_graph_load(lir_path("knn.lir"), &g));
  char *text;
  ASSERT_ROUND_TRIP(g, &text);
  ASSERT_STREQ(text,
               "graph knn(x: f32[20000,3], y: f32[30000,3]) {\n"
               "  xe = reshape x shape=[20000,1,3] : f32[20000,1,3]\n"
               "  ye = reshape y shape=[1,30000,3] : f32[1,30000,3]\n"
               "  diff = sub xe ye : f32[20000,30000,3]\n"
               "  sq = mul diff diff : f32[20000,30000,3]\n"
               "  d2 = reduce_sum sq axes=[2] : f32[20000,30000]\n"
               "  val, idx = topk d2 k=10 axis=1 largest=false\n"
               "  return val, idx\n"
               "}\n");
  free(text);
  loom_graph_destroy(g);
}

TEST(roundtrip_constant_text) {
  const char *in =
      "graph c() {\n  a = constant [[1,2],[3,4]] : f32[2,2]\n  b = constant 0.1 : f32[]\n"
      "  c = constant [1, 2] : c64[2]\n  d = constant [65504, 6e-08, -0.0] : f16[3]\n"
      "  e = fill value=2.0 : f32[3]\n  f = fill value=2 : f32[3]\n  h = fill value=-0.0 : f64[]\n"
      "  i = constant [0.1, 1e300, 2.5e-300] : f64[3]\n  j = constant [true, 0] : bool[2]\n"
      "  return a, b, c, d, e, f, h, i, j\n}\n";
  loom_graph *g = NULL;
  ASSERT_OK(loom_graph_parse(in, strlen(in), "c.lir", &g));
  char *text;
  ASSERT_ROUND_TRIP(g, &text);
  ASSERT_STREQ(text,
               "graph c() {\n"
               "  a = constant [1,2,3,4] : f32[2,2]\n"
               "  b = constant 0.1 : f32[]\n"
               "  c = constant [1,0,2,0] : c64[2]\n"
               "  d = constant [65504,6e-8,-0] : f16[3]\n"
               "  e = fill value=2.0 : f32[3]\n"
               "  f = fill value=2 : f32[3]\n"
               "  h = fill value=-0.0 : f64[]\n"
               "  i = constant [0.1,1e300,2.5e-300] : f64[3]\n"
               "  j = constant [true,false] : bool[2]\n"
               "  return a, b, c, d, e, f, h, i, j\n"
               "}\n");
  free(text);
  loom_graph_destroy(g);
}

/* A constant of `n` elements of `dtype` from raw bytes, printed and read back bit for bit. */
static void round_trip_bits(loom_dtype dtype, const void *data, int64_t n) {
  loom_graph *g = NULL;
  ASSERT_OK(loom_graph_create("bits", &g));
  loom_type t;
  ASSERT_OK(loom_type_make(dtype, 1, &n, &t));
  loom_value v;
  ASSERT_OK(loom_graph_add(g, LOOM_OP_CONSTANT, NULL, 0, NULL, &t, data, &v, 1));
  ASSERT_OK(loom_graph_return(g, &v, 1));
  char *text;
  ASSERT_ROUND_TRIP(g, &text);
  free(text);
  loom_graph_destroy(g);
}

static uint64_t next_random(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

/* Every f16 and bf16 bit pattern but NaN (whose payload is not kept) reads back exactly. */
TEST(roundtrip_every_f16_and_bf16) {
  uint16_t *h = malloc(65536 * sizeof *h), *b = malloc(65536 * sizeof *b);
  ASSERT_TRUE(h && b);
  int64_t nh = 0, nb = 0;
  for (uint32_t i = 0; i < 65536; i++) {
    if ((i & 0x7fff) <= 0x7c00) h[nh++] = (uint16_t)i;
    if ((i & 0x7fff) <= 0x7f80) b[nb++] = (uint16_t)i;
  }
  round_trip_bits(LOOM_F16, h, nh);
  round_trip_bits(LOOM_BF16, b, nb);
  free(h);
  free(b);
}

/* Random f32/f64/c64/c128 bit patterns (no NaN) and random integers read back exactly. */
TEST(roundtrip_random_bits_every_dtype) {
  enum { N = 20000 };
  uint64_t seed = 0x9e3779b97f4a7c15ull;
  static uint8_t buf[N * 16];
  for (int d = 0; d < LOOM_DTYPE_COUNT; d++) {
    loom_dtype dt = (loom_dtype)d;
    if (loom_dtype_is_quantized(dt)) continue; /* no constants of them (docs/ir-quant.md) */
    int64_t size = loom_dtype_size(dt);
    for (int64_t i = 0; i < N * size; i += 8) {
      uint64_t r = next_random(&seed);
      memcpy(buf + i, &r, 8);
    }
    for (int64_t i = 0; i < N; i++) {
      uint8_t *e = buf + i * size;
      if (dt == LOOM_BOOL) e[0] &= 1;
      if (dt == LOOM_F32 || dt == LOOM_C64)
        for (int c = 0; c < (dt == LOOM_C64 ? 2 : 1); c++) {
          float f;
          memcpy(&f, e + 4 * c, 4);
          if (isnan(f)) memset(e + 4 * c, 0, 4);
        }
      if (dt == LOOM_F64 || dt == LOOM_C128)
        for (int c = 0; c < (dt == LOOM_C128 ? 2 : 1); c++) {
          double x;
          memcpy(&x, e + 8 * c, 8);
          if (isnan(x)) memset(e + 8 * c, 0, 8);
        }
      if (dt == LOOM_F16 || dt == LOOM_BF16) {
        uint16_t h;
        memcpy(&h, e, 2);
        if ((h & 0x7fff) > (dt == LOOM_F16 ? 0x7c00 : 0x7f80)) memset(e, 0, 2);
      }
    }
    round_trip_bits(dt, buf, N);
    if (loom_test_failed()) {
      loom_test_fail(__FILE__, __LINE__, "dtype %s", loom_dtype_name(dt));
      return;
    }
  }
}

/* A graph built from C with unnamed values prints them as v<id> and reads back the same. */
TEST(roundtrip_unnamed_values) {
  loom_graph *g = NULL;
  ASSERT_OK(loom_graph_create("built", &g));
  loom_type t;
  int64_t dims[2] = {4, 3};
  ASSERT_OK(loom_type_make(LOOM_F32, 2, dims, &t));
  loom_value x = loom_graph_param(g, NULL, &t), y = loom_graph_param(g, "y", &t);
  loom_value s, outs[2];
  ASSERT_OK(loom_graph_add(g, LOOM_OP_ADD, (loom_value[]){x, y}, 2, NULL, NULL, NULL, &s, 1));
  loom_attrs a;
  loom_attrs_init(&a);
  a.set = LOOM_ATTR_K | LOOM_ATTR_AXIS;
  a.k = 2;
  a.axis = -1;
  ASSERT_OK(loom_graph_add(g, LOOM_OP_TOPK, &s, 1, &a, NULL, NULL, outs, 2));
  ASSERT_OK(loom_value_set_name(g, outs[1], "idx"));
  ASSERT_OK(loom_graph_return(g, (loom_value[]){outs[0], outs[1], x}, 3));
  char *text;
  ASSERT_ROUND_TRIP(g, &text);
  ASSERT_STREQ(text,
               "graph built(v0: f32[4,3], y: f32[4,3]) {\n"
               "  v2 = add v0 y : f32[4,3]\n"
               "  v3, idx = topk v2 k=2 axis=-1\n"
               "  return v3, idx, v0\n"
               "}\n");
  free(text);
  loom_graph_destroy(g);
}

TEST(roundtrip_print_to_file_equals_string) {
  loom_graph *g = NULL;
  ASSERT_OK(loom_graph_load(lir_path("all_ops.lir"), &g));
  char *text = NULL;
  ASSERT_OK(loom_graph_to_string(g, &text));
  FILE *f = tmpfile();
  ASSERT_TRUE(f != NULL);
  ASSERT_OK(loom_graph_print(g, f));
  long n = ftell(f);
  rewind(f);
  char *back = calloc(1, (size_t)n + 1);
  ASSERT_TRUE(back && fread(back, 1, (size_t)n, f) == (size_t)n);
  fclose(f);
  ASSERT_STREQ(back, text);
  free(back);
  free(text);
  ASSERT_STATUS(loom_graph_print(g, NULL), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(loom_graph_to_string(NULL, &text), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_TRUE(text == NULL);
  loom_graph_destroy(g);
}

TEST(roundtrip_print_ignores_the_locale) {
  const char *locales[] = {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8"};
  const char *in =
      "graph g() {\n  a = constant [0.5,1.25] : f64[2]\n  b = fill value=0.5 : f32[]\n  return a, b\n}\n";
  loom_graph *g = NULL;
  ASSERT_OK(loom_graph_parse(in, strlen(in), "g.lir", &g));
  const char *old = setlocale(LC_NUMERIC, NULL);
  char saved[64];
  snprintf(saved, sizeof saved, "%s", old ? old : "C");
  for (int i = 0; i < 3 && !setlocale(LC_NUMERIC, locales[i]); i++) {
  }
  char *text = NULL;
  loom_status s = loom_graph_to_string(g, &text);
  setlocale(LC_NUMERIC, saved);
  ASSERT_OK(s);
  ASSERT_CONTAINS(text, "constant [0.5,1.25] : f64[2]");
  ASSERT_CONTAINS(text, "fill value=0.5 : f32[]");
  free(text);
  loom_graph_destroy(g);
}

/* A graph still being built (no return yet) prints, without a return line. */
TEST(roundtrip_print_unfinished_graph) {
  loom_graph *g = NULL;
  ASSERT_OK(loom_graph_create("partial", &g));
  loom_type t;
  ASSERT_OK(loom_type_make(LOOM_I32, 0, NULL, &t));
  loom_graph_param(g, "a", &t);
  char *text = NULL;
  ASSERT_OK(loom_graph_to_string(g, &text));
  ASSERT_STREQ(text, "graph partial(a: i32[]) {\n}\n");
  free(text);
  loom_graph_destroy(g);
}
