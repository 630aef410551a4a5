/* lockstep.c — the items whose transfers are collective (item_lockstep: shared by several ranks
 * and not independent for the I/O, such as compressed HDF5 datasets) walked in lockstep rounds.
 * Collective HDF5 transfers need every rank in every call, so each such item takes as many rounds
 * as the busiest rank has blocks of it, counted from the plan (which every rank has): all ranks
 * agree without a message. In each round every rank makes the same collective calls, with its
 * block of the round or with NULL. Every other item streams (stream.c).
 *
 * One walker serves every pass that reads shared items (pass 0's ranges, pass 1, pass 2, and
 * --reference global's extra read); each passes its round's body (run_round_fn). A failure does not
 * stop the rounds: the failed rank keeps joining the collective calls with NULL blocks, so nobody
 * hangs, and the error is agreed after the walk. */
#include "run_internal.h"

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
            if (p->blocks[j].item == item && !(pending_only && run_is_fused(r, &p->blocks[j])))
                n++;
        most = n > most ? n : most;
    }
    return most;
}

/* Every shared item that want accepts (NULL: every one), in item order, round after round: round
 * gets this rank's block of the round (among the pending blocks with pending_only), or NULL once the
 * rank has failed. Returns this rank's status: the first failure. */
int run_lockstep(run *r, int pending_only, int (*want)(const run *, uint64_t), run_round_fn round, hq_err *err)
{
    int rc = 0;
    for (uint64_t i = 0; i < r->inv.n; i++) {
        if (!r->item_lockstep[i] || (want && !want(r, i)))
            continue;
        const uint64_t rounds = rounds_for(r, i, pending_only);
        for (uint64_t k = 0; k < rounds; k++)
            rc = round(r, i, rc ? NULL : nth_mine(r, i, k, pending_only), rc, err);
    }
    return rc;
}
