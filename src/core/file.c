/* Files written all or nothing: a fresh temporary name beside the final path, renamed over
 * it once complete (rename is atomic on POSIX file systems), so a reader never sees a
 * half-written file and a failure leaves nothing behind; and the folders they go in. */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core.h"

loom_status loom__file_create_temp(const char *path, int *out_fd, char **out_name) {
  static _Atomic unsigned counter;
  *out_fd = -1;
  *out_name = NULL;
  const char *slash = strrchr(path, '/');
  size_t dir_len = slash ? (size_t)(slash - path) + 1 : 0;
  const char *base = path + dir_len;
  size_t size = strlen(path) + 64;
  char *name = loom__malloc(size);
  if (!name) return loom__oom("a temporary file name");
  for (int attempt = 0; attempt < 100; attempt++) {
    snprintf(name, size, "%.*s.%s.%ld.%u.tmp", (int)dir_len, path, base, (long)getpid(),
             atomic_fetch_add(&counter, 1u));
    int fd = open(name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) {
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
  if (rename(temp, path) == 0) return LOOM_OK;
  int err = errno;
  unlink(temp);
  return loom__error(LOOM_ERR_IO, "%s: cannot rename %s to it: %s", path, temp, strerror(err));
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
