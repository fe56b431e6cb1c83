/* Independent stages on different devices at once (splitter/share_cut.h, loom/share.h): a
 * graph of two towers of dots joined at the end is cut by branch (each tower a stage, the join
 * a third), the cut graph computes what the graph does, graphs without two heavy independent
 * branches are left to the cut around loops, and a shared run on ocl0 and ocl1 (PoCL's two
 * pthread devices, tests/share.cmake) runs one tower on each, gives the whole run's results
 * whatever the policy, fails cleanly when one device refuses memory, and survives every host
 * allocation failing in turn. Integer inputs keep every dot exact, so results compare bit for
 * bit across devices. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "harness.h"
#include "loom/sched.h"
#include "runtime/stage_history.h"
#include "share_test.h"
#include "splitter/share_cut.h"

/* Two towers (x's and y's) of two dots each, 512 x 512: |a3| <= 512 x 3 x 512 < 2^24, exact. */
#define TOWERS_LIR(N)                                                      \
  "graph towers(x: f32[" N "," N "], y: f32[" N "," N "], w: f32[" N "," N \
  "]) {\n"                                                                 \
  "  a1 = dot x w\n"                                                       \
  "  a2 = relu a1\n"                                                       \
  "  a3 = dot a2 w\n"                                                      \
  "  b1 = dot y w\n"                                                       \
  "  b2 = relu b1\n"                                                       \
  "  b3 = dot b2 w\n"                                                      \
  "  s = add a3 b3\n"                                                      \
  "  return s, a2\n"                                                       \
  "}\n"

typedef share_fixture fixture;

/* x and y in {0..3}, w in {-1, 0, 1}. */
static void towers_integers(float *v, int32_t p, int64_t n) {
  for (int64_t i = 0; i < n; i++) v[i] = p < 2 ? floorf(v[i] * 4) : floorf(v[i] * 3) - 1;
}

static void fixture_deinit(fixture *f) {
  share_fixture_deinit(f);
}

static bool fixture_init(fixture *f, const char *lir) {
  return share_fixture_init(f, lir, "towers.lir", 11, towers_integers);
}

static bool fixture_init_opencl(fixture *f, const char *lir) {
  return share_fixture_init_opencl(f, lir, "towers.lir", 11, towers_integers);
}

/* The graph as it is (no rewrite: chunking would make its dots loops), planned for the first
 * device, run shared on `devices` with `policy`, with the context's history of stage times
 * kept (runs before it placed by it) or forgotten first. */
static loom_status run_towers_history(fixture *f, const char *devices, loom_sched_policy policy,
                                      bool keep_history, loom_tensor *out, loom_share_stats *st) {
  if (!keep_history) loom__history_clear(f->ctx);
  loom_runner *runners = NULL;
  int32_t n = 0;
  loom_plan *plan = NULL;
  loom_status s = loom_share_runners(f->ctx, devices, NULL, 0, &runners, &n);
  if (!s) s = loom_share_cut(f->g, runners, n, &plan);
  loom_share_options so;
  loom_share_options_init(&so);
  so.devices = devices;
  so.policy = policy;
  if (!s) s = loom_plan_run_shared(f->ctx, plan, &so, f->in, 3, out, 2, st);
  loom_plan_destroy(plan);
  free(runners);
  return s;
}

/* As run_towers_history, the history forgotten: the placement without it (no models either). */
static loom_status run_towers(fixture *f, const char *devices, loom_sched_policy policy, loom_tensor *out,
                              loom_share_stats *st) {
  return run_towers_history(f, devices, policy, false, out, st);
}

/* The op of g that makes the value named `name`. */
static int32_t op_of(const loom_graph *g, const char *name) {
  for (int32_t o = 0; o < g->n_ops; o++)
    for (int32_t r = 0; r < g->ops[o].n_outputs; r++) {
      const char *n = g->values[g->ops[o].outputs[r]].name;
      if (n && strcmp(n, name) == 0) return o;
    }
  return -1;
}

TEST(branch_cut_finds_the_towers) {
  fixture f;
  if (!fixture_init(&f, TOWERS_LIR("64"))) return fixture_deinit(&f);
  loom__branch_cut cut;
  bool found = false;
  ASSERT_OK(loom__branch_cut_make(f.g, &cut, &found));
  ASSERT_TRUE(found);
  ASSERT_EQ(cut.n_stages, 3);
  ASSERT_EQ(cut.graph->n_ops, f.g->n_ops);
  for (int32_t o = 1; o < cut.graph->n_ops; o++) ASSERT_TRUE(cut.stage_of_op[o] >= cut.stage_of_op[o - 1]);
  const loom_graph *g = cut.graph;
  int32_t a = cut.stage_of_op[op_of(g, "a1")], b = cut.stage_of_op[op_of(g, "b1")];
  ASSERT_TRUE(a != b);
  ASSERT_EQ(cut.stage_of_op[op_of(g, "a2")], a);
  ASSERT_EQ(cut.stage_of_op[op_of(g, "a3")], a);
  ASSERT_EQ(cut.stage_of_op[op_of(g, "b3")], b);
  ASSERT_EQ(cut.stage_of_op[op_of(g, "s")], 2); /* the join, after both */
  ASSERT_TRUE(cut.stage_work[a] > 2 * cut.stage_work[2]);
  /* the reordered graph computes what the graph does */
  loom_tensor out[2];
  ASSERT_OK(loom_graph_run(f.ctx, cut.graph, f.in, 3, out, 2, NULL));
  ASSERT_TRUE(share_test_outputs_equal(out, f.ref));
  share_test_release(out, NULL);
  loom__branch_cut_deinit(&cut);
  loom__branch_cut_deinit(&cut); /* twice: a zeroed cut */
  fixture_deinit(&f);
}

/* A fork: two dots reading one dot's result are independent of each other, not of it. */
TEST(branch_cut_finds_a_fork) {
  static const char *const lir =
      "graph fork(x: f32[64,64], w: f32[64,64]) {\n"
      "  a1 = dot x w\n  b1 = dot a1 w\n  c1 = dot a1 w\n"
      "  s = add b1 c1\n  return s\n}\n";
  loom_graph *g = NULL;
  ASSERT_OK(loom_graph_parse(lir, strlen(lir), "fork.lir", &g));
  loom__branch_cut cut;
  bool found = false;
  ASSERT_OK(loom__branch_cut_make(g, &cut, &found));
  ASSERT_TRUE(found);
  ASSERT_EQ(cut.n_stages, 4);
  ASSERT_EQ(cut.stage_of_op[op_of(cut.graph, "a1")], 0);
  ASSERT_TRUE(cut.stage_of_op[op_of(cut.graph, "b1")] != cut.stage_of_op[op_of(cut.graph, "c1")]);
  ASSERT_EQ(cut.stage_of_op[op_of(cut.graph, "s")], 3);
  loom__branch_cut_deinit(&cut);
  loom_graph_destroy(g);
}

/* A chain, a heavy tower beside a light one and a lone op have no two heavy independent
 * branches: they are left to the cut around loops. */
TEST(branch_cut_leaves_graphs_without_independent_work) {
  static const char *const graphs[] = {
      "graph chain(x: f32[64,64], w: f32[64,64]) {\n"
      "  a1 = dot x w\n  a2 = relu a1\n  a3 = dot a2 w\n  return a3\n}\n",
      "graph light(x: f32[512,512], y: f32[512,512], w: f32[512,512]) {\n"
      "  a1 = dot x w\n  a2 = dot a1 w\n  b1 = relu y\n  s = add a2 b1\n  return s\n}\n",
      "graph lone(x: f32[64,64], w: f32[64,64]) {\n  a1 = dot x w\n  return a1\n}\n",
  };
  for (size_t i = 0; i < sizeof graphs / sizeof *graphs; i++) {
    loom_graph *g = NULL;
    ASSERT_OK(loom_graph_parse(graphs[i], strlen(graphs[i]), "g.lir", &g));
    loom__branch_cut cut;
    bool found = true;
    ASSERT_OK(loom__branch_cut_make(g, &cut, &found));
    if (found)
      loom_test_fail(__FILE__, __LINE__, "graph %zu cut by branch into %d stages", i, (int)cut.n_stages);
    ASSERT_TRUE(cut.graph == NULL && cut.stage_of_op == NULL);
    loom_graph_destroy(g);
  }
}

/* ocl0 and ocl1: each runs a tower (the second device takes the second tower while the first
 * runs the first: neither policy waits for a busy device when another is free), then one of
 * them the join; the results are the whole run's. */
TEST(branches_run_at_once_on_two_devices) {
  fixture f;
  if (!fixture_init_opencl(&f, TOWERS_LIR("512"))) return;
  for (int policy = LOOM_SCHED_EAGER; policy <= LOOM_SCHED_DMDA; policy++) {
    for (int round = 0; round < 2; round++) { /* the first builds the devices' programs */
      loom_tensor out[2];
      loom_share_stats st;
      memset(&st, 0, sizeof st);
      ASSERT_OK(run_towers(&f, "ocl0,ocl1", (loom_sched_policy)policy, out, &st));
      ASSERT_TRUE(share_test_outputs_equal(out, f.ref));
      ASSERT_EQ(st.n_stages, 3);
      ASSERT_EQ(st.n_shared, 0);
      ASSERT_EQ(st.devices[0].stages + st.devices[1].stages, 3);
      /* A tower's result stays on its device for the join: what leaves the devices is a2 and s
       * (returned, read back at the end) and the tower result the join's device lacks, 1 MiB
       * each; through the host it was 4 MiB. Under dmda the join goes to ocl0, first in the
       * list, which then reads b3 from ocl1 beside x and w. */
      ASSERT_EQ(st.devices[0].bytes_out + st.devices[1].bytes_out, 3 << 20);
      if (policy == LOOM_SCHED_DMDA) {
        ASSERT_EQ(st.devices[0].bytes_out, 2 << 20);
        ASSERT_EQ(st.devices[0].bytes_in, 3 << 20);
      }
      /* each stage timed by its device's clock (OpenCL event profiling) */
      ASSERT_EQ(st.devices[0].device_timed, st.devices[0].stages);
      ASSERT_EQ(st.devices[1].device_timed, st.devices[1].stages);
      ASSERT_TRUE(st.devices[0].busy_seconds > 0 && st.devices[1].busy_seconds > 0);
      if (st.devices[0].stages < 1 || st.devices[1].stages < 1)
        loom_test_fail(__FILE__, __LINE__, "%s: stages on ocl0 %d, ocl1 %d: a device ran both towers",
                       loom_sched_policy_name((loom_sched_policy)policy), (int)st.devices[0].stages,
                       (int)st.devices[1].stages);
      share_test_release(out, &st);
    }
  }
  /* cpu0 beside ocl0 (eager: PoCL's device takes work beside cpu0): cpu0 has no device clock,
   * its stages are timed on the host */
  {
    loom_tensor o2[2];
    loom_share_stats s2;
    memset(&s2, 0, sizeof s2);
    ASSERT_OK(run_towers(&f, "cpu0,ocl0", LOOM_SCHED_EAGER, o2, &s2));
    ASSERT_TRUE(share_test_outputs_equal(o2, f.ref));
    ASSERT_EQ(s2.devices[0].device_timed, 0);
    ASSERT_EQ(s2.devices[1].device_timed, s2.devices[1].stages);
    share_test_release(o2, &s2);
  }
  /* one device: one stage, as loom_plan_run runs it */
  loom_tensor out[2];
  loom_share_stats st;
  memset(&st, 0, sizeof st);
  ASSERT_OK(run_towers(&f, "ocl0", LOOM_SCHED_DMDA, out, &st));
  ASSERT_EQ(st.n_stages, 1);
  ASSERT_TRUE(share_test_outputs_equal(out, f.ref));
  share_test_release(out, &st);
  fixture_deinit(&f);
}

/* dmda by the stages' measured history (no models): with the towers' footprint (both towers
 * share one) seeded as 1 ms on one device and 1000 s on the other, the fast one runs both
 * towers; the join, of no history yet, goes to the first free device of the list. The run's
 * own times join the history. */
TEST(branches_follow_the_stage_history) {
  fixture f;
  if (!fixture_init_opencl(&f, TOWERS_LIR("512"))) return;
  loom_runner r0 = {"ocl0", 1 << 30};
  loom_plan *cut = NULL;
  ASSERT_OK(loom_share_cut(f.g, &r0, 2, &cut));
  loom_stage_info st0, st1, st2;
  ASSERT_OK(loom_plan_stage(cut, 0, &st0));
  ASSERT_OK(loom_plan_stage(cut, 1, &st1));
  ASSERT_OK(loom_plan_stage(cut, 2, &st2));
  uint64_t tower = loom__graph_footprint(st0.graph), join = loom__graph_footprint(st2.graph);
  ASSERT_TRUE(tower == loom__graph_footprint(st1.graph));
  ASSERT_TRUE(tower != join);
  loom_plan_destroy(cut);
  for (int fast = 0; fast < 2; fast++) {
    const char *dev[2] = {"ocl0", "ocl1"};
    loom__history_clear(f.ctx);
    loom__history_put(f.ctx, tower, dev[fast], 1e-3);
    loom__history_put(f.ctx, tower, dev[1 - fast], 1000);
    loom_tensor out[2];
    loom_share_stats st;
    memset(&st, 0, sizeof st);
    ASSERT_OK(run_towers_history(&f, "ocl0,ocl1", LOOM_SCHED_DMDA, true, out, &st));
    ASSERT_TRUE(share_test_outputs_equal(out, f.ref));
    /* the fast device: both towers (and the join where it is ocl0, first in the list) */
    ASSERT_EQ(st.devices[fast].stages, fast == 0 ? 3 : 2);
    ASSERT_EQ(st.devices[1 - fast].stages, fast == 0 ? 0 : 1);
    double t = 0;
    ASSERT_TRUE(loom__history_get(f.ctx, tower, dev[fast], &t) && t != 1e-3);
    ASSERT_TRUE(loom__history_get(f.ctx, tower, dev[1 - fast], &t) && t == 1000);
    ASSERT_TRUE(loom__history_get(f.ctx, join, "ocl0", &t) && t > 0);
    share_test_release(out, &st);
  }
  fixture_deinit(&f);
}

/* The history keeps one entry per footprint and device, the oldest giving way when full. */
TEST(stage_history_keeps_the_latest) {
  loom_context *ctx = NULL;
  ASSERT_OK(loom_context_create(NULL, &ctx));
  double t = 0;
  ASSERT_TRUE(!loom__history_get(ctx, 7, "cpu0", &t));
  loom__history_put(ctx, 7, "cpu0", 2.0);
  loom__history_put(ctx, 7, "cpu0", 4.0); /* halfway: 3 */
  loom__history_put(ctx, 7, "cpu0", -1);  /* not a time: ignored */
  ASSERT_TRUE(loom__history_get(ctx, 7, "CPU0", &t));
  ASSERT_NEAR(t, 3.0, 1e-12);
  for (uint64_t k = 100; k < 100 + LOOM__HISTORY_SIZE; k++) loom__history_put(ctx, k, "ocl0", 1.0);
  ASSERT_TRUE(!loom__history_get(ctx, 7, "cpu0", &t)); /* the oldest went */
  ASSERT_TRUE(loom__history_get(ctx, 100 + LOOM__HISTORY_SIZE - 1, "ocl0", &t));
  loom__history_clear(ctx);
  ASSERT_TRUE(!loom__history_get(ctx, 100, "ocl0", &t));
  loom_context_destroy(ctx);
}

/* Sets `name` to `value` (NULL: unset), returning the old value in *old (free it). */
static void swap_env(const char *name, const char *value, char **old) {
  const char *was = getenv(name);
  *old = was ? strdup(was) : NULL;
  if (value)
    setenv(name, value, 1);
  else
    unsetenv(name);
}

/* Puts back what swap_env took (and frees it). */
static void restore_env(const char *name, char *old) {
  if (old)
    setenv(name, old, 1);
  else
    unsetenv(name);
  free(old);
}

/* A new context, a time kept on `device` in it (when seconds > 0), destroyed: what a process
 * running one stage leaves on disk. */
static void one_context(const char *device, uint64_t footprint, double seconds) {
  loom_context *ctx = NULL;
  ASSERT_OK(loom_context_create(NULL, &ctx));
  if (seconds > 0) loom__history_put(ctx, footprint, device, seconds);
  loom_context_destroy(ctx);
}

/* What a new context finds of footprint on device (-1: nothing). */
static double found(const char *device, uint64_t footprint) {
  loom_context *ctx = NULL;
  double t = -1;
  if (loom_context_create(NULL, &ctx)) return -2;
  if (!loom__history_get(ctx, footprint, device, &t)) t = -1;
  loom_context_destroy(ctx);
  return t;
}

/* The history outlives the context (StarPU's history-based models are files): a context's
 * times are on disk when it is destroyed, the next context (the next process) places by them,
 * merged with what the file had; devices of one name share the file (ocl0's time is ocl1's);
 * a malformed file is as none and is replaced; LOOM_STAGE_HISTORY=0 neither reads nor writes;
 * a cache folder that cannot be written loses nothing else, not even the caller's last error. */
TEST(stage_history_is_kept_on_disk) {
  char dir[] = "/tmp/loom-history-XXXXXX";
  ASSERT_TRUE(mkdtemp(dir) != NULL);
  char *old_dir, *old_flag;
  swap_env("LOOM_CACHE_DIR", dir, &old_dir);
  swap_env("LOOM_STAGE_HISTORY", "1", &old_flag);
  loom_context *ctx = NULL;
  ASSERT_OK(loom_context_create(NULL, &ctx));
  loom__history_put(ctx, 42, "cpu0", 2.0);
  loom__history_put(ctx, 42, "cpu0", 4.0);
  loom__history_put(ctx, 43, "cpu0", 1.0);
  loom_device_info cpu;
  ASSERT_OK(loom_context_device_info(ctx, 0, &cpu));
  char file[1200];
  ASSERT_OK(loom_sched_model_path(cpu.name, loom_sched_device_driver(&cpu), file, sizeof file));
  snprintf(file + strlen(file) - 5, 20, ".stages.json");
  bool two_opencl = share_test_two_opencl(ctx);
  loom_context_destroy(ctx);
  ASSERT_TRUE(access(file, R_OK) == 0);
  ASSERT_NEAR(found("cpu0", 42), 3.0, 1e-12);
  one_context("cpu0", 44, 5.0); /* merged with the file's: 42 and 43 stay */
  ASSERT_NEAR(found("cpu0", 43), 1.0, 1e-12);
  ASSERT_NEAR(found("cpu0", 44), 5.0, 1e-12);
  if (two_opencl) {
    one_context("ocl0", 50, 0.25);
    ASSERT_NEAR(found("ocl1", 50), 0.25, 1e-12);
  }
  FILE *f = fopen(file, "w");
  ASSERT_TRUE(f != NULL);
  fputs("{\"stages\": [{\"footprint\": 12}", f);
  fclose(f);
  ASSERT_NEAR(found("cpu0", 42), -1, 0);
  one_context("cpu0", 45, 0.5);
  ASSERT_NEAR(found("cpu0", 45), 0.5, 1e-12);
  setenv("LOOM_STAGE_HISTORY", "0", 1);
  one_context("cpu0", 46, 0.5);
  ASSERT_NEAR(found("cpu0", 45), -1, 0); /* not read either */
  setenv("LOOM_STAGE_HISTORY", "1", 1);
  ASSERT_NEAR(found("cpu0", 46), -1, 0);
  ASSERT_NEAR(found("cpu0", 45), 0.5, 1e-12);
  setenv("LOOM_CACHE_DIR", "/dev/null/none", 1);
  ASSERT_OK(loom_context_create(NULL, &ctx));
  loom__history_put(ctx, 47, "cpu0", 1.0);
  loom__error(LOOM_ERR_IO, "the caller's own failure");
  loom_context_destroy(ctx);
  ASSERT_STREQ(loom_last_error(), "the caller's own failure");
  char cmd[200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  ASSERT_EQ(system(cmd), 0);
  restore_env("LOOM_CACHE_DIR", old_dir);
  restore_env("LOOM_STAGE_HISTORY", old_flag);
}

/* ocl1 at 1 KiB: no stage's estimate fits it, so ocl0 runs every stage (eager too: a device
 * too small for a stage never gets it while another can hold it). */
TEST(branches_a_device_too_small_gets_no_stage) {
  fixture f;
  if (!fixture_init_opencl(&f, TOWERS_LIR("64"))) return;
  loom_runner lim = {"ocl1", 1024};
  loom_runner *runners = NULL;
  int32_t n = 0;
  loom_plan *plan = NULL;
  ASSERT_OK(loom_share_runners(f.ctx, "ocl0,ocl1", &lim, 1, &runners, &n));
  ASSERT_OK(loom_share_cut(f.g, runners, n, &plan));
  for (int policy = LOOM_SCHED_EAGER; policy <= LOOM_SCHED_DMDA; policy++) {
    loom_share_options so;
    loom_share_options_init(&so);
    so.devices = "ocl0,ocl1";
    so.policy = (loom_sched_policy)policy;
    so.limits = &lim;
    so.n_limits = 1;
    loom_tensor out[2];
    loom_share_stats st;
    memset(&st, 0, sizeof st);
    ASSERT_OK(loom_plan_run_shared(f.ctx, plan, &so, f.in, 3, out, 2, &st));
    ASSERT_TRUE(share_test_outputs_equal(out, f.ref));
    ASSERT_EQ(st.n_stages, 3);
    ASSERT_EQ(st.devices[0].stages, 3);
    ASSERT_EQ(st.devices[1].stages, 0);
    ASSERT_EQ(st.devices[1].limit_bytes, 1024);
    share_test_release(out, &st);
  }
  loom_plan_destroy(plan);
  free(runners);
  fixture_deinit(&f);
}

/* ocl1 refusing memory: the run fails naming the stage and ocl1, returns nothing, and leaves
 * nothing allocated; ocl0's tower, running meanwhile, ends and is freed. */
TEST(branches_a_failing_device_cancels_the_others) {
  fixture f;
  if (!fixture_init_opencl(&f, TOWERS_LIR("512"))) return;
  for (int i = 0; i < 2; i++) { /* warm up: programs built, pools filled */
    loom_tensor out[2];
    ASSERT_OK(run_towers(&f, "ocl0,ocl1", LOOM_SCHED_EAGER, out, NULL));
    share_test_release(out, NULL);
  }
  int64_t live = loom_testing_live_allocations();
  loom_tensor out[2];
  memset(out, 0, sizeof out);
  loom_share_stats st;
  memset(&st, 0, sizeof st);
  loom_testing_fail_node_allocations("ocl1", 1, 0);
  loom_status s = run_towers(&f, "ocl0,ocl1", LOOM_SCHED_EAGER, out, &st);
  loom_testing_fail_node_allocations(NULL, 0, 0);
  ASSERT_STATUS(s, LOOM_ERR_OUT_OF_MEMORY);
  ASSERT_CONTAINS(loom_last_error(), "stage ");
  ASSERT_CONTAINS(loom_last_error(), " on ocl1: ");
  ASSERT_TRUE(out[0].data == NULL && out[1].data == NULL);
  loom_share_stats_deinit(&st);
  ASSERT_EQ(loom_testing_live_allocations(), live);
  fixture_deinit(&f);
}

TEST(branches_allocation_failures_sweep) {
  fixture f;
  if (!fixture_init_opencl(&f, TOWERS_LIR("64"))) return;
  for (int i = 0; i < 2; i++) {
    loom_tensor out[2];
    ASSERT_OK(run_towers(&f, "ocl0,ocl1", LOOM_SCHED_EAGER, out, NULL));
    share_test_release(out, NULL);
  }
  loom_test_sweep sw;
  SWEEP_ALLOCATIONS(&sw, 1, 20000) {
    loom_tensor out[2];
    memset(out, 0, sizeof out);
    loom_share_stats st;
    memset(&st, 0, sizeof st);
    loom_status s = SWEEP_RUN(&sw, run_towers(&f, "ocl0,ocl1", LOOM_SCHED_EAGER, out, &st));
    if (!s && !share_test_outputs_equal(out, f.ref))
      loom_test_fail(__FILE__, __LINE__, "allocation %lld failing: wrong results", (long long)sw.nth);
    share_test_release(out, &st);
  }
  ASSERT_TRUE(sw.failures > 10);
  fixture_deinit(&f);
}

/* loom_share_cut, the cut a shared run runs: by branch with several devices, around loops
 * (here: none, one stage) with one; the plan owns its reordered graph. */
TEST(share_cut_by_devices) {
  fixture f;
  if (!fixture_init(&f, TOWERS_LIR("64"))) return fixture_deinit(&f);
  loom_runner cpu = {"cpu0", 1 << 30};
  loom_plan *plan = NULL;
  ASSERT_OK(loom_share_cut(f.g, &cpu, 1, &plan));
  ASSERT_EQ(loom_plan_stage_count(plan), 1);
  loom_plan_destroy(plan);
  ASSERT_OK(loom_share_cut(f.g, &cpu, 2, &plan));
  ASSERT_EQ(loom_plan_stage_count(plan), 3);
  ASSERT_TRUE(loom_plan_graph(plan) != f.g);
  loom_stage_info st;
  ASSERT_OK(loom_plan_stage(plan, 2, &st));
  ASSERT_EQ(st.n_ops, 1); /* the join reads both towers */
  ASSERT_EQ(st.n_inputs, 2);
  loom_tensor out[2];
  ASSERT_OK(loom_plan_run(f.ctx, plan, f.in, 3, out, 2, NULL));
  ASSERT_TRUE(share_test_outputs_equal(out, f.ref));
  share_test_release(out, NULL);
  loom_plan_destroy(plan);
  ASSERT_STATUS(loom_share_cut(f.g, &cpu, 0, &plan), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_TRUE(plan == NULL);
  ASSERT_STATUS(loom_share_cut(NULL, &cpu, 2, &plan), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(loom_share_cut(f.g, NULL, 2, &plan), LOOM_ERR_INVALID_ARGUMENT);
  fixture_deinit(&f);
}
