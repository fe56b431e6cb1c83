/* The .npy reader and writer: round trips of every dtype, hand-made files of each format
 * version, and every kind of bad file with its message. */
#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "io/npy.h"
#include "loom/io.h"
#include "loom/testing.h"

/* ---- a scratch directory per test ------------------------------------------------------ */

typedef struct scratch {
  char dir[256];
  char path[512]; /* the last path() result */
} scratch;

static bool scratch_open(scratch *s) {
  const char *tmp = getenv("TMPDIR");
  snprintf(s->dir, sizeof s->dir, "%s/loom-npy-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  return mkdtemp(s->dir) != NULL;
}

static const char *path(scratch *s, const char *name) {
  snprintf(s->path, sizeof s->path, "%s/%s", s->dir, name);
  return s->path;
}

/* Files in the directory (temporaries included). */
static int file_count(const scratch *s) {
  DIR *d = opendir(s->dir);
  int n = 0;
  if (!d) return -1;
  for (struct dirent *e; (e = readdir(d));)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
  closedir(d);
  return n;
}

static void scratch_close(scratch *s) {
  DIR *d = opendir(s->dir);
  if (d) {
    char p[600];
    for (struct dirent *e; (e = readdir(d));) {
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
      snprintf(p, sizeof p, "%s/%s", s->dir, e->d_name);
      if (unlink(p) != 0) rmdir(p);
    }
    closedir(d);
  }
  rmdir(s->dir);
}

static bool write_file(const char *p, const void *data, size_t n) {
  FILE *f = fopen(p, "wb");
  if (!f) return false;
  bool ok = fwrite(data, 1, n, f) == n;
  return fclose(f) == 0 && ok;
}

/* Builds a .npy file of format `major`.0 with header text `dict` (used as given: no padding
 * added) followed by `n_data` bytes of `data`. */
static bool write_npy(const char *p, int major, const char *dict, const void *data, size_t n_data) {
  unsigned char buf[4096];
  size_t hlen = strlen(dict), n = 0;
  memcpy(buf, "\x93NUMPY", 6);
  buf[6] = (unsigned char)major;
  buf[7] = 0;
  if (major == 1) {
    buf[8] = (unsigned char)(hlen & 0xff);
    buf[9] = (unsigned char)(hlen >> 8);
    n = 10;
  } else {
    for (int i = 0; i < 4; i++) buf[8 + i] = (unsigned char)(hlen >> (8 * i));
    n = 12;
  }
  memcpy(buf + n, dict, hlen);
  n += hlen;
  if (n + n_data > sizeof buf) return false;
  if (n_data) memcpy(buf + n, data, n_data);
  return write_file(p, buf, n + n_data);
}

static bool read_file(const char *p, unsigned char *buf, size_t size, size_t *out_n) {
  FILE *f = fopen(p, "rb");
  if (!f) return false;
  *out_n = fread(buf, 1, size, f);
  fclose(f);
  return true;
}

/* Fills t with bytes valid for its dtype (bools 0/1, anything for the rest). */
static void fill_pattern(loom_tensor *t, unsigned seed) {
  int64_t bytes = 0;
  loom_type_bytes(&t->type, &bytes);
  unsigned char *b = t->data;
  for (int64_t i = 0; i < bytes; i++) {
    seed = seed * 1103515245u + 12345u;
    b[i] = t->type.dtype == LOOM_BOOL ? (unsigned char)((seed >> 16) & 1) : (unsigned char)(seed >> 16);
  }
}

/* ---- round trips ----------------------------------------------------------------------- */

TEST(npy_round_trip_every_dtype_and_shape) {
  scratch s;
  ASSERT_TRUE(scratch_open(&s));
  static const struct {
    int32_t rank;
    int64_t dims[3];
  } shapes[] = {{2, {3, 4}}, {0, {0}}, {1, {7}}, {2, {0, 5}}, {3, {2, 0, 3}}, {3, {2, 1, 3}}};
  int64_t live = loom_testing_live_allocations();
  for (int d = 0; d < LOOM_DTYPE_COUNT; d++) {
    if (d == LOOM_BF16 || loom_dtype_is_quantized((loom_dtype)d)) continue; /* no NumPy dtype */
    for (int k = 0; k < LOOM_ARRAY_SIZE(shapes); k++) {
      loom_type type;
      loom_tensor t, back;
      int64_t bytes;
      ASSERT_OK(loom_type_make((loom_dtype)d, shapes[k].rank, shapes[k].dims, &type));
      ASSERT_OK(loom_tensor_init(&t, &type));
      fill_pattern(&t, (unsigned)(d * 31 + k));
      ASSERT_OK(loom_tensor_save_npy(path(&s, "a.npy"), &t));
      ASSERT_OK(loom_tensor_load_npy(path(&s, "a.npy"), &back));
      ASSERT_TRUE(loom_type_equal(&t.type, &back.type));
      ASSERT_OK(loom_type_bytes(&type, &bytes));
      ASSERT_TRUE(bytes == 0 || memcmp(t.data, back.data, (size_t)bytes) == 0);
      ASSERT_TRUE(back.data != NULL);
      loom_tensor_deinit(&t);
      loom_tensor_deinit(&back);
      ASSERT_EQ(file_count(&s), 1); /* no temporary left beside it */
    }
  }
  ASSERT_EQ(loom_testing_live_allocations(), live);
  scratch_close(&s);
}

/* The writer's header, byte for byte as NumPy's own: padded to 64 bytes, ending in '\n'. */
static void check_header(scratch *s, loom_dtype dtype, int32_t rank, const int64_t *dims, const char *dict) {
  loom_type type;
  loom_tensor t;
  unsigned char buf[512];
  size_t n;
  ASSERT_OK(loom_type_make(dtype, rank, dims, &type));
  ASSERT_OK(loom_tensor_init(&t, &type));
  ASSERT_OK(loom_tensor_save_npy(path(s, "h.npy"), &t));
  loom_tensor_deinit(&t);
  ASSERT_TRUE(read_file(path(s, "h.npy"), buf, sizeof buf, &n));
  ASSERT_TRUE(n >= 64);
  ASSERT_TRUE(memcmp(buf, "\x93NUMPY\x01\x00", 8) == 0);
  size_t hlen = (size_t)buf[8] | (size_t)buf[9] << 8;
  ASSERT_EQ((10 + hlen) % 64, 0);
  ASSERT_EQ(buf[10 + hlen - 1], '\n');
  size_t dlen = strlen(dict);
  ASSERT_TRUE(hlen > dlen);
  ASSERT_TRUE(memcmp(buf + 10, dict, dlen) == 0);
  for (size_t i = 10 + dlen; i < 10 + hlen - 1; i++) ASSERT_EQ(buf[i], ' ');
}

TEST(npy_writes_numpy_headers) {
  scratch s;
  ASSERT_TRUE(scratch_open(&s));
  int64_t d34[] = {3, 4}, d7[] = {7}, big[] = {20000, 30000, 3, 1, 1, 1, 1, 0};
  check_header(&s, LOOM_F32, 2, d34, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }");
  check_header(&s, LOOM_I64, 1, d7, "{'descr': '<i8', 'fortran_order': False, 'shape': (7,), }");
  check_header(&s, LOOM_BOOL, 0, NULL, "{'descr': '|b1', 'fortran_order': False, 'shape': (), }");
  check_header(&s, LOOM_C128, 0, NULL, "{'descr': '<c16', 'fortran_order': False, 'shape': (), }");
  check_header(&s, LOOM_U8, 8, big,
               "{'descr': '|u1', 'fortran_order': False, 'shape': (20000, 30000, 3, 1, 1, 1, 1, 0), }");
  scratch_close(&s);
}

TEST(npy_save_refuses_bf16_and_keeps_the_old_file) {
  scratch s;
  ASSERT_TRUE(scratch_open(&s));
  int64_t d[] = {2};
  loom_type type;
  loom_tensor t;
  ASSERT_OK(loom_type_make(LOOM_BF16, 1, d, &type));
  ASSERT_OK(loom_tensor_init(&t, &type));
  ASSERT_TRUE(write_file(path(&s, "old.npy"), "old", 3));
  ASSERT_STATUS(loom_tensor_save_npy(path(&s, "old.npy"), &t), LOOM_ERR_UNSUPPORTED);
  ASSERT_CONTAINS(loom_last_error(), "old.npy: bf16 has no NumPy dtype");
  loom_tensor_deinit(&t);
  unsigned char buf[8];
  size_t n;
  ASSERT_TRUE(read_file(path(&s, "old.npy"), buf, sizeof buf, &n));
  ASSERT_EQ(n, 3);
  ASSERT_EQ(file_count(&s), 1);
  scratch_close(&s);
}

TEST(npy_save_into_missing_directory_fails_cleanly) {
  scratch s;
  ASSERT_TRUE(scratch_open(&s));
  loom_type type;
  loom_tensor t;
  ASSERT_OK(loom_type_make(LOOM_F32, 0, NULL, &type));
  ASSERT_OK(loom_tensor_init(&t, &type));
  ASSERT_STATUS(loom_tensor_save_npy(path(&s, "nodir/a.npy"), &t), LOOM_ERR_IO);
  ASSERT_CONTAINS(loom_last_error(), "nodir/a.npy");
  ASSERT_CONTAINS(loom_last_error(), "No such file or directory");
  ASSERT_STATUS(loom_tensor_save_npy(NULL, &t), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(loom_tensor_save_npy(path(&s, "a.npy"), NULL), LOOM_ERR_INVALID_ARGUMENT);
  loom_tensor_deinit(&t);
  ASSERT_EQ(file_count(&s), 0);
  scratch_close(&s);
}

/* The temporary-file protocol loom-run relies on. */
TEST(npy_save_temp_then_commit_or_discard) {
  scratch s;
  ASSERT_TRUE(scratch_open(&s));
  loom_type type;
  loom_tensor t, back;
  int64_t d[] = {5};
  ASSERT_OK(loom_type_make(LOOM_I32, 1, d, &type));
  ASSERT_OK(loom_tensor_init(&t, &type));
  char *temp = NULL;
  ASSERT_OK(loom__npy_save_temp(path(&s, "a.npy"), &t, &temp));
  ASSERT_EQ(file_count(&s), 1);
  ASSERT_TRUE(access(path(&s, "a.npy"), F_OK) != 0);
  loom__npy_discard(temp);
  loom__free(temp);
  ASSERT_EQ(file_count(&s), 0);
  ASSERT_OK(loom__npy_save_temp(path(&s, "a.npy"), &t, &temp));
  ASSERT_OK(loom__npy_commit(temp, path(&s, "a.npy")));
  loom__free(temp);
  ASSERT_EQ(file_count(&s), 1);
  ASSERT_OK(loom_tensor_load_npy(path(&s, "a.npy"), &back));
  ASSERT_TRUE(loom_type_equal(&back.type, &type));
  loom_tensor_deinit(&back);
  loom_tensor_deinit(&t);
  scratch_close(&s);
}

/* ---- hand-made files ------------------------------------------------------------------- */

static const int32_t six_i32[6] = {1, -2, 3, -4, 5, 600000};

/* Loads p and checks it is i32[2,3] holding six_i32. */
static void expect_six_i32(const char *p) {
  loom_tensor t;
  ASSERT_OK(loom_tensor_load_npy(p, &t));
  ASSERT_EQ(t.type.dtype, LOOM_I32);
  ASSERT_EQ(t.type.rank, 2);
  ASSERT_EQ(t.type.dims[0], 2);
  ASSERT_EQ(t.type.dims[1], 3);
  ASSERT_TRUE(memcmp(t.data, six_i32, sizeof six_i32) == 0);
  loom_tensor_deinit(&t);
}

TEST(npy_reads_versions_and_header_spellings) {
  scratch s;
  ASSERT_TRUE(scratch_open(&s));
  const char *p = path(&s, "h.npy");
  ASSERT_TRUE(
      write_npy(p, 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }      \n", six_i32, 24));
  expect_six_i32(p);
  if (loom_test_failed()) return;
  /* keys in another order, double quotes, no spaces, no trailing comma, no padding */
  ASSERT_TRUE(write_npy(p, 1, "{\"shape\":(2,3,),\"fortran_order\":False,\"descr\":\"<i4\"}", six_i32, 24));
  expect_six_i32(p);
  if (loom_test_failed()) return;
  /* lots of spacing, tabs, newlines, Python 2 longs, '=' native order */
  ASSERT_TRUE(write_npy(
      p, 1, "  {  'fortran_order' :\tFalse ,\n 'descr' : '=i4' , 'shape' : ( 2L , 3L ) , }\n", six_i32, 24));
  expect_six_i32(p);
  if (loom_test_failed()) return;
  ASSERT_TRUE(write_npy(p, 2, "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }\n", six_i32, 24));
  expect_six_i32(p);
  if (loom_test_failed()) return;
  ASSERT_TRUE(write_npy(p, 3, "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }\n", six_i32, 24));
  expect_six_i32(p);
  if (loom_test_failed()) return;
  /* trailing bytes after the data are ignored, as NumPy does */
  int32_t more[8] = {1, -2, 3, -4, 5, 600000, 7, 8};
  ASSERT_TRUE(write_npy(p, 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }\n", more, 32));
  expect_six_i32(p);
  scratch_close(&s);
}

/* Loads a one-element-or-so file with `dict` and checks the dtype and rank it gives. */
static void expect_type(scratch *s, const char *dict, const void *data, size_t n, loom_dtype dtype,
                        int32_t rank) {
  loom_tensor t;
  ASSERT_TRUE(write_npy(path(s, "t.npy"), 1, dict, data, n));
  ASSERT_OK(loom_tensor_load_npy(path(s, "t.npy"), &t));
  ASSERT_EQ(t.type.dtype, dtype);
  ASSERT_EQ(t.type.rank, rank);
  loom_tensor_deinit(&t);
}

TEST(npy_reads_every_descr) {
  scratch s;
  ASSERT_TRUE(scratch_open(&s));
  unsigned char zeros[16] = {0};
  static const struct {
    const char *descr;
    loom_dtype dtype;
    size_t size;
  } cases[] = {
      {"|b1", LOOM_BOOL, 1}, {"?", LOOM_BOOL, 1},     {"|i1", LOOM_I8, 1},  {"|u1", LOOM_U8, 1},
      {">u1", LOOM_U8, 1},   {"<i2", LOOM_I16, 2},    {"<i4", LOOM_I32, 4}, {"<i8", LOOM_I64, 8},
      {"=i8", LOOM_I64, 8},  {"<f2", LOOM_F16, 2},    {"<f4", LOOM_F32, 4}, {"<f8", LOOM_F64, 8},
      {"<c8", LOOM_C64, 8},  {"<c16", LOOM_C128, 16}, {"b1", LOOM_BOOL, 1}, {"f8", LOOM_F64, 8},
  };
  for (int i = 0; i < LOOM_ARRAY_SIZE(cases); i++) {
    char dict[128];
    snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (), }", cases[i].descr);
    expect_type(&s, dict, zeros, cases[i].size, cases[i].dtype, 0);
    if (loom_test_failed()) {
      printf("    descr %s\n", cases[i].descr);
      return;
    }
  }
  /* bools other than 0/1 are normalized to Loom's 0/1 */
  unsigned char bools[3] = {0, 2, 255};
  loom_tensor t;
  ASSERT_TRUE(
      write_npy(path(&s, "b.npy"), 1, "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", bools, 3));
  ASSERT_OK(loom_tensor_load_npy(path(&s, "b.npy"), &t));
  ASSERT_EQ(((unsigned char *)t.data)[0], 0);
  ASSERT_EQ(((unsigned char *)t.data)[1], 1);
  ASSERT_EQ(((unsigned char *)t.data)[2], 1);
  loom_tensor_deinit(&t);
  /* Fortran order is the same layout when at most one dimension exceeds 1 */
  float four[4] = {1, 2, 3, 4};
  expect_type(&s, "{'descr': '<f4', 'fortran_order': True, 'shape': (4,), }", four, 16, LOOM_F32, 1);
  expect_type(&s, "{'descr': '<f4', 'fortran_order': True, 'shape': (1, 4, 1), }", four, 16, LOOM_F32, 3);
  expect_type(&s, "{'descr': '<f4', 'fortran_order': True, 'shape': (0, 4), }", four, 0, LOOM_F32, 2);
  scratch_close(&s);
}

/* ---- bad files ------------------------------------------------------------------------- */

/* Writes `bytes`, loads, and checks the status and that the message contains `want`. */
static void expect_bad_bytes(scratch *s, const void *bytes, size_t n, loom_status status, const char *want) {
  loom_tensor t;
  int64_t live = loom_testing_live_allocations();
  ASSERT_TRUE(write_file(path(s, "bad.npy"), bytes, n));
  t.data = (void *)&t; /* cleared on entry */
  ASSERT_STATUS(loom_tensor_load_npy(path(s, "bad.npy"), &t), status);
  ASSERT_TRUE(t.data == NULL);
  ASSERT_CONTAINS(loom_last_error(), want);
  ASSERT_EQ(loom_testing_live_allocations(), live);
}

static void expect_bad_npy(scratch *s, int major, const char *dict, size_t n_data, loom_status status,
                           const char *want) {
  static const unsigned char data[256];
  loom_tensor t;
  int64_t live = loom_testing_live_allocations();
  ASSERT_TRUE(write_npy(path(s, "bad.npy"), major, dict, data, n_data));
  ASSERT_STATUS(loom_tensor_load_npy(path(s, "bad.npy"), &t), status);
  ASSERT_CONTAINS(loom_last_error(), want);
  ASSERT_EQ(loom_testing_live_allocations(), live);
}

#define F32_34(order) "{'descr': '<f4', 'fortran_order': " order ", 'shape': (3, 4), }"

TEST(npy_bad_files_have_clear_messages) {
  scratch s;
  ASSERT_TRUE(scratch_open(&s));
  char want[600];
  const char *p = path(&s, "bad.npy");
  snprintf(want, sizeof want, "%s: expected 48 data bytes, found 12", p);
  expect_bad_npy(&s, 1, F32_34("False"), 12, LOOM_ERR_INVALID_ARGUMENT, want);
  snprintf(want, sizeof want, "%s: not a .npy file (bad magic)", path(&s, "bad.npy"));
  expect_bad_bytes(&s, "PK\x03\x04 this is a zip", 18, LOOM_ERR_INVALID_ARGUMENT, want);
  expect_bad_bytes(&s, "", 0, LOOM_ERR_INVALID_ARGUMENT, "(bad magic)");
  expect_bad_bytes(&s, "\x93NUM", 4, LOOM_ERR_INVALID_ARGUMENT, "(bad magic)");
  expect_bad_bytes(&s, "\x93NUMPY\x01", 7, LOOM_ERR_INVALID_ARGUMENT, "file ends inside the preamble");
  expect_bad_bytes(&s, "\x93NUMPY\x01\x00\x40\x00{'descr'", 17, LOOM_ERR_INVALID_ARGUMENT,
                   "file ends inside the 64-byte header");
  expect_bad_bytes(&s, "\x93NUMPY\x04\x00\x10\x00{}", 12, LOOM_ERR_UNSUPPORTED,
                   "format version 4.0 is not supported");
  expect_bad_bytes(&s, "\x93NUMPY\x02\x00\xff\xff\xff\x7f", 12, LOOM_ERR_INVALID_ARGUMENT, "implausible");
  snprintf(want, sizeof want, "%s: Fortran-order arrays are not supported; save with np.ascontiguousarray",
           path(&s, "bad.npy"));
  expect_bad_npy(&s, 1, F32_34("True"), 48, LOOM_ERR_UNSUPPORTED, want);
  expect_bad_npy(&s, 1, "{'descr': '>f4', 'fortran_order': False, 'shape': (3,), }", 12, LOOM_ERR_UNSUPPORTED,
                 "big-endian data ('>f4') is not supported");
  expect_bad_npy(&s, 1, "{'descr': '!i8', 'fortran_order': False, 'shape': (), }", 8, LOOM_ERR_UNSUPPORTED,
                 "big-endian");
  expect_bad_npy(&s, 1, "{'descr': '<u4', 'fortran_order': False, 'shape': (), }", 4, LOOM_ERR_UNSUPPORTED,
                 "dtype '<u4' has no Loom equivalent");
  expect_bad_npy(&s, 1, "{'descr': '<U10', 'fortran_order': False, 'shape': (), }", 40, LOOM_ERR_UNSUPPORTED,
                 "dtype '<U10' has no Loom equivalent");
  expect_bad_npy(&s, 1, "{'descr': '<M8[ns]', 'fortran_order': False, 'shape': (), }", 8,
                 LOOM_ERR_UNSUPPORTED, "no Loom equivalent");
  expect_bad_npy(&s, 1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (), }", 4,
                 LOOM_ERR_UNSUPPORTED, "structured dtypes are not supported");
  scratch_close(&s);
}

TEST(npy_bad_headers) {
  scratch s;
  ASSERT_TRUE(scratch_open(&s));
  static const struct {
    const char *dict, *want;
  } cases[] = {
      {"", "bad .npy header: expected '{'"},
      {"descr: '<f4'", "bad .npy header: expected '{'"},
      {"{'descr': '<f4', 'fortran_order': False}", "no 'shape' key"},
      {"{'shape': (3,), 'fortran_order': False}", "no 'descr' key"},
      {"{'descr': '<f4', 'shape': (3,)}", "no 'fortran_order' key"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'extra': 1}", "unexpected key 'extra'"},
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (3,)}", "duplicate key"},
      {"{'descr' '<f4', 'fortran_order': False, 'shape': (3,)}", "expected ':' after a key"},
      {"{'descr': '<f4 , 'fortran_order': False, 'shape': (3,)}", "expected ',' or '}'"},
      {"{'descr': '<f4', 'fortran_order': false, 'shape': (3,)}", "expected True or False"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': [3]}", "expected '(' to start 'shape'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3 4)}", "expected ',' or ')' in 'shape'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), } x", "text after the closing '}'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,)", "expected ',' or '}'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (-3,)}", "negative dimension"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (x,)}", "expected a dimension"},
      {"{'descr': 3, 'fortran_order': False, 'shape': (3,)}", "expected a quoted string"},
  };
  for (int i = 0; i < LOOM_ARRAY_SIZE(cases); i++) {
    expect_bad_npy(&s, 1, cases[i].dict, 16, LOOM_ERR_INVALID_ARGUMENT, cases[i].want);
    if (loom_test_failed()) {
      printf("    header %s\n", cases[i].dict);
      return;
    }
  }
  /* the message names the file and shows the header */
  expect_bad_npy(
      &s, 1, "{'descr': '<f4', 'fortran_order': 0, 'shape': (3,)}", 12, LOOM_ERR_INVALID_ARGUMENT,
      "bad.npy: bad .npy header: expected True or False for 'fortran_order' (at offset 34 of \"{'descr'");
  scratch_close(&s);
}

TEST(npy_overflowing_shapes) {
  scratch s;
  ASSERT_TRUE(scratch_open(&s));
  expect_bad_npy(&s, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", 0,
                 LOOM_ERR_INVALID_ARGUMENT, "shape dimension 99999999999999999999 does not fit in int64");
  expect_bad_npy(&s, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", 0,
                 LOOM_ERR_INVALID_ARGUMENT, "bad.npy: shape f32[4294967296,4294967296] has more elements");
  expect_bad_npy(&s, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2305843009213693952,), }", 0,
                 LOOM_ERR_INVALID_ARGUMENT, "larger than int64 bytes");
  expect_bad_npy(&s, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }", 4,
                 LOOM_ERR_INVALID_ARGUMENT, "shape has more than 8 dimensions");
  /* huge but representable: refused from the file size before any allocation */
  expect_bad_npy(&s, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000000,), }", 16,
                 LOOM_ERR_INVALID_ARGUMENT, "expected 8000000000000 data bytes, found 16");
  scratch_close(&s);
}

TEST(npy_unreadable_paths) {
  scratch s;
  loom_tensor t;
  ASSERT_TRUE(scratch_open(&s));
  ASSERT_STATUS(loom_tensor_load_npy(path(&s, "missing.npy"), &t), LOOM_ERR_IO);
  ASSERT_CONTAINS(loom_last_error(), "missing.npy: No such file or directory");
  ASSERT_STATUS(loom_tensor_load_npy(s.dir, &t), LOOM_ERR_IO);
  ASSERT_CONTAINS(loom_last_error(), s.dir);
  ASSERT_STATUS(loom_tensor_load_npy(NULL, &t), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(loom_tensor_load_npy(path(&s, "x.npy"), NULL), LOOM_ERR_INVALID_ARGUMENT);
  scratch_close(&s);
}

/* Every allocation of a save and a load fails in turn: each failure is OUT_OF_MEMORY, frees
 * what it took and leaves no file behind. */
TEST(npy_allocation_failures) {
  scratch s;
  ASSERT_TRUE(scratch_open(&s));
  int64_t d[] = {4, 5};
  loom_type type;
  loom_tensor t, back;
  ASSERT_OK(loom_type_make(LOOM_F64, 2, d, &type));
  ASSERT_OK(loom_tensor_init(&t, &type));
  fill_pattern(&t, 7);
  loom_test_sweep sw;
  SWEEP_ALLOCATIONS(&sw, 0, 50) {
    loom_status st = SWEEP_RUN(&sw, loom_tensor_save_npy(path(&s, "a.npy"), &t));
    ASSERT_EQ(file_count(&s), st == LOOM_OK ? 1 : 0);
  }
  if (loom_test_failed()) return;
  SWEEP_ALLOCATIONS(&sw, 0, 50) {
    if (SWEEP_RUN(&sw, loom_tensor_load_npy(path(&s, "a.npy"), &back)) == LOOM_OK) {
      ASSERT_TRUE(memcmp(back.data, t.data, 160) == 0);
      loom_tensor_deinit(&back);
    }
  }
  loom_tensor_deinit(&t);
  scratch_close(&s);
}
