/* run.c — the data path, top to bottom: scan -> plan -> read -> histogram -> allreduce -> LUT ->
 * remap -> write, the same on every rank.
 *
 * Histograms belong to groups: one per image (scope image), one per dataset (scope dataset) or one
 * for everything (scope global).
 * A block whose groups all end inside it is "fused": read, histogram, LUT, remap and write in one
 * go. Other blocks are "pending": their group needs more blocks (the tiles of a big image) or other
 * ranks (a shared group, summed by MPI_Allreduce). Pending pixels are held in memory up to what
 * --memory leaves beside the blocks in flight, and re-read past it (fit_memory).
 *
 * Collective HDF5 transfers need every rank in every call. Items with blocks on several ranks
 * ("shared items") are therefore walked first, by all ranks, in lockstep rounds computed from the
 * plan (which every rank has); a rank without a block in a round joins with NULL. Items owned by
 * one rank are then read and written independently, so a collection never runs in lockstep. */
#include "run.h"

#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/clahe.h"
#include "../core/fbin.h"
#include "../core/lut.h"
#include "../core/sample.h"
#include "../engine/engine.h"
#include "../io/io.h"
#include "../jobs/journal.h"
#include "../jobs/plan.h"
#include "../mpi/progress.h"
#include "../mpi/tile_rows.h"
#include "../report/report.h"
#include "outname.h"
#include "mask.h"
#include "pipeline.h"
#include "placement.h"
#include "resume.h"
#include "summary.h"
#include "writeback.h"

#ifndef HQ_VERSION
#define HQ_VERSION "dev"
#endif

/* create: making the output and reserving its space; close: recording the run, closing, checking
 * and renaming the output. Both are collective, and grow with the output on some file systems. */
enum { PH_CREATE, PH_READ, PH_HIST, PH_REDUCE, PH_REMAP, PH_WRITE, PH_CLOSE, PH_N };
static const char *const PHASE_NAMES[PH_N] = {"create", "read", "histogram", "allreduce", "remap", "write", "close"};
_Static_assert(PH_N == HQ_SUMMARY_PHASES, "the JSON summary lists every phase");

typedef struct group_hist {
    uint64_t group;
    uint64_t *hist; /* nhist * bins counters */
    size_t len;     /* nhist * bins */
    uint16_t *lut;  /* built once the histogram is complete */
    int empty;      /* nothing counted (all masked out or ignored): the pixels are left unchanged */
    int restored;   /* complete already: taken from an interrupted run's journal (--resume) */
} group_hist;

typedef struct my_block {
    const hq_block *b;
    int fused;   /* all its groups end inside it */
    int done;    /* written */
    void *held;  /* pixels kept between the passes (NULL: not read, or dropped) */
    char *why;   /* left out under --on-error skip: the reason */
} my_block;

enum { IO_READ, IO_WRITE };

typedef struct run {
    const hq_options *o;
    const hq_comm *c;
    hq_inventory inv;
    const hq_io_ops *io_ops;
    hq_io *io;
    hq_plan plan;
    hq_engine *eng;
    hq_scope scope;
    uint8_t *item_shared; /* per item: blocks on more than one rank -> collective I/O */
    my_block *mine;       /* this rank's blocks */
    uint64_t nmine;
    group_hist *groups;   /* pending groups this rank touches */
    size_t ngroups, cap_groups;
    uint64_t *shared;     /* groups summed over ranks, ascending, the same list on every rank */
    uint64_t nshared;
    uint64_t held_bytes, budget; /* under mu: I/O threads release held blocks */
    hq_cpus cpus;         /* the CPUs this rank works on (app/placement.h) */
    hq_pipeline_cfg pipe; /* own items' streams: I/O threads and blocks in flight (app/pipeline.h) */
    pthread_mutex_t mu;   /* guards held_bytes and the I/O clocks, which I/O threads share */
    int io_busy[2];       /* reads / writes under way */
    double io_since[2];   /* since when some are */
    pthread_mutex_t tick_mu; /* one progress tick at a time: MPI is initialized SERIALIZED */
    double t[PH_N];
    uint64_t pixels_done, bytes_done; /* written; updated by the thread that writes */
    uint64_t bytes_histogrammed;      /* pending blocks through pass 1, float blocks through pass 0;
                                         updated by the compute thread */
    hq_progress prog;
    uint64_t nskipped;    /* this rank's skipped inputs (their reasons: my_block.why) */
    char *skipped;        /* the reasons, one line each in block order, once the passes are over */
    size_t skipped_len;
    hq_resume res;        /* fresh run, or what an interrupted one did (--resume) */
    hq_journal *journal;  /* this rank's log of finished work; NULL when the output keeps none */
    int sync_fd;          /* the output file, for fdatasync before the journal claims blocks */
    hq_writeback *wb;     /* starts the output's writeback early, so those fdatasyncs are short */
    uint64_t writes;      /* blocks written, for the HQ_FAULT_KILL test hook */
    long kill_after;      /* HQ_FAULT_KILL=RANK:N: this rank kills itself after N writes (tests) */
    hq_report *rep;       /* what the run records: --report and the output's provenance (report/report.h) */
    char *default_output; /* the output named beside the input when --output was not given */
    uint64_t *target;     /* --method match: the target histogram(s), nhist * bins, the same on every rank */
    /* --mask: the mask opened as a second input, read block by block with the image (app/mask.h) */
    hq_mask *mask;
    /* Float data (core/fbin.h): each group's binning, from pass 0's reduced extremes or --range;
     * indexed by group (the image, or 0 under scope global). NULL when no item is float. */
    hq_fbin *fbin;
    uint64_t nfgroups;
    uint8_t *fmine;       /* groups whose binning this rank found itself: whole images in one block,
                             which pass 0 leaves to pass 1 (they are in memory there anyway) */
    hq_frange *facc;      /* pass 0 only: each group's extremes so far */
    uint64_t *finf;       /* pass 0 only: infinite samples met per item */
} run;

/* ---- small facts derived from the inventory and options ---- */

static hq_mode mode_of(const run *r, uint64_t item)
{
    return hq_item_mode(&r->inv.items[item], r->o->bits, r->o->color, r->o->fbins);
}

static size_t hist_len(const hq_mode *m)
{
    return (size_t)hq_mode_nhist(m) * hq_mode_bins(m);
}

static int is_clahe(const run *r)
{
    return r->o->method == HQ_METHOD_CLAHE;
}

/* The item's CLAHE tiles (check_modes has refused the items where the grid does not fit). */
static hq_clahe_geom geom_of(const run *r, uint64_t item)
{
    hq_clahe_geom g = {0};
    hq_clahe_geom_make(&r->o->clahe, r->inv.items[item].height, r->inv.items[item].width, &g);
    return g;
}

/* Counters of one image's histogram group: one histogram per tile under CLAHE. */
static size_t group_len(const run *r, uint64_t item)
{
    const hq_mode m = mode_of(r, item);
    if (!is_clahe(r))
        return hist_len(&m);
    const hq_clahe_geom g = geom_of(r, item);
    return (size_t)hq_clahe_ntiles(&g) * hist_len(&m);
}

static uint64_t block_bytes(const run *r, const hq_block *b)
{
    const hq_item *it = &r->inv.items[b->item];
    return hq_block_pixels(b) * it->channels * it->sample_bytes;
}

/* A block's buffer: its pixels, then its mask plane when it has one (app/mask.h), so that the plane
 * travels with the pixels through the pipeline and between the passes. */
static uint64_t buf_bytes(const run *r, const hq_block *b)
{
    return block_bytes(r, b) + hq_mask_plane_bytes(r->mask, b);
}

static uint64_t image_of(const run *r, const hq_block *b, uint64_t s)
{
    return r->plan.item_image0[b->item] + s;
}

/* The histogram group of a pending block (one that holds part of one group): 0 under scope
 * global; the dataset's first image under scope dataset, so that group numbers stay image numbers
 * (the journal keeps both under one key); the block's image under scope image. */
static uint64_t group_of(const run *r, const hq_block *b)
{
    if (r->scope == HQ_SCOPE_GLOBAL)
        return 0;
    return image_of(r, b, r->scope == HQ_SCOPE_DATASET ? 0 : b->s0);
}

/* The images that share group g's LUT, for the record (provenance, report, journal): the dataset's
 * slices under scope dataset, the image itself under scope image. */
static uint64_t group_images(const run *r, uint64_t item)
{
    return r->scope == HQ_SCOPE_DATASET ? r->inv.items[item].slices : 1;
}

/* A block is fused when every group in it ends inside it: whole images under scope image, the
 * whole dataset under scope dataset, or never under scope global (every rank reduces the one
 * histogram). */
static int is_fused(const run *r, const hq_block *b)
{
    const hq_item *it = &r->inv.items[b->item];
    if (r->scope == HQ_SCOPE_GLOBAL)
        return 0;
    if (r->scope == HQ_SCOPE_DATASET && (b->s0 != 0 || b->s1 != it->slices))
        return 0;
    return hq_block_whole(b, it->height, it->width);
}

/* ---- validation and defaults ---- */

static int check_modes(run *r, hq_err *err)
{
    uint64_t images = 0;
    int first = -1;
    for (size_t i = 0; i < r->inv.n; i++) {
        const hq_item *it = &r->inv.items[i];
        if (it->bad)
            continue;
        images += it->slices;
        /* Signed samples are equalized offset to unsigned (core/sample.h): every bit is significant. */
        if (r->o->bits && it->sample == HQ_SAMPLE_INT && r->o->bits != it->depth)
            return hq_fail(err, HQ_EUSAGE, "%s:%s: --bits does not apply to signed data (int%u: all %u bits are "
                           "equalized)", it->src, it->name, it->depth, it->depth);
        /* --ignore names integer levels and match maps onto integer levels: neither means anything yet
         * for float bins, nor for signed levels (which the engines see offset to unsigned). */
        if (it->sample != HQ_SAMPLE_UINT && (r->o->ignore || r->o->method == HQ_METHOD_MATCH))
            return hq_fail(err, HQ_EUSAGE, "%s:%s: %s does not apply to %s data yet", it->src, it->name,
                           r->o->ignore ? "--ignore" : "--method match",
                           it->sample == HQ_SAMPLE_FLOAT ? "float" : "signed");
        /* CLAHE's tiles count integer levels; signed data, which the engines see offset to unsigned,
         * goes through it as through equalize, float bins do not (yet). */
        if (it->sample == HQ_SAMPLE_FLOAT && is_clahe(r))
            return hq_fail(err, HQ_EUSAGE, "%s:%s: --method clahe does not apply to float data yet", it->src, it->name);
        if (r->o->bits && it->sample != HQ_SAMPLE_FLOAT && r->o->bits > it->depth)
            return hq_fail(err, HQ_EUSAGE, "%s%s%s: --bits %u exceeds the data's %u bits", it->src,
                           r->inv.format == HQ_FMT_HDF5 ? ":" : "", r->inv.format == HQ_FMT_HDF5 ? it->name : "",
                           r->o->bits, it->depth);
        hq_clahe_geom g;
        if (is_clahe(r) && hq_clahe_geom_make(&r->o->clahe, it->height, it->width, &g)) {
            char grid[64];
            if (r->o->clahe.tile)
                snprintf(grid, sizeof grid, "--clahe-tile %llu", (unsigned long long)r->o->clahe.tile);
            else
                snprintf(grid, sizeof grid, "--clahe-grid %llux%llu", (unsigned long long)r->o->clahe.grid_y,
                         (unsigned long long)r->o->clahe.grid_x);
            return hq_fail(err, HQ_EUSAGE, "%s%s%s: %s has more tiles than the image's %llux%llu pixels", it->src,
                           r->inv.format == HQ_FMT_HDF5 ? ":" : "", r->inv.format == HQ_FMT_HDF5 ? it->name : "",
                           grid, (unsigned long long)it->height, (unsigned long long)it->width);
        }
        if (first < 0)
            first = (int)i;
    }
    /* The run ends here, before report_skipped lists the reasons: the line carries the first one. */
    if (first < 0) {
        const char *why = NULL;
        for (size_t i = 0; i < r->inv.n && !why; i++)
            why = r->inv.items[i].why;
        if (!why)
            return hq_fail(err, HQ_EINPUT, "%s: nothing to equalize (every input was left out)", r->o->input);
        return hq_fail(err, HQ_EINPUT, "%s: nothing to equalize (every input was left out%s: %s)", r->o->input,
                       r->inv.n > 1 ? "; the first" : "", why);
    }
    r->scope = r->o->scope != HQ_SCOPE_AUTO ? r->o->scope : images > 1 || is_clahe(r) ? HQ_SCOPE_IMAGE : HQ_SCOPE_GLOBAL;
    /* Match maps every image onto one target: every image must bin alike, as under scope global. */
    if (r->scope != HQ_SCOPE_GLOBAL && r->o->method != HQ_METHOD_MATCH)
        return 0;
    /* One histogram for everything only makes sense if every image bins the same way. */
    const hq_mode m0 = mode_of(r, (uint64_t)first);
    for (size_t i = (size_t)first + 1; i < r->inv.n; i++) {
        if (r->inv.items[i].bad)
            continue;
        hq_mode m = mode_of(r, i);
        if (hq_mode_bins(&m) != hq_mode_bins(&m0) || hq_mode_nhist(&m) != hq_mode_nhist(&m0) ||
            m.sample_bytes != m0.sample_bytes)
            return hq_fail(err, HQ_EUSAGE, "%s: %s needs every image to have the same depth and "
                           "color layout (%s differs from %s)", r->o->input,
                           r->scope == HQ_SCOPE_GLOBAL ? "--scope global" : "--method match", r->inv.items[i].name,
                           r->inv.items[first].name);
    }
    return 0;
}

static uint64_t default_budget(const hq_comm *c)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t ram = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : (uint64_t)4 << 30;
    return ram / 4 / (uint64_t)(c->local_size > 0 ? c->local_size : 1);
}

/* ---- output helpers: rank 0 prints, in rank order where every rank has something to say ---- */

static void say_all(const run *r, const char *line)
{
    enum { LINE = 512 };
    char mine[LINE] = {0};
    snprintf(mine, sizeof mine, "%s", line);
    char *all = r->c->rank == 0 ? malloc((size_t)LINE * (size_t)r->c->size) : NULL;
    MPI_Gather(mine, LINE, MPI_CHAR, all, LINE, MPI_CHAR, 0, r->c->world);
    if (all) {
        for (int k = 0; k < r->c->size; k++)
            fprintf(stderr, "histeq_dist: %.*s\n", LINE, all + (size_t)k * LINE);
        free(all);
    }
}

/* ---- scanning and planning ---- */

/* Rank 0: a --mask that is one of the input's items (FILE.h5:/path inside the input file, a mask
 * PNG inside the input directory) is a mask, not an image: it is left out of the items (and so of
 * the output). */
static void leave_out_mask(run *r)
{
    const char *mask = r->o->mask, *colon = mask ? strrchr(mask, ':') : NULL;
    struct stat sm, si;
    const char *dset = NULL;
    int ok = 0;
    if (mask && r->inv.format == HQ_FMT_PNG) {
        ok = stat(mask, &sm) == 0 && S_ISREG(sm.st_mode);
    } else if (colon && r->inv.format == HQ_FMT_HDF5) {
        char *file = strndup(mask, (size_t)(colon - mask));
        ok = file && stat(file, &sm) == 0;
        free(file);
        dset = colon + 1 + (colon[1] == '/');
    }
    for (size_t i = 0; ok && i < r->inv.n; i++) {
        hq_item *it = &r->inv.items[i];
        const char *name = it->name + (it->name[0] == '/');
        if ((dset && strcmp(name, dset) != 0) || stat(it->src, &si) != 0 || si.st_dev != sm.st_dev ||
            si.st_ino != sm.st_ino)
            continue;
        if (r->inv.n == 1)
            return; /* the only input: an image masked by itself, not left out */
        if (!r->o->quiet)
            fprintf(stderr, "histeq_dist: note: %s%s%s is the mask; it is not equalized\n", it->src, dset ? ":" : "",
                    dset ? it->name : "");
        free(it->src);
        free(it->name);
        free(it->why);
        memmove(it, it + 1, (r->inv.n - i - 1) * sizeof *it);
        r->inv.n--;
        return;
    }
}

static int scan_and_share(run *r, hq_err *err)
{
    int rc = 0;
    unsigned char *buf = NULL;
    uint64_t len = 0;
    if (r->c->rank == 0) {
        rc = hq_io_scan_isolated(r->o->input, r->o->on_error == HQ_ONERR_SKIP, 0, &r->inv, err);
        if (!rc)
            leave_out_mask(r);
        if (!rc)
            rc = hq_inventory_pack(&r->inv, &buf, &len, err);
    }
    if ((rc = hq_comm_agree(r->c, rc, err)))
        return rc;
    rc = hq_comm_bcast_bytes(r->c, &buf, &len, err);
    if (!rc && r->c->rank != 0)
        rc = hq_inventory_unpack(buf, len, &r->inv, err);
    free(buf);
    return hq_comm_agree(r->c, rc, err);
}

/* "1.5 MiB": a size for messages. */
static void size_text(uint64_t bytes, char *buf, size_t len)
{
    static const char *const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", v, units[u]);
}

/* The per-rank memory budget, the same on every rank: the plan depends on it, and every rank must
 * compute the same plan (the default differs between nodes of different sizes: take the smallest). */
static uint64_t agreed_memory(const run *r)
{
    uint64_t m = r->o->memory ? r->o->memory : default_budget(r->c);
    uint64_t least = m;
    MPI_Allreduce(&m, &least, 1, MPI_UINT64_T, MPI_MIN, r->c->world);
    return least;
}

/* --memory bounds what a rank holds of pixels at once: the blocks in flight (the I/O pipeline's
 * depth; the lockstep passes hold one) plus the pending blocks kept for pass 2, which are read
 * again when they do not fit. The depth is HQ_PIPELINE_MIN_DEPTH (3) with one I/O thread, and with
 * several (a format whose blocks may be read and written at once) up to want_depth, as many as
 * the budget holds of the smallest blocks. Blocks shrink to fit (at most budget / depth each), down
 * to the smallest the input allows: an image that must stay whole, a compressed chunk. Below three
 * of those nothing works, and the run is refused before it starts. */
static int fit_memory(run *r, const hq_plan_item *pi, uint64_t memory, int want_depth, uint64_t *block, int *depth,
                      hq_err *err)
{
    size_t which = 0;
    const uint64_t unit = hq_plan_min_block(pi, r->inv.n, &which);
    if (unit > memory / HQ_PIPELINE_MIN_DEPTH) {
        const hq_item *it = &r->inv.items[which];
        const uint64_t need_k = (HQ_PIPELINE_MIN_DEPTH * unit + 1023) / 1024;
        char have[32], one[32];
        size_text(memory, have, sizeof have);
        size_text(unit, one, sizeof one);
        return hq_fail(err, HQ_EUSAGE, "%s%s%s: --memory %s%s is too small: its smallest block is %s (%s) and up "
                       "to %d blocks are in flight at once (more with several I/O threads, as the budget allows); "
                       "use --memory %lluK or more", it->src,
                       r->inv.format == HQ_FMT_HDF5 ? ":" : "", r->inv.format == HQ_FMT_HDF5 ? it->name : "", have,
                       r->o->memory ? "" : " (the default)", one,
                       !pi[which].splittable ? "the whole image" : pi[which].whole_chunks ? "one compressed chunk"
                                                                                          : "one pixel",
                       HQ_PIPELINE_MIN_DEPTH,
                       (unsigned long long)need_k);
    }
    const uint64_t fit = unit ? memory / unit : (uint64_t)want_depth;
    *depth = (uint64_t)want_depth < fit ? want_depth : (int)fit;
    if (*depth < HQ_PIPELINE_MIN_DEPTH)
        *depth = HQ_PIPELINE_MIN_DEPTH;
    *block = r->o->block_bytes < memory / (uint64_t)*depth ? r->o->block_bytes : memory / (uint64_t)*depth;
    return 0;
}

/* Own items' I/O threads: --io-threads, by default one per CPU the rank works on, for a format
 * whose blocks may be read and written at once (io.h `concurrent`); one otherwise. HQ_SERIAL_IO=1
 * makes every call on the main thread, for debugging. */
static void choose_io_threads(run *r)
{
    int n = r->o->io_threads ? r->o->io_threads : r->cpus.cpus;
    if (!r->io_ops->concurrent || n < 1)
        n = 1;
    if (getenv("HQ_SERIAL_IO"))
        n = 0;
    r->pipe.io_threads = n;
}

/* CLAHE keeps every tile histogram and LUT of an image it works on (8 + 2 bytes a counter): refused
 * up front when one image's alone pass the memory budget, rather than failing midway. */
static int check_clahe_memory(const run *r, uint64_t memory, hq_err *err)
{
    for (size_t i = 0; is_clahe(r) && i < r->inv.n; i++) {
        const hq_item *it = &r->inv.items[i];
        const uint64_t need = (uint64_t)group_len(r, i) * (sizeof(uint64_t) + sizeof(uint16_t));
        if (it->bad || need <= memory)
            continue;
        char have[32], want[32];
        size_text(memory, have, sizeof have);
        size_text(need, want, sizeof want);
        const hq_clahe_geom g = geom_of(r, i);
        return hq_fail(err, HQ_EUSAGE, "%s%s%s: CLAHE holds the image's %llux%llu tile histograms (%s), more than "
                       "--memory %s: use fewer tiles (--clahe-grid, --clahe-tile), fewer --bits or more --memory",
                       it->src, r->inv.format == HQ_FMT_HDF5 ? ":" : "", r->inv.format == HQ_FMT_HDF5 ? it->name : "",
                       (unsigned long long)g.tiles_y, (unsigned long long)g.tiles_x, want, have);
    }
    return 0;
}

static int make_plan(run *r, hq_err *err)
{
    const uint64_t memory = agreed_memory(r);
    /* The plan depends on the depth, so every rank takes the deepest any rank wants (their cores
     * may differ); a rank with fewer I/O threads merely reads further ahead. */
    const uint64_t want = hq_comm_max_u64(r->c, (uint64_t)hq_pipeline_depth_for(r->pipe.io_threads));
    int mrc = check_clahe_memory(r, memory, err);
    if (mrc)
        return mrc;
    hq_plan_item *pi = calloc(r->inv.n ? r->inv.n : 1, sizeof *pi);
    if (!pi)
        return hq_fail(err, HQ_EMEM, "plan: out of memory");
    for (size_t i = 0; i < r->inv.n; i++) {
        const hq_item *it = &r->inv.items[i];
        pi[i] = (hq_plan_item){it->slices,       it->height,       it->width,       (uint64_t)it->channels * it->sample_bytes,
                               r->inv.format == HQ_FMT_HDF5,       (int)it->bad,    it->chunk_slices,
                               it->chunk_height, it->chunk_width,  (int)it->collective};
    }
    uint64_t block = 0;
    int rc = fit_memory(r, pi, memory, (int)want, &block, &r->pipe.depth, err);
    if (!rc)
        rc = hq_plan_make(pi, r->inv.n, r->c->size, block, &r->plan, err);
    free(pi);
    if (rc)
        return rc;
    const uint64_t in_flight = (uint64_t)r->pipe.depth * r->plan.max_block_bytes;
    r->budget = memory > in_flight ? memory - in_flight : 0;
    return 0;
}

typedef struct part_of {
    uint64_t image;
    int owner;
} part_of;

static int by_image_owner(const void *a, const void *b)
{
    const part_of *x = a, *y = b;
    if (x->image != y->image)
        return x->image < y->image ? -1 : 1;
    return (x->owner > y->owner) - (x->owner < y->owner);
}

/* Items with blocks on more than one rank need collective I/O. */
static int find_shared_items(run *r)
{
    const hq_plan *p = &r->plan;
    int *owner = malloc((r->inv.n ? r->inv.n : 1) * sizeof *owner);
    if (!owner)
        return -1;
    for (size_t i = 0; i < r->inv.n; i++)
        owner[i] = -1;
    for (int k = 0; k < p->nranks; k++)
        for (uint64_t j = p->first[k]; j < p->first[k + 1]; j++) {
            const uint64_t it = p->blocks[j].item;
            if (owner[it] < 0)
                owner[it] = k;
            else if (owner[it] != k)
                r->item_shared[it] = 1;
        }
    free(owner);
    return 0;
}

/* Under scope image (dataset), the images (datasets) whose pending blocks lie on more than one
 * rank: their histograms are summed over ranks. The same ascending list of groups on every rank. */
static int find_shared_images(run *r)
{
    const hq_plan *p = &r->plan;
    uint64_t n = 0;
    for (uint64_t j = 0; j < p->nblocks; j++)
        n += !is_fused(r, &p->blocks[j]);
    part_of *parts = malloc((n ? n : 1) * sizeof *parts);
    if (!parts)
        return -1;
    n = 0;
    for (int k = 0; k < p->nranks; k++)
        for (uint64_t j = p->first[k]; j < p->first[k + 1]; j++)
            if (!is_fused(r, &p->blocks[j]))
                parts[n++] = (part_of){group_of(r, &p->blocks[j]), k};
    qsort(parts, n, sizeof *parts, by_image_owner);
    uint64_t distinct = 0;
    for (uint64_t j = 0; j < n; j++)
        distinct += j == 0 || parts[j].image != parts[j - 1].image;
    r->shared = calloc(distinct + 1, sizeof *r->shared);
    if (!r->shared) {
        free(parts);
        return -1;
    }
    for (uint64_t j = 1; j < n; j++)
        if (parts[j].image == parts[j - 1].image && parts[j].owner != parts[j - 1].owner &&
            (r->nshared == 0 || r->shared[r->nshared - 1] != parts[j].image))
            r->shared[r->nshared++] = parts[j].image;
    free(parts);
    return 0;
}

/* Which items need collective I/O, which groups need summing over ranks, which blocks are mine. */
static int classify_work(run *r, hq_err *err)
{
    const hq_plan *p = &r->plan;
    r->item_shared = calloc(r->inv.n ? r->inv.n : 1, 1);
    if (!r->item_shared || find_shared_items(r))
        return hq_fail(err, HQ_EMEM, "plan: out of memory");
    if (r->scope != HQ_SCOPE_GLOBAL) {
        if (find_shared_images(r))
            return hq_fail(err, HQ_EMEM, "plan: out of memory");
    } else {
        /* The global histogram is always reduced, even on one rank with work: every rank needs it
         * for the output's metadata, and the collective call costs nothing next to the data. */
        r->shared = calloc(1, sizeof *r->shared);
        if (!r->shared)
            return hq_fail(err, HQ_EMEM, "plan: out of memory");
        r->shared[r->nshared++] = 0;
    }
    /* Items that must be transferred collectively join the lockstep walk even when one rank owns
     * them (with several ranks; alone, every call is trivially collective). */
    for (size_t i = 0; i < r->inv.n; i++)
        if (r->inv.items[i].collective && p->nranks > 1)
            r->item_shared[i] = 1;
    const uint64_t f = p->first[r->c->rank], l = p->first[r->c->rank + 1];
    r->nmine = l - f;
    r->mine = calloc(r->nmine ? r->nmine : 1, sizeof *r->mine);
    if (!r->mine)
        return hq_fail(err, HQ_EMEM, "plan: out of memory");
    for (uint64_t k = 0; k < r->nmine; k++) {
        r->mine[k].b = &p->blocks[f + k];
        r->mine[k].fused = is_fused(r, r->mine[k].b);
    }
    return 0;
}

/* ---- pending group histograms ---- */

/* len: the group's counters, for creating it (0: find only). */
static group_hist *find_group(run *r, uint64_t g, size_t len)
{
    for (size_t i = 0; i < r->ngroups; i++)
        if (r->groups[i].group == g)
            return &r->groups[i];
    if (!len)
        return NULL;
    if (r->ngroups == r->cap_groups) {
        size_t cap = r->cap_groups ? r->cap_groups * 2 : 8;
        group_hist *n = realloc(r->groups, cap * sizeof *n);
        if (!n)
            return NULL;
        r->groups = n;
        r->cap_groups = cap;
    }
    group_hist *gh = &r->groups[r->ngroups];
    gh->group = g;
    gh->restored = 0;
    gh->empty = 0;
    gh->len = len;
    gh->hist = calloc(len, sizeof *gh->hist);
    gh->lut = malloc(len * sizeof *gh->lut);
    if (!gh->hist || !gh->lut) {
        free(gh->hist);
        free(gh->lut);
        return NULL;
    }
    r->ngroups++;
    return gh;
}

static void drop_group(run *r, uint64_t g)
{
    for (size_t i = 0; i < r->ngroups; i++) {
        if (r->groups[i].group != g)
            continue;
        free(r->groups[i].hist);
        free(r->groups[i].lut);
        r->groups[i] = r->groups[--r->ngroups];
        return;
    }
}

/* --ignore: the ignored levels' counts dropped from a histogram (exact: a pixel adds to exactly one
 * bin of each of the mode's histograms, so zeroing a bin removes exactly the pixels at that level). */
static void ignore_bins(const run *r, const hq_mode *m, uint64_t *hist)
{
    const uint32_t bins = hq_mode_bins(m);
    if (!r->o->ignore || r->o->ignore_lo >= bins)
        return;
    const uint32_t hi = r->o->ignore_hi < bins ? r->o->ignore_hi : bins - 1;
    for (uint32_t h = 0; h < hq_mode_nhist(m); h++)
        for (uint32_t v = r->o->ignore_lo; v <= hi; v++)
            hist[(size_t)h * bins + v] = 0;
}

/* The item holding global image g. */
static uint64_t item_of_image(const run *r, uint64_t g)
{
    uint64_t i = 0;
    while (i + 1 < r->plan.nitems && r->plan.item_image0[i + 1] <= g)
        i++;
    return i;
}

/* Said once per group, by the rank that speaks for its first image. */
static void note_nothing_counted(const run *r, uint64_t group)
{
    const uint64_t image = r->scope == HQ_SCOPE_GLOBAL ? 0 : group;
    if (r->o->quiet || hq_plan_image_owner(&r->plan, image) != r->c->rank)
        return;
    if (r->scope == HQ_SCOPE_GLOBAL) {
        fprintf(stderr, "histeq_dist: note: %s: nothing counted (every pixel masked out or ignored); the images "
                "are left unchanged\n", r->o->input);
        return;
    }
    const hq_item *it = &r->inv.items[item_of_image(r, image)];
    const int hdf5 = r->inv.format == HQ_FMT_HDF5;
    char slice[48] = "";
    if (it->slices > 1 && r->scope != HQ_SCOPE_DATASET)
        snprintf(slice, sizeof slice, " slice %llu", (unsigned long long)(image - r->plan.item_image0[item_of_image(r, image)]));
    fprintf(stderr, "histeq_dist: note: %s%s%s%s: nothing counted (every pixel masked out or ignored); left "
            "unchanged\n", it->src, hdf5 ? ":" : "", hdf5 ? it->name : "", slice);
}

static int threads_per_rank(const run *r);

/* CLAHE: every tile's LUT, tiles in parallel (each is independent and exact). */
static int build_clahe_luts(const run *r, uint64_t item, const uint64_t *hist, uint16_t *lut)
{
    const hq_mode m = mode_of(r, item);
    const hq_clahe_geom g = geom_of(r, item);
    const uint32_t bins = hq_mode_bins(&m);
    const uint64_t n = hq_clahe_ntiles(&g) * hq_mode_nhist(&m), area = hq_clahe_area(&g);
    const int64_t limit = hq_clahe_clip_limit(r->o->clahe.clip, area, bins);
    const int t = threads_per_rank(r), threads = t > 0 ? t : 1;
    uint64_t *scratch = malloc((size_t)threads * bins * sizeof *scratch);
    if (!scratch)
        return -1;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int64_t k = 0; k < (int64_t)n; k++)
        hq_clahe_tile_lut(hist + (uint64_t)k * bins, bins, area, limit, lut + (uint64_t)k * bins,
                          scratch + (size_t)omp_get_thread_num() * bins);
    free(scratch);
    return 0;
}

/* The LUTs of one group from its complete histogram: --ignore's levels dropped first, then the
 * method's rule (match: onto r->target; clahe: every tile's, core/clahe.h, which takes neither
 * --ignore nor --mask: app/options.c refuses them). With --ignore and --mask-apply inside, ignored
 * levels map to themselves, which leaves gray, value and channels pixels exactly as they were
 * (luma pixels are kept by the mask plane instead: app/mask.h). Each image of the group records
 * the LUT. Returns 1 when nothing was counted, -1 when out of memory (CLAHE), else 0. */
static int build_luts(const run *r, const hq_mode *m, uint64_t item, uint64_t group, uint64_t *hist, uint16_t *lut)
{
    const uint32_t bins = hq_mode_bins(m), nh = hq_mode_nhist(m);
    if (is_clahe(r)) {
        if (build_clahe_luts(r, item, hist, lut))
            return -1;
    } else {
        ignore_bins(r, m, hist);
        for (uint32_t h = 0; h < nh; h++) {
            if (r->o->method == HQ_METHOD_MATCH)
                hq_lut_match(hist + (size_t)h * bins, r->target + (size_t)h * bins, bins, lut + (size_t)h * bins);
            else
                hq_lut_build(r->o->method, hist + (size_t)h * bins, bins, lut + (size_t)h * bins);
            if (r->o->ignore && r->o->mask_inside)
                for (uint32_t v = r->o->ignore_lo; v <= r->o->ignore_hi && v < bins; v++)
                    lut[(size_t)h * bins + v] = (uint16_t)v;
        }
    }
    if (r->scope == HQ_SCOPE_GLOBAL)
        hq_report_lut(r->rep, group, hist, lut); /* a no-op: the global LUT is recorded at close */
    else
        for (uint64_t s = 0; s < group_images(r, item); s++)
            hq_report_lut(r->rep, group + s, hist, lut);
    /* CLAHE counts every padded position of every tile: never empty. */
    const int empty = !is_clahe(r) && hq_hist_total(hist, nh * bins) == 0;
    if (empty)
        note_nothing_counted(r, group);
    return empty;
}

/* ---- one block through the engine ---- */

/* remap: 1 for a remap's view (the mask plane goes along only with --mask-apply inside). */
static hq_block_data block_view(const run *r, const hq_block *b, void *data, int per_image, int remap)
{
    const uint64_t px = hq_block_pixels(b);
    hq_block_data d = {data, 1, px, 0, NULL, NULL};
    if (hq_mask_plane_bytes(r->mask, b) && (!remap || r->o->mask_inside))
        d.mask = (const uint8_t *)data + block_bytes(r, b);
    if (per_image && b->s1 - b->s0 > 1) {
        d.nseg = b->s1 - b->s0;
        d.seg_pixels = px / d.nseg;
    }
    /* Segments are consecutive images, hence consecutive groups (or the one global group). */
    if (r->fbin && r->inv.items[b->item].sample == HQ_SAMPLE_FLOAT)
        d.fbin = &r->fbin[group_of(r, b)];
    return d;
}

/* Progress counts each block's bytes twice: once histogrammed, once written. Several I/O threads
 * may finish blocks at once; the tick (an MPI call) is made by one of them, the others go on. */
static void tick(run *r)
{
    if (pthread_mutex_trylock(&r->tick_mu) != 0)
        return;
    const uint64_t w = __atomic_load_n(&r->bytes_done, __ATOMIC_RELAXED);
    const uint64_t h = __atomic_load_n(&r->bytes_histogrammed, __ATOMIC_RELAXED);
    hq_progress_tick(&r->prog, __atomic_load_n(&r->pixels_done, __ATOMIC_RELAXED), w + h);
    pthread_mutex_unlock(&r->tick_mu);
}

/* Read and write time is wall time during which at least one read (write) was under way: with
 * several I/O threads, calls that overlap count once, so the phases still add up to the run. */
static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void io_enter(run *r, int k)
{
    pthread_mutex_lock(&r->mu);
    if (r->io_busy[k]++ == 0)
        r->io_since[k] = mono_now();
    pthread_mutex_unlock(&r->mu);
}

static void io_leave(run *r, int k)
{
    pthread_mutex_lock(&r->mu);
    if (--r->io_busy[k] == 0)
        r->t[k == IO_READ ? PH_READ : PH_WRITE] += mono_now() - r->io_since[k];
    pthread_mutex_unlock(&r->mu);
}

/* ---- the journal (--resume) ---- */

static int global_mode(const run *r, hq_mode *m);
static void replay_images(run *r);
static int is_shared_group(const run *r, uint64_t g);

/* Writes of this item change the file's metadata (chunk indexes) that only a collective flush
 * makes durable; with one rank any flush is collective. */
static int needs_round_flush(const run *r, uint64_t item)
{
    return r->journal && r->inv.items[item].collective && r->c->size > 1;
}

/* The journal's flush calls this first: the output's data (and, with one rank, HDF5's metadata)
 * reach the disk before any record claims them. */
static int sync_output(void *ctx, hq_err *err)
{
    run *r = ctx;
    int rc = r->io_ops->flush ? r->io_ops->flush(r->io, 0, err) : 0;
    if (!rc && r->sync_fd >= 0 && fdatasync(r->sync_fd) != 0)
        rc = hq_fail(err, HQ_EIO, "%s: cannot sync the output to disk", r->o->output);
    return rc;
}

static int note_written(run *r, const hq_block *b, hq_err *err)
{
    int rc = hq_journal_note_block(r->journal, b, err);
    /* Test hook: a rank dies here as under kill -9, its records flushed or not per the journal's
     * flush interval; the job must fail and --resume must finish it. */
    if (r->kill_after > 0 && __atomic_add_fetch(&r->writes, 1, __ATOMIC_RELAXED) >= (uint64_t)r->kill_after)
        raise(SIGKILL);
    return rc;
}

/* After a lockstep round of collective writes: every rank flushes, then claims its block. */
static int flush_round(run *r, uint64_t item, const hq_block *written, int rc, hq_err *err)
{
    if (!needs_round_flush(r, item))
        return rc;
    hq_err scratch;
    int rc2 = r->io_ops->flush(r->io, 1, rc ? &scratch : err);
    if (!rc && !rc2 && written)
        rc2 = note_written(r, written, err);
    return rc ? rc : rc2;
}

static void parse_kill_hook(run *r)
{
    const char *s = getenv("HQ_FAULT_KILL");
    int rank;
    long n;
    if (s && sscanf(s, "%d:%ld", &rank, &n) == 2 && rank == r->c->rank)
        r->kill_after = n;
}

static double journal_flush_interval(void)
{
    const char *s = getenv("HQ_JOURNAL_FLUSH_S"); /* 0 in tests: every record at once */
    return s ? atof(s) : 1.0;
}

static int open_journal(run *r, hq_err *err)
{
    r->sync_fd = -1;
    if (r->res.action != HQ_RESUME_FRESH && r->res.action != HQ_RESUME_CONTINUE)
        return 0;
    int rc = 0;
    if (r->res.action == HQ_RESUME_FRESH && r->c->rank == 0)
        rc = hq_journal_create(r->o->output, r->res.id, err);
    if ((rc = hq_comm_agree(r->c, rc, err)))
        return rc;
    const char *sp = r->io_ops->sync_path ? r->io_ops->sync_path(r->io) : NULL;
    if (sp)
        r->sync_fd = open(sp, O_RDONLY);
    rc = hq_journal_open(r->o->output, r->c->rank, sync_output, r, journal_flush_interval(), &r->journal, err);
    return hq_comm_agree(r->c, rc, err);
}

/* The blocks and histograms an interrupted run finished: its blocks are not done again, its
 * histograms are not summed again. */
static int apply_journal(run *r, uint64_t *done_pixels, uint64_t *done_bytes, hq_err *err)
{
    const hq_journal_state *st = &r->res.st;
    for (uint64_t j = 0; j < r->nmine; j++) {
        my_block *mb = &r->mine[j];
        if (!hq_journal_has_block(st, mb->b))
            continue;
        mb->done = 1;
        *done_pixels += hq_block_pixels(mb->b);
        *done_bytes += 2 * block_bytes(r, mb->b);
    }
    for (uint64_t k = 0; k < st->nhists; k++) {
        const hq_journal_hist *h = &st->hists[k];
        hq_mode m;
        size_t len = 0; /* the group's counters: one histogram, or one per tile under CLAHE */
        if (r->scope == HQ_SCOPE_GLOBAL && h->group == 0 && global_mode(r, &m))
            len = hist_len(&m);
        for (uint64_t j = 0; !len && j < r->nmine; j++) {
            const hq_block *b = r->mine[j].b;
            if (!r->mine[j].fused && group_of(r, b) == h->group)
                len = group_len(r, b->item);
        }
        /* A shared CLAHE image's journaled tile histograms are complete only in the rows that rank
         * needed under the interrupted run's plan: its pass 1 is done again. */
        if (!len || (is_clahe(r) && is_shared_group(r, h->group)))
            continue;
        group_hist *gh = find_group(r, h->group, len);
        if (!gh)
            return hq_fail(err, HQ_EMEM, "out of memory for a histogram");
        if (gh->len != h->n)
            return hq_fail(err, HQ_EUSAGE, "%s: cannot resume: the journal's histogram %llu has %llu bins, not %zu",
                           r->o->output, (unsigned long long)h->group, (unsigned long long)h->n, gh->len);
        memcpy(gh->hist, h->counts, h->n * sizeof *gh->hist);
        gh->restored = 1;
    }
    replay_images(r);
    return 0;
}

/* What the output and the report record of an image finished in one go, for a resume to have. */
static int journal_image(run *r, uint64_t image, const uint64_t *hist, const uint16_t *lut, size_t n, hq_err *err)
{
    int want_lut = 0, want_hist = 0;
    if (!r->journal || !hq_report_wants(r->rep, image, &want_lut, &want_hist))
        return 0;
    int rc = want_lut ? hq_journal_note_lut(r->journal, image, lut, n, err) : 0;
    return !rc && want_hist ? hq_journal_note_hist(r->journal, image, hist, n, err) : rc;
}

/* The LUTs (and sampled histograms) of the images an interrupted run finished, handed to the
 * report as if just built. */
static void replay_images(run *r)
{
    for (uint64_t j = 0; j < r->nmine; j++) {
        const my_block *mb = &r->mine[j];
        if (!mb->done || !mb->fused)
            continue;
        for (uint64_t s = mb->b->s0; s < mb->b->s1; s++) {
            const uint64_t image = image_of(r, mb->b, s);
            const hq_journal_lut *l = hq_journal_find_lut(&r->res.st, image);
            const hq_journal_hist *h = hq_journal_find_hist(&r->res.st, image);
            if (l)
                hq_report_lut(r->rep, image, h && h->n == l->n ? h->counts : NULL, l->lut);
        }
    }
}

/* A block whose pass-1 work is already done: written (fused), or its group's histogram restored
 * (pending: a pending block written but without its histogram is read again, as pass 1 needs
 * every block of its group). */
static int pass1_done(run *r, const my_block *mb)
{
    if (mb->fused)
        return mb->done;
    const group_hist *gh = find_group(r, group_of(r, mb->b), 0);
    return gh && gh->restored;
}

static int timed_read(run *r, const hq_block *b, uint64_t item, int collective, void **data, hq_err *err)
{
    io_enter(r, IO_READ);
    *data = NULL;
    if (b) {
        *data = hq_block_alloc(r->eng, buf_bytes(r, b));
        if (!*data) {
            io_leave(r, IO_READ);
            return hq_fail(err, HQ_EMEM, "%s: out of memory for a block of %llu bytes (lower --block)",
                           r->inv.items[item].src, (unsigned long long)buf_bytes(r, b));
        }
    }
    int rc = r->io_ops->read_block(r->io, item, b, collective, *data, err);
    if (!rc && *data && r->inv.items[item].sample == HQ_SAMPLE_INT)
        hq_sample_flip(*data, hq_block_pixels(b) * r->inv.items[item].channels, r->inv.items[item].sample_bytes);
    if (!rc && b && hq_mask_plane_bytes(r->mask, b))
        rc = hq_mask_read(r->mask, b, *data, (uint8_t *)*data + block_bytes(r, b), err);
    io_leave(r, IO_READ);
    if (rc) {
        hq_block_free(r->eng, *data);
        *data = NULL;
    }
    return rc;
}

static int timed_write(run *r, const hq_block *b, uint64_t item, int collective, const void *data, hq_err *err)
{
    io_enter(r, IO_WRITE);
    /* Signed data back from the offset form for the file, and again after: the caller's pixels are
     * const here (and the block is this thread's alone while it is written). */
    const int flip = b && data && r->inv.items[item].sample == HQ_SAMPLE_INT;
    const uint64_t nflip = flip ? hq_block_pixels(b) * r->inv.items[item].channels : 0;
    if (flip)
        hq_sample_flip((void *)data, nflip, r->inv.items[item].sample_bytes);
    int rc = r->io_ops->write_block(r->io, item, b, collective, data, err);
    if (flip)
        hq_sample_flip((void *)data, nflip, r->inv.items[item].sample_bytes);
    if (!rc && b) {
        hq_writeback_kick(r->wb);
        __atomic_add_fetch(&r->pixels_done, hq_block_pixels(b), __ATOMIC_RELAXED);
        __atomic_add_fetch(&r->bytes_done, block_bytes(r, b), __ATOMIC_RELAXED);
        /* Compressed datasets written by several ranks are claimed after their round's flush.
         * A journal flush syncs the output to disk: write time too. */
        if (!needs_round_flush(r, item))
            rc = note_written(r, b, err);
    }
    io_leave(r, IO_WRITE);
    tick(r);
    return rc;
}

/* CLAHE, fused: each image of the block whole, one after the other (a 16-bit image's tile
 * histograms alone take tens of MiB). */
static int clahe_fused(run *r, const hq_block *b, void *data, hq_err *err)
{
    const hq_mode m = mode_of(r, b->item);
    const hq_clahe_geom g = geom_of(r, b->item);
    const size_t len = group_len(r, b->item);
    const uint64_t nseg = b->s1 - b->s0, seg_px = hq_block_pixels(b) / nseg;
    const uint64_t seg_bytes = seg_px * m.channels * m.sample_bytes;
    uint64_t *hist = malloc(len * sizeof *hist);
    uint16_t *lut = malloc(len * sizeof *lut);
    int rc = 0;
    if (!hist || !lut)
        rc = hq_fail(err, HQ_EMEM, "%s: out of memory for %zu CLAHE counters", r->inv.items[b->item].src, len);
    hq_report_pixels(r->rep, b, data, 0);
    for (uint64_t s = 0; s < nseg && !rc; s++) {
        hq_clahe_piece pc = {(uint8_t *)data + s * seg_bytes, 0, 0, g.height, g.width};
        memset(hist, 0, len * sizeof *hist);
        double t0 = hq_now();
        rc = r->eng->ops->clahe_histogram(r->eng, &pc, &m, &g, hist, err);
        r->t[PH_HIST] += hq_now() - t0;
        t0 = hq_now();
        const uint64_t image = image_of(r, b, b->s0 + s);
        if (!rc && build_luts(r, &m, b->item, image, hist, lut) < 0)
            rc = hq_fail(err, HQ_EMEM, "%s: out of memory building CLAHE LUTs", r->inv.items[b->item].src);
        if (!rc)
            rc = journal_image(r, image, hist, lut, len, err);
        if (!rc)
            rc = r->eng->ops->clahe_remap(r->eng, &pc, &m, &g, lut, err);
        r->t[PH_REMAP] += hq_now() - t0;
    }
    if (!rc) {
        __atomic_add_fetch(&r->bytes_histogrammed, block_bytes(r, b), __ATOMIC_RELAXED);
        hq_report_pixels(r->rep, b, data, 1);
    }
    free(hist);
    free(lut);
    return rc;
}

/* An engine refuses infinite float samples without knowing the file: name it. */
static int name_float_failure(const run *r, uint64_t item, int rc, hq_err *err)
{
    if (rc != HQ_EINPUT || r->inv.items[item].sample != HQ_SAMPLE_FLOAT)
        return rc;
    hq_err e = *err;
    return hq_fail(err, rc, "%s:%s: %s; float data must be finite or NaN", r->inv.items[item].src,
                   r->inv.items[item].name, e.msg);
}

/* Float data, whole images in one block, no --range: pass 0 left their extremes to be found here,
 * from the pixels in memory, by this rank alone (no other rank has any of them). */
static int fused_ranges(run *r, const hq_block *b, const hq_block_data *d, const hq_mode *m, hq_err *err)
{
    if (!m->fbins || r->o->range_set || !r->eng->ops->minmax)
        return 0;
    hq_frange *mm = malloc(d->nseg * sizeof *mm);
    if (!mm)
        return hq_fail(err, HQ_EMEM, "%s: out of memory for %llu ranges", r->inv.items[b->item].src,
                       (unsigned long long)d->nseg);
    for (uint64_t s = 0; s < d->nseg; s++)
        mm[s] = hq_frange_empty();
    int rc = r->eng->ops->minmax(r->eng, d, m, mm, err);
    for (uint64_t s = 0; s < d->nseg && !rc; s++) {
        const uint64_t g = image_of(r, b, b->s0 + s); /* the group: the image, or the dataset's first */
        if (mm[s].inf)
            rc = hq_fail(err, HQ_EINPUT, "%s:%s: %llu infinite sample%s (+inf or -inf); float data must be finite or "
                         "NaN", r->inv.items[b->item].src, r->inv.items[b->item].name, (unsigned long long)mm[s].inf,
                         mm[s].inf == 1 ? "" : "s");
        else
            r->fbin[g] = mm[s].lo <= mm[s].hi ? hq_fbin_make(mm[s].lo, mm[s].hi, r->o->fbins)
                                              : hq_fbin_make(NAN, NAN, r->o->fbins);
        r->fmine[g] = 1;
    }
    free(mm);
    return rc;
}

/* Fused: every image of the block is complete here, so histogram, LUT and remap happen at once. */
static int equalize_fused(run *r, const hq_block *b, void *data, hq_err *err)
{
    if (is_clahe(r))
        return clahe_fused(r, b, data, err);
    const hq_mode m = mode_of(r, b->item);
    /* One histogram per image, or one for the whole dataset (scope dataset: the block is all of it). */
    hq_block_data d = block_view(r, b, data, r->scope != HQ_SCOPE_DATASET, 0);
    const size_t hl = hist_len(&m);
    uint64_t *hist = calloc(d.nseg * hl, sizeof *hist);
    uint16_t *lut = malloc(d.nseg * hl * sizeof *lut);
    uint64_t **hp = malloc(d.nseg * sizeof *hp);
    const uint16_t **lp = malloc(d.nseg * sizeof *lp);
    int rc = HQ_EMEM;
    if (!hist || !lut || !hp || !lp) {
        hq_fail(err, rc, "%s: out of memory for %llu histograms", r->inv.items[b->item].src,
                (unsigned long long)d.nseg);
        goto done;
    }
    for (uint64_t s = 0; s < d.nseg; s++) {
        hp[s] = hist + s * hl;
        lp[s] = lut + s * hl;
    }
    double t0 = hq_now();
    rc = fused_ranges(r, b, &d, &m, err);
    if (!rc)
        rc = name_float_failure(r, b->item, r->eng->ops->histogram(r->eng, &d, &m, hp, err), err);
    r->t[PH_HIST] += hq_now() - t0;
    if (rc)
        goto done;
    __atomic_add_fetch(&r->bytes_histogrammed, block_bytes(r, b), __ATOMIC_RELAXED);
    hq_report_pixels(r->rep, b, data, 0);
    t0 = hq_now();
    uint64_t empties = 0;
    for (uint64_t s = 0; s < d.nseg && !rc; s++) {
        const uint64_t group = image_of(r, b, b->s0 + s);
        const int e = build_luts(r, &m, b->item, group, hp[s], lut + s * hl);
        if (e < 0) {
            rc = hq_fail(err, HQ_EMEM, "%s: out of memory building LUTs", r->inv.items[b->item].src);
            break;
        }
        if (e) {
            hp[s] = NULL; /* marks a segment left as it is */
            empties++;
        }
        for (uint64_t k = 0; k < group_images(r, b->item) && !rc; k++)
            rc = journal_image(r, group + k, hist + s * hl, lut + s * hl, hl, err);
    }
    if (rc)
        goto done;
    hq_block_data dr = block_view(r, b, data, r->scope != HQ_SCOPE_DATASET, 1);
    if (empties == 0) {
        dr.same_as_histogram = 1;
        rc = r->eng->ops->remap(r->eng, &dr, &m, lp, err);
    } else {
        /* An image with nothing counted comes back exactly as it was (an identity LUT alone would
         * still move luma ties): the others are remapped one by one. */
        const size_t px_bytes = (size_t)m.channels * m.sample_bytes;
        for (uint64_t s = 0; s < d.nseg && !rc && empties < d.nseg; s++) {
            if (!hp[s])
                continue;
            hq_block_data one = {(char *)data + s * dr.seg_pixels * px_bytes, 1, dr.seg_pixels, 0,
                                 dr.mask ? dr.mask + s * dr.seg_pixels : NULL, dr.fbin ? dr.fbin + s : NULL};
            rc = r->eng->ops->remap(r->eng, &one, &m, &lp[s], err);
        }
    }
    r->t[PH_REMAP] += hq_now() - t0;
    if (!rc)
        hq_report_pixels(r->rep, b, data, 1);
done:
    free(hist);
    free(lut);
    free(hp);
    free(lp);
    return rc;
}

/* Pending: add the block to its group's histogram (the blocks of a pending group are one image, one
 * dataset, or everything under scope global). */
static int histogram_pending(run *r, const hq_block *b, void *data, hq_err *err)
{
    const hq_mode m = mode_of(r, b->item);
    hq_block_data d = block_view(r, b, data, 0, 0);
    group_hist *gh = find_group(r, group_of(r, b), group_len(r, b->item));
    if (!gh)
        return hq_fail(err, HQ_EMEM, "%s: out of memory for a histogram", r->inv.items[b->item].src);
    double t0 = hq_now();
    uint64_t *hp[1] = {gh->hist};
    int rc;
    if (is_clahe(r)) {
        const hq_clahe_geom g = geom_of(r, b->item);
        hq_clahe_piece pc = {data, b->r0, b->c0, b->r1 - b->r0, b->c1 - b->c0};
        rc = r->eng->ops->clahe_histogram(r->eng, &pc, &m, &g, gh->hist, err);
    } else {
        rc = name_float_failure(r, b->item, r->eng->ops->histogram(r->eng, &d, &m, hp, err), err);
    }
    r->t[PH_HIST] += hq_now() - t0;
    if (!rc) {
        __atomic_add_fetch(&r->bytes_histogrammed, block_bytes(r, b), __ATOMIC_RELAXED);
        hq_report_pixels(r->rep, b, data, 0);
    }
    return rc;
}

static int remap_pending(run *r, const hq_block *b, void *data, hq_err *err)
{
    const hq_mode m = mode_of(r, b->item);
    hq_block_data d = block_view(r, b, data, 0, 1);
    group_hist *gh = find_group(r, group_of(r, b), 0);
    if (!gh)
        return hq_fail(err, HQ_EIO, "%s: internal error: no histogram for a pending block", r->inv.items[b->item].src);
    double t0 = hq_now();
    const uint16_t *lp[1] = {gh->lut};
    int rc = 0;
    if (gh->empty) {
        rc = 0;
    } else if (is_clahe(r)) {
        const hq_clahe_geom g = geom_of(r, b->item);
        hq_clahe_piece pc = {data, b->r0, b->c0, b->r1 - b->r0, b->c1 - b->c0};
        rc = r->eng->ops->clahe_remap(r->eng, &pc, &m, &g, gh->lut, err);
    } else {
        rc = r->eng->ops->remap(r->eng, &d, &m, lp, err);
    }
    r->t[PH_REMAP] += hq_now() - t0;
    if (!rc)
        hq_report_pixels(r->rep, b, data, 1);
    return rc;
}

/* Keeps a pending block's pixels for pass 2 if the budget allows; otherwise pass 2 re-reads them. */
static void hold_or_drop(run *r, my_block *mb, void *data)
{
    uint64_t n = buf_bytes(r, mb->b);
    pthread_mutex_lock(&r->mu);
    const int keep = r->held_bytes + n <= r->budget;
    if (keep)
        r->held_bytes += n;
    pthread_mutex_unlock(&r->mu);
    if (keep)
        mb->held = data;
    else
        hq_block_free(r->eng, data);
}

/* Done with a block's pixels: held ones leave the budget, freshly read ones are simply freed. */
static void release(run *r, my_block *mb, void *data)
{
    if (mb->held) {
        pthread_mutex_lock(&r->mu);
        r->held_bytes -= buf_bytes(r, mb->b);
        pthread_mutex_unlock(&r->mu);
        hq_block_free(r->eng, mb->held);
        mb->held = NULL;
    } else {
        hq_block_free(r->eng, data);
    }
}

/* A bad PNG met while decoding: with --on-error skip it is listed and left out, not fatal. The
 * reason stays with its block (I/O threads decode in any order), listed in block order at the end. */
static int maybe_skip(run *r, my_block *mb, int rc, const hq_err *err)
{
    if (!rc || r->o->on_error != HQ_ONERR_SKIP || r->inv.format != HQ_FMT_PNG || rc != HQ_EINPUT)
        return rc;
    free(mb->why);
    mb->why = strdup(err->msg);
    __atomic_add_fetch(&r->nskipped, 1, __ATOMIC_RELAXED);
    mb->done = 1;
    return 0;
}

/* This rank's skipped inputs, one line each, in block order ("" for none; malloc'd, or NULL). */
static char *skipped_lines(const run *r)
{
    size_t len = 0;
    for (uint64_t j = 0; j < r->nmine; j++)
        len += r->mine[j].why ? strlen(r->mine[j].why) + 1 : 0;
    char *s = malloc(len + 1);
    if (!s)
        return NULL;
    len = 0;
    for (uint64_t j = 0; j < r->nmine; j++) {
        if (!r->mine[j].why)
            continue;
        const size_t n = strlen(r->mine[j].why);
        memcpy(s + len, r->mine[j].why, n);
        s[len + n] = '\n';
        len += n + 1;
    }
    s[len] = '\0';
    return s;
}

/* ---- the passes ---- */

/* This rank's k-th block of item i (k-th pending block with pending_only), or NULL. The count must
 * not depend on progress (`done`), or the rounds would drift from the other ranks' count. */
static my_block *nth_mine(run *r, uint64_t item, uint64_t k, int pending_only)
{
    for (uint64_t j = 0; j < r->nmine; j++) {
        my_block *mb = &r->mine[j];
        if (mb->b->item != item || (pending_only && mb->fused))
            continue;
        if (k-- == 0)
            return mb;
    }
    return NULL;
}

/* Lockstep rounds per shared item: as many as the busiest rank has blocks of it. Every rank can
 * count every rank's blocks from the plan, so all agree without a message. */
static uint64_t rounds_for(const run *r, uint64_t item, int pending_only)
{
    const hq_plan *p = &r->plan;
    uint64_t most = 0;
    for (int k = 0; k < p->nranks; k++) {
        uint64_t n = 0;
        for (uint64_t j = p->first[k]; j < p->first[k + 1]; j++)
            if (p->blocks[j].item == item && !(pending_only && is_fused(r, &p->blocks[j])))
                n++;
        most = n > most ? n : most;
    }
    return most;
}

/* Pass 1 over shared items. A failure does not stop the rounds: this rank keeps joining the
 * collective calls with NULL blocks so nobody hangs; the error is agreed after the pass. */
static int pass1_shared(run *r, hq_err *err)
{
    int rc = 0;
    for (uint64_t i = 0; i < r->inv.n; i++) {
        if (!r->item_shared[i])
            continue;
        const uint64_t rounds = rounds_for(r, i, 0);
        for (uint64_t k = 0; k < rounds; k++) {
            my_block *mb = rc ? NULL : nth_mine(r, i, k, 0);
            if (mb && pass1_done(r, mb))
                mb = NULL; /* done by an interrupted run: only joins the collective calls */
            hq_err scratch, *e = rc ? &scratch : err; /* keep the first failure's message */
            void *data = NULL;
            int rc2 = timed_read(r, mb ? mb->b : NULL, i, 1, &data, e);
            if (!rc && mb && !rc2)
                rc2 = mb->fused ? equalize_fused(r, mb->b, data, e) : histogram_pending(r, mb->b, data, e);
            rc = rc ? rc : rc2;
            e = rc ? &scratch : err;
            const int write_now = !rc && mb && mb->fused;
            int rc3 = timed_write(r, write_now ? mb->b : NULL, i, 1, data, e);
            rc = rc ? rc : rc3;
            rc = flush_round(r, i, write_now && !rc ? mb->b : NULL, rc, rc ? &scratch : err);
            if (write_now) {
                mb->done = 1;
                hq_block_free(r->eng, data);
            } else if (!rc && mb) {
                hold_or_drop(r, mb, data);
            } else {
                hq_block_free(r->eng, data);
            }
        }
    }
    return rc;
}

/* A run of row bands of one image, all on this rank: both passes right away, so the histogram
 * and the held pixels never wait for the other ranks. */
static int equalize_local_image(run *r, my_block *first, uint64_t n, hq_err *err)
{
    int rc = 0;
    const group_hist *g0 = find_group(r, group_of(r, first->b), 0);
    const int restored = g0 && g0->restored;
    for (uint64_t j = 0; j < n && !rc && !restored; j++) {
        void *data;
        rc = timed_read(r, first[j].b, first[j].b->item, 0, &data, err);
        if (!rc)
            rc = histogram_pending(r, first[j].b, data, err);
        if (!rc)
            hold_or_drop(r, &first[j], data);
    }
    const hq_mode m = mode_of(r, first->b->item);
    const uint64_t g = group_of(r, first->b);
    group_hist *gh = find_group(r, g, 0);
    if (!rc && gh && !restored)
        rc = hq_journal_note_hist(r->journal, g, gh->hist, gh->len, err);
    if (!rc && gh) {
        const int e = build_luts(r, &m, first->b->item, g, gh->hist, gh->lut);
        if (e < 0)
            rc = hq_fail(err, HQ_EMEM, "%s: out of memory building LUTs", r->inv.items[first->b->item].src);
        else
            gh->empty = e;
    }
    for (uint64_t j = 0; j < n && !rc; j++) {
        if (first[j].done)
            continue;
        void *data = first[j].held;
        if (!data)
            rc = timed_read(r, first[j].b, first[j].b->item, 0, &data, err);
        if (!rc)
            rc = remap_pending(r, first[j].b, data, err);
        if (!rc)
            rc = timed_write(r, first[j].b, first[j].b->item, 0, data, err);
        release(r, &first[j], data);
        first[j].done = 1;
    }
    drop_group(r, g);
    return rc;
}

/* Blocks of this rank's own items stream through the I/O pipeline: I/O threads read the next
 * blocks and write the finished ones while this thread computes. */
typedef enum { STREAM_FUSED, STREAM_HIST, STREAM_REMAP, STREAM_RANGE } stream_kind;

static int range_block(run *r, const hq_block *b, void *data, hq_err *err);

typedef struct stream {
    run *r;
    stream_kind kind;
    my_block **list;
} stream;

static int stream_read(void *ctx, uint64_t i, void **data, hq_err *err)
{
    stream *st = ctx;
    my_block *mb = st->list[i];
    if (st->kind == STREAM_RANGE)
        tick(st->r); /* pass 0 writes nothing: its progress is told here, on the I/O thread */
    if (mb->held) {
        *data = mb->held;
        return 0;
    }
    int rc = timed_read(st->r, mb->b, mb->b->item, 0, data, err);
    /* A bad file under --on-error skip: listed, and the block goes on as an empty one. */
    return maybe_skip(st->r, mb, rc, err);
}

static int stream_compute(void *ctx, uint64_t i, void *data, hq_err *err)
{
    stream *st = ctx;
    const hq_block *b = st->list[i]->b;
    if (!data)
        return 0;
    if (st->kind == STREAM_RANGE)
        return range_block(st->r, b, data, err);
    if (st->kind == STREAM_FUSED)
        return equalize_fused(st->r, b, data, err);
    if (st->kind == STREAM_HIST)
        return histogram_pending(st->r, b, data, err);
    return remap_pending(st->r, b, data, err);
}

static int stream_write(void *ctx, uint64_t i, void *data, hq_err *err)
{
    stream *st = ctx;
    return data ? timed_write(st->r, st->list[i]->b, st->list[i]->b->item, 0, data, err) : 0;
}

static void stream_finish(void *ctx, uint64_t i, void *data, int ok)
{
    stream *st = ctx;
    my_block *mb = st->list[i];
    if (st->kind == STREAM_RANGE) { /* pass 0 only looks */
        hq_block_free(st->r->eng, data);
        return;
    }
    if (st->kind == STREAM_HIST && ok && data) {
        hold_or_drop(st->r, mb, data);
        return;
    }
    release(st->r, mb, data);
    if (st->kind != STREAM_HIST)
        mb->done = 1;
}

static int run_stream(run *r, stream_kind kind, my_block **list, uint64_t n, hq_err *err)
{
    static const hq_pipeline_ops with_write = {stream_read, stream_compute, stream_write, stream_finish};
    static const hq_pipeline_ops hist_only = {stream_read, stream_compute, NULL, stream_finish};
    stream st = {r, kind, list};
    return hq_pipeline_run(kind == STREAM_HIST || kind == STREAM_RANGE ? &hist_only : &with_write, &st, n, &r->pipe, err);
}

/* Pass 1 over this rank's own items: independent I/O, no waiting on anyone. Consecutive blocks of
 * one kind form a stream; the row bands of one big image are equalized on the spot. */
static int pass1_own(run *r, hq_err *err)
{
    my_block **list = malloc((r->nmine ? r->nmine : 1) * sizeof *list);
    if (!list)
        return hq_fail(err, HQ_EMEM, "out of memory listing blocks");
    int rc = 0;
    uint64_t j = 0;
    while (j < r->nmine && !rc) {
        my_block *mb = &r->mine[j];
        if (r->item_shared[mb->b->item] || (mb->fused && mb->done) || (!mb->fused && r->scope == HQ_SCOPE_GLOBAL && pass1_done(r, mb))) {
            j++;
            continue;
        }
        if (!mb->fused && r->scope != HQ_SCOPE_GLOBAL) {
            uint64_t n = 1; /* the row bands of this image (the blocks of this dataset) that follow */
            while (j + n < r->nmine && r->mine[j + n].b->item == mb->b->item &&
                   group_of(r, r->mine[j + n].b) == group_of(r, mb->b))
                n++;
            rc = equalize_local_image(r, mb, n, err);
            j += n;
            continue;
        }
        const stream_kind kind = mb->fused ? STREAM_FUSED : STREAM_HIST;
        uint64_t n = 0;
        while (j < r->nmine && !r->item_shared[r->mine[j].b->item] && r->mine[j].fused == mb->fused &&
               (mb->fused || r->scope == HQ_SCOPE_GLOBAL)) {
            if (!pass1_done(r, &r->mine[j]))
                list[n++] = &r->mine[j];
            j++;
        }
        rc = run_stream(r, kind, list, n, err);
    }
    free(list);
    return rc;
}

/* ---- the target histogram of --method match ---- */

/* Adds block b's (counted) pixels into one histogram. */
static int histogram_into(run *r, const hq_block *b, void *data, uint64_t *hist, hq_err *err)
{
    const hq_mode m = mode_of(r, b->item);
    hq_block_data d = block_view(r, b, data, 0, 0);
    uint64_t *hp[1] = {hist};
    const double t0 = hq_now();
    const int rc = r->eng->ops->histogram(r->eng, &d, &m, hp, err);
    r->t[PH_HIST] += hq_now() - t0;
    return rc;
}

/* --reference global: one extra read of everything before pass 1 (every image's LUT needs the
 * whole input's histogram), summed over ranks as --scope global sums it. Memory stays one block;
 * the price is reading the input once more. */
static int target_from_input(run *r, size_t len, hq_err *err)
{
    int rc = 0;
    for (uint64_t i = 0; i < r->inv.n; i++) {
        if (!r->item_shared[i])
            continue;
        const uint64_t rounds = rounds_for(r, i, 0);
        for (uint64_t k = 0; k < rounds; k++) {
            my_block *mb = rc ? NULL : nth_mine(r, i, k, 0);
            hq_err scratch, *e = rc ? &scratch : err;
            void *data = NULL;
            int rc2 = timed_read(r, mb ? mb->b : NULL, i, 1, &data, e);
            if (!rc2 && mb)
                rc2 = histogram_into(r, mb->b, data, r->target, e);
            rc = rc ? rc : rc2;
            hq_block_free(r->eng, data);
        }
    }
    for (uint64_t j = 0; j < r->nmine && !rc; j++) {
        const hq_block *b = r->mine[j].b;
        if (r->item_shared[b->item])
            continue;
        void *data = NULL;
        rc = timed_read(r, b, b->item, 0, &data, err);
        if (rc == HQ_EINPUT && r->o->on_error == HQ_ONERR_SKIP && r->inv.format == HQ_FMT_PNG) {
            rc = 0; /* a bad PNG: pass 1 lists it as skipped */
            continue;
        }
        if (!rc)
            rc = histogram_into(r, b, data, r->target, err);
        hq_block_free(r->eng, data);
    }
    rc = hq_comm_agree(r->c, rc, err);
    if (!rc && hq_comm_sum_u64(r->c, r->target, len))
        rc = hq_fail(err, HQ_EIO, "MPI_Allreduce of the target histogram failed");
    return rc;
}

/* Rank 0: the histogram of --reference FILE (every image of it summed), in the input's mode. */
static int target_from_file(run *r, const hq_mode *m0, hq_err *err)
{
    const char *ref = r->o->reference;
    hq_inventory inv;
    hq_plan plan;
    memset(&plan, 0, sizeof plan);
    hq_io *io = NULL;
    /* In a child, as the input is: a damaged reference must not take the run down either. */
    int rc = hq_io_scan_isolated(ref, 0, 0, &inv, err);
    hq_plan_item *pi = rc ? NULL : calloc(inv.n ? inv.n : 1, sizeof *pi);
    if (!rc && !pi)
        rc = hq_fail(err, HQ_EMEM, "%s: out of memory", ref);
    for (size_t i = 0; !rc && i < inv.n; i++) {
        const hq_item *it = &inv.items[i];
        const uint32_t bits = r->o->bits ? r->o->bits : it->depth;
        if ((it->channels >= 3) != (m0->channels >= 3) || bits != m0->bits || bits > it->depth)
            rc = hq_fail(err, HQ_EINPUT, "%s: the reference holds %u-bit %s images, the input %u-bit %s ones: they "
                         "must match", ref, it->depth, it->channels >= 3 ? "colour" : "gray", m0->bits,
                         m0->channels >= 3 ? "colour" : "gray");
        pi[i] = (hq_plan_item){it->slices,       it->height,       it->width, (uint64_t)it->channels * it->sample_bytes,
                               inv.format == HQ_FMT_HDF5,           0,          it->chunk_slices,
                               it->chunk_height, it->chunk_width,  (int)it->collective};
    }
    if (!rc)
        rc = hq_plan_make(pi, inv.n, 1, r->o->block_bytes, &plan, err);
    free(pi);
    const hq_io_ops *ops = rc ? NULL : hq_io_ops_for(inv.format);
    if (!rc)
        rc = ops->open_input(&inv, MPI_COMM_SELF, 1, &io, err);
    for (uint64_t j = 0; !rc && j < plan.nblocks; j++) {
        const hq_block *b = &plan.blocks[j];
        const hq_item *it = &inv.items[b->item];
        const hq_mode m = {it->channels, it->sample_bytes, m0->bits, r->o->color, 0};
        void *data = malloc(hq_block_pixels(b) * it->channels * it->sample_bytes);
        if (!data) {
            rc = hq_fail(err, HQ_EMEM, "%s: out of memory for a block (lower --block)", ref);
            break;
        }
        rc = ops->read_block(io, b->item, b, 0, data, err);
        hq_block_data d = {data, 1, hq_block_pixels(b), 0, NULL, NULL};
        uint64_t *hp[1] = {r->target};
        if (!rc)
            rc = r->eng->ops->histogram(r->eng, &d, &m, hp, err);
        free(data);
    }
    if (io) {
        hq_err e2;
        int rc2 = ops->close(io, 0, NULL, rc ? &e2 : err);
        rc = rc ? rc : rc2;
    }
    hq_plan_free(&plan);
    hq_inventory_free(&inv);
    return rc;
}

/* --method match: the target histogram(s) on every rank, --ignore applied; an empty target
 * (everything ignored or masked out) is refused. */
static int make_target(run *r, hq_err *err)
{
    hq_mode m0;
    if (!global_mode(r, &m0))
        return 0;
    const size_t len = hist_len(&m0);
    r->target = calloc(len, sizeof *r->target);
    int rc = hq_comm_agree(r->c, r->target ? 0 : hq_fail(err, HQ_EMEM, "out of memory for the target histogram"), err);
    if (rc)
        return rc;
    if (!strcmp(r->o->reference, "global")) {
        rc = target_from_input(r, len, err);
    } else {
        rc = hq_comm_agree(r->c, r->c->rank == 0 ? target_from_file(r, &m0, err) : 0, err);
        if (!rc)
            MPI_Bcast(r->target, (int)len, MPI_UINT64_T, 0, r->c->world); /* len <= 3 * 65536 */
    }
    if (rc)
        return rc;
    ignore_bins(r, &m0, r->target);
    if (hq_hist_total(r->target, (uint32_t)len) == 0 && r->o->device != HQ_DEV_COPY)
        rc = hq_fail(err, HQ_EINPUT, "%s: the reference has no counted pixels (all ignored or masked out)",
                     r->o->reference);
    return rc;
}

/* ---- pass 0: the extremes of float data ---- */

static int is_float(const run *r, uint64_t item)
{
    return !r->inv.items[item].bad && r->inv.items[item].sample == HQ_SAMPLE_FLOAT;
}

/* Adds a block's finite extremes into its groups' accumulators, its infinite samples to its item. */
static int range_block(run *r, const hq_block *b, void *data, hq_err *err)
{
    if (!r->eng->ops->minmax)
        return 0; /* the copy engine: nothing is binned */
    const hq_mode m = mode_of(r, b->item);
    const hq_block_data d = block_view(r, b, data, r->scope == HQ_SCOPE_IMAGE, 0);
    hq_frange one, *mm = d.nseg == 1 ? &one : malloc(d.nseg * sizeof *mm);
    if (!mm)
        return hq_fail(err, HQ_EMEM, "%s: out of memory for %llu ranges", r->inv.items[b->item].src,
                       (unsigned long long)d.nseg);
    for (uint64_t s = 0; s < d.nseg; s++)
        mm[s] = hq_frange_empty();
    const double t0 = hq_now();
    int rc = r->eng->ops->minmax(r->eng, &d, &m, mm, err);
    r->t[PH_HIST] += hq_now() - t0;
    if (!rc) /* counted here, ticked by the thread that makes the I/O calls (MPI stays on one) */
        __atomic_add_fetch(&r->bytes_histogrammed, block_bytes(r, b), __ATOMIC_RELAXED);
    for (uint64_t s = 0; s < d.nseg && !rc; s++) {
        hq_frange *g = &r->facc[d.nseg > 1 ? image_of(r, b, b->s0 + s) : group_of(r, b)];
        g->lo = mm[s].lo < g->lo ? mm[s].lo : g->lo;
        g->hi = mm[s].hi > g->hi ? mm[s].hi : g->hi;
        r->finf[b->item] += mm[s].inf;
    }
    if (mm != &one)
        free(mm);
    return rc;
}

/* Whether pass 0 reads a block: a whole image in one block waits for pass 1 (fused_ranges), unless
 * an interrupted run wrote it already (its range is then still needed for the output's record). */
static int range_in_pass0(const my_block *mb)
{
    return !mb->fused || mb->done;
}

/* This rank's part of pass 0: the blocks of float items that range_in_pass0 picks, read once,
 * shared items in lockstep. */
static int range_mine(run *r, hq_err *err)
{
    int rc = 0;
    for (uint64_t i = 0; i < r->inv.n; i++) {
        if (!r->item_shared[i] || !is_float(r, i))
            continue;
        const uint64_t rounds = rounds_for(r, i, 0);
        for (uint64_t k = 0; k < rounds; k++) {
            my_block *mb = rc ? NULL : nth_mine(r, i, k, 0);
            if (mb && !range_in_pass0(mb))
                mb = NULL; /* only joins the collective read */
            hq_err scratch, *e = rc ? &scratch : err;
            void *data = NULL;
            int rc2 = timed_read(r, mb ? mb->b : NULL, i, 1, &data, e);
            if (!rc2 && mb)
                rc2 = range_block(r, mb->b, data, e);
            rc = rc ? rc : rc2;
            hq_block_free(r->eng, data);
            tick(r);
        }
    }
    if (rc)
        return rc;
    my_block **list = malloc((r->nmine ? r->nmine : 1) * sizeof *list);
    if (!list)
        return hq_fail(err, HQ_EMEM, "out of memory listing blocks");
    uint64_t n = 0;
    for (uint64_t j = 0; j < r->nmine; j++)
        if (!r->item_shared[r->mine[j].b->item] && is_float(r, r->mine[j].b->item) && range_in_pass0(&r->mine[j]))
            list[n++] = &r->mine[j];
    rc = run_stream(r, STREAM_RANGE, list, n, err);
    free(list);
    return rc;
}

/* Pass 0, collective: each float group's binning (core/fbin.h), from the minimum and maximum of
 * its finite samples over all ranks, or from --range without reading anything. Infinite samples
 * are refused here, naming the first item that has them. Returns the agreed status. */
static int pass0_ranges(run *r, hq_err *err)
{
    int any = 0;
    for (uint64_t i = 0; i < r->inv.n; i++)
        any |= is_float(r, i);
    if (!any)
        return 0;
    r->nfgroups = r->scope == HQ_SCOPE_GLOBAL ? 1 : r->plan.nimages;
    r->fbin = calloc(r->nfgroups ? r->nfgroups : 1, sizeof *r->fbin);
    r->facc = malloc((r->nfgroups ? r->nfgroups : 1) * sizeof *r->facc);
    r->finf = calloc(r->inv.n ? r->inv.n : 1, sizeof *r->finf);
    r->fmine = calloc(r->nfgroups ? r->nfgroups : 1, 1);
    double *lo = malloc((r->nfgroups ? r->nfgroups : 1) * sizeof *lo), *hi = malloc((r->nfgroups ? r->nfgroups : 1) * sizeof *hi);
    int rc = r->fbin && r->facc && r->finf && r->fmine && lo && hi ? 0
             : hq_fail(err, HQ_EMEM, "out of memory for the float ranges");
    for (uint64_t g = 0; g < r->nfgroups && !rc; g++)
        r->facc[g] = hq_frange_empty();
    if (!rc && !r->o->range_set)
        rc = range_mine(r, err);
    rc = hq_comm_agree(r->c, rc, err);
    if (!rc && !r->o->range_set) {
        for (uint64_t g = 0; g < r->nfgroups; g++) {
            lo[g] = r->facc[g].lo;
            hi[g] = r->facc[g].hi;
        }
        if (hq_comm_minmax_f64(r->c, lo, hi, r->nfgroups) || hq_comm_sum_u64(r->c, r->finf, r->inv.n))
            rc = hq_fail(err, HQ_EIO, "MPI_Allreduce of the float ranges failed");
        for (uint64_t i = 0; i < r->inv.n && !rc; i++)
            if (r->finf[i])
                rc = hq_fail(err, HQ_EINPUT, "%s:%s: %llu infinite sample%s (+inf or -inf); float data must be "
                             "finite or NaN", r->inv.items[i].src, r->inv.items[i].name,
                             (unsigned long long)r->finf[i], r->finf[i] == 1 ? "" : "s");
    }
    for (uint64_t g = 0; g < r->nfgroups && !rc; g++) {
        if (r->o->range_set)
            r->fbin[g] = hq_fbin_make(r->o->range_lo, r->o->range_hi, r->o->fbins);
        else if (lo[g] <= hi[g])
            r->fbin[g] = hq_fbin_make(lo[g], hi[g], r->o->fbins);
        else /* no finite sample: nothing to bin; recorded as NaN */
            r->fbin[g] = hq_fbin_make(NAN, NAN, r->o->fbins);
    }
    free(lo);
    free(hi);
    free(r->facc);
    free(r->finf);
    r->facc = NULL;
    r->finf = NULL;
    return hq_comm_agree(r->c, rc, err);
}

/* Collective, after the passes: the binnings fused_ranges found, made known to every rank for the
 * output's record. Exactly one rank found each of them, and the others add +0.0: a sum that is
 * exact (NaN, for an image without finite samples, passes too). Groups no rank found keep pass 0's
 * value, which every rank has. */
static int share_fused_ranges(run *r, hq_err *err)
{
    if (!r->fbin || r->o->range_set)
        return 0;
    const uint64_t n = r->nfgroups;
    double *v = calloc(2 * n, sizeof *v);
    uint64_t *cnt = calloc(n, sizeof *cnt);
    int ok = v && cnt, all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, r->c->world);
    int rc = all_ok ? 0 : hq_fail(err, HQ_EMEM, "out of memory for the float ranges");
    if (!rc) {
        for (uint64_t g = 0; g < n; g++)
            if (r->fmine[g]) {
                v[2 * g] = r->fbin[g].lo;
                v[2 * g + 1] = r->fbin[g].hi;
                cnt[g] = 1;
            }
        int mpi = MPI_SUCCESS;
        for (uint64_t off = 0; off < 2 * n && mpi == MPI_SUCCESS; off += 1u << 28)
            mpi = MPI_Allreduce(MPI_IN_PLACE, v + off, (int)(2 * n - off < (1u << 28) ? 2 * n - off : 1u << 28),
                                MPI_DOUBLE, MPI_SUM, r->c->world);
        if (mpi != MPI_SUCCESS || hq_comm_sum_u64(r->c, cnt, n))
            rc = hq_fail(err, HQ_EIO, "MPI_Allreduce of the float ranges failed");
        for (uint64_t g = 0; g < n && !rc; g++)
            if (cnt[g])
                r->fbin[g] = hq_fbin_make(v[2 * g], v[2 * g + 1], r->o->fbins);
    }
    free(v);
    free(cnt);
    /* The record is per slice: under scope dataset every slice carries its dataset's binning. */
    for (size_t i = 0; i < r->inv.n && !rc && r->scope == HQ_SCOPE_DATASET; i++)
        for (uint64_t k = 1; k < r->inv.items[i].slices; k++)
            r->fbin[r->plan.item_image0[i] + k] = r->fbin[r->plan.item_image0[i]];
    return rc;
}

/* Under scope global every image bins alike (check_modes): the mode of the first usable item. */
static int global_mode(const run *r, hq_mode *m)
{
    for (size_t i = 0; i < r->inv.n; i++)
        if (!r->inv.items[i].bad) {
            *m = mode_of(r, i);
            return 1;
        }
    return 0;
}

static int is_shared_group(const run *r, uint64_t g)
{
    for (uint64_t k = 0; k < r->nshared; k++)
        if (r->shared[k] == g)
            return 1;
    return 0;
}

/* Rank k's part in a shared CLAHE image, from the plan: the tile rows its blocks count into (their
 * own rows, and the padded rows that reflect them) and the tile rows its blocks blend. The rank that
 * speaks for an HDF5 image needs them all: it records every tile's LUT in the output. */
static void clahe_rows_of(const run *r, uint64_t image, int k, hq_row_range *contrib, hq_row_range *need)
{
    const hq_plan *p = &r->plan;
    uint64_t clo = UINT64_MAX, chi = 0, nlo = UINT64_MAX, nhi = 0;
    for (uint64_t j = p->first[k]; j < p->first[k + 1]; j++) {
        const hq_block *b = &p->blocks[j];
        if (image_of(r, b, b->s0) != image)
            continue;
        const hq_clahe_geom g = geom_of(r, b->item);
        const float inv = hq_clahe_inv(g.tile_h);
        uint64_t lo = b->r0 / g.tile_h, hi = (b->r1 - 1) / g.tile_h + 1;
        for (uint64_t q = g.height; q < g.tiles_y * g.tile_h; q++) {
            const uint64_t src = hq_clahe_reflect(q, g.height);
            if (src >= b->r0 && src < b->r1) {
                lo = q / g.tile_h < lo ? q / g.tile_h : lo;
                hi = q / g.tile_h + 1 > hi ? q / g.tile_h + 1 : hi;
            }
        }
        clo = lo < clo ? lo : clo;
        chi = hi > chi ? hi : chi;
        const uint64_t t1 = hq_clahe_weight(b->r0, inv, g.tiles_y).t1, t2 = hq_clahe_weight(b->r1 - 1, inv, g.tiles_y).t2;
        nlo = t1 < nlo ? t1 : nlo;
        nhi = t2 + 1 > nhi ? t2 + 1 : nhi;
        if (r->inv.format == HQ_FMT_HDF5 && hq_plan_image_owner(p, image) == k) { /* provenance */
            nlo = 0;
            nhi = g.tiles_y;
        }
    }
    *contrib = clo < chi ? (hq_row_range){clo, chi} : (hq_row_range){0, 0};
    *need = nlo < nhi ? (hq_row_range){nlo, nhi} : (hq_row_range){0, 0};
}

/* CLAHE: each shared image's tile rows summed between the ranks that count into them and sent to
 * those that blend them (mpi/tile_rows.h), not an Allreduce of every tile over every rank. */
static int reduce_clahe_shared(run *r, hq_err *err)
{
    const int n = r->c->size;
    hq_row_range *contrib = malloc((size_t)n * sizeof *contrib), *need = malloc((size_t)n * sizeof *need);
    int rc = contrib && need ? 0 : hq_fail(err, HQ_EMEM, "out of memory planning the CLAHE exchange");
    uint64_t moved = 0;
    const double t0 = hq_now();
    for (uint64_t s = 0; s < r->nshared && !rc; s++) {
        const uint64_t image = r->shared[s];
        uint64_t item = 0;
        while (item + 1 < r->inv.n && r->plan.item_image0[item + 1] <= image)
            item++;
        const hq_clahe_geom g = geom_of(r, item);
        const hq_mode m = mode_of(r, item);
        for (int k = 0; k < n; k++)
            clahe_rows_of(r, image, k, &contrib[k], &need[k]);
        group_hist *gh = find_group(r, image, 0);
        uint64_t sent = 0;
        rc = hq_tile_rows_reduce(r->c->world, g.tiles_y, g.tiles_x * hist_len(&m), contrib, need,
                                 gh ? gh->hist : NULL, &sent, err);
        moved += sent;
    }
    r->t[PH_REDUCE] += hq_now() - t0;
    if (r->o->verbose && !rc)
        fprintf(stderr, "histeq_dist: rank %d: CLAHE tile rows exchanged: %llu bytes sent\n", r->c->rank,
                (unsigned long long)moved);
    free(contrib);
    free(need);
    return rc;
}

/* Sums the shared groups' histograms over ranks: one buffer, one (chunked) MPI_Allreduce. */
static int reduce_shared(run *r, hq_err *err)
{
    if (!r->nshared)
        return 0;
    if (is_clahe(r))
        return reduce_clahe_shared(r, err);
    /* All shared groups bin alike: under scope image they are images of the inventory, whose modes
     * may differ, so size each slot by the largest mode. */
    size_t slot = 0;
    for (size_t i = 0; i < r->inv.n; i++)
        if (!r->inv.items[i].bad && group_len(r, i) > slot)
            slot = group_len(r, i);
    uint64_t *buf = calloc(r->nshared * slot, sizeof *buf);
    int ok = buf != NULL, all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, r->c->world);
    if (!all_ok) {
        free(buf);
        return hq_fail(err, HQ_EMEM, "allreduce: out of memory for %llu shared histograms",
                       (unsigned long long)r->nshared);
    }
    if (r->scope == HQ_SCOPE_GLOBAL) {
        /* Ranks without work still need the global histogram: the output's metadata is written
         * collectively, with the same values everywhere. */
        hq_mode m;
        if (!global_mode(r, &m) || !find_group(r, 0, hist_len(&m))) {
            free(buf);
            return hq_fail(err, HQ_EMEM, "allreduce: out of memory for the global histogram");
        }
    }
    /* A histogram restored from the journal is complete on every rank that holds it already. */
    for (uint64_t k = 0; k < r->nshared; k++) {
        group_hist *gh = find_group(r, r->shared[k], 0);
        if (gh && !gh->restored)
            memcpy(buf + k * slot, gh->hist, gh->len * sizeof *buf);
    }
    double t0 = hq_now();
    int rc = hq_comm_sum_u64(r->c, buf, r->nshared * slot);
    r->t[PH_REDUCE] += hq_now() - t0;
    for (uint64_t k = 0; k < r->nshared && !rc; k++) {
        group_hist *gh = find_group(r, r->shared[k], 0);
        if (gh && !gh->restored)
            memcpy(gh->hist, buf + k * slot, gh->len * sizeof *buf);
    }
    free(buf);
    return rc ? hq_fail(err, HQ_EIO, "MPI_Allreduce of the histograms failed") : 0;
}

/* The complete histograms of pass 1, journaled before any pass-2 write can be claimed, so that a
 * resume skips pass 1. Every rank logs the groups it holds (loading keeps one copy of a shared one). */
static int journal_histograms(run *r, hq_err *err)
{
    int rc = 0;
    for (size_t i = 0; i < r->ngroups && !rc; i++)
        if (!r->groups[i].restored)
            rc = hq_journal_note_hist(r->journal, r->groups[i].group, r->groups[i].hist, r->groups[i].len, err);
    return rc ? rc : hq_journal_flush(r->journal, err);
}

/* -1 (err set) only when out of memory. */
static int build_pending_luts(run *r, hq_err *err)
{
    for (size_t i = 0; i < r->ngroups; i++) {
        /* A pending group's mode is the mode of any of its blocks; the global group's LUT is built
         * on every rank, blocks or not: the output records it collectively. */
        hq_mode m;
        uint64_t item = 0; /* scope global: any; the LUT is recorded once, at close */
        int found = r->scope == HQ_SCOPE_GLOBAL && r->groups[i].group == 0 && global_mode(r, &m);
        for (uint64_t j = 0; j < r->nmine && !found; j++) {
            const hq_block *b = r->mine[j].b;
            if (r->mine[j].fused || group_of(r, b) != r->groups[i].group)
                continue;
            m = mode_of(r, b->item);
            item = b->item;
            found = 1;
        }
        const int e = found ? build_luts(r, &m, item, r->groups[i].group, r->groups[i].hist, r->groups[i].lut) : 0;
        if (e < 0)
            return hq_fail(err, HQ_EMEM, "out of memory building LUTs");
        r->groups[i].empty = e;
    }
    return 0;
}

static int pass2(run *r, hq_err *err)
{
    int rc = 0;
    for (uint64_t i = 0; i < r->inv.n; i++) {
        if (!r->item_shared[i])
            continue;
        const uint64_t rounds = rounds_for(r, i, 1);
        for (uint64_t k = 0; k < rounds; k++) {
            my_block *mb = rc ? NULL : nth_mine(r, i, k, 1);
            if (mb && mb->done)
                mb = NULL; /* written by an interrupted run */
            hq_err scratch, *e = rc ? &scratch : err; /* keep the first failure's message */
            /* The re-read joins a collective call, so it is made whether or not this rank needs it. */
            void *fresh = NULL;
            int rc2 = timed_read(r, mb && !mb->held ? mb->b : NULL, i, 1, &fresh, e);
            void *data = mb && mb->held ? mb->held : fresh;
            if (!rc2 && mb)
                rc2 = remap_pending(r, mb->b, data, e);
            rc = rc ? rc : rc2;
            e = rc ? &scratch : err;
            const int wrote = !rc && mb;
            int rc3 = timed_write(r, wrote ? mb->b : NULL, i, 1, data, e);
            rc = rc ? rc : rc3;
            rc = flush_round(r, i, wrote && !rc ? mb->b : NULL, rc, rc ? &scratch : err);
            if (mb) {
                release(r, mb, data);
                mb->done = 1;
            }
        }
    }
    if (rc)
        return rc;
    my_block **list = malloc((r->nmine ? r->nmine : 1) * sizeof *list);
    if (!list)
        return hq_fail(err, HQ_EMEM, "out of memory listing blocks");
    uint64_t n = 0;
    for (uint64_t j = 0; j < r->nmine; j++)
        if (!r->item_shared[r->mine[j].b->item] && !r->mine[j].done)
            list[n++] = &r->mine[j];
    rc = run_stream(r, STREAM_REMAP, list, n, err);
    free(list);
    return rc;
}

/* ---- engine ---- */

/* --threads, or this rank's share of the node's CPUs (app/placement.h): the engine's threads, and
 * the I/O backend's workers. */
static int threads_per_rank(const run *r)
{
    return r->o->threads ? r->o->threads : r->cpus.cpus;
}

/* --device auto: the GPU only where every rank of the node has one of its own (app/placement.h);
 * where ranks would share one, the CPU engine, said once per node. */
static int make_engine(run *r, hq_err *err)
{
    const hq_options *o = r->o;
    hq_engine_cfg cfg = {threads_per_rank(r), r->c->local_rank, r->c->local_size, o->verbose};
    int rc;
    if (o->device == HQ_DEV_COPY)
        return hq_comm_agree(r->c, hq_copy_engine_create(&r->eng, err), err);
    char id[64] = "";
    const int mine = o->device != HQ_DEV_CPU && hq_gpu_bound_id(r->c->local_rank, id, sizeof id) == 0;
    const int gpus = hq_comm_node_distinct(r->c, mine ? id : NULL); /* collective over the node */
    const int use_gpu = o->device == HQ_DEV_GPU || (o->device == HQ_DEV_AUTO && hq_auto_uses_gpu(gpus, r->c->local_size));
    if (use_gpu) {
        rc = hq_gpu_engine_create(&cfg, &r->eng, err);
        if (!rc && gpus > 0 && r->c->local_size > gpus && r->c->local_rank == 0 && !o->quiet)
            fprintf(stderr, "histeq_dist: note: %s: %d ranks share %d GPU%s\n", r->c->host, r->c->local_size, gpus,
                    gpus == 1 ? "" : "s");
    } else {
        if (o->device == HQ_DEV_AUTO && gpus > 0 && r->c->local_rank == 0 && !o->quiet)
            fprintf(stderr, "histeq_dist: note: %s: %d ranks would share %d GPU%s; using the CPU engine, which is "
                    "faster then (--device gpu to use the GPU anyway)\n", r->c->host, r->c->local_size, gpus,
                    gpus == 1 ? "" : "s");
        else if (o->device == HQ_DEV_AUTO && gpus == 0 && r->c->rank == 0 && !o->quiet)
            fprintf(stderr, "histeq_dist: note: no GPU visible, using the CPU engine\n");
        rc = hq_cpu_engine_create(&cfg, &r->eng, err);
    }
    if (!rc && is_clahe(r) && (!r->eng->ops->clahe_histogram || !r->eng->ops->clahe_remap))
        rc = hq_fail(err, HQ_EDEVICE, "%s: the %s engine has no CLAHE (use --device cpu)", r->o->input,
                     r->eng->ops->name);
    return hq_comm_agree(r->c, rc, err);
}

/* ---- reports ---- */

static void report_plan(const run *r)
{
    char line[512], dev[128] = "", bound[64] = "";
    if (r->eng)
        r->eng->ops->describe(r->eng, dev, sizeof dev);
    if (r->cpus.widened)
        snprintf(bound, sizeof bound, " (bound to %d by the launcher, widened)", r->cpus.bound);
    snprintf(line, sizeof line, "rank %d on %.200s: %s; %llu blocks, %llu pixels; %d CPU%s%s, %d I/O thread%s, "
             "%d blocks in flight", r->c->rank, r->c->host, dev, (unsigned long long)r->nmine,
             (unsigned long long)r->plan.rank_pixels[r->c->rank], r->cpus.cpus, r->cpus.cpus == 1 ? "" : "s", bound,
             r->pipe.io_threads, r->pipe.io_threads == 1 ? "" : "s", r->pipe.depth);
    say_all(r, line);
}

static void report_skipped(const run *r)
{
    /* Skipped at scan time: every rank knows them; rank 0 lists them. */
    if (r->c->rank == 0)
        for (size_t i = 0; i < r->inv.n; i++)
            if (r->inv.items[i].bad)
                fprintf(stderr, "histeq_dist: skipped %s\n", r->inv.items[i].why ? r->inv.items[i].why : r->inv.items[i].src);
    /* Skipped while decoding: gathered to rank 0 in rank order. */
    int len = (int)r->skipped_len, *lens = NULL, *offs = NULL;
    char *all = NULL;
    if (r->c->rank == 0)
        lens = calloc((size_t)r->c->size, sizeof *lens);
    MPI_Gather(&len, 1, MPI_INT, lens, 1, MPI_INT, 0, r->c->world);
    int total = 0;
    if (r->c->rank == 0 && lens) {
        offs = calloc((size_t)r->c->size, sizeof *offs);
        for (int k = 0; k < r->c->size && offs; k++) {
            offs[k] = total;
            total += lens[k];
        }
        all = malloc((size_t)total + 1);
    }
    MPI_Gatherv(r->skipped ? r->skipped : "", len, MPI_CHAR, all, lens, offs, MPI_CHAR, 0, r->c->world);
    if (all && offs) {
        all[total] = '\0';
        for (char *line = strtok(all, "\n"); line; line = strtok(NULL, "\n"))
            fprintf(stderr, "histeq_dist: skipped %s\n", line);
    }
    free(lens);
    free(offs);
    free(all);
}

/* This process's peak resident set, in bytes (Linux reports kilobytes). */
static uint64_t peak_rss_bytes(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 && ru.ru_maxrss > 0 ? (uint64_t)ru.ru_maxrss * 1024 : 0;
}

static int report_summary(const run *r, double wall, uint64_t skipped, hq_err *err)
{
    double tmax[PH_N], tsum[PH_N];
    MPI_Reduce(r->t, tmax, PH_N, MPI_DOUBLE, MPI_MAX, 0, r->c->world);
    MPI_Reduce(r->t, tsum, PH_N, MPI_DOUBLE, MPI_SUM, 0, r->c->world);
    uint64_t mine[2] = {r->pixels_done, r->bytes_done}, tot[2] = {0, 0};
    MPI_Reduce(mine, tot, 2, MPI_UINT64_T, MPI_SUM, 0, r->c->world);
    /* Memory high-water marks, the largest of any rank; device: +1, so that 0 means no engine had any. */
    uint64_t peaks[2] = {peak_rss_bytes(), 0}, most[2] = {0, 0};
    if (r->eng && r->eng->ops->device_peak)
        peaks[1] = r->eng->ops->device_peak(r->eng) + 1;
    MPI_Reduce(peaks, most, 2, MPI_UINT64_T, MPI_MAX, 0, r->c->world);
    if (r->c->rank != 0)
        return 0;
    int rc = 0;
    if (r->o->summary) {
        char dev[128] = "";
        r->eng->ops->describe(r->eng, dev, sizeof dev);
        hq_summary s = {HQ_VERSION, r->o->input, r->o->output, dev, hq_scope_name(r->scope),
                        hq_method_name(r->o->method), hq_color_name(r->o->color), r->c->size, r->plan.nimages,
                        tot[0], tot[1], skipped, wall, PHASE_NAMES, {0}, {0}, most[0],
                        most[1] ? most[1] - 1 : 0, most[1] != 0};
        for (int k = 0; k < PH_N; k++) {
            s.phase_max[k] = tmax[k];
            s.phase_mean[k] = tsum[k] / r->c->size;
        }
        rc = hq_summary_write(r->o->summary, &s, err);
    }
    if (r->o->quiet)
        return rc;
    const double mib = (double)tot[1] / (1 << 20);
    char peak[96];
    int used = snprintf(peak, sizeof peak, "peak RSS %.1f MiB", (double)most[0] / (1 << 20));
    if (most[1] && used > 0 && (size_t)used < sizeof peak)
        snprintf(peak + used, sizeof peak - (size_t)used, ", device %.1f MiB", (double)(most[1] - 1) / (1 << 20));
    fprintf(stderr, "histeq_dist: equalized %llu image%s (%.1f Mpixel, %.1f MiB) in %.3f s, %.1f MiB/s, "
            "%d rank%s, scope %s; %s (max over ranks)\n", (unsigned long long)r->plan.nimages,
            r->plan.nimages == 1 ? "" : "s", (double)tot[0] / 1e6, mib, wall, wall > 0 ? mib / wall : 0.0, r->c->size,
            r->c->size == 1 ? "" : "s", hq_scope_name(r->scope), peak);
    if (r->o->verbose) {
        for (int k = 0; k < PH_N; k++)
            fprintf(stderr, "histeq_dist:   %-9s max %8.3f s  mean %8.3f s\n", PHASE_NAMES[k], tmax[k],
                    tsum[k] / r->c->size);
    }
    return rc;
}

/* ---- the whole run ---- */

static void free_run(run *r)
{
    for (uint64_t j = 0; j < r->nmine; j++) {
        hq_block_free(r->eng, r->mine[j].held);
        free(r->mine[j].why);
    }
    for (size_t i = 0; i < r->ngroups; i++) {
        free(r->groups[i].hist);
        free(r->groups[i].lut);
    }
    free(r->groups);
    free(r->fbin);
    free(r->fmine);
    free(r->mine);
    free(r->shared);
    free(r->item_shared);
    free(r->skipped);
    hq_journal_close(r->journal);
    hq_writeback_stop(r->wb);
    r->wb = NULL;
    if (r->sync_fd >= 0)
        close(r->sync_fd);
    hq_journal_state_free(&r->res.st);
    hq_report_free(r->rep);
    free(r->target);
    if (r->mask) {
        hq_err ignored;
        hq_mask_close(r->mask, &ignored);
    }
    hq_engine_destroy(r->eng);
    hq_plan_free(&r->plan);
    hq_inventory_free(&r->inv);
    pthread_mutex_destroy(&r->mu);
    pthread_mutex_destroy(&r->tick_mu);
    free(r->default_output);
}

/* The global histogram and LUT for the output's metadata, or NULL under scope image. */
static const group_hist *global_group(run *r, hq_mode *m)
{
    if (r->scope != HQ_SCOPE_GLOBAL || !global_mode(r, m))
        return NULL;
    return find_group(r, 0, 0);
}

/* Without --output, rank 0 names the output beside the input (app/outname.h) and says so. */
static int name_output(const run *r, char **name, hq_err *err)
{
    unsigned char *buf = NULL;
    uint64_t len = 0;
    int rc = 0;
    if (r->c->rank == 0) {
        rc = hq_default_output(&r->inv, hq_output_suffix(hq_method_name(r->o->method)), name, err);
        if (!rc) {
            buf = (unsigned char *)*name;
            len = strlen(*name) + 1;
            if (!r->o->quiet)
                fprintf(stderr, "histeq_dist: note: no --output given: writing %s\n", *name);
        }
    }
    if ((rc = hq_comm_agree(r->c, rc, err)))
        return rc;
    rc = hq_comm_bcast_bytes(r->c, &buf, &len, err);
    if (r->c->rank != 0)
        *name = (char *)buf;
    return hq_comm_agree(r->c, rc, err);
}

int hq_run(const hq_options *given, const hq_comm *c, hq_err *err)
{
    hq_options opts = *given; /* --output filled in when it was not given */
    const hq_options *o = &opts;
    run r = {.o = o, .c = c, .sync_fd = -1};
    const double t_start = hq_now();
    pthread_mutex_init(&r.mu, NULL);
    pthread_mutex_init(&r.tick_mu, NULL);
    /* Before any thread of this rank starts: they inherit the CPUs it works on. */
    hq_place_cpus(c->local_rank, c->local_size, &r.cpus);
    int rc = scan_and_share(&r, err);
    if (!rc && !o->output && !(rc = name_output(&r, &r.default_output, err)))
        opts.output = r.default_output;
    if (rc) {
        pthread_mutex_destroy(&r.mu);
        pthread_mutex_destroy(&r.tick_mu);
        free(r.default_output);
        hq_inventory_free(&r.inv);
        return rc;
    }
    r.io_ops = hq_io_ops_for(r.inv.format);
    choose_io_threads(&r);
    if (!rc)
        rc = hq_comm_agree(c, check_modes(&r, err), err);
    if (!rc && o->summary)
        rc = hq_comm_agree(c, c->rank == 0 ? hq_summary_check(o->summary, err) : 0, err);
    if (!rc)
        rc = hq_comm_agree(c, make_plan(&r, err), err);
    if (!rc)
        rc = hq_comm_agree(c, classify_work(&r, err), err);
    if (!rc)
        rc = hq_report_open(&(hq_report_cfg){o, c, &r.inv, &r.plan, r.scope}, &r.rep, err);
    parse_kill_hook(&r);
    if (!rc)
        rc = hq_resume_decide(o, c, &r.inv, &r.res, err);
    if (!rc && r.res.action == HQ_RESUME_DONE) {
        if (c->rank == 0 && !o->quiet)
            fprintf(stderr, "histeq_dist: note: %s is complete already; nothing to resume\n", o->output);
        free_run(&r);
        return 0;
    }
    if (!rc)
        rc = hq_mask_open(o, &r.inv, c, &r.mask, err);
    /* Blocks may travel in storage order unless something looks at where a pixel lies: the report's
     * thumbnails, a mask file (read in row-major order), and CLAHE, whose tiles and weights follow
     * the pixel's position. */
    if (!rc)
        rc = r.io_ops->open_input(&r.inv, c->world,
                                  !hq_report_wants_pixels(r.rep) && !hq_mask_has_file(r.mask) && !is_clahe(&r), &r.io,
                                  err);
    if (rc) {
        free_run(&r);
        return rc;
    }
    if (r.io_ops->set_threads)
        r.io_ops->set_threads(r.io, threads_per_rank(&r));
    /* Per pixel, not per colour: CLAHE's tiles, and a --mask that leaves some pixels of a colour as
     * they were (--mask-apply inside). */
    hq_out_opts oo = {o->output, o->force, o->png_level, o->verbose, r.res.action == HQ_RESUME_CONTINUE,
                      is_clahe(&r) || (o->mask && o->mask_inside)};
    double t_phase = hq_now();
    rc = r.io_ops->create_output(r.io, &oo, c->world, err);
    r.t[PH_CREATE] = hq_now() - t_phase;
    if (!rc)
        rc = open_journal(&r, err);
    if (!rc)
        r.wb = hq_writeback_start(r.sync_fd);
    uint64_t done_px = 0, done_bytes = 0;
    if (!rc)
        rc = hq_comm_agree(c, apply_journal(&r, &done_px, &done_bytes, err), err);
    if (!rc)
        rc = make_engine(&r, err);
    if (!rc && o->verbose)
        report_plan(&r);
    if (!rc && o->method == HQ_METHOD_MATCH)
        rc = hq_comm_agree(c, make_target(&r, err), err);
    if (!rc) {
        uint64_t total_bytes = 0, pass0_bytes = 0;
        for (size_t i = 0; i < r.inv.n; i++)
            total_bytes += r.inv.items[i].bad ? 0 : r.inv.items[i].slices * hq_item_image_bytes(&r.inv.items[i]);
        for (uint64_t j = 0; j < r.plan.nblocks && !o->range_set; j++) /* read once more, by pass 0 */
            if (is_float(&r, r.plan.blocks[j].item) && !is_fused(&r, &r.plan.blocks[j]))
                pass0_bytes += block_bytes(&r, &r.plan.blocks[j]);
        uint64_t done[2] = {done_px, done_bytes};
        MPI_Allreduce(MPI_IN_PLACE, done, 2, MPI_UINT64_T, MPI_SUM, c->world);
        if (r.res.action == HQ_RESUME_CONTINUE && c->rank == 0 && !o->quiet)
            fprintf(stderr, "histeq_dist: note: resuming %s: %.1f%% of the pixels were written by the interrupted "
                    "run%s\n", o->output, r.plan.total_pixels ? 100.0 * (double)done[0] / (double)r.plan.total_pixels : 0.0,
                    r.res.st.nhists ? ", and its histograms are kept" : "");
        hq_progress_start(&r.prog, c->world, o->quiet ? 0 : o->progress, r.plan.total_pixels - done[0],
                          2 * total_bytes + pass0_bytes - done[1]);
        /* The passes. Each rank carries its own status through the collective parts and the ranks
         * agree on it only where they next meet, so a failure never strands a rank in a call. */
        int mine = pass0_ranges(&r, err); /* float data only; agreed */
        if (!mine)
            mine = pass1_shared(&r, err);
        if (!mine)
            mine = pass1_own(&r, err);
        rc = hq_comm_agree(c, mine, err);
        if (!rc)
            rc = hq_comm_agree(c, reduce_shared(&r, err), err);
        if (!rc)
            rc = hq_comm_agree(c, journal_histograms(&r, err), err);
        if (!rc) {
            rc = hq_comm_agree(c, build_pending_luts(&r, err), err);
            if (!rc)
                rc = hq_comm_agree(c, pass2(&r, err), err);
        }
        hq_progress_finish(&r.prog);
    }
    if (!rc)
        rc = hq_comm_agree(c, share_fused_ranges(&r, err), err);
    hq_writeback_stop(r.wb); /* the last writes are the close's fdatasync's, or nobody's */
    r.wb = NULL;
    hq_mode gm = {1, 1, 8, 0, 0};
    const group_hist *gg = rc ? NULL : global_group(&r, &gm);
    hq_run_meta meta = {.version = HQ_VERSION, .method = o->method, .scope = r.scope, .color = o->color, .bits = o->bits,
                        .clahe = is_clahe(&r) ? &o->clahe : NULL,
                        .global_hist = gg ? gg->hist : NULL, .global_nhist = hq_mode_nhist(&gm),
                        .global_bins = hq_mode_bins(&gm), .global_lut = gg ? gg->lut : NULL,
                        .reference = o->reference, .mask = o->mask,
                        .mask_apply = o->mask || o->ignore ? (o->mask_inside ? "inside" : "all") : NULL,
                        .fbins = r.fbin ? o->fbins : 0, .frange_given = o->range_set, .fbin = r.fbin,
                        .item_image0 = r.plan.item_image0};
    char ignore_text[16];
    if (o->ignore) {
        snprintf(ignore_text, sizeof ignore_text, "%u:%u", o->ignore_lo, o->ignore_hi);
        meta.ignore = ignore_text;
    }
    if (!rc)
        rc = hq_comm_agree(c, hq_report_meta(r.rep, &meta, err), err);
    hq_err close_err = {{0}};
    t_phase = hq_now();
    int rc_close = r.io_ops->close(r.io, rc == 0, &meta, &close_err);
    {
        hq_err mask_err;
        int rc_mask = hq_mask_close(r.mask, &mask_err);
        r.mask = NULL;
        if (!rc_close && rc_mask) {
            rc_close = rc_mask;
            close_err = mask_err;
        }
    }
    r.t[PH_CLOSE] = hq_now() - t_phase;
    if (!rc && rc_close) {
        rc = rc_close;
        *err = close_err;
    }
    rc = hq_comm_agree(c, rc, err);
    /* Finished (renamed into place) or failed in good order (taken back): either way nothing is
     * left to resume. A killed run never gets here, and keeps its journal. */
    if (r.journal && c->rank == 0)
        hq_journal_remove(o->output);
    if (!rc) {
        r.skipped = skipped_lines(&r);
        r.skipped_len = r.skipped ? strlen(r.skipped) : 0;
        report_skipped(&r);
        uint64_t skipped = r.nskipped;
        MPI_Allreduce(MPI_IN_PLACE, &skipped, 1, MPI_UINT64_T, MPI_SUM, c->world);
        for (size_t i = 0; i < r.inv.n; i++)
            skipped += r.inv.items[i].bad;
        hq_report_end end = {r.eng, r.t, PHASE_NAMES, PH_N, r.pixels_done, r.bytes_done, r.skipped, skipped,
                             hq_now() - t_start};
        rc = hq_comm_agree(c, hq_report_finish(r.rep, &end, err), err);
        if (!rc)
            rc = hq_comm_agree(c, report_summary(&r, hq_now() - t_start, skipped, err), err);
        if (!rc && skipped)
            rc = HQ_ESKIPPED;
    }
    free_run(&r);
    return rc;
}
