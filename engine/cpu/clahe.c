/* clahe.c — CLAHE on the CPU: per-tile histograms of a piece (with the padding's reflections)
 * and the bilinear remap, both from core/clahe.h. */
#include "clahe.h"

#include <omp.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#include <stdlib.h>
#include <string.h>

#include "../../core/clahe.h"
#include "../../core/pixel.h"

/* Work items of the histogram hold at least this many pixels, so that folding their narrow
 * counters (up to 65,536 bins) into the tile's histogram stays a small part of the work. */
#define ITEM_PIXELS ((uint64_t)1 << 18)

/* ---------------------------------------------------------------- histogram */

/* Counts n pixels of a row starting at pixel x (piece coordinates) into loc (nhist * bins). */
static void count_run(const void *row, uint64_t x, uint64_t n, const hq_mode *m, uint32_t *loc)
{
    const uint32_t maxv = hq_mode_bins(m) - 1, ch = m->channels, nh = hq_mode_nhist(m), bins = maxv + 1;
    if (m->sample_bytes == 1 && ch == 1 && maxv == 255) {
        const uint8_t *p = (const uint8_t *)row + x;
        for (uint64_t i = 0; i < n; i++)
            loc[p[i]]++;
    } else if (m->sample_bytes == 2 && ch == 1 && maxv == 0xffff) {
        const uint16_t *p = (const uint16_t *)row + x;
        for (uint64_t i = 0; i < n; i++)
            loc[p[i]]++;
    } else if (m->sample_bytes == 2 && ch == 1) {
        const uint16_t *p = (const uint16_t *)row + x;
        for (uint64_t i = 0; i < n; i++)
            loc[hq_bin(p[i], maxv)]++;
    } else {
        for (uint64_t i = 0; i < n; i++) {
            uint32_t c[4] = {0, 0, 0, 0};
            for (uint32_t k = 0; k < ch && k < 3; k++)
                c[k] = m->sample_bytes == 1 ? ((const uint8_t *)row)[(x + i) * ch + k]
                                            : ((const uint16_t *)row)[(x + i) * ch + k];
            for (uint32_t h = 0; h < nh; h++)
                loc[h * bins + hq_clahe_key(c, ch, m->color, h, maxv)]++;
        }
    }
}

/* Adds the narrow counters into the tile's histogram and zeroes them. Empty counters (most of a
 * 65,536-bin histogram of a tile that spans a narrow range) are skipped four at a time. shared: other
 * items of the same tile may be folding at the same time (then each add is atomic). */
static void fold(uint32_t *loc, uint64_t *dst, size_t len, int shared)
{
    size_t v = 0;
#ifdef __SSE2__
    const __m128i z = _mm_setzero_si128();
    for (; v + 4 <= len; v += 4) {
        const __m128i x = _mm_loadu_si128((const __m128i *)(loc + v));
        if (_mm_movemask_epi8(_mm_cmpeq_epi32(x, z)) == 0xffff)
            continue;
        for (size_t k = v; k < v + 4; k++) {
            const uint64_t add = loc[k];
            if (shared) {
#pragma omp atomic
                dst[k] += add;
            } else {
                dst[k] += add;
            }
        }
        _mm_storeu_si128((__m128i *)(loc + v), z);
    }
#endif
    for (; v < len; v++) {
        if (!loc[v])
            continue;
        const uint64_t add = loc[v];
        if (shared) {
#pragma omp atomic
            dst[v] += add;
        } else {
            dst[v] += add;
        }
        loc[v] = 0;
    }
}

typedef struct item {
    uint64_t ty, tx;
    uint64_t row_lo, row_hi; /* own rows [row_lo, row_hi) of tile ty, or... */
    int ext_rows;            /* ...its reflected rows (then row_lo, row_hi are unused) */
    int shared;              /* the tile has other items in this call */
} item;

int hq_cpu_clahe_histogram(int threads, const hq_clahe_piece *p, const hq_mode *m, const hq_clahe_geom *g,
                           uint64_t *hist, hq_err *err)
{
    hq_clahe_side rs = {0}, cs = {0};
    item *items = NULL;
    int rc = 0;
    if (hq_clahe_side_make(g->height, g->tiles_y, g->tile_h, p->r0, p->r0 + p->rows, &rs) ||
        hq_clahe_side_make(g->width, g->tiles_x, g->tile_w, p->c0, p->c0 + p->cols, &cs)) {
        rc = hq_fail(err, HQ_EMEM, "cpu engine: out of memory for CLAHE tiles");
        goto done;
    }
    /* Items: for each tile touched, runs of its own rows of about ITEM_PIXELS, and its reflected rows. */
    const uint32_t bins = hq_mode_bins(m);
    const size_t hl = (size_t)hq_mode_nhist(m) * bins;
    uint64_t nitems = 0, cap = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            items = malloc((cap ? cap : 1) * sizeof *items);
            if (!items) {
                rc = hq_fail(err, HQ_EMEM, "cpu engine: out of memory for CLAHE work");
                goto done;
            }
        }
        for (uint64_t ty = 0; ty < g->tiles_y; ty++) {
            if (!hq_clahe_side_count(&rs, ty))
                continue;
            for (uint64_t tx = 0; tx < g->tiles_x; tx++) {
                const uint64_t w = hq_clahe_side_count(&cs, tx);
                if (!w)
                    continue;
                const uint64_t want = ITEM_PIXELS > 16 * hl ? ITEM_PIXELS : 16 * hl; /* folds stay cheap */
                const uint64_t step = want / w > 0 ? want / w : 1;
                const uint64_t own = rs.own_hi[ty] - rs.own_lo[ty];
                const int shared = (own + step - 1) / step + (rs.ext_at[ty + 1] > rs.ext_at[ty]) > 1;
                for (uint64_t y = rs.own_lo[ty]; y < rs.own_hi[ty]; y += step) {
                    if (pass)
                        items[nitems] = (item){ty, tx, y, y + step < rs.own_hi[ty] ? y + step : rs.own_hi[ty], 0, shared};
                    nitems++;
                }
                if (rs.ext_at[ty + 1] > rs.ext_at[ty]) {
                    if (pass)
                        items[nitems] = (item){ty, tx, 0, 0, 1, shared};
                    nitems++;
                }
            }
        }
        cap = nitems;
        nitems = pass == 0 ? 0 : nitems;
    }
    const uint64_t row_len = p->cols * m->channels * m->sample_bytes;
    int failed = 0;
#pragma omp parallel num_threads(threads)
    {
        uint32_t *loc = calloc(hl, sizeof *loc);
        if (!loc) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(dynamic, 1)
        for (int64_t k = 0; k < (int64_t)nitems; k++) {
            if (!loc)
                continue;
            const item *it = &items[k];
            uint64_t pending = 0;
            const uint64_t w = hq_clahe_side_count(&cs, it->tx);
            const uint64_t nrows = it->ext_rows ? rs.ext_at[it->ty + 1] - rs.ext_at[it->ty] : it->row_hi - it->row_lo;
            uint64_t *dst = hist + (it->ty * g->tiles_x + it->tx) * hl;
            for (uint64_t j = 0; j < nrows; j++) {
                const uint64_t y = it->ext_rows ? rs.ext[rs.ext_at[it->ty] + j] : it->row_lo + j;
                const void *row = (const uint8_t *)p->data + (y - p->r0) * row_len;
                if (pending + w > UINT32_MAX) {
                    fold(loc, dst, hl, it->shared);
                    pending = 0;
                }
                pending += w;
                count_run(row, cs.own_lo[it->tx] - p->c0, cs.own_hi[it->tx] - cs.own_lo[it->tx], m, loc);
                for (uint64_t e = cs.ext_at[it->tx]; e < cs.ext_at[it->tx + 1]; e++)
                    count_run(row, cs.ext[e] - p->c0, 1, m, loc);
            }
            fold(loc, dst, hl, it->shared);
        }
        free(loc);
    }
    if (failed)
        rc = hq_fail(err, HQ_EMEM, "cpu engine: out of memory for CLAHE counters");
done:
    free(items);
    hq_clahe_side_free(&rs);
    hq_clahe_side_free(&cs);
    return rc;
}

/* ---------------------------------------------------------------- remap */

/* Per column of a piece: its two tiles' LUT offsets and their weights (OpenCV's ind1_p, ind2_p,
 * xa1_p, xa_p), computed once per piece by hq_clahe_weight. */
typedef struct cols {
    hq_clahe_w *wx;
    uint32_t *o1, *o2; /* within the piece's tile columns: 32 bits (see STRIP_TILES) */
    float *w1, *w2;
} cols;

/* Columns are remapped in strips spanning at most this many tiles, so that offsets into a run of
 * tile LUTs (3 x 65,536 entries each at most) fit 32 bits. */
#define STRIP_TILES 16384

#ifdef __SSE2__
/* core/clahe.h's blend in four SSE lanes: the same single-precision operations in the same order
 * (mulps and addps round each lane as mulss and addss do; no FMA in SSE2), and cvtps2dq rounds
 * half to even under the default MXCSR, as cvtss2si does. */
static inline __m128 blend4(__m128 a, __m128 b, __m128 c, __m128 d, __m128 x1, __m128 x2, __m128 y1, __m128 y2)
{
    const __m128 top = _mm_add_ps(_mm_mul_ps(a, x1), _mm_mul_ps(b, x2));
    const __m128 bot = _mm_add_ps(_mm_mul_ps(c, x1), _mm_mul_ps(d, x2));
    return _mm_add_ps(_mm_mul_ps(top, y1), _mm_mul_ps(bot, y2));
}

#endif

static void row_any(void *row, uint64_t n, const hq_mode *m, const uint16_t *l1, const uint16_t *l2, const cols *c,
                    hq_clahe_w wy)
{
    const uint32_t maxv = hq_mode_bins(m) - 1, ch = m->channels, nh = hq_mode_nhist(m), bins = maxv + 1;
    for (uint64_t j = 0; j < n; j++) {
        uint32_t px[4] = {0, 0, 0, 0}, k2[3];
        for (uint32_t k = 0; k < ch && k < 3; k++)
            px[k] = m->sample_bytes == 1 ? ((uint8_t *)row)[j * ch + k] : ((uint16_t *)row)[j * ch + k];
        for (uint32_t h = 0; h < nh; h++) {
            const uint64_t v = (uint64_t)h * bins + hq_clahe_key(px, ch, m->color, h, maxv);
            k2[h] = hq_clahe_blend(l1[c->o1[j] + v], l1[c->o2[j] + v], l2[c->o1[j] + v], l2[c->o2[j] + v], c->wx[j],
                                   wy, maxv);
        }
        hq_clahe_apply(px, ch, m->color, k2, maxv);
        for (uint32_t k = 0; k < ch && k < 3; k++) {
            if (m->sample_bytes == 1)
                ((uint8_t *)row)[j * ch + k] = (uint8_t)px[k];
            else
                ((uint16_t *)row)[j * ch + k] = (uint16_t)px[k];
        }
    }
}

/* ---------------------------------------------------------------- 16-bit gray remap, by blocks
 *
 * A block is a run of rows that blend the same two tile rows times a run of columns that blend the
 * same two tile columns: its four LUTs are fixed. They are interleaved into one table of 64-bit
 * entries (l11, l12, l21, l22 at 16 bits each), so a pixel needs one load instead of four, and the
 * table (8 bytes a bin, 512 KiB at 65,536 bins) stays in the core's cache while a thread works
 * through the block; walking whole image rows instead would sweep every LUT of two tile rows. */

/* A run [lo, hi) of rows or columns whose blend takes tiles t1 and t2. */
typedef struct span {
    uint64_t lo, hi;
    uint32_t t1, t2;
} span;

/* Rows of a block are handed out in chunks of about this many pixels. */
#define CHUNK_PIXELS ((uint64_t)1 << 15)
/* Contiguous runs of chunks per thread: more balance the load, fewer build fewer tables. */
#define RUNS_PER_THREAD 4

/* The spans of n positions starting at pos0; out holds tiles + 1 at least. */
static uint64_t spans_make(uint64_t pos0, uint64_t n, float inv, uint64_t tiles, span *out)
{
    uint64_t k = 0;
    for (uint64_t i = 0; i < n; i++) {
        const hq_clahe_w w = hq_clahe_weight(pos0 + i, inv, tiles);
        if (k && out[k - 1].t1 == w.t1 && out[k - 1].t2 == w.t2) {
            out[k - 1].hi = i + 1;
            continue;
        }
        out[k++] = (span){i, i + 1, w.t1, w.t2};
    }
    return k;
}

static void quad_build(uint64_t *q, const uint16_t *a, const uint16_t *b, const uint16_t *c, const uint16_t *d,
                       uint32_t bins)
{
    uint32_t v = 0;
#ifdef __SSE2__
    for (; v + 8 <= bins; v += 8) {
        const __m128i A = _mm_loadu_si128((const __m128i *)(a + v)), B = _mm_loadu_si128((const __m128i *)(b + v));
        const __m128i C = _mm_loadu_si128((const __m128i *)(c + v)), D = _mm_loadu_si128((const __m128i *)(d + v));
        const __m128i ab0 = _mm_unpacklo_epi16(A, B), ab1 = _mm_unpackhi_epi16(A, B);
        const __m128i cd0 = _mm_unpacklo_epi16(C, D), cd1 = _mm_unpackhi_epi16(C, D);
        _mm_storeu_si128((__m128i *)(q + v), _mm_unpacklo_epi32(ab0, cd0));
        _mm_storeu_si128((__m128i *)(q + v + 2), _mm_unpackhi_epi32(ab0, cd0));
        _mm_storeu_si128((__m128i *)(q + v + 4), _mm_unpacklo_epi32(ab1, cd1));
        _mm_storeu_si128((__m128i *)(q + v + 6), _mm_unpackhi_epi32(ab1, cd1));
    }
#endif
    for (; v < bins; v++)
        q[v] = (uint64_t)a[v] | (uint64_t)b[v] << 16 | (uint64_t)c[v] << 32 | (uint64_t)d[v] << 48;
}

static inline uint32_t quad_blend(uint64_t e, hq_clahe_w wx, hq_clahe_w wy, uint32_t maxv)
{
    return hq_clahe_blend((uint32_t)(e & 0xffff), (uint32_t)(e >> 16 & 0xffff), (uint32_t)(e >> 32 & 0xffff),
                          (uint32_t)(e >> 48), wx, wy, maxv);
}

#ifdef __SSE2__
/* The four LUT entries of pixels with (clamped) values v0 .. v3 as four float vectors, one per LUT:
 * a 4 x 4 transpose of 16-bit lanes, then widened. */
static inline void quad_gather4(const uint64_t *q, uint32_t v0, uint32_t v1, uint32_t v2, uint32_t v3, __m128 *l11,
                                __m128 *l12, __m128 *l21, __m128 *l22)
{
    const __m128i p01 = _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)(q + v0)),
                                           _mm_loadl_epi64((const __m128i *)(q + v1)));
    const __m128i p23 = _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)(q + v2)),
                                           _mm_loadl_epi64((const __m128i *)(q + v3)));
    const __m128i t0 = _mm_unpacklo_epi16(p01, p23), t1 = _mm_unpackhi_epi16(p01, p23);
    const __m128i u0 = _mm_unpacklo_epi16(t0, t1), u1 = _mm_unpackhi_epi16(t0, t1), z = _mm_setzero_si128();
    *l11 = _mm_cvtepi32_ps(_mm_unpacklo_epi16(u0, z));
    *l12 = _mm_cvtepi32_ps(_mm_unpackhi_epi16(u0, z));
    *l21 = _mm_cvtepi32_ps(_mm_unpacklo_epi16(u1, z));
    *l22 = _mm_cvtepi32_ps(_mm_unpackhi_epi16(u1, z));
}
#endif

/* n pixels of one row of a block; w1, w2, wx: the block's columns. */
static inline __attribute__((always_inline)) void quad_row_body(uint16_t *px, uint64_t n, const uint64_t *q,
                                                                const float *w1, const float *w2,
                                                                const hq_clahe_w *wx, hq_clahe_w wy, uint32_t maxv)
{
    uint64_t j = 0;
#ifdef __SSE2__
    const __m128 y1 = _mm_set1_ps(wy.w1), y2 = _mm_set1_ps(wy.w2);
    const __m128i bias = _mm_set1_epi32(32768), flip = _mm_set1_epi16((short)0x8000);
    const __m128i top = _mm_set1_epi16((short)(int)(maxv - 32768));
    for (; j + 8 <= n; j += 8) {
        __m128 a, b, c, d;
        quad_gather4(q, hq_bin(px[j], maxv), hq_bin(px[j + 1], maxv), hq_bin(px[j + 2], maxv),
                     hq_bin(px[j + 3], maxv), &a, &b, &c, &d);
        const __m128i r0 = _mm_cvtps_epi32(blend4(a, b, c, d, _mm_loadu_ps(w1 + j), _mm_loadu_ps(w2 + j), y1, y2));
        quad_gather4(q, hq_bin(px[j + 4], maxv), hq_bin(px[j + 5], maxv), hq_bin(px[j + 6], maxv),
                     hq_bin(px[j + 7], maxv), &a, &b, &c, &d);
        const __m128i r1 =
            _mm_cvtps_epi32(blend4(a, b, c, d, _mm_loadu_ps(w1 + j + 4), _mm_loadu_ps(w2 + j + 4), y1, y2));
        /* Clamped to [0, maxv] in 16 bits: biased by -32768, packed with signed saturation, unbiased. */
        __m128i o = _mm_packs_epi32(_mm_sub_epi32(r0, bias), _mm_sub_epi32(r1, bias));
        if (maxv != 0xffff)
            o = _mm_min_epi16(o, top);
        _mm_storeu_si128((__m128i *)(px + j), _mm_xor_si128(o, flip));
    }
#else
    (void)w1;
    (void)w2;
#endif
    for (; j < n; j++)
        px[j] = (uint16_t)quad_blend(q[hq_bin(px[j], maxv)], wx[j], wy, maxv);
}

static void quad_row(uint16_t *px, uint64_t n, const uint64_t *q, const float *w1, const float *w2,
                     const hq_clahe_w *wx, hq_clahe_w wy, uint32_t maxv)
{
    if (maxv == 0xffff)
        quad_row_body(px, n, q, w1, w2, wx, wy, 0xffff);
    else
        quad_row_body(px, n, q, w1, w2, wx, wy, maxv);
}

/* The 8-bit form of quad_row_body (same tables: 8-bit LUTs arrive as 16-bit entries). */
static void quad_row8(uint8_t *px, uint64_t n, const uint64_t *q, const float *w1, const float *w2,
                      const hq_clahe_w *wx, hq_clahe_w wy, uint32_t maxv)
{
    uint64_t j = 0;
#ifdef __SSE2__
    const __m128 y1 = _mm_set1_ps(wy.w1), y2 = _mm_set1_ps(wy.w2);
    const __m128i top = _mm_set1_epi8((char)(uint8_t)maxv);
    for (; j + 8 <= n; j += 8) {
        __m128 a, b, c, d;
        quad_gather4(q, hq_bin(px[j], maxv), hq_bin(px[j + 1], maxv), hq_bin(px[j + 2], maxv),
                     hq_bin(px[j + 3], maxv), &a, &b, &c, &d);
        const __m128i r0 = _mm_cvtps_epi32(blend4(a, b, c, d, _mm_loadu_ps(w1 + j), _mm_loadu_ps(w2 + j), y1, y2));
        quad_gather4(q, hq_bin(px[j + 4], maxv), hq_bin(px[j + 5], maxv), hq_bin(px[j + 6], maxv),
                     hq_bin(px[j + 7], maxv), &a, &b, &c, &d);
        const __m128i r1 =
            _mm_cvtps_epi32(blend4(a, b, c, d, _mm_loadu_ps(w1 + j + 4), _mm_loadu_ps(w2 + j + 4), y1, y2));
        /* Saturating packs clamp to [0, 255]; then to maxv. */
        __m128i o = _mm_packus_epi16(_mm_packs_epi32(r0, r1), _mm_setzero_si128());
        o = _mm_min_epu8(o, top);
        _mm_storel_epi64((__m128i *)(px + j), o);
    }
#else
    (void)w1;
    (void)w2;
#endif
    for (; j < n; j++)
        px[j] = (uint8_t)quad_blend(q[hq_bin(px[j], maxv)], wx[j], wy, maxv);
}

typedef struct chunk {
    uint32_t band, seg;
    uint64_t r0, r1; /* piece rows */
} chunk;

/* Gray columns [j0, j0 + n) of the piece, block by block: chunks of rows in block order
 * (bands, then blocks across, then rows), dealt to threads in a few contiguous runs each, so a
 * thread builds a block's table once per run that enters it, in its own buffer, and the only
 * barrier is the loop's end (a thread waiting at one on a busy machine stalls everyone). */
static int remap_gray(int threads, hq_clahe_piece *p, uint64_t j0, uint64_t n, const hq_mode *m,
                        const hq_clahe_geom *g, const uint16_t *lut, const cols *c, hq_err *err)
{
    const uint32_t bins = hq_mode_bins(m), maxv = bins - 1;
    const float inv_w = hq_clahe_inv(g->tile_w), inv_h = hq_clahe_inv(g->tile_h);
    span *bands = malloc((g->tiles_y + 1) * sizeof *bands), *segs = malloc((g->tiles_x + 1) * sizeof *segs);
    chunk *chunks = NULL;
    int rc = 0;
    if (!bands || !segs) {
        rc = hq_fail(err, HQ_EMEM, "cpu engine: out of memory for CLAHE blocks");
        goto done;
    }
    const uint64_t nb = spans_make(p->r0, p->rows, inv_h, g->tiles_y, bands);
    const uint64_t ns = spans_make(p->c0 + j0, n, inv_w, g->tiles_x, segs);
    uint64_t nc = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (pass && !(chunks = malloc(nc * sizeof *chunks))) {
            rc = hq_fail(err, HQ_EMEM, "cpu engine: out of memory for CLAHE blocks");
            goto done;
        }
        nc = 0;
        for (uint64_t b = 0; b < nb; b++)
            for (uint64_t s = 0; s < ns; s++) {
                const uint64_t w = segs[s].hi - segs[s].lo, step = CHUNK_PIXELS / w ? CHUNK_PIXELS / w : 1;
                for (uint64_t y = bands[b].lo; y < bands[b].hi; y += step, nc++)
                    if (pass)
                        chunks[nc] = (chunk){(uint32_t)b, (uint32_t)s, y, y + step < bands[b].hi ? y + step : bands[b].hi};
            }
    }
    const int64_t runs = (int64_t)threads * RUNS_PER_THREAD;
    const uint64_t row_len = p->cols * m->sample_bytes, tile_row = g->tiles_x * bins;
    int failed = 0;
#pragma omp parallel num_threads(threads)
    {
        uint64_t *q = malloc((size_t)bins * sizeof *q);
        if (!q) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(dynamic, 1)
        for (int64_t r = 0; r < runs; r++) {
            uint64_t built = UINT64_MAX; /* the block (band * ns + seg) q holds */
            for (uint64_t k = (uint64_t)r * nc / (uint64_t)runs; q && k < (uint64_t)(r + 1) * nc / (uint64_t)runs; k++) {
                const chunk ck = chunks[k];
                const span bd = bands[ck.band], sg = segs[ck.seg];
                if (built != ck.band * ns + ck.seg) {
                    const uint16_t *r1 = lut + bd.t1 * tile_row, *r2 = lut + bd.t2 * tile_row;
                    quad_build(q, r1 + (uint64_t)sg.t1 * bins, r1 + (uint64_t)sg.t2 * bins, r2 + (uint64_t)sg.t1 * bins,
                               r2 + (uint64_t)sg.t2 * bins, bins);
                    built = ck.band * ns + ck.seg;
                }
                for (uint64_t y = ck.r0; y < ck.r1; y++) {
                    const hq_clahe_w wy = hq_clahe_weight(p->r0 + y, inv_h, g->tiles_y);
                    uint8_t *row = (uint8_t *)p->data + y * row_len + (j0 + sg.lo) * m->sample_bytes;
                    if (m->sample_bytes == 2)
                        quad_row((uint16_t *)row, sg.hi - sg.lo, q, c->w1 + sg.lo, c->w2 + sg.lo, c->wx + sg.lo, wy,
                                 maxv);
                    else
                        quad_row8(row, sg.hi - sg.lo, q, c->w1 + sg.lo, c->w2 + sg.lo, c->wx + sg.lo, wy, maxv);
                }
            }
        }
        free(q);
    }
    if (failed)
        rc = hq_fail(err, HQ_EMEM, "cpu engine: out of memory for CLAHE blocks");
done:
    free(bands);
    free(segs);
    free(chunks);
    return rc;
}

/* Columns [j0, j0 + n) of the piece. */
static int remap_strip(int threads, hq_clahe_piece *p, uint64_t j0, uint64_t n, const hq_mode *m,
                       const hq_clahe_geom *g, const uint16_t *lut, hq_err *err)
{
    const uint32_t bins = hq_mode_bins(m);
    const uint64_t hl = (uint64_t)hq_mode_nhist(m) * bins;
    const float inv_w = hq_clahe_inv(g->tile_w), inv_h = hq_clahe_inv(g->tile_h);
    /* The first tile column this strip blends: the blend's tiles grow with the position. */
    const uint64_t tx0 = hq_clahe_weight(p->c0 + j0, inv_w, g->tiles_x).t1;
    cols c = {malloc(n * sizeof *c.wx), malloc(n * sizeof *c.o1), malloc(n * sizeof *c.o2), malloc(n * sizeof *c.w1),
              malloc(n * sizeof *c.w2)};
    int rc = 0;
    if (!c.wx || !c.o1 || !c.o2 || !c.w1 || !c.w2) {
        rc = hq_fail(err, HQ_EMEM, "cpu engine: out of memory for CLAHE weights");
        goto done;
    }
    /* Offsets into the LUTs of tiles [tx0, tx1] of a tile row. */
    for (uint64_t j = 0; j < n; j++) {
        c.wx[j] = hq_clahe_weight(p->c0 + j0 + j, inv_w, g->tiles_x);
        c.w1[j] = c.wx[j].w1;
        c.w2[j] = c.wx[j].w2;
        c.o1[j] = (uint32_t)((c.wx[j].t1 - tx0) * hl);
        c.o2[j] = (uint32_t)((c.wx[j].t2 - tx0) * hl);
    }
    if (m->channels == 1) {
        rc = remap_gray(threads, p, j0, n, m, g, lut, &c, err);
        goto done;
    }
    const uint64_t px_len = (uint64_t)m->channels * m->sample_bytes, row_len = p->cols * px_len;
#pragma omp parallel for schedule(dynamic, 16) num_threads(threads)
    for (int64_t i = 0; i < (int64_t)p->rows; i++) {
        const hq_clahe_w wy = hq_clahe_weight(p->r0 + (uint64_t)i, inv_h, g->tiles_y);
        void *row = (uint8_t *)p->data + (uint64_t)i * row_len + j0 * px_len;
        const uint16_t *l1 = lut + (wy.t1 * g->tiles_x + tx0) * hl, *l2 = lut + (wy.t2 * g->tiles_x + tx0) * hl;
        row_any(row, n, m, l1, l2, &c, wy);
    }
done:
    free(c.wx);
    free(c.o1);
    free(c.o2);
    free(c.w1);
    free(c.w2);
    return rc;
}

int hq_cpu_clahe_remap(int threads, hq_clahe_piece *p, const hq_mode *m, const hq_clahe_geom *g, const uint16_t *lut,
                       hq_err *err)
{
    const uint64_t strip = (STRIP_TILES - 2) * g->tile_w;
    int rc = 0;
    for (uint64_t j0 = 0; j0 < p->cols && p->rows && !rc; j0 += strip)
        rc = remap_strip(threads, p, j0, p->cols - j0 < strip ? p->cols - j0 : strip, m, g, lut, err);
    return rc;
}
