/* loom-bench suite --processes N: each pass over the cases in a process of its own.
 *
 * Why: a case's speed can be a property of the process that runs it, not only of the moment.
 * On this project's idle machine (Zen 4, 2 cores) cpu0's fft of 2^14 points ran at 30 us in
 * some processes and 45 us in others for the whole process (FFTW called directly alike: a
 * spinning OpenMP worker sharing its CPU, which the children's passive wait policy removes),
 * and PoCL's pthread devices moved Loom's time over its library's up to 2x from one process to
 * the next. All of a
 * report's runs from one process then share that process's luck: its MAD is small, and two
 * back-to-back reports differ by more than either's spread. Runs from several processes carry
 * the spread between processes, and each case keeps how many runs each process added, so that
 * compare can set the processes' medians side by side.
 *
 * The parent measures the host's peaks and opens the devices; each child is this program run
 * again with the same arguments and LOOM_BENCH_SUITE_PROCESS="PASS PATH", measures that one
 * pass of every device and writes its report (the JSON of --json) to PATH, which the parent
 * reads and adds to its own. */
#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "loom/internal/json_read.h"
#include "suite.h"

extern char **environ;

#define SUITE_PROCESS_ENV "LOOM_BENCH_SUITE_PROCESS"

bool suite_process_child(int32_t *pass, const char **path) {
  const char *v = getenv(SUITE_PROCESS_ENV);
  if (!v || !v[0]) return false;
  char *end;
  long p = strtol(v, &end, 10);
  if (end == v || *end != ' ' || p < 0 || p >= SUITE_MAX_PROCESSES) return false;
  *pass = (int32_t)p;
  *path = end + 1;
  return true;
}

/* Runs this program with argv and `env` added to the environment and waits; 0 when it exited
 * 0, else 1 with why. Through /proc/self/exe, not its path: a build that replaced the file while
 * the suite ran would otherwise mix two programs in one report. */
static int spawn_and_wait(char **argv, const char *env, char *why, size_t why_size) {
  int n = 0;
  while (environ[n]) n++;
  char **envp = calloc((size_t)n + 2, sizeof *envp);
  if (!envp) {
    snprintf(why, why_size, "out of memory");
    return 1;
  }
  for (int i = 0, k = 0; i < n; i++)
    if (strncmp(environ[i], SUITE_PROCESS_ENV "=", strlen(SUITE_PROCESS_ENV) + 1)) envp[k++] = environ[i];
  for (int k = 0;; k++)
    if (!envp[k]) {
      envp[k] = (char *)env;
      break;
    }
  pid_t pid;
  int err = posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, envp);
  free(envp);
  if (err) {
    snprintf(why, why_size, "cannot run /proc/self/exe: %s", strerror(err));
    return 1;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
  if (WIFSIGNALED(status))
    snprintf(why, why_size, "the child was killed by signal %d", WTERMSIG(status));
  else
    snprintf(why, why_size, "the child exited %d", WEXITSTATUS(status));
  return 1;
}

static suite_kind kind_of(const char *name) {
  static const struct {
    const char *name;
    suite_kind kind;
  } kinds[] = {{"gemm", SUITE_GEMM}, {"fft", SUITE_FFT},           {"fft_batched", SUITE_FFT_BATCH},
               {"rfft", SUITE_RFFT}, {"reduce_sum", SUITE_REDUCE}, {"add", SUITE_ADD},
               {"topk", SUITE_TOPK}, {"conv2d", SUITE_CONV},       {"h2d", SUITE_H2D},
               {"d2h", SUITE_D2H},   {"d2d", SUITE_D2D},           {"latency", SUITE_LATENCY}};
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    if (!strcmp(kinds[i].name, name)) return kinds[i].kind;
  return SUITE_LATENCY;
}

/* Appends the numbers of x[key] to s; how many. */
static int32_t add_times(bench_sample *s, const loom__jr_value *x, const char *key) {
  const loom__jr_value *t = loom__jr_get(x, key);
  int32_t added = 0;
  for (int32_t i = 0; t && t->type == LOOM__JR_ARRAY && i < t->n; i++)
    if (t->items[i].type == LOOM__JR_NUMBER && s->n < BENCH_MAX_SAMPLES) {
      bench_sample_add(s, t->items[i].number);
      added++;
    }
  return added;
}

static void copy_text(char *dst, size_t size, const loom__jr_value *x, const char *key) {
  const char *v = loom__jr_string(x, key);
  if (!dst[0] && v[0]) snprintf(dst, size, "%s", v);
}

/* The case of d named as x is (made when the parent has none yet: a transfer). */
static suite_case *case_for(suite_device *d, const loom__jr_value *x) {
  const char *name = loom__jr_string(x, "name"), *dtype = loom__jr_string(x, "dtype"),
             *size = loom__jr_string(x, "size");
  for (int32_t i = 0; i < d->n_cases; i++) {
    suite_case *c = &d->cases[i];
    if (!strcmp(c->name, name) && !strcmp(c->dtype, dtype) && !strcmp(c->size, size)) return c;
  }
  suite_case *c = suite_add_case(d, kind_of(name), name, dtype);
  if (!c) return NULL;
  snprintf(c->size, sizeof c->size, "%s", size);
  c->flops = loom__jr_number(x, "flops", 0);
  c->bytes = loom__jr_number(x, "bytes", 0);
  return c;
}

/* One child's report into r: each case's runs appended, its error, library, reason and witness
 * taken where r has none yet. */
static void merge(suite_report *r, const loom__jr_value *child) {
  const loom__jr_value *devices = loom__jr_get(child, "devices");
  for (int32_t i = 0; devices && devices->type == LOOM__JR_ARRAY && i < devices->n; i++) {
    const loom__jr_value *cd = &devices->items[i], *cases = loom__jr_get(cd, "cases");
    suite_device *d = NULL;
    for (int32_t k = 0; k < r->n_devices && !d; k++)
      if (!strcmp(r->devices[k].id, loom__jr_string(cd, "id"))) d = &r->devices[k];
    for (int32_t k = 0; d && cases && cases->type == LOOM__JR_ARRAY && k < cases->n; k++) {
      const loom__jr_value *x = &cases->items[k];
      suite_case *c = case_for(d, x);
      if (!c) continue;
      copy_text(c->error, sizeof c->error, x, "error");
      copy_text(c->library, sizeof c->library, x, "library");
      copy_text(c->reason, sizeof c->reason, x, "reason");
      copy_text(c->witness, sizeof c->witness, x, "witness");
      int32_t n = add_times(&c->loom, x, "times");
      add_times(&c->lib, x, "library_times");
      add_times(&c->wit, x, "witness_times");
      if (c->n_proc < SUITE_MAX_PROCESSES) c->proc_n[c->n_proc++] = n;
    }
  }
}

int suite_run_child(int argc, char **argv, int32_t pass, suite_report *r, char *why, size_t why_size) {
  char path[4096], env[4200];
  const char *tmp = getenv("TMPDIR");
  snprintf(path, sizeof path, "%s/loom-bench-suite-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
  int fd = mkstemp(path);
  if (fd < 0) {
    snprintf(why, why_size, "cannot make a file for the child's report (%s): %s", path, strerror(errno));
    return 1;
  }
  close(fd);
  char **args = calloc((size_t)argc + 2, sizeof *args);
  int rc = 1;
  if (args) {
    args[0] = (char *)"loom-bench"; /* argv[0] is the mode, "suite" */
    for (int i = 0; i < argc; i++) args[i + 1] = argv[i];
    snprintf(env, sizeof env, "%s=%d %s", SUITE_PROCESS_ENV, (int)pass, path);
    rc = spawn_and_wait(args, env, why, why_size);
    free(args);
  }
  loom__jr_value v;
  char jwhy[200];
  int err = 0;
  if (!rc && loom__jr_load(path, 0, &v, jwhy, sizeof jwhy, &err)) {
    snprintf(why, why_size, "its report %s: %s", path, err ? strerror(err) : jwhy);
    rc = 1;
  } else if (!rc) {
    merge(r, &v);
    loom__jr_free(&v);
  }
  unlink(path);
  return rc;
}
