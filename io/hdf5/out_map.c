/* out_map.c — the output's pixel region written through a shared mapping instead of pwrite.
 *
 * Why: on tmpfs (where archives are staged, and where `cp` is the floor a user compares with) every
 * pwrite into one file takes the file's lock: 16 workers pwriting 8 GiB took 5.7 s on an H200 host,
 * one writer at a time 2.2 s, while 16 threads copying into a shared mapping of pages that
 * fallocate had made took 0.39 s (bench/thread_write_paths.c, bench/results/write_paths_threads.txt).
 * Populating the pages through the mapping instead of fallocate was slower (1.6 s against 0.8 s:
 * the file's page index is one lock), so the reservation stays fallocate (reserve.c, in the
 * background where the ranks can: reserve_bg.c), and only the stores move to the mapping.
 *
 * Contract:
 *  - hdf5_out_map (collective, after hdf5_reserve_space and hdf5_direct_note_output) maps [0, E) of
 *    OUT.part on every rank, E the end of every direct unfiltered output dataset's storage (all
 *    allocated at creation, so E <= HDF5's end of allocated space, and growing the file to E hides
 *    nothing from HDF5). It is on only where every rank mapped and the space is reserved with
 *    fallocate (a store into a page the filesystem cannot allocate would raise SIGBUS): every byte
 *    written through it lies in [0, io->reserved), or waits for the background reservation to
 *    cover it (direct_io.c). It never fails: where anything is missing, pwrite stays.
 *  - When: HQ_RESERVE=map forces it on any filesystem that can fallocate (tests); otherwise on
 *    tmpfs where every rank has 4 cores or more (map_wanted says why), unless HQ_RESERVE=sync (the
 *    old path, for comparisons) or HQ_HDF5_DIRECT=0.
 *  - hdf5_out_put writes n bytes at `off`, from any thread: into the mapping when [off, off + n)
 *    lies inside it, else with pwrite, one pwrite at a time (the file's lock would serialize them
 *    anyway; waiting on a mutex sleeps where waiting on the lock spins). The whole pages of a
 *    mapped range are then unmapped again (MADV_DONTNEED keeps a shared mapping's data, dirty, in
 *    the page cache): the teardown that munmap would do on one thread at close (0.4 s for 8 GiB)
 *    is done by the workers as they go.
 *    HDF5 keeps writing metadata with its own descriptor: the page cache is one.
 *  - hdf5_out_unmap (any rank, at close or on failure) removes the mapping. Durability is
 *    unchanged: fdatasync of OUT.part writes back pages dirtied through the mapping too. */
#define _GNU_SOURCE /* MADV_DONTNEED, fstatfs */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "hdf5_internal.h"
#include "../../core/fdio.h"

#define TMPFS_MAGIC_NUMBER 0x01021994

enum { MAP_NO = 0, MAP_AUTO, MAP_FORCED };
#define MAP_MIN_CORES 4 /* a rank's share of the cores before stores go through the mapping */

/* By default only where the rank has cores to spare: a store into a page fallocate made zeroes the
 * page first (fallocate leaves that to the first touch), a pwrite of the whole page does not. With
 * 16 workers the lock pwrite takes costs far more than that (1.18 s against 6.47 s for 8 GiB); on 2
 * cores the zeroing is what shows: 1 GiB raw, write phase 0.23-0.46 s with pwrite against 0.50-0.86 s
 * through the mapping, build VM, 2026-11-26. The ranks agree, since what follows is collective. */
static int map_wanted(const hq_io *io)
{
    int want = MAP_NO;
    const char *mode = getenv("HQ_RESERVE");
    if (!io->direct || (mode && strcmp(mode, "sync") == 0))
        want = MAP_NO;
    else if (mode && strcmp(mode, "map") == 0)
        want = MAP_FORCED;
    else
        want = hdf5_spare_cores(io, MAP_MIN_CORES) ? MAP_AUTO : MAP_NO;
    int all = want;
    MPI_Allreduce(&want, &all, 1, MPI_INT, MPI_MIN, io->comm);
    return all;
}

uint64_t hdf5_direct_data_end(hq_io *io)
{
    uint64_t end = 0;
    for (size_t i = 0; io->dir && i < io->inv.n; i++) {
        const hdf5_side *s = &io->dir[i].out;
        uint64_t e = 0;
        if (s->kind == DIRECT_CONTIG)
            e = s->addr + io->out_storage[i];
        else if (s->kind == DIRECT_CHUNKED && s->chunk_addr)
            e = s->chunk_end;
        end = e > end ? e : end;
    }
    H5Eclear2(H5E_DEFAULT);
    return end;
}

/* Every rank maps through the descriptor the direct path writes with. */
static int map_local(hq_io *io, uint64_t end)
{
    /* Rank 0 grew the file: pages past its end cannot be stored to. */
    void *m = io->out_fd < 0 ? MAP_FAILED : mmap(NULL, end, PROT_READ | PROT_WRITE, MAP_SHARED, io->out_fd, 0);
    if (m == MAP_FAILED)
        return -1;
    io->omap = m;
    io->omap_len = end;
    return 0;
}

void hdf5_out_map(hq_io *io)
{
    const int want = map_wanted(io);
    if (want == MAP_NO)
        return;
    const uint64_t end = hdf5_direct_data_end(io); /* the same on every rank: the same HDF5 answers */
    if (end == 0)
        return;
    int ok = 1;
    const char *why = NULL; /* rank 0: why not, for -v */
    if (io->rank == 0) {
        struct statfs fs;
        struct stat sb;
        const int fd = io->out_fd;
        if (fd < 0 || io->no_fallocate)
            why = fd < 0 ? "no descriptor" : "the filesystem cannot reserve";
        else if (hdf5_reserve_target(io) < end)
            why = "the reservation ends before the data";
        else if (fstatfs(fd, &fs) != 0 || fstat(fd, &sb) != 0)
            why = "fstat failed";
        else if (want != MAP_FORCED && fs.f_type != TMPFS_MAGIC_NUMBER)
            why = NULL, ok = 0; /* not tmpfs: pwrite, as intended */
        else if ((uint64_t)sb.st_size < end && ftruncate(fd, (off_t)end) != 0)
            why = "the file cannot grow";
        ok = ok && !why;
    }
    MPI_Bcast(&ok, 1, MPI_INT, 0, io->comm);
    if (ok && map_local(io, end) != 0)
        ok = 0, why = "mmap failed";
    int all = ok;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, io->comm);
    if (!all) {
        if (io->verbose && why)
            fprintf(stderr, "histeq_dist: note: %s: rank %d: pixels written with pwrite, not through a mapping: %s\n",
                    io->out_path, io->rank, why);
        hdf5_out_unmap(io);
        return;
    }
    if (io->verbose && io->rank == 0)
        fprintf(stderr, "histeq_dist: note: %s: pixels written through a shared mapping (%llu bytes, %d rank%s)\n",
                io->out_path, (unsigned long long)end, io->nranks, io->nranks == 1 ? "" : "s");
}

int hdf5_out_put(hq_io *io, const void *p, uint64_t n, uint64_t off)
{
    if (io->omap && off <= io->omap_len && n <= io->omap_len - off) {
        memcpy(io->omap + off, p, n);
        const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
        const uint64_t a = (off + page - 1) / page * page, b = (off + n) / page * page;
        if (b > a) /* only pages wholly ours: a neighbour block may be storing into the edges */
            madvise(io->omap + a, b - a, MADV_DONTNEED);
        return 0;
    }
    pthread_mutex_lock(&io->put_lock);
    const int rc = hq_pwrite_full(io->out_fd, p, n, off);
    pthread_mutex_unlock(&io->put_lock);
    return rc;
}

void hdf5_out_unmap(hq_io *io)
{
    if (io->omap)
        munmap(io->omap, io->omap_len);
    io->omap = NULL;
    io->omap_len = 0;
}
