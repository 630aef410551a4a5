/* journal.c — this run's side of --resume's journal (jobs/journal.h): opened with the output; an
 * interrupted run's blocks and histograms applied, so they are not done again; each written block
 * claimed once its data is on disk (for writes that change the file's metadata, after the round's
 * collective flush); fused images' LUTs and pass 1's histograms logged. And the test hooks
 * HQ_FAULT_KILL, which kills a rank as kill -9 would after N writes, and HQ_FAULT_STALL, which
 * stops it there, alive, until a signal ends it (app/interrupt.h). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run_internal.h"

/* Writes of this item change the file's metadata (chunk indexes) that only a collective flush
 * makes durable; with one rank any flush is collective. */
int run_needs_round_flush(const run *r, uint64_t item)
{
    return r->journal && r->inv.items[item].collective && r->c->size > 1;
}

/* The journal's flush calls this first: the output's data (and, with one rank, HDF5's metadata)
 * reach the disk before any record claims them. */
static int sync_output(void *ctx, hq_err *err)
{
    run *r = ctx;
    int rc = r->io_ops->flush ? r->io_ops->flush(r->io, 0, err) : 0;
    if (!rc && r->sync_fd >= 0 && fdatasync(r->sync_fd) != 0)
        rc = hq_fail(err, HQ_EIO, "%s: cannot sync the output to disk", r->o->output);
    return rc;
}

int run_note_written(run *r, const hq_block *b, hq_err *err)
{
    int rc = hq_journal_note_block(r->journal, b, err);
    /* Test hook: a rank dies here as under kill -9, its records flushed or not per the journal's
     * flush interval; the job must fail and --resume must finish it. */
    if (r->kill_after <= 0 && r->stall_after <= 0)
        return rc;
    const uint64_t n = __atomic_add_fetch(&r->writes, 1, __ATOMIC_RELAXED);
    if (r->kill_after > 0 && n >= (uint64_t)r->kill_after)
        raise(SIGKILL);
    /* Test hook: the rank stops here, its records flushed or not per the journal's flush
     * interval, as a run does that a signal finds mid-way. */
    if (r->stall_after > 0 && n >= (uint64_t)r->stall_after)
        for (;;)
            pause();
    return rc;
}

/* After a lockstep round of collective writes: every rank flushes, then claims its block. */
int run_flush_round(run *r, uint64_t item, const hq_block *written, int rc, hq_err *err)
{
    if (!run_needs_round_flush(r, item))
        return rc;
    hq_err scratch;
    int rc2 = r->io_ops->flush(r->io, 1, rc ? &scratch : err);
    if (!rc && !rc2 && written)
        rc2 = run_note_written(r, written, err);
    return rc ? rc : rc2;
}

/* A test hook's N from NAME=RANK:N for this rank, else 0. */
static long fault_hook(const run *r, const char *name)
{
    const char *s = getenv(name);
    int rank;
    long n;
    return s && sscanf(s, "%d:%ld", &rank, &n) == 2 && rank == r->c->rank ? n : 0;
}

void run_parse_fault_hooks(run *r)
{
    r->kill_after = fault_hook(r, "HQ_FAULT_KILL");
    r->stall_after = fault_hook(r, "HQ_FAULT_STALL");
}

static double journal_flush_interval(void)
{
    const char *s = getenv("HQ_JOURNAL_FLUSH_S"); /* 0 in tests: every record at once */
    return s ? atof(s) : 1.0;
}

int run_open_journal(run *r, hq_err *err)
{
    if (r->res.action != HQ_RESUME_FRESH && r->res.action != HQ_RESUME_CONTINUE)
        return 0;
    int rc = 0;
    if (r->res.action == HQ_RESUME_FRESH && r->c->rank == 0)
        rc = hq_journal_create(r->o->output, r->res.id, err);
    if ((rc = hq_comm_agree(r->c, rc, err)))
        return rc;
    rc = hq_journal_open(r->o->output, r->c->rank, sync_output, r, journal_flush_interval(), &r->journal, err);
    rc = hq_comm_agree(r->c, rc, err);
    /* A fresh journal that some rank could not open (a full disk, mostly) resumes nothing: it goes,
     * whether or not rank 0's own log opened (the close removes it only where it did). */
    if (rc && r->res.action == HQ_RESUME_FRESH && r->c->rank == 0)
        hq_journal_remove(r->o->output);
    return rc;
}

/* The LUTs (and sampled histograms) of the images an interrupted run finished that the journal
 * kept for the report, handed over as if just built. */
static int replay_images(run *r, hq_err *err)
{
    int rc = 0;
    for (uint64_t j = 0; j < r->nmine; j++) {
        const my_block *mb = &r->mine[j];
        if (!mb->done || !mb->fused)
            continue;
        for (uint64_t s = mb->b->s0; s < mb->b->s1; s++) {
            const uint64_t image = run_image_of(r, mb->b, s);
            const hq_journal_lut *l = hq_journal_find_lut(&r->res.st, image);
            const hq_journal_hist *h = hq_journal_find_hist(&r->res.st, image);
            if (l && !rc)
                rc = hq_report_lut(r->rep, image, h && h->n == l->n ? h->counts : NULL, l->lut, err);
        }
    }
    return rc;
}

/* The blocks and histograms an interrupted run finished: its blocks are not done again, its
 * histograms are not summed again. */
int run_apply_journal(run *r, uint64_t *done_pixels, uint64_t *done_bytes, hq_err *err)
{
    const hq_journal_state *st = &r->res.st;
    for (uint64_t j = 0; j < r->nmine; j++) {
        my_block *mb = &r->mine[j];
        if (!hq_journal_has_block(st, mb->b))
            continue;
        mb->done = 1;
        *done_pixels += hq_block_pixels(mb->b);
        *done_bytes += 2 * run_block_bytes(r, mb->b);
    }
    for (uint64_t k = 0; k < st->nhists; k++) {
        const hq_journal_hist *h = &st->hists[k];
        hq_mode m;
        size_t len = 0; /* the group's counters: one histogram, or one per tile under CLAHE */
        if (r->scope == HQ_SCOPE_GLOBAL && h->group == 0 && run_global_mode(r, &m))
            len = run_hist_len(&m);
        for (uint64_t j = 0; !len && j < r->nmine; j++) {
            const hq_block *b = r->mine[j].b;
            if (!r->mine[j].fused && run_group_of(r, b) == h->group)
                len = run_group_len(r, b->item);
        }
        /* A shared CLAHE image's journaled tile histograms are complete only in the rows that rank
         * needed under the interrupted run's plan: its pass 1 is done again. */
        if (!len || (run_is_clahe(r) && run_is_shared_group(r, h->group)))
            continue;
        group_hist *gh = run_find_group(r, h->group, len);
        if (!gh)
            return hq_fail(err, HQ_EMEM, "out of memory for a histogram");
        if (gh->len != h->n)
            return hq_fail(err, HQ_EUSAGE, "%s: cannot resume: the journal's histogram %llu has %llu bins, not %zu",
                           r->o->output, (unsigned long long)h->group, (unsigned long long)h->n, gh->len);
        memcpy(gh->hist, h->counts, h->n * sizeof *gh->hist);
        gh->restored = 1;
    }
    return replay_images(r, err);
}

unsigned char *run_resumed_images(const run *r, uint64_t *count)
{
    *count = 0;
    if (r->res.action != HQ_RESUME_CONTINUE || !r->plan.nimages)
        return NULL;
    /* Bit 0: some block of the image the journal claims; bit 1: some block it does not. */
    unsigned char *seen = calloc(r->plan.nimages, 1);
    if (!seen)
        return NULL; /* the counts then stay the plan's, as before */
    for (uint64_t j = 0; j < r->plan.nblocks; j++) {
        const hq_block *b = &r->plan.blocks[j];
        const unsigned char mark = hq_journal_has_block(&r->res.st, b) ? 1 : 2;
        for (uint64_t s = b->s0; s < b->s1; s++)
            seen[r->plan.item_image0[b->item] + s] |= mark;
    }
    for (uint64_t i = 0; i < r->plan.nimages; i++) {
        seen[i] = seen[i] == 1 ? 1 : seen[i] == 3 ? 2 : 0;
        *count += seen[i] == 1;
    }
    return seen;
}

/* What the output and the report record of an image finished in one go, for a resume to have. */
int run_journal_image(run *r, uint64_t image, const uint64_t *hist, const uint16_t *lut, size_t n, hq_err *err)
{
    int want_lut = 0, want_hist = 0;
    if (!r->journal || !hq_report_journal_wants(r->rep, image, &want_lut, &want_hist))
        return 0;
    int rc = want_lut ? hq_journal_note_lut(r->journal, image, lut, n, err) : 0;
    return !rc && want_hist && hist ? hq_journal_note_hist(r->journal, image, hist, n, err) : rc;
}

/* The complete histograms of pass 1, journaled before any pass-2 write can be claimed, so that a
 * resume skips pass 1. Every rank logs the groups it holds (loading keeps one copy of a shared one). */
int run_journal_histograms(run *r, hq_err *err)
{
    int rc = 0;
    for (size_t i = 0; i < r->ngroups && !rc; i++)
        if (!r->groups[i].restored)
            rc = hq_journal_note_hist(r->journal, r->groups[i].group, r->groups[i].hist, r->groups[i].len, err);
    return rc ? rc : hq_journal_flush(r->journal, err);
}
