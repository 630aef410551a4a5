/* write.c — an item encoded under its temporary name and renamed into place; the run closed (a
 * directory's completion record written last) or undone (this run's files removed; a completion
 * record that cannot be written undoes the run too); the state a --resume finds. */
#include <errno.h>
#include <fcntl.h>
#include <png.h> /* PNG_COLOR_TYPE_*: a palette image written as RGB(A) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h> /* crc32 */

#include "../../core/doomed.h"
#include "png_internal.h"

/* Encodes into tmp and closes it; on failure tmp is removed. *slot: tmp's in core/doomed.h while
 * it exists (-1: none), for the caller to drop once tmp is renamed or removed. */
static int write_temp(const char *tmp, const char *shown, const hq_png_info *info, const void *pixels,
                      const uint8_t *indices, const hq_png_zopts *z, int *slot, hq_err *err)
{
    /* Registered before it exists, so that no moment of its life escapes a signal (the name has
     * this process's id: whatever file has it is this process's). */
    *slot = hq_doomed_add(tmp);
    FILE *fp = fopen(tmp, "wb");
    if (!fp) {
        const int e = errno;
        hq_doomed_drop(*slot);
        *slot = -1;
        return hq_fail(err, HQ_EIO, "%s: cannot write (%s)", shown, strerror(e));
    }
    setvbuf(fp, NULL, _IOFBF, STDIO_BUF_BYTES);
    hq_png_sink s = {.name = shown, .fp = fp};
    int rc = hq_png_encode(&s, info, pixels, indices, z, err);
    if (!rc && fflush(fp) != 0)
        rc = hq_fail(err, HQ_EIO, "%s: cannot write (%s)", shown, strerror(errno));
    if (fclose(fp) != 0 && !rc)
        rc = hq_fail(err, HQ_EIO, "%s: cannot write (%s)", shown, strerror(errno));
    if (rc) {
        unlink(tmp);
        hq_doomed_drop(*slot);
        *slot = -1;
    }
    return rc;
}

int png_write_block(hq_io *io, uint64_t item, const hq_block *b, int collective, const void *src, hq_err *err)
{
    (void)collective;
    if (!b)
        return 0;
    const hq_item *it = NULL;
    int rc = png_usable_item(io, item, b, &it, err);
    if (rc)
        return rc;
    if (!io->have_output || !src)
        return hq_fail(err, HQ_EIO, "%s: %s", it->src, src ? "no output was created" : "no pixels to write");
    char *final = io->out_is_dir ? png_join_path(io->out_path, it->name) : strdup(io->out_path);
    char *tmp = final ? png_temp_path(final) : NULL;
    if (!tmp) {
        free(final);
        return hq_fail(err, HQ_EMEM, "%s: out of memory", io->out_path);
    }
    hq_png_info info;
    uint8_t *indices = NULL;
    rc = png_item_for_write(io, item, it, &info, &indices, err);
    if (!rc && indices && io->per_pixel) {
        /* One palette entry per index cannot hold what a per-pixel remap made of it: 8-bit RGB(A),
         * the decoded samples as they are (tRNS alpha became the fourth channel). */
        free(indices);
        indices = NULL;
        info.color_type = info.channels == 4 ? PNG_COLOR_TYPE_RGB_ALPHA : PNG_COLOR_TYPE_RGB;
        info.bit_depth = 8;
        info.npalette = 0;
        info.ntrans = 0;
    }
    if (!rc && indices)
        hq_png_repalette(&info, indices, src);
    int slot = -1;
    if (!rc)
        rc = write_temp(tmp, final, &info, src, indices, &io->zopts, &slot, err);
    free(indices);
    if (!rc && io->out_is_dir && rename(tmp, final) != 0) {
        rc = hq_fail(err, HQ_EIO, "%s: cannot write (%s)", final, strerror(errno));
        unlink(tmp);
    }
    if (io->out_is_dir)
        hq_doomed_drop(slot);
    if (!rc && io->out_is_dir) {
        /* Remembered so that a run that fails later takes it back: a directory holding some of
         * its outputs must not pass for a finished one. */
        pthread_mutex_lock(&io->mu);
        if (io->nwritten == io->cap_written) {
            size_t cap = io->cap_written ? io->cap_written * 2 : 64;
            char **w = realloc(io->written, cap * sizeof *w);
            if (!w) {
                pthread_mutex_unlock(&io->mu);
                unlink(final);
                free(tmp);
                free(final);
                return hq_fail(err, HQ_EMEM, "%s: out of memory", io->out_path);
            }
            io->written = w;
            io->cap_written = cap;
        }
        io->written[io->nwritten++] = final;
        pthread_mutex_unlock(&io->mu);
        final = NULL;
    }
    if (!rc && !io->out_is_dir) {
        pthread_mutex_lock(&io->mu);
        free(io->pending.tmp);
        free(io->pending.final);
        hq_doomed_drop(io->pending.slot);
        io->pending.tmp = tmp;
        io->pending.final = final;
        io->pending.slot = slot;
        pthread_mutex_unlock(&io->mu);
        return 0;
    }
    free(tmp);
    free(final);
    return rc;
}

/* Rank 0, once every rank has renamed its files: the directory's completion record, its first
 * line for people, then the run's identity (hq_run_meta.run_id) for --resume. It takes space like
 * any other write, so it can fail for a full disk; its temporary is removed then. */
static int mark_dir_complete(const char *dir, uint64_t nimages, const char *run_id, hq_err *err)
{
    char *mark = png_join_path(dir, COMPLETE_NAME);
    char *tmp = mark ? png_temp_path(mark) : NULL;
    int rc = 0;
    FILE *f = tmp ? fopen(tmp, "w") : NULL;
    if (!tmp) {
        rc = hq_fail(err, HQ_EMEM, "%s: out of memory", dir);
    } else if (!f) {
        rc = hq_fail(err, HQ_EIO, "%s: cannot write (%s)", mark, strerror(errno));
    } else {
        /* The text is buffered: a full disk usually shows at fclose, which must run either way. */
        int e = 0;
        if (fprintf(f, "histeq_dist %s: complete, %llu input files\n%s", HQ_VERSION, (unsigned long long)nimages,
                    run_id ? run_id : "") < 0)
            e = errno ? errno : EIO;
        if (fclose(f) != 0 && !e)
            e = errno ? errno : EIO;
        if (!e && rename(tmp, mark) != 0)
            e = errno;
        if (e) {
            rc = hq_fail(err, HQ_EIO, "%s: cannot write (%s)", mark, strerror(e));
            unlink(tmp);
        }
    }
    free(tmp);
    free(mark);
    return rc;
}

/* A single PNG's record of the run that made it (what a directory's completion record holds): an
 * iTXt chunk (the identity names the input's path, UTF-8) keyed RUN_KEY, put before the IEND chunk
 * that ends every PNG written here, when the run commits. png_output_state reads it back. */
#define RUN_KEY "histeq_dist run"
static const unsigned char IEND[12] = {0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xAE, 0x42, 0x60, 0x82};

static int record_run(const char *tmp, const char *shown, const char *run_id, hq_err *err)
{
    /* keyword, NUL, compression flag 0 and method 0, empty language tag and translated keyword */
    const size_t head = sizeof RUN_KEY + 4, n = head + strlen(run_id);
    unsigned char *c = malloc(8 + n + 4 + sizeof IEND);
    if (!c)
        return hq_fail(err, HQ_EMEM, "%s: out of memory", shown);
    hq_png_put_be32(c, (uint32_t)n);
    memcpy(c + 4, "iTXt", 4);
    memset(c + 8, 0, head);
    memcpy(c + 8, RUN_KEY, sizeof RUN_KEY - 1);
    memcpy(c + 8 + head, run_id, n - head);
    hq_png_put_be32(c + 8 + n, (uint32_t)crc32(crc32(0, Z_NULL, 0), c + 4, (uInt)(4 + n)));
    memcpy(c + 8 + n + 4, IEND, sizeof IEND);
    const size_t len = 8 + n + 4 + sizeof IEND;
    unsigned char tail[sizeof IEND];
    struct stat st;
    int e = 0;
    const int fd = open(tmp, O_RDWR | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) != 0)
        e = errno;
    else if (st.st_size < (off_t)sizeof IEND || pread(fd, tail, sizeof tail, st.st_size - (off_t)sizeof tail) != (ssize_t)sizeof tail ||
             memcmp(tail, IEND, sizeof IEND) != 0)
        e = EIO; /* not as written: never append to it */
    else if (pwrite(fd, c, len, st.st_size - (off_t)sizeof IEND) != (ssize_t)len)
        e = errno ? errno : ENOSPC;
    if (fd >= 0 && close(fd) != 0 && !e)
        e = errno;
    free(c);
    return e ? hq_fail(err, HQ_EIO, "%s: cannot write (%s)", shown, strerror(e)) : 0;
}

/* What record_run put in out, malloc'd; NULL when out is not a PNG that ends with it. */
static char *recorded_in_png(const char *out)
{
    struct stat st;
    /* O_NONBLOCK: a FIFO at OUT (refused later, at create) must not hold the run here. */
    const int fd = open(out, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    char *id = NULL;
    if (fd < 0)
        return NULL;
    /* The chunk holds at most an id (HQ_JOURNAL_ID_MAX, jobs/journal.h): read that much of the end. */
    const size_t want = 16384 + 64;
    unsigned char *b = malloc(want);
    const off_t size = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? st.st_size : 0;
    const size_t n = size < (off_t)want ? (size_t)size : want;
    const size_t key = sizeof RUN_KEY + 4;
    if (b && n >= 12 + key + 4 + sizeof IEND && pread(fd, b, n, size - (off_t)n) == (ssize_t)n &&
        !memcmp(b + n - sizeof IEND, IEND, sizeof IEND)) {
        /* The chunk's data ends where its CRC, just before IEND, begins; its length is found by
         * trying each start whose length field says it reaches there. */
        const size_t end = n - sizeof IEND - 4;
        for (size_t len = key; len + 8 <= end && !id; len++) {
            const unsigned char *h = b + end - len - 8, *crc = b + end;
            if (hq_png_be32(h) != len || memcmp(h + 4, "iTXt", 4) || memcmp(h + 8, RUN_KEY "\0\0\0\0\0", key))
                continue;
            if (hq_png_be32(crc) == (uint32_t)crc32(crc32(0, Z_NULL, 0), h + 4, (uInt)(4 + len)) && (id = malloc(len - key + 1))) {
                memcpy(id, h + 8 + key, len - key);
                id[len - key] = '\0';
            }
        }
    }
    free(b);
    close(fd);
    return id;
}

int png_close(hq_io *io, int commit, const hq_run_meta *meta, hq_err *err)
{
    if (!io)
        return 0;
    int rc = 0;
    if (io->pending.tmp) {
        if (commit && meta && meta->run_id && (rc = record_run(io->pending.tmp, io->pending.final, meta->run_id, err)))
            commit = 0;
        if (commit && rename(io->pending.tmp, io->pending.final) != 0) {
            rc = hq_fail(err, HQ_EIO, "%s: cannot write (%s)", io->pending.final, strerror(errno));
            commit = 0;
        }
        if (!commit)
            unlink(io->pending.tmp);
        hq_doomed_drop(io->pending.slot);
    }
    /* A directory is finished only once its mark is there, and the mark can fail like any write (a
     * full disk). So every rank keeps the list of its files until rank 0 has written the mark, and
     * a mark that fails takes them back as a failure mid-run does: a directory of unmarked PNGs
     * would be neither finished nor resumable (the journal goes with a failed run). */
    if (io->have_output && io->out_is_dir && commit) {
        MPI_Barrier(io->comm); /* every rank has renamed its files */
        if (io->rank == 0)
            rc = mark_dir_complete(io->out_path, io->inv->n, meta ? meta->run_id : NULL, err);
        int failed = rc != 0;
        MPI_Bcast(&failed, 1, MPI_INT, 0, io->comm);
        commit = !failed;
    }
    for (size_t i = 0; i < io->nwritten; i++) {
        if (!commit)
            unlink(io->written[i]);
        free(io->written[i]);
    }
    free(io->written);
    /* A failed run leaves no new directory behind: once every rank has taken back its files, the
     * directory this run created is empty again (rmdir refuses one that is not). A resumed run's
     * directory keeps the interrupted run's files, and app/run/close.c keeps their journal. */
    if (io->have_output)
        MPI_Barrier(io->comm);
    if (!commit && io->rank == 0 && io->created_dir)
        rmdir(io->out_path);
    free(io->pending.tmp);
    free(io->pending.final);
    png_drop_held(io);
    free(io->held);
    pthread_mutex_destroy(&io->mu);
    free(io->out_path);
    free(io);
    return rc;
}

/* Each file is renamed into place whole, so there is nothing to flush. */
int png_flush(hq_io *io, int collective, hq_err *err)
{
    (void)io, (void)collective, (void)err;
    return 0;
}

/* The completion record's text after its first line (mark_dir_complete), malloc'd; NULL when
 * there is none (an older version's record) or it cannot be read. */
static char *recorded_run_id(const char *mark)
{
    FILE *f = fopen(mark, "rb");
    if (!f)
        return NULL;
    char buf[8192];
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *nl = strchr(buf, '\n');
    return nl && nl[1] ? strdup(nl + 1) : NULL;
}

/* A directory output is unfinished until its completion record is there. A single PNG is written
 * whole at the end, so there is nothing to resume: finished when it records the run that made it
 * (record_run), and 2, no journal. */
int png_output_state(const hq_inventory *inv, const char *out, int *partial, int *finished, char **run_id)
{
    *partial = *finished = 0;
    *run_id = NULL;
    if (!inv->root_is_dir) {
        *run_id = recorded_in_png(out);
        *finished = *run_id != NULL;
        return 2;
    }
    struct stat st;
    char *mark = png_join_path(out, COMPLETE_NAME);
    *finished = mark && stat(mark, &st) == 0;
    *partial = !*finished && stat(out, &st) == 0;
    if (*finished)
        *run_id = recorded_run_id(mark);
    free(mark);
    return 1;
}

int png_item_present(const hq_inventory *inv, const char *out, uint64_t item)
{
    if (!inv->root_is_dir || item >= inv->n)
        return 1;
    char *p = png_join_path(out, inv->items[item].name);
    /* Present means whole: a file cut short since (a full disk, a user's truncate) ends without
     * the IEND chunk every PNG written here ends with, and is made again. */
    unsigned char tail[sizeof IEND];
    struct stat st;
    const int fd = p ? open(p, O_RDONLY | O_CLOEXEC) : -1;
    const int yes = fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= 57 &&
                    pread(fd, tail, sizeof tail, st.st_size - (off_t)sizeof tail) == (ssize_t)sizeof tail &&
                    !memcmp(tail, IEND, sizeof tail);
    if (fd >= 0)
        close(fd);
    free(p);
    return yes;
}

const char *png_sync_path(const hq_io *io)
{
    (void)io;
    return NULL;
}
