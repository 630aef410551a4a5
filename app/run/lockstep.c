/* lockstep.c — the lockstep rounds of shared items. Collective HDF5 transfers need every rank in
 * every call, so each shared item takes as many rounds as the busiest rank has blocks of it, counted
 * from the plan (which every rank has): all ranks agree without a message. In each round every rank
 * makes the same collective calls, with its block of the round or with NULL. */
#include "run_internal.h"

/* This rank's k-th block of item i (k-th pending block with pending_only), or NULL. The count must
 * not depend on progress (`done`), or the rounds would drift from the other ranks' count. */
my_block *run_nth_mine(run *r, uint64_t item, uint64_t k, int pending_only)
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
uint64_t run_rounds_for(const run *r, uint64_t item, int pending_only)
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
