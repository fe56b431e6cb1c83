/* The registry of read-only file mappings (mapped.h). A handful of mappings at most (one per
 * mapped input file), held in a fixed table: the SIGBUS handler reads it without a lock (it
 * may run in a thread that holds any lock), so a slot's fields are atomics, set before the
 * slot is published and cleared before its mapping goes. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/core.h"
#include "io/mapped.h"

#define MAX_MAPS 256

typedef struct mapping {
  _Atomic uintptr_t lo, hi; /* 0, 0: a free slot */
  atomic_int faulted;       /* a read past the file's end was made to read zeros */
  char *path;
} mapping;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static mapping maps[MAX_MAPS];
/* Read without the lock on every piece: a run with no mapped input pays one load. */
static atomic_int any_maps, any_faults;
static struct sigaction previous;
static pthread_once_t handler_once = PTHREAD_ONCE_INIT;

static mapping *slot_of(uintptr_t addr) {
  for (int32_t i = 0; i < MAX_MAPS; i++) {
    uintptr_t lo = atomic_load(&maps[i].lo), hi = atomic_load(&maps[i].hi);
    if (lo <= addr && addr < hi) return &maps[i];
  }
  return NULL;
}

/* Async-signal-safe: lock-free table reads, mmap and atomics only. */
static void on_sigbus(int sig, siginfo_t *info, void *uc) {
  uintptr_t addr = (uintptr_t)info->si_addr;
  mapping *m = sig == SIGBUS && info->si_code == BUS_ADRERR ? slot_of(addr) : NULL;
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), from = addr / page * page;
  uintptr_t hi = m ? atomic_load(&m->hi) : 0, to = (hi + page - 1) / page * page;
  /* Zeros from the faulting page to the end: one fix-up, not one fault per page. */
  if (m && mmap((void *)from, to - from, PROT_READ, MAP_PRIVATE | MAP_FIXED | MAP_ANONYMOUS, -1, 0) !=
               MAP_FAILED) {
    atomic_store(&m->faulted, 1);
    atomic_store(&any_faults, 1);
    return; /* the read is made again, of zeros */
  }
  if (previous.sa_flags & SA_SIGINFO && previous.sa_sigaction) {
    previous.sa_sigaction(sig, info, uc);
  } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN && previous.sa_handler) {
    previous.sa_handler(sig);
  } else {
    /* Not ours: the default action, when the fault repeats on return. */
    signal(SIGBUS, SIG_DFL);
  }
}

static void install_handler(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_sigbus;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  (void)sigaction(SIGBUS, &sa, &previous);
}

bool loom__mapped_add(const void *base, size_t length, const char *path) {
  if (!base || length == 0) return true;
  pthread_once(&handler_once, install_handler);
  char *copy = loom__strdup(path ? path : "a mapped file");
  if (!copy) return false;
  pthread_mutex_lock(&lock);
  mapping *m = NULL;
  for (int32_t i = 0; i < MAX_MAPS && !m; i++)
    if (atomic_load(&maps[i].hi) == 0) m = &maps[i];
  if (m) {
    m->path = copy;
    atomic_store(&m->faulted, 0);
    atomic_store(&m->lo, (uintptr_t)base);
    atomic_store(&m->hi, (uintptr_t)base + length);
    atomic_store(&any_maps, 1);
  }
  pthread_mutex_unlock(&lock);
  if (!m) loom__free(copy);
  return m != NULL;
}

void loom__mapped_remove(const void *base) {
  pthread_mutex_lock(&lock);
  bool left = false;
  for (int32_t i = 0; i < MAX_MAPS; i++) {
    mapping *m = &maps[i];
    if (atomic_load(&m->lo) == (uintptr_t)base && atomic_load(&m->hi) != 0) {
      atomic_store(&m->hi, 0);
      atomic_store(&m->lo, 0);
      loom__free(m->path);
      m->path = NULL;
    }
    left |= atomic_load(&m->hi) != 0;
  }
  if (!left) atomic_store(&any_maps, 0);
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
  mapping *m = slot_of(lo);
  /* Under the lock: the mapping cannot be unmapped (and its range reused) meanwhile. */
  if (m && hi <= atomic_load(&m->hi)) (void)madvise((void *)first, last - first, MADV_DONTNEED);
  pthread_mutex_unlock(&lock);
}

loom_status loom__mapped_check(const void *ptr) {
  if (!ptr || !atomic_load(&any_faults)) return LOOM_OK;
  loom_status s = LOOM_OK;
  pthread_mutex_lock(&lock);
  mapping *m = slot_of((uintptr_t)ptr);
  if (m && atomic_load(&m->faulted))
    s = loom__error(LOOM_ERR_IO,
                    "%s: the file shrank while Loom was reading it (truncated or rewritten by another "
                    "program?); its data past the new end could not be read",
                    m->path);
  pthread_mutex_unlock(&lock);
  return s;
}
