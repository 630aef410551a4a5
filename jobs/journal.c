/* journal.c — OUT.journal/: the id file and one append-only log of checksummed records per rank. */
#define _GNU_SOURCE
#include "journal.h"
#include "../core/fdio.h"

#include <dirent.h>
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

#define REC_MAGIC 0x524a5148u /* "HQJR" */
/* The id's first line, the format's version: a journal of another one is refused, never misread. */
#define ID_LINE "histeq_dist journal 2\n"
enum { REC_BLOCK = 1, REC_HIST = 2, REC_LUT = 3 };

typedef struct rec_head {
    uint32_t magic, type;
    uint64_t len; /* payload bytes */
    uint64_t sum; /* FNV-1a of the payload */
} rec_head;

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

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 0x100000001b3ull;
    return h;
}
#define FNV0 0xcbf29ce484222325ull

/* Record checksums: four lanes of 64-bit words, each xor-then-multiply (FNV's step on words),
 * folded with the length at the end. Byte-wise FNV-1a is one multiply per byte in one chain,
 * about 1 GB/s: 8 ms or more for each 16-bit image's CLAHE LUTs (8 MiB at the default grid),
 * which a GPU remaps in a fraction of that. Four chains of words overlap. Streaming: a record's
 * sum is the same whatever pieces its bytes are fed in. */
#define SUM_PRIME 0x100000001b3ull
typedef struct rec_sum {
    uint64_t lane[4];
    unsigned char tail[32]; /* bytes of an unfinished 32-byte step */
    size_t ntail;
    uint64_t total;
} rec_sum;

static void sum_init(rec_sum *r)
{
    for (int k = 0; k < 4; k++)
        r->lane[k] = FNV0 + (uint64_t)k;
    r->ntail = 0;
    r->total = 0;
}

static void sum_step(rec_sum *r, const unsigned char *p)
{
    for (int k = 0; k < 4; k++) {
        uint64_t w;
        memcpy(&w, p + 8 * k, 8);
        r->lane[k] = (r->lane[k] ^ w) * SUM_PRIME;
    }
}

static void sum_feed(rec_sum *r, const void *data, size_t n)
{
    const unsigned char *p = data;
    r->total += n;
    if (r->ntail) {
        const size_t take = n < 32 - r->ntail ? n : 32 - r->ntail;
        memcpy(r->tail + r->ntail, p, take);
        r->ntail += take;
        p += take;
        n -= take;
        if (r->ntail < 32)
            return;
        sum_step(r, r->tail);
        r->ntail = 0;
    }
    for (; n >= 32; p += 32, n -= 32)
        sum_step(r, p);
    memcpy(r->tail, p, n);
    r->ntail = n;
}

static uint64_t sum_done(rec_sum *r)
{
    uint64_t h = fnv(FNV0, r->tail, r->ntail) ^ r->total;
    for (int k = 0; k < 4; k++)
        h = (h ^ r->lane[k]) * SUM_PRIME;
    return h;
}

static uint64_t rec_sum_of(const void *a, size_t na, const void *b, size_t nb)
{
    rec_sum r;
    sum_init(&r);
    sum_feed(&r, a, na);
    if (nb)
        sum_feed(&r, b, nb);
    return sum_done(&r);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static char *join(const char *a, const char *b)
{
    size_t n = strlen(a) + strlen(b) + 2;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%s/%s", a, b);
    return s;
}

char *hq_journal_dir(const char *out)
{
    size_t n = strlen(out) + sizeof ".journal";
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%s.journal", out);
    return s;
}

int hq_journal_exists(const char *out)
{
    char *d = hq_journal_dir(out);
    struct stat st;
    int yes = d && stat(d, &st) == 0 && S_ISDIR(st.st_mode);
    free(d);
    return yes;
}

void hq_journal_make_id(const hq_inventory *inv, const char *options, char *buf, size_t len)
{
    uint64_t h = FNV0;
    for (size_t i = 0; i < inv->n; i++) {
        const hq_item *it = &inv->items[i];
        struct stat st;
        memset(&st, 0, sizeof st);
        stat(it->src, &st); /* a vanished file hashes as size 0, time 0: a changed input */
        const uint64_t facts[] = {it->slices, it->height, it->width, it->channels, it->sample_bytes, it->depth,
                                  it->bad, (uint64_t)st.st_size, (uint64_t)st.st_mtim.tv_sec,
                                  (uint64_t)st.st_mtim.tv_nsec, (uint64_t)st.st_ino};
        h = fnv(h, it->src, strlen(it->src) + 1);
        h = fnv(h, it->name, strlen(it->name) + 1);
        h = fnv(h, facts, sizeof facts);
    }
    snprintf(buf, len, ID_LINE "options %s\ninput %s items %zu fingerprint %016llx\n", options,
             inv->root, inv->n, (unsigned long long)h);
}

/* ---- reading ---- */

static int read_file(const char *path, unsigned char **out, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    size_t cap = 4096, n = 0;
    unsigned char *b = malloc(cap);
    while (b) {
        if (n == cap) {
            unsigned char *nb = realloc(b, cap * 2);
            if (!nb) {
                free(b);
                b = NULL;
                break;
            }
            b = nb;
            cap *= 2;
        }
        size_t got = fread(b + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    int bad = ferror(f) || !b;
    fclose(f);
    if (bad) {
        free(b);
        return -1;
    }
    *out = b;
    *len = n;
    return 0;
}

/* The first line that differs, for the refusal message. */
static const char *what_differs(const char *old, const char *now)
{
    if (strncmp(old, ID_LINE, strlen(ID_LINE)) != 0)
        return "it was written by another version of histeq_dist";
    const char *o = strstr(old, "\noptions "), *n = strstr(now, "\noptions ");
    const char *oe = o ? strchr(o + 1, '\n') : NULL, *ne = n ? strchr(n + 1, '\n') : NULL;
    if (!o || !n || !oe || !ne || oe - o != ne - n || memcmp(o, n, (size_t)(oe - o)) != 0)
        return "the interrupted run used other options";
    return "the input changed since the interrupted run";
}

static int add_block(hq_journal_state *st, size_t *cap, const hq_journal_block *b)
{
    if (st->nblocks == *cap) {
        size_t c = *cap ? *cap * 2 : 256;
        hq_journal_block *nb = realloc(st->blocks, c * sizeof *nb);
        if (!nb)
            return -1;
        st->blocks = nb;
        *cap = c;
    }
    st->blocks[st->nblocks++] = *b;
    return 0;
}

/* counts and lut: n values, at any alignment (straight from a log's bytes). */
static int add_hist(hq_journal_state *st, uint64_t group, const void *counts, uint64_t n)
{
    for (uint64_t k = 0; k < st->nhists; k++)
        if (st->hists[k].group == group)
            return 0; /* logged twice (a resumed run that reduced again): the same counts */
    hq_journal_hist *nh = realloc(st->hists, (st->nhists + 1) * sizeof *nh);
    if (!nh)
        return -1;
    st->hists = nh;
    uint64_t *c = malloc(n * sizeof *c + 1);
    if (!c)
        return -1;
    memcpy(c, counts, n * sizeof *c);
    st->hists[st->nhists++] = (hq_journal_hist){group, n, c};
    return 0;
}

static int add_lut(hq_journal_state *st, uint64_t image, const void *lut, uint64_t n)
{
    for (uint64_t k = 0; k < st->nluts; k++)
        if (st->luts[k].image == image)
            return 0;
    hq_journal_lut *nl = realloc(st->luts, (st->nluts + 1) * sizeof *nl);
    if (!nl)
        return -1;
    st->luts = nl;
    uint16_t *c = malloc(n * sizeof *c + 1);
    if (!c)
        return -1;
    memcpy(c, lut, n * sizeof *c);
    st->luts[st->nluts++] = (hq_journal_lut){image, n, c};
    return 0;
}

/* Reads the records of one log up to its first damaged one (a kill in mid-write). */
static int load_log(const char *path, hq_journal_state *st, size_t *cap)
{
    unsigned char *b = NULL;
    size_t len = 0, off = 0;
    if (read_file(path, &b, &len))
        return -1;
    int rc = 0;
    while (off + sizeof(rec_head) <= len && !rc) {
        rec_head h;
        memcpy(&h, b + off, sizeof h);
        const unsigned char *p = b + off + sizeof h;
        if (h.magic != REC_MAGIC || h.len > len - off - sizeof h || rec_sum_of(p, h.len, NULL, 0) != h.sum)
            break;
        if (h.type == REC_BLOCK && h.len == sizeof(hq_journal_block)) {
            hq_journal_block blk;
            memcpy(&blk, p, sizeof blk);
            rc = add_block(st, cap, &blk);
        } else if ((h.type == REC_HIST || h.type == REC_LUT) && h.len >= 2 * sizeof(uint64_t)) {
            /* (group or image, n, n values): u64 counts or u16 LUT entries */
            const size_t elem = h.type == REC_HIST ? sizeof(uint64_t) : sizeof(uint16_t);
            uint64_t id, n;
            memcpy(&id, p, sizeof id);
            memcpy(&n, p + 8, sizeof n);
            if (n != (h.len - 16) / elem)
                break;
            rc = h.type == REC_HIST ? add_hist(st, id, p + 16, n) : add_lut(st, id, p + 16, n);
        }
        off += sizeof h + h.len;
    }
    free(b);
    return rc;
}

/* A block record is this many numbers (hq_journal_block). */
#define BLOCK_WORDS (sizeof(hq_journal_block) / sizeof(uint64_t))

/* Orders by the numbers, not by memcmp's bytes, so the order does not depend on endianness. */
static int cmp_block_num(const void *pa, const void *pb)
{
    const uint64_t *a = pa, *b = pb;
    for (size_t k = 0; k < BLOCK_WORDS; k++)
        if (a[k] != b[k])
            return a[k] < b[k] ? -1 : 1;
    return 0;
}

static int cmp_lut(const void *pa, const void *pb)
{
    const hq_journal_lut *a = pa, *b = pb;
    return a->image < b->image ? -1 : a->image > b->image;
}

const hq_journal_lut *hq_journal_find_lut(const hq_journal_state *st, uint64_t image)
{
    const hq_journal_lut key = {image, 0, NULL};
    return st->nluts ? bsearch(&key, st->luts, st->nluts, sizeof key, cmp_lut) : NULL;
}

int hq_journal_load(const char *out, const char *id, hq_journal_state *st, hq_err *err)
{
    memset(st, 0, sizeof *st);
    char *dir = hq_journal_dir(out);
    char *idp = dir ? join(dir, "id") : NULL;
    unsigned char *old = NULL;
    size_t oldlen = 0;
    int rc = 0;
    if (!idp) {
        rc = hq_fail(err, HQ_EMEM, "%s: out of memory", out);
        goto done;
    }
    if (read_file(idp, &old, &oldlen)) {
        rc = hq_fail(err, HQ_EIO, "%s: cannot read the journal's id (%s)", idp, strerror(errno));
        goto done;
    }
    if (oldlen != strlen(id) || memcmp(old, id, oldlen) != 0) {
        unsigned char *nul = realloc(old, oldlen + 1);
        if (nul) {
            old = nul;
            old[oldlen] = '\0';
        }
        rc = hq_fail(err, HQ_EUSAGE, "%s: cannot resume: %s (use --force without --resume to start over)",
                     out, nul ? what_differs((char *)old, id) : "its journal differs");
        goto done;
    }
    DIR *d = opendir(dir);
    if (!d) {
        rc = hq_fail(err, HQ_EIO, "%s: cannot list (%s)", dir, strerror(errno));
        goto done;
    }
    size_t cap = 0;
    struct dirent *e;
    while (!rc && (e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "rank-", 5) != 0)
            continue;
        char *lp = join(dir, e->d_name);
        if (!lp || load_log(lp, st, &cap))
            rc = hq_fail(err, HQ_EIO, "%s/%s: cannot read the journal", dir, e->d_name);
        free(lp);
    }
    closedir(d);
    if (!rc && st->nblocks)
        qsort(st->blocks, st->nblocks, sizeof *st->blocks, cmp_block_num);
    if (!rc && st->nluts)
        qsort(st->luts, st->nluts, sizeof *st->luts, cmp_lut);
done:
    if (rc)
        hq_journal_state_free(st);
    free(old);
    free(idp);
    free(dir);
    return rc;
}

int hq_journal_has_block(const hq_journal_state *st, const hq_block *b)
{
    const hq_journal_block key = {b->item, b->s0, b->s1, b->r0, b->r1, b->c0, b->c1};
    return st->nblocks && bsearch(&key, st->blocks, st->nblocks, sizeof key, cmp_block_num) != NULL;
}

const hq_journal_hist *hq_journal_find_hist(const hq_journal_state *st, uint64_t group)
{
    for (uint64_t k = 0; k < st->nhists; k++)
        if (st->hists[k].group == group)
            return &st->hists[k];
    return NULL;
}

void hq_journal_state_free(hq_journal_state *st)
{
    for (uint64_t k = 0; k < st->nhists; k++)
        free(st->hists[k].counts);
    free(st->hists);
    for (uint64_t k = 0; k < st->nluts; k++)
        free(st->luts[k].lut);
    free(st->luts);
    free(st->blocks);
    memset(st, 0, sizeof *st);
}

/* Layout: nblocks, nhists, the blocks, then per hist: group, n, counts; then nluts and per LUT:
 * image, n, the entries packed 4 to a word. */
int hq_journal_state_pack(const hq_journal_state *st, unsigned char **buf, uint64_t *len, hq_err *err)
{
    uint64_t n = 2 + st->nblocks * BLOCK_WORDS;
    for (uint64_t k = 0; k < st->nhists; k++)
        n += 2 + st->hists[k].n;
    n += 1;
    for (uint64_t k = 0; k < st->nluts; k++)
        n += 2 + (st->luts[k].n + 3) / 4;
    uint64_t *w = calloc(n, sizeof *w);
    if (!w)
        return hq_fail(err, HQ_EMEM, "journal: out of memory");
    uint64_t *p = w;
    *p++ = st->nblocks;
    *p++ = st->nhists;
    if (st->nblocks) /* blocks is NULL while none were logged */
        memcpy(p, st->blocks, st->nblocks * sizeof *st->blocks);
    p += st->nblocks * BLOCK_WORDS;
    for (uint64_t k = 0; k < st->nhists; k++) {
        *p++ = st->hists[k].group;
        *p++ = st->hists[k].n;
        memcpy(p, st->hists[k].counts, st->hists[k].n * sizeof *p);
        p += st->hists[k].n;
    }
    *p++ = st->nluts;
    for (uint64_t k = 0; k < st->nluts; k++) {
        *p++ = st->luts[k].image;
        *p++ = st->luts[k].n;
        memcpy(p, st->luts[k].lut, st->luts[k].n * sizeof *st->luts[k].lut);
        p += (st->luts[k].n + 3) / 4;
    }
    *buf = (unsigned char *)w;
    *len = n * sizeof *w;
    return 0;
}

int hq_journal_state_unpack(const unsigned char *buf, uint64_t len, hq_journal_state *st, hq_err *err)
{
    memset(st, 0, sizeof *st);
    const uint64_t words = len / 8;
    uint64_t *w = malloc(len + 8);
    if (!w)
        return hq_fail(err, HQ_EMEM, "journal: out of memory");
    memcpy(w, buf, len);
    uint64_t at = 2;
    int ok = words >= 2 && w[0] <= (words - 2) / BLOCK_WORDS;
    if (ok) {
        st->blocks = malloc(w[0] * sizeof *st->blocks + 1);
        ok = st->blocks != NULL;
    }
    if (ok) {
        st->nblocks = w[0];
        memcpy(st->blocks, w + at, w[0] * sizeof *st->blocks);
        at += w[0] * BLOCK_WORDS;
    }
    for (uint64_t k = 0; ok && k < w[1]; k++) {
        ok = at + 2 <= words && w[at + 1] <= words - at - 2 && add_hist(st, w[at], w + at + 2, w[at + 1]) == 0;
        if (ok)
            at += 2 + w[at + 1];
    }
    ok = ok && at < words;
    const uint64_t nluts = ok ? w[at++] : 0;
    for (uint64_t k = 0; ok && k < nluts; k++) {
        ok = at + 2 <= words && (w[at + 1] + 3) / 4 <= words - at - 2 &&
             add_lut(st, w[at], w + at + 2, w[at + 1]) == 0;
        if (ok)
            at += 2 + (w[at + 1] + 3) / 4;
    }
    free(w);
    if (!ok) {
        hq_journal_state_free(st);
        return hq_fail(err, HQ_EIO, "journal: damaged in transit");
    }
    return 0;
}

/* ---- writing ---- */

static void remove_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            char *p = join(dir, e->d_name);
            if (p)
                unlink(p);
            free(p);
        }
        closedir(d);
    }
    rmdir(dir);
}

/* Whether name is a rank's log ("rank-NNNNNN.log"). */
static int is_log(const char *name)
{
    const size_t n = strlen(name);
    return strncmp(name, "rank-", 5) == 0 && n > 9 && strcmp(name + n - 4, ".log") == 0;
}

int hq_journal_in_use(const char *out)
{
    char *dir = hq_journal_dir(out);
    DIR *d = dir ? opendir(dir) : NULL;
    int busy = 0;
    for (struct dirent *e; d && !busy && (e = readdir(d)) != NULL;) {
        if (!is_log(e->d_name))
            continue;
        char *p = join(dir, e->d_name);
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
        remove_tree(dir);
    free(dir);
}

/* A journal write that failed, named by its file. A full disk reads as it does for the output's
 * own writes: the journal's few small files come after the output's reservation on the same disk,
 * and are often the first to meet it. */
static int write_failed(hq_err *err, const char *path, int e)
{
    if (e == ENOSPC || e == EDQUOT)
        return hq_fail(err, HQ_EIO, "%s: write failed: not enough disk space for the journal (%s)", path,
                       strerror(e));
    return hq_fail(err, HQ_EIO, "%s: cannot write the journal (%s)", path, strerror(e));
}

int hq_journal_create(const char *out, const char *id, hq_err *err)
{
    char *dir = hq_journal_dir(out);
    char *idp = dir ? join(dir, "id.tmp") : NULL;
    char *fin = dir ? join(dir, "id") : NULL;
    int rc = 0;
    if (!idp || !fin) {
        rc = hq_fail(err, HQ_EMEM, "%s: out of memory", out);
        goto done;
    }
    remove_tree(dir);
    if (mkdir(dir, 0777) != 0) {
        rc = write_failed(err, dir, errno);
        goto done;
    }
    int fd = open(idp, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    if (fd < 0 || hq_write_all(fd, id, strlen(id)) || fdatasync(fd) || close(fd) || rename(idp, fin)) {
        rc = write_failed(err, fin, errno);
        if (fd >= 0)
            close(fd);
        remove_tree(dir); /* half a journal resumes nothing */
    }
done:
    free(idp);
    free(fin);
    free(dir);
    return rc;
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
        j->path = dir ? join(dir, name) : NULL;
    free(dir);
    if (!j || !j->path) {
        if (j)
            free(j);
        return hq_fail(err, HQ_EMEM, "%s: out of memory", out);
    }
    j->fd = open(j->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
    int rc = j->fd < 0 ? write_failed(err, j->path, errno) : 0;
    /* Held until the process ends (a kill included): hq_journal_in_use. A filesystem without flock
     * only loses that check. */
    if (!rc && flock(j->fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK)
        rc = hq_fail(err, HQ_EUSAGE, "%s: in use by another run", j->path);
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
        return write_failed(err, j->path, errno);
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
    rec_head h = {REC_MAGIC, type, na + nb, rec_sum_of(a, na, b, nb)};
    pthread_mutex_lock(&j->lock);
    int rc = 0;
    if (!may_flush && na + nb >= DIRECT_RECORD && na <= 64) {
        unsigned char head[sizeof h + 64];
        memcpy(head, &h, sizeof h);
        memcpy(head + sizeof h, a, na);
        if (hq_write_all(j->fd, head, sizeof h + na) || (nb && hq_write_all(j->fd, b, nb)))
            rc = write_failed(err, j->path, errno);
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
