/* target.c — --method match: the target histogram(s), the same on every rank. --reference global
 * reads the whole input once more and sums it over ranks; --reference FILE is read by rank 0 alone
 * and broadcast. --ignore applies; an empty target is refused. */
#include <stdlib.h>
#include <string.h>

#include "../../core/lut.h"
#include "run_internal.h"

/* Adds block b's (counted) pixels into one histogram. */
static int histogram_into(run *r, const hq_block *b, void *data, uint64_t *hist, hq_err *err)
{
    const hq_mode m = run_mode_of(r, b->item);
    hq_block_data d = run_block_view(r, b, data, 0, 0);
    uint64_t *hp[1] = {hist};
    const double t0 = hq_now();
    const int rc = r->eng->ops->histogram(r->eng, &d, &m, hp, err);
    r->t[PH_HIST] += hq_now() - t0;
    return rc;
}

/* One round of --reference global's read of a shared item: the block into the target. */
static int target_round(run *r, uint64_t i, my_block *mb, int rc, hq_err *err)
{
    hq_err scratch, *e = rc ? &scratch : err;
    void *data = NULL;
    int rc2 = run_timed_read(r, mb ? mb->b : NULL, i, 1, &data, e);
    if (!rc2 && mb)
        rc2 = histogram_into(r, mb->b, data, r->target, e);
    rc = rc ? rc : rc2;
    hq_block_free(r->eng, data);
    return rc;
}

/* --reference global: one extra read of everything before pass 1 (every image's LUT needs the
 * whole input's histogram), summed over ranks as --scope global sums it. Memory stays one block;
 * the price is reading the input once more. Shared items in lockstep rounds, then own ones. */
static int target_from_input(run *r, size_t len, uint64_t *skipped, hq_err *err)
{
    *skipped = 0;
    int rc = run_lockstep(r, 0, NULL, target_round, err);
    for (uint64_t j = 0; j < r->nmine && !rc; j++) {
        const hq_block *b = r->mine[j].b;
        if (r->item_lockstep[b->item])
            continue;
        void *data = NULL;
        rc = run_timed_read(r, b, b->item, 0, &data, err);
        if (rc == HQ_EINPUT && r->o->on_error == HQ_ONERR_SKIP && r->inv.format == HQ_FMT_PNG) {
            rc = 0; /* a bad PNG: pass 1 lists it as skipped */
            ++*skipped;
            continue;
        }
        if (!rc)
            rc = histogram_into(r, b, data, r->target, err);
        hq_block_free(r->eng, data);
    }
    rc = hq_comm_agree(r->c, rc, err);
    if (!rc && (hq_comm_sum_u64(r->c, skipped, 1) || hq_comm_sum_u64(r->c, r->target, len)))
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
    rc = rc ? hq_fail_within(err, rc, "--reference", ref) : 0; /* as for --mask (app/mask.c) */
    hq_plan_item *pi = rc ? NULL : calloc(inv.n ? inv.n : 1, sizeof *pi);
    if (!rc && !pi)
        rc = hq_fail(err, HQ_EMEM, "%s: out of memory", ref);
    for (size_t i = 0; !rc && i < inv.n; i++) {
        const hq_item *it = &inv.items[i];
        const uint32_t bits = r->o->bits ? r->o->bits : it->depth;
        /* Its samples are counted as the unsigned levels they are stored as: a float's or a
         * signed integer's bits would be levels of nothing (with --bits, the depth let them by). */
        if (it->sample != HQ_SAMPLE_UINT)
            rc = hq_fail(err, HQ_EINPUT, "%s%s%s: the reference holds %s images: --method match takes unsigned "
                         "integer ones", ref, inv.format == HQ_FMT_HDF5 && !strchr(ref, ':') ? ":" : "",
                         inv.format == HQ_FMT_HDF5 && !strchr(ref, ':') ? it->name : "",
                         it->sample == HQ_SAMPLE_FLOAT ? "float" : "signed integer");
        else if ((it->channels >= 3) != (m0->channels >= 3) || bits != m0->bits || bits > it->depth)
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
        hq_block_data d = {data, 1, hq_block_pixels(b), 0, NULL, NULL, NULL};
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
int run_make_target(run *r, hq_err *err)
{
    hq_mode m0;
    if (!run_global_mode(r, &m0))
        return 0;
    const size_t len = run_hist_len(&m0);
    r->target = calloc(len, sizeof *r->target);
    int rc = hq_comm_agree(r->c, r->target ? 0 : hq_fail(err, HQ_EMEM, "out of memory for the target histogram"), err);
    if (rc)
        return rc;
    uint64_t skipped = 0;
    if (!strcmp(r->o->reference, "global")) {
        rc = target_from_input(r, len, &skipped, err);
    } else {
        rc = hq_comm_agree(r->c, r->c->rank == 0 ? target_from_file(r, &m0, err) : 0, err);
        if (!rc)
            MPI_Bcast(r->target, (int)len, MPI_UINT64_T, 0, r->c->world); /* len <= 3 * 65536 */
    }
    if (rc)
        return rc;
    run_ignore_bins(r, &m0, r->target);
    /* Every image skipped while read: pass 1 skips them again and says "nothing to equalize",
     * naming the first, which says more than an empty reference would. */
    uint64_t bad = 0;
    for (size_t i = 0; i < r->inv.n; i++)
        bad += r->inv.items[i].bad ? r->inv.items[i].slices : 0;
    if (skipped && skipped + bad >= r->plan.nimages)
        return 0;
    if (hq_hist_total(r->target, (uint32_t)len) == 0 && r->o->device != HQ_DEV_COPY)
        rc = hq_fail(err, HQ_EINPUT, "%s: the reference has no counted pixels (all ignored or masked out)",
                     r->o->reference);
    return rc;
}
