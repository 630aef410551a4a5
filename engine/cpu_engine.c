/* cpu_engine.c — the validation reference, also built to be fast: OpenMP over pieces of each image
 * handed out dynamically, per-thread private histograms merged once, and integer-only pixel math
 * from core/pixel.h.
 * Thread count cannot change a result: histograms are integer sums, remaps are per pixel.
 *
 * The common layouts (8-bit gray, 16-bit gray, 8-bit RGB/RGBA in each colour mode) have loops of
 * their own: sub-histograms with narrow counters, and remaps through tables filled from the LUT by
 * the same pixel.h functions, so they agree with the generic loops bit for bit. A remap that would
 * change nothing is skipped. What each trick buys, measured: bench/README.md. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/pixel.h"
#include "block_pool.h"
#include "cpu_clahe.h"
#include "cpu_float.h"
#include "engine.h"

typedef struct cpu_impl {
    int threads;
    hq_block_pool pool;
} cpu_impl;

/* Below this many pixels a segment is not worth splitting across threads; segments are then
 * spread over threads instead (collections of small slices). */
#define SMALL_SEGMENT (1u << 18)

/* A table that maps two 8-bit pixels per lookup (128 KiB) costs ~40-60 us to fill and saves
 * ~0.1 ns a pixel; it pays from about a million pixels. The value-mode table (64 KiB, 32,896 divisions) pays much sooner. */
#define PAIR_TABLE_MIN (1u << 20)
#define VALUE_TABLE_MIN (1u << 15)

/* A big segment is handed to the threads in pieces of about 1/16 of a thread's share, at least
 * MIN_PIECE pixels: a thread slowed down by another process on its core then holds the others
 * back by one piece at most, not by its whole static share. */
#define MIN_PIECE ((uint64_t)1 << 16)
#define PIECES_PER_THREAD 16

/* 8-bit sub-histograms laid 256 counters apart would put equal bins at addresses a multiple of
 * 4 KiB apart, which the CPU's store-to-load predictor takes for a dependency (4K aliasing); the
 * padding keeps them apart. Several sub-histograms break the chain of increments to one counter
 * when neighbouring pixels share a bin (flat backgrounds, constant images). */
#define SUB_STRIDE (256 + 16)
#define SUBS 8

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* ---------------------------------------------------------------- histogram accumulators */

typedef uint32_t sub_hist[SUBS][SUB_STRIDE];

/* One thread's histogram of one segment: 64-bit counters (the result), fed for gray data through
 * narrow 32-bit counters that are cheaper to increment and are folded in once at the end, or
 * before any of them could wrap. The RGB and generic loops count into wide directly. */
typedef struct hist_acc {
    uint64_t *wide;  /* hq_mode_nhist * bins counters */
    sub_hist *sub8;  /* 8-bit gray: SUBS sub-histograms, zero when nothing is pending */
    uint32_t *sub16; /* 16-bit gray: one counter per bin, or NULL to count into wide */
    uint32_t maxv;
    uint64_t pending; /* pixels in the narrow counters since the last fold */
} hist_acc;

/* Bin 256 of each 8-bit sub-histogram (inside the padding) takes the masked-out pixels of the
 * masked gray loop, so that it needs no branch; it is never folded, only cleared. */
#define MASKED_OUT_BIN 256

/* Adds the narrow counters into wide and zeroes them. */
static void acc_fold(hist_acc *a)
{
    if (a->pending == 0)
        return;
    if (a->sub16) {
        for (uint32_t v = 0; v <= a->maxv; v++) {
            a->wide[v] += a->sub16[v];
            a->sub16[v] = 0;
        }
    }
    if (a->sub8) {
        for (uint32_t v = 0; v < 256; v++) {
            uint64_t sum = 0;
            for (uint32_t k = 0; k < SUBS; k++) {
                sum += (*a->sub8)[k][v];
                (*a->sub8)[k][v] = 0;
            }
            if (sum)
                a->wide[hq_bin(v, a->maxv)] += sum;
        }
        for (uint32_t k = 0; k < SUBS; k++)
            (*a->sub8)[k][MASKED_OUT_BIN] = 0;
    }
    a->pending = 0;
}

/* Makes room for n more pixels (n < 2^32) in the narrow counters, none of which may pass 2^32 - 1. */
static void acc_reserve(hist_acc *a, uint64_t n)
{
    if (a->pending + n > UINT32_MAX)
        acc_fold(a);
    a->pending += n;
}

/* Narrow counters take at most this many pixels per acc_reserve. */
#define RESERVE_MAX ((uint64_t)1 << 30)

/* ---------------------------------------------------------------- gray histograms */

/* 8-bit gray, contiguous: 8 pixels per iteration, one per sub-histogram. */
static void hist_gray8(const uint8_t *p, uint64_t n, hist_acc *a)
{
    sub_hist *sub = a->sub8;
    for (uint64_t i = 0; i < n;) {
        const uint64_t end = n - i > RESERVE_MAX ? i + RESERVE_MAX : n;
        acc_reserve(a, end - i);
        for (; i + 8 <= end; i += 8) {
            uint8_t q[8];
            memcpy(q, p + i, 8);
            (*sub)[0][q[0]]++;
            (*sub)[1][q[4]]++;
            (*sub)[2][q[1]]++;
            (*sub)[3][q[5]]++;
            (*sub)[4][q[2]]++;
            (*sub)[5][q[6]]++;
            (*sub)[6][q[3]]++;
            (*sub)[7][q[7]]++;
        }
        for (; i < end; i++)
            (*sub)[i & 7][p[i]]++;
    }
}

/* 8-bit gray with a mask plane: the same sub-histograms, masked-out pixels counted into the
 * unused bin 256. */
static void hist_gray8_masked(const uint8_t *p, const uint8_t *mk, uint64_t n, hist_acc *a)
{
    sub_hist *sub = a->sub8;
    for (uint64_t i = 0; i < n;) {
        const uint64_t end = n - i > RESERVE_MAX ? i + RESERVE_MAX : n;
        acc_reserve(a, end - i);
        for (; i < end; i++)
            (*sub)[i & 7][mk[i] ? p[i] : MASKED_OUT_BIN]++;
    }
}

/* 8-bit gray+alpha: channel 0 of every stride-th byte. */
static void hist_gray8_strided(const uint8_t *p, uint64_t n, uint32_t stride, hist_acc *a)
{
    sub_hist *sub = a->sub8;
    for (uint64_t i = 0; i < n;) {
        const uint64_t end = n - i > RESERVE_MAX ? i + RESERVE_MAX : n;
        acc_reserve(a, end - i);
        for (; i < end; i++)
            (*sub)[i & 3][p[i * stride]]++;
    }
}

/* 16-bit gray. 32-bit counters halve the histogram's cache footprint (256 KiB for 16 bits); a
 * single set is enough, as neighbouring 16-bit samples rarely share a bin. */
static void hist_gray16(const uint16_t *p, uint64_t n, hist_acc *a)
{
    const uint32_t maxv = a->maxv;
    if (!a->sub16) {
        for (uint64_t i = 0; i < n; i++)
            a->wide[hq_bin(p[i], maxv)]++;
        return;
    }
    uint32_t *sub = a->sub16;
    for (uint64_t i = 0; i < n;) {
        const uint64_t end = n - i > RESERVE_MAX ? i + RESERVE_MAX : n;
        acc_reserve(a, end - i);
        if (maxv == 0xffff) {
            for (; i + 4 <= end; i += 4) {
                uint16_t q[4];
                memcpy(q, p + i, 8);
                sub[q[0]]++;
                sub[q[1]]++;
                sub[q[2]]++;
                sub[q[3]]++;
            }
        }
        for (; i < end; i++)
            sub[hq_bin(p[i], maxv)]++;
    }
}

/* ---------------------------------------------------------------- 8-bit RGB(A) histograms */

/* Each RGB body below is inlined with a literal channel count (3 or 4) and, where it matters, a
 * literal maxv = 255 (8 significant bits: hq_bin does nothing), so every layout gets a loop with
 * constant strides. They count straight into the 64-bit histogram: with three samples to load per
 * pixel, sub-histograms (and tables in place of the luma products) measured slower here. */
ALWAYS_INLINE void hist_rgb8_body(const uint8_t *p, uint64_t n, uint32_t ch, uint32_t maxv, hq_color color,
                                  uint64_t *hist)
{
    const uint32_t bins = maxv + 1;
    if (color == HQ_COLOR_CHANNELS) {
        for (uint64_t i = 0; i < n; i++) {
            const uint8_t *px = p + i * ch;
            hist[hq_bin(px[0], maxv)]++;
            hist[bins + hq_bin(px[1], maxv)]++;
            hist[2 * bins + hq_bin(px[2], maxv)]++;
        }
    } else if (color == HQ_COLOR_VALUE) {
        for (uint64_t i = 0; i < n; i++) {
            const uint8_t *px = p + i * ch;
            hist[hq_bin(hq_max3(px[0], px[1], px[2]), maxv)]++;
        }
    } else {
        for (uint64_t i = 0; i < n; i++) {
            const uint8_t *px = p + i * ch;
            const uint32_t r = hq_bin(px[0], maxv), g = hq_bin(px[1], maxv), b = hq_bin(px[2], maxv);
            hist[hq_luma_of_fx(hq_luma_fx(r, g, b))]++;
        }
    }
}

static void hist_rgb8(const uint8_t *p, uint64_t n, const hq_mode *m, uint64_t *hist)
{
    const uint32_t maxv = hq_mode_bins(m) - 1;
    if (m->channels == 3 && maxv == 255)
        hist_rgb8_body(p, n, 3, 255, m->color, hist);
    else if (m->channels == 3)
        hist_rgb8_body(p, n, 3, maxv, m->color, hist);
    else if (maxv == 255)
        hist_rgb8_body(p, n, 4, 255, m->color, hist);
    else
        hist_rgb8_body(p, n, 4, maxv, m->color, hist);
}

/* ---------------------------------------------------------------- generic histograms */

/* The path for every other layout (16-bit RGB, 16-bit gray+alpha), written once for both widths. */
#define DEFINE_HIST(NAME, T)                                                                                \
    static void NAME(const T *p, uint64_t n, const hq_mode *m, uint64_t *hist)                              \
    {                                                                                                       \
        const uint32_t ch = m->channels, maxv = hq_mode_bins(m) - 1, bins = hq_mode_bins(m);                \
        if (ch < 3) {                                                                                       \
            for (uint64_t i = 0; i < n; i++)                                                                \
                hist[hq_bin(p[i * ch], maxv)]++;                                                            \
        } else if (m->color == HQ_COLOR_CHANNELS) {                                                         \
            for (uint64_t i = 0; i < n; i++) {                                                              \
                hist[hq_bin(p[i * ch], maxv)]++;                                                            \
                hist[bins + hq_bin(p[i * ch + 1], maxv)]++;                                                 \
                hist[2 * bins + hq_bin(p[i * ch + 2], maxv)]++;                                             \
            }                                                                                               \
        } else if (m->color == HQ_COLOR_VALUE) {                                                            \
            for (uint64_t i = 0; i < n; i++)                                                                \
                hist[hq_bin(hq_max3(p[i * ch], p[i * ch + 1], p[i * ch + 2]), maxv)]++;                     \
        } else {                                                                                            \
            for (uint64_t i = 0; i < n; i++) {                                                              \
                uint32_t r = hq_bin(p[i * ch], maxv), g = hq_bin(p[i * ch + 1], maxv),                      \
                         b = hq_bin(p[i * ch + 2], maxv);                                                   \
                hist[hq_luma_of_fx(hq_luma_fx(r, g, b))]++;                                                 \
            }                                                                                               \
        }                                                                                                   \
    }
DEFINE_HIST(hist_u8, uint8_t)
DEFINE_HIST(hist_u16, uint16_t)

/* ---------------------------------------------------------------- remap tables */

/* What a remap of one segment may precompute from its LUT. For 8-bit samples every LUT becomes a
 * byte table with hq_bin folded in: lut values never exceed maxv <= 255. */
typedef struct remap_tables {
    int identity;          /* the remap changes nothing: skip it */
    uint8_t bytes[3][256]; /* 8-bit: per histogram, sample -> output sample */
    uint16_t *pairs;       /* 8-bit gray: two contiguous pixels per lookup, or NULL */
    uint8_t *value;        /* 8-bit value mode: value[V * 256 + c] = c', or NULL */
} remap_tables;

static int fast8(const hq_mode *m)
{
    return m->sample_bytes == 1 && m->bits <= 8;
}

/* pairs[u] for the 16-bit word u holding two pixels. Written on the word's numeric value, it maps
 * each byte to its own position whatever the machine's byte order. */
static void pair_table_fill(const uint8_t *t, uint16_t *pairs)
{
    for (uint32_t hi = 0; hi < 256; hi++)
        for (uint32_t lo = 0; lo < 256; lo++)
            pairs[hi << 8 | lo] = (uint16_t)(t[hi] << 8 | t[lo]);
}

/* Every (V, c) with c <= V, the only pairs max3 can produce: the divisions move out of the pixel loop. */
static void value_table_fill(const uint16_t *lut, uint32_t maxv, uint8_t *value)
{
    for (uint32_t v = 0; v <= maxv; v++)
        for (uint32_t c = 0; c <= v; c++)
            value[v * 256 + c] = (uint8_t)hq_value_apply(c, v, lut[v]);
}

/* True when the remap would leave every sample as it is (the LUT of a constant image, of a blank
 * slice): the block is remapped in place, so it is then skipped. Luma is never skipped: with an
 * identity LUT a pixel whose luma rounds up by exactly one half still moves. Value and channels
 * keep every sample under an identity LUT (c * V / V). A sample above maxv would be clamped, which
 * the folded byte table shows and which cannot happen with 16 significant bits. */
static int remap_is_identity(const hq_mode *m, const uint16_t *lut, const remap_tables *t)
{
    if (m->channels >= 3 && m->color == HQ_COLOR_LUMA)
        return 0;
    const uint32_t nh = hq_mode_nhist(m);
    if (fast8(m)) {
        for (uint32_t h = 0; h < nh; h++)
            for (uint32_t v = 0; v < 256; v++)
                if (t->bytes[h][v] != v)
                    return 0;
        return 1;
    }
    if (m->sample_bytes != 2 || m->bits != 16)
        return 0;
    for (uint32_t h = 0; h < nh; h++)
        for (uint32_t v = 0; v < 65536; v++)
            if (lut[(size_t)h * 65536 + v] != v)
                return 0;
    return 1;
}

/* Fills the tables worth having for n pixels, unless the remap is the identity. A table that cannot
 * be allocated is left NULL and the remap falls back to the direct loop, so this cannot fail. */
static void remap_tables_build(const hq_mode *m, const uint16_t *lut, uint64_t n, remap_tables *t)
{
    t->pairs = NULL;
    t->value = NULL;
    const uint32_t maxv = hq_mode_bins(m) - 1, nh = hq_mode_nhist(m);
    if (fast8(m))
        for (uint32_t h = 0; h < nh; h++)
            for (uint32_t v = 0; v < 256; v++)
                t->bytes[h][v] = (uint8_t)lut[h * (maxv + 1) + hq_bin(v, maxv)];
    t->identity = remap_is_identity(m, lut, t);
    if (t->identity || !fast8(m))
        return;
    if (m->channels == 1 && n >= PAIR_TABLE_MIN && (t->pairs = malloc(65536 * sizeof *t->pairs)))
        pair_table_fill(t->bytes[0], t->pairs);
    if (m->channels >= 3 && m->color == HQ_COLOR_VALUE && n >= VALUE_TABLE_MIN && (t->value = malloc(256 * 256)))
        value_table_fill(lut, maxv, t->value);
}

static void remap_tables_free(remap_tables *t)
{
    free(t->pairs);
    free(t->value);
}

/* ---------------------------------------------------------------- 8-bit remaps */

/* Loading 8 pixels before storing any keeps each load clear of the stores just before it; a
 * plain byte loop runs ~1.5x slower in place. */
static void remap_gray8(uint8_t *p, uint64_t n, uint32_t stride, const uint8_t *t)
{
    uint64_t i = 0;
    if (stride == 1) {
        for (; i + 8 <= n; i += 8) {
            uint8_t q[8];
            memcpy(q, p + i, 8);
            for (int k = 0; k < 8; k++)
                p[i + k] = t[q[k]];
        }
    }
    for (; i < n; i++)
        p[i * stride] = t[p[i * stride]];
}

/* Four lookups of two pixels each per 8 bytes: half the loads and stores of a byte loop. Out of
 * place (d != s) or in place (d == s): each 8 bytes are loaded before any of them is stored. */
static void remap_gray8_pairs(uint8_t *d, const uint8_t *s, uint64_t n, const uint16_t *pairs, const uint8_t *t)
{
    uint64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint16_t u[4];
        memcpy(u, s + i, 8);
        u[0] = pairs[u[0]];
        u[1] = pairs[u[1]];
        u[2] = pairs[u[2]];
        u[3] = pairs[u[3]];
        memcpy(d + i, u, 8);
    }
    for (; i < n; i++)
        d[i] = t[s[i]];
}

ALWAYS_INLINE void remap_channels8_body(uint8_t *p, uint64_t n, uint32_t ch, const remap_tables *t)
{
    for (uint64_t i = 0; i < n; i++) {
        uint8_t *px = p + i * ch;
        px[0] = t->bytes[0][px[0]];
        px[1] = t->bytes[1][px[1]];
        px[2] = t->bytes[2][px[2]];
    }
}

ALWAYS_INLINE void remap_value8_body(uint8_t *p, uint64_t n, uint32_t ch, uint32_t maxv, const uint16_t *lut,
                                     const remap_tables *t)
{
    for (uint64_t i = 0; i < n; i++) {
        uint8_t *px = p + i * ch;
        const uint32_t r = hq_bin(px[0], maxv), g = hq_bin(px[1], maxv), b = hq_bin(px[2], maxv);
        const uint32_t v = hq_max3(r, g, b);
        if (t->value) {
            const uint8_t *row = t->value + v * 256;
            px[0] = row[r];
            px[1] = row[g];
            px[2] = row[b];
        } else {
            const uint32_t v2 = lut[v];
            px[0] = (uint8_t)hq_value_apply(r, v, v2);
            px[1] = (uint8_t)hq_value_apply(g, v, v2);
            px[2] = (uint8_t)hq_value_apply(b, v, v2);
        }
    }
}

/* hq_luma_apply(c, d, maxv) == clamp(c + k, 0, maxv) with k = floor((d + HALF) / 2^14): c << 14 is a
 * multiple of 2^14, so it passes through the floor unchanged, and the sum is negative exactly when
 * its floor is. k depends on the pixel only, so it is found once for three channels, and the
 * clamp becomes one lookup: clamp8[256 + x] = clamp(x, 0, maxv) for x in [-256, 511] (|k| <= maxv).
 * bench/cpu_bench.cpp checks it against hq_luma_apply on every 8-bit RGB triple. */
static void clamp8_fill(uint32_t maxv, uint8_t clamp8[768])
{
    for (int32_t x = -256; x < 512; x++)
        clamp8[x + 256] = (uint8_t)(x < 0 ? 0 : (uint32_t)x > maxv ? maxv : (uint32_t)x);
}

/* floor((d + HALF) / 2^14) without shifting a negative number: |d| < 2^30, so the biased sum is
 * positive and below 2^32. */
ALWAYS_INLINE int32_t luma_shift(int32_t d_fx)
{
    const uint32_t biased = (uint32_t)d_fx + HQ_LUMA_HALF + (1u << 30);
    return (int32_t)(biased >> HQ_LUMA_SHIFT) - (1 << (30 - HQ_LUMA_SHIFT));
}

ALWAYS_INLINE void remap_luma8_body(uint8_t *p, uint64_t n, uint32_t ch, uint32_t maxv, const uint16_t *lut)
{
    uint8_t clamp8[768];
    clamp8_fill(maxv, clamp8);
    for (uint64_t i = 0; i < n; i++) {
        uint8_t *px = p + i * ch;
        const uint32_t r = hq_bin(px[0], maxv), g = hq_bin(px[1], maxv), b = hq_bin(px[2], maxv);
        const uint32_t y_fx = hq_luma_fx(r, g, b);
        const int32_t d = (int32_t)((uint32_t)lut[hq_luma_of_fx(y_fx)] << HQ_LUMA_SHIFT) - (int32_t)y_fx;
        const uint8_t *row = clamp8 + 256 + luma_shift(d);
        px[0] = row[r];
        px[1] = row[g];
        px[2] = row[b];
    }
}

/* Specialized on the channel count, and for luma and value on maxv = 255 (8 significant bits,
 * where hq_bin does nothing). */
static void remap_rgb8(uint8_t *p, uint64_t n, const hq_mode *m, const uint16_t *lut, const remap_tables *t)
{
    const uint32_t maxv = hq_mode_bins(m) - 1;
    const int four = m->channels == 4, full = maxv == 255;
    switch (m->color) {
    case HQ_COLOR_CHANNELS:
        four ? remap_channels8_body(p, n, 4, t) : remap_channels8_body(p, n, 3, t);
        break;
    case HQ_COLOR_VALUE:
        if (full)
            four ? remap_value8_body(p, n, 4, 255, lut, t) : remap_value8_body(p, n, 3, 255, lut, t);
        else
            four ? remap_value8_body(p, n, 4, maxv, lut, t) : remap_value8_body(p, n, 3, maxv, lut, t);
        break;
    default:
        if (full)
            four ? remap_luma8_body(p, n, 4, 255, lut) : remap_luma8_body(p, n, 3, 255, lut);
        else
            four ? remap_luma8_body(p, n, 4, maxv, lut) : remap_luma8_body(p, n, 3, maxv, lut);
        break;
    }
}

/* ---------------------------------------------------------------- 16-bit gray remap */

static void remap_gray16(uint16_t *p, uint64_t n, uint32_t maxv, const uint16_t *lut)
{
    uint64_t i = 0;
    if (maxv == 0xffff) {
        for (; i + 4 <= n; i += 4) {
            uint16_t q[4];
            memcpy(q, p + i, 8);
            p[i] = lut[q[0]];
            p[i + 1] = lut[q[1]];
            p[i + 2] = lut[q[2]];
            p[i + 3] = lut[q[3]];
        }
    }
    for (; i < n; i++)
        p[i] = lut[hq_bin(p[i], maxv)];
}

/* ---------------------------------------------------------------- generic remaps */

#define DEFINE_REMAP(NAME, T)                                                                               \
    static void NAME(T *p, uint64_t n, const hq_mode *m, const uint16_t *lut)                               \
    {                                                                                                       \
        const uint32_t ch = m->channels, maxv = hq_mode_bins(m) - 1, bins = hq_mode_bins(m);                \
        if (ch < 3) {                                                                                       \
            for (uint64_t i = 0; i < n; i++)                                                                \
                p[i * ch] = (T)lut[hq_bin(p[i * ch], maxv)];                                                \
        } else if (m->color == HQ_COLOR_CHANNELS) {                                                         \
            for (uint64_t i = 0; i < n; i++)                                                                \
                for (uint32_t c = 0; c < 3; c++)                                                            \
                    p[i * ch + c] = (T)lut[c * bins + hq_bin(p[i * ch + c], maxv)];                         \
        } else if (m->color == HQ_COLOR_VALUE) {                                                            \
            for (uint64_t i = 0; i < n; i++) {                                                              \
                uint32_t r = hq_bin(p[i * ch], maxv), g = hq_bin(p[i * ch + 1], maxv),                      \
                         b = hq_bin(p[i * ch + 2], maxv);                                                   \
                uint32_t v = hq_max3(r, g, b), v2 = lut[v];                                                 \
                p[i * ch] = (T)hq_value_apply(r, v, v2);                                                    \
                p[i * ch + 1] = (T)hq_value_apply(g, v, v2);                                                \
                p[i * ch + 2] = (T)hq_value_apply(b, v, v2);                                                \
            }                                                                                               \
        } else {                                                                                            \
            for (uint64_t i = 0; i < n; i++) {                                                              \
                uint32_t r = hq_bin(p[i * ch], maxv), g = hq_bin(p[i * ch + 1], maxv),                      \
                         b = hq_bin(p[i * ch + 2], maxv);                                                   \
                uint32_t y_fx = hq_luma_fx(r, g, b);                                                        \
                int32_t d = (int32_t)((uint32_t)lut[hq_luma_of_fx(y_fx)] << HQ_LUMA_SHIFT) - (int32_t)y_fx; \
                p[i * ch] = (T)hq_luma_apply(r, d, maxv);                                                   \
                p[i * ch + 1] = (T)hq_luma_apply(g, d, maxv);                                               \
                p[i * ch + 2] = (T)hq_luma_apply(b, d, maxv);                                               \
            }                                                                                               \
        }                                                                                                   \
    }
DEFINE_REMAP(remap_u8, uint8_t)
DEFINE_REMAP(remap_u16, uint16_t)

/* ---------------------------------------------------------------- masked loops */

/* A block with a mask plane (hq_block_data.mask) takes these plain per-pixel loops: the branch on
 * the mask byte would slow the fast paths above for every unmasked run, and masked pixels are
 * usually a background that costs nothing here. Same pixel.h arithmetic, so the same results. */
#define DEFINE_HIST_MASKED(NAME, T)                                                                         \
    static void NAME(const T *p, const uint8_t *mk, uint64_t n, const hq_mode *m, uint64_t *hist)           \
    {                                                                                                       \
        const uint32_t ch = m->channels, maxv = hq_mode_bins(m) - 1, bins = hq_mode_bins(m);                \
        for (uint64_t i = 0; i < n; i++) {                                                                  \
            if (!mk[i])                                                                                     \
                continue;                                                                                   \
            const T *px = p + i * ch;                                                                       \
            if (ch < 3) {                                                                                   \
                hist[hq_bin(px[0], maxv)]++;                                                                \
            } else if (m->color == HQ_COLOR_CHANNELS) {                                                     \
                hist[hq_bin(px[0], maxv)]++;                                                                \
                hist[bins + hq_bin(px[1], maxv)]++;                                                         \
                hist[2 * bins + hq_bin(px[2], maxv)]++;                                                     \
            } else if (m->color == HQ_COLOR_VALUE) {                                                        \
                hist[hq_bin(hq_max3(px[0], px[1], px[2]), maxv)]++;                                         \
            } else {                                                                                        \
                hist[hq_luma_of_fx(hq_luma_fx(hq_bin(px[0], maxv), hq_bin(px[1], maxv), hq_bin(px[2], maxv)))]++; \
            }                                                                                               \
        }                                                                                                   \
    }
DEFINE_HIST_MASKED(hist_u8_masked, uint8_t)
DEFINE_HIST_MASKED(hist_u16_masked, uint16_t)

#define DEFINE_REMAP_MASKED(NAME, T)                                                                        \
    static void NAME(T *p, const uint8_t *mk, uint64_t n, const hq_mode *m, const uint16_t *lut)            \
    {                                                                                                       \
        const uint32_t ch = m->channels, maxv = hq_mode_bins(m) - 1, bins = hq_mode_bins(m);                \
        for (uint64_t i = 0; i < n; i++) {                                                                  \
            if (!mk[i])                                                                                     \
                continue;                                                                                   \
            T *px = p + i * ch;                                                                             \
            if (ch < 3) {                                                                                   \
                px[0] = (T)lut[hq_bin(px[0], maxv)];                                                        \
                continue;                                                                                   \
            }                                                                                               \
            const uint32_t r = hq_bin(px[0], maxv), g = hq_bin(px[1], maxv), b = hq_bin(px[2], maxv);      \
            if (m->color == HQ_COLOR_CHANNELS) {                                                            \
                px[0] = (T)lut[r];                                                                          \
                px[1] = (T)lut[bins + g];                                                                   \
                px[2] = (T)lut[2 * bins + b];                                                               \
            } else if (m->color == HQ_COLOR_VALUE) {                                                        \
                const uint32_t v = hq_max3(r, g, b), v2 = lut[v];                                           \
                px[0] = (T)hq_value_apply(r, v, v2);                                                        \
                px[1] = (T)hq_value_apply(g, v, v2);                                                        \
                px[2] = (T)hq_value_apply(b, v, v2);                                                        \
            } else {                                                                                        \
                const uint32_t y_fx = hq_luma_fx(r, g, b);                                                  \
                const int32_t d = (int32_t)((uint32_t)lut[hq_luma_of_fx(y_fx)] << HQ_LUMA_SHIFT) - (int32_t)y_fx; \
                px[0] = (T)hq_luma_apply(r, d, maxv);                                                       \
                px[1] = (T)hq_luma_apply(g, d, maxv);                                                       \
                px[2] = (T)hq_luma_apply(b, d, maxv);                                                       \
            }                                                                                               \
        }                                                                                                   \
    }
DEFINE_REMAP_MASKED(remap_u8_masked, uint8_t)

/* 8-bit gray through the byte table (hq_bin folded in), a select instead of a branch. */
static void remap_gray8_masked(uint8_t *p, const uint8_t *mk, uint64_t n, const uint8_t *t)
{
    for (uint64_t i = 0; i < n; i++) {
        const uint8_t v = p[i];
        p[i] = mk[i] ? t[v] : v;
    }
}
DEFINE_REMAP_MASKED(remap_u16_masked, uint16_t)

/* ---------------------------------------------------------------- dispatch */

static void hist_range(const hq_mode *m, const void *base, const uint8_t *mask, uint64_t p0, uint64_t n,
                       hist_acc *a)
{
    if (mask) {
        if (m->sample_bytes == 1 && m->channels == 1)
            hist_gray8_masked((const uint8_t *)base + p0, mask + p0, n, a);
        else if (m->sample_bytes == 1)
            hist_u8_masked((const uint8_t *)base + p0 * m->channels, mask + p0, n, m, a->wide);
        else
            hist_u16_masked((const uint16_t *)base + p0 * m->channels, mask + p0, n, m, a->wide);
        return;
    }
    if (m->sample_bytes == 1) {
        const uint8_t *p = (const uint8_t *)base + p0 * m->channels;
        if (m->channels == 1)
            hist_gray8(p, n, a);
        else if (m->channels == 2)
            hist_gray8_strided(p, n, 2, a);
        else if (fast8(m))
            hist_rgb8(p, n, m, a->wide);
        else
            hist_u8(p, n, m, a->wide);
    } else {
        const uint16_t *p = (const uint16_t *)base + p0 * m->channels;
        if (m->channels == 1)
            hist_gray16(p, n, a);
        else
            hist_u16(p, n, m, a->wide);
    }
}

static void remap_range(const hq_mode *m, void *base, const uint8_t *mask, uint64_t p0, uint64_t n,
                        const uint16_t *lut, const remap_tables *t)
{
    if (mask) {
        if (fast8(m) && m->channels == 1)
            remap_gray8_masked((uint8_t *)base + p0, mask + p0, n, t->bytes[0]);
        else if (m->sample_bytes == 1)
            remap_u8_masked((uint8_t *)base + p0 * m->channels, mask + p0, n, m, lut);
        else
            remap_u16_masked((uint16_t *)base + p0 * m->channels, mask + p0, n, m, lut);
        return;
    }
    if (m->sample_bytes == 1) {
        uint8_t *p = (uint8_t *)base + p0 * m->channels;
        if (!fast8(m))
            remap_u8(p, n, m, lut);
        else if (m->channels == 1 && t->pairs)
            remap_gray8_pairs(p, p, n, t->pairs, t->bytes[0]);
        else if (m->channels < 3)
            remap_gray8(p, n, m->channels, t->bytes[0]);
        else
            remap_rgb8(p, n, m, lut, t);
    } else {
        uint16_t *p = (uint16_t *)base + p0 * m->channels;
        if (m->channels == 1)
            remap_gray16(p, n, hq_mode_bins(m) - 1, lut);
        else
            remap_u16(p, n, m, lut);
    }
}

/* Pixels per step of an out-of-place remap that is not 8-bit gray: the step is copied, then
 * remapped where it lies, while it is still in the core's cache (one set of pixel loops for both). */
#define OUT_STEP ((uint64_t)16 << 10)

/* Pixels [p0, p0 + n) of src remapped into dst (hq_block_data.out); src is only read. */
static void remap_range_to(const hq_mode *m, void *dst, const void *src, const uint8_t *mask, uint64_t p0,
                           uint64_t n, const uint16_t *lut, const remap_tables *t)
{
    if (!t->identity && !mask && fast8(m) && m->channels == 1 && t->pairs) {
        remap_gray8_pairs((uint8_t *)dst + p0, (const uint8_t *)src + p0, n, t->pairs, t->bytes[0]);
        return;
    }
    const size_t px = (size_t)m->channels * m->sample_bytes;
    for (uint64_t q = 0; q < n; q += OUT_STEP) {
        const uint64_t k = n - q < OUT_STEP ? n - q : OUT_STEP;
        memcpy((char *)dst + (p0 + q) * px, (const char *)src + (p0 + q) * px, k * px);
        if (!t->identity)
            remap_range(m, dst, mask, p0 + q, k, lut, t);
    }
}

/* In place, or into b->out. */
static void remap_block_range(const hq_block_data *b, const hq_mode *m, uint64_t p0, uint64_t n, const uint16_t *lut,
                              const remap_tables *t)
{
    if (b->out)
        remap_range_to(m, b->out, b->data, b->mask, p0, n, lut, t);
    else if (!t->identity)
        remap_range(m, b->data, b->mask, p0, n, lut, t);
}

/* Pieces of a big segment: see MIN_PIECE. */
static uint64_t piece_pixels(uint64_t n, int threads)
{
    const uint64_t piece = n / ((uint64_t)threads * PIECES_PER_THREAD);
    return piece < MIN_PIECE ? MIN_PIECE : piece;
}

/* Many small images: one segment per iteration, each written by exactly one thread. */
static void histogram_small_segments(const cpu_impl *c, const hq_block_data *b, const hq_mode *m,
                                     uint64_t *const *hist)
{
#pragma omp parallel for schedule(dynamic, 4) num_threads(c->threads)
    for (int64_t s = 0; s < (int64_t)b->nseg; s++) {
        sub_hist sub;
        memset(sub, 0, sizeof sub);
        hist_acc a = {hist[s], &sub, NULL, hq_mode_bins(m) - 1, 0};
        hist_range(m, b->data, b->mask, (uint64_t)s * b->seg_pixels, b->seg_pixels, &a);
        acc_fold(&a);
    }
}

static int cpu_histogram(hq_engine *e, const hq_block_data *b, const hq_mode *m, uint64_t *const *hist, hq_err *err)
{
    cpu_impl *c = e->impl;
    if (m->fbins)
        return hq_cpu_float_histogram(c->threads, b, m, hist, err);
    const uint32_t bins = hq_mode_bins(m);
    const size_t hlen = (size_t)hq_mode_nhist(m) * bins;
    if (b->seg_pixels < SMALL_SEGMENT) {
        histogram_small_segments(c, b, m, hist);
        return 0;
    }
    uint64_t *priv = calloc((size_t)c->threads * hlen, sizeof *priv);
    if (!priv)
        return hq_fail(err, HQ_EMEM, "cpu engine: out of memory for %d private histograms", c->threads);
    /* Without these the 16-bit loop counts into the 64-bit histogram: slower, same result. */
    uint32_t *sub16 = m->sample_bytes == 2 && m->channels == 1 ? calloc((size_t)c->threads * bins, sizeof *sub16) : NULL;
    for (uint64_t s = 0; s < b->nseg; s++) {
        const uint64_t base = s * b->seg_pixels, n = b->seg_pixels, piece = piece_pixels(n, c->threads);
        const int64_t npieces = (int64_t)((n + piece - 1) / piece);
#pragma omp parallel num_threads(c->threads)
        {
            const int t = omp_get_thread_num(), nt = omp_get_num_threads();
            sub_hist sub;
            memset(sub, 0, sizeof sub);
            hist_acc a = {priv + (size_t)t * hlen, &sub, sub16 ? sub16 + (size_t)t * bins : NULL, bins - 1, 0};
            memset(a.wide, 0, hlen * sizeof *a.wide);
#pragma omp for schedule(dynamic, 1)
            for (int64_t k = 0; k < npieces; k++) {
                const uint64_t lo = (uint64_t)k * piece, len = n - lo < piece ? n - lo : piece;
                hist_range(m, b->data, b->mask, base + lo, len, &a);
            }
            acc_fold(&a);
#pragma omp barrier
#pragma omp for schedule(static)
            for (int64_t v = 0; v < (int64_t)hlen; v++) {
                uint64_t sum = 0;
                for (int k = 0; k < nt; k++)
                    sum += priv[(size_t)k * hlen + (size_t)v];
                hist[s][v] += sum;
            }
        }
    }
    free(sub16);
    free(priv);
    return 0;
}

static int cpu_remap(hq_engine *e, hq_block_data *b, const hq_mode *m, const uint16_t *const *lut, hq_err *err)
{
    cpu_impl *c = e->impl;
    if (m->fbins && b->out)
        return hq_fail(err, HQ_EIO, "cpu engine: internal error: float data remapped out of place");
    if (m->fbins)
        return hq_cpu_float_remap(c->threads, b, m, lut, err);
    if (b->seg_pixels < SMALL_SEGMENT) {
#pragma omp parallel for schedule(dynamic, 4) num_threads(c->threads)
        for (int64_t s = 0; s < (int64_t)b->nseg; s++) {
            remap_tables t;
            remap_tables_build(m, lut[s], b->seg_pixels, &t);
            remap_block_range(b, m, (uint64_t)s * b->seg_pixels, b->seg_pixels, lut[s], &t);
            remap_tables_free(&t);
        }
        return 0;
    }
    for (uint64_t s = 0; s < b->nseg; s++) {
        const uint64_t base = s * b->seg_pixels, n = b->seg_pixels, piece = piece_pixels(n, c->threads);
        const int64_t npieces = (int64_t)((n + piece - 1) / piece);
        /* Built once per segment, before the threads start, and only read by them. */
        remap_tables t;
        remap_tables_build(m, lut[s], n, &t);
        if (t.identity && !b->out)
            continue; /* nothing was allocated */
#pragma omp parallel for schedule(dynamic, 1) num_threads(c->threads)
        for (int64_t k = 0; k < npieces; k++) {
            const uint64_t lo = (uint64_t)k * piece, len = n - lo < piece ? n - lo : piece;
            remap_block_range(b, m, base + lo, len, lut[s], &t);
        }
        remap_tables_free(&t);
    }
    return 0;
}

static void cpu_destroy(hq_engine *e)
{
    hq_pool_destroy(&((cpu_impl *)e->impl)->pool);
    free(e->impl);
    free(e);
}

static void cpu_describe(hq_engine *e, char *buf, size_t len)
{
    cpu_impl *c = e->impl;
    snprintf(buf, len, "cpu, %d thread%s", c->threads, c->threads == 1 ? "" : "s");
}

static void *cpu_block_alloc(hq_engine *e, size_t bytes)
{
    return hq_pool_alloc(&((cpu_impl *)e->impl)->pool, bytes);
}

static void cpu_block_free(hq_engine *e, void *p)
{
    hq_pool_free(&((cpu_impl *)e->impl)->pool, p);
}

static int cpu_clahe_histogram(hq_engine *e, const hq_clahe_piece *p, const hq_mode *m, const hq_clahe_geom *g,
                               uint64_t *hist, hq_err *err)
{
    return hq_cpu_clahe_histogram(((cpu_impl *)e->impl)->threads, p, m, g, hist, err);
}

static int cpu_clahe_remap(hq_engine *e, hq_clahe_piece *p, const hq_mode *m, const hq_clahe_geom *g,
                           const uint16_t *lut, hq_err *err)
{
    return hq_cpu_clahe_remap(((cpu_impl *)e->impl)->threads, p, m, g, lut, err);
}

static int cpu_minmax(hq_engine *e, const hq_block_data *b, const hq_mode *m, hq_frange *mm, hq_err *err)
{
    return hq_cpu_float_minmax(((cpu_impl *)e->impl)->threads, b, m, mm, err);
}

static const hq_engine_ops cpu_ops = {"cpu", cpu_histogram, cpu_remap, cpu_destroy, cpu_describe, cpu_block_alloc,
                                      cpu_block_free, NULL, cpu_clahe_histogram, cpu_clahe_remap, cpu_minmax, 1, NULL,
                                      NULL};

int hq_cpu_engine_create(const hq_engine_cfg *cfg, hq_engine **out, hq_err *err)
{
    hq_engine *e = calloc(1, sizeof *e);
    cpu_impl *c = calloc(1, sizeof *c);
    if (!e || !c) {
        free(e);
        free(c);
        return hq_fail(err, HQ_EMEM, "cpu engine: out of memory");
    }
    hq_pool_init(&c->pool);
    c->threads = cfg->threads > 0 ? cfg->threads : omp_get_num_procs();
    e->ops = &cpu_ops;
    e->impl = c;
    *out = e;
    return 0;
}
