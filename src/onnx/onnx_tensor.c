/* ONNX tensors: element types, a TensorProto's contents (raw, typed fields or an external
 * file), and the .pb tensor files of ONNX's test data. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onnx/onnx_internal.h"

static void *pb_alloc(void *data, size_t size) {
  (void)data;
  return loom__malloc(size ? size : 1);
}
static void pb_free(void *data, void *ptr) {
  (void)data;
  loom__free(ptr);
}
ProtobufCAllocator loom__onnx_allocator = {pb_alloc, pb_free, NULL};

/* TensorProto.DataType: index = ONNX code. */
static const struct {
  const char *name;
  int dtype; /* -1: none in Loom */
} onnx_types[] = {
    {"UNDEFINED", -1},       {"FLOAT", LOOM_F32}, {"UINT8", LOOM_U8},      {"INT8", LOOM_I8},
    {"UINT16", -1},          {"INT16", LOOM_I16}, {"INT32", LOOM_I32},     {"INT64", LOOM_I64},
    {"STRING", -1},          {"BOOL", LOOM_BOOL}, {"FLOAT16", LOOM_F16},   {"DOUBLE", LOOM_F64},
    {"UINT32", -1},          {"UINT64", -1},      {"COMPLEX64", LOOM_C64}, {"COMPLEX128", LOOM_C128},
    {"BFLOAT16", LOOM_BF16},
};

bool loom__onnx_dtype(int32_t elem_type, loom_dtype *out) {
  if (elem_type < 0 || elem_type >= LOOM_ARRAY_SIZE(onnx_types) || onnx_types[elem_type].dtype < 0)
    return false;
  *out = (loom_dtype)onnx_types[elem_type].dtype;
  return true;
}

const char *loom__onnx_dtype_name(int32_t elem_type) {
  if (elem_type < 0 || elem_type >= LOOM_ARRAY_SIZE(onnx_types)) return "an unknown element type";
  return onnx_types[elem_type].name;
}

/* How many numbers the typed field that holds dtype d's data holds (as onnx.proto assigns
 * them: int32_data for bool, 8/16-bit integers, int32 and f16/bf16 bit patterns). */
static size_t typed_have(const Onnx__TensorProto *t, loom_dtype d) {
  switch (d) {
    case LOOM_F32:
    case LOOM_C64:
      return t->n_float_data;
    case LOOM_F64:
    case LOOM_C128:
      return t->n_double_data;
    case LOOM_I64:
      return t->n_int64_data;
    default:
      return t->n_int32_data;
  }
}

/* Converts the typed field into dst, which holds n elements of d (typed_have checked). */
static void from_typed(const Onnx__TensorProto *t, loom_dtype d, int64_t n, void *dst) {
  if (n == 0) return; /* an empty tensor's fields are NULL, which memcpy may not be given */
  switch (d) {
    case LOOM_F32:
    case LOOM_C64:
      memcpy(dst, t->float_data, t->n_float_data * sizeof(float));
      return;
    case LOOM_F64:
    case LOOM_C128:
      memcpy(dst, t->double_data, t->n_double_data * sizeof(double));
      return;
    case LOOM_I64:
      memcpy(dst, t->int64_data, t->n_int64_data * sizeof(int64_t));
      return;
    default:
      for (int64_t i = 0; i < n; i++) {
        int32_t v = t->int32_data[i];
        switch (loom_dtype_size(d)) {
          case 1:
            ((uint8_t *)dst)[i] = (uint8_t)v;
            break;
          case 2:
            ((uint16_t *)dst)[i] = (uint16_t)v;
            break;
          default:
            ((int32_t *)dst)[i] = v;
            break;
        }
      }
  }
}

/* The external file's bytes [offset, offset + bytes) copied into dst through a mapping. */
static loom_status from_external(const Onnx__TensorProto *t, int64_t bytes, const char *path,
                                 const char *what, void **out_data) {
  const char *location = NULL;
  int64_t offset = 0, length = -1;
  for (size_t i = 0; i < t->n_external_data; i++) {
    const Onnx__StringStringEntryProto *e = t->external_data[i];
    if (!e->key || !e->value) continue;
    if (!strcmp(e->key, "location")) location = e->value;
    if (!strcmp(e->key, "offset")) offset = strtoll(e->value, NULL, 10);
    if (!strcmp(e->key, "length")) length = strtoll(e->value, NULL, 10);
  }
  if (!location || !*location || location[0] == '/' || strstr(location, ".."))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT,
                       "%s: %s: external data needs a location inside the model's folder, got '%s'", path,
                       what, location ? location : "");
  if (offset < 0 || (length >= 0 && length != bytes))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT,
                       "%s: %s: external data of %lld bytes at offset %lld, its dims and type need %lld",
                       path, what, (long long)length, (long long)offset, (long long)bytes);
  const char *slash = strrchr(path, '/');
  size_t dir = slash ? (size_t)(slash - path + 1) : 0;
  char *file = loom__malloc(dir + strlen(location) + 1);
  if (!file) return loom__oom("an external data path");
  memcpy(file, path, dir);
  strcpy(file + dir, location);
  loom_status s = LOOM_OK;
  int fd = open(file, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st)) {
    s = loom__error(LOOM_ERR_IO, "%s: %s: cannot open its external data '%s': %s", path, what, file,
                    strerror(errno));
  } else if (offset > st.st_size || bytes > st.st_size - offset) {
    s = loom__error(LOOM_ERR_IO,
                    "%s: %s: external data '%s' holds %lld bytes, the tensor needs %lld at offset %lld", path,
                    what, file, (long long)st.st_size, (long long)bytes, (long long)offset);
  } else if (!(*out_data = loom__malloc(bytes ? (size_t)bytes : 1))) {
    s = loom__oom("a tensor's data");
  } else if (bytes > 0) {
    void *dst = *out_data;
    /* Mapped from the page holding offset: only the tensor's own pages are read. */
    long page = sysconf(_SC_PAGESIZE);
    int64_t start = offset / page * page;
    size_t len = (size_t)(offset - start + bytes);
    void *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, (off_t)start);
    if (map == MAP_FAILED) {
      s = loom__error(LOOM_ERR_IO, "%s: %s: cannot map '%s': %s", path, what, file, strerror(errno));
      loom__free(*out_data);
      *out_data = NULL;
    } else {
      loom__memcpy_wide(dst, (const char *)map + (offset - start), (size_t)bytes);
      munmap(map, len);
    }
  }
  if (fd >= 0) close(fd);
  loom__free(file);
  return s;
}

/* The tensor's type from its data_type and dims. */
static loom_status tensor_type(const Onnx__TensorProto *t, const char *path, const char *what,
                               loom_type *out) {
  loom_dtype d;
  if (!t->has_data_type || !loom__onnx_dtype(t->data_type, &d))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: %s: element type %s has no Loom dtype", path, what,
                       t->has_data_type ? loom__onnx_dtype_name(t->data_type) : "(none)");
  if (t->n_dims > LOOM_MAX_RANK)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: %s: %zu dims, Loom takes at most %d", path, what,
                       t->n_dims, LOOM_MAX_RANK);
  if (t->segment)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: %s: segmented tensors are not supported", path, what);
  if (loom_type_make(d, (int32_t)t->n_dims, t->dims, out))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: %s: dims do not make a tensor type (%s)", path, what,
                       loom_last_error());
  int64_t bytes;
  if (loom_type_bytes(out, &bytes))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: %s: its size overflows", path, what);
  return LOOM_OK;
}

loom_status loom__onnx_tensor_decode(Onnx__TensorProto *t, const char *path, const char *what,
                                     loom_type *out_type, void **out_data) {
  *out_data = NULL;
  loom_status s = tensor_type(t, path, what, out_type);
  if (s) return s;
  int64_t n, bytes;
  loom_type_elements(out_type, &n);
  loom_type_bytes(out_type, &bytes);
  bool external = t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
  if (t->has_raw_data && !external) {
    if ((int64_t)t->raw_data.len != bytes)
      return loom__error(LOOM_ERR_INVALID_ARGUMENT,
                         "%s: %s: raw_data holds %zu bytes, its dims and type need %lld", path, what,
                         t->raw_data.len, (long long)bytes);
    if (bytes == 0) return LOOM_OK;
    /* The message's buffer becomes the caller's: the bytes are held once. */
    *out_data = t->raw_data.data;
    t->raw_data.data = NULL;
    t->raw_data.len = 0;
    return LOOM_OK;
  }
  if (external) return from_external(t, bytes, path, what, out_data);
  /* Checked before anything is allocated: dims that lie must not ask for their size. */
  size_t have = typed_have(t, out_type->dtype);
  int64_t need = loom_dtype_is_complex(out_type->dtype) ? 2 * n : n;
  if ((int64_t)have != need)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT,
                       "%s: %s: its dims and type need %lld values, the data holds %zu", path, what,
                       (long long)need, have);
  void *data = loom__malloc(bytes ? (size_t)bytes : 1);
  if (!data) return loom__oom("a tensor's data");
  from_typed(t, out_type->dtype, n, data);
  *out_data = data;
  return LOOM_OK;
}

/* The whole of a small file (a test's .pb tensor) in loom__malloc'd memory. */
static loom_status read_file(const char *path, uint8_t **out, size_t *out_size) {
  *out = NULL;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st)) {
    loom_status s = loom__error(LOOM_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (fd >= 0) close(fd);
    return s;
  }
  uint8_t *buf = loom__malloc((size_t)st.st_size + 1);
  size_t got = 0;
  while (buf && got < (size_t)st.st_size) {
    ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += (size_t)r;
  }
  close(fd);
  if (!buf) return loom__oom(path);
  if (got != (size_t)st.st_size) {
    loom__free(buf);
    return loom__error(LOOM_ERR_IO, "%s: read %zu of %lld bytes", path, got, (long long)st.st_size);
  }
  *out = buf;
  *out_size = got;
  return LOOM_OK;
}

loom_status loom_tensor_load_onnx_pb(const char *path, loom_tensor *out, char **out_name) {
  if (out_name) *out_name = NULL;
  if (!path || !out) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_tensor_load_onnx_pb: NULL argument");
  memset(out, 0, sizeof *out);
  uint8_t *buf = NULL;
  size_t size = 0;
  loom_status s = read_file(path, &buf, &size);
  if (s) return s;
  Onnx__TensorProto *t = onnx__tensor_proto__unpack(&loom__onnx_allocator, size, buf);
  loom__free(buf);
  if (!t) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: not an ONNX TensorProto (or truncated)", path);
  loom_type type;
  void *data = NULL;
  s = loom__onnx_tensor_decode(t, path, "tensor", &type, &data);
  if (!s) s = loom__tensor_init_unzeroed(out, &type);
  if (!s) {
    int64_t bytes;
    loom_type_bytes(&type, &bytes);
    if (bytes) memcpy(out->data, data, (size_t)bytes);
  }
  if (!s && out_name && !(*out_name = strdup(t->name ? t->name : ""))) {
    loom_tensor_deinit(out);
    s = loom__oom("a tensor's name");
  }
  loom__free(data);
  onnx__tensor_proto__free_unpacked(t, &loom__onnx_allocator);
  return s ? loom__onnx_one_line(s, path) : s;
}
