/* fbin.h — float samples to bins and back, the arithmetic both engines must agree on bit for bit.
 *
 * Float data (float32, float64) is equalized over N bins of equal width between a histogram
 * group's lo and hi (the minimum and maximum of its finite samples, or --range):
 *   b(x) = min(N-1, floor((x - lo) * N / (hi - lo)))      in double, each operation rounded to
 *          nearest once (no fused multiply-add: device code uses __dsub_rn/__dmul_rn/__ddiv_rn,
 *          host code is built with -ffp-contract=off), in exactly this order;
 *   x <= lo -> bin 0 and x >= hi -> bin N-1 (the clamp of --range; for lo and hi the data's own
 *          extremes this is what the formula gives anyway);
 *   hi <= lo (a constant group, or one without finite samples) -> every finite sample in bin 0;
 *   NaN is never binned (not counted, written back unchanged); +-inf is refused by the driver.
 * Output: lut[b] / (N - 1), a double division of two exact integers (correctly rounded), then
 * rounded to nearest float for float32 data: in [0, 1], as scikit-image's equalize_hist returns.
 *
 * Overflow: when (hi - lo) * N would overflow a double (float64 data spanning more than about
 * 2^1007), x, lo and hi are first multiplied by 2^-18 (exact except for values below 2^-1004,
 * which land in bin 0's neighbourhood either way), so no intermediate is infinite. Same on both
 * engines: the parameters are computed once on the host (hq_fbin_make) and handed to both. */
#ifndef HQ_FBIN_H
#define HQ_FBIN_H

#include <float.h>
#include <stdint.h>

#include "pixel.h" /* HQ_HD */

#ifdef __CUDA_ARCH__
#define HQ_DSUB(a, b) __dsub_rn((a), (b))
#define HQ_DMUL(a, b) __dmul_rn((a), (b))
#define HQ_DDIV(a, b) __ddiv_rn((a), (b))
#define HQ_D2F(a) __double2float_rn(a)
#else
#define HQ_DSUB(a, b) ((a) - (b))
#define HQ_DMUL(a, b) ((a) * (b))
#define HQ_DDIV(a, b) ((a) / (b))
#define HQ_D2F(a) ((float)(a))
#endif

/* Most bins of float data (the LUT is uint16) and the default. */
#define HQ_FBINS_MAX 65536u

/* One histogram group's binning, prepared once on the host. */
typedef struct hq_fbin {
    double lo, hi;   /* the group's range as reduced (or --range): recorded in the output */
    double scale;    /* 1, or 2^-18 when (hi - lo) * N would overflow */
    double lo_s, hi_s, w_s; /* lo * scale, hi * scale, hi_s - lo_s */
    uint32_t n;      /* bins, 2..65536 */
    uint32_t flat;   /* hi <= lo: every finite sample in bin 0 */
} hq_fbin;

/* What pass 0 reduces per group: the extremes of the finite samples and how many there were, and
 * how many samples were infinite. Accumulated (the caller starts from hq_frange_empty). */
typedef struct hq_frange {
    double lo, hi;
    uint64_t finite, inf;
} hq_frange;

static inline hq_frange hq_frange_empty(void)
{
    hq_frange r = {DBL_MAX, -DBL_MAX, 0, 0};
    return r;
}

/* Host only: the binning of [lo, hi] into n bins. -0.0 is taken as +0.0, so that the recorded
 * range does not depend on which of two zeros a reduction met first. */
static inline hq_fbin hq_fbin_make(double lo, double hi, uint32_t n)
{
    hq_fbin p;
    if (lo == 0)
        lo = 0.0;
    if (hi == 0)
        hi = 0.0;
    p.lo = lo;
    p.hi = hi;
    p.n = n;
    p.flat = !(hi > lo);
    p.scale = 1.0;
    if (!p.flat && !((hi - lo) * (double)n <= DBL_MAX))
        p.scale = 0x1p-18;
    p.lo_s = lo * p.scale;
    p.hi_s = hi * p.scale;
    p.w_s = p.hi_s - p.lo_s;
    return p;
}

/* What a sample is to pass 0 and the histograms, on both engines: NaN is left out (and left as it
 * is by the remap), an infinity is counted apart (the driver then refuses the input), anything
 * else is binned. Comparisons only, exact everywhere. */
typedef enum { HQ_FS_FINITE, HQ_FS_NAN, HQ_FS_INF } hq_fsample;

HQ_HD hq_fsample hq_fsample_of(double x)
{
    if (x != x)
        return HQ_FS_NAN;
    return x < -DBL_MAX || x > DBL_MAX ? HQ_FS_INF : HQ_FS_FINITE;
}

/* The bin of a sample that is not NaN (an infinity goes to an end bin; the driver refuses those). */
HQ_HD uint32_t hq_fbin_of(double x, const hq_fbin *p)
{
    if (p->flat)
        return 0;
    const double xs = HQ_DMUL(x, p->scale);
    if (!(xs > p->lo_s))
        return 0;
    if (xs >= p->hi_s)
        return p->n - 1;
    const double t = HQ_DDIV(HQ_DMUL(HQ_DSUB(xs, p->lo_s), (double)p->n), p->w_s);
    return t < (double)(p->n - 1) ? (uint32_t)t : p->n - 1;
}

/* The output value of LUT entry l over n bins, in double. */
HQ_HD double hq_fout(uint16_t l, uint32_t n)
{
    return HQ_DDIV((double)l, (double)(n - 1));
}

HQ_HD float hq_fout32(uint16_t l, uint32_t n)
{
    return HQ_D2F(hq_fout(l, n));
}

#endif
