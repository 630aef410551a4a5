#include "clahe.h"

#include <stdlib.h>

int hq_clahe_geom_make(const hq_clahe_cfg *cfg, uint64_t h, uint64_t w, hq_clahe_geom *g)
{
    uint64_t gy = cfg->grid_y, gx = cfg->grid_x;
    if (cfg->tile) {
        /* ceil(h / tile) without h + tile - 1, which wraps for tiles near 2^64. */
        gy = h / cfg->tile + (h % cfg->tile != 0);
        gx = w / cfg->tile + (w % cfg->tile != 0);
    }
    if (h == 0 || w == 0 || gy == 0 || gx == 0 || gy > h || gx > w)
        return -1;
    g->height = h;
    g->width = w;
    g->tiles_y = gy;
    g->tiles_x = gx;
    /* OpenCV pads both sides when either does not divide, a dividing side by a whole grid count. */
    const int pad = h % gy != 0 || w % gx != 0;
    g->tile_h = pad ? (h + gy - h % gy) / gy : h / gy;
    g->tile_w = pad ? (w + gx - w % gx) / gx : w / gx;
    return 0;
}

int64_t hq_clahe_clip_limit(double clip, uint64_t area, uint32_t bins)
{
    if (!(clip > 0.0))
        return 0;
    const double l = clip * (double)area / (double)bins;
    if (!(l < 9.2e18)) /* beyond any count a tile can hold: never clips */
        return INT64_MAX;
    const int64_t limit = (int64_t)l;
    return limit < 1 ? 1 : limit;
}

void hq_clahe_tile_lut(const uint64_t *hist, uint32_t bins, uint64_t area, int64_t limit, uint16_t *lut,
                       uint64_t *scratch)
{
    (void)scratch; /* the spread is a formula of the bin (hq_clahe_bin_count): nothing to hold */
    uint64_t clipped = 0;
    if (limit > 0)
        for (uint32_t v = 0; v < bins; v++)
            clipped += hist[v] > (uint64_t)limit ? hist[v] - (uint64_t)limit : 0;
    const hq_clahe_spread s = hq_clahe_spread_of(clipped, bins);
    const float scale = hq_clahe_lut_scale(bins, area);
    uint64_t sum = 0, next = hq_clahe_spread_from(s, 0);
    for (uint32_t v = 0; v < bins; v++) {
        sum += hq_clahe_bin_count(hist[v], limit, s, v, &next);
        lut[v] = hq_clahe_lut_entry(sum, scale, bins - 1);
    }
}

void hq_clahe_side_free(hq_clahe_side *s)
{
    free(s->own_lo);
    free(s->own_hi);
    free(s->ext_at);
    free(s->ext);
}

int hq_clahe_side_make(uint64_t n, uint64_t tiles, uint64_t tile, uint64_t b0, uint64_t b1, hq_clahe_side *s)
{
    const uint64_t padded = tiles * tile, pad = padded - n;
    s->tiles = tiles;
    s->own_lo = malloc(tiles * sizeof *s->own_lo);
    s->own_hi = malloc(tiles * sizeof *s->own_hi);
    s->ext_at = calloc(tiles + 1, sizeof *s->ext_at);
    s->ext = malloc((pad ? pad : 1) * sizeof *s->ext);
    if (!s->own_lo || !s->own_hi || !s->ext_at || !s->ext)
        return -1;
    uint64_t k = 0;
    for (uint64_t t = 0; t < tiles; t++) {
        const uint64_t lo = t * tile, hi = lo + tile, own_hi = hi < n ? hi : n > lo ? n : lo;
        s->own_lo[t] = lo > b0 ? lo : b0;
        s->own_hi[t] = own_hi < b1 ? own_hi : b1;
        if (s->own_hi[t] < s->own_lo[t])
            s->own_hi[t] = s->own_lo[t];
        s->ext_at[t] = k;
        for (uint64_t q = lo > n ? lo : n; q < hi; q++) {
            const uint64_t src = hq_clahe_reflect(q, n);
            if (src >= b0 && src < b1)
                s->ext[k++] = src;
        }
    }
    s->ext_at[tiles] = k;
    return 0;
}
