/* FNV-1a (hash.h): one byte at a time, which is all its users need (names, small records). */
#include "core/hash.h"

uint64_t loom__fnv1a(uint64_t h, const void *data, size_t n) {
  const unsigned char *p = data;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}
