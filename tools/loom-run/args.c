/* loom-run's command line. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "loom/internal/cli.h"
#include "loom_run.h"

void run_print_usage(FILE *f) {
  fputs(
      "usage: loom-run FILE.lir [--in NAME=FILE.npy ...] [--in NAME=FILE.safetensors[:TENSOR] ...]\n"
      "                [--in-all FILE.safetensors ...] [--random SEED] [--out-dir DIR]\n"
      "                [--out FILE.safetensors]\n"
      "                [--runners SPEC | --limit BYTES] [--no-rewrite NAME ...]\n"
      "                [--recover] [--stats-json FILE] [--trace FILE.json] [--print N]\n"
      "                [--devices auto|LIST] [--policy dmda|eager|fixed]\n"
      "       loom-run --help | --version\n"
      "       mpirun -np N loom-run --mpi FILE.lir ...   (the same options)\n"
      "       loom-run FILE.lir --simulate PLATFORM.json|here [--devices LIST]\n"
      "                [--policy dmda|eager|fixed] [--runners SPEC] [--no-rewrite NAME ...]\n"
      "                [--stats-json FILE]\n"
      "\n"
      "Rewrites the graph of FILE.lir to save memory, cuts it into stages that fit the\n"
      "runners' limits, runs them, and prints the time, each stage's estimated and measured\n"
      "peak bytes and each output's type.\n"
      "\n"
      "  --in NAME=FILE.npy  the value of parameter NAME, a NumPy .npy file whose dtype and\n"
      "                      shape equal the parameter's (little-endian, C order); a q8\n"
      "                      parameter takes int8, a q4 one uint8 of its packed shape\n"
      "                      [.., ceil(n/2)] (docs/ir-quant.md)\n"
      "  --in NAME=FILE.safetensors:TENSOR\n"
      "                      the value of NAME, tensor TENSOR of a .safetensors file (TENSOR\n"
      "                      left out: the one called NAME)\n"
      "  --in-all FILE.safetensors\n"
      "                      every parameter not given by --in takes the tensor of the same\n"
      "                      name in FILE (repeatable: the first file that has it wins)\n"
      "                      Input files are memory-mapped, not read: a parameter a loop\n"
      "                      streams is read piece by piece, each piece's pages dropped again\n"
      "                      once done, so an input larger than memory works. A tensor stored\n"
      "                      misaligned for its dtype is copied, a .npy pipe read whole.\n"
      "  --random SEED       fill every parameter not given by --in or --in-all with seeded\n"
      "                      values: floats and complex parts uniform in [0,1), integers\n"
      "                      uniform in [0,100), bools 0 or 1; the same SEED gives the same\n"
      "                      values on every machine (SEED: an integer 0..2^64-1)\n"
      "  --out-dir DIR       write each returned value to DIR/NAME.npy, NAME being its name\n"
      "                      in `return` (a repeated name gets _1, _2, ...); DIR is created\n"
      "                      if missing. Either every file is written or none is.\n"
      "  --out FILE.safetensors\n"
      "                      write every returned value to one .safetensors file, each under\n"
      "                      its name in `return` (repeats get _1, _2, ...)\n"
      "  --runners SPEC      runners as DEVICE:BYTES,... (\"cpu0:64MiB,cpu0:32MiB\"; a device\n"
      "                      may repeat): the graph is chunked to fit the smallest limit and\n"
      "                      split into stages, each run under its runner's limit\n"
      "  --limit BYTES       shorthand for --runners cpu0:BYTES (123, 64KiB, 1.5GiB, 2GB)\n"
      "                      Without either, the devices LOOM_MEM_LIMIT names are the runners,\n"
      "                      with their limits (LOOM_MEM_LIMIT=cpu0:8MiB: stages that fit\n"
      "                      8 MiB); with neither set, the graph runs whole on cpu0 where it\n"
      "                      fits what cpu0 can hold now, else it is planned for that (7/8 of\n"
      "                      its free memory; the note on stderr says the limit and its\n"
      "                      source); --limit none runs it whole regardless. A runner\n"
      "                      over its device's LOOM_MEM_LIMIT is lowered to it (said on stderr).\n"
      "  --no-rewrite NAME   skip one rewrite: distance, attention, dot_transpose,\n"
      "                      tile_broadcast, reduce_broadcast, dot_chain, sum_broadcast, schedule,\n"
      "                      chunk, fuse\n"
      "  --recover           when a device runs out of memory although the stage fitted its\n"
      "                      limit (another process took memory), re-plan that stage for the\n"
      "                      memory free then (else half its limit, then a quarter; 3 tries)\n"
      "                      and go on; each re-plan is listed (\"recover\" lines, --stats-json\n"
      "                      \"recoveries\"). Needs runners (--runners, --limit, LOOM_MEM_LIMIT).\n"
      "  --stats-json FILE   write the stages' limits, estimated and measured peaks, the\n"
      "                      rewrites applied with the bytes they saved, and the memory\n"
      "                      manager's counters per memory node (\"memory\": in use, peak,\n"
      "                      allocations, pool hits, evictions, bytes in and out), as JSON\n"
      "  --trace FILE.json   write the memory manager's trace of the run (allocations, frees,\n"
      "                      copies, migrations, evictions, stages) as Chrome trace JSON, which\n"
      "                      Perfetto (ui.perfetto.dev) and chrome://tracing open\n"
      "  --print N           print the first N rows of each output\n"
      "  --mpi               run under mpirun: the pieces of each loop are shared between the\n"
      "                      ranks (one contiguous range each), combined on rank 0 and sent\n"
      "                      back to all; every rank plans alike from --runners / --limit (a\n"
      "                      rank's LOOM_MEM_LIMIT lowers only the limit of its own share);\n"
      "                      rank 0 writes the outputs and prints each rank's pieces, time,\n"
      "                      and peak against its limit (README, \"Running under MPI\")\n"
      "  --simulate PLATFORM.json\n"
      "                      run nothing: plan the graph for the devices the file describes\n"
      "                      (docs/sched.md; each device a runner at its memory unless\n"
      "                      --runners says otherwise), schedule the stages and loop pieces\n"
      "                      there with --policy, and print the makespan, each device's busy\n"
      "                      time and a lower bound; inputs are not needed (--stats-json\n"
      "                      FILE: the schedule as JSON, docs/sched.md); --devices LIST:\n"
      "                      only those of its devices (cuda0 against cpu0,cuda0).\n"
      "                      --simulate here: this machine's devices with the models\n"
      "                      `loom-bench calibrate` measured here: what a run on several\n"
      "                      devices would gain, by the models, without running it\n"
      "                      (`loom-info --platform` writes the same platform as a file)\n"
      "  --policy NAME       with --simulate: dmda (the default: earliest expected finish,\n"
      "                      transfers included), eager (the first free device) or fixed\n"
      "                      (each stage on its runner's device). In a real run (implies\n"
      "                      --devices auto unless given): how the devices share stages and\n"
      "                      a loop's pieces: dmda (the default: a device takes a ready stage\n"
      "                      or the next range of pieces where it would finish it first, by\n"
      "                      its model or its measured time per piece; a stage without\n"
      "                      models goes to the first free device of the list), eager (the\n"
      "                      first free device takes it) or fixed (no sharing: the stages on\n"
      "                      their runners)\n"
      "  --devices auto|LIST run on these devices at once (\"auto\": every device found,\n"
      "                      cpu0 first; or \"cpu0,ocl0,ocl1\"): the graph is cut into stages,\n"
      "                      by branch where it has independent branches, else around its\n"
      "                      loops; independent stages run on different devices at once and\n"
      "                      every device shares a loop's pieces (a worker thread per device);\n"
      "                      each device runs under its memory, or the limit --runners gives\n"
      "                      it, or --limit for all. The report and --stats-json (\"devices\")\n"
      "                      give each device's busy seconds (by its own clock where it has\n"
      "                      one: OpenCL and CUDA events), pieces, ranges, stages and bytes\n"
      "                      moved; --trace shows a \"range\" span per range on its\n"
      "                      device's lane\n"
      "  --help              this text\n"
      "  --version           the version of Loom and the commit it was built from\n"
      "\n"
      "Nothing is written (outputs, --stats-json, --trace) unless the whole run succeeds.\n"
      "\n"
      "Environment: LOOM_MEM_LIMIT=ID:BYTES,... limits memory nodes (ocl0:256MiB,cpu0:4GiB);\n"
      "a device it names that this machine lacks is ignored (said on stderr).\n"
      "LOOM_DEVICES picks devices (cpu0,ocl1). LOOM_LOG=warn|info|debug: how much the library\n"
      "says on stderr, one line per event (default warn). For tests of --recover,\n"
      "LOOM_TESTING_REFUSE=NODE:N:BYTES makes the memory node NODE (host0 for cpu0, ocl0)\n"
      "refuse every allocation of more than BYTES from its N-th on (loom/testing.h).\n"
      "\n"
      "Exit status: 0 on success, 1 when the run fails, 2 for a wrong command line (a runner\n"
      "on a device this machine lacks included) or a LOOM_MEM_LIMIT that does not parse.\n",
      f);
}

int run_fail(int code, const char *fmt, ...) {
  /* One write per message: ranks of an MPI run share stderr, and their lines must not mix. */
  char msg[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return loom__cli_fail("loom-run", code, "%s", msg);
}

/* True for "path:LINE:COL: error: ...", the parser's own located form. */
static bool is_located(const char *msg) {
  const char *e = strstr(msg, ": error: ");
  if (!e) return false;
  const char *p = e;
  for (int field = 0; field < 2; field++) {
    const char *digits_end = p;
    while (p > msg && p[-1] >= '0' && p[-1] <= '9') p--;
    if (p == digits_end || p == msg || p[-1] != ':') return false;
    p--;
  }
  return p > msg;
}

int run_fail_loom(const char *context) {
  const char *msg = loom_last_error();
  if (is_located(msg)) {
    fprintf(stderr, "%s\n", msg);
  } else if (context) {
    run_fail(EXIT_RUN, "%s: %s", context, msg);
  } else {
    run_fail(EXIT_RUN, "%s", msg);
  }
  return EXIT_RUN;
}

void run_options_free(run_options *opts) {
  for (int32_t i = 0; i < opts->n_inputs; i++) {
    free(opts->inputs[i].name);
    free(opts->inputs[i].path);
    free(opts->inputs[i].tensor);
  }
  free(opts->inputs);
  free(opts->in_all);
  free(opts->no_rewrite);
  memset(opts, 0, sizeof *opts);
}

/* True when `path` ends in ".safetensors". */
static bool is_safetensors(const char *path, size_t len) {
  static const char ext[] = ".safetensors";
  return len >= sizeof ext - 1 && memcmp(path + len - (sizeof ext - 1), ext, sizeof ext - 1) == 0;
}

/* Splits FILE.safetensors:TENSOR (the last ".safetensors:" ends the file name); FILE.npy and
 * FILE.safetensors stay whole, the latter's tensor being the parameter's name. */
static int split_file(run_input *in, const char *file) {
  const char *colon = NULL;
  for (const char *p = strstr(file, ".safetensors:"); p; p = strstr(p + 1, ".safetensors:"))
    colon = p + strlen(".safetensors");
  size_t len = colon ? (size_t)(colon - file) : strlen(file);
  bool st = colon || is_safetensors(file, len);
  if (colon && colon[1] == '\0')
    return run_fail(EXIT_USAGE, "--in %s=%s: no tensor name after ':'", in->name, file);
  in->path = malloc(len + 1);
  in->tensor = st ? strdup(colon ? colon + 1 : in->name) : NULL;
  if (!in->path || (st && !in->tensor)) return run_fail(EXIT_RUN, "out of memory");
  memcpy(in->path, file, len);
  in->path[len] = '\0';
  return 0;
}

static int add_input(run_options *opts, const char *spec) {
  const char *eq = strchr(spec, '=');
  if (!eq || eq == spec || eq[1] == '\0')
    return loom__cli_bad_value("loom-run", "--in", spec, "NAME=FILE.npy or NAME=FILE.safetensors[:TENSOR]");
  size_t n = (size_t)(eq - spec);
  for (int32_t i = 0; i < opts->n_inputs; i++)
    if (strlen(opts->inputs[i].name) == n && memcmp(opts->inputs[i].name, spec, n) == 0)
      return run_fail(EXIT_USAGE, "--in %s: parameter '%.*s' is given twice", spec, (int)n, spec);
  char *name = malloc(n + 1);
  if (!name) return run_fail(EXIT_RUN, "out of memory");
  memcpy(name, spec, n);
  name[n] = '\0';
  run_input *in = &opts->inputs[opts->n_inputs++];
  in->name = name;
  in->spec = eq + 1;
  return split_file(in, eq + 1);
}

enum {
  OPT_IN = 256,
  OPT_IN_ALL,
  OPT_RANDOM,
  OPT_OUT_DIR,
  OPT_OUT,
  OPT_PRINT,
  OPT_RUNNERS,
  OPT_LIMIT,
  OPT_NO_REWRITE,
  OPT_STATS_JSON,
  OPT_TRACE,
  OPT_RECOVER,
  OPT_SIMULATE,
  OPT_POLICY,
  OPT_DEVICES,
  OPT_MPI,
};

static const struct option run_options_table[] = {
    {"in", required_argument, NULL, OPT_IN},
    {"in-all", required_argument, NULL, OPT_IN_ALL},
    {"random", required_argument, NULL, OPT_RANDOM},
    {"out-dir", required_argument, NULL, OPT_OUT_DIR},
    {"out", required_argument, NULL, OPT_OUT},
    {"print", required_argument, NULL, OPT_PRINT},
    {"runners", required_argument, NULL, OPT_RUNNERS},
    {"limit", required_argument, NULL, OPT_LIMIT},
    {"no-rewrite", required_argument, NULL, OPT_NO_REWRITE},
    {"stats-json", required_argument, NULL, OPT_STATS_JSON},
    {"trace", required_argument, NULL, OPT_TRACE},
    {"recover", no_argument, NULL, OPT_RECOVER},
    {"simulate", required_argument, NULL, OPT_SIMULATE},
    {"policy", required_argument, NULL, OPT_POLICY},
    {"devices", required_argument, NULL, OPT_DEVICES},
    {"mpi", no_argument, NULL, OPT_MPI},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

static loom__cli run_cli = {.prog = "loom-run",
                            .synopsis = "loom-run FILE.lir [--in NAME=FILE ...] [--random SEED] [options]",
                            .options = run_options_table,
                            .short_options = "hV"};

static const char *const rewrite_names[] = {LOOM_REWRITE_NAMES};
static const char *const policy_names[] = {"dmda", "eager", "fixed"};

/* A value that must not be empty: a file or directory name, a device list. */
static int need_text(const char *flag, const char *value, const char *what) {
  return *value ? 0 : loom__cli_bad_value("loom-run", flag, value, what);
}

static int set_out(run_options *opts, const char *value) {
  if (opts->out_st) return run_fail(EXIT_USAGE, "--out is given twice");
  if (!is_safetensors(value, strlen(value)))
    return loom__cli_bad_value("loom-run", "--out", value,
                               "a FILE.safetensors (--out-dir DIR writes .npy files)");
  opts->out_st = value;
  return 0;
}

/* The options that name files and directories. */
static int parse_file_option(run_options *opts, int key, const char *value) {
  switch (key) {
    case OPT_IN:
      return add_input(opts, value);
    case OPT_IN_ALL:
      if (!is_safetensors(value, strlen(value)))
        return loom__cli_bad_value("loom-run", "--in-all", value, "a FILE.safetensors");
      opts->in_all[opts->n_in_all++] = value;
      return 0;
    case OPT_OUT:
      return set_out(opts, value);
    case OPT_OUT_DIR:
      opts->out_dir = value;
      return need_text("--out-dir", value, "a directory name");
    case OPT_STATS_JSON:
      opts->stats_json = value;
      return need_text("--stats-json", value, "a file name");
    case OPT_TRACE:
      opts->trace = value;
      return need_text("--trace", value, "a file name");
    case OPT_SIMULATE:
      opts->simulate = value;
      return need_text("--simulate", value, "a PLATFORM.json file or 'here'");
    default:
      return -1;
  }
}

/* Handles option `key` (its value in optarg, NULL for options that take none). */
static int parse_option(run_options *opts, int key, const char *value) {
  int rc = parse_file_option(opts, key, value);
  if (rc >= 0) return rc;
  uint64_t rows = 0;
  switch (key) {
    case 'h':
      opts->help = true;
      return 0;
    case 'V':
      opts->version = true;
      return 0;
    case OPT_MPI:
      return run_mpi_flag(opts, NULL);
    case OPT_RECOVER:
      opts->recover = true;
      return 0;
    case OPT_RANDOM:
      opts->random = true;
      return loom__cli_u64("loom-run", "--random", value, "a seed from 0 to 2^64-1", &opts->seed);
    case OPT_PRINT:
      if ((rc = loom__cli_u64("loom-run", "--print", value, "a count of rows from 0 to 2^64-1", &rows)))
        return rc;
      opts->print_rows = rows > INT64_MAX ? INT64_MAX : (int64_t)rows;
      return 0;
    case OPT_RUNNERS:
    case OPT_LIMIT:
      if (opts->runners || opts->limit)
        return run_fail(EXIT_USAGE, "give --runners or --limit once, not both");
      *(key == OPT_RUNNERS ? &opts->runners : &opts->limit) = value;
      return 0;
    case OPT_NO_REWRITE:
      if (loom__cli_choice("loom-run", "--no-rewrite", value, rewrite_names,
                           (int)(sizeof rewrite_names / sizeof rewrite_names[0])) < 0)
        return EXIT_USAGE;
      opts->no_rewrite[opts->n_no_rewrite++] = value;
      return 0;
    case OPT_POLICY:
      if (loom__cli_choice("loom-run", "--policy", value, policy_names, 3) < 0) return EXIT_USAGE;
      opts->policy = value;
      return 0;
    case OPT_DEVICES:
      opts->devices = value;
      return need_text("--devices", value, "auto or a list of devices (cpu0,ocl0)");
    default:
      return EXIT_USAGE;
  }
}

int run_parse_args(int argc, char **argv, run_options *opts) {
  memset(opts, 0, sizeof *opts);
  opts->print_rows = -1;
  opts->inputs = calloc((size_t)argc, sizeof *opts->inputs);
  opts->no_rewrite = calloc((size_t)argc, sizeof *opts->no_rewrite);
  opts->in_all = calloc((size_t)argc, sizeof *opts->in_all);
  if (!opts->inputs || !opts->no_rewrite || !opts->in_all) return run_fail(EXIT_RUN, "out of memory");
  for (int key; (key = loom__cli_next(&run_cli, argc, argv)) != -1;) {
    if (key == LOOM__CLI_ERROR) return EXIT_USAGE;
    int rc = parse_option(opts, key, optarg);
    if (rc) return rc;
  }
  if (opts->help || opts->version) return 0;
  if (run_cli.index < argc) opts->graph_path = argv[run_cli.index];
  if (run_cli.index + 1 < argc)
    return loom__cli_usage_error(&run_cli, "one graph file at a time: '%s' and '%s' given", opts->graph_path,
                                 argv[run_cli.index + 1]);
  if (!opts->graph_path) return loom__cli_usage_error(&run_cli, "no graph file given (FILE.lir)");
  if (opts->mpi && (opts->devices || opts->policy || opts->simulate))
    return run_fail(EXIT_USAGE, "--mpi shares each loop between the ranks, one runner each: it takes no %s",
                    opts->simulate  ? "--simulate"
                    : opts->devices ? "--devices"
                                    : "--policy");
  if (opts->policy && !opts->simulate && !opts->devices) opts->devices = "auto";
  return 0;
}
