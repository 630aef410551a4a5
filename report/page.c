#include "page.h"

#include <stdlib.h>
#include <string.h>

#include "html.h"
#include "plot.h"

static const char CSS[] =
    "body{font-family:sans-serif;margin:24px;color:#222;max-width:1160px}"
    "h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ccc}"
    "h3{font-size:14px;margin:14px 0 6px}.sub{color:#555;margin:0 0 12px}"
    "table{border-collapse:collapse;margin:6px 0 10px;font-size:13px}"
    "td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}"
    "th{background:#f3f3f3}td.n{text-align:right;font-variant-numeric:tabular-nums}"
    "code{font-size:12px;word-break:break-all}"
    ".thumbs{display:flex;gap:16px;align-items:flex-start}.thumbs figure{margin:0}"
    ".thumbs img{image-rendering:pixelated;border:1px solid #999;background:#888}"
    ".tiled{position:relative}.tiled svg{position:absolute;left:1px;top:1px;pointer-events:none}"
    ".hq-tiles line,.hq-tiles rect{vector-effect:non-scaling-stroke}"
    "figcaption{font-size:12px;color:#555;text-align:center}"
    ".plots{display:flex;flex-wrap:wrap;gap:8px}.note{color:#a00}.facts{display:flex;flex-wrap:wrap;gap:28px}";

static void row_text(FILE *f, const char *key, const char *val)
{
    fprintf(f, "<tr><th>%s</th><td>", key);
    hq_html_put(f, val);
    fputs("</td></tr>\n", f);
}

static void row_u64(FILE *f, const char *key, uint64_t v)
{
    fprintf(f, "<tr><th>%s</th><td class=\"n\">%llu</td></tr>\n", key, (unsigned long long)v);
}

static void summary_json(FILE *f, const hq_page_run *r)
{
    fputs("<script type=\"application/json\" id=\"hq-summary\">{", f);
    const char *keys[] = {"version", "input", "output", "scope", "method", "color", "options", "command_line"};
    const char *vals[] = {r->version, r->input, r->output, r->scope, r->method, r->color, r->options, r->command_line};
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
        fprintf(f, "\"%s\": ", keys[k]);
        hq_json_put(f, vals[k]);
        fputs(", ", f);
    }
    fprintf(f, "\"ranks\": %d, \"images\": %llu, \"pixels\": %llu, \"bytes\": %llu, \"wall_s\": %.6f, "
               "\"exit_status\": %d, \"log_scale\": %s, \"phases\": {",
            r->ranks, (unsigned long long)r->images, (unsigned long long)r->pixels, (unsigned long long)r->bytes,
            r->wall_s, r->exit_status, r->log_scale ? "true" : "false");
    for (int k = 0; k < r->nphases; k++)
        fprintf(f, "%s\"%s\": {\"max_s\": %.6f, \"mean_s\": %.6f}", k ? ", " : "", r->phase_names[k], r->phase_max[k],
                r->phase_mean[k]);
    fputs("}, \"devices\": [", f);
    for (int k = 0; k < r->ranks; k++) {
        fputs(k ? ", " : "", f);
        hq_json_put(f, r->devices[k]);
    }
    fputs("], \"skipped\": [", f);
    for (size_t k = 0; k < r->nskipped; k++) {
        fputs(k ? ", " : "", f);
        hq_json_put(f, r->skipped[k]);
    }
    fputs("]}</script>\n", f);
}

void hq_page_begin(FILE *f, const hq_page_run *r)
{
    fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>histeq_dist report: ");
    hq_html_put(f, r->input);
    fprintf(f, "</title>\n<style>%s</style>\n</head>\n<body>\n<h1>histeq_dist run report</h1>\n<p class=\"sub\">", CSS);
    hq_html_put(f, r->input);
    fputs(" &#8594; ", f);
    hq_html_put(f, r->output);
    fputs(" &#183; written ", f);
    hq_html_put(f, r->written_at);
    fputs("</p>\n", f);
    summary_json(f, r);
    fputs("<h2>Run</h2>\n<table>\n", f);
    row_text(f, "version", r->version);
    row_text(f, "scope", r->scope);
    row_text(f, "method", r->method);
    row_text(f, "color", r->color);
    fprintf(f, "<tr><th>ranks</th><td class=\"n\">%d</td></tr>\n", r->ranks);
    row_u64(f, "images", r->images);
    row_u64(f, "pixels written", r->pixels);
    row_u64(f, "bytes written", r->bytes);
    fprintf(f, "<tr><th>wall time, up to this report</th><td class=\"n\">%.3f s (%.1f MiB/s)</td></tr>\n", r->wall_s,
            r->wall_s > 0 ? (double)r->bytes / 1048576.0 / r->wall_s : 0.0);
    fprintf(f, "<tr><th>exit status</th><td>%d%s</td></tr>\n", r->exit_status,
            r->exit_status ? " (finished; some inputs were skipped)" : " (done)");
    fputs("<tr><th>options</th><td><code>", f);
    hq_html_put(f, r->options);
    fputs("</code></td></tr>\n<tr><th>command line</th><td><code>", f);
    hq_html_put(f, r->command_line);
    fputs("</code></td></tr>\n</table>\n", f);
    fputs("<div class=\"facts\">\n<div><h3>Devices</h3>\n<table>\n<tr><th>rank</th><th>where, engine</th></tr>\n", f);
    for (int k = 0; k < r->ranks; k++) {
        fprintf(f, "<tr><td class=\"n\">%d</td><td>", k);
        hq_html_put(f, r->devices[k]);
        fputs("</td></tr>\n", f);
    }
    fputs("</table></div>\n<div><h3>Time per phase (seconds over ranks)</h3>\n<table>\n"
          "<tr><th>phase</th><th>max</th><th>mean</th></tr>\n", f);
    for (int k = 0; k < r->nphases; k++)
        fprintf(f, "<tr><td>%s</td><td class=\"n\">%.3f</td><td class=\"n\">%.3f</td></tr>\n", r->phase_names[k],
                r->phase_max[k], r->phase_mean[k]);
    fprintf(f, "</table></div>\n<div><h3>Skipped inputs (%zu)</h3>\n", r->nskipped);
    if (r->nskipped) {
        fputs("<ul>\n", f);
        for (size_t k = 0; k < r->nskipped; k++) {
            fputs("<li>", f);
            hq_html_put(f, r->skipped[k]);
            fputs("</li>\n", f);
        }
        fputs("</ul>\n", f);
    } else {
        fputs("<p>none</p>\n", f);
    }
    fputs("</div>\n</div>\n", f);
}

/* Sparse [[level, value], ...] of the non-zero entries of v. */
static void json_sparse(FILE *f, const uint64_t *v, uint32_t n)
{
    fputc('[', f);
    int first = 1;
    for (uint32_t i = 0; i < n; i++)
        if (v[i]) {
            fprintf(f, "%s[%u,%llu]", first ? "" : ",", i, (unsigned long long)v[i]);
            first = 0;
        }
    fputc(']', f);
}

static void json_list(FILE *f, const uint64_t *v, uint32_t n)
{
    fputc('[', f);
    for (uint32_t i = 0; i < n; i++)
        fprintf(f, "%s%llu", i ? "," : "", (unsigned long long)v[i]);
    fputc(']', f);
}

/* The tile boundaries inside one side of the image (tile_view.h), as a JSON list of positions. */
static void json_edges(FILE *f, uint64_t n, uint64_t tiles, uint64_t tile)
{
    fputc('[', f);
    for (uint64_t k = 1; k <= hq_tile_view_edges(n, tiles, tile); k++)
        fprintf(f, "%s%llu", k > 1 ? "," : "", (unsigned long long)(k * tile));
    fputc(']', f);
}

static const uint16_t *tile_lut(const hq_page_clahe *c, size_t tile, uint32_t h, uint32_t bins)
{
    return c->luts + ((size_t)tile * c->nhist + h) * bins;
}

static void clahe_json(FILE *f, const hq_page_clahe *c, uint32_t bins)
{
    const hq_clahe_geom *g = &c->g;
    fprintf(f, ", \"clahe\": {\"tiles\": [%llu, %llu], \"tile_size\": [%llu, %llu], \"clip_limit\": %.17g, "
               "\"clip_count\": %lld, \"labels\": [",
            (unsigned long long)g->tiles_y, (unsigned long long)g->tiles_x, (unsigned long long)g->tile_h,
            (unsigned long long)g->tile_w, c->clip, (long long)c->clip_count);
    for (uint32_t h = 0; h < c->nhist; h++) {
        fputs(h ? ", " : "", f);
        hq_json_put(f, c->labels[h]);
    }
    fputs("], \"grid\": ", f);
    if (c->grid > 0) {
        fprintf(f, "{\"thumb\": [%u, %u], \"x\": ", c->thumb_w, c->thumb_h);
        json_edges(f, g->width, g->tiles_x, g->tile_w);
        fputs(", \"y\": ", f);
        json_edges(f, g->height, g->tiles_y, g->tile_h);
        fputc('}', f);
    } else {
        fputs("null", f);
    }
    fputs(", \"tile_luts\": [", f);
    for (size_t t = 0; t < c->ntiles; t++) {
        fprintf(f, "%s{\"tile\": [%llu, %llu], \"luts\": [", t ? ", " : "", (unsigned long long)c->tiles[t].row,
                (unsigned long long)c->tiles[t].col);
        for (uint32_t h = 0; h < c->nhist; h++) {
            const uint16_t *lut = tile_lut(c, t, h, bins);
            fputs(h ? ", [" : "[", f);
            for (uint32_t v = 0; v < bins; v++)
                fprintf(f, "%s%u", v ? "," : "", lut[v]);
            fputc(']', f);
        }
        fputs("]}", f);
    }
    fputs("]}", f);
}

static void section_json(FILE *f, const hq_page_section *s, uint64_t *const *after, uint64_t *const *pb,
                         uint64_t *const *pa)
{
    const uint32_t bins = 1u << s->bits, n = hq_plot_nbins(bins);
    fputs("<script type=\"application/json\" class=\"hq-data\">{\"kind\": ", f);
    fputs(s->global ? "\"global\", \"image\": null" : "\"image\", \"image\": ", f);
    if (!s->global)
        fprintf(f, "%llu", (unsigned long long)s->image);
    fputs(", \"name\": ", f);
    hq_json_put(f, s->name);
    fprintf(f, ", \"width\": %llu, \"height\": %llu, \"channels\": %u, \"bits\": %u, \"bins\": %u, \"after_kind\": \"%s\", "
               "\"level0\": %d, \"note\": ", (unsigned long long)s->width, (unsigned long long)s->height, s->channels, s->bits, bins,
            s->through_lut ? "through_lut" : "output", (int)s->level0);
    if (s->note)
        hq_json_put(f, s->note);
    else
        fputs("null", f);
    fputs(", \"hists\": [", f);
    for (uint32_t h = 0; h < s->nhist; h++) {
        const uint64_t *before = s->hist + (size_t)h * bins;
        const uint16_t *lut = s->lut + (size_t)h * bins;
        fputs(h ? ", {\"label\": " : "{\"label\": ", f);
        hq_json_put(f, s->labels[h]);
        fputs(", \"before\": ", f);
        json_sparse(f, before, bins);
        fputs(", \"after\": ", f);
        json_sparse(f, after[h], bins);
        fputs(", \"lut\": [", f);
        int first = 1;
        for (uint32_t v = 0; v < bins; v++)
            if (before[v]) {
                fprintf(f, "%s[%u,%u]", first ? "" : ",", v, lut[v]);
                first = 0;
            }
        fprintf(f, "], \"plot\": {\"bin_width\": %u, \"before\": ", bins / n);
        json_list(f, pb[h], n);
        fputs(", \"after\": ", f);
        json_list(f, pa[h], n);
        fputs("}}", f);
    }
    fputs("], \"thumbs\": ", f);
    if (s->png[0] && s->png[1]) {
        fputs("{\"before\": ", f);
        hq_json_put(f, s->png_file[0]);
        fputs(", \"after\": ", f);
        hq_json_put(f, s->png_file[1]);
        fputc('}', f);
    } else {
        fputs("null", f);
    }
    if (s->clahe)
        clahe_json(f, s->clahe, bins);
    fputs("}</script>\n", f);
}

/* One grid line over the thumbnail: image position pos of a side of n samples, at pos * t / n
 * thumbnail pixels (the box filter puts image column x in thumbnail column x * t / n, rounded down,
 * so a boundary between columns falls there). */
static void grid_line(FILE *f, int vertical, uint64_t pos, uint64_t n, uint32_t t, uint32_t across)
{
    const double at = (double)pos * t / (double)n;
    if (vertical)
        fprintf(f, "<line class=\"hq-grid-x\" data-pos=\"%llu\" x1=\"%.4f\" y1=\"0\" x2=\"%.4f\" y2=\"%u\"/>",
                (unsigned long long)pos, at, at, across);
    else
        fprintf(f, "<line class=\"hq-grid-y\" data-pos=\"%llu\" x1=\"0\" y1=\"%.4f\" x2=\"%u\" y2=\"%.4f\"/>",
                (unsigned long long)pos, at, across, at);
}

/* A plotted tile's outline, in its curve's colour, clipped to the image: a corner tile may reach
 * into the padding, or lie wholly in it (then it has nothing to outline). */
static void pick_outline(FILE *f, const hq_page_clahe *c, size_t k)
{
    const hq_clahe_geom *g = &c->g;
    const uint64_t x0 = c->tiles[k].col * g->tile_w, y0 = c->tiles[k].row * g->tile_h;
    if (x0 >= g->width || y0 >= g->height)
        return;
    const uint64_t x1 = x0 + g->tile_w < g->width ? x0 + g->tile_w : g->width;
    const uint64_t y1 = y0 + g->tile_h < g->height ? y0 + g->tile_h : g->height;
    const double sx = (double)c->thumb_w / (double)g->width, sy = (double)c->thumb_h / (double)g->height;
    fprintf(f, "<rect class=\"hq-pick\" data-tile=\"%llu,%llu\" x=\"%.4f\" y=\"%.4f\" width=\"%.4f\" "
               "height=\"%.4f\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"><title>tile (%llu, %llu)</title></rect>",
            (unsigned long long)c->tiles[k].row, (unsigned long long)c->tiles[k].col, x0 * sx, y0 * sy,
            (x1 - x0) * sx, (y1 - y0) * sy, hq_plot_color(k), (unsigned long long)c->tiles[k].row,
            (unsigned long long)c->tiles[k].col);
}

/* The tile grid over a thumbnail shown at dw x dh CSS pixels: its viewBox is the thumbnail's own
 * pixels, stretched with the picture. */
static void grid_overlay(FILE *f, const hq_page_clahe *c, unsigned dw, unsigned dh)
{
    const hq_clahe_geom *g = &c->g;
    fprintf(f, "<svg class=\"hq-tiles\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%u\" height=\"%u\" "
               "viewBox=\"0 0 %u %u\" preserveAspectRatio=\"none\" role=\"img\" aria-label=\"CLAHE tile grid, "
               "%llu by %llu tiles\">\n<g stroke=\"#ffea00\" stroke-opacity=\"0.9\" stroke-width=\"1\">",
            dw, dh, c->thumb_w, c->thumb_h, (unsigned long long)g->tiles_y, (unsigned long long)g->tiles_x);
    for (uint64_t k = 1; k <= hq_tile_view_edges(g->width, g->tiles_x, g->tile_w); k++)
        grid_line(f, 1, k * g->tile_w, g->width, c->thumb_w, c->thumb_h);
    for (uint64_t k = 1; k <= hq_tile_view_edges(g->height, g->tiles_y, g->tile_h); k++)
        grid_line(f, 0, k * g->tile_h, g->height, c->thumb_h, c->thumb_w);
    fputs("</g>\n", f);
    for (size_t k = 0; k < c->ntiles; k++)
        pick_outline(f, c, k);
    fputs("\n</svg>", f);
}

static void thumbs(FILE *f, const hq_page_section *s)
{
    static const char *const CAP[2] = {"before", "after"};
    /* Shown with the long side at 256 CSS pixels whatever the thumbnail's own size, so that small
     * images are enlarged (pixelated, not blurred) and every pair lines up. */
    const uint64_t longest = s->width > s->height ? s->width : s->height;
    unsigned dw = longest ? (unsigned)((s->width * 256 + longest / 2) / longest) : 256;
    unsigned dh = longest ? (unsigned)((s->height * 256 + longest / 2) / longest) : 256;
    dw = dw ? dw : 1;
    dh = dh ? dh : 1;
    const int overlay = s->clahe && s->clahe->grid > 0;
    fputs("<div class=\"thumbs\">\n", f);
    for (int k = 0; k < 2; k++) {
        fputs(overlay ? "<figure><div class=\"tiled\">" : "<figure>", f);
        fprintf(f, "<img width=\"%u\" height=\"%u\" alt=\"", dw, dh);
        hq_html_put(f, CAP[k]);
        fprintf(f, "\" data-file=\"");
        hq_html_put(f, s->png_file[k]);
        fputs("\" src=\"data:image/png;base64,", f);
        hq_base64_put(f, s->png[k], s->png_len[k]);
        fputs("\">", f);
        if (overlay) {
            grid_overlay(f, s->clahe, dw, dh);
            fputs("</div>", f);
        }
        fprintf(f, "<figcaption>%s</figcaption></figure>\n", CAP[k]);
    }
    fputs("</div>\n", f);
}

/* What the grid on the thumbnails is, and which tiles the plots below show. */
static void clahe_caption(FILE *f, const hq_page_clahe *c)
{
    const hq_clahe_geom *g = &c->g;
    fprintf(f, "<p class=\"sub\">CLAHE: %llu &#215; %llu tiles of %llu &#215; %llu pixels (the image padded to "
               "%llu &#215; %llu), clip limit %g",
            (unsigned long long)g->tiles_y, (unsigned long long)g->tiles_x, (unsigned long long)g->tile_h,
            (unsigned long long)g->tile_w, (unsigned long long)(g->tiles_y * g->tile_h),
            (unsigned long long)(g->tiles_x * g->tile_w), c->clip);
    if (c->clip_count > 0)
        fprintf(f, " (%lld per bin)", (long long)c->clip_count);
    else
        fputs(" (none)", f);
    fputs(c->grid > 0 ? ". The tile grid is drawn over the thumbnails; outlined in colour: the tiles whose LUTs are "
                        "plotted below (corners and centre).</p>\n"
          : c->grid == 0 ? ". The tile grid is too fine to draw at thumbnail size; below, the LUTs of the corner and "
                           "centre tiles.</p>\n"
                         : ". Without thumbnails there is no grid to draw; below, the LUTs of the corner and centre "
                           "tiles.</p>\n",
          f);
}

/* One plot per histogram: the picked tiles' LUTs (before the blend), labelled by tile. */
static void clahe_plots(FILE *f, const hq_page_clahe *c, uint32_t bins, int32_t level0)
{
    const uint16_t *luts[HQ_TILE_VIEW_MAX];
    char names[HQ_TILE_VIEW_MAX][64];
    const char *label[HQ_TILE_VIEW_MAX];
    const size_t n = c->ntiles < HQ_TILE_VIEW_MAX ? c->ntiles : HQ_TILE_VIEW_MAX;
    for (size_t k = 0; k < n; k++) {
        snprintf(names[k], sizeof names[k], "tile (%llu, %llu)", (unsigned long long)c->tiles[k].row,
                 (unsigned long long)c->tiles[k].col);
        label[k] = names[k];
    }
    fputs("<div class=\"plots\">\n", f);
    for (uint32_t h = 0; h < c->nhist; h++) {
        char title[160];
        for (size_t k = 0; k < n; k++)
            luts[k] = tile_lut(c, k, h, bins);
        snprintf(title, sizeof title, "Tile LUTs, %s (row, column)", c->labels[h]);
        hq_plot_tile_luts(f, luts, label, n, bins, level0, title);
    }
    fputs("</div>\n", f);
}

static void plots(FILE *f, const hq_page_section *s, uint64_t *const *after, uint64_t *const *pb,
                  uint64_t *const *pa, int log_scale)
{
    if (!s->nhist)
        return;
    const uint32_t bins = 1u << s->bits, n = hq_plot_nbins(bins);
    const char *after_label = !s->through_lut ? "after" : !strcmp(s->labels[0], "value") ? "after (V through the LUT)"
                                                                                           : "after (Y through the LUT)";
    for (uint32_t h = 0; h < s->nhist; h++) {
        char title[160];
        fputs("<div class=\"plots\">\n", f);
        snprintf(title, sizeof title, "Histogram, %s (%u levels)", s->labels[h], bins);
        hq_plot_histograms(f, pb[h], pa[h], n, bins, s->level0, log_scale, title, after_label);
        snprintf(title, sizeof title, "LUT and CDF, %s", s->labels[h]);
        hq_plot_lut(f, s->lut + (size_t)h * bins, s->hist + (size_t)h * bins, after[h], bins, s->level0, title);
        fputs("</div>\n", f);
    }
}

int hq_page_section_write(FILE *f, const hq_page_section *s, int log_scale)
{
    const uint32_t bins = 1u << s->bits, n = hq_plot_nbins(bins);
    uint64_t *after[3] = {0}, *pb[3] = {0}, *pa[3] = {0};
    int rc = 0;
    for (uint32_t h = 0; h < s->nhist && h < 3; h++) {
        after[h] = calloc(bins, sizeof **after);
        pb[h] = malloc(n * sizeof **pb);
        pa[h] = malloc(n * sizeof **pa);
        if (!after[h] || !pb[h] || !pa[h]) {
            rc = -1;
            goto out;
        }
        /* The after histogram is the before histogram pushed through the LUT: exact for gray and per
         * channel (each output sample is lut[input]), the intended one for Y and V. */
        const uint64_t *before = s->hist + (size_t)h * bins;
        const uint16_t *lut = s->lut + (size_t)h * bins;
        for (uint32_t v = 0; v < bins; v++)
            after[h][lut[v] < bins ? lut[v] : bins - 1] += before[v];
        hq_plot_rebin(before, bins, pb[h]);
        hq_plot_rebin(after[h], bins, pa[h]);
    }
    fputs(s->global ? "<section class=\"global\">\n<h2>" : "<section class=\"sample\">\n<h2>", f);
    if (s->global)
        fputs("Global histogram (one LUT for all images)", f);
    else
        fprintf(f, "Image %llu: ", (unsigned long long)s->image);
    hq_html_put(f, s->global ? "" : s->name);
    fputs("</h2>\n", f);
    if (!s->global)
        fprintf(f, "<p class=\"sub\">%llu &#215; %llu pixels, %u channel%s, %u bits</p>\n",
                (unsigned long long)s->width, (unsigned long long)s->height, s->channels, s->channels == 1 ? "" : "s",
                s->bits);
    section_json(f, s, after, pb, pa);
    if (s->note) {
        fputs("<p class=\"note\">", f);
        hq_html_put(f, s->note);
        fputs("</p>\n", f);
    }
    if (s->clahe)
        clahe_caption(f, s->clahe);
    if (s->png[0] && s->png[1])
        thumbs(f, s);
    if (!s->global && !s->nhist && !s->note && !s->clahe)
        fputs("<p class=\"sub\">Equalized with the global LUT above.</p>\n", f);
    plots(f, s, after, pb, pa, log_scale);
    if (s->clahe)
        clahe_plots(f, s->clahe, bins, s->level0);
    fputs("</section>\n", f);
out:
    for (int h = 0; h < 3; h++) {
        free(after[h]);
        free(pb[h]);
        free(pa[h]);
    }
    return rc;
}

void hq_page_end(FILE *f)
{
    fputs("<p class=\"sub\">Numbers plotted here are embedded exactly in the page's application/json blocks.</p>\n"
          "</body>\n</html>\n", f);
}
