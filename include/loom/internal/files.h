/* NOT STABLE API: an internal header, for Loom's own tools; it may change in any release and
 * is not installed. The symbols are in the static library (hidden in the shared one).
 *
 * Why it exists: the files a tool writes (loom-run's outputs, --stats-json, --trace) go
 * through the same temporaries as the library's own (.npy, .safetensors, traces, caches):
 * each is created beside its final name, renamed over it only when complete, and known to
 * one registry of live temporaries, so that a SIGINT or SIGTERM can remove every one of
 * them, whichever code made it, from inside a signal handler.
 *
 * A temporary's name is ".<base>.<pid>.<n>.tmp" beside the final file, with <base> cut so
 * that the whole name stays within NAME_MAX: any name a file may legally have can be written.
 */
#ifndef LOOM_INTERNAL_FILES_H
#define LOOM_INTERNAL_FILES_H

#include <stdbool.h>

#include "loom/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Opens a fresh temporary beside `path` for writing (O_EXCL, mode 0666 less the umask) and
 * registers it; *out_name is the caller's (loom__free, or free: the same allocator unless a
 * test injects faults). Then loom__file_commit or loom__file_discard. Thread-safe.
 * Errors: IO (the folder is missing or not writable), OUT_OF_MEMORY. */
loom_status loom__file_create_temp(const char *path, int *out_fd, char **out_name);

/* Renames the temporary `temp` over `path` and forgets it; on failure `temp` is removed.
 * Errors: IO naming both paths. */
loom_status loom__file_commit(const char *temp, const char *path);

/* Removes the temporary `temp` and forgets it. NULL is ignored. */
void loom__file_discard(const char *temp);

/* Unlinks every temporary that is registered now. Async-signal-safe (atomics and unlink
 * only): for a SIGINT / SIGTERM handler. */
void loom__file_remove_temps(void);

/* Installs a SIGINT, SIGTERM and SIGHUP handler that removes every registered temporary, then
 * the files and empty folders given to loom__file_on_signal_remove (last given first), then
 * ends the process by the same signal with its default action (so the parent sees "killed
 * by SIGTERM"). For programs (the tools), never called by the library itself. */
void loom__file_remove_on_signals(void);

/* Adds `path` to what the handler removes: a file (unlink) or, with `dir`, an empty folder
 * (rmdir). For what this run created and the user never had: an output folder the run made,
 * outputs renamed into it. Copies the path; false when it is longer than PATH_MAX or 64
 * paths are held already. Not async-signal-safe; call before the signal can matter. */
bool loom__file_on_signal_remove(const char *path, bool dir);

/* Empties that list (the run succeeded: what it made is the user's now). */
void loom__file_on_signal_keep(void);

#ifdef __cplusplus
}
#endif

#endif
