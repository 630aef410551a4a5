/* reserve_bg.c — the output's disk space reserved in the background, by every rank at once.
 *
 * Why: on tmpfs fallocate zeroes every page under the file's lock (8 GiB: 0.8-1.9 s). Done at create
 * it is time no one overlaps; done by rank 0 alone for P ranks it grows with P (16 GiB for two
 * ranks: 6.4 s of a 11 s run, bench/results/scaling_x2.txt). So each rank reserves one slice of
 * [from, end) on a thread of its own while pass 1 reads and computes, and every write waits only
 * for the slices its bytes fall in.
 *
 * Contract:
 *  - hdf5_bg_reserve_start (collective, at create, after rank 0 checked that the free space holds
 *    all of it): on when every rank has the cores for a thread (BG_MIN_CORES, or HQ_RESERVE=
 *    background) and, with several ranks, all of them share one node (the progress of each slice
 *    is published in a small shared-memory segment that every rank maps; MPI is never called from
 *    the threads). Returns 0 on, -1 off on every rank (rank 0 then reserves synchronously).
 *  - hdf5_reserve_wait(lo, hi): returns once every slice that [lo, hi) touches is reserved that
 *    far (hi = UINT64_MAX: all of it). If a slice met a full disk, or its rank stopped before the
 *    end, the wait fails: the caller writes nothing (err, when given, says so in one line). The
 *    direct path's pwrites of pixels wait for their exact extent; its stores through the mapping
 *    (direct_io.c says why) and anything else for all of it.
 *  - hdf5_reserve_stop ends this rank's thread wherever it is (at close, after all ranks waited
 *    for everything; on failure, at any time). On rank 0 io->reserved becomes the prefix of the
 *    file that is known reserved (what hdf5_release_reserve later trims past the end).
 *  - hdf5_reserve_target: rank 0, the end that is or will be reserved. */
#define _GNU_SOURCE /* fallocate, sched_getaffinity */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "hdf5_internal.h"

/* One fallocate: small enough that a write waits little behind it (and the file's lock is given
 * up between pieces, so the ranks' slices advance side by side), large enough to cost few calls. */
#define RESERVE_PIECE (32 * MiB)
#define SLICE_ALIGN (2 * MiB)
/* The cores a rank needs before the reservation gets a thread of its own. With one core the thread
 * only takes time from the workers; from two on it moves the reservation off the critical path:
 * 1 GiB raw, 1 rank on a 2-core VM, 1.29-1.39 s against 1.80-1.82 s reserving at create (pwrite
 * path, build VM, 2026-11-26; cp 0.87-0.90 s). */
#define BG_MIN_CORES 2

/* One rank's progress, on a cache line of its own: written by that rank only (its thread, and
 * before it starts, the rank), read by every rank. */
typedef struct slot {
    uint64_t done;     /* its slice is reserved up to here: [slice_lo, done) */
    int32_t err;       /* errno of a full disk; 0 */
    int32_t finished;  /* the thread returned (done == slice_hi, err, or stopped) */
    int32_t unsupported; /* the filesystem cannot fallocate: nothing reserved, nothing refused */
    char pad[64 - sizeof(uint64_t) - 3 * sizeof(int32_t)];
} slot;

struct hdf5_bg_reserve {
    pthread_t tid;
    int fd;
    int stop;       /* asked to stop (atomic) */
    /* This rank's pwrites of the output (io->put_lock). Both take the file's lock in the kernel,
     * where a pwrite arriving during a fallocate spins for as long as that runs: on 2 cores 7% of
     * a run's CPU went to that spin (1 GiB raw, 1 rank). Under one mutex the waiter sleeps. */
    pthread_mutex_t *lock;
    int nslots, rank;
    slot *s;        /* nslots slots: shared memory with several ranks, else our own */
    size_t map_len; /* 0: s is malloc'd */
    uint64_t from, end; /* all slices together: [from, end) */
};

/* Where rank r's slice starts (r = nslots: the end). Slices of about equal size, on 2 MiB
 * boundaries; rank 0's starts where the file is reserved already. Every rank derives every
 * slice alike from the same span. */
static uint64_t slice_lo(const struct hdf5_bg_reserve *g, int r)
{
    if (r == 0)
        return g->from;
    if (r >= g->nslots)
        return g->end;
    uint64_t lo = g->from + (g->end - g->from) / (uint64_t)g->nslots * (uint64_t)r;
    lo -= lo % SLICE_ALIGN;
    return lo < g->from ? g->from : lo;
}

static void *bg_main(void *arg)
{
    struct hdf5_bg_reserve *g = arg;
    slot *m = &g->s[g->rank];
    const uint64_t hi = slice_lo(g, g->rank + 1);
    uint64_t at = slice_lo(g, g->rank);
    while (at < hi && !__atomic_load_n(&g->stop, __ATOMIC_ACQUIRE)) {
        const uint64_t to = hi - at > RESERVE_PIECE ? at + RESERVE_PIECE : hi;
        pthread_mutex_lock(g->lock);
        const int e = fallocate(g->fd, FALLOC_FL_KEEP_SIZE, (off_t)at, (off_t)(to - at)) == 0 ? 0 : errno;
        pthread_mutex_unlock(g->lock);
        if (e == EINTR)
            continue;
        if (e == ENOSPC || e == EDQUOT || e == EFBIG) {
            __atomic_store_n(&m->err, e, __ATOMIC_RELEASE);
            break;
        }
        if (e) { /* not supported here: nothing is reserved, nothing is refused */
            __atomic_store_n(&m->unsupported, 1, __ATOMIC_RELAXED);
            at = hi;
        } else {
            at = to;
        }
        __atomic_store_n(&m->done, at, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&m->finished, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* Whether this rank can spare a thread: HQ_RESERVE=background or sync say; by default only where
 * the rank's share of the cores is BG_MIN_CORES or more. The thread adds no work, it moves it onto
 * another core: with one core a rank has none to move it to. */
static int bg_wanted(const hq_io *io)
{
    const char *mode = getenv("HQ_RESERVE");
    if (mode && strcmp(mode, "background") == 0)
        return 1;
    if (mode && strcmp(mode, "sync") == 0)
        return 0;
    return hdf5_spare_cores(io, BG_MIN_CORES);
}

/* The rank's share of the node's cores, as set_threads was told (the driver counts the ranks of
 * the node); where it was not told, the cores this process may run on. */
int hdf5_spare_cores(const hq_io *io, int need)
{
    if (io->threads > 0)
        return io->threads >= need;
    cpu_set_t set;
    return sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) >= need;
}

/* Whether every rank of comm runs on this node (tmpfs, where the reservation costs, is one node's). */
static int one_node(MPI_Comm comm, int nranks)
{
    MPI_Comm node;
    int n = 0;
    if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) != MPI_SUCCESS)
        return 0;
    MPI_Comm_size(node, &n);
    MPI_Comm_free(&node);
    int all = n == nranks, every = 0;
    MPI_Allreduce(&all, &every, 1, MPI_INT, MPI_MIN, comm);
    return every;
}

/* The slots, shared between the ranks of the node: rank 0 makes a segment, the others map it by
 * name, and once all have it the name is removed (a crash later leaves nothing behind). */
static slot *map_slots(hq_io *io, size_t len)
{
    char name[64] = {0};
    slot *s = NULL;
    int ok = 1;
    if (io->rank == 0) {
        snprintf(name, sizeof name, "/histeq_dist.%ld.%ld", (long)getpid(), (long)time(NULL));
        const int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
        ok = fd >= 0 && ftruncate(fd, (off_t)len) == 0;
        if (ok) {
            void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            s = p == MAP_FAILED ? NULL : p;
        }
        if (fd >= 0)
            close(fd);
        if (!s && fd >= 0)
            shm_unlink(name);
        ok = s != NULL;
        if (!ok)
            name[0] = 0;
    }
    MPI_Bcast(name, sizeof name, MPI_CHAR, 0, io->comm);
    if (io->rank != 0 && name[0]) {
        const int fd = shm_open(name, O_RDWR, 0600);
        void *p = fd >= 0 ? mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
        if (fd >= 0)
            close(fd);
        s = p == MAP_FAILED ? NULL : p;
    }
    ok = s != NULL;
    int all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, io->comm);
    if (io->rank == 0 && name[0])
        shm_unlink(name);
    if (!all && s) {
        munmap(s, len);
        s = NULL;
    }
    return s;
}

static void free_bg(struct hdf5_bg_reserve *g)
{
    if (g->fd >= 0)
        close(g->fd);
    if (g->map_len)
        munmap(g->s, g->map_len);
    else
        free(g->s);
    free(g);
}

int hdf5_bg_reserve_start(hq_io *io, uint64_t from, uint64_t end, int can)
{
    uint64_t span[2] = {from, end};
    MPI_Bcast(&can, 1, MPI_INT, 0, io->comm);
    MPI_Bcast(span, 2, MPI_UINT64_T, 0, io->comm);
    int want = can && bg_wanted(io), all = 0;
    MPI_Allreduce(&want, &all, 1, MPI_INT, MPI_MIN, io->comm);
    if (!all || (io->nranks > 1 && !one_node(io->comm, io->nranks)))
        return -1;
    struct hdf5_bg_reserve *g = calloc(1, sizeof *g);
    const size_t len = (size_t)io->nranks * sizeof(slot);
    int ok = g != NULL;
    if (g) {
        g->fd = -1;
        g->lock = &io->put_lock;
        g->nslots = io->nranks;
        g->rank = io->rank;
        g->from = span[0];
        g->end = span[1];
        if (io->nranks > 1) {
            g->s = map_slots(io, len); /* collective */
            g->map_len = g->s ? len : 0;
        } else {
            g->s = calloc(1, len);
        }
        ok = g->s != NULL;
    } else if (io->nranks > 1) {
        slot *t = map_slots(io, len); /* the others are in it: join, then give it back */
        if (t)
            munmap(t, len);
    }
    if (ok) {
        g->s[io->rank].done = slice_lo(g, io->rank);
        g->fd = open(io->part_path, O_WRONLY | O_CLOEXEC);
        ok = g->fd >= 0;
    }
    /* Every rank's slot must be in place before anyone waits on it. */
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, io->comm);
    int started = ok && pthread_create(&g->tid, NULL, bg_main, g) == 0;
    MPI_Allreduce(&started, &all, 1, MPI_INT, MPI_MIN, io->comm);
    if (!all) {
        if (started) {
            __atomic_store_n(&g->stop, 1, __ATOMIC_RELEASE);
            pthread_join(g->tid, NULL);
        }
        if (g)
            free_bg(g);
        return -1;
    }
    io->bg = g;
    io->bg_started = 1;
    if (io->verbose && io->rank == 0)
        fprintf(stderr, "histeq_dist: note: %s: disk space reserved in the background, %d slice%s of %llu bytes\n",
                io->out_path, io->nranks, io->nranks == 1 ? "" : "s", (unsigned long long)(span[1] - span[0]));
    return 0;
}

/* Polls: the slices belong to threads of other processes too. The first checks come quickly (a
 * write usually finds its bytes reserved already), then every half millisecond. */
static void nap(long *ns)
{
    struct timespec t = {0, *ns};
    nanosleep(&t, NULL);
    *ns = *ns < 500000 ? *ns * 2 : 500000;
}

int hdf5_reserve_wait(hq_io *io, uint64_t lo, uint64_t hi, hq_err *err)
{
    struct hdf5_bg_reserve *g = io->bg;
    if (!g)
        return 0;
    int e = 0;
    for (int r = 0; r < g->nslots && !e; r++) {
        slot *s = &g->s[r];
        const uint64_t s_lo = slice_lo(g, r), s_hi = slice_lo(g, r + 1);
        if (hi <= s_lo || lo >= s_hi)
            continue;
        const uint64_t need = hi < s_hi ? hi : s_hi;
        long ns = 2000;
        for (;;) {
            if (__atomic_load_n(&s->done, __ATOMIC_ACQUIRE) >= need)
                break;
            if (__atomic_load_n(&s->finished, __ATOMIC_ACQUIRE)) {
                if (__atomic_load_n(&s->done, __ATOMIC_ACQUIRE) >= need)
                    break;
                e = __atomic_load_n(&s->err, __ATOMIC_ACQUIRE);
                e = e ? e : ECANCELED; /* its rank stopped early: it is failing too */
                break;
            }
            nap(&ns);
        }
    }
    if (!e)
        return 0;
    return err ? hq_fail(err, HQ_EIO, "%s: write failed: not enough disk space for the output (%llu bytes: %s)",
                         io->out_path, (unsigned long long)g->end, strerror(e == ECANCELED ? ENOSPC : e))
               : -1;
}

uint64_t hdf5_reserve_target(const hq_io *io)
{
    return io->bg ? io->bg->end : io->reserved;
}

void hdf5_reserve_stop(hq_io *io)
{
    struct hdf5_bg_reserve *g = io->bg;
    if (!g)
        return;
    __atomic_store_n(&g->stop, 1, __ATOMIC_RELEASE);
    pthread_join(g->tid, NULL);
    if (io->rank == 0) {
        /* The prefix known reserved: slices in order, as far as each is done. A slice of another
         * rank still running counts as far as it got; what it adds later past the file's end is
         * merely not given back. */
        uint64_t upto = g->from;
        for (int r = 0; r < g->nslots; r++) {
            const slot *s = &g->s[r];
            if (__atomic_load_n(&s->unsupported, __ATOMIC_ACQUIRE))
                io->no_fallocate = 1;
            const uint64_t d = __atomic_load_n(&s->done, __ATOMIC_ACQUIRE);
            if (upto == slice_lo(g, r))
                upto = d;
        }
        io->reserved = upto > io->reserved ? upto : io->reserved;
    }
    free_bg(g);
    io->bg = NULL;
}
