/* Runner lists as users write them: "cpu0:64MiB,ocl0:512MiB" (DESIGN.md "runner"). */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
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
