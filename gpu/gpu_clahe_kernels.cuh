/* gpu_clahe_kernels.cuh — CLAHE's device code and the host-side work lists that drive it, shared by
 * gpu/gpu_clahe.cu (the engine) and bench/clahe_gpu_bench.cu (device-resident timing). Internal
 * linkage: each includer gets its own copy.
 *
 * Histograms: one CUDA block per work item (rows of one tile), u32 counters in shared memory,
 * folded into the tile's u64 histogram once per item. A tile's histograms that fit kSharedCounters
 * counters are held whole; larger ones (16-bit: 65,536 bins a histogram) are split into windows of
 * kWindow counters (128 KiB), grid y = window: every block of an item reads the item's pixels (the
 * second read hits L2) and counts those in its window, so no pixel costs a device-wide atomic. A
 * warp whose active lanes all hold one value (flat backgrounds) adds once.
 * Remap, gray: one CUDA block per group of rows that blend the same two tile rows; pixels travel as
 * 16-byte vectors with scalar heads and tails per row; 8-bit holds the LUTs of its two tile rows
 * (the four LUTs of every pixel among them) in shared memory as bytes. Other modes: one pixel a
 * thread through the read-only cache. Every per-pixel result is core/clahe.h's. */
#ifndef HQ_GPU_CLAHE_KERNELS_CUH
#define HQ_GPU_CLAHE_KERNELS_CUH

#include <cuda_runtime.h>
#include <stdint.h>
#include <vector>

extern "C" {
#include "../core/clahe.h"
#include "../engine/engine.h"
}

namespace {

/* Pixels per histogram work item: enough to amortize a shared-memory histogram's fold. */
constexpr uint64_t kItemPixels = (uint64_t)1 << 16;
/* Windowed items hold more: each block zeroes and folds a whole window. */
constexpr uint64_t kItemPixelsWin = (uint64_t)1 << 18;
/* Tiles whose histograms fit this many u32 counters (48 KiB) count in shared memory. */
constexpr uint32_t kSharedCounters = 12288;
/* Larger ones: windows of this many counters (128 KiB of shared memory a block). */
constexpr uint32_t kWindow = 32768;
constexpr int kThreads = 256;
/* Windowed histograms: one block a multiprocessor (128 KiB each), so a wide one. */
constexpr int kWinThreads = 1024;
/* Gray remap: pixels per group of rows (one CUDA block). */
constexpr uint64_t kGroupPixels = (uint64_t)1 << 16;
/* 8-bit gray remap stages two tile rows of LUTs as bytes when they fit this many. */
constexpr uint32_t kLut8Bytes = 48 * 1024;

struct Item {
    uint64_t tile;        /* local tile index among the tiles the piece touches */
    uint64_t tx;          /* tile column, into cat */
    uint64_t i_lo, i_hi;  /* entries [i_lo, i_hi) of rsrc */
};

/* Piece rows [lo, hi), all blending the same two tile rows. */
struct RowGroup {
    uint64_t lo, hi;
};

template <typename T>
__device__ __forceinline__ void load_px(const T *px, uint32_t ch, uint32_t *c)
{
    c[0] = px[0];
    c[1] = ch >= 3 ? px[1] : 0;
    c[2] = ch >= 3 ? px[2] : 0;
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    k_clahe_hist(const T *__restrict__ d, uint64_t cols, uint32_t ch, const uint64_t *__restrict__ rsrc,
                 const uint64_t *__restrict__ csrc, const uint64_t *__restrict__ cat, const Item *__restrict__ items,
                 uint64_t r0, uint64_t c0, uint32_t bins, uint32_t nh, int color, uint32_t maxv,
                 unsigned long long *hist)
{
    extern __shared__ uint32_t sh[];
    const Item it = items[blockIdx.x];
    const uint32_t hl = nh * bins;
    unsigned long long *dst = hist + it.tile * hl;
    for (uint32_t v = threadIdx.x; v < hl; v += blockDim.x)
        sh[v] = 0;
    __syncthreads();
    /* An item holds at most max(kItemPixels, one row of its tile) pixels: 32-bit indexes (64-bit
     * division is slow on the device). */
    const uint64_t cb = cat[it.tx];
    const uint32_t nc = (uint32_t)(cat[it.tx + 1] - cb), n = (uint32_t)(it.i_hi - it.i_lo) * nc;
    for (uint32_t k = threadIdx.x; k < n; k += blockDim.x) {
        const uint64_t i = it.i_lo + k / nc, j = cb + k % nc;
        uint32_t c[3];
        load_px(d + ((rsrc[i] - r0) * cols + (csrc[j] - c0)) * ch, ch, c);
        for (uint32_t h = 0; h < nh; h++) {
            const uint32_t v = h * bins + hq_clahe_key(c, ch, (hq_color)color, h, maxv);
            atomicAdd(&sh[v], 1u);
        }
    }
    __syncthreads();
    for (uint32_t v = threadIdx.x; v < hl; v += blockDim.x)
        if (sh[v])
            atomicAdd(&dst[v], (unsigned long long)sh[v]);
}

/* lut: the LUTs of tile rows [ty0, ..) x tile columns [tx0, tx0 + ntx), nh * bins entries each. */
template <typename T>
__global__ void __launch_bounds__(kThreads)
    k_clahe_remap(T *d, uint64_t rows, uint64_t cols, uint32_t ch, uint64_t r0, uint64_t c0, float inv_h, float inv_w,
                  uint64_t tiles_y, uint64_t tiles_x, const uint16_t *__restrict__ lut, uint32_t ty0, uint32_t tx0,
                  uint32_t ntx, uint32_t bins, uint32_t nh, int color, uint32_t maxv)
{
    /* Rows over grid y, columns over grid x and the threads: no division per pixel. */
    const uint64_t hl = (uint64_t)nh * bins;
    for (uint64_t i = blockIdx.y; i < rows; i += gridDim.y) {
        const hq_clahe_w wy = hq_clahe_weight(r0 + i, inv_h, tiles_y);
        const uint16_t *l1 = lut + (uint64_t)(wy.t1 - ty0) * ntx * hl, *l2 = lut + (uint64_t)(wy.t2 - ty0) * ntx * hl;
        const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
        for (uint64_t j = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; j < cols; j += stride) {
            const hq_clahe_w wx = hq_clahe_weight(c0 + j, inv_w, tiles_x);
            const uint64_t x1 = (uint64_t)(wx.t1 - tx0) * hl, x2 = (uint64_t)(wx.t2 - tx0) * hl;
            T *px = d + (i * cols + j) * ch;
            uint32_t c[3], k2[3] = {0, 0, 0};
            load_px(px, ch, c);
            for (uint32_t h = 0; h < nh; h++) {
                const uint64_t v = (uint64_t)h * bins + hq_clahe_key(c, ch, (hq_color)color, h, maxv);
                k2[h] = hq_clahe_blend(l1[x1 + v], l1[x2 + v], l2[x1 + v], l2[x2 + v], wx, wy, maxv);
            }
            hq_clahe_apply(c, ch, (hq_color)color, k2, maxv);
            px[0] = (T)c[0];
            if (ch >= 3) {
                px[1] = (T)c[1];
                px[2] = (T)c[2];
            }
        }
    }
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
                     const uint64_t *__restrict__ csrc, const uint64_t *__restrict__ cat,
                     const Item *__restrict__ items, uint64_t r0, uint64_t c0, uint32_t bins, uint32_t nh, int color,
                     uint32_t maxv, unsigned long long *hist)
{
    extern __shared__ uint32_t sh[];
    const Item it = items[blockIdx.x];
    const uint32_t hl = nh * bins, wlo = blockIdx.y * kWindow, wn = hl - wlo < kWindow ? hl - wlo : kWindow;
    unsigned long long *dst = hist + it.tile * hl + wlo;
    for (uint32_t v = threadIdx.x; v < wn; v += blockDim.x)
        sh[v] = 0;
    __syncthreads();
    /* An item holds at most max(kItemPixelsWin, one row of its tile) pixels: 32-bit indexes. */
    const uint64_t cb = cat[it.tx];
    const uint32_t nc = (uint32_t)(cat[it.tx + 1] - cb), n = (uint32_t)(it.i_hi - it.i_lo) * nc;
    for (uint32_t k = threadIdx.x; k < n; k += blockDim.x) {
        const uint64_t i = it.i_lo + k / nc, j = cb + k % nc;
        uint32_t c[3];
        load_px(d + ((rsrc[i] - r0) * cols + (csrc[j] - c0)) * ch, ch, c);
        for (uint32_t h = 0; h < nh; h++) {
            const uint32_t v = h * bins + hq_clahe_key(c, ch, (hq_color)color, h, maxv) - wlo;
            win_add(sh, v, wn);
        }
    }
    __syncthreads();
    for (uint32_t v = threadIdx.x; v < wn; v += blockDim.x)
        if (sh[v])
            atomicAdd(&dst[v], (unsigned long long)sh[v]);
}

/* One gray pixel at piece column j: the blend of its four tile LUTs. SH: l1, l2 are the two tile
 * rows' LUTs as bytes in shared memory (256 a tile), else u16 in global memory (bins a tile). */
template <typename T, bool SH>
__device__ __forceinline__ T gray_px(uint32_t s, uint64_t j, uint64_t c0, float inv_w, uint64_t tiles_x, uint32_t tx0,
                                     const uint8_t *s1, const uint8_t *s2, const uint16_t *l1, const uint16_t *l2,
                                     uint32_t bins, hq_clahe_w wy, uint32_t maxv)
{
    const hq_clahe_w wx = hq_clahe_weight(c0 + j, inv_w, tiles_x);
    const uint32_t v = hq_bin(s, maxv);
    if (SH) {
        const uint32_t x1 = (wx.t1 - tx0) * 256u + v, x2 = (wx.t2 - tx0) * 256u + v;
        return (T)hq_clahe_blend(s1[x1], s1[x2], s2[x1], s2[x2], wx, wy, maxv);
    }
    const uint64_t x1 = (uint64_t)(wx.t1 - tx0) * bins + v, x2 = (uint64_t)(wx.t2 - tx0) * bins + v;
    return (T)hq_clahe_blend(__ldg(l1 + x1), __ldg(l1 + x2), __ldg(l2 + x1), __ldg(l2 + x2), wx, wy, maxv);
}

/* Gray remap of the row groups groups[blockIdx.x] (lut: tile rows [ty0, ..) x ntx tile columns). SH
 * (8-bit, 256 bins): both tile rows' LUTs staged as bytes, 2 * ntx * 256 bytes of shared memory. */
template <typename T, bool SH>
__global__ void __launch_bounds__(kThreads)
    k_clahe_remap_gray(T *d, uint64_t cols, uint64_t r0, uint64_t c0, float inv_h, float inv_w, uint64_t tiles_y,
                       uint64_t tiles_x, const uint16_t *__restrict__ lut, uint32_t ty0, uint32_t tx0, uint32_t ntx,
                       uint32_t bins, uint32_t maxv, const RowGroup *__restrict__ groups)
{
    extern __shared__ uint8_t shl[];
    constexpr uint32_t V = 16 / sizeof(T);
    const RowGroup gr = groups[blockIdx.x];
    const hq_clahe_w wg = hq_clahe_weight(r0 + gr.lo, inv_h, tiles_y);
    const uint16_t *l1 = lut + (uint64_t)(wg.t1 - ty0) * ntx * bins, *l2 = lut + (uint64_t)(wg.t2 - ty0) * ntx * bins;
    const uint8_t *s1 = shl, *s2 = shl + ntx * 256u;
    if (SH) {
        for (uint32_t k = threadIdx.x; k < ntx * 256u; k += blockDim.x) {
            shl[k] = (uint8_t)l1[k];
            shl[ntx * 256u + k] = (uint8_t)l2[k];
        }
        __syncthreads();
    }
    for (uint64_t i = gr.lo; i < gr.hi; i++) {
        const hq_clahe_w wy = hq_clahe_weight(r0 + i, inv_h, tiles_y);
        T *row = d + i * cols;
        /* Scalar up to the first 16-byte boundary and after the last; vectors between. */
        const uint64_t mis = ((uintptr_t)row / sizeof(T)) % V;
        const uint64_t head = mis ? (V - mis < cols ? V - mis : cols) : 0;
        const uint64_t nvec = (cols - head) / V, tail = head + nvec * V;
        for (uint64_t j = threadIdx.x; j < head + (cols - tail); j += blockDim.x) {
            const uint64_t x = j < head ? j : tail + (j - head);
            row[x] = gray_px<T, SH>(row[x], x, c0, inv_w, tiles_x, tx0, s1, s2, l1, l2, bins, wy, maxv);
        }
        uint4 *vrow = reinterpret_cast<uint4 *>(row + head);
        for (uint64_t k = threadIdx.x; k < nvec; k += blockDim.x) {
            union {
                uint4 u;
                T t[V];
            } p;
            p.u = vrow[k];
            const uint64_t j = head + k * V;
#pragma unroll
            for (uint32_t e = 0; e < V; e++)
                p.t[e] = gray_px<T, SH>(p.t[e], j + e, c0, inv_w, tiles_x, tx0, s1, s2, l1, l2, bins, wy, maxv);
            vrow[k] = p.u;
        }
    }
}

/* The side's entries tile by tile (own samples, then reflections): src[at[t] .. at[t + 1]). */
inline void flatten(const hq_clahe_side *s, std::vector<uint64_t> &src, std::vector<uint64_t> &at)
{
    at.assign(s->tiles + 1, 0);
    for (uint64_t t = 0; t < s->tiles; t++) {
        at[t] = src.size();
        for (uint64_t q = s->own_lo[t]; q < s->own_hi[t]; q++)
            src.push_back(q);
        for (uint64_t e = s->ext_at[t]; e < s->ext_at[t + 1]; e++)
            src.push_back(s->ext[e]);
    }
    at[s->tiles] = src.size();
}

/* First and last tile with entries; false when none. */
inline bool touched(const std::vector<uint64_t> &at, uint64_t *lo, uint64_t *hi)
{
    const uint64_t n = at.size() - 1;
    uint64_t a = 0, b = n;
    while (a < n && at[a + 1] == at[a])
        a++;
    while (b > a && at[b] == at[b - 1])
        b--;
    if (a >= b)
        return false;
    *lo = a;
    *hi = b - 1;
    return true;
}

/* Grid x covers a row's columns (capped), grid y the rows (capped at CUDA's 65535); both stride. */
inline dim3 grid_for(uint64_t rows, uint64_t cols)
{
    const uint64_t bx = (cols + kThreads - 1) / kThreads;
    return dim3((unsigned)(bx < 1024 ? bx : 1024), (unsigned)(rows < 65535 ? rows : 65535), 1);
}

/* Work items of tiles [ty0, ty1] x [tx0, tx1], item_px pixels each at most (one row at least). */
inline void make_items(const std::vector<uint64_t> &rat, const std::vector<uint64_t> &cat, uint64_t ty0, uint64_t ty1,
                       uint64_t tx0, uint64_t tx1, uint64_t item_px, std::vector<Item> &items)
{
    const uint64_t ntx = tx1 - tx0 + 1;
    for (uint64_t ty = ty0; ty <= ty1; ty++)
        for (uint64_t tx = tx0; tx <= tx1; tx++) {
            const uint64_t nc = cat[tx + 1] - cat[tx];
            if (!nc)
                continue;
            const uint64_t step = item_px / nc ? item_px / nc : 1;
            for (uint64_t i = rat[ty]; i < rat[ty + 1]; i += step)
                items.push_back({(ty - ty0) * ntx + (tx - tx0), tx, i, i + step < rat[ty + 1] ? i + step : rat[ty + 1]});
        }
}

/* Row groups of rows piece rows: at most kGroupPixels pixels (one row at least), one tile-row pair. */
inline void make_groups(uint64_t r0, uint64_t rows, uint64_t cols, float inv_h, uint64_t tiles_y,
                        std::vector<RowGroup> &groups)
{
    const uint64_t per = kGroupPixels / cols ? kGroupPixels / cols : 1;
    uint32_t t1 = UINT32_MAX, t2 = UINT32_MAX;
    for (uint64_t i = 0; i < rows; i++) {
        const hq_clahe_w w = hq_clahe_weight(r0 + i, inv_h, tiles_y);
        if (w.t1 != t1 || w.t2 != t2 || groups.back().hi - groups.back().lo == per) {
            groups.push_back({i, i + 1});
            t1 = w.t1;
            t2 = w.t2;
        } else {
            groups.back().hi = i + 1;
        }
    }
}

} /* namespace */

#endif
