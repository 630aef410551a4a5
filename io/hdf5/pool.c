/* pool.c — the HDF5 backend's few worker threads: the pieces of one block (chunks, runs of bytes)
 * read, written, inflated or deflated side by side while HDF5 itself stays on the calling thread.
 *
 * Contract:
 *  - hdf5_pool_new(threads) starts threads - 1 workers; the caller is the last of `threads`
 *    (worker id threads - 1), so a pool of 1 runs everything on the calling thread and starts none.
 *  - hdf5_pool_run(pool, n, fn, consume, ctx): fn(ctx, i, worker) for every i < n, on any thread,
 *    at most one call per worker id at a time (a worker's scratch is its own). With consume, the
 *    calling thread alone calls consume(ctx, i) in order 0, 1, ... as each fn(i) is done (the place
 *    for HDF5 calls), and no fn(i) starts more than `window` tasks ahead of the next consume. The
 *    first nonzero code stops further tasks and is returned once no call is left running: ctx is
 *    never touched after hdf5_pool_run returns.
 *  - One hdf5_pool_run at a time per pool (the backend is called from one thread). */
#include <pthread.h>
#include <stdlib.h>

#include "hdf5_internal.h"

struct hdf5_pool {
    int threads; /* workers + the caller */
    pthread_t *tid;
    pthread_mutex_t mu;
    pthread_cond_t work; /* a job started, the window moved, or quit */
    pthread_cond_t done; /* a task finished */
    int quit;
    /* The current job, under mu. */
    uint64_t n, next, limit, running;
    int (*fn)(void *, uint64_t, int);
    void *ctx;
    unsigned char *finished; /* per task, ordered jobs only */
    int rc;
};

typedef struct worker_arg {
    hdf5_pool *p;
    int id;
} worker_arg;

/* Takes and runs one task of the current job, if there is one; called with mu held. */
static int take_one(hdf5_pool *p, int id)
{
    if (p->rc || p->next >= p->n || p->next >= p->limit)
        return 0;
    const uint64_t i = p->next++;
    p->running++;
    pthread_mutex_unlock(&p->mu);
    const int rc = p->fn(p->ctx, i, id);
    pthread_mutex_lock(&p->mu);
    p->running--;
    if (rc && !p->rc)
        p->rc = rc;
    if (p->finished)
        p->finished[i] = 1;
    pthread_cond_broadcast(&p->done);
    return 1;
}

static void *worker_main(void *arg)
{
    worker_arg a = *(worker_arg *)arg;
    free(arg);
    hdf5_pool *p = a.p;
    pthread_mutex_lock(&p->mu);
    while (!p->quit) {
        while (take_one(p, a.id))
            ;
        pthread_cond_wait(&p->work, &p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

hdf5_pool *hdf5_pool_new(int threads)
{
    hdf5_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->threads = threads < 1 ? 1 : threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->done, NULL);
    p->tid = calloc((size_t)p->threads, sizeof *p->tid);
    if (!p->tid) {
        hdf5_pool_free(p);
        return NULL;
    }
    for (int i = 0; i < p->threads - 1; i++) {
        worker_arg *a = malloc(sizeof *a);
        if (a) {
            a->p = p;
            a->id = i;
        }
        if (!a || pthread_create(&p->tid[i], NULL, worker_main, a) != 0) {
            free(a);
            p->threads = i + 1; /* the workers started so far, and the caller */
            break;
        }
    }
    return p;
}

int hdf5_pool_threads(const hdf5_pool *p)
{
    return p ? p->threads : 1;
}

void hdf5_pool_free(hdf5_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; p->tid && i < p->threads - 1; i++)
        pthread_join(p->tid[i], NULL);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->done);
    pthread_mutex_destroy(&p->mu);
    free(p->tid);
    free(p);
}

/* No workers: everything in order on the calling thread. */
static int run_inline(uint64_t n, int (*fn)(void *, uint64_t, int), int (*consume)(void *, uint64_t), void *ctx,
                      int id)
{
    for (uint64_t i = 0; i < n; i++) {
        int rc = fn(ctx, i, id);
        if (!rc && consume)
            rc = consume(ctx, i);
        if (rc)
            return rc;
    }
    return 0;
}

int hdf5_pool_run(hdf5_pool *p, uint64_t n, int (*fn)(void *, uint64_t, int), int (*consume)(void *, uint64_t),
                  void *ctx, uint64_t window)
{
    const int me = p ? p->threads - 1 : 0;
    if (!p || p->threads < 2 || n < 2)
        return run_inline(n, fn, consume, ctx, me);
    unsigned char *finished = consume ? calloc(n, 1) : NULL;
    if (consume && !finished)
        return run_inline(n, fn, consume, ctx, me);
    if (window < 1)
        window = 1;
    pthread_mutex_lock(&p->mu);
    p->n = n;
    p->next = 0;
    p->limit = consume ? window : n;
    p->running = 0;
    p->fn = fn;
    p->ctx = ctx;
    p->finished = finished;
    p->rc = 0;
    pthread_cond_broadcast(&p->work);
    uint64_t consumed = 0;
    for (;;) {
        if (consume && !p->rc && consumed < n && finished[consumed]) {
            pthread_mutex_unlock(&p->mu);
            const int rc = consume(ctx, consumed);
            pthread_mutex_lock(&p->mu);
            if (rc && !p->rc)
                p->rc = rc;
            consumed++;
            p->limit = consumed + window;
            pthread_cond_broadcast(&p->work);
            continue;
        }
        if (take_one(p, me))
            continue; /* one task at a time, then look again: a finished one may be waiting */
        const int all_done = p->rc ? p->running == 0 : (consume ? consumed == n : p->next == n && !p->running);
        if (all_done)
            break;
        pthread_cond_wait(&p->done, &p->mu);
    }
    const int rc = p->rc;
    p->n = p->next = p->limit = 0; /* no worker takes anything more of this job */
    p->fn = NULL;
    p->ctx = NULL;
    p->finished = NULL;
    pthread_mutex_unlock(&p->mu);
    free(finished);
    return rc;
}
