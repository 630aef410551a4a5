/* test_fbin.c — float binning (core/fbin.h) and the CPU engine's float path (engine/cpu/float_path.c).
 *
 * Bins are checked where the answer is known by hand (edges, exact quarters, clamps, a constant
 * group), for monotonicity over random samples, against long-double arithmetic away from bin
 * edges, and at the overflow edge of float64 ranges; the engine against a plain loop over the same
 * rule, at several thread counts, with NaN and infinite samples. */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../core/fbin.h"
#include "../../core/lut.h"
#include "../../engine/engine.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
static double unit(void)
{
    return (double)(rnd() >> 11) * 0x1p-53;
}

/* What both engines skip, count apart or bin: against the C library's own classification. */
static void test_sample_kinds(void **state)
{
    (void)state;
    const double xs[] = {0.0, -0.0, 1.0, -1.0, DBL_MAX, -DBL_MAX, DBL_MIN, -DBL_MIN, 0x1p-1074, -0x1p-1074,
                         (double)FLT_MAX, INFINITY, -INFINITY, NAN, -NAN};
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
        const double x = xs[i];
        const hq_fsample want = isnan(x) ? HQ_FS_NAN : isinf(x) ? HQ_FS_INF : HQ_FS_FINITE;
        assert_int_equal(hq_fsample_of(x), want);
        assert_int_equal(hq_fsample_of((double)(float)x), isnan(x) ? HQ_FS_NAN : isinf((float)x) ? HQ_FS_INF
                                                                                              : HQ_FS_FINITE);
    }
}

static void test_edges_and_quarters(void **state)
{
    (void)state;
    const hq_fbin p = hq_fbin_make(-2.0, 2.0, 4);
    assert_false(p.flat);
    assert_int_equal(hq_fbin_of(-2.0, &p), 0);
    assert_int_equal(hq_fbin_of(-1.0000001, &p), 0);
    assert_int_equal(hq_fbin_of(-1.0, &p), 1);
    assert_int_equal(hq_fbin_of(0.0, &p), 2);
    assert_int_equal(hq_fbin_of(-0.0, &p), 2);
    assert_int_equal(hq_fbin_of(1.0, &p), 3);
    assert_int_equal(hq_fbin_of(1.999, &p), 3);
    assert_int_equal(hq_fbin_of(2.0, &p), 3); /* the maximum: floor(N) = N -> N - 1 */
    /* --range clamps */
    assert_int_equal(hq_fbin_of(-1e300, &p), 0);
    assert_int_equal(hq_fbin_of(7.0, &p), 3);
    assert_int_equal(hq_fbin_of(INFINITY, &p), 3);
    assert_int_equal(hq_fbin_of(-INFINITY, &p), 0);
}

static void test_constant_group(void **state)
{
    (void)state;
    const hq_fbin p = hq_fbin_make(3.5, 3.5, 65536);
    assert_true(p.flat);
    assert_int_equal(hq_fbin_of(3.5, &p), 0);
    assert_int_equal(hq_fbin_of(-1e9, &p), 0);
    const hq_fbin q = hq_fbin_make(NAN, NAN, 256); /* no finite sample */
    assert_true(q.flat);
}

static void test_negative_zero_normalized(void **state)
{
    (void)state;
    const hq_fbin p = hq_fbin_make(-0.0, -0.0, 16), q = hq_fbin_make(-1.0, -0.0, 16);
    assert_false(signbit(p.lo));
    assert_false(signbit(p.hi));
    assert_false(signbit(q.hi));
}

static void test_monotone_and_reference(void **state)
{
    (void)state;
    static const uint32_t ns[] = {2, 3, 256, 1000, 65536};
    for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
        const uint32_t n = ns[k];
        const double lo = -1000 * unit(), hi = lo + 1e-3 + 5000 * unit();
        const hq_fbin p = hq_fbin_make(lo, hi, n);
        double prev = lo;
        uint32_t prev_b = 0;
        for (int i = 0; i < 20000; i++) {
            const double x = prev + (hi - lo) * unit() / 10000;
            if (x > hi)
                break;
            const uint32_t b = hq_fbin_of(x, &p);
            assert_true(b >= prev_b);
            assert_true(b < n);
            /* Away from a bin edge, exact arithmetic agrees. */
            const long double t = ((long double)x - lo) * n / ((long double)hi - lo);
            if (t - floorl(t) > 1e-6L && t - floorl(t) < 1 - 1e-6L && t < n)
                assert_int_equal(b, (uint32_t)floorl(t));
            prev = x;
            prev_b = b;
        }
    }
}

static void test_float64_overflow_range(void **state)
{
    (void)state;
    const hq_fbin p = hq_fbin_make(-DBL_MAX, DBL_MAX, 65536);
    assert_false(p.flat);
    assert_true(p.scale < 1.0);
    assert_true(isfinite(p.w_s));
    assert_int_equal(hq_fbin_of(-DBL_MAX, &p), 0);
    assert_int_equal(hq_fbin_of(0.0, &p), 32768);
    assert_int_equal(hq_fbin_of(DBL_MAX / 2, &p), 49152);
    assert_int_equal(hq_fbin_of(DBL_MAX, &p), 65535);
    const hq_fbin q = hq_fbin_make(0.0, 1e305, 65536); /* (hi - lo) * N overflows: scaled as well */
    assert_true(q.scale < 1.0);
    assert_int_equal(hq_fbin_of(0.5e305, &q), 32768);
    const hq_fbin r = hq_fbin_make(0.0, 1e300, 65536); /* no overflow: as written */
    assert_true(r.scale == 1.0);
}

static void test_output_values(void **state)
{
    (void)state;
    assert_true(hq_fout(0, 256) == 0.0);
    assert_true(hq_fout(255, 256) == 1.0);
    assert_true(hq_fout(1, 1000) == 1.0 / 999.0);
    assert_true(hq_fout32(1, 1000) == (float)(1.0 / 999.0));
    assert_true(hq_fout32(65535, 65536) == 1.0f);
}

/* ---- the CPU engine ---- */

static void ref_hist(const double *x, uint64_t n, const hq_fbin *p, uint64_t *h)
{
    for (uint64_t i = 0; i < n; i++)
        if (!isnan(x[i]))
            h[hq_fbin_of(x[i], p)]++;
}

static void engine_case(int threads, uint32_t bins, int f32, uint64_t *hist_out, void *out)
{
    enum { NSEG = 3, SP = 70001 };
    hq_engine *e;
    hq_err err;
    hq_engine_cfg cfg = {threads, 0, 1, 0};
    assert_int_equal(hq_cpu_engine_create(&cfg, &e, &err), 0);
    double *x = malloc(NSEG * SP * sizeof *x);
    rng = 12345;
    for (uint64_t i = 0; i < NSEG * SP; i++) {
        const uint64_t s = i / SP;
        x[i] = s == 2 ? 42.0 : (s + 1) * 100.0 * (unit() - 0.3) * unit();
        if (i % 97 == 5)
            x[i] = NAN;
    }
    void *data = f32 ? malloc(NSEG * SP * sizeof(float)) : malloc(NSEG * SP * sizeof(double));
    for (uint64_t i = 0; i < NSEG * SP; i++) {
        if (f32)
            ((float *)data)[i] = (float)x[i];
        else
            ((double *)data)[i] = x[i];
    }
    hq_mode m = {1, f32 ? 4 : 8, 0, HQ_COLOR_LUMA, bins};
    hq_block_data b = {data, NSEG, SP, 0, NULL, NULL, NULL};
    hq_frange mm[NSEG];
    for (int s = 0; s < NSEG; s++)
        mm[s] = hq_frange_empty();
    assert_int_equal(e->ops->minmax(e, &b, &m, mm, &err), 0);
    hq_fbin fb[NSEG];
    for (int s = 0; s < NSEG; s++) {
        double lo = DBL_MAX, hi = -DBL_MAX;
        uint64_t fin = 0;
        for (uint64_t i = s * SP; i < (s + 1) * (uint64_t)SP; i++) {
            const double v = f32 ? (double)((float *)data)[i] : x[i];
            if (isnan(v))
                continue;
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
            fin++;
        }
        assert_true(mm[s].lo == lo && mm[s].hi == hi);
        assert_int_equal(mm[s].finite, fin);
        assert_int_equal(mm[s].inf, 0);
        fb[s] = hq_fbin_make(lo, hi, bins);
    }
    assert_true(fb[2].flat);
    b.fbin = fb;
    uint64_t *h = hist_out;
    uint64_t *hp[NSEG];
    for (int s = 0; s < NSEG; s++) {
        hp[s] = h + (size_t)s * bins;
        hp[s][0] = 7; /* accumulated, not overwritten */
    }
    assert_int_equal(e->ops->histogram(e, &b, &m, hp, &err), 0);
    uint64_t *want = calloc(bins, sizeof *want);
    uint16_t *lut = malloc((size_t)NSEG * bins * sizeof *lut);
    const uint16_t *lp[NSEG];
    for (int s = 0; s < NSEG; s++) {
        memset(want, 0, bins * sizeof *want);
        double *xs = malloc(SP * sizeof *xs);
        for (uint64_t i = 0; i < SP; i++)
            xs[i] = f32 ? (double)((float *)data)[s * SP + i] : x[s * SP + i];
        ref_hist(xs, SP, &fb[s], want);
        free(xs);
        want[0] += 7;
        assert_memory_equal(hp[s], want, bins * sizeof *want);
        hp[s][0] -= 7;
        hq_lut_build(HQ_METHOD_EQUALIZE, hp[s], bins, lut + (size_t)s * bins);
        lp[s] = lut + (size_t)s * bins;
    }
    assert_int_equal(e->ops->remap(e, &b, &m, lp, &err), 0);
    for (uint64_t i = 0; i < NSEG * SP; i++) {
        const uint64_t s = i / SP;
        if (f32) {
            const float in = (float)x[i], got = ((float *)data)[i];
            if (isnan(in)) {
                assert_true(isnan(got));
                continue;
            }
            const float exp = (float)((double)lp[s][hq_fbin_of(in, &fb[s])] / (double)(bins - 1));
            assert_true(got == exp);
            assert_true(got >= 0.0f && got <= 1.0f);
        } else {
            const double got = ((double *)data)[i];
            if (isnan(x[i])) {
                assert_true(isnan(got));
                continue;
            }
            assert_true(got == (double)lp[s][hq_fbin_of(x[i], &fb[s])] / (double)(bins - 1));
        }
    }
    assert_true(((f32 ? (double)((float *)data)[2 * SP] : ((double *)data)[2 * SP])) == 0.0); /* constant -> 0 */
    memcpy(out, data, NSEG * SP * (f32 ? 4 : 8));
    free(want);
    free(lut);
    free(data);
    free(x);
    hq_engine_destroy(e);
}

static void test_engine_threads_agree(void **state)
{
    (void)state;
    static const uint32_t bins[] = {256, 1000, 65536};
    for (int f32 = 0; f32 < 2; f32++)
        for (size_t k = 0; k < 3; k++) {
            const size_t hl = 3 * (size_t)bins[k], bytes = 3 * 70001 * (f32 ? 4 : 8);
            uint64_t *h1 = calloc(hl, 8), *h3 = calloc(hl, 8);
            void *o1 = malloc(bytes), *o3 = malloc(bytes);
            engine_case(1, bins[k], f32, h1, o1);
            engine_case(3, bins[k], f32, h3, o3);
            assert_memory_equal(h1, h3, hl * 8);
            assert_memory_equal(o1, o3, bytes);
            free(h1);
            free(h3);
            free(o1);
            free(o3);
        }
}

static void test_engine_refuses_infinity(void **state)
{
    (void)state;
    hq_engine *e;
    hq_err err;
    hq_engine_cfg cfg = {2, 0, 1, 0};
    assert_int_equal(hq_cpu_engine_create(&cfg, &e, &err), 0);
    float d[5] = {1, 2, INFINITY, NAN, -INFINITY};
    hq_mode m = {1, 4, 0, HQ_COLOR_LUMA, 16};
    hq_block_data b = {d, 1, 5, 0, NULL, NULL, NULL};
    hq_frange mm = hq_frange_empty();
    assert_int_equal(e->ops->minmax(e, &b, &m, &mm, &err), 0);
    assert_true(mm.lo == 1 && mm.hi == 2);
    assert_int_equal(mm.finite, 2);
    assert_int_equal(mm.inf, 2);
    const hq_fbin fb = hq_fbin_make(1, 2, 16);
    b.fbin = &fb;
    uint64_t h[16] = {0}, *hp[1] = {h};
    assert_int_equal(e->ops->histogram(e, &b, &m, hp, &err), HQ_EINPUT);
    assert_non_null(strstr(err.msg, "2 infinite samples"));
    hq_engine_destroy(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sample_kinds),
        cmocka_unit_test(test_edges_and_quarters),     cmocka_unit_test(test_constant_group),
        cmocka_unit_test(test_negative_zero_normalized), cmocka_unit_test(test_monotone_and_reference),
        cmocka_unit_test(test_float64_overflow_range), cmocka_unit_test(test_output_values),
        cmocka_unit_test(test_engine_threads_agree),   cmocka_unit_test(test_engine_refuses_infinity),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
