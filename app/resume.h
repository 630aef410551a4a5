/* resume.h — whether a run starts fresh, finishes an interrupted one, or has nothing to do.
 *
 * Decided on rank 0 from what is on disk next to OUT, and shared, so every rank acts alike:
 *  - no journal: fresh (with --resume too, so batch scripts may always pass it); with --resume
 *    and a finished output already there (HDF5: OUT; PNG directory: its completion record):
 *    nothing to do;
 *  - a journal: without --resume refused (unless --force, which starts over); with --resume the
 *    journal's id must match this run's options and input (else refused), and its records
 *    (blocks written, histograms completed) are given to every rank. A journal whose partial
 *    output is gone starts over; one whose output was already renamed into place is done;
 *  - a journal that a live process still holds (jobs/journal.h: each rank locks its log): refused,
 *    with or without --resume or --force, so that no second run resumes or removes what the first
 *    (or a killed job's last ranks) still writes;
 *  - before any of this, rank 0 takes the output's run lock (hq_journal_lock) and keeps it to the
 *    run's end (hq_resume_release): two runs started together on one output cannot both pass the
 *    checks above and then truncate each other's .part or journal;
 *  - a journal without its id (killed while it was being made) claims nothing: it is removed and
 *    the run starts over; and a run that starts over removes the old journal before it touches the
 *    output, so that a kill in between cannot leave old claims beside a new .part.
 * Only outputs written piece by piece keep a journal: HDF5 files and PNG directories. A single
 * PNG is one image, written at the end: with --resume it is complete already when it records this
 * run (io.h output_state), refused when it records another, and otherwise made as without. */
#ifndef HQ_RESUME_H
#define HQ_RESUME_H

#include "../io/inventory.h"
#include "../jobs/journal.h"
#include "../mpi/comm.h"
#include "options.h"

typedef enum {
    HQ_RESUME_OFF = 0,  /* no journal for this output kind */
    HQ_RESUME_FRESH,    /* start over, with a new journal */
    HQ_RESUME_CONTINUE, /* finish the interrupted run: st holds what it did */
    HQ_RESUME_DONE      /* the output is already complete */
} hq_resume_action;

typedef struct hq_resume {
    hq_resume_action action;
    hq_journal_state st;
    char id[HQ_JOURNAL_ID_MAX];
    int replace_finished; /* continuing a journal while OUT holds a finished output of this same run
                             (an interrupted --force over it): the resumed run may replace it, as
                             the interrupted one was let to; never anything else at OUT */
    int lock_fd; /* rank 0: the run lock (-1: none) */
} hq_resume;

/* Collective. */
int hq_resume_decide(const hq_options *o, const hq_comm *c, const hq_inventory *inv, hq_resume *res, hq_err *err);

/* The run lock let go, its file removed (rank 0; others: nothing). After the run, however it ended. */
void hq_resume_release(const hq_options *o, hq_resume *res);

#endif
