/* The policies: list scheduling of a problem's tasks, in their order (a valid order: what a
 * task reads is made by an earlier one), each placed by the policy's rule, with the input
 * transfers it needs simulated on the platform's links (one transfer at a time per link).
 * StarPU's dmda (src/sched_policies/deque_modeling_policy_data_aware.c) is the model of the
 * dmda rule: the device of the earliest expected finish, transfers of the inputs it lacks
 * included. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/core.h"
#include "sched/policy.h"
#include "sched/sched_impl.h"

const char *loom_sched_policy_name(loom_sched_policy p) {
  const loom__sched_policy_ops *ops = loom__sched_policy(p);
  return ops ? ops->name : "?";
}

bool loom_sched_policy_parse(const char *name, loom_sched_policy *out_policy) {
  for (int p = 0; name && loom__sched_policy((loom_sched_policy)p); p++) {
    if (strcmp(name, loom__sched_policy((loom_sched_policy)p)->name) == 0) {
      *out_policy = (loom_sched_policy)p;
      return true;
    }
  }
  return false;
}

/* Kernels of one class cost as many kernels of the average size: exact for a line, close
 * for a table. */
double loom__sched_task_time(const loom_sched_task *task, const loom_sched_model *model) {
  double t = 0;
  for (int c = 0; c < LOOM_OP_CLASS_COUNT; c++) {
    if (task->size[c] <= 0) continue;
    int32_t k = task->kernels[c] > 0 ? task->kernels[c] : 1;
    t += k * loom_sched_model_time(model, (loom_op_class)c, task->size[c] / k);
  }
  return t;
}

/* The simulation's state. */
typedef struct sim {
  const loom_sched_problem *p;
  const loom_sched_platform *pf;
  double *avail;                 /* [data][node]: when a copy is there; INFINITY: none */
  double *dev_free;              /* per device: when its queue empties */
  double *link_free;             /* per link: when its last transfer ends */
  double *link_saved;            /* link_free kept across a dmda estimate */
  loom__sched_option *options;   /* per device: what the policy chooses among (pick) */
  double *exec;                  /* [task][device]: seconds; INFINITY where it cannot run */
  int32_t *out_start, *out_list; /* the data task t makes: out_list[out_start[t] .. out_start[t + 1]) */
  loom_sched_result *r;
} sim;

static double *avail_of(const sim *s, int32_t d) {
  return s->avail + (size_t)d * (size_t)s->pf->n_nodes;
}

/* When data d (or what it is a slice of) is on node n, INFINITY when not yet. */
static double valid_at(const sim *s, int32_t d, int32_t n) {
  double t = INFINITY;
  for (; d >= 0; d = s->p->data[d].parent) {
    double a = avail_of(s, d)[n];
    if (a < t) t = a;
  }
  return t;
}

/* How far a simulated move goes: PEEK changes nothing; RESERVE books the links (dmda's
 * estimate, on a copy of the links' state, so that the transfers of one task queue behind
 * each other as they will); COMMIT books them, counts the bytes and records the copy. */
typedef enum move_mode { MOVE_PEEK, MOVE_RESERVE, MOVE_COMMIT } move_mode;

/* One hop over link l of `bytes` ready at `ready`: its arrival. */
static double hop(sim *s, int32_t l, double ready, int64_t bytes, move_mode mode) {
  const loom_sched_link *k = &s->pf->links[l];
  double start = ready > s->link_free[l] ? ready : s->link_free[l];
  double end = start + k->latency + (double)bytes / k->bandwidth;
  if (mode >= MOVE_RESERVE) s->link_free[l] = end;
  if (mode == MOVE_COMMIT) s->r->link_bytes[l] += bytes;
  return end;
}

/* The arrival on `to` of `bytes` ready on `from` at `ready`: the direct link, else through
 * the host; INFINITY when there is no route. */
static double route(sim *s, int32_t d, int32_t from, int32_t to, double ready, move_mode mode) {
  int64_t bytes = s->p->data[d].bytes;
  int32_t l = loom__sched_link_find(s->pf, from, to);
  if (l >= 0) return hop(s, l, ready, bytes, mode);
  int32_t l1 = loom__sched_link_find(s->pf, from, 0), l2 = loom__sched_link_find(s->pf, 0, to);
  if (l1 < 0 || l2 < 0) return INFINITY;
  double mid = hop(s, l1, ready, bytes, mode);
  if (mode == MOVE_COMMIT && mid < avail_of(s, d)[0]) avail_of(s, d)[0] = mid;
  return hop(s, l2, mid, bytes, mode);
}

/* When data d can be on node `to`: already there, or moved from the copy that gets there
 * first. */
static double arrival(sim *s, int32_t d, int32_t to, move_mode mode) {
  double here = valid_at(s, d, to);
  if (here < INFINITY) return here;
  double best = INFINITY;
  int32_t best_from = -1;
  for (int32_t n = 0; n < s->pf->n_nodes; n++) {
    double ready = valid_at(s, d, n);
    if (ready == INFINITY) continue;
    double t = route(s, d, n, to, ready, MOVE_PEEK);
    if (t < best) best = t, best_from = n;
  }
  if (mode == MOVE_PEEK || best_from < 0) return best;
  best = route(s, d, best_from, to, valid_at(s, d, best_from), mode);
  if (mode == MOVE_COMMIT) avail_of(s, d)[to] = best;
  return best;
}

/* When task t's inputs can all be on device dev's node. */
static double inputs_ready(sim *s, int32_t t, int32_t dev, move_mode mode) {
  const loom_sched_task *task = &s->p->tasks[t];
  double ready = 0;
  for (int32_t i = 0; i < task->n_inputs; i++) {
    double a = arrival(s, s->p->refs[task->first_input + i], s->pf->devices[dev].node, mode);
    if (a > ready) ready = a;
  }
  return ready;
}

/* When task t's graph outputs, done on `dev` at `done`, are home on node 0. Results go home
 * as soon as they are made, so the link work overlaps the next tasks. */
static double outputs_home(sim *s, int32_t t, int32_t dev, double done, move_mode mode) {
  int32_t node = s->pf->devices[dev].node;
  double end = done;
  for (int32_t k = s->out_start[t]; k < s->out_start[t + 1]; k++) {
    int32_t d = s->out_list[k];
    if (!s->p->data[d].output || node == 0) continue;
    /* before the commit the result is not on the node yet: route it from `done` */
    double a = mode == MOVE_COMMIT ? arrival(s, d, 0, mode) : route(s, d, node, 0, done, mode);
    if (a > end && a < INFINITY) end = a;
  }
  return end;
}

/* dmda's key: when the task would be done on dev, its graph outputs home included, its
 * transfers booked on a copy of the links' state. */
static double finish_on(sim *s, int32_t t, int32_t dev) {
  size_t links = sizeof *s->link_free * (size_t)s->pf->n_links;
  memcpy(s->link_saved, s->link_free, links);
  double ready = inputs_ready(s, t, dev, MOVE_RESERVE);
  double start = ready > s->dev_free[dev] ? ready : s->dev_free[dev];
  double done = start + s->exec[(size_t)t * (size_t)s->pf->n_devices + (size_t)dev];
  double home = outputs_home(s, t, dev, done, MOVE_RESERVE);
  memcpy(s->link_free, s->link_saved, links);
  return home;
}

/* The device the policy picks for task t, or -1 when none can run it: the policy's own rule
 * (policy.h), over the devices as the simulation sees them. Only dmda reads the finish times,
 * which book transfers on a copy of the links: they are computed for it alone. */
static int32_t pick(sim *s, int32_t t, loom_sched_policy policy) {
  int32_t nd = s->pf->n_devices;
  const double *ex = s->exec + (size_t)t * (size_t)nd;
  loom__sched_option *o = s->options;
  for (int32_t d = 0; d < nd; d++) {
    o[d].eligible = ex[d] < INFINITY;
    o[d].cpu0 = strcasecmp(s->pf->devices[d].id, "cpu0") == 0;
    o[d].host_cores = s->pf->devices[d].host_cores;
    o[d].fixed = d == s->p->tasks[t].fixed_device;
    o[d].free_at = s->dev_free[d];
    o[d].finish = policy == LOOM_SCHED_DMDA && o[d].eligible ? finish_on(s, t, d) : INFINITY;
    /* the simulation knows every time: a device its data cannot reach is no option */
    if (policy == LOOM_SCHED_DMDA && o[d].finish == INFINITY) o[d].eligible = false;
  }
  return loom__sched_policy(policy)->choose(o, nd);
}

static loom_status cannot_place(const sim *s, int32_t t, loom_sched_policy policy) {
  const loom_sched_task *task = &s->p->tasks[t];
  char need[32];
  loom_bytes_format(task->memory, need, sizeof need);
  if (policy == LOOM_SCHED_FIXED && task->fixed_device < 0)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT,
                       "schedule: task %d (%s) names no device for the fixed policy", t, task->label);
  if (policy == LOOM_SCHED_FIXED)
    return loom__error(
        LOOM_ERR_INVALID_ARGUMENT,
        "schedule: task %d (%s) cannot run on its device %s (it needs %s; or a class its model lacks)", t,
        task->label, s->pf->devices[task->fixed_device].id, need);
  return loom__error(LOOM_ERR_INVALID_ARGUMENT,
                     "schedule: task %d (%s) fits no device: it needs %s, and a model of every class it does",
                     t, task->label, need);
}

static void place(sim *s, int32_t t, int32_t dev) {
  double ready = inputs_ready(s, t, dev, MOVE_COMMIT);
  double start = ready > s->dev_free[dev] ? ready : s->dev_free[dev];
  double secs = s->exec[(size_t)t * (size_t)s->pf->n_devices + (size_t)dev];
  s->r->tasks[t] = (loom_sched_placement){.device = dev, .start = start, .finish = start + secs};
  snprintf(s->r->tasks[t].label, sizeof s->r->tasks[t].label, "%s", s->p->tasks[t].label);
  s->dev_free[dev] = start + secs;
  s->r->busy[dev] += secs;
  s->r->task_count[dev]++;
  for (int32_t k = s->out_start[t]; k < s->out_start[t + 1]; k++)
    avail_of(s, s->out_list[k])[s->pf->devices[dev].node] = start + secs;
  double home = outputs_home(s, t, dev, start + secs, MOVE_COMMIT);
  if (home > s->r->makespan) s->r->makespan = home;
}

/* ---- set-up ------------------------------------------------------------------------------ */

static void sim_free(sim *s) {
  loom__free(s->avail);
  loom__free(s->dev_free);
  loom__free(s->link_free);
  loom__free(s->link_saved);
  loom__free(s->options);
  loom__free(s->exec);
  loom__free(s->out_start);
  loom__free(s->out_list);
}

void loom_sched_result_deinit(loom_sched_result *r) {
  if (!r) return;
  loom__free(r->tasks);
  loom__free(r->busy);
  loom__free(r->task_count);
  loom__free(r->link_bytes);
  memset(r, 0, sizeof *r);
}

static void fill_exec(sim *s) {
  int32_t nd = s->pf->n_devices;
  for (int32_t t = 0; t < s->p->n_tasks; t++) {
    const loom_sched_task *task = &s->p->tasks[t];
    for (int32_t d = 0; d < nd; d++) {
      const loom_sched_device *dev = &s->pf->devices[d];
      s->exec[(size_t)t * (size_t)nd + (size_t)d] =
          task->memory > dev->memory ? INFINITY : loom__sched_task_time(task, &dev->model);
    }
  }
}

/* Each task's outputs, as lists (counting sort by producer). */
static void fill_outputs(sim *s) {
  const loom_sched_problem *p = s->p;
  for (int32_t d = 0; d < p->n_data; d++) {
    if (p->data[d].producer >= 0) s->out_start[p->data[d].producer + 1]++;
  }
  for (int32_t t = 0; t < p->n_tasks; t++) s->out_start[t + 1] += s->out_start[t];
  int32_t *fill = s->out_start; /* walks up, then is shifted back */
  for (int32_t d = 0; d < p->n_data; d++) {
    if (p->data[d].producer >= 0) s->out_list[fill[p->data[d].producer]++] = d;
  }
  for (int32_t t = p->n_tasks; t > 0; t--) s->out_start[t] = s->out_start[t - 1];
  s->out_start[0] = 0;
}

static loom_status sim_init(sim *s, const loom_sched_problem *p, const loom_sched_platform *pf,
                            loom_sched_result *r) {
  memset(s, 0, sizeof *s);
  s->p = p, s->pf = pf, s->r = r;
  size_t nt = (size_t)p->n_tasks, nd = (size_t)pf->n_devices, nn = (size_t)pf->n_nodes,
         ndata = (size_t)p->n_data;
  s->avail = loom__malloc(sizeof *s->avail * (ndata * nn + 1));
  s->dev_free = loom__calloc(nd, sizeof *s->dev_free);
  s->link_free = loom__calloc((size_t)pf->n_links + 1, sizeof *s->link_free);
  s->link_saved = loom__calloc((size_t)pf->n_links + 1, sizeof *s->link_saved);
  s->options = loom__calloc(nd + 1, sizeof *s->options);
  s->exec = loom__malloc(sizeof *s->exec * (nt * nd + 1));
  s->out_start = loom__calloc(nt + 2, sizeof *s->out_start);
  s->out_list = loom__malloc(sizeof *s->out_list * (ndata + 1));
  r->tasks = loom__calloc(nt + 1, sizeof *r->tasks);
  r->busy = loom__calloc(nd, sizeof *r->busy);
  r->task_count = loom__calloc(nd, sizeof *r->task_count);
  r->link_bytes = loom__calloc((size_t)pf->n_links + 1, sizeof *r->link_bytes);
  if (!s->avail || !s->dev_free || !s->link_free || !s->link_saved || !s->options || !s->exec ||
      !s->out_start || !s->out_list || !r->tasks || !r->busy || !r->task_count || !r->link_bytes) {
    sim_free(s);
    loom_sched_result_deinit(r);
    return loom__oom("schedule");
  }
  r->n_tasks = p->n_tasks, r->n_devices = pf->n_devices, r->n_links = pf->n_links;
  for (size_t i = 0; i < ndata * nn; i++) s->avail[i] = INFINITY;
  for (int32_t d = 0; d < p->n_data; d++) {
    const loom_sched_data *x = &p->data[d];
    if (x->producer < 0 && x->parent < 0 && x->node >= 0 && x->node < pf->n_nodes)
      avail_of(s, d)[x->node] = 0;
  }
  fill_exec(s);
  fill_outputs(s);
  return LOOM_OK;
}

/* ---- bounds ----------------------------------------------------------------------------- */

/* The critical path: each task at its fastest device, its inputs' makers before it, no moves. */
static double path_bound(const sim *s) {
  const loom_sched_problem *p = s->p;
  int32_t nd = s->pf->n_devices;
  double *done = loom__calloc((size_t)p->n_tasks + 1, sizeof *done), best = 0;
  if (!done) return 0; /* a bound of 0 is still a bound */
  for (int32_t t = 0; t < p->n_tasks; t++) {
    double fastest = INFINITY, ready = 0;
    for (int32_t d = 0; d < nd; d++) {
      double e = s->exec[(size_t)t * (size_t)nd + (size_t)d];
      if (e < fastest) fastest = e;
    }
    for (int32_t i = 0; i < p->tasks[t].n_inputs; i++) {
      int32_t d = p->refs[p->tasks[t].first_input + i];
      while (p->data[d].parent >= 0) d = p->data[d].parent;
      if (p->data[d].producer >= 0 && done[p->data[d].producer] > ready) ready = done[p->data[d].producer];
    }
    done[t] = ready + fastest;
    if (done[t] > best) best = done[t];
  }
  loom__free(done);
  return best;
}

/* sum over tasks of min over devices of lambda_d x seconds(t, d), for lambda in the simplex,
 * is a lower bound of any schedule (weak duality of the linear program that spreads every
 * task's work freely over the devices); g receives its supergradient. */
static double area_at(const sim *s, const double *lambda, double *g) {
  int32_t nd = s->pf->n_devices;
  double sum = 0;
  for (int32_t d = 0; d < nd; d++) g[d] = 0;
  for (int32_t t = 0; t < s->p->n_tasks; t++) {
    const double *ex = s->exec + (size_t)t * (size_t)nd;
    double best = INFINITY;
    int32_t arg = -1;
    for (int32_t d = 0; d < nd; d++) {
      if (ex[d] < INFINITY && lambda[d] * ex[d] < best) best = lambda[d] * ex[d], arg = d;
    }
    if (arg < 0) continue;
    sum += best;
    g[arg] += ex[arg];
  }
  return sum;
}

/* The best such bound found by exponentiated supergradient ascent; every iterate is a valid
 * bound, so stopping early only loosens it. */
static double work_bound(const sim *s) {
  int32_t nd = s->pf->n_devices;
  double lambda[256], g[256], best = 0;
  if (nd > 256) return 0;
  double work = 0;
  for (int32_t d = 0; d < nd; d++) lambda[d] = 1.0 / nd;
  int32_t iters = (int32_t)(4e7 / ((double)s->p->n_tasks * nd + 1));
  iters = iters < 20 ? 20 : iters > 2000 ? 2000 : iters;
  for (int32_t k = 0; k < iters; k++) {
    double f = area_at(s, lambda, g);
    if (f > best) best = f;
    work = 0;
    for (int32_t d = 0; d < nd; d++) work = g[d] > work ? g[d] : work;
    if (work <= 0) break;
    double eta = 2.0 / sqrt(k + 1.0), norm = 0;
    for (int32_t d = 0; d < nd; d++) norm += lambda[d] *= exp(eta * (g[d] / work - 1));
    for (int32_t d = 0; d < nd; d++) lambda[d] /= norm;
  }
  return best;
}

/* ---- the schedule ----------------------------------------------------------------------- */

loom_status loom_sched_schedule(const loom_sched_problem *problem, const loom_sched_platform *platform,
                                loom_sched_policy policy, loom_sched_result *out) {
  if (out) memset(out, 0, sizeof *out);
  if (!problem || !platform || !out || policy < LOOM_SCHED_FIXED || policy > LOOM_SCHED_DMDA)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "schedule: NULL argument or unknown policy");
  sim s;
  loom_status st = sim_init(&s, problem, platform, out);
  if (st) return st;
  out->policy = policy;
  for (int32_t t = 0; t < problem->n_tasks; t++) {
    int32_t dev = pick(&s, t, policy);
    if (dev < 0) {
      st = cannot_place(&s, t, policy);
      break;
    }
    place(&s, t, dev);
    if (out->tasks[t].finish > out->makespan) out->makespan = out->tasks[t].finish;
  }
  if (!st) {
    out->bound_path = path_bound(&s);
    out->bound_work = work_bound(&s);
  }
  sim_free(&s);
  if (st) loom_sched_result_deinit(out);
  return st;
}

void loom_sched_result_print(const loom_sched_result *r, const loom_sched_platform *pf, FILE *f) {
  if (!r || !pf || !f) return;
  double bound = r->bound_work > r->bound_path ? r->bound_work : r->bound_path;
  fprintf(f, "policy %s: %d tasks, makespan %.6g s\n", loom_sched_policy_name(r->policy), r->n_tasks,
          r->makespan);
  fprintf(f, "lower bound %.6g s (work over all devices at their best rates %.6g s, critical path %.6g s)\n",
          bound, r->bound_work, r->bound_path);
  if (bound > 0) fprintf(f, "makespan / lower bound: %.3f\n", r->makespan / bound);
  for (int32_t d = 0; d < r->n_devices && d < pf->n_devices; d++) {
    double share = r->makespan > 0 ? 100 * r->busy[d] / r->makespan : 0;
    fprintf(f, "  %-10s %-8s busy %.6g s (%.1f%%), %d tasks\n", pf->devices[d].id, pf->devices[d].kind,
            r->busy[d], share, r->task_count[d]);
  }
  for (int32_t l = 0; l < r->n_links && l < pf->n_links; l++) {
    char b[32];
    fprintf(f, "  link %s <-> %s: %s moved\n", pf->node_names[pf->links[l].a], pf->node_names[pf->links[l].b],
            loom_bytes_format(r->link_bytes[l], b, sizeof b));
  }
}

loom_status loom_sched_result_write_json(const loom_sched_result *r, const loom_sched_platform *pf, FILE *f) {
  if (!r || !pf || !f) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "schedule json: NULL argument");
  loom__json j;
  loom__json_init(&j, f, true);
  loom__json_begin_object(&j);
  loom__json_kv_string(&j, "policy", loom_sched_policy_name(r->policy));
  loom__json_kv_double(&j, "makespan", r->makespan);
  loom__json_kv_double(&j, "bound", r->bound_work > r->bound_path ? r->bound_work : r->bound_path);
  loom__json_kv_double(&j, "bound_work", r->bound_work);
  loom__json_kv_double(&j, "bound_path", r->bound_path);
  loom__json_key(&j, "devices");
  loom__json_begin_array(&j);
  for (int32_t d = 0; d < r->n_devices && d < pf->n_devices; d++) {
    loom__json_begin_object(&j);
    loom__json_kv_string(&j, "id", pf->devices[d].id);
    loom__json_kv_string(&j, "kind", pf->devices[d].kind);
    loom__json_kv_double(&j, "busy", r->busy[d]);
    loom__json_kv_int64(&j, "tasks", r->task_count[d]);
    loom__json_end_object(&j);
  }
  loom__json_end_array(&j);
  loom__json_key(&j, "links");
  loom__json_begin_array(&j);
  for (int32_t l = 0; l < r->n_links && l < pf->n_links; l++) {
    loom__json_begin_object(&j);
    loom__json_kv_string(&j, "a", pf->node_names[pf->links[l].a]);
    loom__json_kv_string(&j, "b", pf->node_names[pf->links[l].b]);
    loom__json_kv_int64(&j, "bytes", r->link_bytes[l]);
    loom__json_end_object(&j);
  }
  loom__json_end_array(&j);
  loom__json_key(&j, "tasks");
  loom__json_begin_array(&j);
  for (int32_t t = 0; t < r->n_tasks; t++) {
    loom__json_begin_object(&j);
    loom__json_kv_string(&j, "label", r->tasks[t].label);
    loom__json_kv_string(&j, "device", pf->devices[r->tasks[t].device].id);
    loom__json_kv_double(&j, "start", r->tasks[t].start);
    loom__json_kv_double(&j, "finish", r->tasks[t].finish);
    loom__json_end_object(&j);
  }
  loom__json_end_array(&j);
  loom__json_end_object(&j);
  return loom__json_finish(&j);
}
