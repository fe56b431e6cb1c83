/* Memory-limit specs ("ocl0:256MiB,cpu0:4GiB", LOOM_MEM_LIMIT): read by the memory manager
 * (hmm/hmm_limits.c) and by the splitter's runners (splitter/runners.c) alike, so it lives
 * below both. */
#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "core/limits.h"

bool loom__mem_id_well_formed(const char *id) {
  static const char *const prefixes[] = {"cpu", "ocl", "cuda", "host"};
  for (int32_t i = 0; i < LOOM_ARRAY_SIZE(prefixes); i++) {
    size_t n = strlen(prefixes[i]);
    if (strncasecmp(id, prefixes[i], n) != 0 || !id[n]) continue;
    const char *p = id + n;
    while (isdigit((unsigned char)*p)) p++;
    if (*p == '\0') return true;
  }
  return false;
}

static const char *skip_blanks(const char *p) {
  while (*p == ' ' || *p == '\t') p++;
  return p;
}

/* Parses one "id:bytes" item of length len starting at item. */
static loom_status parse_item(const char *text, const char *item, size_t len, const char *origin,
                              loom__mem_limit *out) {
  long col = (long)(item - text) + 1;
  const char *colon = memchr(item, ':', len);
  if (!colon)
    return loom__error(
        LOOM_ERR_INVALID_ARGUMENT,
        "%s '%s': item %.*s at column %ld has no ':' (write id:size, as ocl0:256MiB,cpu0:4GiB)", origin, text,
        (int)len, item, col);
  const char *id = skip_blanks(item);
  size_t id_len = (size_t)(colon - id);
  while (id_len > 0 && (id[id_len - 1] == ' ' || id[id_len - 1] == '\t')) id_len--;
  char idbuf[sizeof out->id];
  if (id_len == 0 || id_len >= sizeof idbuf)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT,
                       "%s '%s': item at column %ld needs a device or node id before ':'", origin, text, col);
  memcpy(idbuf, id, id_len);
  idbuf[id_len] = '\0';
  if (!loom__mem_id_well_formed(idbuf))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT,
                       "%s '%s': '%s' at column %ld is not a device or node id (cpu0, ocl1, cuda0, host0)",
                       origin, text, idbuf, (long)(id - text) + 1);
  char value[64];
  size_t vlen = len - (size_t)(colon + 1 - item);
  if (vlen >= sizeof value) vlen = sizeof value - 1;
  memcpy(value, colon + 1, vlen);
  value[vlen] = '\0';
  int64_t bytes = 0;
  const char *end = NULL;
  bool parsed = loom__parse_bytes(value, &bytes, &end);
  if (!parsed && end && *end == '\0' && end != value) { /* read to the end, yet not a size */
    const char *first = value;
    while (*first == ' ' || *first == '\t') first++;
    return loom__error(
        LOOM_ERR_INVALID_ARGUMENT,
        "%s '%s': the size of %s is not a whole number of bytes, or is too large at column %ld", origin, text,
        idbuf, (long)(colon + 1 - text) + 1 + (long)(first - value));
  }
  if (!parsed || *end != '\0') {
    long vcol = (long)(colon + 1 - text) + 1 + (long)((end ? end : value) - value);
    return loom__error(
        LOOM_ERR_INVALID_ARGUMENT,
        "%s '%s': the size of %s cannot be read at column %ld (write 123, 64KiB, 512MiB, 1.5GiB or 2GB)",
        origin, text, idbuf, vcol);
  }
  for (char *p = idbuf; *p; p++) *p = (char)tolower((unsigned char)*p);
  memcpy(out->id, idbuf, sizeof idbuf);
  out->bytes = bytes;
  return LOOM_OK;
}

loom_status loom__mem_limits_parse(const char *text, const char *origin, loom__mem_limit **out_items,
                                   int32_t *out_count) {
  *out_items = NULL;
  *out_count = 0;
  if (!text) return LOOM_OK;
  int32_t n = 1;
  for (const char *p = text; *p; p++) n += *p == ',';
  loom__mem_limit *items = loom__calloc((size_t)n, sizeof *items);
  if (!items) return loom__oom("memory limits");
  int32_t count = 0;
  loom_status s = LOOM_OK;
  for (const char *item = text; s == LOOM_OK;) {
    const char *comma = strchr(item, ',');
    size_t len = comma ? (size_t)(comma - item) : strlen(item);
    const char *first = skip_blanks(item);
    if (first < item + len)
      s = parse_item(text, item, len, origin, &items[count++]);
    else if (comma || item != text) /* "a,,b" and "a,": a blank text alone means no limits */
      s = loom__error(LOOM_ERR_INVALID_ARGUMENT,
                      "%s '%s': an entry is empty at column %ld (write id:size, as ocl0:256MiB,cpu0:4GiB)",
                      origin, text, (long)(first - text) + 1);
    if (!comma) break;
    item = comma + 1;
  }
  if (s != LOOM_OK || count == 0) {
    loom__free(items);
    return s;
  }
  *out_items = items;
  *out_count = count;
  return LOOM_OK;
}
