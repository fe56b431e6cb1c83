/* The shared runner (loom/share.h): a kNN with a loop-free stage before and after it, planned
 * for sharing and run on cpu0, on ocl0 and ocl1 (PoCL's two pthread devices, tests/share.cmake)
 * and on all three, with each policy: the results equal the graph run whole on cpu0 (integer
 * coordinates, so every distance is exact and ties fall to the lower index everywhere); every
 * piece is run once; a device refusing memory fails the run naming the stage, the pieces and
 * the device, with nothing left allocated; a device whose limit holds no range never gets one;
 * and every host allocation failing in turn through a shared run. */
#define _XOPEN_SOURCE 700 /* nftw, mkdtemp, setenv */
#include <ftw.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "runtime/stage_history.h"
#include "share_test.h"

/* x and y: 157 and 211 points of integer coordinates below 8 (exact distances, many ties);
 * the stages around the loop: a shift of x before, a square root of the distances after. */
static const char *const knn_lir =
    "graph knn(x: f32[157,3], y: f32[211,3]) {\n"
    "  x1 = add x x\n"
    "  xs = sub x1 x\n"
    "  xe = reshape xs shape=[157,1,3]\n"
    "  ye = reshape y shape=[1,211,3]\n"
    "  diff = sub xe ye\n"
    "  sq = mul diff diff\n"
    "  d2 = reduce_sum sq axes=[2]\n"
    "  val, idx = topk d2 k=5 axis=1 largest=false\n"
    "  dist = sqrt val\n"
    "  return dist, idx\n"
    "}\n";

typedef share_fixture fixture;

/* Coordinates in {0..7}: every distance exact on every device. */
static void knn_integers(float *v, int32_t p, int64_t n) {
  (void)p;
  for (int64_t i = 0; i < n; i++) v[i] = floorf(v[i] * 8);
}

static void fixture_deinit(fixture *f) {
  share_fixture_deinit(f);
}

static bool fixture_init(fixture *f) {
  return share_fixture_init(f, knn_lir, "knn.lir", 7, knn_integers);
}

static bool fixture_init_opencl(fixture *f) {
  return share_fixture_init_opencl(f, knn_lir, "knn.lir", 7, knn_integers);
}

/* Plans knn for `devices` (each at `limit`, 0: its memory), fused or not, and runs it shared
 * with `policy`. */
static loom_status run_on(fixture *f, const char *devices, const char *run_devices, loom_sched_policy policy,
                          int64_t limit, bool fuse, loom_tensor *out, loom_share_stats *stats) {
  /* each run placed without the times of the runs before it (stage_history.h): these tests
   * check the placement of a first run */
  loom__history_clear(f->ctx);
  loom_runner *runners = NULL, lim[3];
  int32_t n = 0;
  for (int i = 0; i < 3; i++) {
    snprintf(lim[i].device, sizeof lim[i].device, "%s", i == 0 ? "cpu0" : i == 1 ? "ocl0" : "ocl1");
    lim[i].limit = limit;
  }
  loom_status s = loom_share_runners(f->ctx, devices, limit ? lim : NULL, limit ? 3 : 0, &runners, &n);
  loom_optimize_options o;
  loom_optimize_options_init(&o);
  o.fused_runs = loom_fused_body_runs_everywhere;
  const char *no_fuse = "fuse";
  o.disabled = fuse ? NULL : &no_fuse;
  o.n_disabled = fuse ? 0 : 1;
  loom_graph *opt = NULL;
  loom_plan *plan = NULL;
  if (!s) s = loom_graph_optimize_for_sharing(f->g, runners, n, &o, &opt, NULL, NULL, 0);
  /* FIXED runs the plan on its runners as the memory cut placed it; the others the sharing cut */
  if (!s && policy == LOOM_SCHED_FIXED) s = loom_plan_split_by_memory(opt, runners, n, &plan);
  if (!s && policy != LOOM_SCHED_FIXED) s = loom_share_cut(opt, runners, n, &plan);
  loom_share_options so;
  loom_share_options_init(&so);
  so.devices = run_devices;
  so.policy = policy;
  so.limits = limit ? lim : NULL;
  so.n_limits = limit ? 3 : 0;
  if (!s) s = loom_plan_run_shared(f->ctx, plan, &so, f->in, 2, out, 2, stats);
  loom_plan_destroy(plan);
  loom_graph_destroy(opt);
  free(runners);
  return s;
}

static loom_status run_planned(fixture *f, const char *devices, loom_sched_policy policy, int64_t limit,
                               bool fuse, loom_tensor *out, loom_share_stats *stats) {
  return run_on(f, devices, devices, policy, limit, fuse, out, stats);
}

static loom_status run_shared(fixture *f, const char *devices, loom_sched_policy policy, int64_t limit,
                              loom_tensor *out, loom_share_stats *stats) {
  return run_planned(f, devices, policy, limit, true, out, stats);
}

/* Runs the plan of `devices` (fused or not) on each of `alone` by itself (the whole loop: a
 * second queue for the slices written ahead, the last piece's kernels), then shared with
 * both policies twice: a device keeps what it makes on first use, and which ranges a device
 * runs changes from run to run, so a leak check after this sees only what a run leaves. */
static bool warm_up(fixture *f, const char *devices, const char *const *alone, int32_t n_alone, bool fuse) {
  for (int32_t i = 0; i < n_alone + 4; i++) {
    loom_tensor out[2];
    loom_sched_policy p = i % 2 ? LOOM_SCHED_EAGER : LOOM_SCHED_DMDA;
    if (run_on(f, devices, i < n_alone ? alone[i] : devices, p, 0, fuse, out, NULL)) {
      loom_test_fail(__FILE__, __LINE__, "warming up %s: %s", devices, loom_last_error());
      return false;
    }
    share_test_release(out, NULL);
  }
  return true;
}

static void check_run(fixture *f, const char *devices, loom_sched_policy policy) {
  loom_tensor out[2];
  loom_share_stats st;
  memset(&st, 0, sizeof st);
  loom_status s = run_shared(f, devices, policy, 0, out, &st);
  if (s) {
    loom_test_fail(__FILE__, __LINE__, "%s, %s: %s", devices, loom_sched_policy_name(policy),
                   loom_last_error());
    loom_share_stats_deinit(&st);
    return;
  }
  for (int i = 0; i < 2; i++)
    if (!share_test_equal(&out[i], &f->ref[i]))
      loom_test_fail(__FILE__, __LINE__, "%s, %s: output %d differs from the whole run on cpu0", devices,
                     loom_sched_policy_name(policy), i);
  int64_t pieces = 0;
  for (int32_t d = 0; d < st.n_devices; d++) pieces += st.devices[d].pieces;
  bool several = strchr(devices, ',') != NULL; /* auto is cpu0 alone beside PoCL */
  if (several && policy != LOOM_SCHED_FIXED && (st.n_shared != 1 || pieces < 2))
    loom_test_fail(__FILE__, __LINE__, "%s, %s: %d loops shared, %lld pieces run", devices,
                   loom_sched_policy_name(policy), (int)st.n_shared, (long long)pieces);
  share_test_release(out, &st);
}

TEST(shared_results_equal_whatever_the_policy_and_devices) {
  fixture f;
  if (!fixture_init(&f)) return fixture_deinit(&f);
  static const loom_sched_policy policies[] = {LOOM_SCHED_DMDA, LOOM_SCHED_EAGER, LOOM_SCHED_FIXED};
  const char *lists[] = {"cpu0", "ocl0,ocl1", "cpu0,ocl0,ocl1", "auto"};
  for (int l = 0; l < 4; l++) {
    if (!f.opencl && l > 0 && l < 3) continue;
    for (int p = 0; p < 3; p++) check_run(&f, lists[l], policies[p]);
  }
  fixture_deinit(&f);
}

TEST(shared_pieces_run_once_and_counted) {
  fixture f;
  if (!fixture_init_opencl(&f)) return;
  loom_tensor out[2];
  loom_share_stats st;
  memset(&st, 0, sizeof st);
  ASSERT_OK(run_shared(&f, "ocl0,ocl1", LOOM_SCHED_EAGER, 0, out, &st));
  ASSERT_EQ(st.n_devices, 2);
  ASSERT_STREQ(st.devices[0].device, "ocl0");
  int64_t pieces = st.devices[0].pieces + st.devices[1].pieces;
  int32_t ranges = st.devices[0].ranges + st.devices[1].ranges;
  /* the loop's pieces: 157 rows cut for two devices; each range several of them */
  ASSERT_TRUE(pieces >= 8);
  ASSERT_TRUE(ranges >= 8 && ranges <= 12);
  ASSERT_TRUE(st.devices[0].busy_seconds > 0 || st.devices[1].busy_seconds > 0);
  /* before and after the loop, on whichever device was free (eager); the loop on each device
   * that ran ranges of it */
  ASSERT_EQ(st.devices[0].stages + st.devices[1].stages,
            2 + (st.devices[0].ranges > 0) + (st.devices[1].ranges > 0));
  share_test_release(out, &st);
  fixture_deinit(&f);
}

TEST(shared_a_failing_device_cancels_the_others) {
  fixture f;
  if (!fixture_init_opencl(&f)) return;
  /* Two OpenCL devices: each takes a range as it starts (cpu0 beside them could run them all
   * before ocl1's worker starts, and nothing would fail). */
  const char *alone[2] = {"ocl0", "ocl1"};
  if (!warm_up(&f, "ocl0,ocl1", alone, 2, true)) return fixture_deinit(&f);
  for (int policy = LOOM_SCHED_EAGER; policy <= LOOM_SCHED_DMDA; policy++) {
    int64_t live = loom_testing_live_allocations();
    loom_tensor out[2];
    memset(out, 0, sizeof out);
    loom_share_stats st;
    memset(&st, 0, sizeof st);
    /* On an idle machine ocl0 may take every range before ocl1's worker starts (eager): then
     * ocl1 allocated nothing, the failure armed for it never came, and the run is right to
     * succeed; it is run again (a few times at most) until ocl1 takes part. */
    loom_status s = LOOM_OK;
    for (int attempt = 0; attempt < 8; attempt++) {
      memset(&st, 0, sizeof st);
      loom_testing_fail_node_allocations("ocl1", 1, 0);
      s = run_shared(&f, "ocl0,ocl1", (loom_sched_policy)policy, 0, out, &st);
      loom_testing_fail_node_allocations(NULL, 0, 0);
      if (s != LOOM_OK || st.n_devices < 2 || st.devices[1].ranges > 0 || st.devices[1].stages > 0) break;
      share_test_release(out, &st);
      memset(out, 0, sizeof out);
    }
    ASSERT_STATUS(s, LOOM_ERR_OUT_OF_MEMORY);
    ASSERT_CONTAINS(loom_last_error(), ") on ocl1: ");
    /* dmda without models gives the stages around the loop to ocl0, the first free device;
     * under eager ocl1 may take the first one and fail there */
    if (policy == LOOM_SCHED_DMDA || strstr(loom_last_error(), "a loop of")) {
      ASSERT_CONTAINS(loom_last_error(), "stage 1 (a loop of ");
      ASSERT_CONTAINS(loom_last_error(), "pieces [");
    }
    ASSERT_TRUE(out[0].data == NULL && out[1].data == NULL);
    ASSERT_EQ(st.devices[1].ranges, 0); /* it ran none to the end */
    loom_share_stats_deinit(&st);
    ASSERT_EQ(loom_testing_live_allocations(), live);
  }
  fixture_deinit(&f);
}

TEST(shared_a_device_too_small_gets_no_range) {
  fixture f;
  if (!fixture_init_opencl(&f)) return;
  /* ocl1 at 1 KiB: no range fits it; the others share the loop */
  loom_runner lim = {"ocl1", 1024};
  loom_runner *runners = NULL;
  int32_t n = 0;
  ASSERT_OK(loom_share_runners(f.ctx, "cpu0,ocl0,ocl1", &lim, 1, &runners, &n));
  ASSERT_EQ(n, 3);
  ASSERT_EQ(runners[2].limit, 1024);
  loom_optimize_options o;
  loom_optimize_options_init(&o);
  loom_graph *opt = NULL;
  loom_plan *plan = NULL;
  ASSERT_OK(loom_graph_optimize_for_sharing(f.g, runners, 2, &o, &opt, NULL, NULL, 0));
  ASSERT_OK(loom_share_cut(opt, runners, n, &plan));
  loom_share_options so;
  loom_share_options_init(&so);
  so.devices = "cpu0,ocl0,ocl1";
  so.limits = &lim;
  so.n_limits = 1;
  loom_tensor out[2];
  loom_share_stats st;
  memset(&st, 0, sizeof st);
  ASSERT_OK(loom_plan_run_shared(f.ctx, plan, &so, f.in, 2, out, 2, &st));
  ASSERT_EQ(st.devices[2].ranges, 0);
  ASSERT_TRUE(st.devices[0].pieces + st.devices[1].pieces > 0);
  ASSERT_TRUE(share_test_outputs_equal(out, f.ref));
  share_test_release(out, &st);
  /* every device too small: out of memory naming the need and the limits */
  loom_runner tiny[3] = {{"cpu0", 1024}, {"ocl0", 1024}, {"ocl1", 1024}};
  so.limits = tiny;
  so.n_limits = 3;
  ASSERT_STATUS(loom_plan_run_shared(f.ctx, plan, &so, f.in, 2, out, 2, NULL), LOOM_ERR_OUT_OF_MEMORY);
  loom_plan_destroy(plan);
  loom_graph_destroy(opt);
  free(runners);
  fixture_deinit(&f);
}

/* Beside cpu0, dmda gives an OpenCL device that computes on the host's cores (PoCL's) no
 * range: it would only take cores from cpu0. A GPU would get its share. */
TEST(shared_dmda_leaves_host_core_devices_to_cpu0) {
  fixture f;
  if (!fixture_init_opencl(&f)) return;
  loom_tensor out[2];
  loom_share_stats st;
  memset(&st, 0, sizeof st);
  ASSERT_OK(run_shared(&f, "cpu0,ocl0,ocl1", LOOM_SCHED_DMDA, 0, out, &st));
  ASSERT_EQ(st.n_devices, 3);
  ASSERT_TRUE(st.devices[0].pieces > 0);
  for (int32_t d = 1; d < 3; d++) {
    int32_t index = 0;
    loom_device_info info;
    ASSERT_OK(loom_context_find_device(f.ctx, st.devices[d].device, &index));
    ASSERT_OK(loom_context_device_info(f.ctx, index, &info));
    if (info.kind == LOOM_DEVICE_CPU) ASSERT_EQ(st.devices[d].ranges, 0);
  }
  ASSERT_TRUE(share_test_outputs_equal(out, f.ref));
  share_test_release(out, &st);
  fixture_deinit(&f);
}

/* Planning for the devices the policy gives work: under dmda with cpu0 first, PoCL's CPU devices
 * are left out (they take no range beside cpu0); under eager, or with another device first,
 * every device stays; the runners come back in order, in place too. */
TEST(shared_plan_runners_by_policy) {
  fixture f;
  if (!fixture_init_opencl(&f)) return;
  bool host0 = false, host1 = false;
  loom_device_info info;
  int32_t index = 0;
  ASSERT_OK(loom_context_find_device(f.ctx, "ocl0", &index));
  ASSERT_OK(loom_context_device_info(f.ctx, index, &info));
  host0 = info.kind == LOOM_DEVICE_CPU;
  ASSERT_OK(loom_context_find_device(f.ctx, "ocl1", &index));
  ASSERT_OK(loom_context_device_info(f.ctx, index, &info));
  host1 = info.kind == LOOM_DEVICE_CPU;
  loom_runner *runners = NULL, kept[3];
  int32_t n = 0, k = 0;
  char left[64];
  ASSERT_OK(loom_share_runners(f.ctx, "cpu0,ocl0,ocl1", NULL, 0, &runners, &n));
  ASSERT_EQ(n, 3);
  ASSERT_OK(loom_share_plan_runners(f.ctx, runners, n, LOOM_SCHED_DMDA, kept, &k, left, sizeof left));
  ASSERT_EQ(k, 3 - (int32_t)host0 - (int32_t)host1);
  ASSERT_STREQ(kept[0].device, "cpu0");
  ASSERT_STREQ(left, host0 && host1 ? "ocl0,ocl1" : host0 ? "ocl0" : host1 ? "ocl1" : "");
  ASSERT_OK(loom_share_plan_runners(f.ctx, runners, n, LOOM_SCHED_EAGER, kept, &k, left, sizeof left));
  ASSERT_EQ(k, 3);
  ASSERT_STREQ(left, "");
  ASSERT_STREQ(kept[2].device, "ocl1");
  /* ocl0 first: it leads the stages between loops, so nothing is left out */
  loom_runner swapped[3] = {runners[1], runners[0], runners[2]};
  ASSERT_OK(loom_share_plan_runners(f.ctx, swapped, 3, LOOM_SCHED_DMDA, swapped, &k, NULL, 0));
  ASSERT_EQ(k, 3);
  ASSERT_STREQ(swapped[0].device, "ocl0");
  /* in place */
  ASSERT_OK(loom_share_plan_runners(f.ctx, runners, n, LOOM_SCHED_DMDA, runners, &k, NULL, 0));
  ASSERT_EQ(k, 3 - (int32_t)host0 - (int32_t)host1);
  ASSERT_STREQ(runners[0].device, "cpu0");
  ASSERT_STATUS(loom_share_plan_runners(f.ctx, runners, 0, LOOM_SCHED_DMDA, kept, &k, NULL, 0),
                LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(loom_share_plan_runners(NULL, runners, 1, LOOM_SCHED_DMDA, kept, &k, NULL, 0),
                LOOM_ERR_INVALID_ARGUMENT);
  loom_runner ghost[2] = {runners[0], runners[0]};
  snprintf(ghost[1].device, sizeof ghost[1].device, "ocl9");
  ASSERT_STATUS(loom_share_plan_runners(f.ctx, ghost, 2, LOOM_SCHED_DMDA, kept, &k, NULL, 0),
                LOOM_ERR_NOT_FOUND);
  ASSERT_CONTAINS(loom_last_error(), "ocl9");
  free(runners);
  fixture_deinit(&f);
}

TEST(shared_devices_refused) {
  loom_context *ctx = NULL;
  ASSERT_OK(loom_context_create(NULL, &ctx));
  loom_runner *runners = NULL;
  int32_t n = 0;
  ASSERT_STATUS(loom_share_runners(ctx, "cpu0,cpu9", NULL, 0, &runners, &n), LOOM_ERR_NOT_FOUND);
  ASSERT_CONTAINS(loom_last_error(), "cpu9");
  ASSERT_STATUS(loom_share_runners(ctx, "cpu0,cpu0", NULL, 0, &runners, &n), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "named twice");
  ASSERT_STATUS(loom_share_runners(ctx, "", NULL, 0, &runners, &n), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_OK(loom_share_runners(ctx, "auto", NULL, 0, &runners, &n));
  ASSERT_TRUE(n >= 1);
  ASSERT_STREQ(runners[0].device, "cpu0");
  free(runners);
  loom_context_destroy(ctx);
}

/* Writes a model for device `id` in which every class costs seconds_per_unit `rate`. */
static bool save_model(loom_context *ctx, const char *id, double rate) {
  int32_t index = -1;
  loom_device_info info;
  if (loom_context_find_device(ctx, id, &index) || loom_context_device_info(ctx, index, &info)) return false;
  loom_sched_model m;
  memset(&m, 0, sizeof m);
  for (int c = 0; c < LOOM_OP_CLASS_COUNT; c++) {
    m.cls[c].known = true;
    m.cls[c].latency = 1e-6;
    m.cls[c].seconds_per_unit = rate;
  }
  m.host_latency = 1e-6;
  m.host_bandwidth = 1e10;
  return loom_sched_model_save(&m, info.name, loom_sched_device_driver(&info)) == LOOM_OK;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  return remove(path);
}

/* With models (loom-bench calibrate's files) that make ocl0 take a second per element (about
 * an hour a piece), dmda never gives ocl0 a range: cpu0 alone, at its model's speed or at the
 * speed it measures (in a sanitizer build too), ends the loop before ocl0 would end one. */
TEST(shared_dmda_follows_the_models) {
  fixture f;
  if (!fixture_init_opencl(&f)) return;
  char dir[] = "/tmp/loom-share-models-XXXXXX";
  const char *was = getenv("LOOM_CACHE_DIR");
  char *saved = was ? strdup(was) : NULL;
  ASSERT_TRUE(mkdtemp(dir) != NULL);
  setenv("LOOM_CACHE_DIR", dir, 1);
  bool made = save_model(f.ctx, "cpu0", 1e-12) && save_model(f.ctx, "ocl0", 1.0);
  loom_tensor out[2];
  memset(out, 0, sizeof out);
  loom_share_stats st;
  memset(&st, 0, sizeof st);
  loom_status s = made ? run_shared(&f, "cpu0,ocl0", LOOM_SCHED_DMDA, 0, out, &st) : LOOM_ERR_IO;
  if (saved)
    setenv("LOOM_CACHE_DIR", saved, 1);
  else
    unsetenv("LOOM_CACHE_DIR");
  free(saved);
  nftw(dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
  ASSERT_TRUE(made);
  ASSERT_OK(s);
  ASSERT_TRUE(share_test_outputs_equal(out, f.ref));
  ASSERT_EQ(st.devices[1].pieces, 0);
  ASSERT_TRUE(st.devices[0].pieces > 0);
  ASSERT_EQ(st.n_shared, 1);
  share_test_release(out, &st);
  fixture_deinit(&f);
}

TEST(shared_allocation_failures_sweep) {
  fixture f;
  if (!fixture_init(&f)) return fixture_deinit(&f);
  const char *devices = f.opencl ? "cpu0,ocl0" : "cpu0";
  /* Unfused: a fused body's kernel is generated for its operands' strides, which change with
   * the ranges a device runs; the ops' own kernels take strides as arguments (warm_up). */
  const char *alone[2] = {"cpu0", "ocl0"};
  if (!warm_up(&f, devices, alone, f.opencl ? 2 : 1, false)) return fixture_deinit(&f);
  loom_test_sweep sw;
  SWEEP_ALLOCATIONS(&sw, 1, 20000) {
    loom_tensor out[2];
    memset(out, 0, sizeof out);
    loom_share_stats st;
    memset(&st, 0, sizeof st);
    loom_status s = SWEEP_RUN(&sw, run_planned(&f, devices, LOOM_SCHED_DMDA, 0, false, out, &st));
    if (!s && !share_test_outputs_equal(out, f.ref))
      loom_test_fail(__FILE__, __LINE__, "allocation %lld failing: wrong results", (long long)sw.nth);
    share_test_release(out, &st);
  }
  ASSERT_TRUE(sw.failures > 10);
  fixture_deinit(&f);
}
