/* pass2.c — pass 2: the pending blocks remapped with their group's LUT and written, read again
 * where pass 1 could not hold them; items with collective transfers in lockstep rounds
 * (lockstep.c), every other item streamed. */

#include "run_internal.h"

/* One round of pass 2 over a shared item: the pending block remapped and written. The re-read
 * joins a collective call, so it is made whether or not this rank needs it. */
static int pass2_round(run *r, uint64_t i, my_block *mb, int rc, hq_err *err)
{
    if (mb && mb->done)
        mb = NULL; /* written by an interrupted run */
    hq_err scratch, *e = rc ? &scratch : err; /* keep the first failure's message */
    void *fresh = NULL;
    int rc2 = run_timed_read(r, mb && !mb->held ? mb->b : NULL, i, 1, &fresh, e);
    void *data = mb && mb->held ? mb->held : fresh;
    if (!rc2 && mb)
        rc2 = run_remap_pending(r, mb->b, data, NULL, e);
    rc = rc ? rc : rc2;
    e = rc ? &scratch : err;
    const int wrote = !rc && mb;
    int rc3 = run_timed_write(r, wrote ? mb->b : NULL, i, 1, data, e);
    rc = rc ? rc : rc3;
    rc = run_flush_round(r, i, wrote && !rc ? mb->b : NULL, rc, rc ? &scratch : err);
    if (mb) {
        run_release(r, mb, data);
        mb->done = 1;
    }
    return rc;
}

static int not_written(const run *r, const my_block *mb)
{
    (void)r;
    return !mb->done;
}

/* The lockstep items' pending blocks in lockstep rounds, then every other not yet written. */
int run_pass2(run *r, hq_err *err)
{
    const int rc = run_lockstep(r, 1, NULL, pass2_round, err);
    return rc ? rc : run_stream_own(r, STREAM_REMAP, not_written, err);
}
