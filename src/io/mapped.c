/* The registry of read-only file mappings (mapped.h). A handful of mappings at most (one per
 * mapped input file), so a locked array searched linearly is enough. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/core.h"
#include "io/mapped.h"

typedef struct mapping {
  uintptr_t lo, hi;
} mapping;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static mapping *maps;
static int32_t n_maps, cap_maps;
/* Read without the lock on every piece: a run with no mapped input pays one load. */
static atomic_int any_maps;

bool loom__mapped_add(const void *base, size_t length) {
  if (!base || length == 0) return true;
  pthread_mutex_lock(&lock);
  bool ok = true;
  if (n_maps == cap_maps) {
    int32_t cap = cap_maps ? cap_maps * 2 : 8;
    mapping *grown = loom__realloc(maps, sizeof *grown * (size_t)cap);
    if (grown) {
      maps = grown;
      cap_maps = cap;
    } else {
      ok = false;
    }
  }
  if (ok) {
    maps[n_maps++] = (mapping){(uintptr_t)base, (uintptr_t)base + length};
    atomic_store(&any_maps, 1);
  }
  pthread_mutex_unlock(&lock);
  return ok;
}

void loom__mapped_remove(const void *base) {
  pthread_mutex_lock(&lock);
  for (int32_t i = 0; i < n_maps; i++) {
    if (maps[i].lo != (uintptr_t)base) continue;
    maps[i] = maps[--n_maps];
    break;
  }
  if (n_maps == 0) {
    loom__free(maps);
    maps = NULL;
    cap_maps = 0;
    atomic_store(&any_maps, 0);
  }
  pthread_mutex_unlock(&lock);
}

void loom__mapped_release(const void *ptr, size_t length) {
  if (!ptr || length == 0 || !atomic_load(&any_maps)) return;
  uintptr_t lo = (uintptr_t)ptr, hi = lo + length;
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  /* Only whole pages: the pages at the ends may hold a neighbour piece's bytes, still in use. */
  uintptr_t first = (lo + page - 1) / page * page, last = hi / page * page;
  if (first >= last) return;
  pthread_mutex_lock(&lock);
  bool inside = false;
  for (int32_t i = 0; i < n_maps && !inside; i++) inside = maps[i].lo <= lo && hi <= maps[i].hi;
  /* Under the lock: the mapping cannot be unmapped (and its range reused) meanwhile. */
  if (inside) (void)madvise((void *)first, last - first, MADV_DONTNEED);
  pthread_mutex_unlock(&lock);
}
