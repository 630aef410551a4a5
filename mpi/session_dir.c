#define _GNU_SOURCE /* getdents64 */
#include "session_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PREFIX "histeq_dist-mpi."
/* A directory is made under NEW_PREFIX and renamed to PREFIX once locked, and a sweeper renames
 * one it found free to GONE_PREFIX before emptying it: a kill -9 in either moment leaves a name
 * that says what it is. */
#define NEW_PREFIX "histeq_dist-mpi-new."
#define GONE_PREFIX "histeq_dist-mpi-gone."
/* A NEW_PREFIX directory older than this is one whose maker died before renaming it (which takes
 * it microseconds). */
#define NEW_STALE_S 60
#define LOCK_NAME "owner.lock"
/* Open MPI's tree under the directory is ompi.HOST.UID/jf.0/1/0: a few levels. */
#define DEPTH 8

static char made[PATH_MAX];
static volatile sig_atomic_t have_made;
static int lock_fd = -1; /* held open, and so locked, for the life of the process */

/* Everything inside the directory open as dfd, depth levels down at most. Unlinking while reading
 * the directory may make getdents skip entries, so it reads again from the start until a pass
 * removes nothing. Raw system calls only: a signal handler runs this. */
static void empty_dir(int dfd, int depth)
{
    /* getdents64's records, 8-byte aligned as struct dirent64 */
    union {
        struct dirent64 align;
        char bytes[2048];
    } buf;
    for (int removed = 1; removed;) {
        removed = 0;
        if (lseek(dfd, 0, SEEK_SET) != 0)
            return;
        ssize_t len;
        while ((len = getdents64(dfd, buf.bytes, sizeof buf.bytes)) > 0) {
            for (ssize_t off = 0; off < len;) {
                const struct dirent64 *e = (const struct dirent64 *)(buf.bytes + off);
                off += e->d_reclen;
                const char *nm = e->d_name;
                if (nm[0] == '.' && (nm[1] == 0 || (nm[1] == '.' && nm[2] == 0)))
                    continue;
                if (e->d_type != DT_DIR && unlinkat(dfd, nm, 0) == 0) {
                    removed = 1;
                    continue;
                }
                if (depth > 0) {
                    const int sub = openat(dfd, nm, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                    if (sub >= 0) {
                        empty_dir(sub, depth - 1);
                        close(sub);
                    }
                }
                if (unlinkat(dfd, nm, AT_REMOVEDIR) == 0)
                    removed = 1;
            }
        }
    }
}

void hq_session_dir_remove(void)
{
    if (!have_made)
        return;
    have_made = 0;
    const int dfd = open(made, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd >= 0) {
        empty_dir(dfd, DEPTH);
        close(dfd);
    }
    rmdir(made);
}

/* kind HOST.: a TMPDIR that several nodes share may hold other nodes' directories, whose locks
 * a file system with node-local locks (Lustre's localflock) would show free here. */
static void host_prefix(const char *kind, char *buf, size_t n)
{
    char host[256] = "";
    if (gethostname(host, sizeof host - 1) != 0 || !host[0])
        strcpy(host, "host");
    for (char *c = host; *c; c++)
        if (*c == '/')
            *c = '_';
    snprintf(buf, n, "%s%s.", kind, host);
}

/* Whether name is prefix followed by mkdtemp's six letters and nothing else: the prefix ends in
 * "HOST.", and another node's host "HOST.domain" must not match. */
static int ours(const char *name, const char *prefix)
{
    const size_t n = strlen(prefix);
    return !strncmp(name, prefix, n) && strlen(name + n) == 6 && !strchr(name + n, '.');
}

/* dfd's entry name (a directory open as sub) emptied and removed. */
static void remove_tree(int dfd, const char *name, int sub)
{
    empty_dir(sub, DEPTH);
    unlinkat(dfd, name, AT_REMOVEDIR);
}

/* Removes what dead singletons of this user and host left in tmp: PREFIX directories whose
 * owner.lock no live process holds (renamed to GONE_PREFIX first, so that a sweeper killed while
 * emptying one leaves a name the next sweeper removes whatever it holds), GONE_PREFIX ones, and
 * NEW_PREFIX ones older than NEW_STALE_S. A PREFIX directory without the lock file is not one of
 * ours to judge: left alone. */
static void sweep(const char *tmp)
{
    char live[300], gone[300], fresh[300];
    host_prefix(PREFIX, live, sizeof live);
    host_prefix(GONE_PREFIX, gone, sizeof gone);
    host_prefix(NEW_PREFIX, fresh, sizeof fresh);
    DIR *d = opendir(tmp);
    if (!d)
        return;
    const int dfd = dirfd(d);
    const uid_t me = getuid();
    const time_t now = time(NULL);
    for (struct dirent *e; (e = readdir(d));) {
        const int is_live = ours(e->d_name, live), is_gone = ours(e->d_name, gone), is_new = ours(e->d_name, fresh);
        struct stat st;
        if ((!is_live && !is_gone && !is_new) || fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
            !S_ISDIR(st.st_mode) || st.st_uid != me || (is_new && now - st.st_mtime < NEW_STALE_S))
            continue;
        const int sub = openat(dfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0)
            continue;
        if (!is_live) {
            /* A -new one's maker holds its lock from just after making it: a maker stopped (or a
             * file server's clock apart) for a minute keeps it. */
            const int lk = is_new ? openat(sub, LOCK_NAME, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) : -1;
            if (lk < 0 || flock(lk, LOCK_EX | LOCK_NB) == 0)
                remove_tree(dfd, e->d_name, sub);
            if (lk >= 0)
                close(lk);
            close(sub);
            continue;
        }
        /* The lock is released when its owner ends, however it ends: if this process gets it, no
         * process uses the directory. */
        const int lk = openat(sub, LOCK_NAME, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (lk >= 0 && flock(lk, LOCK_EX | LOCK_NB) == 0) {
            char to[NAME_MAX + 1];
            if (snprintf(to, sizeof to, "%s%s", gone, e->d_name + strlen(live)) < (int)sizeof to &&
                renameat(dfd, e->d_name, dfd, to) == 0)
                remove_tree(dfd, to, sub);
        }
        if (lk >= 0)
            close(lk);
        close(sub);
    }
    closedir(d);
}

int hq_session_dir_make(const char *tmp, char *out, size_t n)
{
    char live[300], fresh[300], staged[PATH_MAX];
    host_prefix(PREFIX, live, sizeof live);
    host_prefix(NEW_PREFIX, fresh, sizeof fresh);
    sweep(tmp);
    if (snprintf(staged, sizeof staged, "%s/%sXXXXXX", tmp, fresh) >= (int)sizeof staged || !mkdtemp(staged))
        return -1;
    /* mkdtemp's 0700 less the umask: under umask 0222 the directory came out read-only to its
     * owner, unusable, and (not root) impossible for any sweep to empty: one left a run. */
    if (chmod(staged, 0700) != 0) {
        rmdir(staged);
        return -1;
    }
    /* The same random tail under the name a sweeper looks for. */
    const char *tail = staged + strlen(staged) - 6;
    if (snprintf(made, sizeof made, "%s/%s%s", tmp, live, tail) >= (int)sizeof made || strlen(made) >= n) {
        rmdir(staged);
        return -1;
    }
    /* Locked before it has the name a sweeper looks for, so that no sweeper ever finds it free
     * while this process lives. Kept open (and so locked) until the process ends; without a lock
     * the directory is still this process's, just never swept. */
    char lock[PATH_MAX + 32];
    snprintf(lock, sizeof lock, "%s/" LOCK_NAME, staged);
    const int fd = open(lock, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0) {
        unlink(lock);
        close(fd);
    } else {
        lock_fd = fd;
    }
    /* Never over a directory of that name (rename would replace an empty one); a file system
     * without RENAME_NOREPLACE gets rename, where that would take the same six random letters. */
    int moved = renameat2(AT_FDCWD, staged, AT_FDCWD, made, RENAME_NOREPLACE);
    if (moved != 0 && (errno == EINVAL || errno == ENOSYS))
        moved = rename(staged, made);
    if (moved != 0) {
        unlink(lock); /* all the staged directory holds yet */
        rmdir(staged);
        if (lock_fd >= 0)
            close(lock_fd);
        lock_fd = -1;
        return -1;
    }
    strcpy(out, made);
    have_made = 1;
    return 0;
}
