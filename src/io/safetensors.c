/* .safetensors files (huggingface/safetensors): the lazy reader and the writer.
 *
 * The format: an 8-byte little-endian unsigned header length N, N bytes of UTF-8 JSON (an
 * object; trailing spaces allowed), then the data section. The object maps each tensor's name
 * to {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, offsets in bytes from
 * the start of the data section; the optional key "__metadata__" maps to an object of strings.
 *
 * The header is untrusted input: it is read by core's strict JSON reader (json_read.h: every
 * escape, int64-exact integers, bounded depth, never past the header's end) and the tree then
 * checked key by key; nested values under keys that are not ours are accepted and ignored.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core.h"
#include "core/json_read.h"
#include "io/mapped.h"
#include "loom/io.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "loom's safetensors reader and writer assume a little-endian host"
#endif

/* The Rust library refuses headers over 100 MB; so does Loom (a corrupt length would
 * otherwise have us read gigabytes of "JSON"). */
#define ST_MAX_HEADER ((uint64_t)100000000)

/* ---- dtypes -------------------------------------------------------------------------- */

static const struct {
  loom_dtype dtype;
  const char *name;
} st_dtypes[] = {
    {LOOM_F64, "F64"}, {LOOM_F32, "F32"},   {LOOM_F16, "F16"}, {LOOM_BF16, "BF16"},
    {LOOM_I64, "I64"}, {LOOM_I32, "I32"},   {LOOM_I16, "I16"}, {LOOM_I8, "I8"},
    {LOOM_U8, "U8"},   {LOOM_BOOL, "BOOL"}, {LOOM_C64, "C64"},
};

const char *loom_dtype_safetensors_name(loom_dtype dtype) {
  for (int32_t i = 0; i < LOOM_ARRAY_SIZE(st_dtypes); i++)
    if (st_dtypes[i].dtype == dtype) return st_dtypes[i].name;
  return NULL;
}

/* ---- the handle ------------------------------------------------------------------------ */

typedef struct st_entry {
  char *name;
  loom_type type;
  int64_t begin, end; /* in the data section */
} st_entry;

struct loom_safetensors {
  char *path;
  void *base; /* the whole file, PROT_READ; NULL for an empty mapping */
  size_t length;
  int64_t data_start; /* 8 + header length */
  st_entry *entries;  /* sorted by name */
  int32_t n, cap;
  char **meta; /* __metadata__: key, value, key, value, ... */
  int32_t n_meta, cap_meta;
};

/* ---- the header ------------------------------------------------------------------------ */

/* The header is read by core's JSON reader (json_read.h) into a tree, then walked here. */
typedef struct hreader {
  const char *path;
  const char *text; /* the header, for quoting a number as written */
} hreader;

static loom_status hfail(const hreader *r, const loom__jr_value *at, const char *fmt, ...) LOOM_PRINTF(3, 4);
static loom_status hfail(const hreader *r, const loom__jr_value *at, const char *fmt, ...) {
  char what[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: bad safetensors header: %s (at byte %lld of the header)",
                     r->path, what, (long long)at->at);
}

/* A non-negative integer that fits int64 (shapes and offsets). `what` names it in errors. */
static loom_status hint(const hreader *r, const loom__jr_value *v, const char *what, int64_t *out) {
  if (v->type != LOOM__JR_NUMBER) return hfail(r, v, "%s is not an integer", what);
  const char *text = r->text + v->at;
  bool integral =
      !memchr(text, '.', v->count) && !memchr(text, 'e', v->count) && !memchr(text, 'E', v->count);
  if (!integral) return hfail(r, v, "%s is not an integer", what);
  if (text[0] == '-') return hfail(r, v, "%s is negative", what);
  if (!loom__jr_int64(v, out))
    return hfail(r, v, "%s %.*s does not fit in int64", what, (int)LOOM_MIN(v->count, 40), text);
  return LOOM_OK;
}

static loom_status add_meta(loom_safetensors *st, const char *key, const char *value) {
  if (st->n_meta == st->cap_meta) {
    int32_t cap = st->cap_meta ? st->cap_meta * 2 : 8;
    char **grown = loom__realloc(st->meta, sizeof *grown * 2 * (size_t)cap);
    if (!grown) return loom__oom("safetensors metadata");
    st->meta = grown;
    st->cap_meta = cap;
  }
  char *k = loom__strdup(key), *v = loom__strdup(value);
  if (!k || !v) {
    loom__free(k);
    loom__free(v);
    return loom__oom("safetensors metadata");
  }
  st->meta[2 * st->n_meta] = k;
  st->meta[2 * st->n_meta + 1] = v;
  st->n_meta++;
  return LOOM_OK;
}

static loom_status read_metadata(const hreader *r, const loom__jr_value *v, loom_safetensors *st) {
  if (v->type == LOOM__JR_NULL)
    return LOOM_OK; /* the Python library writes no key rather than null, but reads both */
  if (v->type != LOOM__JR_OBJECT) return hfail(r, v, "'__metadata__' is not an object of strings");
  for (int32_t i = 0; i < v->n; i++) {
    if (v->items[i].type != LOOM__JR_STRING)
      return hfail(r, &v->items[i], "'__metadata__' value of '%s' is not a string", v->keys[i]);
    loom_status s = add_meta(st, v->keys[i], v->items[i].string);
    if (s) return s;
  }
  return LOOM_OK;
}

static loom_status dtype_of(const hreader *r, const char *name, const char *text, loom_dtype *out) {
  for (int32_t i = 0; i < LOOM_ARRAY_SIZE(st_dtypes); i++) {
    if (strcmp(st_dtypes[i].name, text) == 0) {
      *out = st_dtypes[i].dtype;
      return LOOM_OK;
    }
  }
  return loom__error(LOOM_ERR_UNSUPPORTED,
                     "%s: tensor '%s': dtype '%s' has no Loom equivalent (supported: F64 F32 F16 BF16 "
                     "I64 I32 I16 I8 U8 BOOL C64)",
                     r->path, name, text);
}

/* The member `key` of tensor t, refused when the header gives it twice. */
static loom_status member(const hreader *r, const loom__jr_value *t, const char *name, const char *key,
                          const loom__jr_value **out) {
  *out = NULL;
  for (int32_t i = 0; i < t->n; i++) {
    if (strcmp(t->keys[i], key) != 0) continue;
    if (*out) return hfail(r, &t->items[i], "tensor '%s': '%s' given twice", name, key);
    *out = &t->items[i];
  }
  if (!*out) return hfail(r, t, "tensor '%s' has no '%s'", name, key);
  return LOOM_OK;
}

static loom_status read_shape(const hreader *r, const loom__jr_value *v, const char *name, int64_t *dims,
                              int32_t *rank) {
  if (v->type != LOOM__JR_ARRAY) return hfail(r, v, "tensor '%s': 'shape' is not an array", name);
  if (v->n > LOOM_MAX_RANK)
    return hfail(r, v, "tensor '%s': 'shape' has more than %d dimensions, Loom's most", name, LOOM_MAX_RANK);
  char what[300];
  snprintf(what, sizeof what, "tensor '%s': a 'shape' dimension", name);
  for (int32_t k = 0; k < v->n; k++) {
    loom_status s = hint(r, &v->items[k], what, &dims[k]);
    if (s) return s;
  }
  *rank = v->n;
  return LOOM_OK;
}

/* One tensor's object: {"dtype": ..., "shape": [...], "data_offsets": [b, e]}; other keys are
 * skipped, as the Python library does. */
static loom_status read_tensor(const hreader *r, const loom__jr_value *t, const char *name, st_entry *e) {
  if (t->type != LOOM__JR_OBJECT) return hfail(r, t, "tensor '%s' is not an object", name);
  const loom__jr_value *dtype, *shape, *offsets;
  loom_status s = member(r, t, name, "dtype", &dtype);
  if (!s && dtype->type != LOOM__JR_STRING) s = hfail(r, dtype, "tensor '%s': 'dtype' is not a string", name);
  if (!s) s = member(r, t, name, "shape", &shape);
  if (!s) s = member(r, t, name, "data_offsets", &offsets);
  int64_t dims[LOOM_MAX_RANK];
  int32_t rank = 0;
  if (!s) s = read_shape(r, shape, name, dims, &rank);
  if (!s && offsets->type != LOOM__JR_ARRAY)
    s = hfail(r, offsets, "tensor '%s': 'data_offsets' is not an array", name);
  if (!s && offsets->n != 2) s = hfail(r, offsets, "tensor '%s': 'data_offsets' needs two entries", name);
  char what[300];
  snprintf(what, sizeof what, "tensor '%s': a 'data_offsets' entry", name);
  if (!s) s = hint(r, &offsets->items[0], what, &e->begin);
  if (!s) s = hint(r, &offsets->items[1], what, &e->end);
  loom_dtype dt = LOOM_F32;
  if (!s) s = dtype_of(r, name, dtype->string, &dt);
  if (s) return s;
  if ((s = loom_type_make(dt, rank, dims, &e->type))) {
    loom__error_prefix("%s: tensor '%s': ", r->path, name);
    return s;
  }
  return LOOM_OK;
}

static int entry_cmp(const void *a, const void *b) {
  return strcmp(((const st_entry *)a)->name, ((const st_entry *)b)->name);
}

static int entry_begin_cmp(const void *a, const void *b) {
  const st_entry *x = *(const st_entry *const *)a, *y = *(const st_entry *const *)b;
  return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : strcmp(x->name, y->name);
}

static void type_string(const loom_type *t, char *buf, size_t size) {
  loom_type_format(t, buf, size);
}

/* Sizes, bounds and overlaps, once every tensor is read. */
static loom_status check_layout(loom_safetensors *st, int64_t data_bytes) {
  for (int32_t i = 0; i < st->n; i++) {
    const st_entry *e = &st->entries[i];
    char ty[LOOM_TYPE_STRING_MAX];
    type_string(&e->type, ty, sizeof ty);
    if (e->end < e->begin)
      return loom__error(LOOM_ERR_INVALID_ARGUMENT,
                         "%s: tensor '%s': data_offsets [%lld, %lld) end before they begin", st->path,
                         e->name, (long long)e->begin, (long long)e->end);
    if (e->end > data_bytes)
      return loom__error(
          LOOM_ERR_INVALID_ARGUMENT,
          "%s: tensor '%s': data_offsets [%lld, %lld) lie outside the data section (%lld bytes)", st->path,
          e->name, (long long)e->begin, (long long)e->end, (long long)data_bytes);
    int64_t bytes;
    if (loom_type_bytes(&e->type, &bytes) != LOOM_OK)
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: tensor '%s': %s holds more bytes than int64 counts",
                         st->path, e->name, ty);
    if (e->end - e->begin != bytes)
      return loom__error(LOOM_ERR_INVALID_ARGUMENT,
                         "%s: tensor '%s': data_offsets [%lld, %lld) hold %lld bytes, %s needs %lld",
                         st->path, e->name, (long long)e->begin, (long long)e->end,
                         (long long)(e->end - e->begin), ty, (long long)bytes);
    if (i > 0 && strcmp(st->entries[i - 1].name, e->name) == 0)
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: tensor '%s' appears twice in the header", st->path,
                         e->name);
  }
  const st_entry **by_begin = loom__malloc(sizeof *by_begin * (size_t)(st->n + 1));
  if (!by_begin) return loom__oom("checking a safetensors header");
  int32_t m = 0;
  for (int32_t i = 0; i < st->n; i++)
    if (st->entries[i].end > st->entries[i].begin) by_begin[m++] = &st->entries[i];
  qsort(by_begin, (size_t)m, sizeof *by_begin, entry_begin_cmp);
  loom_status s = LOOM_OK;
  for (int32_t i = 1; i < m && !s; i++) {
    const st_entry *a = by_begin[i - 1], *b = by_begin[i];
    if (b->begin < a->end)
      s = loom__error(LOOM_ERR_INVALID_ARGUMENT,
                      "%s: tensors '%s' [%lld, %lld) and '%s' [%lld, %lld) overlap in the data section",
                      st->path, a->name, (long long)a->begin, (long long)a->end, b->name, (long long)b->begin,
                      (long long)b->end);
  }
  loom__free(by_begin);
  return s;
}

static loom_status read_entries(loom_safetensors *st, const hreader *r, const loom__jr_value *doc) {
  bool seen_meta = false;
  for (int32_t i = 0; i < doc->n; i++) {
    loom_status s;
    if (strcmp(doc->keys[i], "__metadata__") == 0) {
      if (seen_meta) return hfail(r, &doc->items[i], "'__metadata__' given twice");
      seen_meta = true;
      if ((s = read_metadata(r, &doc->items[i], st))) return s;
      continue;
    }
    if ((s = loom__grow((void **)&st->entries, &st->cap, st->n + 1, sizeof *st->entries))) return s;
    st_entry *e = &st->entries[st->n];
    memset(e, 0, sizeof *e);
    if (!(e->name = loom__strdup(doc->keys[i]))) return loom__oom("a safetensors header");
    st->n++;
    if ((s = read_tensor(r, &doc->items[i], e->name, e))) return s;
  }
  return LOOM_OK;
}

static loom_status parse_header(loom_safetensors *st, const char *text, size_t len) {
  hreader r = {st->path, text};
  loom__jr_value doc;
  char what[200];
  size_t at = 0;
  if (loom__jr_parse_at(text, len, &doc, what, sizeof what, &at))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT,
                       "%s: bad safetensors header: %s (at byte %lld of the header)", st->path, what,
                       (long long)at);
  loom_status s = doc.type == LOOM__JR_OBJECT ? read_entries(st, &r, &doc)
                                              : hfail(&r, &doc, "the header is not a JSON object");
  loom__jr_free(&doc);
  if (!s && st->n > 1) qsort(st->entries, (size_t)st->n, sizeof *st->entries, entry_cmp);
  return s;
}

/* ---- opening ----------------------------------------------------------------------------- */

void loom_safetensors_close(loom_safetensors *st) {
  if (!st) return;
  if (st->base) {
    loom__mapped_remove(st->base);
    munmap(st->base, st->length);
  }
  for (int32_t i = 0; i < st->n; i++) loom__free(st->entries[i].name);
  for (int32_t i = 0; i < 2 * st->n_meta; i++) loom__free(st->meta[i]);
  loom__free(st->entries);
  loom__free(st->meta);
  loom__free(st->path);
  loom__free(st);
}

loom_status loom_safetensors_open(const char *path, loom_safetensors **out) {
  if (!out) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_safetensors_open: out is NULL");
  *out = NULL;
  if (!path) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_safetensors_open: path is NULL");
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return loom__error(LOOM_ERR_IO, "%s: %s", path, strerror(errno));
  loom_safetensors *st = loom__calloc(1, sizeof *st);
  loom_status s = LOOM_OK;
  struct stat sb;
  if (!st || !(st->path = loom__strdup(path))) s = loom__oom("opening a safetensors file");
  if (!s && fstat(fd, &sb) != 0) s = loom__error(LOOM_ERR_IO, "%s: %s", path, strerror(errno));
  /* The tensors are handed out as views of one mapping of the file: a pipe cannot be mapped. */
  if (!s && !S_ISREG(sb.st_mode))
    s = loom__error(LOOM_ERR_UNSUPPORTED, "%s: not a regular file, cannot be mapped", path);
  if (!s && sb.st_size < 8)
    s = loom__error(LOOM_ERR_INVALID_ARGUMENT,
                    "%s: not a safetensors file: %lld bytes, shorter than the 8-byte header length", path,
                    (long long)sb.st_size);
  if (!s && (uint64_t)sb.st_size > SIZE_MAX) s = loom__oom("mapping a safetensors file");
  if (!s) {
    st->length = (size_t)sb.st_size;
    st->base = mmap(NULL, st->length, PROT_READ, MAP_PRIVATE, fd, 0);
    if (st->base == MAP_FAILED) {
      st->base = NULL;
      s = loom__error(errno == ENOMEM ? LOOM_ERR_OUT_OF_MEMORY : LOOM_ERR_IO, "%s: mmap: %s", path,
                      strerror(errno));
    } else {
      (void)loom__mapped_add(st->base, st->length, path);
    }
  }
  close(fd);
  uint64_t hlen = 0;
  if (!s) {
    const unsigned char *b = st->base;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | b[i];
    if (hlen > ST_MAX_HEADER)
      s = loom__error(LOOM_ERR_INVALID_ARGUMENT,
                      "%s: header length %llu is implausible (more than %llu bytes): not a safetensors file?",
                      path, (unsigned long long)hlen, (unsigned long long)ST_MAX_HEADER);
    else if (hlen > st->length - 8)
      s = loom__error(LOOM_ERR_INVALID_ARGUMENT,
                      "%s: header length %llu runs past the end of the file (%lld bytes after the length)",
                      path, (unsigned long long)hlen, (long long)(st->length - 8));
  }
  if (!s) {
    st->data_start = 8 + (int64_t)hlen;
    s = parse_header(st, (const char *)st->base + 8, (size_t)hlen);
  }
  if (!s) s = loom__mapped_check(st->base); /* the header's pages, read above */
  if (!s) s = check_layout(st, (int64_t)st->length - st->data_start);
  if (!s) {
    /* Tensors are read in order, once each when streamed. */
    (void)madvise(st->base, st->length, MADV_SEQUENTIAL);
    *out = st;
    return LOOM_OK;
  }
  loom_safetensors_close(st);
  return s;
}

/* ---- queries ------------------------------------------------------------------------------ */

int32_t loom_safetensors_count(const loom_safetensors *st) {
  return st ? st->n : 0;
}

const char *loom_safetensors_name(const loom_safetensors *st, int32_t i) {
  return st && i >= 0 && i < st->n ? st->entries[i].name : NULL;
}

const loom_type *loom_safetensors_type(const loom_safetensors *st, int32_t i) {
  return st && i >= 0 && i < st->n ? &st->entries[i].type : NULL;
}

int32_t loom_safetensors_find(const loom_safetensors *st, const char *name) {
  if (!st || !name || st->n == 0) return -1;
  st_entry key = {.name = (char *)name};
  const st_entry *e = bsearch(&key, st->entries, (size_t)st->n, sizeof *st->entries, entry_cmp);
  return e ? (int32_t)(e - st->entries) : -1;
}

const char *loom_safetensors_path(const loom_safetensors *st) {
  return st ? st->path : NULL;
}

int32_t loom_safetensors_metadata_count(const loom_safetensors *st) {
  return st ? st->n_meta : 0;
}

const char *loom_safetensors_metadata(const loom_safetensors *st, const char *key) {
  for (int32_t i = 0; st && key && i < st->n_meta; i++)
    if (strcmp(st->meta[2 * i], key) == 0) return st->meta[2 * i + 1];
  return NULL;
}

static loom_status check_index(const loom_safetensors *st, int32_t i, loom_tensor *out, const char *fn) {
  if (out) memset(out, 0, sizeof *out);
  if (!st || !out) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: NULL argument", fn);
  if (i < 0 || i >= st->n)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: %s has %d tensors, no tensor %d", fn, st->path,
                       (int)st->n, (int)i);
  return LOOM_OK;
}

loom_status loom_safetensors_map(const loom_safetensors *st, int32_t i, loom_tensor *out) {
  loom_status s = check_index(st, i, out, "loom_safetensors_map");
  if (s) return s;
  const st_entry *e = &st->entries[i];
  int64_t at = st->data_start + e->begin; /* the mapping starts on a page: file offset = alignment */
  if (e->end > e->begin && at % loom_dtype_size(e->type.dtype) != 0)
    return loom__error(
        LOOM_ERR_UNSUPPORTED,
        "%s: tensor '%s': its data at file offset %lld is not aligned for %s (load it instead)", st->path,
        e->name, (long long)at, loom_dtype_name(e->type.dtype));
  out->type = e->type;
  out->data = e->end > e->begin ? (char *)st->base + at : NULL;
  return LOOM_OK;
}

loom_status loom_safetensors_load(const loom_safetensors *st, int32_t i, loom_tensor *out) {
  loom_status s = check_index(st, i, out, "loom_safetensors_load");
  if (s) return s;
  const st_entry *e = &st->entries[i];
  if ((s = loom_tensor_init(out, &e->type))) {
    loom__error_prefix("%s: tensor '%s': ", st->path, e->name);
    return s;
  }
  int64_t bytes = e->end - e->begin;
  if (bytes > 0) memcpy(out->data, (const char *)st->base + st->data_start + e->begin, (size_t)bytes);
  if ((s = loom__mapped_check(st->base))) { /* the file shrank under the copy */
    loom_tensor_deinit(out);
    return s;
  }
  if (e->type.dtype == LOOM_BOOL) { /* Loom's bools are 0 or 1 */
    unsigned char *b = out->data;
    for (int64_t k = 0; k < bytes; k++) b[k] = b[k] != 0;
  }
  return LOOM_OK;
}

/* ---- writing ------------------------------------------------------------------------------ */

typedef struct sbuf {
  char *p;
  size_t n, cap;
  bool oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
  if (b->oom) return;
  if (b->n + n + 1 > b->cap) {
    size_t cap = LOOM_MAX(b->cap * 2, b->n + n + 256);
    char *grown = loom__realloc(b->p, cap);
    if (!grown) {
      b->oom = true;
      return;
    }
    b->p = grown;
    b->cap = cap;
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = '\0';
}

static void sb_printf(sbuf *b, const char *fmt, ...) LOOM_PRINTF(2, 3);
static void sb_printf(sbuf *b, const char *fmt, ...) {
  char tmp[128];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  sb_put(b, tmp, (size_t)n);
}

static void sb_json_string(sbuf *b, const char *s) {
  sb_put(b, "\"", 1);
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
    if (*c == '"' || *c == '\\') {
      char esc[2] = {'\\', (char)*c};
      sb_put(b, esc, 2);
    } else if (*c < 0x20) {
      sb_printf(b, "\\u%04x", *c);
    } else {
      sb_put(b, (const char *)c, 1);
    }
  }
  sb_put(b, "\"", 1);
}

/* Sorts pointers into the caller's names array: their distance from its start is the index. */
static int order_cmp(const void *a, const void *b) {
  return strcmp(**(const char *const *const *)a, **(const char *const *const *)b);
}

/* Checks the arguments and orders the tensors by name. */
static loom_status save_check(const char *path, const char *const *names, const loom_tensor *tensors,
                              int32_t n, int32_t *order) {
  for (int32_t i = 0; i < n; i++) {
    if (!names[i] || !names[i][0])
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: tensor %d has no name", path, (int)i);
    if (strcmp(names[i], "__metadata__") == 0)
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: '__metadata__' is reserved, not a tensor name",
                         path);
    const loom_tensor *t = &tensors[i];
    loom_type check;
    loom_status s = loom_type_make(t->type.dtype, t->type.rank, t->type.dims, &check);
    if (s) {
      loom__error_prefix("%s: tensor '%s': ", path, names[i]);
      return s;
    }
    if (!loom_dtype_safetensors_name(t->type.dtype))
      return loom__error(LOOM_ERR_UNSUPPORTED, "%s: tensor '%s': %s has no safetensors dtype", path, names[i],
                         loom_dtype_name(t->type.dtype));
    int64_t bytes;
    if ((s = loom_type_bytes(&t->type, &bytes))) return s;
    if (bytes > 0 && !t->data)
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: tensor '%s' has no data", path, names[i]);
  }
  const char *const **by_name = loom__malloc(sizeof *by_name * (size_t)(n + 1));
  if (!by_name) return loom__oom("saving a safetensors file");
  for (int32_t i = 0; i < n; i++) by_name[i] = &names[i];
  qsort(by_name, (size_t)n, sizeof *by_name, order_cmp);
  for (int32_t i = 0; i < n; i++) order[i] = (int32_t)(by_name[i] - names);
  loom__free(by_name);
  for (int32_t i = 1; i < n; i++)
    if (strcmp(names[order[i - 1]], names[order[i]]) == 0)
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: tensor name '%s' given twice", path,
                         names[order[i]]);
  return LOOM_OK;
}

loom_status loom_safetensors_save(const char *path, const char *const *names, const loom_tensor *tensors,
                                  int32_t n) {
  if (!path || n < 0 || (n > 0 && (!names || !tensors)))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_safetensors_save: %s",
                       !path   ? "path is NULL"
                       : n < 0 ? "negative count"
                               : "NULL names or tensors");
  int32_t *order = loom__malloc(sizeof *order * (size_t)(n + 1));
  if (!order) return loom__oom("saving a safetensors file");
  loom_status s = save_check(path, names, tensors, n, order);
  sbuf h = {0};
  /* The data goes largest element first (then by name), as the Rust library lays it out:
   * every tensor then starts on a multiple of its element size and can be mapped. */
  int32_t *layout = s ? NULL : loom__malloc(sizeof *layout * (size_t)(n + 1));
  int64_t *begin = s ? NULL : loom__malloc(sizeof *begin * (size_t)(n + 1));
  if (!s && (!layout || !begin)) s = loom__oom("saving a safetensors file");
  int32_t m = 0;
  for (int64_t size = 16; !s && size >= 1; size /= 2)
    for (int32_t k = 0; k < n; k++)
      if (loom_dtype_size(tensors[order[k]].type.dtype) == size) layout[m++] = order[k];
  int64_t offset = 0;
  for (int32_t k = 0; !s && k < n; k++) {
    int64_t bytes = 0;
    (void)loom_type_bytes(&tensors[layout[k]].type, &bytes);
    begin[layout[k]] = offset;
    offset += bytes;
  }
  sb_put(&h, "{", 1);
  for (int32_t k = 0; !s && k < n; k++) {
    const loom_tensor *t = &tensors[order[k]];
    int64_t bytes = 0;
    (void)loom_type_bytes(&t->type, &bytes);
    if (k) sb_put(&h, ",", 1);
    sb_json_string(&h, names[order[k]]);
    sb_printf(&h, ":{\"dtype\":\"%s\",\"shape\":[", loom_dtype_safetensors_name(t->type.dtype));
    for (int32_t d = 0; d < t->type.rank; d++)
      sb_printf(&h, d ? ",%lld" : "%lld", (long long)t->type.dims[d]);
    sb_printf(&h, "],\"data_offsets\":[%lld,%lld]}", (long long)begin[order[k]],
              (long long)(begin[order[k]] + bytes));
  }
  sb_put(&h, "}", 1);
  /* The data starts on 8 bytes, as the Python library writes it: spaces pad the header. */
  while (!h.oom && (8 + h.n) % 8 != 0) sb_put(&h, " ", 1);
  if (!s && h.oom) s = loom__oom("a safetensors header");
  int fd = -1;
  char *temp = NULL;
  if (!s) s = loom__file_create_temp(path, &fd, &temp);
  if (!s) {
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)h.n >> (8 * i));
    bool ok = loom__file_write_all(fd, len8, 8) && loom__file_write_all(fd, h.p, h.n);
    for (int32_t k = 0; ok && k < n; k++) {
      int64_t bytes = 0;
      (void)loom_type_bytes(&tensors[layout[k]].type, &bytes);
      ok = bytes == 0 || loom__file_write_all(fd, tensors[layout[k]].data, (size_t)bytes);
    }
    int err = errno;
    if (close(fd) != 0 && ok) { /* NFS and full disks may report only at close */
      ok = false;
      err = errno;
    }
    if (!ok) {
      unlink(temp);
      s = loom__error(LOOM_ERR_IO, "%s: cannot write: %s", path, strerror(err));
    } else {
      s = loom__file_commit(temp, path);
    }
  }
  loom__free(temp);
  loom__free(h.p);
  loom__free(layout);
  loom__free(begin);
  loom__free(order);
  return s;
}
