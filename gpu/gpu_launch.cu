/* gpu_launch.cu — the engine's kernels (histogram, remap, device LUT build) and their launches.
 * See gpu_kernels.cuh for the device code and gpu_launch.h for the contract. */
#include "gpu_dispatch.cuh"

namespace hqg {

template <typename T, int CH, int COLOR, bool WIN>
__global__ void __launch_bounds__(WIN ? 1024 : 512, WIN ? 1 : 2) k_hist(const T *__restrict__ d, Geom g, Bins bn, HistLayout L, u64c *gh)
{
    extern __shared__ uint4 smem_u4[];
    uint32_t *sh = reinterpret_cast<uint32_t *>(smem_u4);
    const uint32_t nr = gridDim.x / L.nwin, r = blockIdx.x / L.nwin, win = blockIdx.x % L.nwin;
    uint64_t a, b;
    split_range(g, r, nr, Group<T, CH>::GP, a, b);
    if (a >= b)
        return;
    smem_zero(sh, hist_words(bn, L, win));
    hist_range<T, CH, COLOR, WIN>(d, a, b, g.seg_pixels, bn, L, win, sh, gh);
}

template <typename T, int CH, int COLOR, int LUTK>
__global__ void __launch_bounds__(LUTK == 1 ? 1024 : 512, LUTK == 1 ? 1 : 2)
    k_remap(T *d, Geom g, Bins bn, const uint16_t *__restrict__ glut)
{
    extern __shared__ uint4 smem_u4[];
    remap_tiles<T, CH, COLOR, LUTK, false>(d, g, bn, glut, smem_u4, false, NoOp());
}

/* One item = one chunk of kLutChunk entries of one histogram (segment-major, then h). */
__global__ void __launch_bounds__(1024) k_lut(const u64c *gh, uint64_t items, uint32_t bins, int method, uint16_t *glut)
{
    __shared__ Scratch sc;
    const uint32_t cb = bins < kLutChunk ? bins : kLutChunk, nch = bins / cb;
    for (uint64_t it = blockIdx.x; it < items; it += gridDim.x) {
        const uint64_t hidx = it / nch;
        const uint32_t c = (uint32_t)(it % nch);
        lut_build_chunk(method, gh + hidx * bins, bins, c * cb, cb, glut + hidx * bins + (uint64_t)c * cb, sc);
    }
}

static uint32_t blocks_for(uint64_t pixels, uint64_t min_px, int resident)
{
    const uint64_t want = (pixels + min_px - 1) / min_px;
    const uint64_t cap = resident > 0 ? (uint64_t)resident : 1;
    return (uint32_t)(want < 1 ? 1 : want > cap ? cap : want);
}

template <typename T, int CH, int COLOR> struct HistOp {
    template <bool WIN> static cudaError_t go(const Plan &p, const void *d, const Geom &g, u64c *gh, cudaStream_t st)
    {
        const int threads = WIN ? 1024 : 512;
        int res = 0;
        cudaError_t e = resident_blocks<k_hist<T, CH, COLOR, WIN>>(threads, p.hist_smem, &res);
        if (e != cudaSuccess)
            return e;
        const uint32_t words = WIN ? p.L.wbins : p.hist_smem / 4u;
        const uint32_t nr = blocks_for(g.p1 - g.p0, words * 8u > 16384u ? words * 8u : 16384u,
                                       res / (int)p.L.nwin);
        k_hist<T, CH, COLOR, WIN><<<nr * p.L.nwin, threads, p.hist_smem, st>>>(static_cast<const T *>(d), g, p.bn,
                                                                              p.L, gh);
        return cudaGetLastError();
    }
    static cudaError_t run(const Plan &p, const void *d, Geom g, u64c *gh, cudaStream_t st)
    {
        if constexpr (sizeof(T) == 2) {
            if (p.win)
                return go<true>(p, d, g, gh, st);
        }
        return go<false>(p, d, g, gh, st);
    }
};

template <typename T, int CH, int COLOR> struct RemapOp {
    template <int LUTK>
    static cudaError_t go(const Plan &p, void *d, const Geom &g, const uint16_t *lut, cudaStream_t st)
    {
        const int threads = LUTK == 1 ? 1024 : 512;
        const uint32_t smem = lut_smem_bytes(LUTK, p.bn.nf);
        int res = 0;
        cudaError_t e = resident_blocks<k_remap<T, CH, COLOR, LUTK>>(threads, smem, &res);
        if (e != cudaSuccess)
            return e;
        const uint64_t tiles = remap_tiles_count(g.p0, g.p1, g.seg_pixels, remap_tile_pixels<T, CH, COLOR>(threads));
        if (tiles >= (1ull << 31))
            return cudaErrorInvalidValue;
        const uint32_t nb = (uint32_t)(tiles < (uint64_t)res ? tiles : (uint64_t)res);
        k_remap<T, CH, COLOR, LUTK><<<nb, threads, smem, st>>>(static_cast<T *>(d), g, p.bn, lut);
        return cudaGetLastError();
    }
    static cudaError_t run(const Plan &p, void *d, Geom g, const uint16_t *lut, cudaStream_t st)
    {
        if constexpr (sizeof(T) == 2) {
            if (p.lutk == 1)
                return go<1>(p, d, g, lut, st);
            if (p.lutk == 2)
                return go<2>(p, d, g, lut, st);
        }
        return go<0>(p, d, g, lut, st);
    }
};

cudaError_t hist_launch(const hq_mode *m, const void *d_data, uint64_t p0, uint64_t p1, uint64_t seg_pixels,
                        unsigned long long *d_hist, cudaStream_t stream)
{
    if (!mode_ok(m) || seg_pixels == 0)
        return cudaErrorInvalidValue;
    if (p1 <= p0)
        return cudaSuccess;
    const Plan p = make_plan(m);
    const Geom g = {p0, p1, seg_pixels};
    return dispatch<HistOp>(m, p, d_data, g, d_hist, stream);
}

cudaError_t remap_launch(const hq_mode *m, void *d_data, uint64_t p0, uint64_t p1, uint64_t seg_pixels,
                         const uint16_t *d_lut, cudaStream_t stream)
{
    if (!mode_ok(m) || seg_pixels == 0)
        return cudaErrorInvalidValue;
    if (p1 <= p0)
        return cudaSuccess;
    const Plan p = make_plan(m);
    const Geom g = {p0, p1, seg_pixels};
    return dispatch<RemapOp>(m, p, d_data, g, d_lut, stream);
}

cudaError_t lut_build_launch(const hq_mode *m, int method, const unsigned long long *d_hist, uint64_t nseg,
                             uint16_t *d_lut, cudaStream_t stream)
{
    if (!mode_ok(m) || (method != HQ_METHOD_EQUALIZE && method != HQ_METHOD_STRETCH))
        return cudaErrorInvalidValue;
    if (nseg == 0)
        return cudaSuccess;
    const uint32_t bins = hq_mode_bins(m), cb = bins < kLutChunk ? bins : kLutChunk;
    const uint64_t items = nseg * hq_mode_nhist(m) * (bins / cb);
    int res = 0;
    cudaError_t e = resident_blocks<k_lut>(1024, 0, &res);
    if (e != cudaSuccess)
        return e;
    const uint32_t nb = (uint32_t)(items < (uint64_t)res ? items : (uint64_t)res);
    k_lut<<<nb, cb < 1024 ? (cb < 64 ? 64 : cb) : 1024, 0, stream>>>(d_hist, items, bins, method, d_lut);
    return cudaGetLastError();
}

cudaError_t lut_equalize_launch(const hq_mode *m, const unsigned long long *d_hist, uint64_t nseg, uint16_t *d_lut,
                                cudaStream_t stream)
{
    return lut_build_launch(m, HQ_METHOD_EQUALIZE, d_hist, nseg, d_lut, stream);
}

/* Every colour at each of the 4 positions of a packed group (thread i holds colour i at position 0
 * and i ^ p * 0x5a5a5a at position p: a bijection per position), every LUT value 0..511 per bin
 * (slot of bin Y holds (Y + o) mod 512 capped at 510, o = 0..511), against core/pixel.h. */
__global__ void __launch_bounds__(256) k_luma8_selftest(unsigned long long *bad)
{
    __shared__ uint32_t slots[256 * 32];
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    uint32_t r[4], g[4], b[4], yb[4], w[3] = {0, 0, 0};
    for (int p = 0; p < 4; p++) {
        const uint32_t col = (i ^ (uint32_t)p * 0x5a5a5au) & 0xffffffu;
        r[p] = col & 255u;
        g[p] = (col >> 8) & 255u;
        b[p] = col >> 16;
        const uint32_t bytes[3] = {r[p], g[p], b[p]};
        for (int k = 0; k < 3; k++)
            w[(3 * p + k) / 4] |= bytes[k] << (8 * ((3 * p + k) % 4));
        yb[p] = hq_luma_of_fx(hq_luma_fx(r[p], g[p], b[p]));
    }
    unsigned long long nbad = 0;
    uint32_t y[4];
    luma4(w[0], w[1], w[2], y);
    for (int p = 0; p < 4; p++)
        nbad += (luma_slot(y[p]) >> 7) != yb[p];
    for (uint32_t o = 0; o < 512; o++) {
        __syncthreads();
        for (uint32_t j = threadIdx.x; j < 256 * 32; j += blockDim.x) {
            const uint32_t L = ((j >> 5) + o) & 511u;
            slots[j] = L < 510u ? L : 510u;
        }
        __syncthreads();
        uint32_t v[3] = {w[0], w[1], w[2]};
        remap_luma4(v[0], v[1], v[2], reinterpret_cast<const char *>(slots) + (lane_id() << 2));
        for (int p = 0; p < 4; p++) {
            const uint32_t yfx = hq_luma_fx(r[p], g[p], b[p]);
            const int32_t dl = (int32_t)(((yb[p] + o) & 511u) << HQ_LUMA_SHIFT) - (int32_t)yfx;
            const uint32_t ref[3] = {hq_luma_apply(r[p], dl, 255u), hq_luma_apply(g[p], dl, 255u),
                                     hq_luma_apply(b[p], dl, 255u)};
            for (int k = 0; k < 3; k++) {
                const uint32_t at = 3 * p + k;
                nbad += ((v[at / 4] >> (8 * (at % 4))) & 255u) != ref[k];
            }
        }
    }
    if (nbad)
        atomicAdd(bad, nbad);
}

cudaError_t luma8_selftest(unsigned long long *bad)
{
    unsigned long long *d = nullptr;
    cudaError_t e;
    *bad = ~0ull;
    if ((e = cudaMalloc(&d, sizeof *d)) != cudaSuccess)
        return e;
    if ((e = cudaMemset(d, 0, sizeof *d)) == cudaSuccess) {
        k_luma8_selftest<<<(1u << 24) / 256u, 256>>>(d);
        if ((e = cudaGetLastError()) == cudaSuccess && (e = cudaDeviceSynchronize()) == cudaSuccess)
            e = cudaMemcpy(bad, d, sizeof *d, cudaMemcpyDeviceToHost);
    }
    cudaFree(d);
    return e;
}

cudaError_t kernels_usable(void)
{
    cudaFuncAttributes fa;
    return cudaFuncGetAttributes(&fa, k_lut);
}

} /* namespace hqg */
