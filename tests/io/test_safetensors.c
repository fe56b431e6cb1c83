/* .safetensors files (issue 17): files written by an independent writer
 * (tests/data/safetensors/make_fixtures.py, standard-library Python) read back with every
 * dtype, mapped and loaded; Loom's writer's layout and round trips; and every kind of
 * malformed header refused with a message naming the file and the field or tensor. */
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core.h"
#include "harness.h"
#include "loom/io.h"

/* tests/data/safetensors: from LOOM_TEST_DATA under ctest, else next to this source file. */
static const char *fixture(const char *name) {
  static char buf[PATH_MAX];
  const char *data = getenv("LOOM_TEST_DATA");
  if (data) {
    snprintf(buf, sizeof buf, "%s/safetensors/%s", data, name);
  } else {
    const char *file = __FILE__;
    const char *cut = strstr(file, "io/test_safetensors.c");
    int n = cut ? (int)(cut - file) : 0;
    snprintf(buf, sizeof buf, "%.*sdata/safetensors/%s", n, file, name);
  }
  return buf;
}

static const char *temp_path(const char *stem) {
  static char buf[256];
  const char *tmp = getenv("TMPDIR");
  snprintf(buf, sizeof buf, "%s/loom_st_%s_%d.safetensors", tmp && *tmp ? tmp : "/tmp", stem, (int)getpid());
  return buf;
}

/* Element i of make_fixtures.py's value pattern for `dtype`, stored as Loom stores it. */
static void expected_element(loom_dtype dtype, int64_t i, void *dst) {
  switch (dtype) {
    case LOOM_F64:
    case LOOM_F32:
    case LOOM_F16:
    case LOOM_BF16:
      loom__scalar_store(dtype, (double)i * 0.5 - 1, 0, false, dst);
      return;
    case LOOM_C64: {
      float parts[2] = {(float)i * 0.5f - 1, -(float)i};
      memcpy(dst, parts, sizeof parts);
      return;
    }
    case LOOM_U8:
      loom__scalar_store(dtype, 0, i * 3 + 1, true, dst);
      return;
    case LOOM_BOOL:
      *(uint8_t *)dst = (uint8_t)(i % 2);
      return;
    default:
      loom__scalar_store(dtype, 0, i * 3 - 5, true, dst);
      return;
  }
}

/* True when t holds the pattern's first elements. */
static bool holds_pattern(const loom_tensor *t) {
  int64_t n = 1, size = loom_dtype_size(t->type.dtype);
  for (int32_t d = 0; d < t->type.rank; d++) n *= t->type.dims[d];
  for (int64_t i = 0; i < n; i++) {
    unsigned char want[16];
    expected_element(t->type.dtype, i, want);
    if (memcmp((const char *)t->data + i * size, want, (size_t)size) != 0) return false;
  }
  return true;
}

/* ---- reading the independent writer's files ---------------------------------------------- */

TEST(safetensors_reads_every_dtype_lazily) {
  loom_safetensors *st = NULL;
  ASSERT_OK(loom_safetensors_open(fixture("dtypes.safetensors"), &st));
  /* 11 dtypes + a scalar + an empty tensor, listed by name whatever the file's order */
  ASSERT_EQ(loom_safetensors_count(st), 13);
  for (int32_t i = 1; i < loom_safetensors_count(st); i++)
    ASSERT_TRUE(strcmp(loom_safetensors_name(st, i - 1), loom_safetensors_name(st, i)) < 0);
  static const struct {
    const char *name;
    loom_dtype dtype;
  } want[] = {{"t_c64", LOOM_C64}, {"t_f64", LOOM_F64}, {"t_i64", LOOM_I64},   {"t_f32", LOOM_F32},
              {"t_i32", LOOM_I32}, {"t_f16", LOOM_F16}, {"t_bf16", LOOM_BF16}, {"t_i16", LOOM_I16},
              {"t_i8", LOOM_I8},   {"t_u8", LOOM_U8},   {"t_bool", LOOM_BOOL}};
  for (int32_t k = 0; k < LOOM_ARRAY_SIZE(want); k++) {
    int32_t i = loom_safetensors_find(st, want[k].name);
    ASSERT_TRUE(i >= 0);
    ASSERT_STREQ(loom_safetensors_name(st, i), want[k].name);
    loom_type ty;
    ASSERT_OK(loom_type_make(want[k].dtype, 2, (int64_t[]){2, 3}, &ty));
    ASSERT_TRUE(loom_type_equal(loom_safetensors_type(st, i), &ty));
    loom_tensor mapped, loaded;
    ASSERT_OK(loom_safetensors_map(st, i, &mapped));
    ASSERT_TRUE(loom_type_equal(&mapped.type, &ty));
    if (!holds_pattern(&mapped)) loom_test_fail(__FILE__, __LINE__, "%s: wrong values", want[k].name);
    ASSERT_OK(loom_safetensors_load(st, i, &loaded));
    ASSERT_TRUE(loaded.data != mapped.data);
    ASSERT_TRUE(memcmp(loaded.data, mapped.data, (size_t)(6 * loom_dtype_size(ty.dtype))) == 0);
    loom_tensor_deinit(&loaded);
  }
  /* the mapped data lies in the file at its offset: no copy was made */
  loom_tensor a, b;
  ASSERT_OK(loom_safetensors_map(st, loom_safetensors_find(st, "t_c64"), &a));
  ASSERT_OK(loom_safetensors_map(st, loom_safetensors_find(st, "t_f64"), &b));
  ASSERT_EQ((const char *)b.data - (const char *)a.data, 48); /* c64[2,3] then f64 */

  int32_t s = loom_safetensors_find(st, "scalar");
  ASSERT_TRUE(s >= 0);
  ASSERT_EQ(loom_safetensors_type(st, s)->rank, 0);
  loom_tensor sc;
  ASSERT_OK(loom_safetensors_map(st, s, &sc));
  ASSERT_TRUE(*(const double *)sc.data == 2.5);

  /* a name with JSON escapes (\u00e9, \"), an empty tensor: no data */
  int32_t e = loom_safetensors_find(st, "\xc3\xa9t\xc3\xa9 \"q\"");
  ASSERT_TRUE(e >= 0);
  ASSERT_EQ(loom_safetensors_type(st, e)->dims[0], 0);
  loom_tensor empty;
  ASSERT_OK(loom_safetensors_map(st, e, &empty));
  ASSERT_TRUE(empty.data == NULL);

  ASSERT_EQ(loom_safetensors_metadata_count(st), 2);
  ASSERT_STREQ(loom_safetensors_metadata(st, "format"), "pt");
  ASSERT_STREQ(loom_safetensors_metadata(st, "note"), "caf\xc3\xa9 \"quoted\"\n");
  ASSERT_TRUE(loom_safetensors_metadata(st, "nope") == NULL);
  ASSERT_EQ(loom_safetensors_find(st, "nope"), -1);
  ASSERT_TRUE(loom_safetensors_name(st, 13) == NULL && loom_safetensors_type(st, -1) == NULL);
  loom_tensor t;
  ASSERT_STATUS(loom_safetensors_map(st, 13, &t), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "has 13 tensors, no tensor 13");
  loom_safetensors_close(st);
  loom_safetensors_close(NULL);
}

/* Tensors stored at offsets their dtype does not divide: mapping says UNSUPPORTED (naming
 * the tensor), loading copies them with the right values. */
TEST(safetensors_misaligned_tensors_are_loaded_not_mapped) {
  loom_safetensors *st = NULL;
  const char *path = fixture("misaligned.safetensors");
  ASSERT_OK(loom_safetensors_open(path, &st));
  ASSERT_EQ(loom_safetensors_count(st), 3);
  loom_tensor t;
  ASSERT_OK(loom_safetensors_map(st, loom_safetensors_find(st, "a"), &t)); /* u8: any offset */
  ASSERT_TRUE(holds_pattern(&t));
  const char *names[] = {"b", "c"};
  for (int k = 0; k < 2; k++) {
    int32_t i = loom_safetensors_find(st, names[k]);
    ASSERT_STATUS(loom_safetensors_map(st, i, &t), LOOM_ERR_UNSUPPORTED);
    ASSERT_CONTAINS(loom_last_error(), path);
    ASSERT_CONTAINS(loom_last_error(), names[k][0] == 'b' ? "tensor 'b'" : "tensor 'c'");
    ASSERT_CONTAINS(loom_last_error(), "is not aligned for");
    ASSERT_TRUE(t.data == NULL);
    ASSERT_OK(loom_safetensors_load(st, i, &t));
    ASSERT_TRUE(((uintptr_t)t.data % (uintptr_t)loom_dtype_size(t.type.dtype)) == 0);
    ASSERT_TRUE(holds_pattern(&t));
    loom_tensor_deinit(&t);
  }
  loom_safetensors_close(st);
}

/* ---- writing -------------------------------------------------------------------------------- */

static uint64_t le64(const unsigned char *b) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | b[i];
  return v;
}

/* Reads a whole file into fresh storage; returns its size or -1. */
static long slurp(const char *path, unsigned char **out) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  *out = malloc((size_t)n + 1);
  if (fread(*out, 1, (size_t)n, f) != (size_t)n) n = -1;
  fclose(f);
  return n;
}

/* The layout the Python library writes: header sorted by name, compact, padded with spaces
 * so the data starts on 8 bytes; data back to back, larger elements first. */
TEST(safetensors_save_writes_the_library_layout) {
  float b[3] = {1, 2, 3};
  int16_t a[2] = {-7, 9};
  loom_tensor ts[2];
  ASSERT_OK(loom_type_make(LOOM_F32, 1, (int64_t[]){3}, &ts[0].type));
  ts[0].data = b;
  ASSERT_OK(loom_type_make(LOOM_I16, 2, (int64_t[]){1, 2}, &ts[1].type));
  ts[1].data = a;
  const char *names[] = {"b", "a"};
  const char *path = temp_path("layout");
  ASSERT_OK(loom_safetensors_save(path, names, ts, 2));
  unsigned char *raw = NULL;
  long n = slurp(path, &raw);
  const char *want =
      "{\"a\":{\"dtype\":\"I16\",\"shape\":[1,2],\"data_offsets\":[12,16]},"
      "\"b\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]}}";
  uint64_t hlen = le64(raw);
  ASSERT_EQ((8 + hlen) % 8, 0);
  ASSERT_EQ((long)(8 + hlen + 16), n);
  ASSERT_TRUE(memcmp(raw + 8, want, strlen(want)) == 0);
  for (uint64_t i = strlen(want); i < hlen; i++) ASSERT_EQ(raw[8 + i], ' ');
  /* data: the f32 first (larger elements first, keeping every tensor aligned), then the i16 */
  ASSERT_TRUE(memcmp(raw + 8 + hlen, b, 12) == 0 && memcmp(raw + 8 + hlen + 12, a, 4) == 0);
  free(raw);
  remove(path);
}

/* Every tensor of the independent writer's file, saved by Loom and read back: the same
 * names, types and bytes. */
TEST(safetensors_round_trip_of_the_fixture) {
  loom_safetensors *st = NULL;
  ASSERT_OK(loom_safetensors_open(fixture("dtypes.safetensors"), &st));
  int32_t n = loom_safetensors_count(st);
  loom_tensor ts[16];
  const char *names[16];
  for (int32_t i = 0; i < n; i++) {
    names[n - 1 - i] = loom_safetensors_name(st, i); /* given unsorted */
    ASSERT_OK(loom_safetensors_map(st, i, &ts[n - 1 - i]));
  }
  const char *path = temp_path("round");
  ASSERT_OK(loom_safetensors_save(path, names, ts, n));
  loom_safetensors *back = NULL;
  ASSERT_OK(loom_safetensors_open(path, &back));
  ASSERT_EQ(loom_safetensors_count(back), n);
  for (int32_t i = 0; i < n; i++) {
    ASSERT_STREQ(loom_safetensors_name(back, i), loom_safetensors_name(st, i));
    loom_tensor x, y;
    ASSERT_OK(loom_safetensors_map(st, i, &x));
    ASSERT_OK(loom_safetensors_map(back, i, &y)); /* Loom's layout keeps every tensor aligned */
    int64_t bytes;
    ASSERT_OK(loom_type_bytes(&x.type, &bytes));
    ASSERT_TRUE(loom_type_equal(&x.type, &y.type));
    ASSERT_TRUE(bytes == 0 || memcmp(x.data, y.data, (size_t)bytes) == 0);
  }
  loom_safetensors_close(back);
  loom_safetensors_close(st);
  remove(path);
}

TEST(safetensors_save_refuses_bad_arguments) {
  float v = 1;
  loom_tensor t = {.data = &v};
  ASSERT_OK(loom_type_make(LOOM_F32, 0, NULL, &t.type));
  loom_tensor two[2] = {t, t};
  const char *path = temp_path("bad");
  ASSERT_STATUS(loom_safetensors_save(path, (const char *[]){"w", "w"}, two, 2), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "tensor name 'w' given twice");
  ASSERT_STATUS(loom_safetensors_save(path, (const char *[]){"__metadata__"}, &t, 1),
                LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(loom_safetensors_save(path, (const char *[]){""}, &t, 1), LOOM_ERR_INVALID_ARGUMENT);
  loom_tensor c = t;
  c.type.dtype = LOOM_C128;
  ASSERT_STATUS(loom_safetensors_save(path, (const char *[]){"z"}, &c, 1), LOOM_ERR_UNSUPPORTED);
  ASSERT_CONTAINS(loom_last_error(), "tensor 'z': c128 has no safetensors dtype");
  ASSERT_TRUE(access(path, F_OK) != 0); /* nothing written */
  ASSERT_STATUS(loom_safetensors_save(path, NULL, &t, 1), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(loom_safetensors_save("/nonexistent-dir/x.safetensors", (const char *[]){"w"}, &t, 1),
                LOOM_ERR_IO);
  ASSERT_CONTAINS(loom_last_error(), "/nonexistent-dir/x.safetensors");
  /* no tensor at all: a valid file with header "{}" padded to 8 */
  ASSERT_OK(loom_safetensors_save(path, NULL, NULL, 0));
  loom_safetensors *st = NULL;
  ASSERT_OK(loom_safetensors_open(path, &st));
  ASSERT_EQ(loom_safetensors_count(st), 0);
  loom_safetensors_close(st);
  remove(path);
}

/* ---- malformed files ------------------------------------------------------------------------- */

/* Writes a file of an 8-byte length `hlen`, `header`, and `data` zero bytes. */
static const char *write_file(const char *stem, uint64_t hlen, const char *header, size_t data) {
  const char *path = temp_path(stem);
  FILE *f = fopen(path, "wb");
  unsigned char len8[8];
  for (int i = 0; i < 8; i++) len8[i] = (unsigned char)(hlen >> (8 * i));
  fwrite(len8, 1, 8, f);
  fwrite(header, 1, strlen(header), f);
  for (size_t i = 0; i < data; i++) fputc(0, f);
  fclose(f);
  return path;
}

/* Opening `header` (with `data` bytes after it) fails with `status` and a message holding the
 * path and `msg`. */
static void check_bad(int line, const char *header, size_t data, loom_status status, const char *msg) {
  const char *path = write_file("bad", strlen(header), header, data);
  loom_safetensors *st = (loom_safetensors *)&st;
  loom_status s = loom_safetensors_open(path, &st);
  if (s != status || st != NULL || !strstr(loom_last_error(), path) || !strstr(loom_last_error(), msg))
    loom_test_fail(__FILE__, line, "header %s: got status %d, message \"%s\"; wanted status %d and \"%s\"",
                   header, (int)s, loom_last_error(), (int)status, msg);
  remove(path);
}

#define BAD(header, data, status, msg) check_bad(__LINE__, header, data, status, msg)
#define T(body) "{\"w1\":{" body "}}"

TEST(safetensors_malformed_headers_are_named) {
  const loom_status INVAL = LOOM_ERR_INVALID_ARGUMENT;
  /* the example */
  BAD(T("\"dtype\":\"F32\",\"shape\":[5,6],\"data_offsets\":[0,100]"), 120, INVAL,
      ": tensor 'w1': data_offsets [0, 100) hold 100 bytes, f32[5,6] needs 120");
  /* JSON that does not parse */
  BAD("{\"w1\":{\"dtype\":\"F32\",", 0, INVAL, "bad safetensors header: expected a string (at byte 21");
  BAD("[1,2]", 0, INVAL, "the header is not a JSON object");
  BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}} x", 4, INVAL,
      "text after the closing '}'");
  BAD("{\"a\" {}}", 0, INVAL, "expected ':'");
  BAD("{\"a\":{\"dtype\":\"F3\\q\"}}", 0, INVAL, "bad escape in a string");
  BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4],\"x\":[1,}}", 4, INVAL,
      "expected a value");
  /* dtypes */
  BAD(T("\"dtype\":\"U16\",\"shape\":[2],\"data_offsets\":[0,4]"), 4, LOOM_ERR_UNSUPPORTED,
      "tensor 'w1': dtype 'U16' has no Loom equivalent");
  BAD(T("\"dtype\":\"F8_E4M3\",\"shape\":[2],\"data_offsets\":[0,2]"), 2, LOOM_ERR_UNSUPPORTED,
      "dtype 'F8_E4M3' has no Loom equivalent");
  BAD(T("\"dtype\":7,\"shape\":[2],\"data_offsets\":[0,4]"), 4, INVAL,
      "tensor 'w1': 'dtype' is not a string");
  BAD(T("\"shape\":[2],\"data_offsets\":[0,4]"), 4, INVAL, "tensor 'w1' has no 'dtype'");
  BAD(T("\"dtype\":\"F32\",\"data_offsets\":[0,4]"), 4, INVAL, "tensor 'w1' has no 'shape'");
  BAD(T("\"dtype\":\"F32\",\"shape\":[1]"), 4, INVAL, "tensor 'w1' has no 'data_offsets'");
  /* shapes */
  BAD(T("\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,4]"), 4, INVAL,
      "tensor 'w1': a 'shape' dimension is negative");
  BAD(T("\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,4]"), 4, INVAL,
      "a 'shape' dimension is not an integer");
  BAD(T("\"dtype\":\"F32\",\"shape\":[99999999999999999999],\"data_offsets\":[0,4]"), 4, INVAL,
      "tensor 'w1': a 'shape' dimension 99999999999999999999 does not fit in int64");
  BAD(T("\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4],\"data_offsets\":[0,4]"), 4, INVAL,
      "tensor 'w1': ");
  BAD(T("\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,"
        "1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]"),
      4, INVAL, "'shape' has more than");
  /* offsets */
  BAD(T("\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,99999999999999999999]"), 8, INVAL,
      "tensor 'w1': a 'data_offsets' entry 99999999999999999999 does not fit in int64");
  BAD(T("\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]"), 8, INVAL,
      "'data_offsets' needs two entries");
  BAD(T("\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8,16]"), 8, INVAL,
      "'data_offsets' needs two entries");
  BAD(T("\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]"), 8, INVAL,
      "tensor 'w1': data_offsets [8, 0) end before they begin");
  BAD(T("\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]"), 20, INVAL,
      "tensor 'w1': data_offsets [8, 24) lie outside the data section (20 bytes)");
  BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
      "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}",
      24, INVAL, "tensors 'a' [0, 16) and 'b' [8, 24) overlap in the data section");
  BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
      "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
      8, INVAL, "tensor 'a' appears twice in the header");
  BAD("{\"__metadata__\":{\"k\":1}}", 0, INVAL, "'__metadata__' value of 'k' is not a string");
  BAD("{\"__metadata__\":[]}", 0, INVAL, "'__metadata__' is not an object of strings");

  /* the header length: past the end, absurd, and a file too short for it */
  const char *path = write_file("len", 1000, "{}", 0);
  loom_safetensors *st = NULL;
  ASSERT_STATUS(loom_safetensors_open(path, &st), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), path);
  ASSERT_CONTAINS(loom_last_error(),
                  "header length 1000 runs past the end of the file (2 bytes after the length)");
  path = write_file("len", UINT64_MAX, "{}", 0);
  ASSERT_STATUS(loom_safetensors_open(path, &st), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "header length 18446744073709551615 is implausible");
  FILE *f = fopen(path, "wb");
  fputs("abc", f);
  fclose(f);
  ASSERT_STATUS(loom_safetensors_open(path, &st), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "3 bytes, shorter than the 8-byte header length");
  remove(path);
  ASSERT_STATUS(loom_safetensors_open(path, &st), LOOM_ERR_IO);
  ASSERT_CONTAINS(loom_last_error(), path);
  ASSERT_STATUS(loom_safetensors_open("/dev/null", &st), LOOM_ERR_UNSUPPORTED);
  ASSERT_TRUE(st == NULL);
}

/* Accepted: gaps between tensors, keys in any order, unknown keys skipped, spaces, an empty
 * tensor at the end of the data, a metadata null. */
TEST(safetensors_lenient_where_the_format_is) {
  const char *header =
      "{ \"__metadata__\" : null , \"b\" : { \"data_offsets\" : [ 8 , 12 ] , \"extra\" : {\"x\": [true, "
      "null, "
      "-1.5e3]}, \"shape\" : [ 1 ] , \"dtype\" : \"I32\" },\"e\":{\"dtype\":\"U8\",\"shape\":[0],"
      "\"data_offsets\":[12,12]},\"a\":{\"dtype\":\"BOOL\",\"shape\":[2],\"data_offsets\":[0,2]}}   ";
  const char *path = write_file("ok", strlen(header), header, 12);
  loom_safetensors *st = NULL;
  ASSERT_OK(loom_safetensors_open(path, &st));
  ASSERT_EQ(loom_safetensors_count(st), 3);
  ASSERT_STREQ(loom_safetensors_name(st, 0), "a");
  ASSERT_EQ(loom_safetensors_type(st, 1)->dtype, LOOM_I32);
  ASSERT_EQ(loom_safetensors_metadata_count(st), 0);
  loom_safetensors_close(st);
  remove(path);
}
