/* pass1.c — pass 1: every block read and histogrammed. A fused block is finished on the spot
 * (remapped and written); a pending one adds to its group's histogram and is held for pass 2 while
 * the budget allows. Items with collective transfers go first, in lockstep rounds (lockstep.c);
 * every other item then streams (own items, and shared ones whose transfers are independent), and
 * the row bands of one image that lie on this rank alone are equalized at once.
 * What an interrupted run finished is not done again. */
#include <stdlib.h>

#include "run_internal.h"

/* A block whose pass-1 work is already done: written (fused), or its group's histogram restored
 * (pending: a pending block written but without its histogram is read again, as pass 1 needs
 * every block of its group). */
static int pass1_done(run *r, const my_block *mb)
{
    if (mb->fused)
        return mb->done;
    const group_hist *gh = run_find_group(r, run_group_of(r, mb->b), 0);
    return gh && gh->restored;
}

/* One round of pass 1 over a shared item: read, then a fused block is equalized and written, a
 * pending one histogrammed and held; the collective write and flush are joined either way. */
static int pass1_round(run *r, uint64_t i, my_block *mb, int rc, hq_err *err)
{
    if (mb && pass1_done(r, mb))
        mb = NULL; /* done by an interrupted run: only joins the collective calls */
    hq_err scratch, *e = rc ? &scratch : err; /* keep the first failure's message */
    void *data = NULL;
    int rc2 = run_timed_read(r, mb ? mb->b : NULL, i, 1, &data, e);
    if (!rc && mb && !rc2)
        rc2 = mb->fused ? run_equalize_fused(r, mb->b, data, NULL, e) : run_histogram_pending(r, mb->b, data, e);
    rc = rc ? rc : rc2;
    e = rc ? &scratch : err;
    const int write_now = !rc && mb && mb->fused;
    int rc3 = run_timed_write(r, write_now ? mb->b : NULL, i, 1, data, e);
    rc = rc ? rc : rc3;
    rc = run_flush_round(r, i, write_now && !rc ? mb->b : NULL, rc, rc ? &scratch : err);
    if (write_now) {
        mb->done = 1;
        hq_block_free(r->eng, data);
    } else if (!rc && mb) {
        run_hold_or_drop(r, mb, data);
    } else {
        hq_block_free(r->eng, data);
    }
    return rc;
}

/* Pass 1 over the items walked in lockstep; the error is agreed after the pass. */
int run_pass1_shared(run *r, hq_err *err)
{
    return run_lockstep(r, 0, NULL, pass1_round, err);
}

/* A run of row bands of one image, all on this rank: both passes right away, so the histogram
 * and the held pixels never wait for the other ranks. Each pass is a stream (stream.c), its reads
 * and writes overlapped with the compute: one block after the other, a 7.6 GiB CLAHE image on one
 * H100 spent 6.6 of its 7.4 s in read, histogram, remap and write added up. */
static int equalize_local_image(run *r, my_block *first, uint64_t n, hq_err *err)
{
    my_block **list = malloc(n * sizeof *list);
    if (!list)
        return hq_fail(err, HQ_EMEM, "out of memory listing blocks");
    int rc = 0;
    const group_hist *g0 = run_find_group(r, run_group_of(r, first->b), 0);
    const int restored = g0 && g0->restored;
    if (!restored) {
        for (uint64_t j = 0; j < n; j++)
            list[j] = &first[j];
        rc = run_stream(r, STREAM_HIST, list, n, err);
    }
    const hq_mode m = run_mode_of(r, first->b->item);
    const uint64_t g = run_group_of(r, first->b);
    group_hist *gh = run_find_group(r, g, 0);
    if (!rc && gh && !restored)
        rc = hq_journal_note_hist(r->journal, g, gh->hist, gh->len, err);
    if (!rc && gh) {
        int e = 0;
        rc = run_build_luts(r, &m, first->b->item, g, gh->hist, gh->lut, &e, err);
        gh->empty = e;
    }
    uint64_t k = 0;
    for (uint64_t j = 0; j < n; j++)
        if (!first[j].done)
            list[k++] = &first[j];
    if (!rc)
        rc = run_stream(r, STREAM_REMAP, list, k, err);
    run_drop_group(r, g);
    free(list);
    return rc;
}

/* A pending block of an image that lies on this rank alone (scope image or dataset): both passes
 * at once, image by image (equalize_local_image). */
static int local_image(const run *r, const my_block *mb)
{
    return !mb->fused && r->scope != HQ_SCOPE_GLOBAL && !r->item_shared[mb->b->item];
}

/* Pass 1 over every item not walked in lockstep (this rank's own, and shared ones whose transfers
 * are independent): no waiting on anyone. Consecutive blocks of one kind form a stream; the row
 * bands of one big image of this rank's own are equalized on the spot. */
int run_pass1_own(run *r, hq_err *err)
{
    my_block **list = malloc((r->nmine ? r->nmine : 1) * sizeof *list);
    if (!list)
        return hq_fail(err, HQ_EMEM, "out of memory listing blocks");
    int rc = 0;
    uint64_t j = 0;
    while (j < r->nmine && !rc) {
        my_block *mb = &r->mine[j];
        if (r->item_lockstep[mb->b->item] || (!local_image(r, mb) && pass1_done(r, mb))) {
            j++;
            continue;
        }
        if (local_image(r, mb)) {
            uint64_t n = 1; /* the row bands of this image (the blocks of this dataset) that follow */
            while (j + n < r->nmine && r->mine[j + n].b->item == mb->b->item &&
                   run_group_of(r, r->mine[j + n].b) == run_group_of(r, mb->b))
                n++;
            rc = equalize_local_image(r, mb, n, err);
            j += n;
            continue;
        }
        const stream_kind kind = mb->fused ? STREAM_FUSED : STREAM_HIST;
        uint64_t n = 0;
        while (j < r->nmine && !r->item_lockstep[r->mine[j].b->item] && r->mine[j].fused == mb->fused &&
               !local_image(r, &r->mine[j])) {
            if (!pass1_done(r, &r->mine[j]))
                list[n++] = &r->mine[j];
            j++;
        }
        rc = run_stream(r, kind, list, n, err);
    }
    free(list);
    return rc;
}
