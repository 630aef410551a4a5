/* float_ranges.c — float data's binning (core/fbin.h), one per group. Pass 0 reads the float
 * blocks once for the extremes of their finite samples (or takes --range without reading) and
 * reduces them over ranks; whole images in one block are left to pass 1, which has their pixels
 * anyway (compute.c's run_fused_ranges), and what it found is shared after the passes for the
 * output's record. Infinite samples are refused, naming the item. A block's own extremes come from
 * compute.c (run_range_block), as everything the engine does to one block. */
#include <math.h>
#include <stdlib.h>

#include "run_internal.h"

/* Whether pass 0 reads a block: a whole image in one block waits for pass 1 (run_fused_ranges),
 * unless an interrupted run wrote it already (its range is then still needed for the output's
 * record). */
static int range_in_pass0(const my_block *mb)
{
    return !mb->fused || mb->done;
}

static int ranged_in_pass0(const run *r, const my_block *mb)
{
    return run_is_float(r, mb->b->item) && range_in_pass0(mb);
}

/* One round of pass 0 over a shared float item: the block's extremes, or only the collective read. */
static int range_round(run *r, uint64_t i, my_block *mb, int rc, hq_err *err)
{
    if (mb && !range_in_pass0(mb))
        mb = NULL; /* only joins the collective read */
    hq_err scratch, *e = rc ? &scratch : err;
    void *data = NULL;
    int rc2 = run_timed_read(r, mb ? mb->b : NULL, i, 1, &data, e);
    if (!rc2 && mb)
        rc2 = run_range_block(r, mb->b, data, e);
    rc = rc ? rc : rc2;
    hq_block_free(r->eng, data);
    run_tick(r);
    return rc;
}

/* This rank's part of pass 0: the blocks of float items that range_in_pass0 picks, read once,
 * shared items in lockstep. */
static int range_mine(run *r, hq_err *err)
{
    const int rc = run_lockstep(r, 0, run_is_float, range_round, err);
    return rc ? rc : run_stream_own(r, STREAM_RANGE, ranged_in_pass0, err);
}

/* Pass 0, collective: each float group's binning (core/fbin.h), from the minimum and maximum of
 * its finite samples over all ranks, or from --range without reading anything. Infinite samples
 * are refused here, naming the first item that has them. Returns the agreed status. */
int run_pass0_ranges(run *r, hq_err *err)
{
    int any = 0;
    for (uint64_t i = 0; i < r->inv.n; i++)
        any |= run_is_float(r, i);
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

/* Collective, after the passes: the binnings run_fused_ranges found, made known to every rank for the
 * output's record. Exactly one rank found each of them, and the others add +0.0: a sum that is
 * exact (NaN, for an image without finite samples, passes too). Groups no rank found keep pass 0's
 * value, which every rank has. */
int run_share_fused_ranges(run *r, hq_err *err)
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
