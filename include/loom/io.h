/* Tensors in files: NumPy's .npy format, and .safetensors (below).
 *
 * Loom reads and writes the .npy format of NumPy (format versions 1.0, 2.0 and 3.0 read;
 * 1.0 written), little-endian and C order, for every IR dtype that NumPy has:
 *
 *   bool '|b1'   i8 '|i1'   u8 '|u1'   i16 '<i2'   i32 '<i4'   i64 '<i8'
 *   f16 '<f2'    f32 '<f4'  f64 '<f8'  c64 '<c8'   c128 '<c16'
 *
 * bf16 has no NumPy dtype, so it is neither read nor written (LOOM_ERR_UNSUPPORTED): cast
 * to f32 in the graph (`cast x to=f32`) to save such a value. Reading also accepts the
 * native byte-order mark '=' (Loom runs on little-endian hosts only) and any byte-order
 * mark on one-byte types; big-endian data ('>' or '!' on a multi-byte type) is refused.
 *
 * Thread safety: both calls may run concurrently from several threads on different paths.
 */
#ifndef LOOM_IO_H
#define LOOM_IO_H

#include "loom/export.h"
#include "loom/status.h"
#include "loom/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Reads the .npy file at `path` into *out, which the caller provides and later frees with
 * loom_tensor_deinit. *out is cleared on entry and filled only on success.
 *
 * The header's dictionary may list 'descr', 'fortran_order' and 'shape' in any order and
 * spacing, with either quote style; other keys are an error. A Fortran-order array is
 * accepted only where its layout equals C order (at most one dimension longer than 1).
 * Bytes after the data are ignored, as NumPy does. Every message starts with the path.
 *
 * Errors:
 * - LOOM_ERR_IO: the file cannot be opened or read (the message carries strerror).
 * - LOOM_ERR_INVALID_ARGUMENT: not a .npy file (bad magic), a header that does not parse,
 *   a shape that is negative, has more than LOOM_MAX_RANK dimensions or overflows int64,
 *   fewer data bytes than the header promises ("expected N data bytes, found M").
 * - LOOM_ERR_UNSUPPORTED: a format version other than 1.0/2.0/3.0, a dtype with no Loom
 *   equivalent (uint16, strings, objects, structured dtypes, ...), big-endian data, or a
 *   Fortran-order array with more than one dimension longer than 1.
 * - LOOM_ERR_OUT_OF_MEMORY. */
LOOM_API loom_status loom_tensor_load_npy(const char *path, loom_tensor *out);

/* A .npy file mapped into memory (loom_tensor_map_npy). */
typedef struct loom_npy_map loom_npy_map;

/* Maps the .npy file at `path` read-only and points out->data at its data, reading nothing
 * but the header: the pages are read when a run touches them (a graph input streamed by a
 * loop reads each piece's slice as the piece runs), so a file larger than host memory can be
 * an input. out->data belongs to *out_map: release both with loom_npy_unmap, never with
 * loom_tensor_deinit; the file must not shrink while mapped. A file that is not a regular
 * file (a named FIFO, a shell's `<(...)`) cannot be mapped: it is read whole, once, from the
 * descriptor this call opened (never opened twice, so a FIFO's writer is met once), and its
 * data belongs to *out_map all the same. Header checks and errors as loom_tensor_load_npy,
 * plus UNSUPPORTED for data not aligned for its dtype, and IO when mmap fails. bool values of
 * a mapped file are taken as stored (NumPy writes 0 or 1). */
LOOM_API loom_status loom_tensor_map_npy(const char *path, loom_tensor *out, loom_npy_map **out_map);

/* Unmaps a file mapped by loom_tensor_map_npy; the tensor's data is gone. Accepts NULL. */
LOOM_API void loom_npy_unmap(loom_npy_map *map);

/* Writes `tensor` to `path` as a .npy file (format 1.0, header padded with spaces to a
 * multiple of 64 bytes and ending in '\n', little-endian, C order), replacing any file
 * there. The data goes to a temporary file in the same directory that is renamed over
 * `path` only once complete, so a failure never leaves a partial file at `path` (nor a
 * temporary one). The tensor is only read.
 *
 * Errors: LOOM_ERR_INVALID_ARGUMENT (NULL argument, invalid type, NULL data for a non-empty
 * tensor), LOOM_ERR_UNSUPPORTED (bf16), LOOM_ERR_IO (the directory is not writable, the disk
 * is full, ...: the message names the path and carries strerror), LOOM_ERR_OUT_OF_MEMORY. */
LOOM_API loom_status loom_tensor_save_npy(const char *path, const loom_tensor *tensor);

/* Writes tensors[i] to paths[i] for i < n, all or nothing: every file is first written
 * completely under a temporary name beside its path, and only then are they renamed over
 * their paths; on failure nothing is left behind (no temporary file, and no file already
 * renamed: those are removed again, so a file that was at such a path before is gone too).
 * Format and errors as loom_tensor_save_npy; INVALID_ARGUMENT also for NULL arrays with
 * n > 0 or n < 0. */
LOOM_API loom_status loom_tensors_save_npy(const char *const *paths, const loom_tensor *tensors, int32_t n);

/* The NumPy dtype string a .npy file holds for `dtype` ("<f4", "|b1", "<c8"), or NULL when
 * .npy has none (bf16) or dtype is out of range: a caller can refuse such a value before
 * computing it. The string is static. */
LOOM_API const char *loom_dtype_npy_descr(loom_dtype dtype);

/* ---- .safetensors files --------------------------------------------------------------------
 *
 * The format of huggingface/safetensors: an 8-byte little-endian header length, a JSON header
 * naming each tensor's dtype, shape and data_offsets [begin, end) (bytes from the start of the
 * data section that follows the header), and an optional "__metadata__" object of strings.
 * Dtypes: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL C64 (f64 ... bool c64 in Loom); any other
 * (U16, F8_E4M3, ...) is refused, naming it.
 *
 * A file is opened lazily: loom_safetensors_open maps the file read-only and reads and checks
 * the header only; a tensor's bytes are read when something touches them. A mapped tensor
 * streamed by a loop (docs/ir-loops.md) is read piece by piece, and each piece's pages are
 * dropped from the process again once the piece is done, so a run over a file larger than
 * memory keeps a resident set near one piece's size. The file must not change while open.
 *
 * Thread safety: a handle may be queried and mapped from several threads at once; open,
 * close and save may run concurrently on different handles and paths. */

/* An open .safetensors file (loom_safetensors_open). */
typedef struct loom_safetensors loom_safetensors;

/* Opens the .safetensors file at `path` and checks its header; *out is NULL on failure.
 * Every message starts with the path and names the field or tensor at fault.
 *
 * Checked: the header length (past the end of the file, or over 100 MB: an error), the JSON
 * (complete JSON; unknown keys in a tensor's object are skipped, as the Python library does),
 * each tensor's dtype, shape (at most LOOM_MAX_RANK dimensions, each an integer that fits
 * int64, their product's bytes too), data_offsets (two integers, end >= begin, inside the
 * data section, end - begin equal to the shape's bytes), names given once, and tensors that
 * overlap in the data section (empty ones aside). Gaps between tensors are allowed.
 *
 * Errors: IO (cannot open or map), UNSUPPORTED (not a regular file; a dtype Loom lacks),
 * INVALID_ARGUMENT (everything malformed), OUT_OF_MEMORY. */
LOOM_API loom_status loom_safetensors_open(const char *path, loom_safetensors **out);

/* Unmaps the file; tensors mapped from it are gone. Accepts NULL. */
LOOM_API void loom_safetensors_close(loom_safetensors *st);

/* The number of tensors (0 for NULL). Tensors are indexed 0..count-1 in order of name
 * (strcmp), whatever their order in the file. */
LOOM_API int32_t loom_safetensors_count(const loom_safetensors *st);
/* Tensor i's name, or NULL when i is out of range. Valid until close. */
LOOM_API const char *loom_safetensors_name(const loom_safetensors *st, int32_t i);
/* Tensor i's type (dtype and shape), or NULL when i is out of range. Valid until close. */
LOOM_API const loom_type *loom_safetensors_type(const loom_safetensors *st, int32_t i);
/* The index of the tensor called `name`, or -1. */
LOOM_API int32_t loom_safetensors_find(const loom_safetensors *st, const char *name);
/* The path the file was opened from. */
LOOM_API const char *loom_safetensors_path(const loom_safetensors *st);
/* The number of "__metadata__" entries, and the value of one by key (NULL when absent). */
LOOM_API int32_t loom_safetensors_metadata_count(const loom_safetensors *st);
LOOM_API const char *loom_safetensors_metadata(const loom_safetensors *st, const char *key);

/* Points *out at tensor i's bytes in the mapping, copying nothing: out->data belongs to the
 * handle (valid until loom_safetensors_close; never loom_tensor_deinit it) and is read-only.
 * bool values are taken as stored (writers store 0 or 1).
 *
 * Alignment: safetensors does not align tensors to their dtype (the Python library writes
 * the data section 8-aligned and tensors back to back, sorted so that most are aligned, but
 * a file may hold an f32 at an odd offset). Loom's kernels read elements in place, so a
 * tensor whose file offset is not a multiple of its element size is refused with
 * UNSUPPORTED: load it (loom_safetensors_load), as loom-run does.
 *
 * Errors: INVALID_ARGUMENT (NULL, i out of range), UNSUPPORTED (misaligned). */
LOOM_API loom_status loom_safetensors_map(const loom_safetensors *st, int32_t i, loom_tensor *out);

/* Copies tensor i into fresh storage *out (the caller's, freed with loom_tensor_deinit);
 * bools become 0 or 1. Errors: INVALID_ARGUMENT, OUT_OF_MEMORY. */
LOOM_API loom_status loom_safetensors_load(const loom_safetensors *st, int32_t i, loom_tensor *out);

/* Writes tensors[i] under names[i], i < n, to `path` as a .safetensors file: the header
 * lists the tensors sorted by name (strcmp, as the Python library's sorted keys), compact
 * JSON padded with spaces so that the data starts on a multiple of 8 bytes; the data follows
 * back to back, largest element size first and then by name (as the Rust library lays it
 * out), so that every tensor is aligned for its dtype and can be mapped. Written to a temporary file beside
 * `path` and renamed over it once complete: a failure leaves nothing behind. Tensors are only read.
 *
 * Errors: INVALID_ARGUMENT (NULL arguments with n > 0, n < 0, an empty or duplicate name,
 * the reserved name "__metadata__", an invalid type, NULL data for a non-empty tensor),
 * UNSUPPORTED (a dtype with no safetensors name: c128), IO, OUT_OF_MEMORY. */
LOOM_API loom_status loom_safetensors_save(const char *path, const char *const *names,
                                           const loom_tensor *tensors, int32_t n);

/* The safetensors dtype name of `dtype` ("F32", "BOOL"), or NULL when it has none (c128) or
 * dtype is out of range. The string is static. */
LOOM_API const char *loom_dtype_safetensors_name(loom_dtype dtype);

#ifdef __cplusplus
}
#endif
#endif
