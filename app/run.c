/* run.c — the data path, top to bottom: scan -> plan -> read -> histogram -> allreduce -> LUT ->
 * remap -> write, the same on every rank.
 *
 * Histograms belong to groups: one per image (scope image) or one for everything (scope global).
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
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "../core/fbin.h"
#include "../core/lut.h"
#include "../core/sample.h"
#include "../engine/engine.h"
#include "../io/io.h"
#include "../jobs/journal.h"
#include "../jobs/plan.h"
#include "../mpi/progress.h"
#include "../report/report.h"
#include "pipeline.h"
#include "resume.h"
#include "summary.h"

#ifndef HQ_VERSION
#define HQ_VERSION "dev"
#endif

/* Blocks alive at once besides the held ones: the I/O pipeline's slots (app/pipeline.h). */
#define IN_FLIGHT_BLOCKS 3

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
    int restored;   /* complete already: taken from an interrupted run's journal (--resume) */
} group_hist;

typedef struct my_block {
    const hq_block *b;
    int fused;   /* all its groups end inside it */
    int done;    /* written */
    void *held;  /* pixels kept between the passes (NULL: not read, or dropped) */
} my_block;

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
    uint64_t held_bytes, budget;
    int threaded_io;      /* own items' I/O runs on a thread of its own (app/pipeline.h) */
    double t[PH_N];
    uint64_t pixels_done, bytes_done; /* written; updated by the thread that writes */
    uint64_t bytes_histogrammed;      /* pending blocks through pass 1, float blocks through pass 0;
                                         updated by the compute thread */
    hq_progress prog;
    char *skipped;        /* this rank's skipped inputs, one line each */
    size_t skipped_len;
    uint64_t nskipped;
    hq_resume res;        /* fresh run, or what an interrupted one did (--resume) */
    hq_journal *journal;  /* this rank's log of finished work; NULL when the output keeps none */
    int sync_fd;          /* the output file, for fdatasync before the journal claims blocks */
    uint64_t writes;      /* blocks written, for the HQ_FAULT_KILL test hook */
    long kill_after;      /* HQ_FAULT_KILL=RANK:N: this rank kills itself after N writes (tests) */
    hq_report *rep;       /* what the run records: --report and the output's provenance (report/report.h) */
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

static uint64_t block_bytes(const run *r, const hq_block *b)
{
    const hq_item *it = &r->inv.items[b->item];
    return hq_block_pixels(b) * it->channels * it->sample_bytes;
}

static uint64_t image_of(const run *r, const hq_block *b, uint64_t s)
{
    return r->plan.item_image0[b->item] + s;
}

static uint64_t group_of(const run *r, uint64_t image)
{
    return r->scope == HQ_SCOPE_GLOBAL ? 0 : image;
}

/* A block is fused when every group in it ends inside it: whole images under scope image, or the
 * only block of the whole job under scope global. */
static int is_fused(const run *r, const hq_block *b)
{
    if (r->scope == HQ_SCOPE_GLOBAL)
        return 0;
    return hq_block_whole(b, r->inv.items[b->item].height, r->inv.items[b->item].width);
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
        if (r->o->bits && it->sample != HQ_SAMPLE_FLOAT && r->o->bits > it->depth)
            return hq_fail(err, HQ_EUSAGE, "%s%s%s: --bits %u exceeds the data's %u bits", it->src,
                           r->inv.format == HQ_FMT_HDF5 ? ":" : "", r->inv.format == HQ_FMT_HDF5 ? it->name : "",
                           r->o->bits, it->depth);
        if (first < 0)
            first = (int)i;
    }
    if (first < 0)
        return hq_fail(err, HQ_EINPUT, "%s: nothing to equalize (every input was left out)", r->o->input);
    r->scope = r->o->scope != HQ_SCOPE_AUTO ? r->o->scope : images > 1 ? HQ_SCOPE_IMAGE : HQ_SCOPE_GLOBAL;
    if (r->scope != HQ_SCOPE_GLOBAL)
        return 0;
    /* One histogram for everything only makes sense if every image bins the same way. */
    const hq_mode m0 = mode_of(r, (uint64_t)first);
    for (size_t i = (size_t)first + 1; i < r->inv.n; i++) {
        if (r->inv.items[i].bad)
            continue;
        hq_mode m = mode_of(r, i);
        if (hq_mode_bins(&m) != hq_mode_bins(&m0) || hq_mode_nhist(&m) != hq_mode_nhist(&m0) ||
            m.sample_bytes != m0.sample_bytes)
            return hq_fail(err, HQ_EUSAGE, "%s: --scope global needs every image to have the same depth and "
                           "color layout (%s differs from %s)", r->o->input, r->inv.items[i].name,
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

static int scan_and_share(run *r, hq_err *err)
{
    int rc = 0;
    unsigned char *buf = NULL;
    uint64_t len = 0;
    if (r->c->rank == 0) {
        rc = hq_io_scan(r->o->input, r->o->on_error == HQ_ONERR_SKIP, &r->inv, err);
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

/* --memory bounds what a rank holds of pixels at once: the blocks in flight (IN_FLIGHT_BLOCKS, the
 * I/O pipeline's depth; the lockstep passes hold one) plus the pending blocks kept for pass 2,
 * which are read again when they do not fit. Blocks shrink to fit (at most a third of the budget
 * each), down to the smallest the input allows: an image that must stay whole, a compressed chunk.
 * Below three of those nothing works, and the run is refused before it starts. */
static int fit_memory(run *r, const hq_plan_item *pi, uint64_t memory, uint64_t *block, hq_err *err)
{
    size_t which = 0;
    const uint64_t unit = hq_plan_min_block(pi, r->inv.n, &which);
    if (unit > memory / IN_FLIGHT_BLOCKS) {
        const hq_item *it = &r->inv.items[which];
        const uint64_t need_k = (IN_FLIGHT_BLOCKS * unit + 1023) / 1024;
        char have[32], one[32];
        size_text(memory, have, sizeof have);
        size_text(unit, one, sizeof one);
        return hq_fail(err, HQ_EUSAGE, "%s%s%s: --memory %s%s is too small: its smallest block is %s (%s) and up "
                       "to %d blocks are in flight at once; use --memory %lluK or more", it->src,
                       r->inv.format == HQ_FMT_HDF5 ? ":" : "", r->inv.format == HQ_FMT_HDF5 ? it->name : "", have,
                       r->o->memory ? "" : " (the default)", one,
                       !pi[which].splittable ? "the whole image" : pi[which].whole_chunks ? "one compressed chunk"
                                                                                          : "one pixel",
                       IN_FLIGHT_BLOCKS,
                       (unsigned long long)need_k);
    }
    *block = r->o->block_bytes < memory / IN_FLIGHT_BLOCKS ? r->o->block_bytes : memory / IN_FLIGHT_BLOCKS;
    return 0;
}

static int make_plan(run *r, hq_err *err)
{
    const uint64_t memory = agreed_memory(r);
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
    int rc = fit_memory(r, pi, memory, &block, err);
    if (!rc)
        rc = hq_plan_make(pi, r->inv.n, r->c->size, block, &r->plan, err);
    free(pi);
    if (rc)
        return rc;
    const uint64_t in_flight = IN_FLIGHT_BLOCKS * r->plan.max_block_bytes;
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

/* Under scope image, the images whose tiles lie on more than one rank: their histograms are summed
 * over ranks. The same ascending list on every rank. */
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
                parts[n++] = (part_of){image_of(r, &p->blocks[j], p->blocks[j].s0), k};
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
    if (r->scope == HQ_SCOPE_IMAGE) {
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

static group_hist *find_group(run *r, uint64_t g, const hq_mode *m, int create)
{
    for (size_t i = 0; i < r->ngroups; i++)
        if (r->groups[i].group == g)
            return &r->groups[i];
    if (!create)
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
    gh->len = hist_len(m);
    gh->hist = calloc(hist_len(m), sizeof *gh->hist);
    gh->lut = malloc(hist_len(m) * sizeof *gh->lut);
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

static void build_luts(const run *r, const hq_mode *m, uint64_t group, const uint64_t *hist, uint16_t *lut)
{
    const uint32_t bins = hq_mode_bins(m);
    for (uint32_t h = 0; h < hq_mode_nhist(m); h++)
        hq_lut_build(r->o->method, hist + (size_t)h * bins, bins, lut + (size_t)h * bins);
    hq_report_lut(r->rep, group, hist, lut);
}

/* ---- one block through the engine ---- */

static hq_block_data block_view(const run *r, const hq_block *b, void *data, int per_image)
{
    const uint64_t px = hq_block_pixels(b);
    hq_block_data d = {data, 1, px, 0, NULL};
    if (per_image && b->s1 - b->s0 > 1) {
        d.nseg = b->s1 - b->s0;
        d.seg_pixels = px / d.nseg;
    }
    /* Segments are consecutive images, hence consecutive groups (or the one global group). */
    if (r->fbin && r->inv.items[b->item].sample == HQ_SAMPLE_FLOAT)
        d.fbin = &r->fbin[group_of(r, image_of(r, b, b->s0))];
    return d;
}

/* Progress counts each block's bytes twice: once histogrammed, once written. */
static void tick(run *r)
{
    const uint64_t w = __atomic_load_n(&r->bytes_done, __ATOMIC_RELAXED);
    const uint64_t h = __atomic_load_n(&r->bytes_histogrammed, __ATOMIC_RELAXED);
    hq_progress_tick(&r->prog, __atomic_load_n(&r->pixels_done, __ATOMIC_RELAXED), w + h);
}

/* ---- the journal (--resume) ---- */

static int global_mode(const run *r, hq_mode *m);
static void replay_images(run *r);

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
        int need = r->scope == HQ_SCOPE_GLOBAL && h->group == 0 && global_mode(r, &m);
        for (uint64_t j = 0; !need && j < r->nmine; j++) {
            const hq_block *b = r->mine[j].b;
            if (!r->mine[j].fused && group_of(r, image_of(r, b, b->s0)) == h->group) {
                m = mode_of(r, b->item);
                need = 1;
            }
        }
        if (!need)
            continue;
        group_hist *gh = find_group(r, h->group, &m, 1);
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
    const group_hist *gh = find_group(r, group_of(r, image_of(r, mb->b, mb->b->s0)), NULL, 0);
    return gh && gh->restored;
}

static int timed_read(run *r, const hq_block *b, uint64_t item, int collective, void **data, hq_err *err)
{
    double t0 = hq_now();
    *data = NULL;
    if (b) {
        *data = hq_block_alloc(r->eng, block_bytes(r, b));
        if (!*data)
            return hq_fail(err, HQ_EMEM, "%s: out of memory for a block of %llu bytes (lower --block)",
                           r->inv.items[item].src, (unsigned long long)block_bytes(r, b));
    }
    int rc = r->io_ops->read_block(r->io, item, b, collective, *data, err);
    if (!rc && *data && r->inv.items[item].sample == HQ_SAMPLE_INT)
        hq_sample_flip(*data, hq_block_pixels(b) * r->inv.items[item].channels, r->inv.items[item].sample_bytes);
    r->t[PH_READ] += hq_now() - t0;
    if (rc) {
        hq_block_free(r->eng, *data);
        *data = NULL;
    }
    return rc;
}

static int timed_write(run *r, const hq_block *b, uint64_t item, int collective, const void *data, hq_err *err)
{
    double t0 = hq_now();
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
        __atomic_add_fetch(&r->pixels_done, hq_block_pixels(b), __ATOMIC_RELAXED);
        __atomic_add_fetch(&r->bytes_done, block_bytes(r, b), __ATOMIC_RELAXED);
        /* Compressed datasets written by several ranks are claimed after their round's flush.
         * A journal flush syncs the output to disk: write time too. */
        if (!needs_round_flush(r, item))
            rc = note_written(r, b, err);
    }
    r->t[PH_WRITE] += hq_now() - t0;
    tick(r);
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
        const uint64_t g = group_of(r, image_of(r, b, b->s0 + s));
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
    const hq_mode m = mode_of(r, b->item);
    hq_block_data d = block_view(r, b, data, 1);
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
    for (uint64_t s = 0; s < d.nseg && !rc; s++) {
        const uint64_t image = image_of(r, b, b->s0 + s);
        build_luts(r, &m, image, hp[s], lut + s * hl);
        rc = journal_image(r, image, hp[s], lut + s * hl, hl, err);
    }
    if (rc)
        goto done;
    d.same_as_histogram = 1;
    rc = r->eng->ops->remap(r->eng, &d, &m, lp, err);
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

/* Pending: add the block to its group's histogram (every block of a pending group is one image,
 * or everything under scope global). */
static int histogram_pending(run *r, const hq_block *b, void *data, hq_err *err)
{
    const hq_mode m = mode_of(r, b->item);
    hq_block_data d = block_view(r, b, data, 0);
    group_hist *gh = find_group(r, group_of(r, image_of(r, b, b->s0)), &m, 1);
    if (!gh)
        return hq_fail(err, HQ_EMEM, "%s: out of memory for a histogram", r->inv.items[b->item].src);
    double t0 = hq_now();
    uint64_t *hp[1] = {gh->hist};
    int rc = name_float_failure(r, b->item, r->eng->ops->histogram(r->eng, &d, &m, hp, err), err);
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
    hq_block_data d = block_view(r, b, data, 0);
    group_hist *gh = find_group(r, group_of(r, image_of(r, b, b->s0)), &m, 0);
    if (!gh)
        return hq_fail(err, HQ_EIO, "%s: internal error: no histogram for a pending block", r->inv.items[b->item].src);
    double t0 = hq_now();
    const uint16_t *lp[1] = {gh->lut};
    int rc = r->eng->ops->remap(r->eng, &d, &m, lp, err);
    r->t[PH_REMAP] += hq_now() - t0;
    if (!rc)
        hq_report_pixels(r->rep, b, data, 1);
    return rc;
}

/* Keeps a pending block's pixels for pass 2 if the budget allows; otherwise pass 2 re-reads them. */
static void hold_or_drop(run *r, my_block *mb, void *data)
{
    uint64_t n = block_bytes(r, mb->b);
    if (r->held_bytes + n <= r->budget) {
        mb->held = data;
        r->held_bytes += n;
    } else {
        hq_block_free(r->eng, data);
    }
}

/* Done with a block's pixels: held ones leave the budget, freshly read ones are simply freed. */
static void release(run *r, my_block *mb, void *data)
{
    if (mb->held) {
        r->held_bytes -= block_bytes(r, mb->b);
        hq_block_free(r->eng, mb->held);
        mb->held = NULL;
    } else {
        hq_block_free(r->eng, data);
    }
}

/* A bad PNG met while decoding: with --on-error skip it is listed and left out, not fatal. */
static int maybe_skip(run *r, my_block *mb, int rc, const hq_err *err)
{
    if (!rc || r->o->on_error != HQ_ONERR_SKIP || r->inv.format != HQ_FMT_PNG || rc != HQ_EINPUT)
        return rc;
    size_t n = strlen(err->msg) + 1;
    char *s = realloc(r->skipped, r->skipped_len + n + 1);
    if (s) {
        r->skipped = s;
        memcpy(s + r->skipped_len, err->msg, n - 1);
        s[r->skipped_len + n - 1] = '\n';
        s[r->skipped_len + n] = '\0';
        r->skipped_len += n;
    }
    r->nskipped++;
    mb->done = 1;
    return 0;
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
    const group_hist *g0 = find_group(r, group_of(r, image_of(r, first->b, first->b->s0)), NULL, 0);
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
    const uint64_t g = group_of(r, image_of(r, first->b, first->b->s0));
    group_hist *gh = find_group(r, g, &m, 0);
    if (!rc && gh && !restored)
        rc = hq_journal_note_hist(r->journal, g, gh->hist, gh->len, err);
    if (!rc && gh)
        build_luts(r, &m, g, gh->hist, gh->lut);
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

/* Blocks of this rank's own items stream through the I/O pipeline: the I/O thread reads the
 * next block and writes the previous one while this thread computes. */
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
    return hq_pipeline_run(kind == STREAM_HIST || kind == STREAM_RANGE ? &hist_only : &with_write, &st, n, r->threaded_io, err);
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
        if (!mb->fused && r->scope == HQ_SCOPE_IMAGE) {
            uint64_t n = 1; /* the row bands of this image that follow */
            while (j + n < r->nmine && r->mine[j + n].b->item == mb->b->item && r->mine[j + n].b->s0 == mb->b->s0)
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
    const hq_block_data d = block_view(r, b, data, r->scope == HQ_SCOPE_IMAGE);
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
        hq_frange *g = &r->facc[group_of(r, image_of(r, b, b->s0 + s))];
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

/* Sums the shared groups' histograms over ranks: one buffer, one (chunked) MPI_Allreduce. */
static int reduce_shared(run *r, hq_err *err)
{
    if (!r->nshared)
        return 0;
    /* All shared groups bin alike: under scope image they are images of the inventory, whose modes
     * may differ, so size each slot by the largest mode. */
    size_t slot = 0;
    for (size_t i = 0; i < r->inv.n; i++) {
        hq_mode m = mode_of(r, i);
        if (!r->inv.items[i].bad && hist_len(&m) > slot)
            slot = hist_len(&m);
    }
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
        if (!global_mode(r, &m) || !find_group(r, 0, &m, 1)) {
            free(buf);
            return hq_fail(err, HQ_EMEM, "allreduce: out of memory for the global histogram");
        }
    }
    /* A histogram restored from the journal is complete on every rank that holds it already. */
    for (uint64_t k = 0; k < r->nshared; k++) {
        group_hist *gh = find_group(r, r->shared[k], NULL, 0);
        if (gh && !gh->restored)
            memcpy(buf + k * slot, gh->hist, gh->len * sizeof *buf);
    }
    double t0 = hq_now();
    int rc = hq_comm_sum_u64(r->c, buf, r->nshared * slot);
    r->t[PH_REDUCE] += hq_now() - t0;
    for (uint64_t k = 0; k < r->nshared && !rc; k++) {
        group_hist *gh = find_group(r, r->shared[k], NULL, 0);
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

static void build_pending_luts(run *r)
{
    for (size_t i = 0; i < r->ngroups; i++) {
        /* A pending group's mode is the mode of any of its blocks. */
        for (uint64_t j = 0; j < r->nmine; j++) {
            const hq_block *b = r->mine[j].b;
            if (group_of(r, image_of(r, b, b->s0)) != r->groups[i].group)
                continue;
            const hq_mode m = mode_of(r, b->item);
            build_luts(r, &m, r->groups[i].group, r->groups[i].hist, r->groups[i].lut);
            break;
        }
    }
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

static int make_engine(run *r, hq_err *err)
{
    const hq_options *o = r->o;
    hq_engine_cfg cfg = {o->threads, r->c->local_rank, r->c->local_size, o->verbose};
    if (!cfg.threads) {
        cfg.threads = omp_get_num_procs() / (r->c->local_size > 0 ? r->c->local_size : 1);
        if (cfg.threads < 1)
            cfg.threads = 1;
    }
    int rc;
    if (o->device == HQ_DEV_COPY)
        return hq_comm_agree(r->c, hq_copy_engine_create(&r->eng, err), err);
    int ngpu = hq_gpu_device_count();
    if (o->device == HQ_DEV_GPU || (o->device == HQ_DEV_AUTO && ngpu > 0)) {
        rc = hq_gpu_engine_create(&cfg, &r->eng, err);
        if (!rc && ngpu > 0 && r->c->local_size > ngpu && r->c->local_rank == 0 && !o->quiet)
            fprintf(stderr, "histeq_dist: note: %s: %d ranks share %d GPU%s\n", r->c->host, r->c->local_size, ngpu,
                    ngpu == 1 ? "" : "s");
    } else {
        if (o->device == HQ_DEV_AUTO && r->c->rank == 0 && !o->quiet)
            fprintf(stderr, "histeq_dist: note: no GPU visible, using the CPU engine\n");
        rc = hq_cpu_engine_create(&cfg, &r->eng, err);
    }
    return hq_comm_agree(r->c, rc, err);
}

/* ---- reports ---- */

static void report_plan(const run *r)
{
    char line[512], dev[128] = "";
    if (r->eng)
        r->eng->ops->describe(r->eng, dev, sizeof dev);
    snprintf(line, sizeof line, "rank %d on %.200s: %s; %llu blocks, %llu pixels", r->c->rank, r->c->host, dev,
             (unsigned long long)r->nmine, (unsigned long long)r->plan.rank_pixels[r->c->rank]);
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
    for (uint64_t j = 0; j < r->nmine; j++)
        hq_block_free(r->eng, r->mine[j].held);
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
    if (r->sync_fd >= 0)
        close(r->sync_fd);
    hq_journal_state_free(&r->res.st);
    hq_report_free(r->rep);
    hq_engine_destroy(r->eng);
    hq_plan_free(&r->plan);
    hq_inventory_free(&r->inv);
}

/* The global histogram for the output's metadata, or NULL under scope image. */
static const uint64_t *global_hist(run *r, hq_mode *m)
{
    if (r->scope != HQ_SCOPE_GLOBAL || !global_mode(r, m))
        return NULL;
    group_hist *gh = find_group(r, 0, m, 0);
    return gh ? gh->hist : NULL;
}

int hq_run(const hq_options *o, const hq_comm *c, hq_err *err)
{
    run r = {.o = o, .c = c, .sync_fd = -1};
    const double t_start = hq_now();
    int rc = scan_and_share(&r, err);
    if (rc)
        return rc;
    r.io_ops = hq_io_ops_for(r.inv.format);
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
    r.threaded_io = getenv("HQ_SERIAL_IO") == NULL; /* HQ_SERIAL_IO=1: one thread, for debugging */
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
        rc = r.io_ops->open_input(&r.inv, c->world, !hq_report_wants_pixels(r.rep), &r.io, err);
    if (rc) {
        free_run(&r);
        return rc;
    }
    hq_out_opts oo = {o->output, o->force, o->png_level, o->verbose, r.res.action == HQ_RESUME_CONTINUE};
    double t_phase = hq_now();
    rc = r.io_ops->create_output(r.io, &oo, c->world, err);
    r.t[PH_CREATE] = hq_now() - t_phase;
    if (!rc)
        rc = open_journal(&r, err);
    uint64_t done_px = 0, done_bytes = 0;
    if (!rc)
        rc = hq_comm_agree(c, apply_journal(&r, &done_px, &done_bytes, err), err);
    if (!rc)
        rc = make_engine(&r, err);
    if (!rc && o->verbose)
        report_plan(&r);
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
            build_pending_luts(&r);
            rc = hq_comm_agree(c, pass2(&r, err), err);
        }
        hq_progress_finish(&r.prog);
    }
    if (!rc)
        rc = hq_comm_agree(c, share_fused_ranges(&r, err), err);
    hq_mode gm = {1, 1, 8, 0, 0};
    const uint64_t *gh = rc ? NULL : global_hist(&r, &gm);
    hq_run_meta meta = {.version = HQ_VERSION, .method = o->method, .scope = r.scope, .color = o->color, .bits = o->bits,
                        .global_hist = gh, .global_nhist = hq_mode_nhist(&gm), .global_bins = hq_mode_bins(&gm),
                        .fbins = r.fbin ? o->fbins : 0, .frange_given = o->range_set, .fbin = r.fbin,
                        .item_image0 = r.plan.item_image0};
    if (!rc)
        rc = hq_comm_agree(c, hq_report_meta(r.rep, &meta, err), err);
    hq_err close_err = {{0}};
    t_phase = hq_now();
    int rc_close = r.io_ops->close(r.io, rc == 0, &meta, &close_err);
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
