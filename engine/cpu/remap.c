/* remap.c — the CPU engine's remaps; contract in remap.h. */
#include "remap.h"

#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HQ_X86_VBMI 1
#endif

#include "../../core/pixel.h"
#include "work.h"

/* A table that maps two 8-bit pixels per lookup (128 KiB) costs ~40-60 us to fill and saves
 * ~0.1 ns a pixel; it pays from about a million pixels. The value-mode table (64 KiB, 32,896
 * divisions) pays much sooner. */
#define PAIR_TABLE_MIN (1u << 20)
#define VALUE_TABLE_MIN (1u << 15)

/* ---------------------------------------------------------------- remap tables */

/* What a remap of one segment may precompute from its LUT. For 8-bit samples every LUT becomes a
 * byte table with hq_bin folded in: lut values never exceed maxv <= 255. */
typedef struct remap_tables {
    int identity;          /* the remap changes nothing: skip it */
    uint8_t bytes[3][256]; /* 8-bit: per histogram, sample -> output sample */
    uint16_t *pairs;       /* 8-bit gray: two contiguous pixels per lookup, or NULL */
    int vbmi;              /* 8-bit gray: remap_gray8_vbmi (then no pair table) */
    uint8_t *value;        /* 8-bit value mode: value[V * 256 + c] = c', or NULL */
} remap_tables;

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

/* Whether this CPU has AVX-512 VBMI, for remap_gray8_vbmi (HQ_CPU_VBMI=0 turns it off: for A/B
 * benchmarks, and to run the tests through the other path on the same machine). */
static int vbmi_usable(void)
{
#ifdef HQ_X86_VBMI
    const char *env = getenv("HQ_CPU_VBMI");
    if (env && strcmp(env, "0") == 0)
        return 0;
    return __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl");
#else
    return 0;
#endif
}

/* Fills the tables worth having for n pixels, unless the remap is the identity; vbmi: what
 * vbmi_usable() said for this block. A table that cannot be allocated is left NULL and the remap
 * falls back to the direct loop, so this cannot fail. */
static void remap_tables_build(const hq_mode *m, const uint16_t *lut, uint64_t n, int vbmi, remap_tables *t)
{
    t->pairs = NULL;
    t->value = NULL;
    t->vbmi = 0;
    const uint32_t maxv = hq_mode_bins(m) - 1, nh = hq_mode_nhist(m);
    if (fast8(m))
        for (uint32_t h = 0; h < nh; h++)
            for (uint32_t v = 0; v < 256; v++)
                t->bytes[h][v] = (uint8_t)lut[h * (maxv + 1) + hq_bin(v, maxv)];
    t->identity = remap_is_identity(m, lut, t);
    if (t->identity || !fast8(m))
        return;
    if (m->channels == 1 && (t->vbmi = vbmi))
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

/* 32 pixels a step through the whole 256-byte table held in eight 32-byte registers: each vpermt2b
 * looks the bytes up in one 64-byte quarter (their low 6 bits), bits 6 and 7 then pick the quarter.
 * Out of place or in place (each 32 bytes are loaded before they are stored). Only called where
 * vbmi_usable() said so. 256-bit, not 512: the 512-bit form (two lookups in 128-byte halves) was
 * no faster and up to 1.5x slower on a constant image (bench/results/cpu_bench.txt, 2026-11-27). */
#ifdef HQ_X86_VBMI
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi"))) static void
remap_gray8_vbmi(uint8_t *d, const uint8_t *s, uint64_t n, const uint8_t *t)
{
    __m256i q[8];
    for (int k = 0; k < 8; k++)
        q[k] = _mm256_loadu_si256((const __m256i *)(t + 32 * k));
    uint64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m256i x = _mm256_loadu_si256((const __m256i *)(s + i));
        const __m256i a = _mm256_permutex2var_epi8(q[0], x, q[1]), b = _mm256_permutex2var_epi8(q[2], x, q[3]);
        const __m256i c = _mm256_permutex2var_epi8(q[4], x, q[5]), e = _mm256_permutex2var_epi8(q[6], x, q[7]);
        const __mmask32 b6 = _mm256_movepi8_mask(_mm256_add_epi8(x, x)), b7 = _mm256_movepi8_mask(x);
        const __m256i lo = _mm256_mask_blend_epi8(b6, a, b), hi = _mm256_mask_blend_epi8(b6, c, e);
        _mm256_storeu_si256((__m256i *)(d + i), _mm256_mask_blend_epi8(b7, lo, hi));
    }
    for (; i < n; i++)
        d[i] = t[s[i]];
}
#else
static void remap_gray8_vbmi(uint8_t *d, const uint8_t *s, uint64_t n, const uint8_t *t)
{
    for (uint64_t i = 0; i < n; i++)
        d[i] = t[s[i]];
}
#endif

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
        else if (m->channels == 1 && t->vbmi)
            remap_gray8_vbmi(p, p, n, t->bytes[0]);
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
    if (!t->identity && !mask && fast8(m) && m->channels == 1 && (t->vbmi || t->pairs)) {
        uint8_t *d = (uint8_t *)dst + p0;
        const uint8_t *s = (const uint8_t *)src + p0;
        if (t->vbmi)
            remap_gray8_vbmi(d, s, n, t->bytes[0]);
        else
            remap_gray8_pairs(d, s, n, t->pairs, t->bytes[0]);
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

int hq_cpu_remap(int threads, hq_block_data *b, const hq_mode *m, const uint16_t *const *lut, hq_err *err)
{
    (void)err; /* integer remaps allocate nothing that can fail: a table left out falls back to a loop */
    const int vbmi = vbmi_usable(); /* once a block, not once a segment (a getenv each) */
    if (b->seg_pixels < SMALL_SEGMENT) {
        threads = block_threads(b->nseg * b->seg_pixels * m->channels, threads);
#pragma omp parallel for schedule(dynamic, 4) num_threads(threads)
        for (int64_t s = 0; s < (int64_t)b->nseg; s++) {
            remap_tables t;
            remap_tables_build(m, lut[s], b->seg_pixels, vbmi, &t);
            remap_block_range(b, m, (uint64_t)s * b->seg_pixels, b->seg_pixels, lut[s], &t);
            remap_tables_free(&t);
        }
        return 0;
    }
    for (uint64_t s = 0; s < b->nseg; s++) {
        const uint64_t base = s * b->seg_pixels, n = b->seg_pixels, piece = piece_pixels(n, threads);
        const int64_t npieces = (int64_t)((n + piece - 1) / piece);
        /* Built once per segment, before the threads start, and only read by them. */
        remap_tables t;
        remap_tables_build(m, lut[s], n, vbmi, &t);
        if (t.identity && !b->out)
            continue; /* nothing was allocated */
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
        for (int64_t k = 0; k < npieces; k++) {
            const uint64_t lo = (uint64_t)k * piece, len = n - lo < piece ? n - lo : piece;
            remap_block_range(b, m, base + lo, len, lut[s], &t);
        }
        remap_tables_free(&t);
    }
    return 0;
}
