#include "tile_rows.h"

#include <stdlib.h>

#define PIECE ((uint64_t)1 << 27) /* counters per message: within MPI's int count */
enum { TAG_PART = 7101, TAG_WHOLE = 7102 };

static int in(const hq_row_range *r, uint64_t t)
{
    return t >= r->lo && t < r->hi;
}

static int owner_of(const hq_row_range *contrib, int n, uint64_t t)
{
    for (int k = 0; k < n; k++)
        if (in(&contrib[k], t))
            return k;
    return -1;
}

/* A growing list of requests. */
typedef struct reqs {
    MPI_Request *r;
    size_t n, cap;
} reqs;

static MPI_Request *next_req(reqs *q)
{
    if (q->n == q->cap) {
        size_t cap = q->cap ? 2 * q->cap : 64;
        MPI_Request *r = realloc(q->r, cap * sizeof *r);
        if (!r)
            return NULL;
        q->r = r;
        q->cap = cap;
    }
    return &q->r[q->n++];
}

/* One row, in pieces, to or from `peer`. */
static int post_row(reqs *q, uint64_t *row, uint64_t len, int peer, int tag, int send, MPI_Comm comm)
{
    for (uint64_t off = 0; off < len; off += PIECE) {
        const int cnt = (int)(len - off < PIECE ? len - off : PIECE);
        MPI_Request *r = next_req(q);
        if (!r)
            return -1;
        const int rc = send ? MPI_Isend(row + off, cnt, MPI_UINT64_T, peer, tag, comm, r)
                            : MPI_Irecv(row + off, cnt, MPI_UINT64_T, peer, tag, comm, r);
        if (rc != MPI_SUCCESS)
            return -1;
    }
    return 0;
}

static int wait_all(reqs *q)
{
    const int rc = q->n ? MPI_Waitall((int)q->n, q->r, MPI_STATUSES_IGNORE) : MPI_SUCCESS;
    q->n = 0;
    return rc == MPI_SUCCESS ? 0 : -1;
}

int hq_tile_rows_reduce(MPI_Comm comm, uint64_t nrows, uint64_t row_len, const hq_row_range *contrib,
                        const hq_row_range *need, uint64_t *rows, uint64_t *moved, hq_err *err)
{
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    if (moved)
        *moved = 0;
    if (!rows)
        return 0;
    reqs sends = {0}, recvs = {0};
    uint64_t *tmp = NULL;
    int bad = 0;
    /* Parts to their owners, all at once: a rank never changes a row it sends in this phase. */
    for (uint64_t t = contrib[me].lo; t < contrib[me].hi && t < nrows && !bad; t++) {
        const int o = owner_of(contrib, n, t);
        if (o != me) {
            bad = post_row(&sends, rows + t * row_len, row_len, o, TAG_PART, 1, comm);
            if (moved)
                *moved += row_len * sizeof *rows;
        }
    }
    /* The rows this rank owns: the other parts arrive, row by row, and are added. */
    uint64_t most = 1; /* the most parts of one owned row from others */
    for (uint64_t t = contrib[me].lo; t < contrib[me].hi && t < nrows; t++) {
        uint64_t c = 0;
        for (int k = 0; k < n && owner_of(contrib, n, t) == me; k++)
            c += k != me && in(&contrib[k], t);
        most = c > most ? c : most;
    }
    if (!bad && contrib[me].hi > contrib[me].lo)
        tmp = malloc(most * row_len * sizeof *tmp);
    for (uint64_t t = contrib[me].lo; t < contrib[me].hi && t < nrows && !bad; t++) {
        if (owner_of(contrib, n, t) != me)
            continue;
        if (!tmp) {
            bad = 1;
            break;
        }
        uint64_t got = 0;
        for (int k = 0; k < n && !bad; k++)
            if (k != me && in(&contrib[k], t))
                bad = post_row(&recvs, tmp + got++ * row_len, row_len, k, TAG_PART, 0, comm);
        bad = bad || wait_all(&recvs);
        for (uint64_t p = 0; p < got && !bad; p++)
            for (uint64_t v = 0; v < row_len; v++)
                rows[t * row_len + v] += tmp[p * row_len + v];
    }
    bad = bad || wait_all(&sends);
    free(tmp);
    /* Whole rows from their owners to the ranks that need them. */
    for (uint64_t t = contrib[me].lo; t < contrib[me].hi && t < nrows && !bad; t++) {
        if (owner_of(contrib, n, t) != me)
            continue;
        for (int k = 0; k < n && !bad; k++)
            if (k != me && in(&need[k], t)) {
                bad = post_row(&sends, rows + t * row_len, row_len, k, TAG_WHOLE, 1, comm);
                if (moved)
                    *moved += row_len * sizeof *rows;
            }
    }
    for (uint64_t t = need[me].lo; t < need[me].hi && t < nrows && !bad; t++) {
        const int o = owner_of(contrib, n, t);
        if (o < 0)
            bad = 1;
        else if (o != me)
            bad = post_row(&recvs, rows + t * row_len, row_len, o, TAG_WHOLE, 0, comm);
    }
    bad = wait_all(&recvs) || bad;
    bad = wait_all(&sends) || bad;
    free(sends.r);
    free(recvs.r);
    return bad ? hq_fail(err, HQ_EIO, "CLAHE: exchanging tile histograms between ranks failed") : 0;
}
