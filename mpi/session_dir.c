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
#include <unistd.h>

#define PREFIX "histeq_dist-mpi."
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

/* PREFIX HOST.: a TMPDIR that several nodes share may hold other nodes' directories, whose locks
 * a file system with node-local locks (Lustre's localflock) would show free here. */
static void host_prefix(char *buf, size_t n)
{
    char host[256] = "";
    if (gethostname(host, sizeof host - 1) != 0 || !host[0])
        strcpy(host, "host");
    for (char *c = host; *c; c++)
        if (*c == '/')
            *c = '_';
    snprintf(buf, n, PREFIX "%s.", host);
}

/* Removes every directory of tmp named prefix* (host_prefix's), owned by this user, whose
 * owner.lock no live process holds. */
static void sweep(const char *tmp, const char *prefix)
{
    const size_t plen = strlen(prefix);
    DIR *d = opendir(tmp);
    if (!d)
        return;
    const int dfd = dirfd(d);
    const uid_t me = getuid();
    for (struct dirent *e; (e = readdir(d));) {
        struct stat st;
        if (strncmp(e->d_name, prefix, plen) != 0 ||
            fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != me)
            continue;
        const int sub = openat(dfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0)
            continue;
        /* The lock is released when its owner ends, however it ends: if this process gets it, no
         * process uses the directory. No lock file: not one of ours to judge, left alone. */
        const int lk = openat(sub, LOCK_NAME, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (lk >= 0 && flock(lk, LOCK_EX | LOCK_NB) == 0) {
            empty_dir(sub, DEPTH);
            unlinkat(dfd, e->d_name, AT_REMOVEDIR);
        }
        if (lk >= 0)
            close(lk);
        close(sub);
    }
    closedir(d);
}

int hq_session_dir_make(const char *tmp, char *out, size_t n)
{
    char prefix[300];
    host_prefix(prefix, sizeof prefix);
    sweep(tmp, prefix);
    if (snprintf(made, sizeof made, "%s/%sXXXXXX", tmp, prefix) >= (int)sizeof made || !mkdtemp(made))
        return -1;
    if (strlen(made) >= n) {
        rmdir(made);
        return -1;
    }
    /* Locked before it has the name a sweeper looks for, so that no sweeper ever finds it free
     * while this process lives. Kept open (and so locked) until the process ends; without a lock
     * the directory is still this process's, just never swept. */
    char tmp_lock[PATH_MAX + 32], lock[PATH_MAX + 32];
    snprintf(tmp_lock, sizeof tmp_lock, "%s/" LOCK_NAME ".new", made);
    snprintf(lock, sizeof lock, "%s/" LOCK_NAME, made);
    const int fd = open(tmp_lock, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0 && (flock(fd, LOCK_EX | LOCK_NB) != 0 || rename(tmp_lock, lock) != 0)) {
        unlink(tmp_lock);
        close(fd);
    } else {
        lock_fd = fd;
    }
    strcpy(out, made);
    have_made = 1;
    return 0;
}
