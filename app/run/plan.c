/* plan.c — who does what, the same on every rank: the items' modes checked and the scope chosen,
 * the memory budget agreed and fitted to the blocks in flight, the I/O threads, the plan
 * (jobs/plan.h), then which items need collective I/O, which groups are summed over ranks and which
 * blocks are this rank's (run_classify_work). A run that cannot fit --memory is refused here, before
 * anything is read. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../threads.h"
#include "run_internal.h"

/* An item the options cannot apply to (why): the run's usage error, or under --on-error skip a
 * skipped input like those the scan leaves out (io/scan.c), listed at the end; the same on every
 * rank. */
static int cannot_apply(run *r, hq_item *it, const hq_err *why, hq_err *err)
{
    if (r->o->on_error != HQ_ONERR_SKIP) {
        *err = *why;
        return HQ_EUSAGE;
    }
    return hq_item_set_bad(it, why->msg, err);
}

int run_check_modes(run *r, hq_err *err)
{
    uint64_t images = 0;
    int first = -1;
    for (size_t i = 0; i < r->inv.n; i++) {
        hq_item *it = &r->inv.items[i];
        if (it->bad)
            continue;
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
        if (it->sample == HQ_SAMPLE_FLOAT && run_is_clahe(r))
            return hq_fail(err, HQ_EUSAGE, "%s:%s: --method clahe does not apply to float data yet", it->src, it->name);
        if (r->o->bits && it->sample != HQ_SAMPLE_FLOAT && r->o->bits > it->depth)
            return hq_fail(err, HQ_EUSAGE, "%s%s%s: --bits %u exceeds the data's %u bits", it->src,
                           r->inv.format == HQ_FMT_HDF5 ? ":" : "", r->inv.format == HQ_FMT_HDF5 ? it->name : "",
                           r->o->bits, it->depth);
        hq_clahe_geom g;
        if (run_is_clahe(r) && hq_clahe_geom_make(&r->o->clahe, it->height, it->width, &g)) {
            /* A thumbnail in a folder of scans: under --on-error skip it is left out and listed,
             * not the end of the whole collection. */
            char grid[64];
            hq_err why;
            if (r->o->clahe.tile)
                snprintf(grid, sizeof grid, "--clahe-tile %llu", (unsigned long long)r->o->clahe.tile);
            else
                snprintf(grid, sizeof grid, "--clahe-grid %llux%llu", (unsigned long long)r->o->clahe.grid_y,
                         (unsigned long long)r->o->clahe.grid_x);
            hq_fail(&why, HQ_EUSAGE, "%s%s%s: %s has more tiles than the image's %llux%llu pixels", it->src,
                    r->inv.format == HQ_FMT_HDF5 ? ":" : "", r->inv.format == HQ_FMT_HDF5 ? it->name : "", grid,
                    (unsigned long long)it->height, (unsigned long long)it->width);
            int rc = cannot_apply(r, it, &why, err);
            if (rc)
                return rc;
            continue;
        }
        images += it->slices;
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
    r->scope = r->o->scope != HQ_SCOPE_AUTO ? r->o->scope
               : images > 1 || run_is_clahe(r) ? HQ_SCOPE_IMAGE : HQ_SCOPE_GLOBAL;
    /* Match maps every image onto one target: every image must bin alike, as under scope global. */
    if (r->scope != HQ_SCOPE_GLOBAL && r->o->method != HQ_METHOD_MATCH)
        return 0;
    /* One histogram for everything only makes sense if every image bins the same way. */
    const hq_mode m0 = run_mode_of(r, (uint64_t)first);
    for (size_t i = (size_t)first + 1; i < r->inv.n; i++) {
        if (r->inv.items[i].bad)
            continue;
        hq_mode m = run_mode_of(r, i);
        if (hq_mode_bins(&m) != hq_mode_bins(&m0) || hq_mode_nhist(&m) != hq_mode_nhist(&m0) ||
            m.sample_bytes != m0.sample_bytes)
            return hq_fail(err, HQ_EUSAGE, "%s: %s needs every image to have the same depth and "
                           "color layout (%s differs from %s)", r->o->input,
                           r->scope == HQ_SCOPE_GLOBAL ? "--scope global" : "--method match", r->inv.items[i].name,
                           r->inv.items[first].name);
    }
    return 0;
}

void run_note_idle_options(const run *r)
{
    if (r->c->rank != 0 || r->o->quiet)
        return;
    int floats = 0;
    uint32_t top = 0; /* the highest level any integer image can hold, after --bits */
    for (size_t i = 0; i < r->inv.n; i++) {
        const hq_item *it = &r->inv.items[i];
        if (it->bad)
            continue;
        const uint32_t bits = r->o->bits ? r->o->bits : it->depth;
        if (it->sample == HQ_SAMPLE_FLOAT)
            floats = 1;
        else if (bits < 32 && (1u << bits) - 1 > top)
            top = (1u << bits) - 1;
    }
    if (r->o->range_set && !floats)
        fprintf(stderr, "histeq_dist: note: %s holds no float data: --range does nothing\n", r->o->input);
    if (r->o->ignore && !floats && r->o->ignore_lo > top)
        fprintf(stderr, "histeq_dist: note: --ignore %u:%u lies above every level of %s (0..%u): nothing is left "
                "out\n", r->o->ignore_lo, r->o->ignore_hi, r->o->input, top);
}

static uint64_t default_budget(const hq_comm *c)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t ram = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : (uint64_t)4 << 30;
    return ram / 4 / (uint64_t)(c->local_size > 0 ? c->local_size : 1);
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

/* Under an address-space limit (ulimit -v), the pixels may take what the limit leaves above what
 * the rank maps now, less a reserve for everything else (libraries' buffers and caches, the HDF5
 * workers' chunks, the histograms): at least ROOM_RESERVE, a quarter of the room on large ones.
 * Past it, a library's malloc fails, and HDF5 1.10 does not survive that (app/threads.h). */
#define ROOM_RESERVE ((uint64_t)64 << 20)
static uint64_t room_for_pixels(uint64_t room)
{
    const uint64_t keep = room / 4 > ROOM_RESERVE ? room / 4 : ROOM_RESERVE;
    return room > keep ? room - keep : 0;
}

/* The per-rank memory budget, the same on every rank: the plan depends on it, and every rank must
 * compute the same plan (the default differs between nodes of different sizes: take the smallest).
 * 0 with err set when --memory, or any budget at all, does not fit an address-space limit. */
static uint64_t agreed_memory(run *r, hq_err *err)
{
    uint64_t limit, room = hq_address_room(&limit), fits = UINT64_MAX;
    if (room != UINT64_MAX)
        fits = room_for_pixels(room);
    uint64_t m = r->o->memory ? r->o->memory : default_budget(r->c);
    int by_limit = 0;
    if (!r->o->memory && m > fits) {
        m = fits;
        by_limit = 1;
    }
    MPI_Allreduce(MPI_IN_PLACE, &by_limit, 1, MPI_INT, MPI_MAX, r->c->world);
    r->memory_by_limit = by_limit;
    int rc = 0;
    if (m > fits || m == 0) {
        char want[32], have[32], left[32], lim[32];
        size_text(m, want, sizeof want);
        size_text(fits, have, sizeof have);
        size_text(room, left, sizeof left);
        size_text(limit, lim, sizeof lim);
        if (r->o->memory)
            rc = hq_fail(err, HQ_EMEM, "--memory %s does not fit the address-space limit (ulimit -v: %s, %s of it "
                         "left): at most %s for pixels; lower --memory or raise the limit", want, lim, left, have);
        else
            rc = hq_fail(err, HQ_EMEM, "the address-space limit (ulimit -v: %s, %s of it left) leaves no room for "
                         "pixels: raise the limit", lim, left);
        m = 0;
    }
    rc = hq_comm_agree(r->c, rc, err);
    uint64_t least = m;
    MPI_Allreduce(&m, &least, 1, MPI_UINT64_T, MPI_MIN, r->c->world);
    return rc ? 0 : least;
}

/* Without --block, a rank's share is cut into at least PIPELINE_BLOCKS blocks (none below
 * MIN_AUTO_BLOCK): the first block is read before any compute starts and the last written after it
 * ends, so with 256 MiB blocks a 1 GiB share spent a quarter of its run filling and draining the
 * pipeline. 1 GiB raw stack, 1 rank on the 2-core VM: 1.44 s with 64 MiB blocks against 1.63 s
 * with 256 MiB (median of 5; cp 0.79 s), and 3 blocks in flight touch 192 MiB of fresh memory, not
 * 768 MiB. Shares of 4 GiB and more keep 256 MiB blocks. */
#define PIPELINE_BLOCKS 16
#define MIN_AUTO_BLOCK ((uint64_t)16 << 20)
static uint64_t wanted_block(const run *r)
{
    if (r->o->block_given)
        return r->o->block_bytes;
    const uint64_t share = run_total_bytes(r) / (uint64_t)r->c->size / PIPELINE_BLOCKS;
    const uint64_t b = share > MIN_AUTO_BLOCK ? share : MIN_AUTO_BLOCK;
    return b < r->o->block_bytes ? b : r->o->block_bytes;
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
        /* The default was cut to what ulimit -v leaves: no --memory would help, only the limit. */
        if (r->memory_by_limit)
            return hq_fail(err, HQ_EMEM, "%s%s%s: the address-space limit (ulimit -v) leaves %s for pixels, less than "
                           "%d of its smallest blocks (%s each, %s): raise the limit (by more than %lluK)", it->src,
                           r->inv.format == HQ_FMT_HDF5 ? ":" : "", r->inv.format == HQ_FMT_HDF5 ? it->name : "",
                           have, HQ_PIPELINE_MIN_DEPTH, one,
                           !pi[which].splittable ? "the whole image" : pi[which].whole_chunks ? "one compressed chunk"
                                                                                              : "one pixel",
                           (unsigned long long)(need_k - memory / 1024));
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
    const uint64_t wanted = wanted_block(r);
    *block = wanted < memory / (uint64_t)*depth ? wanted : memory / (uint64_t)*depth;
    return 0;
}

/* Own items' I/O threads: --io-threads, by default one per CPU the rank works on, for a format
 * whose blocks may be read and written at once (io.h `concurrent`); one otherwise. HQ_SERIAL_IO=1
 * makes every call on the main thread, for debugging. */
void run_choose_io_threads(run *r)
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
    for (size_t i = 0; run_is_clahe(r) && i < r->inv.n; i++) {
        const hq_item *it = &r->inv.items[i];
        const uint64_t need = (uint64_t)run_group_len(r, i) * (sizeof(uint64_t) + sizeof(uint16_t));
        if (it->bad || need <= memory)
            continue;
        char have[32], want[32];
        size_text(memory, have, sizeof have);
        size_text(need, want, sizeof want);
        const hq_clahe_geom g = run_geom_of(r, i);
        if (r->memory_by_limit)
            return hq_fail(err, HQ_EMEM, "%s%s%s: CLAHE holds the image's %llux%llu tile histograms (%s), more than the "
                           "%s the address-space limit (ulimit -v) leaves for pixels: raise the limit, or use fewer "
                           "tiles", it->src, r->inv.format == HQ_FMT_HDF5 ? ":" : "",
                           r->inv.format == HQ_FMT_HDF5 ? it->name : "", (unsigned long long)g.tiles_y,
                           (unsigned long long)g.tiles_x, want, have);
        return hq_fail(err, HQ_EUSAGE, "%s%s%s: CLAHE holds the image's %llux%llu tile histograms (%s), more than "
                       "--memory %s: use fewer tiles (--clahe-grid, --clahe-tile), fewer --bits or more --memory",
                       it->src, r->inv.format == HQ_FMT_HDF5 ? ":" : "", r->inv.format == HQ_FMT_HDF5 ? it->name : "",
                       (unsigned long long)g.tiles_y, (unsigned long long)g.tiles_x, want, have);
    }
    return 0;
}

int run_make_plan(run *r, hq_err *err)
{
    const uint64_t memory = agreed_memory(r, err);
    if (!memory)
        return HQ_EMEM;
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
    if (!rc && (rc = hq_plan_make(pi, r->inv.n, r->c->size, block, &r->plan, err)) == HQ_EUSAGE) {
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err->msg);
        rc = hq_fail(err, HQ_EUSAGE, "%s: %s", r->o->input, why); /* the plan knows no names */
    }
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
        n += !run_is_fused(r, &p->blocks[j]);
    part_of *parts = malloc((n ? n : 1) * sizeof *parts);
    if (!parts)
        return -1;
    n = 0;
    for (int k = 0; k < p->nranks; k++)
        for (uint64_t j = p->first[k]; j < p->first[k + 1]; j++)
            if (!run_is_fused(r, &p->blocks[j]))
                parts[n++] = (part_of){run_group_of(r, &p->blocks[j]), k};
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
int run_classify_work(run *r, hq_err *err)
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
    r->item_lockstep = malloc(r->inv.n ? r->inv.n : 1);
    if (!r->item_lockstep)
        return hq_fail(err, HQ_EMEM, "plan: out of memory");
    memcpy(r->item_lockstep, r->item_shared, r->inv.n);
    const uint64_t f = p->first[r->c->rank], l = p->first[r->c->rank + 1];
    r->nmine = l - f;
    r->mine = calloc(r->nmine ? r->nmine : 1, sizeof *r->mine);
    if (!r->mine)
        return hq_fail(err, HQ_EMEM, "plan: out of memory");
    for (uint64_t k = 0; k < r->nmine; k++) {
        r->mine[k].b = &p->blocks[f + k];
        r->mine[k].fused = run_is_fused(r, r->mine[k].b);
    }
    return 0;
}

/* Once the output exists: the shared items whose every transfer may be independent leave the
 * lockstep walk, and each rank streams its blocks of them like those of its own items, its reads
 * and writes overlapped with its compute instead of one round at a time behind the slowest rank.
 * Every rank must walk the same items: the answers are agreed (an item stays in lockstep where
 * any rank says so). Collective. */
void run_choose_lockstep(run *r)
{
    if (!r->io_ops->independent || r->inv.n == 0)
        return;
    for (size_t i = 0; i < r->inv.n; i++)
        if (r->item_lockstep[i] && r->io_ops->independent(r->io, i))
            r->item_lockstep[i] = 0;
    MPI_Allreduce(MPI_IN_PLACE, r->item_lockstep, (int)r->inv.n, MPI_UNSIGNED_CHAR, MPI_MAX, r->c->world);
}
