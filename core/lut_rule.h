/* lut_rule.h — one LUT entry of each method, as inline integer functions that host C (core/lut.c)
 * and CUDA kernels (a LUT built on the device) both call, so the rule exists once.
 * See lut.h for the rule in words. 128-bit intermediates keep it exact for any uint64 count. */
#ifndef HQ_LUT_RULE_H
#define HQ_LUT_RULE_H

#include <stdint.h>

#include "pixel.h" /* HQ_HD */

/* round_half_up(num / den), num >= 0, den > 0: floor((2 num + den) / (2 den)). Counts below 2^62
 * (every histogram short of 4.6e18 pixels) divide in 64 bits: the same quotient, without the
 * 128-bit division's library call, which 65,536-bin LUTs of small float images spent most of
 * their time in. */
HQ_HD uint16_t hq_ratio_round(unsigned __int128 num, unsigned __int128 den)
{
    if ((num | den) >> 62 == 0)
        return (uint16_t)((2 * (uint64_t)num + (uint64_t)den) / (2 * (uint64_t)den));
    return (uint16_t)((2 * num + den) / (2 * den));
}

/* Equalize: c_v = c(v) for v >= h0, c0 = c(h0) = hist[h0], span = N - c0 > 0. */
HQ_HD uint16_t hq_lut_equalize_entry(uint64_t c_v, uint64_t c0, uint64_t span, uint32_t bins)
{
    return hq_ratio_round((unsigned __int128)(c_v - c0) * (bins - 1), span);
}

/* Stretch: lo < hi the first and last non-empty bins. */
HQ_HD uint16_t hq_lut_stretch_entry(uint32_t v, uint32_t lo, uint32_t hi, uint32_t bins)
{
    if (v <= lo)
        return 0;
    if (v >= hi)
        return (uint16_t)(bins - 1);
    return hq_ratio_round((unsigned __int128)(v - lo) * (bins - 1), hi - lo);
}

#endif
