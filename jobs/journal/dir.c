/* dir.c — OUT.journal/ as a whole: its name, its id, its creation and removal, whether a live run
 * holds it (jobs/journal.h). */
#define _GNU_SOURCE
#include "journal_internal.h"
#include "../../core/doomed.h"
#include "../../core/fdio.h"
#include "../../core/samepath.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* OUT's length without trailing slashes: "outd/" and "outd" are one output, and must name one
 * journal and one lock ("outd/.journal" would be a file inside the directory). */
static size_t name_len(const char *out)
{
    size_t n = strlen(out);
    while (n > 1 && out[n - 1] == '/')
        n--;
    return n;
}

char *hq_journal_dir(const char *out)
{
    const size_t len = name_len(out), n = len + sizeof ".journal";
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%.*s.journal", (int)len, out);
    return s;
}

int hq_journal_has_id(const char *out)
{
    char *d = hq_journal_dir(out);
    char *p = d ? journal_join(d, "id") : NULL;
    struct stat st;
    const int yes = p && stat(p, &st) == 0 && S_ISREG(st.st_mode);
    free(p);
    free(d);
    return yes;
}

int hq_journal_exists(const char *out)
{
    char *d = hq_journal_dir(out);
    struct stat st;
    int yes = d && stat(d, &st) == 0 && S_ISDIR(st.st_mode);
    free(d);
    return yes;
}

uint64_t hq_journal_file_mark(const char *path, const char *name)
{
    struct stat st;
    memset(&st, 0, sizeof st);
    stat(path, &st);
    const uint64_t facts[] = {(uint64_t)st.st_size, (uint64_t)st.st_mtim.tv_sec, (uint64_t)st.st_mtim.tv_nsec,
                              (uint64_t)st.st_ino,  (uint64_t)st.st_ctim.tv_sec, (uint64_t)st.st_ctim.tv_nsec,
                              (uint64_t)st.st_dev};
    return journal_fnv(journal_fnv(FNV0, name, strlen(name) + 1), facts, sizeof facts);
}

void hq_journal_make_ids(const hq_inventory *inv, const char *options, const char *legacy_options, uint64_t also,
                         char *id, char *legacy, size_t len)
{
    uint64_t h = FNV0, hl = FNV0; /* canonical, legacy */
    if (also) { /* only then, so that the ids of runs without such files stay what they were */
        h = journal_fnv(h, &also, sizeof also);
        hl = journal_fnv(hl, &also, sizeof also);
    }
    for (size_t i = 0; i < inv->n; i++) {
        const hq_item *it = &inv->items[i];
        struct stat st;
        memset(&st, 0, sizeof st);
        stat(it->src, &st); /* a vanished file hashes as size 0, time 0: a changed input */
        /* The change time too: a file rewritten in place with its modification time set back (touch
         * -d, rsync --times) keeps size, mtime and inode, and a resume mixed old pixels with new. */
        const uint64_t facts[] = {it->slices, it->height, it->width, it->channels, it->sample_bytes, it->depth,
                                  it->bad, (uint64_t)st.st_size, (uint64_t)st.st_mtim.tv_sec,
                                  (uint64_t)st.st_mtim.tv_nsec, (uint64_t)st.st_ino, (uint64_t)st.st_ctim.tv_sec,
                                  (uint64_t)st.st_ctim.tv_nsec, (uint64_t)st.st_dev};
        /* Canonical: the file by its device and inode, an HDF5 dataset by its address in the
         * file, not by the words that named them (in.h5://s is in.h5:/s). */
        h = it->object ? journal_fnv(h, &it->object, sizeof it->object) : journal_fnv(h, it->name, strlen(it->name) + 1);
        h = journal_fnv(h, facts, sizeof facts);
        /* Legacy: the words as given, and the facts without the device. */
        hl = journal_fnv(hl, it->src, strlen(it->src) + 1);
        hl = journal_fnv(hl, it->name, strlen(it->name) + 1);
        hl = journal_fnv(hl, facts, sizeof facts - sizeof facts[0]);
    }
    char *real = realpath(inv->root, NULL);
    const char *root = real ? real : inv->root;
    /* "in/" and "in" are one input, as they are one output (name_len). */
    snprintf(id, len, ID_LINE "options %s\ninput %.*s items %zu fingerprint %016llx\n", options,
             (int)name_len(root), root, inv->n, (unsigned long long)h);
    snprintf(legacy, len, ID_LINE "options %s\ninput %.*s items %zu fingerprint %016llx\n", legacy_options,
             (int)name_len(inv->root), inv->root, inv->n, (unsigned long long)hl);
    free(real);
}

/* The names a journal holds: its id, the id being written, the output directory's identity, the
 * rank logs. */
static int journal_name(const char *name)
{
    return !strcmp(name, "id") || !strcmp(name, "id.tmp") || !strcmp(name, "output") || journal_is_log(name);
}

int hq_journal_foreign(const char *out, hq_err *err)
{
    char *dir = hq_journal_dir(out);
    if (!dir)
        return hq_fail(err, HQ_EMEM, "%s: out of memory", out);
    struct stat st;
    int rc = 0;
    char what[300] = "";
    if (lstat(dir, &st) != 0) {
        free(dir);
        return 0;
    }
    if (S_ISLNK(st.st_mode))
        snprintf(what, sizeof what, "a symbolic link");
    else if (!S_ISDIR(st.st_mode))
        snprintf(what, sizeof what, "not a directory");
    DIR *d = what[0] ? NULL : opendir(dir);
    for (struct dirent *e; d && !what[0] && (e = readdir(d)) != NULL;) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char *p = journal_join(dir, e->d_name);
        struct stat es;
        if (!journal_name(e->d_name) || !p || lstat(p, &es) != 0 || !S_ISREG(es.st_mode))
            snprintf(what, sizeof what, "it holds %.200s, which no run makes", e->d_name);
        free(p);
    }
    if (d)
        closedir(d);
    if (what[0])
        rc = hq_fail(err, HQ_EUSAGE, "%s: the name of its journal, %s, is taken (%s): remove it or choose another "
                     "output", out, dir, what);
    free(dir);
    return rc;
}

/* Only what a journal holds: should anything else be there, the directory stays (rmdir fails). */
void journal_remove_tree(const char *dir)
{
    struct stat st;
    if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return;
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (!journal_name(e->d_name))
                continue;
            char *p = journal_join(dir, e->d_name);
            if (p)
                unlink(p);
            free(p);
        }
        closedir(d);
    }
    rmdir(dir);
}

int hq_journal_in_use(const char *out)
{
    char *dir = hq_journal_dir(out);
    DIR *d = dir ? opendir(dir) : NULL;
    int busy = 0;
    for (struct dirent *e; d && !busy && (e = readdir(d)) != NULL;) {
        if (!journal_is_log(e->d_name))
            continue;
        char *p = journal_join(dir, e->d_name);
        const int fd = p ? open(p, O_RDONLY | O_CLOEXEC) : -1;
        /* Any other failure (a filesystem without flock) tells nothing: not in use, as before. */
        busy = fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
        if (fd >= 0)
            close(fd);
        free(p);
    }
    if (d)
        closedir(d);
    free(dir);
    return busy;
}

void hq_journal_remove(const char *out)
{
    char *dir = hq_journal_dir(out);
    if (dir)
        journal_remove_tree(dir);
    free(dir);
}

/* A journal write that failed, named by its file. A full disk reads as it does for the output's
 * own writes: the journal's few small files come after the output's reservation on the same disk,
 * and are often the first to meet it. */
int journal_write_failed(hq_err *err, const char *path, int e)
{
    if (e == ENOSPC || e == EDQUOT)
        return hq_fail(err, HQ_EIO, "%s: write failed: not enough disk space for the journal (%s)", path,
                       strerror(e));
    return hq_fail(err, HQ_EIO, "%s: cannot write the journal (%s)", path, strerror(e));
}

/* 64 random bits for the id's nonce: two journals made with the same options and input (two
 * outputs, or one output started over) still mark their logs apart. */
static uint64_t nonce(void)
{
    uint64_t v = 0;
    const int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    const int got = fd >= 0 && read(fd, &v, sizeof v) == (ssize_t)sizeof v;
    if (fd >= 0)
        close(fd);
    if (!got) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        v = journal_fnv(FNV0, &t, sizeof t) ^ (uint64_t)getpid() << 32;
    }
    return v;
}

int hq_journal_create(const char *out, const char *id, hq_err *err)
{
    char *dir = hq_journal_dir(out);
    char *idp = dir ? journal_join(dir, "id.tmp") : NULL;
    char *fin = dir ? journal_join(dir, "id") : NULL;
    int rc = 0;
    if (!idp || !fin) {
        rc = hq_fail(err, HQ_EMEM, "%s: out of memory", out);
        goto done;
    }
    journal_remove_tree(dir);
    if (mkdir(dir, 0777) != 0) {
        rc = journal_write_failed(err, dir, errno);
        goto done;
    }
    char line[64];
    snprintf(line, sizeof line, NONCE_KEY "%016llx\n", (unsigned long long)nonce());
    int fd = open(idp, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    if (fd < 0 || hq_write_all(fd, id, strlen(id)) || hq_write_all(fd, line, strlen(line)) || fdatasync(fd) ||
        close(fd) || rename(idp, fin)) {
        rc = journal_write_failed(err, fin, errno);
        if (fd >= 0)
            close(fd);
        journal_remove_tree(dir); /* half a journal resumes nothing */
    }
    /* An output directory (made before the journal) by device and inode: a resume into another
     * directory put at that name since would take its files for the claimed ones. Best effort:
     * without it a resume is as it was. */
    struct stat st;
    char *op = !rc ? journal_join(dir, "output") : NULL;
    if (op && stat(out, &st) == 0 && S_ISDIR(st.st_mode)) {
        char ident[64];
        const int n = snprintf(ident, sizeof ident, "%llu %llu\n", (unsigned long long)st.st_dev,
                               (unsigned long long)st.st_ino);
        const int ofd = open(op, O_WRONLY | O_CREAT | O_TRUNC, 0666);
        if (ofd >= 0) {
            if (hq_write_all(ofd, ident, (size_t)n) || fdatasync(ofd))
                unlink(op);
            close(ofd);
        }
    }
    free(op);
done:
    free(idp);
    free(fin);
    free(dir);
    return rc;
}

/* The lock file's slot in core/doomed.h's registry (one run lock a process). */
static int lock_slot = -1;
static char *lock_held; /* the lock file this process holds (hq_journal_lock), for the unlock */

char *hq_journal_lock_path(const char *out)
{
    /* OUT as a symbolic link (to a PNG output directory, say) names the output it points to: the
     * lock goes with that, or a run through the link and a run on the target would each hold a
     * lock of their own and write one directory. */
    char *target = hq_follow_links(out, NULL); /* a loop: named as given, as it cannot be made */
    if (target)
        out = target;
    const size_t len = name_len(out);
    size_t start = len;
    while (start > 0 && out[start - 1] != '/')
        start--;
    const size_t n = len + sizeof "..lock";
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%.*s.%.*s.lock", (int)start, out, (int)(len - start), out + start);
    free(target);
    return p;
}

int hq_journal_lock(const char *out, int *fd, hq_err *err)
{
    *fd = -1;
    char *path = hq_journal_lock_path(out);
    if (!path)
        return hq_fail(err, HQ_EMEM, "%s: out of memory", out);
    int rc = 0;
    /* A run that ends unlinks the file while it holds it: a run that opened that file before must
     * find, once it holds the lock, that the name now means another file, and start again. */
    for (int tries = 0; tries < 8 && *fd < 0 && !rc; tries++) {
        /* Not followed: a link planted under the lock's name would have us create or hold a file
         * elsewhere, and the end of the run unlink only the link. */
        const int f = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0666);
        if (f < 0) {
            if (errno == ELOOP)
                rc = hq_fail(err, HQ_EUSAGE, "%s: its lock %s is a symbolic link, which no run makes: remove it",
                             out, path);
            /* Else nowhere to put it (a read-only directory): the output's own checks will say why. */
            break;
        }
        struct stat kind;
        if (fstat(f, &kind) != 0 || !S_ISREG(kind.st_mode) || kind.st_size != 0) {
            close(f);
            rc = hq_fail(err, HQ_EUSAGE, "%s: its lock %s is %s, which no run makes: remove it, or choose another "
                         "output", out, path, S_ISREG(kind.st_mode) ? "a file with data" : "not a regular file");
            break;
        }
        if (flock(f, LOCK_EX | LOCK_NB) != 0) {
            const int e = errno;
            close(f);
            if (e == EWOULDBLOCK)
                rc = hq_fail(err, HQ_EUSAGE, "%s: another run is still writing it (its lock %s is in use): wait "
                             "for that run to end, or stop it first", out, path);
            break; /* any other failure (a filesystem without flock) tells nothing: unlocked, as before */
        }
        struct stat held, named;
        if (fstat(f, &held) == 0 && lstat(path, &named) == 0 && held.st_dev == named.st_dev &&
            held.st_ino == named.st_ino)
            *fd = f;
        else
            close(f);
    }
    if (*fd >= 0) {
        lock_slot = hq_doomed_add(path); /* a signal that ends the run removes it too */
        free(lock_held);
        lock_held = path;
        path = NULL;
    }
    free(path);
    return rc;
}

void hq_journal_unlock(const char *out, int fd)
{
    if (fd < 0)
        return;
    /* The name taken, not one made again: OUT may have changed from a link to a file since (an
     * HDF5 output's rename replaces the link given as --output). */
    char *path = lock_held ? lock_held : hq_journal_lock_path(out);
    lock_held = NULL;
    if (path)
        unlink(path);
    free(path);
    hq_doomed_drop(lock_slot);
    lock_slot = -1;
    close(fd);
}

int hq_journal_output_replaced(const char *out)
{
    char *dir = hq_journal_dir(out);
    char *op = dir ? journal_join(dir, "output") : NULL;
    unsigned char *text = NULL;
    size_t len = 0;
    int replaced = 0;
    if (op && journal_read_file(op, &text, &len) == 0) {
        unsigned long long dev = 0, ino = 0;
        struct stat st;
        char buf[64];
        snprintf(buf, sizeof buf, "%.*s", (int)(len < sizeof buf - 1 ? len : sizeof buf - 1), (const char *)text);
        if (sscanf(buf, "%llu %llu", &dev, &ino) == 2 && stat(out, &st) == 0)
            replaced = (unsigned long long)st.st_dev != dev || (unsigned long long)st.st_ino != ino;
    }
    free(text);
    free(op);
    free(dir);
    return replaced;
}
