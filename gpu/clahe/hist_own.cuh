/* clahe/hist_own.cuh — gray histograms of each tile's own rectangle (the piece's samples of the
 * tile, rows and columns contiguous; the reflected entries are hist_generic.cuh's) by a persistent
 * grid whose blocks each take a contiguous run of units (Unit; plan_own / own_work / launch_own in
 * work_lists.cuh): 16-byte row loads, several rows in flight, no division or table lookup a pixel.
 * Up to kLaneBins bins, u32 counters a level and lane (k_clahe_hist_lane: the lanes of an atomic
 * never share a bank, so shared-memory atomics never collide), runs of equal pixels a block; more
 * bins (16-bit) count in one packed u16-pair histogram a block (k_clahe_hist_packed: 128 KiB for
 * 65,536 bins) over units of at most kUnitPixels. Both fold into the tile's u64 counters when the
 * tile changes or a counter could overflow. */
#ifndef HQ_GPU_CLAHE_HIST_OWN_CUH
#define HQ_GPU_CLAHE_HIST_OWN_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "common.cuh"

namespace {

/* Rows r, r + stride, ... (U of them) of unit un: where each starts (p), its scalar head before the
 * first 16-byte boundary and its count of whole vectors after it; rows past the unit get none (and
 * point at row r, so no address leaves the image). Returns the most vectors of any row. */
template <uint32_t U, typename T, typename I>
__device__ __forceinline__ I rows_in_flight(const T *d, uint64_t cols, const Unit &un, uint64_t r, uint32_t stride,
                                            const T *(&p)[U], I (&head)[U], I (&nvec)[U])
{
    constexpr uint32_t V = 16 / sizeof(T);
    const uint64_t n = un.c_hi - un.c_lo;
    I most = 0;
#pragma unroll
    for (uint32_t u = 0; u < U; u++) {
        const uint64_t rr = r + (uint64_t)u * stride;
        const bool in = rr < un.r_hi;
        p[u] = d + (in ? rr : r) * cols + un.c_lo;
        const uint32_t mis = (uint32_t)((uintptr_t)p[u] / sizeof(T)) % V;
        head[u] = in && mis ? (I)(V - mis < n ? V - mis : n) : 0;
        nvec[u] = in ? (I)((n - head[u]) / V) : 0;
        most = nvec[u] > most ? nvec[u] : most;
    }
    return most;
}

/* For unit un, what thread (tx, ty) of an L x BY block takes: rows ty, ty + BY, ... and in each the
 * 16-byte vectors tx, tx + L, ... (fv(samples), V of them) between scalar heads and tails (fs(sample);
 * rows need not start on a boundary). U rows at a time, their vectors loaded before any is counted,
 * so that each thread keeps several loads in flight. */
template <uint32_t U, typename T, typename FV, typename FS>
__device__ __forceinline__ void unit_each(const T *d, uint64_t cols, const Unit &un, uint32_t tx, uint32_t L,
                                          uint32_t ty, uint32_t BY, FV fv, FS fs)
{
    constexpr uint32_t V = 16 / sizeof(T);
    union Vec {
        uint4 u;
        T t[V];
    };
    const uint64_t n = un.c_hi - un.c_lo;
    for (uint64_t r = un.r_lo + ty; r < un.r_hi; r += U * BY) {
        const T *p[U];
        uint64_t head[U], nvec[U];
        const uint64_t most = rows_in_flight<U>(d, cols, un, r, BY, p, head, nvec);
        for (uint64_t k = tx; k < most; k += L) {
            Vec a[U];
#pragma unroll
            for (uint32_t u = 0; u < U; u++)
                if (k < nvec[u])
                    a[u].u = __ldg(reinterpret_cast<const uint4 *>(p[u] + head[u]) + k);
#pragma unroll
            for (uint32_t u = 0; u < U; u++)
                if (k < nvec[u])
                    fv(a[u].t);
        }
#pragma unroll
        for (uint32_t u = 0; u < U; u++) {
            if (r + u * BY >= un.r_hi)
                break;
            const uint64_t tail = head[u] + nvec[u] * V;
            for (uint64_t q = tx; q < head[u] + (n - tail); q += L)
                fs(p[u][q < head[u] ? q : tail + (q - head[u])]);
        }
    }
}

/* The units of block blockIdx.x: a contiguous run, so that its tiles change rarely. */
__device__ __forceinline__ void unit_run(uint32_t nunits, uint32_t *u0, uint32_t *u1)
{
    *u0 = (uint32_t)((uint64_t)blockIdx.x * nunits / gridDim.x);
    *u1 = (uint32_t)((uint64_t)(blockIdx.x + 1) * nunits / gridDim.x);
}

/* Byte K of word w as the byte offset of its level's counter in column col (bytes) of
 * k_clahe_hist_lane's counters: levels 128 bytes apart (32 columns of u32). */
template <uint32_t K> __device__ __forceinline__ uint32_t lane_slot(uint32_t w, uint32_t col)
{
    return (K ? w >> (8 * K - 7) : w << 7) & 0x7f80u | col;
}

/* Counts one 16-byte vector of samples in column col; 16-bit samples clamped to maxv first. */
__device__ __forceinline__ void lane_count(char *sh, uint4 a, uint32_t col, uint32_t, uint8_t)
{
    const uint32_t w[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
    for (uint32_t i = 0; i < 4; i++) {
        atomicAdd(reinterpret_cast<uint32_t *>(sh + lane_slot<0>(w[i], col)), 1u);
        atomicAdd(reinterpret_cast<uint32_t *>(sh + lane_slot<1>(w[i], col)), 1u);
        atomicAdd(reinterpret_cast<uint32_t *>(sh + lane_slot<2>(w[i], col)), 1u);
        atomicAdd(reinterpret_cast<uint32_t *>(sh + lane_slot<3>(w[i], col)), 1u);
    }
}
__device__ __forceinline__ void lane_count(char *sh, uint4 a, uint32_t col, uint32_t maxv, uint16_t)
{
    const uint32_t w[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
    for (uint32_t i = 0; i < 4; i++) {
        atomicAdd(reinterpret_cast<uint32_t *>(sh + (min(w[i] & 0xffffu, maxv) << 7 | col)), 1u);
        atomicAdd(reinterpret_cast<uint32_t *>(sh + (min(w[i] >> 16, maxv) << 7 | col)), 1u);
    }
}

/* Gray histograms of bins <= kLaneBins (k_clahe_hist_lane), blocks of kLaneThreads threads: u32
 * counters for every level (256) and 32 columns, 32 KiB a block; lane l of every warp counts in
 * column l, so the 32 lanes of one atomic always hit 32 different banks whatever the levels
 * (smooth images put a warp's lanes on few levels). Warps share the columns: an atomic from
 * another warp on the same counter costs nothing more. Levels above maxv (8-bit samples of fewer
 * bits) count where they stand and join bin maxv when the block folds.
 *
 * Work: each block a run of whole rows of own rectangles (units[starts[b] .. starts[b + 1]), cut
 * by make_lane_units so that every block gets the same number of pixels); a warp takes rows warp,
 * warp + warps, ..., kLaneRows at a time, each lane two 16-byte vectors of each of them in flight
 * (scalar heads and tails where a row does not start on a boundary). The block folds into the
 * tile's u64 counters at a change of tile, at its run's end, and before a u32 could wrap. */
template <typename T>
__global__ void __launch_bounds__(kLaneThreads)
    k_clahe_hist_lane(const T *__restrict__ d, uint64_t cols, const Unit *__restrict__ units,
                      const uint32_t *__restrict__ starts, uint32_t maxv, unsigned long long *hist)
{
    extern __shared__ uint4 sh4[];
    char *sh = reinterpret_cast<char *>(sh4);
    constexpr uint32_t V = 16 / sizeof(T), NW = kLaneThreads / 32, U = kLaneRows;
    const uint32_t tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, col = lane * 4;
    for (uint32_t k = tid; k < 256 * 32 / 4; k += kLaneThreads)
        sh4[k] = make_uint4(0, 0, 0, 0);
    __syncthreads();
    const uint32_t u0 = starts[blockIdx.x], u1 = starts[blockIdx.x + 1];
    uint64_t acc = 0; /* pixels counted since the last fold: the most any counter holds */
    for (uint32_t u = u0; u < u1; u++) {
        const Unit un = units[u];
        const uint64_t n = un.c_hi - un.c_lo;
        for (uint64_t r = un.r_lo + warp; r < un.r_hi; r += U * NW) {
            const T *p[U];
            uint32_t head[U], nvec[U];
            const uint32_t most = rows_in_flight<U>(d, cols, un, r, NW, p, head, nvec);
            for (uint32_t k = lane; k < most; k += 64) {
                uint4 a[U][2];
#pragma unroll
                for (uint32_t i = 0; i < U; i++)
#pragma unroll
                    for (uint32_t h = 0; h < 2; h++)
                        if (k + 32 * h < nvec[i])
                            a[i][h] = __ldg(reinterpret_cast<const uint4 *>(p[i] + head[i]) + k + 32 * h);
#pragma unroll
                for (uint32_t i = 0; i < U; i++)
#pragma unroll
                    for (uint32_t h = 0; h < 2; h++)
                        if (k + 32 * h < nvec[i])
                            lane_count(sh, a[i][h], col, maxv, T());
            }
#pragma unroll
            for (uint32_t i = 0; i < U; i++) {
                const uint32_t tail = head[i] + nvec[i] * V, rest = head[i] + (uint32_t)(n - tail);
                for (uint32_t q = lane; r + i * NW < un.r_hi && q < rest; q += 32) {
                    const uint32_t x = p[i][q < head[i] ? q : tail + (q - head[i])];
                    atomicAdd(reinterpret_cast<uint32_t *>(sh + ((sizeof(T) == 1 ? x : min(x, maxv)) << 7 | col)), 1u);
                }
            }
        }
        acc += (un.r_hi - un.r_lo) * n;
        const bool last = u + 1 == u1;
        if (!last) {
            const Unit nx = units[u + 1];
            if (nx.tile == un.tile && acc + (nx.r_hi - nx.r_lo) * (nx.c_hi - nx.c_lo) <= UINT32_MAX)
                continue;
        }
        /* Level v's 32 columns, 16 bytes at a time from a rotated start: the lanes of a quarter
         * warp read 8 different 16-byte slots of their rows, no bank conflict. */
        __syncthreads();
        unsigned long long *dst = hist + un.tile * (maxv + 1);
        for (uint32_t v = tid; v < 256; v += kLaneThreads) {
            uint4 *row = sh4 + v * 8;
            uint32_t s = 0;
#pragma unroll
            for (uint32_t g = 0; g < 8; g++) {
                const uint4 c = row[(g + lane) & 7];
                s += c.x + c.y + c.z + c.w;
                if (!last)
                    row[(g + lane) & 7] = make_uint4(0, 0, 0, 0);
            }
            if (s)
                atomicAdd(dst + (v < maxv ? v : maxv), (unsigned long long)s);
        }
        acc = 0;
        __syncthreads();
    }
}

/* Gray histograms of more bins (16-bit: 65,536): one histogram a block, two u16 halves a word (128
 * KiB for 65,536 bins, where u32 counters would not fit). A unit holds fewer than 65,536 pixels;
 * before one could overflow a half, the block reads the largest count among the levels it has met
 * (their range) and folds into the tile's u64 counters only when that count plus the next unit
 * could reach 65,536, or at a change of tile. A warp whose active lanes' 16-byte vectors all hold
 * one level (flat backgrounds) adds once. */
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
        /* A warp whose active lanes all hold one level adds once: checked a vector at a time (all
         * V samples of every lane), each sample then counted on its own when not. */
        const auto fv = [&](const T *t) {
            constexpr uint32_t V = 16 / sizeof(T);
            uint32_t k[V];
            bool same = true;
#pragma unroll
            for (uint32_t e = 0; e < V; e++) {
                const uint32_t x = t[e];
                k[e] = hq_clahe_key(&x, 1, HQ_COLOR_LUMA, 0, maxv);
                vlo = k[e] < vlo ? k[e] : vlo;
                vhi = k[e] > vhi ? k[e] : vhi;
                same &= k[e] == k[0];
            }
            const unsigned mask = __activemask();
            const int first = __ffs(mask) - 1;
            const uint32_t k0 = __shfl_sync(mask, k[0], first);
            if (__all_sync(mask, same && k[0] == k0)) {
                if ((int)(threadIdx.x & 31) == first)
                    atomicAdd(&sh[k0 >> 1], (uint32_t)__popc(mask) * V << ((k0 & 1) * 16));
            } else {
#pragma unroll
                for (uint32_t e = 0; e < V; e++)
                    atomicAdd(&sh[k[e] >> 1], 1u << ((k[e] & 1) * 16));
            }
        };
        const auto fs = [&](uint32_t x) {
            const uint32_t v = hq_clahe_key(&x, 1, HQ_COLOR_LUMA, 0, maxv);
            vlo = v < vlo ? v : vlo;
            vhi = v > vhi ? v : vhi;
            atomicAdd(&sh[v >> 1], 1u << ((v & 1) * 16));
        };
        unit_each<2>(d, cols, un, threadIdx.x, L, threadIdx.y, BY, fv, fs);
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

} /* namespace */

#endif
