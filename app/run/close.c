/* close.c — the end of the output: what the run records in it (hq_run_meta), the output and the
 * mask closed (collective: renamed into place, or taken back on failure), the journal removed. */
#include <stdio.h>

#include "run_internal.h"

/* The global histogram and LUT for the output's metadata, or NULL under scope image. */
static const group_hist *global_group(run *r, hq_mode *m)
{
    if (r->scope != HQ_SCOPE_GLOBAL || !run_global_mode(r, m))
        return NULL;
    return run_find_group(r, 0, 0);
}

/* After the passes, whatever their outcome (rc: the agreed status so far): the output's early
 * writeback stopped, the run recorded (--report's and the output's metadata), the output and the
 * mask closed, the journal removed. Returns the agreed status. */
int run_close_output(run *r, int rc, hq_err *err)
{
    const hq_options *o = r->o;
    const hq_comm *c = r->c;
    hq_writeback_stop(r->wb); /* the last writes are the close's fdatasync's, or nobody's */
    r->wb = NULL;
    hq_mode gm = {1, 1, 8, 0, 0};
    const group_hist *gg = rc ? NULL : global_group(r, &gm);
    hq_run_meta meta = {.version = HQ_VERSION, .method = o->method, .scope = r->scope, .color = o->color,
                        .bits = o->bits, .clahe = run_is_clahe(r) ? &o->clahe : NULL,
                        .global_hist = gg ? gg->hist : NULL, .global_nhist = hq_mode_nhist(&gm),
                        .global_bins = hq_mode_bins(&gm), .global_lut = gg ? gg->lut : NULL,
                        .reference = o->reference, .mask = o->mask,
                        .mask_apply = o->mask || o->ignore ? (o->mask_inside ? "inside" : "all") : NULL,
                        .fbins = r->fbin ? o->fbins : 0, .frange_given = o->range_set, .fbin = r->fbin,
                        .item_image0 = r->plan.item_image0, .run_id = r->res.id[0] ? r->res.id : NULL};
    char ignore_text[16];
    if (o->ignore) {
        snprintf(ignore_text, sizeof ignore_text, "%u:%u", o->ignore_lo, o->ignore_hi);
        meta.ignore = ignore_text;
    }
    if (!rc)
        rc = hq_comm_agree(c, hq_report_meta(r->rep, &meta, err), err);
    hq_err close_err = {{0}};
    const double t0 = hq_now();
    int rc_close = r->io_ops->close(r->io, rc == 0, &meta, &close_err);
    {
        hq_err mask_err;
        int rc_mask = hq_mask_close(r->mask, &mask_err);
        r->mask = NULL;
        if (!rc_close && rc_mask) {
            rc_close = rc_mask;
            close_err = mask_err;
        }
    }
    r->t[PH_CLOSE] = hq_now() - t0;
    if (!rc && rc_close) {
        rc = rc_close;
        *err = close_err;
    }
    rc = hq_comm_agree(c, rc, err);
    /* Finished (renamed into place) or failed in good order (taken back): either way nothing is
     * left to resume. A killed run never gets here, and keeps its journal. Except a failed resume
     * whose output still holds the interrupted run's work (a PNG directory: its files are not this
     * run's to remove): the journal that claims them stays, for the next --resume. */
    int keep = 0;
    if (rc && o->resume && r->journal && c->rank == 0) {
        int partial = 0, finished = 0;
        char *id = NULL;
        keep = r->io_ops->output_state(&r->inv, o->output, &partial, &finished, &id) && partial;
        free(id);
    }
    if (r->journal && c->rank == 0 && !keep)
        hq_journal_remove(o->output);
    return rc;
}
