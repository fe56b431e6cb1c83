/* NOT STABLE API: an internal header, for Loom's own tools; it may change in any release and
 * is not installed. The symbols are in the static library (hidden in the shared one).
 *
 * Why it exists: the four tools (and each loom-bench mode) read their command lines with
 * getopt_long through this one layer, so the same mistake gets the same words and the same
 * exit code everywhere:
 *
 *   0 success, 1 the work failed, 2 the command line is wrong:
 *   PROG: unknown option '--bogus' (did you mean '--bogs'?)       + the usage line
 *   PROG: option '--limit' needs a value                          + the usage line
 *   PROG: option '--json' takes no value                          + the usage line
 *   PROG: --repeats '3x': want a count from 1 to 1000             (a bad value: this line only)
 *   PROG: --policy 'dmad': want dmda, eager or fixed (did you mean 'dmda'?)
 *
 * where the usage line is "usage: SYNOPSIS (PROG --help for more)". Numbers are read strictly
 * (decimal digits only for integers, the whole text, no sign unless a range allows one), byte
 * sizes through loom_bytes_parse. `--version` prints "PROG (Loom) VERSION" and the commit, as
 * help2man reads it.
 *
 * Use:
 *   static const struct option options[] = {{"limit", required_argument, NULL, 'l'}, ...,
 *                                           {"help", no_argument, NULL, 'h'},
 *                                           {"version", no_argument, NULL, 'V'}, {0}};
 *   loom__cli c = {.prog = "loom-plan", .synopsis = "loom-plan FILE.lir [options]",
 *                  .options = options, .short_options = "h"};
 *   for (int k; (k = loom__cli_next(&c, argc, argv)) != -1;) {
 *     if (k == LOOM__CLI_ERROR) return 2;
 *     switch (k) { case 'l': if (loom__cli_bytes(&c, "--limit", optarg, 1, INT64_MAX, &limit)) return 2; ...
 *   }
 *   then the operands are argv[c.index .. argc).
 */
#ifndef LOOM_INTERNAL_CLI_H
#define LOOM_INTERNAL_CLI_H

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "loom/status.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { LOOM__CLI_OK = 0, LOOM__CLI_FAIL = 1, LOOM__CLI_USAGE = 2 };

/* loom__cli_next's answer for a mistake it has already printed (exit with LOOM__CLI_USAGE). */
#define LOOM__CLI_ERROR (-2)

typedef struct loom__cli {
  const char *prog;             /* every message's prefix: "loom-run", "loom-bench dot" */
  const char *synopsis;         /* one line: "loom-run FILE.lir [options]" */
  const struct option *options; /* getopt_long's table, ended by a zeroed entry */
  const char *short_options;    /* getopt's string, without the leading ':' (NULL: none) */
  int index;                    /* after the last loom__cli_next: the first operand */
  bool started;                 /* loom__cli_next has begun (it resets getopt's state once) */
} loom__cli;

/* The next option of argv, as getopt_long gives it: the option's `val`, with its value in
 * `optarg`; -1 once every option is read (operands are then argv[c->index .. argc), moved
 * behind the options as GNU getopt does; "--" ends the options); LOOM__CLI_ERROR after
 * printing an unknown option (with the closest known one), a missing value or a value given
 * to an option that takes none. Not thread-safe (getopt's state is global). */
int loom__cli_next(loom__cli *c, int argc, char **argv);

/* Prints "PROG: <message>" and the usage line on stderr; returns LOOM__CLI_USAGE. For a
 * wrong command line that is no single option's fault (no graph file, two given). */
int loom__cli_usage_error(const loom__cli *c, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Prints "PROG: <message>" on stderr, in one write; returns `code`. */
int loom__cli_fail(const char *prog, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Prints "PROG: OPTION 'VALUE': want WANT" on stderr; returns LOOM__CLI_USAGE. */
int loom__cli_bad_value(const char *prog, const char *option, const char *value, const char *want);

/* Strict readers of an option's value: each returns 0 with *out set, or LOOM__CLI_USAGE after
 * printing "PROG: OPTION 'TEXT': want ..." (WANT when given, else a description of the range).
 *   int: decimal digits, a '-' only when lo < 0, in [lo, hi]
 *   u64: decimal digits, 0 .. 2^64-1
 *   double: a finite strtod number, the whole text, in [lo, hi]
 *   bytes: loom_bytes_parse's sizes (123, 64KiB, 1.5GiB, 2GB), in [lo, hi] */
int loom__cli_int(const char *prog, const char *option, const char *text, int64_t lo, int64_t hi,
                  const char *want, int64_t *out);
int loom__cli_u64(const char *prog, const char *option, const char *text, const char *want, uint64_t *out);
int loom__cli_double(const char *prog, const char *option, const char *text, double lo, double hi,
                     const char *want, double *out);
int loom__cli_bytes(const char *prog, const char *option, const char *text, int64_t lo, int64_t hi,
                    int64_t *out);
/* The same readers without a message: true when `text` reads whole and in range. */
bool loom__cli_parse_int(const char *text, int64_t lo, int64_t hi, int64_t *out);
bool loom__cli_parse_double(const char *text, double lo, double hi, double *out);

/* `text` as one of names[0..n): returns its index, or -1 after printing
 * "PROG: OPTION 'TEXT': want a, b or c (did you mean 'b'?)". */
int loom__cli_choice(const char *prog, const char *option, const char *text, const char *const *names, int n);

/* The name of names[0..n) closest to `word` by edit distance (insertions, deletions,
 * substitutions and swaps of neighbours), or NULL when none is close enough to be a
 * misspelling (more than a third of the word's length, at least 1 and at most 3, away). */
const char *loom__closest(const char *word, const char *const *names, int n);

/* " (did you mean 'NAME'?)" for the name closest to `word`, or "" (buf: at least 64 bytes plus
 * the longest name). Returns buf. */
const char *loom__did_you_mean(const char *word, const char *const *names, int n, char *buf, size_t size);

/* --version: "PROG (Loom) VERSION\ncommit COMMIT\n" on f (help2man takes the first line). */
void loom__cli_print_version(FILE *f, const char *prog);

#ifdef __cplusplus
}
#endif

#endif
