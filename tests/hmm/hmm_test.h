/* Helpers shared by the HMM tests (every tests/hmm file is one executable: test_hmm). */
#ifndef LOOM_TEST_HMM_H
#define LOOM_TEST_HMM_H

#include <stdlib.h>

#include "harness.h"
#include "hmm/hmm.h"
#include "loom/device.h"
#include "loom/memory.h"
#include "loom/testing.h"

#define MiB ((int64_t)1 << 20)

/* A context with PoCL's two pthread devices capped at 1 GiB (the environment is set before
 * the first context of the process, which is when the OpenCL loader reads it). */
static inline loom_status hmm_test_context(loom_context **out_ctx) {
  setenv("POCL_DEVICES", "pthread pthread", 1);
  setenv("POCL_MEMORY_LIMIT", "1", 1);
  return loom_context_create(NULL, out_ctx);
}

/* Options with the environment's limits ignored, so a developer's LOOM_MEM_LIMIT does not
 * change what a test sees. */
static inline void hmm_test_options(loom_mem_manager_options *o, loom_mem_mode mode,
                                    loom_mem_policy migration) {
  loom_mem_manager_options_init(o);
  o->mode = mode;
  o->migration = migration;
  o->limits = "";
}

/* The node of an id, or -1. */
static inline int32_t hmm_node(const loom_mem_manager *m, const char *id) {
  int32_t node = -1;
  if (loom_mem_node_find(m, id, &node) != LOOM_OK) return -1;
  return node;
}

/* Deterministic bytes that differ per buffer (seed) and per position. */
static inline uint8_t hmm_pattern(uint32_t seed, int64_t i) {
  uint64_t x = (uint64_t)i * 0x9E3779B97F4A7C15ull + seed * 0xBF58476D1CE4E5B9ull;
  return (uint8_t)((x >> 29) ^ (x >> 47) ^ seed);
}

static inline void hmm_fill(void *p, int64_t n, uint32_t seed) {
  uint8_t *b = p;
  for (int64_t i = 0; i < n; i++) b[i] = hmm_pattern(seed, i);
}

/* The first index where p differs from the pattern, or -1. */
static inline int64_t hmm_mismatch(const void *p, int64_t n, uint32_t seed) {
  const uint8_t *b = p;
  for (int64_t i = 0; i < n; i++)
    if (b[i] != hmm_pattern(seed, i)) return i;
  return -1;
}

/* The same idea, 8 bytes at a time, for big buffers (n a multiple of 8). */
static inline uint64_t hmm_pattern64(uint32_t seed, int64_t i) {
  return (uint64_t)i * 0x9E3779B97F4A7C15ull ^ ((uint64_t)seed << 32 | seed);
}

static inline void hmm_fill64(void *p, int64_t n, uint32_t seed) {
  uint64_t *w = p;
  for (int64_t i = 0; i < n / 8; i++) w[i] = hmm_pattern64(seed, i);
}

static inline int64_t hmm_mismatch64(const void *p, int64_t n, uint32_t seed) {
  const uint64_t *w = p;
  for (int64_t i = 0; i < n / 8; i++)
    if (w[i] != hmm_pattern64(seed, i)) return i * 8;
  return -1;
}

/* Reads the whole buffer (without moving it) and compares; -1 when intact, -2 on error. */
static inline int64_t hmm_buffer_mismatch(loom_buffer *b, int64_t n, uint32_t seed) {
  void *tmp = malloc((size_t)(n ? n : 1));
  if (!tmp) return -2;
  int64_t bad = loom_buffer_read(b, 0, tmp, n) == LOOM_OK ? hmm_mismatch(tmp, n, seed) : -2;
  free(tmp);
  return bad;
}

static inline int64_t hmm_buffer_mismatch64(loom_buffer *b, int64_t n, uint32_t seed) {
  void *tmp = malloc((size_t)(n ? n : 8));
  if (!tmp) return -2;
  int64_t bad = loom_buffer_read(b, 0, tmp, n) == LOOM_OK ? hmm_mismatch64(tmp, n, seed) : -2;
  free(tmp);
  return bad;
}

/* Writes the pattern through a map. */
static inline loom_status hmm_map_fill(loom_buffer *b, int64_t n, uint32_t seed) {
  void *p = NULL;
  loom_status s = loom_buffer_map(b, LOOM_ACCESS_WRITE | LOOM_ACCESS_DISCARD, &p);
  if (s != LOOM_OK) return s;
  hmm_fill(p, n, seed);
  return loom_buffer_unmap(b, p);
}

/* Every node's in_use is within its limit and adds up. */
static inline bool hmm_within_limits(const loom_mem_manager *m) {
  for (int32_t i = 0; i < loom_mem_node_count(m); i++) {
    loom_mem_node_stats st;
    if (loom_mem_stats(m, i, &st) != LOOM_OK) return false;
    if (st.in_use > st.limit || st.peak_in_use > st.limit || st.in_use != st.live_bytes + st.cached_bytes)
      return false;
  }
  return true;
}

/* The live bytes each node counts equal what the given buffers hold there (call with every
 * live buffer of the manager). */
static inline bool hmm_accounting_matches(const loom_mem_manager *m, loom_buffer *const *bufs, int32_t n) {
  for (int32_t node = 0; node < loom_mem_node_count(m); node++) {
    int64_t sum = 0;
    for (int32_t i = 0; i < n; i++) {
      loom_buffer_node_info info;
      if (!bufs[i]) continue;
      if (loom_buffer_node_info_get(bufs[i], node, &info) != LOOM_OK) return false;
      sum += info.allocated_bytes;
    }
    loom_mem_node_stats st;
    if (loom_mem_stats(m, node, &st) != LOOM_OK || st.live_bytes != sum) return false;
  }
  return true;
}

/* Skips the current test (and returns false) when the manager has fewer than `need` OpenCL
 * nodes: no OpenCL platform (OCL_ICD_VENDORS empty) or no PoCL. */
static inline bool hmm_need_opencl(const loom_mem_manager *m, int32_t need) {
  int32_t have = 0;
  for (int32_t i = 0; i < loom_mem_node_count(m); i++) {
    loom_mem_node_info info;
    if (loom_mem_node_info_get(m, i, &info) == LOOM_OK && info.kind == LOOM_MEMORY_DEVICE &&
        (info.storages & LOOM_MEM_STORAGE_BIT(LOOM_MEM_STORAGE_CL_BUFFER)))
      have++;
  }
  if (have >= need) return true;
  loom_test_skip("needs %d OpenCL devices, found %d (no OpenCL platform?)", (int)need, (int)have);
  return false;
}

/* A tiny JSON checker (RFC 8259 syntax only), for the trace and stats files. */
bool hmm_json_valid(const char *text);
/* Reads a whole file into a malloc'ed string (NULL on failure). */
char *hmm_read_file(const char *path);

#endif
