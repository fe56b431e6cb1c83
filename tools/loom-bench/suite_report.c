/* The suite's reports (suite.h): a Markdown table, JSON (its schema in docs/bench.md) and an
 * SVG of a roofline per device beside the ratios to the vendor libraries.
 *
 * The SVG is written here by hand rather than through a plotting library: the drawing is only
 * lines, circles and text on two log scales and a linear one, a C tool should not need Python
 * and matplotlib (not among the Debian packages scripts/install-deps.sh installs) to draw its
 * own report, and SVG is plain text a browser opens as it is. */
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

static void print_case(FILE *out, const suite_case *c) {
  fprintf(out, "| %s | %s | %s |", c->name, c->dtype, c->size);
  print_seconds(out, c->seconds);
  if (c->error[0]) {
    fprintf(out, " failed: %s | | | | |\n", c->error);
    return;
  }
  fprintf(out, " %.3g %s |", c->rate, c->unit);
  if (c->library[0]) {
    fprintf(out, " %s |", c->library);
    print_seconds(out, c->library_seconds);
    fprintf(out, " %.2f |", c->ratio);
  } else {
    fprintf(out, " - | - | - (%s) |", c->reason);
  }
  if (c->fraction >= 0)
    fprintf(out, " %.3f |\n", c->fraction);
  else
    fputs(" - |\n", out);
}

void suite_print_markdown(const suite_report *r, FILE *out) {
  fprintf(out, "# loom-bench suite (Loom %s, %s sizes, best of %d after a warm-up; %.0f s)\n\n",
          r->loom_version, r->profile, (int)r->reps, r->wall_seconds);
  fputs("Ratio = library time / Loom time (above 1: Loom is faster). Rates count bytes read plus written.\n",
        out);
  for (int32_t i = 0; i < r->n_devices; i++) {
    const suite_device *d = &r->devices[i];
    fprintf(out, "\n## %s: %s (%s)\n\n", d->id, d->name, d->vendor);
    fprintf(out, "driver %s; runtime %s; %d compute units at %d MHz\n\n", d->driver[0] ? d->driver : "-",
            d->runtime[0] ? d->runtime : "-", (int)d->compute_units, (int)d->clock_mhz);
    fprintf(out, "peak %.1f GFLOP/s f32 (%s); %.1f GB/s (%s)\n\n", d->peak_gflops,
            d->peak_gflops_source[0] ? d->peak_gflops_source : "unknown", d->peak_gbps,
            d->peak_gbps_source[0] ? d->peak_gbps_source : "unknown");
    fputs(
        "| case | dtype | size | Loom | rate | library | library time | ratio | of peak |\n"
        "|---|---|---|---|---|---|---|---|---|\n",
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

static void json_case(loom__json *j, const suite_case *c) {
  bool ran = !c->error[0] && c->seconds > 0;
  loom__json_begin_object(j);
  loom__json_kv_string(j, "name", c->name);
  loom__json_kv_string(j, "size", c->size);
  loom__json_kv_string(j, "dtype", c->dtype);
  kv_number(j, "seconds", c->seconds, ran);
  kv_number(j, "rate", c->rate, ran);
  kv_text(j, "unit", ran ? c->unit : "");
  loom__json_kv_double(j, "flops", c->flops);
  loom__json_kv_double(j, "bytes", c->bytes);
  kv_text(j, "library", c->library);
  kv_number(j, "library_seconds", c->library_seconds, ran && c->library[0]);
  kv_number(j, "ratio", c->ratio, ran && c->library[0]);
  kv_text(j, "reason", c->library[0] ? "" : c->reason);
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
  loom__json_kv_string(&j, "schema", "loom-bench-suite/1");
  loom__json_kv_string(&j, "loom_version", r->loom_version);
  loom__json_kv_string(&j, "profile", r->profile);
  loom__json_kv_int64(&j, "reps", r->reps);
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

/* ---- SVG ---------------------------------------------------------------------------------------------- */

enum { PANEL_H = 380, PLOT_W = 520, PLOT_H = 300, BAR_X = 640, WIDTH = 1240, MARGIN = 60 };

static void svg_text(FILE *f, double x, double y, const char *anchor, int size, const char *s) {
  fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" font-size=\"%d\">", x, y, anchor, size);
  for (; *s; s++) {
    if (*s == '<')
      fputs("&lt;", f);
    else if (*s == '>')
      fputs("&gt;", f);
    else if (*s == '&')
      fputs("&amp;", f);
    else if ((unsigned char)*s >= 0x20)
      fputc(*s, f);
  }
  fputs("</text>\n", f);
}

/* A log-log frame: decades of x in [x0, x1] and y in [y0, y1] onto the plot's box at (ox, oy). */
typedef struct frame {
  double lx0, lx1, ly0, ly1, ox, oy;
} frame;

static double fx(const frame *fr, double x) {
  return fr->ox + (log10(x) - fr->lx0) / (fr->lx1 - fr->lx0) * PLOT_W;
}

static double fy(const frame *fr, double y) {
  return fr->oy + PLOT_H - (log10(y) - fr->ly0) / (fr->ly1 - fr->ly0) * PLOT_H;
}

static void frame_axes(FILE *f, const frame *fr) {
  fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#444\"/>\n",
          fr->ox, fr->oy, PLOT_W, PLOT_H);
  char label[32];
  for (double e = ceil(fr->lx0); e <= fr->lx1; e++) {
    snprintf(label, sizeof label, "%g", pow(10, e));
    svg_text(f, fx(fr, pow(10, e)), fr->oy + PLOT_H + 16, "middle", 11, label);
  }
  for (double e = ceil(fr->ly0); e <= fr->ly1; e++) {
    double y = fy(fr, pow(10, e));
    snprintf(label, sizeof label, "%g", pow(10, e));
    svg_text(f, fr->ox - 6, y + 4, "end", 11, label);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", fr->ox, y,
            fr->ox + PLOT_W, y);
  }
  svg_text(f, fr->ox + PLOT_W / 2.0, fr->oy + PLOT_H + 34, "middle", 12, "arithmetic intensity (FLOP/byte)");
  fprintf(f,
          "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\" transform=\"rotate(-90 %.1f "
          "%.1f)\">GFLOP/s</text>\n",
          fr->ox - 44, fr->oy + PLOT_H / 2.0, fr->ox - 44, fr->oy + PLOT_H / 2.0);
}

/* The decades the device's points and roofs span. */
static frame roofline_frame(const suite_device *d, double top) {
  double xmin = 1e30, xmax = 0, ymin = 1e30, ymax = d->peak_gflops;
  for (int32_t k = 0; k < d->n_cases; k++) {
    const suite_case *c = &d->cases[k];
    if (c->seconds <= 0 || c->flops <= 0 || c->kind == SUITE_LATENCY) continue;
    double x = c->flops / c->bytes, y = c->flops / c->seconds * 1e-9;
    xmin = fmin(xmin, x), xmax = fmax(xmax, x), ymin = fmin(ymin, y), ymax = fmax(ymax, y);
  }
  if (xmax <= 0) xmin = 0.1, xmax = 10, ymin = 0.1, ymax = 10;
  if (d->peak_gbps > 0 && d->peak_gflops > 0) xmax = fmax(xmax, 2 * d->peak_gflops / d->peak_gbps);
  return (frame){
      floor(log10(xmin)), ceil(log10(xmax)), floor(log10(ymin)), ceil(log10(ymax * 1.5)), 80, top + 30};
}

static void draw_roofs(FILE *f, const suite_device *d, const frame *fr) {
  if (d->peak_gflops <= 0) return;
  /* grouped so a browser's DOM (tests/tools/check_bench_svg_browser.cmake) can count the roofs */
  fputs("<g class=\"roofline\">\n", f);
  double x0 = pow(10, fr->lx0), x1 = pow(10, fr->lx1), ridge = x1;
  if (d->peak_gbps > 0) {
    ridge = fmin(fmax(d->peak_gflops / d->peak_gbps, x0), x1);
    double xs = fmax(x0, pow(10, fr->ly0) / d->peak_gbps); /* where the bandwidth roof enters the box */
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#c33\" stroke-width=\"2\"/>\n",
            fx(fr, xs), fy(fr, d->peak_gbps * xs), fx(fr, ridge), fy(fr, d->peak_gbps * ridge));
    char label[64];
    snprintf(label, sizeof label, "%.1f GB/s", d->peak_gbps);
    svg_text(f, fx(fr, xs) + 4, fy(fr, d->peak_gbps * xs) - 6, "start", 11, label);
  } else {
    ridge = x0;
  }
  fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#c33\" stroke-width=\"2\"/>\n",
          fx(fr, ridge), fy(fr, d->peak_gflops), fx(fr, x1), fy(fr, d->peak_gflops));
  char label[64];
  snprintf(label, sizeof label, "%.1f GFLOP/s f32", d->peak_gflops);
  svg_text(f, fr->ox + PLOT_W - 4, fy(fr, d->peak_gflops) - 6, "end", 11, label);
  fputs("</g>\n", f);
}

static void draw_points(FILE *f, const suite_device *d, const frame *fr) {
  for (int32_t k = 0; k < d->n_cases; k++) {
    const suite_case *c = &d->cases[k];
    if (c->seconds <= 0 || c->flops <= 0 || c->kind == SUITE_LATENCY) continue;
    double x = fx(fr, c->flops / c->bytes), y = fy(fr, c->flops / c->seconds * 1e-9);
    fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"#36c\"/>\n", x, y);
    char label[96];
    snprintf(label, sizeof label, "%s %s %s", c->name, c->dtype, c->size);
    /* labels of points in the right part of the box run leftwards, so they stay inside it */
    bool right = x > fr->ox + 0.6 * PLOT_W;
    svg_text(f, right ? x - 6 : x + 6, y + 4 - 9 * (k % 2), right ? "end" : "start", 9, label);
  }
}

/* Bars of library / Loom per case that has a library, a line at 1. */
static void draw_ratios(FILE *f, const suite_device *d, double top) {
  int32_t n = 0;
  double most = 2;
  for (int32_t k = 0; k < d->n_cases; k++)
    if (d->cases[k].ratio > 0) n++, most = fmax(most, d->cases[k].ratio);
  most = fmin(most, 20);
  svg_text(f, BAR_X + 260, top + 20, "middle", 12, "library time / Loom time (above 1: Loom faster)");
  if (n == 0) {
    svg_text(f, BAR_X + 260, top + 60, "middle", 11, "no case with a library side");
    return;
  }
  double x0 = BAR_X + 190, w = WIDTH - MARGIN - x0, h = fmin(22, (PLOT_H - 10.0) / n);
  double y = top + 34;
  for (int32_t k = 0; k < d->n_cases; k++) {
    const suite_case *c = &d->cases[k];
    if (c->ratio <= 0) continue;
    char label[160];
    snprintf(label, sizeof label, "%s %s %s (%s)", c->name, c->dtype, c->size, c->library);
    svg_text(f, x0 - 6, y + h * 0.7, "end", 10, label);
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>\n", x0, y,
            fmin(c->ratio, most) / most * w, h * 0.8, c->ratio >= 1 ? "#3a3" : "#d83");
    snprintf(label, sizeof label, "%.2f", c->ratio);
    svg_text(f, x0 + fmin(c->ratio, most) / most * w + 4, y + h * 0.7, "start", 10, label);
    y += h;
  }
  fprintf(
      f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\" stroke-dasharray=\"4 3\"/>\n",
      x0 + w / most, top + 30, x0 + w / most, y + 4);
}

int suite_write_svg(const suite_report *r, const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "loom-bench suite: cannot write %s\n", path);
    return 1;
  }
  int height = PANEL_H * (r->n_devices ? r->n_devices : 1) + 20;
  fprintf(f,
          "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
          "font-family=\"sans-serif\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
          WIDTH, height, WIDTH, height);
  for (int32_t i = 0; i < r->n_devices; i++) {
    const suite_device *d = &r->devices[i];
    double top = 10 + (double)i * PANEL_H;
    char title[300];
    snprintf(title, sizeof title, "%s: %s (%s), roofline: Loom's cases", d->id, d->name, d->vendor);
    /* device ids are [a-z0-9]+ (loom_device_id), safe in an attribute as they are */
    fprintf(f, "<g class=\"device\" id=\"device-%s\">\n", d->id);
    svg_text(f, 20, top + 16, "start", 14, title);
    frame fr = roofline_frame(d, top);
    frame_axes(f, &fr);
    draw_roofs(f, d, &fr);
    draw_points(f, d, &fr);
    draw_ratios(f, d, top);
    fputs("</g>\n", f);
  }
  fputs("</svg>\n", f);
  if (fclose(f)) {
    fprintf(stderr, "loom-bench suite: writing %s failed\n", path);
    return 1;
  }
  return 0;
}
