/* The I/O pipeline: every block is computed and written once, in order, on either thread layout;
 * a failure anywhere stops the run and still hands every produced block back exactly once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "../../app/pipeline.h"

#define MAXB 64

typedef struct log {
    uint64_t fail_read, fail_compute, fail_write; /* block index to fail at, or UINT64_MAX */
    int computed[MAXB], written[MAXB], finished[MAXB], produced[MAXB];
    uint64_t last_computed, last_written;
    int order_ok;
    int alive, max_alive;
} log_t;

static int rd(void *ctx, uint64_t i, void **data, hq_err *err)
{
    log_t *l = ctx;
    if (i == l->fail_read)
        return hq_fail(err, HQ_EIO, "read %llu", (unsigned long long)i);
    int *p = malloc(sizeof *p);
    *p = (int)i;
    *data = p;
    l->produced[i]++;
    __atomic_add_fetch(&l->alive, 1, __ATOMIC_SEQ_CST);
    int a = __atomic_load_n(&l->alive, __ATOMIC_SEQ_CST);
    if (a > l->max_alive)
        l->max_alive = a;
    return 0;
}

static int cp(void *ctx, uint64_t i, void *data, hq_err *err)
{
    log_t *l = ctx;
    if (*(int *)data != (int)i || (i > 0 && l->last_computed != i - 1))
        l->order_ok = 0;
    l->last_computed = i;
    if (i == l->fail_compute)
        return hq_fail(err, HQ_EMEM, "compute %llu", (unsigned long long)i);
    l->computed[i]++;
    return 0;
}

static int wr(void *ctx, uint64_t i, void *data, hq_err *err)
{
    log_t *l = ctx;
    if (*(int *)data != (int)i || !l->computed[i] || (i > 0 && l->last_written != i - 1))
        l->order_ok = 0;
    l->last_written = i;
    if (i == l->fail_write)
        return hq_fail(err, HQ_EIO, "write %llu", (unsigned long long)i);
    l->written[i]++;
    return 0;
}

static void fin(void *ctx, uint64_t i, void *data, int ok)
{
    log_t *l = ctx;
    (void)ok;
    l->finished[i]++;
    __atomic_sub_fetch(&l->alive, 1, __ATOMIC_SEQ_CST);
    free(data);
}

static const hq_pipeline_ops OPS = {rd, cp, wr, fin};

static void reset(log_t *l)
{
    memset(l, 0, sizeof *l);
    l->fail_read = l->fail_compute = l->fail_write = UINT64_MAX;
    l->order_ok = 1;
}

static void all_blocks(void **state)
{
    (void)state;
    for (int threaded = 0; threaded < 2; threaded++)
        for (uint64_t n = 0; n < 20; n++) {
            log_t l;
            reset(&l);
            hq_err e;
            assert_int_equal(hq_pipeline_run(&OPS, &l, n, threaded, &e), 0);
            assert_true(l.order_ok);
            assert_true(l.max_alive <= 3);
            for (uint64_t i = 0; i < n; i++) {
                assert_int_equal(l.computed[i], 1);
                assert_int_equal(l.written[i], 1);
                assert_int_equal(l.finished[i], 1);
            }
        }
}

static void failures(void **state)
{
    (void)state;
    const uint64_t n = 12;
    for (int threaded = 0; threaded < 2; threaded++)
        for (int where = 0; where < 3; where++)
            for (uint64_t k = 0; k < n; k++) {
                log_t l;
                reset(&l);
                if (where == 0)
                    l.fail_read = k;
                else if (where == 1)
                    l.fail_compute = k;
                else
                    l.fail_write = k;
                hq_err e = {{0}};
                int rc = hq_pipeline_run(&OPS, &l, n, threaded, &e);
                assert_int_equal(rc, where == 1 ? HQ_EMEM : HQ_EIO);
                assert_non_null(strstr(e.msg, where == 0 ? "read" : where == 1 ? "compute" : "write"));
                for (uint64_t i = 0; i < n; i++) {
                    assert_int_equal(l.finished[i], l.produced[i]); /* nothing leaked, nothing freed twice */
                    assert_true(l.written[i] <= 1);
                }
                assert_int_equal(l.alive, 0);
                for (uint64_t i = k + 1; i < n; i++)
                    assert_int_equal(l.written[i], 0); /* nothing written past a failure */
            }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(all_blocks),
        cmocka_unit_test(failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
