/* doomed.h — temporary files that must not outlive the process if a signal ends it.
 *
 * A file being written under a temporary name (a PNG encode, before its rename) is registered for
 * as long as it exists under that name; app/interrupt.c's handler removes every registered file
 * before the signal ends the process. Up to HQ_DOOMED_SLOTS at once (a file that finds no free
 * slot is simply not removed on a signal; the next run on that output removes it). Paths are
 * copied. hq_doomed_unlink_all is async-signal-safe and never reads a slot while another thread
 * rewrites it (each slot has a sequence count, odd while it changes). */
#ifndef HQ_DOOMED_H
#define HQ_DOOMED_H

#define HQ_DOOMED_SLOTS 64

/* The slot now holding path, or -1 (no free slot, or a path of PATH_MAX bytes or more). */
int hq_doomed_add(const char *path);

/* The file left slot (it was renamed or removed); slot -1 is ignored. */
void hq_doomed_drop(int slot);

/* Removes every registered file; for signal handlers. */
void hq_doomed_unlink_all(void);

#endif
