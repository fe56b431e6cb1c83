/* Runner lists as users write them: "cpu0:64MiB,ocl0:512MiB" (DESIGN.md "runner"), and
 * runners from the memory manager's limits (LOOM_MEM_LIMIT). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/core.h"
#include "core/limits.h"
#include "loom/plan.h"

#define RUNNERS_HINT "write DEVICE:BYTES[,DEVICE:BYTES...], e.g. cpu0:64MiB,cpu0:32MiB"

/* A parse error at p (a position in spec): the message names the spec and the column. */
static loom_status bad_hint(const char *spec, const char *p, const char *what, const char *hint) {
  return loom__error(LOOM_ERR_INVALID_ARGUMENT, "runners '%s': %s at column %ld%s%s%s", spec, what,
                     (long)(p - spec) + 1, hint ? " (" : "", hint ? hint : "", hint ? ")" : "");
}

static loom_status bad(const char *spec, const char *p, const char *what) {
  return bad_hint(spec, p, what, NULL);
}

/* Reads a device id [a-z]+[0-9]+ at *pp. */
static loom_status parse_device(const char *spec, const char **pp, char *out, size_t size) {
  const char *p = *pp, *start = p;
  while (*p >= 'a' && *p <= 'z') p++;
  if (p == start) return bad_hint(spec, p, "expected a device id", "letters then digits: cpu0, ocl1, cuda0");
  const char *digits = p;
  while (isdigit((unsigned char)*p)) p++;
  if (p == digits)
    return bad_hint(spec, p, "expected the device's number", "letters then digits: cpu0, ocl1, cuda0");
  if ((size_t)(p - start) >= size) return bad(spec, start, "the device id is too long");
  memcpy(out, start, (size_t)(p - start));
  out[p - start] = '\0';
  *pp = p;
  return LOOM_OK;
}

/* Reads one DEVICE:BYTES entry from [p, end). */
static loom_status parse_entry(const char *spec, const char *p, const char *end, loom_runner *out) {
  memset(out, 0, sizeof *out);
  while (p < end && isspace((unsigned char)*p)) p++;
  loom_status s = parse_device(spec, &p, out->device, sizeof out->device);
  if (s) return s;
  while (p < end && isspace((unsigned char)*p)) p++;
  if (p >= end || *p != ':') return bad_hint(spec, p, "expected ':' after the device id", RUNNERS_HINT);
  p++;
  char text[64];
  size_t len = (size_t)(end - p);
  if (len >= sizeof text) return bad(spec, p, "the byte size is too long");
  memcpy(text, p, len);
  text[len] = '\0';
  const char *stop = NULL;
  int64_t bytes = 0;
  bool parsed = loom__parse_bytes(text, &bytes, &stop);
  if (!parsed && stop && *stop == '\0' && stop != text) /* read to the end, yet not a size */
    return bad(spec, p, "the byte size is not a whole number of bytes, or is too large");
  if (!parsed || *stop != '\0')
    return bad_hint(spec, p + ((stop ? stop : text) - text), "cannot read the byte size",
                    "write 123, 64KiB, 512MiB, 1.5GiB or 2GB");
  if (bytes <= 0) return bad(spec, p, "the limit must be more than 0 bytes");
  out->limit = bytes;
  return LOOM_OK;
}

static int32_t count_entries(const char *spec) {
  int32_t n = 1;
  for (const char *p = spec; *p; p++) n += *p == ',';
  return n;
}

loom_status loom_runners_parse(const char *spec, loom_runner **out_runners, int32_t *out_count) {
  if (!out_runners || !out_count)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_runners_parse: NULL out");
  *out_runners = NULL;
  *out_count = 0;
  if (!spec) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "runners: none given (" RUNNERS_HINT ")");
  const char *q = spec;
  while (isspace((unsigned char)*q)) q++;
  if (!*q) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "runners '%s': none given (" RUNNERS_HINT ")", spec);
  int32_t n = count_entries(spec);
  /* Plain malloc: the caller releases the array with free(), as plan.h says. */
  loom_runner *runners = malloc(sizeof *runners * (size_t)n);
  if (!runners) return loom__oom("a runner list");
  const char *p = spec;
  for (int32_t i = 0; i < n; i++) {
    const char *end = strchr(p, ',');
    if (!end) end = p + strlen(p);
    const char *t = p;
    while (t < end && isspace((unsigned char)*t)) t++;
    loom_status s = t == end ? bad_hint(spec, t, "an entry is empty", RUNNERS_HINT)
                             : parse_entry(spec, p, end, &runners[i]);
    if (s) {
      free(runners);
      return s;
    }
    p = *end ? end + 1 : end;
  }
  *out_runners = runners;
  *out_count = n;
  return LOOM_OK;
}

/* ---- runners and the memory manager's limits ------------------------------------------------ */

/* Whether a well-formed memory-limit id (lower case, loom__mem_id_well_formed) is a device's
 * rather than a host memory node's. */
static bool names_device(const char *id) {
  return strncmp(id, "host", 4) != 0;
}

/* The parsed items of `limits` (NULL: the LOOM_MEM_LIMIT variable); none when it is unset or
 * empty. The parser is the memory manager's, so the messages are the ones it would give. */
static loom_status read_mem_limits(const char *limits, loom__mem_limit **out_items, int32_t *out_count) {
  const char *origin = limits ? "limits" : "LOOM_MEM_LIMIT";
  const char *text = limits ? limits : getenv("LOOM_MEM_LIMIT");
  loom_status s = loom__mem_limits_parse(text, origin, out_items, out_count);
  for (int32_t i = 0; s == LOOM_OK && i < *out_count; i++) {
    const loom__mem_limit *it = &(*out_items)[i];
    if (names_device(it->id) && it->bytes <= 0)
      s = loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s '%s': %s is limited to 0 bytes, which no runner can use",
                      origin, text, it->id);
  }
  if (s) {
    loom__free(*out_items);
    *out_items = NULL;
    *out_count = 0;
  }
  return s;
}

/* The limit the items give device `id` (the last item naming it), or -1. */
static int64_t limit_of(const loom__mem_limit *items, int32_t count, const char *id) {
  int64_t bytes = -1;
  for (int32_t i = 0; i < count; i++)
    if (strcasecmp(items[i].id, id) == 0) bytes = items[i].bytes;
  return bytes;
}

loom_status loom_runners_from_mem_limits(const char *limits, loom_runner **out_runners, int32_t *out_count) {
  if (!out_runners || !out_count)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_runners_from_mem_limits: NULL out");
  *out_runners = NULL;
  *out_count = 0;
  loom__mem_limit *items = NULL;
  int32_t count = 0;
  loom_status s = read_mem_limits(limits, &items, &count);
  if (s || count == 0) return s;
  /* Plain malloc: the caller releases the array with free(), as plan.h says. */
  loom_runner *runners = calloc((size_t)count, sizeof *runners);
  if (!runners) {
    loom__free(items);
    return loom__oom("a runner list");
  }
  int32_t n = 0;
  for (int32_t i = 0; i < count; i++) {
    if (!names_device(items[i].id) || limit_of(items, i, items[i].id) >= 0) continue; /* named before */
    snprintf(runners[n].device, sizeof runners[n].device, "%s", items[i].id);
    runners[n++].limit = limit_of(items, count, items[i].id);
  }
  loom__free(items);
  if (n == 0) {
    free(runners);
    runners = NULL;
  }
  *out_runners = runners;
  *out_count = n;
  return LOOM_OK;
}

loom_status loom_runners_fit_mem_limits(loom_runner *runners, int32_t n_runners, const char *limits,
                                        int32_t *out_lowered) {
  if (out_lowered) *out_lowered = 0;
  if (n_runners < 0 || (n_runners > 0 && !runners))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_runners_fit_mem_limits: bad runner list");
  loom__mem_limit *items = NULL;
  int32_t count = 0;
  loom_status s = read_mem_limits(limits, &items, &count);
  if (s) return s;
  int32_t lowered = 0;
  for (int32_t i = 0; i < n_runners; i++) {
    int64_t most = limit_of(items, count, runners[i].device);
    if (most < 0 || runners[i].limit <= most) continue;
    runners[i].limit = most;
    lowered++;
  }
  loom__free(items);
  if (out_lowered) *out_lowered = lowered;
  return LOOM_OK;
}
