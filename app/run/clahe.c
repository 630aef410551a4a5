/* clahe.c — CLAHE's glue (core/clahe.h): a fused block's images equalized whole, one after the other
 * (their tile LUTs built as every LUT is, by groups.c); a shared image's tile rows summed between the
 * ranks that count into them and sent to those that blend them (mpi/tile_rows.h), instead of an
 * Allreduce of every tile over every rank. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../mpi/tile_rows.h"
#include "run_internal.h"

/* One whole image's LUTs where the engine counted (engine.h, clahe_luts), copied to the host only
 * for the provenance, the report and the journal (hq_report_wants), which then see them as
 * run_build_luts would show them. */
static int clahe_luts_on_engine(run *r, const hq_mode *m, const hq_clahe_geom *g, uint64_t image, uint16_t *lut,
                                int *host, hq_err *err)
{
    int want_lut = 0, want_hist = 0;
    hq_report_wants(r->rep, image, &want_lut, &want_hist);
    const int64_t limit = hq_clahe_clip_limit(r->o->clahe.clip, hq_clahe_area(g), hq_mode_bins(m));
    const int rc = r->eng->ops->clahe_luts(r->eng, m, g, limit, want_lut ? lut : NULL, err);
    *host = want_lut;
    return !rc && want_lut ? hq_report_lut(r->rep, image, NULL, lut, err) : rc;
}

/* CLAHE, fused: each image of the block whole, one after the other (a 16-bit image's tile
 * histograms alone take tens of MiB). An engine that builds LUTs itself (the GPU) keeps the
 * counts, the LUTs and the pixels between the calls: only the remapped pixels come back. */
int run_clahe_fused(run *r, const hq_block *b, void *data, hq_err *err)
{
    const hq_mode m = run_mode_of(r, b->item);
    const hq_clahe_geom g = run_geom_of(r, b->item);
    const size_t len = run_group_len(r, b->item);
    const uint64_t nseg = b->s1 - b->s0, seg_px = hq_block_pixels(b) / nseg;
    const uint64_t seg_bytes = seg_px * m.channels * m.sample_bytes;
    const int on_engine = r->eng->ops->clahe_luts != NULL;
    uint64_t *hist = on_engine ? NULL : malloc(len * sizeof *hist);
    uint16_t *lut = malloc(len * sizeof *lut);
    int rc = 0;
    if ((!hist && !on_engine) || !lut)
        rc = hq_fail(err, HQ_EMEM, "%s: out of memory for %zu CLAHE counters", r->inv.items[b->item].src, len);
    hq_report_pixels(r->rep, b, data, 0);
    for (uint64_t s = 0; s < nseg && !rc; s++) {
        hq_clahe_piece pc = {(uint8_t *)data + s * seg_bytes, 0, 0, g.height, g.width, 0};
        if (!on_engine)
            memset(hist, 0, len * sizeof *hist);
        double t0 = hq_now();
        rc = r->eng->ops->clahe_histogram(r->eng, &pc, &m, &g, on_engine ? NULL : hist, err);
        r->t[PH_HIST] += hq_now() - t0;
        t0 = hq_now();
        const uint64_t image = run_image_of(r, b, b->s0 + s);
        int host_lut = 1, empty = 0;
        if (!rc && on_engine)
            rc = clahe_luts_on_engine(r, &m, &g, image, lut, &host_lut, err);
        else if (!rc)
            rc = run_build_luts(r, &m, b->item, image, hist, lut, &empty, err);
        if (!rc && host_lut)
            rc = run_journal_image(r, image, hist, lut, len, err);
        pc.same_as_histogram = 1;
        if (!rc)
            rc = r->eng->ops->clahe_remap(r->eng, &pc, &m, &g, host_lut ? lut : NULL, err);
        r->t[PH_REMAP] += hq_now() - t0;
    }
    if (!rc) {
        __atomic_add_fetch(&r->bytes_histogrammed, run_block_bytes(r, b), __ATOMIC_RELAXED);
        hq_report_pixels(r->rep, b, data, 1);
    }
    free(hist);
    free(lut);
    return rc;
}

/* Rank k's part in a shared CLAHE image, from the plan: the tile rows its blocks count into (their
 * own rows, and the padded rows that reflect them) and the tile rows its blocks blend. The rank that
 * speaks for an HDF5 image needs them all: it records every tile's LUT in the output; so does the
 * one of an image the report samples, which plots corner and centre tiles' LUTs. */
static void clahe_rows_of(const run *r, uint64_t image, int k, hq_row_range *contrib, hq_row_range *need)
{
    const hq_plan *p = &r->plan;
    uint64_t clo = UINT64_MAX, chi = 0, nlo = UINT64_MAX, nhi = 0;
    for (uint64_t j = p->first[k]; j < p->first[k + 1]; j++) {
        const hq_block *b = &p->blocks[j];
        if (run_image_of(r, b, b->s0) != image)
            continue;
        const hq_clahe_geom g = run_geom_of(r, b->item);
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
        if ((r->inv.format == HQ_FMT_HDF5 || hq_report_needs_tiles(r->rep, image)) &&
            hq_plan_image_owner(p, image) == k) { /* provenance, report */
            nlo = 0;
            nhi = g.tiles_y;
        }
    }
    *contrib = clo < chi ? (hq_row_range){clo, chi} : (hq_row_range){0, 0};
    *need = nlo < nhi ? (hq_row_range){nlo, nhi} : (hq_row_range){0, 0};
}

/* CLAHE: each shared image's tile rows summed between the ranks that count into them and sent to
 * those that blend them (mpi/tile_rows.h), not an Allreduce of every tile over every rank. */
int run_reduce_clahe_shared(run *r, hq_err *err)
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
        const hq_clahe_geom g = run_geom_of(r, item);
        const hq_mode m = run_mode_of(r, item);
        for (int k = 0; k < n; k++)
            clahe_rows_of(r, image, k, &contrib[k], &need[k]);
        group_hist *gh = run_find_group(r, image, 0);
        uint64_t sent = 0;
        rc = hq_tile_rows_reduce(r->c->world, g.tiles_y, g.tiles_x * run_hist_len(&m), contrib, need,
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
