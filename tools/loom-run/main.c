/* loom-run: runs a .lir graph on NumPy .npy and .safetensors inputs (or seeded random ones)
 * and writes its outputs as .npy files or one .safetensors file. See run_print_usage (args.c) for the command
 * line.
 *
 * Nothing is written unless everything succeeded: outputs, --stats-json and --trace go to
 * temporary files beside their final names and are renamed only once all of them are complete
 * (outputs.c), so a failing run leaves the files of an earlier one as they were; an output
 * directory this run created is removed again on failure, and on SIGINT or SIGTERM with the
 * temporaries (loom__file_remove_on_signals).
 *
 * Memory: the runners are --runners / --limit, lowered to the devices' LOOM_MEM_LIMIT, or
 * without them the devices LOOM_MEM_LIMIT names. The run's buffers come from the context's
 * memory manager, whose counters (--stats-json "memory", the summary's memory lines) and
 * trace (--trace) cover the run. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loom/internal/cli.h"
#include "loom/internal/files.h"
#include "loom/internal/json.h"
#include "loom/io.h"
#include "loom/testing.h"
#include "loom_run.h"

/* Everything one run holds, released by run_state_free. */
typedef struct run_state {
  loom_graph *graph;
  int32_t n_params, n_outputs;
  loom_tensor *inputs;      /* n_params */
  loom_npy_map **maps;      /* n_params: the --in file an input is mapped from, or NULL */
  bool *views;              /* n_params: the input is a view of an open .safetensors file */
  loom_safetensors **files; /* the .safetensors files opened, n_files */
  int32_t n_files;
  loom_tensor *outputs; /* n_outputs */
  char **out_names;     /* n_outputs file stems, owned */
  char **created_dirs;  /* directories this run made, outermost first */
  int32_t n_created;
  loom_run_stats stats; /* the run's figures, whatever kind of run (loom/runtime.h) */
  loom_runner *runners; /* --runners / --limit; NULL: none */
  int32_t n_runners;
  loom_graph *optimized; /* the graph after rewrites */
  loom_rewrite_report report;
  loom_plan *plan;
  loom_context *ctx; /* the run's, kept for its memory manager's counters and trace */
  run_staged staged; /* the files written, renamed at the end (outputs.c) */
  bool mpi;          /* --mpi: the run was on MPI_COMM_WORLD (stats has its ranks and ranges) */
} run_state;

static void run_state_free(run_state *st) {
  for (int32_t i = 0; st->inputs && i < st->n_params; i++) {
    if (st->maps && st->maps[i])
      loom_npy_unmap(st->maps[i]);         /* the tensor's data is the mapping's */
    else if (!(st->views && st->views[i])) /* a view's data is its file's */
      loom_tensor_deinit(&st->inputs[i]);
  }
  free(st->maps);
  free(st->views);
  for (int32_t i = 0; i < st->n_files; i++) loom_safetensors_close(st->files[i]);
  free(st->files);
  for (int32_t i = 0; st->outputs && i < st->n_outputs; i++) loom_tensor_deinit(&st->outputs[i]);
  for (int32_t i = 0; st->out_names && i < st->n_outputs; i++) free(st->out_names[i]);
  for (int32_t i = 0; i < st->n_created; i++) free(st->created_dirs[i]);
  free(st->inputs);
  free(st->outputs);
  free(st->out_names);
  free(st->created_dirs);
  free(st->runners);
  loom_run_stats_deinit(&st->stats);
  loom_plan_destroy(st->plan);
  loom_rewrite_report_deinit(&st->report);
  loom_graph_destroy(st->optimized);
  loom_graph_destroy(st->graph);
  loom_context_destroy(st->ctx);
  run_stage_free(&st->staged);
  memset(st, 0, sizeof *st);
}

static const char *param_name(const loom_graph *g, int32_t i) {
  const char *name = loom_value_name(g, loom_graph_param_at(g, i));
  return name ? name : "?";
}

/* "x, y, z": the parameter list for messages. */
static void param_list(const loom_graph *g, char *buf, size_t size) {
  size_t n = 0;
  buf[0] = '\0';
  for (int32_t i = 0; i < loom_graph_param_count(g) && n < size; i++)
    n += (size_t)snprintf(buf + n, size - n, i ? ", %s" : "%s", param_name(g, i));
  if (loom_graph_param_count(g) == 0) snprintf(buf, size, "none");
}

static int32_t find_param(const loom_graph *g, const char *name) {
  for (int32_t i = 0; i < loom_graph_param_count(g); i++)
    if (strcmp(param_name(g, i), name) == 0) return i;
  return -1;
}

/* The open .safetensors file at `path`, opened now if it is not yet (the header only). */
static int open_file(run_state *st, const char *path, const char *flag, loom_safetensors **out) {
  for (int32_t i = 0; i < st->n_files; i++) {
    if (strcmp(loom_safetensors_path(st->files[i]), path) == 0) {
      *out = st->files[i];
      return 0;
    }
  }
  loom_safetensors **grown = realloc(st->files, sizeof *grown * (size_t)(st->n_files + 1));
  if (!grown) return run_fail(EXIT_RUN, "out of memory");
  st->files = grown;
  if (loom_safetensors_open(path, &st->files[st->n_files])) return run_fail_loom(flag);
  *out = st->files[st->n_files++];
  return 0;
}

/* Opens every --in-all file and every .safetensors --in file, so that what they hold is known
 * before the inputs are checked. */
static int open_files(run_state *st, const run_options *opts) {
  loom_safetensors *f;
  char where[512];
  for (int32_t i = 0; i < opts->n_in_all; i++) {
    snprintf(where, sizeof where, "--in-all %s", opts->in_all[i]);
    int rc = open_file(st, opts->in_all[i], where, &f);
    if (rc) return rc;
  }
  for (int32_t i = 0; i < opts->n_inputs; i++) {
    if (!opts->inputs[i].tensor) continue;
    snprintf(where, sizeof where, "--in %s=%s", opts->inputs[i].name, opts->inputs[i].spec);
    int rc = open_file(st, opts->inputs[i].path, where, &f);
    if (rc) return rc;
  }
  return 0;
}

/* The first --in-all file holding a tensor called `name`, or NULL. */
static loom_safetensors *in_all_file(const run_state *st, const run_options *opts, const char *name) {
  for (int32_t i = 0; i < opts->n_in_all; i++)
    for (int32_t k = 0; k < st->n_files; k++)
      if (strcmp(loom_safetensors_path(st->files[k]), opts->in_all[i]) == 0 &&
          loom_safetensors_find(st->files[k], name) >= 0)
        return st->files[k];
  return NULL;
}

/* Command-line checks against the graph: every --in names a parameter, and every parameter
 * has a value unless --random fills it. */
static int check_input_names(const run_state *st, const run_options *opts) {
  char list[1024];
  for (int32_t i = 0; i < opts->n_inputs; i++) {
    if (find_param(st->graph, opts->inputs[i].name) < 0) {
      param_list(st->graph, list, sizeof list);
      return run_fail(EXIT_USAGE, "--in %s=%s: graph '%s' has no parameter '%s' (its parameters: %s)",
                      opts->inputs[i].name, opts->inputs[i].spec, loom_graph_name(st->graph),
                      opts->inputs[i].name, list);
    }
  }
  if (opts->random) return 0;
  size_t n = 0;
  list[0] = '\0';
  for (int32_t p = 0; p < st->n_params; p++) {
    bool given = false;
    for (int32_t i = 0; i < opts->n_inputs; i++)
      given |= strcmp(opts->inputs[i].name, param_name(st->graph, p)) == 0;
    given |= in_all_file(st, opts, param_name(st->graph, p)) != NULL;
    if (!given && n < sizeof list)
      n += (size_t)snprintf(list + n, sizeof list - n, n ? ", %s" : "%s", param_name(st->graph, p));
  }
  if (n && opts->n_in_all)
    return run_fail(EXIT_USAGE,
                    "missing inputs: %s (in no --in-all file; give --in NAME=FILE, or --random SEED)", list);
  if (n)
    return run_fail(
        EXIT_USAGE,
        "missing inputs: %s (give --in NAME=FILE.npy, --in-all FILE.safetensors, or --random SEED)", list);
  return 0;
}

/* "a, b, c": the tensors of a file, for messages. */
static void tensor_list(const loom_safetensors *f, char *buf, size_t size) {
  size_t n = 0;
  buf[0] = '\0';
  for (int32_t i = 0; i < loom_safetensors_count(f) && n < size; i++)
    n += (size_t)snprintf(buf + n, size - n, i ? ", %s" : "%s", loom_safetensors_name(f, i));
  if (loom_safetensors_count(f) == 0) snprintf(buf, size, "none");
}

/* Tensor `tensor` of an open .safetensors file as input p: a view of the mapping, or a copy
 * where the tensor is stored misaligned for its dtype. */
static int take_tensor(run_state *st, loom_safetensors *f, const char *tensor, int32_t p, const char *where) {
  int32_t k = loom_safetensors_find(f, tensor);
  if (k < 0) {
    char list[1024];
    tensor_list(f, list, sizeof list);
    return run_fail(EXIT_RUN, "%s: %s has no tensor '%s' (its tensors: %s)", where, loom_safetensors_path(f),
                    tensor, list);
  }
  if (!st->views && !(st->views = calloc((size_t)st->n_params, sizeof *st->views)))
    return run_fail(EXIT_RUN, "%s: out of memory", where);
  loom_status s = loom_safetensors_map(f, k, &st->inputs[p]);
  st->views[p] = s == LOOM_OK;
  if (s == LOOM_ERR_UNSUPPORTED) s = loom_safetensors_load(f, k, &st->inputs[p]);
  return s ? run_fail_loom(where) : 0;
}

/* Checks input p against its parameter's type; `where` names the flag it came from. */
/* Whether t holds a quantized parameter's storage as NumPy writes it (docs/ir-quant.md): q8 as
 * int8 of its shape, q4 as uint8 of its packed shape [.., ceil(n/2)]. */
static bool quantized_storage(const loom_type *t, const loom_type *want) {
  if (!loom_dtype_is_quantized(want->dtype) || want->rank < 1 || t->rank != want->rank) return false;
  if (t->dtype != (want->dtype == LOOM_Q8 ? LOOM_I8 : LOOM_U8)) return false;
  for (int32_t d = 0; d < want->rank; d++) {
    int64_t n = want->dims[d];
    if (t->dims[d] != (want->dtype == LOOM_Q4 && d == want->rank - 1 ? (n + 1) / 2 : n)) return false;
  }
  return true;
}

static int check_input_type(run_state *st, const char *name, int32_t p, const char *where) {
  loom_tensor *t = &st->inputs[p];
  const loom_type *want = loom_value_type(st->graph, loom_graph_param_at(st->graph, p));
  if (loom_type_equal(&t->type, want)) return 0;
  if (quantized_storage(&t->type, want)) { /* the same bytes, read as the parameter's type */
    t->type = *want;
    return 0;
  }
  char have_s[LOOM_TYPE_STRING_MAX], want_s[LOOM_TYPE_STRING_MAX];
  loom_type_format(want, want_s, sizeof want_s);
  loom_type_format(&t->type, have_s, sizeof have_s);
  const char *shape = strchr(have_s, '['); /* "[3,4]" of "f32[3,4]" */
  loom_type same_dtype = t->type;
  same_dtype.dtype = want->dtype;
  if (t->type.dtype != want->dtype && loom_type_equal(&same_dtype, want))
    return run_fail(EXIT_RUN, "%s: dtype %s does not match parameter %s: %s", where,
                    loom_dtype_name(t->type.dtype), name, want_s);
  if (t->type.dtype == want->dtype)
    return run_fail(EXIT_RUN, "%s: shape %s does not match parameter %s: %s", where, shape, name, want_s);
  return run_fail(EXIT_RUN, "%s: type %s does not match parameter %s: %s", where, have_s, name, want_s);
}

/* True when `path` names an ONNX TensorProto file (.pb), which is read whole. */
static bool is_onnx_pb(const char *path) {
  size_t n = strlen(path);
  return n >= 3 && strcmp(path + n - 3, ".pb") == 0;
}

/* Loads one --in file and checks it against its parameter's type. */
static int load_input(run_state *st, const run_input *in, int32_t p) {
  char where[512];
  snprintf(where, sizeof where, "--in %s=%s", in->name, in->spec);
  if (in->tensor) {
    loom_safetensors *f = NULL;
    int rc = open_file(st, in->path, where, &f);
    if (!rc) rc = take_tensor(st, f, in->tensor, p, where);
    return rc ? rc : check_input_type(st, in->name, p, where);
  }
  loom_tensor *t = &st->inputs[p];
  /* Mapped, not read: a streamed input's pages are read piece by piece as its loop runs, so a
   * file larger than host memory works; what cannot be mapped (a pipe) is read whole. */
  if (!st->maps && !(st->maps = calloc((size_t)st->n_params, sizeof *st->maps)))
    return run_fail(EXIT_RUN, "%s: out of memory", where);
  loom_status ms = is_onnx_pb(in->path) ? loom_tensor_load_onnx_pb(in->path, t, NULL)
                                        : loom_tensor_map_npy(in->path, t, &st->maps[p]);
  if (ms == LOOM_ERR_UNSUPPORTED && loom_tensor_load_npy(in->path, t) == LOOM_OK) ms = LOOM_OK;
  if (ms) return run_fail_loom(where);
  return check_input_type(st, in->name, p, where);
}

/* True when --in names parameter p (--in wins over --in-all). */
static bool given(const run_state *st, const run_options *opts, int32_t p) {
  for (int32_t i = 0; i < opts->n_inputs; i++)
    if (strcmp(opts->inputs[i].name, param_name(st->graph, p)) == 0) return true;
  return false;
}

/* The inputs: the --in files, the --in-all files' tensors, then seeded random values for the rest. Called
 * once the plan is made, so that a graph whose plan is refused allocates no input (an f32[1<<40] parameter
 * under --limit 1MiB is refused at once, not after building 4 TiB of random values). */
static int bind_inputs(run_state *st, const run_options *opts) {
  int rc = 0;
  for (int32_t i = 0; i < opts->n_inputs; i++)
    if ((rc = load_input(st, &opts->inputs[i], find_param(st->graph, opts->inputs[i].name)))) return rc;
  for (int32_t p = 0; p < st->n_params; p++) {
    if (given(st, opts, p)) continue;
    loom_safetensors *f = in_all_file(st, opts, param_name(st->graph, p));
    if (!f) continue;
    char where[512];
    snprintf(where, sizeof where, "--in-all %s", loom_safetensors_path(f));
    if ((rc = take_tensor(st, f, param_name(st->graph, p), p, where)) ||
        (rc = check_input_type(st, param_name(st->graph, p), p, where)))
      return rc;
  }
  for (int32_t p = 0; p < st->n_params; p++) {
    if (given(st, opts, p) || in_all_file(st, opts, param_name(st->graph, p)) || st->inputs[p].data) continue;
    const loom_type *type = loom_value_type(st->graph, loom_graph_param_at(st->graph, p));
    if (loom_tensor_init(&st->inputs[p], type) ||
        loom_tensor_fill_random(&st->inputs[p], opts->seed, (uint64_t)p))
      return run_fail_loom(param_name(st->graph, p));
  }
  return 0;
}

/* File stems for the outputs: the returned names, with _1, _2, ... on repeats. */
static int name_outputs(run_state *st) {
  for (int32_t i = 0; i < st->n_outputs; i++) {
    const char *base = loom_value_name(st->graph, loom_graph_output_at(st->graph, i));
    char fallback[32], cand[512];
    if (!base) {
      snprintf(fallback, sizeof fallback, "out%d", (int)i);
      base = fallback;
    }
    snprintf(cand, sizeof cand, "%s", base);
    for (int32_t k = 1;; k++) {
      bool used = false;
      for (int32_t j = 0; j < i; j++) used |= strcmp(st->out_names[j], cand) == 0;
      if (!used) break;
      snprintf(cand, sizeof cand, "%s_%d", base, (int)k);
    }
    if (!(st->out_names[i] = strdup(cand))) return run_fail(EXIT_RUN, "out of memory");
  }
  return 0;
}

/* Outputs .npy cannot hold are refused before the run, not after it. */
static int check_saveable_outputs(const run_state *st) {
  for (int32_t i = 0; i < st->n_outputs; i++) {
    const loom_type *type = loom_value_type(st->graph, loom_graph_output_at(st->graph, i));
    if (loom_dtype_is_quantized(type->dtype))
      return run_fail(EXIT_RUN,
                      "output %s is %s, which has no NumPy dtype; dequantize it in the graph "
                      "(dequantize %s SCALE) to write it",
                      st->out_names[i], loom_dtype_name(type->dtype), st->out_names[i]);
    if (!loom_dtype_npy_descr(type->dtype))
      return run_fail(EXIT_RUN,
                      "output %s is %s, which has no NumPy dtype; cast it to f32 in the graph "
                      "(cast %s to=f32) to write it",
                      st->out_names[i], loom_dtype_name(type->dtype), st->out_names[i]);
  }
  return 0;
}

/* Likewise for --out FILE.safetensors (c128 has no safetensors dtype). */
static int check_safetensors_outputs(const run_state *st) {
  for (int32_t i = 0; i < st->n_outputs; i++) {
    const loom_type *type = loom_value_type(st->graph, loom_graph_output_at(st->graph, i));
    if (!loom_dtype_safetensors_name(type->dtype))
      return run_fail(EXIT_RUN,
                      "output %s is %s, which .safetensors cannot hold; %s it in the graph to write it",
                      st->out_names[i], loom_dtype_name(type->dtype),
                      loom_dtype_is_quantized(type->dtype) ? "dequantize" : "cast");
  }
  return 0;
}

/* --out FILE.safetensors: every output under its name (written whole or not at all). */
static int write_safetensors(run_state *st, const char *path) {
  const char *temp = NULL;
  int rc = run_stage_file(&st->staged, path, "--out", &temp, NULL);
  if (!rc && loom_safetensors_save(temp, (const char *const *)st->out_names, st->outputs, st->n_outputs))
    rc = run_fail_loom("--out");
  return rc;
}

/* mkdir -p, remembering what it made so a failed run can remove it again. */
static int make_out_dir(run_state *st, const char *dir) {
  size_t len = strlen(dir);
  char *path = strdup(dir);
  st->created_dirs = calloc(len + 1, sizeof *st->created_dirs);
  if (!path || !st->created_dirs) {
    free(path);
    return run_fail(EXIT_RUN, "out of memory");
  }
  for (size_t i = 1; i <= len; i++) {
    if (i < len && path[i] != '/') continue;
    char saved = path[i];
    path[i] = '\0';
    if (mkdir(path, 0777) == 0) {
      char *copy = strdup(path);
      if (!copy) {
        rmdir(path);
        free(path);
        return run_fail(EXIT_RUN, "out of memory");
      }
      st->created_dirs[st->n_created++] = copy;
      loom__file_on_signal_remove(copy, true); /* a SIGTERM before the end removes it again */
    } else if (errno != EEXIST) {
      int err = errno;
      path[i] = saved;
      free(path);
      return run_fail(EXIT_RUN, "cannot create output directory %s: %s", dir, strerror(err));
    }
    path[i] = saved;
  }
  free(path);
  struct stat sb;
  if (stat(dir, &sb) != 0) return run_fail(EXIT_RUN, "output directory %s: %s", dir, strerror(errno));
  if (!S_ISDIR(sb.st_mode)) return run_fail(EXIT_RUN, "output directory %s: not a directory", dir);
  return 0;
}

/* Removes the directories this run created (innermost first), when left empty. */
static void remove_created_dirs(run_state *st) {
  for (int32_t i = st->n_created - 1; i >= 0; i--) rmdir(st->created_dirs[i]);
}

static char *output_path(const char *dir, const char *stem) {
  size_t size = strlen(dir) + strlen(stem) + 8;
  char *p = malloc(size);
  if (p) snprintf(p, size, "%s/%s.npy", dir, stem);
  return p;
}

/* Writes every output under its staged temporary (loom_tensors_save_npy). In a folder this run
 * made, the outputs are the run's own until it ends: a signal removes them with the folder. */
static int write_outputs(run_state *st, const char *dir) {
  char **paths = calloc((size_t)st->n_outputs + 1, sizeof *paths);
  const char **temps = calloc((size_t)st->n_outputs + 1, sizeof *temps);
  int rc = paths && temps ? 0 : run_fail(EXIT_RUN, "out of memory");
  for (int32_t i = 0; !rc && i < st->n_outputs; i++) {
    if (!(paths[i] = output_path(dir, st->out_names[i]))) rc = run_fail(EXIT_RUN, "out of memory");
    if (!rc) rc = run_stage_file(&st->staged, paths[i], "--out-dir", &temps[i], NULL);
    if (!rc && st->n_created > 0) loom__file_on_signal_remove(paths[i], false);
  }
  if (!rc && loom_tensors_save_npy(temps, st->outputs, st->n_outputs)) rc = run_fail_loom(NULL);
  free(temps);
  for (int32_t i = 0; paths && i < st->n_outputs; i++) free(paths[i]);
  free(paths);
  return rc;
}

/* The runners as given: --runners SPEC, or --limit BYTES (cpu0:BYTES). */
static int parse_runners(run_state *st, const run_options *opts) {
  if (opts->runners) {
    if (loom_runners_parse(opts->runners, &st->runners, &st->n_runners))
      return run_fail(EXIT_USAGE, "--runners: %s", loom_last_error());
    return 0;
  }
  int64_t bytes;
  if (loom_bytes_parse(opts->limit, &bytes)) return run_fail(EXIT_USAGE, "--limit: %s", loom_last_error());
  if (bytes <= 0) return run_fail(EXIT_USAGE, "--limit: the limit must be more than 0 bytes");
  if (!(st->runners = calloc(1, sizeof *st->runners))) return run_fail(EXIT_RUN, "out of memory");
  snprintf(st->runners[0].device, sizeof st->runners[0].device, "cpu0");
  st->runners[0].limit = bytes;
  st->n_runners = 1;
  return 0;
}

/* Runners given are lowered to their devices' LOOM_MEM_LIMIT, which the memory manager would
 * not let a stage pass anyway: the plan then fits, and stderr says what changed. */
static int fit_runners(run_state *st) {
  int64_t *asked = malloc(sizeof *asked * (size_t)st->n_runners);
  if (!asked) return run_fail(EXIT_RUN, "out of memory");
  for (int32_t i = 0; i < st->n_runners; i++) asked[i] = st->runners[i].limit;
  int rc = 0;
  if (loom_runners_fit_mem_limits(st->runners, st->n_runners, NULL, NULL))
    rc = run_fail(EXIT_USAGE, "%s", loom_last_error());
  for (int32_t i = 0; !rc && i < st->n_runners; i++) {
    if (st->runners[i].limit == asked[i]) continue;
    char was[32], now[32];
    fprintf(stderr, "loom-run: note: runner %d (%s) lowered from %s to %s, its LOOM_MEM_LIMIT\n", (int)i,
            st->runners[i].device, loom_bytes_format(asked[i], was, sizeof was),
            loom_bytes_format(st->runners[i].limit, now, sizeof now));
  }
  free(asked);
  return rc;
}

/* --runners SPEC or --limit BYTES, fitted to LOOM_MEM_LIMIT; neither: the devices
 * LOOM_MEM_LIMIT names; none there either: no runners (the graph runs whole, no limit). A
 * LOOM_MEM_LIMIT that does not parse is a usage error, as a bad option is. A runner on a
 * device this machine lacks is a usage error too; such a device in LOOM_MEM_LIMIT, shared by
 * every program, is ignored with a note (loom_runners_check_devices). */
/* No limit given: where the graph, rewritten as a run without runners rewrites it, needs more
 * than cpu0 can hold now, it is planned for that (loom_runner_default), and the note says the
 * limit and where it came from; a graph that fits runs whole, as before. */
static int default_runner(run_state *st, const run_options *opts) {
  loom_runner r;
  const char *source = NULL;
  loom_estimate e;
  memset(&e, 0, sizeof e);
  loom_optimize_options o;
  loom_optimize_options_init(&o);
  o.fused_runs = loom_fused_body_runs_everywhere;
  o.disabled = opts->no_rewrite;
  o.n_disabled = opts->n_no_rewrite;
  loom_graph *whole = NULL;
  if (loom_runner_default(st->ctx, "cpu0", &r, &source) ||
      loom_graph_optimize_for_runners(st->graph, NULL, 0, &o, &whole, NULL, NULL, 0) ||
      loom_graph_estimate(whole, NULL, &e)) {
    loom_graph_destroy(whole);
    return run_fail_loom("the default limit");
  }
  int64_t need = e.peak_bytes;
  loom_estimate_deinit(&e);
  loom_graph_destroy(whole);
  if (need <= r.limit) return 0;
  /* Where no plan fits that limit either, the graph runs whole, and fails as it always did. */
  loom_graph *chunked = NULL;
  loom_plan *trial = NULL;
  bool plans = !loom_graph_optimize_for_runners(st->graph, &r, 1, &o, &chunked, NULL, NULL, 0) &&
               !loom_plan_split_by_memory(chunked, &r, 1, &trial);
  loom_plan_destroy(trial);
  loom_graph_destroy(chunked);
  if (!plans) return 0;
  if (!(st->runners = calloc(1, sizeof *st->runners))) return run_fail(EXIT_RUN, "out of memory");
  st->runners[0] = r;
  st->n_runners = 1;
  char a[32], b[32];
  fprintf(stderr,
          "loom-run: note: no --limit: the graph needs %s at its peak, more than cpu0 can hold now; planned "
          "for cpu0:%s (%s); --limit none runs it whole\n",
          loom_bytes_format(need, a, sizeof a), loom_bytes_format(r.limit, b, sizeof b), source);
  return 0;
}

/* Whether every runner is cpu0: then the context discovers no other device, as discovering
 * OpenCL's loads its drivers (PoCL's LLVM), some 25 ms of CPU at every start (issue 35). */
static bool only_cpu0(const run_state *st) {
  for (int32_t i = 0; i < st->n_runners; i++)
    if (strcmp(st->runners[i].device, "cpu0") != 0) return false;
  return st->n_runners > 0;
}

static int resolve_runners(run_state *st, const run_options *opts) {
  /* --limit none: no runners, the graph whole (LOOM_MEM_LIMIT's runners still hold) */
  bool none = opts->limit && strcmp(opts->limit, "none") == 0;
  bool given = (opts->runners || opts->limit) && !none;
  int rc = given ? parse_runners(st, opts) : 0;
  /* --mpi: every rank plans from the command line alone, so that all plan alike (mpi.c). */
  if (!rc && given && !opts->mpi) rc = fit_runners(st); /* LOOM_MEM_LIMIT is read (and checked) here ... */
  if (!rc && !given && !opts->mpi && loom_runners_from_mem_limits(NULL, &st->runners, &st->n_runners))
    rc = run_fail(EXIT_USAGE, "%s", loom_last_error());
  if (rc) return rc;
  /* ... before the context's memory manager reads it, so that it is a usage error. */
  loom_context_options co;
  loom_context_options_init(&co);
  if (given && !opts->devices && !opts->mpi && !getenv("LOOM_DEVICES") && only_cpu0(st)) co.devices = "cpu0";
  if (loom_context_create(&co, &st->ctx)) return run_fail_loom("creating a context");
  if (opts->devices) { /* the devices' runners, with the limits given as theirs */
    if (given && loom_runners_check_devices(st->ctx, st->runners, &st->n_runners, false, NULL, 0))
      return run_fail(EXIT_USAGE, "--runners: %s", loom_last_error());
    loom_runner *shared = NULL;
    int32_t n = 0;
    if ((rc = run_share_runners(st->ctx, opts, st->runners, st->n_runners, &shared, &n))) return rc;
    free(st->runners);
    st->runners = shared;
    st->n_runners = n;
    return 0;
  }
  if (given) {
    if (loom_runners_check_devices(st->ctx, st->runners, &st->n_runners, false, NULL, 0))
      return run_fail(EXIT_USAGE, "--runners: %s", loom_last_error());
    return 0;
  }
  char dropped[256];
  if (loom_runners_check_devices(st->ctx, st->runners, &st->n_runners, true, dropped, sizeof dropped))
    return run_fail_loom(NULL);
  if (dropped[0])
    fprintf(stderr, "loom-run: note: LOOM_MEM_LIMIT names %s, which this machine lacks: ignored\n", dropped);
  return st->n_runners == 0 && !none && !opts->mpi ? default_runner(st, opts) : 0;
}

/* Rewrites the graph for the runners (chunked to the largest limit where that fits the
 * whole graph), then cuts it into stages. */
static int optimize(run_state *st, const run_options *opts) {
  loom_optimize_options o;
  loom_optimize_options_init(&o);
  o.fused_runs = loom_fused_body_runs_everywhere; /* fuse first where that fits */
  o.disabled = opts->no_rewrite;
  o.n_disabled = opts->n_no_rewrite;
  loom_sched_policy policy = LOOM_SCHED_DMDA;
  if (opts->policy) loom_sched_policy_parse(opts->policy, &policy);
  if (opts->devices && policy != LOOM_SCHED_FIXED) {
    /* several devices share loops: chunked before fused, cut into the stages the shared run
     * places (by branch, or around the loops); planned for the devices the policy gives work
     * (they all still run: the idle ones report no range) */
    char note[512], left_out[256];
    loom_runner *planned = malloc(sizeof *planned * (size_t)(st->n_runners > 0 ? st->n_runners : 1));
    int32_t n_planned = 0;
    if (!planned) return run_fail(EXIT_RUN, "out of memory");
    if (loom_share_plan_runners(st->ctx, st->runners, st->n_runners, policy, planned, &n_planned, left_out,
                                sizeof left_out) ||
        loom_graph_optimize_for_sharing(st->graph, planned, n_planned, &o, &st->optimized, &st->report, note,
                                        sizeof note) ||
        loom_share_cut(st->optimized, &planned[0], st->n_runners, &st->plan)) {
      free(planned);
      return run_fail_loom(NULL);
    }
    free(planned);
    if (left_out[0])
      fprintf(stderr,
              "loom-run: note: %s compute%s on cpu0's cores: under dmda they take no range beside cpu0, "
              "so the graph is planned without them (--policy eager shares with them)\n",
              left_out, strchr(left_out, ',') ? "" : "s");
    if (note[0]) fprintf(stderr, "loom-run: note: %s\n", note);
    return 0;
  }
  if (loom_graph_optimize_for_runners(st->graph, st->runners, st->n_runners, &o, &st->optimized, &st->report,
                                      NULL, 0))
    return run_fail_loom(NULL);
  if (st->n_runners && loom_plan_split_by_memory(st->optimized, st->runners, st->n_runners, &st->plan))
    return run_fail_loom(NULL);
  return 0;
}

/* The runners, the rewrites and the plan: everything the graph alone decides, before any
 * input is read or made. */
static int plan(run_state *st, const run_options *opts) {
  int rc = resolve_runners(st, opts);
  return rc ? rc : optimize(st, opts);
}

/* LOOM_TESTING_REFUSE=NODE:N:BYTES: the fault injection of loom/testing.h, so that the tests
 * of --recover can make a device refuse memory mid-run as a crowded one would. */
static int arm_refusals(void) {
  const char *spec = getenv("LOOM_TESTING_REFUSE");
  if (!spec || !*spec) return 0;
  char node[32], bytes_text[64];
  long long nth = 0;
  int64_t bytes = 0;
  if (sscanf(spec, "%31[^:]:%lld:%63s", node, &nth, bytes_text) != 3 || nth < 1 ||
      loom_bytes_parse(bytes_text, &bytes))
    return run_fail(EXIT_USAGE, "LOOM_TESTING_REFUSE='%s': expected NODE:N:BYTES (host0:10:1MiB)", spec);
  loom_testing_fail_node_allocations(node, nth, bytes);
  return 0;
}

/* loom_plan_split's predicate for a plan of one stage. */
static bool never_cut(const loom_graph *g, int32_t o, void *acc) {
  (void)g, (void)o, (void)acc;
  return false;
}

/* loom_run's options of the command line: --devices and --policy (a run shared among devices,
 * each under the runner limit given for it), --recover re-planning with the rewrites
 * --no-rewrite leaves (ro->optimize points at *o, which must outlive ro), --mpi (ro->mpi is
 * set by the caller). */
static void run_options_of(const run_state *st, const run_options *opts, loom_optimize_options *o,
                           loom_run_options *ro) {
  loom_optimize_options_init(o);
  o->disabled = opts->no_rewrite;
  o->n_disabled = opts->n_no_rewrite;
  loom_run_options_init(ro);
  ro->recover = opts->recover;
  ro->optimize = o;
  ro->devices = opts->devices;
  if (opts->policy) loom_sched_policy_parse(opts->policy, &ro->policy);
  if (opts->devices) {
    ro->limits = st->runners;
    ro->n_limits = st->n_runners;
  }
}

static int execute(run_state *st, const run_options *opts) {
  loom_mem_manager *memory = NULL;
  if (loom_context_memory(st->ctx, &memory)) return run_fail_loom(NULL);
  if (opts->trace && loom_mem_trace_enable(memory, true)) return run_fail_loom("--trace");
  if (opts->recover && opts->devices && !(opts->policy && strcmp(opts->policy, "fixed") == 0))
    fprintf(stderr,
            "loom-run: note: --recover re-plans stages of --policy fixed only: a shared loop's ranges "
            "are not recovered\n");
  if (opts->recover && !st->plan)
    fprintf(stderr,
            "loom-run: note: --recover needs runners (--runners, --limit or LOOM_MEM_LIMIT): none here\n");
  int rc = arm_refusals();
  if (rc) return rc;
  loom_plan *own = NULL; /* without runners: the graph as one stage on cpu0, with no limit */
  loom_mpi_comm *comm = NULL;
  if (!st->plan && loom_plan_split(st->optimized, never_cut, NULL, NULL, 0, &own)) return run_fail_loom(NULL);
  if (opts->mpi && (rc = run_mpi_prepare(&comm))) {
    loom_plan_destroy(own);
    return rc;
  }
  st->mpi = opts->mpi;
  /* Every run is one call: on the plan's runners, shared among --devices, among MPI ranks, or
   * the graph whole. */
  loom_optimize_options o;
  loom_run_options ro;
  run_options_of(st, opts, &o, &ro);
  ro.mpi = comm;
  loom_status s = loom_run(st->ctx, st->plan ? st->plan : own, &ro, st->inputs, st->n_params, st->outputs,
                           st->n_outputs, &st->stats);
  run_mpi_comm_destroy(comm);
  loom_plan_destroy(own);
  loom_testing_fail_node_allocations(NULL, 0, 0);
  return s ? run_fail_loom(NULL) : 0;
}

/* --trace: the memory manager's trace of the run, into its staged temporary. */
static int write_trace(run_state *st, const char *path) {
  loom_mem_manager *memory = NULL;
  const char *temp = NULL;
  int rc = run_stage_file(&st->staged, path, "--trace", &temp, NULL);
  if (!rc && (loom_context_memory(st->ctx, &memory) || loom_mem_trace_write(memory, temp)))
    rc = run_fail(EXIT_RUN, "--trace %s: %s", path, loom_last_error());
  return rc;
}

/* --stats-json "recoveries": each re-plan of a stage that ran out of memory (--recover). */
static void write_recoveries_json(const run_state *st, loom__json *j) {
  loom__json_key(j, "recoveries");
  loom__json_begin_array(j);
  for (int32_t i = 0; i < st->stats.n_recoveries; i++) {
    const loom_plan_recovery *r = &st->stats.recoveries[i];
    loom__json_begin_object(j);
    loom__json_kv_int64(j, "stage", r->stage);
    loom__json_kv_string(j, "device", r->device);
    loom__json_kv_int64(j, "try", r->attempt);
    loom__json_kv_int64(j, "tries", r->tries);
    loom__json_kv_int64(j, "allocation", r->allocation);
    loom__json_kv_string(j, "error", r->error);
    loom__json_kv_int64(j, "free_bytes", r->free_bytes);
    loom__json_kv_int64(j, "limit_bytes", r->limit_bytes);
    loom__json_kv_int64(j, "stages", r->n_stages);
    loom__json_kv_int64(j, "estimated_peak_bytes", r->estimated_peak_bytes);
    loom__json_kv_int64(j, "peak_bytes", r->peak_bytes);
    loom__json_kv_bool(j, "succeeded", r->succeeded);
    loom__json_end_object(j);
  }
  loom__json_end_array(j);
}

/* --stats-json: stages with their limits and peaks, the measured peak, the rewrites. A run
 * without runners is one stage on cpu0 with limit_bytes 0 (no limit). */
static int write_stats_json(run_state *st, const char *path) {
  const char *temp = NULL;
  int fd = -1, rc = run_stage_file(&st->staged, path, "--stats-json", &temp, &fd);
  if (rc) return rc;
  FILE *f = fdopen(fd, "w");
  if (!f) {
    close(fd);
    return run_fail(EXIT_RUN, "--stats-json %s: %s", path, strerror(errno));
  }
  loom__json j;
  loom__json_init(&j, f, true);
  loom__json_begin_object(&j);
  loom__json_kv_string(&j, "graph", loom_graph_name(st->graph));
  loom__json_key(&j, "stages");
  loom__json_begin_array(&j);
  int32_t n = st->mpi ? 0 : st->plan ? loom_plan_stage_count(st->plan) : 1; /* --mpi: "mpi" below */
  for (int32_t i = 0; i < n; i++) {
    loom_stage_info info = {0};
    if (st->plan) loom_plan_stage(st->plan, i, &info);
    loom__json_begin_object(&j);
    loom__json_kv_string(&j, "runner", st->plan ? info.device : "cpu0");
    /* a shared run: the device the policy placed the stage on ("ranges": a loop whose pieces the
     * devices shared; "none": nothing to run), as --simulate's task labels place it */
    if (st->stats.stage_device && i < st->stats.n_stages) {
      int32_t d = st->stats.stage_device[i];
      loom__json_kv_string(&j, "device",
                           d >= 0 && d < st->stats.n_devices ? st->stats.devices[d].device
                           : info.graph                      ? "ranges"
                                                             : "none");
    }
    loom__json_kv_int64(&j, "limit_bytes", st->plan ? info.limit : 0);
    int64_t est = info.estimated_peak;
    if (!st->plan) {
      loom_estimate e;
      if (!loom_graph_estimate(st->optimized, NULL, &e)) est = e.peak_bytes;
      loom_estimate_deinit(&e);
    }
    loom__json_kv_int64(&j, "estimated_peak_bytes", est);
    /* a shared run measures its devices, not the plan's stages ("devices") */
    const loom_stage_stats *ss = st->stats.stages && i < st->stats.n_stages ? &st->stats.stages[i] : NULL;
    loom__json_kv_int64(&j, "peak_bytes", ss ? ss->peak_bytes : st->plan ? 0 : st->stats.peak_bytes);
    loom__json_kv_int64(&j, "ops", st->plan ? info.n_ops : loom_graph_op_count(st->optimized));
    loom__json_kv_double(&j, "seconds", ss ? ss->seconds : st->plan ? 0 : st->stats.seconds);
    loom__json_end_object(&j);
  }
  loom__json_end_array(&j);
  loom__json_kv_int64(&j, "peak_bytes", st->mpi ? run_mpi_rank_peak(&st->stats, 0) : st->stats.peak_bytes);
  loom__json_kv_double(&j, "seconds", st->stats.seconds);
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
  write_recoveries_json(st, &j);
  if (st->mpi) run_mpi_write_json(&st->stats, &j);
  if (st->stats.n_devices > 0) run_share_write_json(&j, &st->stats);
  loom_mem_manager *memory = NULL;
  loom_context_memory(st->ctx, &memory);
  loom__json_key(&j, "memory");
  loom__hmm_stats_write(memory, &j);
  loom__json_end_object(&j);
  loom_status s = loom__json_finish(&j);
  if (fclose(f) != 0 || s) return run_fail(EXIT_RUN, "--stats-json %s: write failed", path);
  return 0;
}

/* One line per memory node the run allocated on: the memory manager's peak against the node's
 * limit, allocations and pool hits, evictions, and the bytes copied in and out. */
static void print_memory(const run_state *st) {
  loom_mem_manager *memory = NULL;
  loom_context_memory(st->ctx, &memory);
  for (int32_t i = 0; i < loom_mem_node_count(memory); i++) {
    loom_mem_node_info info;
    loom_mem_node_stats ms;
    if (loom_mem_node_info_get(memory, i, &info) || loom_mem_stats(memory, i, &ms) || ms.allocations == 0)
      continue;
    char peak[32], lim[32], in[32], out[32];
    printf(
        "  memory %-6s peak %10s  limit %10s  %lld allocations (%lld from the pool)  %lld evictions  "
        "in %s  out %s\n",
        info.id, loom_bytes_format(ms.peak_in_use, peak, sizeof peak),
        loom_bytes_format(ms.limit, lim, sizeof lim), (long long)ms.allocations, (long long)ms.pool_hits,
        (long long)ms.evictions, loom_bytes_format(ms.bytes_in, in, sizeof in),
        loom_bytes_format(ms.bytes_out, out, sizeof out));
  }
}

/* One line per re-plan of a stage that ran out of memory (--recover). */
static void print_recoveries(const run_state *st) {
  for (int32_t i = 0; i < st->stats.n_recoveries; i++) {
    const loom_plan_recovery *r = &st->stats.recoveries[i];
    char lim[32], est[32], got[32];
    printf("  recover  stage %d %s: out of memory at allocation %lld; re-planned for %s (try %d of %d): ",
           (int)r->stage, r->device, (long long)r->allocation,
           loom_bytes_format(r->limit_bytes, lim, sizeof lim), (int)r->attempt, (int)r->tries);
    if (r->succeeded)
      printf("%d stage%s, estimated peak %s, measured peak %s\n", (int)r->n_stages,
             r->n_stages == 1 ? "" : "s", loom_bytes_format(r->estimated_peak_bytes, est, sizeof est),
             loom_bytes_format(r->peak_bytes, got, sizeof got));
    else
      printf("%s\n", r->n_stages ? "out of memory again" : "could not be made");
  }
}

/* "ocl0,ocl1": the devices of a shared run. */
static const char *devices_list(const run_state *st, char *buf, size_t size) {
  size_t n = 0;
  buf[0] = '\0';
  for (int32_t i = 0; i < st->n_runners && n < size; i++)
    n += (size_t)snprintf(buf + n, size - n, i ? ",%s" : "%s", st->runners[i].device);
  return buf;
}

static void print_summary(const run_state *st, const run_options *opts) {
  char peak[32], time[32], list[512];
  /* under MPI, rank 0 reports its own peak (every rank's is in the "rank" lines) */
  int64_t peak_bytes = st->mpi ? run_mpi_rank_peak(&st->stats, 0) : st->stats.peak_bytes;
  loom_bytes_format(peak_bytes, peak, sizeof peak);
  if (st->stats.seconds < 1.0)
    snprintf(time, sizeof time, "%.3f ms", st->stats.seconds * 1e3);
  else
    snprintf(time, sizeof time, "%.3f s", st->stats.seconds);
  if (st->mpi)
    printf("%s: ran under MPI in %s, peak %s (%lld bytes) on rank 0\n", loom_graph_name(st->graph), time,
           peak, (long long)peak_bytes);
  else if (opts->devices)
    printf("%s: ran on %s (%s, policy %s) in %s, peak %s (%lld bytes) in %d stages, %d loops shared\n",
           loom_graph_name(st->graph), opts->devices, devices_list(st, list, sizeof list),
           opts->policy ? opts->policy : "dmda", time, peak, (long long)st->stats.peak_bytes,
           (int)st->stats.n_stages, (int)st->stats.n_shared);
  else if (st->plan)
    printf("%s: ran on %s in %s, peak %s (%lld bytes) in %d stages\n", loom_graph_name(st->graph),
           st->runners[0].device, time, peak, (long long)st->stats.peak_bytes,
           (int)loom_plan_stage_count(st->plan));
  else
    printf("%s: ran on cpu0 in %s, peak %s (%lld bytes) in %lld allocations\n", loom_graph_name(st->graph),
           time, peak, (long long)st->stats.peak_bytes, (long long)st->stats.allocations);
  for (int32_t i = 0; i < st->report.count; i++) {
    char saved[32];
    printf("  rewrite %-16s saved %10s  %s\n", st->report.entries[i].name,
           loom_bytes_format(st->report.entries[i].bytes_saved, saved, sizeof saved),
           st->report.entries[i].detail);
  }
  int32_t n_stages = st->plan && !st->mpi && st->stats.stages ? loom_plan_stage_count(st->plan) : 0;
  if (st->mpi) run_mpi_print(&st->stats);
  if (opts->devices) run_share_print(stdout, &st->stats);
  for (int32_t i = 0; i < n_stages; i++) {
    loom_stage_info info;
    char lim[32], est[32], got[32];
    loom_plan_stage(st->plan, i, &info);
    if (n_stages > 8 && i == 4) printf("  ... %d more stages ...\n", (int)(n_stages - 8));
    if (n_stages > 8 && i >= 4 && i < n_stages - 4) continue;
    printf("  stage %-3d %-6s limit %10s  estimated peak %10s  measured peak %10s  %d ops\n", (int)i,
           info.device, loom_bytes_format(info.limit, lim, sizeof lim),
           loom_bytes_format(info.estimated_peak, est, sizeof est),
           loom_bytes_format(st->stats.stages[i].peak_bytes, got, sizeof got), (int)info.n_ops);
  }
  print_recoveries(st);
  print_memory(st);
  for (int32_t i = 0; i < st->n_outputs; i++) {
    char type[LOOM_TYPE_STRING_MAX];
    loom_type_format(&st->outputs[i].type, type, sizeof type);
    printf("  %-12s %s", st->out_names[i], type);
    if (opts->out_dir) printf("  -> %s/%s.npy", opts->out_dir, st->out_names[i]);
    if (opts->out_st) printf("  -> %s:%s", opts->out_st, st->out_names[i]);
    putchar('\n');
    if (opts->print_rows > 0) run_print_rows(stdout, &st->outputs[i], opts->print_rows);
  }
}

static int prepare(run_state *st, const run_options *opts) {
  if (loom_graph_load_any(opts->graph_path, &st->graph)) return run_fail_loom(NULL);
  st->n_params = loom_graph_param_count(st->graph);
  st->n_outputs = loom_graph_output_count(st->graph);
  st->inputs = calloc((size_t)st->n_params + 1, sizeof *st->inputs);
  st->outputs = calloc((size_t)st->n_outputs + 1, sizeof *st->outputs);
  st->out_names = calloc((size_t)st->n_outputs + 1, sizeof *st->out_names);
  if (!st->inputs || !st->outputs || !st->out_names) return run_fail(EXIT_RUN, "out of memory");
  int rc = open_files(st, opts);
  if (!rc) rc = check_input_names(st, opts);
  if (!rc) rc = name_outputs(st);
  if (!rc && opts->out_dir) rc = check_saveable_outputs(st);
  if (!rc && opts->out_st) rc = check_safetensors_outputs(st);
  if (!rc) rc = plan(st, opts);
  if (!rc) rc = bind_inputs(st, opts);
  if (!rc && opts->out_dir) rc = make_out_dir(st, opts->out_dir);
  return rc;
}

int main(int argc, char **argv) {
  run_options opts;
  run_state st = {0};
  int rc = run_parse_args(argc, argv, &opts);
  bool info = opts.help || opts.version; /* --help, --version: nothing else is done */
  if (!rc && opts.mpi && !info && !opts.simulate) rc = run_mpi_begin(&opts, &argc, &argv);
  if (!rc && opts.help) run_print_usage(stdout);
  if (!rc && !opts.help && opts.version) loom__cli_print_version(stdout, "loom-run");
  if (!rc && !info && opts.simulate) {
    rc = run_simulate(&opts);
  } else if (!rc && !info) {
    loom__file_remove_on_signals();
    rc = prepare(&st, &opts);
    if (opts.mpi) rc = run_mpi_agree(&opts, rc, "before the run");
    if (!rc) rc = execute(&st, &opts);
    if (!rc && opts.stats_json) rc = write_stats_json(&st, opts.stats_json);
    if (!rc && opts.trace) rc = write_trace(&st, opts.trace);
    if (!rc && opts.out_st) rc = write_safetensors(&st, opts.out_st);
    if (!rc && opts.out_dir) rc = write_outputs(&st, opts.out_dir);
    if (!rc) rc = run_stage_commit(&st.staged);
    if (!rc) loom__file_on_signal_keep(); /* the outputs are the user's now */
    if (!rc && opts.mpi_rank == 0) print_summary(&st, &opts);
    run_stage_free(&st.staged); /* a failed run's temporaries */
    if (rc) remove_created_dirs(&st);
  }
  run_state_free(&st);
  run_mpi_end(&opts);
  run_options_free(&opts);
  fflush(stdout);
  return rc ? rc : (ferror(stdout) ? EXIT_RUN : 0);
}
