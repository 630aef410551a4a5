/* The I/O pipeline: every block is computed and written once, computes in order, on every thread
 * layout (serial, one I/O thread, several); a failure anywhere stops the run and still hands every
 * produced block back exactly once; at most `depth` blocks are alive, and the depth is used; one
 * I/O thread makes every I/O call, one at a time; reads and writes overlap compute and, with
 * several I/O threads, each other. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "../../app/pipeline.h"

#define MAXB 64

typedef struct log {
    uint64_t fail_read, fail_compute, fail_write; /* block index to fail at, or UINT64_MAX */
    int computed[MAXB], written[MAXB], finished[MAXB], produced[MAXB];
    uint64_t last_computed, last_written;
    int strict_write_order; /* one I/O thread: writes in block order */
    int order_ok;
    int alive, max_alive;
    int in_io, max_in_io;   /* I/O calls under way at once */
    int threads_ok;         /* compute on the caller's thread; with one I/O thread, all I/O on one */
    pthread_t caller, io;
    int have_io;
    pthread_mutex_t mu;     /* guards have_io/io */
    long compute_sleep_us;
} log_t;

static void bump_max(int *v, int *max, int by)
{
    int a = __atomic_add_fetch(v, by, __ATOMIC_SEQ_CST);
    int m = __atomic_load_n(max, __ATOMIC_SEQ_CST);
    while (a > m && !__atomic_compare_exchange_n(max, &m, a, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
        ;
}

static void note_io_thread(log_t *l)
{
    pthread_mutex_lock(&l->mu);
    if (!l->have_io) {
        l->io = pthread_self();
        l->have_io = 1;
    } else if (l->strict_write_order && !pthread_equal(l->io, pthread_self())) {
        l->threads_ok = 0;
    }
    pthread_mutex_unlock(&l->mu);
}

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static int rd(void *ctx, uint64_t i, void **data, hq_err *err)
{
    log_t *l = ctx;
    note_io_thread(l);
    bump_max(&l->in_io, &l->max_in_io, 1);
    int rc = 0;
    if (i == l->fail_read) {
        rc = hq_fail(err, HQ_EIO, "read %llu", (unsigned long long)i);
    } else {
        int *p = malloc(sizeof *p);
        *p = (int)i;
        *data = p;
        l->produced[i]++;
        bump_max(&l->alive, &l->max_alive, 1);
    }
    __atomic_sub_fetch(&l->in_io, 1, __ATOMIC_SEQ_CST);
    return rc;
}

static int cp(void *ctx, uint64_t i, void *data, hq_err *err)
{
    log_t *l = ctx;
    if (*(int *)data != (int)i || (i > 0 && l->last_computed != i - 1))
        l->order_ok = 0;
    if (!pthread_equal(pthread_self(), l->caller))
        l->threads_ok = 0;
    l->last_computed = i;
    if (l->compute_sleep_us)
        sleep_us(l->compute_sleep_us);
    if (i == l->fail_compute)
        return hq_fail(err, HQ_EMEM, "compute %llu", (unsigned long long)i);
    l->computed[i]++;
    return 0;
}

static int wr(void *ctx, uint64_t i, void *data, hq_err *err)
{
    log_t *l = ctx;
    note_io_thread(l);
    bump_max(&l->in_io, &l->max_in_io, 1);
    if (*(int *)data != (int)i || !l->computed[i])
        l->order_ok = 0;
    if (l->strict_write_order) {
        if (i > 0 && l->last_written != i - 1)
            l->order_ok = 0;
        l->last_written = i;
    }
    int rc = 0;
    if (i == l->fail_write)
        rc = hq_fail(err, HQ_EIO, "write %llu", (unsigned long long)i);
    else
        l->written[i]++;
    __atomic_sub_fetch(&l->in_io, 1, __ATOMIC_SEQ_CST);
    return rc;
}

static void fin(void *ctx, uint64_t i, void *data, int ok)
{
    log_t *l = ctx;
    (void)ok;
    __atomic_add_fetch(&l->finished[i], 1, __ATOMIC_SEQ_CST);
    __atomic_sub_fetch(&l->alive, 1, __ATOMIC_SEQ_CST);
    free(data);
}

static const hq_pipeline_ops OPS = {rd, cp, wr, fin};

/* Thread layouts: serial, one I/O thread (the least depth), and several. */
static const hq_pipeline_cfg CFGS[] = {{0, 0}, {1, 3}, {1, 5}, {2, 4}, {4, 6}, {3, 3}};
#define NCFG (sizeof CFGS / sizeof CFGS[0])

static void reset(log_t *l, const hq_pipeline_cfg *cfg)
{
    memset(l, 0, sizeof *l);
    l->fail_read = l->fail_compute = l->fail_write = UINT64_MAX;
    l->order_ok = 1;
    l->threads_ok = 1;
    l->strict_write_order = cfg->io_threads <= 1;
    l->caller = pthread_self();
    pthread_mutex_init(&l->mu, NULL);
}

static int depth_of(const hq_pipeline_cfg *cfg)
{
    if (cfg->io_threads <= 0)
        return 1;
    return cfg->depth < HQ_PIPELINE_MIN_DEPTH ? HQ_PIPELINE_MIN_DEPTH : cfg->depth;
}

static void all_blocks(void **state)
{
    (void)state;
    for (size_t c = 0; c < NCFG; c++)
        for (uint64_t n = 0; n < 20; n++) {
            log_t l;
            reset(&l, &CFGS[c]);
            hq_err e;
            assert_int_equal(hq_pipeline_run(&OPS, &l, n, &CFGS[c], &e), 0);
            assert_true(l.order_ok);
            assert_true(l.threads_ok);
            assert_true(l.max_alive <= depth_of(&CFGS[c]));
            if (CFGS[c].io_threads <= 1)
                assert_true(l.max_in_io <= 1); /* one I/O call at a time */
            assert_int_equal(l.alive, 0);
            for (uint64_t i = 0; i < n; i++) {
                assert_int_equal(l.computed[i], 1);
                assert_int_equal(l.written[i], 1);
                assert_int_equal(l.finished[i], 1);
            }
        }
}

/* A histogram-only pass: no write stage; every block still finished once, after its compute. */
static void no_write(void **state)
{
    (void)state;
    const hq_pipeline_ops ops = {rd, cp, NULL, fin};
    for (size_t c = 0; c < NCFG; c++) {
        log_t l;
        reset(&l, &CFGS[c]);
        hq_err e;
        assert_int_equal(hq_pipeline_run(&ops, &l, 17, &CFGS[c], &e), 0);
        assert_true(l.order_ok);
        for (uint64_t i = 0; i < 17; i++) {
            assert_int_equal(l.computed[i], 1);
            assert_int_equal(l.written[i], 0);
            assert_int_equal(l.finished[i], 1);
        }
    }
}

static void failures(void **state)
{
    (void)state;
    const uint64_t n = 12;
    for (size_t c = 0; c < NCFG; c++)
        for (int where = 0; where < 3; where++)
            for (uint64_t k = 0; k < n; k++) {
                log_t l;
                reset(&l, &CFGS[c]);
                if (where == 0)
                    l.fail_read = k;
                else if (where == 1)
                    l.fail_compute = k;
                else
                    l.fail_write = k;
                hq_err e = {{0}};
                int rc = hq_pipeline_run(&OPS, &l, n, &CFGS[c], &e);
                assert_int_equal(rc, where == 1 ? HQ_EMEM : HQ_EIO);
                assert_non_null(strstr(e.msg, where == 0 ? "read" : where == 1 ? "compute" : "write"));
                for (uint64_t i = 0; i < n; i++) {
                    assert_int_equal(l.finished[i], l.produced[i]); /* nothing leaked, nothing freed twice */
                    assert_true(l.written[i] <= 1);
                }
                assert_int_equal(l.alive, 0);
                /* Computes run in order and stop at a failed read or compute, and only computed
                 * blocks are written: nothing at or past k. One I/O thread also stops writing at
                 * a failed write; several may have later writes under way already. */
                const uint64_t from = where == 2 ? k + 1 : k;
                if (where < 2 || CFGS[c].io_threads <= 1)
                    for (uint64_t i = from; i < n; i++)
                        assert_int_equal(l.written[i], 0);
                if (where < 2)
                    for (uint64_t i = k; i < n; i++)
                        assert_int_equal(l.computed[i], 0);
            }
}

/* ---- overlap: calls that wait for another call, which only a pipeline that overlaps them makes
 * possible; a pipeline that does not would leave them waiting until the timeout, and fail. ---- */

typedef struct olap {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int read_done[MAXB], write_done[MAXB], read_started[MAXB];
    int reads_started;
    int timeouts;
    int mode; /* 0: compute k waits for read k+1 and write k-1; 1: read 0 waits for read 1 to start,
                 write 0 for a read to start after it */
    uint64_t n;
} olap;

/* Waits until *flag, at most 10 s (counted as a failure). Called with o->mu held. */
static void wait_flag(olap *o, const int *flag)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    while (!*flag)
        if (pthread_cond_timedwait(&o->cv, &o->mu, &until) != 0) {
            o->timeouts++;
            return;
        }
}

static int o_rd(void *ctx, uint64_t i, void **data, hq_err *err)
{
    (void)err;
    olap *o = ctx;
    pthread_mutex_lock(&o->mu);
    o->read_started[i] = 1;
    o->reads_started++;
    pthread_cond_broadcast(&o->cv);
    if (o->mode == 1 && i == 0)
        wait_flag(o, &o->read_started[1]);
    pthread_mutex_unlock(&o->mu);
    *data = malloc(1);
    pthread_mutex_lock(&o->mu);
    o->read_done[i] = 1;
    pthread_cond_broadcast(&o->cv);
    pthread_mutex_unlock(&o->mu);
    return 0;
}

static int o_cp(void *ctx, uint64_t i, void *data, hq_err *err)
{
    (void)data, (void)err;
    olap *o = ctx;
    pthread_mutex_lock(&o->mu);
    if (o->mode == 0 && i + 1 < o->n)
        wait_flag(o, &o->read_done[i + 1]);
    if (o->mode == 0 && i >= 1)
        wait_flag(o, &o->write_done[i - 1]);
    pthread_mutex_unlock(&o->mu);
    return 0;
}

static int o_wr(void *ctx, uint64_t i, void *data, hq_err *err)
{
    (void)data, (void)err;
    olap *o = ctx;
    pthread_mutex_lock(&o->mu);
    if (o->mode == 1 && i == 0 && o->reads_started < (int)o->n) {
        int later = o->reads_started;
        /* a read that starts while this write is under way */
        while (o->reads_started == later && o->timeouts == 0) {
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_sec += 10;
            if (pthread_cond_timedwait(&o->cv, &o->mu, &until) != 0)
                o->timeouts++;
        }
    }
    o->write_done[i] = 1;
    pthread_cond_broadcast(&o->cv);
    pthread_mutex_unlock(&o->mu);
    return 0;
}

static void o_fin(void *ctx, uint64_t i, void *data, int ok)
{
    (void)ctx, (void)i, (void)ok;
    free(data);
}

static void run_olap(int mode, const hq_pipeline_cfg *cfg, uint64_t n)
{
    olap o;
    memset(&o, 0, sizeof o);
    pthread_mutex_init(&o.mu, NULL);
    pthread_cond_init(&o.cv, NULL);
    o.mode = mode;
    o.n = n;
    const hq_pipeline_ops ops = {o_rd, o_cp, o_wr, o_fin};
    hq_err e;
    assert_int_equal(hq_pipeline_run(&ops, &o, n, cfg, &e), 0);
    assert_int_equal(o.timeouts, 0);
    pthread_mutex_destroy(&o.mu);
    pthread_cond_destroy(&o.cv);
}

/* One I/O thread at the least depth: block k+1 is read and block k-1 written while k computes. */
static void overlap_compute(void **state)
{
    (void)state;
    const hq_pipeline_cfg one = {1, 3}, two = {2, 4};
    run_olap(0, &one, 12);
    run_olap(0, &two, 12);
}

/* Several I/O threads: two reads at once, and a read while a write is under way. */
static void overlap_io(void **state)
{
    (void)state;
    const hq_pipeline_cfg two = {2, 4}, four = {4, 6};
    run_olap(1, &two, 16);
    run_olap(1, &four, 16);
}

/* The depth is used, and never exceeded: with a slow compute, reads run ahead until `depth`
 * blocks are alive. */
static void depth_reached(void **state)
{
    (void)state;
    const hq_pipeline_cfg cfgs[] = {{1, 3}, {1, 6}, {3, 5}, {2, 8}};
    for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++) {
        log_t l;
        reset(&l, &cfgs[c]);
        l.compute_sleep_us = 3000;
        hq_err e;
        assert_int_equal(hq_pipeline_run(&OPS, &l, 24, &cfgs[c], &e), 0);
        assert_int_equal(l.max_alive, cfgs[c].depth);
        assert_true(l.order_ok);
    }
    assert_int_equal(hq_pipeline_depth_for(0), HQ_PIPELINE_MIN_DEPTH);
    assert_int_equal(hq_pipeline_depth_for(1), HQ_PIPELINE_MIN_DEPTH);
    assert_int_equal(hq_pipeline_depth_for(6), 8);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(all_blocks),
        cmocka_unit_test(no_write),
        cmocka_unit_test(failures),
        cmocka_unit_test(overlap_compute),
        cmocka_unit_test(overlap_io),
        cmocka_unit_test(depth_reached),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
