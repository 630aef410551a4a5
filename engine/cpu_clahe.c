/* cpu_clahe.c — CLAHE on the CPU: per-tile histograms of a piece (with the padding's reflections)
 * and the bilinear remap, both from core/clahe.h. */
#include "cpu_clahe.h"

#include <omp.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#include <stdlib.h>
#include <string.h>

#include "../core/clahe.h"
#include "../core/pixel.h"

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

static void fold(uint32_t *loc, uint64_t *dst, size_t len)
{
    for (size_t v = 0; v < len; v++) {
        if (!loc[v])
            continue;
        const uint64_t add = loc[v];
#pragma omp atomic
        dst[v] += add;
        loc[v] = 0;
    }
}

typedef struct item {
    uint64_t ty, tx;
    uint64_t row_lo, row_hi; /* own rows [row_lo, row_hi) of tile ty, or... */
    int ext_rows;            /* ...its reflected rows (then row_lo, row_hi are unused) */
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
                for (uint64_t y = rs.own_lo[ty]; y < rs.own_hi[ty]; y += step) {
                    if (pass)
                        items[nitems] = (item){ty, tx, y, y + step < rs.own_hi[ty] ? y + step : rs.own_hi[ty], 0};
                    nitems++;
                }
                if (rs.ext_at[ty + 1] > rs.ext_at[ty]) {
                    if (pass)
                        items[nitems] = (item){ty, tx, 0, 0, 1};
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
                    fold(loc, dst, hl);
                    pending = 0;
                }
                pending += w;
                count_run(row, cs.own_lo[it->tx] - p->c0, cs.own_hi[it->tx] - cs.own_lo[it->tx], m, loc);
                for (uint64_t e = cs.ext_at[it->tx]; e < cs.ext_at[it->tx + 1]; e++)
                    count_run(row, cs.ext[e] - p->c0, 1, m, loc);
            }
            fold(loc, dst, hl);
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

/* Four LUT entries (pixels j .. j + 3, values v0 .. v3) as floats, built in registers: four scalar
 * stores read back as one vector would stall on store forwarding. The conversions are exact. */
#define GATHER4(L, O)                                                                                   \
    _mm_cvtepi32_ps(_mm_set_epi32((int)(L)[(O)[j + 3] + v3], (int)(L)[(O)[j + 2] + v2], (int)(L)[(O)[j + 1] + v1], \
                                  (int)(L)[(O)[j] + v0]))
#endif

/* 8-bit gray, 256 bins: LUTs narrowed to bytes (a quarter of the cache of 16-bit entries). */
static void row_gray8(uint8_t *px, uint64_t n, const uint8_t *l1, const uint8_t *l2, const cols *c, hq_clahe_w wy)
{
    uint64_t j = 0;
#ifdef __SSE2__
    const __m128 y1 = _mm_set1_ps(wy.w1), y2 = _mm_set1_ps(wy.w2);
    for (; j + 4 <= n; j += 4) {
        const uint32_t v0 = px[j], v1 = px[j + 1], v2 = px[j + 2], v3 = px[j + 3];
        const __m128 r = blend4(GATHER4(l1, c->o1), GATHER4(l1, c->o2), GATHER4(l2, c->o1), GATHER4(l2, c->o2),
                                _mm_loadu_ps(c->w1 + j), _mm_loadu_ps(c->w2 + j), y1, y2);
        __m128i q = _mm_cvtps_epi32(r);
        q = _mm_packs_epi32(q, q); /* saturating: clamp to [0, 255] */
        q = _mm_packus_epi16(q, q);
        const uint32_t four = (uint32_t)_mm_cvtsi128_si32(q);
        memcpy(px + j, &four, 4);
    }
#endif
    for (; j < n; j++) {
        const uint32_t v = px[j];
        px[j] = (uint8_t)hq_clahe_blend(l1[c->o1[j] + v], l1[c->o2[j] + v], l2[c->o1[j] + v], l2[c->o2[j] + v],
                                        c->wx[j], wy, 255);
    }
}

/* 16-bit gray, any number of significant bits (inlined twice: 16 bits, where hq_bin does nothing,
 * and the others). */
static inline __attribute__((always_inline)) void row_gray16_body(uint16_t *px, uint64_t n, const uint16_t *l1, const uint16_t *l2, const cols *c, hq_clahe_w wy,
                       uint32_t maxv)
{
    uint64_t j = 0;
#ifdef __SSE2__
    const __m128 y1 = _mm_set1_ps(wy.w1), y2 = _mm_set1_ps(wy.w2);
    for (; j + 4 <= n; j += 4) {
        const uint32_t v0 = hq_bin(px[j], maxv), v1 = hq_bin(px[j + 1], maxv), v2 = hq_bin(px[j + 2], maxv),
                       v3 = hq_bin(px[j + 3], maxv);
        const __m128 r = blend4(GATHER4(l1, c->o1), GATHER4(l1, c->o2), GATHER4(l2, c->o1), GATHER4(l2, c->o2),
                                _mm_loadu_ps(c->w1 + j), _mm_loadu_ps(c->w2 + j), y1, y2);
        int32_t q[4];
        _mm_storeu_si128((__m128i *)q, _mm_cvtps_epi32(r));
        for (int k = 0; k < 4; k++)
            px[j + k] = (uint16_t)(q[k] < 0 ? 0 : (uint32_t)q[k] > maxv ? maxv : (uint32_t)q[k]);
    }
#endif
    for (; j < n; j++) {
        const uint32_t v = hq_bin(px[j], maxv);
        px[j] = (uint16_t)hq_clahe_blend(l1[c->o1[j] + v], l1[c->o2[j] + v], l2[c->o1[j] + v], l2[c->o2[j] + v],
                                         c->wx[j], wy, maxv);
    }
}

static void row_gray16(uint16_t *px, uint64_t n, const uint16_t *l1, const uint16_t *l2, const cols *c, hq_clahe_w wy,
                       uint32_t maxv)
{
    if (maxv == 0xffff)
        row_gray16_body(px, n, l1, l2, c, wy, 0xffff);
    else
        row_gray16_body(px, n, l1, l2, c, wy, maxv);
}

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

/* Columns [j0, j0 + n) of the piece. */
static int remap_strip(int threads, hq_clahe_piece *p, uint64_t j0, uint64_t n, const hq_mode *m,
                       const hq_clahe_geom *g, const uint16_t *lut, hq_err *err)
{
    const uint32_t bins = hq_mode_bins(m), maxv = bins - 1;
    const uint64_t hl = (uint64_t)hq_mode_nhist(m) * bins;
    const float inv_w = hq_clahe_inv(g->tile_w), inv_h = hq_clahe_inv(g->tile_h);
    /* The tiles this strip blends: the blend's tiles grow with the position. */
    const uint64_t ty0 = hq_clahe_weight(p->r0, inv_h, g->tiles_y).t1;
    const uint64_t ty1 = hq_clahe_weight(p->r0 + p->rows - 1, inv_h, g->tiles_y).t2;
    const uint64_t tx0 = hq_clahe_weight(p->c0 + j0, inv_w, g->tiles_x).t1;
    const uint64_t tx1 = hq_clahe_weight(p->c0 + j0 + n - 1, inv_w, g->tiles_x).t2;
    const uint64_t nty = ty1 - ty0 + 1, ntx = tx1 - tx0 + 1;
    const int narrow = m->channels == 1 && m->sample_bytes == 1 && maxv == 255;
    cols c = {malloc(n * sizeof *c.wx), malloc(n * sizeof *c.o1), malloc(n * sizeof *c.o2), malloc(n * sizeof *c.w1),
              malloc(n * sizeof *c.w2)};
    uint8_t *lut8 = narrow ? malloc(nty * ntx * 256) : NULL;
    int rc = 0;
    if (!c.wx || !c.o1 || !c.o2 || !c.w1 || !c.w2 || (narrow && !lut8)) {
        rc = hq_fail(err, HQ_EMEM, "cpu engine: out of memory for CLAHE weights");
        goto done;
    }
    /* Offsets into the LUTs of tiles [tx0, tx1] of a tile row (narrowed to bytes for 8-bit). */
    for (uint64_t j = 0; j < n; j++) {
        c.wx[j] = hq_clahe_weight(p->c0 + j0 + j, inv_w, g->tiles_x);
        c.w1[j] = c.wx[j].w1;
        c.w2[j] = c.wx[j].w2;
        c.o1[j] = (uint32_t)((c.wx[j].t1 - tx0) * (narrow ? 256 : hl));
        c.o2[j] = (uint32_t)((c.wx[j].t2 - tx0) * (narrow ? 256 : hl));
    }
    for (uint64_t ty = ty0; narrow && ty <= ty1; ty++)
        for (uint64_t k = 0; k < ntx * 256; k++)
            lut8[(ty - ty0) * ntx * 256 + k] = (uint8_t)lut[(ty * g->tiles_x + tx0) * 256 + k];
    const uint64_t px_len = (uint64_t)m->channels * m->sample_bytes, row_len = p->cols * px_len;
#pragma omp parallel for schedule(dynamic, 16) num_threads(threads)
    for (int64_t i = 0; i < (int64_t)p->rows; i++) {
        const hq_clahe_w wy = hq_clahe_weight(p->r0 + (uint64_t)i, inv_h, g->tiles_y);
        void *row = (uint8_t *)p->data + (uint64_t)i * row_len + j0 * px_len;
        if (narrow) {
            row_gray8(row, n, lut8 + (wy.t1 - ty0) * ntx * 256, lut8 + (wy.t2 - ty0) * ntx * 256, &c, wy);
            continue;
        }
        const uint16_t *l1 = lut + (wy.t1 * g->tiles_x + tx0) * hl, *l2 = lut + (wy.t2 * g->tiles_x + tx0) * hl;
        if (m->channels == 1 && m->sample_bytes == 2)
            row_gray16(row, n, l1, l2, &c, wy, maxv);
        else
            row_any(row, n, m, l1, l2, &c, wy);
    }
done:
    free(c.wx);
    free(c.o1);
    free(c.o2);
    free(c.w1);
    free(c.w2);
    free(lut8);
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
