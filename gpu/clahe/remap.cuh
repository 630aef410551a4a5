/* clahe/remap.cuh — the remap in place: each pixel the bilinear blend of its four tile LUTs, every
 * per-pixel result core/clahe.h's. Gray, rows on 16-byte boundaries (k_clahe_remap8,
 * k_clahe_remap16): a thread keeps its columns' weights over its rows; 8-bit reads a pixel's four
 * LUT entries as one cell staged in shared memory (Remap8Rep or Remap8Half), 16-bit as one 8-byte
 * gather from cells built on the device (k_clahe_cells: {l11, l12, l21, l22} per level and pair of
 * tile pairs). Other gray pieces (k_clahe_remap_gray): one CUDA block per group of rows blending
 * the same two tile rows, 16-byte vectors with scalar heads and tails (8-bit LUTs as bytes in
 * shared memory). Other modes (k_clahe_remap): one pixel a thread through the read-only cache.
 * Which gray kernel runs is plan_gray's choice (work_lists.cuh), which also needs pair_of. */
#ifndef HQ_GPU_CLAHE_REMAP_CUH
#define HQ_GPU_CLAHE_REMAP_CUH

#include <cuda_fp16.h>
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

/* k_clahe_remap8: rows a thread blends at a time, the next as many loading meanwhile. */
constexpr uint32_t kRemapU = 2;

/* The weights of the N columns from piece column j (hq_clahe_weight's, the values the per-pixel form
 * computes) and the offset of each one's pair of tiles from pair p0, in units of stride. */
template <uint32_t N>
__device__ __forceinline__ void column_weights(uint64_t j, uint64_t c0, float inv_w, uint64_t tiles_x, uint32_t p0,
                                               uint32_t stride, float *w1, float *w2, uint32_t *off)
{
#pragma unroll
    for (uint32_t e = 0; e < N; e++) {
        const hq_clahe_w wx = hq_clahe_weight(c0 + j + e, inv_w, tiles_x);
        w1[e] = wx.w1;
        w2[e] = wx.w2;
        off[e] = (pair_of(wx, tiles_x) - p0) * stride;
    }
}

/* The end of the run of rows from lo (< b) whose tf has lo's floor (and so blend lo's pair of tile
 * rows, with weights from tf alone): the floor grows with the row, so the first row of another is
 * found by bisection. */
__device__ __forceinline__ uint64_t floor_run_end(uint64_t lo, uint64_t b, uint64_t r0, float inv_h)
{
    const int64_t f = hq_clahe_floor(hq_clahe_tf(r0 + lo, inv_h));
    uint64_t e0 = lo + 1, e1 = b;
    while (e0 < e1) {
        const uint64_t m = e0 + (e1 - e0) / 2;
        if (hq_clahe_floor(hq_clahe_tf(r0 + m, inv_h)) == f)
            e0 = m + 1;
        else
            e1 = m;
    }
    return e0;
}

/* k_clahe_remap8: the most rows of one run a block blends before it stages the same cells again,
 * so that its row counters stay 32-bit. */
constexpr uint64_t kRunRows8 = (uint64_t)1 << 30;

/* The four LUT entries a pixel of level v in column pair p blends, for one pair of tile rows (l1,
 * l2: their LUTs, lut as k_clahe_remap's): {l11, l12, l21, l22}. */
__device__ __forceinline__ ushort4 cell_entries(const uint16_t *l1, const uint16_t *l2, uint32_t p, uint32_t v,
                                                uint32_t tx0, uint64_t tiles_x, uint32_t bins)
{
    const uint64_t a = (uint64_t)(pair_lo(p) - tx0) * bins + v, b = (uint64_t)(pair_hi(p, tiles_x) - tx0) * bins + v;
    return make_ushort4(l1[a], l1[b], l2[a], l2[b]);
}

/* k_clahe_remap8's two layouts of a strip's cells in shared memory, chosen by plan_gray. A pixel's
 * level is a gather, and the lanes of one shared load meet several levels a bank group: one 8-byte
 * cell of halves a level (Remap8Half) took 5.3 wavefronts a load on the bench image, one 16-byte
 * cell of floats 9.6. Eight copies of each 16-byte cell, lane l reading copy l % 8 (Remap8Rep),
 * make every load conflict-free (a wavefront serves 8 lanes, each in banks of its own) and take
 * the four half-to-float conversions off each pixel: remap 0.033 ms against 0.036 on the H100
 * bench, at 32 KiB a column pair instead of 2, so only strips of up to kRepPairs8 pairs take it
 * (bench/results/clahe_gpu_bench.txt, item 8). */
struct Remap8Half {
    typedef uint2 Cell;
    static constexpr uint32_t kCopies = 1, kLevelShift = 3; /* 8 bytes a level */
    /* The entries as halves (exact: entries <= 255), {l11 | l12 << 16, l21 | l22 << 16}. */
    static __device__ __forceinline__ Cell make(ushort4 e)
    {
        const uint32_t h11 = __half_as_ushort(__ushort2half_rn(e.x)), h12 = __half_as_ushort(__ushort2half_rn(e.y));
        const uint32_t h21 = __half_as_ushort(__ushort2half_rn(e.z)), h22 = __half_as_ushort(__ushort2half_rn(e.w));
        return make_uint2(h11 | h12 << 16, h21 | h22 << 16);
    }
    /* The entries of the cell at c, as floats: a half-to-float conversion each. */
    static __device__ __forceinline__ float4 read(const char *c)
    {
        const uint2 h = *reinterpret_cast<const uint2 *>(c);
        return make_float4(__half2float(__ushort_as_half((unsigned short)(h.x & 0xffffu))),
                           __half2float(__ushort_as_half((unsigned short)(h.x >> 16))),
                           __half2float(__ushort_as_half((unsigned short)(h.y & 0xffffu))),
                           __half2float(__ushort_as_half((unsigned short)(h.y >> 16))));
    }
};
struct Remap8Rep {
    typedef float4 Cell;
    static constexpr uint32_t kCopies = 8, kLevelShift = 7; /* 8 copies of 16 bytes a level */
    static __device__ __forceinline__ Cell make(ushort4 e)
    {
        return make_float4((float)e.x, (float)e.y, (float)e.z, (float)e.w);
    }
    static __device__ __forceinline__ float4 read(const char *c)
    {
        return *reinterpret_cast<const float4 *>(c);
    }
};

/* Byte K of word w as the byte offset of its level's cell from off (S bytes a level). */
template <uint32_t K, uint32_t S> __device__ __forceinline__ uint32_t cell_at(uint32_t w, uint32_t off)
{
    return (K ? w >> (8 * K - S) : w << S) & (0xffu << S) | off;
}

/* 16 pixels (one 16-byte vector) of a row of weight wy through the cells (L's layout): the blend of
 * hq_clahe_blend_f, not clamped (every entry is at most maxv, and so is the blend, each pair of
 * weights summing to 1 within a few ulps), packed back as bytes. */
template <typename L>
__device__ __forceinline__ uint4 blend16(uint4 px, const char *cells, const uint32_t *off, const float *w1,
                                         const float *w2, hq_clahe_w wy)
{
    const uint32_t in[4] = {px.x, px.y, px.z, px.w};
    uint32_t out[4];
#pragma unroll
    for (uint32_t q = 0; q < 4; q++) {
        uint32_t o[4];
#pragma unroll
        for (uint32_t k = 0; k < 4; k++) {
            const uint32_t e = 4 * q + k;
            constexpr uint32_t S = L::kLevelShift;
            uint32_t at;
            switch (k) {
            case 0: at = cell_at<0, S>(in[q], off[e]); break;
            case 1: at = cell_at<1, S>(in[q], off[e]); break;
            case 2: at = cell_at<2, S>(in[q], off[e]); break;
            default: at = cell_at<3, S>(in[q], off[e]); break;
            }
            const float4 f = L::read(cells + at);
            hq_clahe_w wx;
            wx.w1 = w1[e];
            wx.w2 = w2[e];
            /* hq_clahe_round_small took 2^23's bits off: adding them back keeps the low byte (the
             * pixel) and lets the compiler drop both. */
            o[k] = hq_clahe_blend_f(f.x, f.y, f.z, f.w, wx, wy, UINT32_MAX) + 0x4B000000u;
        }
        out[q] = (o[0] & 0xffu) | (o[1] & 0xffu) << 8 | (o[2] & 0xffu) << 16 | o[3] << 24;
    }
    return make_uint4(out[0], out[1], out[2], out[3]);
}

/* 8-bit gray (bins <= 256), rows 16-byte aligned. Grid: strips of kRemapBX * 16 columns (x) by slabs
 * of about equal rows (y), no more blocks than the device holds at once (plan_gray). Block: kRemapBX
 * threads of 16 columns (one vector) by kRemapBY; a thread's columns keep their weights over all its
 * rows. The slab in runs of rows that blend one pair of tile rows: for each, the strip's cells (every
 * column pair p0 .. of the strip, every level 0..255; levels above maxv take maxv's, hq_bin's clamp
 * folded into the table) in shared memory in L's layout, one load a pixel; a thread's next kRemapU
 * rows load while it blends the ones before. */
template <typename L>
__global__ void __launch_bounds__(kRemapBX *kRemapBY, 2)
    k_clahe_remap8(uint8_t *d, uint64_t rows, uint64_t cols, uint64_t r0, uint64_t c0, float inv_h, float inv_w,
                   uint64_t tiles_y, uint64_t tiles_x, const uint16_t *__restrict__ lut, uint32_t ty0, uint32_t tx0,
                   uint32_t ntx, uint32_t bins)
{
    typedef typename L::Cell Cell;
    extern __shared__ __align__(16) char cells_raw[];
    Cell *cell = reinterpret_cast<Cell *>(cells_raw);
    constexpr uint32_t NT = kRemapBX * kRemapBY, U = kRemapU, BY = kRemapBY, C = L::kCopies;
    static_assert(kRemapBX % 8 == 0, "threadIdx.x % 8 must be the lane's place in its quarter warp");
    const uint64_t x0 = (uint64_t)blockIdx.x * kRemapBX * 16, x1 = x0 + kRemapBX * 16 < cols ? x0 + kRemapBX * 16 : cols;
    const uint32_t p0 = pair_of(hq_clahe_weight(c0 + x0, inv_w, tiles_x), tiles_x);
    const uint32_t ncell = (pair_of(hq_clahe_weight(c0 + x1 - 1, inv_w, tiles_x), tiles_x) - p0 + 1) * 256;
    const uint32_t tid = threadIdx.y * kRemapBX + threadIdx.x, maxv = bins - 1;
    const uint64_t j = x0 + threadIdx.x * 16;
    float w1[16], w2[16];
    uint32_t off[16];
    column_weights<16>(j, c0, inv_w, tiles_x, p0, 256 * C * sizeof(Cell), w1, w2, off);
#pragma unroll
    for (uint32_t e = 0; e < 16; e++)
        off[e] += threadIdx.x % C * (uint32_t)sizeof(Cell); /* the lane's copy */
    const char *cells = cells_raw;
    const uint64_t a = rows * blockIdx.y / gridDim.y, b = rows * (blockIdx.y + 1) / gridDim.y;
    __shared__ uint64_t s_hi;
    for (uint64_t lo = a, hi; lo < b; lo = hi) {
        /* The run's first rows load while its end is found and its cells staged (a row past the
         * run's end is loaded for nothing). */
        uint4 cur[U];
#pragma unroll
        for (uint32_t u = 0; u < U; u++)
            if (j < x1 && lo + threadIdx.y + u * BY < b)
                cur[u] = *reinterpret_cast<const uint4 *>(d + (lo + threadIdx.y + u * BY) * cols + j);
        __syncthreads(); /* the previous run's cells and end are no longer read */
        /* One thread finds the run's end (a bisection every thread made was 4% of the kernel's
         * instructions) while the others stage. */
        if (tid == 0) {
            const uint64_t e = floor_run_end(lo, b, r0, inv_h);
            s_hi = e - lo > kRunRows8 ? lo + kRunRows8 : e;
        }
        const float tf0 = hq_clahe_tf(r0 + lo, inv_h);
        const float t1f = (float)hq_clahe_floor(tf0);
        const hq_clahe_w wg = hq_clahe_weight(r0 + lo, inv_h, tiles_y);
        const uint16_t *l1 = lut + (uint64_t)(wg.t1 - ty0) * ntx * bins, *l2 = lut + (uint64_t)(wg.t2 - ty0) * ntx * bins;
        for (uint32_t k = tid; k < ncell; k += NT) {
            const uint32_t v = k % 256 < maxv ? k % 256 : maxv;
            cell[k * C] = L::make(cell_entries(l1, l2, p0 + k / 256, v, tx0, tiles_x, bins));
        }
        if (C > 1) {
            /* Copied rather than built C times: consecutive threads, consecutive 16 bytes. */
            __syncthreads();
            for (uint32_t k = tid; k < ncell * C; k += NT)
                if (k % C)
                    cell[k] = cell[k - k % C];
        }
        __syncthreads();
        hi = s_hi;
        if (j >= x1)
            continue;
        /* Every row of the run has tf0's floor: a row's weights are hq_clahe_weight's from its tf
         * alone. Rows counted from the run's start in 32 bits, addresses stepped: the loop keeps
         * only the blend's own work (bench/results/clahe_gpu_bench.txt, item 13). */
        const uint32_t n = (uint32_t)(hi - lo);
        const uint64_t step = (uint64_t)BY * cols, pos0 = r0 + lo;
        uint8_t *row = d + (lo + threadIdx.y) * cols + j;
        for (uint32_t k = threadIdx.y; k < n; k += U * BY, row += U * step) {
            uint4 nxt[U];
#pragma unroll
            for (uint32_t u = 0; u < U; u++)
                if (k + (U + u) * BY < n)
                    nxt[u] = *reinterpret_cast<const uint4 *>(row + (U + u) * step);
#pragma unroll
            for (uint32_t u = 0; u < U; u++)
                if (k + u * BY < n)
                    *reinterpret_cast<uint4 *>(row + u * step) = blend16<L>(
                        cur[u], cells, off, w1, w2, hq_clahe_weights_of(hq_clahe_tf(pos0 + k + u * BY, inv_h), t1f));
#pragma unroll
            for (uint32_t u = 0; u < U; u++)
                cur[u] = nxt[u];
        }
    }
}

/* 16-bit gray cells: for every row pair py in [py0, py0 + npy) and column pair px in [px0, px0 +
 * npx), level v: {l11 | l12 << 16, l21 | l22 << 16} at ((py - py0) * npx + px - px0) * bins + v,
 * so that a pixel's four LUT entries come in one 8-byte load (lut as k_clahe_remap's). Grid: one
 * pair of pairs a block column (x), kThreads levels a block (y): no division a cell (a 64-bit
 * division a cell made 65,536 levels x 81 pairs take 39 us on an H100 under Nsight Compute, 27 us
 * without; bench/results/clahe_gpu_bench.txt). */
__global__ void __launch_bounds__(kThreads)
    k_clahe_cells(const uint16_t *__restrict__ lut, uint32_t ty0, uint32_t tx0, uint32_t ntx, uint64_t tiles_y,
                  uint64_t tiles_x, uint32_t py0, uint32_t px0, uint32_t npx, uint32_t bins, uint2 *__restrict__ cells)
{
    const uint32_t v = blockIdx.y * kThreads + threadIdx.x, q = blockIdx.x;
    if (v >= bins)
        return;
    const uint32_t py = py0 + q / npx, px = px0 + q % npx;
    const uint16_t *l1 = lut + (uint64_t)(pair_lo(py) - ty0) * ntx * bins;
    const uint16_t *l2 = lut + (uint64_t)(pair_hi(py, tiles_y) - ty0) * ntx * bins;
    const ushort4 e = cell_entries(l1, l2, px, v, tx0, tiles_x, bins);
    cells[(uint64_t)q * bins + v] =
        make_uint2((uint32_t)e.x | (uint32_t)e.y << 16, (uint32_t)e.z | (uint32_t)e.w << 16);
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
    column_weights<8>(j, c0, inv_w, tiles_x, px0, bins, w1, w2, off);
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
