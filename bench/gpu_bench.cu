/* gpu_bench.cu — the GPU kernels on device-resident images against NPP, side by side, each result
 * checked bit for bit against the CPU engine.
 *
 * Before the cases: the 8-bit RGB luma fast formulation against core/pixel.h on every colour and
 * LUT value (luma8_selftest), and the resident pipeline against the CPU engine on odd sizes around
 * every boundary of its paths (--check runs only these two, for the sanitizers).
 * For each case (natural-looking image: smooth gradient + noise; and a constant image) it times:
 *   ours      the whole equalization in one cooperative launch (gpu/gpu_fused.cu); for one 8-bit
 *             gray image that fits on chip, also the tiled pipeline it replaces ("tiled"), and for
 *             7680x4320 the on-chip kernel's phases (timestamps) and an empty launch of its shape
 *   3k        the same as three launches: histogram, device LUT, remap (the engine's kernels)
 *   hist/remap  the histogram and the remap kernels alone (where the time goes)
 *   npp       nppiHistogramEven + a LUT kernel (same rule) + nppiLUTPalette, where NPP has them
 *   engine    host-to-host through the engine interface (pageable memory; one number, for scale)
 * Timing: CUDA events around every iteration, median of many, after warm-up; a spin kernel first
 * lets the host queue all iterations, and several copies of small images rotate so that one run
 * does not find its input in L2 from the run before. The bytes of a run are one read for the
 * histogram plus a read and a write for the remap; the roofline is a large device-to-device copy
 * measured in the same run. Build: see bench/device_run.sh. */
#include <cuda_runtime.h>
#ifdef HQ_WITH_NPP
#include <npp.h>
#endif
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern "C" {
#include "../core/lut.h"
#include "../engine/engine.h"
}
#include "../gpu/gpu_kernels.cuh"
#include "../gpu/gpu_launch.h"

#define CK(call)                                                                                                   \
    do {                                                                                                           \
        cudaError_t e_ = (call);                                                                                   \
        if (e_ != cudaSuccess) {                                                                                   \
            fprintf(stderr, "gpu_bench: %s failed: %s (%s:%d)\n", #call, cudaGetErrorString(e_), __FILE__,         \
                    __LINE__);                                                                                     \
            exit(1);                                                                                               \
        }                                                                                                          \
    } while (0)

static __global__ void k_spin(long long cycles)
{
    const long long t0 = clock64();
    while (clock64() - t0 < cycles) {
    }
}

/* Streaming experiments: how fast can a pass that reads and rewrites the image be, with the
 * kernels' own access pattern (contiguous range per CUDA block, U 16-byte loads per thread)? */
template <int U, bool STREAM, bool CONTIG>
static __global__ void __launch_bounds__(512, 2) k_copyx(const uint4 *src, uint4 *dst, uint64_t n)
{
    uint64_t a = 0, b = n, step = (uint64_t)blockDim.x * U, start = threadIdx.x;
    if (CONTIG) {
        const uint64_t per = (n + gridDim.x - 1) / gridDim.x;
        a = blockIdx.x * per;
        b = a + per < n ? a + per : n;
    } else {
        step = (uint64_t)gridDim.x * blockDim.x * U;
        start = (uint64_t)blockIdx.x * blockDim.x * U + threadIdx.x;
    }
    for (uint64_t k0 = a + start; k0 < b + threadIdx.x; k0 += step) {
        uint4 v[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const uint64_t k = k0 + (uint64_t)u * blockDim.x;
            if (k < b)
                v[u] = STREAM ? __ldcs(src + k) : src[k];
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            const uint64_t k = k0 + (uint64_t)u * blockDim.x;
            if (k < b) {
                if (STREAM)
                    __stcs(dst + k, v[u]);
                else
                    dst[k] = v[u];
            }
        }
    }
}

static cudaStream_t g_st;
static double g_copy_gbs = 0;

/* Median milliseconds of one iteration of fn(i) over n iterations (after warm). */
template <class F> static double time_median(int warm, int n, F fn, double *min_ms = nullptr)
{
    for (int i = 0; i < warm; i++)
        fn(i);
    CK(cudaStreamSynchronize(g_st));
    std::vector<cudaEvent_t> ev(n + 1);
    for (auto &e : ev)
        CK(cudaEventCreate(&e));
    k_spin<<<1, 1, 0, g_st>>>(20LL * 1000 * 1000); /* ~10 ms: the host queues everything meanwhile */
    for (int i = 0; i < n; i++) {
        CK(cudaEventRecord(ev[i], g_st));
        fn(warm + i);
    }
    CK(cudaEventRecord(ev[n], g_st));
    CK(cudaStreamSynchronize(g_st));
    std::vector<double> t(n);
    for (int i = 0; i < n; i++) {
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, ev[i], ev[i + 1]));
        t[i] = ms;
    }
    for (auto &e : ev)
        CK(cudaEventDestroy(e));
    std::sort(t.begin(), t.end());
    if (min_ms)
        *min_ms = t[0];
    return t[n / 2];
}

static double measure_copy_bandwidth(void)
{
    const size_t bytes = (size_t)2 << 30;
    void *a, *b;
    CK(cudaMalloc(&a, bytes));
    CK(cudaMalloc(&b, bytes));
    CK(cudaMemset(a, 1, bytes));
    CK(cudaMemset(b, 2, bytes));
    double ms = time_median(2, 10, [&](int) { CK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, g_st)); });
    CK(cudaFree(a));
    CK(cudaFree(b));
    return 2.0 * bytes / (ms * 1e-3) / 1e9;
}

/* ------------------------------------------------------------------------------------------- */
/* Images */

static inline uint32_t hash32(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return (uint32_t)x;
}

/* Smooth gradient + a gentle wave + small noise (a low-contrast scan), or one constant value. */
static void make_image(void *buf, const hq_mode &m, uint64_t w, uint64_t h, uint64_t nseg, bool constant)
{
    const bool b16 = m.sample_bytes == 2;
    const double lo = b16 ? 8000 : 40, hi = b16 ? 52000 : 200, amp = b16 ? 3000 : 18;
    const int noise = b16 ? 300 : 6;
    const uint32_t tmax = b16 ? 65535 : 255;
    const uint32_t cval[4] = {b16 ? 30011u : 117u, b16 ? 17000u : 64u, b16 ? 51234u : 200u, tmax};
    const uint64_t per = w * h;
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < (int64_t)(h * nseg); row++) {
        const uint64_t s = row / h, y = row % h;
        for (uint64_t x = 0; x < w; x++) {
            const uint64_t px = s * per + y * w + x;
            for (uint32_t c = 0; c < m.channels; c++) {
                uint32_t v;
                if (constant) {
                    v = cval[c];
                } else {
                    const double t = 0.55 * x / w + 0.45 * y / h;
                    double base = lo + (hi - lo) * t * (1.0 - 0.15 * c) +
                                  amp * std::sin(x * 0.013 + c + s) * std::cos(y * 0.011 + 0.5 * s);
                    const int nz = (int)(hash32(px * 4 + c) % (2 * noise + 1)) - noise;
                    double vv = base + nz;
                    v = vv < 0 ? 0 : vv > tmax ? tmax : (uint32_t)vv;
                }
                if (b16)
                    ((uint16_t *)buf)[px * m.channels + c] = (uint16_t)v;
                else
                    ((uint8_t *)buf)[px * m.channels + c] = (uint8_t)v;
            }
        }
    }
}

/* ------------------------------------------------------------------------------------------- */
/* NPP */

#ifdef HQ_WITH_NPP
static NppStreamContext npp_ctx(void)
{
    NppStreamContext c;
    memset(&c, 0, sizeof c);
    int dev = 0;
    CK(cudaGetDevice(&dev));
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, dev));
    c.hStream = g_st;
    c.nCudaDeviceId = dev;
    c.nMultiProcessorCount = p.multiProcessorCount;
    c.nMaxThreadsPerMultiProcessor = p.maxThreadsPerMultiProcessor;
    c.nMaxThreadsPerBlock = p.maxThreadsPerBlock;
    c.nSharedMemPerBlock = p.sharedMemPerBlock;
    c.nCudaDevAttrComputeCapabilityMajor = p.major;
    c.nCudaDevAttrComputeCapabilityMinor = p.minor;
    unsigned flags = 0;
    CK(cudaStreamGetFlags(g_st, &flags));
    c.nStreamFlags = flags;
    return c;
}

/* The buffer-size query's out type changed across NPP versions (int, size_t): deduce it. */
template <typename S>
static size_t npp_bufsize(NppStatus (*f)(NppiSize, int, S *, NppStreamContext), NppiSize roi, int levels,
                          NppStreamContext ctx)
{
    S s = 0;
    NppStatus st = f(roi, levels, &s, ctx);
    return st == NPP_SUCCESS ? (size_t)s : 0;
}
template <typename S>
static size_t npp_bufsize3(NppStatus (*f)(NppiSize, int *, S *, NppStreamContext), NppiSize roi, int *levels,
                           NppStreamContext ctx)
{
    S s = 0;
    NppStatus st = f(roi, levels, &s, ctx);
    return st == NPP_SUCCESS ? (size_t)s : 0;
}

/* The LUT step of the NPP pipeline: NPP's int32 histogram -> the same equalize rule, one block. */
template <typename OutT>
static __global__ void __launch_bounds__(1024) k_npp_lut(const Npp32s *hist, uint32_t bins, uint32_t nhist,
                                                         int method, OutT *table, unsigned long long *tmp)
{
    __shared__ hqg::Scratch sc;
    extern __shared__ uint16_t lut16[];
    for (uint32_t h = 0; h < nhist; h++) {
        unsigned long long *t = tmp + (size_t)h * bins;
        for (uint32_t v = threadIdx.x; v < bins; v += blockDim.x)
            t[v] = (unsigned long long)(uint32_t)hist[(size_t)h * bins + v];
        __syncthreads();
        hqg::lut_build_chunk(method, t, bins, 0, bins, lut16, sc);
        __syncthreads();
        for (uint32_t v = threadIdx.x; v < bins; v += blockDim.x)
            table[(size_t)h * bins + v] = (OutT)lut16[v];
        __syncthreads();
    }
}

static __global__ void k_npp_i32_to_u64(const Npp32s *hist, size_t n, unsigned long long *out)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = (unsigned long long)(uint32_t)hist[i];
}
#endif

/* ------------------------------------------------------------------------------------------- */

struct Row {
    std::string name;
    bool constant;
    double ours, ours_min, three, hist, remap, npp, engine_ms, engine_res_ms, tiled;
    double bytes;
    bool ok_fused, ok_three, npp_ok_known, npp_equal;
    std::string npp_note;
};

static std::vector<Row> g_rows;

static __global__ void __launch_bounds__(1024, 1) k_coop_empty(int *x)
{
    cooperative_groups::this_grid().sync();
    if (x && threadIdx.x == 0 && blockIdx.x == 0)
        *x = 1;
}

/* The on-chip kernel's phases from %globaltimer stamps (median and max over blocks, from the
 * earliest block start), and the cost of an empty cooperative launch of the same shape: where the
 * time of the 8K gray case goes. */
template <class F> static void onchip_experiments(F fused_run, int n)
{
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    unsigned long long *ds;
    CK(cudaMalloc(&ds, (size_t)sms * 8 * sizeof *ds));
    {
        CK(cudaMemset(ds, 0, (size_t)sms * 8 * sizeof *ds));
        hqg::fused_set_onchip(1, 0, ds);
        const double ms = time_median(3, n, fused_run);
        std::vector<unsigned long long> st((size_t)sms * 8);
        CK(cudaMemcpy(st.data(), ds, st.size() * sizeof *ds, cudaMemcpyDeviceToHost));
        unsigned long long t0 = ~0ull;
        for (int b = 0; b < sms; b++)
            t0 = std::min(t0, st[(size_t)b * 8]);
        printf("  on-chip phases (stamping variant %.4f ms; us from the first block start, median / max over "
               "blocks):", ms);
        const char *ph[] = {"start", "counted+flushed", "grid barrier", "LUT staged", "remapped"};
        for (int i = 0; i < 5; i++) {
            std::vector<double> v(sms);
            for (int b = 0; b < sms; b++)
                v[b] = (st[(size_t)b * 8 + i] - t0) * 1e-3;
            std::sort(v.begin(), v.end());
            printf(" %s %.1f / %.1f |", ph[i], v[sms / 2], v[sms - 1]);
        }
        printf("\n");
    }
    hqg::fused_set_onchip(1, 0, nullptr);
    CK(cudaFree(ds));
    CK(cudaFuncSetAttribute(k_coop_empty, cudaFuncAttributeMaxDynamicSharedMemorySize, 230400));
    int *dx;
    CK(cudaMalloc(&dx, sizeof *dx));
    const double coop = time_median(3, n, [&](int) {
        void *args[] = {&dx};
        CK(cudaLaunchCooperativeKernel((const void *)k_coop_empty, dim3(sms), dim3(1024), args, 230400, g_st));
    });
    const double plain = time_median(3, n, [&](int) { k_coop_empty<<<1, 32, 0, g_st>>>(nullptr); });
    printf("  launch floor: empty cooperative kernel (%d x 1024 threads, 225 KiB, one grid barrier) %.4f ms | "
           "empty 1-block kernel %.4f ms\n", sms, coop, plain);
    CK(cudaFree(dx));
}

struct Case {
    const char *name;
    hq_mode m;
    uint64_t w, h, nseg;
    int npp_kind; /* 0 none, 1 gray 8u C1R, 2 gray 16u C1R, 3 8u C3R (per channel) */
    int method;   /* hq_method */
};

static bool compare(const uint8_t *a, const uint8_t *b, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) {
            printf("  MISMATCH %s at byte %zu: cpu %u gpu %u\n", what, i, a[i], b[i]);
            return false;
        }
    return true;
}

static void run_case(const Case &c, bool constant, hq_engine *cpu, hq_engine *gpu, hq_engine *gpu_res)
{
    const hq_mode &m = c.m;
    const uint64_t seg_px = c.w * c.h, px = seg_px * c.nseg;
    const size_t pb = (size_t)m.channels * m.sample_bytes, bytes = px * pb;
    const uint32_t nf = hq_mode_nhist(&m) * hq_mode_bins(&m), bins = hq_mode_bins(&m);
    Row r;
    r.name = c.name;
    r.constant = constant;
    r.bytes = 3.0 * bytes;
    r.npp = -1;
    r.tiled = -1;
    r.npp_ok_known = false;
    r.npp_equal = false;
    printf("== %s, %s image (%.1f MB)\n", c.name, constant ? "constant" : "natural", bytes / 1e6);
    fflush(stdout);

    std::vector<uint8_t> img(bytes), ref(bytes), out(bytes);
    make_image(img.data(), m, c.w, c.h, c.nseg, constant);

    /* CPU reference: histogram, core/lut.c LUT, remap. */
    std::vector<uint64_t> hc((size_t)c.nseg * nf, 0);
    std::vector<uint16_t> lut((size_t)c.nseg * nf);
    std::vector<uint64_t *> hp(c.nseg);
    std::vector<const uint16_t *> lp(c.nseg);
    for (uint64_t s = 0; s < c.nseg; s++) {
        hp[s] = hc.data() + s * nf;
        lp[s] = lut.data() + s * nf;
    }
    memcpy(ref.data(), img.data(), bytes);
    hq_block_data bref = {ref.data(), c.nseg, seg_px, 0, NULL, NULL, NULL};
    hq_err err = {{0}};
    auto t0 = std::chrono::steady_clock::now();
    if (cpu->ops->histogram(cpu, &bref, &m, hp.data(), &err)) {
        printf("  cpu histogram failed: %s\n", err.msg);
        exit(1);
    }
    for (uint64_t s = 0; s < c.nseg; s++)
        for (uint32_t h = 0; h < hq_mode_nhist(&m); h++)
            hq_lut_build((hq_method)c.method, hp[s] + h * bins, bins, lut.data() + s * nf + h * bins);
    if (cpu->ops->remap(cpu, &bref, &m, lp.data(), &err)) {
        printf("  cpu remap failed: %s\n", err.msg);
        exit(1);
    }
    auto t1 = std::chrono::steady_clock::now();
    printf("  cpu engine reference: %.1f ms\n", std::chrono::duration<double, std::milli>(t1 - t0).count());

    /* Rotating device copies: enough that consecutive runs never share an input in L2. */
    const int K = (int)std::max<uint64_t>(1, std::min<uint64_t>(8, ((uint64_t)320 << 20) / bytes + 1));
    std::vector<void *> dimg(K);
    for (int k = 0; k < K; k++) {
        CK(cudaMalloc(&dimg[k], bytes));
        CK(cudaMemcpy(dimg[k], img.data(), bytes, cudaMemcpyHostToDevice));
    }
    unsigned long long *dh[2];
    const size_t hbytes = (size_t)c.nseg * nf * sizeof(unsigned long long);
    for (auto &p : dh) {
        CK(cudaMalloc(&p, hbytes));
        CK(cudaMemset(p, 0, hbytes));
    }
    uint16_t *dl;
    CK(cudaMalloc(&dl, (size_t)c.nseg * nf * 2));

    /* Correctness of both device pipelines against the CPU, then restore copy 0. */
    CK(hqg::equalize_fused(&m, c.method, dimg[0], c.nseg, seg_px, dh[0], dh[1], dl, g_st));
    CK(cudaStreamSynchronize(g_st));
    CK(cudaMemcpy(out.data(), dimg[0], bytes, cudaMemcpyDeviceToHost));
    std::vector<uint64_t> hg((size_t)c.nseg * nf);
    CK(cudaMemcpy(hg.data(), dh[0], hbytes, cudaMemcpyDeviceToHost));
    r.ok_fused = compare((const uint8_t *)hc.data(), (const uint8_t *)hg.data(), hbytes, "fused histogram") &&
                 compare(ref.data(), out.data(), bytes, "fused remap");
    CK(cudaMemcpy(dimg[0], img.data(), bytes, cudaMemcpyHostToDevice));
    CK(cudaMemset(dh[0], 0, hbytes));
    CK(hqg::hist_launch(&m, dimg[0], 0, px, seg_px, dh[0], g_st));
    CK(hqg::lut_build_launch(&m, c.method, dh[0], c.nseg, dl, g_st));
    CK(hqg::remap_launch(&m, dimg[0], 0, px, seg_px, dl, g_st));
    CK(cudaStreamSynchronize(g_st));
    CK(cudaMemcpy(out.data(), dimg[0], bytes, cudaMemcpyDeviceToHost));
    r.ok_three = compare(ref.data(), out.data(), bytes, "3-kernel remap");
    CK(cudaMemcpy(dimg[0], img.data(), bytes, cudaMemcpyHostToDevice));
    CK(cudaMemset(dh[0], 0, hbytes));
    CK(cudaMemset(dh[1], 0, hbytes));

    const int n = bytes > ((size_t)256 << 20) ? 20 : 60;
    r.ours = time_median(
        3, n,
        [&](int i) {
            CK(hqg::equalize_fused(&m, c.method, dimg[i % K], c.nseg, seg_px, dh[i & 1], dh[(i + 1) & 1], dl, g_st));
        },
        &r.ours_min);
    if (m.channels == 1 && m.sample_bytes == 1 && c.nseg == 1) {
        auto fused_run = [&](int i) {
            CK(hqg::equalize_fused(&m, c.method, dimg[i % K], c.nseg, seg_px, dh[i & 1], dh[(i + 1) & 1], dl, g_st));
        };
        hqg::fused_set_onchip(0, 0, nullptr);
        r.tiled = time_median(3, n, fused_run);
        hqg::fused_set_onchip(1, 0, nullptr);
        if (seg_px == 7680ull * 4320)
            onchip_experiments(fused_run, n);
    }
    r.three = time_median(3, n, [&](int i) {
        CK(cudaMemsetAsync(dh[0], 0, hbytes, g_st));
        CK(hqg::hist_launch(&m, dimg[i % K], 0, px, seg_px, dh[0], g_st));
        CK(hqg::lut_build_launch(&m, c.method, dh[0], c.nseg, dl, g_st));
        CK(hqg::remap_launch(&m, dimg[i % K], 0, px, seg_px, dl, g_st));
    });
    r.hist = time_median(3, n, [&](int i) {
        CK(cudaMemsetAsync(dh[0], 0, hbytes, g_st));
        CK(hqg::hist_launch(&m, dimg[i % K], 0, px, seg_px, dh[0], g_st));
    });
    r.remap = time_median(3, n, [&](int i) { CK(hqg::remap_launch(&m, dimg[i % K], 0, px, seg_px, dl, g_st)); });

    if (!constant) {
        const uint64_t n16 = bytes / 16;
        int sms = 0;
        CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
        const int grid = 2 * sms;
        void *dst;
        CK(cudaMalloc(&dst, bytes));
        auto gbs = [&](double ms) { return 2.0 * bytes / (ms * 1e-3) / 1e9; };
        double x1 = time_median(3, n, [&](int i) {
            uint4 *p = (uint4 *)dimg[i % K];
            k_copyx<4, false, true><<<grid, 512, 0, g_st>>>(p, p, n16);
        });
        double x2 = time_median(3, n, [&](int i) {
            uint4 *p = (uint4 *)dimg[i % K];
            k_copyx<4, true, true><<<grid, 512, 0, g_st>>>(p, p, n16);
        });
        double x3 = time_median(3, n, [&](int i) {
            k_copyx<4, false, true><<<grid, 512, 0, g_st>>>((uint4 *)dimg[i % K], (uint4 *)dst, n16);
        });
        double x4 = time_median(3, n, [&](int i) {
            uint4 *p = (uint4 *)dimg[i % K];
            k_copyx<4, false, false><<<grid, 512, 0, g_st>>>(p, p, n16);
        });
        double x5 = time_median(3, n, [&](int i) {
            uint4 *p = (uint4 *)dimg[i % K];
            k_copyx<8, false, true><<<grid, 512, 0, g_st>>>(p, p, n16);
        });
        CK(cudaGetLastError());
        printf("  copy experiments (ms, GB/s r+w): in-place %.4f (%.0f) | in-place streaming %.4f (%.0f) | "
               "out-of-place %.4f (%.0f) | in-place grid-stride %.4f (%.0f) | in-place U=8 %.4f (%.0f)\n",
               x1, gbs(x1), x2, gbs(x2), x3, gbs(x3), x4, gbs(x4), x5, gbs(x5));
        CK(cudaFree(dst));
    }

#ifdef HQ_WITH_NPP
    if (c.npp_kind) {
        NppStreamContext ctx = npp_ctx();
        void *ddst;
        CK(cudaMalloc(&ddst, bytes));
        for (int k = 0; k < K; k++) /* the rotating copies were equalized in place: restore */
            CK(cudaMemcpy(dimg[k], img.data(), bytes, cudaMemcpyHostToDevice));
        const int nh = c.npp_kind == 3 ? 3 : 1;
        const int levels = (int)bins + 1;
        NppiSize roi = {(int)c.w, (int)c.h};
        const int step = (int)(c.w * pb);
        Npp32s *dhist;
        CK(cudaMalloc(&dhist, (size_t)nh * bins * sizeof(Npp32s)));
        unsigned long long *dtmp;
        CK(cudaMalloc(&dtmp, (size_t)nh * bins * sizeof(unsigned long long)));
        void *dtable;
        CK(cudaMalloc(&dtable, (size_t)nh * bins * 2));
        size_t bufsz = 0;
        int lv3[3] = {levels, levels, levels};
        if (c.npp_kind == 1)
            bufsz = npp_bufsize(nppiHistogramEvenGetBufferSize_8u_C1R_Ctx, roi, levels, ctx);
        else if (c.npp_kind == 2)
            bufsz = npp_bufsize(nppiHistogramEvenGetBufferSize_16u_C1R_Ctx, roi, levels, ctx);
#ifndef HQ_NPP_NO_C3
        else
            bufsz = npp_bufsize3(nppiHistogramEvenGetBufferSize_8u_C3R_Ctx, roi, lv3, ctx);
#endif
        Npp8u *dbuf;
        CK(cudaMalloc(&dbuf, bufsz ? bufsz : 1));
        NppStatus bad = NPP_SUCCESS;
        auto npp_run = [&](int i) {
            for (uint64_t s = 0; s < c.nseg; s++) {
                const uint8_t *src = (const uint8_t *)dimg[i % K] + s * seg_px * pb;
                uint8_t *dst = (uint8_t *)ddst + s * seg_px * pb;
                NppStatus st = NPP_SUCCESS;
                if (c.npp_kind == 1) {
                    st = nppiHistogramEven_8u_C1R_Ctx(src, step, roi, dhist, levels, 0, (Npp32s)bins, dbuf, ctx);
                    k_npp_lut<Npp8u><<<1, 256, bins * 2, g_st>>>(dhist, bins, 1, c.method, (Npp8u *)dtable, dtmp);
                    if (st == NPP_SUCCESS)
                        st = nppiLUTPalette_8u_C1R_Ctx(src, step, dst, step, roi, (const Npp8u *)dtable, 8, ctx);
                } else if (c.npp_kind == 2) {
                    st = nppiHistogramEven_16u_C1R_Ctx((const Npp16u *)src, step, roi, dhist, levels, 0, (Npp32s)bins,
                                                       dbuf, ctx);
                    k_npp_i32_to_u64<<<64, 1024, 0, g_st>>>(dhist, bins, dtmp);
                    CK(hqg::lut_build_launch(&m, c.method, dtmp, 1, (uint16_t *)dtable, g_st));
                    if (st == NPP_SUCCESS)
                        st = nppiLUTPalette_16u_C1R_Ctx((const Npp16u *)src, step, (Npp16u *)dst, step, roi,
                                                        (const Npp16u *)dtable, 16, ctx);
                }
#ifndef HQ_NPP_NO_C3
                else {
                    Npp32s *hs[3] = {dhist, dhist + bins, dhist + 2 * bins};
                    Npp32s lo3[3] = {0, 0, 0}, hi3[3] = {(Npp32s)bins, (Npp32s)bins, (Npp32s)bins};
                    st = nppiHistogramEven_8u_C3R_Ctx(src, step, roi, hs, lv3, lo3, hi3, dbuf, ctx);
                    k_npp_lut<Npp8u><<<1, 256, bins * 2, g_st>>>(dhist, bins, 3, c.method, (Npp8u *)dtable, dtmp);
                    const Npp8u *ts[3] = {(const Npp8u *)dtable, (const Npp8u *)dtable + bins,
                                          (const Npp8u *)dtable + 2 * bins};
                    if (st == NPP_SUCCESS)
                        st = nppiLUTPalette_8u_C3R_Ctx(src, step, dst, step, roi, ts, 8, ctx);
                }
#endif
                if (st != NPP_SUCCESS && bad == NPP_SUCCESS)
                    bad = st;
            }
        };
        npp_run(0);
        CK(cudaStreamSynchronize(g_st));
        CK(cudaGetLastError());
        if (bad != NPP_SUCCESS) {
            char note[64];
            snprintf(note, sizeof note, "NPP status %d", (int)bad);
            r.npp_note = note;
            printf("  npp: %s\n", note);
        } else {
            CK(cudaMemcpy(out.data(), ddst, bytes, cudaMemcpyDeviceToHost));
            /* NPP's C3R equalizes channels, not luma: compare only where the rule is the same. */
            if (c.npp_kind != 3) {
                r.npp_ok_known = true;
                r.npp_equal = memcmp(out.data(), ref.data(), bytes) == 0;
            }
            r.npp = time_median(3, c.nseg > 1 ? 10 : n, npp_run);
            if (c.npp_kind == 3)
                r.npp_note = "npp equalizes R,G,B separately (no luma)";
        }
        CK(cudaFree(ddst));
        CK(cudaFree(dhist));
        CK(cudaFree(dtmp));
        CK(cudaFree(dtable));
        CK(cudaFree(dbuf));
    }
#endif

    /* The engine interface, host memory to host memory (pageable), for scale: re-uploading for
     * the remap (default) and reusing the histogram's upload (HQ_GPU_RESIDENT=1). */
    for (int variant = 0; variant < 2; variant++) {
        hq_engine *eng = variant ? gpu_res : gpu;
        std::vector<uint8_t> hostimg(img);
        std::vector<uint64_t> h2((size_t)c.nseg * nf, 0);
        std::vector<uint64_t *> hp2(c.nseg);
        for (uint64_t s = 0; s < c.nseg; s++)
            hp2[s] = h2.data() + s * nf;
        hq_block_data bd = {hostimg.data(), c.nseg, seg_px, 0, NULL, NULL, NULL};
        std::vector<double> t;
        for (int rep = 0; rep < 3; rep++) {
            memcpy(hostimg.data(), img.data(), bytes);
            std::fill(h2.begin(), h2.end(), 0);
            auto a = std::chrono::steady_clock::now();
            if (eng->ops->histogram(eng, &bd, &m, hp2.data(), &err)) {
                printf("  engine histogram failed: %s\n", err.msg);
                exit(1);
            }
            for (uint64_t s = 0; s < c.nseg; s++)
                for (uint32_t h = 0; h < hq_mode_nhist(&m); h++)
                    hq_lut_build((hq_method)c.method, hp2[s] + h * bins, bins, lut.data() + s * nf + h * bins);
            if (eng->ops->remap(eng, &bd, &m, lp.data(), &err)) {
                printf("  engine remap failed: %s\n", err.msg);
                exit(1);
            }
            auto b = std::chrono::steady_clock::now();
            t.push_back(std::chrono::duration<double, std::milli>(b - a).count());
        }
        std::sort(t.begin(), t.end());
        (variant ? r.engine_res_ms : r.engine_ms) = t[1];
        if (!compare(ref.data(), hostimg.data(), bytes, "engine remap"))
            r.ok_fused = false;
    }

    const double gbs = r.bytes / (r.ours * 1e-3) / 1e9;
    printf("  ours %.4f ms (min %.4f) = %.0f GB/s = %.0f%% of copy | 3 kernels %.4f ms | hist %.4f ms | remap "
           "%.4f ms | engine host-to-host %.1f ms (%.1f ms reusing the upload)\n",
           r.ours, r.ours_min, gbs, 100.0 * gbs / g_copy_gbs, r.three, r.hist, r.remap, r.engine_ms,
           r.engine_res_ms);
    if (r.tiled > 0)
        printf("  tiled pipeline (the on-chip path turned off): %.4f ms\n", r.tiled);
    if (r.npp > 0)
        printf("  npp %.4f ms, npp/ours %.2fx%s\n", r.npp, r.npp / r.ours,
               r.npp_ok_known ? (r.npp_equal ? ", npp == cpu" : ", npp != cpu") : "");
    printf("  checks: fused %s, 3 kernels %s\n", r.ok_fused ? "bit-identical to cpu" : "DIFFERENT",
           r.ok_three ? "bit-identical to cpu" : "DIFFERENT");
    fflush(stdout);
    for (auto p : dimg)
        CK(cudaFree(p));
    CK(cudaFree(dh[0]));
    CK(cudaFree(dh[1]));
    CK(cudaFree(dl));
    g_rows.push_back(r);
}

/* The resident pipeline (equalize_fused) against the CPU engine on sizes around the boundaries of
 * its paths: the on-chip kernel's register part, bulk-copy chunks, tail bytes and capacity (the
 * next size up falls back to the tiled kernel), for 8-bit gray at 8 and 5 bits, and 8-bit RGB luma
 * (the fast formulation in both passes), equalize and stretch, on noise, a natural image and a
 * constant one. Returns the number of failures. */
static int fused_sweep(hq_engine *cpu, bool small)
{
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    /* small (for the sanitizers): the on-chip kernel on 3 blocks, so that small images reach every
     * part of it */
    const uint64_t S = small ? 3 : (uint64_t)sms, reg_full = 4096ull * 16 * S, on_max = 262144ull * S;
    hqg::fused_set_onchip(1, small ? 3 : 0, nullptr);
    std::vector<uint64_t> sizes = {1, 17, reg_full - 16, reg_full + 16 * S + 5, on_max - 3, on_max + 16};
    if (!small)
        for (uint64_t n : std::vector<uint64_t>{15, 16, 4099, on_max, 9000003, 7680ull * 4320})
            sizes.push_back(n);
    /* gray8 at 8 and 5 bits (on-chip), RGB luma (fast formulation), and for the LUT builder's
     * edges: 3 bits (8 bins), 3 channel histograms, 10 bits in 16-bit samples (1024 bins) */
    const hq_mode modes[] = {{1, 1, 8, HQ_COLOR_LUMA, 0}, {1, 1, 5, HQ_COLOR_LUMA, 0}, {3, 1, 8, HQ_COLOR_LUMA, 0},
                             {1, 1, 3, HQ_COLOR_LUMA, 0}, {3, 1, 8, HQ_COLOR_CHANNELS, 0}, {1, 2, 10, HQ_COLOR_LUMA, 0}};
    uint64_t rng = 12345;
    int fails = 0, runs = 0;
    for (const hq_mode &m : modes)
        for (uint64_t n : sizes) {
            const bool extra = &m - modes >= 3; /* the LUT-edge modes: a few sizes are enough */
            if ((m.channels == 3 && n > 9000003) || (extra && n > reg_full))
                continue;
            if (small && (m.channels == 3 || extra) && n > reg_full) /* racecheck is slow on the big tiled grid */
                continue;
            for (int pat = small ? 1 : 0; pat < 3; pat++)
                for (int method = 0; method < 2; method++) {
                    if (method == 1 && pat != 1)
                        continue;
                    const size_t bytes = n * m.channels * m.sample_bytes;
                    const uint32_t bins = hq_mode_bins(&m), nf = bins * hq_mode_nhist(&m);
                    std::vector<uint8_t> img(bytes), ref, out(bytes);
                    uint16_t *img16 = reinterpret_cast<uint16_t *>(img.data());
                    if (pat == 0) {
                        for (size_t i = 0; i < bytes / m.sample_bytes; i++) {
                            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                            if (m.sample_bytes == 1)
                                img[i] = (uint8_t)(rng >> 56);
                            else /* mostly in range, an eighth above it */
                                img16[i] = (uint16_t)((rng >> 32) % (bins + bins / 8));
                        }
                    } else {
                        make_image(img.data(), m, n, 1, 1, pat == 2);
                        if (m.sample_bytes == 2) /* into the significant range */
                            for (size_t i = 0; i < bytes / 2; i++)
                                img16[i] = (uint16_t)(img16[i] >> (16 - m.bits));
                    }
                    ref = img;
                    std::vector<uint64_t> hc(nf, 0), hg(nf);
                    std::vector<uint16_t> lut(nf);
                    uint64_t *hp = hc.data();
                    const uint16_t *lp = lut.data();
                    hq_block_data bd = {ref.data(), 1, n, 0, NULL, NULL, NULL};
                    hq_err err = {{0}};
                    if (cpu->ops->histogram(cpu, &bd, &m, &hp, &err)) {
                        printf("  sweep: cpu histogram failed: %s\n", err.msg);
                        return fails + 1;
                    }
                    for (uint32_t h = 0; h < hq_mode_nhist(&m); h++)
                        hq_lut_build((hq_method)method, hc.data() + h * bins, bins, lut.data() + h * bins);
                    if (cpu->ops->remap(cpu, &bd, &m, &lp, &err)) {
                        printf("  sweep: cpu remap failed: %s\n", err.msg);
                        return fails + 1;
                    }
                    void *d;
                    unsigned long long *dh;
                    uint16_t *dl;
                    CK(cudaMalloc(&d, bytes));
                    CK(cudaMalloc(&dh, nf * 8));
                    CK(cudaMalloc(&dl, nf * 2));
                    CK(cudaMemcpy(d, img.data(), bytes, cudaMemcpyHostToDevice));
                    CK(cudaMemset(dh, 0, nf * 8));
                    CK(hqg::equalize_fused(&m, method, d, 1, n, dh, nullptr, dl, g_st));
                    CK(cudaStreamSynchronize(g_st));
                    CK(cudaMemcpy(out.data(), d, bytes, cudaMemcpyDeviceToHost));
                    CK(cudaMemcpy(hg.data(), dh, nf * 8, cudaMemcpyDeviceToHost));
                    CK(cudaFree(d));
                    CK(cudaFree(dh));
                    CK(cudaFree(dl));
                    runs++;
                    const bool okh = hg == hc, okr = out == ref;
                    if (!okh || !okr) {
                        fails++;
                        size_t at = 0;
                        while (at < bytes && out[at] == ref[at])
                            at++;
                        printf("  sweep FAIL: %u ch %u bits, %llu px, %s, %s: histogram %s, pixels %s (first at byte "
                               "%zu)\n",
                               m.channels, m.bits, (unsigned long long)n,
                               pat == 0 ? "noise" : pat == 1 ? "natural" : "constant", method ? "stretch" : "equalize",
                               okh ? "ok" : "DIFFERENT", okr ? "ok" : "DIFFERENT", at);
                    }
                }
        }
    hqg::fused_set_onchip(1, 0, nullptr);
    printf("resident pipeline vs cpu engine%s: %d cases, %d failed\n", small ? " (on-chip kernel on 3 blocks)" : "",
           runs, fails);
    return fails;
}

int main(int argc, char **argv)
{
    /* --check: self-test and small sweep; --sweep: the sweep alone (the self-test's 2^33 cases are
     * too many for the sanitizers) */
    const bool sweep_only = argc > 1 && strcmp(argv[1], "--sweep") == 0;
    const bool check_only = sweep_only || (argc > 1 && strcmp(argv[1], "--check") == 0);
    const char *only = argc > 1 && !check_only ? argv[1] : nullptr;
    int dev = 0;
    CK(cudaSetDevice(dev));
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, dev));
    /* A blocking stream: the set-up copies and memsets on the default stream finish before the
     * timed work starts (with a non-blocking one they raced it: wrong histograms seen). */
    CK(cudaStreamCreate(&g_st));
    printf("device: %s, %d SMs, L2 %d MB, %d threads\n", p.name, p.multiProcessorCount, p.l2CacheSize >> 20,
           omp_get_max_threads());
    if (!check_only) {
        g_copy_gbs = measure_copy_bandwidth();
        printf("device-to-device copy (2 GiB, read + write): %.0f GB/s\n", g_copy_gbs);
    }

    hq_engine_cfg cfg = {0, 0, 1, 0};
    hq_engine *cpu = nullptr, *gpu = nullptr, *gpu_res = nullptr;
    hq_err err = {{0}};
    if (check_only) {
        unsigned long long bad = 0;
        if (!sweep_only) {
            CK(hqg::luma8_selftest(&bad));
            printf("8-bit luma fast path vs core/pixel.h, all colours x LUT values 0..511: %llu differences\n", bad);
        }
        if (hq_cpu_engine_create(&cfg, &cpu, &err)) {
            fprintf(stderr, "gpu_bench: %s\n", err.msg);
            return 1;
        }
        const int f = fused_sweep(cpu, true);
        hq_engine_destroy(cpu);
        return bad || f ? 1 : 0;
    }
    unsigned long long luma_bad = 0;
    CK(hqg::luma8_selftest(&luma_bad));
    printf("8-bit luma fast path vs core/pixel.h, all colours x LUT values 0..511: %llu differences\n", luma_bad);
    if (hq_cpu_engine_create(&cfg, &cpu, &err) || hq_gpu_engine_create(&cfg, &gpu, &err) ||
        setenv("HQ_GPU_RESIDENT", "1", 1) || hq_gpu_engine_create(&cfg, &gpu_res, &err)) {
        fprintf(stderr, "gpu_bench: %s\n", err.msg);
        return 1;
    }
    unsetenv("HQ_GPU_RESIDENT");
    char desc[400];
    gpu->ops->describe(gpu, desc, sizeof desc);
    printf("engine: %s\n", desc);
    const int sweep_fails = only ? 0 : fused_sweep(cpu, false);

    const int E = HQ_METHOD_EQUALIZE, S = HQ_METHOD_STRETCH;
    const Case cases[] = {
        {"gray8 30000x30000", {1, 1, 8, HQ_COLOR_LUMA, 0}, 30000, 30000, 1, 1, E},
        {"gray8 7680x4320", {1, 1, 8, HQ_COLOR_LUMA, 0}, 7680, 4320, 1, 1, E},
        {"rgb8 luma 7680x4320", {3, 1, 8, HQ_COLOR_LUMA, 0}, 7680, 4320, 1, 3, E},
        {"gray16 7680x4320", {1, 2, 16, HQ_COLOR_LUMA, 0}, 7680, 4320, 1, 2, E},
        {"gray8 128 x 512x512", {1, 1, 8, HQ_COLOR_LUMA, 0}, 512, 512, 128, 1, E},
        {"rgb8 channels 7680x4320", {3, 1, 8, HQ_COLOR_CHANNELS, 0}, 7680, 4320, 1, 3, E},
        {"stretch gray8 30000x30000", {1, 1, 8, HQ_COLOR_LUMA, 0}, 30000, 30000, 1, 1, S},
        {"stretch gray8 7680x4320", {1, 1, 8, HQ_COLOR_LUMA, 0}, 7680, 4320, 1, 1, S},
        {"stretch rgb8 luma 7680x4320", {3, 1, 8, HQ_COLOR_LUMA, 0}, 7680, 4320, 1, 3, S},
        {"stretch gray16 7680x4320", {1, 2, 16, HQ_COLOR_LUMA, 0}, 7680, 4320, 1, 2, S},
    };
    for (const Case &c : cases) {
        if (only && !strstr(c.name, only))
            continue;
        run_case(c, false, cpu, gpu, gpu_res);
        run_case(c, true, cpu, gpu, gpu_res);
    }
    hq_engine_destroy(cpu);
    hq_engine_destroy(gpu);
    hq_engine_destroy(gpu_res);

    printf("\nSUMMARY (%s; copy roofline %.0f GB/s; times are medians, data resident on the GPU)\n", p.name,
           g_copy_gbs);
    printf("%-28s %-8s %9s %7s %6s %9s %8s %9s %9s %9s %6s\n", "case", "image", "ours ms", "GB/s", "%roof",
           "npp ms", "npp/ours", "3k ms", "tiled ms", "const/nat", "check");
    bool all_ok = luma_bad == 0 && sweep_fails == 0;
    for (size_t i = 0; i < g_rows.size(); i++) {
        const Row &r = g_rows[i];
        const double gbs = r.bytes / (r.ours * 1e-3) / 1e9;
        char npp[16] = "n/a", ratio[16] = "", cn[16] = "", tiled[16] = "";
        if (r.tiled > 0)
            snprintf(tiled, sizeof tiled, "%.4f", r.tiled);
        if (r.npp > 0) {
            snprintf(npp, sizeof npp, "%.4f", r.npp);
            snprintf(ratio, sizeof ratio, "%.2fx", r.npp / r.ours);
        }
        if (r.constant && i > 0 && g_rows[i - 1].name == r.name)
            snprintf(cn, sizeof cn, "%.2f", r.ours / g_rows[i - 1].ours);
        all_ok &= r.ok_fused && r.ok_three;
        printf("%-28s %-8s %9.4f %7.0f %5.0f%% %9s %8s %9.4f %9s %9s %6s\n", r.name.c_str(),
               r.constant ? "constant" : "natural", r.ours, gbs, 100.0 * gbs / g_copy_gbs, npp, ratio, r.three, tiled,
               cn, r.ok_fused && r.ok_three ? "ok" : "FAIL");
    }
    printf("luma fast path self-test: %llu differences; resident sweep: %d failures\n", luma_bad, sweep_fails);
    printf("%s\n", all_ok ? "all results bit-identical to the CPU engine" : "SOME RESULTS DIFFER FROM THE CPU ENGINE");
    return all_ok ? 0 : 1;
}
