/* Measured seconds of stages by footprint and device, kept in the context and on disk:
 * StarPU's history-based models, for dmda where the devices have no model file (loom-bench
 * calibrate). A stage the shared runner runs whole is timed on its device (by the device's
 * clock where it has one), and the time is kept under the stage graph's footprint (its ops'
 * kinds, attributes and types, its parameters' types: two towers of the same shapes share one)
 * and the device. The next stage of that footprint, in this run, a later one on the context or
 * a later process, is placed by those times once every device it may go to has one. The
 * table is fixed in size (the oldest entry gives way) and needs no allocation.
 *
 * On disk, beside the device's model file (models/<name>@<driver>.stages.json in the cache
 * folder, loom/sched.h): a device's times are read the first time the context asks for one,
 * and the context's are written back when it is destroyed, merged with the file's (theirs
 * first, at most LOOM__HISTORY_SIZE). Devices of one name and driver share the file, as they
 * share a model. LOOM_STAGE_HISTORY=0 keeps the history in the context only (the tests' setting,
 * so that no test's placement depends on another's runs). A file that is missing, unreadable
 * or malformed is as no history; one that cannot be written is left as it was.
 */
#ifndef LOOM_STAGE_HISTORY_H
#define LOOM_STAGE_HISTORY_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "loom/runtime.h"

#define LOOM__HISTORY_SIZE 256

#define LOOM__HISTORY_DEVICES 32

typedef struct loom__history_entry {
  uint64_t footprint;
  char device[32];
  double seconds; /* the runs' times, each moving it halfway from the one before */
  int32_t runs;
  uint64_t used; /* when last written (the table's clock; 0: read from disk, not run here) */
} loom__history_entry;

typedef struct loom__stage_history {
  pthread_mutex_t mu;
  bool ready; /* mu is initialised */
  bool disk;  /* read and written on disk (LOOM_STAGE_HISTORY is not 0) */
  int32_t n;
  uint64_t clock;
  loom__history_entry entries[LOOM__HISTORY_SIZE];
  int32_t n_read; /* the devices whose file has been read */
  char read[LOOM__HISTORY_DEVICES][32];
} loom__stage_history;

struct loom_graph;

/* The footprint of graph g: a hash of its parameters' types and of each op's kind, attributes,
 * operand and result types and constant sizes (not names, nor a constant's contents: what it
 * costs, as StarPU's footprints go by sizes), loop and fused bodies included. */
uint64_t loom__graph_footprint(const struct loom_graph *g);

/* Called by loom_context_create and loom_context_destroy (which saves the history first, while
 * its devices are still there to name the files). */
void loom__history_init(loom__stage_history *h);
void loom__history_save(loom_context *ctx);
void loom__history_deinit(loom__stage_history *h);

/* The time kept for footprint on `device`; false when none. Thread-safe. */
bool loom__history_get(loom_context *ctx, uint64_t footprint, const char *device, double *seconds);
/* Keeps a measured time of footprint on `device` (seconds > 0). Thread-safe. */
void loom__history_put(loom_context *ctx, uint64_t footprint, const char *device, double seconds);
/* Forgets every time (tests that need placement without history). Thread-safe. */
void loom__history_clear(loom_context *ctx);

#endif
