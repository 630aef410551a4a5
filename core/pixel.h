/* pixel.h — the per-pixel arithmetic that the CPU and GPU engines must agree on bit for bit.
 *
 * Everything is integer: a sample above the significant range (a 12-bit scan with a stray 13th
 * bit) is clamped to the top bin, BT.601 luma is OpenCV's 14-bit fixed point, and the luma and
 * value remaps round half up. Compiled as host C11 and as CUDA device code from one source. */
#ifndef HQ_PIXEL_H
#define HQ_PIXEL_H

#include <stdint.h>

#ifdef __CUDACC__
#define HQ_HD __host__ __device__ __forceinline__
#else
#define HQ_HD static inline
#endif

/* BT.601 weights scaled by 2^14, summing to exactly 2^14 so that a gray pixel keeps its value.
 * (OpenCV 4.6's cvtColor uses 15-bit weights, so its 8-bit luma differs from ours on ~0.3% of
 * pixels by one level; ours is the rule both of our engines share, 16-bit safe in int32.) */
#define HQ_LUMA_SHIFT 14
#define HQ_LUMA_R 4899u
#define HQ_LUMA_G 9617u
#define HQ_LUMA_B 1868u
#define HQ_LUMA_HALF (1u << (HQ_LUMA_SHIFT - 1))

/* Histogram bin of a sample: samples above the significant range count as the top bin. */
HQ_HD uint32_t hq_bin(uint32_t v, uint32_t maxv)
{
    return v > maxv ? maxv : v;
}

/* Luma scaled by 2^14 (not rounded), from samples already clamped to maxv.
 * At most 65535 * 2^14 < 2^31, so it fits int32 arithmetic below. */
HQ_HD uint32_t hq_luma_fx(uint32_t r, uint32_t g, uint32_t b)
{
    return HQ_LUMA_R * r + HQ_LUMA_G * g + HQ_LUMA_B * b;
}

/* The luma bin: Y rounded half up. */
HQ_HD uint32_t hq_luma_of_fx(uint32_t y_fx)
{
    return (y_fx + HQ_LUMA_HALF) >> HQ_LUMA_SHIFT;
}

/* One channel after a luma remap: c + (Y' - Y) with Y kept at full fixed-point precision (so the
 * chroma is held unquantized), rounded half up and clamped to [0, maxv]. d_fx = (Y' << 14) - y_fx.
 * Range: |c<<14| and |d_fx| are each below 2^30, so the sum cannot overflow int32. */
HQ_HD uint32_t hq_luma_apply(uint32_t c, int32_t d_fx, uint32_t maxv)
{
    int32_t t = (int32_t)(c << HQ_LUMA_SHIFT) + d_fx + (int32_t)HQ_LUMA_HALF;
    if (t < 0)
        return 0;
    uint32_t o = (uint32_t)t >> HQ_LUMA_SHIFT;
    return o > maxv ? maxv : o;
}

/* One channel after a value (HSV V = max(R,G,B)) remap: c * V' / V rounded half up, which keeps
 * hue and saturation. c <= V, so the result never exceeds V' and needs no clamp. A black pixel
 * (V = 0) has no hue: it becomes gray at V'. 64-bit because c * V' reaches 2^32 for 16-bit data. */
HQ_HD uint32_t hq_value_apply(uint32_t c, uint32_t v, uint32_t v2)
{
    if (v == 0)
        return v2;
    return (uint32_t)((2u * (uint64_t)c * v2 + v) / (2u * (uint64_t)v));
}

HQ_HD uint32_t hq_max3(uint32_t a, uint32_t b, uint32_t c)
{
    uint32_t m = a > b ? a : b;
    return m > c ? m : c;
}

#endif
