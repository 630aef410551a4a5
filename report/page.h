/* page.h — the report page itself: one self-contained HTML file (inline SVG plots, thumbnails as
 * data: URIs, inline CSS, no script to run, nothing fetched), written front to back so that rank 0
 * never holds more than one sampled image's data at a time.
 *
 * Every number the page plots is also embedded, exactly, as JSON in <script type="application/json">
 * elements (a browser does not run them): id "hq-summary" for the run, class "hq-data" for each
 * histogram section. A histogram section's JSON:
 *   {"kind": "global"|"image", "image": global image index or null, "name": ..., "bits": b, "bins": 2^b,
 *    "after_kind": "output" (the output's histogram, exact) | "through_lut" (Y or V pushed through
 *    the LUT, the intended histogram), "hists": [{"label": "gray"|"luma"|"value"|"R"|"G"|"B",
 *    "before": [[level, count], ...], "after": [[level, count], ...] (non-zero bins only),
 *    "lut": [[level, lut[level]], ...] (at the non-zero levels of before),
 *    "plot": {"bin_width": w, "before": [...], "after": [...]} (the bars drawn)}],
 *    "thumbs": {"before": file, "after": file} or null}
 * A CLAHE image's section has no "hists" entries (its LUTs are per tile) and one more key:
 *   "clahe": {"tiles": [tiles_y, tiles_x], "tile_size": [tile_h, tile_w] (in the padded image, core/clahe.h),
 *    "clip_limit": F, "clip_count": the per-bin limit (0: none), "labels": [one per histogram],
 *    "grid": {"thumb": [thumb_w, thumb_h], "x": [column of each vertical line], "y": [row of each
 *    horizontal line]} (image positions k * tile inside the image; a line is drawn at
 *    position * thumb / image side in thumbnail pixels) or null (too fine to draw, tile_view.h),
 *    "tile_luts": [{"tile": [row, col], "luts": [[lut[0], ..., lut[bins - 1]], one per histogram]}]}
 * In the page the grid is an <svg class="hq-tiles"> over each thumbnail (viewBox in thumbnail pixels),
 * its lines <line class="hq-grid-x"|"hq-grid-y" data-pos="position">, the plotted tiles outlined as
 * <rect class="hq-pick" data-tile="row,col">; each tile's curve is a <polyline class="hq-tile-lut">. */
#ifndef HQ_PAGE_H
#define HQ_PAGE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tile_view.h"

typedef struct hq_page_run {
    const char *version, *input, *output, *scope, *method, *color, *options, *command_line, *written_at;
    int ranks;
    uint64_t images, pixels, bytes, nsamples;
    double wall_s;            /* from the start to the writing of the page (the closing line's
                                 and --summary's wall time also count the page's writing) */
    int exit_status; /* 0, or 3 when inputs were skipped */
    int nphases;
    const char *const *phase_names;
    const double *phase_max, *phase_mean;
    const char *const *devices; /* one line per rank */
    const char *const *skipped;
    size_t nskipped;
    int log_scale;
} hq_page_run;

/* What a CLAHE image's section shows besides its thumbnails: the grid and a few tiles' LUTs. */
typedef struct hq_page_clahe {
    hq_clahe_geom g;          /* core/clahe.h's, for this image */
    double clip;              /* --clip-limit */
    int64_t clip_count;       /* the per-bin limit it gives; 0: none */
    uint32_t thumb_w, thumb_h;/* the thumbnails' own pixels */
    int grid;                 /* 1: drawn; 0: too fine to draw (hq_tile_view_drawable); -1: no thumbnail */
    size_t ntiles;
    const hq_tile_pos *tiles; /* the picked tiles (hq_tile_view_pick) */
    uint32_t nhist;
    const char *const *labels;/* nhist labels */
    const uint16_t *luts;     /* ntiles * nhist * 2^bits: tile by tile, histogram by histogram */
} hq_page_clahe;

/* A histogram section: the global one, or one sampled image's. */
typedef struct hq_page_section {
    int global;
    uint64_t image;           /* global image index (sampled images) */
    const char *name;         /* what the image is called: dataset [slice], or PNG file name */
    uint64_t width, height;
    uint32_t channels, bits;
    uint32_t nhist;           /* 0: no histogram here (a sampled image under scope global) */
    const char *const *labels;/* nhist labels */
    const uint64_t *hist;     /* nhist * 2^bits counts, channel-major */
    const uint16_t *lut;      /* the same shape */
    int through_lut;          /* the after histogram is Y or V through the LUT, not the output's */
    const char *note;         /* shown instead of pictures (e.g. "skipped: could not be read"), or NULL */
    const unsigned char *png[2]; /* thumbnails before, after (NULL: none) */
    size_t png_len[2];
    const char *png_file[2];  /* their file names in the report directory */
    const hq_page_clahe *clahe; /* --method clahe: the grid and tile LUTs; else NULL */
    int32_t level0;           /* the value level 0 stands for: 0, or -2^(bits-1) for signed data */
} hq_page_section;

void hq_page_begin(FILE *f, const hq_page_run *run);
/* Returns 0, or -1 when out of memory (the page is then incomplete). */
int hq_page_section_write(FILE *f, const hq_page_section *s, int log_scale);
void hq_page_end(FILE *f);

#endif
