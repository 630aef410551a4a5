/* session_dir.h — the private Open MPI session directory of a process started without a launcher.
 *
 * Such a process (a "singleton") gets TMPDIR/histeq_dist-mpi.HOST.XXXXXX of its own (mpi/comm.c
 * says why). It holds owner.lock in it locked (flock) for as long as it lives, and removes the
 * directory at the end, or from a handler of a fatal signal (hq_session_dir_remove is
 * async-signal-safe). What a kill -9 leaves is removed by the next singleton of the same user on
 * the same host in the same TMPDIR: a directory whose lock it can take has no owner left. It is
 * made as histeq_dist-mpi-new.HOST.XXXXXX and renamed once locked, and a sweeper renames what it
 * removes to histeq_dist-mpi-gone.HOST.XXXXXX first, so that a kill in either moment leaves a name
 * the next sweeper removes (a -new one after a minute). A histeq_dist-mpi. directory without the
 * lock file, or of another host, is never touched. Linux only (getdents64, flock). */
#ifndef HQ_SESSION_DIR_H
#define HQ_SESSION_DIR_H

#include <stddef.h>

/* Removes what kill -9 left in tmp, then makes and locks this process's directory; its path goes to
 * out (n bytes). 0 on success; -1 if no directory could be made (the caller goes on without one). */
int hq_session_dir_make(const char *tmp, char *out, size_t n);

/* Removes this process's directory and everything in it, if it made one; again is harmless.
 * Async-signal-safe: raw system calls only, no allocation, no locks. */
void hq_session_dir_remove(void);

#endif
