/* log.c — one rank's open log: records buffered, reaching the log only after the output they
 * claim is durable (jobs/journal.h). */
#define _GNU_SOURCE
#include "journal_internal.h"
#include "../../core/fdio.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct hq_journal {
    int fd;
    char *path;
    pthread_mutex_t lock;
    unsigned char *buf; /* records not yet in the log */
    size_t len, cap;
    double flush_s, last_flush;
    hq_journal_sync_fn sync;
    void *ctx;
};

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A new log starts with its owner record (REC_OWNER), made from the journal's id file; a log
 * being appended to (a resume) has it already. Not synced here: the first claim's flush syncs
 * the log, this record with it. */
static int start_log(hq_journal *j, const char *out, hq_err *err)
{
    struct stat st;
    if (fstat(j->fd, &st) != 0)
        return journal_write_failed(err, j->path, errno);
    if (st.st_size > 0)
        return 0;
    char *dir = hq_journal_dir(out), *idp = dir ? journal_join(dir, "id") : NULL;
    free(dir);
    unsigned char *id = NULL;
    size_t n = 0;
    int rc = 0;
    if (!idp)
        rc = hq_fail(err, HQ_EMEM, "%s: out of memory", out);
    else if (journal_read_file(idp, &id, &n))
        rc = hq_fail(err, HQ_EIO, "%s: cannot read the journal's id (%s)", idp, strerror(errno ? errno : EIO));
    free(idp);
    if (rc)
        return rc;
    const uint64_t owner = journal_owner((const char *)id);
    free(id);
    const rec_head h = {REC_MAGIC, REC_OWNER, sizeof owner, journal_rec_sum(&owner, sizeof owner, NULL, 0)};
    unsigned char rec[sizeof h + sizeof owner];
    memcpy(rec, &h, sizeof h);
    memcpy(rec + sizeof h, &owner, sizeof owner);
    return hq_write_all(j->fd, rec, sizeof rec) ? journal_write_failed(err, j->path, errno) : 0;
}

int hq_journal_open(const char *out, int rank, hq_journal_sync_fn sync, void *ctx, double flush_s, hq_journal **jp,
                    hq_err *err)
{
    *jp = NULL;
    hq_journal *j = calloc(1, sizeof *j);
    char *dir = hq_journal_dir(out);
    char name[32];
    snprintf(name, sizeof name, "rank-%06d.log", rank);
    if (j)
        j->path = dir ? journal_join(dir, name) : NULL;
    free(dir);
    if (!j || !j->path) {
        if (j)
            free(j);
        return hq_fail(err, HQ_EMEM, "%s: out of memory", out);
    }
    j->fd = open(j->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
    int rc = j->fd < 0 ? journal_write_failed(err, j->path, errno) : 0;
    /* Held until the process ends (a kill included): hq_journal_in_use. A filesystem without flock
     * only loses that check. */
    if (!rc && flock(j->fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK)
        rc = hq_fail(err, HQ_EUSAGE, "%s: in use by another run", j->path);
    if (!rc)
        rc = start_log(j, out, err);
    if (rc) {
        if (j->fd >= 0)
            close(j->fd);
        free(j->path);
        free(j);
        return rc;
    }
    pthread_mutex_init(&j->lock, NULL);
    j->flush_s = flush_s;
    j->last_flush = now_s();
    j->sync = sync;
    j->ctx = ctx;
    *jp = j;
    return 0;
}

/* With the lock held. */
static int flush_locked(hq_journal *j, hq_err *err)
{
    j->last_flush = now_s();
    if (!j->len)
        return 0;
    if (j->sync) {
        int rc = j->sync(j->ctx, err);
        if (rc)
            return rc;
    }
    if (hq_write_all(j->fd, j->buf, j->len) || fdatasync(j->fd))
        return journal_write_failed(err, j->path, errno);
    j->len = 0;
    return 0;
}

/* Records this large go to the log at once rather than through the buffer: a copy less, and no
 * buffer grown to hold a second's worth of 16-bit histograms (32 MiB of CLAHE tile counters).
 * They claim nothing (only block records do, after the sync that flush_locked makes first), so
 * landing ahead of buffered records is harmless: a LUT or histogram whose block was never claimed
 * is made again on resume. */
#define DIRECT_RECORD (1u << 20)

static int append(hq_journal *j, uint32_t type, const void *a, size_t na, const void *b, size_t nb, int may_flush,
                  hq_err *err)
{
    rec_head h = {REC_MAGIC, type, na + nb, journal_rec_sum(a, na, b, nb)};
    pthread_mutex_lock(&j->lock);
    int rc = 0;
    if (!may_flush && na + nb >= DIRECT_RECORD && na <= 64) {
        unsigned char head[sizeof h + 64];
        memcpy(head, &h, sizeof h);
        memcpy(head + sizeof h, a, na);
        if (hq_write_all(j->fd, head, sizeof h + na) || (nb && hq_write_all(j->fd, b, nb)))
            rc = journal_write_failed(err, j->path, errno);
        pthread_mutex_unlock(&j->lock);
        return rc;
    }
    const size_t need = j->len + sizeof h + na + nb;
    if (need > j->cap) {
        size_t cap = j->cap ? j->cap : 4096;
        while (cap < need)
            cap *= 2;
        unsigned char *nbuf = realloc(j->buf, cap);
        if (!nbuf)
            rc = hq_fail(err, HQ_EMEM, "%s: out of memory", j->path);
        else {
            j->buf = nbuf;
            j->cap = cap;
        }
    }
    if (!rc) {
        memcpy(j->buf + j->len, &h, sizeof h);
        memcpy(j->buf + j->len + sizeof h, a, na);
        if (nb)
            memcpy(j->buf + j->len + sizeof h + na, b, nb);
        j->len = need;
        if (may_flush && now_s() - j->last_flush >= j->flush_s)
            rc = flush_locked(j, err);
    }
    pthread_mutex_unlock(&j->lock);
    return rc;
}

int hq_journal_note_block(hq_journal *j, const hq_block *b, hq_err *err)
{
    const hq_journal_block r = {b->item, b->s0, b->s1, b->r0, b->r1, b->c0, b->c1};
    return j ? append(j, REC_BLOCK, &r, sizeof r, NULL, 0, 1, err) : 0;
}

int hq_journal_note_hist(hq_journal *j, uint64_t group, const uint64_t *counts, uint64_t n, hq_err *err)
{
    const uint64_t head[2] = {group, n};
    return j ? append(j, REC_HIST, head, sizeof head, counts, n * sizeof *counts, 0, err) : 0;
}

int hq_journal_note_lut(hq_journal *j, uint64_t image, const uint16_t *lut, uint64_t n, hq_err *err)
{
    const uint64_t head[2] = {image, n};
    return j ? append(j, REC_LUT, head, sizeof head, lut, n * sizeof *lut, 0, err) : 0;
}

int hq_journal_flush(hq_journal *j, hq_err *err)
{
    if (!j)
        return 0;
    pthread_mutex_lock(&j->lock);
    int rc = flush_locked(j, err);
    pthread_mutex_unlock(&j->lock);
    return rc;
}

void hq_journal_close(hq_journal *j)
{
    if (!j)
        return;
    close(j->fd);
    pthread_mutex_destroy(&j->lock);
    free(j->buf);
    free(j->path);
    free(j);
}
