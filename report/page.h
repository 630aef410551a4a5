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
 *    "thumbs": {"before": file, "after": file} or null} */
#ifndef HQ_PAGE_H
#define HQ_PAGE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct hq_page_run {
    const char *version, *input, *output, *scope, *method, *color, *options, *command_line, *written_at;
    int ranks;
    uint64_t images, pixels, bytes, nsamples;
    double wall_s;
    int exit_status; /* 0, or 3 when inputs were skipped */
    int nphases;
    const char *const *phase_names;
    const double *phase_max, *phase_mean;
    const char *const *devices; /* one line per rank */
    const char *const *skipped;
    size_t nskipped;
    int log_scale;
} hq_page_run;

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
} hq_page_section;

void hq_page_begin(FILE *f, const hq_page_run *run);
/* Returns 0, or -1 when out of memory (the page is then incomplete). */
int hq_page_section_write(FILE *f, const hq_page_section *s, int log_scale);
void hq_page_end(FILE *f);

#endif
