/* loom-bench compare A.json B.json: two suite reports (two builds, drivers or Loom versions on
 * one machine) side by side. Each case is keyed by device id, name, dtype and size; B/A is B's
 * median over A's (above 1: B is slower).
 *
 * A difference is judged only beyond both runs' noise (issue 33: two identical back-to-back
 * runs once had 19 of 48 cases flagged from single best-of-3 times). Each run's case spans the
 * interval [min, median + K x MAD] of its timed runs; B is slower when its interval lies wholly
 * above A's by more than the threshold (B's fastest run is slower than A's median plus the
 * larger of K MADs and the threshold) and the medians differ by more than the threshold too,
 * faster likewise. The interval's low end is the run's fastest time because a busy machine
 * only ever adds time: a slower Loom moves every run, the fastest included, while a machine
 * that went busy mid-run moves the median and leaves the fastest (one run's topk went 1.48x in
 * median with its fastest 0.3% off). Its high end widens with the run's own spread, so a noisy
 * case needs a bigger difference to be flagged. Where the case has a library side, run
 * alternately with Loom's, a flagged case is judged again by Loom's time over its library's,
 * run by run: if that ratio held, the machine changed under the case between the runs (its
 * clock, a neighbour's load, PoCL's threads in their slow mode), and the case is called the
 * machine's, not flagged.
 *
 * Where a report ran each pass in a process of its own (suite --processes), a case's speed can
 * differ from one process to the next for the whole process, which no spread within one
 * process shows; the judgement then also asks every process of one run to lie beyond every
 * process of the other (their medians), and the second look blames the machine only where the
 * library's own time moved so too (suite_process.c and docs/bench.md say why). */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "loom/internal/json_read.h"
#include "measure.h"

typedef struct compare_options {
  const char *a, *b;
  double threshold;
  double k;     /* MADs above the median: the high end of a run's interval */
  double floor; /* cases under this many seconds in both reports are not judged */
  bool fail_on_regression, force;
} compare_options;

static void usage(FILE *f) {
  fputs(
      "usage: loom-bench compare A.json B.json [--k K] [--threshold X] [--floor S] [--force]\n"
      "                          [--fail-on-regression]\n"
      "  Every case of two `loom-bench suite --json` reports of one machine side by side: Loom's median\n"
      "  time in each, B/A (B's median over A's: above 1, B is slower) and each side's ratio to its\n"
      "  vendor library. A case is flagged only beyond both runs' noise: SLOWER (a regression) when\n"
      "  B's fastest run is slower than A's median + the larger of K x A's MAD and X of it, and\n"
      "  B/A > 1 + X, and, where both ran the case in several processes (suite --processes), every\n"
      "  process of B slower than every process of A by their medians; FASTER the other way round.\n"
      "  Each flagged row says why; a difference within the noise says that instead. A flagged\n"
      "  case with a library side (or a witness, run alternately with Loom's) is judged again by\n"
      "  Loom's time over the library's, run by run: it is the machine's, not flagged, when that\n"
      "  ratio held (in several processes: the library's own time moved the same way in every\n"
      "  process and the ratio did not part in every process by X; in one: the ratio moved by\n"
      "  less than X or than K of the larger MAD).\n"
      "  Reports of different machines (CPU model, micro-architecture, ISA, cores) are refused.\n"
      "  --k K                 the high end of a run's interval, in MADs above its median (default 3)\n"
      "  --threshold X         the least relative difference judged (default 0.1)\n"
      "  --floor S             judge no case that takes under S seconds in both reports (default 0)\n"
      "  --force               compare reports of different machines anyway\n"
      "  --fail-on-regression  exit 1 when a case is slower in B (else 0 whatever the figures)\n",
      f);
}

static int parse_args(int argc, char **argv, compare_options *o) {
  *o = (compare_options){.threshold = 0.1, .k = 3, .floor = 0};
  const bench_opt opts[] = {
      BENCH_OPT_DOUBLE("threshold", &o->threshold, 0, 100, "a fraction from 0 to 100, as 0.1"),
      BENCH_OPT_DOUBLE("k", &o->k, 0, 100, "a number of MADs from 0 to 100, as 3"),
      BENCH_OPT_DOUBLE("floor", &o->floor, 0, 3600, "seconds from 0 to 3600, as 0.0001"),
      BENCH_OPT_FLAG("force", &o->force),
      BENCH_OPT_FLAG("fail-on-regression", &o->fail_on_regression),
      BENCH_OPT_END,
  };
  bench_cli b = {.mode = "compare",
                 .synopsis = "loom-bench compare A.json B.json [options]",
                 .usage = usage,
                 .opts = opts,
                 .max_operands = 2};
  int rc = bench_args(&b, argc, argv);
  if (rc) return rc;
  if (b.n_operands < 2) return bench_usage_error(&b, "want two reports, A.json and B.json");
  o->a = b.operands[0];
  o->b = b.operands[1];
  return 0;
}

/* Reads and parses a suite report; 1 (with a message) when it is not one. */
static int load(const char *path, loom__jr_value *v) {
  char why[256];
  int err = 0;
  /* Loom's one JSON reader, size-capped: a report is kilobytes, /dev/zero is refused. */
  if (loom__jr_load(path, 0, v, why, sizeof why, &err)) {
    if (err)
      fprintf(stderr, "loom-bench compare: cannot read %s\n", path);
    else
      fprintf(stderr, "loom-bench compare: %s: not JSON: %s\n", path, why);
    return 1;
  }
  const loom__jr_value *devices = loom__jr_get(v, "devices");
  const char *schema = loom__jr_string(v, "schema");
  if ((strcmp(schema, "loom-bench-suite/1") && strcmp(schema, "loom-bench-suite/2")) || !devices ||
      devices->type != LOOM__JR_ARRAY) {
    fprintf(stderr, "loom-bench compare: %s: not a loom-bench suite report (no schema loom-bench-suite/2)\n",
            path);
    loom__jr_free(v);
    return 1;
  }
  return 0;
}

/* The case of report r on device `id` with c's name, dtype and size, or NULL. */
static const loom__jr_value *find_case(const loom__jr_value *r, const char *id, const loom__jr_value *c) {
  const loom__jr_value *devices = loom__jr_get(r, "devices");
  for (int32_t i = 0; i < devices->n; i++) {
    const loom__jr_value *d = &devices->items[i], *cases = loom__jr_get(d, "cases");
    if (strcmp(loom__jr_string(d, "id"), id) || !cases || cases->type != LOOM__JR_ARRAY) continue;
    for (int32_t k = 0; k < cases->n; k++) {
      const loom__jr_value *x = &cases->items[k];
      if (!strcmp(loom__jr_string(x, "name"), loom__jr_string(c, "name")) &&
          !strcmp(loom__jr_string(x, "dtype"), loom__jr_string(c, "dtype")) &&
          !strcmp(loom__jr_string(x, "size"), loom__jr_string(c, "size")))
        return x;
    }
  }
  return NULL;
}

static const char *fmt_time(double s, char *buf, size_t size) {
  if (s <= 0)
    snprintf(buf, size, "-");
  else if (s < 1e-3)
    snprintf(buf, size, "%.1f us", s * 1e6);
  else
    snprintf(buf, size, "%.3f ms", s * 1e3);
  return buf;
}

static void print_vendor_ratio(const loom__jr_value *c) {
  double r = c ? loom__jr_number(c, "ratio", -1) : -1;
  if (r > 0)
    printf(" %.2f |", r);
  else
    fputs(" - |", stdout);
}

/* One run's view of a case: its median, fastest run and MAD. A report of schema /1 has only its
 * best time, so its interval is that one point. */
typedef struct side {
  double median, min, mad;
  /* the fastest and the slowest of its processes' medians (suite --processes); n_proc 0: the
   * case ran in one process */
  double proc_lo, proc_hi;
  int32_t n_proc;
} side;

/* The numbers of c[key] ("times", "library_times", "witness_times"); how many (at most max). */
static int32_t numbers(const loom__jr_value *c, const char *key, double *out, int32_t max) {
  const loom__jr_value *t = loom__jr_get(c, key);
  int32_t n = 0;
  for (int32_t i = 0; t && t->type == LOOM__JR_ARRAY && i < t->n && n < max; i++)
    out[n++] = t->items[i].type == LOOM__JR_NUMBER ? t->items[i].number : -1;
  return n;
}

/* The runs each process took, in order (the suite's "processes"); how many processes, 0 when
 * the case has no such counts or they do not add up to its n runs. */
static int32_t process_counts(const loom__jr_value *c, int32_t n, int32_t *counts) {
  const loom__jr_value *p = loom__jr_get(c, "processes");
  int32_t k = 0, sum = 0;
  for (int32_t i = 0; p && p->type == LOOM__JR_ARRAY && i < p->n && k < BENCH_MAX_SAMPLES; i++) {
    if (p->items[i].type != LOOM__JR_NUMBER || p->items[i].number < 1) return 0;
    counts[k] = (int32_t)p->items[i].number;
    sum += counts[k++];
  }
  return sum == n ? k : 0;
}

/* The fastest and slowest of the medians of each process's values v[0..n) (runs or ratios),
 * into x->proc_lo and x->proc_hi, with x->n_proc; values <= 0 are left out. */
static void process_spread(const loom__jr_value *c, const double *v, int32_t n, side *x) {
  int32_t counts[BENCH_MAX_SAMPLES], k = process_counts(c, n, counts);
  x->n_proc = 0;
  for (int32_t p = 0, at = 0; p < k; at += counts[p++]) {
    bench_sample s = {0};
    for (int32_t i = at; i < at + counts[p]; i++)
      if (v[i] > 0) s.s[s.n++] = v[i];
    if (s.n == 0) continue;
    bench_sample_summarize(&s);
    x->proc_lo = x->n_proc == 0 || s.median < x->proc_lo ? s.median : x->proc_lo;
    x->proc_hi = x->n_proc == 0 || s.median > x->proc_hi ? s.median : x->proc_hi;
    x->n_proc++;
  }
}

static side read_side(const loom__jr_value *c) {
  side x = {.median = loom__jr_number(c, "seconds", -1)};
  x.min = loom__jr_number(c, "min", x.median);
  x.mad = loom__jr_number(c, "mad", 0);
  double v[BENCH_MAX_SAMPLES];
  process_spread(c, v, numbers(c, "times", v, BENCH_MAX_SAMPLES), &x);
  return x;
}

typedef enum verdict { SAME, SLOWER, FASTER, NOISE, MACHINE } verdict;

/* "B's fastest 2.310 ms > A's median 1.100 ms + 3 x MAD 0.010 ms": whether `hi`'s interval lies
 * above `lo`'s by more than the threshold (the margin is the larger of k MADs and that share of
 * lo's median; the words name the larger), in words. */
static bool above(const side *hi, const char *hi_name, const side *lo, const char *lo_name, double k,
                  double threshold, char *why, size_t size) {
  char a[24], b[24], c[24];
  double by_mad = k * lo->mad, by_share = threshold * lo->median;
  bool is = hi->min > lo->median + (by_mad > by_share ? by_mad : by_share);
  if (k <= 0)
    snprintf(why, size, "%s's fastest %s %s %s's median %s + %.0f%%", hi_name, fmt_time(hi->min, a, sizeof a),
             is ? ">" : "<=", lo_name, fmt_time(lo->median, b, sizeof b), threshold * 100);
  else if (by_mad >= by_share)
    snprintf(why, size, "%s's fastest %s %s %s's median %s + %g x MAD %s", hi_name,
             fmt_time(hi->min, a, sizeof a), is ? ">" : "<=", lo_name, fmt_time(lo->median, b, sizeof b), k,
             fmt_time(lo->mad, c, sizeof c));
  else
    snprintf(why, size, "%s's fastest %s %s %s's median %s + %.0f%% (3 x MAD %s is less)", hi_name,
             fmt_time(hi->min, a, sizeof a), is ? ">" : "<=", lo_name, fmt_time(lo->median, b, sizeof b),
             threshold * 100, fmt_time(lo->mad, c, sizeof c));
  return is;
}

/* Whether every process of `hi` ran slower than every process of `lo` (by their medians),
 * where both ran in several; true when either did not (no spread between processes to judge
 * by). When not, the reason, appended to why. A case can run at another speed in another
 * process for the whole process (cpu0's fft of 2^14 points at 30 or 45 us, FFTW alike), which
 * no process's own spread shows: a difference that some process of each run does not share is
 * not claimed. */
static bool apart_by_process(const side *hi, const char *hi_name, const side *lo, const char *lo_name,
                             char *why, size_t size) {
  if (hi->n_proc < 2 || lo->n_proc < 2) return true;
  bool apart = hi->proc_lo > lo->proc_hi;
  char a[24], b[24];
  size_t used = strlen(why);
  snprintf(why + used, size - used, "; %s's fastest of %d processes (median %s) %s %s's slowest of %d (%s)",
           hi_name, (int)hi->n_proc, fmt_time(hi->proc_lo, a, sizeof a), apart ? ">" : "<=", lo_name,
           (int)lo->n_proc, fmt_time(lo->proc_hi, b, sizeof b));
  return apart;
}

/* Judges B's case against A's (both measured); why says on what ground. Where both ran in
 * several processes, the spread between processes is judged by the processes' medians, and the
 * runs' MAD no longer widens the interval: pooled over processes in two modes it measures the
 * modes, and K of it hid a PoCL case made 3x slower in 1 of 18 simulated pairs (a device-wide
 * 1.8x mode in 30% of the processes). */
static verdict judge(const side *a, const side *b, const compare_options *o, char *why, size_t size) {
  double ratio = b->median / a->median;
  double k = a->n_proc >= 2 && b->n_proc >= 2 ? 0 : o->k;
  char detail[320];
  if (ratio > 1 + o->threshold) {
    if (above(b, "B", a, "A", k, o->threshold, why, size) && apart_by_process(b, "B", a, "A", why, size))
      return SLOWER;
    snprintf(detail, sizeof detail, "%s", why);
    snprintf(why, size, "within the noise: %s", detail);
    return NOISE;
  }
  if (ratio < 1 / (1 + o->threshold)) {
    if (above(a, "A", b, "B", k, o->threshold, why, size) && apart_by_process(a, "A", b, "B", why, size))
      return FASTER;
    snprintf(detail, sizeof detail, "%s", why);
    snprintf(why, size, "within the noise: %s", detail);
    return NOISE;
  }
  if (above(b, "B", a, "A", o->k, o->threshold, detail, sizeof detail) ||
      above(a, "A", b, "B", o->k, o->threshold, detail, sizeof detail)) {
    snprintf(why, size, "under the threshold: %s", detail);
    return SAME;
  }
  why[0] = '\0';
  return SAME;
}

/* Loom's time over its library's (or, for a case without one, its witness's: a small GEMM
 * through the device's library), run by run: times[i] and library_times[i] were run one after
 * the other, so each pair saw the same machine. Their median and MAD into *r; false when the
 * case has no such pairs (neither side, or a report of schema /1). */
static bool paired_ratio(const loom__jr_value *c, side *r) {
  double t[BENCH_MAX_SAMPLES], l[BENCH_MAX_SAMPLES], v[BENCH_MAX_SAMPLES];
  int32_t nt = numbers(c, "times", t, BENCH_MAX_SAMPLES),
          nl = numbers(c, "library_times", l, BENCH_MAX_SAMPLES);
  if (nl == 0) nl = numbers(c, "witness_times", l, BENCH_MAX_SAMPLES);
  bench_sample ratios = {0}; /* median and MAD as the suite summarizes its runs */
  int32_t n = nt < nl ? nt : nl;
  for (int32_t i = 0; i < n; i++) {
    v[i] = t[i] > 0 && l[i] > 0 ? t[i] / l[i] : -1;
    if (v[i] > 0) ratios.s[ratios.n++] = v[i];
  }
  if (ratios.n < 3) return false;
  bench_sample_summarize(&ratios);
  *r = (side){.median = ratios.median, .min = ratios.min, .mad = ratios.mad};
  if (nt == nl) process_spread(c, v, n, r); /* each process's pairs: Loom's runs and the peer's */
  return true;
}

/* The library's (or the witness's) runs of case c, with their processes' spread. */
static side peer_side(const loom__jr_value *c) {
  double v[BENCH_MAX_SAMPLES];
  int32_t n = numbers(c, "library_times", v, BENCH_MAX_SAMPLES);
  if (n == 0) n = numbers(c, "witness_times", v, BENCH_MAX_SAMPLES);
  side x = {0};
  process_spread(c, v, n, &x);
  return x;
}

/* A case flagged by its times whose library side (or witness) was run alternately with Loom's:
 * judged again by Loom's time over the library's, pair by pair. PoCL on 2 cores runs both sides
 * 1.8x slower in blocks of runs, sometimes for a whole run, so two idle back-to-back runs
 * differed 1.5x in median times while each pair's ratio held; a Loom made slower moves every
 * pair's ratio. Flagged only when the ratios' medians part by more than the threshold and more
 * than K of the two runs' larger MAD; else MACHINE, with the ratios in why. */
/* Whether a witness's own time moved the way of verdict v in every process (each process of
 * the slower run slower than each of the other's), as a busier machine moves it; when not, the
 * reason appended to why. A witness does other work than the case, so only such evidence lets
 * it blame the machine: a witness whose ratio to Loom moves up to 2x from one process to the
 * next (PoCL's pthread devices) could hide a Loom made 3x slower, as once it did (24 -> 42,
 * within 3 MADs of 7). */
static bool witness_moved(verdict v, const loom__jr_value *a, const loom__jr_value *b, char *why,
                          size_t size) {
  side pa = peer_side(a), pb = peer_side(b);
  const side *plo = v == SLOWER ? &pa : &pb, *phi = v == SLOWER ? &pb : &pa;
  if (phi->n_proc >= 2 && plo->n_proc >= 2 && phi->proc_lo > plo->proc_hi) return true;
  char x[24], y[24], z[24], w[24];
  size_t used = strlen(why);
  snprintf(why + used, size - used, "; its witness did not move so in every process (A %s-%s, B %s-%s)",
           fmt_time(pa.proc_lo, x, sizeof x), fmt_time(pa.proc_hi, y, sizeof y),
           fmt_time(pb.proc_lo, z, sizeof z), fmt_time(pb.proc_hi, w, sizeof w));
  return false;
}

/* Whether Loom's time over its peer parted between the runs, hi's above lo's. In several
 * processes: every process of hi beyond every process of lo and the medians by the threshold
 * (the spread between processes is the noise). In one: by K of the larger MAD, not K of each
 * (a PoCL reduce_sum made 3x slower on purpose moved its ratio to the witness from 19, MAD 3.3,
 * to 40, MAD 5.7, which K of each hid). */
static bool ratio_parted(const side *hi, const side *lo, const compare_options *o) {
  if (hi->n_proc >= 2 && lo->n_proc >= 2)
    return hi->proc_lo > lo->proc_hi && hi->median > lo->median * (1 + o->threshold);
  double spread = o->k * (hi->mad > lo->mad ? hi->mad : lo->mad);
  double margin = spread > o->threshold * lo->median ? spread : o->threshold * lo->median;
  return hi->median > lo->median + margin;
}

static verdict against_library(verdict v, const loom__jr_value *a, const loom__jr_value *b,
                               const compare_options *o, char *why, size_t size) {
  side ra, rb;
  if ((v != SLOWER && v != FASTER) || !paired_ratio(a, &ra) || !paired_ratio(b, &rb)) return v;
  const char *peer = loom__jr_string(a, "library")[0] ? "library" : "witness";
  /* A witness only clears a flag where it tracks Loom: with ratios spread over more than
   * 40% of their median (an ASan build under load: Loom's reduce_sum 50x its speed, the
   * uninstrumented SGEMM beside it a few noisy microseconds) it tells nothing either way. */
  double spread_a = ra.mad / ra.median, spread_b = rb.mad / rb.median;
  if (spread_a > 0.4 || spread_b > 0.4) {
    size_t used = strlen(why);
    snprintf(why + used, size - used,
             "; Loom's time over its %s's too spread to tell the machine (MAD %.0f%%, %.0f%%)", peer,
             100 * spread_a, 100 * spread_b);
    return v;
  }
  const side *lo = v == SLOWER ? &ra : &rb, *hi = v == SLOWER ? &rb : &ra;
  bool procs = hi->n_proc >= 2 && lo->n_proc >= 2;
  /* A library does the same work and shares the case's speed in each process (cpu0's fft at 30
   * or 45 us by process, FFTW alike): its ratio alone is the judge. */
  if (procs && !strcmp(peer, "witness") && !witness_moved(v, a, b, why, size)) return v;
  char range[96] = "";
  if (procs)
    snprintf(range, sizeof range, "; processes %.2f-%.2f and %.2f-%.2f", ra.proc_lo, ra.proc_hi, rb.proc_lo,
             rb.proc_hi);
  if (ratio_parted(hi, lo, o)) {
    size_t used = strlen(why);
    snprintf(why + used, size - used, "; against its %s, run by run: %.2f -> %.2f (MAD %.2f, %.2f%s)", peer,
             ra.median, rb.median, ra.mad, rb.mad, range);
    return v;
  }
  char detail[480];
  snprintf(detail, sizeof detail, "%s", why);
  snprintf(
      why, size,
      "the machine: Loom's time over its %s's held run by run (A %.2f, MAD %.2f; B %.2f, MAD %.2f%s); %s",
      peer, ra.median, ra.mad, rb.median, rb.mad, range, detail);
  return MACHINE;
}

/* One row: a case in both reports, or in one (the other NULL). Returns its verdict. */
static verdict print_row(const char *id, const loom__jr_value *a, const loom__jr_value *b,
                         const compare_options *o) {
  const loom__jr_value *c = a ? a : b;
  printf("| %s | %s | %s | %s |", id, loom__jr_string(c, "name"), loom__jr_string(c, "dtype"),
         loom__jr_string(c, "size"));
  side sa = a ? read_side(a) : (side){.median = -1, .min = -1},
       sb = b ? read_side(b) : (side){.median = -1, .min = -1};
  char ta[24], tb[24], why[768] = "";
  printf(" %s | %s |", fmt_time(sa.median, ta, sizeof ta), fmt_time(sb.median, tb, sizeof tb));
  verdict v = SAME;
  if (!a || !b) {
    printf(" - | only in %s | |", a ? "A" : "B");
  } else if (sa.median <= 0 || sb.median <= 0) {
    printf(" - | not measured in %s | |", sa.median <= 0 && sb.median <= 0 ? "either"
                                          : sa.median <= 0                 ? "A"
                                                                           : "B");
  } else if (sa.median < o->floor && sb.median < o->floor) {
    printf(" %.2f | under the floor | |", sb.median / sa.median);
  } else {
    v = against_library(judge(&sa, &sb, o, why, sizeof why), a, b, o, why, sizeof why);
    static const char *const words[] = {"", "SLOWER", "FASTER", "noise", "machine"};
    printf(" %.2f | %s | %s |", sb.median / sa.median, words[v], why);
  }
  print_vendor_ratio(a);
  print_vendor_ratio(b);
  putchar('\n');
  return v;
}

typedef struct tally {
  int32_t slower, faster, noise, machine;
} tally;

/* Rows of every case of `from`; with `other` absent from the other report only (only_missing). */
static void rows(const loom__jr_value *from, const loom__jr_value *other, bool from_is_a, bool only_missing,
                 const compare_options *o, tally *t) {
  const loom__jr_value *devices = loom__jr_get(from, "devices");
  for (int32_t i = 0; i < devices->n; i++) {
    const loom__jr_value *d = &devices->items[i], *cases = loom__jr_get(d, "cases");
    const char *id = loom__jr_string(d, "id");
    for (int32_t k = 0; cases && cases->type == LOOM__JR_ARRAY && k < cases->n; k++) {
      const loom__jr_value *c = &cases->items[k], *x = find_case(other, id, c);
      if (only_missing && x) continue;
      verdict v = print_row(id, from_is_a ? c : x, from_is_a ? x : c, o);
      t->slower += v == SLOWER, t->faster += v == FASTER, t->noise += v == NOISE, t->machine += v == MACHINE;
    }
  }
}

static void print_devices(const char *label, const char *path, const loom__jr_value *r) {
  const loom__jr_value *devices = loom__jr_get(r, "devices"), *m = loom__jr_get(r, "machine");
  printf("%s: %s (Loom %s, commit %s, %s, %s sizes)\n", label, path, loom__jr_string(r, "loom_version"),
         loom__jr_string(r, "commit")[0] ? loom__jr_string(r, "commit") : "unknown",
         loom__jr_string(r, "date")[0] ? loom__jr_string(r, "date") : "undated",
         loom__jr_string(r, "profile"));
  if (m)
    printf("  machine: %s, %s, %s\n", loom__jr_string(m, "cpu_model"), loom__jr_string(m, "uarch"),
           loom__jr_string(m, "isa"));
  for (int32_t i = 0; i < devices->n; i++)
    printf("  %s: %s (%s), driver %s\n", loom__jr_string(&devices->items[i], "id"),
           loom__jr_string(&devices->items[i], "name"), loom__jr_string(&devices->items[i], "vendor"),
           loom__jr_string(&devices->items[i], "driver"));
}

/* 0 when A and B ran on the same kind of machine; else 1 after saying how they differ (with
 * --force: a warning, and 0). Timings of two micro-architectures differ for reasons that are
 * not Loom's, so such a comparison would flag the machine. */
static int check_machines(const loom__jr_value *a, const loom__jr_value *b, const compare_options *o) {
  const loom__jr_value *ma = loom__jr_get(a, "machine"), *mb = loom__jr_get(b, "machine");
  char diff[512] = "";
  if (!ma || !mb) {
    snprintf(diff, sizeof diff, "%s names no machine (a report older than loom-bench-suite/2)",
             ma ? "B" : "A");
  } else {
    static const char *const keys[] = {"cpu_model", "uarch", "isa"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
      if (strcmp(loom__jr_string(ma, keys[i]), loom__jr_string(mb, keys[i])))
        snprintf(diff + strlen(diff), sizeof diff - strlen(diff), "%s%s '%s' in A, '%s' in B",
                 diff[0] ? "; " : "", keys[i], loom__jr_string(ma, keys[i]), loom__jr_string(mb, keys[i]));
    double ca = loom__jr_number(ma, "cores", -1), cb = loom__jr_number(mb, "cores", -1);
    if (ca != cb)
      snprintf(diff + strlen(diff), sizeof diff - strlen(diff), "%scores %g in A, %g in B",
               diff[0] ? "; " : "", ca, cb);
  }
  if (!diff[0]) return 0;
  if (o->force) {
    fprintf(stderr, "loom-bench compare: warning: compared anyway (--force), but %s\n", diff);
    return 0;
  }
  fprintf(stderr,
          "loom-bench compare: %s and %s are not from the same machine: %s (--force compares them anyway)\n",
          o->a, o->b, diff);
  return 1;
}

/* The higher of a report's 1-minute load averages before and after, or -1 when unknown. */
static double load_of(const loom__jr_value *r) {
  double most = -1;
  const char *keys[] = {"load_before", "load_after"};
  for (int i = 0; i < 2; i++) {
    const loom__jr_value *l = loom__jr_get(r, keys[i]);
    if (l && l->type == LOOM__JR_ARRAY && l->n > 0 && l->items[0].type == LOOM__JR_NUMBER)
      most = fmax(most, l->items[0].number);
  }
  return most;
}

/* Warnings, not refusals: a busy machine or other threads and placement move every time. */
static void warn_conditions(const loom__jr_value *a, const loom__jr_value *b) {
  double la = load_of(a), lb = load_of(b);
  for (int i = 0; i < 2; i++) {
    const loom__jr_value *m = loom__jr_get(i ? b : a, "machine");
    double cores = m ? loom__jr_number(m, "cores", 0) : 0, load = i ? lb : la;
    /* more runnable threads than cores: a parallel region waits for its last thread's turn */
    if (cores > 0 && load > cores)
      fprintf(stderr,
              "loom-bench compare: warning: %s ran on a busy machine (load average %.2f on %g cores): its "
              "multi-threaded figures may be slowed many times over\n",
              i ? "B" : "A", load, cores);
  }
  if (la >= 0 && lb >= 0 && fabs(la - lb) > 0.5)
    fprintf(
        stderr,
        "loom-bench compare: warning: the machine's load differed (1-minute load average up to %.2f in A, "
        "%.2f in B): figures of the busier run are slower for reasons not Loom's\n",
        la, lb);
  const loom__jr_value *ea = loom__jr_get(a, "environment"), *eb = loom__jr_get(b, "environment");
  for (int pass = 0; ea && eb && pass < 2; pass++) {
    const loom__jr_value *x = pass ? eb : ea, *y = pass ? ea : eb;
    for (int32_t i = 0; x->type == LOOM__JR_OBJECT && i < x->n; i++) {
      const loom__jr_value *other = loom__jr_get(y, x->keys[i]);
      if (pass == 0 && other && !strcmp(loom__jr_string(x, x->keys[i]), loom__jr_string(y, x->keys[i])))
        continue;
      if (pass == 1 && other) continue; /* differing values were said in the first pass */
      fprintf(stderr, "loom-bench compare: warning: %s is '%s' in %s and %s%s%s in %s\n", x->keys[i],
              loom__jr_string(x, x->keys[i]), pass ? "B" : "A", other ? "'" : "not set",
              other ? loom__jr_string(y, x->keys[i]) : "", other ? "'" : "", pass ? "A" : "B");
    }
  }
}

int loom_bench_compare(int argc, char **argv) {
  compare_options o;
  int rc = parse_args(argc, argv, &o);
  if (rc) return rc < 0 ? 0 : rc;
  loom__jr_value a, b;
  if (load(o.a, &a)) return 1;
  if (load(o.b, &b)) {
    loom__jr_free(&a);
    return 1;
  }
  if (check_machines(&a, &b, &o)) {
    loom__jr_free(&a);
    loom__jr_free(&b);
    return 1;
  }
  warn_conditions(&a, &b);
  print_devices("A", o.a, &a);
  print_devices("B", o.b, &b);
  printf(
      "\nB/A = B's median / A's median. A case is flagged only beyond both runs' noise: SLOWER when B's "
      "fastest run is slower than A's median + the larger of %g x A's MAD and %.0f%%, and B/A > %.2f (and, "
      "run in several processes, every process of B slower than every process of A), FASTER the other way "
      "round; noise: B/A beyond %.2f but the runs overlap; machine: flagged, but Loom's time over its "
      "library's (run alternately, pair by pair) held%s\n\n",
      o.k, o.threshold * 100, 1 + o.threshold, 1 + o.threshold,
      o.floor > 0 ? " (cases under --floor in both not judged)" : "");
  puts(
      "| device | case | dtype | size | A | B | B/A | | why | A vs library | B vs library |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|");
  tally t = {0};
  rows(&a, &b, true, false, &o, &t);
  rows(&b, &a, false, true, &o, &t);
  printf(
      "\n%d slower, %d faster beyond both runs' noise and %.0f%%; %d beyond %.0f%% within the noise; %d "
      "held against their library (the machine)\n",
      (int)t.slower, (int)t.faster, o.threshold * 100, (int)t.noise, o.threshold * 100, (int)t.machine);
  loom__jr_free(&a);
  loom__jr_free(&b);
  return t.slower && o.fail_on_regression ? 1 : 0;
}
