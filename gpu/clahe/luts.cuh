/* clahe/luts.cuh — tile LUTs on the device: k_clahe_luts (k_clahe_luts_warp up to 256 bins;
 * launch_luts picks) builds every tile's LUT from its u64 histogram with core/clahe.h's pieces of
 * hq_clahe_tile_lut, so the result is the host's bit for bit. The engine builds a whole image's LUTs
 * here (gpu_clahe.cu, hq_gpu_clahe_luts), a piece's on the host from the summed counts (core/clahe.c);
 * bench/clahe_gpu_bench.cu times this path and checks it against hq_clahe_tile_lut. */
#ifndef HQ_GPU_CLAHE_LUTS_CUH
#define HQ_GPU_CLAHE_LUTS_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "common.cuh"

namespace {

/* Inclusive prefix of x over the warp (every lane takes part). */
__device__ __forceinline__ unsigned long long warp_scan(unsigned long long x)
{
    const uint32_t lane = threadIdx.x & 31;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const unsigned long long y = __shfl_up_sync(0xffffffffu, x, o);
        if ((int)lane >= o)
            x += y;
    }
    return x;
}

/* Exclusive prefix of x over the block (blockDim.x threads, a multiple of 32); *total: the sum. */
__device__ __forceinline__ unsigned long long block_scan(unsigned long long x, unsigned long long *total)
{
    __shared__ unsigned long long ws[32];
    const uint32_t lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    const unsigned long long inc = warp_scan(x);
    if (lane == 31)
        ws[warp] = inc;
    __syncthreads();
    if (warp == 0)
        ws[lane] = warp_scan(lane < nw ? ws[lane] : 0);
    __syncthreads();
    const unsigned long long before = warp ? ws[warp - 1] : 0;
    *total = ws[nw - 1];
    __syncthreads();
    return before + inc - x;
}

/* One LUT a block: hist + blockIdx.x * bins (u64 counters summing to area) -> lut + blockIdx.x *
 * bins. The clip's excess summed, then rounds of kLutThreads * kLutPer bins: each thread kLutPer
 * consecutive bins (staged through shared memory so the loads coalesce), a block-wide prefix. */
__global__ void __launch_bounds__(kLutThreads)
    k_clahe_luts(const unsigned long long *__restrict__ hist, uint32_t bins, uint64_t area, int64_t limit,
                 uint16_t *__restrict__ lut)
{
    __shared__ unsigned long long st[kLutThreads * kLutPer];
    const unsigned long long *h = hist + (uint64_t)blockIdx.x * bins;
    uint16_t *o = lut + (uint64_t)blockIdx.x * bins;
    unsigned long long clipped = 0, total;
    if (limit > 0)
        for (uint32_t v = threadIdx.x; v < bins; v += blockDim.x)
            clipped += h[v] > (uint64_t)limit ? h[v] - (uint64_t)limit : 0;
    block_scan(clipped, &total);
    const hq_clahe_spread sp = hq_clahe_spread_of(total, bins);
    const float scale = hq_clahe_lut_scale(bins, area);
    const uint32_t round = blockDim.x * kLutPer;
    unsigned long long carry = 0;
    for (uint32_t base = 0; base < bins; base += round) {
        for (uint32_t k = threadIdx.x; k < round && base + k < bins; k += blockDim.x)
            st[k] = h[base + k];
        __syncthreads();
        const uint32_t v0 = base + threadIdx.x * kLutPer;
        uint64_t c[kLutPer], mine = 0, next = hq_clahe_spread_from(sp, v0);
#pragma unroll
        for (uint32_t e = 0; e < kLutPer; e++) {
            c[e] = v0 + e < bins ? hq_clahe_bin_count(st[threadIdx.x * kLutPer + e], limit, sp, v0 + e, &next) : 0;
            mine += c[e];
        }
        unsigned long long sum = carry + block_scan(mine, &total);
#pragma unroll
        for (uint32_t e = 0; e < kLutPer; e++)
            if (v0 + e < bins) {
                sum += c[e];
                o[v0 + e] = hq_clahe_lut_entry(sum, scale, bins - 1);
            }
        carry += total;
    }
}

/* k_clahe_luts for bins <= 32 * kLutWarpPer (8-bit): one warp a LUT (kLutWarps a block), kLutWarpPer
 * consecutive bins a lane, sums and prefixes by shuffles: no block-wide barrier, one round trip to
 * the histogram. */
__global__ void __launch_bounds__(kLutWarps * 32)
    k_clahe_luts_warp(const unsigned long long *__restrict__ hist, uint32_t bins, uint32_t ntiles, uint64_t area,
                      int64_t limit, uint16_t *__restrict__ lut)
{
    const uint32_t t = blockIdx.x * kLutWarps + threadIdx.x / 32, lane = threadIdx.x & 31, v0 = lane * kLutWarpPer;
    if (t >= ntiles)
        return;
    const unsigned long long *h = hist + (uint64_t)t * bins;
    uint64_t c[kLutWarpPer];
    unsigned long long clipped = 0;
#pragma unroll
    for (uint32_t e = 0; e < kLutWarpPer; e++) {
        c[e] = v0 + e < bins ? h[v0 + e] : 0;
        clipped += limit > 0 && c[e] > (uint64_t)limit ? c[e] - (uint64_t)limit : 0;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        clipped += __shfl_xor_sync(0xffffffffu, clipped, o);
    const hq_clahe_spread sp = hq_clahe_spread_of(clipped, bins);
    const float scale = hq_clahe_lut_scale(bins, area);
    uint64_t next = hq_clahe_spread_from(sp, v0);
    unsigned long long mine = 0;
#pragma unroll
    for (uint32_t e = 0; e < kLutWarpPer; e++) {
        c[e] = v0 + e < bins ? hq_clahe_bin_count(c[e], limit, sp, v0 + e, &next) : 0;
        mine += c[e];
    }
    unsigned long long sum = warp_scan(mine) - mine;
    uint16_t *out = lut + (uint64_t)t * bins;
#pragma unroll
    for (uint32_t e = 0; e < kLutWarpPer; e++)
        if (v0 + e < bins) {
            sum += c[e];
            out[v0 + e] = hq_clahe_lut_entry(sum, scale, bins - 1);
        }
}

/* The LUTs of ntiles histograms (hist: bins u64 counters each, each summing to area). */
inline void launch_luts(const unsigned long long *hist, uint32_t bins, uint32_t ntiles, uint64_t area, int64_t limit,
                        uint16_t *lut, cudaStream_t st = 0)
{
    if (bins <= 32 * kLutWarpPer)
        k_clahe_luts_warp<<<(ntiles + kLutWarps - 1) / kLutWarps, kLutWarps * 32, 0, st>>>(hist, bins, ntiles, area,
                                                                                           limit, lut);
    else
        k_clahe_luts<<<ntiles, kLutThreads, 0, st>>>(hist, bins, area, limit, lut);
}

} /* namespace */

#endif
