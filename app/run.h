/* run.h — the whole data path of one histeq_dist invocation, collective over all ranks:
 * plan -> read -> histogram -> allreduce -> LUT -> remap -> write. Returns the exit status;
 * err holds the agreed one-line message when it is not HQ_OK (the same on every rank). */
#ifndef HQ_RUN_H
#define HQ_RUN_H

#include "../core/error.h"
#include "../mpi/comm.h"
#include "options.h"

int hq_run(const hq_options *o, const hq_comm *c, hq_err *err);

#endif
