/* in_view.c — a block read without a copy: where the block's bytes lie in the input file exactly as
 * read_block would lay them out, the caller works on them in a read-only mapping of the file.
 *
 * Why: a pread copies every byte from the page cache into the block, and the CPU engine then reads
 * the block twice more (histogram, remap); with a view the copy is gone and the remap writes into
 * the block that is then written out (engine.h, hq_block_data.out). On a 2-core VM, 1 GiB raw, the
 * read copy was 8% of a run's CPU samples (perf).
 *
 * Contract:
 *  - hdf5_view_block (from the thread that calls read_block, as it may ask HDF5 for the chunk
 *    index): a pointer to the block's first byte in the mapping, its pages populated (the reading
 *    happens here, as in a pread, not in the engine's loops), or NULL where the block is not one run
 *    of unfiltered native-order bytes (hdf5_direct_span), its first byte is not aligned for its
 *    samples, the direct path is off for the item, the file cannot be mapped or the pages cannot be
 *    populated (the read then reports why). The input is mapped whole on the first call; a file
 *    is never opened for writing, and PROT_READ makes a stray store fault rather than change it.
 *  - hdf5_view_release (any thread): the view's whole pages leave this process's page tables
 *    (MADV_DONTNEED; the page cache keeps them), so a run's resident memory stays its buffers.
 *  - hdf5_view_unmap (close): the mapping removed. HQ_INPUT_VIEW=0 turns views off, =1 on
 *    without the measurement below.
 *  - Views pay where reaching a mapped page costs less than copying it. On most machines the first
 *    touch of a populated page is a TLB miss (tens of ns) and a pread of it a 4 KiB copy (hundreds);
 *    in a guest whose page tables the hypervisor shadows (PVM: the 2-core VM of
 *    bench/results/e2e_2core_raw_views.txt) each first touch traps to the hypervisor (microseconds),
 *    and a 1 GiB raw stack took 1.16 s in views against 0.70 s read. So the first view of at least
 *    CAL_MIN pages measures both on its own pages (views_pay) and the rank keeps whichever was
 *    cheaper for the rest of the run; -v says when reads won. Either way the bytes are the same.
 *  - A view read after another process cut the file short ends the process: one line naming the
 *    input, exit 4 (on_sigbus below). */
#define _GNU_SOURCE /* MADV_POPULATE_READ */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "hdf5_internal.h"
#include "../../core/doomed.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22 /* Linux 5.14; older kernels answer EINVAL */
#endif

/* A file cut short while mapped faults (SIGBUS) where the engine reads a page that is gone: the
 * pages are populated when a view is made, but another process can truncate the file after that.
 * Then the run ends as any input that turns bad does: one line naming the input, exit 4 (HQ_EINPUT),
 * this process's temporary files removed (core/doomed.h), not a core dump. One mapping a process
 * (the input's); a fault elsewhere goes to the handler that was there before. */
static const unsigned char *volatile fault_map;
static volatile uint64_t fault_len;
static char fault_line[sizeof(hq_err) + 16];
static struct sigaction fault_old;
static int fault_installed;

static void on_sigbus(int sig, siginfo_t *si, void *ctx)
{
    const unsigned char *a = si ? (const unsigned char *)si->si_addr : NULL, *m = fault_map;
    if (m && a >= m && a < m + fault_len) {
        static int entered;
        if (__atomic_exchange_n(&entered, 1, __ATOMIC_ACQ_REL)) /* the engine's other threads: one line */
            for (;;)
                pause();
        ssize_t w = write(STDERR_FILENO, fault_line, strlen(fault_line));
        (void)w;
        hq_doomed_unlink_all();
        _exit(HQ_EINPUT);
    }
    sigaction(sig, &fault_old, NULL); /* returning faults again, under the old action */
    (void)ctx;
}

static void watch_faults(hq_io *io)
{
    hq_err e; /* hq_fail makes the name printable */
    hq_fail(&e, HQ_EINPUT, "%s: the input changed while it was read (cut short by another process?)", io->inv.root);
    snprintf(fault_line, sizeof fault_line, "histeq_dist: %s\n", e.msg);
    fault_len = io->imap_len;
    fault_map = io->imap;
    if (!fault_installed) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_sigbus;
        sa.sa_flags = SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        fault_installed = sigaction(SIGBUS, &sa, &fault_old) == 0;
    }
}

static int map_input(hq_io *io)
{
    if (io->imap_tried)
        return io->imap != NULL;
    io->imap_tried = 1;
    const char *s = getenv("HQ_INPUT_VIEW");
    struct stat st;
    if ((s && strcmp(s, "0") == 0) || io->in_fd < 0 || fstat(io->in_fd, &st) != 0 || st.st_size <= 0)
        return 0;
    if (s && strcmp(s, "1") == 0)
        io->view_cal = 1;
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, io->in_fd, 0);
    if (m == MAP_FAILED)
        return 0;
    io->imap = m;
    io->imap_len = (uint64_t)st.st_size;
    watch_faults(io);
    return 1;
}

static uint64_t page_size(void)
{
    return (uint64_t)sysconf(_SC_PAGESIZE);
}

enum { CAL_MIN = 64, CAL_MAX = 1024 }; /* pages views_pay measures: enough to time, at most 4 MiB */

static double ns_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

/* pread of n bytes at off into buf, whole; 0 if not. */
static int pread_all(int fd, unsigned char *buf, uint64_t n, uint64_t off)
{
    uint64_t got = 0;
    while (got < n) {
        const ssize_t r = pread(fd, buf + got, n - got, (off_t)(off + got));
        if (r <= 0)
            return 0;
        got += (uint64_t)r;
    }
    return 1;
}

/* Whether views pay on this rank (contract above): the first touch of n pages of the populated
 * view p (file offset off) against a pread of the same pages into a buffer that earlier preads
 * have written, as the read path's reused block buffers are (the first pread into fresh pages
 * costs more in such a guest too: 6 us a page against 0.3 once the buffer is reused, measured
 * there). Measured once; a block under CAL_MIN pages is viewed without deciding. */
static int views_pay(hq_io *io, const unsigned char *p, uint64_t bytes, uint64_t off)
{
    if (io->view_cal)
        return io->view_cal > 0;
    const uint64_t page = page_size();
    uint64_t n = bytes / page;
    if (n < CAL_MIN)
        return 1;
    n = n < CAL_MAX ? n : CAL_MAX;
    unsigned char *buf = malloc(n * page);
    if (!buf)
        return 1;
    volatile unsigned char sink = 0;
    const double t0 = ns_now();
    for (uint64_t k = 0; k < n; k++)
        sink ^= p[k * page];
    const double t1 = ns_now();
    /* Two preads make the buffer what a reused block buffer is; the third is timed. */
    int ok = pread_all(io->in_fd, buf, n * page, off) && pread_all(io->in_fd, buf, n * page, off);
    const double t2 = ns_now();
    ok = ok && pread_all(io->in_fd, buf, n * page, off);
    const double t3 = ns_now();
    free(buf);
    (void)sink;
    if (!ok)
        return 1; /* the read path will say what is wrong */
    io->view_ns[0] = (t1 - t0) / (double)n;
    io->view_ns[1] = (t3 - t2) / (double)n;
    io->view_cal = io->view_ns[0] <= io->view_ns[1] ? 1 : -1;
    return io->view_cal > 0;
}

const void *hdf5_view_block(hq_io *io, uint64_t item, const hq_block *b)
{
    uint64_t off = 0, bytes = 0;
    if (io->view_cal < 0 || !b || !io->dir || !hdf5_direct_wanted(io, item, 0, 0) ||
        hdf5_direct_span(io, item, b, &off, &bytes) || !map_input(io))
        return NULL;
    if (off > io->imap_len || bytes > io->imap_len - off)
        return NULL; /* the file is shorter than HDF5 says: the library path reports it */
    /* HDF5 places raw data at any byte: a 16-bit or float image at an odd address would be read
     * through misaligned pointers by the engines (undefined behaviour in C, caught by UBSan). The
     * mapping starts on a page, so the offset decides. */
    if (off % io->inv.items[item].sample_bytes)
        return NULL;
    /* Populated here, or not used: a page that cannot be read (a disk error, a file cut short under
     * us) then fails this call, and the read path reports it, rather than faulting in the engine.
     * A kernel without MADV_POPULATE_READ (before 5.14) keeps the read path too. */
    const uint64_t page = page_size(), a = off / page * page;
    if (madvise((void *)(io->imap + a), off + bytes - a, MADV_POPULATE_READ) != 0)
        return NULL;
    if (!views_pay(io, io->imap + off, bytes, off)) {
        hdf5_view_release(io, io->imap + off, bytes);
        return NULL;
    }
    io->blocks[0]++;
    io->direct_blocks[0]++;
    io->viewed_blocks++;
    return io->imap + off;
}

void hdf5_view_release(hq_io *io, const void *p, uint64_t bytes)
{
    const uint64_t page = page_size(), off = (uint64_t)((const unsigned char *)p - io->imap);
    const uint64_t a = (off + page - 1) / page * page, e = (off + bytes) / page * page;
    if (e > a) /* only pages wholly the view's: a neighbour block may be using the edges */
        madvise((void *)(io->imap + a), e - a, MADV_DONTNEED);
}

void hdf5_view_unmap(hq_io *io)
{
    if (io->imap && fault_map == io->imap)
        fault_map = NULL;
    if (io->imap)
        munmap((void *)io->imap, io->imap_len);
    io->imap = NULL;
    io->imap_len = 0;
}
