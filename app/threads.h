/* threads.h — a rank's worker threads started before any work, so that a process limit (ulimit -v,
 * ulimit -u) stops the run with one line and exit 6 instead of inside a library.
 *
 * OpenMP creates its workers at the first parallel region and libgomp ends the process itself
 * (exit 1, its own message) when it cannot; HDF5 1.10 reads through a NULL it got from malloc
 * when the address space runs out (H5Fcreate under `ulimit -v`: SIGSEGV). So:
 *   hq_threads_start  under a limit, caps malloc's arenas (each reserves 64 MiB); then creates
 *                     n - 1 threads as libgomp would (default attributes: the stack is
 *                     RLIMIT_STACK's), joins them, and then opens one parallel region of n threads,
 *                     whose pool libgomp keeps for the later regions of the main thread;
 *   hq_address_room   what the address-space limit leaves above what the process maps now
 *                     (UINT64_MAX without a limit), for the memory budget (app/run/plan.c). */
#ifndef HQ_THREADS_H
#define HQ_THREADS_H

#include <stdint.h>

#include "../core/error.h"

/* 0, or HQ_EMEM naming the limit when n threads cannot all be started. */
int hq_threads_start(int n, hq_err *err);

/* Bytes of address space left under RLIMIT_AS (UINT64_MAX: no limit; 0: none left); *limit gets
 * the limit itself (UINT64_MAX: none). */
uint64_t hq_address_room(uint64_t *limit);

#endif
