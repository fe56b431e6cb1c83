/* Every mode's command line through getopt_long (loom/internal/cli.h): a table of options
 * whose values are read strictly into the mode's fields, and the same words for the same
 * mistakes in every mode. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

enum { MAX_OPTS = 40 };

/* Reads one option's value into its field; 0 or 2 after the message. */
static int take(const char *prog, const bench_opt *o, const char *value) {
  char flag[64];
  snprintf(flag, sizeof flag, "--%s", o->name);
  int64_t x = 0;
  int rc = 0;
  switch (o->kind) {
    case BENCH_FLAG:
      *(bool *)o->target = true;
      return 0;
    case BENCH_TEXT:
      if (!*value) return loom__cli_bad_value(prog, flag, value, o->want ? o->want : "a value");
      *(const char **)o->target = value;
      return 0;
    case BENCH_I64:
    case BENCH_I32:
      if ((rc = loom__cli_int(prog, flag, value, o->lo, o->hi, o->want, &x))) return rc;
      if (o->kind == BENCH_I64)
        *(int64_t *)o->target = x;
      else
        *(int32_t *)o->target = (int32_t)x;
      return 0;
    case BENCH_BYTES:
      return loom__cli_bytes(prog, flag, value, o->lo, o->hi, (int64_t *)o->target);
    case BENCH_REPEAT:
      if (!*value) return loom__cli_bad_value(prog, flag, value, o->want ? o->want : "a value");
      if (*o->count >= o->hi)
        return loom__cli_fail(prog, 2, "%s: at most %lld times", flag, (long long)o->hi);
      ((const char **)o->target)[(*o->count)++] = value;
      return 0;
    case BENCH_DOUBLE:
      return loom__cli_double(prog, flag, value, o->dlo, o->dhi, o->want, (double *)o->target);
    default:
      return 2;
  }
}

int bench_args(bench_cli *b, int argc, char **argv) {
  struct option table[MAX_OPTS + 3];
  int n = 0;
  for (; b->opts[n].name && n < MAX_OPTS; n++)
    table[n] = (struct option){b->opts[n].name,
                               b->opts[n].kind == BENCH_FLAG ? no_argument : required_argument, NULL, n};
  table[n] = (struct option){"help", no_argument, NULL, 'h'};
  table[n + 1] = (struct option){"version", no_argument, NULL, 'V'};
  table[n + 2] = (struct option){NULL, 0, NULL, 0};
  char prog[64];
  snprintf(prog, sizeof prog, "loom-bench %s", b->mode);
  loom__cli cli = {.prog = prog, .synopsis = b->synopsis, .options = table, .short_options = "hV"};
  for (int key; (key = loom__cli_next(&cli, argc, argv)) != -1;) {
    if (key == LOOM__CLI_ERROR) return 2;
    if (key == 'h') {
      b->usage(stdout);
      return -1;
    }
    if (key == 'V') {
      loom__cli_print_version(stdout, "loom-bench");
      return -1;
    }
    int rc = take(prog, &b->opts[key], optarg);
    if (rc) return rc;
  }
  b->operands = argv + cli.index;
  b->n_operands = argc - cli.index;
  if (b->n_operands > b->max_operands)
    return loom__cli_usage_error(&cli, "unexpected argument '%s'", b->operands[b->max_operands]);
  return 0;
}

int bench_fail(const char *mode, int code, const char *fmt, ...) {
  char prog[64], msg[2048];
  snprintf(prog, sizeof prog, "loom-bench %s", mode);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return loom__cli_fail(prog, code, "%s", msg);
}

int bench_usage_error(const bench_cli *b, const char *fmt, ...) {
  char prog[64], msg[2048];
  snprintf(prog, sizeof prog, "loom-bench %s", b->mode);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  loom__cli cli = {.prog = prog, .synopsis = b->synopsis};
  return loom__cli_usage_error(&cli, "%s", msg);
}

int bench_list(const char *mode, const char *flag, const char *text, bool bytes, int64_t lo, int64_t hi,
               const char *want, int64_t *out, int32_t max, int32_t *count) {
  char prog[64];
  snprintf(prog, sizeof prog, "loom-bench %s", mode);
  *count = 0;
  const char *p = text;
  for (;;) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    char item[128];
    snprintf(item, sizeof item, "%.*s", (int)(len < sizeof item ? len : sizeof item - 1), p);
    int64_t v = 0;
    bool ok = bytes ? loom_bytes_parse(item, &v) == LOOM_OK && v >= lo && v <= hi
                    : loom__cli_parse_int(item, lo, hi, &v);
    if (!ok) return loom__cli_fail(prog, 2, "%s '%s': want %s", flag, item, want);
    if (*count == max) return loom__cli_fail(prog, 2, "%s '%s': at most %d items", flag, text, (int)max);
    out[(*count)++] = v;
    if (!end) return 0;
    p = end + 1;
  }
}
