/* Byte sizes as people write them on command lines and in environment variables. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/core.h"
#include "loom/runner.h"

static const struct {
  const char *suffix;
  double scale;
} units[] = {
    {"", 1.0},
    {"b", 1.0},
    {"k", 1024.0},
    {"kib", 1024.0},
    {"kb", 1e3},
    {"m", 1048576.0},
    {"mib", 1048576.0},
    {"mb", 1e6},
    {"g", 1073741824.0},
    {"gib", 1073741824.0},
    {"gb", 1e9},
    {"t", 1099511627776.0},
    {"tib", 1099511627776.0},
    {"tb", 1e12},
};

bool loom__parse_bytes(const char *text, int64_t *out_bytes, const char **out_end) {
  const char *p = text;
  if (out_end) *out_end = text;
  if (!text) return false;
  while (isspace((unsigned char)*p)) p++;
  if (!isdigit((unsigned char)*p) && *p != '.') return false;
  char *end;
  double v = strtod(p, &end);
  if (end == p || !isfinite(v) || v < 0) {
    if (out_end) *out_end = p;
    return false;
  }
  p = end;
  while (isspace((unsigned char)*p)) p++;
  const char *suffix = p;
  size_t n = 0;
  while (isalpha((unsigned char)suffix[n])) n++;
  for (int32_t i = 0; i < LOOM_ARRAY_SIZE(units); i++) {
    if (strlen(units[i].suffix) == n && strncasecmp(units[i].suffix, suffix, n) == 0) {
      double bytes = v * units[i].scale;
      const char *rest = suffix + n;
      while (isspace((unsigned char)*rest)) rest++;
      if (out_end) *out_end = rest;
      if (bytes >= 9.2e18 || bytes != floor(bytes)) return false;
      *out_bytes = (int64_t)bytes;
      return true;
    }
  }
  if (out_end) *out_end = suffix;
  return false;
}

char *loom__format_bytes(int64_t bytes, char *buf, size_t size) {
  static const char *names[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = (double)bytes;
  int i = 0;
  while (v >= 1024.0 && i < 4) {
    v /= 1024.0;
    i++;
  }
  if (i == 0)
    snprintf(buf, size, "%lld B", (long long)bytes);
  else
    snprintf(buf, size, "%.2f %s", v, names[i]);
  return buf;
}

char *loom_bytes_format(int64_t bytes, char *buf, size_t size) {
  if (!buf || size == 0) return buf;
  return loom__format_bytes(bytes, buf, size);
}

char *loom__format_bytes_vs(int64_t bytes, int64_t other, char *buf, size_t size) {
  char mine[32], theirs[32];
  loom__format_bytes(bytes, mine, sizeof mine);
  loom__format_bytes(other, theirs, sizeof theirs);
  if (bytes != other && strcmp(mine, theirs) == 0) {
    snprintf(buf, size, "%lld B", (long long)bytes);
    return buf;
  }
  snprintf(buf, size, "%s", mine);
  return buf;
}

loom_status loom_bytes_parse(const char *text, int64_t *out_bytes) {
  const char *end = NULL;
  int64_t bytes;
  if (!out_bytes) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_bytes_parse: out_bytes is NULL");
  *out_bytes = 0;
  if (!text) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "byte size: NULL text");
  bool parsed = loom__parse_bytes(text, &bytes, &end);
  if (!parsed && end && *end == '\0' && end != text) { /* read to the end, yet not a size */
    const char *first = text;
    while (isspace((unsigned char)*first)) first++;
    return loom__error(
        LOOM_ERR_INVALID_ARGUMENT,
        "byte size '%s': the size is not a whole number of bytes, or is too large at column %ld", text,
        (long)(first - text) + 1);
  }
  if (!parsed || *end != '\0') {
    long col = (long)((end ? end : text) - text) + 1;
    return loom__error(
        LOOM_ERR_INVALID_ARGUMENT,
        "byte size '%s': cannot read it at column %ld (write 123, 64KiB, 512MiB, 1.5GiB or 2GB)", text, col);
  }
  *out_bytes = bytes;
  return LOOM_OK;
}
