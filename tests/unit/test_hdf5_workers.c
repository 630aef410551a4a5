/* test_hdf5_workers.c — the HDF5 direct path's own machinery, without a file: codec.c against zlib
 * and HDF5's shuffle layout (stated here element by element), pool.c's task runs (every task once,
 * ordered consumption in order and never more than `window` ahead, the first failure stopping the
 * rest) for 1 to 4 threads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <zlib.h>

#include "../../core/sample.h"
#include "../../io/hdf5/hdf5_internal.h"

static unsigned char *sample(size_t n, unsigned seed)
{
    unsigned char *p = malloc(n);
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        p[i] = (unsigned char)((i / 7) % 50 + ((x >> 16) & 3)); /* compressible, not constant */
    }
    return p;
}

static void test_shuffle_is_hdf5s_layout(void **state)
{
    (void)state;
    const size_t elem = 2, n = 2 * 1001 + 1; /* a byte past the last whole element stays put */
    unsigned char *src = sample(n, 1), *sh = malloc(n), *back = malloc(n);
    hdf5_shuffle(sh, src, n, elem);
    for (size_t i = 0; i < n / elem; i++)
        for (size_t j = 0; j < elem; j++)
            assert_int_equal(sh[j * (n / elem) + i], src[i * elem + j]);
    assert_int_equal(sh[n - 1], src[n - 1]);
    hdf5_unshuffle(back, sh, n, elem);
    assert_memory_equal(back, src, n);
    hdf5_shuffle(sh, src, n, 1); /* one-byte elements: unchanged */
    assert_memory_equal(sh, src, n);
    free(src);
    free(sh);
    free(back);
}

static void test_swap16(void **state)
{
    (void)state;
    unsigned char p[6] = {1, 2, 3, 4, 5, 6};
    hq_swap16(p, sizeof p);
    const unsigned char want[6] = {2, 1, 4, 3, 6, 5};
    assert_memory_equal(p, want, sizeof p);
}

/* Our deflate must be a zlib stream zlib reads; our inflate must read zlib's, and refuse a
 * stream of the wrong length or a damaged one. */
static void test_deflate_talks_zlib(void **state)
{
    (void)state;
    const size_t n = 1 << 20;
    unsigned char *src = sample(n, 2), *out = malloc(n);
    hdf5_codec *c = hdf5_codec_new();
    for (int level = 0; level <= 9; level += 3) {
        const size_t cap = hdf5_deflate_bound(c, level, n);
        unsigned char *z = malloc(cap);
        const size_t zn = hdf5_deflate(c, level, src, n, z, cap);
        assert_true(zn > 0);
        uLongf got = n;
        assert_int_equal(uncompress(out, &got, z, zn), Z_OK);
        assert_int_equal(got, n);
        assert_memory_equal(out, src, n);
        free(z);
    }
    uLongf zn = compressBound(n);
    unsigned char *z = malloc(zn);
    assert_int_equal(compress2(z, &zn, src, n, 1), Z_OK);
    memset(out, 0, n);
    assert_int_equal(hdf5_inflate(c, z, zn, out, n), 0);
    assert_memory_equal(out, src, n);
    assert_int_not_equal(hdf5_inflate(c, z, zn, out, n - 1), 0); /* longer than said */
    unsigned char *big = malloc(n + 1);
    assert_int_not_equal(hdf5_inflate(c, z, zn, big, n + 1), 0); /* shorter than said */
    z[zn / 2] ^= 0x55;
    z[zn / 2 + 1] ^= 0xaa;
    assert_int_not_equal(hdf5_inflate(c, z, zn, out, n), 0); /* the Adler-32 check catches it */
    free(big);
    free(z);
    hdf5_codec_free(c);
    free(src);
    free(out);
}

typedef struct job {
    uint64_t n, fail_at, window;
    int *ran, *seen;  /* per task: fn calls, consume calls */
    uint64_t next;    /* the next task consume expects */
    uint64_t started; /* fn calls begun; checked against the window */
    int bad_order, too_far;
    int threads;
    int used[8];
} job;

static int fn(void *ctx, uint64_t i, int worker)
{
    job *j = ctx;
    __atomic_add_fetch(&j->ran[i], 1, __ATOMIC_SEQ_CST);
    if (worker < 0 || worker >= j->threads)
        return 9;
    __atomic_store_n(&j->used[worker], 1, __ATOMIC_SEQ_CST);
    if (j->window && i >= __atomic_load_n(&j->next, __ATOMIC_SEQ_CST) + j->window)
        __atomic_store_n(&j->too_far, 1, __ATOMIC_SEQ_CST);
    volatile double x = 0; /* a little work, so that tasks overlap */
    for (int k = 0; k < 20000; k++)
        x += k;
    return i == j->fail_at ? 7 : 0;
}

static int consume(void *ctx, uint64_t i)
{
    job *j = ctx;
    if (i != j->next || j->ran[i] != 1)
        j->bad_order = 1;
    j->seen[i]++;
    __atomic_store_n(&j->next, i + 1, __ATOMIC_SEQ_CST);
    return 0;
}

static void run_job(int threads, uint64_t n, uint64_t fail_at, int ordered, uint64_t window)
{
    hdf5_pool *p = threads > 1 ? hdf5_pool_new(threads) : NULL;
    job j = {.n = n, .fail_at = fail_at, .window = ordered ? window : 0, .threads = hdf5_pool_threads(p)};
    j.ran = calloc(n + 1, sizeof *j.ran);
    j.seen = calloc(n + 1, sizeof *j.seen);
    const int rc = hdf5_pool_run(p, n, fn, ordered ? consume : NULL, &j, window);
    assert_int_equal(rc, fail_at < n ? 7 : 0);
    for (uint64_t i = 0; i < n; i++) {
        assert_true(j.ran[i] <= 1);
        if (fail_at >= n)
            assert_int_equal(j.ran[i], 1);
        if (ordered && fail_at >= n)
            assert_int_equal(j.seen[i], 1);
    }
    if (fail_at < n)
        for (uint64_t i = 0; i < n; i++)
            assert_true(!j.seen[i] || i < fail_at); /* nothing consumed past the failure */
    assert_false(j.bad_order);
    assert_false(j.too_far);
    free(j.ran);
    free(j.seen);
    hdf5_pool_free(p);
}

static void test_pool_runs_every_task_once(void **state)
{
    (void)state;
    for (int t = 1; t <= 4; t++)
        for (uint64_t n = 0; n < 70; n += 23) {
            run_job(t, n, UINT64_MAX, 0, 0);
            run_job(t, n, UINT64_MAX, 1, 3);
        }
}

static void test_pool_stops_at_the_first_failure(void **state)
{
    (void)state;
    for (int t = 1; t <= 4; t++) {
        run_job(t, 50, 17, 0, 0);
        run_job(t, 50, 17, 1, 2);
        run_job(t, 50, 0, 1, 1);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shuffle_is_hdf5s_layout),   cmocka_unit_test(test_swap16),
        cmocka_unit_test(test_deflate_talks_zlib),        cmocka_unit_test(test_pool_runs_every_task_once),
        cmocka_unit_test(test_pool_stops_at_the_first_failure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
