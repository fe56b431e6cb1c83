/* What every module needs: error reporting, the host allocator, checked arithmetic. */
#ifndef LOOM_CORE_H
#define LOOM_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loom/status.h"
#include "loom/tensor.h"

#if defined(__GNUC__)
#define LOOM_PRINTF(f, a) __attribute__((format(printf, f, a)))
/* The functions every op of a run passes through (executor, cpu backend, HMM). GCC and clang
 * place them together in .text.hot: spread by the linker over 1.5 MB of code, their entries
 * fell into one set of the 8-way L1 instruction cache by chance, which callgrind's cache model
 * counted as 7 misses per op (29,000 against 900 per 4,000 ops at 8bd8001) and which cost the
 * chain-of-adds overhead 10% (0.24 against 0.22 us per op). */
#define LOOM_HOT __attribute__((hot))
#else
#define LOOM_PRINTF(f, a)
#define LOOM_HOT
#endif

/* Sets this thread's last-error message and returns `status`, so a failure reads
 * `return loom__error(LOOM_ERR_INVALID_ARGUMENT, "dot: ...", ...);` */
loom_status loom__error(loom_status status, const char *fmt, ...) LOOM_PRINTF(2, 3);
/* Prepends "prefix" to the current message (for adding a location or a caller's context). */
void loom__error_prefix(const char *fmt, ...) LOOM_PRINTF(1, 2);

/* The host allocator for Loom's own bookkeeping. Failures are reported as NULL (the caller
 * converts them to LOOM_ERR_OUT_OF_MEMORY); a test can make the nth call fail, see
 * loom/testing.h. loom__free accepts NULL. */
void *loom__malloc(size_t size);
void *loom__calloc(size_t count, size_t size);
void *loom__realloc(void *ptr, size_t size);
void loom__free(void *ptr);
char *loom__strdup(const char *s);
char *loom__strndup(const char *s, size_t n);
/* As loom_tensor_init, without zeroing the data: for a caller that writes every byte at once
 * (a run's result, a copy), so the pages are touched once, by the writer. */
loom_status loom__tensor_init_unzeroed(loom_tensor *out, const loom_type *type);

/* 64-byte aligned storage for tensor data; free with loom__aligned_free. */
void *loom__aligned_alloc(size_t size);
void loom__aligned_free(void *ptr);
/* Shorthand: sets the message "out of memory: <what>" and returns LOOM_ERR_OUT_OF_MEMORY. */
loom_status loom__oom(const char *what);

/* Grows *items (of `item_size`) so it holds at least `need`; *cap is updated. */
loom_status loom__grow(void **items, int32_t *cap, int32_t need, size_t item_size);

/* Checked int64 arithmetic: false on overflow (and *out untouched). */
static inline bool loom__mul_i64(int64_t a, int64_t b, int64_t *out) {
  return !__builtin_mul_overflow(a, b, out);
}
static inline bool loom__add_i64(int64_t a, int64_t b, int64_t *out) {
  return !__builtin_add_overflow(a, b, out);
}
/* a + b, held at INT64_MAX or INT64_MIN where it would pass them: byte counts of graphs whose
 * values hold exabytes each (a fuzzer's shapes) stay huge rather than wrap. */
static inline int64_t loom__sat_add_i64(int64_t a, int64_t b) {
  int64_t r;
  if (!__builtin_add_overflow(a, b, &r)) return r;
  return b > 0 ? INT64_MAX : INT64_MIN;
}

/* a * b for a, b >= 0, held at INT64_MAX where it would pass it: the strides of a type with an
 * axis of 0 elements beside huge ones (a fuzzer's q4[9223372036854775807,0]) hold no data to
 * step through, and must not wrap on the way. */
static inline int64_t loom__sat_mul_i64(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}

/* Byte sizes as users write them: "123", "64KiB", "512MiB", "1.5GiB", "2GB", "1k".
 * Returns false with *out_end at the first bad character on a parse error; a text read to
 * its end that is no whole number of bytes, or is too large (1.5B, 9223372036854775807),
 * returns false with *out_end at its end: callers blame the number, not a column past it. */
bool loom__parse_bytes(const char *text, int64_t *out_bytes, const char **out_end);
/* "1.50 GiB" style; returns buf. */
char *loom__format_bytes(int64_t bytes, char *buf, size_t size);
/* As loom__format_bytes, but exact ("8388616 B") when the rounded text would read the same
 * as `other`'s: a message that compares a need with a limit must not say "needs 8.00 MiB,
 * the limit is 8.00 MiB". Format both sides with it. */
char *loom__format_bytes_vs(int64_t bytes, int64_t other, char *buf, size_t size);

/* Stores one element of `dtype` (see loom/tensor.h for the layouts) at dst: ivalue when
 * is_int (exact for i64), else value, converted as C converts, rounded for f16/bf16. */
void loom__scalar_store(int dtype, double value, int64_t ivalue, bool is_int, void *dst);

/* q4 storage (docs/ir-quant.md): a row of n elements takes n rounded up to even nibbles, so
 * q4 element offsets and strides count nibbles of rows padded to even. */
int64_t loom__q4_row_nibbles(int64_t n);
/* Bytes of an element offset (or count) of dtype into a value's storage: elements x size, for
 * q4 half the nibbles (exact for the whole rows and even columns the runtime slices at). */
int64_t loom__dtype_offset_bytes(loom_dtype dtype, int64_t elements);

/* Monotonic seconds. */
double loom__now(void);

/* Opens a fresh temporary file beside `path` (".<base>.<pid>.<n>.tmp", mode 0666 less the
 * umask) for writing; *out_name is owned by the caller (loom__free). The caller then renames
 * it over `path` with loom__file_commit, or unlinks it. Errors: IO, OUT_OF_MEMORY. */
loom_status loom__file_create_temp(const char *path, int *out_fd, char **out_name);
/* Renames the temporary file `temp` over `path`; on failure `temp` is removed.
 * Errors: IO naming both paths. */
loom_status loom__file_commit(const char *temp, const char *path);
/* mkdir -p: `dir` and every folder above it (0777 less the umask). False when one cannot be
 * made (errno says why) or the path is over 4095 bytes. */
bool loom__make_dirs(const char *dir);
/* The folders above the file `path`, as loom__make_dirs. */
bool loom__make_parents(const char *path);
/* Writes all n bytes of buf to fd, in writes of at most 1 GiB, retrying on EINTR. False on a
 * write error (errno says which). */
bool loom__file_write_all(int fd, const void *buf, size_t n);

/* memcpy of n bytes (the ranges must not overlap), spread over the OpenMP threads when n is a
 * megabyte or more and the caller is not already inside a parallel region. */
void loom__memcpy_wide(void *dst, const void *src, size_t n);

#define LOOM_ARRAY_SIZE(a) ((int32_t)(sizeof(a) / sizeof((a)[0])))
#define LOOM_MIN(a, b) ((a) < (b) ? (a) : (b))
#define LOOM_MAX(a, b) ((a) > (b) ? (a) : (b))

#endif
