/* test_engine.c — the CPU engine (engine/engine.h) against a naive reference written from cli.md.
 *
 * Every layout (gray, gray+alpha, RGB, RGBA; 8 and 16-bit; several significant-bit counts with
 * samples above the range; luma, channels, value), blocks of one and of several segments, small
 * segments and segments of at least 2^18 pixels (the engine splits those across threads), and
 * thread counts 1, 2, 3 which must all give the reference's results bit for bit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../engine/engine.h"

static uint64_t rng_state;
static uint32_t rnd(uint32_t n)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 0x2545F4914F6CDD1Dull) >> 32) % n;
}

/* ---- the reference ---------------------------------------------------------------------- */

static uint32_t get(const void *d, uint32_t sb, uint64_t i)
{
    return sb == 1 ? ((const uint8_t *)d)[i] : ((const uint16_t *)d)[i];
}

static void put(void *d, uint32_t sb, uint64_t i, uint32_t v)
{
    if (sb == 1)
        ((uint8_t *)d)[i] = (uint8_t)v;
    else
        ((uint16_t *)d)[i] = (uint16_t)v;
}

static uint32_t clampv(uint32_t v, uint32_t maxv)
{
    return v < maxv ? v : maxv;
}

static uint32_t ref_luma_bin(uint32_t r, uint32_t g, uint32_t b)
{
    return (uint32_t)((4899ull * r + 9617ull * g + 1868ull * b + 8192) >> 14);
}

static uint32_t nhist_of(const hq_mode *m)
{
    return (m->channels >= 3 && m->color == HQ_COLOR_CHANNELS) ? 3 : 1;
}

static void ref_histogram(const void *d, const hq_mode *m, uint64_t p0, uint64_t n, uint64_t *h)
{
    const uint32_t ch = m->channels, sb = m->sample_bytes, bins = 1u << m->bits, maxv = bins - 1;
    for (uint64_t p = p0; p < p0 + n; p++) {
        const uint64_t i = p * ch;
        if (ch < 3) {
            h[clampv(get(d, sb, i), maxv)]++;
            continue;
        }
        uint32_t r = clampv(get(d, sb, i), maxv), g = clampv(get(d, sb, i + 1), maxv),
                 b = clampv(get(d, sb, i + 2), maxv);
        if (m->color == HQ_COLOR_CHANNELS) {
            h[r]++;
            h[bins + g]++;
            h[2 * bins + b]++;
        } else if (m->color == HQ_COLOR_VALUE) {
            uint32_t v = r > g ? r : g;
            h[v > b ? v : b]++;
        } else {
            h[ref_luma_bin(r, g, b)]++;
        }
    }
}

static uint32_t ref_luma_channel(uint32_t c, uint32_t y2, int64_t y_fx, uint32_t maxv)
{
    int64_t t = ((int64_t)c << 14) + ((int64_t)y2 << 14) - y_fx + 8192;
    if (t < 0)
        return 0;
    t /= 16384; /* t >= 0: truncation is floor */
    return t > maxv ? maxv : (uint32_t)t;
}

static uint32_t ref_value_channel(uint32_t c, uint32_t v, uint32_t v2)
{
    return v == 0 ? v2 : (uint32_t)((2ull * c * v2 + v) / (2ull * v));
}

static void ref_remap(void *d, const hq_mode *m, uint64_t p0, uint64_t n, const uint16_t *lut)
{
    const uint32_t ch = m->channels, sb = m->sample_bytes, bins = 1u << m->bits, maxv = bins - 1;
    for (uint64_t p = p0; p < p0 + n; p++) {
        const uint64_t i = p * ch;
        if (ch < 3) {
            put(d, sb, i, lut[clampv(get(d, sb, i), maxv)]);
            continue;
        }
        uint32_t c[3];
        for (int k = 0; k < 3; k++)
            c[k] = clampv(get(d, sb, i + k), maxv);
        if (m->color == HQ_COLOR_CHANNELS) {
            for (uint32_t k = 0; k < 3; k++)
                put(d, sb, i + k, lut[k * bins + c[k]]);
        } else if (m->color == HQ_COLOR_VALUE) {
            uint32_t v = c[0] > c[1] ? c[0] : c[1];
            v = v > c[2] ? v : c[2];
            for (int k = 0; k < 3; k++)
                put(d, sb, i + k, ref_value_channel(c[k], v, lut[v]));
        } else {
            int64_t y_fx = 4899ll * c[0] + 9617ll * c[1] + 1868ll * c[2];
            uint32_t y2 = lut[ref_luma_bin(c[0], c[1], c[2])];
            for (int k = 0; k < 3; k++)
                put(d, sb, i + k, ref_luma_channel(c[k], y2, y_fx, maxv));
        }
    }
}

/* ---- data ------------------------------------------------------------------------------- */

/* Segment s is a smooth ramp in its own narrow band plus noise, with a few samples anywhere in
 * the full sample range (so samples above 2^bits - 1 occur and must be clamped). */
static void *make_block(const hq_mode *m, uint64_t nseg, uint64_t seg_pixels)
{
    const uint32_t ch = m->channels, sb = m->sample_bytes;
    const uint32_t full = sb == 1 ? 256u : 65536u, bins = 1u << m->bits;
    void *d = malloc(nseg * seg_pixels * ch * sb);
    assert_non_null(d);
    for (uint64_t s = 0; s < nseg; s++) {
        const uint32_t base = (uint32_t)((bins / 4) + (s * bins) / 8) % bins;
        const uint32_t band = bins / 8 + 1;
        for (uint64_t p = 0; p < seg_pixels; p++) {
            const uint64_t i = (s * seg_pixels + p) * ch;
            for (uint32_t k = 0; k < ch; k++) {
                uint32_t v;
                if (rnd(50) == 0)
                    v = rnd(full);
                else
                    v = (base + (uint32_t)((p * band) / seg_pixels) + rnd(band / 4 + 1) + k * band / 2) % full;
                put(d, sb, i + k, v);
            }
        }
    }
    return d;
}

static uint16_t *random_lut(uint32_t len, uint32_t bins)
{
    uint16_t *l = malloc(len * sizeof *l);
    assert_non_null(l);
    for (uint32_t i = 0; i < len; i++)
        l[i] = (uint16_t)rnd(bins);
    return l;
}

/* ---- the cases -------------------------------------------------------------------------- */

typedef struct mcase {
    uint32_t channels, sample_bytes, bits;
    hq_color color;
} mcase;

static const mcase modes[] = {
    {1, 1, 8, HQ_COLOR_LUMA},      {1, 1, 4, HQ_COLOR_LUMA},      {1, 1, 1, HQ_COLOR_LUMA},
    {1, 2, 16, HQ_COLOR_LUMA},     {1, 2, 12, HQ_COLOR_LUMA},     {1, 2, 8, HQ_COLOR_LUMA},
    {2, 1, 8, HQ_COLOR_LUMA},      {2, 2, 16, HQ_COLOR_LUMA},     {2, 2, 10, HQ_COLOR_LUMA},
    {3, 1, 8, HQ_COLOR_LUMA},      {3, 1, 8, HQ_COLOR_CHANNELS},  {3, 1, 8, HQ_COLOR_VALUE},
    {3, 1, 6, HQ_COLOR_LUMA},      {3, 1, 6, HQ_COLOR_CHANNELS},  {3, 1, 6, HQ_COLOR_VALUE},
    {3, 2, 16, HQ_COLOR_LUMA},     {3, 2, 16, HQ_COLOR_CHANNELS}, {3, 2, 16, HQ_COLOR_VALUE},
    {3, 2, 12, HQ_COLOR_LUMA},     {3, 2, 12, HQ_COLOR_CHANNELS}, {3, 2, 12, HQ_COLOR_VALUE},
    {4, 1, 8, HQ_COLOR_LUMA},      {4, 1, 8, HQ_COLOR_CHANNELS},  {4, 1, 8, HQ_COLOR_VALUE},
    {4, 2, 16, HQ_COLOR_LUMA},     {4, 2, 16, HQ_COLOR_CHANNELS}, {4, 2, 16, HQ_COLOR_VALUE},
    {4, 2, 12, HQ_COLOR_LUMA},     {4, 2, 12, HQ_COLOR_CHANNELS}, {4, 2, 12, HQ_COLOR_VALUE},
};
#define NMODES (sizeof modes / sizeof *modes)

static hq_engine *engines[3]; /* threads 1, 2, 3 */

static int setup(void **state)
{
    (void)state;
    hq_err err = {{0}};
    for (int t = 0; t < 3; t++) {
        hq_engine_cfg cfg = {.threads = t + 1, .local_rank = 0, .local_size = 1, .verbose = 0};
        if (hq_cpu_engine_create(&cfg, &engines[t], &err) != 0) {
            fprintf(stderr, "hq_cpu_engine_create: %s\n", err.msg);
            return -1;
        }
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int t = 0; t < 3; t++)
        hq_engine_destroy(engines[t]);
    return 0;
}

static void describe_mode(const hq_mode *m, char *buf, size_t len)
{
    snprintf(buf, len, "ch=%u sb=%u bits=%u color=%s", m->channels, m->sample_bytes, m->bits,
             hq_color_name(m->color));
}

/* One block shape in one mode, through all three engines; masked: with a mask plane (a third of
 * the pixels 0, runs of zeros, the last segment wholly masked out when there are several), where
 * the reference counts and remaps the pixels with a non-zero byte one by one and keeps the others. */
static void check_shape_mask(const hq_mode *m, uint64_t nseg, uint64_t seg_pixels, int masked)
{
    char what[128];
    describe_mode(m, what, sizeof what);
    const uint32_t bins = 1u << m->bits, nh = nhist_of(m);
    const size_t hlen = (size_t)nh * bins;
    const uint64_t bytes = nseg * seg_pixels * m->channels * m->sample_bytes;
    void *orig = make_block(m, nseg, seg_pixels);
    void *keep = malloc(bytes);
    assert_non_null(keep);
    memcpy(keep, orig, bytes);

    uint64_t *want_h = calloc(nseg * hlen, sizeof *want_h);
    uint64_t *got_h = calloc(nseg * hlen, sizeof *got_h);
    uint64_t **hp = malloc(nseg * sizeof *hp);
    const uint16_t **lp = malloc(nseg * sizeof *lp);
    uint16_t *luts = random_lut((uint32_t)(nseg * hlen), bins);
    void *want_d = malloc(bytes), *got_d = malloc(bytes);
    uint8_t *mk = masked ? malloc(nseg * seg_pixels) : NULL;
    assert_true(want_h && got_h && hp && lp && want_d && got_d && (mk || !masked));
    for (uint64_t i = 0; mk && i < nseg * seg_pixels; i++)
        mk[i] = rnd(3) == 0 ? 0 : (uint8_t)(1 + rnd(255));
    for (uint64_t i = 0; mk && i + 50 <= nseg * seg_pixels; i += 1201)
        memset(mk + i, 0, 50);
    if (mk && nseg > 1)
        memset(mk + (nseg - 1) * seg_pixels, 0, seg_pixels);

    for (uint64_t s = 0; s < nseg; s++) {
        if (!mk)
            ref_histogram(orig, m, s * seg_pixels, seg_pixels, want_h + s * hlen);
        for (uint64_t p = s * seg_pixels; mk && p < (s + 1) * seg_pixels; p++)
            if (mk[p])
                ref_histogram(orig, m, p, 1, want_h + s * hlen);
        hp[s] = got_h + s * hlen;
        lp[s] = luts + s * hlen;
    }
    memcpy(want_d, orig, bytes);
    for (uint64_t s = 0; s < nseg; s++) {
        if (!mk)
            ref_remap(want_d, m, s * seg_pixels, seg_pixels, lp[s]);
        for (uint64_t p = s * seg_pixels; mk && p < (s + 1) * seg_pixels; p++)
            if (mk[p])
                ref_remap(want_d, m, p, 1, lp[s]);
    }

    for (int t = 0; t < 3; t++) {
        hq_err err = {{0}};
        hq_block_data b = {orig, nseg, seg_pixels, 0, mk, NULL, NULL};
        memset(got_h, 0, nseg * hlen * sizeof *got_h);
        if (engines[t]->ops->histogram(engines[t], &b, m, (uint64_t *const *)hp, &err) != 0)
            fail_msg("%s threads=%d: histogram failed: %s", what, t + 1, err.msg);
        for (uint64_t s = 0; s < nseg; s++)
            for (size_t v = 0; v < hlen; v++)
                if (got_h[s * hlen + v] != want_h[s * hlen + v])
                    fail_msg("%s threads=%d nseg=%llu seg_pixels=%llu: hist[seg %llu][%zu] = %llu, want %llu", what,
                             t + 1, (unsigned long long)nseg, (unsigned long long)seg_pixels, (unsigned long long)s,
                             v, (unsigned long long)got_h[s * hlen + v], (unsigned long long)want_h[s * hlen + v]);
        memcpy(got_d, orig, bytes);
        hq_block_data rb = {got_d, nseg, seg_pixels, 0, mk, NULL, NULL};
        if (engines[t]->ops->remap(engines[t], &rb, m, lp, &err) != 0)
            fail_msg("%s threads=%d: remap failed: %s", what, t + 1, err.msg);
        if (memcmp(got_d, want_d, bytes) != 0) {
            uint64_t i = 0;
            while (get(got_d, m->sample_bytes, i) == get(want_d, m->sample_bytes, i))
                i++;
            fail_msg("%s threads=%d nseg=%llu seg_pixels=%llu: remap sample %llu (pixel %llu ch %llu) = %u, want %u "
                     "(input %u)",
                     what, t + 1, (unsigned long long)nseg, (unsigned long long)seg_pixels, (unsigned long long)i,
                     (unsigned long long)(i / m->channels), (unsigned long long)(i % m->channels),
                     get(got_d, m->sample_bytes, i), get(want_d, m->sample_bytes, i), get(orig, m->sample_bytes, i));
        }
        /* Out of place (hq_block_data.out, as for a view of the input file): the same result, the
         * source only read. */
        memset(got_d, 0xa5, bytes);
        hq_block_data ob = {orig, nseg, seg_pixels, 0, mk, NULL, got_d};
        if (engines[t]->ops->remap(engines[t], &ob, m, lp, &err) != 0)
            fail_msg("%s threads=%d: out-of-place remap failed: %s", what, t + 1, err.msg);
        if (memcmp(got_d, want_d, bytes) != 0)
            fail_msg("%s threads=%d nseg=%llu seg_pixels=%llu: out-of-place remap differs from the reference", what,
                     t + 1, (unsigned long long)nseg, (unsigned long long)seg_pixels);
        if (memcmp(orig, keep, bytes) != 0)
            fail_msg("%s threads=%d: out-of-place remap changed its source", what, t + 1);
    }
    free(keep);
    free(orig);
    free(want_h);
    free(got_h);
    free(hp);
    free(lp);
    free(luts);
    free(want_d);
    free(got_d);
    free(mk);
}

static void check_shape(const hq_mode *m, uint64_t nseg, uint64_t seg_pixels)
{
    check_shape_mask(m, nseg, seg_pixels, 0);
}

/* The mask plane (hq_block_data.mask), small and large segments, every mode. */
static void test_masked_every_mode(void **state)
{
    (void)state;
    rng_state = 0x5151ull;
    for (size_t k = 0; k < NMODES; k++) {
        hq_mode m = {modes[k].channels, modes[k].sample_bytes, modes[k].bits, modes[k].color, 0};
        check_shape_mask(&m, 1, 1000, 1);
        check_shape_mask(&m, 17, 64, 1);
        check_shape_mask(&m, 2, (1u << 18) + 3, 1);
    }
}

static void test_small_blocks_every_mode(void **state)
{
    (void)state;
    rng_state = 0x1234567ull;
    for (size_t k = 0; k < NMODES; k++) {
        hq_mode m = {modes[k].channels, modes[k].sample_bytes, modes[k].bits, modes[k].color, 0};
        check_shape(&m, 1, 1);
        check_shape(&m, 1, 7);
        check_shape(&m, 1, 1000);
        check_shape(&m, 3, 333); /* three small segments: one histogram each */
        check_shape(&m, 17, 64);
    }
}

/* Segments of at least 2^18 pixels are split across threads inside the segment. */
static void test_large_segments_every_mode(void **state)
{
    (void)state;
    rng_state = 0xABCDEFull;
    for (size_t k = 0; k < NMODES; k++) {
        hq_mode m = {modes[k].channels, modes[k].sample_bytes, modes[k].bits, modes[k].color, 0};
        check_shape(&m, 3, (1u << 18) + 5);
    }
    hq_mode gray8 = {1, 1, 8, HQ_COLOR_LUMA, 0};
    check_shape(&gray8, 1, (1u << 20) + 3); /* the 8-bytes-at-a-time path with a tail */
    check_shape(&gray8, 2, 1u << 18);       /* exactly at the threshold */
    check_shape(&gray8, 2, (1u << 18) - 1); /* just below it */
}

/* Each segment gets its own histogram: three segments with disjoint values. */
static void test_segments_have_own_histograms(void **state)
{
    (void)state;
    const uint64_t sizes[] = {100, (1u << 18) + 1};
    for (size_t k = 0; k < 2; k++) {
        const uint64_t np = sizes[k];
        uint8_t *d = malloc(3 * np);
        for (uint64_t p = 0; p < np; p++) {
            d[p] = (uint8_t)(10 + p % 3);
            d[np + p] = (uint8_t)(100 + p % 2);
            d[2 * np + p] = 200;
        }
        uint64_t h[3][256];
        memset(h, 0, sizeof h);
        uint64_t *hp[3] = {h[0], h[1], h[2]};
        hq_mode m = {1, 1, 8, HQ_COLOR_LUMA, 0};
        hq_block_data b = {d, 3, np, 0, NULL, NULL, NULL};
        hq_err err = {{0}};
        for (int t = 0; t < 3; t++) {
            memset(h, 0, sizeof h);
            assert_int_equal(engines[t]->ops->histogram(engines[t], &b, &m, hp, &err), 0);
            assert_true(h[0][10] + h[0][11] + h[0][12] == np);
            assert_true(h[1][100] + h[1][101] == np);
            assert_true(h[2][200] == np);
            assert_true(h[0][100] == 0 && h[0][200] == 0 && h[1][10] == 0 && h[2][10] == 0 && h[2][100] == 0);
            /* Accumulated, never overwritten. */
            assert_int_equal(engines[t]->ops->histogram(engines[t], &b, &m, hp, &err), 0);
            assert_true(h[2][200] == 2 * np);
            assert_true(h[1][100] + h[1][101] == 2 * np);
        }
        /* Each segment its own LUT. */
        uint16_t l0[256], l1[256], l2[256];
        for (int v = 0; v < 256; v++) {
            l0[v] = 1;
            l1[v] = 2;
            l2[v] = (uint16_t)(255 - v);
        }
        const uint16_t *lp[3] = {l0, l1, l2};
        assert_int_equal(engines[1]->ops->remap(engines[1], &b, &m, lp, &err), 0);
        for (uint64_t p = 0; p < np; p++) {
            assert_int_equal(d[p], 1);
            assert_int_equal(d[np + p], 2);
            assert_int_equal(d[2 * np + p], 55);
        }
        free(d);
    }
}

/* Alpha (2nd of gray+alpha, 4th of RGBA) is never touched, even above the significant range. */
static void test_alpha_untouched(void **state)
{
    (void)state;
    uint16_t px[4 * 4] = {100, 200, 300, 65535, 5000, 6000, 7000, 4096, 0, 0, 0, 9999, 4095, 4095, 4095, 1};
    uint16_t lut[4096];
    for (int v = 0; v < 4096; v++)
        lut[v] = (uint16_t)(4095 - v);
    const uint16_t *lp[1] = {lut};
    for (int c = 0; c < 3; c++) {
        uint16_t d[16];
        memcpy(d, px, sizeof d);
        hq_mode m = {4, 2, 12, (hq_color)c, 0};
        hq_block_data b = {d, 1, 4, 0, NULL, NULL, NULL};
        hq_err err = {{0}};
        const uint16_t *lp3[1] = {NULL};
        uint16_t lut3[3 * 4096];
        for (int k = 0; k < 3; k++)
            memcpy(lut3 + k * 4096, lut, sizeof lut);
        lp3[0] = lut3;
        assert_int_equal(engines[0]->ops->remap(engines[0], &b, &m, c == HQ_COLOR_CHANNELS ? lp3 : lp, &err), 0);
        for (int p = 0; p < 4; p++)
            assert_int_equal(d[p * 4 + 3], px[p * 4 + 3]);
    }
    uint8_t ga[6] = {10, 250, 20, 251, 30, 252};
    uint16_t l8[256];
    for (int v = 0; v < 256; v++)
        l8[v] = (uint16_t)(v + 1 > 255 ? 255 : v + 1);
    const uint16_t *lp8[1] = {l8};
    hq_mode m = {2, 1, 8, HQ_COLOR_LUMA, 0};
    hq_block_data b = {ga, 1, 3, 0, NULL, NULL, NULL};
    hq_err err = {{0}};
    assert_int_equal(engines[2]->ops->remap(engines[2], &b, &m, lp8, &err), 0);
    const uint8_t want[6] = {11, 250, 21, 251, 31, 252};
    assert_memory_equal(ga, want, 6);
}

static void test_create_and_describe(void **state)
{
    (void)state;
    hq_engine *e = NULL;
    hq_err err = {{0}};
    hq_engine_cfg cfg = {0}; /* threads 0: all cores */
    assert_int_equal(hq_cpu_engine_create(&cfg, &e, &err), 0);
    assert_non_null(e);
    assert_non_null(e->ops->name);
    char buf[256] = {0};
    e->ops->describe(e, buf, sizeof buf);
    assert_true(strlen(buf) > 0);
    hq_engine_destroy(e);
    hq_engine_destroy(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_and_describe),
        cmocka_unit_test(test_small_blocks_every_mode),
        cmocka_unit_test(test_large_segments_every_mode),
        cmocka_unit_test(test_segments_have_own_histograms),
        cmocka_unit_test(test_alpha_untouched),
        cmocka_unit_test(test_masked_every_mode),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
