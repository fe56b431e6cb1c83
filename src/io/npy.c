/* NumPy .npy files: the reader (format 1.0, 2.0, 3.0) and the writer (1.0).
 *
 * The format (numpy/lib/format.py): the magic "\x93NUMPY", a major and a minor version byte,
 * the header length (little-endian uint16 in 1.0, uint32 in 2.0 and 3.0), then the header:
 * a Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), } padded
 * with spaces and a final '\n', then the raw data. 3.0 only allows UTF-8 in the header,
 * which matters for structured dtypes' field names, never for the dtypes read here.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/mapped.h"
#include "io/npy.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
/* .npy files are read and written by copying bytes: a big-endian host would need swaps. */
#error "loom's .npy reader and writer assume a little-endian host"
#endif

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
/* NumPy itself refuses headers over 10000 bytes unless told otherwise; this bound only keeps
 * a corrupt length from allocating gigabytes. */
#define NPY_MAX_HEADER (1 << 20)
#define NPY_ALIGN 64

/* ---- dtypes -------------------------------------------------------------------------- */

static const struct {
  loom_dtype dtype;
  char kind;
  int size;
  const char *descr; /* what the writer emits */
} npy_dtypes[] = {
    {LOOM_BOOL, 'b', 1, "|b1"}, {LOOM_I8, 'i', 1, "|i1"},     {LOOM_U8, 'u', 1, "|u1"},
    {LOOM_I16, 'i', 2, "<i2"},  {LOOM_I32, 'i', 4, "<i4"},    {LOOM_I64, 'i', 8, "<i8"},
    {LOOM_F16, 'f', 2, "<f2"},  {LOOM_F32, 'f', 4, "<f4"},    {LOOM_F64, 'f', 8, "<f8"},
    {LOOM_C64, 'c', 8, "<c8"},  {LOOM_C128, 'c', 16, "<c16"},
};

const char *loom__npy_descr(loom_dtype dtype) {
  for (int32_t i = 0; i < LOOM_ARRAY_SIZE(npy_dtypes); i++)
    if (npy_dtypes[i].dtype == dtype) return npy_dtypes[i].descr;
  return NULL;
}

/* Maps a descr string ("<f4", "|b1", "=i8", "?") to a Loom dtype. */
static loom_status descr_to_dtype(const char *path, const char *descr, loom_dtype *out) {
  const char *p = descr;
  char order = '|';
  if (*p && strchr("<>|=!", *p)) order = *p++;
  char kind = *p ? *p++ : '\0';
  int size = 0;
  if (kind == '?' && *p == '\0') { /* the one-character code of bool */
    kind = 'b';
    size = 1;
  } else {
    /* A size is a few digits; anything else ("U10" is fine, "M8[ns]" is not) is refused
     * below as an unsupported dtype. */
    while (*p >= '0' && *p <= '9' && size < 1000) size = size * 10 + (*p++ - '0');
    if (*p != '\0') size = -1;
  }
  for (int32_t i = 0; i < LOOM_ARRAY_SIZE(npy_dtypes); i++) {
    if (npy_dtypes[i].kind != kind || npy_dtypes[i].size != size) continue;
    if (size > 1 && (order == '>' || order == '!'))
      return loom__error(LOOM_ERR_UNSUPPORTED,
                         "%s: big-endian data ('%s') is not supported; convert with "
                         "a.astype(a.dtype.newbyteorder('<'))",
                         path, descr);
    *out = npy_dtypes[i].dtype;
    return LOOM_OK;
  }
  return loom__error(LOOM_ERR_UNSUPPORTED,
                     "%s: dtype '%s' has no Loom equivalent (supported: bool i8 u8 i16 i32 i64 "
                     "f16 f32 f64 c64 c128, as |b1 |i1 |u1 <i2 <i4 <i8 <f2 <f4 <f8 <c8 <c16)",
                     path, descr);
}

/* ---- the header dictionary ------------------------------------------------------------ */

typedef struct header_parser {
  const char *path;
  const char *text, *p, *end;
} header_parser;

typedef struct npy_header {
  char descr[32];
  bool fortran_order;
  int32_t rank;
  int64_t dims[LOOM_MAX_RANK];
  unsigned seen; /* bits: 1 descr, 2 fortran_order, 4 shape */
} npy_header;

static loom_status bad_header(const header_parser *hp, const char *what) {
  /* Show the header itself, cut short: it is what the user has to look at. */
  int len = (int)(hp->end - hp->text);
  while (len > 0 && (hp->text[len - 1] == ' ' || hp->text[len - 1] == '\n')) len--;
  return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: bad .npy header: %s (at offset %d of \"%.*s%s\")",
                     hp->path, what, (int)(hp->p - hp->text), len > 120 ? 120 : len, hp->text,
                     len > 120 ? "..." : "");
}

static void skip_space(header_parser *hp) {
  while (hp->p < hp->end && (*hp->p == ' ' || *hp->p == '\t' || *hp->p == '\n' || *hp->p == '\r')) hp->p++;
}

/* Consumes `c` after optional spaces. */
static bool eat(header_parser *hp, char c) {
  skip_space(hp);
  if (hp->p < hp->end && *hp->p == c) {
    hp->p++;
    return true;
  }
  return false;
}

/* A quoted string without escapes (keys and descrs never need them). */
static loom_status parse_string(header_parser *hp, char *buf, size_t size) {
  skip_space(hp);
  if (hp->p >= hp->end || (*hp->p != '\'' && *hp->p != '"'))
    return bad_header(hp, "expected a quoted string");
  char quote = *hp->p++;
  const char *start = hp->p;
  while (hp->p < hp->end && *hp->p != quote && *hp->p != '\\') hp->p++;
  if (hp->p >= hp->end || *hp->p != quote) return bad_header(hp, "unterminated or escaped string");
  size_t n = (size_t)(hp->p - start);
  hp->p++;
  if (n >= size) return bad_header(hp, "string too long");
  memcpy(buf, start, n);
  buf[n] = '\0';
  return LOOM_OK;
}

static loom_status parse_bool(header_parser *hp, bool *out) {
  skip_space(hp);
  size_t left = (size_t)(hp->end - hp->p);
  if (left >= 4 && memcmp(hp->p, "True", 4) == 0) {
    hp->p += 4;
    *out = true;
  } else if (left >= 5 && memcmp(hp->p, "False", 5) == 0) {
    hp->p += 5;
    *out = false;
  } else {
    return bad_header(hp, "expected True or False for 'fortran_order'");
  }
  return LOOM_OK;
}

/* One dimension: decimal digits, an optional Python 2 'L' suffix. */
static loom_status parse_dim(header_parser *hp, int64_t *out) {
  skip_space(hp);
  if (hp->p < hp->end && *hp->p == '-') return bad_header(hp, "negative dimension in 'shape'");
  if (hp->p >= hp->end || *hp->p < '0' || *hp->p > '9')
    return bad_header(hp, "expected a dimension in 'shape'");
  const char *start = hp->p;
  int64_t v = 0;
  bool overflow = false;
  while (hp->p < hp->end && *hp->p >= '0' && *hp->p <= '9') {
    if (!loom__mul_i64(v, 10, &v) || !loom__add_i64(v, *hp->p - '0', &v)) overflow = true;
    hp->p++;
  }
  if (overflow)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: shape dimension %.*s does not fit in int64", hp->path,
                       (int)(hp->p - start), start);
  if (hp->p < hp->end && (*hp->p == 'L' || *hp->p == 'l')) hp->p++;
  *out = v;
  return LOOM_OK;
}

/* A tuple of dimensions: "()", "(3,)", "(3, 4)", "(3, 4,)". */
static loom_status parse_shape(header_parser *hp, npy_header *h) {
  if (!eat(hp, '(')) return bad_header(hp, "expected '(' to start 'shape'");
  h->rank = 0;
  if (eat(hp, ')')) return LOOM_OK;
  for (;;) {
    int64_t d = 0;
    loom_status s = parse_dim(hp, &d);
    if (s) return s;
    if (h->rank == LOOM_MAX_RANK)
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: shape has more than %d dimensions, Loom's most",
                         hp->path, LOOM_MAX_RANK);
    h->dims[h->rank++] = d;
    if (eat(hp, ')')) return LOOM_OK;
    if (!eat(hp, ',')) return bad_header(hp, "expected ',' or ')' in 'shape'");
    if (eat(hp, ')')) return LOOM_OK;
  }
}

static loom_status parse_entry(header_parser *hp, npy_header *h) {
  char key[32];
  loom_status s = parse_string(hp, key, sizeof key);
  if (s) return s;
  if (!eat(hp, ':')) return bad_header(hp, "expected ':' after a key");
  unsigned bit = strcmp(key, "descr") == 0           ? 1u
                 : strcmp(key, "fortran_order") == 0 ? 2u
                 : strcmp(key, "shape") == 0         ? 4u
                                                     : 0u;
  if (bit == 0) {
    char what[96];
    snprintf(what, sizeof what, "unexpected key '%s'", key);
    return bad_header(hp, what);
  }
  if (h->seen & bit) return bad_header(hp, "duplicate key");
  h->seen |= bit;
  if (bit == 1) {
    skip_space(hp);
    if (hp->p < hp->end && *hp->p == '[')
      return loom__error(LOOM_ERR_UNSUPPORTED, "%s: structured dtypes are not supported", hp->path);
    return parse_string(hp, h->descr, sizeof h->descr);
  }
  if (bit == 2) return parse_bool(hp, &h->fortran_order);
  return parse_shape(hp, h);
}

static loom_status parse_header(const char *path, const char *text, size_t len, npy_header *h) {
  header_parser hp = {path, text, text, text + len};
  memset(h, 0, sizeof *h);
  if (!eat(&hp, '{')) return bad_header(&hp, "expected '{'");
  while (!eat(&hp, '}')) {
    loom_status s = parse_entry(&hp, h);
    if (s) return s;
    if (!eat(&hp, ',')) {
      if (eat(&hp, '}')) break;
      return bad_header(&hp, "expected ',' or '}'");
    }
  }
  skip_space(&hp);
  if (hp.p != hp.end) return bad_header(&hp, "text after the closing '}'");
  static const char *names[] = {"descr", "fortran_order", "shape"};
  for (int i = 0; i < 3; i++) {
    if (!(h->seen & (1u << i))) {
      char what[64];
      snprintf(what, sizeof what, "no '%s' key", names[i]);
      return bad_header(&hp, what);
    }
  }
  return LOOM_OK;
}

/* ---- reading -------------------------------------------------------------------------- */

/* Reads up to n bytes; returns how many were read (short only at end of file or on error,
 * which ferror tells apart). */
static size_t read_fully(FILE *f, void *buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    /* Pieces of 1 GiB: some C libraries mishandle single calls over 2 GiB. */
    size_t want = LOOM_MIN(n - got, (size_t)1 << 30);
    size_t r = fread((char *)buf + got, 1, want, f);
    got += r;
    if (r < want) break;
  }
  return got;
}

static uint32_t le_u32(const unsigned char *b) {
  return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

/* Reads the magic, version and header; fills *h and *out_data_offset. */
static loom_status read_header(FILE *f, const char *path, npy_header *h, int64_t *out_data_offset) {
  unsigned char pre[12];
  size_t got = read_fully(f, pre, 10);
  if (ferror(f)) return loom__error(LOOM_ERR_IO, "%s: %s", path, strerror(errno));
  if (got < NPY_MAGIC_LEN || memcmp(pre, NPY_MAGIC, NPY_MAGIC_LEN) != 0)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: not a .npy file (bad magic)", path);
  if (got < 10)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: bad .npy header: file ends inside the preamble", path);
  int major = pre[6], minor = pre[7];
  if (!((major == 1 || major == 2 || major == 3) && minor == 0))
    return loom__error(LOOM_ERR_UNSUPPORTED,
                       "%s: .npy format version %d.%d is not supported (1.0, 2.0, 3.0 are)", path, major,
                       minor);
  uint32_t hlen;
  int64_t offset;
  if (major == 1) {
    hlen = (uint32_t)pre[8] | (uint32_t)pre[9] << 8;
    offset = 10;
  } else {
    if (read_fully(f, pre + 10, 2) < 2)
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: bad .npy header: file ends inside the preamble",
                         path);
    hlen = le_u32(pre + 8);
    offset = 12;
  }
  if (hlen > NPY_MAX_HEADER)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: bad .npy header: header length %u is implausible",
                       path, (unsigned)hlen);
  char *text = loom__malloc(hlen + 1u);
  if (!text) return loom__oom("a .npy header");
  loom_status s = LOOM_OK;
  if (read_fully(f, text, hlen) < hlen)
    s = ferror(f)
            ? loom__error(LOOM_ERR_IO, "%s: %s", path, strerror(errno))
            : loom__error(LOOM_ERR_INVALID_ARGUMENT,
                          "%s: bad .npy header: file ends inside the %u-byte header", path, (unsigned)hlen);
  if (!s) {
    text[hlen] = '\0';
    s = parse_header(path, text, hlen, h);
  }
  loom__free(text);
  *out_data_offset = offset + hlen;
  return s;
}

/* Checks the header's type and turns it into a loom_type. */
static loom_status header_type(const char *path, const npy_header *h, loom_type *out) {
  loom_dtype dtype = LOOM_F32;
  loom_status s = descr_to_dtype(path, h->descr, &dtype);
  if (s) return s;
  if ((s = loom_type_make(dtype, h->rank, h->dims, out))) {
    loom__error_prefix("%s: ", path);
    return s;
  }
  if (h->fortran_order) {
    /* Fortran and C order lay out the same bytes when at most one dimension exceeds 1. */
    int32_t long_dims = 0;
    bool empty = false;
    for (int32_t i = 0; i < h->rank; i++) {
      long_dims += h->dims[i] > 1;
      empty |= h->dims[i] == 0;
    }
    if (long_dims > 1 && !empty)
      return loom__error(LOOM_ERR_UNSUPPORTED,
                         "%s: Fortran-order arrays are not supported; save with np.ascontiguousarray", path);
  }
  return LOOM_OK;
}

/* Reads `bytes` of data into fresh storage. */
static loom_status read_data(FILE *f, const char *path, int64_t data_offset, int64_t bytes, void **out) {
  struct stat st;
  /* A regular file says up front whether it holds the data: no allocation for a file whose
   * header promises terabytes it does not have. */
  if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && st.st_size - data_offset < bytes) {
    int64_t found = LOOM_MAX(st.st_size - data_offset, 0);
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: expected %lld data bytes, found %lld", path,
                       (long long)bytes, (long long)found);
  }
  if ((uint64_t)bytes > SIZE_MAX) return loom__oom("a .npy file's data");
  void *data = loom__aligned_alloc((size_t)bytes);
  if (!data) {
    return loom__error(LOOM_ERR_OUT_OF_MEMORY, "%s: out of memory: %lld bytes of data", path,
                       (long long)bytes);
  }
  size_t got = read_fully(f, data, (size_t)bytes);
  if (got < (size_t)bytes) {
    loom_status s = ferror(f)
                        ? loom__error(LOOM_ERR_IO, "%s: %s", path, strerror(errno))
                        : loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: expected %lld data bytes, found %lld",
                                      path, (long long)bytes, (long long)got);
    loom__aligned_free(data);
    return s;
  }
  *out = data;
  return LOOM_OK;
}

/* The header and data of the open file f, read front to back: the one reading of a pipe. */
static loom_status load_from(FILE *f, const char *path, loom_tensor *out) {
  npy_header h;
  int64_t data_offset = 0, bytes = 0;
  loom_type type;
  void *data = NULL;
  loom_status s = read_header(f, path, &h, &data_offset);
  if (!s) s = header_type(path, &h, &type);
  if (!s) s = loom_type_bytes(&type, &bytes);
  if (!s) s = read_data(f, path, data_offset, bytes, &data);
  if (s) return s;
  if (type.dtype == LOOM_BOOL) { /* Loom's bools are 0 or 1; NumPy's are too, but be safe. */
    unsigned char *b = data;
    for (int64_t i = 0; i < bytes; i++) b[i] = b[i] != 0;
  }
  out->type = type;
  out->data = data;
  return LOOM_OK;
}

loom_status loom_tensor_load_npy(const char *path, loom_tensor *out) {
  if (!out) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_tensor_load_npy: out is NULL");
  memset(out, 0, sizeof *out);
  if (!path) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_tensor_load_npy: path is NULL");
  FILE *f = fopen(path, "rb");
  if (!f) return loom__error(LOOM_ERR_IO, "%s: %s", path, strerror(errno));
  loom_status s = load_from(f, path, out);
  fclose(f);
  return s;
}

/* ---- mapping ---------------------------------------------------------------------------- */

struct loom_npy_map {
  void *base; /* the mapping, or NULL */
  size_t length;
  void *owned; /* a pipe's data, read whole (loom__aligned_free), or NULL */
};

/* A file that is not a regular one (a named FIFO, `<(cat x.npy)`, a terminal) cannot be mapped
 * nor opened a second time to be read (the writer has gone, or the bytes are consumed): it is
 * read whole from the descriptor already open, its data held by the map. */
static loom_status read_unmappable(FILE *f, const char *path, loom_tensor *out, loom_npy_map **out_map) {
  loom_npy_map *m = loom__calloc(1, sizeof *m);
  if (!m) return loom__oom("reading a .npy file");
  loom_status s = load_from(f, path, out);
  if (s) {
    loom__free(m);
    return s;
  }
  m->owned = out->data;
  *out_map = m;
  return LOOM_OK;
}

loom_status loom_tensor_map_npy(const char *path, loom_tensor *out, loom_npy_map **out_map) {
  if (!out || !out_map) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_tensor_map_npy: out is NULL");
  memset(out, 0, sizeof *out);
  *out_map = NULL;
  if (!path) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_tensor_map_npy: path is NULL");
  FILE *f = fopen(path, "rb");
  if (!f) return loom__error(LOOM_ERR_IO, "%s: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fileno(f), &st) != 0) {
    loom_status s = loom__error(LOOM_ERR_IO, "%s: %s", path, strerror(errno));
    fclose(f);
    return s;
  }
  if (!S_ISREG(st.st_mode)) {
    loom_status s = read_unmappable(f, path, out, out_map);
    fclose(f);
    return s;
  }
  npy_header h;
  int64_t data_offset = 0, bytes = 0;
  loom_type type;
  loom_status s = read_header(f, path, &h, &data_offset);
  if (!s) s = header_type(path, &h, &type);
  if (!s) s = loom_type_bytes(&type, &bytes);
  if (!s && st.st_size - data_offset < bytes)
    s = loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: expected %lld data bytes, found %lld", path,
                    (long long)bytes, (long long)LOOM_MAX(st.st_size - data_offset, 0));
  /* Elements are read in place: the data must start on an element boundary (NumPy pads its
   * header to 64 bytes, so it always does). */
  if (!s && data_offset % loom_dtype_size(type.dtype) != 0)
    s = loom__error(LOOM_ERR_UNSUPPORTED, "%s: data at offset %lld is not aligned for %s", path,
                    (long long)data_offset, loom_dtype_name(type.dtype));
  if (!s && (uint64_t)st.st_size > SIZE_MAX) s = loom__oom("mapping a .npy file");
  loom_npy_map *m = NULL;
  if (!s && !(m = loom__calloc(1, sizeof *m))) s = loom__oom("mapping a .npy file");
  if (!s && st.st_size > 0) {
    m->length = (size_t)st.st_size;
    m->base = mmap(NULL, m->length, PROT_READ, MAP_PRIVATE, fileno(f), 0);
    if (m->base == MAP_FAILED) {
      m->base = NULL;
      s = loom__error(errno == ENOMEM ? LOOM_ERR_OUT_OF_MEMORY : LOOM_ERR_IO, "%s: mmap: %s", path,
                      strerror(errno));
    } else {
      /* pieces are read front to back: let the kernel read ahead and drop what was read */
      (void)madvise(m->base, m->length, MADV_SEQUENTIAL);
      (void)loom__mapped_add(m->base, m->length, path); /* loops drop the pages they streamed */
    }
  }
  fclose(f);
  if (s) {
    loom_npy_unmap(m);
    return s;
  }
  out->type = type;
  out->data = bytes > 0 ? (char *)m->base + data_offset : NULL;
  *out_map = m;
  return LOOM_OK;
}

void loom_npy_unmap(loom_npy_map *map) {
  if (!map) return;
  if (map->base) {
    loom__mapped_remove(map->base);
    munmap(map->base, map->length);
  }
  loom__aligned_free(map->owned);
  loom__free(map);
}

/* ---- writing -------------------------------------------------------------------------- */

/* Formats the padded 1.0 header (magic to '\n') into buf; returns its length. */
static size_t format_header(const loom_type *type, char *buf, size_t size) {
  char shape[LOOM_MAX_RANK * 22 + 4];
  size_t n = 0;
  for (int32_t i = 0; i < type->rank; i++)
    n += (size_t)snprintf(shape + n, sizeof shape - n, i ? ", %lld" : "%lld", (long long)type->dims[i]);
  if (type->rank == 1) n += (size_t)snprintf(shape + n, sizeof shape - n, ",");
  shape[n] = '\0';
  size_t len =
      (size_t)snprintf(buf + 10, size - 10, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }",
                       loom__npy_descr(type->dtype), shape);
  size_t total = 10 + len + 1; /* + '\n' */
  size_t padded = (total + NPY_ALIGN - 1) / NPY_ALIGN * NPY_ALIGN;
  memset(buf + 10 + len, ' ', padded - total);
  buf[padded - 1] = '\n';
  memcpy(buf, NPY_MAGIC, NPY_MAGIC_LEN);
  buf[6] = 1;
  buf[7] = 0;
  size_t hlen = padded - 10;
  buf[8] = (char)(hlen & 0xff);
  buf[9] = (char)(hlen >> 8);
  return padded;
}

static loom_status check_saveable(const char *path, const loom_tensor *t, int64_t *out_bytes) {
  if (!path || !t) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_tensor_save_npy: NULL argument");
  loom_type check;
  loom_status s = loom_type_make(t->type.dtype, t->type.rank, t->type.dims, &check);
  if (s) {
    loom__error_prefix("%s: ", path);
    return s;
  }
  if (t->type.dtype == LOOM_BF16)
    return loom__error(LOOM_ERR_UNSUPPORTED,
                       "%s: bf16 has no NumPy dtype; cast the value to f32 (cast x to=f32) to save it", path);
  if (loom_dtype_is_quantized(t->type.dtype))
    return loom__error(
        LOOM_ERR_UNSUPPORTED,
        "%s: %s has no NumPy dtype; dequantize the value to f32 (dequantize q scale) to save it", path,
        loom_dtype_name(t->type.dtype));
  if ((s = loom_type_bytes(&t->type, out_bytes))) return s;
  if (*out_bytes > 0 && !t->data)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: the tensor has no data", path);
  return LOOM_OK;
}

loom_status loom__npy_save_temp(const char *path, const loom_tensor *t, char **out_temp) {
  if (out_temp) *out_temp = NULL;
  if (!out_temp) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom__npy_save_temp: out_temp is NULL");
  int64_t bytes;
  loom_status s = check_saveable(path, t, &bytes);
  if (s) return s;
  char header[512];
  size_t hlen = format_header(&t->type, header, sizeof header);
  int fd = -1;
  char *name = NULL;
  if ((s = loom__file_create_temp(path, &fd, &name))) return s;
  bool ok = loom__file_write_all(fd, header, hlen) && loom__file_write_all(fd, t->data, (size_t)bytes);
  int err = errno;
  if (close(fd) != 0 && ok) { /* NFS and full disks may report only at close */
    ok = false;
    err = errno;
  }
  if (!ok) {
    unlink(name);
    loom__free(name);
    return loom__error(LOOM_ERR_IO, "%s: cannot write: %s", path, strerror(err));
  }
  *out_temp = name;
  return LOOM_OK;
}

loom_status loom__npy_commit(const char *temp, const char *path) {
  return loom__file_commit(temp, path);
}

void loom__npy_discard(const char *temp) {
  if (temp) unlink(temp);
}

const char *loom_dtype_npy_descr(loom_dtype dtype) {
  return loom__npy_descr(dtype);
}

/* Removes what a failed loom_tensors_save_npy wrote: the temporaries left and the files
 * already renamed. */
static void undo_saves(char **temps, const char *const *paths, int32_t n, int32_t committed) {
  for (int32_t i = 0; i < n; i++) {
    loom__npy_discard(temps[i]);
    loom__free(temps[i]);
    temps[i] = NULL;
  }
  for (int32_t i = 0; i < committed; i++) unlink(paths[i]);
}

loom_status loom_tensors_save_npy(const char *const *paths, const loom_tensor *tensors, int32_t n) {
  if (n < 0 || (n > 0 && (!paths || !tensors)))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_tensors_save_npy: %s",
                       n < 0 ? "negative count" : "NULL paths or tensors");
  char **temps = n > 0 ? loom__calloc((size_t)n, sizeof *temps) : NULL;
  if (n > 0 && !temps) return loom__error(LOOM_ERR_OUT_OF_MEMORY, "loom_tensors_save_npy: out of memory");
  loom_status s = LOOM_OK;
  for (int32_t i = 0; s == LOOM_OK && i < n; i++) s = loom__npy_save_temp(paths[i], &tensors[i], &temps[i]);
  int32_t committed = 0;
  while (s == LOOM_OK && committed < n) {
    s = loom__npy_commit(temps[committed], paths[committed]);
    loom__free(temps[committed]);
    temps[committed] = NULL;
    if (s == LOOM_OK) committed++;
  }
  if (s != LOOM_OK) undo_saves(temps, paths, n, committed);
  loom__free(temps);
  return s;
}

loom_status loom_tensor_save_npy(const char *path, const loom_tensor *t) {
  char *temp;
  loom_status s = loom__npy_save_temp(path, t, &temp);
  if (s) return s;
  s = loom__npy_commit(temp, path);
  loom__free(temp);
  return s;
}
