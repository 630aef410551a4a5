/* compute.c — one block through the engine. A fused block's histograms, LUTs and remap in one go;
 * a pending block added to its group's histogram in pass 1, and remapped with its group's LUT in
 * pass 2; float data's extremes of a block, for pass 0 (run_range_block) or, in a fused block, for
 * its own binning (run_fused_ranges). Timed into the histogram and remap phases; the report sees the
 * pixels before and after. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "run_internal.h"

/* remap: 1 for a remap's view (the mask plane goes along only with --mask-apply inside). */
hq_block_data run_block_view(const run *r, const hq_block *b, void *data, int per_image, int remap)
{
    const uint64_t px = hq_block_pixels(b);
    hq_block_data d = {data, 1, px, 0, NULL, NULL, NULL};
    if (hq_mask_plane_bytes(r->mask, b) && (!remap || r->o->mask_inside))
        d.mask = (const uint8_t *)data + run_block_bytes(r, b);
    if (per_image && b->s1 - b->s0 > 1) {
        d.nseg = b->s1 - b->s0;
        d.seg_pixels = px / d.nseg;
    }
    /* Segments are consecutive images, hence consecutive groups (or the one global group). */
    if (r->fbin && r->inv.items[b->item].sample == HQ_SAMPLE_FLOAT)
        d.fbin = &r->fbin[run_group_of(r, b)];
    return d;
}

/* An engine refuses infinite float samples without knowing the file: name it. */
int run_name_float_failure(const run *r, uint64_t item, int rc, hq_err *err)
{
    if (rc != HQ_EINPUT || r->inv.items[item].sample != HQ_SAMPLE_FLOAT)
        return rc;
    hq_err e = *err;
    return hq_fail(err, rc, "%s:%s: %s; float data must be finite or NaN", r->inv.items[item].src,
                   r->inv.items[item].name, e.msg);
}

/* The engine's extremes of each of d's segments, in *mm (malloc'd, also on failure; the caller frees). */
static int segment_ranges(run *r, const hq_block *b, const hq_block_data *d, const hq_mode *m, hq_frange **mm,
                          hq_err *err)
{
    *mm = malloc(d->nseg * sizeof **mm);
    if (!*mm)
        return hq_fail(err, HQ_EMEM, "%s: out of memory for %llu ranges", r->inv.items[b->item].src,
                       (unsigned long long)d->nseg);
    for (uint64_t s = 0; s < d->nseg; s++)
        (*mm)[s] = hq_frange_empty();
    return r->eng->ops->minmax(r->eng, d, m, *mm, err);
}

/* Adds a block's finite extremes into its groups' accumulators, its infinite samples to its item. */
int run_range_block(run *r, const hq_block *b, void *data, hq_err *err)
{
    if (!r->eng->ops->minmax)
        return 0; /* the copy engine: nothing is binned */
    const hq_mode m = run_mode_of(r, b->item);
    const hq_block_data d = run_block_view(r, b, data, r->scope == HQ_SCOPE_IMAGE, 0);
    hq_frange *mm = NULL;
    const double t0 = hq_now();
    int rc = segment_ranges(r, b, &d, &m, &mm, err);
    r->t[PH_HIST] += hq_now() - t0;
    if (!rc) /* counted here, ticked by the thread that makes the I/O calls (MPI stays on one) */
        __atomic_add_fetch(&r->bytes_histogrammed, run_block_bytes(r, b), __ATOMIC_RELAXED);
    for (uint64_t s = 0; s < d.nseg && !rc; s++) {
        hq_frange *g = &r->facc[d.nseg > 1 ? run_image_of(r, b, b->s0 + s) : run_group_of(r, b)];
        g->lo = mm[s].lo < g->lo ? mm[s].lo : g->lo;
        g->hi = mm[s].hi > g->hi ? mm[s].hi : g->hi;
        r->finf[b->item] += mm[s].inf;
    }
    free(mm);
    return rc;
}

/* Float data, whole images in one block, no --range: pass 0 left their extremes to be found here,
 * from the pixels in memory, by this rank alone (no other rank has any of them). */
int run_fused_ranges(run *r, const hq_block *b, const hq_block_data *d, const hq_mode *m, hq_err *err)
{
    if (!m->fbins || r->o->range_set || !r->eng->ops->minmax)
        return 0;
    hq_frange *mm = NULL;
    int rc = segment_ranges(r, b, d, m, &mm, err);
    for (uint64_t s = 0; s < d->nseg && !rc; s++) {
        const uint64_t g = run_image_of(r, b, b->s0 + s); /* the group: the image, or the dataset's first */
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

/* The most a fused block's per-image tables (a u64 histogram and a u16 LUT of every bin) take at
 * once: a stack of 16-bit slices of 4 x 4 pixels held 640 KiB of tables a slice, 64,000 slices
 * 41 GB (exit 6, or the kernel's OOM killer for float data). Larger blocks go in batches. */
#define FUSED_TABLES_MAX ((uint64_t)64 << 20)

/* Images [lo, hi) of the fused block b (views d and dr of the whole block): histograms, LUTs,
 * remap. */
static int fused_batch(run *r, const hq_block *b, const hq_mode *m, const hq_block_data *d, const hq_block_data *dr,
                       uint64_t lo, uint64_t hi, hq_err *err)
{
    const size_t hl = run_hist_len(m), n = hi - lo;
    const size_t px_bytes = (size_t)m->channels * m->sample_bytes, seg_bytes = d->seg_pixels * px_bytes;
    hq_block sub = *b; /* the batch's images, for the group of each (run_image_of) */
    if (d->nseg > 1) {
        sub.s0 = b->s0 + lo;
        sub.s1 = b->s0 + hi;
    }
    hq_block_data dv = *d, rv = *dr;
    dv.data = (char *)d->data + lo * seg_bytes;
    rv.data = (char *)dr->data + lo * seg_bytes;
    dv.nseg = rv.nseg = n;
    dv.mask = d->mask ? d->mask + lo * d->seg_pixels : NULL;
    rv.mask = dr->mask ? dr->mask + lo * dr->seg_pixels : NULL;
    dv.fbin = d->fbin ? d->fbin + lo : NULL;
    rv.fbin = dr->fbin ? dr->fbin + lo : NULL;
    rv.out = dr->out ? (char *)dr->out + lo * seg_bytes : NULL;
    const size_t need = n * hl * (sizeof(uint64_t) + sizeof(uint16_t));
    if (r->fused_bytes < need) {
        free(r->fused_tables);
        r->fused_bytes = 0;
        if (!(r->fused_tables = malloc(need)))
            return hq_fail(err, HQ_EMEM, "%s: out of memory for %llu histograms", r->inv.items[b->item].src,
                           (unsigned long long)n);
        r->fused_bytes = need;
    }
    uint64_t *hist = r->fused_tables;
    uint16_t *lut = (uint16_t *)(hist + n * hl);
    memset(hist, 0, n * hl * sizeof *hist);
    uint64_t **hp = malloc(n * sizeof *hp);
    const uint16_t **lp = malloc(n * sizeof *lp);
    int rc = HQ_EMEM;
    if (!hp || !lp) {
        hq_fail(err, rc, "%s: out of memory for %llu histograms", r->inv.items[b->item].src, (unsigned long long)n);
        goto done;
    }
    for (uint64_t s = 0; s < n; s++) {
        hp[s] = hist + s * hl;
        lp[s] = lut + s * hl;
    }
    double t0 = hq_now();
    rc = run_fused_ranges(r, &sub, &dv, m, err);
    if (!rc)
        rc = run_name_float_failure(r, b->item, r->eng->ops->histogram(r->eng, &dv, m, hp, err), err);
    r->t[PH_HIST] += hq_now() - t0;
    if (rc)
        goto done;
    t0 = hq_now();
    uint64_t empties = 0;
    for (uint64_t s = 0; s < n && !rc; s++) {
        const uint64_t group = run_image_of(r, &sub, sub.s0 + s);
        int e = 0;
        rc = run_build_luts(r, m, b->item, group, hp[s], lut + s * hl, &e, err);
        if (rc)
            break;
        if (e) {
            hp[s] = NULL; /* marks a segment left as it is */
            empties++;
        }
        for (uint64_t k = 0; k < run_group_images(r, b->item) && !rc; k++)
            rc = run_journal_image(r, group + k, hist + s * hl, lut + s * hl, hl, err);
    }
    if (rc)
        goto done;
    if (empties == 0) {
        rv.same_as_histogram = 1;
        rc = r->eng->ops->remap(r->eng, &rv, m, lp, err);
    } else {
        /* An image with nothing counted comes back exactly as it was (an identity LUT alone would
         * still move luma ties): the others are remapped one by one. */
        for (uint64_t s = 0; s < n && !rc; s++) {
            if (!hp[s]) {
                if (rv.out)
                    memcpy((char *)rv.out + s * seg_bytes, (char *)rv.data + s * seg_bytes, seg_bytes);
                continue;
            }
            hq_block_data one = {(char *)rv.data + s * seg_bytes, 1, rv.seg_pixels, 0,
                                 rv.mask ? rv.mask + s * rv.seg_pixels : NULL, rv.fbin ? rv.fbin + s : NULL,
                                 rv.out ? (char *)rv.out + s * seg_bytes : NULL};
            rc = r->eng->ops->remap(r->eng, &one, m, &lp[s], err);
        }
    }
    r->t[PH_REMAP] += hq_now() - t0;
done:
    free(hp);
    free(lp);
    return rc;
}

/* Fused: every image of the block is complete here, so histogram, LUT and remap happen at once.
 * out: NULL remaps in place; else data is only read (a view of the input) and the result goes to
 * out (stream.c decides; never under CLAHE or for float data). Many images go in batches whose
 * tables fit FUSED_TABLES_MAX; each image's result is the same either way. */
int run_equalize_fused(run *r, const hq_block *b, void *data, void *out, hq_err *err)
{
    if (run_is_clahe(r))
        return run_clahe_fused(r, b, data, err);
    const hq_mode m = run_mode_of(r, b->item);
    /* One histogram per image, or one for the whole dataset (scope dataset: the block is all of it). */
    const hq_block_data d = run_block_view(r, b, data, r->scope != HQ_SCOPE_DATASET, 0);
    hq_block_data dr = run_block_view(r, b, data, r->scope != HQ_SCOPE_DATASET, 1);
    dr.out = out;
    const uint64_t table = run_hist_len(&m) * (sizeof(uint64_t) + sizeof(uint16_t));
    uint64_t per = FUSED_TABLES_MAX / table; /* images a batch: at least one, at most the block's */
    per = per < 1 ? 1 : per > d.nseg ? d.nseg : per;
    /* The input's pixels go to the report before any batch remaps them in place. */
    hq_report_pixels(r->rep, b, data, 0);
    int rc = 0;
    for (uint64_t lo = 0; lo < d.nseg && !rc; lo += per)
        rc = fused_batch(r, b, &m, &d, &dr, lo, lo + per < d.nseg ? lo + per : d.nseg, err);
    if (!rc) {
        __atomic_add_fetch(&r->bytes_histogrammed, run_block_bytes(r, b), __ATOMIC_RELAXED);
        hq_report_pixels(r->rep, b, out ? out : data, 1);
    }
    return rc;
}

/* Pending: add the block to its group's histogram (the blocks of a pending group are one image, one
 * dataset, or everything under scope global). */
int run_histogram_pending(run *r, const hq_block *b, void *data, hq_err *err)
{
    const hq_mode m = run_mode_of(r, b->item);
    hq_block_data d = run_block_view(r, b, data, 0, 0);
    group_hist *gh = run_find_group(r, run_group_of(r, b), run_group_len(r, b->item));
    if (!gh)
        return hq_fail(err, HQ_EMEM, "%s: out of memory for a histogram", r->inv.items[b->item].src);
    double t0 = hq_now();
    uint64_t *hp[1] = {gh->hist};
    int rc;
    if (run_is_clahe(r)) {
        const hq_clahe_geom g = run_geom_of(r, b->item);
        hq_clahe_piece pc = {data, b->r0, b->c0, b->r1 - b->r0, b->c1 - b->c0, 0};
        rc = r->eng->ops->clahe_histogram(r->eng, &pc, &m, &g, gh->hist, err);
    } else {
        rc = run_name_float_failure(r, b->item, r->eng->ops->histogram(r->eng, &d, &m, hp, err), err);
    }
    r->t[PH_HIST] += hq_now() - t0;
    if (!rc) {
        __atomic_add_fetch(&r->bytes_histogrammed, run_block_bytes(r, b), __ATOMIC_RELAXED);
        hq_report_pixels(r->rep, b, data, 0);
    }
    return rc;
}

/* out: as for run_equalize_fused. */
int run_remap_pending(run *r, const hq_block *b, void *data, void *out, hq_err *err)
{
    const hq_mode m = run_mode_of(r, b->item);
    hq_block_data d = run_block_view(r, b, data, 0, 1);
    d.out = out;
    group_hist *gh = run_find_group(r, run_group_of(r, b), 0);
    if (!gh)
        return hq_fail(err, HQ_EIO, "%s: internal error: no histogram for a pending block", r->inv.items[b->item].src);
    double t0 = hq_now();
    const uint16_t *lp[1] = {gh->lut};
    int rc = 0;
    if (gh->empty) {
        if (out) /* left as it is */
            memcpy(out, data, run_block_bytes(r, b));
    } else if (run_is_clahe(r)) {
        const hq_clahe_geom g = run_geom_of(r, b->item);
        hq_clahe_piece pc = {data, b->r0, b->c0, b->r1 - b->r0, b->c1 - b->c0, 0};
        rc = r->eng->ops->clahe_remap(r->eng, &pc, &m, &g, gh->lut, err);
    } else {
        rc = r->eng->ops->remap(r->eng, &d, &m, lp, err);
    }
    r->t[PH_REMAP] += hq_now() - t0;
    if (!rc)
        hq_report_pixels(r->rep, b, out ? out : data, 1);
    return rc;
}
