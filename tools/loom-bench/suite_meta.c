/* What a suite report says about the run besides its figures (suite.h, suite_meta): when, which
 * build, which machine, how many threads, the environment that changes timings and how busy the
 * machine was. Without these two reports cannot be told apart, and compare cannot say whether
 * a difference is Loom's or the machine's (issue 33). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#endif
#include <cblas.h>
#include <omp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loom/internal/cpu.h"
#include "loom/internal/json.h"
#include "suite.h"

extern char **environ;

/* Prefixes of the variables that change what a run measures: thread counts and placement
 * (OpenMP, GNU's and LLVM's runtimes, OpenBLAS), PoCL's devices, Loom's own switches. */
static const char *const env_prefixes[] = {"OMP_", "GOMP_", "KMP_", "OPENBLAS_", "POCL_", "LOOM_"};

static void read_loadavg(double out[3]) {
  out[0] = out[1] = out[2] = -1;
  FILE *f = fopen("/proc/loadavg", "r");
  if (!f) return;
  if (fscanf(f, "%lf %lf %lf", &out[0], &out[1], &out[2]) != 3) out[0] = out[1] = out[2] = -1;
  fclose(f);
}

static void compiler_name(char *out, size_t size) {
#if defined(__clang__)
  snprintf(out, size, "clang %d.%d.%d", __clang_major__, __clang_minor__, __clang_patchlevel__);
#elif defined(__GNUC__)
  snprintf(out, size, "GCC %d.%d.%d", __GNUC__, __GNUC_MINOR__, __GNUC_PATCHLEVEL__);
#else
  snprintf(out, size, "unknown C compiler");
#endif
}

/* "NAME=value\n" lines of the variables that matter, in environ's order. */
static void read_environment(char *out, size_t size) {
  out[0] = '\0';
  size_t used = 0;
  for (char **e = environ; e && *e; e++)
    for (size_t p = 0; p < sizeof env_prefixes / sizeof env_prefixes[0]; p++)
      if (!strncmp(*e, env_prefixes[p], strlen(env_prefixes[p]))) {
        int n = snprintf(out + used, size - used, "%s\n", *e);
        if (n < 0 || (size_t)n >= size - used) { /* cut at a whole line rather than mid-value */
          out[used] = '\0';
          return;
        }
        used += (size_t)n;
        break;
      }
}

void suite_meta_begin(suite_meta *m, const loom_context *ctx) {
  memset(m, 0, sizeof *m);
  time_t now = time(NULL);
  struct tm utc;
  gmtime_r(&now, &utc);
  strftime(m->date, sizeof m->date, "%Y-%m-%dT%H:%M:%SZ", &utc);
  snprintf(m->loom_version, sizeof m->loom_version, "%s", loom_version());
  snprintf(m->commit, sizeof m->commit, "%s", loom_version_commit());
#ifdef LOOM_BUILD_TYPE /* CMake's CMAKE_BUILD_TYPE; empty with a multi-config generator */
  snprintf(m->build_type, sizeof m->build_type, "%s", LOOM_BUILD_TYPE[0] ? LOOM_BUILD_TYPE : "unspecified");
#else
  snprintf(m->build_type, sizeof m->build_type, "unknown");
#endif
  compiler_name(m->compiler, sizeof m->compiler);
  loom_host_info h;
  if (loom_context_host_info(ctx, &h) == LOOM_OK) {
    snprintf(m->cpu_model, sizeof m->cpu_model, "%s", h.cpu_model);
    m->host_cores = h.cores;
    m->host_pus = h.pus;
  }
  loom__cpu_uarch u;
  loom__cpu_uarch_host(&u);
  snprintf(m->uarch, sizeof m->uarch, "%s", u.name);
  snprintf(m->isa, sizeof m->isa, "%s", u.isa_name);
  m->flops_per_cycle_f32 = u.flops_per_cycle_f32;
  m->flops_per_cycle_f64 = u.flops_per_cycle_f64;
  snprintf(m->flops_source, sizeof m->flops_source, "%s", u.source);
  m->omp_threads = omp_get_max_threads();
  m->openblas_threads = openblas_get_num_threads();
  cpu_set_t set;
  m->cores_used = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : -1;
  read_environment(m->environment, sizeof m->environment);
  read_loadavg(m->load_before);
}

void suite_meta_end(suite_meta *m) {
  read_loadavg(m->load_after);
}

void suite_meta_print(const suite_meta *m, FILE *out) {
  fprintf(out, "date %s; Loom %s, commit %s, %s build, %s\n\n", m->date, m->loom_version, m->commit,
          m->build_type, m->compiler);
  fprintf(out, "machine: %s, %s (%s; FLOPs per cycle per core f32 %d, f64 %d: %s); %d cores, %d PUs\n\n",
          m->cpu_model[0] ? m->cpu_model : "unknown CPU", m->uarch, m->isa, m->flops_per_cycle_f32,
          m->flops_per_cycle_f64, m->flops_source, (int)m->host_cores, (int)m->host_pus);
  fprintf(out, "threads: OpenMP %d, OpenBLAS %d, %d CPUs in this process's affinity mask\n\n",
          (int)m->omp_threads, (int)m->openblas_threads, (int)m->cores_used);
  fputs("environment:", out);
  if (!m->environment[0]) fputs(" none of OMP_*, GOMP_*, KMP_*, OPENBLAS_*, POCL_*, LOOM_* set", out);
  for (const char *p = m->environment; *p;) {
    const char *e = strchr(p, '\n');
    fprintf(out, " `%.*s`", (int)(e - p), p);
    p = e + 1;
  }
  fprintf(out, "\n\nload average (1, 5, 15 min): %.2f %.2f %.2f before, %.2f %.2f %.2f after\n\n",
          m->load_before[0], m->load_before[1], m->load_before[2], m->load_after[0], m->load_after[1],
          m->load_after[2]);
  if (m->host_cores > 0 && (m->load_before[0] > m->host_cores || m->load_after[0] > m->host_cores))
    fprintf(out,
            "**busy machine**: more runnable threads than its %d cores; a parallel region waits for its last "
            "thread's turn, so multi-threaded figures may be slowed many times over\n\n",
            (int)m->host_cores);
}

static void json_load(loom__json *j, const char *key, const double v[3]) {
  loom__json_key(j, key);
  if (v[0] < 0) {
    loom__json_null(j);
    return;
  }
  loom__json_begin_array(j);
  for (int i = 0; i < 3; i++) loom__json_double(j, v[i]);
  loom__json_end_array(j);
}

void suite_meta_json(const suite_meta *m, loom__json *j) {
  loom__json_kv_string(j, "date", m->date);
  loom__json_kv_string(j, "commit", m->commit);
  loom__json_kv_string(j, "build_type", m->build_type);
  loom__json_kv_string(j, "compiler", m->compiler);
  loom__json_key(j, "machine");
  loom__json_begin_object(j);
  loom__json_kv_string(j, "cpu_model", m->cpu_model);
  loom__json_kv_string(j, "uarch", m->uarch);
  loom__json_kv_string(j, "isa", m->isa);
  loom__json_kv_int64(j, "flops_per_cycle_f32", m->flops_per_cycle_f32);
  loom__json_kv_int64(j, "flops_per_cycle_f64", m->flops_per_cycle_f64);
  loom__json_kv_string(j, "flops_source", m->flops_source);
  loom__json_kv_int64(j, "cores", m->host_cores);
  loom__json_kv_int64(j, "pus", m->host_pus);
  loom__json_end_object(j);
  loom__json_key(j, "threads");
  loom__json_begin_object(j);
  loom__json_kv_int64(j, "openmp", m->omp_threads);
  loom__json_kv_int64(j, "openblas", m->openblas_threads);
  loom__json_kv_int64(j, "cpus_in_affinity", m->cores_used);
  loom__json_end_object(j);
  loom__json_key(j, "environment");
  loom__json_begin_object(j);
  for (const char *p = m->environment; *p;) {
    const char *eq = strchr(p, '='), *e = strchr(p, '\n');
    char key[128];
    snprintf(key, sizeof key, "%.*s", (int)(eq - p), p);
    loom__json_key(j, key);
    loom__json_string_n(j, eq + 1, (size_t)(e - eq - 1));
    p = e + 1;
  }
  loom__json_end_object(j);
  json_load(j, "load_before", m->load_before);
  json_load(j, "load_after", m->load_after);
}
