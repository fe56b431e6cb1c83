/* .npy inputs that are not regular files: a named FIFO and an anonymous pipe (what a shell's
 * `<(cat x.npy)` passes) are read whole through loom_tensor_map_npy from the one descriptor it
 * opens; a second open would wait for a FIFO's writer forever, or find a pipe's header gone. */
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "loom/io.h"
#include "loom/testing.h"

/* A small f32[3,5] tensor's .npy bytes, made by Loom's writer, into buf (*n bytes). */
static bool npy_bytes(const char *dir, loom_tensor *t, unsigned char *buf, size_t size, size_t *n) {
  int64_t dims[] = {3, 5};
  loom_type type;
  if (loom_type_make(LOOM_F32, 2, dims, &type) || loom_tensor_init(t, &type)) return false;
  float *x = t->data;
  for (int i = 0; i < 15; i++) x[i] = (float)i * 0.25f - 1.0f;
  char p[600];
  snprintf(p, sizeof p, "%s/x.npy", dir);
  if (loom_tensor_save_npy(p, t)) return false;
  FILE *f = fopen(p, "rb");
  if (!f) return false;
  *n = fread(buf, 1, size, f);
  fclose(f);
  unlink(p);
  return *n > 0 && *n < size;
}

static bool write_all(int fd, const unsigned char *b, size_t n) {
  while (n > 0) {
    ssize_t k = write(fd, b, n);
    if (k <= 0) return false;
    b += k, n -= (size_t)k;
  }
  return true;
}

static void check_same(const loom_tensor *want, const loom_tensor *got) {
  ASSERT_TRUE(loom_type_equal(&want->type, &got->type));
  /* the same bytes written and read back: bitwise by construction */
  ASSERT_TRUE(memcmp(want->data, got->data, 15 * sizeof(float)) == 0);
}

TEST(npy_map_reads_a_named_fifo_once) {
  char dir[] = "/tmp/loom-fifo-XXXXXX", fifo[64];
  ASSERT_TRUE(mkdtemp(dir) != NULL);
  unsigned char buf[4096];
  size_t n = 0;
  loom_tensor want, got;
  ASSERT_TRUE(npy_bytes(dir, &want, buf, sizeof buf, &n));
  snprintf(fifo, sizeof fifo, "%s/in.npy", dir);
  ASSERT_EQ(mkfifo(fifo, 0600), 0);
  pid_t child = fork();
  ASSERT_TRUE(child >= 0);
  if (child == 0) { /* the writer: one open, the bytes, gone (as `cat x.npy > fifo`) */
    alarm(60);
    int fd = open(fifo, O_WRONLY);
    _exit(fd >= 0 && write_all(fd, buf, n) && close(fd) == 0 ? 0 : 1);
  }
  loom_npy_map *map = NULL;
  int64_t live = loom_testing_live_allocations();
  loom_status s = loom_tensor_map_npy(fifo, &got, &map);
  int wst = 0;
  if (s) kill(child, SIGKILL);
  waitpid(child, &wst, 0);
  ASSERT_OK(s);
  ASSERT_TRUE(WIFEXITED(wst) && WEXITSTATUS(wst) == 0);
  check_same(&want, &got);
  loom_npy_unmap(map);
  ASSERT_EQ(loom_testing_live_allocations(), live);
  loom_tensor_deinit(&want);
  unlink(fifo);
  rmdir(dir);
}

TEST(npy_map_reads_a_pipe_given_as_dev_fd) {
  char dir[] = "/tmp/loom-pipe-XXXXXX", name[64];
  ASSERT_TRUE(mkdtemp(dir) != NULL);
  unsigned char buf[4096];
  size_t n = 0;
  loom_tensor want, got;
  ASSERT_TRUE(npy_bytes(dir, &want, buf, sizeof buf, &n));
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  ASSERT_TRUE(write_all(fds[1], buf, n)); /* under a pipe's 64 KiB: no writer process needed */
  close(fds[1]);
  snprintf(name, sizeof name, "/dev/fd/%d", fds[0]);
  loom_npy_map *map = NULL;
  ASSERT_OK(loom_tensor_map_npy(name, &got, &map));
  check_same(&want, &got);
  loom_npy_unmap(map);
  close(fds[0]);
  /* a pipe holding a bad file still says what is wrong with it */
  ASSERT_EQ(pipe(fds), 0);
  ASSERT_TRUE(write_all(fds[1], (const unsigned char *)"not npy at all", 14));
  close(fds[1]);
  snprintf(name, sizeof name, "/dev/fd/%d", fds[0]);
  ASSERT_STATUS(loom_tensor_map_npy(name, &got, &map), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), name);
  ASSERT_TRUE(map == NULL);
  close(fds[0]);
  loom_tensor_deinit(&want);
  rmdir(dir);
}
