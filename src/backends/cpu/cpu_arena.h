/* Temporary memory of a cpu kernel (dot, conv): the op's scratch first, 64-byte aligned
 * pieces taken in order, then, past it, the heap (a few blocks, freed by
 * loom__cpu_arena_release). Where the op runs under a limit the scratch is what the estimator
 * counted, so a kernel that must stay inside it asks with scratch_only. */
#ifndef LOOM_CPU_ARENA_H
#define LOOM_CPU_ARENA_H

#include <stdint.h>

#include "core/core.h"

typedef struct loom__cpu_arena {
  char *next;   /* the scratch not taken yet */
  int64_t left; /* its bytes */
  void *owned[4];
  int32_t n_owned;
} loom__cpu_arena;

/* An arena over scratch (NULL: none) of scratch_bytes. */
static inline loom__cpu_arena loom__cpu_arena_make(void *scratch, int64_t scratch_bytes) {
  return (loom__cpu_arena){.next = scratch, .left = scratch ? scratch_bytes : 0};
}

/* bytes from the scratch, else (unless scratch_only) from the heap; NULL when neither has
 * room. */
static inline void *loom__cpu_arena_take(loom__cpu_arena *ar, int64_t bytes, bool scratch_only) {
  int64_t size = (bytes + 63) & ~(int64_t)63;
  if (size <= ar->left) {
    void *p = ar->next;
    ar->next += size;
    ar->left -= size;
    return p;
  }
  if (scratch_only || ar->n_owned == LOOM_ARRAY_SIZE(ar->owned) || (uint64_t)bytes > SIZE_MAX) return NULL;
  void *p = loom__aligned_alloc((size_t)bytes);
  if (p) ar->owned[ar->n_owned++] = p;
  return p;
}

/* Frees what the arena took from the heap. */
static inline void loom__cpu_arena_release(loom__cpu_arena *ar) {
  for (int32_t i = 0; i < ar->n_owned; i++) loom__aligned_free(ar->owned[i]);
  ar->n_owned = 0;
}

#endif
