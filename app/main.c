/* main.c — process entry: MPI up, options, the run, one error line, the exit status. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

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
    const char *v[] = {"OMP_WAIT_POLICY", "OMPI_MCA_pml", "OMPI_MCA_ess_singleton_isolated"};
    fprintf(stderr, "histeq_dist: note: start-up:");
    for (int i = 0; i < 3; i++)
        fprintf(stderr, " %s=%s", v[i], getenv(v[i]) ? getenv(v[i]) : "(unset)");
    fprintf(stderr, "\n");
}

int main(int argc, char **argv)
{
    passive_openmp(argv);
    hq_comm c;
    if (hq_comm_init(&argc, &argv, &c)) {
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
    if (!rc && !o.exit_now && o.verbose && c.rank == 0)
        start_up_note();
    if (!rc && !o.exit_now)
        rc = hq_run(&o, &c, &err);
    hq_interrupt_run_ended();
    if (rc && rc != HQ_ESKIPPED && c.rank == 0)
        fprintf(stderr, "histeq_dist: %s\n", err.msg);
    hq_comm_finalize(&c);
    return rc;
}
