/* progress.h — rank 0 prints how far the whole job is, every N seconds, without making any worker
 * wait for it.
 *
 * Each rank calls hq_progress_tick after each block it finishes. When its clock passes the next
 * N-second mark, and its previous round has completed locally, it posts its counters in a
 * non-blocking MPI_Ireduce on a communicator of its own (so these rounds can never interleave with
 * the job's other collectives). Rank 0 prints when a round completes. hq_progress_finish, called
 * by every rank, posts the rounds a rank is missing so that all ranks made the same calls. The
 * tick may come from the I/O thread: at any moment only one thread of a rank calls MPI. */
#ifndef HQ_PROGRESS_H
#define HQ_PROGRESS_H

#include <mpi.h>
#include <stdint.h>

typedef struct hq_progress {
    MPI_Comm comm;  /* the rounds (MPI_Ireduce), nothing else */
    MPI_Comm tally; /* hq_progress_finish's count of the rounds */
    int rank, on;
    double start, interval, next;
    uint64_t total_pixels, total_bytes, input_bytes;
    uint64_t mine[2], sum[2]; /* pixels, bytes: this rank's at the last post, the sum on rank 0 */
    MPI_Request req;
    int posted;
    double posted_at; /* when this rank posted the outstanding round: the time its numbers are of */
} hq_progress;

/* interval <= 0 turns printing off (the calls remain collective-safe). total_bytes and the bytes
 * passed to tick are the run's work: each input byte once per pass that reads it (histogram, write,
 * float data's extremes), so the percentage counts both passes; input_bytes is what the run itself
 * has to read, which the line's MiB are the same fraction of (at 100% the closing line's MiB).
 * The line's Mpixel are those written. A round's numbers are printed with the time rank 0 posted
 * them, not the later time the round completed. */
void hq_progress_start(hq_progress *p, MPI_Comm world, double interval, uint64_t total_pixels, uint64_t total_bytes,
                       uint64_t input_bytes);
void hq_progress_tick(hq_progress *p, uint64_t pixels_done, uint64_t bytes_done);
void hq_progress_finish(hq_progress *p);

#endif
