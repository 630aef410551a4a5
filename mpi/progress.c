#include "progress.h"

#include <stdio.h>
#include <time.h>

void hq_progress_start(hq_progress *p, MPI_Comm world, double interval, uint64_t total_pixels, uint64_t total_bytes,
                       uint64_t input_bytes)
{
    *p = (hq_progress){.req = MPI_REQUEST_NULL};
    MPI_Comm_dup(world, &p->comm);
    MPI_Comm_dup(world, &p->tally);
    MPI_Comm_rank(p->comm, &p->rank);
    p->on = interval > 0;
    p->interval = interval;
    p->start = MPI_Wtime();
    p->next = p->start + interval;
    p->total_pixels = total_pixels;
    p->total_bytes = total_bytes;
    p->input_bytes = input_bytes;
}

static void print_round(hq_progress *p)
{
    /* The numbers are as of rank 0's post: a round completes when the last rank posts it, maybe a
     * block later, and printed with that later time its rate and time left were wrong. */
    const double el = p->posted_at - p->start;
    /* At most 1: a resumed run reads again, for their extremes, float images it wrote already. */
    const double frac = p->total_bytes && p->sum[1] < p->total_bytes ? (double)p->sum[1] / (double)p->total_bytes : 1.0;
    const double mib = frac * (double)p->input_bytes / 1048576.0, all = (double)p->input_bytes / 1048576.0;
    const double rate = el > 0 ? mib / el : 0.0;
    char stamp[32];
    time_t t = time(NULL);
    struct tm tm;
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", localtime_r(&t, &tm));
    char left[48] = "";
    if (frac > 0 && frac < 1)
        snprintf(left, sizeof left, ", %.0f s left", el / frac - el);
    fprintf(stderr, "[%s] histeq_dist: %.1f%% done, %.1f of %.1f Mpixel written, %.1f of %.1f MiB in %.1f s (%.1f MiB/s)%s\n",
            stamp, 100.0 * frac, (double)p->sum[0] / 1e6, (double)p->total_pixels / 1e6, mib, all, el, rate, left);
}

/* Completes the outstanding round if it is done (rank 0 prints it); returns 1 when none is left. */
static int settle(hq_progress *p, int wait)
{
    if (p->req == MPI_REQUEST_NULL)
        return 1;
    int done = 0;
    if (wait)
        MPI_Wait(&p->req, MPI_STATUS_IGNORE), done = 1;
    else
        MPI_Test(&p->req, &done, MPI_STATUS_IGNORE);
    if (done && p->rank == 0 && p->on)
        print_round(p);
    return done;
}

static void post(hq_progress *p, uint64_t pixels, uint64_t bytes)
{
    p->mine[0] = pixels;
    p->mine[1] = bytes;
    p->posted_at = MPI_Wtime();
    MPI_Ireduce(p->mine, p->sum, 2, MPI_UINT64_T, MPI_SUM, 0, p->comm, &p->req);
    p->posted++;
}

void hq_progress_tick(hq_progress *p, uint64_t pixels_done, uint64_t bytes_done)
{
    if (!p->on || !settle(p, 0))
        return;
    const double now = MPI_Wtime();
    if (now < p->next)
        return;
    /* Skip marks that passed while a block was being processed: one round per tick at most. */
    while (p->next <= now)
        p->next += p->interval;
    post(p, pixels_done, bytes_done);
}

void hq_progress_finish(hq_progress *p)
{
    /* How many rounds the most eager rank posted, agreed BEFORE anyone waits for a round of its
     * own: a round completes only once every rank has posted it, and a rank that never reached the
     * last mark posts it only below. Waiting first deadlocked rank 0 (the reduction's root, which
     * waits for everyone) against a rank already here. The count travels on a communicator of its
     * own, so that the rounds' order on p->comm stays the same on every rank. */
    int most = 0;
    MPI_Allreduce(&p->posted, &most, 1, MPI_INT, MPI_MAX, p->tally);
    settle(p, 1);
    const int was_on = p->on;
    p->on = 0; /* the catch-up rounds carry final numbers that the summary line prints anyway */
    while (p->posted < most) {
        post(p, p->mine[0], p->mine[1]);
        settle(p, 1);
    }
    p->on = was_on;
    MPI_Comm_free(&p->comm);
    MPI_Comm_free(&p->tally);
}
