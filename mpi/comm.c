#include "comm.h"
#include "session_dir.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* MPI counts are int: move big buffers in pieces of at most 2^27 elements. */
#define PIECE ((uint64_t)1 << 27)

/* Which launcher variables say that one started this process, and its rank. */
static const char *env_rank(void)
{
    const char *r = getenv("OMPI_COMM_WORLD_RANK");
    r = r ? r : getenv("PMIX_RANK");
    return r ? r : getenv("PMI_RANK");
}

int hq_comm_env_mpirun(void)
{
    return getenv("OMPI_COMM_WORLD_SIZE") != NULL;
}

static int launched_env(void)
{
    return hq_comm_env_mpirun() || env_rank() || getenv("PMI_FD");
}

int hq_comm_env_rank(void)
{
    const char *r = env_rank();
    if (!r)
        return launched_env() ? -1 : 0;
    char *end;
    const long v = strtol(r, &end, 10);
    return *r && !*end && v >= 0 && v <= INT_MAX ? (int)v : -1;
}

/* Open MPI's start-up, where the job allows it, without what only a multi-node job needs: a
 * process started without a launcher starts no daemon (it never spawns), and ranks that all share
 * one node (or a lone process) talk through shared memory with ob1 rather than first bringing up
 * UCX's network transports. MPI_Init of an empty program on the 2-core VM: 0.36 s as it was,
 * 0.24 s without the daemon, 0.04 s with ob1 too; under mpirun -np 1 or 2, 0.36 s against 0.15 s.
 * A choice the user made (OMPI_MCA_* in the environment, mpirun --mca) is kept; srun-launched
 * ranks, whose node count is not known here, are left alone. Other MPIs ignore these names.
 *
 * Isolated singletons all take the same session directory (TMPDIR/ompi.HOST.UID/jf.0/1/0), where
 * MPI-IO keeps its shared file pointer's segment; one that finishes removes it under the others:
 * twelve at once, three times over, on the 2-core VM, between 1 and 23 of the 36 runs failed in
 * MPI_File_open ("mca_sharedfp_sm_file_open: unable to open file for mmap") from one attempt to
 * the next. Each gets a session tree of its own (mpi/session_dir.h), removed at the end, and by a
 * later run when a kill -9 left it.
 *
 * A lone process has no network to place and no device to bind to, yet Open MPI's hwloc looked for
 * every I/O device: on the GPU node its OpenCL discovery loaded POCL (with LLVM, clang and a
 * thread a core) and NVIDIA's OpenCL driver, 0.30 s of every start (--version 337 ms against 35
 * ms without I/O discovery, median of 8), and POCL's threads aborted the start under ulimit -v 1 GB
 * ("PTHREAD ERROR in pthread_scheduler_init"); on the 2-core VM the PCI walk alone was 15 ms of a
 * 41 ms MPI_Init. HWLOC_COMPONENTS leaves out every I/O component (names this hwloc lacks are
 * ignored). A launched rank may place a network, so it only goes without OpenCL, which Open MPI
 * never uses: ranks under mpirun take the topology from its daemon anyway, ranks started by srun
 * look themselves. (mpirun's own search is before this program: slurm/histeq_mpirun.sbatch and
 * README say how to spare it, 0.45 s -> 0.16 s for mpirun -np 2 --version on the GPU node.) */
#define HQ_HWLOC_NO_IO "-linuxio,-pci,-opencl,-cuda,-nvml,-rsmi,-levelzero,-gl"
#define HQ_HWLOC_NO_OPENCL "-opencl"
static void quick_start(void)
{
    const char *world = getenv("OMPI_COMM_WORLD_SIZE"), *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    const int launched = launched_env();
    if (!launched) {
        setenv("OMPI_MCA_ess_singleton_isolated", "1", 0);
        const char *tmp = getenv("TMPDIR"), *iso = getenv("OMPI_MCA_ess_singleton_isolated");
        char session_base[PATH_MAX];
        if (iso && strcmp(iso, "0") != 0 && !getenv("OMPI_MCA_orte_tmpdir_base") &&
            hq_session_dir_make(tmp && *tmp ? tmp : "/tmp", session_base, sizeof session_base) == 0)
            setenv("OMPI_MCA_orte_tmpdir_base", session_base, 1);
    }
    setenv("HWLOC_COMPONENTS", launched ? HQ_HWLOC_NO_OPENCL : HQ_HWLOC_NO_IO, 0);
    if (!launched || (world && local && strcmp(world, local) == 0))
        setenv("OMPI_MCA_pml", "ob1", 0);
    /* Every MPI_File_open queries the shared-file-pointer components, which this program never
     * uses; Open MPI 4.1's "lockedfile" formats a name from the file's path into a fixed buffer and
     * aborts ("buffer overflow detected", SIGABRT) for paths past about 230 characters, on any
     * launch. The others ("individual", "sm") stay: one must (with none, MPI_File_open fails), and
     * "individual" makes FILE.data.RANK and FILE.metadata.RANK beside the file, which a kill
     * leaves, so "sm" (a file in the session directory) must not fail: hq_outname_check_length
     * keeps an HDF5 output's name short enough for its name there. */
    setenv("OMPI_MCA_sharedfp", "^lockedfile", 0);
}

/* A rank whose launcher (mpirun, or its daemon) dies while the rank is inside MPI_Init waits for it
 * for ever: Open MPI 4.1's PMIx_Init has no timeout. A kill -9 of a whole job in its first half
 * second left such a rank asleep for good (found after the test suite, in PMIx_Init, its parent
 * gone). Until MPI_Init returns, a watcher checks every 0.2 s that the launcher is still this
 * process's parent, and ends the process when it is not. It makes no MPI call. */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
    pid_t launcher;
} watch = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};

static void *watch_launcher(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&watch.mu);
    while (!watch.done) {
        if (getppid() != watch.launcher) {
            static const char msg[] = "histeq_dist: the MPI launcher went away while this rank was starting\n";
            if (write(STDERR_FILENO, msg, sizeof msg - 1) < 0) {
                /* nothing more to say it with */
            }
            _exit(HQ_EIO);
        }
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_nsec += 200000000L;
        if (t.tv_nsec >= 1000000000L) {
            t.tv_sec++;
            t.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&watch.cv, &watch.mu, &t);
    }
    pthread_mutex_unlock(&watch.mu);
    return NULL;
}

int hq_comm_init(int *argc, char ***argv, hq_comm *c)
{
    int provided;
    quick_start();
    const int launched = getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK");
    pthread_t watcher;
    watch.launcher = getppid();
    const int watching = launched && watch.launcher > 1 && pthread_create(&watcher, NULL, watch_launcher, NULL) == 0;
    /* Tests: a pause before MPI_Init, for a launcher killed while its ranks start; said once the
     * watcher runs, so that a test kills the launcher only then. */
    const char *pause = getenv("HQ_TEST_INIT_PAUSE_S");
    if (pause) {
        fprintf(stderr, "histeq_dist: test: %s before MPI_Init, %s s\n", watching ? "watching" : "not watching",
                pause);
        fflush(stderr);
        sleep((unsigned)atoi(pause));
    }
    const int inited = MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
    if (watching) {
        pthread_mutex_lock(&watch.mu);
        watch.done = 1;
        pthread_cond_signal(&watch.cv);
        pthread_mutex_unlock(&watch.mu);
        pthread_join(watcher, NULL);
    }
    /* SERIALIZED (above): while the I/O threads of app/pipeline.c run, they alone call MPI, one at a
     * time (MPI-IO through HDF5 on the single I/O thread of a format that is not concurrent; progress
     * ticks behind a lock), and the main thread makes none; OpenMP workers never call MPI. */
    if (inited != MPI_SUCCESS)
        return HQ_EIO;
    c->world = MPI_COMM_WORLD;
    MPI_Comm_rank(c->world, &c->rank);
    MPI_Comm_size(c->world, &c->size);
    MPI_Comm node;
    MPI_Comm_split_type(c->world, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &c->local_rank);
    MPI_Comm_size(node, &c->local_size);
    MPI_Comm_free(&node);
    int len = 0;
    MPI_Get_processor_name(c->host, &len);
    return 0;
}

void hq_comm_finalize(hq_comm *c)
{
    (void)c;
    MPI_Finalize();
    hq_session_dir_remove();
}

int hq_comm_agree(const hq_comm *c, int rc, hq_err *err)
{
    int worst = 0, first = c->size;
    int mine = rc ? c->rank : c->size;
    MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, c->world);
    if (!worst)
        return 0;
    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, c->world);
    hq_err tmp;
    if (!err)
        err = &tmp;
    MPI_Bcast(err->msg, (int)sizeof err->msg, MPI_CHAR, first, c->world);
    return worst;
}

int hq_comm_sum_u64(const hq_comm *c, uint64_t *buf, uint64_t n)
{
    for (uint64_t off = 0; off < n; off += PIECE) {
        int cnt = (int)(n - off < PIECE ? n - off : PIECE);
        if (MPI_Allreduce(MPI_IN_PLACE, buf + off, cnt, MPI_UINT64_T, MPI_SUM, c->world) != MPI_SUCCESS)
            return HQ_EIO;
    }
    return 0;
}

int hq_comm_minmax_f64(const hq_comm *c, double *lo, double *hi, uint64_t n)
{
    for (uint64_t off = 0; off < n; off += PIECE) {
        int cnt = (int)(n - off < PIECE ? n - off : PIECE);
        if (MPI_Allreduce(MPI_IN_PLACE, lo + off, cnt, MPI_DOUBLE, MPI_MIN, c->world) != MPI_SUCCESS ||
            MPI_Allreduce(MPI_IN_PLACE, hi + off, cnt, MPI_DOUBLE, MPI_MAX, c->world) != MPI_SUCCESS)
            return HQ_EIO;
    }
    return 0;
}

int hq_comm_bcast_bytes(const hq_comm *c, unsigned char **buf, uint64_t *len, hq_err *err)
{
    MPI_Bcast(len, 1, MPI_UINT64_T, 0, c->world);
    if (c->rank != 0) {
        *buf = malloc(*len ? *len : 1);
    }
    int ok = *buf != NULL, all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, c->world);
    if (!all_ok)
        return hq_fail(err, HQ_EMEM, "input list: out of memory receiving %llu bytes", (unsigned long long)*len);
    for (uint64_t off = 0; off < *len; off += PIECE * 8) {
        int cnt = (int)(*len - off < PIECE * 8 ? *len - off : PIECE * 8);
        MPI_Bcast(*buf + off, cnt, MPI_BYTE, 0, c->world);
    }
    return 0;
}

int hq_comm_node_distinct(const hq_comm *c, const char *s)
{
    enum { W = 64 };
    MPI_Comm node;
    if (MPI_Comm_split_type(c->world, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &node) != MPI_SUCCESS)
        return s ? 1 : 0;
    int n = 0;
    MPI_Comm_size(node, &n);
    char mine[W] = {0};
    if (s)
        snprintf(mine, W, "%s", s);
    char *all = calloc((size_t)n, W);
    int distinct = s ? 1 : 0, ok = all != NULL, all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, node); /* every rank gathers, or none */
    if (all_ok && MPI_Allgather(mine, W, MPI_CHAR, all, W, MPI_CHAR, node) == MPI_SUCCESS) {
        distinct = 0;
        for (int i = 0; i < n; i++) {
            const char *si = all + (size_t)i * W;
            int first = si[0] != '\0';
            for (int j = 0; j < i && first; j++)
                first = strncmp(si, all + (size_t)j * W, W) != 0;
            distinct += first;
        }
    }
    free(all);
    MPI_Comm_free(&node);
    return distinct;
}

uint64_t hq_comm_max_u64(const hq_comm *c, uint64_t v)
{
    uint64_t m = 0;
    MPI_Allreduce(&v, &m, 1, MPI_UINT64_T, MPI_MAX, c->world);
    return m;
}

double hq_now(void)
{
    return MPI_Wtime();
}
