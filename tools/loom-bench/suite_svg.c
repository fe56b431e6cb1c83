/* The suite's plot (suite.h, suite_write_svg): per device, a roofline of Loom's cases beside
 * the ratios to the vendor libraries, with a legend.
 *
 * The SVG is written here by hand rather than through a plotting library: the drawing is only
 * lines, circles and text on log scales, a C tool should not need Python and matplotlib (not
 * among the Debian packages scripts/install-deps.sh installs) to draw its own report, and SVG is
 * plain text a browser opens as it is.
 *
 * Issue 33 found the point labels overlapping into unreadable clusters: a point is now marked
 * by a number placed where it hits no other number and no point (the first free spot of rings
 * around it), and the numbers are keyed to their cases in a table under the plot. The ratios
 * sit on a log axis centred on 1, so one outlier no longer flattens every other bar. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "suite.h"

enum { PLOT_W = 520, PLOT_H = 300, BAR_X = 640, WIDTH = 1240, MARGIN = 60, KEY_COLS = 3, KEY_ROW = 13 };

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

static bool on_roofline(const suite_case *c) {
  return c->seconds > 0 && c->flops > 0 && c->bytes > 0 && c->kind != SUITE_LATENCY;
}

/* ---- the roofline ------------------------------------------------------------------------------- */

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
  double xmin = 1e30, xmax = 0, ymin = 1e30, ymax = fmax(d->peak_gflops, d->spec_gflops);
  for (int32_t k = 0; k < d->n_cases; k++) {
    const suite_case *c = &d->cases[k];
    if (!on_roofline(c)) continue;
    double x = c->flops / c->bytes, y = c->flops / c->seconds * 1e-9;
    xmin = fmin(xmin, x), xmax = fmax(xmax, x), ymin = fmin(ymin, y), ymax = fmax(ymax, y);
  }
  if (xmax <= 0) xmin = 0.1, xmax = 10, ymin = 0.1, ymax = fmax(ymax, 10);
  if (d->peak_gbps > 0 && d->peak_gflops > 0) xmax = fmax(xmax, 2 * d->peak_gflops / d->peak_gbps);
  return (frame){
      floor(log10(xmin)), ceil(log10(xmax)), floor(log10(ymin)), ceil(log10(ymax * 1.5)), 80, top + 30};
}

static void draw_roofs(FILE *f, const suite_device *d, const frame *fr) {
  double x0 = pow(10, fr->lx0), x1 = pow(10, fr->lx1);
  if (d->spec_gflops > 0) /* the table's, dashed: what the core could issue at its nominal clock */
    fprintf(f,
            "<line class=\"table-peak\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#888\" "
            "stroke-dasharray=\"6 4\"/>\n",
            fx(fr, x0), fy(fr, d->spec_gflops), fx(fr, x1), fy(fr, d->spec_gflops));
  if (d->peak_gflops <= 0) return;
  /* grouped so a browser's DOM (tests/tools/check_bench_svg_browser.cmake) can count the roofs */
  fputs("<g class=\"roofline\">\n", f);
  double ridge = x0;
  char label[64];
  if (d->peak_gbps > 0) {
    ridge = fmin(fmax(d->peak_gflops / d->peak_gbps, x0), x1);
    double xs = fmax(x0, pow(10, fr->ly0) / d->peak_gbps); /* where the bandwidth roof enters the box */
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#c33\" stroke-width=\"2\"/>\n",
            fx(fr, xs), fy(fr, d->peak_gbps * xs), fx(fr, ridge), fy(fr, d->peak_gbps * ridge));
    snprintf(label, sizeof label, "%.1f GB/s", d->peak_gbps);
    svg_text(f, fx(fr, xs) + 4, fy(fr, d->peak_gbps * xs) - 6, "start", 11, label);
  }
  fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#c33\" stroke-width=\"2\"/>\n",
          fx(fr, ridge), fy(fr, d->peak_gflops), fx(fr, x1), fy(fr, d->peak_gflops));
  snprintf(label, sizeof label, "%.1f GFLOP/s f32", d->peak_gflops);
  svg_text(f, fr->ox + PLOT_W - 4, fy(fr, d->peak_gflops) - 6, "end", 11, label);
  fputs("</g>\n", f);
}

/* ---- numbers placed without overlap ------------------------------------------------------------ */

typedef struct box {
  double x0, y0, x1, y1;
} box;

static bool overlaps(const box *a, const box *b) {
  return a->x0 < b->x1 && b->x0 < a->x1 && a->y0 < b->y1 && b->y0 < a->y1;
}

/* The box of a number of `len` digits at font size 9 whose anchor is (x, y): text-anchor start. */
static box number_box(double x, double y, size_t len) {
  return (box){x - 1, y - 8, x + 5.5 * (double)len + 1, y + 2};
}

/* Where the number of point p goes: the first spot on rings around it that stays inside the
 * plot and hits neither a placed number nor a point. With no free spot the first ring's first
 * is taken (a cluster of more points than the rings hold). */
static box place_number(const box *taken, int32_t n_taken, const box *points, int32_t n_points, double px,
                        double py, size_t len, const frame *fr) {
  static const double dirs[8][2] = {{1, 0}, {0, -1}, {-1, 0}, {0, 1}, {1, -1}, {-1, -1}, {-1, 1}, {1, 1}};
  double w = 5.5 * (double)len;
  for (int ring = 1; ring <= 4; ring++)
    for (int k = 0; k < 8; k++) {
      double r = 3 + 5 * ring;
      double cx = px + dirs[k][0] * (r + w / 2), cy = py + dirs[k][1] * r;
      box b = number_box(cx - w / 2, cy + 4, len);
      bool ok = b.x0 >= fr->ox && b.x1 <= fr->ox + PLOT_W && b.y0 >= fr->oy && b.y1 <= fr->oy + PLOT_H;
      for (int32_t i = 0; ok && i < n_taken; i++) ok = !overlaps(&b, &taken[i]);
      for (int32_t i = 0; ok && i < n_points; i++) ok = !overlaps(&b, &points[i]);
      if (ok) return b;
    }
  return number_box(px + 6, py + 4, len);
}

/* Points numbered 1.. in case order; returns how many. */
static int32_t draw_points(FILE *f, const suite_device *d, const frame *fr) {
  int32_t n = 0;
  box *points = calloc((size_t)(d->n_cases ? d->n_cases : 1), sizeof *points);
  box *taken = calloc((size_t)(d->n_cases ? d->n_cases : 1), sizeof *taken);
  if (!points || !taken) {
    free(points);
    free(taken);
    return 0;
  }
  for (int32_t k = 0; k < d->n_cases; k++)
    if (on_roofline(&d->cases[k])) {
      double x = fx(fr, d->cases[k].flops / d->cases[k].bytes);
      double y = fy(fr, d->cases[k].flops / d->cases[k].seconds * 1e-9);
      points[n++] = (box){x - 4, y - 4, x + 4, y + 4};
      fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"#36c\"/>\n", x, y);
    }
  fputs("<g class=\"point-numbers\">\n", f);
  for (int32_t i = 0; i < n; i++) {
    char label[16];
    snprintf(label, sizeof label, "%d", (int)(i + 1));
    taken[i] = place_number(taken, i, points, n, (points[i].x0 + points[i].x1) / 2,
                            (points[i].y0 + points[i].y1) / 2, strlen(label), fr);
    svg_text(f, taken[i].x0 + 1, taken[i].y1 - 2, "start", 9, label);
  }
  fputs("</g>\n", f);
  free(points);
  free(taken);
  return n;
}

/* The table under the plot: each number and its case, KEY_COLS columns. */
static void draw_key(FILE *f, const suite_device *d, double y0) {
  fputs("<g class=\"point-key\">\n", f);
  int32_t i = 0, n = 0;
  for (int32_t k = 0; k < d->n_cases; k++) n += on_roofline(&d->cases[k]);
  int32_t rows = (n + KEY_COLS - 1) / KEY_COLS;
  for (int32_t k = 0; k < d->n_cases; k++) {
    const suite_case *c = &d->cases[k];
    if (!on_roofline(c)) continue;
    char label[120];
    snprintf(label, sizeof label, "%d  %s %s %s", (int)(i + 1), c->name, c->dtype, c->size);
    svg_text(f, 40 + (double)(i / rows) * 200, y0 + (double)(i % rows) * KEY_ROW, "start", 10, label);
    i++;
  }
  fputs("</g>\n", f);
}

/* ---- the ratios --------------------------------------------------------------------------------- */

/* A log axis of ratios over [1/range, range], 1 in the middle. */
static double rx(double ratio, double x0, double w, double range) {
  double l = log10(fmin(fmax(ratio, 1 / range), range)) / log10(range);
  return x0 + w / 2 + l * w / 2;
}

static double ratio_range(const suite_device *d) {
  double most = 2;
  for (int32_t k = 0; k < d->n_cases; k++) {
    double r = d->cases[k].ratio;
    if (r > 0) most = fmax(most, fmax(r, 1 / r) * 1.25);
  }
  return fmin(most, 1e4);
}

static void ratio_axis(FILE *f, double x0, double w, double range, double top, double bottom) {
  static const double ticks[] = {1e-4, 1e-3, 0.01, 0.1, 0.5, 1, 2, 10, 100, 1e3, 1e4};
  for (size_t i = 0; i < sizeof ticks / sizeof ticks[0]; i++) {
    if (ticks[i] < 1 / range || ticks[i] > range) continue;
    double x = rx(ticks[i], x0, w, range);
    char label[16];
    snprintf(label, sizeof label, "%g", ticks[i]);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"%s/>\n", x, top, x, bottom,
            ticks[i] == 1 ? "#000" : "#ddd", ticks[i] == 1 ? " stroke-dasharray=\"4 3\"" : "");
    svg_text(f, x, bottom + 12, "middle", 10, label);
  }
}

/* Bars of library / Loom per case that has a library, from 1 on a log axis; returns the bars'
 * bottom. */
static double draw_ratios(FILE *f, const suite_device *d, double top) {
  int32_t n = 0;
  for (int32_t k = 0; k < d->n_cases; k++) n += d->cases[k].ratio > 0;
  svg_text(f, BAR_X + 270, top + 20, "middle", 12,
           "library time / Loom time, log scale (above 1: Loom faster)");
  if (n == 0) {
    svg_text(f, BAR_X + 270, top + 60, "middle", 11, "no case with a library side");
    return top + 60;
  }
  double x0 = BAR_X + 200, w = WIDTH - MARGIN - x0 - 30, h = fmax(13, fmin(22, (PLOT_H - 10.0) / n));
  double range = ratio_range(d), y = top + 34;
  ratio_axis(f, x0, w, range, top + 30, top + 34 + n * h + 4);
  fputs("<g class=\"ratios\">\n", f);
  for (int32_t k = 0; k < d->n_cases; k++) {
    const suite_case *c = &d->cases[k];
    if (c->ratio <= 0) continue;
    char label[160];
    snprintf(label, sizeof label, "%s %s %s (%s)", c->name, c->dtype, c->size, c->library);
    svg_text(f, x0 - 6, y + h * 0.7, "end", 10, label);
    double one = rx(1, x0, w, range), end = rx(c->ratio, x0, w, range);
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>\n", fmin(one, end),
            y, fmax(fabs(end - one), 1), h * 0.8, c->ratio >= 1 ? "#3a3" : "#d83");
    snprintf(label, sizeof label, "%.2f", c->ratio);
    /* right of the bar's end, or of the line at 1 for a bar that runs left: never over the
     * case's name, whatever the bar's length */
    svg_text(f, fmax(end, one) + 4, y + h * 0.7, "start", 10, label);
    y += h;
  }
  fputs("</g>\n", f);
  return y + 16;
}

/* ---- the legend and the panels ------------------------------------------------------------------ */

static void legend_item(FILE *f, double x, double y, const char *shape, const char *text) {
  fprintf(f, shape, x, y);
  svg_text(f, x + 22, y + 4, "start", 10, text);
}

static void draw_legend(FILE *f, double y) {
  fputs("<g class=\"legend\">\n", f);
  legend_item(f, 40, y, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"#36c\"/>\n",
              "a case of Loom (its number: the key below)");
  legend_item(f, 290, y, "<path d=\"M%.1f %.1fh16\" stroke=\"#c33\" stroke-width=\"2\"/>\n",
              "peaks measured in this run");
  legend_item(f, 470, y, "<path d=\"M%.1f %.1fh16\" stroke=\"#888\" stroke-dasharray=\"6 4\"/>\n",
              "table peak (clock x FLOPs/cycle)");
  legend_item(
      f, 690, y,
      "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"8\" fill=\"#3a3\" transform=\"translate(0 -4)\"/>\n",
      "Loom faster than the library");
  legend_item(
      f, 890, y,
      "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"8\" fill=\"#d83\" transform=\"translate(0 -4)\"/>\n",
      "Loom slower");
  legend_item(f, 1010, y, "<path d=\"M%.1f %.1fh16\" stroke=\"#000\" stroke-dasharray=\"4 3\"/>\n",
              "ratio 1");
  fputs("</g>\n", f);
}

/* The panel's height: the taller of the roofline and the bars, the legend and the key. */
static double panel_height(const suite_device *d) {
  int32_t bars = 0, points = 0;
  for (int32_t k = 0; k < d->n_cases; k++) bars += d->cases[k].ratio > 0, points += on_roofline(&d->cases[k]);
  double body = fmax(PLOT_H + 45, 34 + bars * fmax(13, fmin(22, (PLOT_H - 10.0) / (bars ? bars : 1))) + 30);
  return 30 + body + 24 + ((points + KEY_COLS - 1) / KEY_COLS) * KEY_ROW + 16;
}

static void draw_panel(FILE *f, const suite_device *d, double top) {
  char title[300];
  snprintf(title, sizeof title, "%s: %s (%s), roofline: Loom's cases", d->id, d->name, d->vendor);
  /* device ids are [a-z0-9]+ (loom_device_id), safe in an attribute as they are */
  fprintf(f, "<g class=\"device\" id=\"device-%s\">\n", d->id);
  svg_text(f, 20, top + 16, "start", 14, title);
  frame fr = roofline_frame(d, top);
  frame_axes(f, &fr);
  draw_roofs(f, d, &fr);
  draw_points(f, d, &fr);
  double bottom = fmax(fr.oy + PLOT_H + 45, draw_ratios(f, d, top));
  draw_legend(f, bottom + 6);
  draw_key(f, d, bottom + 30);
  fputs("</g>\n", f);
}

int suite_write_svg(const suite_report *r, const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "loom-bench suite: cannot write %s\n", path);
    return 1;
  }
  double height = 20;
  for (int32_t i = 0; i < r->n_devices; i++) height += panel_height(&r->devices[i]);
  fprintf(f,
          "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
          "font-family=\"sans-serif\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
          WIDTH, (int)ceil(height), WIDTH, (int)ceil(height));
  double top = 10;
  for (int32_t i = 0; i < r->n_devices; i++) {
    draw_panel(f, &r->devices[i], top);
    top += panel_height(&r->devices[i]);
  }
  fputs("</svg>\n", f);
  if (fclose(f)) {
    fprintf(stderr, "loom-bench suite: writing %s failed\n", path);
    return 1;
  }
  return 0;
}
