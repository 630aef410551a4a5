/* test_pixel.c — the per-pixel integer math (core/pixel.h) against the formulas of cli.md,
 * evaluated here in signed 64-bit arithmetic with explicit floor division. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../../core/pixel.h"

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

/* cli.md: c' = clamp(((c<<14) + (lut[Y]<<14) - y_fx + 8192) >> 14, 0, maxv), t < 0 -> 0. */
static uint32_t ref_luma_apply(uint32_t c, uint32_t y2, uint32_t y_fx, uint32_t maxv)
{
    int64_t t = ((int64_t)c << 14) + ((int64_t)y2 << 14) - (int64_t)y_fx + 8192;
    if (t < 0)
        return 0;
    int64_t o = floor_div(t, 16384);
    return o > (int64_t)maxv ? maxv : (uint32_t)o;
}

static uint32_t ref_value_apply(uint32_t c, uint32_t v, uint32_t v2)
{
    if (v == 0)
        return v2;
    unsigned __int128 num = (unsigned __int128)2 * c * v2 + v;
    return (uint32_t)(num / ((unsigned __int128)2 * v));
}

static uint64_t rng_state = 0x0123456789ABCDEFull;
static uint32_t rnd(uint32_t n)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 0x2545F4914F6CDD1Dull) >> 32) % n;
}

static void test_weights(void **state)
{
    (void)state;
    assert_int_equal(HQ_LUMA_R + HQ_LUMA_G + HQ_LUMA_B, 1u << 14);
    assert_int_equal(HQ_LUMA_R, 4899);
    assert_int_equal(HQ_LUMA_G, 9617);
    assert_int_equal(HQ_LUMA_B, 1868);
}

static void test_bin_clamps(void **state)
{
    (void)state;
    assert_int_equal(hq_bin(0, 4095), 0);
    assert_int_equal(hq_bin(4095, 4095), 4095);
    assert_int_equal(hq_bin(4096, 4095), 4095);
    assert_int_equal(hq_bin(65535, 4095), 4095);
    assert_int_equal(hq_bin(65535, 65535), 65535);
    assert_int_equal(hq_bin(15, 1), 1);
}

/* Y = (4899 R + 9617 G + 1868 B + 8192) >> 14, as OpenCV's RGB2GRAY. */
static void test_luma_of_rgb(void **state)
{
    (void)state;
    for (int i = 0; i < 200000; i++) {
        uint32_t r = rnd(65536), g = rnd(65536), b = rnd(65536);
        uint64_t want = (4899ull * r + 9617ull * g + 1868ull * b + 8192) >> 14;
        assert_int_equal(hq_luma_of_fx(hq_luma_fx(r, g, b)), want);
    }
    assert_int_equal(hq_luma_of_fx(hq_luma_fx(255, 0, 0)), 76);
    assert_int_equal(hq_luma_of_fx(hq_luma_fx(0, 255, 0)), 150);
    assert_int_equal(hq_luma_of_fx(hq_luma_fx(0, 0, 255)), 29);
    assert_int_equal(hq_luma_of_fx(hq_luma_fx(65535, 65535, 65535)), 65535);
}

/* A gray pixel (R = G = B) keeps its value when the LUT is the identity, at every depth. */
static void test_gray_pixel_keeps_value_under_identity(void **state)
{
    (void)state;
    for (uint32_t v = 0; v <= 65535; v++) {
        uint32_t y_fx = hq_luma_fx(v, v, v);
        uint32_t y = hq_luma_of_fx(y_fx);
        assert_int_equal(y, v);
        int32_t d = (int32_t)(y << HQ_LUMA_SHIFT) - (int32_t)y_fx;
        assert_int_equal(d, 0);
        assert_int_equal(hq_luma_apply(v, d, 65535), v);
        if (v <= 255)
            assert_int_equal(hq_luma_apply(v, d, 255), v);
        if (v <= 4095)
            assert_int_equal(hq_luma_apply(v, d, 4095), v);
    }
}

static void test_luma_apply_matches_rule(void **state)
{
    (void)state;
    const uint32_t maxvs[] = {1, 15, 255, 4095, 65535};
    for (size_t k = 0; k < sizeof maxvs / sizeof *maxvs; k++) {
        const uint32_t maxv = maxvs[k];
        for (int i = 0; i < 100000; i++) {
            uint32_t r = rnd(maxv + 1), g = rnd(maxv + 1), b = rnd(maxv + 1), y2 = rnd(maxv + 1);
            uint32_t y_fx = hq_luma_fx(r, g, b);
            int32_t d = (int32_t)(y2 << HQ_LUMA_SHIFT) - (int32_t)y_fx;
            assert_int_equal(hq_luma_apply(r, d, maxv), ref_luma_apply(r, y2, y_fx, maxv));
            assert_int_equal(hq_luma_apply(g, d, maxv), ref_luma_apply(g, y2, y_fx, maxv));
            assert_int_equal(hq_luma_apply(b, d, maxv), ref_luma_apply(b, y2, y_fx, maxv));
        }
    }
}

/* Saturated colours pushed up or down clamp to [0, maxv]. */
static void test_luma_apply_clamps(void **state)
{
    (void)state;
    /* Pure red 255 (Y = 76) pushed to Y' = 255: R would be 255 + 179, clamps to 255. */
    uint32_t y_fx = hq_luma_fx(255, 0, 0);
    int32_t d = (int32_t)(255u << 14) - (int32_t)y_fx;
    assert_int_equal(hq_luma_apply(255, d, 255), 255);
    assert_int_equal(hq_luma_apply(0, d, 255), 179);
    /* Pure blue (Y = 29) pushed to Y' = 0: R and G would go negative, clamp to 0. */
    y_fx = hq_luma_fx(0, 0, 255);
    d = 0 - (int32_t)y_fx;
    assert_int_equal(hq_luma_apply(0, d, 255), 0);
    assert_int_equal(hq_luma_apply(255, d, 255), 226);
    /* The 16-bit extremes: no int32 overflow. */
    y_fx = hq_luma_fx(65535, 65535, 65535);
    d = 0 - (int32_t)y_fx;
    assert_int_equal(hq_luma_apply(65535, d, 65535), 0);
    y_fx = hq_luma_fx(0, 0, 0);
    d = (int32_t)(65535u << 14);
    assert_int_equal(hq_luma_apply(0, d, 65535), 65535);
    y_fx = hq_luma_fx(65535, 0, 0);
    d = (int32_t)(65535u << 14) - (int32_t)y_fx;
    assert_int_equal(hq_luma_apply(65535, d, 65535), 65535);
    /* 12-bit: clamps at 4095, not 65535. */
    y_fx = hq_luma_fx(4095, 0, 0);
    d = (int32_t)(4095u << 14) - (int32_t)y_fx;
    assert_int_equal(hq_luma_apply(4095, d, 4095), 4095);
}

static void test_value_apply(void **state)
{
    (void)state;
    /* V = 0: black becomes gray at V'. */
    assert_int_equal(hq_value_apply(0, 0, 0), 0);
    assert_int_equal(hq_value_apply(0, 0, 77), 77);
    assert_int_equal(hq_value_apply(0, 0, 65535), 65535);
    /* The max channel maps to V' exactly. */
    assert_int_equal(hq_value_apply(200, 200, 37), 37);
    /* 100 * 255 / 200 = 127.5 -> 128 */
    assert_int_equal(hq_value_apply(100, 200, 255), 128);
    /* c * V' is 2^32 - 2^17 + 1 here: a 32-bit product would wrap. */
    assert_int_equal(hq_value_apply(65535, 65535, 65535), 65535);
    assert_int_equal(hq_value_apply(65534, 65535, 65535), 65534);
    assert_int_equal(hq_value_apply(32768, 65535, 65535), 32768);
    assert_int_equal(hq_value_apply(65535, 65535, 1), 1);
    assert_int_equal(hq_value_apply(1, 65535, 65535), 1);
    assert_int_equal(hq_value_apply(40000, 65535, 60000), ref_value_apply(40000, 65535, 60000));
    for (int i = 0; i < 500000; i++) {
        uint32_t v = rnd(65536), c = v ? rnd(v + 1) : 0, v2 = rnd(65536);
        uint32_t got = hq_value_apply(c, v, v2);
        assert_int_equal(got, ref_value_apply(c, v, v2));
        assert_true(got <= v2); /* c <= V, so no clamp is needed */
    }
}

static void test_max3(void **state)
{
    (void)state;
    assert_int_equal(hq_max3(1, 2, 3), 3);
    assert_int_equal(hq_max3(3, 2, 1), 3);
    assert_int_equal(hq_max3(2, 3, 1), 3);
    assert_int_equal(hq_max3(0, 0, 0), 0);
    assert_int_equal(hq_max3(65535, 0, 65535), 65535);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_weights),
        cmocka_unit_test(test_bin_clamps),
        cmocka_unit_test(test_luma_of_rgb),
        cmocka_unit_test(test_gray_pixel_keeps_value_under_identity),
        cmocka_unit_test(test_luma_apply_matches_rule),
        cmocka_unit_test(test_luma_apply_clamps),
        cmocka_unit_test(test_value_apply),
        cmocka_unit_test(test_max3),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
