/* test_clahe.c — core/clahe (the rule, worked by hand from OpenCV 4.6's clahe.cpp) and the CPU
 * engine's CLAHE: pieces of an image histogram and remap exactly as the whole image does, at any
 * thread count, and every tile counts tile_h * tile_w positions (its share of the padding too). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../core/clahe.h"
#include "../../engine/engine.h"

static hq_clahe_geom geom(uint64_t gy, uint64_t gx, uint64_t tile, uint64_t h, uint64_t w, int *rc)
{
    hq_clahe_cfg cfg = {gy, gx, tile, 40.0};
    hq_clahe_geom g = {0};
    *rc = hq_clahe_geom_make(&cfg, h, w, &g);
    return g;
}

static void test_geometry(void **state)
{
    (void)state;
    int rc;
    hq_clahe_geom g = geom(8, 8, 0, 120, 160, &rc); /* divides: no padding */
    assert_int_equal(rc, 0);
    assert_int_equal(g.tile_h, 15);
    assert_int_equal(g.tile_w, 20);
    g = geom(8, 8, 0, 97, 131, &rc); /* neither divides: 7 rows and 5 columns of padding */
    assert_int_equal(g.tile_h, 13);
    assert_int_equal(g.tile_w, 17);
    g = geom(8, 8, 0, 120, 131, &rc); /* the rows divide, yet get a whole grid count of padding */
    assert_int_equal(g.tile_h, 16);
    assert_int_equal(g.tile_w, 17);
    g = geom(1, 1, 0, 5, 7, &rc);
    assert_int_equal(g.tile_h * g.tile_w, 35);
    g = geom(0, 0, 100, 410, 389, &rc); /* --clahe-tile 100: a 5x4 grid, then the grid's rule */
    assert_int_equal(rc, 0);
    assert_int_equal(g.tiles_y, 5);
    assert_int_equal(g.tiles_x, 4);
    assert_int_equal(g.tile_h, 83);
    assert_int_equal(g.tile_w, 98);
    g = geom(0, 0, UINT64_MAX - 35, 37, 53, &rc); /* a tile near 2^64: h + tile - 1 would wrap to 0 tiles */
    assert_int_equal(rc, 0);
    assert_int_equal(g.tiles_y, 1);
    assert_int_equal(g.tiles_x, 1);
    geom(30, 4, 0, 20, 30, &rc); /* more tile rows than rows */
    assert_int_equal(rc, -1);
    geom(2, 2, 0, 0, 30, &rc);
    assert_int_equal(rc, -1);
}

static void test_reflect(void **state)
{
    (void)state;
    assert_int_equal(hq_clahe_reflect(3, 5), 3);
    assert_int_equal(hq_clahe_reflect(5, 5), 3);
    assert_int_equal(hq_clahe_reflect(6, 5), 2);
    assert_int_equal(hq_clahe_reflect(8, 5), 0);
    assert_int_equal(hq_clahe_reflect(9, 5), 1); /* reflected twice */
    assert_int_equal(hq_clahe_reflect(5, 3), 1);
    assert_int_equal(hq_clahe_reflect(4, 1), 0);
    assert_int_equal(hq_clahe_reflect(3, 2), 1);
}

static void test_clip_limit(void **state)
{
    (void)state;
    assert_int_equal(hq_clahe_clip_limit(40.0, 64 * 64, 256), 640);
    assert_int_equal(hq_clahe_clip_limit(40.0, 64 * 64, 65536), 2);   /* 2.5 truncated */
    assert_int_equal(hq_clahe_clip_limit(0.01, 64 * 64, 256), 1);     /* at least 1 */
    assert_int_equal(hq_clahe_clip_limit(0.0, 64 * 64, 256), 0);      /* none */
    assert_int_equal(hq_clahe_clip_limit(-3.0, 64 * 64, 256), 0);
    /* Past OpenCV's int: a tile of 2^33 pixels. */
    assert_true(hq_clahe_clip_limit(2.0, (uint64_t)1 << 33, 256) == (int64_t)1 << 26);
}

static void test_tile_lut(void **state)
{
    (void)state;
    uint64_t hist[8] = {0, 0, 0, 16, 0, 0, 0, 0}, scratch[8];
    uint16_t lut[8];
    hq_clahe_tile_lut(hist, 8, 16, 0, lut, scratch); /* unclipped: a step at 3 */
    const uint16_t step[8] = {0, 0, 0, 7, 7, 7, 7, 7};
    assert_memory_equal(lut, step, sizeof step);
    /* Clipped at 4: 12 cut, 1 to every bin, the 4 left to bins 0, 2, 4, 6 (step 8 / 4):
     * [2,1,2,5,2,1,2,1], cumulated 2,3,5,10,12,13,15,16, times 7/16, rounded. */
    hq_clahe_tile_lut(hist, 8, 16, 4, lut, scratch);
    const uint16_t clipped[8] = {1, 1, 2, 4, 5, 6, 7, 7};
    assert_memory_equal(lut, clipped, sizeof clipped);
    assert_int_equal(hist[3], 16); /* the histogram itself is left alone */
    /* Ties round to even: scale 3/6 = 0.5, cumulated 1, 3, 5, 6 -> 0.5, 1.5, 2.5, 3. */
    uint64_t h4[4] = {1, 2, 2, 1};
    uint16_t l4[4];
    hq_clahe_tile_lut(h4, 4, 6, 0, l4, scratch);
    const uint16_t even[4] = {0, 2, 2, 3};
    assert_memory_equal(l4, even, sizeof even);
}

static void test_weights_and_blend(void **state)
{
    (void)state;
    const float inv = hq_clahe_inv(10);
    hq_clahe_w w = hq_clahe_weight(0, inv, 4); /* before the first tile's centre: that tile alone */
    assert_int_equal(w.t1, 0);
    assert_int_equal(w.t2, 0);
    assert_true(w.w1 == 0.5f && w.w2 == 0.5f);
    w = hq_clahe_weight(5, inv, 4); /* at the centre of tile 0 */
    assert_int_equal(w.t1, 0);
    assert_int_equal(w.t2, 1);
    assert_true(w.w1 == 1.0f && w.w2 == 0.0f);
    w = hq_clahe_weight(39, inv, 4); /* past the last centre: clamped */
    assert_int_equal(w.t1, 3);
    assert_int_equal(w.t2, 3);
    hq_clahe_w half = {0, 1, 0.5f, 0.5f}, one = {0, 0, 1.0f, 0.0f};
    assert_int_equal(hq_clahe_blend(0, 255, 0, 255, half, one, 255), 128); /* 127.5: to even */
    assert_int_equal(hq_clahe_blend(0, 253, 0, 253, half, one, 255), 126); /* 126.5: to even */
    assert_int_equal(hq_clahe_blend(9, 9, 9, 9, half, half, 255), 9);
    assert_int_equal(hq_clahe_blend(4095, 4095, 4095, 4095, half, half, 4095), 4095);
}

/* ---- the CPU engine: pieces against the whole ------------------------------------------------ */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(uint32_t n)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 0x2545F4914F6CDD1Dull) >> 32) % n;
}

/* Rows [r0, r1) x columns [c0, c1) of an h x w image of `px` bytes per pixel, copied densely. */
static void *crop(const uint8_t *img, uint64_t w, uint64_t px, uint64_t r0, uint64_t r1, uint64_t c0, uint64_t c1)
{
    uint8_t *out = malloc((r1 - r0) * (c1 - c0) * px);
    for (uint64_t y = r0; y < r1; y++)
        memcpy(out + (y - r0) * (c1 - c0) * px, img + (y * w + c0) * px, (c1 - c0) * px);
    return out;
}

static void check_pieces(const hq_mode *m, uint64_t h, uint64_t w, uint64_t gy, uint64_t gx, int threads)
{
    hq_engine *e = NULL;
    hq_err err = {{0}};
    hq_engine_cfg cfg = {threads, 0, 1, 0};
    assert_int_equal(hq_cpu_engine_create(&cfg, &e, &err), 0);
    int rc;
    const hq_clahe_geom g = geom(gy, gx, 0, h, w, &rc);
    assert_int_equal(rc, 0);
    const uint64_t px = (uint64_t)m->channels * m->sample_bytes, bins = hq_mode_bins(m);
    const uint64_t len = hq_clahe_ntiles(&g) * hq_mode_nhist(m) * bins;
    uint8_t *img = malloc(h * w * px);
    for (uint64_t i = 0; i < h * w * px; i++)
        img[i] = (uint8_t)(i % 7 == 0 ? 200 : 90 + rnd(60));
    uint64_t *whole = calloc(len, sizeof *whole), *parts = calloc(len, sizeof *parts);
    hq_clahe_piece all = {img, 0, 0, h, w, 0};
    assert_int_equal(e->ops->clahe_histogram(e, &all, m, &g, whole, &err), 0);
    for (uint64_t t = 0; t < len / bins; t++) {
        uint64_t n = 0;
        for (uint64_t v = 0; v < bins; v++)
            n += whole[t * bins + v];
        assert_int_equal(n, hq_clahe_area(&g));
    }
    /* Four uneven pieces, as blocks on different ranks would be. */
    const uint64_t rs[3] = {0, h / 3 + 1, h}, cs[3] = {0, w / 2 - 1, w};
    uint16_t *lut = malloc(len * sizeof *lut);
    for (uint64_t t = 0; t < len; t++)
        lut[t] = (uint16_t)rnd((uint32_t)bins);
    uint8_t *want = malloc(h * w * px);
    memcpy(want, img, h * w * px);
    hq_clahe_piece wp = {want, 0, 0, h, w, 0};
    assert_int_equal(e->ops->clahe_remap(e, &wp, m, &g, lut, &err), 0);
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++) {
            uint8_t *d = crop(img, w, px, rs[a], rs[a + 1], cs[b], cs[b + 1]);
            hq_clahe_piece p = {d, rs[a], cs[b], rs[a + 1] - rs[a], cs[b + 1] - cs[b], 0};
            assert_int_equal(e->ops->clahe_histogram(e, &p, m, &g, parts, &err), 0);
            assert_int_equal(e->ops->clahe_remap(e, &p, m, &g, lut, &err), 0);
            uint8_t *wc = crop(want, w, px, rs[a], rs[a + 1], cs[b], cs[b + 1]);
            assert_memory_equal(d, wc, p.rows * p.cols * px);
            free(d);
            free(wc);
        }
    assert_memory_equal(parts, whole, len * sizeof *whole);
    free(img);
    free(want);
    free(whole);
    free(parts);
    free(lut);
    hq_engine_destroy(e);
}

static void test_engine_pieces(void **state)
{
    (void)state;
    const hq_mode gray8 = {1, 1, 8, HQ_COLOR_LUMA, 0}, gray16 = {1, 2, 16, HQ_COLOR_LUMA, 0}, gray12 = {1, 2, 12, HQ_COLOR_LUMA, 0};
    const hq_mode rgb8 = {3, 1, 8, HQ_COLOR_CHANNELS, 0}, rgba8 = {4, 1, 8, HQ_COLOR_LUMA, 0}, rgb16v = {3, 2, 10, HQ_COLOR_VALUE, 0};
    for (int threads = 1; threads <= 3; threads++) {
        check_pieces(&gray8, 97, 131, 8, 8, threads);
        check_pieces(&gray8, 9, 11, 8, 8, threads); /* padding longer than a tile: reflections of reflections */
        check_pieces(&gray16, 64, 40, 3, 5, threads);
        check_pieces(&gray12, 33, 21, 1, 1, threads);
        check_pieces(&rgb8, 40, 37, 4, 3, threads);
        check_pieces(&rgba8, 23, 50, 2, 7, threads);
        check_pieces(&rgb16v, 30, 30, 4, 4, threads);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_geometry),          cmocka_unit_test(test_reflect),
        cmocka_unit_test(test_clip_limit),        cmocka_unit_test(test_tile_lut),
        cmocka_unit_test(test_weights_and_blend), cmocka_unit_test(test_engine_pieces),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
