/* journal_internal.h — what the files of the journal (jobs/journal/) share; nothing outside
 * jobs/journal/ includes it: jobs/journal.h stays the one interface.
 *
 * One file per job: record.c (the log's record format and its checksum, paths in OUT.journal/),
 * dir.c (OUT.journal/ as a whole: its name, the id that decides what may resume, creation, removal,
 * whether a live run holds it), state.c (what an interrupted run had done, in memory: lookups and
 * the serialization every rank receives), load.c (rank 0 reading OUT.journal/ into that state),
 * log.c (one rank's open log: records buffered, flushed only after the output is durable). */
#ifndef HQ_JOURNAL_INTERNAL_H
#define HQ_JOURNAL_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "../../core/error.h"
#include "../journal.h"

#define REC_MAGIC 0x524a5148u /* "HQJR" */
/* The id's first line, the format's version: a journal of another one is refused, never misread. */
#define ID_LINE "histeq_dist journal 2\n"
/* The id file's last line: a random nonce of the journal's own (hq_journal_create), so that the
 * logs of two journals with the same options and input carry different owner marks. The run's
 * computed id is compared with what comes before it. */
#define NONCE_KEY "nonce "
/* REC_OWNER: a log's first record, the journal_owner of the id it was written under; a log that
 * does not start with this journal's (copied from another run's journal, or of a version without
 * it) is not read: its work is done again rather than trusted. */
enum { REC_BLOCK = 1, REC_HIST = 2, REC_LUT = 3, REC_OWNER = 4 };

typedef struct rec_head {
    uint32_t magic, type;
    uint64_t len; /* payload bytes */
    uint64_t sum; /* journal_rec_sum of the payload */
} rec_head;

/* A block record is this many numbers (hq_journal_block). */
#define BLOCK_WORDS (sizeof(hq_journal_block) / sizeof(uint64_t))

/* record.c */
#define FNV0 0xcbf29ce484222325ull
/* FNV-1a of n bytes, continuing from h (FNV0 to start). */
uint64_t journal_fnv(uint64_t h, const void *p, size_t n);
/* A record's checksum over a's na bytes then b's nb (b may be NULL when nb is 0). */
uint64_t journal_rec_sum(const void *a, size_t na, const void *b, size_t nb);
/* The 8-byte mark of an id text that REC_OWNER carries. */
uint64_t journal_owner(const char *id);
/* A whole file into *out (malloc'd, NUL after its *len bytes); -1 with errno when it cannot. The
 * id file is read through it by the loader and by each new log (its owner mark): the same text. */
int journal_read_file(const char *path, unsigned char **out, size_t *len);
/* "a/b" (malloc'd; NULL when out of memory). */
char *journal_join(const char *a, const char *b);
/* Whether a name in OUT.journal/ is a rank's log ("rank-NNNNNN.log"). */
int journal_is_log(const char *name);

/* dir.c */
/* Removes dir and the files in it. */
void journal_remove_tree(const char *dir);
/* A journal write that failed with errno e, named by its file: HQ_EIO. */
int journal_write_failed(hq_err *err, const char *path, int e);

/* state.c */
/* Adds a record's contents to st (values at any alignment, straight from a log's bytes); a
 * histogram or LUT already there is kept. -1 when out of memory. cap: blocks' room, 0 at first. */
int journal_state_add_block(hq_journal_state *st, size_t *cap, const hq_journal_block *b);
int journal_state_add_hist(hq_journal_state *st, uint64_t group, const void *counts, uint64_t n);
int journal_state_add_lut(hq_journal_state *st, uint64_t image, const void *lut, uint64_t n);
/* Sorts what the lookups bisect; after the last add. */
void journal_state_sort(hq_journal_state *st);

#endif
