/* run_internal.h — what the files of the data path (app/run/) share; nothing outside app/run/
 * includes it: app/run.h (hq_run) stays the one interface.
 *
 * The data path, top to bottom, the same on every rank; run.c is this sequence:
 *   plan      scan.c (the inventory on every rank, the output named), plan.c (the modes checked, the
 *             memory fitted, the plan made, the work classified), make_engine.c (the engine)
 *   open      journal.c (--resume's journal: opened, applied, claims, the fault hook), target.c
 *             (--method match's target histogram)
 *   read -> histogram    float_ranges.c (pass 0: float data's binning), pass1.c (pass 1)
 *   reduce    reduce.c (shared groups summed over ranks; CLAHE's tile rows: clahe.c)
 *   LUT       groups.c (the pending groups' histograms and every LUT built from one)
 *   remap -> write       pass2.c (pass 2)
 *   close     close.c (the run recorded, the output closed), reports.c (what the run tells)
 * and what the passes share: facts.c (small facts from the inventory, plan and options), compute.c
 * (one block through the engine), clahe.c (CLAHE's glue), block_io.c (a block read, written, held
 * between the passes), lockstep.c (shared items walked in lockstep rounds), stream.c (own items'
 * blocks through the I/O pipeline).
 *
 * Histograms belong to groups: one per image (scope image), one per dataset (scope dataset) or one
 * for everything (scope global).
 * A block whose groups all end inside it is "fused": read, histogram, LUT, remap and write in one
 * go. Other blocks are "pending": their group needs more blocks (the tiles of a big image) or other
 * ranks (a shared group, summed by MPI_Allreduce). Pending pixels are held in memory up to what
 * --memory leaves beside the blocks in flight, and re-read past it (plan.c, fit_memory).
 *
 * Collective HDF5 transfers need every rank in every call. Items with blocks on several ranks
 * ("shared items") are therefore walked first, by all ranks, in lockstep rounds computed from the
 * plan (which every rank has); a rank without a block in a round joins with NULL. Items owned by
 * one rank are then read and written independently, so a collection never runs in lockstep.
 *
 * Each rank carries its own status through the collective parts and the ranks agree on it only
 * where they next meet (hq_comm_agree), so a failure never strands a rank in a call. Below,
 * "collective" marks what every rank calls together, "agreed" what returns the status agreed over
 * ranks; the rest return this rank's own.
 *
 * struct run is one invocation's state on this rank. The compute thread owns it, except what the
 * I/O threads of a stream share with it (block_io.c): held_bytes and the I/O clocks under mu, the
 * progress tick under tick_mu, the done counters atomically. */
#ifndef HQ_RUN_INTERNAL_H
#define HQ_RUN_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "../../core/clahe.h"
#include "../../core/fbin.h"
#include "../../engine/engine.h"
#include "../../io/io.h"
#include "../../jobs/journal.h"
#include "../../jobs/plan.h"
#include "../../mpi/progress.h"
#include "../../report/report.h"
#include "../mask.h"
#include "../pipeline.h"
#include "../placement.h"
#include "../resume.h"
#include "../run.h"
#include "../writeback.h"

#ifndef HQ_VERSION
#define HQ_VERSION "dev"
#endif

/* The phases timed in r->t. create: making the output and reserving its space; close: recording the
 * run, closing, checking and renaming the output. Both are collective, and grow with the output on
 * some file systems. Their names: reports.c. */
enum { PH_CREATE, PH_READ, PH_HIST, PH_REDUCE, PH_REMAP, PH_WRITE, PH_CLOSE, PH_N };

typedef struct group_hist {
    uint64_t group;
    uint64_t *hist; /* nhist * bins counters */
    size_t len;     /* nhist * bins */
    uint16_t *lut;  /* built once the histogram is complete */
    int empty;      /* nothing counted (all masked out or ignored): the pixels are left unchanged */
    int restored;   /* complete already: taken from an interrupted run's journal (--resume) */
} group_hist;

typedef struct my_block {
    const hq_block *b;
    int fused;   /* all its groups end inside it */
    int done;    /* written */
    void *held;  /* pixels kept between the passes (NULL: not read, or dropped) */
    const void *view; /* the block read as a view of the input (io.h, view_block): until released */
    int viewed;  /* read as a view: the pipeline's pixels are the view's, not a buffer's */
    void *out;   /* a viewed block's remapped pixels, what is written */
    char *why;   /* left out under --on-error skip: the reason */
} my_block;

typedef struct run {
    const hq_options *o;
    const hq_comm *c;
    hq_inventory inv;
    hq_scan_job *early_scan; /* rank 0: the scan main started, or NULL (app/run.h) */
    uint64_t input_mark; /* rank 0: run_input_mark after the scan */
    const hq_io_ops *io_ops;
    hq_io *io;
    hq_plan plan;
    hq_engine *eng;
    hq_scope scope;
    uint8_t *item_shared; /* per item: blocks on more than one rank */
    /* per item: walked in lockstep rounds (lockstep.c), its transfers collective: shared, and not
     * independent for the I/O (hq_io_ops.independent); every other item streams on each rank. Set
     * once the output exists (run_choose_lockstep); until then, as item_shared. */
    uint8_t *item_lockstep;
    my_block *mine;       /* this rank's blocks */
    uint64_t nmine;
    group_hist *groups;   /* pending groups this rank touches */
    size_t ngroups, cap_groups;
    uint64_t *shared;     /* groups summed over ranks, ascending, the same list on every rank */
    uint64_t nshared;
    uint64_t held_bytes, budget; /* under mu: I/O threads release held blocks */
    int memory_by_limit;          /* the default --memory was shrunk to fit ulimit -v (on some rank) */
    hq_cpus cpus;         /* the CPUs this rank works on (app/placement.h) */
    hq_pipeline_cfg pipe; /* own items' streams: I/O threads and blocks in flight (app/pipeline.h) */
    pthread_mutex_t mu;   /* guards held_bytes and the I/O clocks, which I/O threads share */
    int io_busy[2];       /* reads / writes under way */
    double io_since[2];   /* since when some are */
    pthread_mutex_t tick_mu; /* one progress tick at a time: MPI is initialized SERIALIZED */
    double t[PH_N];
    uint64_t pixels_done, bytes_done; /* written; updated by the thread that writes */
    uint64_t bytes_histogrammed;      /* pending blocks through pass 1, float blocks through pass 0;
                                         updated by the compute thread */
    hq_progress prog;
    uint64_t nskipped;    /* this rank's skipped inputs (their reasons: my_block.why) */
    char *skipped;        /* the reasons, one line each in block order, once the passes are over */
    size_t skipped_len;
    hq_resume res;        /* fresh run, or what an interrupted one did (--resume) */
    hq_journal *journal;  /* this rank's log of finished work; NULL when the output keeps none */
    int sync_fd;          /* the output's file: its writeback, and fdatasync before the journal claims blocks */
    hq_writeback *wb;     /* starts the output's writeback early, so those fdatasyncs are short */
    uint64_t writes;      /* blocks written, for the HQ_FAULT_KILL and HQ_FAULT_STALL test hooks */
    long kill_after;      /* HQ_FAULT_KILL=RANK:N: this rank kills itself after N writes (tests) */
    long stall_after;     /* HQ_FAULT_STALL=RANK:N: this rank stops, alive, after N writes (tests) */
    hq_report *rep;       /* what the run records: --report and the output's provenance (report/report.h) */
    char *default_output; /* the output named beside the input when --output was not given */
    uint64_t *target;     /* --method match: the target histogram(s), nhist * bins, the same on every rank */
    /* --mask: the mask opened as a second input, read block by block with the image (app/mask.h) */
    hq_mask *mask;
    /* Float data (core/fbin.h): each group's binning, from pass 0's reduced extremes or --range;
     * indexed by group (the image, or 0 under scope global). NULL when no item is float. */
    hq_fbin *fbin;
    uint64_t nfgroups;
    uint8_t *fmine;       /* groups whose binning this rank found itself: whole images in one block,
                             which pass 0 leaves to pass 1 (they are in memory there anyway) */
    hq_frange *facc;      /* pass 0 only: each group's extremes so far */
    uint64_t *finf;       /* pass 0 only: infinite samples met per item */
    /* compute.c: a fused batch's histograms and LUTs, kept from batch to batch (at most
     * FUSED_TABLES_MAX): fresh pages each time cost a page fault a 4 KiB touched, most of the run
     * for small float images and their 65,536-bin tables. */
    void *fused_tables;
    size_t fused_bytes;
} run;

/* How a pass streams this rank's own blocks (stream.c). */
typedef enum { STREAM_FUSED, STREAM_HIST, STREAM_REMAP, STREAM_RANGE } stream_kind;

/* One lockstep round of a shared item (lockstep.c). rc: this rank's status so far; mb: its block of
 * the round, NULL when it has none or has failed already, and then it only joins the collective
 * calls. Returns the status after the round, the first failure kept (its message too: once rc is
 * set, the round writes any further message elsewhere than err). */
typedef int (*run_round_fn)(run *r, uint64_t item, my_block *mb, int rc, hq_err *err);

/* facts.c */
hq_mode run_mode_of(const run *r, uint64_t item);
size_t run_hist_len(const hq_mode *m);
int run_is_clahe(const run *r);
hq_clahe_geom run_geom_of(const run *r, uint64_t item);
size_t run_group_len(const run *r, uint64_t item);
/* The pixel bytes of every item not left out (bad), over all ranks. */
uint64_t run_total_bytes(const run *r);
uint64_t run_block_bytes(const run *r, const hq_block *b);
uint64_t run_buf_bytes(const run *r, const hq_block *b);
uint64_t run_image_of(const run *r, const hq_block *b, uint64_t s);
uint64_t run_group_of(const run *r, const hq_block *b);
uint64_t run_group_images(const run *r, uint64_t item);
int run_is_fused(const run *r, const hq_block *b);
int run_is_float(const run *r, uint64_t item);
int run_global_mode(const run *r, hq_mode *m);
int run_is_shared_group(const run *r, uint64_t g);

/* scan.c (collective, agreed) */
int run_scan_and_share(run *r, hq_err *err);
/* Rank 0: the input files' identity, size and times, hashed (taken after the scan: input_mark). */
uint64_t run_input_mark(const run *r);
/* Collective: HQ_EINPUT when the input files changed since the scan. */
int run_check_input_unchanged(const run *r, hq_err *err);
int run_name_output(const run *r, char **name, hq_err *err);

/* plan.c */
int run_check_modes(run *r, hq_err *err);
/* Rank 0, unless quiet: a note for each option this input gives nothing to do (--range without
 * float data, --ignore above every level). Not an error: a script may pass them to every input. */
void run_note_idle_options(const run *r);
void run_choose_io_threads(run *r);
int run_make_plan(run *r, hq_err *err); /* collective */
int run_classify_work(run *r, hq_err *err);
void run_choose_lockstep(run *r); /* collective, after create_output */

/* make_engine.c */
int run_threads_per_rank(const run *r);
int run_make_engine(run *r, hq_err *err); /* collective, agreed */

/* journal.c */
int run_needs_round_flush(const run *r, uint64_t item);
int run_note_written(run *r, const hq_block *b, hq_err *err);
int run_flush_round(run *r, uint64_t item, const hq_block *written, int rc, hq_err *err); /* collective */
void run_parse_fault_hooks(run *r);
int run_open_journal(run *r, hq_err *err); /* collective, agreed */
int run_apply_journal(run *r, uint64_t *done_pixels, uint64_t *done_bytes, hq_err *err);
/* What the interrupted run did of each image of the plan, a byte each: 1 finished (every block
 * claimed by the journal), 2 a part, 0 none (malloc'd; NULL unless resuming, or out of memory);
 * the finished ones' number in *count. The resumed run's counts leave them out, as its pixels and
 * bytes do. */
unsigned char *run_resumed_images(const run *r, uint64_t *count);
int run_journal_image(run *r, uint64_t image, const uint64_t *hist, const uint16_t *lut, size_t n, hq_err *err);
int run_journal_histograms(run *r, hq_err *err);

/* block_io.c */
void run_tick(run *r);
/* A buffer for block b's pixels (engine memory), or HQ_EMEM with the message. */
int run_block_alloc(run *r, const hq_block *b, void **data, hq_err *err);
int run_timed_read(run *r, const hq_block *b, uint64_t item, int collective, void **data, hq_err *err);
int run_timed_write(run *r, const hq_block *b, uint64_t item, int collective, const void *data, hq_err *err);
void run_hold_or_drop(run *r, my_block *mb, void *data);
void run_release(run *r, my_block *mb, void *data);
const void *run_timed_view(run *r, const hq_block *b);
void run_view_release(run *r, my_block *mb);

/* compute.c */
hq_block_data run_block_view(const run *r, const hq_block *b, void *data, int per_image, int remap);
int run_name_float_failure(const run *r, uint64_t item, int rc, hq_err *err);
int run_equalize_fused(run *r, const hq_block *b, void *data, void *out, hq_err *err);
int run_histogram_pending(run *r, const hq_block *b, void *data, hq_err *err);
int run_remap_pending(run *r, const hq_block *b, void *data, void *out, hq_err *err);
int run_range_block(run *r, const hq_block *b, void *data, hq_err *err);
int run_fused_ranges(run *r, const hq_block *b, const hq_block_data *d, const hq_mode *m, hq_err *err);

/* clahe.c */
int run_clahe_fused(run *r, const hq_block *b, void *data, hq_err *err);
int run_reduce_clahe_shared(run *r, hq_err *err); /* collective */

/* groups.c */
group_hist *run_find_group(run *r, uint64_t g, size_t len);
void run_drop_group(run *r, uint64_t g);
void run_ignore_bins(const run *r, const hq_mode *m, uint64_t *hist);
int run_build_luts(const run *r, const hq_mode *m, uint64_t item, uint64_t group, uint64_t *hist, uint16_t *lut,
                   int *empty, hq_err *err);
int run_build_pending_luts(run *r, hq_err *err);

/* reduce.c */
int run_reduce_shared(run *r, hq_err *err); /* collective */

/* lockstep.c (collective) */
int run_lockstep(run *r, int pending_only, int (*want)(const run *, uint64_t), run_round_fn round, hq_err *err);

/* stream.c */
int run_stream(run *r, stream_kind kind, my_block **list, uint64_t n, hq_err *err);
/* This rank's blocks of the items not walked in lockstep that pick accepts, in plan order, streamed. */
int run_stream_own(run *r, stream_kind kind, int (*pick)(const run *, const my_block *), hq_err *err);

/* pass1.c */
int run_pass1_shared(run *r, hq_err *err); /* collective */
int run_pass1_own(run *r, hq_err *err);

/* pass2.c */
int run_pass2(run *r, hq_err *err); /* collective */

/* float_ranges.c */
int run_pass0_ranges(run *r, hq_err *err); /* collective, agreed */
int run_share_fused_ranges(run *r, hq_err *err); /* collective */

/* target.c */
int run_make_target(run *r, hq_err *err); /* collective */

/* close.c */
int run_close_output(run *r, int rc, hq_err *err); /* collective, agreed */

/* reports.c (collective) */
void run_report_plan(const run *r);
void run_start_progress(run *r, uint64_t done_pixels, uint64_t done_bytes);
int run_report_end(run *r, double t_start, hq_err *err);
/* Rank 0 (others: 0): --summary for a --resume that found the output finished already. */
int run_summary_nothing_done(const run *r, double t_start, hq_err *err);
/* Collective: HQ_EINPUT when --on-error skip left out every image while reading them. */
int run_check_something_left(run *r, hq_err *err); /* agreed */

#endif
