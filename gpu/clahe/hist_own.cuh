/* clahe/hist_own.cuh — gray histograms of each tile's own rectangle (the piece's samples of the
 * tile, rows and columns contiguous; the reflected entries are hist_generic.cuh's) in units of at
 * most kUnitPixels (Unit, make_units), a persistent grid whose blocks each take a contiguous run of
 * units (plan_own / launch_own in work_lists.cuh): 16-byte row loads, several rows in flight, no
 * division or table lookup a pixel. Up to kLaneBins bins every lane counts in its own u16 halves
 * (no bank or counter shared, so shared-memory atomics never collide); more bins (16-bit) count in
 * one packed u16-pair histogram a block (128 KiB for 65,536 bins). Both fold into the tile's u64
 * counters when the tile changes or a half could overflow. */
#ifndef HQ_GPU_CLAHE_HIST_OWN_CUH
#define HQ_GPU_CLAHE_HIST_OWN_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "common.cuh"

namespace {

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

} /* namespace */

#endif
