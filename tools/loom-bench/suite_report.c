/* The suite's reports (suite.h): a Markdown table and JSON (its schema in docs/bench.md); the
 * SVG plot is suite_svg.c's. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "loom/internal/json.h"
#include "suite.h"

/* ---- Markdown --------------------------------------------------------------------------------------- */

static void print_seconds(FILE *out, double s) {
  if (s <= 0)
    fputs(" - |", out);
  else if (s < 1e-3)
    fprintf(out, " %.1f us |", s * 1e6);
  else
    fprintf(out, " %.3f ms |", s * 1e3);
}

/* The spread of a side: "12 runs, min 1.02 ms, MAD 1.3%". */
static void print_spread(FILE *out, const bench_sample *s) {
  fprintf(out, " %d |", (int)s->n);
  print_seconds(out, s->min);
  fprintf(out, " %.1f%% |", 100 * bench_sample_dispersion(s));
}

static void print_case(FILE *out, const suite_case *c) {
  fprintf(out, "| %s | %s | %s |", c->name, c->dtype, c->size);
  print_seconds(out, c->seconds);
  if (c->error[0]) {
    fprintf(out, " failed: %s | | | | | | | | |\n", c->error);
    return;
  }
  print_spread(out, &c->loom);
  fprintf(out, " %.3g %s |", c->rate, c->unit);
  if (c->library[0]) {
    fprintf(out, " %s |", c->library);
    print_seconds(out, c->library_seconds);
    fprintf(out, " %.2f |", c->ratio);
    fprintf(out, " %.1f%% |", 100 * bench_sample_dispersion(&c->lib));
  } else {
    fprintf(out, " - | - | - (%s) | - |", c->reason);
  }
  if (c->fraction >= 0)
    fprintf(out, " %.3f |\n", c->fraction);
  else
    fputs(" - |\n", out);
}

/* The host's peaks measured in this run, beside the table's. */
static void print_peaks(const suite_report *r, FILE *out) {
  const suite_peaks *p = &r->peaks;
  const suite_meta *m = &r->meta;
  fprintf(out, "host peaks measured in this run: %.1f GFLOP/s f32, %.1f GFLOP/s f64 (%s); %.1f GB/s (%s)\n\n",
          p->gflops_f32, p->gflops_f64, p->fma_source, p->triad_gbps, p->triad_source);
  if (r->n_devices > 0 && !strcmp(r->devices[0].kind, "cpu") && r->devices[0].clock_mhz > 0 &&
      p->threads > 0 && m->flops_per_cycle_f32 > 0)
    fprintf(
        out,
        "measured FLOPs per cycle per thread at the %d MHz the CPU reports: f32 %.1f, f64 %.1f (table: %d, "
        "%d; the table's imply the cores ran at %.0f MHz)\n\n",
        (int)r->devices[0].clock_mhz, p->gflops_f32 * 1e3 / r->devices[0].clock_mhz / p->threads,
        p->gflops_f64 * 1e3 / r->devices[0].clock_mhz / p->threads, (int)m->flops_per_cycle_f32,
        (int)m->flops_per_cycle_f64, p->gflops_f32 * 1e3 / m->flops_per_cycle_f32 / p->threads);
}

void suite_print_markdown(const suite_report *r, FILE *out) {
  fprintf(out, "# loom-bench suite (Loom %s, %s sizes; %.0f s)\n\n", r->loom_version, r->profile,
          r->wall_seconds);
  suite_meta_print(&r->meta, out);
  fprintf(
      out,
      "Each case: at least %d timed runs of each side, alternately, in %d pass%s over the cases (each after "
      "a warm-up%s), until MAD / median is at most %.1f%% on each side, %g s are spent or %d runs were made. "
      "Times are medians; MAD: the median absolute deviation from the median, over the median.\n\n",
      (int)r->stop.min_samples, (int)r->passes, r->passes == 1 ? "" : "es",
      r->processes > 1 ? ", each in a process of its own" : "", 100 * r->stop.target, r->stop.budget_s,
      (int)r->stop.max_samples);
  print_peaks(r, out);
  fputs(
      "Ratio = library median / Loom median (above 1: Loom is faster). Rates count bytes read plus "
      "written.\n",
      out);
  for (int32_t i = 0; i < r->n_devices; i++) {
    const suite_device *d = &r->devices[i];
    fprintf(out, "\n## %s: %s (%s)\n\n", d->id, d->name, d->vendor);
    fprintf(out, "driver %s; runtime %s; %d compute units at %d MHz\n\n", d->driver[0] ? d->driver : "-",
            d->runtime[0] ? d->runtime : "-", (int)d->compute_units, (int)d->clock_mhz);
    fprintf(out, "peak (of peak divides by it): %.1f GFLOP/s f32 (%s); %.1f GB/s (%s)\n\n", d->peak_gflops,
            d->peak_gflops_source[0] ? d->peak_gflops_source : "unknown", d->peak_gbps,
            d->peak_gbps_source[0] ? d->peak_gbps_source : "unknown");
    if (d->spec_gflops > 0)
      fprintf(out, "table peak: %.1f GFLOP/s f32 (%s)\n\n", d->spec_gflops, d->spec_source);
    if (d->cl_gflops > 0)
      fprintf(out, "through OpenCL kernels of its own: FMA loop %.1f GFLOP/s f32, triad %.1f GB/s\n\n",
              d->cl_gflops, d->cl_gbps);
    else if (d->cl_why[0] && strcmp(d->cl_why, "not an OpenCL device"))
      fprintf(out, "through OpenCL kernels of its own: not measured (%s)\n\n", d->cl_why);
    fputs(
        "| case | dtype | size | Loom | runs | min | MAD | rate | library | library time | ratio | library "
        "MAD | of "
        "peak |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
        out);
    for (int32_t k = 0; k < d->n_cases; k++) print_case(out, &d->cases[k]);
  }
}

/* ---- JSON ------------------------------------------------------------------------------------------- */

static void kv_number(loom__json *j, const char *key, double v, bool known) {
  if (known)
    loom__json_kv_double(j, key, v);
  else
    loom__json_kv_null(j, key);
}

static void kv_text(loom__json *j, const char *key, const char *s) {
  if (s[0])
    loom__json_kv_string(j, key, s);
  else
    loom__json_kv_null(j, key);
}

/* A side's summary and its runs under `prefix` ("" for Loom's, "library_"). */
static void json_sample(loom__json *j, const char *prefix, const bench_sample *s, bool known) {
  char key[40];
  snprintf(key, sizeof key, "%ssamples", prefix);
  loom__json_kv_int64(j, key, known ? s->n : 0);
  snprintf(key, sizeof key, "%smin", prefix);
  kv_number(j, key, s->min, known);
  snprintf(key, sizeof key, "%smedian", prefix);
  kv_number(j, key, s->median, known);
  snprintf(key, sizeof key, "%smad", prefix);
  kv_number(j, key, s->mad, known);
  snprintf(key, sizeof key, "%sdispersion", prefix);
  kv_number(j, key, bench_sample_dispersion(s), known);
  snprintf(key, sizeof key, "%stimes", prefix);
  loom__json_key(j, key);
  loom__json_begin_array(j);
  for (int32_t i = 0; known && i < s->n; i++) loom__json_double(j, s->s[i]);
  loom__json_end_array(j);
}

static void json_case(loom__json *j, const suite_case *c) {
  bool ran = !c->error[0] && c->seconds > 0;
  loom__json_begin_object(j);
  loom__json_kv_string(j, "name", c->name);
  loom__json_kv_string(j, "size", c->size);
  loom__json_kv_string(j, "dtype", c->dtype);
  kv_number(j, "seconds", c->seconds, ran);
  json_sample(j, "", &c->loom, ran);
  if (ran && c->n_proc > 0) { /* how many of `times` (and of the paired side's) each process took */
    loom__json_key(j, "processes");
    loom__json_begin_array(j);
    for (int32_t i = 0; i < c->n_proc; i++) loom__json_int64(j, c->proc_n[i]);
    loom__json_end_array(j);
  }
  kv_number(j, "rate", c->rate, ran);
  kv_text(j, "unit", ran ? c->unit : "");
  loom__json_kv_double(j, "flops", c->flops);
  loom__json_kv_double(j, "bytes", c->bytes);
  kv_text(j, "library", c->library);
  kv_number(j, "library_seconds", c->library_seconds, ran && c->library[0]);
  json_sample(j, "library_", &c->lib, ran && c->library[0]);
  kv_number(j, "ratio", c->ratio, ran && c->library[0]);
  kv_text(j, "reason", c->library[0] ? "" : c->reason);
  kv_text(j, "witness", c->witness);
  json_sample(j, "witness_", &c->wit, ran && c->witness[0]);
  kv_number(j, "fraction_of_peak", c->fraction, ran && c->fraction >= 0);
  kv_text(j, "error", c->error);
  loom__json_end_object(j);
}

static void json_device(loom__json *j, const suite_device *d) {
  loom__json_begin_object(j);
  loom__json_kv_string(j, "id", d->id);
  loom__json_kv_string(j, "vendor", d->vendor);
  loom__json_kv_string(j, "name", d->name);
  loom__json_kv_string(j, "driver", d->driver);
  loom__json_kv_string(j, "runtime", d->runtime);
  loom__json_kv_string(j, "kind", d->kind);
  loom__json_kv_int64(j, "compute_units", d->compute_units);
  loom__json_kv_int64(j, "clock_mhz", d->clock_mhz);
  kv_number(j, "peak_gflops", d->peak_gflops, d->peak_gflops > 0);
  kv_text(j, "peak_gflops_source", d->peak_gflops_source);
  kv_number(j, "peak_gflops_f64", d->peak_gflops_f64, d->peak_gflops_f64 > 0);
  kv_number(j, "spec_gflops", d->spec_gflops, d->spec_gflops > 0);
  kv_number(j, "opencl_gflops", d->cl_gflops, d->cl_gflops > 0);
  kv_number(j, "opencl_gbps", d->cl_gbps, d->cl_gbps > 0);
  kv_text(j, "spec_gflops_source", d->spec_source);
  kv_number(j, "peak_gbps", d->peak_gbps, d->peak_gbps > 0);
  kv_text(j, "peak_gbps_source", d->peak_gbps_source);
  loom__json_key(j, "cases");
  loom__json_begin_array(j);
  for (int32_t k = 0; k < d->n_cases; k++) json_case(j, &d->cases[k]);
  loom__json_end_array(j);
  loom__json_end_object(j);
}

int suite_write_json(const suite_report *r, const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "loom-bench suite: cannot write %s\n", path);
    return 1;
  }
  loom__json j;
  loom__json_init(&j, f, true);
  loom__json_begin_object(&j);
  loom__json_kv_string(&j, "schema", "loom-bench-suite/2");
  loom__json_kv_string(&j, "loom_version", r->loom_version);
  suite_meta_json(&r->meta, &j);
  loom__json_kv_string(&j, "profile", r->profile);
  loom__json_kv_int64(&j, "reps", r->reps);
  loom__json_key(&j, "stop");
  loom__json_begin_object(&j);
  loom__json_kv_int64(&j, "min_samples", r->stop.min_samples);
  loom__json_kv_int64(&j, "max_samples", r->stop.max_samples);
  loom__json_kv_double(&j, "target", r->stop.target);
  loom__json_kv_double(&j, "budget_seconds", r->stop.budget_s);
  loom__json_kv_int64(&j, "passes", r->passes);
  loom__json_kv_int64(&j, "processes", r->processes > 0 ? r->processes : 1);
  loom__json_end_object(&j);
  loom__json_key(&j, "host_peaks");
  loom__json_begin_object(&j);
  kv_number(&j, "gflops_f32", r->peaks.gflops_f32, r->peaks.gflops_f32 > 0);
  kv_number(&j, "gflops_f64", r->peaks.gflops_f64, r->peaks.gflops_f64 > 0);
  kv_text(&j, "fma_source", r->peaks.fma_source);
  kv_number(&j, "triad_gbps", r->peaks.triad_gbps, r->peaks.triad_gbps > 0);
  kv_text(&j, "triad_source", r->peaks.triad_source);
  loom__json_kv_int64(&j, "threads", r->peaks.threads);
  loom__json_end_object(&j);
  loom__json_kv_double(&j, "wall_seconds", r->wall_seconds);
  loom__json_key(&j, "devices");
  loom__json_begin_array(&j);
  for (int32_t i = 0; i < r->n_devices; i++) json_device(&j, &r->devices[i]);
  loom__json_end_array(&j);
  loom__json_end_object(&j);
  if (loom__json_finish(&j) | fclose(f)) {
    fprintf(stderr, "loom-bench suite: writing %s failed\n", path);
    return 1;
  }
  return 0;
}
