/* clahe/remap.cuh — the remap in place: each pixel the bilinear blend of its four tile LUTs, every
 * per-pixel result core/clahe.h's. Gray, rows on 16-byte boundaries (k_clahe_remap8,
 * k_clahe_remap16): a thread keeps its columns' weights over its rows; 8-bit reads a pixel's four
 * LUT entries as one word of cells staged in shared memory, 16-bit as one 8-byte gather from cells
 * built on the device (k_clahe_cells: {l11, l12, l21, l22} per level and pair of tile pairs). Other
 * gray pieces (k_clahe_remap_gray): one CUDA block per group of rows blending the same two tile
 * rows, 16-byte vectors with scalar heads and tails (8-bit LUTs as bytes in shared memory). Other
 * modes (k_clahe_remap): one pixel a thread through the read-only cache. Which gray kernel runs is
 * plan_gray's choice (work_lists.cuh), which also needs pair_of. */
#ifndef HQ_GPU_CLAHE_REMAP_CUH
#define HQ_GPU_CLAHE_REMAP_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "common.cuh"

namespace {

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

} /* namespace */

#endif
