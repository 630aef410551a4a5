/* gpu_kernels.cuh — the device code of the GPU engine, shared by the engine's kernels and the
 * resident whole-equalization kernel (gpu_launch.cu and gpu_fused.cu instantiate them).
 *
 * Contract: every per-pixel result comes from core/pixel.h and every LUT entry from core/lut_rule.h,
 * so results are bit-identical to engine/cpu_engine.c and core/lut.c. A launch covers a pixel range
 * [p0, p1) of a block of equal segments, so many small images share one launch. Pixels travel as
 * 16-byte vectors (16 / sizeof(sample) pixels per vector and channel), with scalar heads and tails
 * where a segment does not start or end on a vector.
 *
 * Histograms (read-only pass): each CUDA block takes one contiguous part of the range and walks it
 * segment piece by segment piece. u32 counters privatized in shared memory (exact: a piece never
 * exceeds 2^30 pixels), merged once per piece into the segment's u64 histogram with atomics.
 *  - few bins (nhist*bins*4 <= 48 KiB): every bin replicated per lane (layout [bin][lane]), so a
 *    warp's 32 atomics hit 32 different banks whatever the values: a constant image costs the same
 *    as a natural one. 8-bit gray computes the counter's offset from the packed word directly;
 *  - many bins (16-bit): one window of up to 32768 bins (128 KiB) per CUDA block, blocks of a pair
 *    count the two halves of the same range at the same time (the second read hits L2); equal values
 *    are aggregated per thread, and per warp with __match_any_sync when the whole warp is uniform.
 * Remap (read-write pass, in place): tiles dealt round-robin to the CUDA blocks (one moving window
 * of memory: ~30% faster than contiguous ranges for an in-place pass on an H200), the LUT in shared
 * memory (one u32 slot per entry and lane for <= 256 bins, so lookups never conflict), results
 * packed back into words with byte permutes; luma and value remaps fused with their pixel math. */
#ifndef HQ_GPU_KERNELS_CUH
#define HQ_GPU_KERNELS_CUH

#include <cooperative_groups.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <type_traits>

extern "C" {
#include "../core/mode.h"
}
#include "../core/lut_rule.h"
#include "../core/pixel.h"

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

/* ---------------------------------------------------------------------------------------------
 * 8-bit RGB luma, all 8 bits significant: the same integers as core/pixel.h with fewer instructions
 * (the generic path spends ~40 a pixel, enough to make the remap issue-bound).
 *
 * luma4: y = hq_luma_fx(r, g, b) + HQ_LUMA_HALF of the 4 pixels packed in 3 words
 * (r0 g0 b0 r1 | g1 b1 r2 g2 | b2 r3 g3 b3) by byte dot products, each weight split into its high
 * and low byte (4899 = 19 * 256 + 35, ...): exact integers, no byte extraction. The luma bin is
 * y >> 14 (hq_luma_of_fx).
 *
 * remap_luma4: hq_luma_apply(c, (L << 14) - y_fx, 255) = clamp(c + L - Q, 0, 255) with
 * Q = (y - 1) >> 14, because (c << 14) + (L << 14) - y_fx + 2^13 = (c + L + 1) * 2^14 - y and
 * floor(-y / 2^14) = -1 - floor((y - 1) / 2^14) for y >= 1; t < 0 exactly when c + L - Q < 0.
 * The channels then go two at a time through 16-bit lanes (add, min 255, max 0: one DPX
 * instruction a pair on sm_90). L <= 510 (lut_stage CAP) keeps c + L - Q inside int16.
 * bench/gpu_bench.cu checks both against core/pixel.h on all 2^24 colours x 2^9 LUT values. */
template <typename T, int CH, int COLOR> struct Luma8 {
    static constexpr bool value = sizeof(T) == 1 && CH == 3 && COLOR == HQ_COLOR_LUMA;
};

__device__ __forceinline__ void luma4(uint32_t a, uint32_t b, uint32_t c, uint32_t y[4])
{
    constexpr uint32_t RH = HQ_LUMA_R >> 8, RL = HQ_LUMA_R & 255u, GH = HQ_LUMA_G >> 8, GL = HQ_LUMA_G & 255u,
                       BH = HQ_LUMA_B >> 8, BL = HQ_LUMA_B & 255u;
    static_assert(HQ_LUMA_R < 65536u && HQ_LUMA_G < 65536u && HQ_LUMA_B < 65536u, "weights split in two bytes");
    const uint32_t h0 = __dp4a(a, RH | GH << 8 | BH << 16, 0u);
    const uint32_t l0 = __dp4a(a, RL | GL << 8 | BL << 16, HQ_LUMA_HALF);
    const uint32_t h1 = __dp4a(b, GH | BH << 8, __dp4a(a, RH << 24, 0u));
    const uint32_t l1 = __dp4a(b, GL | BL << 8, __dp4a(a, RL << 24, HQ_LUMA_HALF));
    const uint32_t h2 = __dp4a(c, BH, __dp4a(b, RH << 16 | GH << 24, 0u));
    const uint32_t l2 = __dp4a(c, BL, __dp4a(b, RL << 16 | GL << 24, HQ_LUMA_HALF));
    const uint32_t h3 = __dp4a(c, RH << 8 | GH << 16 | BH << 24, 0u);
    const uint32_t l3 = __dp4a(c, RL << 8 | GL << 16 | BL << 24, HQ_LUMA_HALF);
    y[0] = (h0 << 8) + l0;
    y[1] = (h1 << 8) + l1;
    y[2] = (h2 << 8) + l2;
    y[3] = (h3 << 8) + l3;
}

/* Byte offset of luma bin y >> 14 in the [bin][32 lanes] u32 layout, lane part left out. */
__device__ __forceinline__ uint32_t luma_slot(uint32_t y)
{
    return (y >> 7) & 0x7f80u;
}

/* Remaps 4 packed pixels in place; lbase = the per-lane LUT slots (capped entries) + lane * 4. */
__device__ __forceinline__ void remap_luma4(uint32_t &a, uint32_t &b, uint32_t &c, const char *lbase)
{
    uint32_t y[4];
    luma4(a, b, c, y);
    int32_t k[4];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const uint32_t L = *reinterpret_cast<const uint32_t *>(lbase + luma_slot(y[i]));
        k[i] = (int32_t)L - (int32_t)((y[i] - 1u) >> HQ_LUMA_SHIFT);
    }
    const uint32_t K00 = __byte_perm(k[0], k[0], 0x1010), K01 = __byte_perm(k[0], k[1], 0x5410),
                   K11 = __byte_perm(k[1], k[1], 0x1010), K22 = __byte_perm(k[2], k[2], 0x1010),
                   K23 = __byte_perm(k[2], k[3], 0x5410), K33 = __byte_perm(k[3], k[3], 0x1010);
    constexpr uint32_t M = 0x00ff00ffu;
    const uint32_t o0 = __viaddmin_s16x2_relu(__byte_perm(a, 0, 0x4140), K00, M); /* r0 g0 */
    const uint32_t o1 = __viaddmin_s16x2_relu(__byte_perm(a, 0, 0x4342), K01, M); /* b0 r1 */
    const uint32_t o2 = __viaddmin_s16x2_relu(__byte_perm(b, 0, 0x4140), K11, M); /* g1 b1 */
    const uint32_t o3 = __viaddmin_s16x2_relu(__byte_perm(b, 0, 0x4342), K22, M); /* r2 g2 */
    const uint32_t o4 = __viaddmin_s16x2_relu(__byte_perm(c, 0, 0x4140), K23, M); /* b2 r3 */
    const uint32_t o5 = __viaddmin_s16x2_relu(__byte_perm(c, 0, 0x4342), K33, M); /* g3 b3 */
    a = __byte_perm(o0, o1, 0x6420);
    b = __byte_perm(o2, o3, 0x6420);
    c = __byte_perm(o4, o5, 0x6420);
}

/* ---------------------------------------------------------------------------------------------
 * Histogram counting */

template <bool WIN> struct Counter {
    uint32_t *sh;
    uint32_t shift, lane_off; /* replicated layout */
    uint32_t wlo, wn;         /* window [wlo, wlo + wn) of flat bins */

    __device__ __forceinline__ void add(uint32_t f, uint32_t n) const
    {
        if (WIN) {
            const uint32_t i = f - wlo;
            if (i < wn)
                atomicAdd(sh + i, n);
        } else {
            atomicAdd(sh + ((f << shift) | lane_off), n);
        }
    }
};

/* The flat bin of a one-histogram pixel (gray, value, luma), exactly as cpu_engine.c bins it.
 * FULLV is the largest sample value of T: with CLAMP false, hq_bin's clamp folds away. */
template <typename T, int CH, int COLOR, bool CLAMP, class S>
__device__ __forceinline__ uint32_t bin_of_pixel(const S &s, uint32_t maxv_rt)
{
    constexpr uint32_t FULLV = sizeof(T) == 1 ? 0xffu : 0xffffu;
    const uint32_t maxv = CLAMP ? maxv_rt : FULLV;
    if (CH < 3)
        return hq_bin(s(0), maxv);
    if (COLOR == HQ_COLOR_VALUE)
        return hq_bin(hq_max3(s(0), s(1), s(2)), maxv);
    const uint32_t r = hq_bin(s(0), maxv), g = hq_bin(s(1), maxv), b = hq_bin(s(2), maxv);
    return hq_luma_of_fx(hq_luma_fx(r, g, b));
}

template <typename T, int CH, int COLOR, bool CLAMP, bool WIN, class S>
__device__ __forceinline__ void count_pixel(const S &s, const Bins &bn, const Counter<WIN> &c)
{
    constexpr uint32_t FULLV = sizeof(T) == 1 ? 0xffu : 0xffffu;
    if (CH >= 3 && COLOR == HQ_COLOR_CHANNELS) {
        const uint32_t maxv = CLAMP ? bn.maxv : FULLV;
        c.add(hq_bin(s(0), maxv), 1);
        c.add(bn.bins + hq_bin(s(1), maxv), 1);
        c.add(2 * bn.bins + hq_bin(s(2), maxv), 1);
    } else {
        c.add(bin_of_pixel<T, CH, COLOR, CLAMP>(s, bn.maxv), 1);
    }
}

template <typename T, int CH, int COLOR, bool CLAMP, bool WIN>
__device__ __forceinline__ void count_scalar(const T *__restrict__ d, uint64_t i, const Bins &bn,
                                             const Counter<WIN> &c)
{
    const T *p = d + i * CH;
    count_pixel<T, CH, COLOR, CLAMP, WIN>([&](int k) { return (uint32_t)p[k]; }, bn, c);
}

template <typename T, int CH, int COLOR, bool CLAMP, bool WIN>
__device__ __forceinline__ void count_group(const Group<T, CH> &gr, bool valid, const Bins &bn,
                                            const Counter<WIN> &c)
{
    constexpr int GP = Group<T, CH>::GP;
    constexpr bool ONE = !(CH >= 3 && COLOR == HQ_COLOR_CHANNELS);
    if (WIN && ONE) {
        /* Many bins, one histogram: aggregate equal values before the (conflicting) atomics. */
        uint32_t f[GP];
#pragma unroll
        for (int p = 0; p < GP; p++)
            f[p] = bin_of_pixel<T, CH, COLOR, CLAMP>([&](int k) { return gr.sample(p * CH + k); }, bn.maxv);
        bool uni = valid;
#pragma unroll
        for (int p = 1; p < GP; p++)
            uni &= f[p] == f[0];
        if (__ballot_sync(kFull, uni) == kFull) {
            const uint32_t peers = __match_any_sync(kFull, f[0]);
            if (lane_id() == (uint32_t)(__ffs(peers) - 1))
                c.add(f[0], (uint32_t)__popc(peers) * GP);
            return;
        }
        if (!valid)
            return;
        if (uni) {
            c.add(f[0], GP);
            return;
        }
#pragma unroll
        for (int p = 0; p < GP; p++)
            c.add(f[p], 1);
        return;
    }
    if (!valid)
        return;
    if constexpr (Luma8<T, CH, COLOR>::value && !WIN && !CLAMP) {
        if (c.shift == 5) {
            char *base = reinterpret_cast<char *>(c.sh) + (lane_id() << 2);
#pragma unroll
            for (int j = 0; j < 4; j++) {
                uint32_t y[4];
                luma4(gr.w[3 * j], gr.w[3 * j + 1], gr.w[3 * j + 2], y);
#pragma unroll
                for (int i = 0; i < 4; i++)
                    atomicAdd(reinterpret_cast<uint32_t *>(base + luma_slot(y[i])), 1u);
            }
            return;
        }
    }
    if (CH == 1 && gr.uniform1()) {
        c.add(hq_bin(gr.sample(0), bn.maxv), GP);
        return;
    }
    if constexpr (sizeof(T) == 1 && CH == 1 && !WIN && !CLAMP) {
        /* 8-bit gray, all 8 bits significant (hq_bin is the identity): the counter's byte offset in
         * the [bin][32 lanes] layout, (v << 7) | lane << 2, comes from the packed word in one
         * shift and one mask per pixel instead of extract, shift and or. */
        if (c.shift == 5) {
            char *base = reinterpret_cast<char *>(c.sh) + (lane_id() << 2);
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const uint32_t w = gr.w[j];
                atomicAdd(reinterpret_cast<uint32_t *>(base + ((w << 7) & 0x7f80u)), 1u);
                atomicAdd(reinterpret_cast<uint32_t *>(base + ((w >> 1) & 0x7f80u)), 1u);
                atomicAdd(reinterpret_cast<uint32_t *>(base + ((w >> 9) & 0x7f80u)), 1u);
                atomicAdd(reinterpret_cast<uint32_t *>(base + ((w >> 17) & 0x7f80u)), 1u);
            }
            return;
        }
    }
#pragma unroll
    for (int p = 0; p < GP; p++)
        count_pixel<T, CH, COLOR, CLAMP, WIN>([&](int k) { return gr.sample(p * CH + k); }, bn, c);
}

/* Groups per thread per pass: 16 to 48 bytes in flight per thread, within 64 registers.
 * (Prefetching the next pass into registers was tried and bought nothing: NOTES-gpu.md, run 4.) */
template <typename T, int CH> struct Unroll {
    static constexpr int U = CH * sizeof(T) <= 2 ? 4 : CH * sizeof(T) <= 4 ? 2 : 1;
};

/* Counts pixels [a, e) of one segment piece into the shared counters. */
template <typename T, int CH, int COLOR, bool CLAMP, bool WIN>
__device__ void hist_span(const T *__restrict__ d, uint64_t a, uint64_t e, const Bins &bn, const Counter<WIN> &c)
{
    typedef Group<T, CH> G;
    constexpr int U = Unroll<T, CH>::U;
    const uint32_t tid = threadIdx.x, nt = blockDim.x;
    const uint64_t ga = round_up(a, G::GP), ge = e / G::GP * G::GP;
    if (ga >= ge) {
        for (uint64_t i = a + tid; i < e; i += nt)
            count_scalar<T, CH, COLOR, CLAMP, WIN>(d, i, bn, c);
        return;
    }
    for (uint64_t i = a + tid; i < ga; i += nt)
        count_scalar<T, CH, COLOR, CLAMP, WIN>(d, i, bn, c);
    for (uint64_t i = ge + tid; i < e; i += nt)
        count_scalar<T, CH, COLOR, CLAMP, WIN>(d, i, bn, c);
    const uint64_t n = (ge - ga) / G::GP;
    const uint4 *base = reinterpret_cast<const uint4 *>(d) + ga / G::GP * CH;
    /* Every thread runs the same trip count, so warp votes inside count_group are legal. */
    for (uint64_t k0 = 0; k0 < n; k0 += (uint64_t)nt * U) {
        G gr[U];
        bool ok[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const uint64_t k = k0 + (uint64_t)u * nt + tid;
            ok[u] = k < n;
            if (ok[u])
                gr[u].load(base + k * CH);
        }
#pragma unroll
        for (int u = 0; u < U; u++)
            count_group<T, CH, COLOR, CLAMP, WIN>(gr[u], ok[u], bn, c);
    }
}

/* Adds the shared counters of one piece into the segment's global histogram and re-zeroes them.
 * Reading replica (r + f) mod rep of bin f keeps a warp's reads on 32 different banks. */
__device__ __forceinline__ void hist_flush(uint32_t *sh, uint32_t wn, uint32_t shift, u64c *g)
{
    __syncthreads();
    const uint32_t rep = 1u << shift;
    for (uint32_t f = threadIdx.x; f < wn; f += blockDim.x) {
        uint32_t s = 0;
        for (uint32_t r = 0; r < rep; r++) {
            const uint32_t i = (f << shift) | ((r + f) & (rep - 1));
            s += sh[i];
            sh[i] = 0;
        }
        if (s)
            atomicAdd(g + f, (u64c)s);
    }
    __syncthreads();
}

__device__ __forceinline__ uint32_t hist_words(const Bins &bn, const HistLayout &L, uint32_t win)
{
    if (L.nwin > 1 || L.rep_shift == 0) {
        const uint32_t lo = win * L.wbins;
        return bn.nf - lo < L.wbins ? bn.nf - lo : L.wbins;
    }
    return bn.nf << L.rep_shift;
}

/* Histograms of pixels [a, b) (any segments) for window win; sh holds zeroed counters. */
template <typename T, int CH, int COLOR, bool WIN>
__device__ void hist_range(const T *__restrict__ d, uint64_t a, uint64_t b, uint64_t sp, const Bins &bn,
                           const HistLayout &L, uint32_t win, uint32_t *sh, u64c *ghist)
{
    Counter<WIN> c;
    c.sh = sh;
    c.shift = L.rep_shift;
    c.lane_off = lane_id() & ((1u << L.rep_shift) - 1);
    c.wlo = win * L.wbins;
    c.wn = hist_words(bn, L, win);
    const uint32_t wn = WIN ? c.wn : bn.nf;
    const bool clamp = bn.maxv != (sizeof(T) == 1 ? 0xffu : 0xffffu);
    uint64_t s = a / sp;
    while (a < b) {
        uint64_t e = (s + 1) * sp;
        e = e < b ? e : b;
        e = e - a > kPieceMax ? a + kPieceMax : e;
        if (clamp)
            hist_span<T, CH, COLOR, true, WIN>(d, a, e, bn, c);
        else
            hist_span<T, CH, COLOR, false, WIN>(d, a, e, bn, c);
        hist_flush(sh, wn, WIN ? 0 : L.rep_shift, ghist + s * bn.nf + c.wlo);
        a = e;
        if (a == (s + 1) * sp)
            s++;
    }
}

__device__ __forceinline__ void smem_zero(uint32_t *sh, uint32_t words)
{
    for (uint32_t i = threadIdx.x; i < words; i += blockDim.x)
        sh[i] = 0;
    __syncthreads();
}

/* ---------------------------------------------------------------------------------------------
 * Remap */

/* LUT reads: 0 replicated per lane in shared memory, one u32 slot per (entry, lane) so that the
 * slot's byte offset is (f << 7) | lane << 2 and a warp never conflicts (<= 256 bins per LUT);
 * 1 plain u16 in shared memory; 2 straight from global memory through the read-only cache (LUTs
 * too big to stage). */
template <int LUTK> struct LutRead {
    const void *p;
    uint32_t lane;
    __device__ __forceinline__ uint32_t operator()(uint32_t f) const
    {
        if (LUTK == 0)
            return static_cast<const uint32_t *>(p)[(f << 5) | lane];
        if (LUTK == 1)
            return static_cast<const uint16_t *>(p)[f];
        return __ldg(static_cast<const uint16_t *>(p) + f);
    }
};

/* Shared-memory bytes of nf LUT entries in layout LUTK. */
__host__ __device__ __forceinline__ uint32_t lut_smem_bytes(int lutk, uint32_t nf)
{
    return lutk == 0 ? nf * 128u : lutk == 1 ? nf * 2u : 0u;
}

/* Copies nf LUT entries (u16, nf even) from g into shared layout LUTK (0 or 1). CAP (8-bit luma
 * only) stores min(entry, 510) in the per-lane slots: every 8-bit luma result of an entry >= 510 is
 * the channel maximum either way (c + L - Q >= 510 - 255), and the capped value fits the 16-bit
 * lanes of remap_luma4. */
template <int LUTK, bool CAP = false>
__device__ __forceinline__ void lut_stage(void *sh, const uint16_t *g, uint32_t nf)
{
    uint32_t *s32 = static_cast<uint32_t *>(sh);
    if (LUTK == 0) {
        uint4 *s128 = static_cast<uint4 *>(sh);
        for (uint32_t i = threadIdx.x; i < nf * 8u; i += blockDim.x) {
            uint32_t v = g[i >> 3];
            if (CAP)
                v = v < 510u ? v : 510u;
            s128[i] = make_uint4(v, v, v, v);
        }
    } else if (LUTK == 1) {
        const uint32_t *g32 = reinterpret_cast<const uint32_t *>(g);
        for (uint32_t i = threadIdx.x; i < nf / 2u; i += blockDim.x)
            s32[i] = g32[i];
    }
}

template <typename T, int CH, int COLOR, bool CLAMP, class L, class S, class W>
__device__ __forceinline__ void remap_pixel(const S &s, const W &w, const Bins &bn, const L &lut)
{
    constexpr uint32_t FULLV = sizeof(T) == 1 ? 0xffu : 0xffffu;
    const uint32_t maxv = CLAMP ? bn.maxv : FULLV;
    if (CH < 3) {
        w(0, lut(hq_bin(s(0), maxv)));
    } else if (COLOR == HQ_COLOR_CHANNELS) {
        w(0, lut(hq_bin(s(0), maxv)));
        w(1, lut(bn.bins + hq_bin(s(1), maxv)));
        w(2, lut(2 * bn.bins + hq_bin(s(2), maxv)));
    } else if (COLOR == HQ_COLOR_VALUE) {
        const uint32_t r = hq_bin(s(0), maxv), g = hq_bin(s(1), maxv), b = hq_bin(s(2), maxv);
        const uint32_t v = hq_max3(r, g, b), v2 = lut(v);
        w(0, hq_value_apply(r, v, v2));
        w(1, hq_value_apply(g, v, v2));
        w(2, hq_value_apply(b, v, v2));
    } else {
        const uint32_t r = hq_bin(s(0), maxv), g = hq_bin(s(1), maxv), b = hq_bin(s(2), maxv);
        const uint32_t y_fx = hq_luma_fx(r, g, b);
        const int32_t dl = (int32_t)((uint32_t)lut(hq_luma_of_fx(y_fx)) << HQ_LUMA_SHIFT) - (int32_t)y_fx;
        /* hq_luma_apply clamps to the mode's maxv, not T's: always the runtime value. */
        w(0, hq_luma_apply(r, dl, bn.maxv));
        w(1, hq_luma_apply(g, dl, bn.maxv));
        w(2, hq_luma_apply(b, dl, bn.maxv));
    }
}

template <typename T, int CH, int COLOR, bool CLAMP, class L>
__device__ __forceinline__ void remap_scalar(T *d, uint64_t i, const Bins &bn, const L &lut)
{
    T *p = d + i * CH;
    remap_pixel<T, CH, COLOR, CLAMP>([&](int k) { return (uint32_t)p[k]; }, [&](int k, uint32_t v) { p[k] = (T)v; },
                                     bn, lut);
}

template <typename T, int CH, int COLOR, bool CLAMP, class L>
__device__ __forceinline__ void remap_group(Group<T, CH> &gr, const Bins &bn, const L &lut)
{
    if constexpr (sizeof(T) == 1 && CH == 1 && !CLAMP && std::is_same<L, LutRead<0>>::value) {
        /* 8-bit gray, all 8 bits significant: slot offsets straight from the packed word (one shift
         * and one mask a pixel), the four looked-up bytes packed back with three byte permutes.
         * The slot holds the u16 entry; its low byte is the (uint8_t) cast cpu_engine.c makes. */
        const char *base = static_cast<const char *>(lut.p) + (lut.lane << 2);
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const uint32_t w = gr.w[j];
            const uint32_t v0 = *reinterpret_cast<const uint32_t *>(base + ((w << 7) & 0x7f80u));
            const uint32_t v1 = *reinterpret_cast<const uint32_t *>(base + ((w >> 1) & 0x7f80u));
            const uint32_t v2 = *reinterpret_cast<const uint32_t *>(base + ((w >> 9) & 0x7f80u));
            const uint32_t v3 = *reinterpret_cast<const uint32_t *>(base + ((w >> 17) & 0x7f80u));
            gr.w[j] = __byte_perm(__byte_perm(v0, v1, 0x0040), __byte_perm(v2, v3, 0x0040), 0x5410);
        }
    } else if constexpr (Luma8<T, CH, COLOR>::value && !CLAMP && std::is_same<L, LutRead<0>>::value) {
        const char *base = static_cast<const char *>(lut.p) + (lut.lane << 2);
#pragma unroll
        for (int j = 0; j < 4; j++)
            remap_luma4(gr.w[3 * j], gr.w[3 * j + 1], gr.w[3 * j + 2], base);
    } else {
        /* Results land in o[] (samples left alone, alpha, keep their value) and are packed back
         * with byte permutes: cheaper than masking each one into its word. */
        constexpr int NS = Group<T, CH>::GP * CH;
        uint32_t o[NS];
#pragma unroll
        for (int i = 0; i < NS; i++)
            o[i] = gr.sample(i);
#pragma unroll
        for (int p = 0; p < Group<T, CH>::GP; p++)
            remap_pixel<T, CH, COLOR, CLAMP>([&](int k) { return gr.sample(p * CH + k); },
                                             [&](int k, uint32_t v) { o[p * CH + k] = v; }, bn, lut);
#pragma unroll
        for (int j = 0; j < Group<T, CH>::NW; j++) {
            if (sizeof(T) == 1)
                gr.w[j] = __byte_perm(__byte_perm(o[4 * j], o[4 * j + 1], 0x0040),
                                      __byte_perm(o[4 * j + 2], o[4 * j + 3], 0x0040), 0x5410);
            else
                gr.w[j] = __byte_perm(o[2 * j], o[2 * j + 1], 0x5410);
        }
    }
}

/* Groups per thread per remap pass: the value and per-channel remaps of colour keep more
 * registers per group (three results a pixel, 64-bit divisions for value), so one group. */
template <typename T, int CH, int COLOR> struct RemapUnroll {
    static constexpr int U = (CH >= 3 && COLOR != HQ_COLOR_LUMA) ? 1 : Unroll<T, CH>::U;
};

/* Pixels of one remap tile: what a block covers in one pass. */
template <typename T, int CH, int COLOR>
__host__ __device__ __forceinline__ uint64_t remap_tile_pixels(uint32_t threads)
{
    return (uint64_t)threads * RemapUnroll<T, CH, COLOR>::U * Group<T, CH>::GP;
}

/* Tiles of a launch over [p0, p1): every segment from p0's to p1's cut into tiles of tp pixels
 * (tiles never straddle segments; those outside [p0, p1) come out empty). */
__host__ __device__ __forceinline__ uint64_t remap_tiles_count(uint64_t p0, uint64_t p1, uint64_t sp, uint64_t tp)
{
    return ((p1 - 1) / sp - p0 / sp + 1) * ((sp + tp - 1) / tp);
}

/* Tile j of segment s, clipped to the launch: pixels [a, e), whole vectors [ga, ge) (pixels). */
template <int GP>
__device__ __forceinline__ void tile_span(uint64_t s, uint64_t j, const Geom &g, uint64_t tp, uint64_t &a,
                                          uint64_t &e, uint64_t &ga, uint64_t &ge)
{
    const uint64_t sp = g.seg_pixels, lo = s * sp + j * tp, hi = (s + 1) * sp;
    a = lo < g.p0 ? g.p0 : lo;
    e = lo + tp < hi ? lo + tp : hi;
    e = e > g.p1 ? g.p1 : e;
    if (a > e)
        a = e;
    ga = round_up(a, GP);
    ge = e / GP * GP;
    if (ga > ge)
        ga = ge = e; /* no whole vector: all scalar */
}

/* Remaps [p0, p1) in place; `first` runs once before anything (the resident pipeline's barrier
 * and LUT build).
 *
 * Tiles go round-robin over the CUDA blocks (tile i to block i mod grid), so that at any moment
 * the whole grid reads and writes one narrow window of memory: an in-place pass runs ~30% faster
 * that way on an H200 than with one contiguous range per block (bench/NOTES-gpu.md, run 2). A
 * tile is tracked as (segment s, tile j in it), stepped without divisions. The LUT of a segment
 * is staged in shared memory when the block's tiles enter it (staged: it is there already). REV
 * walks the tiles from the last. */
template <typename T, int CH, int COLOR, int LUTK, bool REV, class F>
__device__ void remap_tiles(T *d, const Geom &g, const Bins &bn, const uint16_t *__restrict__ glut, void *sh,
                            bool staged, F first)
{
    typedef Group<T, CH> G;
    constexpr int U = RemapUnroll<T, CH, COLOR>::U, GP = G::GP;
    const uint32_t tid = threadIdx.x, nt = blockDim.x;
    const uint64_t sp = g.seg_pixels, tp = remap_tile_pixels<T, CH, COLOR>(nt);
    /* Tile counts fit 32 bits: remap_launch and equalize_fused refuse launches of 2^31 tiles. */
    const uint64_t s0 = g.p0 / sp, tps64 = (sp + tp - 1) / tp;
    const uint32_t ntiles = (uint32_t)remap_tiles_count(g.p0, g.p1, sp, tp);
    const uint32_t tps = tps64 < (1ull << 31) ? (uint32_t)tps64 : (1u << 31);
    const uint32_t dq = gridDim.x / tps, dr = gridDim.x % tps;
    const bool clamp = bn.maxv != (sizeof(T) == 1 ? 0xffu : 0xffffu);
    uint4 *const vbase = reinterpret_cast<uint4 *>(d);
    LutRead<LUTK> lr;
    lr.lane = lane_id();
    lr.p = sh;
    uint64_t cur_s = ~0ull;
    first();
    const uint32_t t0 = blockIdx.x < ntiles ? (REV ? ntiles - 1 - blockIdx.x : blockIdx.x) : 0;
    uint64_t s = s0 + t0 / tps;
    uint32_t j = t0 % tps;
    for (uint32_t i = blockIdx.x; i < ntiles; i += gridDim.x) {
        uint64_t a, e, ga, ge;
        tile_span<GP>(s, j, g, tp, a, e, ga, ge);
        if (a < e) {
            if (!staged && s != cur_s) {
                if (LUTK == 2) {
                    lr.p = glut + s * bn.nf;
                } else {
                    __syncthreads();
                    lut_stage<LUTK, Luma8<T, CH, COLOR>::value>(sh, glut + s * bn.nf, bn.nf);
                    __syncthreads();
                }
                cur_s = s;
            }
            G gr[U];
#pragma unroll
            for (int u = 0; u < U; u++) {
                const uint64_t k = ga / GP + (uint64_t)u * nt + tid;
                if (k < ge / GP)
                    gr[u].load_rw(vbase + k * CH);
            }
            for (uint64_t p = a + tid; p < ga; p += nt)
                clamp ? remap_scalar<T, CH, COLOR, true>(d, p, bn, lr) : remap_scalar<T, CH, COLOR, false>(d, p, bn, lr);
            for (uint64_t p = ge + tid; p < e; p += nt)
                clamp ? remap_scalar<T, CH, COLOR, true>(d, p, bn, lr) : remap_scalar<T, CH, COLOR, false>(d, p, bn, lr);
#pragma unroll
            for (int u = 0; u < U; u++) {
                const uint64_t k = ga / GP + (uint64_t)u * nt + tid;
                if (k < ge / GP) {
                    if (clamp)
                        remap_group<T, CH, COLOR, true>(gr[u], bn, lr);
                    else
                        remap_group<T, CH, COLOR, false>(gr[u], bn, lr);
                    gr[u].store(vbase + k * CH);
                }
            }
        }
        if (!REV) {
            j += dr;
            s += dq;
            if (j >= tps) {
                j -= tps;
                s++;
            }
        } else {
            if (j < dr) {
                j += tps;
                s--;
            }
            j -= dr;
            s -= dq;
        }
    }
}

struct NoOp {
    __device__ __forceinline__ void operator()() const {}
};

/* ---------------------------------------------------------------------------------------------
 * Block-wide reductions and the device LUT build (equalize), for the resident pipeline */

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
