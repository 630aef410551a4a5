/* test_lut.c — the LUT rule (core/lut.h) against an independent reference.
 *
 * The reference below does not reuse lut_rule.h: it rounds half up by quotient and remainder
 * (q + (2r >= den)) instead of floor((2 num + den) / (2 den)), walks the histogram its own way,
 * and the large-count cases also carry hand-derived values, so a shared mistake cannot hide. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../core/lut.h"

typedef unsigned __int128 u128;

/* round_half_up(num / den) by division with remainder. */
static uint32_t ref_round(u128 num, u128 den)
{
    u128 q = num / den, r = num % den;
    return (uint32_t)(q + (r >= den - r ? 1 : 0));
}

static void ref_identity(uint16_t *lut, uint32_t bins)
{
    for (uint32_t v = 0; v < bins; v++)
        lut[v] = (uint16_t)v;
}

/* cli.md: h0 first non-empty bin, c cumsum, identity when c(h0) == N (or N == 0). */
static void ref_equalize(const uint64_t *hist, uint32_t bins, uint16_t *lut)
{
    u128 n = 0;
    for (uint32_t v = bins; v-- > 0;)
        n += hist[v];
    int64_t h0 = -1;
    for (uint32_t v = 0; v < bins && h0 < 0; v++)
        if (hist[v])
            h0 = v;
    if (h0 < 0 || hist[h0] == n) {
        ref_identity(lut, bins);
        return;
    }
    const u128 c0 = hist[h0], span = n - c0;
    u128 c = c0;
    for (uint32_t v = 0; v < bins; v++) {
        if ((int64_t)v < h0) {
            lut[v] = 0;
            continue;
        }
        if ((int64_t)v > h0)
            c += hist[v];
        lut[v] = (uint16_t)ref_round((c - c0) * (bins - 1), span);
    }
}

static void ref_stretch(const uint64_t *hist, uint32_t bins, uint16_t *lut)
{
    int64_t lo = -1, hi = -1;
    for (uint32_t v = 0; v < bins; v++)
        if (hist[v]) {
            if (lo < 0)
                lo = v;
            hi = v;
        }
    if (lo < 0 || lo == hi) {
        ref_identity(lut, bins);
        return;
    }
    for (uint32_t v = 0; v < bins; v++) {
        if ((int64_t)v <= lo)
            lut[v] = 0;
        else if ((int64_t)v >= hi)
            lut[v] = (uint16_t)(bins - 1);
        else
            lut[v] = (uint16_t)ref_round((u128)(v - lo) * (bins - 1), (u128)(hi - lo));
    }
}

/* xorshift64*: a fixed, portable sequence so a failure reproduces. */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

static void check_both(const uint64_t *hist, uint32_t bins)
{
    uint16_t *got = malloc(bins * sizeof *got), *want = malloc(bins * sizeof *want);
    assert_non_null(got);
    assert_non_null(want);
    hq_lut_build(HQ_METHOD_EQUALIZE, hist, bins, got);
    ref_equalize(hist, bins, want);
    for (uint32_t v = 0; v < bins; v++)
        if (got[v] != want[v])
            fail_msg("equalize bins=%u: lut[%u] = %u, want %u", bins, v, got[v], want[v]);
    hq_lut_build(HQ_METHOD_STRETCH, hist, bins, got);
    ref_stretch(hist, bins, want);
    for (uint32_t v = 0; v < bins; v++)
        if (got[v] != want[v])
            fail_msg("stretch bins=%u: lut[%u] = %u, want %u", bins, v, got[v], want[v]);
    free(got);
    free(want);
}

static void assert_identity(const uint16_t *lut, uint32_t bins)
{
    for (uint32_t v = 0; v < bins; v++)
        if (lut[v] != v)
            fail_msg("bins=%u: lut[%u] = %u, want identity", bins, v, lut[v]);
}

static void test_empty_histogram_is_identity(void **state)
{
    (void)state;
    for (uint32_t bins = 2; bins <= 65536; bins <<= 1) {
        uint64_t *h = calloc(bins, sizeof *h);
        uint16_t *lut = malloc(bins * sizeof *lut);
        memset(lut, 0xAB, bins * sizeof *lut);
        hq_lut_build(HQ_METHOD_EQUALIZE, h, bins, lut);
        assert_identity(lut, bins);
        memset(lut, 0xAB, bins * sizeof *lut);
        hq_lut_build(HQ_METHOD_STRETCH, h, bins, lut);
        assert_identity(lut, bins);
        assert_int_equal(hq_hist_total(h, bins), 0);
        free(h);
        free(lut);
    }
}

static void test_constant_image_is_identity(void **state)
{
    (void)state;
    const uint32_t where[] = {0, 1, 77, 254, 255};
    for (size_t k = 0; k < sizeof where / sizeof *where; k++) {
        uint64_t h[256] = {0};
        uint16_t lut[256];
        h[where[k]] = 12345;
        hq_lut_build(HQ_METHOD_EQUALIZE, h, 256, lut);
        assert_identity(lut, 256);
        hq_lut_build(HQ_METHOD_STRETCH, h, 256, lut);
        assert_identity(lut, 256);
    }
    /* A constant 16-bit image with a count beyond 2^32. */
    uint64_t *h = calloc(65536, sizeof *h);
    uint16_t *lut = malloc(65536 * sizeof *lut);
    h[40000] = (1ull << 40) + 3;
    hq_lut_build(HQ_METHOD_EQUALIZE, h, 65536, lut);
    assert_identity(lut, 65536);
    free(h);
    free(lut);
}

static void test_two_values(void **state)
{
    (void)state;
    uint64_t h[256] = {0};
    uint16_t lut[256];
    h[100] = 7;
    h[140] = 3;
    hq_lut_build(HQ_METHOD_EQUALIZE, h, 256, lut);
    for (uint32_t v = 0; v < 140; v++)
        assert_int_equal(lut[v], 0);
    for (uint32_t v = 140; v < 256; v++)
        assert_int_equal(lut[v], 255);
    hq_lut_build(HQ_METHOD_STRETCH, h, 256, lut);
    for (uint32_t v = 0; v <= 100; v++)
        assert_int_equal(lut[v], 0);
    for (uint32_t v = 140; v < 256; v++)
        assert_int_equal(lut[v], 255);
    /* (v - 100) * 255 / 40 rounded half up: 120 -> 127.5 -> 128, 101 -> 6.375 -> 6. */
    assert_int_equal(lut[120], 128);
    assert_int_equal(lut[101], 6);
    check_both(h, 256);
}

/* Only [50, 100] populated: zeros below, the top value for everything from the last bin on. */
static void test_empty_bins_at_both_ends(void **state)
{
    (void)state;
    uint64_t h[256] = {0};
    uint16_t lut[256];
    for (uint32_t v = 50; v <= 100; v++)
        h[v] = 1 + (v * 7919u) % 13;
    hq_lut_build(HQ_METHOD_EQUALIZE, h, 256, lut);
    for (uint32_t v = 0; v <= 50; v++)
        assert_int_equal(lut[v], 0);
    for (uint32_t v = 100; v < 256; v++)
        assert_int_equal(lut[v], 255);
    for (uint32_t v = 51; v <= 100; v++)
        assert_true(lut[v] >= lut[v - 1]);
    check_both(h, 256);
}

/* Small hand-checked case: counts 1, 2, 1 at values 0, 1, 2 (L = 4): N - c0 = 3,
 * lut[1] = round(2 * 3 / 3) = 2, lut[2] = 3, lut[3] = 3. */
static void test_hand_checked_small(void **state)
{
    (void)state;
    uint64_t h[4] = {1, 2, 1, 0};
    uint16_t lut[4];
    hq_lut_build(HQ_METHOD_EQUALIZE, h, 4, lut);
    assert_int_equal(lut[0], 0);
    assert_int_equal(lut[1], 2);
    assert_int_equal(lut[2], 3);
    assert_int_equal(lut[3], 3);
    /* A tie rounds up: counts 1,1,1 over 2 bits gives lut[1] = round(1*3/2) = round(1.5) = 2. */
    uint64_t t[4] = {1, 1, 1, 0};
    hq_lut_build(HQ_METHOD_EQUALIZE, t, 4, lut);
    assert_int_equal(lut[1], 2);
    assert_int_equal(lut[2], 3);
}

static void test_random_8bit(void **state)
{
    (void)state;
    for (int trial = 0; trial < 200; trial++) {
        uint64_t h[256] = {0};
        uint32_t lo = rnd() % 256, hi = lo + rnd() % (256 - lo);
        for (uint32_t v = lo; v <= hi; v++)
            h[v] = (rnd() % 4 == 0) ? 0 : rnd() % 1000;
        check_both(h, 256);
    }
}

static void test_bits_1_to_16(void **state)
{
    (void)state;
    for (uint32_t bits = 1; bits <= 16; bits++) {
        const uint32_t bins = 1u << bits;
        uint64_t *h = calloc(bins, sizeof *h);
        for (int trial = 0; trial < 4; trial++) {
            for (uint32_t v = 0; v < bins; v++)
                h[v] = (rnd() % 3 == 0) ? rnd() % 100000 : 0;
            check_both(h, bins);
        }
        free(h);
    }
}

/* Float data bins into any count (--bins N, L = N): the rule must not lean on a power of two. */
static void test_any_bin_count(void **state)
{
    (void)state;
    static const uint32_t counts[] = {2, 3, 5, 255, 257, 1000, 4097, 65535};
    for (size_t k = 0; k < sizeof counts / sizeof *counts; k++) {
        const uint32_t bins = counts[k];
        uint64_t *h = calloc(bins, sizeof *h);
        for (int trial = 0; trial < 4; trial++) {
            for (uint32_t v = 0; v < bins; v++)
                h[v] = (rnd() % 3 == 0) ? rnd() % 100000 : 0;
            h[bins - 1] += trial; /* the top bin filled or not */
            check_both(h, bins);
        }
        free(h);
    }
    /* Hand-checked, L = 3: counts 1, 1, 2 -> c = 1, 2, 4; h0 = 0, N - c0 = 3:
     * lut = round((c - 1) * 2 / 3) = 0, round(2/3) = 1, round(6/3) = 2. */
    uint64_t h3[3] = {1, 1, 2};
    uint16_t lut[3];
    hq_lut_build(HQ_METHOD_EQUALIZE, h3, 3, lut);
    assert_int_equal(lut[0], 0);
    assert_int_equal(lut[1], 1);
    assert_int_equal(lut[2], 2);
    /* L = 1000 over one sample in bin 10 and one in bin 990: the top one reaches L - 1 = 999. */
    uint64_t *h = calloc(1000, sizeof *h);
    uint16_t *l = malloc(1000 * sizeof *l);
    h[10] = 1;
    h[990] = 1;
    hq_lut_build(HQ_METHOD_EQUALIZE, h, 1000, l);
    assert_int_equal(l[9], 0);
    assert_int_equal(l[10], 0);
    assert_int_equal(l[989], 0);
    assert_int_equal(l[990], 999);
    assert_int_equal(l[999], 999);
    free(h);
    free(l);
}

static void test_12bit_4096_bins(void **state)
{
    (void)state;
    const uint32_t bins = 4096;
    uint64_t *h = calloc(bins, sizeof *h);
    uint16_t *lut = malloc(bins * sizeof *lut);
    /* A CT-like narrow band [1000, 1400], everything above unused. */
    for (uint32_t v = 1000; v <= 1400; v++)
        h[v] = 50 + (v % 17) * 3;
    hq_lut_build(HQ_METHOD_EQUALIZE, h, bins, lut);
    assert_int_equal(lut[999], 0);
    assert_int_equal(lut[1000], 0);
    assert_int_equal(lut[1400], 4095);
    assert_int_equal(lut[4095], 4095);
    hq_lut_build(HQ_METHOD_STRETCH, h, bins, lut);
    assert_int_equal(lut[1000], 0);
    assert_int_equal(lut[1200], 2048); /* 200 * 4095 / 400 = 2047.5 -> 2048 */
    assert_int_equal(lut[1400], 4095);
    check_both(h, bins);
    free(h);
    free(lut);
}

static void test_16bit_65536_bins(void **state)
{
    (void)state;
    const uint32_t bins = 65536;
    uint64_t *h = calloc(bins, sizeof *h);
    uint16_t *lut = malloc(bins * sizeof *lut);
    for (uint32_t v = 0; v < bins; v++)
        h[v] = (v % 5 == 0) ? 1 + rnd() % 1000 : 0;
    check_both(h, bins);
    hq_lut_build(HQ_METHOD_EQUALIZE, h, bins, lut);
    assert_int_equal(lut[0], 0);
    assert_int_equal(lut[65535], 65535);
    for (uint32_t v = 1; v < bins; v++)
        assert_true(lut[v] >= lut[v - 1]);
    /* Only the two extreme bins. */
    memset(h, 0, bins * sizeof *h);
    h[0] = 5;
    h[65535] = 9;
    hq_lut_build(HQ_METHOD_EQUALIZE, h, bins, lut);
    assert_int_equal(lut[0], 0);
    assert_int_equal(lut[65534], 0);
    assert_int_equal(lut[65535], 65535);
    hq_lut_build(HQ_METHOD_STRETCH, h, bins, lut);
    assert_identity(lut, bins);
    free(h);
    free(lut);
}

/* Counts above 2^32: the hand-derived values do not depend on any 128-bit code. */
static void test_counts_above_2_32(void **state)
{
    (void)state;
    uint64_t h[256] = {0};
    uint16_t lut[256];
    const uint64_t g = 1ull << 33;
    h[10] = g;     /* c0 */
    h[20] = g;     /* c = 2g */
    h[30] = 2 * g; /* c = 4g: N - c0 = 3g */
    hq_lut_build(HQ_METHOD_EQUALIZE, h, 256, lut);
    assert_int_equal(lut[10], 0);
    assert_int_equal(lut[19], 0);
    assert_int_equal(lut[20], 85); /* g * 255 / 3g = 85 exactly */
    assert_int_equal(lut[29], 85);
    assert_int_equal(lut[30], 255);
    for (int trial = 0; trial < 50; trial++) {
        for (uint32_t v = 0; v < 256; v++)
            h[v] = (rnd() % 2) ? (1ull << 32) + rnd() % (1ull << 40) : 0;
        check_both(h, 256);
    }
    assert_int_equal(hq_hist_total(h, 256) > (1ull << 32), 1);
}

/* Near 2^63: three bins of 2^62 (N = 3 * 2^62 still fits a uint64). The products reach 2^78,
 * so any 64-bit intermediate would wrap. */
static void test_counts_near_2_63(void **state)
{
    (void)state;
    uint64_t h[256] = {0};
    uint16_t lut[256];
    h[0] = 1ull << 62;
    h[1] = 1ull << 62;
    h[2] = 1ull << 62;
    assert_true(hq_hist_total(h, 256) == 3ull << 62);
    hq_lut_build(HQ_METHOD_EQUALIZE, h, 256, lut);
    assert_int_equal(lut[0], 0);
    assert_int_equal(lut[1], 128); /* 2^62 * 255 / 2^63 = 127.5 -> 128 (half up) */
    assert_int_equal(lut[2], 255);
    assert_int_equal(lut[255], 255);

    /* 16-bit: one pixel at 0, then 2^63 - 2 spread over two bins. */
    uint64_t *w = calloc(65536, sizeof *w);
    uint16_t *wl = malloc(65536 * sizeof *wl);
    w[0] = 1;
    w[30000] = (1ull << 62) - 1;
    w[60000] = (1ull << 62) - 1;
    hq_lut_build(HQ_METHOD_EQUALIZE, w, 65536, wl);
    assert_int_equal(wl[29999], 0);
    assert_int_equal(wl[30000], 32768); /* exactly half of 65535, rounded up */
    assert_int_equal(wl[60000], 65535);
    check_both(w, 65536);
    /* Random counts: about 1024 bins of ~2^52 each, so the total is near 2^62..2^63 and stays
     * below 2^64 (a bin of at most 1.5 * 2^52, at most ~1100 bins filled). */
    for (int trial = 0; trial < 20; trial++) {
        for (uint32_t v = 0; v < 65536; v++)
            w[v] = (rnd() % 64 == 0) ? (1ull << 52) + rnd() % (1ull << 51) : 0;
        assert_true(hq_hist_total(w, 65536) > (1ull << 61));
        check_both(w, 65536);
    }
    free(w);
    free(wl);
}

static void test_stretch_edges(void **state)
{
    (void)state;
    uint64_t h[256] = {0};
    uint16_t lut[256];
    /* lo == hi: identity. */
    h[42] = 1000;
    hq_lut_build(HQ_METHOD_STRETCH, h, 256, lut);
    assert_identity(lut, 256);
    /* Full range occupied: identity. */
    memset(h, 0, sizeof h);
    h[0] = 1;
    h[255] = 1;
    hq_lut_build(HQ_METHOD_STRETCH, h, 256, lut);
    assert_identity(lut, 256);
    /* lo at 0, hi inside. */
    memset(h, 0, sizeof h);
    h[0] = 3;
    h[100] = 3;
    hq_lut_build(HQ_METHOD_STRETCH, h, 256, lut);
    assert_int_equal(lut[0], 0);
    assert_int_equal(lut[50], 128); /* 127.5 */
    assert_int_equal(lut[100], 255);
    assert_int_equal(lut[200], 255);
    check_both(h, 256);
    /* hi at the top, lo inside. */
    memset(h, 0, sizeof h);
    h[155] = 1;
    h[255] = 1;
    hq_lut_build(HQ_METHOD_STRETCH, h, 256, lut);
    assert_int_equal(lut[0], 0);
    assert_int_equal(lut[155], 0);
    assert_int_equal(lut[156], 3); /* 2.55 */
    assert_int_equal(lut[255], 255);
    check_both(h, 256);
    /* Adjacent lo, hi. */
    memset(h, 0, sizeof h);
    h[7] = 1;
    h[8] = 1;
    hq_lut_build(HQ_METHOD_STRETCH, h, 256, lut);
    for (uint32_t v = 0; v <= 7; v++)
        assert_int_equal(lut[v], 0);
    for (uint32_t v = 8; v < 256; v++)
        assert_int_equal(lut[v], 255);
    /* Stretch does not look at counts in between, only at the extremes. */
    memset(h, 0, sizeof h);
    h[10] = 1ull << 60;
    h[11] = 5;
    h[20] = 1;
    hq_lut_build(HQ_METHOD_STRETCH, h, 256, lut);
    assert_int_equal(lut[15], 128); /* 5 * 255 / 10 = 127.5 */
    /* Two bins. */
    uint64_t b2[2] = {4, 4};
    uint16_t l2[2];
    hq_lut_build(HQ_METHOD_STRETCH, b2, 2, l2);
    assert_int_equal(l2[0], 0);
    assert_int_equal(l2[1], 1);
    hq_lut_build(HQ_METHOD_EQUALIZE, b2, 2, l2);
    assert_int_equal(l2[0], 0);
    assert_int_equal(l2[1], 1);
}

static void test_hist_total(void **state)
{
    (void)state;
    uint64_t h[16];
    uint64_t want = 0;
    for (int v = 0; v < 16; v++) {
        h[v] = (uint64_t)v << 58 >> 4; /* up to 15 * 2^54 */
        want += h[v];
    }
    assert_true(hq_hist_total(h, 16) == want);
}


/* ---- histogram matching (hq_lut_match) ---- */

/* The rule read literally: for each v, scan w upward from 0 with fresh cumulative sums. */
static void ref_match(const uint64_t *src, const uint64_t *tgt, uint32_t bins, uint16_t *lut)
{
    u128 ns = 0, nt = 0;
    for (uint32_t v = 0; v < bins; v++) {
        ns += src[v];
        nt += tgt[v];
    }
    if (ns == 0 || nt == 0) {
        ref_identity(lut, bins);
        return;
    }
    u128 cs = 0;
    for (uint32_t v = 0; v < bins; v++) {
        cs += src[v];
        u128 ct = 0;
        uint32_t w = 0;
        for (; w < bins; w++) {
            ct += tgt[w];
            if (ct * ns >= cs * nt)
                break;
        }
        assert_true(w < bins);
        lut[v] = (uint16_t)w;
    }
}

static void check_match(const uint64_t *src, const uint64_t *tgt, uint32_t bins)
{
    uint16_t *got = malloc(bins * sizeof *got), *want = malloc(bins * sizeof *want);
    assert_non_null(got);
    assert_non_null(want);
    hq_lut_match(src, tgt, bins, got);
    ref_match(src, tgt, bins, want);
    assert_memory_equal(got, want, bins * sizeof *got);
    for (uint32_t v = 1; v < bins; v++)
        assert_true(got[v] >= got[v - 1]); /* monotone */
    free(got);
    free(want);
}

static void test_match_hand_checked(void **state)
{
    (void)state;
    /* src: 2 px at 0, 2 px at 1 (N_s = 4); tgt: 1 at 0, 1 at 2, 2 at 3 (N_t = 4).
     * v = 0: C_s = 2 -> smallest w with C_t(w) >= 2: C_t = 1, 1, 2, 4 -> w = 2.
     * v = 1: C_s = 4 -> w = 3; v = 2, 3: C_s = 4 -> 3. */
    const uint64_t src[4] = {2, 2, 0, 0}, tgt[4] = {1, 0, 1, 2};
    uint16_t lut[4];
    hq_lut_match(src, tgt, 4, lut);
    assert_int_equal(lut[0], 2);
    assert_int_equal(lut[1], 3);
    assert_int_equal(lut[2], 3);
    assert_int_equal(lut[3], 3);
    /* Below the first counted source level the rule gives 0 (C_s = 0 is met by w = 0). */
    const uint64_t s2[4] = {0, 0, 3, 1};
    hq_lut_match(s2, tgt, 4, lut);
    assert_int_equal(lut[0], 0);
    assert_int_equal(lut[1], 0);
    assert_int_equal(lut[2], 3); /* C_s = 3 of 4: C_t(w) * 4 >= 3 * 4 -> C_t >= 3 -> w = 3 */
    assert_int_equal(lut[3], 3);
    /* Unequal totals: the shares are compared, 1/3 of src against 3/9 of tgt exactly. */
    const uint64_t s3[4] = {1, 1, 1, 0}, t3[4] = {3, 3, 3, 0};
    hq_lut_match(s3, t3, 4, lut);
    assert_int_equal(lut[0], 0);
    assert_int_equal(lut[1], 1);
    assert_int_equal(lut[2], 2);
    assert_int_equal(lut[3], 2);
}

static void test_match_empty_is_identity(void **state)
{
    (void)state;
    uint64_t z[256] = {0}, h[256] = {0};
    h[7] = 5;
    uint16_t lut[256];
    hq_lut_match(z, h, 256, lut);
    for (uint32_t v = 0; v < 256; v++)
        assert_int_equal(lut[v], v);
    hq_lut_match(h, z, 256, lut);
    for (uint32_t v = 0; v < 256; v++)
        assert_int_equal(lut[v], v);
}

static void test_match_self_keeps_levels(void **state)
{
    (void)state;
    uint64_t h[256] = {0};
    srand(11);
    for (int k = 0; k < 40; k++)
        h[rand() % 256] += 1 + (uint64_t)(rand() % 1000);
    uint16_t lut[256];
    hq_lut_match(h, h, 256, lut);
    for (uint32_t v = 0; v < 256; v++)
        if (h[v])
            assert_int_equal(lut[v], v);
    check_match(h, h, 256);
}

static void test_match_random(void **state)
{
    (void)state;
    srand(12);
    static const uint32_t BITS[] = {1, 2, 4, 8, 10, 12};
    for (size_t b = 0; b < sizeof BITS / sizeof *BITS; b++) {
        const uint32_t bins = 1u << BITS[b];
        uint64_t *s = calloc(bins, sizeof *s), *t = calloc(bins, sizeof *t);
        assert_non_null(s);
        assert_non_null(t);
        for (int round = 0; round < 20; round++) {
            memset(s, 0, bins * sizeof *s);
            memset(t, 0, bins * sizeof *t);
            const int ks = 1 + rand() % 300, kt = 1 + rand() % 300;
            for (int k = 0; k < ks; k++)
                s[rand() % bins] += 1 + (uint64_t)(rand() % 5000);
            for (int k = 0; k < kt; k++)
                t[rand() % bins] += 1 + (uint64_t)(rand() % 5000);
            check_match(s, t, bins);
        }
        free(s);
        free(t);
    }
}

static void test_match_16bit(void **state)
{
    (void)state;
    const uint32_t bins = 65536;
    uint64_t *s = calloc(bins, sizeof *s), *t = calloc(bins, sizeof *t);
    assert_non_null(s);
    assert_non_null(t);
    srand(13);
    for (int k = 0; k < 2000; k++) {
        s[(uint32_t)rand() % bins] += 1 + (uint64_t)(rand() % 100);
        t[(uint32_t)rand() % 4096 + 30000] += 1 + (uint64_t)(rand() % 100);
    }
    check_match(s, t, bins);
    free(s);
    free(t);
}

/* Totals near 2^62: C_t(w) * N_s passes 2^64 by far, so 64-bit products would wrap. */
static void test_match_huge_counts(void **state)
{
    (void)state;
    const uint64_t big = (uint64_t)1 << 62;
    uint64_t s[4] = {big / 4, big / 4, big / 2 - 1, 1}, t[4] = {big / 2, 1, 0, big / 2 - 1};
    uint16_t lut[4];
    hq_lut_match(s, t, 4, lut);
    /* v = 0: share 1/4 -> w = 0 (tgt 1/2); v = 1: share 1/2 -> C_t(0) = big/2 reaches it: w = 0;
     * v = 2: share (big - 1)/big -> C_t(1) = big/2 + 1 is short, C_t(3) = big: w = 3. */
    assert_int_equal(lut[0], 0);
    assert_int_equal(lut[1], 0);
    assert_int_equal(lut[2], 3);
    assert_int_equal(lut[3], 3);
    check_match(s, t, 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_histogram_is_identity),
        cmocka_unit_test(test_constant_image_is_identity),
        cmocka_unit_test(test_two_values),
        cmocka_unit_test(test_empty_bins_at_both_ends),
        cmocka_unit_test(test_hand_checked_small),
        cmocka_unit_test(test_random_8bit),
        cmocka_unit_test(test_bits_1_to_16),
        cmocka_unit_test(test_any_bin_count),
        cmocka_unit_test(test_12bit_4096_bins),
        cmocka_unit_test(test_16bit_65536_bins),
        cmocka_unit_test(test_counts_above_2_32),
        cmocka_unit_test(test_counts_near_2_63),
        cmocka_unit_test(test_stretch_edges),
        cmocka_unit_test(test_hist_total),
        cmocka_unit_test(test_match_hand_checked),
        cmocka_unit_test(test_match_empty_is_identity),
        cmocka_unit_test(test_match_self_keeps_levels),
        cmocka_unit_test(test_match_random),
        cmocka_unit_test(test_match_16bit),
        cmocka_unit_test(test_match_huge_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
