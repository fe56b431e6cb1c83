/* Tensors in files: NumPy's .npy format.
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
 * loom_tensor_deinit; the file must not shrink while mapped. Header checks and errors as
 * loom_tensor_load_npy, plus UNSUPPORTED for a file that is not a regular file (a pipe: load
 * it instead) or whose data is not aligned for its dtype, and IO when mmap fails. bool
 * values are taken as stored (NumPy writes 0 or 1). */
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

#ifdef __cplusplus
}
#endif
#endif
