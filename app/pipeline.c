#include "pipeline.h"

#include <pthread.h>
#include <stdlib.h>

/* A block's life: read by an I/O thread, waiting, computed by the caller's thread, waiting, written
 * by an I/O thread. A slot holds one block from the start of its read until it is finished. */
typedef enum { S_FREE, S_READING, S_READ, S_COMPUTING, S_COMPUTED, S_WRITING } slot_state;

typedef struct slot {
    slot_state st;
    uint64_t idx;
    void *data;
} slot;

typedef struct pipe {
    const hq_pipeline_ops *ops;
    void *ctx;
    uint64_t n;
    int depth;
    slot *slots; /* depth of them */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t next_read; /* the next block whose read starts */
    uint64_t taken;     /* blocks the compute thread has started */
    int alive;          /* slots in use */
    int compute_done;   /* the compute thread marks no more blocks computed */
    int failed;         /* no new call starts */
    int rc;
    hq_err err;         /* the first failure's message */
} pipe_t;

int hq_pipeline_depth_for(int io_threads)
{
    const int d = (io_threads > 0 ? io_threads : 1) + 2;
    return d < HQ_PIPELINE_MIN_DEPTH ? HQ_PIPELINE_MIN_DEPTH : d;
}

/* ---- with the lock held ---- */

static void fail_locked(pipe_t *p, int rc, const hq_err *e)
{
    if (!p->failed) {
        p->failed = 1;
        p->rc = rc;
        p->err = *e;
    }
    pthread_cond_broadcast(&p->cv);
}

static slot *find_block(pipe_t *p, slot_state st, uint64_t idx)
{
    for (int s = 0; s < p->depth; s++)
        if (p->slots[s].st == st && p->slots[s].idx == idx)
            return &p->slots[s];
    return NULL;
}

/* The computed block written first: the oldest, so that writes start in block order. */
static slot *oldest_computed(pipe_t *p)
{
    slot *best = NULL;
    for (int s = 0; s < p->depth; s++)
        if (p->slots[s].st == S_COMPUTED && (!best || p->slots[s].idx < best->idx))
            best = &p->slots[s];
    return best;
}

static slot *take_free_slot(pipe_t *p)
{
    for (int s = 0; s < p->depth; s++)
        if (p->slots[s].st == S_FREE) {
            p->alive++;
            return &p->slots[s];
        }
    return NULL; /* never: callers check alive < depth */
}

static void free_slot_locked(pipe_t *p, slot *s)
{
    s->st = S_FREE;
    s->data = NULL;
    p->alive--;
    pthread_cond_broadcast(&p->cv);
}

/* ---- the I/O threads ---- */

static void read_one(pipe_t *p, hq_err *e)
{
    slot *s = take_free_slot(p);
    s->st = S_READING;
    s->idx = p->next_read++;
    const uint64_t i = s->idx;
    pthread_mutex_unlock(&p->mu);
    void *d = NULL;
    int rc = p->ops->read(p->ctx, i, &d, e);
    if (rc && d)
        p->ops->finish(p->ctx, i, d, 0);
    pthread_mutex_lock(&p->mu);
    if (rc) {
        free_slot_locked(p, s);
        fail_locked(p, rc, e);
        return;
    }
    s->data = d;
    s->st = S_READ;
    pthread_cond_broadcast(&p->cv);
}

static void write_one(pipe_t *p, slot *s, hq_err *e)
{
    s->st = S_WRITING;
    const uint64_t i = s->idx;
    void *d = s->data;
    pthread_mutex_unlock(&p->mu);
    int rc = p->ops->write(p->ctx, i, d, e);
    p->ops->finish(p->ctx, i, d, rc == 0);
    pthread_mutex_lock(&p->mu);
    free_slot_locked(p, s);
    if (rc)
        fail_locked(p, rc, e);
}

static void *io_thread(void *arg)
{
    pipe_t *p = arg;
    hq_err e = {{0}};
    pthread_mutex_lock(&p->mu);
    while (!p->failed) {
        slot *w = p->ops->write ? oldest_computed(p) : NULL;
        const int can_read = p->next_read < p->n && p->alive < p->depth;
        /* Writing first frees memory soonest; reading first when the compute thread would
         * otherwise run dry. */
        if (can_read && (!w || p->next_read <= p->taken)) {
            read_one(p, &e);
        } else if (w) {
            write_one(p, w, &e);
        } else if (p->next_read >= p->n && (!p->ops->write || p->compute_done)) {
            break; /* nothing left to read, and nothing more will come to write */
        } else {
            pthread_cond_wait(&p->cv, &p->mu);
        }
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* ---- the caller's thread ---- */

static void compute_all(pipe_t *p)
{
    hq_err e = {{0}};
    for (uint64_t k = 0; k < p->n; k++) {
        pthread_mutex_lock(&p->mu);
        slot *s = NULL;
        while (!p->failed && !(s = find_block(p, S_READ, k)))
            pthread_cond_wait(&p->cv, &p->mu);
        if (p->failed) {
            pthread_mutex_unlock(&p->mu);
            break;
        }
        s->st = S_COMPUTING;
        p->taken = k + 1;
        pthread_cond_broadcast(&p->cv); /* an I/O thread may now prefer to read ahead */
        pthread_mutex_unlock(&p->mu);
        int rc = p->ops->compute(p->ctx, k, s->data, &e);
        if (!rc && p->ops->write) {
            pthread_mutex_lock(&p->mu);
            s->st = S_COMPUTED;
            pthread_cond_broadcast(&p->cv);
            pthread_mutex_unlock(&p->mu);
            continue;
        }
        /* Nothing to write, or the compute failed: the block ends here. */
        p->ops->finish(p->ctx, k, s->data, rc == 0);
        pthread_mutex_lock(&p->mu);
        free_slot_locked(p, s);
        if (rc)
            fail_locked(p, rc, &e);
        pthread_mutex_unlock(&p->mu);
        if (rc)
            break;
    }
    pthread_mutex_lock(&p->mu);
    p->compute_done = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
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

int hq_pipeline_run(const hq_pipeline_ops *ops, void *ctx, uint64_t n, const hq_pipeline_cfg *cfg, hq_err *err)
{
    if (n == 0)
        return 0;
    if (!cfg || cfg->io_threads <= 0)
        return run_serial(ops, ctx, n, err);
    pipe_t p = {.ops = ops, .ctx = ctx, .n = n};
    p.depth = cfg->depth < HQ_PIPELINE_MIN_DEPTH ? HQ_PIPELINE_MIN_DEPTH : cfg->depth;
    p.slots = calloc((size_t)p.depth, sizeof *p.slots);
    pthread_t *th = calloc((size_t)cfg->io_threads, sizeof *th);
    if (!p.slots || !th) {
        free(p.slots);
        free(th);
        return run_serial(ops, ctx, n, err);
    }
    pthread_mutex_init(&p.mu, NULL);
    pthread_cond_init(&p.cv, NULL);
    int started = 0;
    while (started < cfg->io_threads && pthread_create(&th[started], NULL, io_thread, &p) == 0)
        started++;
    int rc;
    if (started == 0) {
        rc = run_serial(ops, ctx, n, err);
    } else {
        compute_all(&p);
        for (int t = 0; t < started; t++)
            pthread_join(th[t], NULL);
        /* Blocks read but never written (a failure cut the run short) still go back to their owner. */
        for (int s = 0; s < p.depth; s++)
            if (p.slots[s].st != S_FREE && p.slots[s].data)
                ops->finish(ctx, p.slots[s].idx, p.slots[s].data, 0);
        rc = p.rc;
        if (err && rc)
            *err = p.err;
    }
    pthread_mutex_destroy(&p.mu);
    pthread_cond_destroy(&p.cv);
    free(p.slots);
    free(th);
    return rc;
}
