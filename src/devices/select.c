/* Device selection: LOOM_DEVICES and loom_context_options.devices ("cpu0,ocl1", "opencl",
 * "cuda", "gpu", "all"). */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "devices/devices.h"

#define SELECTION_HELP \
  "write all, cpu, gpu, opencl, cuda, or device ids such as cpu0, ocl1, cuda0, separated by commas"

/* A device id: cpu, ocl or cuda followed by decimal digits. */
static bool is_device_id(const char *tok) {
  static const char *prefixes[] = {"cpu", "ocl", "cuda"};
  for (int32_t i = 0; i < LOOM_ARRAY_SIZE(prefixes); i++) {
    size_t len = strlen(prefixes[i]);
    if (strncmp(tok, prefixes[i], len) != 0 || !tok[len]) continue;
    const char *p = tok + len;
    while (isdigit((unsigned char)*p)) p++;
    return *p == '\0' && p - (tok + len) < 9;
  }
  return false;
}

/* Applies one lower-case, trimmed token. */
static loom_status take_token(loom__selection *sel, const char *tok) {
  if (strcmp(tok, "all") == 0) {
    sel->all = true;
  } else if (strcmp(tok, "cpu") == 0) {
    sel->backends |= LOOM_BACKEND_CPU;
  } else if (strcmp(tok, "opencl") == 0 || strcmp(tok, "ocl") == 0) {
    sel->backends |= LOOM_BACKEND_OPENCL;
  } else if (strcmp(tok, "cuda") == 0) {
    sel->backends |= LOOM_BACKEND_CUDA;
  } else if (strcmp(tok, "gpu") == 0) {
    sel->gpus = true;
  } else if (is_device_id(tok)) {
    int32_t cap = sel->id_count;
    char **ids = loom__realloc(sel->ids, (size_t)(cap + 1) * sizeof *ids);
    if (!ids) return loom__oom("a device selection");
    sel->ids = ids;
    if (!(ids[sel->id_count] = loom__strdup(tok))) return loom__oom("a device selection");
    sel->id_count++;
  } else {
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s='%s': unknown device '%s' (" SELECTION_HELP ")",
                       sel->origin, sel->text, tok);
  }
  return LOOM_OK;
}

loom_status loom__selection_parse(const char *text, const char *origin, loom__selection *out) {
  memset(out, 0, sizeof *out);
  out->origin = origin ? origin : "device selection";
  const char *p = text ? text : "";
  while (isspace((unsigned char)*p)) p++;
  if (!*p) {
    out->all = true;
    return LOOM_OK;
  }
  if (!(out->text = loom__strdup(text))) return loom__oom("a device selection");
  loom_status s = LOOM_OK;
  while (s == LOOM_OK) {
    const char *comma = strchr(p, ',');
    const char *end = comma ? comma : p + strlen(p);
    const char *b = p, *e = end;
    while (b < e && isspace((unsigned char)*b)) b++;
    while (e > b && isspace((unsigned char)e[-1])) e--;
    char tok[32];
    size_t len = (size_t)(e - b);
    if (len == 0) {
      s = loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s='%s': an empty entry (" SELECTION_HELP ")", out->origin,
                      text);
    } else if (len >= sizeof tok) {
      s = loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s='%s': unknown device '%.*s' (" SELECTION_HELP ")",
                      out->origin, text, (int)len, b);
    } else {
      for (size_t i = 0; i < len; i++) tok[i] = (char)tolower((unsigned char)b[i]);
      tok[len] = '\0';
      s = take_token(out, tok);
    }
    if (!comma) break;
    p = comma + 1;
  }
  if (s != LOOM_OK) loom__selection_deinit(out);
  return s;
}

void loom__selection_deinit(loom__selection *sel) {
  if (!sel) return;
  for (int32_t i = 0; i < sel->id_count; i++) loom__free(sel->ids[i]);
  loom__free(sel->ids);
  loom__free(sel->text);
  memset(sel, 0, sizeof *sel);
}

bool loom__selection_host_only(const loom__selection *sel) {
  if (!sel || sel->all || sel->gpus || (sel->backends & ~(uint32_t)LOOM_BACKEND_CPU)) return false;
  for (int32_t i = 0; i < sel->id_count; i++)
    if (strncmp(sel->ids[i], "cpu", 3) != 0) return false;
  return true;
}

/* Whether `id` is dev's id or one of its aliases. */
static bool device_has_id(const loom__device *dev, const char *id) {
  if (strcasecmp(dev->id, id) == 0) return true;
  const char *p = dev->aka;
  size_t len = strlen(id);
  while (*p) {
    const char *comma = strchr(p, ',');
    size_t n = comma ? (size_t)(comma - p) : strlen(p);
    if (n == len && strncasecmp(p, id, n) == 0) return true;
    if (!comma) break;
    p = comma + 1;
  }
  return false;
}

bool loom__selection_takes(const loom__selection *sel, const loom__device *dev) {
  if (!sel || sel->all) return true;
  if (sel->backends & dev->backends) return true;
  if (sel->gpus && dev->kind == LOOM_DEVICE_GPU) return true;
  for (int32_t i = 0; i < sel->id_count; i++)
    if (device_has_id(dev, sel->ids[i])) return true;
  return false;
}

/* "cpu0, ocl0, ocl1 (also cuda0)" into buf. */
static void list_ids(const loom__device *all, int32_t n, char *buf, size_t size) {
  size_t used = 0;
  buf[0] = '\0';
  for (int32_t i = 0; i < n && used < size; i++) {
    int w = snprintf(buf + used, size - used, "%s%s%s%s%s", i ? ", " : "", all[i].id,
                     all[i].aka[0] ? " (also " : "", all[i].aka, all[i].aka[0] ? ")" : "");
    if (w < 0) break;
    used += (size_t)w;
  }
}

loom_status loom__selection_check(const loom__selection *sel, const loom__device *all, int32_t n) {
  if (!sel) return LOOM_OK;
  char ids[512];
  for (int32_t i = 0; i < sel->id_count; i++) {
    bool found = false;
    for (int32_t j = 0; j < n && !found; j++) found = device_has_id(&all[j], sel->ids[i]);
    if (!found) {
      list_ids(all, n, ids, sizeof ids);
      return loom__error(LOOM_ERR_NOT_FOUND, "%s='%s': no device %s on this machine (devices: %s)",
                         sel->origin, sel->text, sel->ids[i], ids);
    }
  }
  for (int32_t j = 0; j < n; j++)
    if (loom__selection_takes(sel, &all[j])) return LOOM_OK;
  list_ids(all, n, ids, sizeof ids);
  return loom__error(LOOM_ERR_NOT_FOUND, "%s='%s' selects no device on this machine (devices: %s)",
                     sel->origin, sel->text, ids);
}
