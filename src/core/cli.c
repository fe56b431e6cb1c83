/* The tools' command lines (loom/internal/cli.h): getopt_long with one wording for each
 * mistake, strict numbers, and the closest name for a misspelling. In the library (core)
 * rather than in tools/ because every tool links it and the library's own parsers (LOOM_LOG,
 * the .lir parser's op names) use the same suggestion. */
#include "loom/internal/cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "loom/runner.h"
#include "loom/version.h"

/* ---- messages ------------------------------------------------------------------------------ */

/* One fputs per message: ranks of an MPI run and threads share stderr. */
static void say(const char *prog, const char *fmt, va_list ap) {
  char msg[2048], line[2200];
  vsnprintf(msg, sizeof msg, fmt, ap);
  snprintf(line, sizeof line, "%s: %s\n", prog, msg);
  fputs(line, stderr);
}

static void usage_line(const loom__cli *c) {
  char line[1024];
  snprintf(line, sizeof line, "usage: %s (%s --help for more)\n", c->synopsis, c->prog);
  fputs(line, stderr);
}

int loom__cli_usage_error(const loom__cli *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  say(c->prog, fmt, ap);
  va_end(ap);
  usage_line(c);
  return LOOM__CLI_USAGE;
}

int loom__cli_fail(const char *prog, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  say(prog, fmt, ap);
  va_end(ap);
  return code;
}

int loom__cli_bad_value(const char *prog, const char *option, const char *value, const char *want) {
  return loom__cli_fail(prog, LOOM__CLI_USAGE, "%s '%s': want %s", option, value, want);
}

void loom__cli_print_version(FILE *f, const char *prog) {
  fprintf(f, "%s (Loom) %s\ncommit %s\n", prog, loom_version(), loom_version_commit());
}

/* ---- suggestions --------------------------------------------------------------------------- */

/* Optimal string alignment distance (Damerau-Levenshtein without repeated edits of one
 * substring): a swap of two neighbours costs 1, as people mistype. Capped at `cap` + 1 to
 * stop early on long words. */
static int distance(const char *a, const char *b, int cap) {
  enum { MAX = 64 };
  int la = (int)strlen(a), lb = (int)strlen(b);
  if (la >= MAX || lb >= MAX) return cap + 1;
  if (abs(la - lb) > cap) return cap + 1;
  int d[MAX + 1][MAX + 1];
  for (int i = 0; i <= la; i++) d[i][0] = i;
  for (int j = 0; j <= lb; j++) d[0][j] = j;
  for (int i = 1; i <= la; i++) {
    for (int j = 1; j <= lb; j++) {
      int cost = a[i - 1] != b[j - 1];
      int v = LOOM_MIN(LOOM_MIN(d[i - 1][j] + 1, d[i][j - 1] + 1), d[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        v = LOOM_MIN(v, d[i - 2][j - 2] + 1);
      d[i][j] = v;
    }
  }
  return d[la][lb];
}

const char *loom__closest(const char *word, const char *const *names, int n) {
  if (!word || !*word) return NULL;
  int len = (int)strlen(word);
  int cap = LOOM_MAX(1, LOOM_MIN(3, len / 3));
  const char *best = NULL;
  int best_d = cap + 1;
  for (int i = 0; i < n; i++) {
    if (!names[i] || strcmp(names[i], word) == 0) continue;
    int d = distance(word, names[i], cap);
    if (d < best_d) {
      best_d = d;
      best = names[i];
    }
  }
  return best;
}

const char *loom__did_you_mean(const char *word, const char *const *names, int n, char *buf, size_t size) {
  const char *near = loom__closest(word, names, n);
  if (near)
    snprintf(buf, size, " (did you mean '%s'?)", near);
  else if (size)
    buf[0] = '\0';
  return buf;
}

int loom__cli_choice(const char *prog, const char *option, const char *text, const char *const *names,
                     int n) {
  for (int i = 0; i < n; i++)
    if (strcmp(text, names[i]) == 0) return i;
  char want[1024], hint[256];
  size_t k = 0;
  want[0] = '\0';
  for (int i = 0; i < n && k < sizeof want; i++)
    k += (size_t)snprintf(want + k, sizeof want - k, "%s%s",
                          i == 0       ? ""
                          : i == n - 1 ? " or "
                                       : ", ",
                          names[i]);
  loom__did_you_mean(text, names, n, hint, sizeof hint);
  loom__cli_fail(prog, LOOM__CLI_USAGE, "%s '%s': want %s%s", option, text, want, hint);
  return -1;
}

/* ---- getopt_long --------------------------------------------------------------------------- */

/* The long option spelled `name` (without "--", cut at '='): its entry, or NULL; *matches
 * counts the options it is a prefix of. */
static const struct option *find_long(const loom__cli *c, const char *name, size_t len, int *matches) {
  *matches = 0;
  for (const struct option *o = c->options; o && o->name; o++) {
    if (strlen(o->name) == len && strncmp(o->name, name, len) == 0) {
      *matches = 1;
      return o;
    }
    if (strncmp(o->name, name, len) == 0) ++*matches; /* a prefix: counted, never taken */
  }
  return NULL;
}

/* Says what was wrong with argv element `arg` (getopt_long answered '?' or ':'). */
static int report(const loom__cli *c, const char *arg, int answer) {
  if (strncmp(arg, "--", 2) != 0) {
    if (answer == ':') return loom__cli_usage_error(c, "option '-%c' needs a value", optopt);
    return loom__cli_usage_error(c, "unknown option '-%c'", optopt ? optopt : '?');
  }
  const char *name = arg + 2, *eq = strchr(name, '=');
  size_t len = eq ? (size_t)(eq - name) : strlen(name);
  int matches = 0;
  const struct option *o = find_long(c, name, len, &matches);
  if (answer == ':' && o) return loom__cli_usage_error(c, "option '--%s' needs a value", o->name);
  if (o && matches == 1 && eq && o->has_arg == no_argument)
    return loom__cli_usage_error(c, "option '--%s' takes no value", o->name);
  /* Unknown: the closest long option, compared with its dashes as the user typed them. */
  const char *names[128];
  char spelled[128][64];
  int n = 0;
  for (const struct option *p = c->options; p && p->name && n < 128; p++, n++) {
    snprintf(spelled[n], sizeof spelled[n], "--%s", p->name);
    names[n] = spelled[n];
  }
  char typed[96], hint[160];
  snprintf(typed, sizeof typed, "--%.*s", (int)LOOM_MIN(len, 80), name);
  loom__did_you_mean(typed, names, n, hint, sizeof hint);
  return loom__cli_usage_error(c, "unknown option '%s'%s", typed, hint);
}

/* getopt_long takes any unambiguous prefix of a long option ("--lim" for "--limits"); Loom's
 * tools do not, so that an option added later never changes what an old command line means,
 * and "--limit" given to a mode that has only "--limits" is said to be unknown, with the
 * suggestion. True when the option just read was spelled whole. */
static bool spelled_whole(const loom__cli *c, int argc, char **argv, int index) {
  int at =
      optarg && optind - 1 >= 1 && optind - 1 < argc && optarg == argv[optind - 1] ? optind - 2 : optind - 1;
  if (at < 1 || at >= argc || strncmp(argv[at], "--", 2) != 0) return true;
  const char *typed = argv[at] + 2, *eq = strchr(typed, '=');
  size_t len = eq ? (size_t)(eq - typed) : strlen(typed);
  const char *name = c->options[index].name;
  if (strlen(name) == len && strncmp(name, typed, len) == 0) return true;
  report(c, argv[at], '?');
  return false;
}

int loom__cli_next(loom__cli *c, int argc, char **argv) {
  char shorts[128];
  snprintf(shorts, sizeof shorts, ":%s", c->short_options ? c->short_options : "");
  if (!c->started) {
    optind = 0; /* glibc: a full reset, for a second command line in one process */
    c->started = true;
  }
  opterr = 0;
  int index = -1;
  int k = getopt_long(argc, argv, shorts, c->options, &index);
  c->index = optind;
  if (index >= 0 && !spelled_whole(c, argc, argv, index)) return LOOM__CLI_ERROR;
  if (k != '?' && k != ':') return k;
  const char *arg = optind - 1 >= 1 && optind - 1 < argc ? argv[optind - 1] : "";
  report(c, arg, k);
  return LOOM__CLI_ERROR;
}

/* ---- numbers ------------------------------------------------------------------------------- */

bool loom__cli_parse_int(const char *text, int64_t lo, int64_t hi, int64_t *out) {
  const char *p = text;
  if (!p) return false;
  if (*p == '-' && lo < 0) p++;
  if (*p < '0' || *p > '9') return false;
  errno = 0;
  char *end = NULL;
  long long v = strtoll(text, &end, 10);
  if (errno || *end || v < lo || v > hi) return false;
  *out = v;
  return true;
}

bool loom__cli_parse_double(const char *text, double lo, double hi, double *out) {
  if (!text || !*text || strchr(" \t\n\v\f\r", text[0])) return false;
  errno = 0;
  char *end = NULL;
  double v = strtod(text, &end);
  if (errno || *end || !isfinite(v) || v < lo || v > hi) return false;
  *out = v;
  return true;
}

int loom__cli_int(const char *prog, const char *option, const char *text, int64_t lo, int64_t hi,
                  const char *want, int64_t *out) {
  if (loom__cli_parse_int(text, lo, hi, out)) return 0;
  char range[96];
  if (!want) {
    snprintf(range, sizeof range, "an integer from %lld to %lld", (long long)lo, (long long)hi);
    want = range;
  }
  return loom__cli_bad_value(prog, option, text ? text : "", want);
}

int loom__cli_u64(const char *prog, const char *option, const char *text, const char *want, uint64_t *out) {
  if (text && *text >= '0' && *text <= '9') {
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(text, &end, 10);
    if (!errno && !*end) {
      *out = v;
      return 0;
    }
  }
  return loom__cli_bad_value(prog, option, text ? text : "", want ? want : "an integer from 0 to 2^64-1");
}

int loom__cli_double(const char *prog, const char *option, const char *text, double lo, double hi,
                     const char *want, double *out) {
  if (loom__cli_parse_double(text, lo, hi, out)) return 0;
  char range[96];
  if (!want) {
    snprintf(range, sizeof range, "a number from %g to %g", lo, hi);
    want = range;
  }
  return loom__cli_bad_value(prog, option, text ? text : "", want);
}

int loom__cli_bytes(const char *prog, const char *option, const char *text, int64_t lo, int64_t hi,
                    int64_t *out) {
  int64_t v = 0;
  if (text && loom_bytes_parse(text, &v) == LOOM_OK && v >= lo && v <= hi) {
    *out = v;
    return 0;
  }
  char want[160], a[32], b[32];
  if (hi == INT64_MAX)
    snprintf(want, sizeof want, "a byte size of at least %s (123, 64KiB, 1.5GiB, 2GB)",
             loom_bytes_format(lo, a, sizeof a));
  else
    snprintf(want, sizeof want, "a byte size from %s to %s (123, 64KiB, 1.5GiB, 2GB)",
             loom_bytes_format(lo, a, sizeof a), loom_bytes_format(hi, b, sizeof b));
  return loom__cli_bad_value(prog, option, text ? text : "", want);
}
