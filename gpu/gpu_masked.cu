/* gpu_masked.cu — histogram and remap of blocks with a mask plane (hq_block_data.mask): a pixel
 * whose mask byte is 0 is not counted, and the remap leaves it as it is.
 *
 * Plain per-pixel kernels, the per-pixel math from core/pixel.h as in every kernel here, so the
 * results equal the CPU engine's masked loops bit for bit. The histogram aggregates equal bins
 * within a warp (__match_any_sync) before its one global 64-bit atomic, which keeps a constant
 * counted region from serializing on one counter; masked-out pixels cost one byte read. */
#include "gpu_dispatch.cuh"

namespace hqg {

namespace {

constexpr int kMaskedThreads = 256;

template <int CH, int COLOR> struct NHist {
    static constexpr int value = (CH >= 3 && COLOR == HQ_COLOR_CHANNELS) ? 3 : 1;
};

/* The levels a pixel adds to: one per histogram of the mode. */
template <typename T, int CH, int COLOR>
__device__ __forceinline__ void pixel_keys(const T *px, uint32_t maxv, uint32_t key[3])
{
    if (CH < 3) {
        key[0] = hq_bin(px[0], maxv);
    } else if (COLOR == HQ_COLOR_CHANNELS) {
        key[0] = hq_bin(px[0], maxv);
        key[1] = hq_bin(px[1], maxv);
        key[2] = hq_bin(px[2], maxv);
    } else if (COLOR == HQ_COLOR_VALUE) {
        key[0] = hq_bin(hq_max3(px[0], px[1], px[2]), maxv);
    } else {
        key[0] = hq_luma_of_fx(hq_luma_fx(hq_bin(px[0], maxv), hq_bin(px[1], maxv), hq_bin(px[2], maxv)));
    }
}

template <typename T, int CH, int COLOR>
__global__ void __launch_bounds__(kMaskedThreads) k_hist_masked(const T *__restrict__ d, const uint8_t *__restrict__ mk,
                                                                 Geom g, Bins bn, u64c *gh)
{
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    /* base is the warp's first pixel, the same for all its lanes, so every lane of a warp runs the
     * same iterations and the warp-wide match below is always complete. */
    for (uint64_t base = g.p0 + (uint64_t)blockIdx.x * blockDim.x + (threadIdx.x & ~31u); base < g.p1;
         base += stride) {
        const uint64_t p = base + lane_id();
        const bool on = p < g.p1 && mk[p] != 0;
        uint32_t key[3] = {0, 0, 0};
        uint64_t seg = 0;
        if (on) {
            pixel_keys<T, CH, COLOR>(d + p * CH, bn.maxv, key);
            seg = p / g.seg_pixels;
        }
#pragma unroll
        for (int h = 0; h < NHist<CH, COLOR>::value; h++) {
            const unsigned long long idx = on ? seg * bn.nf + (uint64_t)h * bn.bins + key[h] : ~0ull;
            const uint32_t peers = __match_any_sync(kFull, idx);
            if (on && lane_id() == (uint32_t)(__ffs(peers) - 1))
                atomicAdd(gh + idx, (u64c)__popc(peers));
        }
    }
}

template <typename T, int CH, int COLOR>
__global__ void __launch_bounds__(kMaskedThreads) k_remap_masked(T *d, const uint8_t *__restrict__ mk, Geom g, Bins bn,
                                                                  const uint16_t *__restrict__ glut)
{
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t p = g.p0 + (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; p < g.p1; p += stride) {
        if (!mk[p])
            continue;
        const uint16_t *lut = glut + (p / g.seg_pixels) * bn.nf;
        T *px = d + p * CH;
        if (CH < 3) {
            px[0] = (T)lut[hq_bin(px[0], bn.maxv)];
            continue;
        }
        const uint32_t r = hq_bin(px[0], bn.maxv), gr = hq_bin(px[1], bn.maxv), b = hq_bin(px[2], bn.maxv);
        if (COLOR == HQ_COLOR_CHANNELS) {
            px[0] = (T)lut[r];
            px[1] = (T)lut[bn.bins + gr];
            px[2] = (T)lut[2 * bn.bins + b];
        } else if (COLOR == HQ_COLOR_VALUE) {
            const uint32_t v = hq_max3(r, gr, b), v2 = lut[v];
            px[0] = (T)hq_value_apply(r, v, v2);
            px[1] = (T)hq_value_apply(gr, v, v2);
            px[2] = (T)hq_value_apply(b, v, v2);
        } else {
            const uint32_t y_fx = hq_luma_fx(r, gr, b);
            const int32_t dd = (int32_t)((uint32_t)lut[hq_luma_of_fx(y_fx)] << HQ_LUMA_SHIFT) - (int32_t)y_fx;
            px[0] = (T)hq_luma_apply(r, dd, bn.maxv);
            px[1] = (T)hq_luma_apply(gr, dd, bn.maxv);
            px[2] = (T)hq_luma_apply(b, dd, bn.maxv);
        }
    }
}

/* Enough blocks to fill the device a few times over; the loops stride over the rest. */
unsigned grid_for(uint64_t n)
{
    const uint64_t want = (n + kMaskedThreads - 1) / kMaskedThreads;
    return (unsigned)(want < 8192 ? (want ? want : 1) : 8192);
}

template <typename T, int CH, int COLOR> struct HistMaskedOp {
    static cudaError_t run(const void *d, const uint8_t *mk, Geom g, Bins bn, u64c *gh, cudaStream_t st)
    {
        k_hist_masked<T, CH, COLOR><<<grid_for(g.p1 - g.p0), kMaskedThreads, 0, st>>>(static_cast<const T *>(d), mk, g,
                                                                                      bn, gh);
        return cudaGetLastError();
    }
};

template <typename T, int CH, int COLOR> struct RemapMaskedOp {
    static cudaError_t run(void *d, const uint8_t *mk, Geom g, Bins bn, const uint16_t *lut, cudaStream_t st)
    {
        k_remap_masked<T, CH, COLOR><<<grid_for(g.p1 - g.p0), kMaskedThreads, 0, st>>>(static_cast<T *>(d), mk, g, bn,
                                                                                       lut);
        return cudaGetLastError();
    }
};

} /* namespace */

cudaError_t hist_masked_launch(const hq_mode *m, const void *d_data, const uint8_t *d_mask, uint64_t p0, uint64_t p1,
                               uint64_t seg_pixels, unsigned long long *d_hist, cudaStream_t stream)
{
    if (!mode_ok(m) || seg_pixels == 0)
        return cudaErrorInvalidValue;
    if (p1 <= p0)
        return cudaSuccess;
    const Geom g = {p0, p1, seg_pixels};
    return dispatch<HistMaskedOp>(m, d_data, d_mask, g, make_plan(m).bn, d_hist, stream);
}

cudaError_t remap_masked_launch(const hq_mode *m, void *d_data, const uint8_t *d_mask, uint64_t p0, uint64_t p1,
                                uint64_t seg_pixels, const uint16_t *d_lut, cudaStream_t stream)
{
    if (!mode_ok(m) || seg_pixels == 0)
        return cudaErrorInvalidValue;
    if (p1 <= p0)
        return cudaSuccess;
    const Geom g = {p0, p1, seg_pixels};
    return dispatch<RemapMaskedOp>(m, d_data, d_mask, g, make_plan(m).bn, d_lut, stream);
}

} /* namespace hqg */
