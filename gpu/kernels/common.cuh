/* kernels/common.cuh — what every kernel of the GPU engine stands on: the launch geometry (Geom),
 * the mode's bin arithmetic (Bins), the shared-memory histogram layout, and Group, one 16-byte
 * vector of pixels loaded and stored as words. Unroll and smem_zero are the passes' common sizing
 * and set-up. Part of gpu_kernels.cuh, which says the whole contract. */
#ifndef HQ_GPU_KERNELS_COMMON_CUH
#define HQ_GPU_KERNELS_COMMON_CUH

#include <cooperative_groups.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <type_traits>

extern "C" {
#include "../../core/mode.h"
}
#include "../../core/lut_rule.h"
#include "../../core/pixel.h"

namespace hqg {

typedef unsigned long long u64c; /* the type CUDA's 64-bit atomicAdd takes */

constexpr uint32_t kFull = 0xffffffffu;
constexpr uint32_t kPieceMax = 1u << 30; /* keeps every u32 shared counter exact */
constexpr uint32_t kLutChunk = 1024;     /* LUT entries one CUDA block builds at a time */

/* Where a launch works: pixels [p0, p1) of a block whose segment s owns [s*sp, (s+1)*sp). */
struct Geom {
    uint64_t p0, p1, seg_pixels;
};

/* The mode's bin arithmetic; f = h*bins + bin is the flat index over the nhist histograms. */
struct Bins {
    uint32_t bins, maxv, nf, nhist;
};

/* Shared-memory histogram layout. */
struct HistLayout {
    uint32_t rep_shift; /* 1 << rep_shift replicas per bin (0 when windowed) */
    uint32_t wbins;     /* bins per window (nf when not windowed) */
    uint32_t nwin;      /* windows: CUDA blocks blockIdx % nwin == w count window w */
};

__device__ __forceinline__ uint32_t lane_id()
{
    return threadIdx.x & 31u;
}

__device__ __forceinline__ uint64_t round_up(uint64_t v, uint64_t m)
{
    return (v + m - 1) / m * m;
}

/* Part r of nr of [p0, p1): boundaries on multiples of gp pixels, so parts never share a vector. */
__device__ __forceinline__ void split_range(const Geom &g, uint32_t r, uint32_t nr, uint32_t gp, uint64_t &a,
                                            uint64_t &b)
{
    const uint64_t base = g.p0 / gp * gp;
    const uint64_t q = round_up((g.p1 - base + nr - 1) / nr, gp);
    a = base + r * q;
    b = a + q;
    a = a < g.p0 ? g.p0 : a;
    b = b > g.p1 ? g.p1 : b;
    if (a > b)
        a = b;
}

/* One 16-byte-aligned vector of GP pixels: CH uint4 loads, all indexing compile-time after unrolling. */
template <typename T, int CH> struct Group {
    static constexpr int GP = 16 / (int)sizeof(T); /* pixels per group */
    static constexpr int NW = 4 * CH;              /* 32-bit words per group */
    uint32_t w[NW];

    __device__ __forceinline__ void load(const uint4 *p)
    {
#pragma unroll
        for (int k = 0; k < CH; k++) {
            const uint4 v = __ldg(p + k);
            w[4 * k] = v.x;
            w[4 * k + 1] = v.y;
            w[4 * k + 2] = v.z;
            w[4 * k + 3] = v.w;
        }
    }
    __device__ __forceinline__ void load_rw(const uint4 *p)
    {
#pragma unroll
        for (int k = 0; k < CH; k++) {
            const uint4 v = p[k];
            w[4 * k] = v.x;
            w[4 * k + 1] = v.y;
            w[4 * k + 2] = v.z;
            w[4 * k + 3] = v.w;
        }
    }
    __device__ __forceinline__ void store(uint4 *p) const
    {
#pragma unroll
        for (int k = 0; k < CH; k++)
            p[k] = make_uint4(w[4 * k], w[4 * k + 1], w[4 * k + 2], w[4 * k + 3]);
    }
    __device__ __forceinline__ uint32_t sample(int i) const
    {
        if (sizeof(T) == 1)
            return (w[i >> 2] >> ((i & 3) * 8)) & 0xffu;
        return (w[i >> 1] >> ((i & 1) * 16)) & 0xffffu;
    }
    /* All GP samples of a one-channel group equal: one compare per word. */
    __device__ __forceinline__ bool uniform1() const
    {
        const uint32_t rep = sizeof(T) == 1 ? __byte_perm(w[0], 0, 0x0000) : __byte_perm(w[0], 0, 0x1010);
        bool u = w[0] == rep;
#pragma unroll
        for (int k = 1; k < NW; k++)
            u &= w[k] == rep;
        return u;
    }
};

/* Groups per thread per pass: 16 to 48 bytes in flight per thread, within 64 registers.
 * (Prefetching the next pass into registers was tried and bought nothing: NOTES-gpu.md, run 4.) */
template <typename T, int CH> struct Unroll {
    static constexpr int U = CH * sizeof(T) <= 2 ? 4 : CH * sizeof(T) <= 4 ? 2 : 1;
};

__device__ __forceinline__ void smem_zero(uint32_t *sh, uint32_t words)
{
    for (uint32_t i = threadIdx.x; i < words; i += blockDim.x)
        sh[i] = 0;
    __syncthreads();
}

} /* namespace hqg */

#endif
