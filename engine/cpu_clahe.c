/* cpu_clahe.c — CLAHE on the CPU: per-tile histograms of a piece (with the padding's reflections)
 * and the bilinear remap, both from core/clahe.h. */
#include "cpu_clahe.h"

#include <omp.h>
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
                const uint64_t step = ITEM_PIXELS / w > 0 ? ITEM_PIXELS / w : 1;
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
    const uint32_t bins = hq_mode_bins(m);
    const size_t hl = (size_t)hq_mode_nhist(m) * bins;
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

/* Gray with every bin reachable: OpenCV's own loop shape, LUT offsets and weights per column. */
#define DEFINE_GRAY_ROW(NAME, T)                                                                             \
    static void NAME(T *px, uint64_t n, const uint16_t *l1, const uint16_t *l2, const uint64_t *i1,            \
                     const uint64_t *i2, const hq_clahe_w *wx, hq_clahe_w wy, uint32_t maxv)                   \
    {                                                                                                          \
        for (uint64_t j = 0; j < n; j++) {                                                                     \
            const uint32_t v = hq_bin(px[j], maxv);                                                            \
            px[j] = (T)hq_clahe_blend(l1[i1[j] + v], l1[i2[j] + v], l2[i1[j] + v], l2[i2[j] + v], wx[j], wy,  \
                                      maxv);                                                                   \
        }                                                                                                      \
    }
DEFINE_GRAY_ROW(remap_row_u8, uint8_t)
DEFINE_GRAY_ROW(remap_row_u16, uint16_t)

static void remap_row_any(void *row, uint64_t n, const hq_mode *m, const uint16_t *l1, const uint16_t *l2,
                          const uint64_t *i1, const uint64_t *i2, const hq_clahe_w *wx, hq_clahe_w wy)
{
    const uint32_t maxv = hq_mode_bins(m) - 1, ch = m->channels, nh = hq_mode_nhist(m), bins = maxv + 1;
    for (uint64_t j = 0; j < n; j++) {
        uint32_t c[4] = {0, 0, 0, 0}, k2[3];
        for (uint32_t k = 0; k < ch && k < 3; k++)
            c[k] = m->sample_bytes == 1 ? ((uint8_t *)row)[j * ch + k] : ((uint16_t *)row)[j * ch + k];
        for (uint32_t h = 0; h < nh; h++) {
            const uint64_t v = (uint64_t)h * bins + hq_clahe_key(c, ch, m->color, h, maxv);
            k2[h] = hq_clahe_blend(l1[i1[j] + v], l1[i2[j] + v], l2[i1[j] + v], l2[i2[j] + v], wx[j], wy, maxv);
        }
        hq_clahe_apply(c, ch, m->color, k2, maxv);
        for (uint32_t k = 0; k < ch && k < 3; k++) {
            if (m->sample_bytes == 1)
                ((uint8_t *)row)[j * ch + k] = (uint8_t)c[k];
            else
                ((uint16_t *)row)[j * ch + k] = (uint16_t)c[k];
        }
    }
}

int hq_cpu_clahe_remap(int threads, hq_clahe_piece *p, const hq_mode *m, const hq_clahe_geom *g, const uint16_t *lut,
                       hq_err *err)
{
    const uint32_t bins = hq_mode_bins(m), maxv = bins - 1;
    const uint64_t hl = (uint64_t)hq_mode_nhist(m) * bins, n = p->cols;
    hq_clahe_w *wx = malloc((n ? n : 1) * sizeof *wx);
    uint64_t *i1 = malloc((n ? n : 1) * sizeof *i1), *i2 = malloc((n ? n : 1) * sizeof *i2);
    if (!wx || !i1 || !i2) {
        free(wx);
        free(i1);
        free(i2);
        return hq_fail(err, HQ_EMEM, "cpu engine: out of memory for CLAHE weights");
    }
    const float inv_w = hq_clahe_inv(g->tile_w), inv_h = hq_clahe_inv(g->tile_h);
    for (uint64_t j = 0; j < n; j++) {
        wx[j] = hq_clahe_weight(p->c0 + j, inv_w, g->tiles_x);
        i1[j] = wx[j].t1 * hl;
        i2[j] = wx[j].t2 * hl;
    }
    const uint64_t row_len = n * m->channels * m->sample_bytes;
    const int gray = m->channels == 1;
#pragma omp parallel for schedule(dynamic, 16) num_threads(threads)
    for (int64_t i = 0; i < (int64_t)p->rows; i++) {
        const hq_clahe_w wy = hq_clahe_weight(p->r0 + (uint64_t)i, inv_h, g->tiles_y);
        const uint16_t *l1 = lut + wy.t1 * g->tiles_x * hl, *l2 = lut + wy.t2 * g->tiles_x * hl;
        void *row = (uint8_t *)p->data + (uint64_t)i * row_len;
        if (gray && m->sample_bytes == 1)
            remap_row_u8(row, n, l1, l2, i1, i2, wx, wy, maxv);
        else if (gray)
            remap_row_u16(row, n, l1, l2, i1, i2, wx, wy, maxv);
        else
            remap_row_any(row, n, m, l1, l2, i1, i2, wx, wy);
    }
    free(wx);
    free(i1);
    free(i2);
    return 0;
}
