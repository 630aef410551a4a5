/* kernels/lut.cuh — block-wide reductions and scans, and the LUT built on the device from a u64
 * histogram for the resident pipeline (equalize and stretch), entry for entry core/lut_rule.h's.
 * Part of gpu_kernels.cuh, which says the whole contract. */
#ifndef HQ_GPU_KERNELS_LUT_CUH
#define HQ_GPU_KERNELS_LUT_CUH

#include "common.cuh"

namespace hqg {

__device__ __forceinline__ uint64_t warp_sum(uint64_t v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(kFull, v, o);
    return v;
}

__device__ __forceinline__ uint32_t warp_min(uint32_t v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const uint32_t y = __shfl_xor_sync(kFull, v, o);
        v = y < v ? y : v;
    }
    return v;
}

struct Scratch {
    uint64_t a[33], b[33];
    uint32_t m[33];
};

/* Sums of x and y and the minimum of z over the block (blockDim a multiple of 32). */
__device__ __forceinline__ void block_reduce3(uint64_t &x, uint64_t &y, uint32_t &z, Scratch &s)
{
    const uint32_t lane = lane_id(), warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    x = warp_sum(x);
    y = warp_sum(y);
    z = warp_min(z);
    if (lane == 0) {
        s.a[warp] = x;
        s.b[warp] = y;
        s.m[warp] = z;
    }
    __syncthreads();
    if (warp == 0) {
        uint64_t p = lane < nw ? s.a[lane] : 0, q = lane < nw ? s.b[lane] : 0;
        uint32_t r = lane < nw ? s.m[lane] : kFull;
        p = warp_sum(p);
        q = warp_sum(q);
        r = warp_min(r);
        if (lane == 0) {
            s.a[32] = p;
            s.b[32] = q;
            s.m[32] = r;
        }
    }
    __syncthreads();
    x = s.a[32];
    y = s.b[32];
    z = s.m[32];
    __syncthreads();
}

/* Exclusive prefix of v over the block's threads in order. */
__device__ __forceinline__ uint64_t block_excl_scan(uint64_t v, Scratch &s)
{
    const uint32_t lane = lane_id(), warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    uint64_t inc = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const uint64_t y = __shfl_up_sync(kFull, inc, o);
        if (lane >= (uint32_t)o)
            inc += y;
    }
    if (lane == 31)
        s.a[warp] = inc;
    __syncthreads();
    if (warp == 0) {
        const uint64_t w = lane < nw ? s.a[lane] : 0;
        uint64_t wi = w;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const uint64_t y = __shfl_up_sync(kFull, wi, o);
            if (lane >= (uint32_t)o)
                wi += y;
        }
        s.a[lane] = wi - w;
    }
    __syncthreads();
    const uint64_t r = s.a[warp] + inc - v;
    __syncthreads();
    return r;
}

/* hq_lut_equalize_entry in 64-bit arithmetic where that is exact (span < 2^46: the numerator
 * (c - c0)(bins - 1) < 2^62, so 2 num + span < 2^64): the same value without the slow 128-bit
 * division, which dominated the LUT phase of the resident pipeline. */
__device__ __forceinline__ uint16_t lut_eq_entry(uint64_t c, uint64_t c0, uint64_t span, uint32_t bins)
{
    if (span < (1ull << 46)) {
        const uint64_t num = (c - c0) * (bins - 1u);
        return (uint16_t)((2u * num + span) / (2u * span));
    }
    return hq_lut_equalize_entry(c, c0, span, bins);
}

/* hq_lut_stretch_entry likewise: (v - lo)(bins - 1) < 2^32, hi - lo < 2^16. */
__device__ __forceinline__ uint16_t lut_stretch_entry(uint32_t v, uint32_t lo, uint32_t hi, uint32_t bins)
{
    if (v <= lo)
        return 0;
    if (v >= hi)
        return (uint16_t)(bins - 1u);
    const uint64_t num = (uint64_t)(v - lo) * (bins - 1u), den = hi - lo;
    return (uint16_t)((2u * num + den) / (2u * den));
}

/* Equalize LUT entries [c0, c0 + cn) of one histogram h[0..bins), by the whole block, into out
 * (shared or global memory, indexed from c0). The same rule as core/lut.c: identity for an
 * empty or constant histogram, else hq_lut_equalize_entry above the first non-empty bin. */
__device__ inline void lut_equalize_chunk(const u64c *h, uint32_t bins, uint32_t c0, uint32_t cn, uint16_t *out,
                                          Scratch &sc)
{
    uint64_t tot = 0, pre = 0;
    uint32_t h0 = bins;
    for (uint32_t v = threadIdx.x; v < bins; v += blockDim.x) {
        const uint64_t x = h[v];
        tot += x;
        if (v < c0)
            pre += x;
        if (x && v < h0)
            h0 = v;
    }
    block_reduce3(tot, pre, h0, sc);
    if (h0 == bins || h[h0] == tot) {
        for (uint32_t i = threadIdx.x; i < cn; i += blockDim.x)
            out[i] = (uint16_t)(c0 + i);
        return;
    }
    const uint64_t cz = h[h0], span = tot - cz;
    const uint32_t per = (cn + blockDim.x - 1) / blockDim.x;
    const uint32_t lo = threadIdx.x * per < cn ? threadIdx.x * per : cn;
    const uint32_t hi = lo + per < cn ? lo + per : cn;
    uint64_t mine = 0;
    for (uint32_t i = lo; i < hi; i++)
        mine += h[c0 + i];
    uint64_t c = pre + block_excl_scan(mine, sc);
    for (uint32_t i = lo; i < hi; i++) {
        const uint32_t v = c0 + i;
        c += h[v];
        out[i] = v < h0 ? 0 : lut_eq_entry(c, cz, span, bins);
    }
}

/* Stretch LUT entries [c0, c0 + cn) of h[0..bins) (core/lut.c's rule: identity when no bin or
 * one bin is non-empty, else lo..hi spread over 0..bins-1). */
__device__ inline void lut_stretch_chunk(const u64c *h, uint32_t bins, uint32_t c0, uint32_t cn, uint16_t *out,
                                         Scratch &sc)
{
    uint32_t lo = bins, hi_rev = bins; /* first non-empty bin, and bins-1 - the last one */
    for (uint32_t v = threadIdx.x; v < bins; v += blockDim.x)
        if (h[v]) {
            lo = v < lo ? v : lo;
            hi_rev = bins - 1u - v < hi_rev ? bins - 1u - v : hi_rev;
        }
    uint64_t u0 = 0, u1 = 0;
    block_reduce3(u0, u1, lo, sc);
    block_reduce3(u0, u1, hi_rev, sc);
    const uint32_t hi = bins - 1u - hi_rev;
    const bool ident = lo == bins || hi == lo;
    for (uint32_t i = threadIdx.x; i < cn; i += blockDim.x)
        out[i] = ident ? (uint16_t)(c0 + i) : lut_stretch_entry(c0 + i, lo, hi, bins);
}

/* The whole LUT of one histogram of bins <= blockDim.x (and <= 1024) entries, by either method:
 * one bin per thread, a shuffle scan per warp, and the warps' totals, non-empty masks and first
 * non-empty counts exchanged once through shared memory (the block-wide reductions and scans of
 * the chunked builders cost ~2 us of barriers in the resident pipeline). Same rules: identity for
 * an empty histogram, or one whose first non-empty bin holds everything (equalize) or is the only
 * one (stretch). Ends with a barrier, so that sc can be reused at once. */
__device__ inline void lut_small(int method, const u64c *h, uint32_t bins, uint16_t *out, Scratch &sc)
{
    const uint32_t t = threadIdx.x, lane = lane_id(), w = t >> 5, nw = (bins + 31) >> 5;
    uint64_t inc = 0;
    if (w < nw) { /* whole warps: the shuffles see every lane */
        const uint64_t x = t < bins ? h[t] : 0;
        inc = x;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const uint64_t y = __shfl_up_sync(kFull, inc, o);
            if (lane >= (uint32_t)o)
                inc += y;
        }
        const uint32_t nz = __ballot_sync(kFull, x != 0);
        const uint64_t first = __shfl_sync(kFull, x, nz ? __ffs(nz) - 1 : 0);
        if (lane == 31) {
            sc.a[w] = inc;
            sc.b[w] = first;
            sc.m[w] = nz;
        }
    }
    __syncthreads();
    if (t < bins) {
        uint32_t w0 = nw, w1 = 0;
        uint64_t total = 0, pre = 0;
        for (uint32_t j = 0; j < nw; j++) {
            const uint64_t a = sc.a[j];
            total += a;
            pre += j < w ? a : 0;
            if (sc.m[j]) {
                w0 = w0 == nw ? j : w0;
                w1 = j;
            }
        }
        if (w0 == nw) {
            out[t] = (uint16_t)t;
        } else if (method == HQ_METHOD_STRETCH) {
            const uint32_t lo = 32 * w0 + __ffs(sc.m[w0]) - 1, hi = 32 * w1 + 31 - __clz(sc.m[w1]);
            out[t] = lo == hi ? (uint16_t)t : lut_stretch_entry(t, lo, hi, bins);
        } else {
            const uint32_t h0 = 32 * w0 + __ffs(sc.m[w0]) - 1;
            const uint64_t cz = sc.b[w0];
            out[t] = cz == total ? (uint16_t)t : t < h0 ? 0 : lut_eq_entry(pre + inc, cz, total - cz, bins);
        }
    }
    __syncthreads();
}

/* LUT entries [c0, c0 + cn) by method (hq_method). */
__device__ inline void lut_build_chunk(int method, const u64c *h, uint32_t bins, uint32_t c0, uint32_t cn,
                                       uint16_t *out, Scratch &sc)
{
    if (c0 == 0 && cn == bins && bins <= blockDim.x && bins <= 1024) {
        lut_small(method, h, bins, out, sc);
        return;
    }
    if (method == HQ_METHOD_STRETCH)
        lut_stretch_chunk(h, bins, c0, cn, out, sc);
    else
        lut_equalize_chunk(h, bins, c0, cn, out, sc);
}

} /* namespace hqg */

#endif
