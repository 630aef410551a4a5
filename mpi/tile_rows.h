/* tile_rows.h — a neighbourhood reduction of one image's CLAHE tile histograms: rows of tiles are
 * summed between the ranks that counted into them, and handed to the ranks that need them whole,
 * by point-to-point messages; nothing goes to a rank that has no part in a row.
 *
 * The image's histogram array has nrows rows (tile rows) of row_len counters. Every rank knows,
 * for every rank k, the rows k counted into (contrib[k]) and the rows k needs complete (need[k]),
 * both as ranges, from the plan. Row t's owner is the lowest rank counting into it; contributors
 * send their part of t to the owner, which sums them in rank order (exact: integers) and sends the
 * complete row to every rank needing it. Afterwards the rows in need[rank] and the rows this rank
 * owns are complete; other rows of its array are undefined. Every row must have a contributor.
 *
 * Not collective over the communicator: only ranks with a part in the image exchange, but all of
 * them must call it for the same images in the same order (messages are matched by order). */
#ifndef HQ_TILE_ROWS_H
#define HQ_TILE_ROWS_H

#include <mpi.h>
#include <stdint.h>

#include "../core/error.h"

typedef struct hq_row_range {
    uint64_t lo, hi; /* rows [lo, hi); empty when lo >= hi */
} hq_row_range;

/* rows: this rank's array (nrows * row_len), or NULL when it has no part (its ranges empty).
 * *moved (if not NULL) gets the bytes this rank sent. */
int hq_tile_rows_reduce(MPI_Comm comm, uint64_t nrows, uint64_t row_len, const hq_row_range *contrib,
                        const hq_row_range *need, uint64_t *rows, uint64_t *moved, hq_err *err);

#endif
