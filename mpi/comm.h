/* comm.h — the few MPI patterns the driver needs, each safe for 64-bit counts.
 *
 * Every function here is collective over the communicator and must be called by all ranks.
 * hq_comm_agree is how failures stay coherent: each rank brings its own status, all leave with the
 * same code and the same message (the lowest failing rank's), so exactly one rank prints it and no
 * rank goes on to a collective call that the others will never make. */
#ifndef HQ_COMM_H
#define HQ_COMM_H

#include <mpi.h>
#include <stdint.h>

#include "../core/error.h"

typedef struct hq_comm {
    MPI_Comm world;
    int rank, size;
    int local_rank, local_size; /* within the node (MPI_COMM_TYPE_SHARED) */
    char host[MPI_MAX_PROCESSOR_NAME];
} hq_comm;

int hq_comm_init(int *argc, char ***argv, hq_comm *c);

/* Before MPI_Init, from the launcher's environment: this process's rank in its job (0 for a lone
 * process, which no launcher started), or -1 where a launcher started it without saying which. */
int hq_comm_env_rank(void);
/* Whether Open MPI's mpirun started this process (from its environment, before or after MPI_Init). */
int hq_comm_env_mpirun(void);
void hq_comm_finalize(hq_comm *c);

/* Returns the worst (largest) code over ranks; err then holds the lowest failing rank's message. */
int hq_comm_agree(const hq_comm *c, int rc, hq_err *err);

/* In-place sum of n uint64 counters over all ranks, in pieces that fit MPI's int counts. */
int hq_comm_sum_u64(const hq_comm *c, uint64_t *buf, uint64_t n);

/* In-place minimum of lo[0..n) and maximum of hi[0..n) over all ranks (exact: MIN and MAX of
 * doubles do not round), in pieces that fit MPI's int counts. */
int hq_comm_minmax_f64(const hq_comm *c, double *lo, double *hi, uint64_t n);

/* Rank 0's buffer of *len bytes to everyone; non-root ranks receive a malloc'd buffer. */
int hq_comm_bcast_bytes(const hq_comm *c, unsigned char **buf, uint64_t *len, hq_err *err);

/* Over the ranks of this rank's node: how many distinct strings they bring (at most 63 bytes
 * each are compared; NULL counts as none). The same answer on every rank of a node. */
int hq_comm_node_distinct(const hq_comm *c, const char *s);

/* Max over ranks of v. */
uint64_t hq_comm_max_u64(const hq_comm *c, uint64_t v);

/* Wall-clock seconds (MPI_Wtime). */
double hq_now(void);

#endif
