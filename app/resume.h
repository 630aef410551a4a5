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
 *    (or a killed job's last ranks) still writes.
 * Only outputs written piece by piece keep a journal: HDF5 files and PNG directories (a single
 * PNG is one image, written at the end). */
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
    char id[2048];
} hq_resume;

/* Collective. */
int hq_resume_decide(const hq_options *o, const hq_comm *c, const hq_inventory *inv, hq_resume *res, hq_err *err);

#endif
