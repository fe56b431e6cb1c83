/* loom-plan: what a graph costs in memory, what the rewrites save, and how it is cut into
 * stages for a set of runners. See print_usage for the command line.
 *
 * The rewrites run with the largest runner limit (split_by_memory chunks to it too); where
 * the chunk rewrite cannot fit the whole graph under it, the graph is optimized without
 * chunking and the splitter cuts it into stages (see optimize below). loom-run should prepare
 * its graph the same way, so that the plan printed here is the plan it runs. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom/internal/cli.h"
#include "loom/internal/json.h"
#include "loom/loom.h"
#include "predict.h"

enum { EXIT_FAIL = 1, EXIT_USAGE = 2 };

/* The text table lists every op up to this many; beyond, the first TABLE_HEAD and the peak. */
enum { TABLE_ALL = 200, TABLE_HEAD = 100 };

static const char *const rewrite_names[] = {LOOM_REWRITE_NAMES};

typedef struct options {
  const char *path;
  const char *runners_text; /* --runners, or NULL */
  const char *limit_text;   /* --limit, or NULL */
  const char **disabled;    /* --no-rewrite names (argv strings) */
  int32_t n_disabled;
  double max_slowdown; /* --max-slowdown F; 0: not given */
  bool json, help, version;
} options;

/* What one invocation computed, released by state_free. */
typedef struct state {
  loom_graph *graph, *optimized;
  loom_runner *runners;
  int32_t n_runners;
  loom_estimate before, after;
  loom_rewrite_report report;
  loom_plan *plan;
  char note[512]; /* why chunking was left to the splitter, or "" */
  plan_prediction prediction;
  loom_limit_search search; /* --max-slowdown's */
  bool search_calibrated;
} state;

static void print_usage(FILE *f) {
  fputs(
      "usage: loom-plan FILE.lir [--runners SPEC | --limit BYTES] [--no-rewrite NAME]... [--json]\n"
      "       loom-plan FILE.lir --max-slowdown F [--no-rewrite NAME]... [--json]\n"
      "       loom-plan --help | --version\n"
      "\n"
      "Prints the memory estimate of the graph in FILE.lir (logical, physical, total and peak\n"
      "bytes, and op by op) before and after the memory-saving rewrites, the rewrites applied\n"
      "with the bytes each saved, and, given runners, the plan of stages with their estimated\n"
      "peaks.\n"
      "\n"
      "  --runners SPEC     runners as DEVICE:BYTES[,DEVICE:BYTES...], e.g. cpu0:64MiB,cpu0:32MiB;\n"
      "                     stages go to them in turn. The chunk rewrite fits the graph under the\n"
      "                     largest limit where it can; the splitter still chunks an op that\n"
      "                     fits no runner on its own.\n"
      "  --limit BYTES      shorthand for --runners cpu0:BYTES\n"
      "                     Without either, the devices LOOM_MEM_LIMIT names are the runners,\n"
      "                     with its limits (LOOM_MEM_LIMIT=cpu0:8MiB: stages that fit 8 MiB).\n"
      "                     A runner over its device's LOOM_MEM_LIMIT is lowered to it (said on\n"
      "                     stderr), as loom-run does.\n"
      "                     With one runner, the plan's predicted time is printed beside the whole\n"
      "                     graph's (the scheduler's cost model: `loom-bench calibrate` measures it,\n"
      "                     else \"uncalibrated\" defaults), with a warning where the limit makes the\n"
      "                     run more than 10x slower and the smallest limit within 2x.\n"
      "  --max-slowdown F   plan on cpu0 for the smallest limit whose predicted time stays within F\n"
      "                     times the whole graph's (F >= 1, e.g. 2): a bisection over limits, each\n"
      "                     step a plan and its prediction\n"
      "  --no-rewrite NAME  skip one rewrite; may repeat. NAME is one of distance, attention,\n"
      "                     dot_transpose, tile_broadcast, reduce_broadcast, dot_chain,\n"
      "                     sum_broadcast, schedule, chunk, fuse\n"
      "  --json             print one JSON object instead of text\n"
      "  --help             this text\n"
      "  --version          the version of Loom and the commit it was built from\n"
      "\n"
      "Byte sizes: 123, 64KiB, 512MiB, 1.5GiB, 2GB.\n"
      "Environment: LOOM_MEM_LIMIT (above); LOOM_LOG=warn|info|debug, how much the library says\n"
      "on stderr, one line per event (default warn).\n"
      "Exit status: 0 on success, 1 when the graph or the plan fails, 2 for a wrong command line\n"
      "(a runner on a device this machine lacks included, or a LOOM_MEM_LIMIT that does not\n"
      "parse; a device LOOM_MEM_LIMIT names that this machine lacks is ignored with a note).\n",
      f);
}

static int fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(int code, const char *fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return loom__cli_fail("loom-plan", code, "%s", msg);
}

/* A library failure: the parser's located message as is, anything else after "loom-plan: ". */
static int fail_loom(void) {
  const char *msg = loom_last_error();
  if (strstr(msg, ": error: ")) {
    fprintf(stderr, "%s\n", msg);
    return EXIT_FAIL;
  }
  return fail(EXIT_FAIL, "%s", msg);
}

/* ---- the command line ------------------------------------------------------------------ */

enum { OPT_RUNNERS = 256, OPT_LIMIT, OPT_NO_REWRITE, OPT_JSON, OPT_MAX_SLOWDOWN };

static const struct option plan_options[] = {
    {"runners", required_argument, NULL, OPT_RUNNERS},
    {"limit", required_argument, NULL, OPT_LIMIT},
    {"no-rewrite", required_argument, NULL, OPT_NO_REWRITE},
    {"json", no_argument, NULL, OPT_JSON},
    {"max-slowdown", required_argument, NULL, OPT_MAX_SLOWDOWN},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

static loom__cli plan_cli = {.prog = "loom-plan",
                             .synopsis = "loom-plan FILE.lir [--runners SPEC | --limit BYTES] [options]",
                             .options = plan_options,
                             .short_options = "hV"};

static int take_option(int key, const char *v, options *o) {
  switch (key) {
    case OPT_RUNNERS:
      o->runners_text = v;
      return 0;
    case OPT_LIMIT:
      o->limit_text = v;
      return 0;
    case OPT_NO_REWRITE:
      if (loom__cli_choice("loom-plan", "--no-rewrite", v, rewrite_names,
                           (int)(sizeof rewrite_names / sizeof rewrite_names[0])) < 0)
        return EXIT_USAGE;
      o->disabled[o->n_disabled++] = v;
      return 0;
    case OPT_JSON:
      o->json = true;
      return 0;
    case OPT_MAX_SLOWDOWN:
      return loom__cli_double("loom-plan", "--max-slowdown", v, 1, 1e6, "a factor of at least 1, as 2",
                              &o->max_slowdown)
                 ? EXIT_USAGE
                 : 0;
    case 'h':
      o->help = true;
      return 0;
    case 'V':
      o->version = true;
      return 0;
    default:
      return EXIT_USAGE;
  }
}

static int parse_args(int argc, char **argv, options *o) {
  memset(o, 0, sizeof *o);
  /* Room for every argument, and "chunk" (see compute). */
  o->disabled = calloc((size_t)argc + 1, sizeof *o->disabled);
  if (!o->disabled) return fail(EXIT_FAIL, "out of memory");
  for (int key; (key = loom__cli_next(&plan_cli, argc, argv)) != -1;) {
    int rc = key == LOOM__CLI_ERROR ? EXIT_USAGE : take_option(key, optarg, o);
    if (rc) return rc;
  }
  if (o->help || o->version) return 0;
  if (plan_cli.index + 1 < argc)
    return loom__cli_usage_error(&plan_cli, "one graph file at a time (got '%s' too)",
                                 argv[plan_cli.index + 1]);
  if (plan_cli.index < argc) o->path = argv[plan_cli.index];
  if (!o->path) return loom__cli_usage_error(&plan_cli, "no graph file given");
  if (o->runners_text && o->limit_text)
    return loom__cli_usage_error(&plan_cli, "give --runners or --limit, not both");
  if (o->max_slowdown > 0 && (o->runners_text || o->limit_text))
    return loom__cli_usage_error(&plan_cli,
                                 "--max-slowdown chooses the limit: give it without --runners or --limit");
  return 0;
}

/* Runners from --runners or --limit, lowered to their devices' LOOM_MEM_LIMIT (stderr says
 * so); both absent: the devices LOOM_MEM_LIMIT names, with its limits; none there either:
 * none. Parse errors (LOOM_MEM_LIMIT's too) are usage errors. As loom-run does, so the plan
 * printed here is the plan it runs. */
static int make_runners(const options *o, state *st) {
  if (o->max_slowdown > 0) return 0; /* compute sets the runner once it has searched */
  if (!o->runners_text && !o->limit_text) {
    if (loom_runners_from_mem_limits(NULL, &st->runners, &st->n_runners))
      return fail(EXIT_USAGE, "%s", loom_last_error());
    return 0;
  }
  if (o->runners_text) {
    if (loom_runners_parse(o->runners_text, &st->runners, &st->n_runners))
      return fail(EXIT_USAGE, "--runners: %s", loom_last_error());
  } else {
    int64_t bytes;
    if (loom_bytes_parse(o->limit_text, &bytes)) return fail(EXIT_USAGE, "--limit: %s", loom_last_error());
    if (bytes <= 0) return fail(EXIT_USAGE, "--limit: the limit must be more than 0 bytes");
    st->runners = calloc(1, sizeof *st->runners);
    if (!st->runners) return fail(EXIT_FAIL, "out of memory");
    snprintf(st->runners[0].device, sizeof st->runners[0].device, "cpu0");
    st->runners[0].limit = bytes;
    st->n_runners = 1;
  }
  for (int32_t i = 0; i < st->n_runners; i++) {
    loom_runner asked = st->runners[i];
    if (loom_runners_fit_mem_limits(&st->runners[i], 1, NULL, NULL))
      return fail(EXIT_USAGE, "%s", loom_last_error());
    if (st->runners[i].limit == asked.limit) continue;
    char was[32], now[32];
    fprintf(stderr, "loom-plan: note: runner %d (%s) lowered from %s to %s, its LOOM_MEM_LIMIT\n", (int)i,
            asked.device, loom_bytes_format(asked.limit, was, sizeof was),
            loom_bytes_format(st->runners[i].limit, now, sizeof now));
  }
  return 0;
}

/* The runners' devices against those this machine has, as loom-run checks them: a device
 * --runners names that is not here is a usage error naming the ids there are; one that only
 * LOOM_MEM_LIMIT names is left out with a note (loom_runners_check_devices). */
static int check_devices(const options *o, state *st) {
  /* cpu0 is always there: a plan for it alone needs no device discovery, which loads every
   * OpenCL driver (PoCL's LLVM alone is tens of megabytes of resident memory). */
  bool cpu_only = true;
  for (int32_t i = 0; i < st->n_runners; i++) cpu_only &= strcmp(st->runners[i].device, "cpu0") == 0;
  if (st->n_runners == 0 || cpu_only) return 0;
  loom_context *ctx = NULL;
  if (loom_context_create(NULL, &ctx)) return fail(EXIT_FAIL, "creating a context: %s", loom_last_error());
  bool from_env = !o->runners_text && !o->limit_text;
  char dropped[256];
  loom_status s =
      loom_runners_check_devices(ctx, st->runners, &st->n_runners, from_env, dropped, sizeof dropped);
  loom_context_destroy(ctx);
  if (s) return fail(EXIT_USAGE, "--runners: %s", loom_last_error());
  if (dropped[0])
    fprintf(stderr, "loom-plan: note: LOOM_MEM_LIMIT names %s, which this machine lacks: ignored\n", dropped);
  return 0;
}

/* ---- the work ---------------------------------------------------------------------------- */

/* The rewrites' options, as loom-run sets them. */
static loom_optimize_options rewrite_options(const options *o) {
  loom_optimize_options opts;
  loom_optimize_options_init(&opts);
  opts.fused_runs = loom_fused_body_runs_everywhere; /* fuse first where that fits */
  opts.disabled = o->disabled;
  opts.n_disabled = o->n_disabled;
  return opts;
}

/* --max-slowdown: the smallest limit within the factor becomes the one runner, cpu0's. */
static int search_limit(const options *o, state *st) {
  loom_optimize_options opts = rewrite_options(o);
  if (plan_search_limit("cpu0", st->graph, o->max_slowdown, &opts, &st->search, &st->search_calibrated))
    return EXIT_FAIL;
  st->runners = calloc(1, sizeof *st->runners);
  if (!st->runners) return fail(EXIT_FAIL, "out of memory");
  snprintf(st->runners[0].device, sizeof st->runners[0].device, "cpu0");
  st->runners[0].limit = st->search.limit;
  st->n_runners = 1;
  return 0;
}

/* The rewrites, as loom_graph_optimize_for_runners prepares a graph for its runners. */
static int optimize(options *o, state *st) {
  loom_optimize_options opts = rewrite_options(o);
  loom_status s = loom_graph_optimize_for_runners(st->graph, st->runners, st->n_runners, &opts,
                                                  &st->optimized, &st->report, st->note, sizeof st->note);
  return s ? fail_loom() : 0;
}

static int compute(options *o, state *st) {
  if (loom_graph_load_any(o->path, &st->graph)) return fail_loom();
  if (loom_graph_estimate(st->graph, NULL, &st->before)) return fail_loom();
  int rc = o->max_slowdown > 0 ? search_limit(o, st) : 0;
  if (!rc) rc = optimize(o, st);
  if (rc) return rc;
  if (loom_graph_estimate(st->optimized, NULL, &st->after)) return fail_loom();
  if (st->n_runners > 0 && loom_plan_split_by_memory(st->optimized, st->runners, st->n_runners, &st->plan))
    return fail_loom();
  if (st->n_runners == 1) {
    loom_optimize_options opts = rewrite_options(o);
    plan_predict(st->runners[0].device, st->runners[0].limit, st->graph, st->plan, &opts, &st->prediction);
  }
  return 0;
}

static void state_free(state *st) {
  loom_plan_destroy(st->plan);
  loom_rewrite_report_deinit(&st->report);
  loom_estimate_deinit(&st->before);
  loom_estimate_deinit(&st->after);
  loom_graph_destroy(st->optimized);
  loom_graph_destroy(st->graph);
  free(st->runners);
}

/* ---- text ------------------------------------------------------------------------------ */

static const char *fmt_bytes(int64_t bytes, char *buf, size_t size) {
  return loom_bytes_format(bytes, buf, size);
}

/* "a, b" of an op's results, cut to fit the column. */
/* The op's kind (loom_graph_op_info_get cannot fail for an op index the estimate gave). */
static loom_op op_kind(const loom_graph *g, int32_t op) {
  loom_op_info info;
  loom_graph_op_info_get(g, op, &info);
  return info.kind;
}

static int32_t op_result_count(const loom_graph *g, int32_t op) {
  loom_op_info info;
  loom_graph_op_info_get(g, op, &info);
  return info.n_outputs;
}

static const char *op_results(const loom_graph *g, int32_t op, char *buf, size_t size) {
  size_t n = 0;
  buf[0] = '\0';
  for (int32_t r = 0; r < op_result_count(g, op) && n < size; r++) {
    char label[32];
    n += (size_t)snprintf(buf + n, size - n, "%s%s", r ? "," : "",
                          loom_value_label(g, loom_graph_op_output(g, op, r), label, sizeof label));
  }
  return buf;
}

static void print_row(const loom_graph *g, const loom_estimate *e, int32_t step) {
  const loom_estimate_step *s = &e->steps[step];
  char res[20], a[32], b[32], c[32], d[32], p[32];
  op_results(g, s->op, res, sizeof res);
  printf("  %c%5d  %-12s %-19s %12s %12s %12s %12s %12s\n", step == e->peak_step ? '*' : ' ', (int)step,
         loom_op_name(op_kind(g, s->op)), res, fmt_bytes(s->output_logical, a, sizeof a),
         fmt_bytes(s->output_physical, b, sizeof b), fmt_bytes(s->temporary, c, sizeof c),
         fmt_bytes(s->live_before, d, sizeof d), fmt_bytes(s->peak, p, sizeof p));
}

static void print_table(const loom_graph *g, const loom_estimate *e) {
  if (e->n_steps == 0) return;
  printf("  %6s  %-12s %-19s %12s %12s %12s %12s %12s\n", "step", "op", "results", "logical", "physical",
         "temporaries", "live", "step peak");
  int32_t shown = e->n_steps <= TABLE_ALL ? e->n_steps : TABLE_HEAD;
  for (int32_t i = 0; i < shown; i++) print_row(g, e, i);
  if (shown == e->n_steps) return;
  printf("  ... %d more ops (--json lists every op)\n", (int)(e->n_steps - shown));
  if (e->peak_step >= shown) print_row(g, e, e->peak_step);
}

/* One line per loop: its pieces, the operands it slices, its body's ops. */
static void print_loops(const loom_graph *g) {
  for (int32_t o = 0; o < loom_graph_op_count(g); o++) {
    const loom_graph *body;
    int64_t n, piece;
    if (op_kind(g, o) != LOOM_OP_LOOP || loom_graph_loop_get(g, o, &body, &n, &piece)) continue;
    char res[64], line[512];
    int64_t trips = (n + piece - 1) / piece, last = n - (trips - 1) * piece;
    int len = snprintf(line, sizeof line, "  loop %s: %lld pieces of %lld", op_results(g, o, res, sizeof res),
                       (long long)trips, (long long)piece);
    if (last != piece)
      len += snprintf(line + len, sizeof line - (size_t)len, " (the last %lld)", (long long)last);
    loom_op_info info;
    loom_graph_op_info_get(g, o, &info);
    const char *sep = ", slicing ";
    for (int32_t k = 0; k < info.n_inputs && len < (int)sizeof line; k++) {
      loom_loop_input rule;
      char label[32];
      if (loom_graph_loop_input_rule(g, o, k, &rule) || rule.axis < 0) continue;
      len += snprintf(line + len, sizeof line - (size_t)len, "%s%s axis %d", sep,
                      loom_value_label(g, loom_graph_op_input(g, o, k), label, sizeof label), (int)rule.axis);
      if (rule.offset && len < (int)sizeof line)
        len += snprintf(line + len, sizeof line - (size_t)len, " from %lld", (long long)rule.offset);
      if ((rule.stride > 1 || rule.halo > 0) && len < (int)sizeof line) /* a conv's tiles */
        len += snprintf(line + len, sizeof line - (size_t)len, " (window: stride %lld, halo %lld)",
                        (long long)(rule.stride > 1 ? rule.stride : 1), (long long)rule.halo);
      sep = ", ";
    }
    int32_t n_body = loom_graph_op_count(body);
    if (len < (int)sizeof line)
      len += snprintf(line + len, sizeof line - (size_t)len, "; body of %d op%s:", (int)n_body,
                      n_body == 1 ? "" : "s");
    for (int32_t b = 0; b < n_body && len < (int)sizeof line; b++)
      len += snprintf(line + len, sizeof line - (size_t)len, " %s", loom_op_name(op_kind(body, b)));
    printf("%s\n", line);
  }
}

/* One line per fused op, in loop bodies too: its body's ops, its inputs and results, and what
 * it saves at its step: the body's peak as separate ops less what the fused op holds (its
 * inputs, results and accumulator). */
static void print_fused(const loom_graph *g, const char *where) {
  for (int32_t o = 0; o < loom_graph_op_count(g); o++) {
    const loom_graph *body;
    int64_t n, piece;
    if (op_kind(g, o) == LOOM_OP_LOOP && !loom_graph_loop_get(g, o, &body, &n, &piece)) {
      char res[64], inner[96];
      snprintf(inner, sizeof inner, "%sloop %s: ", where, op_results(g, o, res, sizeof res));
      print_fused(body, inner);
      continue;
    }
    if (op_kind(g, o) != LOOM_OP_FUSED || loom_graph_fused_get(g, o, &body)) continue;
    char res[64], line[512], label[32], buf[32];
    int32_t n_body = loom_graph_op_count(body);
    int len = snprintf(line, sizeof line, "  %sfused %s: %d op%s:", where, op_results(g, o, res, sizeof res),
                       (int)n_body, n_body == 1 ? "" : "s");
    for (int32_t b = 0; b < n_body && len < (int)sizeof line; b++)
      len += snprintf(line + len, sizeof line - (size_t)len, " %s", loom_op_name(op_kind(body, b)));
    loom_op_info info;
    loom_graph_op_info_get(g, o, &info);
    for (int32_t k = 0; k < info.n_inputs && len < (int)sizeof line; k++)
      len += snprintf(line + len, sizeof line - (size_t)len, "%s%s", k ? ", " : "; inputs ",
                      loom_value_label(g, loom_graph_op_input(g, o, k), label, sizeof label));
    loom_estimate unfused;
    if (!loom_graph_estimate(body, NULL, &unfused)) {
      int64_t held = unfused.input_bytes;
      for (int32_t k = 0; k < info.n_outputs; k++) {
        int64_t logical = 0, physical = 0;
        loom_value_bytes(g, loom_graph_op_output(g, o, k), &logical, &physical);
        held += physical;
      }
      /* the final op's accumulator: as it has it unfused, at the body's last step */
      if (unfused.n_steps > 0) held += unfused.steps[unfused.n_steps - 1].temporary;
      if (len < (int)sizeof line)
        len +=
            snprintf(line + len, sizeof line - (size_t)len, "; saves %s",
                     fmt_bytes(unfused.peak_bytes > held ? unfused.peak_bytes - held : 0, buf, sizeof buf));
      loom_estimate_deinit(&unfused);
    }
    printf("%s\n", line);
  }
}

static void print_estimate(const char *title, const loom_graph *g, const loom_estimate *e) {
  char buf[32];
  printf("%s: %d ops\n", title, (int)e->n_steps);
  printf("  inputs       %s\n", fmt_bytes(e->input_bytes, buf, sizeof buf));
  printf("  logical      %s\n", fmt_bytes(e->logical_bytes, buf, sizeof buf));
  printf("  physical     %s\n", fmt_bytes(e->physical_bytes, buf, sizeof buf));
  printf("  temporaries  %s\n", fmt_bytes(e->temporary_bytes, buf, sizeof buf));
  printf("  total        %s\n", fmt_bytes(e->total_bytes, buf, sizeof buf));
  printf("  peak         %s (%lld bytes)", fmt_bytes(e->peak_bytes, buf, sizeof buf),
         (long long)e->peak_bytes);
  if (e->peak_step >= 0) {
    char res[64];
    const loom_estimate_step *s = &e->steps[e->peak_step];
    printf(" at step %d, %s %s", (int)e->peak_step, loom_op_name(op_kind(g, s->op)),
           op_results(g, s->op, res, sizeof res));
  }
  printf("\n\n");
  print_table(g, e);
  print_loops(g);
  print_fused(g, "");
  printf("\n");
}

static void print_rewrites(const loom_rewrite_report *r) {
  printf("rewrites applied: %d\n", (int)r->count);
  for (int32_t i = 0; i < r->count; i++) {
    char buf[32];
    printf("  %-16s saved %10s  %s\n", r->entries[i].name,
           fmt_bytes(r->entries[i].bytes_saved, buf, sizeof buf), r->entries[i].detail);
  }
  printf("\n");
}

static int print_text(const options *o, const state *st) {
  printf("graph %s: %d ops, %d inputs, %d outputs\n\n", loom_graph_name(st->graph),
         (int)loom_graph_op_count(st->graph), (int)loom_graph_param_count(st->graph),
         (int)loom_graph_output_count(st->graph));
  print_estimate("estimate before rewrites", st->graph, &st->before);
  print_rewrites(&st->report);
  if (st->note[0]) printf("note: %s\n\n", st->note);
  print_estimate("estimate after rewrites", st->optimized, &st->after);
  if (st->plan && loom_plan_print(st->plan, stdout)) return fail_loom();
  if (!st->plan) printf("no plan: give --runners SPEC or --limit BYTES to cut the graph into stages\n");
  if (st->search.steps > 0) {
    char lim[32], need[32];
    printf(
        "\nmax slowdown %.3gx: the smallest limit predicted within it is %s (%.2fx the whole time; whole "
        "need "
        "%s; %d plans searched)%s\n",
        o->max_slowdown, loom_bytes_format(st->search.limit, lim, sizeof lim),
        st->search.seconds / st->search.whole_seconds,
        loom_bytes_format(st->search.whole_bytes, need, sizeof need), (int)st->search.steps,
        st->search_calibrated ? "" : " (uncalibrated)");
  }
  if (st->n_runners == 1) plan_prediction_print(&st->prediction);
  return 0;
}

/* ---- JSON ------------------------------------------------------------------------------ */

static void json_estimate(loom__json *j, const char *key, const loom_graph *g, const loom_estimate *e) {
  loom__json_key(j, key);
  loom__json_begin_object(j);
  loom__json_kv_int64(j, "input_bytes", e->input_bytes);
  loom__json_kv_int64(j, "logical_bytes", e->logical_bytes);
  loom__json_kv_int64(j, "physical_bytes", e->physical_bytes);
  loom__json_kv_int64(j, "temporary_bytes", e->temporary_bytes);
  loom__json_kv_int64(j, "total_bytes", e->total_bytes);
  loom__json_kv_int64(j, "peak_bytes", e->peak_bytes);
  if (e->peak_step >= 0)
    loom__json_kv_int64(j, "peak_step", e->peak_step);
  else
    loom__json_kv_null(j, "peak_step");
  loom__json_key(j, "ops");
  loom__json_begin_array(j);
  for (int32_t i = 0; i < e->n_steps; i++) {
    const loom_estimate_step *s = &e->steps[i];
    loom__json_begin_object(j);
    loom__json_kv_int64(j, "step", i);
    loom__json_kv_int64(j, "index", s->op);
    loom__json_kv_string(j, "op", loom_op_name(op_kind(g, s->op)));
    loom__json_key(j, "results");
    loom__json_begin_array(j);
    for (int32_t r = 0; r < op_result_count(g, s->op); r++) {
      char label[32];
      loom__json_string(j, loom_value_label(g, loom_graph_op_output(g, s->op, r), label, sizeof label));
    }
    loom__json_end_array(j);
    loom__json_kv_int64(j, "logical_bytes", s->output_logical);
    loom__json_kv_int64(j, "physical_bytes", s->output_physical);
    loom__json_kv_int64(j, "temporary_bytes", s->temporary);
    loom__json_kv_int64(j, "live_bytes", s->live_before);
    loom__json_kv_int64(j, "peak_bytes", s->peak);
    loom__json_end_object(j);
  }
  loom__json_end_array(j);
  loom__json_end_object(j);
}

static void json_names(loom__json *j, const char *key, const loom_graph *g, const int32_t *ids, int32_t n) {
  loom__json_key(j, key);
  loom__json_begin_array(j);
  for (int32_t i = 0; i < n; i++) {
    char label[32];
    loom__json_string(j, loom_value_label(g, (loom_value){ids[i]}, label, sizeof label));
  }
  loom__json_end_array(j);
}

static void json_stages(loom__json *j, const state *st) {
  loom__json_key(j, "stages");
  loom__json_begin_array(j);
  for (int32_t i = 0; st->plan && i < loom_plan_stage_count(st->plan); i++) {
    loom_stage_info s;
    if (loom_plan_stage(st->plan, i, &s)) continue;
    const loom_graph *g = loom_plan_graph(st->plan);
    loom__json_begin_object(j);
    loom__json_kv_string(j, "runner", s.device);
    loom__json_kv_int64(j, "runner_index", s.runner);
    loom__json_kv_int64(j, "limit_bytes", s.limit);
    loom__json_kv_int64(j, "estimated_peak_bytes", s.estimated_peak);
    loom__json_kv_int64(j, "ops", s.n_ops);
    loom__json_kv_int64(j, "first_op", s.n_ops > 0 ? s.ops[0] : -1);
    loom__json_kv_bool(j, "runs", s.graph != NULL);
    json_names(j, "inputs", g, s.inputs, s.n_inputs);
    json_names(j, "outputs", g, s.outputs, s.n_outputs);
    loom__json_end_object(j);
  }
  loom__json_end_array(j);
}

static int print_json(const options *o, const state *st) {
  loom__json j;
  loom__json_init(&j, stdout, true);
  loom__json_begin_object(&j);
  loom__json_kv_string(&j, "graph", loom_graph_name(st->graph));
  json_estimate(&j, "estimate_before", st->graph, &st->before);
  json_estimate(&j, "estimate", st->optimized, &st->after);
  loom__json_key(&j, "rewrites");
  loom__json_begin_array(&j);
  for (int32_t i = 0; i < st->report.count; i++) {
    loom__json_begin_object(&j);
    loom__json_kv_string(&j, "name", st->report.entries[i].name);
    loom__json_kv_string(&j, "detail", st->report.entries[i].detail);
    loom__json_kv_int64(&j, "bytes_saved", st->report.entries[i].bytes_saved);
    loom__json_end_object(&j);
  }
  loom__json_end_array(&j);
  loom__json_key(&j, "runners");
  loom__json_begin_array(&j);
  for (int32_t i = 0; i < st->n_runners; i++) {
    loom__json_begin_object(&j);
    loom__json_kv_string(&j, "device", st->runners[i].device);
    loom__json_kv_int64(&j, "limit_bytes", st->runners[i].limit);
    loom__json_end_object(&j);
  }
  loom__json_end_array(&j);
  json_stages(&j, st);
  if (st->note[0]) loom__json_kv_string(&j, "note", st->note);
  if (st->n_runners == 1) plan_prediction_json(&j, &st->prediction);
  if (st->search.steps > 0) {
    loom__json_key(&j, "max_slowdown");
    loom__json_begin_object(&j);
    loom__json_kv_double(&j, "factor", o->max_slowdown);
    loom__json_kv_int64(&j, "limit_bytes", st->search.limit);
    loom__json_kv_double(&j, "seconds", st->search.seconds);
    loom__json_kv_double(&j, "whole_seconds", st->search.whole_seconds);
    loom__json_kv_int64(&j, "whole_need_bytes", st->search.whole_bytes);
    loom__json_kv_int64(&j, "plans", st->search.steps);
    loom__json_end_object(&j);
  }
  loom__json_end_object(&j);
  if (loom__json_finish(&j)) return fail_loom();
  return 0;
}

int main(int argc, char **argv) {
  options o;
  state st;
  memset(&st, 0, sizeof st);
  int rc = parse_args(argc, argv, &o);
  bool info = o.help || o.version; /* --help, --version: nothing else is done */
  if (!rc && o.help) print_usage(stdout);
  if (!rc && !o.help && o.version) loom__cli_print_version(stdout, "loom-plan");
  if (!rc && !info) rc = make_runners(&o, &st);
  if (!rc && !info) rc = check_devices(&o, &st);
  if (!rc && !info) rc = compute(&o, &st);
  if (!rc && !info) rc = o.json ? print_json(&o, &st) : print_text(&o, &st);
  if (!rc && fflush(stdout) != 0) rc = fail(EXIT_FAIL, "writing the output failed");
  state_free(&st);
  free(o.disabled);
  return rc;
}
