/* Read-only file mappings the executor may drop pages of, and that may lose their file.
 *
 * A graph input mapped from a file (loom_tensor_map_npy, loom_safetensors_map) and streamed by
 * a loop is read once, piece by piece. Left alone, every page a piece touched stays in the
 * process's resident set until the mapping goes, so streaming a file larger than memory would
 * still make the resident set grow to the file's size. The mappings register here; once a
 * piece is done with its slice, the executor calls loom__mapped_release on it, which drops the
 * slice's whole pages from the process (madvise MADV_DONTNEED). That is safe only because the
 * mappings are PROT_READ file mappings: a dropped page is read again from the file (the page
 * cache, usually) if anything touches it later, with the same bytes.
 *
 * A file truncated by another program while it is mapped makes every read of a page past its
 * new end raise SIGBUS, in whichever thread (an OpenMP worker of a kernel) touched it: far
 * from any place that could return an error. So a SIGBUS handler, installed with the first
 * mapping, turns such a fault into a mark on the mapping: it maps zero pages over the mapping
 * from the faulting page on (the read goes on, with zeros) and records the fault; the reader
 * then asks loom__mapped_check once its reads are done and fails with an error naming the
 * file. A fault at any other address goes to the handler that was there before (by default:
 * the process dies, as it would have).
 */
#ifndef LOOM_RUNTIME_MAPPED_H
#define LOOM_RUNTIME_MAPPED_H

#include <stdbool.h>
#include <stddef.h>

#include "loom/status.h"

/* Registers [base, base + length), a read-only mapping of the regular file `path` (copied).
 * Returns false when the registry is full or out of memory: the mapping then works but is
 * never released, and a truncation of its file is not caught. */
bool loom__mapped_add(const void *base, size_t length, const char *path);

/* Forgets the mapping starting at `base` (before munmap). Unknown bases are ignored. */
void loom__mapped_remove(const void *base);

/* Drops from the resident set the pages lying wholly inside [ptr, ptr + length) when that
 * range is inside a registered mapping; does nothing otherwise (memory of any other kind is
 * never touched). Thread-safe; cheap when nothing is registered. */
void loom__mapped_release(const void *ptr, size_t length);

/* LOOM_OK, or LOOM_ERR_IO naming the file when ptr lies in a registered mapping whose file
 * shrank under it (a read faulted; what was read there is zeros, not the file's bytes). Call
 * it after reading; cheap when no mapping ever faulted. Thread-safe. */
loom_status loom__mapped_check(const void *ptr);

#endif
