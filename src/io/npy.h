/* The .npy reader and writer's internal entry points, for tools that write several files
 * all-or-nothing (loom-run writes every output to a temporary file first and renames them
 * only once all are complete). */
#ifndef LOOM_NPY_H
#define LOOM_NPY_H

#include "core/core.h"
#include "loom/io.h"

/* Writes `tensor` as a complete .npy file under a fresh temporary name in the directory of
 * `path` (".<base>.<pid>.<n>.tmp"), created with mode 0666 less the umask. On success
 * *out_temp (owned by the caller, freed with loom__free) names it; the caller then either
 * renames it over `path` with loom__npy_commit or removes it with loom__npy_discard.
 * On failure nothing is left on disk. Errors as loom_tensor_save_npy. */
loom_status loom__npy_save_temp(const char *path, const loom_tensor *tensor, char **out_temp);

/* Renames the temporary file `temp` over `path` (atomic on POSIX file systems). On failure
 * `temp` is removed. Errors: LOOM_ERR_IO naming both paths. */
loom_status loom__npy_commit(const char *temp, const char *path);

/* Removes a temporary file made by loom__npy_save_temp; NULL is a no-op. */
void loom__npy_discard(const char *temp);

/* The NumPy descr ('<f4') of a dtype; NULL for bf16 and out-of-range values. */
const char *loom__npy_descr(loom_dtype dtype);

#endif
