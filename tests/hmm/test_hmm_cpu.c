/* The HMM on host memory only: buffers, maps, reads and writes, info, pool, limits and
 * eviction rules on a host node, LOOM_MEM_LIMIT parsing, stats and trace JSON. */
#include <ctype.h>
#include <stdio.h>
#include <unistd.h>

#include "hmm/hmm.h" /* loom__buffer_take_host */
#include "hmm_test.h"
#include "runtime/context.h" /* loom__context_memory_release */

/* ---- a tiny JSON checker ---------------------------------------------------------------- */

typedef struct jp {
  const char *p;
  int depth;
} jp;

static void ws(jp *j) {
  while (*j->p == ' ' || *j->p == '\n' || *j->p == '\r' || *j->p == '\t') j->p++;
}

static bool value(jp *j);

static bool string(jp *j) {
  if (*j->p != '"') return false;
  for (j->p++; *j->p != '"'; j->p++) {
    if ((unsigned char)*j->p < 0x20) return false;
    if (*j->p == '\\') {
      j->p++;
      if (*j->p == 'u') {
        for (int i = 1; i <= 4; i++)
          if (!isxdigit((unsigned char)j->p[i])) return false;
        j->p += 4;
      } else if (!strchr("\"\\/bfnrt", *j->p) || !*j->p) {
        return false;
      }
    }
  }
  j->p++;
  return true;
}

static bool number(jp *j) {
  const char *start = j->p;
  if (*j->p == '-') j->p++;
  if (!isdigit((unsigned char)*j->p)) return false;
  if (*j->p == '0')
    j->p++;
  else
    while (isdigit((unsigned char)*j->p)) j->p++;
  if (*j->p == '.') {
    j->p++;
    if (!isdigit((unsigned char)*j->p)) return false;
    while (isdigit((unsigned char)*j->p)) j->p++;
  }
  if (*j->p == 'e' || *j->p == 'E') {
    j->p++;
    if (*j->p == '+' || *j->p == '-') j->p++;
    if (!isdigit((unsigned char)*j->p)) return false;
    while (isdigit((unsigned char)*j->p)) j->p++;
  }
  return j->p > start;
}

static bool members(jp *j, char close, bool keyed) {
  j->p++;
  ws(j);
  if (*j->p == close) {
    j->p++;
    return true;
  }
  for (;;) {
    ws(j);
    if (keyed) {
      if (!string(j)) return false;
      ws(j);
      if (*j->p++ != ':') return false;
    }
    if (!value(j)) return false;
    ws(j);
    if (*j->p == ',') {
      j->p++;
      continue;
    }
    return *j->p++ == close;
  }
}

static bool value(jp *j) {
  ws(j);
  if (++j->depth > 64) return false;
  bool ok;
  switch (*j->p) {
    case '{':
      ok = members(j, '}', true);
      break;
    case '[':
      ok = members(j, ']', false);
      break;
    case '"':
      ok = string(j);
      break;
    case 't':
      ok = strncmp(j->p, "true", 4) == 0 && (j->p += 4);
      break;
    case 'f':
      ok = strncmp(j->p, "false", 5) == 0 && (j->p += 5);
      break;
    case 'n':
      ok = strncmp(j->p, "null", 4) == 0 && (j->p += 4);
      break;
    default:
      ok = number(j);
      break;
  }
  j->depth--;
  return ok;
}

bool hmm_json_valid(const char *text) {
  jp j = {text, 0};
  if (!value(&j)) return false;
  ws(&j);
  return *j.p == '\0';
}

char *hmm_read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
    free(s);
    s = NULL;
  }
  if (s) s[n] = '\0';
  fclose(f);
  return s;
}

TEST(hmm_json_checker) {
  ASSERT_TRUE(hmm_json_valid("{\"a\": [1, -2.5e3, true, null, \"x\\n\"], \"b\": {}}"));
  ASSERT_TRUE(!hmm_json_valid("{\"a\": [1, 2,]}"));
  ASSERT_TRUE(!hmm_json_valid("{\"a\" 1}"));
  ASSERT_TRUE(!hmm_json_valid("[1] x"));
}

/* ---- managers and nodes -------------------------------------------------------------------- */

TEST(hmm_manager_nodes) {
  loom_context *ctx = NULL;
  ASSERT_OK(hmm_test_context(&ctx));
  loom_mem_manager *m = NULL;
  ASSERT_OK(loom_mem_manager_create(ctx, NULL, &m));
  ASSERT_TRUE(loom_mem_node_count(m) >= 1);
  int32_t host = hmm_node(m, "host0");
  ASSERT_EQ(host, 0);
  ASSERT_EQ(hmm_node(m, "cpu0"), 0);
  ASSERT_EQ(hmm_node(m, "CPU0"), 0);
  int32_t node = 0;
  ASSERT_STATUS(loom_mem_node_find(m, "gpu7", &node), LOOM_ERR_NOT_FOUND);
  ASSERT_EQ(node, -1);
  ASSERT_CONTAINS(loom_last_error(), "host0");
  loom_mem_node_info info;
  ASSERT_OK(loom_mem_node_info_get(m, host, &info));
  ASSERT_STREQ(info.id, "host0");
  ASSERT_EQ(info.kind, LOOM_MEMORY_HOST);
  ASSERT_EQ(info.limit_bytes, info.size_bytes);
  ASSERT_TRUE(info.storages == LOOM_MEM_STORAGE_BIT(LOOM_MEM_STORAGE_HOST));
  ASSERT_STATUS(loom_mem_node_info_get(m, 99, &info), LOOM_ERR_INVALID_ARGUMENT);
  for (int32_t d = 0; d < loom_context_device_count(ctx); d++) {
    loom_device_info di;
    ASSERT_OK(loom_context_device_info(ctx, d, &di));
    ASSERT_OK(loom_mem_device_node(m, d, &node));
    ASSERT_EQ(node, hmm_node(m, di.id));
  }
  ASSERT_STATUS(loom_mem_device_node(m, 99, &node), LOOM_ERR_INVALID_ARGUMENT);
  loom_mem_manager_options o;
  ASSERT_OK(loom_mem_get_options(m, &o));
  ASSERT_EQ(o.mode, LOOM_MEM_MODE_AUTO);
  ASSERT_EQ(o.migration, LOOM_MEM_POLICY_ADAPTIVE);
  ASSERT_EQ(o.prefetch, LOOM_MEM_POLICY_ADAPTIVE);
  ASSERT_EQ(o.migration_threshold, 2);
  ASSERT_OK(loom_mem_set_migration_policy(m, LOOM_MEM_POLICY_AGGRESSIVE));
  ASSERT_OK(loom_mem_set_prefetch_policy(m, LOOM_MEM_POLICY_NONE));
  ASSERT_OK(loom_mem_set_migration_threshold(m, 5));
  ASSERT_STATUS(loom_mem_set_migration_threshold(m, 0), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(loom_mem_set_migration_policy(m, (loom_mem_policy)7), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_OK(loom_mem_get_options(m, &o));
  ASSERT_EQ(o.migration, LOOM_MEM_POLICY_AGGRESSIVE);
  ASSERT_EQ(o.prefetch, LOOM_MEM_POLICY_NONE);
  ASSERT_EQ(o.migration_threshold, 5);
  loom_mem_manager_destroy(m);
  loom_mem_manager_destroy(NULL);
  loom_mem_manager_options_init(&o);
  o.migration_threshold = 0;
  ASSERT_STATUS(loom_mem_manager_create(ctx, &o, &m), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_TRUE(m == NULL);
  ASSERT_STATUS(loom_mem_manager_create(NULL, NULL, &m), LOOM_ERR_INVALID_ARGUMENT);
  loom_context_destroy(ctx);
}

TEST(hmm_context_default_manager) {
  loom_context *ctx = NULL;
  ASSERT_OK(hmm_test_context(&ctx));
  loom_mem_manager *a = NULL, *b = NULL;
  ASSERT_OK(loom_context_memory(ctx, &a));
  ASSERT_OK(loom_context_memory(ctx, &b));
  ASSERT_TRUE(a != NULL && a == b);
  loom_buffer *buf = NULL;
  ASSERT_OK(loom_buffer_allocate(a, 64, LOOM_F32, 0, 0, &buf));
  loom__context_memory_release(ctx); /* frees the buffer with the manager */
  loom__context_memory_release(ctx); /* nothing left: a no-op */
  loom_context_destroy(ctx);
}

/* ---- buffers on the host ------------------------------------------------------------------ */

TEST(hmm_host_buffer_basics) {
  loom_context *ctx = NULL;
  ASSERT_OK(hmm_test_context(&ctx));
  loom_mem_manager *m = NULL;
  ASSERT_OK(loom_mem_manager_create(ctx, NULL, &m));
  int64_t live0 = loom_testing_live_allocations();
  loom_buffer *b = NULL;
  ASSERT_STATUS(loom_buffer_allocate(m, 10, LOOM_F32, 0, 0, &b), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(loom_buffer_allocate(m, 16, LOOM_F32, 42, 0, &b), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(loom_buffer_allocate(m, 16, LOOM_F32, 0, 1u << 20, &b), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(loom_buffer_allocate(m, 16, LOOM_F32, 0, LOOM_MEM_SVM_FINE | LOOM_MEM_SVM_COARSE, &b),
                LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_TRUE(b == NULL);

  const int64_t n = 1 << 20; /* big enough to be bound to the NUMA node by hwloc */
  ASSERT_OK(loom_buffer_allocate(m, n, LOOM_F32, 0, 0, &b));
  ASSERT_TRUE(!loom_buffer_is_managed(b));
  ASSERT_OK(hmm_map_fill(b, n, 7));
  ASSERT_EQ(hmm_buffer_mismatch(b, n, 7), -1);
  uint8_t chunk[100];
  hmm_fill(chunk, sizeof chunk, 99);
  ASSERT_OK(loom_buffer_write(b, 1000, chunk, sizeof chunk));
  uint8_t back[100];
  ASSERT_OK(loom_buffer_read(b, 1000, back, sizeof back));
  ASSERT_EQ(memcmp(back, chunk, sizeof chunk), 0);
  ASSERT_STATUS(loom_buffer_read(b, n - 10, back, 11), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(loom_buffer_write(b, -1, chunk, 1), LOOM_ERR_INVALID_ARGUMENT);

  /* Nested read maps, then a write map refused while... nothing else uses it: allowed. */
  void *p1 = NULL, *p2 = NULL;
  ASSERT_OK(loom_buffer_map(b, LOOM_ACCESS_READ, &p1));
  ASSERT_OK(loom_buffer_map(b, LOOM_ACCESS_READ, &p2));
  ASSERT_TRUE(p1 == p2);
  ASSERT_EQ(memcmp((uint8_t *)p1 + 1000, chunk, sizeof chunk), 0);
  loom_buffer_info info;
  ASSERT_OK(loom_buffer_get_info(b, &info));
  ASSERT_EQ(info.pins, 2);
  ASSERT_OK(loom_buffer_unmap(b, p1));
  ASSERT_OK(loom_buffer_unmap(b, p2));
  ASSERT_STATUS(loom_buffer_unmap(b, p2), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(loom_buffer_map(b, LOOM_ACCESS_DISCARD, &p1), LOOM_ERR_INVALID_ARGUMENT);

  ASSERT_OK(loom_buffer_get_info(b, &info));
  ASSERT_EQ(info.bytes, n);
  ASSERT_EQ(info.dtype, LOOM_F32);
  ASSERT_EQ(info.node, 0);
  ASSERT_EQ(info.valid_copies, 1);
  ASSERT_EQ(info.pins, 0);
  ASSERT_EQ(info.accesses, 3);
  ASSERT_EQ(info.migrations, 0);
  loom_buffer_node_info ni;
  ASSERT_OK(loom_buffer_node_info_get(b, 0, &ni));
  ASSERT_EQ(ni.state, LOOM_MEM_OWNER);
  ASSERT_EQ(ni.storage, LOOM_MEM_STORAGE_HOST);
  ASSERT_EQ(ni.allocated_bytes, n);
  ASSERT_EQ(ni.accesses, 3);

  /* Acquire on the host: the host copy itself. */
  loom_mem_handle h;
  ASSERT_OK(loom_buffer_acquire(b, 0, LOOM_ACCESS_READ | LOOM_ACCESS_WRITE, &h));
  ASSERT_EQ(h.storage, LOOM_MEM_STORAGE_HOST);
  ASSERT_EQ(h.node, 0);
  ASSERT_TRUE(h.ptr != NULL && !h.temporary);
  ((uint8_t *)h.ptr)[0] ^= 0xff;
  ASSERT_OK(loom_buffer_release(b, &h));
  ASSERT_STATUS(loom_buffer_release(b, &h), LOOM_ERR_INVALID_ARGUMENT);

  ASSERT_OK(loom_buffer_pin(b));
  ASSERT_OK(loom_buffer_unpin(b));
  ASSERT_STATUS(loom_buffer_unpin(b), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_OK(loom_buffer_advise(b, LOOM_MEM_ADVISE_READ_MOSTLY, 0));
  ASSERT_OK(loom_buffer_advise(b, LOOM_MEM_ADVISE_PREFERRED_LOCATION, 0));
  ASSERT_OK(loom_buffer_advise(b, LOOM_MEM_ADVISE_ACCESSED_BY, 0));
  ASSERT_STATUS(loom_buffer_advise(b, LOOM_MEM_ADVISE_ACCESSED_BY, 77), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_OK(loom_buffer_get_info(b, &info));
  ASSERT_TRUE(info.read_mostly);
  ASSERT_EQ(info.preferred_node, 0);
  ASSERT_OK(loom_buffer_node_info_get(b, 0, &ni));
  ASSERT_TRUE(ni.accessed_by);
  ASSERT_OK(loom_buffer_prefetch(b, 0)); /* valid there already: nothing to do */
  ASSERT_OK(loom_buffer_migrate(b, 0));
  ASSERT_OK(loom_buffer_get_info(b, &info));
  ASSERT_EQ(info.migrations, 0);

  loom_buffer *z = NULL;
  ASSERT_OK(loom_buffer_allocate(m, 0, LOOM_F64, 0, 0, &z));
  ASSERT_OK(loom_buffer_read(z, 0, back, 0));
  loom_buffer_free(z);
  loom_buffer_free(b);
  loom_buffer_free(NULL);
  loom_mem_node_stats st;
  ASSERT_OK(loom_mem_stats(m, 0, &st));
  ASSERT_EQ(st.live_bytes, 0);
  ASSERT_EQ(st.allocations, 2);
  ASSERT_EQ(st.frees, 2);
  ASSERT_OK(loom_mem_trim(m, -1));
  ASSERT_OK(loom_mem_stats(m, 0, &st));
  ASSERT_EQ(st.in_use, 0);
  ASSERT_EQ(loom_testing_live_allocations(), live0);
  loom_mem_manager_destroy(m);
  loom_context_destroy(ctx);
}

TEST(hmm_size_classes) {
  ASSERT_EQ(loom__hmm_size_class(0, 0), 256);
  ASSERT_EQ(loom__hmm_size_class(256, 0), 256);
  ASSERT_EQ(loom__hmm_size_class(257, 0), 320);
  ASSERT_EQ(loom__hmm_size_class(1000, 0), 1024);
  ASSERT_EQ(loom__hmm_size_class(1025, 0), 1280);
  ASSERT_EQ(loom__hmm_size_class(3 * MiB, 0), 3 * MiB);
  ASSERT_EQ(loom__hmm_size_class(200 * MiB, 0), 224 * MiB);
  ASSERT_EQ(loom__hmm_size_class(129 * MiB, 0), 160 * MiB);
  /* Near the largest allocation the class gives way. */
  ASSERT_EQ(loom__hmm_size_class(250 * MiB, 255 * MiB), 250 * MiB);
  for (int64_t n = 257; n < 100000; n += 977) {
    int64_t c = loom__hmm_size_class(n, 0);
    ASSERT_TRUE(c >= n && c <= n + n / 4 + 1);
  }
}

TEST(hmm_pool_reuse) {
  loom_context *ctx = NULL;
  ASSERT_OK(hmm_test_context(&ctx));
  loom_mem_manager *m = NULL;
  ASSERT_OK(loom_mem_manager_create(ctx, NULL, &m));
  loom_buffer *b = NULL;
  ASSERT_OK(loom_buffer_allocate(m, 5000, LOOM_U8, 0, 0, &b));
  loom_buffer_free(b);
  loom_mem_node_stats st;
  ASSERT_OK(loom_mem_stats(m, 0, &st));
  ASSERT_EQ(st.cached_bytes, 5120);
  ASSERT_EQ(st.in_use, 5120);
  ASSERT_OK(loom_buffer_allocate(m, 5100, LOOM_U8, 0, 0, &b)); /* same class */
  ASSERT_OK(loom_mem_stats(m, 0, &st));
  ASSERT_EQ(st.pool_hits, 1);
  ASSERT_EQ(st.cached_bytes, 0);
  ASSERT_EQ(st.live_bytes, 5120);
  loom_buffer_free(b);
  /* No pool: frees go straight back. */
  loom_mem_manager_destroy(m);
  loom_mem_manager_options o;
  loom_mem_manager_options_init(&o);
  o.pool_max_bytes = -1;
  ASSERT_OK(loom_mem_manager_create(ctx, &o, &m));
  ASSERT_OK(loom_buffer_allocate(m, 5000, LOOM_U8, 0, 0, &b));
  loom_buffer_free(b);
  ASSERT_OK(loom_mem_stats(m, 0, &st));
  ASSERT_EQ(st.cached_bytes, 0);
  ASSERT_EQ(st.in_use, 0);
  loom_mem_manager_destroy(m);
  loom_context_destroy(ctx);
}

TEST(hmm_host_limit) {
  loom_context *ctx = NULL;
  ASSERT_OK(hmm_test_context(&ctx));
  loom_mem_manager *m = NULL;
  loom_mem_manager_options o;
  hmm_test_options(&o, LOOM_MEM_MODE_AUTO, LOOM_MEM_POLICY_ADAPTIVE);
  o.limits = "cpu0:1MiB";
  ASSERT_OK(loom_mem_manager_create(ctx, &o, &m));
  loom_mem_node_info info;
  ASSERT_OK(loom_mem_node_info_get(m, 0, &info));
  ASSERT_EQ(info.limit_bytes, MiB);
  loom_buffer *a = NULL, *b = NULL, *c = NULL;
  ASSERT_OK(loom_buffer_allocate(m, 512 * 1024, LOOM_U8, 0, 0, &a));
  ASSERT_OK(loom_buffer_allocate(m, 256 * 1024, LOOM_U8, 0, 0, &b));
  /* Host copies are never evicted: this one does not fit. */
  ASSERT_STATUS(loom_buffer_allocate(m, 512 * 1024, LOOM_U8, 0, 0, &c), LOOM_ERR_OUT_OF_MEMORY);
  ASSERT_CONTAINS(loom_last_error(), "host0");
  ASSERT_STATUS(loom_buffer_allocate(m, 2 * MiB, LOOM_U8, 0, 0, &c), LOOM_ERR_OUT_OF_MEMORY);
  ASSERT_CONTAINS(loom_last_error(), "more than its");
  /* Freed memory waits in the pool, and is released for a different size. */
  loom_buffer_free(b);
  ASSERT_OK(loom_buffer_allocate(m, 384 * 1024, LOOM_U8, 0, 0, &c));
  loom_mem_node_stats st;
  ASSERT_OK(loom_mem_stats(m, 0, &st));
  ASSERT_EQ(st.pool_releases, 1);
  ASSERT_EQ(st.failed_allocations, 2);
  ASSERT_TRUE(st.peak_in_use <= MiB);
  /* A limit below what is in use and cannot go fails and leaves the limit. */
  ASSERT_STATUS(loom_mem_set_limit(m, 0, 256 * 1024), LOOM_ERR_OUT_OF_MEMORY);
  ASSERT_OK(loom_mem_node_info_get(m, 0, &info));
  ASSERT_EQ(info.limit_bytes, MiB);
  ASSERT_OK(loom_mem_set_limit(m, 0, 2 * MiB));
  ASSERT_STATUS(loom_mem_set_limit(m, 0, -1), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_OK(loom_mem_set_limits(m, "host0:4MiB"));
  ASSERT_OK(loom_mem_node_info_get(m, 0, &info));
  ASSERT_EQ(info.limit_bytes, 4 * MiB);
  ASSERT_STATUS(loom_mem_set_limits(m, "ocl9:1MiB"), LOOM_ERR_NOT_FOUND);
  ASSERT_STATUS(loom_mem_set_limits(m, "ocl9"), LOOM_ERR_INVALID_ARGUMENT);
  loom_buffer_free(a);
  loom_buffer_free(c);
  loom_mem_manager_destroy(m);
  loom_context_destroy(ctx);
}

/* ---- LOOM_MEM_LIMIT ---------------------------------------------------------------------------- */

TEST(hmm_limit_parse) {
  loom__mem_limit *items = NULL;
  int32_t n = 0;
  ASSERT_OK(loom__mem_limits_parse("ocl0:256MiB,cpu0:4GiB", "LOOM_MEM_LIMIT", &items, &n));
  ASSERT_EQ(n, 2);
  ASSERT_STREQ(items[0].id, "ocl0");
  ASSERT_EQ(items[0].bytes, 256 * MiB);
  ASSERT_STREQ(items[1].id, "cpu0");
  ASSERT_EQ(items[1].bytes, 4096 * MiB);
  loom__free(items);
  ASSERT_OK(loom__mem_limits_parse(" OCL1 : 1.5GiB , host0:123", "LOOM_MEM_LIMIT", &items, &n));
  ASSERT_EQ(n, 2);
  ASSERT_STREQ(items[0].id, "ocl1");
  ASSERT_EQ(items[0].bytes, 1536 * MiB);
  ASSERT_EQ(items[1].bytes, 123);
  loom__free(items);
  ASSERT_OK(loom__mem_limits_parse("", "LOOM_MEM_LIMIT", &items, &n));
  ASSERT_EQ(n, 0);
  ASSERT_TRUE(items == NULL);
  ASSERT_OK(loom__mem_limits_parse("cuda0:2GB", "LOOM_MEM_LIMIT", &items, &n));
  ASSERT_EQ(items[0].bytes, 2000000000);
  loom__free(items);

  static const struct {
    const char *text, *message;
  } bad[] = {
      {"ocl0", "has no ':'"},
      {"ocl0:", "cannot be read at column 6"},
      {"ocl0:12XB", "cannot be read"},
      {"ocl0:-1", "cannot be read"},
      {"ocl0:1GiB,gpu0:1GiB", "'gpu0' at column 11 is not a device or node id"},
      {":5", "needs a device or node id"},
      {"ocl:5", "not a device or node id"},
      {"ocl0:1GiB;cpu0:1GiB", "cannot be read"},
      {"averyveryverylongdeviceid0:1", "needs a device or node id"},
      /* Empty entries are refused as --runners refuses them (issue 16), with the column. */
      {"cpu0:1MiB,,", "'cpu0:1MiB,,': an entry is empty at column 11"},
      {"cpu0:1MiB,", "'cpu0:1MiB,': an entry is empty at column 11"},
      {" OCL1 : 1.5GiB , ,host0:123", "an entry is empty at column 18"},
      {",cpu0:1MiB", "an entry is empty at column 1"},
      /* A size too large is blamed where it starts, not past the end of the text. */
      {"ocl0:9223372036854775807",
       "the size of ocl0 is not a whole number of bytes, or is too large at column 6"},
      {"ocl0: 1.5B", "the size of ocl0 is not a whole number of bytes, or is too large at column 7"},
  };
  for (int32_t i = 0; i < LOOM_ARRAY_SIZE(bad); i++) {
    items = NULL;
    loom_status s = loom__mem_limits_parse(bad[i].text, "LOOM_MEM_LIMIT", &items, &n);
    if (s != LOOM_ERR_INVALID_ARGUMENT) {
      loom_test_fail(__FILE__, __LINE__, "'%s' parsed (status %d)", bad[i].text, (int)s);
      loom__free(items);
      return;
    }
    ASSERT_CONTAINS(loom_last_error(), "LOOM_MEM_LIMIT");
    ASSERT_CONTAINS(loom_last_error(), bad[i].message);
    ASSERT_TRUE(items == NULL && n == 0);
  }
  ASSERT_TRUE(loom__mem_id_well_formed("ocl12"));
  ASSERT_TRUE(loom__mem_id_well_formed("host0"));
  ASSERT_TRUE(!loom__mem_id_well_formed("ocl"));
  ASSERT_TRUE(!loom__mem_id_well_formed("ocl1x"));
}

TEST(hmm_limit_env) {
  loom_context *ctx = NULL;
  ASSERT_OK(hmm_test_context(&ctx));
  loom_mem_manager *m = NULL;
  loom_mem_manager_options o;
  loom_mem_manager_options_init(&o);                  /* limits NULL: read LOOM_MEM_LIMIT */
  setenv("LOOM_MEM_LIMIT", "cpu0:3MiB,ocl9:1MiB", 1); /* ocl9: not in this context, ignored */
  loom_status s = loom_mem_manager_create(ctx, &o, &m);
  setenv("LOOM_MEM_LIMIT", "cpu0:3MiB,bogus:1MiB", 1);
  loom_mem_manager *m2 = NULL;
  loom_status s2 = loom_mem_manager_create(ctx, &o, &m2);
  unsetenv("LOOM_MEM_LIMIT");
  ASSERT_OK(s);
  loom_mem_node_info info;
  ASSERT_OK(loom_mem_node_info_get(m, 0, &info));
  ASSERT_EQ(info.limit_bytes, 3 * MiB);
  ASSERT_EQ(s2, LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_TRUE(m2 == NULL);
  loom_mem_manager_destroy(m);
  o.limits = "cpu0:lots";
  ASSERT_STATUS(loom_mem_manager_create(ctx, &o, &m), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "loom_mem_manager_options.limits");
  loom_context_destroy(ctx);
}

/* ---- stats and trace ------------------------------------------------------------------------- */

TEST(hmm_stats_and_trace_json) {
  loom_context *ctx = NULL;
  ASSERT_OK(hmm_test_context(&ctx));
  loom_mem_manager *m = NULL;
  loom_mem_manager_options o;
  hmm_test_options(&o, LOOM_MEM_MODE_MANUAL, LOOM_MEM_POLICY_NONE);
  o.trace = true;
  ASSERT_OK(loom_mem_manager_create(ctx, &o, &m));
  loom_buffer *b = NULL;
  ASSERT_OK(loom_buffer_allocate(m, 4096, LOOM_F32, 0, 0, &b));
  ASSERT_OK(hmm_map_fill(b, 4096, 3));
  int32_t ocl = hmm_node(m, "ocl0");
  if (ocl >= 0) {
    loom_mem_handle h;
    ASSERT_OK(loom_buffer_acquire(b, ocl, LOOM_ACCESS_READ, &h)); /* a temporary copy: a "copy" event */
    ASSERT_OK(loom_buffer_release(b, &h));
  }
  loom_buffer_free(b);

  char path[256];
  snprintf(path, sizeof path, "%s/hmm_trace_%d.json",
           getenv("LOOM_BINARY_DIR") ? getenv("LOOM_BINARY_DIR") : "/tmp", (int)getpid());
  ASSERT_OK(loom_mem_trace_write(m, path));
  char *text = hmm_read_file(path);
  remove(path);
  ASSERT_TRUE(text != NULL);
  bool valid = hmm_json_valid(text);
  bool has = strstr(text, "\"traceEvents\"") && strstr(text, "\"alloc\"") && strstr(text, "\"free\"") &&
             strstr(text, "\"process_name\"") && (ocl < 0 || strstr(text, "\"copy\""));
  free(text);
  ASSERT_TRUE(valid);
  ASSERT_TRUE(has);
  ASSERT_STATUS(loom_mem_trace_write(m, "/nonexistent-dir/x.json"), LOOM_ERR_IO);

  FILE *f = tmpfile();
  ASSERT_TRUE(f != NULL);
  ASSERT_OK(loom_mem_stats_json(m, f));
  long len = ftell(f);
  rewind(f);
  char *js = calloc(1, (size_t)len + 1);
  ASSERT_TRUE(fread(js, 1, (size_t)len, f) == (size_t)len);
  fclose(f);
  valid = hmm_json_valid(js);
  has = strstr(js, "\"host0\"") && strstr(js, "\"peak_in_use\"") && strstr(js, "\"evictions\"");
  free(js);
  ASSERT_TRUE(valid);
  ASSERT_TRUE(has);
  ASSERT_OK(loom_mem_trace_enable(m, false));
  loom_mem_manager_destroy(m);
  loom_context_destroy(ctx);
}

/* A run's result on cpu0 becomes the caller's tensor without a copy: the buffer's host memory is
 * handed over, the node counts it freed, and a buffer that is in use or has another copy is
 * refused unchanged. */
TEST(hmm_take_host_memory) {
  loom_context *ctx = NULL;
  ASSERT_OK(hmm_test_context(&ctx));
  loom_mem_manager *m = NULL;
  ASSERT_OK(loom_mem_manager_create(ctx, NULL, &m));
  const int64_t n = 4096;
  loom_buffer *b = NULL;
  ASSERT_OK(loom_buffer_allocate(m, n, LOOM_U8, 0, 0, &b));
  ASSERT_OK(hmm_map_fill(b, n, 3));
  void *p = NULL, *taken = NULL;
  ASSERT_OK(loom_buffer_map(b, LOOM_ACCESS_READ, &p));
  ASSERT_TRUE(!loom__buffer_take_host(b, n, &taken)); /* mapped: refused */
  ASSERT_TRUE(taken == NULL);
  ASSERT_OK(loom_buffer_unmap(b, p));
  ASSERT_TRUE(!loom__buffer_take_host(b, n + 1, &taken)); /* smaller than asked: refused */
  ASSERT_EQ(hmm_buffer_mismatch(b, n, 3), -1);            /* and unchanged */
  loom_mem_node_stats st;
  ASSERT_OK(loom_mem_stats(m, 0, &st));
  ASSERT_TRUE(st.live_bytes >= n);
  ASSERT_TRUE(loom__buffer_take_host(b, n, &taken));
  ASSERT_TRUE(taken != NULL);
  uint8_t want[4096];
  hmm_fill(want, sizeof want, 3);
  ASSERT_EQ(memcmp(taken, want, sizeof want), 0);
  ASSERT_OK(loom_mem_stats(m, 0, &st));
  ASSERT_EQ(st.live_bytes, 0);
  ASSERT_EQ(st.cached_bytes, 0); /* not pooled: the caller owns it */
  loom__aligned_free(taken);
  loom_mem_manager_destroy(m);
  loom_context_destroy(ctx);
}
