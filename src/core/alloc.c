/* Loom's host allocator: malloc with counters and fault injection for tests. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "loom/testing.h"

static _Atomic int64_t alloc_count; /* allocations since injection was (re)armed */
static _Atomic int64_t fail_at;     /* 0: off; else the alloc_count that fails */
static _Atomic int fail_sticky;
static _Atomic int64_t live_allocs;

void loom_testing_fail_allocation(int64_t nth, int sticky) {
  atomic_store(&alloc_count, 0);
  atomic_store(&fail_sticky, sticky);
  atomic_store(&fail_at, nth > 0 ? nth : 0);
}

int64_t loom_testing_allocation_count(void) {
  return atomic_load(&alloc_count);
}

int64_t loom_testing_live_allocations(void) {
  return atomic_load(&live_allocs);
}

/* True when this allocation must fail by injection. */
static bool inject_failure(void) {
  int64_t n = atomic_fetch_add(&alloc_count, 1) + 1;
  int64_t at = atomic_load(&fail_at);
  if (at == 0) return false;
  return n == at || (n > at && atomic_load(&fail_sticky));
}

void *loom__malloc(size_t size) {
  if (inject_failure()) return NULL;
  void *p = malloc(size ? size : 1);
  if (p) atomic_fetch_add(&live_allocs, 1);
  return p;
}

void *loom__calloc(size_t count, size_t size) {
  if (inject_failure()) return NULL;
  void *p = calloc(count ? count : 1, size ? size : 1);
  if (p) atomic_fetch_add(&live_allocs, 1);
  return p;
}

void *loom__realloc(void *ptr, size_t size) {
  if (!ptr) return loom__malloc(size);
  if (inject_failure()) return NULL;
  return realloc(ptr, size ? size : 1);
}

void loom__free(void *ptr) {
  if (!ptr) return;
  atomic_fetch_sub(&live_allocs, 1);
  free(ptr);
}

char *loom__strndup(const char *s, size_t n) {
  size_t len = strnlen(s, n);
  char *p = loom__malloc(len + 1);
  if (!p) return NULL;
  memcpy(p, s, len);
  p[len] = '\0';
  return p;
}

char *loom__strdup(const char *s) {
  return loom__strndup(s, strlen(s));
}

void *loom__aligned_alloc(size_t size) {
  if (inject_failure()) return NULL;
  void *p = NULL;
  if (posix_memalign(&p, 64, size ? size : 64) != 0) return NULL;
  atomic_fetch_add(&live_allocs, 1);
  return p;
}

void loom__aligned_free(void *ptr) {
  loom__free(ptr);
}

loom_status loom__grow(void **items, int32_t *cap, int32_t need, size_t item_size) {
  if (need <= *cap) return LOOM_OK;
  int64_t new_cap = *cap ? *cap : 8;
  while (new_cap < need) new_cap *= 2;
  if (new_cap > INT32_MAX) return loom__error(LOOM_ERR_OUT_OF_MEMORY, "out of memory: table too large");
  void *p = loom__realloc(*items, (size_t)new_cap * item_size);
  if (!p) return loom__oom("growing a table");
  *items = p;
  *cap = (int32_t)new_cap;
  return LOOM_OK;
}
