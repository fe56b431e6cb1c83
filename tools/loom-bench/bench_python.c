/* The Python side of the modes that time NumPy beside Loom: the interpreter is run with an
 * argument vector (posix_spawnp), never through a shell, so --python names a program and
 * nothing in it is read as shell syntax. */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

extern char **environ;

/* Everything the child wrote on the pipe, up to size - 1 bytes (the rest is drained). */
static void read_all(int fd, char *buf, size_t size) {
  size_t n = 0;
  for (;;) {
    char scratch[256];
    char *to = n + 1 < size ? buf + n : scratch;
    size_t room = n + 1 < size ? size - 1 - n : sizeof scratch;
    ssize_t r = read(fd, to, room);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    if (to != scratch) n += (size_t)r;
  }
  buf[n] = '\0';
}

double bench_python(const char *python, const char *script) {
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return -1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  char *const argv[] = {(char *)python, "-c", (char *)script, NULL};
  pid_t pid = -1;
  int err = posix_spawnp(&pid, python, &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(out[1]);
  char text[256] = "";
  if (err == 0) read_all(out[0], text, sizeof text);
  close(out[0]);
  int status = 0;
  if (err != 0) return -1; /* no such program */
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
  size_t len = strlen(text);
  while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == ' ')) text[--len] = '\0';
  double s = -1;
  return loom__cli_parse_double(text, 0, 1e9, &s) ? s : -1;
}

/* ---- a child answering call by call ---- */

bool bench_py_open(bench_py *p, const char *python, const char *setup) {
  size_t len = strlen(setup) + 256;
  char *script = malloc(len);
  memset(p, 0, sizeof *p);
  if (!script) return false;
  snprintf(script, len,
           "%s\nimport sys, time\nprint('ready', flush=True)\n"
           "for line in sys.stdin:\n t = time.perf_counter()\n c = time.process_time()\n run()\n"
           " print(time.perf_counter() - t, time.process_time() - c, flush=True)\n",
           setup);
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC)) {
    free(script);
    return false;
  }
  if (pipe2(out, O_CLOEXEC)) {
    close(in[0]);
    close(in[1]);
    free(script);
    return false;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  char *const argv[] = {(char *)python, "-c", script, NULL};
  fflush(stdout);
  int err = posix_spawnp(&p->pid, python, &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  free(script);
  close(in[0]);
  close(out[1]);
  if (err != 0) p->pid = 0;
  p->to = p->pid > 0 ? fdopen(in[1], "w") : NULL;
  p->from = p->pid > 0 ? fdopen(out[0], "r") : NULL;
  if (!p->to) close(in[1]);
  if (!p->from) close(out[0]);
  char word[16] = "";
  if (!p->to || !p->from || fscanf(p->from, "%15s", word) != 1 || strcmp(word, "ready") != 0) {
    bench_py_close(p);
    return false;
  }
  return true;
}

double bench_py_call(bench_py *p) {
  double s = -1, c = -1;
  p->last_cpu = -1;
  if (!p->pid || fputs("run\n", p->to) == EOF || fflush(p->to) || fscanf(p->from, "%lf %lf", &s, &c) != 2)
    return -1;
  p->last_cpu = c;
  return s;
}

void bench_py_close(bench_py *p) {
  if (p->to) fclose(p->to);
  if (p->from) fclose(p->from);
  if (p->pid > 0)
    while (waitpid(p->pid, NULL, 0) < 0 && errno == EINTR) {
    }
  memset(p, 0, sizeof *p);
}
