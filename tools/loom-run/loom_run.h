/* loom-run's pieces, shared between its files. */
#ifndef LOOM_RUN_TOOL_H
#define LOOM_RUN_TOOL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "loom/loom.h"

/* Exit codes: 0 success, 1 the run failed (a file, the graph, the data), 2 the command line
 * is wrong (an unknown option, a missing value, an --in naming no parameter, missing inputs). */
enum { EXIT_RUN = 1, EXIT_USAGE = 2 };

/* One --in NAME=FILE.npy or NAME=FILE.safetensors[:TENSOR]. */
typedef struct run_input {
  char *name;       /* owned */
  const char *spec; /* FILE as given, for messages */
  char *path;       /* owned: the file (FILE less ":TENSOR") */
  char *tensor;     /* owned: the tensor in a .safetensors file (TENSOR, else NAME); NULL for .npy */
} run_input;

typedef struct run_options {
  const char *graph_path;
  run_input *inputs;
  int32_t n_inputs;
  bool random;
  uint64_t seed;
  const char **in_all; /* --in-all FILE.safetensors ... */
  int32_t n_in_all;
  const char *out_dir;     /* NULL: write nothing */
  const char *out_st;      /* --out FILE.safetensors, or NULL */
  int64_t print_rows;      /* -1: --print not given */
  const char *runners;     /* --runners SPEC, or NULL */
  const char *limit;       /* --limit BYTES, or NULL */
  const char **no_rewrite; /* --no-rewrite NAME ... */
  int32_t n_no_rewrite;
  const char *stats_json; /* --stats-json FILE, or NULL */
  const char *trace;      /* --trace FILE.json, or NULL */
  bool recover;           /* --recover */
  const char *simulate;   /* --simulate PLATFORM.json, or NULL */
  const char *policy;     /* --policy dmda|eager|fixed, or NULL (dmda) */
  bool mpi;               /* --mpi */
  bool mpi_started;       /* MPI_Init done (run_mpi_begin): MPI_Finalize at the end */
  int mpi_rank;           /* this process's rank in MPI_COMM_WORLD; 0 without --mpi */
  /* --devices auto|LIST for a real run (--policy without --simulate implies "auto"), or NULL:
   * the plan runs stage after stage on its runners, as before */
  const char *devices;
  bool help;
  bool version; /* --version */
} run_options;

/* Parses argv. Returns 0, or EXIT_USAGE after printing the error. */
int run_parse_args(int argc, char **argv, run_options *opts);
void run_options_free(run_options *opts);
void run_print_usage(FILE *f);

/* Prints "loom-run: <message>" on stderr and returns `code`. */
int run_fail(int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Prints a library error: as is when it already names a place ("f.lir:3:7: error: ..."),
 * else after "loom-run: ". Returns EXIT_RUN. */
int run_fail_loom(const char *context);

/* --simulate: plans the graph for the platform's devices and schedules it there, printing
 * the makespan, each device's busy time and the lower bounds. Returns 0 or an exit code. */
int run_simulate(const run_options *opts);

/* ---- --mpi (mpi.c): the run shared between MPI ranks ---- */
struct loom__json;
/* Parses --mpi (no value). Without MPI in the build: a usage error saying so. */
int run_mpi_flag(run_options *opts, const char *value);
/* MPI_Init, and this rank's number; ranks other than 0 drop --out-dir, --out, --stats-json and
 * --trace (rank 0 writes). Returns 0 or an exit code. */
int run_mpi_begin(run_options *opts, int *argc, char ***argv);
/* Every rank's exit code after `step` (collective): a rank whose rc is 0 returns the worst of
 * the others' codes, after saying which rank failed; a failing rank returns its own. */
int run_mpi_agree(const run_options *opts, int rc, const char *step);
/* MPI_Finalize when run_mpi_begin started MPI. */
void run_mpi_end(const run_options *opts);
/* What loom_run needs for a run on MPI_COMM_WORLD (options.mpi): *out_comm (destroy with
 * run_mpi_comm_destroy). Returns 0 or an exit code. */
int run_mpi_prepare(loom_mpi_comm **out_comm);
void run_mpi_comm_destroy(loom_mpi_comm *comm);
/* The peak `rank` measured (its entry of st->ranks), 0 when st has none for it. */
int64_t run_mpi_rank_peak(const loom_run_stats *st, int rank);
/* The report of loom_run's MPI figures: every rank's pieces, time, peak and limit, then each
 * rank's range of each loop. */
void run_mpi_print(const loom_run_stats *st);
/* --stats-json "mpi": the same as JSON. */
void run_mpi_write_json(const loom_run_stats *st, struct loom__json *j);
/* --devices: the runners of the devices opts->devices names (loom_share_runners), each at its
 * memory, or at the limit --runners gives it (`given`), or at --limit for all; lowered to
 * LOOM_MEM_LIMIT. The caller frees *out. Returns 0 or an exit code (a device this machine
 * lacks is a usage error). */
int run_share_runners(loom_context *ctx, const run_options *opts, const loom_runner *given, int32_t n_given,
                      loom_runner **out, int32_t *n);
/* The run report's per-device lines: busy seconds, pieces, ranges, stages, limit, peak, bytes. */
void run_share_print(FILE *f, const loom_run_stats *st);
/* --stats-json "devices": one object per device of a shared run. */
void run_share_write_json(struct loom__json *j, const loom_run_stats *st);

/* ---- outputs.c: files written all together or not at all ---- */
typedef struct run_staged_file {
  char *final;      /* owned: where it goes */
  char *temp;       /* owned: where it is written first; NULL once renamed */
  const char *flag; /* the option that asked for it, for messages */
} run_staged_file;
typedef struct run_staged {
  run_staged_file *items;
  int32_t n, cap;
} run_staged;
/* Creates an empty temporary beside `final` and records the pair. *out_temp (owned by sf) is
 * where to write; with out_fd its open descriptor (the caller closes it), else it is closed.
 * Returns 0 or an exit code. */
int run_stage_file(run_staged *sf, const char *final, const char *flag, const char **out_temp, int *out_fd);
/* Renames every temporary over its final name, in the order staged. Returns 0 or EXIT_RUN
 * (a rename refused: those before it are done). */
int run_stage_commit(run_staged *sf);
/* Removes the temporaries not renamed and frees sf's memory. */
void run_stage_free(run_staged *sf);

/* Prints the first `rows` rows (along axis 0) of t, indented, one per line. */
void run_print_rows(FILE *f, const loom_tensor *t, int64_t rows);

#endif
