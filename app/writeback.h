/* writeback.h — durability off the critical path: a thread that asks the kernel to start writing
 * an output's dirty pages to disk (sync_file_range(SYNC_FILE_RANGE_WRITE)) soon after each write,
 * so that the fdatasync the journal makes before claiming blocks (jobs/journal.h), or a user's
 * sync after the run, finds little left to wait for. It only starts writeback; the guarantee
 * stays the journal's fdatasync. Every run with a single output file has one.
 *
 * The whole file is handed over each time (the format writes where its layout says, which the
 * driver does not know); the kernel skips pages already under writeback or clean. Kicks that
 * arrive while a call is under way coalesce into one more call. Where the file system has no
 * writeback (tmpfs) the calls return at once. */
#ifndef HQ_WRITEBACK_H
#define HQ_WRITEBACK_H

typedef struct hq_writeback hq_writeback;

/* Starts the thread for fd (not owned; it must stay open until hq_writeback_stop). NULL when fd < 0
 * or the thread cannot start: then kicks do nothing, and only the journal's fdatasync remains. */
hq_writeback *hq_writeback_start(int fd);

/* After a write: never blocks on the disk. Thread-safe; NULL is fine. */
void hq_writeback_kick(hq_writeback *wb);

/* Waits for the call under way, ends the thread. NULL is fine. */
void hq_writeback_stop(hq_writeback *wb);

#endif
