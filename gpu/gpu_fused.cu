/* gpu_fused.cu — the whole equalization of a device-resident block in one cooperative launch
 * (histogram -> grid barrier -> LUT -> remap), for data that already lives on the GPU: no launch
 * gaps between the stages, and the remap walks the tiles from the end, so that it
 * re-reads first what is most likely still in L2.
 *
 * One segment of up to 1024 bins: every CUDA block builds the LUT itself, straight from the global
 * histogram (one barrier in all). Otherwise the LUT chunks of all segments are spread over the
 * grid and a second barrier publishes them. */
#include "gpu_dispatch.cuh"

namespace hqg {

namespace cg = cooperative_groups;

/* 1024 threads when shared memory allows one block per multiprocessor (many bins); else 512, two
 * blocks per multiprocessor where 64 registers suffice, one (128 registers) for colour. */
template <typename T, int CH, int COLOR, bool WIN, int LUTK>
__global__ void __launch_bounds__(WIN || LUTK == 1 ? 1024 : 512, WIN || LUTK == 1 || CH >= 3 ? 1 : 2)
    k_equalize(T *d, Geom g, Bins bn, HistLayout L, u64c *gh, u64c *gh_next, uint64_t next_n, uint16_t *glut,
               int otf)
{
    extern __shared__ uint4 smem_u4[];
    __shared__ Scratch sc;
    uint32_t *sh = reinterpret_cast<uint32_t *>(smem_u4);
    uint16_t *sh16 = reinterpret_cast<uint16_t *>(smem_u4);
    constexpr int GP = Group<T, CH>::GP;
    const uint64_t sp = g.seg_pixels;

    if (gh_next)
        for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < next_n;
             i += (uint64_t)gridDim.x * blockDim.x)
            gh_next[i] = 0;

    {
        const uint32_t nr = gridDim.x / L.nwin, r = blockIdx.x / L.nwin, win = blockIdx.x % L.nwin;
        uint64_t a, b;
        split_range(g, r, nr, GP, a, b);
        if (r < nr && a < b) {
            smem_zero(sh, hist_words(bn, L, win));
            hist_range<T, CH, COLOR, WIN>(d, a, b, sp, bn, L, win, sh, gh);
        }
    }
    auto barrier_and_lut = [&]() {
        cg::this_grid().sync();
        if (!otf) {
            const uint32_t cb = bn.bins < kLutChunk ? bn.bins : kLutChunk, nch = bn.bins / cb;
            const uint64_t items = (g.p1 / sp) * bn.nhist * nch;
            for (uint64_t it = blockIdx.x; it < items; it += gridDim.x) {
                const uint64_t hidx = it / nch;
                const uint32_t c = (uint32_t)(it % nch);
                lut_equalize_chunk(gh + hidx * bn.bins, bn.bins, c * cb, cb,
                                   glut + hidx * bn.bins + (uint64_t)c * cb, sc);
            }
            cg::this_grid().sync();
        } else {
            /* One segment: every block builds the LUT from the global histogram itself (no second
             * barrier); plain first, then (<= 256 bins) spread into the per-lane layout. */
            uint16_t *plain = LUTK == 0 ? sh16 + lut_smem_bytes(0, bn.nf) / 2 : sh16;
            for (uint32_t h = 0; h < bn.nhist; h++)
                lut_equalize_chunk(gh + h * bn.bins, bn.bins, 0, bn.bins, plain + h * bn.bins, sc);
            __syncthreads();
            if (LUTK == 0) {
                lut_stage<0>(sh16, plain, bn.nf);
                __syncthreads();
            }
        }
    };
    remap_tiles<T, CH, COLOR, LUTK, true>(d, g, bn, glut, sh16, otf != 0, barrier_and_lut);
}

struct FusedArgs {
    void *d;
    Geom g;
    u64c *gh, *gh_next;
    uint16_t *glut;
};

template <typename T, int CH, int COLOR> struct FusedOp {
    template <bool WIN, int LUTK> static cudaError_t go(const Plan &p, const FusedArgs &fa, cudaStream_t st)
    {
        const bool otf = p.bn.bins <= kLutChunk && fa.g.p1 == fa.g.seg_pixels;
        const uint32_t lut_smem = lut_smem_bytes(LUTK, p.bn.nf) + (otf && LUTK == 0 ? p.bn.nf * 2u : 0u);
        const uint32_t smem = p.hist_smem > lut_smem ? p.hist_smem : lut_smem;
        const int threads = (WIN || LUTK == 1) ? 1024 : 512;
        int res = 0;
        cudaError_t e = resident_blocks<k_equalize<T, CH, COLOR, WIN, LUTK>>(threads, smem, &res);
        if (e != cudaSuccess)
            return e;
        const int grid = res / (int)p.L.nwin * (int)p.L.nwin;
        const Geom &gg = fa.g;
        if (remap_tiles_count(gg.p0, gg.p1, gg.seg_pixels, remap_tile_pixels<T, CH, COLOR>(threads)) >= (1ull << 31))
            return cudaErrorInvalidValue;
        if (grid < 1)
            return cudaErrorInvalidConfiguration;
        T *d = static_cast<T *>(fa.d);
        Geom g = fa.g;
        Bins bn = p.bn;
        HistLayout L = p.L;
        u64c *gh = fa.gh, *ghn = fa.gh_next;
        uint64_t next_n = (g.p1 / g.seg_pixels) * p.bn.nf;
        uint16_t *glut = fa.glut;
        int iotf = otf ? 1 : 0;
        void *args[] = {&d, &g, &bn, &L, &gh, &ghn, &next_n, &glut, &iotf};
        return cudaLaunchCooperativeKernel((const void *)k_equalize<T, CH, COLOR, WIN, LUTK>, dim3(grid),
                                           dim3(threads), args, smem, st);
    }
    static cudaError_t run(const Plan &p, const FusedArgs &fa, cudaStream_t st)
    {
        if constexpr (sizeof(T) == 2) {
            const int lk = p.bn.bins <= 256 ? 0 : p.bn.nf * 2u <= kLutSmemMax ? 1 : 2;
            if (p.win)
                return lk == 2 ? go<true, 2>(p, fa, st) : go<true, 1>(p, fa, st);
            if (lk == 1)
                return go<false, 1>(p, fa, st);
        }
        return go<false, 0>(p, fa, st);
    }
};

cudaError_t equalize_fused(const hq_mode *m, void *d_data, uint64_t nseg, uint64_t seg_pixels,
                           unsigned long long *d_hist, unsigned long long *d_hist_next, uint16_t *d_lut,
                           cudaStream_t stream)
{
    if (!mode_ok(m) || seg_pixels == 0)
        return cudaErrorInvalidValue;
    if (nseg == 0)
        return cudaSuccess;
    const Plan p = make_plan(m);
    if ((p.bn.bins > kLutChunk || nseg > 1) && !d_lut)
        return cudaErrorInvalidValue;
    FusedArgs fa = {d_data, {0, nseg * seg_pixels, seg_pixels}, d_hist, d_hist_next, d_lut};
    return dispatch<FusedOp>(m, p, fa, stream);
}

} /* namespace hqg */
