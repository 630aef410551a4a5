/* gpu_clahe_kernels.cuh — CLAHE's device code and the host-side work lists that drive it, shared by
 * gpu/gpu_clahe.cu (the engine) and bench/clahe_gpu_bench.cu (device-resident timing). Internal
 * linkage: each includer gets its own copy.
 *
 * Histograms of gray images: each tile's own rectangle (the piece's samples of the tile, rows and
 * columns contiguous) in units of at most kUnitPixels, a persistent grid whose blocks each take a
 * contiguous run of units; 16-byte row loads, several rows in flight, no division or table lookup
 * a pixel. Up to 256 bins every lane counts in its own u16 halves (no bank or counter shared, so
 * shared-memory atomics never collide); more bins (16-bit) count in one packed u16-pair histogram
 * a block (128 KiB for 65,536 bins). Both fold into the tile's u64 counters when the tile changes
 * or a half could overflow. The reflected entries (padding, only at the image's bottom and right)
 * and the other modes go through the generic kernels: one CUDA block per work item (rows of one
 * tile by a run of its columns), u32 counters in shared memory, whole or by windows of kWindow
 * counters (grid y = window), a warp of one value adding once.
 * LUTs: k_clahe_luts builds every tile's LUT from its histogram on the device with core/clahe.h's
 * pieces of hq_clahe_tile_lut (bit for bit).
 * Remap, gray, rows on 16-byte boundaries: a thread keeps its columns' weights over its rows; 8-bit
 * reads a pixel's four LUT entries as one word of cells staged in shared memory, 16-bit as one
 * 8-byte gather from cells built on the device ({l11, l12, l21, l22} per level and pair of tile
 * pairs). Other gray pieces: one CUDA block per group of rows blending the same two tile rows,
 * 16-byte vectors with scalar heads and tails (8-bit LUTs as bytes in shared memory). Other modes:
 * one pixel a thread through the read-only cache. Every per-pixel result is core/clahe.h's. */
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
/* Gray histograms of the own rectangles: per-lane counters up to this many bins (k_clahe_hist_lane,
 * 4 warps a block), one packed histogram a block above (k_clahe_hist_packed). */
constexpr uint32_t kLaneBins = 256;
constexpr int kLaneThreads = 128;
constexpr int kPackedThreads = 1024;
/* Pixels a unit: the packed histogram's u16 halves hold any unit (< 65,536) whole. */
constexpr uint64_t kUnitPixels = 16384;
/* Device LUT build: threads a histogram, bins a thread per round. */
constexpr int kLutThreads = 1024;
constexpr uint32_t kLutPer = 4;
/* Gray remap of aligned rows (k_clahe_remap8 / k_clahe_remap16): a block is kRemapBX vectors of a
 * row by kRemapBY rows, over at most kRemapRows rows of one tile-row pair. */
constexpr int kRemapBX = 32, kRemapBY = 8;
constexpr uint64_t kRemapRows = 64;
/* 8-bit: the cells of a strip's column pairs (1 KiB each) in shared memory up to this many pairs. */
constexpr uint32_t kCellPairs8 = 40;
/* 16-bit: device cells ({l11, l12, l21, l22}, 8 bytes a level and pair of pairs) up to this size. */
constexpr uint64_t kCellBytes = (uint64_t)256 << 20;

struct Item {
    uint64_t tile;        /* local tile index among the tiles the piece touches */
    uint64_t i_lo, i_hi;  /* entries [i_lo, i_hi) of rsrc */
    uint64_t j_lo, j_hi;  /* by entries [j_lo, j_hi) of csrc */
};

/* Gray histograms: piece rows [r_lo, r_hi) x columns [c_lo, c_hi), inside one tile's own rectangle. */
struct Unit {
    uint64_t tile; /* local tile index, as Item's */
    uint64_t r_lo, r_hi, c_lo, c_hi;
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
    /* An item holds at most max(kItemPixels, one row of its tile) pixels: 32-bit indexes (64-bit
     * division is slow on the device). */
    const uint64_t cb = it.j_lo;
    const uint32_t nc = (uint32_t)(it.j_hi - cb), n = (uint32_t)(it.i_hi - it.i_lo) * nc;
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
    /* An item holds at most max(kItemPixelsWin, one row of its tile) pixels: 32-bit indexes. */
    const uint64_t cb = it.j_lo;
    const uint32_t nc = (uint32_t)(it.j_hi - cb), n = (uint32_t)(it.i_hi - it.i_lo) * nc;
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

/* ---- Gray histograms of each tile's own rectangle (no division, no lookup per pixel). ---- */

/* f(sample) for every sample of unit un that thread (tx, ty) of an L x BY block takes: rows ty, ty +
 * BY, ... and in each the 16-byte vectors tx, tx + L, ... between scalar heads and tails (rows
 * need not start on a boundary). U rows at a time, their vectors loaded before any is counted, so
 * that each thread keeps several loads in flight. */
template <uint32_t U, typename T, typename F>
__device__ __forceinline__ void unit_each(const T *d, uint64_t cols, const Unit &un, uint32_t tx, uint32_t L,
                                          uint32_t ty, uint32_t BY, F f)
{
    constexpr uint32_t V = 16 / sizeof(T);
    union Vec {
        uint4 u;
        T t[V];
    };
    const uint64_t n = un.c_hi - un.c_lo;
    for (uint64_t r = un.r_lo + ty; r < un.r_hi; r += U * BY) {
        const T *p[U];
        uint64_t head[U], nvec[U], most = 0;
#pragma unroll
        for (uint32_t u = 0; u < U; u++) {
            const uint64_t rr = r + u * BY;
            p[u] = d + (rr < un.r_hi ? rr : r) * cols + un.c_lo;
            const uint64_t mis = ((uintptr_t)p[u] / sizeof(T)) % V;
            head[u] = rr < un.r_hi ? (mis ? (V - mis < n ? V - mis : n) : 0) : 0;
            nvec[u] = rr < un.r_hi ? (n - head[u]) / V : 0;
            most = nvec[u] > most ? nvec[u] : most;
        }
        for (uint64_t k = tx; k < most; k += L) {
            Vec a[U];
#pragma unroll
            for (uint32_t u = 0; u < U; u++)
                if (k < nvec[u])
                    a[u].u = __ldg(reinterpret_cast<const uint4 *>(p[u] + head[u]) + k);
#pragma unroll
            for (uint32_t u = 0; u < U; u++)
                if (k < nvec[u]) {
#pragma unroll
                    for (uint32_t e = 0; e < V; e++)
                        f(a[u].t[e]);
                }
        }
#pragma unroll
        for (uint32_t u = 0; u < U; u++) {
            if (r + u * BY >= un.r_hi)
                break;
            const uint64_t tail = head[u] + nvec[u] * V;
            for (uint64_t q = tx; q < head[u] + (n - tail); q += L)
                f(p[u][q < head[u] ? q : tail + (q - head[u])]);
        }
    }
}

/* The units of block blockIdx.x: a contiguous run, so that its tiles change rarely. */
__device__ __forceinline__ void unit_run(uint32_t nunits, uint32_t *u0, uint32_t *u1)
{
    *u0 = (uint32_t)((uint64_t)blockIdx.x * nunits / gridDim.x);
    *u1 = (uint32_t)((uint64_t)(blockIdx.x + 1) * nunits / gridDim.x);
}

/* Gray histograms of bins <= kLaneBins: every lane its own counters, two u16 halves a word, word
 * (v / 2) * 32 + lane of its warp's bins * 16 words: lanes never share a bank nor a counter, so the
 * shared-memory atomics never conflict (smooth images put the lanes of a warp on few levels). A
 * half holds 65,535: the block folds into the tile's u64 counters before any lane could count more
 * (a bound from the unit's shape), and when the tile changes. RMW: plain increments instead of
 * the shared-memory atomics (a lane's counters are its own either way; the bench times both). */
template <typename T, bool RMW = false>
__global__ void __launch_bounds__(kLaneThreads)
    k_clahe_hist_lane(const T *__restrict__ d, uint64_t cols, const Unit *__restrict__ units, uint32_t nunits,
                      uint32_t bins, uint32_t maxv, unsigned long long *hist)
{
    extern __shared__ uint32_t sh[];
    constexpr uint32_t V = 16 / sizeof(T);
    const uint32_t L = blockDim.x, BY = blockDim.y, nt = L * BY, tid = threadIdx.y * L + threadIdx.x;
    const uint32_t words = (bins + 1) / 2, per_warp = words * 32, nwarps = nt / 32;
    uint32_t *mine = sh + (tid >> 5) * per_warp + (tid & 31);
    for (uint32_t k = tid; k < nwarps * per_warp; k += nt)
        sh[k] = 0;
    __syncthreads();
    uint32_t u0, u1;
    unit_run(nunits, &u0, &u1);
    uint32_t acc = 0; /* the most any one lane may have counted since the last fold */
    for (uint32_t u = u0; u < u1; u++) {
        const Unit un = units[u];
        /* Units hold < 2^16 pixels: 32-bit arithmetic (64-bit division is slow on the device). */
        const uint32_t n = (uint32_t)(un.c_hi - un.c_lo), rows_each = ((uint32_t)(un.r_hi - un.r_lo) + BY - 1) / BY;
        const uint32_t bound = rows_each * (((n / V + L - 1) / L) * V + (2 * V + L - 1) / L);
        unit_each<4>(d, cols, un, threadIdx.x, L, threadIdx.y, BY, [&](uint32_t x) {
            const uint32_t v = hq_clahe_key(&x, 1, HQ_COLOR_LUMA, 0, maxv);
            if (RMW)
                mine[(v >> 1) * 32] += 1u << ((v & 1) * 16);
            else
                atomicAdd(mine + (v >> 1) * 32, 1u << ((v & 1) * 16));
        });
        acc += bound;
        /* Fold at the run's end, at a change of tile, or before the next unit could overflow. */
        bool fold = u + 1 == u1 || units[u + 1].tile != un.tile;
        if (!fold) {
            const Unit nx = units[u + 1];
            const uint32_t nn = (uint32_t)(nx.c_hi - nx.c_lo), nre = ((uint32_t)(nx.r_hi - nx.r_lo) + BY - 1) / BY;
            fold = acc + nre * (((nn / V + L - 1) / L) * V + (2 * V + L - 1) / L) > 65535;
        }
        if (!fold)
            continue;
        __syncthreads();
        unsigned long long *dst = hist + un.tile * bins;
        for (uint32_t w = tid; w < words; w += nt) {
            uint32_t lo = 0, hi = 0;
            for (uint32_t q = 0; q < nwarps; q++)
                for (uint32_t l = 0; l < 32; l++) {
                    uint32_t *c = sh + q * per_warp + w * 32 + ((l + tid) & 31); /* rotated: no bank conflict */
                    const uint32_t x = *c;
                    *c = 0;
                    lo += x & 0xffff;
                    hi += x >> 16;
                }
            if (lo)
                atomicAdd(dst + 2 * w, (unsigned long long)lo);
            if (hi)
                atomicAdd(dst + 2 * w + 1, (unsigned long long)hi);
        }
        acc = 0;
        __syncthreads();
    }
}

/* Gray histograms of more bins (16-bit: 65,536): one histogram a block, two u16 halves a word (128
 * KiB for 65,536 bins, where u32 counters would not fit). A unit holds fewer than 65,536 pixels;
 * before one could overflow a half, the block reads the largest count among the levels it has met
 * (their range) and folds into the tile's u64 counters only when that count plus the next unit
 * could reach 65,536, or at a change of tile. A warp whose active lanes all hold one level (flat
 * backgrounds) adds once. */
template <typename T>
__global__ void __launch_bounds__(kPackedThreads)
    k_clahe_hist_packed(const T *__restrict__ d, uint64_t cols, const Unit *__restrict__ units, uint32_t nunits,
                        uint32_t bins, uint32_t maxv, unsigned long long *hist)
{
    extern __shared__ uint32_t sh[];
    __shared__ uint32_t s_lo, s_hi, s_max;
    const uint32_t L = blockDim.x, BY = blockDim.y, nt = L * BY, tid = threadIdx.y * L + threadIdx.x;
    const uint32_t words = (bins + 1) / 2;
    for (uint32_t k = tid; k < words; k += nt)
        sh[k] = 0;
    if (tid == 0) {
        s_lo = UINT32_MAX;
        s_hi = 0;
        s_max = 0;
    }
    __syncthreads();
    uint32_t u0, u1;
    unit_run(nunits, &u0, &u1);
    uint32_t vlo = UINT32_MAX, vhi = 0; /* the levels this thread met since the last fold */
    uint32_t acc = 0;                   /* the most any counter may hold */
    for (uint32_t u = u0; u < u1; u++) {
        const Unit un = units[u];
        const uint64_t n = un.c_hi - un.c_lo;
        unit_each<2>(d, cols, un, threadIdx.x, L, threadIdx.y, BY, [&](uint32_t x) {
            const uint32_t v = hq_clahe_key(&x, 1, HQ_COLOR_LUMA, 0, maxv);
            vlo = v < vlo ? v : vlo;
            vhi = v > vhi ? v : vhi;
            const unsigned mask = __activemask();
            const int first = __ffs(mask) - 1;
            const uint32_t v0 = __shfl_sync(mask, v, first);
            if (__all_sync(mask, v == v0)) {
                if ((int)(threadIdx.x & 31) == first)
                    atomicAdd(&sh[v >> 1], (uint32_t)__popc(mask) << ((v & 1) * 16));
            } else {
                atomicAdd(&sh[v >> 1], 1u << ((v & 1) * 16));
            }
        });
        acc += (uint32_t)((un.r_hi - un.r_lo) * n);
        const bool last = u + 1 == u1 || units[u + 1].tile != un.tile;
        const uint32_t next = last ? 0 : (uint32_t)((units[u + 1].r_hi - units[u + 1].r_lo) *
                                                    (units[u + 1].c_hi - units[u + 1].c_lo));
        if (!last && acc + next <= 65535)
            continue;
        /* The range of levels met, then (unless folding anyway) the largest count in it. */
        __syncthreads();
        const uint32_t wlo = __reduce_min_sync(0xffffffffu, vlo), whi = __reduce_max_sync(0xffffffffu, vhi);
        if ((tid & 31) == 0 && wlo <= whi) {
            atomicMin(&s_lo, wlo);
            atomicMax(&s_hi, whi);
        }
        __syncthreads();
        const uint32_t lo = s_lo, hi = s_hi;
        if (!last) {
            uint32_t m = 0;
            for (uint32_t k = (lo >> 1) + tid; lo <= hi && k <= (hi >> 1); k += nt) {
                const uint32_t x = sh[k];
                m = max(m, max(x & 0xffff, x >> 16));
            }
            m = __reduce_max_sync(0xffffffffu, m);
            if ((tid & 31) == 0)
                atomicMax(&s_max, m);
            __syncthreads();
            acc = s_max;
            if (acc + next <= 65535)
                continue; /* vlo, vhi and s_lo, s_hi keep the range */
        }
        unsigned long long *dst = hist + un.tile * bins;
        for (uint32_t k = (lo >> 1) + tid; lo <= hi && k <= (hi >> 1); k += nt) {
            const uint32_t x = sh[k];
            if (!x)
                continue;
            sh[k] = 0;
            if (x & 0xffff)
                atomicAdd(dst + 2 * k, (unsigned long long)(x & 0xffff));
            if (x >> 16)
                atomicAdd(dst + 2 * k + 1, (unsigned long long)(x >> 16));
        }
        vlo = UINT32_MAX;
        vhi = 0;
        acc = 0;
        __syncthreads();
        if (tid == 0) {
            s_lo = UINT32_MAX;
            s_hi = 0;
            s_max = 0;
        }
        __syncthreads();
    }
}

/* ---- Tile LUTs on the device: core/clahe.h's pieces of hq_clahe_tile_lut, bit for bit. ---- */

/* Exclusive prefix of x over the block (blockDim.x threads, a multiple of 32); *total: the sum. */
__device__ __forceinline__ unsigned long long block_scan(unsigned long long x, unsigned long long *total)
{
    __shared__ unsigned long long ws[32];
    const uint32_t lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    unsigned long long inc = x;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const unsigned long long y = __shfl_up_sync(0xffffffffu, inc, o);
        if ((int)lane >= o)
            inc += y;
    }
    if (lane == 31)
        ws[warp] = inc;
    __syncthreads();
    if (warp == 0) {
        unsigned long long w = lane < nw ? ws[lane] : 0;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const unsigned long long y = __shfl_up_sync(0xffffffffu, w, o);
            if ((int)lane >= o)
                w += y;
        }
        ws[lane] = w;
    }
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

/* ---- Gray remap of rows that start on 16-byte boundaries: columns fixed a thread. ---- */

/* The pair of tiles a blend takes, as one index: pair p blends tiles (p ? p - 1 : 0, p < tiles ? p :
 * tiles - 1), so the pairs of a side are 0 .. tiles. */
__device__ __host__ __forceinline__ uint32_t pair_of(hq_clahe_w w, uint64_t tiles)
{
    return w.t1 == w.t2 ? (w.t1 == 0 ? 0u : (uint32_t)tiles) : w.t2;
}
__device__ __forceinline__ uint32_t pair_lo(uint32_t p)
{
    return p ? p - 1 : 0;
}
__device__ __forceinline__ uint32_t pair_hi(uint32_t p, uint64_t tiles)
{
    return p < tiles ? p : (uint32_t)tiles - 1;
}

/* The float of x < 2^23, exactly (float)x, without the conversion unit: 2^23 + x as bits, less 2^23.
 * w: x's bits already in the low bytes of 0x4B000000 (a byte_perm of the cell). */
__device__ __forceinline__ float small_f(uint32_t w)
{
    return __fsub_rn(__uint_as_float(w), 8388608.0f);
}

/* Rows a thread blends at a time in the aligned gray remaps: their loads go out together. */
constexpr uint32_t kRemapU = 4;

/* 8-bit gray (bins <= 256), rows 16-byte aligned. Block: kRemapBX vectors of 16 columns (a strip) by
 * kRemapBY rows, over row group groups[blockIdx.y] (one tile-row pair). The strip's cells, the four
 * LUT bytes of a level for one column pair {l11, l12, l21, l22} in a word, sit in shared memory
 * (pairs p0 .. of the strip, bins words each): one load a pixel. A thread's 16 columns keep their
 * weights (hq_clahe_weight, the same values the per-pixel form computes) over all its rows; the
 * blend is hq_clahe_blend_f on the entries' exact floats. */
__global__ void __launch_bounds__(kRemapBX *kRemapBY, 2)
    k_clahe_remap8(uint8_t *d, uint64_t cols, uint64_t r0, uint64_t c0, float inv_h, float inv_w, uint64_t tiles_y,
                   uint64_t tiles_x, const uint16_t *__restrict__ lut, uint32_t ty0, uint32_t tx0, uint32_t ntx,
                   uint32_t bins, const RowGroup *__restrict__ groups)
{
    extern __shared__ uint32_t cell[];
    const RowGroup gr = groups[blockIdx.y];
    const uint64_t x0 = (uint64_t)blockIdx.x * kRemapBX * 16, x1 = x0 + kRemapBX * 16 < cols ? x0 + kRemapBX * 16 : cols;
    const hq_clahe_w wg = hq_clahe_weight(r0 + gr.lo, inv_h, tiles_y);
    const uint32_t p0 = pair_of(hq_clahe_weight(c0 + x0, inv_w, tiles_x), tiles_x);
    const uint32_t p1 = pair_of(hq_clahe_weight(c0 + x1 - 1, inv_w, tiles_x), tiles_x);
    const uint16_t *l1 = lut + (uint64_t)(wg.t1 - ty0) * ntx * bins, *l2 = lut + (uint64_t)(wg.t2 - ty0) * ntx * bins;
    const uint32_t tid = threadIdx.y * kRemapBX + threadIdx.x;
    for (uint32_t k = tid; k < (p1 - p0 + 1) * bins; k += kRemapBX * kRemapBY) {
        const uint32_t p = p0 + k / bins, v = k % bins;
        const uint64_t a = (uint64_t)(pair_lo(p) - tx0) * bins + v, b = (uint64_t)(pair_hi(p, tiles_x) - tx0) * bins + v;
        cell[k] = (uint32_t)l1[a] | (uint32_t)l1[b] << 8 | (uint32_t)l2[a] << 16 | (uint32_t)l2[b] << 24;
    }
    __syncthreads();
    const uint64_t j = x0 + threadIdx.x * 16;
    if (j >= x1)
        return;
    float w1[16], w2[16];
    uint32_t off[16];
#pragma unroll
    for (uint32_t e = 0; e < 16; e++) {
        const hq_clahe_w wx = hq_clahe_weight(c0 + j + e, inv_w, tiles_x);
        w1[e] = wx.w1;
        w2[e] = wx.w2;
        off[e] = (pair_of(wx, tiles_x) - p0) * bins;
    }
    const uint32_t maxv = bins - 1;
    union Px {
        uint4 u;
        uint8_t t[16];
    };
    for (uint64_t i = gr.lo + threadIdx.y; i < gr.hi; i += kRemapU * kRemapBY) {
        Px p[kRemapU];
#pragma unroll
        for (uint32_t u = 0; u < kRemapU; u++)
            if (i + u * kRemapBY < gr.hi)
                p[u].u = *reinterpret_cast<const uint4 *>(d + (i + u * kRemapBY) * cols + j);
#pragma unroll
        for (uint32_t u = 0; u < kRemapU; u++) {
            if (i + u * kRemapBY >= gr.hi)
                break;
            const hq_clahe_w wy = hq_clahe_weight(r0 + i + u * kRemapBY, inv_h, tiles_y);
#pragma unroll
            for (uint32_t e = 0; e < 16; e++) {
                const uint32_t c = cell[off[e] + hq_bin(p[u].t[e], maxv)];
                hq_clahe_w wx;
                wx.w1 = w1[e];
                wx.w2 = w2[e];
                p[u].t[e] = (uint8_t)hq_clahe_blend_f(
                    small_f(__byte_perm(c, 0x4B000000u, 0x7540)), small_f(__byte_perm(c, 0x4B000000u, 0x7541)),
                    small_f(__byte_perm(c, 0x4B000000u, 0x7542)), small_f(__byte_perm(c, 0x4B000000u, 0x7543)), wx, wy,
                    maxv);
            }
            *reinterpret_cast<uint4 *>(d + (i + u * kRemapBY) * cols + j) = p[u].u;
        }
    }
}

/* 16-bit gray cells: for every row pair py in [py0, py0 + npy) and column pair px in [px0, px0 +
 * npx), level v: {l11 | l12 << 16, l21 | l22 << 16} at ((py - py0) * npx + px - px0) * bins + v,
 * so that a pixel's four LUT entries come in one 8-byte load (lut as k_clahe_remap's). */
__global__ void k_clahe_cells(const uint16_t *__restrict__ lut, uint32_t ty0, uint32_t tx0, uint32_t ntx,
                              uint64_t tiles_y, uint64_t tiles_x, uint32_t py0, uint32_t npy, uint32_t px0,
                              uint32_t npx, uint32_t bins, uint2 *__restrict__ cells)
{
    const uint64_t n = (uint64_t)npy * npx * bins;
    for (uint64_t k = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; k < n; k += (uint64_t)gridDim.x * blockDim.x) {
        const uint32_t v = (uint32_t)(k % bins), q = (uint32_t)(k / bins), py = py0 + q / npx, px = px0 + q % npx;
        const uint16_t *l1 = lut + (uint64_t)(pair_lo(py) - ty0) * ntx * bins;
        const uint16_t *l2 = lut + (uint64_t)(pair_hi(py, tiles_y) - ty0) * ntx * bins;
        const uint64_t a = (uint64_t)(pair_lo(px) - tx0) * bins + v, b = (uint64_t)(pair_hi(px, tiles_x) - tx0) * bins + v;
        cells[k] = make_uint2((uint32_t)l1[a] | (uint32_t)l1[b] << 16, (uint32_t)l2[a] | (uint32_t)l2[b] << 16);
    }
}

/* 16-bit gray, rows 16-byte aligned: a block of kRemapBX vectors of 8 columns by kRemapBY rows over
 * row group groups[blockIdx.y]; each pixel one 8-byte gather from the cells (the block's 2-D patch
 * keeps the levels it meets close, so the gathers mostly hit L1). Weights as k_clahe_remap8's. */
__global__ void __launch_bounds__(kRemapBX *kRemapBY)
    k_clahe_remap16(uint16_t *d, uint64_t cols, uint64_t r0, uint64_t c0, float inv_h, float inv_w, uint64_t tiles_y,
                    uint64_t tiles_x, const uint2 *__restrict__ cells, uint32_t py0, uint32_t px0, uint32_t npx,
                    uint32_t bins, const RowGroup *__restrict__ groups)
{
    const RowGroup gr = groups[blockIdx.y];
    const uint64_t j = ((uint64_t)blockIdx.x * kRemapBX + threadIdx.x) * 8;
    if (j >= cols)
        return;
    float w1[8], w2[8];
    uint32_t off[8];
#pragma unroll
    for (uint32_t e = 0; e < 8; e++) {
        const hq_clahe_w wx = hq_clahe_weight(c0 + j + e, inv_w, tiles_x);
        w1[e] = wx.w1;
        w2[e] = wx.w2;
        off[e] = (pair_of(wx, tiles_x) - px0) * bins;
    }
    const uint32_t maxv = bins - 1;
    const hq_clahe_w wg = hq_clahe_weight(r0 + gr.lo, inv_h, tiles_y);
    const uint2 *row_cells = cells + (uint64_t)(pair_of(wg, tiles_y) - py0) * npx * bins;
    union Px {
        uint4 u;
        uint16_t t[8];
    };
    constexpr uint32_t U = 2;
    for (uint64_t i = gr.lo + threadIdx.y; i < gr.hi; i += U * kRemapBY) {
        Px p[U];
        uint2 c[U][8];
#pragma unroll
        for (uint32_t u = 0; u < U; u++)
            if (i + u * kRemapBY < gr.hi)
                p[u].u = *reinterpret_cast<const uint4 *>(d + (i + u * kRemapBY) * cols + j);
#pragma unroll
        for (uint32_t u = 0; u < U; u++)
            if (i + u * kRemapBY < gr.hi) {
#pragma unroll
                for (uint32_t e = 0; e < 8; e++)
                    c[u][e] = __ldg(row_cells + off[e] + hq_bin(p[u].t[e], maxv));
            }
#pragma unroll
        for (uint32_t u = 0; u < U; u++) {
            if (i + u * kRemapBY >= gr.hi)
                break;
            const hq_clahe_w wy = hq_clahe_weight(r0 + i + u * kRemapBY, inv_h, tiles_y);
#pragma unroll
            for (uint32_t e = 0; e < 8; e++) {
                hq_clahe_w wx;
                wx.w1 = w1[e];
                wx.w2 = w2[e];
                const uint2 q = c[u][e];
                p[u].t[e] = (uint16_t)hq_clahe_blend_f(
                    small_f(__byte_perm(q.x, 0x4B000000u, 0x7410)), small_f(__byte_perm(q.x, 0x4B000000u, 0x7432)),
                    small_f(__byte_perm(q.y, 0x4B000000u, 0x7410)), small_f(__byte_perm(q.y, 0x4B000000u, 0x7432)), wx,
                    wy, maxv);
            }
            *reinterpret_cast<uint4 *>(d + (i + u * kRemapBY) * cols + j) = p[u].u;
        }
    }
}

/* The side's entries tile by tile (own samples, then reflections): src[at[t] .. at[t + 1]), the
 * first own[t] of them the own samples. */
inline void flatten(const hq_clahe_side *s, std::vector<uint64_t> &src, std::vector<uint64_t> &at,
                    std::vector<uint64_t> &own)
{
    at.assign(s->tiles + 1, 0);
    own.assign(s->tiles, 0);
    for (uint64_t t = 0; t < s->tiles; t++) {
        at[t] = src.size();
        own[t] = s->own_hi[t] - s->own_lo[t];
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

/* Work items of tiles [ty0, ty1] x [tx0, tx1], item_px pixels each at most (one row at least).
 * own_r, own_c (ext_only): each tile's count of own entries (they come first in rsrc, csrc); then
 * the items hold only the entries outside the own rectangle (a reflected row or column), which
 * k_clahe_hist_lane / k_clahe_hist_packed leave out. */
inline void make_items(const std::vector<uint64_t> &rat, const std::vector<uint64_t> &cat, uint64_t ty0, uint64_t ty1,
                       uint64_t tx0, uint64_t tx1, uint64_t item_px, std::vector<Item> &items,
                       const std::vector<uint64_t> *own_r = nullptr, const std::vector<uint64_t> *own_c = nullptr)
{
    const uint64_t ntx = tx1 - tx0 + 1;
    auto add = [&](uint64_t tile, uint64_t i0, uint64_t i1, uint64_t j0, uint64_t j1) {
        if (i0 >= i1 || j0 >= j1)
            return;
        const uint64_t step = item_px / (j1 - j0) ? item_px / (j1 - j0) : 1;
        for (uint64_t i = i0; i < i1; i += step)
            items.push_back({tile, i, i + step < i1 ? i + step : i1, j0, j1});
    };
    for (uint64_t ty = ty0; ty <= ty1; ty++)
        for (uint64_t tx = tx0; tx <= tx1; tx++) {
            const uint64_t tile = (ty - ty0) * ntx + (tx - tx0);
            if (!own_r) {
                add(tile, rat[ty], rat[ty + 1], cat[tx], cat[tx + 1]);
                continue;
            }
            const uint64_t ri = rat[ty] + (*own_r)[ty], cj = cat[tx] + (*own_c)[tx];
            add(tile, rat[ty], ri, cj, cat[tx + 1]);           /* own rows x reflected columns */
            add(tile, ri, rat[ty + 1], cat[tx], cat[tx + 1]);  /* reflected rows x every column */
        }
}

/* Gray histograms' own rectangles in units of at most max_px pixels (one row segment at least, a
 * segment max_px columns at most), tile by tile so that a block's run of units mostly stays in
 * one tile. Piece coordinates. */
inline void make_units(const hq_clahe_side *rs, const hq_clahe_side *cs, uint64_t r0, uint64_t c0, uint64_t ty0,
                       uint64_t ty1, uint64_t tx0, uint64_t tx1, uint64_t max_px, std::vector<Unit> &units)
{
    const uint64_t ntx = tx1 - tx0 + 1;
    for (uint64_t ty = ty0; ty <= ty1; ty++)
        for (uint64_t tx = tx0; tx <= tx1; tx++) {
            const uint64_t rl = rs->own_lo[ty] - r0, rh = rs->own_hi[ty] - r0;
            const uint64_t cl = cs->own_lo[tx] - c0, ch = cs->own_hi[tx] - c0;
            if (rl >= rh || cl >= ch)
                continue;
            const uint64_t cw = ch - cl < max_px ? ch - cl : max_px, per = max_px / cw;
            for (uint64_t c = cl; c < ch; c += cw)
                for (uint64_t r = rl; r < rh; r += per)
                    units.push_back({(ty - ty0) * ntx + (tx - tx0), r, r + per < rh ? r + per : rh, c,
                                     c + cw < ch ? c + cw : ch});
        }
}

/* Threads along a row for units of width w samples (T): a power of two from 32 to threads, about
 * one 16-byte vector each. */
template <typename T> inline dim3 unit_block(uint64_t w, int threads)
{
    const uint64_t nvec = (w * sizeof(T) + 15) / 16;
    uint32_t l = 32;
    while (l < (uint32_t)threads && l < nvec)
        l *= 2;
    return dim3(l, (uint32_t)threads / l, 1);
}

/* How the own rectangles' histograms launch: per-lane or packed counters, a persistent grid of as
 * many blocks as the device runs at once (each a contiguous run of units). */
struct OwnLaunch {
    bool lane;
    dim3 block;
    uint32_t grid;
    size_t shm;
};

/* For nunits units of samples of sample_bytes, the widest w samples, bins bins. */
inline cudaError_t plan_own(uint32_t sample_bytes, uint64_t nunits, uint64_t w, uint32_t bins, OwnLaunch *o)
{
    o->lane = bins <= kLaneBins;
    const int threads = o->lane ? kLaneThreads : kPackedThreads;
    o->block = sample_bytes == 1 ? unit_block<uint8_t>(w, threads) : unit_block<uint16_t>(w, threads);
    o->shm = o->lane ? (size_t)(threads / 32) * ((bins + 1) / 2) * 32 * 4 : (size_t)((bins + 1) / 2) * 4;
    const void *f = o->lane ? (sample_bytes == 1 ? (const void *)k_clahe_hist_lane<uint8_t>
                                                 : (const void *)k_clahe_hist_lane<uint16_t>)
                            : (sample_bytes == 1 ? (const void *)k_clahe_hist_packed<uint8_t>
                                                 : (const void *)k_clahe_hist_packed<uint16_t>);
    cudaError_t e = cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)o->shm);
    int dev = 0, sms = 1, per = 1;
    if (e == cudaSuccess)
        e = cudaGetDevice(&dev);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (e == cudaSuccess)
        e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, f, threads, o->shm);
    const uint64_t g = (uint64_t)sms * (per > 0 ? per : 1);
    o->grid = (uint32_t)(nunits < g ? nunits : g);
    return e;
}

inline void launch_own(const OwnLaunch &o, const void *d, uint32_t sample_bytes, uint64_t cols, const Unit *units,
                       uint32_t nunits, uint32_t bins, unsigned long long *hist, cudaStream_t st = 0)
{
    if (!o.grid)
        return;
    if (o.lane && sample_bytes == 1)
        k_clahe_hist_lane<uint8_t><<<o.grid, o.block, o.shm, st>>>(static_cast<const uint8_t *>(d), cols, units,
                                                                   nunits, bins, bins - 1, hist);
    else if (o.lane)
        k_clahe_hist_lane<uint16_t><<<o.grid, o.block, o.shm, st>>>(static_cast<const uint16_t *>(d), cols, units,
                                                                    nunits, bins, bins - 1, hist);
    else if (sample_bytes == 1)
        k_clahe_hist_packed<uint8_t><<<o.grid, o.block, o.shm, st>>>(static_cast<const uint8_t *>(d), cols, units,
                                                                     nunits, bins, bins - 1, hist);
    else
        k_clahe_hist_packed<uint16_t><<<o.grid, o.block, o.shm, st>>>(static_cast<const uint16_t *>(d), cols, units,
                                                                      nunits, bins, bins - 1, hist);
}

/* How a gray piece's remap launches: kind 8 (k_clahe_remap8), 16 (k_clahe_cells, then
 * k_clahe_remap16) for rows that start on 16-byte boundaries, else 0 (k_clahe_remap_gray). */
struct GrayLaunch {
    int kind;
    uint32_t strips;    /* grid x */
    size_t shm;         /* kind 8: the most cells a strip stages */
    uint32_t py0, npy, px0, npx; /* kind 16: the pairs the cells cover */
    uint64_t cell_bytes;         /* kind 16 */
    uint64_t group_rows;         /* rows a row group at most */
};

inline void plan_gray(uint32_t sample_bytes, uint32_t bins, uint64_t r0, uint64_t rows, uint64_t c0, uint64_t cols,
                      const hq_clahe_geom *g, const void *d, GrayLaunch *o)
{
    const float inv_h = hq_clahe_inv(g->tile_h), inv_w = hq_clahe_inv(g->tile_w);
    const bool aligned = (uintptr_t)d % 16 == 0 && (cols * sample_bytes) % 16 == 0;
    *o = GrayLaunch{};
    o->group_rows = kGroupPixels / cols ? kGroupPixels / cols : 1;
    if (!aligned || bins < 2)
        return;
    if (sample_bytes == 1 && bins <= 256) {
        const uint64_t sw = kRemapBX * 16;
        uint32_t most = 0;
        for (uint64_t x0 = 0; x0 < cols; x0 += sw) {
            const uint64_t x1 = x0 + sw < cols ? x0 + sw : cols;
            const uint32_t n = pair_of(hq_clahe_weight(c0 + x1 - 1, inv_w, g->tiles_x), g->tiles_x) -
                               pair_of(hq_clahe_weight(c0 + x0, inv_w, g->tiles_x), g->tiles_x) + 1;
            most = n > most ? n : most;
        }
        if (most > kCellPairs8)
            return;
        o->kind = 8;
        o->strips = (uint32_t)((cols + sw - 1) / sw);
        o->shm = (size_t)most * bins * 4;
    } else if (sample_bytes == 2) {
        o->py0 = pair_of(hq_clahe_weight(r0, inv_h, g->tiles_y), g->tiles_y);
        o->npy = pair_of(hq_clahe_weight(r0 + rows - 1, inv_h, g->tiles_y), g->tiles_y) - o->py0 + 1;
        o->px0 = pair_of(hq_clahe_weight(c0, inv_w, g->tiles_x), g->tiles_x);
        o->npx = pair_of(hq_clahe_weight(c0 + cols - 1, inv_w, g->tiles_x), g->tiles_x) - o->px0 + 1;
        o->cell_bytes = (uint64_t)o->npy * o->npx * bins * sizeof(uint2);
        if (o->cell_bytes > kCellBytes)
            return;
        o->kind = 16;
        o->strips = (uint32_t)((cols / 8 + kRemapBX - 1) / kRemapBX);
    } else {
        return;
    }
    o->group_rows = kRemapRows;
}

/* The remap of plan o (not kind 0) over ngroups row groups; cells: kind 16's cell_bytes of device
 * memory. lut as k_clahe_remap's. */
inline void launch_gray(const GrayLaunch &o, void *d, uint64_t r0, uint64_t c0, uint64_t cols, const hq_clahe_geom *g,
                        const uint16_t *lut, uint32_t ty0, uint32_t tx0, uint32_t ntx, uint32_t bins,
                        const RowGroup *groups, uint32_t ngroups, uint2 *cells, cudaStream_t st = 0)
{
    const float inv_h = hq_clahe_inv(g->tile_h), inv_w = hq_clahe_inv(g->tile_w);
    const dim3 block(kRemapBX, kRemapBY);
    for (uint32_t k0 = 0; k0 < ngroups; k0 += 65535) {
        const uint32_t ng = ngroups - k0 < 65535 ? ngroups - k0 : 65535;
        if (o.kind == 8) {
            k_clahe_remap8<<<dim3(o.strips, ng), block, o.shm, st>>>(static_cast<uint8_t *>(d), cols, r0, c0, inv_h,
                                                                     inv_w, g->tiles_y, g->tiles_x, lut, ty0, tx0, ntx,
                                                                     bins, groups + k0);
        } else {
            if (k0 == 0) {
                const uint64_t n = (uint64_t)o.npy * o.npx * bins, nb = (n + 255) / 256;
                k_clahe_cells<<<(unsigned)(nb < 65535 * 16 ? nb : 65535 * 16), 256, 0, st>>>(
                    lut, ty0, tx0, ntx, g->tiles_y, g->tiles_x, o.py0, o.npy, o.px0, o.npx, bins, cells);
            }
            k_clahe_remap16<<<dim3(o.strips, ng), block, 0, st>>>(static_cast<uint16_t *>(d), cols, r0, c0, inv_h,
                                                                   inv_w, g->tiles_y, g->tiles_x, cells, o.py0, o.px0,
                                                                   o.npx, bins, groups + k0);
        }
    }
}

/* Row groups of rows piece rows: at most per rows each, one tile-row pair. */
inline void make_groups(uint64_t r0, uint64_t rows, uint64_t per, float inv_h, uint64_t tiles_y,
                        std::vector<RowGroup> &groups)
{
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
