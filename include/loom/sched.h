/* The scheduler of heterogeneous runs (docs/sched.md): which device runs each task of a plan,
 * decided from per-device performance models, as a pure function of the tasks and the
 * devices. Nothing here runs a kernel: the same call places a real plan's work and simulates
 * a machine described in a platform file (loom-run --simulate PLATFORM.json).
 *
 * The pieces:
 *   - a performance model per device: the seconds of one kernel of each op class as a
 *     function of its size (flops, or bytes for copies): t = latency + size * seconds_per_unit,
 *     or a table of measured (size, seconds) points interpolated between and extrapolated at
 *     the last point's rate (StarPU's history-based models);
 *   - a platform: devices (id, kind, memory, model, memory node) and the links between memory
 *     nodes (bandwidth, latency);
 *   - a problem: tasks (work per op class, working-set bytes, the data they read and write)
 *     and data (bytes, where it starts, which task makes it);
 *   - a policy (fixed, eager, dmda) that turns a problem into a schedule: device, start and
 *     finish per task, busy time per device, bytes per link, the makespan, and lower bounds.
 *
 * Ownership: _create/_destroy as loom.h says; every array in a result is owned by the
 * result. Thread safety: the functions keep no global state; distinct objects may be used
 * from different threads at once.
 */
#ifndef LOOM_SCHED_H
#define LOOM_SCHED_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "loom/device.h"
#include "loom/export.h"
#include "loom/plan.h"
#include "loom/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- op classes and models ------------------------------------------------------------- */

/* X(ENUM, "name"): the classes of work a model prices, by the names files use. Laid out by
 * hand, as graph.h's op list. */
/* clang-format off */
#define LOOM_OP_CLASS_MAP(X)                                                  \
  X(GEMM, "gemm") X(FFT, "fft") X(ELEMENTWISE, "elementwise")                 \
  X(REDUCTION, "reduction") X(TOPK, "topk") X(CONV, "conv") X(COPY, "copy")

typedef enum loom_op_class {
#define LOOM_X(e, name) LOOM_OP_CLASS_##e,
  LOOM_OP_CLASS_MAP(LOOM_X)
#undef LOOM_X
  LOOM_OP_CLASS_COUNT
} loom_op_class;
/* clang-format on */

/* The name of a class ("gemm"); "?" when out of range. */
LOOM_API const char *loom_op_class_name(loom_op_class c);
/* Parses a class name; false when it names none. */
LOOM_API bool loom_op_class_parse(const char *name, loom_op_class *out_class);

/* Adds the work of graph op `index` to sizes[] and kernels[] (LOOM_OP_CLASS_COUNT entries
 * each, added to, not cleared): its class's size in that class's units (GEMM and CONV flops,
 * 2 x multiply-adds; FFT 5 n log2(len); ELEMENTWISE output elements; REDUCTION and TOPK input
 * elements; COPY bytes written) and one kernel. Views, constants and fill add nothing. A fused
 * op adds its body's ops, a loop its body's ops once per piece. Errors: INVALID_ARGUMENT (bad
 * graph, index or NULL arrays). */
LOOM_API loom_status loom_sched_op_work(const loom_graph *graph, int32_t index, double *sizes,
                                        int32_t *kernels);

#define LOOM_SCHED_MAX_POINTS 16

/* One op class on one device. Where n_points > 0 the table rules (sizes ascending, seconds
 * per kernel measured at that size): piecewise linear between points, below the first the
 * line from `latency` (a tiny kernel's cost, at most the first point's) at size 0 to the first
 * point, and beyond the last the latency plus the size at the last point's rate over it. Else
 * t = latency + size * seconds_per_unit. A class nobody measured has `known` false: the device
 * cannot run it (the scheduler never places such work there). */
typedef struct loom_sched_class_model {
  bool known;
  double latency;          /* seconds per kernel */
  double seconds_per_unit; /* seconds per size unit */
  int32_t n_points;
  double point_size[LOOM_SCHED_MAX_POINTS];
  double point_seconds[LOOM_SCHED_MAX_POINTS];
} loom_sched_class_model;

typedef struct loom_sched_model {
  loom_sched_class_model cls[LOOM_OP_CLASS_COUNT];
  /* Transfers between the device's own memory and the host, each way alike: seconds =
   * host_latency + bytes / host_bandwidth. host_bandwidth 0: not measured (a device that
   * computes in host memory has no such link). */
  double host_latency, host_bandwidth;
  /* What one more piece of a loop costs beyond its kernels, and what gathering a slice that is
   * not dense costs a row beyond its bytes (seconds; 0: not measured). */
  double piece_seconds, gather_row_seconds;
  /* What an elementwise op inside a fused body costs an element, and what a page of a new
   * result of 32 MiB or more costs to fault in (the C library maps such blocks afresh on every
   * allocation) (seconds; 0: not measured). */
  double fused_element_seconds, fault_page_seconds;
  /* What an elementwise op's element costs in a small fused body (a loop piece's: its threads
   * do not pay off below some 300,000 element-ops, so it runs at about one thread's rate),
   * measured as fused_element_seconds is, in pieces of 8,192 elements (seconds; 0: not
   * measured, fused_element_seconds then prices every body). */
  double fused_small_element_seconds;
  /* What an element of a select costs against one of an add of the same shape, its mask
   * broadcast along rows (as a halo cut's selects read theirs); the class tables measure adds,
   * and a select with a broadcast operand prices its elements at them times this ratio (one of
   * operands alike runs as fast as an add) (0: not measured). */
  double select_ratio;
  /* A loop's pieces as they run (not known: not measured). `thin_gemm`: a product [t,2048] x
   * [2048,t] by its flops, t = 8 to 256 (a thin product does not split over the threads as the
   * square GEMM of as many bytes does). `stream`: a matrix-vector product over a piece of rows
   * of a matrix in memory, by the bytes of matrix it reads (a piece's kernel too small for the
   * threads streams at one core's rate). */
  loom_sched_class_model thin_gemm, stream;
} loom_sched_model;

/* Seconds of one kernel of class c and `size` units on `model`; INFINITY when the class is
 * not known, 0 for size <= 0. */
LOOM_API double loom_sched_model_time(const loom_sched_model *model, loom_op_class c, double size);

/* Fits latency and seconds_per_unit of one class by least squares to n (size, seconds)
 * measurements (n >= 1; with one point or one distinct size the line goes through the origin),
 * keeps the points as its table (at most LOOM_SCHED_MAX_POINTS, sorted by size, repeated sizes
 * averaged) and marks the class known. Both coefficients are kept >= 0. Errors:
 * INVALID_ARGUMENT (n out of range, a size or time <= 0 or not finite). */
LOOM_API loom_status loom_sched_model_fit(loom_sched_model *model, loom_op_class c, const double *sizes,
                                          const double *seconds, int32_t n);

/* Model files in the cache folder (LOOM_CACHE_DIR, else $XDG_CACHE_HOME/loom, else
 * ~/.cache/loom; the OpenCL program cache's): models/<device name>@<driver version>.json,
 * the names with every character outside [A-Za-z0-9._-] written as '_'. */

/* Writes the path of the model file of a device named `name` with driver `driver` into buf
 * (size bytes). Errors: INVALID_ARGUMENT (NULL name, no HOME when the variables above are
 * unset, the path does not fit). */
LOOM_API loom_status loom_sched_model_path(const char *name, const char *driver, char *buf, size_t size);
/* Writes `model` for (name, driver) as JSON, creating the folders; the file is replaced
 * whole (a temporary renamed over it). Errors: INVALID_ARGUMENT (as loom_sched_model_path),
 * IO naming the path. */
LOOM_API loom_status loom_sched_model_save(const loom_sched_model *model, const char *name,
                                           const char *driver);
/* Reads the model of (name, driver) into *out. Errors: NOT_FOUND (no file; the message names
 * the path), IO, INVALID_ARGUMENT (a malformed file: the message names the path and field). */
LOOM_API loom_status loom_sched_model_load(const char *name, const char *driver, loom_sched_model *out);
/* The driver string a device's model file is keyed by: its driver_version, else its version
 * ("" for cpu0, whose model is then keyed by its name alone). Never NULL. */
LOOM_API const char *loom_sched_device_driver(const loom_device_info *info);
/* Prints a model, one line per known class, indented by `indent` spaces. */
LOOM_API void loom_sched_model_print(const loom_sched_model *model, int indent, FILE *stream);

/* ---- platforms ------------------------------------------------------------------------- */

#define LOOM_SCHED_NAME_MAX 32

typedef struct loom_sched_device {
  char id[LOOM_SCHED_NAME_MAX];   /* "cpu0", "gpu3" */
  char kind[LOOM_SCHED_NAME_MAX]; /* "cpu", "cuda", "opencl": for listings */
  int32_t node;                   /* index into the platform's memory nodes */
  int64_t memory;                 /* bytes a task placed here may hold at once; > 0 */
  loom_sched_model model;
  /* Computes on the host's cores though it is not cpu0 (an OpenCL CPU device such as PoCL's):
   * beside cpu0, which keeps those cores busy already, it adds no compute, so dmda gives it no
   * work where cpu0 is one of the devices (src/sched/policy.c, for the simulation and the
   * shared runner alike). Platform files: "host_cores": true. */
  bool host_cores;
} loom_sched_device;

/* A link between two memory nodes, used both ways. */
typedef struct loom_sched_link {
  int32_t a, b;     /* node indexes */
  double bandwidth; /* bytes per second, > 0 */
  double latency;   /* seconds per transfer, >= 0 */
} loom_sched_link;

typedef struct loom_sched_platform loom_sched_platform;

/* Reads a platform file (docs/sched.md). The caller owns *out_platform. Errors: IO naming the
 * path; INVALID_ARGUMENT naming the path and the field ("p.json: devices[1].models.gemm:
 * \"latency\" must be a number >= 0"); OUT_OF_MEMORY. */
LOOM_API loom_status loom_sched_platform_load(const char *path, loom_sched_platform **out_platform);
/* Parses platform JSON text; `name` is used in messages in place of a path. */
LOOM_API loom_status loom_sched_platform_parse(const char *text, size_t len, const char *name,
                                               loom_sched_platform **out_platform);
/* Builds a platform from plain data: n_nodes memory nodes named node_names[i] (node 0 is the
 * host, where graph inputs start), devices and links (copied). Errors: INVALID_ARGUMENT
 * (a device's node or a link's ends out of range, memory <= 0, bandwidth <= 0, duplicate ids,
 * no devices), OUT_OF_MEMORY. */
LOOM_API loom_status loom_sched_platform_create(const char *const *node_names, int32_t n_nodes,
                                                const loom_sched_device *devices, int32_t n_devices,
                                                const loom_sched_link *links, int32_t n_links,
                                                loom_sched_platform **out_platform);
/* Writes `platform` as a platform file (docs/sched.md) that loom_sched_platform_load reads back
 * to the same devices, models (tables included), memory nodes and links; `comment` (may be
 * NULL) becomes its "comment" member. loom-info --platform writes this machine's this way, so
 * that its calibrated models can be simulated elsewhere (loom-run --simulate). Errors:
 * INVALID_ARGUMENT (NULL platform or stream), IO when writing fails. */
LOOM_API loom_status loom_sched_platform_write_json(const loom_sched_platform *platform, const char *comment,
                                                    FILE *stream);
/* A new platform of the devices `devices` lists ("cuda0" or "cpu0,gpu1"; ids case-insensitive),
 * in the list's order, with every memory node and link of `platform`: what runs on only some of
 * a machine's devices, as loom-run --simulate --devices does. The caller owns *out_platform.
 * Errors: INVALID_ARGUMENT (NULL arguments; an id the platform lacks, an empty one or one
 * given twice, named in the message), OUT_OF_MEMORY. */
LOOM_API loom_status loom_sched_platform_subset(const loom_sched_platform *platform, const char *devices,
                                                loom_sched_platform **out_platform);
LOOM_API void loom_sched_platform_destroy(loom_sched_platform *platform);
LOOM_API int32_t loom_sched_platform_device_count(const loom_sched_platform *platform);
/* Device i, owned by the platform; NULL when out of range. */
LOOM_API const loom_sched_device *loom_sched_platform_device(const loom_sched_platform *platform, int32_t i);
/* The index of the device with id `id` (case-insensitive); -1 when none. */
LOOM_API int32_t loom_sched_platform_find(const loom_sched_platform *platform, const char *id);
/* Seconds to move `bytes` from node `from` to node `to` (0 on the same node): the direct link,
 * else through the host (node 0) when both ends link to it; INFINITY when no route. */
LOOM_API double loom_sched_platform_transfer_time(const loom_sched_platform *platform, int32_t from,
                                                  int32_t to, int64_t bytes);

/* A platform of the devices of `ctx` (all of them, or those `devices` lists: "cpu0,ocl1"),
 * each with its model from the cache folder, its memory (memory_bytes), and its memory node:
 * the host (node 0) for a device that computes in host memory, else its own, linked to the
 * host as its model's host link says. The caller owns *out_platform. Errors: NOT_FOUND (a
 * device with no model file, or a device with its own memory whose model has no host link:
 * the message names the device and says to run `loom-bench calibrate`), INVALID_ARGUMENT (a
 * malformed model file; `devices` naming no device of ctx), OUT_OF_MEMORY. */
LOOM_API loom_status loom_sched_platform_from_context(const loom_context *ctx, const char *devices,
                                                      loom_sched_platform **out_platform);

/* ---- problems -------------------------------------------------------------------------- */

/* One piece of data a task reads or writes. */
typedef struct loom_sched_data {
  int64_t bytes;
  int32_t producer; /* the task that writes it; -1: it exists from the start on `node` */
  int32_t node;     /* where it starts (producer -1 only) */
  int32_t parent;   /* a slice of data `parent` (-1: none): valid wherever the parent is */
  bool output;      /* a graph output: the schedule ends when it has reached node 0 */
} loom_sched_data;

#define LOOM_SCHED_LABEL_MAX 64

typedef struct loom_sched_task {
  char label[LOOM_SCHED_LABEL_MAX];     /* "stage 2", "loop d2 piece 17" */
  double size[LOOM_OP_CLASS_COUNT];     /* work per class, in the class's units */
  int32_t kernels[LOOM_OP_CLASS_COUNT]; /* kernels the work of a class is cut into */
  int64_t memory;                       /* bytes it holds at once on its device */
  int32_t fixed_device;                 /* the device the fixed policy uses; -1: none */
  int32_t loop;                         /* pieces of one loop share a number; -1: not a piece */
  int32_t first_input, n_inputs;        /* its inputs: data ids in the problem's input list */
} loom_sched_task;

typedef struct loom_sched_problem loom_sched_problem;

/* An empty problem. The caller owns *out_problem. Errors: OUT_OF_MEMORY. */
LOOM_API loom_status loom_sched_problem_create(loom_sched_problem **out_problem);
LOOM_API void loom_sched_problem_destroy(loom_sched_problem *problem);
/* Adds data; *out_id (may be NULL) is its id. Errors: INVALID_ARGUMENT (bytes < 0, a producer
 * or parent that does not exist yet), OUT_OF_MEMORY. */
LOOM_API loom_status loom_sched_problem_add_data(loom_sched_problem *problem, const loom_sched_data *data,
                                                 int32_t *out_id);
/* Adds a task reading data inputs[0..n_inputs) (added before); the task's first_input and
 * n_inputs are ignored and set here. *out_id (may be NULL) is its id, which the data it
 * writes, added after it, names as producer. Tasks are added in a valid order (what a task reads exists
 * already). Errors: INVALID_ARGUMENT (an input that does not exist), OUT_OF_MEMORY. */
LOOM_API loom_status loom_sched_problem_add_task(loom_sched_problem *problem, const loom_sched_task *task,
                                                 const int32_t *inputs, int32_t n_inputs, int32_t *out_id);
LOOM_API int32_t loom_sched_problem_task_count(const loom_sched_problem *problem);
LOOM_API const loom_sched_task *loom_sched_problem_task(const loom_sched_problem *problem, int32_t i);

/* The problem of a plan: each loop piece is a task (a loop of T pieces is T tasks), the ops of
 * a stage between loops are one task, the plan's inputs start on node 0, and each stage's
 * runner names the task's fixed device (looked up in `platform`; -1 when it has none).
 * Nothing is run. Errors: INVALID_ARGUMENT, OUT_OF_MEMORY. */
LOOM_API loom_status loom_sched_problem_from_plan(const loom_plan *plan, const loom_sched_platform *platform,
                                                  loom_sched_problem **out_problem);
/* The same for a graph run whole as one stage (no plan). */
LOOM_API loom_status loom_sched_problem_from_graph(const loom_graph *graph,
                                                   const loom_sched_platform *platform,
                                                   loom_sched_problem **out_problem);

/* ---- policies and schedules ------------------------------------------------------------ */

typedef enum loom_sched_policy {
  LOOM_SCHED_FIXED, /* each task on its fixed_device */
  LOOM_SCHED_EAGER, /* the first free device takes the next ready task */
  LOOM_SCHED_DMDA,  /* each ready task to the earliest expected finish, transfers included */
} loom_sched_policy;

/* "fixed", "eager", "dmda"; "?" when out of range. */
LOOM_API const char *loom_sched_policy_name(loom_sched_policy p);
LOOM_API bool loom_sched_policy_parse(const char *name, loom_sched_policy *out_policy);

typedef struct loom_sched_placement {
  int32_t device;
  double start, finish;             /* seconds from the start */
  char label[LOOM_SCHED_LABEL_MAX]; /* the task's (a plan's: "stage 2 ops 4..6"), so a schedule
                                       names what it placed without its problem */
} loom_sched_placement;

typedef struct loom_sched_result {
  loom_sched_policy policy;
  int32_t n_tasks, n_devices, n_links;
  loom_sched_placement *tasks; /* n_tasks */
  double *busy;                /* n_devices: seconds each device computes */
  int32_t *task_count;         /* n_devices: tasks placed on each */
  int64_t *link_bytes;         /* n_links: bytes moved over each platform link, both ways */
  double makespan;             /* the last finish or output arrival on node 0 */
  double bound_work;           /* no schedule beats this: work over all devices at best */
  double bound_path;           /* the critical path, each task at its best device, no moves */
} loom_sched_result;

/* Schedules `problem` on `platform` with `policy` into *out (the caller's storage, released
 * with loom_sched_result_deinit). A task is placed only on a device whose memory holds it and
 * whose model knows every class it does. Errors: INVALID_ARGUMENT (a task no device can run,
 * naming it and why; fixed with a task that has no fixed device or does not fit it),
 * OUT_OF_MEMORY. */
LOOM_API loom_status loom_sched_schedule(const loom_sched_problem *problem,
                                         const loom_sched_platform *platform, loom_sched_policy policy,
                                         loom_sched_result *out);
LOOM_API void loom_sched_result_deinit(loom_sched_result *result);
/* Prints the makespan, the bound, and per device its busy time and tasks, and per link its
 * bytes. */
LOOM_API void loom_sched_result_print(const loom_sched_result *result, const loom_sched_platform *platform,
                                      FILE *stream);
/* Writes the result as one JSON object: {"policy", "makespan", "bound", "bound_work",
 * "bound_path", "devices": [{"id", "kind", "busy", "tasks"}], "links": [{"a", "b", "bytes"}],
 * "tasks": [{"device", "start", "finish"}]} (seconds; devices and nodes by name). Errors: IO
 * when writing fails, INVALID_ARGUMENT for NULL arguments. */
LOOM_API loom_status loom_sched_result_write_json(const loom_sched_result *result,
                                                  const loom_sched_platform *platform, FILE *stream);

#ifdef __cplusplus
}
#endif

#endif
