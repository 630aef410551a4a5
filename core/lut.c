#include "lut.h"

#include "lut_rule.h"

uint64_t hq_hist_total(const uint64_t *hist, uint32_t bins)
{
    uint64_t n = 0;
    for (uint32_t v = 0; v < bins; v++)
        n += hist[v];
    return n;
}

static void identity(uint16_t *lut, uint32_t bins)
{
    for (uint32_t v = 0; v < bins; v++)
        lut[v] = (uint16_t)v;
}

static void equalize(const uint64_t *hist, uint32_t bins, uint16_t *lut)
{
    uint32_t h0 = 0;
    while (h0 < bins && hist[h0] == 0)
        h0++;
    uint64_t n = hq_hist_total(hist, bins);
    if (h0 == bins || hist[h0] == n) {
        identity(lut, bins);
        return;
    }
    uint64_t c0 = hist[h0], span = n - c0, c = 0;
    for (uint32_t v = 0; v < bins; v++) {
        c += hist[v];
        lut[v] = v < h0 ? 0 : hq_lut_equalize_entry(c, c0, span, bins);
    }
}

static void stretch(const uint64_t *hist, uint32_t bins, uint16_t *lut)
{
    uint32_t lo = 0, hi = bins;
    while (lo < bins && hist[lo] == 0)
        lo++;
    while (hi > lo && hist[hi - 1] == 0)
        hi--;
    if (lo == bins || hi - 1 == lo) {
        identity(lut, bins);
        return;
    }
    hi--;
    for (uint32_t v = 0; v < bins; v++)
        lut[v] = hq_lut_stretch_entry(v, lo, hi, bins);
}

void hq_lut_build(hq_method method, const uint64_t *hist, uint32_t bins, uint16_t *lut)
{
    if (method == HQ_METHOD_STRETCH)
        stretch(hist, bins, lut);
    else
        equalize(hist, bins, lut);
}
