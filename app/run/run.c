/* run.c — hq_run (app/run.h): one invocation's data path as a sequence, the same on every rank:
 * plan -> read -> histogram -> reduce -> LUT -> remap -> write, then close. Each step is a file of
 * app/run/ (run_internal.h lists them); what is here is their order, where the ranks agree, and
 * the cleanup. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "../interrupt.h"
#include "../outname.h"
#include "../summary.h"
#include "../threads.h"
#include "run_internal.h"

/* Plan: the format's I/O and its threads, the modes checked, the plan made and the work
 * classified, the report opened, and whether this is a fresh run, a resumed one or one with
 * nothing left to do. */
static int plan_work(run *r, hq_err *err)
{
    const hq_options *o = r->o;
    const hq_comm *c = r->c;
    r->io_ops = hq_io_ops_for(r->inv.format);
    run_choose_io_threads(r);
    int rc = hq_comm_agree(c, run_check_modes(r, err), err);
    if (!rc && o->summary)
        rc = hq_comm_agree(c, c->rank == 0 ? hq_summary_check(o->summary, o, &r->inv, err) : 0, err);
    if (!rc)
        rc = hq_comm_agree(c, run_make_plan(r, err), err);
    if (!rc)
        rc = hq_comm_agree(c, run_classify_work(r, err), err);
    if (!rc)
        rc = hq_report_open(&(hq_report_cfg){o, c, &r->inv, &r->plan, r->scope}, &r->rep, err);
    run_parse_fault_hooks(r);
    if (!rc)
        rc = hq_resume_decide(o, c, &r->inv, &r->res, err);
    return rc;
}

/* The mask and the input opened. Blocks may travel in storage order unless something looks at
 * where a pixel lies: the report's thumbnails, a mask file (read in row-major order), and CLAHE,
 * whose tiles and weights follow the pixel's position. */
static int open_input(run *r, hq_err *err)
{
    int rc = hq_mask_open(r->o, &r->inv, r->c, &r->mask, err);
    if (!rc)
        rc = r->io_ops->open_input(&r->inv, r->c->world,
                                   !hq_report_wants_pixels(r->rep) && !hq_mask_has_file(r->mask) && !run_is_clahe(r),
                                   &r->io, err);
    return rc;
}

/* The output created (or reopened to resume), its journal opened and what an interrupted run did
 * applied: done_pixels and done_bytes are this rank's part of it. */
static int open_output(run *r, uint64_t *done_pixels, uint64_t *done_bytes, hq_err *err)
{
    const hq_options *o = r->o;
    if (r->io_ops->set_threads)
        r->io_ops->set_threads(r->io, run_threads_per_rank(r));
    /* What shapes each image's LUT, which the output then records as it is built. */
    const hq_run_meta settings = {.method = o->method, .scope = r->scope, .color = o->color, .bits = o->bits,
                                  .clahe = run_is_clahe(r) ? &o->clahe : NULL, .fbins = o->fbins,
                                  .no_luts = o->no_luts};
    /* Per pixel, not per colour: CLAHE's tiles, and a --mask that leaves some pixels of a colour as
     * they were (--mask-apply inside). */
    hq_out_opts oo = {o->output, o->force || r->res.replace_finished, o->png_level, o->verbose, r->res.action == HQ_RESUME_CONTINUE,
                      run_is_clahe(r) || (o->mask && o->mask_inside), &settings, o->quiet};
    const double t0 = hq_now();
    int rc = r->io_ops->create_output(r->io, &oo, r->c->world, err);
    r->t[PH_CREATE] = hq_now() - t0;
    if (!rc)
        hq_report_set_output(r->rep, r->io_ops, r->io);
    if (!rc)
        rc = run_open_journal(r, err);
    if (!rc)
        hq_interrupt_set_output(o->output, r->journal != NULL);
    /* The output's one file, if it has one: the journal's fdatasync goes through it (the journal
     * flushes nothing before its first record), and its writeback starts on every run, journal or
     * not: on a disk the output's pages then go out while the run goes on rather than all after it
     * (the kernel starts on its own only past dirty_background_ratio, a tenth of the RAM), so a
     * sync after the run, or the next job's reads, wait far less. */
    if (!rc && r->io_ops->sync_path) {
        const char *sp = r->io_ops->sync_path(r->io);
        r->sync_fd = sp ? open(sp, O_RDONLY | O_CLOEXEC) : -1;
    }
    if (!rc)
        r->wb = hq_writeback_start(r->sync_fd);
    if (!rc)
        rc = hq_comm_agree(r->c, run_apply_journal(r, done_pixels, done_bytes, err), err);
    return rc;
}

/* read -> histogram -> reduce -> LUT -> remap -> write: the passes, their statuses agreed between
 * the steps (within a pass each rank carries its own through the collective calls). */
static int equalize(run *r, hq_err *err)
{
    const hq_comm *c = r->c;
    /* read -> histogram: float data's binning first (pass 0, agreed), then every block (pass 1);
     * fused blocks go on through LUT, remap and write at once. */
    int mine = run_pass0_ranges(r, err);
    if (!mine)
        mine = run_pass1_shared(r, err);
    if (!mine)
        mine = run_pass1_own(r, err);
    int rc = hq_comm_agree(c, mine, err);
    /* reduce: the shared groups summed over ranks; the complete histograms journaled. */
    if (!rc)
        rc = hq_comm_agree(c, run_reduce_shared(r, err), err);
    if (!rc)
        rc = hq_comm_agree(c, run_journal_histograms(r, err), err);
    /* LUT: every pending group's. */
    if (!rc)
        rc = hq_comm_agree(c, run_build_pending_luts(r, err), err);
    /* remap -> write: the pending blocks (pass 2). */
    if (!rc)
        rc = hq_comm_agree(c, run_pass2(r, err), err);
    return rc;
}

/* Everything this rank holds, whichever step the run reached. */
static void free_run(run *r)
{
    for (uint64_t j = 0; j < r->nmine; j++) {
        hq_block_free(r->eng, r->mine[j].held);
        free(r->mine[j].why);
    }
    for (size_t i = 0; i < r->ngroups; i++) {
        free(r->groups[i].hist);
        free(r->groups[i].lut);
    }
    free(r->groups);
    free(r->fbin);
    free(r->fmine);
    free(r->fused_tables);
    free(r->mine);
    free(r->shared);
    free(r->item_shared);
    free(r->item_lockstep);
    free(r->skipped);
    hq_journal_close(r->journal);
    hq_writeback_stop(r->wb);
    r->wb = NULL;
    if (r->sync_fd >= 0)
        close(r->sync_fd);
    hq_journal_state_free(&r->res.st);
    hq_resume_release(r->o, &r->res); /* last of the output's state: the next run may start */
    hq_report_free(r->rep);
    free(r->target);
    if (r->mask) {
        hq_err ignored;
        hq_mask_close(r->mask, &ignored);
    }
    hq_engine_destroy(r->eng);
    hq_plan_free(&r->plan);
    hq_inventory_free(&r->inv);
    pthread_mutex_destroy(&r->mu);
    pthread_mutex_destroy(&r->tick_mu);
    free(r->default_output);
}

int hq_run(const hq_options *given, const hq_comm *c, hq_scan_job *early, hq_err *err)
{
    hq_options opts = *given; /* --output filled in when it was not given */
    const hq_options *o = &opts;
    run r = {.o = o, .c = c, .early_scan = early, .sync_fd = -1, .res.lock_fd = -1};
    const double t_start = hq_now();
    pthread_mutex_init(&r.mu, NULL);
    pthread_mutex_init(&r.tick_mu, NULL);
    /* Before any thread of this rank starts: they inherit the CPUs it works on. */
    hq_place_cpus(c->local_rank, c->local_size, &r.cpus);
    /* The engine's threads, while nothing else holds the room they need (app/threads.h). */
    int rc = hq_comm_agree(c, o->device == HQ_DEV_COPY ? 0 : hq_threads_start(run_threads_per_rank(&r), err), err);
    /* plan */
    if (!rc)
        rc = run_scan_and_share(&r, err);
    if (!rc && !o->output && !(rc = run_name_output(&r, &r.default_output, err)))
        opts.output = r.default_output;
    if (!rc)
        rc = hq_outname_check_kind(&r.inv, opts.output, err);
    if (!rc)
        rc = hq_outname_check_length(&r.inv, opts.output, err);
    if (rc) {
        pthread_mutex_destroy(&r.mu);
        pthread_mutex_destroy(&r.tick_mu);
        free(r.default_output);
        hq_inventory_free(&r.inv);
        return rc;
    }
    rc = plan_work(&r, err);
    /* After the checks, so that a usage error stays the run's one line. */
    if (!rc && r.default_output && c->rank == 0 && !o->quiet)
        fprintf(stderr, "histeq_dist: note: no --output given: writing %s\n", r.default_output);
    if (!rc)
        run_note_idle_options(&r);
    if (!rc && r.res.action == HQ_RESUME_DONE) {
        if (c->rank == 0 && !o->quiet)
            fprintf(stderr, "histeq_dist: note: %s is complete already; nothing to resume\n", o->output);
        rc = hq_comm_agree(c, run_summary_nothing_done(&r, t_start, err), err);
        free_run(&r);
        return rc;
    }
    /* open: input, output, journal, engine, --method match's target */
    if (!rc)
        rc = open_input(&r, err);
    if (rc) {
        free_run(&r);
        return rc;
    }
    uint64_t done_px = 0, done_bytes = 0;
    rc = open_output(&r, &done_px, &done_bytes, err);
    if (!rc)
        run_choose_lockstep(&r);
    if (!rc)
        rc = run_make_engine(&r, err);
    if (!rc && o->verbose)
        run_report_plan(&r);
    if (!rc && o->method == HQ_METHOD_MATCH)
        rc = hq_comm_agree(c, run_make_target(&r, err), err);
    /* read -> histogram -> reduce -> LUT -> remap -> write */
    if (!rc) {
        run_start_progress(&r, done_px, done_bytes);
        rc = equalize(&r, err);
        hq_progress_finish(&r.prog);
    }
    /* close */
    if (!rc)
        rc = run_check_something_left(&r, err);
    if (!rc)
        rc = run_check_input_unchanged(&r, err);
    if (!rc)
        rc = hq_comm_agree(c, run_share_fused_ranges(&r, err), err);
    rc = run_close_output(&r, rc, err);
    hq_interrupt_set_output(NULL, 0); /* complete, or removed by the failure's cleanup */
    if (!rc)
        rc = run_report_end(&r, t_start, err);
    free_run(&r);
    return rc;
}
