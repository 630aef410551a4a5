/* run.h — the whole data path of one histeq_dist invocation, collective over all ranks:
 * plan -> read -> histogram -> allreduce -> LUT -> remap -> write. Returns the exit status;
 * err holds the agreed one-line message when it is not HQ_OK (the same on every rank). */
#ifndef HQ_RUN_H
#define HQ_RUN_H

#include "../core/error.h"
#include "../io/io.h"
#include "../mpi/comm.h"
#include "options.h"

/* early: rank 0's scan of the input, started before MPI_Init (io.h, hq_io_scan_start) and taken
 * here when it is of this run's input and flags; otherwise, or NULL, rank 0 scans as it goes.
 * The caller drops what is left of it (hq_io_scan_drop) once hq_run returns. */
int hq_run(const hq_options *o, const hq_comm *c, hq_scan_job *early, hq_err *err);

/* The flags of the scan of --input a run with these options makes. */
unsigned hq_run_scan_flags(const hq_options *o);

#endif
