/* histogram.c — the CPU engine's histograms; contract in histogram.h. */
#include "histogram.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/pixel.h"
#include "work.h"

/* 8-bit sub-histograms laid 256 counters apart would put equal bins at addresses a multiple of
 * 4 KiB apart, which the CPU's store-to-load predictor takes for a dependency (4K aliasing); the
 * padding keeps them apart. Several sub-histograms break the chain of increments to one counter
 * when neighbouring pixels share a bin (flat backgrounds, constant images). */
#define SUB_STRIDE (256 + 16)
#define SUBS 8

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

/* Many small images: one segment per iteration, each written by exactly one thread. */
static void histogram_small_segments(int threads, const hq_block_data *b, const hq_mode *m, uint64_t *const *hist)
{
    threads = block_threads(b->nseg * b->seg_pixels * m->channels, threads);
#pragma omp parallel for schedule(dynamic, 4) num_threads(threads)
    for (int64_t s = 0; s < (int64_t)b->nseg; s++) {
        sub_hist sub;
        memset(sub, 0, sizeof sub);
        hist_acc a = {hist[s], &sub, NULL, hq_mode_bins(m) - 1, 0};
        hist_range(m, b->data, b->mask, (uint64_t)s * b->seg_pixels, b->seg_pixels, &a);
        acc_fold(&a);
    }
}

int hq_cpu_histogram(int threads, const hq_block_data *b, const hq_mode *m, uint64_t *const *hist, hq_err *err)
{
    const uint32_t bins = hq_mode_bins(m);
    const size_t hlen = (size_t)hq_mode_nhist(m) * bins;
    if (b->seg_pixels < SMALL_SEGMENT) {
        histogram_small_segments(threads, b, m, hist);
        return 0;
    }
    uint64_t *priv = calloc((size_t)threads * hlen, sizeof *priv);
    if (!priv)
        return hq_fail(err, HQ_EMEM, "cpu engine: out of memory for %d private histograms", threads);
    /* Without these the 16-bit loop counts into the 64-bit histogram: slower, same result. */
    uint32_t *sub16 = m->sample_bytes == 2 && m->channels == 1 ? calloc((size_t)threads * bins, sizeof *sub16) : NULL;
    for (uint64_t s = 0; s < b->nseg; s++) {
        const uint64_t base = s * b->seg_pixels, n = b->seg_pixels, piece = piece_pixels(n, threads);
        const int64_t npieces = (int64_t)((n + piece - 1) / piece);
#pragma omp parallel num_threads(threads)
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
