/* The soak test (issue 32, `make soak`): for SOAK_SECONDS, several processes at once, each with
 * several threads running random graphs under random runner limits on one shared context (cpu0
 * and, where PoCL is there, ocl0, under a random node limit), some processes killed at random
 * times, others running with the memory manager's allocation failures or the host allocator's
 * failures injected, and loom-run processes interrupted by SIGTERM or SIGINT while they write.
 * After each run it checks:
 *   limits held      each stage's measured peak within its runner limit, the node's peak within
 *                    its limit (the memory manager's counters);
 *   results          equal, within float tolerance (the chunked order of sums differs), to the
 *                    graph run whole and alone on cpu0 (in a context of its own);
 *   leftovers        no file left in a process's private folder, nor in a loom-run's output
 *                    folder but the complete outputs (or nothing, when interrupted);
 *   leaks            Loom's live host allocations back to where they were once a context is
 *                    destroyed (loom/testing.h); in the LeakSanitizer build (`make soak`), the
 *                    sanitizer's exit status of every process too.
 * A process killed with SIGKILL checks nothing (its folder is checked by the parent). Prints the
 * counts and exits 1 on any violation.
 *
 * Usage: loom_soak [--seconds S] [--procs P] [--threads T] [--seed N] [--tool LOOM_RUN] --dir DIR */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "loom/loom.h"
#include "loom/testing.h"

/* ---- counts shared with the parent (a child writes them to its pipe at its end) --------- */

typedef struct counts {
  long runs, waits, injected, refused, limit_violations, wrong_results, errors, leaks, leftovers, kills,
      processes, tool_runs, tool_interrupted;
} counts;

static void counts_add(counts *a, const counts *b) {
  long *x = (long *)a;
  const long *y = (const long *)b;
  for (size_t i = 0; i < sizeof *a / sizeof(long); i++) x[i] += y[i];
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rnd(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static int64_t rnd_in(uint64_t *s, int64_t lo, int64_t hi) {
  return lo + (int64_t)(rnd(s) % (uint64_t)(hi - lo + 1));
}

/* ---- random graphs ------------------------------------------------------------------------ */

/* One of four shapes of work, sized at random: an elementwise chain, a dot with a reduction,
 * a reduction of an exponential, and (cpu0 only: clFFT's first plans take seconds on PoCL) an
 * FFT round trip. Inputs are in [0, 1), so nothing overflows. */
static int random_lir(uint64_t *s, bool fft, char *buf, size_t size) {
  int kind = (int)rnd_in(s, 0, fft ? 3 : 2);
  if (kind == 0)
    return snprintf(buf, size,
                    "graph chain(x: f32[%lld]) {\n  a = exp x\n  b = mul a x\n  c = add b a\n  d = sub c x\n"
                    "  e = mul d a\n  return e\n}\n",
                    (long long)rnd_in(s, 1, 64) * 4096);
  if (kind == 1) {
    long long m = rnd_in(s, 8, 192), k = rnd_in(s, 8, 192), n = rnd_in(s, 8, 192);
    return snprintf(buf, size,
                    "graph dots(x: f32[%lld,%lld], w: f32[%lld,%lld]) {\n  a = dot x w\n  b = mul a a\n"
                    "  c = reduce_sum b axes=[1]\n  return c, a\n}\n",
                    m, k, k, n);
  }
  if (kind == 2)
    return snprintf(
        buf, size,
        "graph sums(x: f32[%lld,%lld]) {\n  a = exp x\n  b = reduce_sum a axes=[1]\n  return b\n}\n",
        (long long)rnd_in(s, 16, 512), (long long)rnd_in(s, 64, 1024));
  return snprintf(buf, size,
                  "graph ffts(z: c64[%lld,%lld]) {\n  f = fft z axis=1\n  g = ifft f axis=1\n  return g\n}\n",
                  (long long)rnd_in(s, 2, 16), (long long)(1 << rnd_in(s, 6, 11)));
}

/* The worst |a-b| / (atol + rtol |a|) of two float tensors; 1e30 when their types differ. */
static double worst(const loom_tensor *a, const loom_tensor *b) {
  if (!loom_type_equal(&a->type, &b->type)) return 1e30;
  int64_t n = 0;
  loom_type_elements(&a->type, &n);
  if (a->type.dtype == LOOM_C64) n *= 2;
  const float *x = a->data, *y = b->data;
  double w = 0;
  for (int64_t i = 0; i < n; i++) {
    double d = fabs((double)x[i] - (double)y[i]) / (1e-4 + 1e-4 * fabs((double)x[i]));
    if (!(d <= w)) w = isnan(d) ? 1e30 : d;
  }
  return w;
}

/* ---- one run of a random graph ---------------------------------------------------------- */

typedef struct proc {
  loom_context *ctx;
  loom_mem_manager *m;
  int32_t node[2]; /* cpu0's and ocl0's memory nodes; ocl0 -1 when absent */
  int64_t node_limit[2];
  bool inject; /* allocation failures injected: one thread, clean failures allowed */
  double until;
  pthread_mutex_t lock;
  counts c;
  char first_error[512];
} proc;

static void note(proc *p, long *counter, const char *fmt, const char *a, const char *b) {
  pthread_mutex_lock(&p->lock);
  (*counter)++;
  if (!p->first_error[0]) snprintf(p->first_error, sizeof p->first_error, fmt, a, b);
  pthread_mutex_unlock(&p->lock);
}

static void tensors_free(loom_tensor *t, int32_t n) {
  for (int32_t i = 0; t && i < n; i++) loom_tensor_deinit(&t[i]);
  free(t);
}

/* Checks a finished plan run against the reference and its limits. */
static void check_run(proc *p, const loom_plan_stats *st, const loom_tensor *want, const loom_tensor *got,
                      int32_t n_out, const char *lir) {
  for (int32_t i = 0; i < st->n_stages; i++)
    if (st->stages[i].limit_bytes > 0 && st->stages[i].peak_bytes > st->stages[i].limit_bytes)
      note(p, &p->c.limit_violations, "a stage passed its limit: %s%s", lir, "");
  for (int32_t k = 0; k < n_out; k++)
    if (worst(&want[k], &got[k]) > 1)
      note(p, &p->c.wrong_results, "results differ from a lone run: %s%s", lir, "");
}

/* Plans g for `runner` and runs it; the reference `want` is the lone run. */
static void plan_and_run(proc *p, uint64_t *s, const loom_graph *g, const loom_runner *runner,
                         const loom_tensor *in, const loom_tensor *want, const char *lir) {
  int32_t n_in = loom_graph_param_count(g), n_out = loom_graph_output_count(g);
  loom_graph *opt = NULL;
  loom_plan *plan = NULL;
  loom_status st = loom_graph_optimize_for_runners(g, runner, 1, NULL, &opt, NULL, NULL, 0);
  if (!st) st = loom_plan_split_by_memory(opt, runner, 1, &plan);
  loom_tensor *got = calloc((size_t)n_out + 1, sizeof *got);
  loom_plan_stats stats;
  memset(&stats, 0, sizeof stats);
  if (!st && p->inject) loom_testing_fail_node_allocations(NULL, rnd_in(s, 1, 40), 0);
  if (!st && p->inject && rnd_in(s, 0, 3) == 0) loom_testing_fail_allocation(rnd_in(s, 1, 400), 0);
  loom_plan_run_options o;
  loom_plan_run_options_init(&o);
  o.recover = p->inject && rnd_in(s, 0, 1);
  if (!st)
    st = got ? loom_plan_run_with_options(p->ctx, plan, &o, in, n_in, got, n_out, &stats)
             : LOOM_ERR_OUT_OF_MEMORY;
  bool injected = p->inject && loom_testing_node_allocation_failures() > 0;
  if (p->inject) {
    loom_testing_fail_node_allocations(NULL, 0, 0);
    loom_testing_fail_allocation(0, 0);
  }
  pthread_mutex_lock(&p->lock);
  p->c.runs++;
  p->c.injected += injected;
  pthread_mutex_unlock(&p->lock);
  if (!st) {
    check_run(p, &stats, want, got, n_out, lir);
  } else if (p->inject && st == LOOM_ERR_OUT_OF_MEMORY) {
    pthread_mutex_lock(&p->lock);
    p->c.refused++; /* a clean refusal of an injected failure */
    pthread_mutex_unlock(&p->lock);
  } else if (!(st == LOOM_ERR_OUT_OF_MEMORY && !plan)) { /* a limit too small to plan for is no fault */
    note(p, &p->c.errors, "%s: %s", loom_status_string(st), loom_last_error());
  }
  loom_plan_stats_deinit(&stats);
  tensors_free(got, n_out);
  loom_plan_destroy(plan);
  loom_graph_destroy(opt);
}

/* One random graph: its inputs, its lone run on cpu0, then a planned run on a random device
 * under a random limit. */
static void one_graph(proc *p, loom_context *lone, uint64_t *s) {
  bool ocl = p->node[1] >= 0 && rnd_in(s, 0, 1);
  char lir[512];
  random_lir(s, !ocl, lir, sizeof lir);
  loom_graph *g = NULL;
  if (loom_graph_parse(lir, strlen(lir), "soak.lir", &g)) {
    note(p, &p->c.errors, "parse: %s (%s)", loom_last_error(), lir);
    return;
  }
  int32_t n_in = loom_graph_param_count(g), n_out = loom_graph_output_count(g);
  loom_tensor *in = calloc((size_t)n_in + 1, sizeof *in), *want = calloc((size_t)n_out + 1, sizeof *want);
  loom_status st = in && want ? LOOM_OK : LOOM_ERR_OUT_OF_MEMORY;
  uint64_t seed = rnd(s);
  for (int32_t i = 0; !st && i < n_in; i++) {
    st = loom_tensor_init(&in[i], loom_value_type(g, loom_graph_param_at(g, i)));
    if (!st) st = loom_tensor_fill_random(&in[i], seed, (uint64_t)i);
  }
  if (!st) st = loom_graph_run(lone, g, in, n_in, want, n_out, NULL);
  loom_estimate e;
  memset(&e, 0, sizeof e);
  if (!st) st = loom_graph_estimate(g, NULL, &e);
  if (!st) {
    /* From a sixteenth of the graph's peak (chunked, or too small to plan) to all of it. */
    loom_runner runner = {"cpu0", e.peak_bytes * rnd_in(s, 1, 16) / 16 + 4096};
    if (ocl) snprintf(runner.device, sizeof runner.device, "ocl0");
    plan_and_run(p, s, g, &runner, in, want, lir);
  } else if (!(p->inject && st == LOOM_ERR_OUT_OF_MEMORY)) {
    note(p, &p->c.errors, "lone run: %s (%s)", loom_last_error(), lir);
  }
  loom_estimate_deinit(&e);
  tensors_free(in, n_in);
  tensors_free(want, n_out);
  loom_graph_destroy(g);
}

/* Each thread computes its references in a cpu0 context of its own: alone, outside the runner
 * limits the shared context's stages put in force. */
static void *thread_main(void *arg) {
  proc *p = arg;
  uint64_t s = (uint64_t)getpid() * 0x9E3779B97F4A7C15ull ^ (uint64_t)(uintptr_t)&s;
  loom_context_options co;
  loom_context_options_init(&co);
  co.devices = "cpu0";
  loom_context *lone = NULL;
  if (loom_context_create(&co, &lone)) {
    note(p, &p->c.errors, "a context for the lone runs: %s%s", loom_last_error(), "");
    return NULL;
  }
  while (now_s() < p->until) one_graph(p, lone, &s);
  loom_context_destroy(lone);
  return NULL;
}

/* ---- a process of runs --------------------------------------------------------------------- */

/* The context with a random limit on each node; false when it cannot be made. */
static bool proc_open(proc *p, uint64_t *s) {
  loom_context_options co;
  loom_context_options_init(&co);
  co.devices = "cpu0,ocl0";
  if (loom_context_create(&co, &p->ctx)) {
    co.devices = "cpu0";
    if (loom_context_create(&co, &p->ctx)) return false;
  }
  if (loom_context_memory(p->ctx, &p->m)) return false;
  const char *ids[2] = {"cpu0", "ocl0"};
  for (int32_t i = 0; i < 2; i++) {
    p->node[i] = -1;
    if (loom_mem_node_find(p->m, ids[i], &p->node[i])) continue;
    p->node_limit[i] = rnd_in(s, 4, 64) << 20;
    if (loom_mem_set_limit(p->m, p->node[i], p->node_limit[i])) return false;
  }
  return true;
}

/* The node counters: the peak within the limit set, the stages that waited. */
static void proc_check_nodes(proc *p) {
  for (int32_t i = 0; i < 2; i++) {
    loom_mem_node_stats ms;
    if (p->node[i] < 0 || loom_mem_stats(p->m, p->node[i], &ms)) continue;
    if (ms.peak_in_use > p->node_limit[i])
      note(p, &p->c.limit_violations, "a node passed its limit%s%s", "", "");
    p->c.waits += ms.admission_waits;
  }
}

/* A child's work: threads of random runs for `seconds` (one thread with injection on), then the
 * checks that need the context gone. Returns its exit status. */
static int child_runs(uint64_t seed, int threads, double seconds, bool inject, int out_fd) {
  proc p;
  memset(&p, 0, sizeof p);
  pthread_mutex_init(&p.lock, NULL);
  uint64_t s = seed | 1;
  int64_t live = loom_testing_live_allocations();
  p.inject = inject;
  p.until = now_s() + seconds;
  if (!proc_open(&p, &s)) {
    fprintf(stderr, "soak: process %d: no context: %s\n", (int)getpid(), loom_last_error());
    return 1;
  }
  int n = inject ? 1 : threads;
  pthread_t th[16];
  for (int i = 0; i < n; i++) pthread_create(&th[i], NULL, thread_main, &p);
  for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
  proc_check_nodes(&p);
  loom_context_destroy(p.ctx);
  if (loom_testing_live_allocations() != live)
    note(&p, &p.c.leaks, "live allocations not back to zero%s%s", "", "");
  if (p.first_error[0]) fprintf(stderr, "soak: process %d: %s\n", (int)getpid(), p.first_error);
  p.c.processes = 1;
  if (write(out_fd, &p.c, sizeof p.c) != (ssize_t)sizeof p.c) return 1;
  return p.c.limit_violations || p.c.wrong_results || p.c.errors || p.c.leaks ? 1 : 0;
}

/* ---- loom-run processes interrupted while they run ------------------------------------ */

/* Files in dir (not . and ..), or -1 when it cannot be read (absent: 0); *hidden counts those
 * whose name begins with a dot (a writer's temporaries). */
static int count_files(const char *dir, char *first, size_t size, int *hidden) {
  DIR *d = opendir(dir);
  if (hidden) *hidden = 0;
  if (!d) return errno == ENOENT ? 0 : -1;
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    if (n++ == 0 && first) snprintf(first, size, "%s", e->d_name);
    if (hidden && e->d_name[0] == '.') ++*hidden;
  }
  closedir(d);
  return n;
}

static void remove_tree(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  char path[4096];
  for (struct dirent *e; (e = readdir(d));) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode))
      remove_tree(path);
    else
      unlink(path);
  }
  closedir(d);
  rmdir(dir);
}

/* Runs loom-run on a random chain into work/out, sends it SIGTERM or SIGINT after a random
 * delay (or lets it finish), and checks what is left: the outputs of a finished run, or nothing
 * of an interrupted one (no temporary, no output folder it made). */
static void tool_run(const char *tool, const char *work, uint64_t *s, counts *c, char *err, size_t err_size) {
  char lir[512], graph[4096], out[4096], limit[32], seed[32];
  random_lir(s, true, lir, sizeof lir);
  if (snprintf(graph, sizeof graph, "%s/g.lir", work) >= (int)sizeof graph ||
      snprintf(out, sizeof out, "%s/out", work) >= (int)sizeof out)
    return;
  FILE *f = fopen(graph, "w");
  if (!f || fputs(lir, f) < 0 || fclose(f)) return;
  snprintf(limit, sizeof limit, "%lld", (long long)rnd_in(s, 64, 4096) << 10);
  snprintf(seed, sizeof seed, "%llu", (unsigned long long)rnd_in(s, 1, 1000));
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, 1), dup2(null, 2);
    execl(tool, tool, graph, "--random", seed, "--limit", limit, "--out-dir", out, (char *)NULL);
    _exit(127);
  }
  if (pid < 0) return;
  bool interrupt = rnd_in(s, 0, 1);
  if (interrupt) {
    nanosleep(&(struct timespec){0, (long)rnd_in(s, 1, 300) * 1000000L}, NULL);
    kill(pid, rnd_in(s, 0, 1) ? SIGTERM : SIGINT);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  c->tool_runs++;
  /* 23: LeakSanitizer found a leak at its exit (the run itself finished) */
  bool leaked = WIFEXITED(status) && WEXITSTATUS(status) == 23;
  bool finished = WIFEXITED(status) && (WEXITSTATUS(status) == 0 || leaked);
  c->leaks += leaked;
  c->tool_interrupted += interrupt;
  char first[256] = "";
  int hidden = 0, outputs = count_files(out, first, sizeof first, &hidden);
  int all = strstr(lir, "return c, a") ? 2 : 1;
  /* Interrupted: nothing, or (the signal came after the last rename) every output. */
  bool clean = hidden == 0 && (finished ? outputs == all : outputs == 0 || outputs == all);
  if (!clean && !err[0] &&
      snprintf(err, err_size, "loom-run %s (%.200s): %d file%s left in its --out-dir (%.200s)",
               finished ? "finished" : "interrupted", lir, outputs, outputs == 1 ? "" : "s", first) < 0)
    err[0] = '\0';
  c->leftovers += !clean;
  remove_tree(out);
  unlink(graph);
  if (count_files(work, first, sizeof first, NULL) > 0) {
    c->leftovers++;
    if (!err[0]) snprintf(err, err_size, "loom-run left %s in its working folder", first);
  }
}

/* ---- the parent ------------------------------------------------------------------------- */

typedef struct slot {
  pid_t pid;
  int fd;
  double kill_at; /* 0: not to be killed */
  char dir[4096];
} slot;

/* Starts a child of runs in its own folder (its working directory), killed at a random time
 * or not; its counts come back on a pipe. */
static void spawn(slot *sl, const char *root, uint64_t *s, int threads, double left, int index) {
  int fds[2];
  if (pipe(fds)) return;
  snprintf(sl->dir, sizeof sl->dir, "%s/p%d", root, index);
  mkdir(sl->dir, 0700);
  double seconds = left < 8 ? left : (double)rnd_in(s, 2, 8);
  bool inject = rnd_in(s, 0, 3) == 0;
  uint64_t seed = rnd(s);
  fflush(NULL); /* the child exits through exit(), which would flush what we buffered twice */
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    if (chdir(sl->dir)) _exit(1);
    /* exit(), not _exit(): LeakSanitizer checks the process at its exit */
    exit(child_runs(seed, threads, seconds, inject, fds[1]));
  }
  close(fds[1]);
  sl->pid = pid;
  sl->fd = fds[0];
  sl->kill_at = rnd_in(s, 0, 3) == 0 ? now_s() + (double)rnd_in(s, 500, (int64_t)(seconds * 1000)) / 1000 : 0;
}

/* Collects a finished child: its counts, its exit status, what it left in its folder. */
static void reap(slot *sl, int status, counts *total, int *failures) {
  counts c;
  memset(&c, 0, sizeof c);
  bool killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL && sl->kill_at > 0;
  if (read(sl->fd, &c, sizeof c) == (ssize_t)sizeof c) counts_add(total, &c);
  close(sl->fd);
  total->kills += killed;
  if (!killed && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
    (*failures)++;
    fprintf(stderr, "soak: process %d ended with %s %d\n", (int)sl->pid,
            WIFSIGNALED(status) ? "signal" : "status",
            WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
  }
  char first[256] = "";
  if (count_files(sl->dir, first, sizeof first, NULL) > 0) {
    total->leftovers++;
    fprintf(stderr, "soak: process %d left %s in its folder\n", (int)sl->pid, first);
  }
  remove_tree(sl->dir);
  sl->pid = 0;
}

static const char *arg(int argc, char **argv, const char *name, const char *fallback) {
  for (int i = 1; i + 1 < argc; i++)
    if (!strcmp(argv[i], name)) return argv[i + 1];
  return fallback;
}

int main(int argc, char **argv) {
  double seconds = atof(arg(argc, argv, "--seconds", "60"));
  int procs = atoi(arg(argc, argv, "--procs", "3")), threads = atoi(arg(argc, argv, "--threads", "3"));
  const char *tool = arg(argc, argv, "--tool", NULL), *root = arg(argc, argv, "--dir", NULL);
  uint64_t s = strtoull(arg(argc, argv, "--seed", "1"), NULL, 10) * 0x9E3779B97F4A7C15ull | 1;
  if (!root || seconds <= 0 || procs < 1 || procs > 16 || threads < 1 || threads > 16) {
    fprintf(stderr,
            "usage: loom_soak --dir DIR [--seconds S] [--procs 1..16] [--threads 1..16] [--seed N] "
            "[--tool LOOM_RUN]\n");
    return 2;
  }
  mkdir(root, 0700);
  char work[4096];
  snprintf(work, sizeof work, "%s/tool", root);
  mkdir(work, 0700);
  slot slots[16];
  memset(slots, 0, sizeof slots);
  counts total;
  memset(&total, 0, sizeof total);
  int failures = 0, spawned = 0;
  char tool_err[512] = "";
  double end = now_s() + seconds;
  for (;;) {
    double t = now_s();
    bool busy = false;
    for (int i = 0; i < procs; i++) {
      slot *sl = &slots[i];
      if (!sl->pid && t < end - 1) spawn(sl, root, &s, threads, end - t, spawned++);
      if (!sl->pid) continue;
      busy = true;
      if (sl->kill_at > 0 && t >= sl->kill_at) kill(sl->pid, SIGKILL);
      int status = 0;
      if (waitpid(sl->pid, &status, WNOHANG) == sl->pid) reap(sl, status, &total, &failures);
    }
    if (tool && t < end - 1)
      tool_run(tool, work, &s, &total, tool_err, sizeof tool_err);
    else
      nanosleep(&(struct timespec){0, 20000000L}, NULL);
    if (!busy && t >= end - 1) break;
  }
  remove_tree(work);
  if (tool_err[0]) fprintf(stderr, "soak: %s\n", tool_err);
  printf(
      "soak: %.0f s, %ld processes (%ld killed), %ld runs (%ld with allocation failures injected, %ld "
      "refused cleanly), %ld stages waited for memory; loom-run: %ld runs (%ld interrupted)\n"
      "soak: %ld limit violations, %ld wrong results, %ld errors, %ld leaks, %ld leftovers, %d processes "
      "failed\n",
      seconds, total.processes + total.kills, total.kills, total.runs, total.injected, total.refused,
      total.waits, total.tool_runs, total.tool_interrupted, total.limit_violations, total.wrong_results,
      total.errors, total.leaks, total.leftovers, failures);
  bool bad = total.limit_violations || total.wrong_results || total.errors || total.leaks ||
             total.leftovers || failures;
  return bad ? 1 : 0;
}
