#include "pipeline.h"

#include <pthread.h>
#include <stdlib.h>

/* Three slots are enough: one being read, one being computed, one waiting to be written. */
#define SLOTS 3

typedef struct pipe {
    const hq_pipeline_ops *ops;
    void *ctx;
    uint64_t n;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    void *data[SLOTS];
    uint64_t idx[SLOTS]; /* which block each slot holds */
    uint64_t nread;     /* blocks whose read finished */
    uint64_t ncomputed; /* blocks whose compute finished */
    int failed;         /* either side failed: both stop */
    int rc_io, rc_cpu;
    hq_err err_io, err_cpu;
} pipe_t;

static void fail(pipe_t *p, int *rc_slot, int rc)
{
    pthread_mutex_lock(&p->mu);
    *rc_slot = rc;
    p->failed = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

/* Waits until block k has been computed; returns 0 if the pipeline failed meanwhile. */
static int wait_computed(pipe_t *p, uint64_t k)
{
    pthread_mutex_lock(&p->mu);
    while (!p->failed && p->ncomputed <= k)
        pthread_cond_wait(&p->cv, &p->mu);
    int ok = !p->failed;
    pthread_mutex_unlock(&p->mu);
    return ok;
}

static void write_and_finish(pipe_t *p, uint64_t k)
{
    int rc = 0;
    if (p->ops->write)
        rc = p->ops->write(p->ctx, k, p->data[k % SLOTS], &p->err_io);
    p->ops->finish(p->ctx, k, p->data[k % SLOTS], rc == 0);
    p->data[k % SLOTS] = NULL;
    if (rc)
        fail(p, &p->rc_io, rc);
}

static void *io_thread(void *arg)
{
    pipe_t *p = arg;
    for (uint64_t k = 0; k <= p->n; k++) {
        if (k < p->n) {
            void *d = NULL;
            int rc = p->ops->read(p->ctx, k, &d, &p->err_io);
            pthread_mutex_lock(&p->mu);
            p->data[k % SLOTS] = d;
            p->idx[k % SLOTS] = k;
            if (rc) {
                p->rc_io = rc;
                p->failed = 1;
            } else {
                p->nread = k + 1;
            }
            pthread_cond_broadcast(&p->cv);
            pthread_mutex_unlock(&p->mu);
            if (rc) {
                if (d)
                    p->ops->finish(p->ctx, k, d, 0);
                p->data[k % SLOTS] = NULL;
                break;
            }
        }
        if (k >= 1) {
            if (!wait_computed(p, k - 1))
                break;
            write_and_finish(p, k - 1);
        }
        pthread_mutex_lock(&p->mu);
        int stop = p->failed;
        pthread_mutex_unlock(&p->mu);
        if (stop)
            break;
    }
    return NULL;
}

static int run_serial(const hq_pipeline_ops *ops, void *ctx, uint64_t n, hq_err *err)
{
    for (uint64_t k = 0; k < n; k++) {
        void *d = NULL;
        int rc = ops->read(ctx, k, &d, err);
        if (!rc)
            rc = ops->compute(ctx, k, d, err);
        if (!rc && ops->write)
            rc = ops->write(ctx, k, d, err);
        if (d || !rc)
            ops->finish(ctx, k, d, rc == 0);
        if (rc)
            return rc;
    }
    return 0;
}

int hq_pipeline_run(const hq_pipeline_ops *ops, void *ctx, uint64_t n, int threaded, hq_err *err)
{
    if (!threaded || n < 2)
        return run_serial(ops, ctx, n, err);
    pipe_t p = {.ops = ops, .ctx = ctx, .n = n};
    pthread_mutex_init(&p.mu, NULL);
    pthread_cond_init(&p.cv, NULL);
    pthread_t th;
    if (pthread_create(&th, NULL, io_thread, &p) != 0) {
        pthread_mutex_destroy(&p.mu);
        pthread_cond_destroy(&p.cv);
        return run_serial(ops, ctx, n, err);
    }
    for (uint64_t k = 0; k < n; k++) {
        pthread_mutex_lock(&p.mu);
        while (!p.failed && p.nread <= k)
            pthread_cond_wait(&p.cv, &p.mu);
        int stop = p.failed;
        void *d = p.data[k % SLOTS];
        pthread_mutex_unlock(&p.mu);
        if (stop)
            break;
        int rc = ops->compute(ctx, k, d, &p.err_cpu);
        pthread_mutex_lock(&p.mu);
        if (rc) {
            p.rc_cpu = rc;
            p.failed = 1;
        } else {
            p.ncomputed = k + 1;
        }
        pthread_cond_broadcast(&p.cv);
        pthread_mutex_unlock(&p.mu);
        if (rc)
            break;
    }
    pthread_join(th, NULL);
    /* Blocks read but never written (a failure cut the run short) still go back to their owner. */
    for (int s = 0; s < SLOTS; s++)
        if (p.data[s])
            ops->finish(ctx, p.idx[s], p.data[s], 0);
    int rc = p.rc_cpu ? p.rc_cpu : p.rc_io;
    if (err && rc)
        *err = p.rc_cpu ? p.err_cpu : p.err_io;
    pthread_mutex_destroy(&p.mu);
    pthread_cond_destroy(&p.cv);
    return rc;
}
