/* journal.h — what a run has finished, kept next to its output (OUT.journal/) so that a run killed
 * mid-way (kill -9, a SLURM time limit, a dead node) can be finished with --resume instead of redone.
 *
 * The directory holds `id` (what decides the output: the options and the input's identity; a
 * resume with another id is refused; and a nonce of this journal's own) and one append-only log per rank of records: a block written
 * (its coordinates, so a resume under another rank count still recognises the blocks it shares
 * with the old plan) and a completed histogram group (so pass 2 resumes without pass 1).
 *
 * A record may claim only what is durable: records wait in memory and reach the log at a flush,
 * which first syncs the output file (fdatasync) and then the log. A kill loses at most the records
 * of the last flush interval, whose work is then simply done again. A torn last record (killed in
 * the middle of a write) fails its checksum and ends the log. Each log starts with a mark of the id
 * it was written under, and a log without this journal's mark (another run's, copied in) is not
 * read: its work is done again rather than trusted. Records are native-endian: a journal
 * is read back by the same kind of machine that wrote it. */
#ifndef HQ_JOURNAL_H
#define HQ_JOURNAL_H

#include <stdint.h>

#include "../core/error.h"
#include "../io/inventory.h"
#include "plan.h"

/* A written block, as coordinates (a log of an older version, without columns, has records of
 * another length: they are passed over, and those blocks are done again). */
typedef struct hq_journal_block {
    uint64_t item, s0, s1, r0, r1, c0, c1;
} hq_journal_block;

typedef struct hq_journal_hist {
    uint64_t group, n;
    uint64_t *counts; /* n counters */
} hq_journal_hist;

/* An image's LUT, kept for the report's page of a sampled image that an interrupted run finished
 * (the output's own record of it is in the output already). */
typedef struct hq_journal_lut {
    uint64_t image, n;
    uint16_t *lut;
} hq_journal_lut;

/* What an interrupted run had done (rank 0 loads it; every rank gets it by hq_journal_state_bcast). */
typedef struct hq_journal_state {
    hq_journal_block *blocks; /* sorted, for hq_journal_has_block */
    uint64_t nblocks;
    hq_journal_hist *hists;
    uint64_t nhists;
    hq_journal_lut *luts;
    uint64_t nluts;
} hq_journal_state;

typedef struct hq_journal hq_journal; /* one rank's open log */

/* "OUT.journal" (malloc'd). */
char *hq_journal_dir(const char *out);

/* 1 when OUT has a journal directory. */
int hq_journal_exists(const char *out);

/* Rank 0, before anything removes or makes OUT.journal: HQ_EUSAGE when something else has that
 * name (a symbolic link, a file, a directory holding anything but an id and rank logs), which the
 * run would otherwise empty or follow; 0 when there is none or it is a journal. */
int hq_journal_foreign(const char *out, hq_err *err);

/* ".NAME.lock" beside OUT (malloc'd): the run lock's name; OUT a symbolic link: its target's. */
char *hq_journal_lock_path(const char *out);

/* 1 when OUT.journal holds its id: a journal without one was interrupted while it was being made,
 * before any rank could claim anything in it. */
int hq_journal_has_id(const char *out);

/* Rank 0, before anything looks at or touches OUT, its .part or its journal: an exclusive flock on
 * ".NAME.lock" beside OUT, held until hq_journal_unlock (or the process ends, however it ends).
 * HQ_EUSAGE ("another run is still writing it") when a live run holds it; *fd -1 (and 0) where
 * locks cannot be had (no such directory yet, a filesystem without flock). */
int hq_journal_lock(const char *out, int *fd, hq_err *err);
/* Removes the lock file and lets go of it (fd -1: nothing). */
void hq_journal_unlock(const char *out, int fd);

/* Room for an id (the options, up to 4 KiB, and the input's path, up to PATH_MAX, with their
 * frame): cut shorter, a long input path lost the fingerprint, and with it the difference between
 * two inputs. */
#define HQ_JOURNAL_ID_MAX 12288

/* The id text of a run: options that shape the output and a fingerprint of the input (every
 * item's file, size and modification time, shape and type; `also`: the caller's fingerprint of
 * further input files, 0 for none). Into id, the canonical one: the input by its real path, its
 * files by device and inode and its HDF5 datasets by address, so that ./in.h5 and /abs/in.h5 are
 * one input; into legacy, the one of earlier versions, made of legacy_options and the words as
 * given, as journals and outputs made before were marked (a resume accepts either). One stat of
 * each file for both. Rank 0; len: HQ_JOURNAL_ID_MAX each. */
void hq_journal_make_ids(const hq_inventory *inv, const char *options, const char *legacy_options, uint64_t also,
                         char *id, char *legacy, size_t len);

/* A mark of one file's identity as an input's is taken (size, modification and change times,
 * inode, device) and of its name, for callers that fold further files into make_id's `also`, or
 * compare an input before and after a run (a vanished file marks as size 0, time 0). */
uint64_t hq_journal_file_mark(const char *path, const char *name);

/* What differs between two ids (old: recorded, now: this run's), for a refusal: another version,
 * other options, or a changed input (a static string). */
const char *hq_journal_what_differs(const char *old, const char *now);

/* Rank 0: reads OUT.journal. HQ_EUSAGE naming what differs when its id is neither `id` nor
 * `alt_id` (NULL: none). */
int hq_journal_load(const char *out, const char *id, const char *alt_id, hq_journal_state *st, hq_err *err);

/* Serialization of a state, for MPI_Bcast (the buffer is malloc'd). */
int hq_journal_state_pack(const hq_journal_state *st, unsigned char **buf, uint64_t *len, hq_err *err);
int hq_journal_state_unpack(const unsigned char *buf, uint64_t len, hq_journal_state *st, hq_err *err);

int hq_journal_has_block(const hq_journal_state *st, const hq_block *b);
const hq_journal_hist *hq_journal_find_hist(const hq_journal_state *st, uint64_t group);
const hq_journal_lut *hq_journal_find_lut(const hq_journal_state *st, uint64_t image);
void hq_journal_state_free(hq_journal_state *st);

/* Rank 0: a fresh OUT.journal/ holding `id`, and `output` where OUT is a directory already (an
 * old journal is removed first). */
int hq_journal_create(const char *out, const char *id, hq_err *err);

/* Rank 0: whether OUT is a directory other than the one the journal was made beside (it records
 * an output directory's device and inode; a journal without that record, or an HDF5 output's,
 * answers 0). A resume would take the files of a directory put there since for its own. */
int hq_journal_output_replaced(const char *out);

/* Makes the output's writes so far durable before records that claim them: called by a flush
 * (from whichever thread notes the record that triggers it). */
typedef int (*hq_journal_sync_fn)(void *ctx, hq_err *err);

/* Every rank: opens its own log for appending, and holds an exclusive flock on it until the log is
 * closed or the process ends, however it ends. sync: see above (NULL: none); flush_s: seconds
 * between flushes (0: at every record). */
int hq_journal_open(const char *out, int rank, hq_journal_sync_fn sync, void *ctx, double flush_s, hq_journal **j,
                    hq_err *err);

/* Thread-safe. Buffer a record. A block record also flushes when flush_s has passed since the
 * last flush: the flush calls the sync function, so block records must come from a thread that may
 * flush the output: the one that does its I/O (HDF5 is not thread-safe), or any of the I/O threads
 * of a format that takes calls at once (io.h `concurrent`). Histogram and LUT records only wait in
 * the buffer, and so may come from any thread; they reach the log, in order, with the next flush. */
int hq_journal_note_block(hq_journal *j, const hq_block *b, hq_err *err);
int hq_journal_note_hist(hq_journal *j, uint64_t group, const uint64_t *counts, uint64_t n, hq_err *err);
int hq_journal_note_lut(hq_journal *j, uint64_t image, const uint16_t *lut, uint64_t n, hq_err *err);
int hq_journal_flush(hq_journal *j, hq_err *err);

/* Closes the log (without flushing: a failed run's records are of no use). NULL is fine. */
void hq_journal_close(hq_journal *j);

/* Rank 0: 1 when a process still holds one of OUT.journal's logs (a run still going, or the ranks
 * of a killed job that have not noticed yet): a second run must neither resume nor remove what
 * the first is still writing. */
int hq_journal_in_use(const char *out);

/* Rank 0: removes OUT.journal/ and what it holds. */
void hq_journal_remove(const char *out);

#endif
