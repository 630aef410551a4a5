/* gpu_fused.cu — the whole equalization of a device-resident block in one cooperative launch
 * (histogram -> grid barrier -> LUT -> remap), for data that already lives on the GPU: no launch
 * gaps between the stages, and the remap walks the tiles from the end, so that it
 * re-reads first what is most likely still in L2.
 *
 * One segment of up to 1024 bins: every CUDA block builds the LUT itself, straight from the global
 * histogram (one barrier in all). Otherwise the LUT chunks of all segments are spread over the
 * grid and a second barrier publishes them.
 *
 * One 8-bit gray image small enough (k_equalize_onchip): each multiprocessor pulls its share into
 * shared memory with bulk copies (the copy engine, all requests out at once) and registers, counts
 * it there, and after the grid barrier remaps it from there: one read of memory instead of two,
 * and no L2 round trip in the remap. */
#include "gpu_dispatch.cuh"

namespace hqg {

namespace cg = cooperative_groups;

/* 1024 threads when shared memory allows one block per multiprocessor (many bins); else 512, two
 * blocks per multiprocessor where 64 registers suffice, one (128 registers) for colour. */
template <typename T, int CH, int COLOR, bool WIN, int LUTK>
__global__ void __launch_bounds__(WIN || LUTK == 1 ? 1024 : 512, WIN || LUTK == 1 || CH >= 3 ? 1 : 2)
    k_equalize(T *d, Geom g, Bins bn, HistLayout L, u64c *gh, u64c *gh_next, uint64_t next_n, uint16_t *glut,
               int otf, int method)
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
                lut_build_chunk(method, gh + hidx * bn.bins, bn.bins, c * cb, cb,
                                glut + hidx * bn.bins + (uint64_t)c * cb, sc);
            }
            cg::this_grid().sync();
        } else {
            /* One segment: every block builds the LUT from the global histogram itself (no second
             * barrier); plain first, then (<= 256 bins) spread into the per-lane layout. */
            uint16_t *plain = LUTK == 0 ? sh16 + lut_smem_bytes(0, bn.nf) / 2 : sh16;
            for (uint32_t h = 0; h < bn.nhist; h++)
                lut_build_chunk(method, gh + h * bn.bins, bn.bins, 0, bn.bins, plain + h * bn.bins, sc);
            __syncthreads();
            if (LUTK == 0) {
                lut_stage<0, Luma8<T, CH, COLOR>::value>(sh16, plain, bn.nf);
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
    int method;
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
        int iotf = otf ? 1 : 0, method = fa.method;
        void *args[] = {&d, &g, &bn, &L, &gh, &ghn, &next_n, &glut, &iotf, &method};
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

/* ---------------------------------------------------------------------------------------------
 * One 8-bit gray image on chip. Per block (one per multiprocessor, 1024 threads): the first
 * 4 x 1024 vectors of its share in registers (4 per thread), the rest in up to 12 bulk copies of
 * 16 KiB (one vector per thread each) into shared memory, each completing on its own mbarrier so
 * that counting starts with the first. Shared memory: 32 KiB of per-lane counters (later the
 * per-lane LUT), 1 KiB of barriers and plain LUT, 192 KiB of pixels. */

constexpr uint32_t kOcThreads = 1024;
constexpr uint32_t kOcRegVecs = 4;
constexpr uint32_t kOcChunks = 12;
constexpr uint32_t kOcChunk = kOcThreads * 16u;
constexpr uint32_t kOcBarOff = 32768u;
constexpr uint32_t kOcPlainOff = kOcBarOff + 128u;
constexpr uint32_t kOcDataOff = kOcBarOff + 1024u;
constexpr uint32_t kOcSmem = kOcDataOff + kOcChunks * kOcChunk;
constexpr uint64_t kOcBlockMax = (uint64_t)(kOcRegVecs + kOcChunks) * kOcThreads * 16u; /* bytes a block holds */

__device__ __forceinline__ uint32_t smem_addr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void mbar_init(uint64_t *bar, uint32_t count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}

/* Makes the initialised barriers visible to the copy engine (the async proxy). */
__device__ __forceinline__ void mbar_fence_init()
{
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

__device__ __forceinline__ void mbar_expect_tx(uint64_t *bar, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes)
                 : "memory");
}

/* Global -> shared bulk copy (16-byte aligned, a multiple of 16 bytes) completing on bar, with an
 * L2 cache policy (createpolicy). */
__device__ __forceinline__ void bulk_load_hint(void *dst, const void *src, uint32_t bytes, uint64_t *bar, uint64_t pol)
{
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::"r"(
            smem_addr(dst)),
        "l"(src), "r"(bytes), "r"(smem_addr(bar)), "l"(pol)
        : "memory");
}

__device__ __forceinline__ uint64_t policy_evict_first()
{
    uint64_t pol;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
    return pol;
}

__device__ __forceinline__ void load_hint(Group<uint8_t, 1> &g, const uint4 *p, uint64_t pol)
{
    asm volatile("ld.global.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
                 : "=r"(g.w[0]), "=r"(g.w[1]), "=r"(g.w[2]), "=r"(g.w[3])
                 : "l"(p), "l"(pol)
                 : "memory");
}

__device__ __forceinline__ uint64_t globaltimer()
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t parity)
{
    uint32_t done = 0;
    do {
        asm volatile("{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                     "selp.u32 %0, 1, 0, p;\n\t}"
                     : "=r"(done)
                     : "r"(smem_addr(bar)), "r"(parity)
                     : "memory");
    } while (!done);
}

/* The pixels are read with the L2 evict-first policy: once on chip they are not needed in L2, and
 * so the lines the remap dirtied in the previous run stay until this remap's own writes replace
 * them, which moves their write-back out of the read phase (8K gray: 30.3 -> 29.1 us). STAMP (bench
 * only) records %globaltimer at the phase ends into stamps[block * 8 + 0..4]. */
template <bool CLAMP, bool STAMP>
__global__ void __launch_bounds__(kOcThreads, 1)
    k_equalize_onchip(uint8_t *d, uint64_t n, uint64_t per, Bins bn, u64c *gh, u64c *gh_next, int method,
                      u64c *stamps)
{
    if (STAMP && threadIdx.x == 0)
        stamps[blockIdx.x * 8] = globaltimer();
    typedef Group<uint8_t, 1> G;
    extern __shared__ uint4 smem_u4[];
    __shared__ Scratch sc;
    char *sm = reinterpret_cast<char *>(smem_u4);
    uint32_t *cnt = reinterpret_cast<uint32_t *>(sm);
    uint64_t *bar = reinterpret_cast<uint64_t *>(sm + kOcBarOff);
    uint16_t *plain = reinterpret_cast<uint16_t *>(sm + kOcPlainOff);
    const uint4 *data = reinterpret_cast<const uint4 *>(sm + kOcDataOff);
    const uint32_t tid = threadIdx.x;
    uint64_t a = (uint64_t)blockIdx.x * per;
    a = a < n ? a : n;
    const uint64_t b = n - a < per ? n : a + per;
    const uint32_t nv = (uint32_t)((b - a) / 16u); /* whole vectors; a is a multiple of 16 */
    const uint32_t rv = nv < kOcRegVecs * kOcThreads ? nv : kOcRegVecs * kOcThreads, sv = nv - rv;
    const uint32_t nch = (sv + kOcThreads - 1) / kOcThreads;
    uint4 *gv = reinterpret_cast<uint4 *>(d + a);

    const uint64_t pol = policy_evict_first();
    if (tid == 0 && nch) {
        for (uint32_t j = 0; j < nch; j++)
            mbar_init(bar + j, 1);
        mbar_fence_init();
        for (uint32_t j = 0; j < nch; j++) {
            const uint32_t vecs = sv - j * kOcThreads < kOcThreads ? sv - j * kOcThreads : kOcThreads;
            mbar_expect_tx(bar + j, vecs * 16u);
            bulk_load_hint(sm + kOcDataOff + j * kOcChunk, gv + rv + j * kOcThreads, vecs * 16u, bar + j, pol);
        }
    }
    G reg[kOcRegVecs];
#pragma unroll
    for (uint32_t u = 0; u < kOcRegVecs; u++)
        if (u * kOcThreads + tid < rv)
            load_hint(reg[u], gv + u * kOcThreads + tid, pol);
    if (gh_next)
        for (uint32_t i = blockIdx.x * kOcThreads + tid; i < bn.nf; i += gridDim.x * kOcThreads)
            gh_next[i] = 0;
    smem_zero(cnt, bn.nf << 5); /* its barrier also publishes the mbarrier initialisation */

    Counter<false> c;
    c.sh = cnt;
    c.shift = 5;
    c.lane_off = lane_id();
    c.wlo = 0;
    c.wn = bn.nf;
#pragma unroll
    for (uint32_t u = 0; u < kOcRegVecs; u++)
        count_group<uint8_t, 1, 0, CLAMP, false>(reg[u], u * kOcThreads + tid < rv, bn, c);
    for (uint32_t j = 0; j < nch; j++) {
        mbar_wait(bar + j, 0);
        const uint32_t k = j * kOcThreads + tid;
        if (k < sv) {
            G g;
            g.load_rw(data + k);
            count_group<uint8_t, 1, 0, CLAMP, false>(g, true, bn, c);
        }
    }
    for (uint64_t i = a + (uint64_t)nv * 16u + tid; i < b; i += kOcThreads)
        count_scalar<uint8_t, 1, 0, CLAMP, false>(d, i, bn, c);
    hist_flush(cnt, bn.nf, 5, gh);
    if (STAMP && tid == 0)
        stamps[blockIdx.x * 8 + 1] = globaltimer();

    cg::this_grid().sync();
    if (STAMP && tid == 0)
        stamps[blockIdx.x * 8 + 2] = globaltimer();
    lut_build_chunk(method, gh, bn.bins, 0, bn.bins, plain, sc);
    __syncthreads();
    lut_stage<0>(cnt, plain, bn.nf);
    __syncthreads();
    if (STAMP && tid == 0)
        stamps[blockIdx.x * 8 + 3] = globaltimer();

    LutRead<0> lr;
    lr.p = cnt;
    lr.lane = lane_id();
    auto put = [](uint4 *p, const G &g) { *p = make_uint4(g.w[0], g.w[1], g.w[2], g.w[3]); };
#pragma unroll
    for (uint32_t u = 0; u < kOcRegVecs; u++)
        if (u * kOcThreads + tid < rv) {
            remap_group<uint8_t, 1, 0, CLAMP>(reg[u], bn, lr);
            put(gv + u * kOcThreads + tid, reg[u]);
        }
    for (uint32_t j = 0; j < nch; j++) {
        const uint32_t k = j * kOcThreads + tid;
        if (k < sv) {
            G g;
            g.load_rw(data + k);
            remap_group<uint8_t, 1, 0, CLAMP>(g, bn, lr);
            put(gv + rv + k, g);
        }
    }
    for (uint64_t i = a + (uint64_t)nv * 16u + tid; i < b; i += kOcThreads)
        remap_scalar<uint8_t, 1, 0, CLAMP>(d, i, bn, lr);
    if (STAMP) {
        __syncthreads();
        if (tid == 0)
            stamps[blockIdx.x * 8 + 4] = globaltimer();
    }
}

static int g_allow_onchip = 1, g_grid_cap = 0;
static u64c *g_stamps = nullptr;

void fused_set_onchip(int allow, int grid_cap, unsigned long long *stamps)
{
    g_allow_onchip = allow;
    g_grid_cap = grid_cap;
    g_stamps = stamps;
}

template <bool CLAMP, bool STAMP>
static cudaError_t try_onchip(const Plan &p, const FusedArgs &fa, cudaStream_t st, bool *done)
{
    *done = false;
    int res = 0;
    /* An error here (no room for 225 KiB of shared memory on this device) only rules the path out. */
    if (resident_blocks<k_equalize_onchip<CLAMP, STAMP>>(kOcThreads, kOcSmem, &res) != cudaSuccess || res < 1) {
        cudaGetLastError();
        return cudaSuccess;
    }
    if (g_grid_cap > 0 && res > g_grid_cap)
        res = g_grid_cap;
    uint64_t n = fa.g.p1, per = (n + (uint64_t)res - 1) / (uint64_t)res;
    per = (per + 15u) / 16u * 16u;
    if (per > kOcBlockMax)
        return cudaSuccess;
    uint8_t *d = static_cast<uint8_t *>(fa.d);
    Bins bn = p.bn;
    u64c *gh = fa.gh, *ghn = fa.gh_next;
    int method = fa.method;
    u64c *stamps = g_stamps;
    void *args[] = {&d, &n, &per, &bn, &gh, &ghn, &method, &stamps};
    *done = true;
    return cudaLaunchCooperativeKernel((const void *)k_equalize_onchip<CLAMP, STAMP>, dim3(res), dim3(kOcThreads), args,
                                       kOcSmem, st);
}

template <bool CLAMP>
static cudaError_t try_onchip_flags(const Plan &p, const FusedArgs &fa, cudaStream_t st, bool *done)
{
    return g_stamps ? try_onchip<CLAMP, true>(p, fa, st, done) : try_onchip<CLAMP, false>(p, fa, st, done);
}

cudaError_t equalize_fused(const hq_mode *m, int method, void *d_data, uint64_t nseg, uint64_t seg_pixels,
                           unsigned long long *d_hist, unsigned long long *d_hist_next, uint16_t *d_lut,
                           cudaStream_t stream)
{
    if (!mode_ok(m) || seg_pixels == 0 || (method != HQ_METHOD_EQUALIZE && method != HQ_METHOD_STRETCH))
        return cudaErrorInvalidValue;
    if (nseg == 0)
        return cudaSuccess;
    const Plan p = make_plan(m);
    if ((p.bn.bins > kLutChunk || nseg > 1) && !d_lut)
        return cudaErrorInvalidValue;
    FusedArgs fa = {d_data, {0, nseg * seg_pixels, seg_pixels}, d_hist, d_hist_next, d_lut, method};
    if (g_allow_onchip && nseg == 1 && m->channels == 1 && m->sample_bytes == 1) {
        bool done = false;
        const bool clamp = p.bn.maxv != 0xffu;
        cudaError_t e = clamp ? try_onchip_flags<true>(p, fa, stream, &done)
                              : try_onchip_flags<false>(p, fa, stream, &done);
        if (done || e != cudaSuccess)
            return e;
    }
    return dispatch<FusedOp>(m, p, fa, stream);
}

} /* namespace hqg */
