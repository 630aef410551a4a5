/* clahe.h — contrast-limited adaptive histogram equalization, OpenCV 4.6's rule stated once.
 *
 * Geometry (cv::CLAHE::apply): an H x W image and a grid of tiles_y x tiles_x tiles. When either
 * side does not divide by its grid count, the image is padded at the bottom by
 * tiles_y - H % tiles_y rows AND at the right by tiles_x - W % tiles_x columns (a side that divides
 * is then padded by a whole grid count), with BORDER_REFLECT_101; tiles are the padded size over
 * the grid. The padding is only counted, never stored: padded position p of a side of length n
 * takes the sample at hq_clahe_reflect(p, n), so one source pixel may count in several tiles.
 *
 * Per tile (histogram of tile_h * tile_w = area counts, `bins` bins): with clip > 0, every bin is
 * cut to limit = max(1, (int64)(clip * area / bins)) (double arithmetic), the excess is spread as
 * excess / bins to every bin, then the remainder r one each to bins 0, s, 2s, ... with
 * s = max(bins / r, 1); lut[v] = saturate(round_half_even((float)cumsum(v) * lut_scale)),
 * lut_scale = (float)(bins - 1) / (float)area.
 *
 * Per pixel (row y, column x of the image, value v): ty = y * (1/tile_h) - 0.5 and likewise tx, in
 * float; the four LUTs of tiles (floor, floor + 1) clamped to the grid are blended bilinearly:
 *   res = (l11 * xa1 + l12 * xa) * ya1 + (l21 * xa1 + l22 * xa) * ya,
 * every operation single precision, rounded separately (no fused multiply-add), in that order;
 * the output is saturate(round_half_even(res)). Where OpenCV counts in int, this counts in 64 bits
 * (images past 2^31 pixels). Compiled as host C11 and as CUDA device code (the HQ_HD parts). */
#ifndef HQ_CLAHE_H
#define HQ_CLAHE_H

#include <stdint.h>

#include "mode.h"
#include "pixel.h" /* HQ_HD */

#include <math.h>
#if !defined(__CUDACC__) && defined(__x86_64__)
#define HQ_CLAHE_SSE 1
#include <emmintrin.h>
#endif

typedef struct hq_clahe_geom {
    uint64_t height, width;   /* the image */
    uint64_t tiles_y, tiles_x;
    uint64_t tile_h, tile_w;  /* in the padded image; tiles_y * tile_h >= height */
} hq_clahe_geom;

/* The CLAHE settings of a run: a grid (grid_y x grid_x tiles) or a tile side (tile > 0: the grid is
 * ceil(H / tile) x ceil(W / tile), then the grid's rule), and the clip limit (<= 0: none). */
typedef struct hq_clahe_cfg {
    uint64_t grid_y, grid_x;
    uint64_t tile;
    double clip;
} hq_clahe_cfg;

/* Fills *g for an h x w image; -1 when the grid has more tiles than the image has rows or columns
 * (or a size is 0). */
int hq_clahe_geom_make(const hq_clahe_cfg *cfg, uint64_t h, uint64_t w, hq_clahe_geom *g);

static inline uint64_t hq_clahe_ntiles(const hq_clahe_geom *g)
{
    return g->tiles_y * g->tiles_x;
}

static inline uint64_t hq_clahe_area(const hq_clahe_geom *g)
{
    return g->tile_h * g->tile_w;
}

/* The clip limit in counts per bin; 0: no clipping. */
int64_t hq_clahe_clip_limit(double clip, uint64_t area, uint32_t bins);

/* The positions of one side (rows or columns) of the padded image that a piece of the image
 * covering [b0, b1) of that side supplies, tile by tile: tile t takes the piece's own samples
 * [own_lo[t], own_hi[t]) and the reflections listed in ext[ext_at[t] .. ext_at[t + 1]) (as source
 * indexes, in padded order). Host only; both engines build their work from it. */
typedef struct hq_clahe_side {
    uint64_t tiles;
    uint64_t *own_lo, *own_hi, *ext_at, *ext;
} hq_clahe_side;

/* n samples on the side, tiles of `tile` each; -1 when out of memory (free it all the same). */
int hq_clahe_side_make(uint64_t n, uint64_t tiles, uint64_t tile, uint64_t b0, uint64_t b1, hq_clahe_side *s);
void hq_clahe_side_free(hq_clahe_side *s);

static inline uint64_t hq_clahe_side_count(const hq_clahe_side *s, uint64_t t)
{
    return s->own_hi[t] - s->own_lo[t] + s->ext_at[t + 1] - s->ext_at[t];
}


/* The padded position p (p < tiles * tile) of a side of n samples, as the sample it copies:
 * cv::borderInterpolate(p, n, BORDER_REFLECT_101), reflections repeated while outside. */
HQ_HD uint64_t hq_clahe_reflect(uint64_t p, uint64_t n)
{
    if (n == 1)
        return 0;
    int64_t q = (int64_t)p;
    const int64_t len = (int64_t)n;
    while (q < 0 || q >= len)
        q = q < 0 ? -q : 2 * len - 2 - q;
    return (uint64_t)q;
}

/* Single-precision operations, each rounded on its own on both sides: nvcc would otherwise fuse a
 * multiply and an add; host C11 (-std=c11, -ffp-contract=off in the Makefile) does not. */
#ifdef __CUDA_ARCH__
#define HQ_FMUL(a, b) __fmul_rn((a), (b))
#define HQ_FADD(a, b) __fadd_rn((a), (b))
#define HQ_FSUB(a, b) __fsub_rn((a), (b))
#else
#define HQ_FMUL(a, b) ((float)(a) * (float)(b))
#define HQ_FADD(a, b) ((float)(a) + (float)(b))
#define HQ_FSUB(a, b) ((float)(a) - (float)(b))
#endif

/* cvRound on a float in the default rounding mode: nearest, ties to even. v >= 0 here. */
HQ_HD int64_t hq_clahe_round(float v)
{
#if defined(__CUDA_ARCH__)
    return (int64_t)__float2ll_rn(v);
#elif defined(HQ_CLAHE_SSE)
    return v < 2147483648.0f ? (int64_t)_mm_cvtss_si32(_mm_set_ss(v)) : (int64_t)nearbyintf(v);
#else
    return (int64_t)nearbyintf(v);
#endif
}

/* hq_clahe_round of v in [0, 2^23). On the device the sum v + 2^23 has an ulp of 1 there, so that
 * one round-to-nearest-even add rounds v exactly as cvRound does and its bits hold the integer:
 * no trip through the conversion unit (a quarter of the arithmetic rate) nor a branch. */
HQ_HD uint32_t hq_clahe_round_small(float v)
{
#if defined(__CUDA_ARCH__)
    return __float_as_uint(__fadd_rn(v, 8388608.0f)) - 0x4B000000u;
#else
    return (uint32_t)hq_clahe_round(v);
#endif
}

/* 1.0f / tile: OpenCV's inv_tw, inv_th. */
HQ_HD float hq_clahe_inv(uint64_t tile)
{
#ifdef __CUDA_ARCH__
    return __fdiv_rn(1.0f, (float)tile);
#else
    return 1.0f / (float)tile;
#endif
}

/* A tile's LUT (hq_clahe_tile_lut, and the GPU's device build) in pieces that both compile, so the
 * rule is stated once. The excess cut off by the clip (clipped counts in all) is spread as batch to
 * every bin, then one more to each of bins 0, step, 2 * step, ... (residual of them: residual < bins,
 * so residual * step <= bins and every one of them is a bin). */
typedef struct hq_clahe_spread {
    uint64_t batch, residual, step;
} hq_clahe_spread;

HQ_HD hq_clahe_spread hq_clahe_spread_of(uint64_t clipped, uint32_t bins)
{
    hq_clahe_spread s;
    s.batch = clipped / bins;
    s.residual = clipped - s.batch * bins;
    s.step = s.residual && bins / s.residual > 1 ? bins / s.residual : 1;
    return s;
}

/* The first bin >= v that the residual reaches; UINT64_MAX: none. */
HQ_HD uint64_t hq_clahe_spread_from(hq_clahe_spread s, uint64_t v)
{
    const uint64_t k = (v + s.step - 1) / s.step;
    return k < s.residual ? k * s.step : UINT64_MAX;
}

/* Bin v's count c after the clip (limit <= 0: none) and the spread of the excess. *next: the first
 * residual bin >= v (hq_clahe_spread_from), moved past v when it is v: bins taken in rising order
 * need no division each. */
HQ_HD uint64_t hq_clahe_bin_count(uint64_t c, int64_t limit, hq_clahe_spread s, uint64_t v, uint64_t *next)
{
    if (limit <= 0)
        return c;
    uint64_t n = (c > (uint64_t)limit ? (uint64_t)limit : c) + s.batch;
    if (v == *next) {
        n++;
        *next = *next + s.step < s.residual * s.step ? *next + s.step : UINT64_MAX;
    }
    return n;
}

/* lut_scale = (float)(bins - 1) / (float)area. */
HQ_HD float hq_clahe_lut_scale(uint32_t bins, uint64_t area)
{
#ifdef __CUDA_ARCH__
    return __fdiv_rn((float)(bins - 1), (float)area);
#else
    return (float)(bins - 1) / (float)area;
#endif
}

/* The LUT entry of a cumulative count: saturate(round_half_even((float)cumsum * lut_scale)). */
HQ_HD uint16_t hq_clahe_lut_entry(uint64_t cumsum, float scale, uint32_t maxv)
{
    const int64_t o = hq_clahe_round(HQ_FMUL((float)cumsum, scale));
    return (uint16_t)(o < 0 ? 0 : o > (int64_t)maxv ? maxv : o);
}

/* One tile's LUT from its histogram (bins counters summing to area). scratch: bins counters. */
void hq_clahe_tile_lut(const uint64_t *hist, uint32_t bins, uint64_t area, int64_t limit, uint16_t *lut,
                       uint64_t *scratch);

/* The two tiles a row (or column) blends and their weights: w1 of tile t1, w2 of tile t2. */
typedef struct hq_clahe_w {
    uint32_t t1, t2;
    float w1, w2;
} hq_clahe_w;

/* OpenCV's tyf (txf) of position pos, pos * inv - 0.5: hq_clahe_weight's first step, apart so that
 * the GPU remap can take a row's weight from it alone within a run of rows of one floor. */
HQ_HD float hq_clahe_tf(uint64_t pos, float inv)
{
#ifdef __CUDA_ARCH__
    /* The device converts 64-bit integers at a quarter of the 32-bit rate: below 2^31, (float)pos is
     * the same number from 32 bits. */
    if (pos < 0x80000000u)
        return HQ_FSUB(HQ_FMUL((float)(uint32_t)pos, inv), 0.5f);
#endif
    return HQ_FSUB(HQ_FMUL((float)pos, inv), 0.5f);
}

/* cvFloor(tf): the tile before clamping (-1 .. tiles - 1). */
HQ_HD int64_t hq_clahe_floor(float tf)
{
#ifdef __CUDA_ARCH__
    /* tf > -1 and at most tiles: the truncation and (float)t are the same numbers in 32 bits below
     * 2^31. */
    if (tf < 2147483648.0f) {
        int32_t t = (int32_t)tf;
        return t - ((float)t > tf);
    }
#endif
    int64_t t = (int64_t)tf;
    return t - ((float)t > tf);
}

/* The weights of a position from its tf and tf's floor t1f (as a float): w2 = tf - t1f, w1 = 1 - w2.
 * Tiles left 0: the GPU remap, whose runs of rows share a floor, needs only the weights. */
HQ_HD hq_clahe_w hq_clahe_weights_of(float tf, float t1f)
{
    hq_clahe_w w;
    w.w2 = HQ_FSUB(tf, t1f);
    w.w1 = HQ_FSUB(1.0f, w.w2);
    w.t1 = w.t2 = 0;
    return w;
}

HQ_HD hq_clahe_w hq_clahe_weight(uint64_t pos, float inv, uint64_t tiles)
{
    const float tf = hq_clahe_tf(pos, inv);
    const int64_t t1 = hq_clahe_floor(tf);
    hq_clahe_w w = hq_clahe_weights_of(tf, (float)t1);
    w.t1 = (uint32_t)(t1 < 0 ? 0 : t1);
    w.t2 = (uint32_t)(t1 + 1 > (int64_t)tiles - 1 ? (int64_t)tiles - 1 : t1 + 1);
    return w;
}

/* The blend of four LUT entries as floats (each exactly its integer entry): l11 = tile (y1, x1),
 * l12 = (y1, x2), l21 = (y2, x1), l22 = (y2, x2). */
HQ_HD uint32_t hq_clahe_blend_f(float l11, float l12, float l21, float l22, hq_clahe_w wx, hq_clahe_w wy,
                                uint32_t maxv)
{
    const float top = HQ_FADD(HQ_FMUL(l11, wx.w1), HQ_FMUL(l12, wx.w2));
    const float bot = HQ_FADD(HQ_FMUL(l21, wx.w1), HQ_FMUL(l22, wx.w2));
    const float res = HQ_FADD(HQ_FMUL(top, wy.w1), HQ_FMUL(bot, wy.w2));
    /* 0 <= res: entries and weights are >= 0 (a = tf - floor(tf) in [0, 1)); res < 2^17: entries
     * are at most 65535 and each pair of weights sums to 1 within a few ulps. */
    const uint32_t o = hq_clahe_round_small(res);
    return o > maxv ? maxv : o;
}

/* The blend of four LUT entries (as hq_clahe_blend_f). */
HQ_HD uint32_t hq_clahe_blend(uint32_t l11, uint32_t l12, uint32_t l21, uint32_t l22, hq_clahe_w wx, hq_clahe_w wy,
                              uint32_t maxv)
{
    return hq_clahe_blend_f((float)l11, (float)l12, (float)l21, (float)l22, wx, wy, maxv);
}

/* The level CLAHE equalizes in histogram h of a pixel (channels c[0..2], or c[0] for gray), as the
 * global equalization bins it (pixel.h): the sample, R/G/B, BT.601 luma, or V = max(R,G,B). */
HQ_HD uint32_t hq_clahe_key(const uint32_t *c, uint32_t channels, hq_color color, uint32_t h, uint32_t maxv)
{
    if (channels < 3)
        return hq_bin(c[0], maxv);
    if (color == HQ_COLOR_CHANNELS)
        return hq_bin(c[h], maxv);
    const uint32_t r = hq_bin(c[0], maxv), g = hq_bin(c[1], maxv), b = hq_bin(c[2], maxv);
    if (color == HQ_COLOR_VALUE)
        return hq_max3(r, g, b);
    return hq_luma_of_fx(hq_luma_fx(r, g, b));
}

/* The pixel after its keys k[h] became k2[h]: as the global remap applies a LUT (pixel.h). */
HQ_HD void hq_clahe_apply(uint32_t *c, uint32_t channels, hq_color color, const uint32_t *k2, uint32_t maxv)
{
    if (channels < 3) {
        c[0] = k2[0];
        return;
    }
    if (color == HQ_COLOR_CHANNELS) {
        c[0] = k2[0];
        c[1] = k2[1];
        c[2] = k2[2];
        return;
    }
    const uint32_t r = hq_bin(c[0], maxv), g = hq_bin(c[1], maxv), b = hq_bin(c[2], maxv);
    if (color == HQ_COLOR_VALUE) {
        const uint32_t v = hq_max3(r, g, b);
        c[0] = hq_value_apply(r, v, k2[0]);
        c[1] = hq_value_apply(g, v, k2[0]);
        c[2] = hq_value_apply(b, v, k2[0]);
        return;
    }
    const uint32_t y_fx = hq_luma_fx(r, g, b);
    const int32_t d = (int32_t)(k2[0] << HQ_LUMA_SHIFT) - (int32_t)y_fx;
    c[0] = hq_luma_apply(r, d, maxv);
    c[1] = hq_luma_apply(g, d, maxv);
    c[2] = hq_luma_apply(b, d, maxv);
}

#endif
