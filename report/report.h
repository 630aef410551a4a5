/* report.h — what a run records about itself: the HTML run report (--report DIR) and the
 * provenance an HDF5 output carries (each image's LUT, the options, the command line).
 *
 * Made only from what the run already has — the histograms and LUTs it built, the pixels of blocks
 * it holds anyway — and never by reading an image again. The driver (app/run/) calls in at a few
 * points; every hook is a no-op on a NULL report:
 *   hq_report_open     collective, before any pixel is read: checks DIR up front (rank 0), so a
 *                      long run never fails at its end for a predictable reason; picks the sample
 *                      (--report-sample N images, evenly through the good images, first and last
 *                      included).
 *   hq_report_pixels   a block's pixels before remapping (after = 0) and after (after = 1); feeds
 *                      the thumbnails of sampled images (box filter into sums, see thumb.h).
 *   hq_report_set_output  once the output exists: where the provenance goes. An output that
 *                      records LUTs (io.h's write_lut) gets each image's as it is handed over, so
 *                      that no rank holds them until close.
 *   hq_report_lut      an image's complete histogram and LUT (scope image), on each rank that built
 *                      it; taken once, by the rank owning the image's first block: written into
 *                      the output, and kept for the page if the image is sampled. Under CLAHE the
 *                      LUT is every tile's: all go into the output, and a sampled image keeps the
 *                      LUTs of the few tiles its page plots (tile_view.h).
 *   hq_report_meta     before the output is closed: fills the provenance fields of hq_run_meta.
 *                      A failure recorded by the hooks (out of memory) comes back here, before
 *                      anything is committed.
 *   hq_report_finish   collective, after the output is committed: sums the thumbnails and
 *                      gathers the sampled histograms (CLAHE: the picked tiles' LUTs), devices,
 *                      times and skipped inputs to rank 0, which writes DIR/index.html (via
 *                      index.html.part + rename) and the thumbnails as
 *                      DIR/thumb-<image>-before.png / -after.png.
 * The pixel and LUT hooks are called from the compute thread only (app/pipeline.h). A report that
 * fails in finish leaves the committed output as it is and no index.html; the run exits 1. */
#ifndef HQ_REPORT_H
#define HQ_REPORT_H

#include <stdint.h>

#include "../app/options.h"
#include "../core/error.h"
#include "../engine/engine.h"
#include "../io/io.h"
#include "../jobs/plan.h"
#include "../mpi/comm.h"

#define HQ_THUMB_SIDE 256 /* the long side of a thumbnail, pixels */

typedef struct hq_report hq_report;

typedef struct hq_report_cfg {
    const hq_options *o;
    const hq_comm *c;
    const hq_inventory *inv; /* kept by pointer: must outlive the report */
    const hq_plan *plan;     /* likewise */
    hq_scope scope;          /* resolved: image or global */
} hq_report_cfg;

int hq_report_open(const hq_report_cfg *cfg, hq_report **out, hq_err *err);

void hq_report_pixels(hq_report *r, const hq_block *b, const void *data, int after);
/* Whether hq_report_pixels needs blocks in row order (it draws thumbnails); 0 for a NULL report or
 * one with no sampled image, and then the I/O may hand blocks over in storage order (io/io.h). */
int hq_report_wants_pixels(const hq_report *r);

/* After create_output: the output that records each image's LUT (ops->write_lut; NULL: none). */
void hq_report_set_output(hq_report *r, const hq_io_ops *ops, hq_io *io);

/* image: global image index; hist and lut: nhist * bins of that image's mode. hist may be NULL
 * (an image finished by an interrupted run, whose histogram the journal did not keep). Returns
 * write_lut's failure (err set); the report's own failures come back from hq_report_meta. */
int hq_report_lut(hq_report *r, uint64_t image, const uint64_t *hist, const uint16_t *lut, hq_err *err);

/* Whether this rank must hand the image's LUT (the output's record, or a sampled image's page) and
 * its histogram (a sampled image's page) to hq_report_lut. */
int hq_report_wants(hq_report *r, uint64_t image, int *lut, int *hist);

/* What a journal must keep of an image it claims done, so that --resume can hand it over again:
 * a sampled image's LUT and histogram (CLAHE: its LUTs alone). Never the output's record: that is
 * in the output already, as durable as the image's pixels. */
int hq_report_journal_wants(hq_report *r, uint64_t image, int *lut, int *hist);

/* CLAHE: whether the rank that speaks for `image` (the owner of its first block) must end the tile
 * row exchange (mpi/tile_rows.h) with every tile row of it complete, whether or not it blends them
 * all: the image is sampled, and its page plots corner and centre tiles. 0 for a NULL report. The
 * same answer on every rank, as the exchange needs (the sample depends on the inventory alone). */
int hq_report_needs_tiles(const hq_report *r, uint64_t image);

/* Sets meta->options, command_line and global_lut (from meta->global_hist). What they point at
 * stays valid until hq_report_free. */
int hq_report_meta(hq_report *r, hq_run_meta *meta, hq_err *err);

typedef struct hq_report_end {
    hq_engine *eng;                 /* this rank's, for its describe line */
    const double *phase_s;          /* this rank's seconds per phase */
    const char *const *phase_names;
    int nphases;
    uint64_t pixels, bytes;         /* written by this rank */
    const char *skipped;            /* inputs this rank skipped while decoding, one per line, or NULL */
    uint64_t nskipped;              /* all skipped inputs, every rank (the same on every rank) */
    uint64_t images;                /* images equalized: the plan's less the skipped inputs' */
    const unsigned char *resumed;   /* per image of the plan, what the interrupted run that this
                                       one resumed did of it: 1 all, 2 a part, 0 none (NULL: not
                                       resuming); rank 0 reads it */
    double wall_s;
} hq_report_end;

int hq_report_finish(hq_report *r, const hq_report_end *e, hq_err *err);

void hq_report_free(hq_report *r);

#endif
