/* out_map.c — the output's pixel region written through a shared mapping instead of pwrite.
 *
 * Why: on tmpfs (where archives are staged, and where `cp` is the floor a user compares with) every
 * pwrite into one file takes the file's lock, so the direct path's workers wrote one at a time
 * (16 threads: 2.7-4.0 s for 8 GiB, most of it spinning in the kernel), and fallocate zeroes the
 * whole reservation on one thread under the same lock (1.4-1.9 s). A shared mapping takes no file
 * lock: each rank's threads allocate their part of the pages side by side (MADV_POPULATE_WRITE,
 * which is the reservation: a full filesystem fails it with an error instead of a SIGBUS later),
 * and writes become memcpy into pages that already exist.
 *
 * Contract:
 *  - hdf5_out_map (collective, once the output's direct sides are known: hdf5_direct_note_output)
 *    maps [0, E) of OUT.part on every rank, E the end of every direct unfiltered output dataset's
 *    storage (all allocated at creation, so E <= HDF5's end of allocated space and growing the
 *    file to E hides nothing from HDF5). Each rank populates its 1/nranks of the pages with the
 *    backend's workers; then every rank agrees. A population that fails for lack of space is
 *    HQ_EIO "not enough disk space" on every rank, like a failed fallocate; anything else that
 *    fails (no MADV_POPULATE_WRITE in this kernel, no mapping) leaves the mapping off on every rank
 *    and the reservation to reserve.c, as before. On success rank 0's io->reserved covers [0, E).
 *  - When: HQ_RESERVE=map, or by default when OUT.part is on tmpfs and HQ_RESERVE is not
 *    background or sync (the tests pin those) and HQ_HDF5_DIRECT is not 0. Elsewhere the file
 *    system reserves blocks cheaply (unwritten extents) and pwrite is left alone.
 *  - hdf5_out_put writes n bytes at `off`: into the mapping when [off, off + n) lies inside it,
 *    else with pwrite. Any thread. Data written either way reads the same through HDF5, which
 *    keeps writing metadata with its own descriptor: the page cache is one.
 *  - hdf5_out_unmap (any rank, at close or on failure) removes the mapping. Durability is
 *    unchanged: fdatasync of OUT.part writes back pages dirtied through the mapping too. */
#define _GNU_SOURCE /* MADV_POPULATE_WRITE, O_CLOEXEC */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "hdf5_internal.h"
#include "../../core/fdio.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; older headers lack it, an older kernel says EINVAL */
#endif
#define TMPFS_MAGIC_NUMBER 0x01021994
/* One worker's piece of the population: small enough that every worker gets several, large
 * enough that the calls cost nothing. */
#define POPULATE_PIECE (64 * MiB)

enum { MAP_NO = 0, MAP_AUTO, MAP_FORCED };

static int map_wanted(const hq_io *io)
{
    if (!io->direct)
        return MAP_NO;
    const char *mode = getenv("HQ_RESERVE");
    if (mode && strcmp(mode, "map") == 0)
        return MAP_FORCED;
    if (mode && (strcmp(mode, "background") == 0 || strcmp(mode, "sync") == 0))
        return MAP_NO;
    return MAP_AUTO;
}

/* The end of the storage of every output dataset the direct path writes unfiltered. */
static uint64_t direct_data_end(hq_io *io)
{
    uint64_t end = 0;
    for (size_t i = 0; io->dir && i < io->inv.n; i++) {
        const hdf5_side *s = &io->dir[i].out;
        if (s->kind == DIRECT_CONTIG) {
            const uint64_t e = s->addr + H5Dget_storage_size(io->out_dset[i]);
            end = e > end ? e : end;
        } else if (s->kind == DIRECT_CHUNKED && s->chunk_addr) {
            uint64_t dims[MAX_RANK], n = 1, chunk_bytes = io->inv.items[i].sample_bytes;
            const int k = hdf5_item_dims(io, i, dims);
            for (int j = 0; j < k; j++) {
                n *= (dims[j] + io->in_chunk[i][j] - 1) / io->in_chunk[i][j];
                chunk_bytes *= io->in_chunk[i][j];
            }
            for (uint64_t c = 0; c < n; c++)
                if (s->chunk_addr[c] + chunk_bytes > end)
                    end = s->chunk_addr[c] + chunk_bytes;
        }
    }
    H5Eclear2(H5E_DEFAULT);
    return end;
}

typedef struct populate_job {
    unsigned char *base;
    uint64_t from, to; /* this rank's pages, byte offsets in the mapping */
    int err;           /* the first errno (written under the pool's one-error rule) */
} populate_job;

static int populate_piece(void *ctx, uint64_t i, int worker)
{
    (void)worker;
    populate_job *j = ctx;
    const uint64_t a = j->from + i * POPULATE_PIECE;
    const uint64_t b = j->to - a < POPULATE_PIECE ? j->to : a + POPULATE_PIECE;
    while (madvise(j->base + a, b - a, MADV_POPULATE_WRITE) != 0) {
        if (errno == EINTR)
            continue;
        j->err = errno;
        return -1;
    }
    return 0;
}

/* The kinds of failure every rank must agree on, worst last. */
enum { MAP_OK = 0, MAP_OFF = 1, MAP_FULL = 2 };

static int map_local(hq_io *io, uint64_t end)
{
    const long page = sysconf(_SC_PAGESIZE);
    io->omap_fd = open(io->part_path, O_RDWR | O_CLOEXEC);
    if (io->omap_fd < 0)
        return MAP_OFF;
    /* Rank 0 grew the file (below); pages past the end of the file cannot be mapped. */
    void *m = mmap(NULL, end, PROT_READ | PROT_WRITE, MAP_SHARED, io->omap_fd, 0);
    if (m == MAP_FAILED)
        return MAP_OFF;
    io->omap = m;
    io->omap_len = end;
    /* This rank's share, in whole pages: the ranks' shares tile [0, end). */
    const uint64_t pages = (end + (uint64_t)page - 1) / (uint64_t)page;
    populate_job j = {.base = m,
                      .from = pages * (uint64_t)io->rank / (uint64_t)io->nranks * (uint64_t)page,
                      .to = pages * ((uint64_t)io->rank + 1) / (uint64_t)io->nranks * (uint64_t)page};
    if (j.to > end)
        j.to = end;
    if (j.to <= j.from)
        return MAP_OK;
    const uint64_t n = (j.to - j.from + POPULATE_PIECE - 1) / POPULATE_PIECE;
    if (hdf5_pool_run(io->pool, n, populate_piece, NULL, &j, n) == 0)
        return MAP_OK;
    /* SIGBUS is what a write into a page the filesystem could not allocate would have raised:
     * the disk (or tmpfs) is full. EINVAL: this kernel cannot populate; ENOMEM: no memory to. */
    return j.err == EFAULT || j.err == ENOSPC ? MAP_FULL : MAP_OFF;
}

int hdf5_out_map(hq_io *io, hq_err *err)
{
    const int want = map_wanted(io);
    if (want == MAP_NO)
        return 0;
    const uint64_t end = direct_data_end(io); /* the same on every rank: the same HDF5 answers */
    if (end == 0)
        return 0;
    int st = MAP_OK;
    if (io->rank == 0) {
        struct statfs fs;
        struct stat sb;
        int fd = open(io->part_path, O_WRONLY | O_CLOEXEC);
        if (fd < 0 || fstatfs(fd, &fs) != 0 || fstat(fd, &sb) != 0 ||
            (want == MAP_AUTO && fs.f_type != TMPFS_MAGIC_NUMBER))
            st = MAP_OFF;
        else if ((uint64_t)sb.st_size < end && ftruncate(fd, (off_t)end) != 0)
            st = MAP_OFF;
        if (fd >= 0)
            close(fd);
    }
    MPI_Bcast(&st, 1, MPI_INT, 0, io->comm);
    if (st == MAP_OK)
        st = map_local(io, end);
    int worst = st;
    MPI_Allreduce(&st, &worst, 1, MPI_INT, MPI_MAX, io->comm);
    if (worst == MAP_OK) {
        if (io->rank == 0 && io->reserved < end)
            io->reserved = end;
        if (io->verbose && io->rank == 0)
            fprintf(stderr, "histeq_dist: note: %s: pixels written through a shared mapping (%llu bytes populated by %d rank%s)\n",
                    io->out_path, (unsigned long long)end, io->nranks, io->nranks == 1 ? "" : "s");
        return 0;
    }
    hdf5_out_unmap(io);
    if (worst == MAP_OFF)
        return 0;
    /* One message on every rank, whichever rank saw the error (a population that would have raised
     * SIGBUS says EFAULT: for a filesystem that is ENOSPC). */
    return hq_fail(err, HQ_EIO, "%s: not enough disk space for the output (%llu bytes: %s)", io->out_path,
                   (unsigned long long)end, strerror(ENOSPC));
}

int hdf5_out_put(hq_io *io, const void *p, uint64_t n, uint64_t off)
{
    if (io->omap && off <= io->omap_len && n <= io->omap_len - off) {
        memcpy(io->omap + off, p, n);
        return 0;
    }
    return hq_pwrite_full(io->out_fd, p, n, off);
}

void hdf5_out_unmap(hq_io *io)
{
    if (io->omap)
        munmap(io->omap, io->omap_len);
    io->omap = NULL;
    io->omap_len = 0;
    if (io->omap_fd >= 0)
        close(io->omap_fd);
    io->omap_fd = -1;
}
