/* reduce.c — the shared groups' histograms summed over ranks: one buffer, one (chunked)
 * MPI_Allreduce; CLAHE's tile histograms go through clahe.c's exchange of tile rows instead.
 * Collective. */
#include <stdlib.h>
#include <string.h>

#include "run_internal.h"

/* Sums the shared groups' histograms over ranks: one buffer, one (chunked) MPI_Allreduce. */
int run_reduce_shared(run *r, hq_err *err)
{
    if (!r->nshared)
        return 0;
    if (run_is_clahe(r))
        return run_reduce_clahe_shared(r, err);
    /* All shared groups bin alike: under scope image they are images of the inventory, whose modes
     * may differ, so size each slot by the largest mode. */
    size_t slot = 0;
    for (size_t i = 0; i < r->inv.n; i++)
        if (!r->inv.items[i].bad && run_group_len(r, i) > slot)
            slot = run_group_len(r, i);
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
        if (!run_global_mode(r, &m) || !run_find_group(r, 0, run_hist_len(&m))) {
            free(buf);
            return hq_fail(err, HQ_EMEM, "allreduce: out of memory for the global histogram");
        }
    }
    /* A histogram restored from the journal is complete on every rank that holds it already. */
    for (uint64_t k = 0; k < r->nshared; k++) {
        group_hist *gh = run_find_group(r, r->shared[k], 0);
        if (gh && !gh->restored)
            memcpy(buf + k * slot, gh->hist, gh->len * sizeof *buf);
    }
    double t0 = hq_now();
    int rc = hq_comm_sum_u64(r->c, buf, r->nshared * slot);
    r->t[PH_REDUCE] += hq_now() - t0;
    for (uint64_t k = 0; k < r->nshared && !rc; k++) {
        group_hist *gh = run_find_group(r, r->shared[k], 0);
        if (gh && !gh->restored)
            memcpy(gh->hist, buf + k * slot, gh->len * sizeof *buf);
    }
    free(buf);
    return rc ? hq_fail(err, HQ_EIO, "MPI_Allreduce of the histograms failed") : 0;
}
