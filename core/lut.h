/* lut.h — the equalization rule, stated once; both engines and every rank build LUTs with it.
 *
 * For L bins over N counted pixels, h0 the first non-empty bin and c(v) the cumulative count:
 *   equalize: N == c(h0) (constant image) -> identity; else
 *             lut[v] = round_half_up((c(v) - c(h0)) * (L-1) / (N - c(h0))) for v >= h0, 0 below.
 *   stretch:  lo, hi the first and last non-empty bins; lo == hi -> identity; else
 *             lut[v] = round_half_up((v - lo) * (L-1) / (hi - lo)), 0 below lo, L-1 above hi.
 * Exact integer arithmetic (128-bit intermediates): no float, so the result cannot depend on the
 * engine, the compiler or how the counts were summed. An empty histogram gives the identity. */
#ifndef HQ_LUT_H
#define HQ_LUT_H

#include <stdint.h>

#include "mode.h"

/* Builds lut[0..bins-1] from hist[0..bins-1], 2 <= bins <= 65536: a power of two for integer data,
 * any count for float data (--bins; L = bins in the rule above). */
void hq_lut_build(hq_method method, const uint64_t *hist, uint32_t bins, uint16_t *lut);

/* Histogram matching: lut[v] = the smallest w with C_t(w) * N_s >= C_s(v) * N_t, where C_s and C_t
 * are the cumulative counts of src and tgt (C(v) = hist[0] + ... + hist[v]) and N_s, N_t their
 * totals: the first target level whose cumulative share reaches the source level's. Exact in
 * 128-bit integers, monotone, and lut[v] = 0 below the first non-empty source bin. An empty source
 * or an empty target gives the identity. */
void hq_lut_match(const uint64_t *src, const uint64_t *tgt, uint32_t bins, uint16_t *lut);

/* Sum of a histogram (the pixel count N). */
uint64_t hq_hist_total(const uint64_t *hist, uint32_t bins);

#endif
