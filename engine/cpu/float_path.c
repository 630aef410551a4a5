/* float_path.c — float32/float64 samples: pass-0 extremes, binned histograms and the remap to
 * lut[bin] / (bins - 1), with core/fbin.h's arithmetic (built with -ffp-contract=off, as all host
 * code is). A mask plane (engine.h) is honoured as on the integer paths: pixels whose byte is 0 are
 * neither counted nor, when remap is handed the mask, changed. Every result is exact or per
 * sample, so neither the thread count nor the split into pieces can change it. */
#include "float_path.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "work.h"

/* Pixels per OpenMP piece: small enough to balance, big enough to amortize the private state. */
#define PIECE ((uint64_t)1 << 16)

static int mode_ok(const hq_mode *m, hq_err *err)
{
    if (m->fbins < 2 || m->fbins > HQ_FBINS_MAX || m->channels != 1 || (m->sample_bytes != 4 && m->sample_bytes != 8))
        return hq_fail(err, HQ_EINPUT, "cpu engine: unsupported float layout (%u channels, %u-byte samples, %u bins)",
                       m->channels, m->sample_bytes, m->fbins);
    return 0;
}

static inline double sample_at(const void *base, uint32_t sb, uint64_t i)
{
    return sb == 4 ? (double)((const float *)base)[i] : ((const double *)base)[i];
}

/* mask: NULL, or one byte per pixel; pixels whose byte is 0 are not counted (engine.h). */
static void minmax_range(const void *base, uint32_t sb, const uint8_t *mask, uint64_t p0, uint64_t n, hq_frange *r)
{
    double lo = r->lo, hi = r->hi;
    uint64_t fin = 0, inf = 0;
    for (uint64_t i = p0; i < p0 + n; i++) {
        if (mask && !mask[i])
            continue;
        const double x = sample_at(base, sb, i);
        const hq_fsample k = hq_fsample_of(x);
        if (k == HQ_FS_NAN)
            continue;
        if (k == HQ_FS_INF) {
            inf++;
            continue;
        }
        lo = x < lo ? x : lo;
        hi = x > hi ? x : hi;
        fin++;
    }
    r->lo = lo;
    r->hi = hi;
    r->finite += fin;
    r->inf += inf;
}

static void merge(hq_frange *into, const hq_frange *r)
{
    into->lo = r->lo < into->lo ? r->lo : into->lo;
    into->hi = r->hi > into->hi ? r->hi : into->hi;
    into->finite += r->finite;
    into->inf += r->inf;
}

int hq_cpu_float_minmax(int threads, const hq_block_data *b, const hq_mode *m, hq_frange *mm, hq_err *err)
{
    int rc = mode_ok(m, err);
    if (rc)
        return rc;
    if (b->seg_pixels < SMALL_SEGMENT) { /* small images: one a thread, whole */
        threads = block_threads(b->nseg * b->seg_pixels, threads);
#pragma omp parallel for schedule(dynamic, 4) num_threads(threads)
        for (int64_t s = 0; s < (int64_t)b->nseg; s++)
            minmax_range(b->data, m->sample_bytes, b->mask, (uint64_t)s * b->seg_pixels, b->seg_pixels, &mm[s]);
        return 0;
    }
    for (uint64_t s = 0; s < b->nseg; s++) {
        const uint64_t base = s * b->seg_pixels, n = b->seg_pixels;
        const int64_t npieces = (int64_t)((n + PIECE - 1) / PIECE);
        hq_frange total = mm[s];
#pragma omp parallel num_threads(threads)
        {
            hq_frange mine = hq_frange_empty();
#pragma omp for schedule(static)
            for (int64_t k = 0; k < npieces; k++) {
                const uint64_t lo = (uint64_t)k * PIECE;
                minmax_range(b->data, m->sample_bytes, b->mask, base + lo, n - lo < PIECE ? n - lo : PIECE, &mine);
            }
#pragma omp critical
            merge(&total, &mine);
        }
        mm[s] = total;
    }
    return 0;
}

/* Counts pixels [p0, p0 + n) into h; returns the infinite samples met (not counted). */
static uint64_t hist_range(const void *base, uint32_t sb, const uint8_t *mask, uint64_t p0, uint64_t n,
                           const hq_fbin *p, uint64_t *h)
{
    uint64_t inf = 0;
    for (uint64_t i = p0; i < p0 + n; i++) {
        if (mask && !mask[i])
            continue;
        const double x = sample_at(base, sb, i);
        const hq_fsample k = hq_fsample_of(x);
        if (k == HQ_FS_NAN)
            continue;
        if (k == HQ_FS_INF) {
            inf++;
            continue;
        }
        h[hq_fbin_of(x, p)]++;
    }
    return inf;
}

int hq_cpu_float_histogram(int threads, const hq_block_data *b, const hq_mode *m, uint64_t *const *hist, hq_err *err)
{
    int rc = mode_ok(m, err);
    if (rc)
        return rc;
    if (!b->fbin)
        return hq_fail(err, HQ_EINPUT, "cpu engine: float block without its binning");
    const uint32_t bins = m->fbins;
    uint64_t inf = 0;
    uint64_t *priv = NULL;
    if (b->seg_pixels < SMALL_SEGMENT) { /* small images: one a thread, counted straight into its histogram */
        threads = block_threads(b->nseg * b->seg_pixels, threads);
#pragma omp parallel for schedule(dynamic, 4) num_threads(threads) reduction(+ : inf)
        for (int64_t s = 0; s < (int64_t)b->nseg; s++)
            inf += hist_range(b->data, m->sample_bytes, b->mask, (uint64_t)s * b->seg_pixels, b->seg_pixels,
                              &b->fbin[s], hist[s]);
        goto done;
    }
    priv = calloc((size_t)threads * bins, sizeof *priv);
    if (!priv)
        return hq_fail(err, HQ_EMEM, "cpu engine: out of memory for %d private histograms", threads);
    for (uint64_t s = 0; s < b->nseg; s++) {
        const uint64_t base = s * b->seg_pixels, n = b->seg_pixels;
        const int64_t npieces = (int64_t)((n + PIECE - 1) / PIECE);
        const hq_fbin *p = &b->fbin[s];
#pragma omp parallel num_threads(threads) reduction(+ : inf)
        {
            const int t = omp_get_thread_num(), nt = omp_get_num_threads();
            uint64_t *h = priv + (size_t)t * bins;
            memset(h, 0, bins * sizeof *h);
#pragma omp for schedule(static)
            for (int64_t k = 0; k < npieces; k++) {
                const uint64_t lo = (uint64_t)k * PIECE;
                inf += hist_range(b->data, m->sample_bytes, b->mask, base + lo, n - lo < PIECE ? n - lo : PIECE, p, h);
            }
#pragma omp for schedule(static)
            for (int64_t v = 0; v < (int64_t)bins; v++) {
                uint64_t sum = 0;
                for (int k = 0; k < nt; k++)
                    sum += priv[(size_t)k * bins + (size_t)v];
                hist[s][v] += sum;
            }
        }
    }
done:
    free(priv);
    if (inf)
        return hq_fail(err, HQ_EINPUT, "%llu infinite sample%s (+inf or -inf)", (unsigned long long)inf,
                       inf == 1 ? "" : "s");
    return 0;
}

/* Pixels [i0, i1) of segment s through lut l; mask byte 0 or NaN: left exactly as it is. */
static void remap_part(hq_block_data *b, const hq_mode *m, uint64_t s, uint64_t i0, uint64_t i1, const uint16_t *l)
{
    const uint64_t base = s * b->seg_pixels;
    const hq_fbin *p = &b->fbin[s];
    const uint8_t *mk = b->mask ? b->mask + base : NULL;
    const uint32_t bins = m->fbins;
    if (m->sample_bytes == 4) {
        float *d = (float *)b->data + base;
        for (uint64_t i = i0; i < i1; i++) {
            const double x = d[i];
            if (hq_fsample_of(x) != HQ_FS_NAN && (!mk || mk[i]))
                d[i] = hq_fout32(l[hq_fbin_of(x, p)], bins);
        }
    } else {
        double *d = (double *)b->data + base;
        for (uint64_t i = i0; i < i1; i++) {
            const double x = d[i];
            if (hq_fsample_of(x) != HQ_FS_NAN && (!mk || mk[i]))
                d[i] = hq_fout(l[hq_fbin_of(x, p)], bins);
        }
    }
}

int hq_cpu_float_remap(int threads, hq_block_data *b, const hq_mode *m, const uint16_t *const *lut, hq_err *err)
{
    int rc = mode_ok(m, err);
    if (rc)
        return rc;
    if (!b->fbin)
        return hq_fail(err, HQ_EINPUT, "cpu engine: float block without its binning");
    const uint64_t n = b->seg_pixels;
    if (n < SMALL_SEGMENT) { /* small images: one a thread, whole */
        threads = block_threads(b->nseg * n, threads);
#pragma omp parallel for schedule(dynamic, 4) num_threads(threads)
        for (int64_t s = 0; s < (int64_t)b->nseg; s++)
            remap_part(b, m, (uint64_t)s, 0, n, lut[s]);
        return 0;
    }
    const int64_t npieces = (int64_t)((n + PIECE - 1) / PIECE);
    for (uint64_t s = 0; s < b->nseg; s++) {
#pragma omp parallel for schedule(static) num_threads(threads)
        for (int64_t k = 0; k < npieces; k++) {
            const uint64_t lo = (uint64_t)k * PIECE;
            remap_part(b, m, s, lo, n - lo < PIECE ? n : lo + PIECE, lut[s]);
        }
    }
    return 0;
}
