/* clahe/hist_generic.cuh — tile histograms by work items (Item, make_items): the reflected entries
 * (padding, only at the image's bottom and right) of gray images, and every entry of the other
 * modes. One CUDA block per work item (rows of one tile by a run of its columns), u32 counters in
 * shared memory, whole (k_clahe_hist, up to kSharedCounters) or by windows of kWindow counters
 * (k_clahe_hist_win, grid y = window), a warp of one value adding once; each block folds into the
 * tile's u64 counters with device atomics. Keys are core/clahe.h's hq_clahe_key. */
#ifndef HQ_GPU_CLAHE_HIST_GENERIC_CUH
#define HQ_GPU_CLAHE_HIST_GENERIC_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "common.cuh"

namespace {

/* f(c) for each entry of item it this thread takes, c its samples (load_px). An item holds at most
 * max(kItemPixelsWin, one row of its tile) pixels: 32-bit indexes (64-bit division is slow on the
 * device). */
template <typename T, typename F>
__device__ __forceinline__ void item_each(const T *d, uint64_t cols, uint32_t ch, const uint64_t *rsrc,
                                          const uint64_t *csrc, const Item &it, uint64_t r0, uint64_t c0, F f)
{
    const uint64_t cb = it.j_lo;
    const uint32_t nc = (uint32_t)(it.j_hi - cb), n = (uint32_t)(it.i_hi - it.i_lo) * nc;
    for (uint32_t k = threadIdx.x; k < n; k += blockDim.x) {
        const uint64_t i = it.i_lo + k / nc, j = cb + k % nc;
        uint32_t c[3];
        load_px(d + ((rsrc[i] - r0) * cols + (csrc[j] - c0)) * ch, ch, c);
        f(c);
    }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    k_clahe_hist(const T *__restrict__ d, uint64_t cols, uint32_t ch, const uint64_t *__restrict__ rsrc,
                 const uint64_t *__restrict__ csrc, const Item *__restrict__ items, uint64_t r0, uint64_t c0, uint32_t bins, uint32_t nh, int color, uint32_t maxv,
                 unsigned long long *hist)
{
    extern __shared__ uint32_t sh[];
    const Item it = items[blockIdx.x];
    const uint32_t hl = nh * bins;
    unsigned long long *dst = hist + it.tile * hl;
    for (uint32_t v = threadIdx.x; v < hl; v += blockDim.x)
        sh[v] = 0;
    __syncthreads();
    item_each(d, cols, ch, rsrc, csrc, it, r0, c0, [&](const uint32_t *c) {
        for (uint32_t h = 0; h < nh; h++)
            atomicAdd(&sh[h * bins + hq_clahe_key(c, ch, (hq_color)color, h, maxv)], 1u);
    });
    __syncthreads();
    for (uint32_t v = threadIdx.x; v < hl; v += blockDim.x)
        if (sh[v])
            atomicAdd(&dst[v], (unsigned long long)sh[v]);
}

/* Counts value v (relative to the window: counted when v < wn); a warp whose active lanes all hold
 * the same v adds once. */
__device__ __forceinline__ void win_add(uint32_t *sh, uint32_t v, uint32_t wn)
{
    const unsigned mask = __activemask();
    const int first = __ffs(mask) - 1;
    const uint32_t v0 = __shfl_sync(mask, v, first);
    if (__all_sync(mask, v == v0)) {
        if ((int)(threadIdx.x & 31) == first && v < wn)
            atomicAdd(&sh[v], (uint32_t)__popc(mask));
    } else if (v < wn) {
        atomicAdd(&sh[v], 1u);
    }
}

/* k_clahe_hist for histograms larger than kSharedCounters: window blockIdx.y of kWindow counters. */
template <typename T>
__global__ void __launch_bounds__(kWinThreads)
    k_clahe_hist_win(const T *__restrict__ d, uint64_t cols, uint32_t ch, const uint64_t *__restrict__ rsrc,
                     const uint64_t *__restrict__ csrc, const Item *__restrict__ items, uint64_t r0, uint64_t c0, uint32_t bins, uint32_t nh, int color,
                     uint32_t maxv, unsigned long long *hist)
{
    extern __shared__ uint32_t sh[];
    const Item it = items[blockIdx.x];
    const uint32_t hl = nh * bins, wlo = blockIdx.y * kWindow, wn = hl - wlo < kWindow ? hl - wlo : kWindow;
    unsigned long long *dst = hist + it.tile * hl + wlo;
    for (uint32_t v = threadIdx.x; v < wn; v += blockDim.x)
        sh[v] = 0;
    __syncthreads();
    item_each(d, cols, ch, rsrc, csrc, it, r0, c0, [&](const uint32_t *c) {
        for (uint32_t h = 0; h < nh; h++)
            win_add(sh, h * bins + hq_clahe_key(c, ch, (hq_color)color, h, maxv) - wlo, wn);
    });
    __syncthreads();
    for (uint32_t v = threadIdx.x; v < wn; v += blockDim.x)
        if (sh[v])
            atomicAdd(&dst[v], (unsigned long long)sh[v]);
}

} /* namespace */

#endif
