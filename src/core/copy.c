/* Large host copies spread over the OpenMP threads. One core copies about 10 GB/s between
 * pageable and pinned memory (measured on an H200 host: docs/cuda.md), a fifth of what a PCIe 5
 * link moves, so a copy through a staging buffer is bound by the core that fills it; several
 * cores together reach the memory's bandwidth, and fault in a fresh destination's pages in
 * parallel too. */
#include <omp.h>
#include <string.h>

#include "core/core.h"

/* Below this a copy stays on the calling thread: waking the team costs more than it saves. */
#define WIDE_MIN ((size_t)1 << 20)
/* Each thread copies whole blocks of this many bytes (page multiples). */
#define WIDE_BLOCK ((size_t)256 << 10)

void loom__memcpy_wide(void *dst, const void *src, size_t n) {
  int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  if (n < WIDE_MIN || threads < 2) {
    memcpy(dst, src, n);
    return;
  }
  long blocks = (long)((n + WIDE_BLOCK - 1) / WIDE_BLOCK);
#pragma omp parallel for schedule(static) num_threads(threads)
  for (long b = 0; b < blocks; b++) {
    size_t off = (size_t)b * WIDE_BLOCK;
    size_t len = n - off < WIDE_BLOCK ? n - off : WIDE_BLOCK;
    memcpy((char *)dst + off, (const char *)src + off, len);
  }
}
