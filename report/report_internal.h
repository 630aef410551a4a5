/* report_internal.h — what the files of the run record (report/) share; nothing outside report/
 * includes it: report.h stays the one interface.
 *   report.c      the hooks the driver calls (report.h), the provenance handed to the output
 *   facts.c       facts from the inventory, plan and options (the same rules as app/run/facts.c)
 *   sample.c      which images the page shows, and which of a CLAHE image's tiles
 *   report_dir.c  DIR checked up front (rank 0), made when missing
 *   asked.c       what the run was asked to do: the command line and the options, as recorded
 *   finish.c      the end: thumbnails, histograms, devices and times gathered to rank 0, the page
 * and under them page.c (the HTML), plot.c, thumb.c, tile_view.c, html.c. */
#ifndef HQ_REPORT_INTERNAL_H
#define HQ_REPORT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "report.h"
#include "thumb.h"
#include "tile_view.h"

#ifndef HQ_VERSION
#define HQ_VERSION "dev"
#endif

#define LINE 256          /* a device line gathered from each rank */

typedef struct sample {
    uint64_t image, item, slice;
    hq_thumb_geom g;
    uint32_t *xmap;
    uint64_t *acc[2];  /* thumbnail sums before, after (allocated when this rank first sees the image) */
    uint64_t *hist;    /* scope image, on the rank owning the image's first block: its histogram ... */
    uint16_t *lut;     /* ... and LUT; under CLAHE no histogram, and the picked tiles' LUTs (tile_view.h) */
} sample;

struct hq_report {
    hq_report_cfg cfg;
    /* Scope image, an output that records LUTs (hq_report_set_output): each image's LUT goes into
     * it as it is handed over. */
    int provenance;
    const hq_io_ops *out_ops;
    hq_io *out_io;
    sample *samples;   /* ascending by image */
    size_t nsamples;
    uint64_t *global_hist; /* scope global, rank 0, with --report: the copy the page plots */
    uint16_t *global_lut;
    uint32_t global_nhist, global_bins;
    char *options, *command_line;
    int has_float;     /* the input holds float data (--bins and --range then shape the output) */
    int rc;            /* the first failure of a hook, reported by hq_report_meta */
    hq_err err;
};

/* facts.c */
hq_mode rep_mode_of(const hq_report *r, uint64_t item);
size_t rep_hist_len(const hq_mode *m);
/* The item holding a global image index (the largest i with image0[i] <= image). */
uint64_t rep_item_of(const hq_report *r, uint64_t image);
/* The rank owning the first block of an image: the one that records its LUT. */
int rep_first_owner(const hq_plan *p, uint64_t image);
/* Records the first failure of a hook, for hq_report_meta to return. */
void rep_fail_once(hq_report *r, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* sample.c */
int rep_pick_samples(hq_report *r, hq_err *err);
sample *rep_first_sample_from(const hq_report *r, uint64_t image);
int rep_is_sampled(const hq_report *r, uint64_t image);
int rep_is_clahe(const hq_report *r);
size_t rep_picked_tiles(const hq_report *r, uint64_t item, hq_clahe_geom *g, hq_tile_pos pick[HQ_TILE_VIEW_MAX]);

/* report_dir.c */
char *rep_join(const char *dir, const char *name);
int rep_make_dirs(const char *dir, int (*check)(const char *, hq_err *), hq_err *err);
int rep_check_dir(const hq_report *r, hq_err *err);

/* asked.c: strings of their own (NULL when out of memory) */
void rep_add(char **buf, size_t *len, size_t *cap, const char *s);
char *rep_command_line(void);
char *rep_options_line(const hq_report *r);

#endif
