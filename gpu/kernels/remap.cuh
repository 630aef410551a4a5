/* kernels/remap.cuh — the remap pass's device code: LUTs staged in shared memory (LutRead's three
 * layouts), remap_pixel from core/pixel.h (luma fused through luma8.cuh), and remap_tiles, which
 * deals a launch's tiles round-robin to the CUDA blocks and remaps each in place.
 * Part of gpu_kernels.cuh, which says the whole contract. */
#ifndef HQ_GPU_KERNELS_REMAP_CUH
#define HQ_GPU_KERNELS_REMAP_CUH

#include "common.cuh"
#include "luma8.cuh"

namespace hqg {

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
         * The slot holds the u16 entry; its low byte is the (uint8_t) cast the CPU engine makes. */
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

} /* namespace hqg */

#endif
