/* loom-run --simulate PLATFORM.json: the real planner (rewrites, chunking into loops, stages)
 * for the platform's devices, then the scheduler against the platform's models; no kernel
 * runs, no device of this machine is touched. --simulate here: this machine's devices and
 * calibrated models (StarPU's simulation of a machine from its own history-based models), so
 * that what several devices would gain can be read off before running, or why they would not. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loom_run.h"

/* One runner per device of the platform, at its memory; or --runners as given, checked
 * against the platform's devices. */
static int sim_runners(const run_options *opts, const loom_sched_platform *pf, loom_runner **out,
                       int32_t *n) {
  if (opts->runners) {
    if (loom_runners_parse(opts->runners, out, n))
      return run_fail(EXIT_USAGE, "--runners: %s", loom_last_error());
    for (int32_t i = 0; i < *n; i++) {
      if (loom_sched_platform_find(pf, (*out)[i].device) < 0)
        return run_fail(EXIT_USAGE, "--runners: runner %d: %s has no device %s", (int)i,
                        strcmp(opts->simulate, "here") == 0 ? "this machine's platform" : opts->simulate,
                        (*out)[i].device);
    }
    return 0;
  }
  *n = loom_sched_platform_device_count(pf);
  if (!(*out = calloc((size_t)*n, sizeof **out))) return run_fail(EXIT_RUN, "out of memory");
  for (int32_t i = 0; i < *n; i++) {
    const loom_sched_device *d = loom_sched_platform_device(pf, i);
    snprintf((*out)[i].device, sizeof(*out)[i].device, "%s", d->id);
    (*out)[i].limit = d->memory;
  }
  return 0;
}

/* The platform file's devices, or with "here" this machine's with their calibrated models;
 * --devices: which of them, in the list's order, each once (as a real run takes them). */
static int sim_platform(const run_options *opts, loom_sched_platform **out) {
  const char *list = opts->devices && strcmp(opts->devices, "auto") != 0 ? opts->devices : NULL;
  loom_sched_platform *whole = NULL;
  if (strcmp(opts->simulate, "here") == 0) {
    loom_context *ctx = NULL;
    if (loom_context_create(NULL, &ctx)) return run_fail_loom("creating a context");
    loom_status st = loom_sched_platform_from_context(ctx, list, &whole);
    loom_context_destroy(ctx);
    if (st) return run_fail_loom("--simulate here");
  } else if (loom_sched_platform_load(opts->simulate, &whole)) {
    return run_fail_loom(NULL);
  }
  if (!list) {
    *out = whole;
    return 0;
  }
  loom_status st = loom_sched_platform_subset(whole, list, out);
  loom_sched_platform_destroy(whole);
  return st ? run_fail(EXIT_USAGE, "--devices: %s", loom_last_error()) : 0;
}

typedef struct sim_state {
  loom_graph *graph, *optimized;
  loom_sched_platform *platform;
  loom_runner *runners;
  int32_t n_runners;
  loom_plan *plan;
  loom_sched_problem *problem;
  loom_rewrite_report report;
  loom_sched_result result;
} sim_state;

static void sim_state_free(sim_state *s) {
  loom_sched_result_deinit(&s->result);
  loom_sched_problem_destroy(s->problem);
  loom_plan_destroy(s->plan);
  loom_rewrite_report_deinit(&s->report);
  free(s->runners);
  loom_sched_platform_destroy(s->platform);
  loom_graph_destroy(s->optimized);
  loom_graph_destroy(s->graph);
}

static int sim_plan(sim_state *s, const run_options *opts, loom_sched_policy policy) {
  loom_optimize_options o;
  loom_optimize_options_init(&o);
  /* Fusion before chunking makes one op over the whole space where that fits: right for one
   * device, but nothing to share between several, so there the pieces come first (each
   * piece's body is fused after). */
  if (loom_sched_platform_device_count(s->platform) == 1) o.fused_runs = loom_fused_body_runs_everywhere;
  o.disabled = opts->no_rewrite;
  o.n_disabled = opts->n_no_rewrite;
  char note[256] = "";
  /* Pieces sized for the smallest runner, so that any device can take any piece: a real run
   * chunks for the largest, which would leave every smaller device idle here. */
  loom_runner *sized = malloc(sizeof *sized * (size_t)s->n_runners);
  if (!sized) return run_fail(EXIT_RUN, "out of memory");
  int64_t smallest = s->runners[0].limit;
  for (int32_t i = 0; i < s->n_runners; i++)
    smallest = s->runners[i].limit < smallest ? s->runners[i].limit : smallest;
  for (int32_t i = 0; i < s->n_runners; i++) sized[i] = s->runners[i], sized[i].limit = smallest;
  loom_status st = loom_graph_optimize_for_runners(s->graph, sized, s->n_runners, &o, &s->optimized,
                                                   &s->report, note, sizeof note);
  free(sized);
  if (st) return run_fail_loom(NULL);
  if (note[0]) fprintf(stderr, "loom-run: %s\n", note);
  /* dmda and eager schedule the stages a shared run runs (loom_share_cut: independent
   * branches are stages of their own); fixed the plan's stages on their runners. */
  st = policy != LOOM_SCHED_FIXED && s->n_runners > 1
           ? loom_share_cut(s->optimized, &s->runners[0], s->n_runners, &s->plan)
           : loom_plan_split_by_memory(s->optimized, s->runners, s->n_runners, &s->plan);
  if (st) return run_fail_loom(NULL);
  if (loom_sched_problem_from_plan(s->plan, s->platform, &s->problem)) return run_fail_loom(NULL);
  return 0;
}

/* --stats-json with --simulate: the schedule (loom_sched_result_write_json), written under a
 * temporary and renamed when complete (outputs.c): a failure leaves an earlier file as it was. */
static int write_json(const sim_state *s, const char *path) {
  run_staged staged = {0};
  const char *temp = NULL;
  int fd = -1, rc = run_stage_file(&staged, path, "--stats-json", &temp, &fd);
  FILE *f = rc ? NULL : fdopen(fd, "w");
  if (!rc && !f) {
    close(fd);
    rc = run_fail(EXIT_RUN, "--stats-json: %s: %s", path, strerror(errno));
  }
  if (f) {
    loom_status st = loom_sched_result_write_json(&s->result, s->platform, f);
    if (fclose(f) != 0 || st) rc = run_fail(EXIT_RUN, "--stats-json: %s: write error", path);
  }
  if (!rc) rc = run_stage_commit(&staged);
  run_stage_free(&staged);
  return rc;
}

int run_simulate(const run_options *opts) {
  sim_state s = {0};
  loom_sched_policy policy = LOOM_SCHED_DMDA;
  int rc = 0;
  if (opts->policy && !loom_sched_policy_parse(opts->policy, &policy))
    return run_fail(EXIT_USAGE, "--policy: '%s' is none of dmda, eager, fixed", opts->policy);
  if (loom_graph_load_any(opts->graph_path, &s.graph)) rc = run_fail_loom(NULL);
  if (!rc) rc = sim_platform(opts, &s.platform);
  if (!rc) rc = sim_runners(opts, s.platform, &s.runners, &s.n_runners);
  if (!rc) rc = sim_plan(&s, opts, policy);
  if (!rc && loom_sched_schedule(s.problem, s.platform, policy, &s.result)) rc = run_fail_loom(NULL);
  if (!rc) {
    printf("%s on %s (simulated, no kernel run): %d stages, %d tasks\n", opts->graph_path,
           strcmp(opts->simulate, "here") == 0 ? "this machine's models" : opts->simulate,
           (int)loom_plan_stage_count(s.plan), (int)loom_sched_problem_task_count(s.problem));
    loom_sched_result_print(&s.result, s.platform, stdout);
  }
  if (!rc && opts->stats_json) rc = write_json(&s, opts->stats_json);
  sim_state_free(&s);
  return rc;
}
