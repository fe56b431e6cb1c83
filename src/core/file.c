/* Files written all or nothing: a fresh temporary name beside the final path, renamed over
 * it once complete (rename is atomic on POSIX file systems), so a reader never sees a
 * half-written file and a failure leaves nothing behind; the registry of those temporaries that
 * a signal handler empties (loom/internal/files.h); and the folders files go in. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core.h"
#include "loom/internal/files.h"

/* ---- the registry of live temporaries -------------------------------------------------------
 *
 * Blocks of slots, chained and never freed, so that a signal handler may walk them while
 * other threads add and remove entries: a slot is claimed (FREE -> BUSY), filled, then
 * published (BUSY -> LIVE); the handler unlinks LIVE slots only. A slot whose file is gone
 * (a caller that unlinked its temporary itself rather than through loom__file_discard) is
 * taken back when a new temporary finds no free slot. The first block is static; more come
 * from plain calloc, not loom__calloc: they live as long as the process, so Loom's allocation
 * counters (which tests and the soak read after a context is gone) must not see them as held. */
enum { SLOT_FREE, SLOT_BUSY, SLOT_LIVE, SLOTS_PER_BLOCK = 32 };

typedef struct temp_slot {
  _Atomic int state;
  char path[PATH_MAX];
} temp_slot;

typedef struct temp_block {
  temp_slot slots[SLOTS_PER_BLOCK];
  struct temp_block *_Atomic next;
} temp_block;

static temp_block first_block;
static temp_block *_Atomic temp_blocks = &first_block;

static temp_slot *claim_slot(bool reclaim) {
  for (temp_block *b = atomic_load(&temp_blocks); b; b = atomic_load(&b->next)) {
    for (int i = 0; i < SLOTS_PER_BLOCK; i++) {
      temp_slot *t = &b->slots[i];
      int want = SLOT_FREE;
      if (atomic_compare_exchange_strong(&t->state, &want, SLOT_BUSY)) return t;
      want = SLOT_LIVE;
      if (reclaim && access(t->path, F_OK) != 0 && errno == ENOENT &&
          atomic_compare_exchange_strong(&t->state, &want, SLOT_BUSY))
        return t;
    }
  }
  return NULL;
}

/* Registers `path`; false when it cannot be (out of memory): the temporary still works, a
 * signal just cannot remove it. */
static bool register_temp(const char *path) {
  if (strlen(path) >= PATH_MAX) return false;
  temp_slot *t = claim_slot(false);
  if (!t) t = claim_slot(true);
  if (!t) {
    temp_block *b = calloc(1, sizeof *b);
    if (!b) return false;
    t = &b->slots[0];
    atomic_store(&t->state, SLOT_BUSY);
    temp_block *head = atomic_load(&temp_blocks);
    do atomic_store(&b->next, head);
    while (!atomic_compare_exchange_weak(&temp_blocks, &head, b));
  }
  memcpy(t->path, path, strlen(path) + 1);
  atomic_store(&t->state, SLOT_LIVE);
  return true;
}

static void forget_temp(const char *path) {
  for (temp_block *b = atomic_load(&temp_blocks); b; b = atomic_load(&b->next)) {
    for (int i = 0; i < SLOTS_PER_BLOCK; i++) {
      temp_slot *t = &b->slots[i];
      int want = SLOT_LIVE;
      if (atomic_load(&t->state) == SLOT_LIVE && strcmp(t->path, path) == 0 &&
          atomic_compare_exchange_strong(&t->state, &want, SLOT_FREE))
        return;
    }
  }
}

void loom__file_remove_temps(void) {
  int saved = errno;
  for (temp_block *b = atomic_load(&temp_blocks); b; b = atomic_load(&b->next))
    for (int i = 0; i < SLOTS_PER_BLOCK; i++)
      if (atomic_load(&b->slots[i].state) == SLOT_LIVE) unlink(b->slots[i].path);
  errno = saved;
}

/* ---- temporaries --------------------------------------------------------------------------- */

/* ".<base>.<pid>.<n>.tmp" in name, <base> cut to keep the name within NAME_MAX. */
static void temp_name(char *name, size_t size, const char *path, size_t dir_len, unsigned n) {
  char suffix[64];
  int sl = snprintf(suffix, sizeof suffix, ".%ld.%u.tmp", (long)getpid(), n);
  const char *base = path + dir_len;
  size_t room = NAME_MAX - 1 - (size_t)sl, bl = strlen(base);
  if (bl > room) bl = room;
  snprintf(name, size, "%.*s.%.*s%s", (int)dir_len, path, (int)bl, base, suffix);
}

loom_status loom__file_create_temp(const char *path, int *out_fd, char **out_name) {
  static _Atomic unsigned counter;
  *out_fd = -1;
  *out_name = NULL;
  const char *slash = strrchr(path, '/');
  size_t dir_len = slash ? (size_t)(slash - path) + 1 : 0;
  size_t size = strlen(path) + 64;
  char *name = loom__malloc(size);
  if (!name) return loom__oom("a temporary file name");
  for (int attempt = 0; attempt < 100; attempt++) {
    temp_name(name, size, path, dir_len, atomic_fetch_add(&counter, 1u));
    int fd = open(name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) {
      register_temp(name);
      *out_fd = fd;
      *out_name = name;
      return LOOM_OK;
    }
    if (errno != EEXIST) break;
  }
  loom_status s =
      loom__error(LOOM_ERR_IO, "%s: cannot create a temporary file beside it: %s", path, strerror(errno));
  loom__free(name);
  return s;
}

loom_status loom__file_commit(const char *temp, const char *path) {
  if (rename(temp, path) == 0) {
    forget_temp(temp);
    return LOOM_OK;
  }
  int err = errno;
  loom__file_discard(temp);
  return loom__error(LOOM_ERR_IO, "%s: cannot rename %s to it: %s", path, temp, strerror(err));
}

void loom__file_discard(const char *temp) {
  if (!temp) return;
  unlink(temp);
  forget_temp(temp);
}

/* ---- on SIGINT / SIGTERM / SIGHUP ------------------------------------------------------------ */

enum { MAX_ON_SIGNAL = 64 };
static char on_signal_paths[MAX_ON_SIGNAL][PATH_MAX];
static bool on_signal_dir[MAX_ON_SIGNAL];
static volatile sig_atomic_t n_on_signal;

static void on_signal(int sig) {
  loom__file_remove_temps();
  for (int i = (int)n_on_signal - 1; i >= 0; i--) {
    if (on_signal_dir[i])
      rmdir(on_signal_paths[i]);
    else
      unlink(on_signal_paths[i]);
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

void loom__file_remove_on_signals(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  /* One cleanup at a time: a second signal waits until the first has removed everything. */
  sigaddset(&sa.sa_mask, SIGINT);
  sigaddset(&sa.sa_mask, SIGTERM);
  sigaddset(&sa.sa_mask, SIGHUP);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
}

bool loom__file_on_signal_remove(const char *path, bool dir) {
  size_t n = strlen(path);
  if (n >= PATH_MAX || n_on_signal >= MAX_ON_SIGNAL) return false;
  memcpy(on_signal_paths[n_on_signal], path, n + 1);
  on_signal_dir[n_on_signal] = dir;
  n_on_signal = n_on_signal + 1; /* published after the path is in place */
  return true;
}

void loom__file_on_signal_keep(void) {
  n_on_signal = 0;
}

bool loom__file_write_all(int fd, const void *buf, size_t n) {
  const char *p = buf;
  while (n > 0) {
    ssize_t w = write(fd, p, LOOM_MIN(n, (size_t)1 << 30));
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= (size_t)w;
  }
  return true;
}

bool loom__make_dirs(const char *dir) {
  char buf[4096];
  size_t n = strlen(dir);
  if (n == 0 || n >= sizeof buf) {
    errno = ENAMETOOLONG;
    return false;
  }
  memcpy(buf, dir, n + 1);
  for (char *p = buf + 1;; p++) {
    if (*p != '/' && *p != '\0') continue;
    char saved = *p;
    *p = '\0';
    bool ok = mkdir(buf, 0777) == 0 || errno == EEXIST;
    *p = saved;
    if (!ok) return false;
    if (saved == '\0') return true;
  }
}

bool loom__make_parents(const char *path) {
  const char *slash = strrchr(path, '/');
  if (!slash || slash == path) return true;
  char buf[4096];
  size_t n = (size_t)(slash - path);
  if (n >= sizeof buf) {
    errno = ENAMETOOLONG;
    return false;
  }
  memcpy(buf, path, n);
  buf[n] = '\0';
  return loom__make_dirs(buf);
}
