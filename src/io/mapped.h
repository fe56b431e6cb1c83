/* Read-only file mappings the executor may drop pages of.
 *
 * A graph input mapped from a file (loom_tensor_map_npy, loom_safetensors_map) and streamed by
 * a loop is read once, piece by piece. Left alone, every page a piece touched stays in the
 * process's resident set until the mapping goes, so streaming a file larger than memory would
 * still make the resident set grow to the file's size. The mappings register here; once a
 * piece is done with its slice, the executor calls loom__mapped_release on it, which drops the
 * slice's whole pages from the process (madvise MADV_DONTNEED). That is safe only because the
 * mappings are PROT_READ file mappings: a dropped page is read again from the file (the page
 * cache, usually) if anything touches it later, with the same bytes.
 */
#ifndef LOOM_RUNTIME_MAPPED_H
#define LOOM_RUNTIME_MAPPED_H

#include <stdbool.h>
#include <stddef.h>

/* Registers [base, base + length), a read-only mapping of a regular file. Returns false when
 * the registry cannot grow (out of memory): the mapping then works but is never released. */
bool loom__mapped_add(const void *base, size_t length);

/* Forgets the mapping starting at `base` (before munmap). Unknown bases are ignored. */
void loom__mapped_remove(const void *base);

/* Drops from the resident set the pages lying wholly inside [ptr, ptr + length) when that
 * range is inside a registered mapping; does nothing otherwise (memory of any other kind is
 * never touched). Thread-safe; cheap when nothing is registered. */
void loom__mapped_release(const void *ptr, size_t length);

#endif
