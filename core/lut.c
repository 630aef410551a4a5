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
    uint64_t c0 = hist[h0], span = n - c0, c = c0;
    uint16_t e = 0; /* the entry of c(h0) = c0 */
    for (uint32_t v = 0; v <= h0; v++)
        lut[v] = 0;
    /* An empty bin keeps the cumulative count, so its entry is the one before: most of a wide
     * histogram (65,536 bins of a small float image) needs no division. */
    for (uint32_t v = h0 + 1; v < bins; v++) {
        if (hist[v]) {
            c += hist[v];
            e = hq_lut_equalize_entry(c, c0, span, bins);
        }
        lut[v] = e;
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

void hq_lut_match(const uint64_t *src, const uint64_t *tgt, uint32_t bins, uint16_t *lut)
{
    const uint64_t ns = hq_hist_total(src, bins), nt = hq_hist_total(tgt, bins);
    if (ns == 0 || nt == 0) {
        identity(lut, bins);
        return;
    }
    /* C_s(v) grows with v, so the answer never moves back: one sweep over both histograms. */
    uint64_t cs = 0, ct = tgt[0];
    uint32_t w = 0;
    for (uint32_t v = 0; v < bins; v++) {
        cs += src[v];
        while ((unsigned __int128)ct * ns < (unsigned __int128)cs * nt)
            ct += tgt[++w]; /* ends by w = bins - 1, where ct = nt */
        lut[v] = (uint16_t)w;
    }
}

void hq_lut_build(hq_method method, const uint64_t *hist, uint32_t bins, uint16_t *lut)
{
    if (method == HQ_METHOD_STRETCH)
        stretch(hist, bins, lut);
    else
        equalize(hist, bins, lut);
}
