/* main.c — process entry: MPI up, options, the run, one error line, the exit status. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../engine/engine.h"
#include "../io/io.h"
#include "../mpi/comm.h"
#include "interrupt.h"
#include "options.h"
#include "run.h"

/* OpenMP workers that wait for work sleep instead of spinning: the engine's parallel regions
 * alternate with the I/O threads' reads, writes and codecs on the same cores, and a worker
 * spinning between two blocks takes its core from them. 1 GiB raw stack, 1 rank on the 2-core VM:
 * 0.7 s less user time, wall 1.31 s against 1.44 s (median of 5). libgomp reads OMP_WAIT_POLICY
 * once, as it loads, before main: so the process starts itself again with it set, once (the
 * variable is then set). A policy the user chose is kept; if the exec fails, the run goes on. */
static void passive_openmp(char **argv)
{
    if (getenv("OMP_WAIT_POLICY") || setenv("OMP_WAIT_POLICY", "passive", 0) != 0)
        return;
    execv("/proc/self/exe", argv);
}

/* -v: the runtime settings the start-up chose or kept (mpi/comm.c, passive_openmp above). */
static void start_up_note(void)
{
    const char *v[] = {"OMP_WAIT_POLICY", "OMPI_MCA_pml", "OMPI_MCA_ess_singleton_isolated", "HWLOC_COMPONENTS"};
    fprintf(stderr, "histeq_dist: note: start-up:");
    for (int i = 0; i < 4; i++)
        fprintf(stderr, " %s=%s", v[i], getenv(v[i]) ? getenv(v[i]) : "(unset)");
    fprintf(stderr, "\n");
}

/* Started with standard input, output or error closed (cron, a daemon's child: `>&-`), the
 * first files the process opens would take those numbers: the MPI session's lock file became
 * descriptor 1, and --summary /dev/stdout and every message went into it. /dev/null stands in. */
static void std_fds_open(void)
{
    int fd;
    while ((fd = open("/dev/null", O_RDWR | O_CLOEXEC)) >= 0 && fd <= STDERR_FILENO) {
        const int keep = fcntl(fd, F_GETFD);
        if (keep >= 0)
            fcntl(fd, F_SETFD, keep & ~FD_CLOEXEC); /* the standard descriptors survive exec */
    }
    if (fd > STDERR_FILENO)
        close(fd);
}

/* The paths given relative to a working directory that cannot be read (removed under the run's
 * feet, or deeper than PATH_MAX): Open MPI's file open crashed on them (SIGSEGV in
 * mca_common_ompio_file_close); refused here in one line instead. */
static int relative_paths_resolve(const hq_options *o, hq_err *err)
{
    char here[PATH_MAX];
    if (getcwd(here, sizeof here))
        return 0;
    const int why = errno;
    const char *given[] = {o->input, o->output, o->mask, o->reference, o->summary, o->report};
    for (size_t k = 0; k < sizeof given / sizeof given[0]; k++)
        if (given[k] && given[k][0] && given[k][0] != '/' && strcmp(given[k], "global") != 0)
            return hq_fail(err, HQ_EUSAGE, "%s: a relative path, and the working directory cannot be read (%s): "
                           "give an absolute path", given[k], why == ENOENT ? "it was removed" : strerror(why));
    return 0;
}

/* Rank 0's scan of the input (a forked child, io/scan_isolated.c) starts before MPI_Init and works
 * while MPI starts: the two came one after the other, 30 ms and 40-90 ms of a 64 KiB run's 0.2 s
 * on the 2-core VM (strace), the fork then copying MPI's page tables besides. The options are read
 * here quietly only to find the input; hq_run reads them again and takes the scan where it is of
 * that input (any error is said there, as before). Which rank this process will be is known from
 * the launcher's environment; where it is not, hq_run scans as it goes. */
static void early_scan(int argc, char **argv, hq_scan_job *job)
{
    if (hq_comm_env_rank() != 0)
        return; /* another rank, or one whose rank is not known yet */
    hq_options o;
    hq_err ignored;
    if (hq_options_parse(argc, argv, 0, &o, &ignored) || o.exit_now || !o.input)
        return;
    hq_io_scan_start(o.input, hq_run_scan_flags(&o), 0, job, &ignored);
}

int main(int argc, char **argv)
{
    std_fds_open();
    passive_openmp(argv);
    hq_scan_job scan = {0};
    early_scan(argc, argv, &scan);
    hq_comm c;
    if (hq_comm_init(&argc, &argv, &c)) {
        hq_io_scan_drop(&scan);
        fprintf(stderr, "histeq_dist: MPI could not be initialised\n");
        return HQ_EIO;
    }
    hq_interrupt_install(c.rank == 0);
    hq_options o;
    hq_err err = {{0}};
    /* Every rank parses the same argv, so every rank reaches the same verdict without talking. */
    int rc = hq_options_parse(argc, argv, c.rank == 0, &o, &err);
    if (!rc && o.version && c.rank == 0)
        printf("deflate: %s\n", hq_io_deflate_info());
    /* --help, --version into a full disk or a closed pipe: said, not exit 0. */
    if (!rc && o.exit_now && c.rank == 0 && (fflush(stdout) != 0 || ferror(stdout)))
        rc = hq_fail(&err, HQ_EIO, "standard output: write failed (%s)", strerror(errno));
    if (!rc && !o.exit_now)
        rc = relative_paths_resolve(&o, &err);
    if (!rc && !o.exit_now && o.verbose && c.rank == 0)
        start_up_note();
    if (!rc && !o.exit_now)
        rc = hq_run(&o, &c, &scan, &err);
    hq_io_scan_drop(&scan);
    hq_interrupt_run_ended();
    if (rc && rc != HQ_ESKIPPED && c.rank == 0)
        fprintf(stderr, "histeq_dist: %s\n", err.msg);
    hq_comm_finalize(&c);
    /* CUDA started (engine.h says why): the outputs are closed and MPI is down; only stdio is
     * left to flush. */
    if (hq_gpu_started()) {
        fflush(NULL);
        _exit(rc);
    }
    return rc;
}
