#include "plot.h"

#include <math.h>
#include <string.h>

#include "html.h"

/* One panel's frame: the SVG canvas and the plotting area inside its margins. */
enum { W = 560, H = 290, ML = 64, MT = 30, MB = 46 };
#define FONT "font-family=\"sans-serif\" font-size=\"11\""
#define C_BEFORE "#1f77b4"
#define C_AFTER "#e8710a"
#define C_LUT "#9a9a9a"

typedef struct frame {
    double x0, y0, w, h; /* plotting area: left, top, width, height */
} frame;

void hq_plot_rebin(const uint64_t *hist, uint32_t levels, uint64_t *out)
{
    const uint32_t n = hq_plot_nbins(levels), per = levels / n;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t s = 0;
        for (uint32_t k = 0; k < per; k++)
            s += hist[(size_t)i * per + k];
        out[i] = s;
    }
}

/* A step of 1, 2 or 5 times a power of ten that cuts span into about `want` parts. */
static double nice_step(double span, int want)
{
    if (span <= 0)
        return 1;
    const double raw = span / want, mag = pow(10, floor(log10(raw))), r = raw / mag;
    return (r <= 1 ? 1 : r <= 2 ? 2 : r <= 5 ? 5 : 10) * mag;
}

/* Counts as a person reads them: 950, 12k, 3.4M, 1.2G. */
static void fmt_count(double v, char *buf, size_t len)
{
    static const char *const SUFFIX[] = {"", "k", "M", "G", "T", "P"};
    int k = 0;
    while (v >= 1000 && k < 5) {
        v /= 1000;
        k++;
    }
    if (k == 0 || v >= 100 || v == floor(v))
        snprintf(buf, len, "%.0f%s", v, SUFFIX[k]);
    else
        snprintf(buf, len, "%.1f%s", v, SUFFIX[k]);
}

static void open_svg(FILE *f, frame *fr, int right_axis, const char *title)
{
    fr->x0 = ML;
    fr->y0 = MT;
    fr->w = W - ML - (right_axis ? 52 : 16);
    fr->h = H - MT - MB;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "role=\"img\" aria-label=\"", W, H, W, H);
    hq_html_put(f, title);
    fprintf(f, "\">\n<rect width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n", W, H);
    fprintf(f, "<text x=\"%g\" y=\"18\" " FONT " font-size=\"13\" font-weight=\"bold\">", fr->x0);
    hq_html_put(f, title);
    fputs("</text>\n", f);
}

static void close_frame(FILE *f, const frame *fr)
{
    fprintf(f, "<rect x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" fill=\"none\" stroke=\"#444\"/>\n", fr->x0, fr->y0,
            fr->w, fr->h);
    fputs("</svg>\n", f);
}

/* The first tick of an axis whose level 0 stands for the value level0: the smallest multiple of
 * step at or above level0, so that signed data gets ticks at round values of its own (0 among them)
 * rather than at round offsets. */
static double first_tick(int32_t level0, double step)
{
    return ceil(level0 / step) * step;
}

/* The x axis over input levels 0..levels-1, labelled with the values level0..level0+levels-1 they
 * stand for, ticks at the centres of their levels. */
static void x_axis(FILE *f, const frame *fr, uint32_t levels, int32_t level0, const char *label)
{
    const double top = (double)level0 + levels - 1, step = nice_step(levels - 1, 6);
    for (double t = first_tick(level0, step); t <= top + 1e-9; t += step) {
        const double x = fr->x0 + (t - level0 + 0.5) * fr->w / levels;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%g\" x2=\"%.1f\" y2=\"%g\" stroke=\"#444\"/>", x, fr->y0 + fr->h, x,
                fr->y0 + fr->h + 4);
        fprintf(f, "<text x=\"%.1f\" y=\"%g\" text-anchor=\"middle\" " FONT ">%.0f</text>\n", x, fr->y0 + fr->h + 16, t);
    }
    fprintf(f, "<text x=\"%g\" y=\"%d\" text-anchor=\"middle\" " FONT ">%s</text>\n", fr->x0 + fr->w / 2, H - 8, label);
}

/* A horizontal grid line with its value at the left (or right) edge. */
static void y_tick(FILE *f, const frame *fr, double y, const char *text, int right)
{
    fprintf(f, "<line x1=\"%g\" y1=\"%.1f\" x2=\"%g\" y2=\"%.1f\" stroke=\"#ddd\"/>", fr->x0, y, fr->x0 + fr->w, y);
    if (right)
        fprintf(f, "<text x=\"%g\" y=\"%.1f\" " FONT ">%s</text>\n", fr->x0 + fr->w + 5, y + 4, text);
    else
        fprintf(f, "<text x=\"%g\" y=\"%.1f\" text-anchor=\"end\" " FONT ">%s</text>\n", fr->x0 - 5, y + 4, text);
}

static void y_label(FILE *f, const frame *fr, const char *label, int right)
{
    const double x = right ? W - 6 : 13, y = fr->y0 + fr->h / 2;
    fprintf(f, "<text x=\"%g\" y=\"%g\" transform=\"rotate(-90 %g %g)\" text-anchor=\"middle\" " FONT ">%s</text>\n",
            x, y, x, y, label);
}

/* Legend rows at the top right (bottom = 0) or bottom right (bottom = rows in the legend) corner,
 * on a white box so that bars or curves under it do not hide it. */
static void legend(FILE *f, const frame *fr, int row, int bottom, const char *color, const char *dash, const char *text)
{
    const double x = fr->x0 + fr->w - 190;
    const double first = bottom ? fr->y0 + fr->h - 8 - 15 * (bottom - 1) : fr->y0 + 16;
    const double y = first + 15 * row;
    if (row == 0)
        fprintf(f, "<rect x=\"%g\" y=\"%g\" width=\"184\" height=\"%d\" fill=\"#ffffff\" fill-opacity=\"0.85\"/>",
                x - 6, first - 13, 15 * (bottom ? bottom : 2) + 4);
    fprintf(f, "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"%s\" stroke-width=\"%s\"%s%s%s/>", x, y - 4,
            x + 22, y - 4, color, dash ? "2" : "8", dash ? " stroke-dasharray=\"" : "", dash ? dash : "",
            dash ? "\"" : "");
    fprintf(f, "<text x=\"%g\" y=\"%g\" " FONT ">", x + 28, y);
    hq_html_put(f, text);
    fputs("</text>\n", f);
}

/* The count scale: where a count lands between 0 (bottom) and 1 (top). */
typedef struct scale {
    int log;
    double top; /* the count at the top of the axis */
} scale;

static double scale_pos(const scale *s, double c)
{
    if (s->top <= 0)
        return 0;
    return s->log ? log10(1 + c) / log10(1 + s->top) : c / s->top;
}

static scale count_scale(FILE *f, const frame *fr, uint64_t maxc, int log_scale)
{
    scale s = {log_scale, 1};
    char buf[32];
    if (log_scale) {
        int dec = 0;
        while (pow(10, dec) < (double)maxc)
            dec++;
        s.top = pow(10, dec < 1 ? 1 : dec);
        const int every = dec > 8 ? 2 : 1;
        y_tick(f, fr, fr->y0 + fr->h, "0", 0);
        for (int k = 0; k <= dec; k += every) {
            fmt_count(pow(10, k), buf, sizeof buf);
            y_tick(f, fr, fr->y0 + fr->h * (1 - scale_pos(&s, pow(10, k))), buf, 0);
        }
        y_label(f, fr, "pixels (log scale)", 0);
        return s;
    }
    const double step = nice_step(maxc ? (double)maxc : 1, 5);
    s.top = ceil((maxc ? (double)maxc : 1) / step) * step;
    for (double t = 0; t <= s.top + step / 2; t += step) {
        fmt_count(t, buf, sizeof buf);
        y_tick(f, fr, fr->y0 + fr->h * (1 - t / s.top), buf, 0);
    }
    y_label(f, fr, "pixels", 0);
    return s;
}

static void bars(FILE *f, const frame *fr, const scale *s, const uint64_t *v, uint32_t n, const char *color)
{
    fprintf(f, "<g fill=\"%s\" fill-opacity=\"0.55\">", color);
    const double bw = fr->w / n;
    for (uint32_t i = 0; i < n; i++) {
        if (!v[i])
            continue;
        const double h = fr->h * scale_pos(s, (double)v[i]);
        fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\"/>", fr->x0 + i * bw,
                fr->y0 + fr->h - h, bw, h);
    }
    fputs("</g>\n", f);
}

void hq_plot_histograms(FILE *f, const uint64_t *before, const uint64_t *after, uint32_t n, uint32_t levels,
                        int32_t level0, int log_scale, const char *title, const char *after_label)
{
    frame fr;
    open_svg(f, &fr, 0, title);
    uint64_t maxc = 0;
    for (uint32_t i = 0; i < n; i++) {
        maxc = before[i] > maxc ? before[i] : maxc;
        maxc = after[i] > maxc ? after[i] : maxc;
    }
    const scale s = count_scale(f, &fr, maxc, log_scale);
    bars(f, &fr, &s, before, n, C_BEFORE);
    bars(f, &fr, &s, after, n, C_AFTER);
    char xl[64];
    if (n < levels)
        snprintf(xl, sizeof xl, "level (bars of %u levels)", levels / n);
    else
        snprintf(xl, sizeof xl, "level");
    x_axis(f, &fr, levels, level0, xl);
    legend(f, &fr, 0, 0, C_BEFORE, NULL, "before");
    legend(f, &fr, 1, 0, C_AFTER, NULL, after_label);
    close_frame(f, &fr);
}

/* A polyline through (level, value(level)) at most ~512 points, value in 0..1 of the axis. */
typedef double (*curve_fn)(const void *ctx, uint32_t v);

/* width: the stroke's; dash: a dash pattern or NULL; attrs: more attributes, written as they are
 * (NULL: none). */
static void polyline(FILE *f, const frame *fr, uint32_t levels, curve_fn fn, const void *ctx, const char *color,
                     const char *width, const char *dash, const char *attrs)
{
    const uint32_t step = levels > 512 ? levels / 512 : 1;
    fprintf(f, "<polyline%s%s fill=\"none\" stroke=\"%s\" stroke-width=\"%s\"%s%s%s points=\"", attrs ? " " : "",
            attrs ? attrs : "", color, width, dash ? " stroke-dasharray=\"" : "", dash ? dash : "", dash ? "\"" : "");
    for (uint32_t v = 0;; v += step) {
        if (v >= levels)
            v = levels - 1;
        fprintf(f, "%.1f,%.1f ", fr->x0 + (v + 0.5) * fr->w / levels, fr->y0 + fr->h * (1 - fn(ctx, v)));
        if (v == levels - 1)
            break;
    }
    fputs("\"/>\n", f);
}

typedef struct lut_ctx {
    const uint16_t *lut;
    uint32_t levels;
} lut_ctx;

static double lut_at(const void *ctx, uint32_t v)
{
    const lut_ctx *c = ctx;
    return c->levels > 1 ? (double)c->lut[v] / (c->levels - 1) : 0;
}

typedef struct cdf_ctx {
    const uint64_t *hist;
    double total;
    uint32_t next;  /* the cumulative sum runs forward as the polyline asks for rising levels */
    double sum;
} cdf_ctx;

static double cdf_at(const void *ctx, uint32_t v)
{
    cdf_ctx *c = (cdf_ctx *)ctx;
    while (c->next <= v)
        c->sum += (double)c->hist[c->next++];
    return c->total > 0 ? c->sum / c->total : 0;
}

static double hist_total(const uint64_t *h, uint32_t n)
{
    double t = 0;
    for (uint32_t i = 0; i < n; i++)
        t += (double)h[i];
    return t;
}

/* The y axis over output levels 0..levels-1 (a LUT's values), labelled as x_axis is. */
static void level_axis(FILE *f, const frame *fr, uint32_t levels, int32_t level0)
{
    const double span = levels - 1, step = nice_step(span, 5);
    for (double t = first_tick(level0, step); t <= level0 + span + 1e-9; t += step) {
        char buf[32];
        snprintf(buf, sizeof buf, "%.0f", t);
        y_tick(f, fr, fr->y0 + fr->h * (1 - (span > 0 ? (t - level0) / span : 0)), buf, 0);
    }
}

void hq_plot_lut(FILE *f, const uint16_t *lut, const uint64_t *before, const uint64_t *after, uint32_t levels,
                 int32_t level0, const char *title)
{
    frame fr;
    open_svg(f, &fr, 1, title);
    level_axis(f, &fr, levels, level0);
    for (int k = 0; k <= 4; k++) {
        char buf[16];
        snprintf(buf, sizeof buf, "%.2g", k / 4.0);
        fprintf(f, "<text x=\"%g\" y=\"%.1f\" " FONT ">%s</text>\n", fr.x0 + fr.w + 5, fr.y0 + fr.h * (1 - k / 4.0) + 4,
                buf);
    }
    y_label(f, &fr, "output level (LUT)", 0);
    y_label(f, &fr, "cumulative fraction (CDF)", 1);
    /* The LUT first, wide and light: under equalize it follows the CDF before, which stays visible on top. */
    lut_ctx lc = {lut, levels};
    polyline(f, &fr, levels, lut_at, &lc, C_LUT, "5", NULL, NULL);
    cdf_ctx cb = {before, hist_total(before, levels), 0, 0}, ca = {after, hist_total(after, levels), 0, 0};
    polyline(f, &fr, levels, cdf_at, &cb, C_BEFORE, "1.6", "6 3", NULL);
    polyline(f, &fr, levels, cdf_at, &ca, C_AFTER, "1.6", "6 3", NULL);
    x_axis(f, &fr, levels, level0, "input level");
    legend(f, &fr, 0, 3, C_LUT, NULL, "LUT: input -> output");
    legend(f, &fr, 1, 3, C_BEFORE, "6 3", "CDF before");
    legend(f, &fr, 2, 3, C_AFTER, "6 3", "CDF after");
    close_frame(f, &fr);
}

const char *hq_plot_color(size_t k)
{
    /* Categorical colours that stay apart on screen and in print; the first five cover the tiles
     * a CLAHE section plots, whose legend names each curve's tile as well. */
    static const char *const PALETTE[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#e8710a", "#17becf",
                                          "#8c564b", "#e377c2"};
    return PALETTE[k % (sizeof PALETTE / sizeof *PALETTE)];
}

static double identity_at(const void *ctx, uint32_t v)
{
    const uint32_t levels = *(const uint32_t *)ctx;
    return levels > 1 ? (double)v / (levels - 1) : 0;
}

void hq_plot_tile_luts(FILE *f, const uint16_t *const *luts, const char *const *names, size_t n, uint32_t levels,
                       int32_t level0, const char *title)
{
    frame fr;
    open_svg(f, &fr, 0, title);
    level_axis(f, &fr, levels, level0);
    y_label(f, &fr, "output level (LUT)", 0);
    polyline(f, &fr, levels, identity_at, &levels, C_LUT, "1", "2 3", NULL);
    for (size_t k = 0; k < n; k++) {
        char attrs[64];
        snprintf(attrs, sizeof attrs, "class=\"hq-tile-lut\" data-series=\"%zu\"", k);
        lut_ctx lc = {luts[k], levels};
        polyline(f, &fr, levels, lut_at, &lc, hq_plot_color(k), "1.8", NULL, attrs);
    }
    x_axis(f, &fr, levels, level0, "input level");
    const int rows = (int)n + 1;
    for (size_t k = 0; k < n; k++)
        legend(f, &fr, (int)k, rows, hq_plot_color(k), NULL, names[k]);
    legend(f, &fr, (int)n, rows, C_LUT, "2 3", "identity");
    close_frame(f, &fr);
}
