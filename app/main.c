/* main.c — process entry: MPI up, options, the run, one error line, the exit status. */
#include <stdio.h>

#include "../mpi/comm.h"
#include "options.h"
#include "run.h"

int main(int argc, char **argv)
{
    hq_comm c;
    if (hq_comm_init(&argc, &argv, &c)) {
        fprintf(stderr, "histeq_dist: MPI could not be initialised\n");
        return HQ_EIO;
    }
    hq_options o;
    hq_err err = {{0}};
    /* Every rank parses the same argv, so every rank reaches the same verdict without talking. */
    int rc = hq_options_parse(argc, argv, c.rank == 0, &o, &err);
    if (!rc && !o.exit_now)
        rc = hq_run(&o, &c, &err);
    if (rc && rc != HQ_ESKIPPED && c.rank == 0)
        fprintf(stderr, "histeq_dist: %s\n", err.msg);
    hq_comm_finalize(&c);
    return rc;
}
