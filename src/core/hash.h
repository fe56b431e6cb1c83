/* FNV-1a, Loom's one non-cryptographic hash: footprints of graphs (stage history), the
 * agreement of MPI ranks' cuts, the .lir parser's and the graph's name tables. Stable across
 * runs and machines of one byte order (a footprint is kept on disk). */
#ifndef LOOM_CORE_HASH_H
#define LOOM_CORE_HASH_H

#include <stddef.h>
#include <stdint.h>

/* The 64-bit FNV offset basis: the hash of nothing, where a chain of loom__fnv1a calls starts. */
#define LOOM__FNV1A_INIT 14695981039346656037ull

/* h (LOOM__FNV1A_INIT or an earlier result) extended by data[0..n): 64-bit FNV-1a, so
 * hashing a then b equals hashing their concatenation. */
uint64_t loom__fnv1a(uint64_t h, const void *data, size_t n);

#endif
