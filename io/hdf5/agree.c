/* agree.c — agreement between ranks: every collective step of the backend ends with the same code
 * and the same message on every rank, so that no rank hangs or goes on alone.
 *
 * Contract:
 *  - hdf5_agree: collective; every rank returns the worst code and the message of the lowest rank
 *    that had it (or "failed on rank N" when that rank had no hq_err).
 *  - hdf5_share_from_root: collective; rank 0's code and message reach every rank. */
#include <limits.h>
#include <stdio.h>

#include "hdf5_internal.h"

/* Every rank returns the worst code; the message is that of the lowest rank that had it, so the
 * rank that prints shows the real reason whichever rank met it. */
int hdf5_agree(MPI_Comm comm, int rc, hq_err *err)
{
    int worst = 0;
    MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, comm);
    if (!worst)
        return 0;
    int rank, src = 0;
    MPI_Comm_rank(comm, &rank);
    int me = rc == worst ? rank : INT_MAX;
    MPI_Allreduce(&me, &src, 1, MPI_INT, MPI_MIN, comm);
    hq_err scratch = {{0}};
    hq_err *e = err ? err : &scratch;
    if (rank == src && !err)
        snprintf(e->msg, sizeof e->msg, "failed on rank %d", rank);
    MPI_Bcast(e->msg, (int)sizeof e->msg, MPI_CHAR, src, comm);
    return worst;
}

/* Rank 0 decided; the others learn its code and message. */
int hdf5_share_from_root(MPI_Comm comm, int rc, hq_err *err)
{
    MPI_Bcast(&rc, 1, MPI_INT, 0, comm);
    if (rc) {
        hq_err scratch = {{0}};
        hq_err *e = err ? err : &scratch;
        MPI_Bcast(e->msg, (int)sizeof e->msg, MPI_CHAR, 0, comm);
    }
    return rc;
}
