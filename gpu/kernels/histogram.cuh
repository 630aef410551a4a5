/* kernels/histogram.cuh — the histogram pass's device code: pixels binned as core/pixel.h bins
 * them, counted into u32 counters privatized in shared memory (replicated per lane, or one window of
 * bins), hist_range walking a block's part of a launch segment piece by piece and folding each
 * piece into the segment's u64 histogram. Part of gpu_kernels.cuh, which says the whole contract. */
#ifndef HQ_GPU_KERNELS_HISTOGRAM_CUH
#define HQ_GPU_KERNELS_HISTOGRAM_CUH

#include "common.cuh"
#include "luma8.cuh"

namespace hqg {

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

/* The flat bin of a one-histogram pixel (gray, value, luma), exactly as the CPU engine (engine/cpu/histogram.c) bins it.
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

} /* namespace hqg */

#endif
