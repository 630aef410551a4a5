/* clahe_gpu_bench.cu — the GPU engine's CLAHE kernels on a device-resident 7680x4320 image, against
 * the device-to-device copy roofline and OpenCV's CLAHE on the host's cores.
 *
 *   nvcc -O3 -std=c++17 -arch=sm_90 -I. -Xcompiler -fopenmp -o build/bench/clahe_gpu_bench \
 *        bench/clahe_gpu_bench.cu build/core/clahe.o build/core/error.o $(pkg-config --cflags --libs opencv4)
 *   build/bench/clahe_gpu_bench [--runs N] [--threads 16]
 *
 * The image (the smooth field with noise of bench/clahe_bench.cpp, 8-bit and 16-bit gray, grid 8x8,
 * clip 40 and 2) stays on the device. Per run, timed with CUDA events (median of --runs, default
 * 51, after 3 warm-ups): zeroed tile histograms + the histogram kernel (gpu/gpu_clahe_kernels.cuh),
 * then the remap kernel in place, as the engine launches them. The tile LUTs are built on the host
 * between the two, as the engine does (the rule lives once, in core/clahe.c); that round trip
 * (histograms down, LUTs up) is timed on its own and shown apart. Work lists are built once.
 * Bytes of a run: 3 a pixel per sample byte (the histogram's read, the remap's read and write);
 * roofline: a device-to-device copy of 1 GiB in the same run (read + write). The result of the first
 * run is compared byte for byte with cv::createCLAHE on the host (the program exits 1 if not equal),
 * whose time at --threads (default 16) threads is the CPU column. */
#include <cuda_runtime.h>
#include <omp.h>

#include <opencv2/core.hpp>
#include <opencv2/core/utility.hpp>
#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "../gpu/gpu_clahe_kernels.cuh"

namespace {

const int W = 7680, H = 4320;

#define CK(call)                                                                                                  \
    do {                                                                                                          \
        cudaError_t e_ = (call);                                                                                  \
        if (e_ != cudaSuccess) {                                                                                  \
            fprintf(stderr, "clahe_gpu_bench: %s: %s (%s:%d)\n", #call, cudaGetErrorString(e_), __FILE__, __LINE__); \
            exit(1);                                                                                              \
        }                                                                                                         \
    } while (0)

template <typename T> cv::Mat make_image(int type, double top)
{
    cv::Mat m(H, W, type);
    uint64_t s = 0x1234567;
    for (int y = 0; y < H; y++) {
        T *row = m.ptr<T>(y);
        for (int x = 0; x < W; x++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            const double f = 0.35 + 0.2 * std::sin(x / 300.0) * std::cos(y / 210.0) + 0.1 * std::sin((x + y) / 37.0);
            const double noise = ((double)(s >> 40) / (double)(1ull << 24) - 0.5) * 0.04;
            row[x] = (T)std::lround(std::min(1.0, std::max(0.0, f + noise)) * top);
        }
    }
    return m;
}

double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

double now()
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/* Device-to-device copy bandwidth (read + write bytes over time), GB/s. */
double copy_roofline()
{
    const size_t n = (size_t)1 << 30;
    void *a, *b;
    CK(cudaMalloc(&a, n));
    CK(cudaMalloc(&b, n));
    CK(cudaMemset(a, 1, n));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<double> t;
    for (int r = 0; r < 13; r++) {
        CK(cudaEventRecord(e0));
        CK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice));
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (r >= 3)
            t.push_back(ms * 1e-3);
    }
    cudaFree(a);
    cudaFree(b);
    return 2.0 * n / median(t) / 1e9;
}

struct Case {
    hq_mode m;
    hq_clahe_geom g;
    double clip;
    std::vector<uint64_t> rsrc, rat, csrc, cat;
    std::vector<Item> items;
    std::vector<RowGroup> groups;
    uint64_t *d_r, *d_c, *d_t;
    Item *d_i;
    RowGroup *d_g;
    unsigned long long *d_h;
    uint16_t *d_l;
};

void setup(Case &c)
{
    hq_clahe_side rs = {}, cs = {};
    hq_clahe_side_make(H, c.g.tiles_y, c.g.tile_h, 0, H, &rs);
    hq_clahe_side_make(W, c.g.tiles_x, c.g.tile_w, 0, W, &cs);
    flatten(&rs, c.rsrc, c.rat);
    flatten(&cs, c.csrc, c.cat);
    hq_clahe_side_free(&rs);
    hq_clahe_side_free(&cs);
    const uint32_t hl = hq_mode_bins(&c.m);
    make_items(c.rat, c.cat, 0, c.g.tiles_y - 1, 0, c.g.tiles_x - 1, hl <= kSharedCounters ? kItemPixels : kItemPixelsWin,
               c.items);
    make_groups(0, H, W, hq_clahe_inv(c.g.tile_h), c.g.tiles_y, c.groups);
    const size_t len = hq_clahe_ntiles(&c.g) * hl;
    CK(cudaMalloc(&c.d_r, c.rsrc.size() * 8));
    CK(cudaMalloc(&c.d_c, c.csrc.size() * 8));
    CK(cudaMalloc(&c.d_t, c.cat.size() * 8));
    CK(cudaMalloc(&c.d_i, c.items.size() * sizeof(Item)));
    CK(cudaMalloc(&c.d_g, c.groups.size() * sizeof(RowGroup)));
    CK(cudaMalloc(&c.d_h, len * 8));
    CK(cudaMalloc(&c.d_l, len * 2));
    CK(cudaMemcpy(c.d_r, c.rsrc.data(), c.rsrc.size() * 8, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(c.d_c, c.csrc.data(), c.csrc.size() * 8, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(c.d_t, c.cat.data(), c.cat.size() * 8, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(c.d_i, c.items.data(), c.items.size() * sizeof(Item), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(c.d_g, c.groups.data(), c.groups.size() * sizeof(RowGroup), cudaMemcpyHostToDevice));
}

void release(Case &c)
{
    cudaFree(c.d_r);
    cudaFree(c.d_c);
    cudaFree(c.d_t);
    cudaFree(c.d_i);
    cudaFree(c.d_g);
    cudaFree(c.d_h);
    cudaFree(c.d_l);
}

/* The engine's launches (gpu/gpu_clahe.cu) for a whole gray image. */
template <typename T> void launch_hist(const Case &c, const T *d)
{
    const uint32_t bins = hq_mode_bins(&c.m);
    CK(cudaMemsetAsync(c.d_h, 0, hq_clahe_ntiles(&c.g) * bins * 8));
    const uint32_t nb = (uint32_t)c.items.size();
    if (bins <= kSharedCounters) {
        k_clahe_hist<T><<<nb, kThreads, bins * 4>>>(d, W, 1, c.d_r, c.d_c, c.d_t, c.d_i, 0, 0, bins, 1, 0, bins - 1,
                                                    c.d_h);
    } else {
        const size_t shm = (bins < kWindow ? bins : kWindow) * 4;
        CK(cudaFuncSetAttribute(k_clahe_hist_win<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)shm));
        k_clahe_hist_win<T><<<dim3(nb, (bins + kWindow - 1) / kWindow), kWinThreads, shm>>>(
            d, W, 1, c.d_r, c.d_c, c.d_t, c.d_i, 0, 0, bins, 1, 0, bins - 1, c.d_h);
    }
    CK(cudaGetLastError());
}

template <typename T> void launch_remap(const Case &c, T *d)
{
    const uint32_t bins = hq_mode_bins(&c.m), ntx = (uint32_t)c.g.tiles_x, nb = (uint32_t)c.groups.size();
    const float inv_h = hq_clahe_inv(c.g.tile_h), inv_w = hq_clahe_inv(c.g.tile_w);
    if (sizeof(T) == 1 && bins == 256 && ntx * 512 <= kLut8Bytes)
        k_clahe_remap_gray<T, true><<<nb, kThreads, ntx * 512>>>(d, W, 0, 0, inv_h, inv_w, c.g.tiles_y, c.g.tiles_x,
                                                                 c.d_l, 0, 0, ntx, bins, bins - 1, c.d_g);
    else
        k_clahe_remap_gray<T, false><<<nb, kThreads>>>(d, W, 0, 0, inv_h, inv_w, c.g.tiles_y, c.g.tiles_x, c.d_l, 0,
                                                       0, ntx, bins, bins - 1, c.d_g);
    CK(cudaGetLastError());
}

/* Histograms down, LUTs on the host's threads (core/clahe.c), LUTs up. */
void host_luts(const Case &c, std::vector<uint64_t> &h, std::vector<uint16_t> &lut, int threads)
{
    const uint32_t bins = hq_mode_bins(&c.m);
    const int64_t n = (int64_t)hq_clahe_ntiles(&c.g);
    CK(cudaMemcpy(h.data(), c.d_h, h.size() * 8, cudaMemcpyDeviceToHost));
    const int64_t limit = hq_clahe_clip_limit(c.clip, hq_clahe_area(&c.g), bins);
#pragma omp parallel num_threads(threads)
    {
        std::vector<uint64_t> scratch(bins);
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < n; t++)
            hq_clahe_tile_lut(h.data() + t * bins, bins, hq_clahe_area(&c.g), limit, lut.data() + t * bins,
                              scratch.data());
    }
    CK(cudaMemcpy(c.d_l, lut.data(), lut.size() * 2, cudaMemcpyHostToDevice));
}

template <typename T>
int run_case(const cv::Mat &src, double clip, int runs, int threads, double roof)
{
    Case c;
    c.m = {1, (uint32_t)sizeof(T), (uint32_t)(8 * sizeof(T)), HQ_COLOR_LUMA};
    c.clip = clip;
    hq_clahe_cfg cfg = {8, 8, 0, clip};
    hq_clahe_geom_make(&cfg, H, W, &c.g);
    setup(c);
    const size_t bytes = (size_t)W * H * sizeof(T), len = hq_clahe_ntiles(&c.g) * hq_mode_bins(&c.m);
    std::vector<uint64_t> h(len);
    std::vector<uint16_t> lut(len);
    T *d_src, *d;
    CK(cudaMalloc(&d_src, bytes));
    CK(cudaMalloc(&d, bytes));
    CK(cudaMemcpy(d_src, src.data, bytes, cudaMemcpyHostToDevice));
    /* The result, checked against OpenCV. */
    CK(cudaMemcpy(d, d_src, bytes, cudaMemcpyDeviceToDevice));
    launch_hist<T>(c, d);
    host_luts(c, h, lut, threads);
    launch_remap<T>(c, d);
    cv::Mat mine(H, W, src.type());
    CK(cudaMemcpy(mine.data, d, bytes, cudaMemcpyDeviceToHost));
    cv::setNumThreads(threads);
    cv::Ptr<cv::CLAHE> cl = cv::createCLAHE(clip, cv::Size(8, 8));
    cv::Mat want;
    std::vector<double> tc;
    for (int r = 0; r < 2 + std::max(5, runs / 5); r++) {
        const double t0 = now();
        cl->apply(src, want);
        if (r >= 2)
            tc.push_back(now() - t0);
    }
    const bool eq = cv::countNonZero(want != mine) == 0;
    /* Timed: the kernels on the resident image (in place: later runs see remapped data, the same
     * work), and the host LUT round trip apart. */
    cudaEvent_t e0, e1, e2;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaEventCreate(&e2));
    std::vector<double> th, tr, tk, tl;
    CK(cudaMemcpy(d, d_src, bytes, cudaMemcpyDeviceToDevice));
    for (int r = 0; r < runs + 3; r++) {
        CK(cudaEventRecord(e0));
        launch_hist<T>(c, d);
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        const double l0 = now();
        host_luts(c, h, lut, threads);
        const double l1 = now();
        CK(cudaEventRecord(e1));
        launch_remap<T>(c, d);
        CK(cudaEventRecord(e2));
        CK(cudaEventSynchronize(e2));
        float ms_h, ms_r;
        CK(cudaEventElapsedTime(&ms_h, e0, e1));
        CK(cudaEventElapsedTime(&ms_r, e1, e2));
        if (r >= 3) {
            /* e0..e1 spans the LUT round trip too: the histogram alone is timed below. */
            tr.push_back(ms_r * 1e-3);
            tl.push_back(l1 - l0);
        }
    }
    for (int r = 0; r < runs + 3; r++) {
        CK(cudaEventRecord(e0));
        launch_hist<T>(c, d);
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (r >= 3)
            th.push_back(ms * 1e-3);
    }
    const double hs = median(th), rm = median(tr), k = hs + rm, lt = median(tl), cvt = median(tc);
    const double gbs = 3.0 * bytes / k / 1e9;
    printf("%-7s %5.0f %9.3f %9.3f %9.3f %8.1f %6.0f%% %9.3f %10.1f %8.1fx %8.1fx  %s\n", sizeof(T) == 1 ? "8-bit" : "16-bit",
           clip, hs * 1e3, rm * 1e3, k * 1e3, gbs, 100.0 * gbs / roof, lt * 1e3, cvt * 1e3, cvt / k, cvt / (k + lt),
           eq ? "yes" : "NO");
    cudaFree(d_src);
    cudaFree(d);
    release(c);
    return eq ? 0 : 1;
}

} // namespace

int main(int argc, char **argv)
{
    int runs = 51, threads = 16;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--runs") && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    const double roof = copy_roofline();
    printf("CLAHE on the device, %dx%d gray, grid 8x8, median of %d runs; %s; OpenCV %s on %d threads\n", W, H, runs,
           prop.name, CV_VERSION, threads);
    printf("roofline: device-to-device copy %.1f GB/s (read + write); bytes of a run: 3 a pixel per sample byte\n",
           roof);
    printf("%-7s %5s %9s %9s %9s %8s %7s %9s %10s %9s %9s  %s\n", "image", "clip", "hist ms", "remap ms", "kern ms",
           "GB/s", "roof", "lut ms", "opencv ms", "vs cv", "vs cv+lut", "equal");
    int bad = 0;
    const cv::Mat s8 = make_image<uint8_t>(CV_8UC1, 255), s16 = make_image<uint16_t>(CV_16UC1, 65535);
    for (double clip : {40.0, 2.0}) {
        bad += run_case<uint8_t>(s8, clip, runs, threads, roof);
        bad += run_case<uint16_t>(s16, clip, runs, threads, roof);
    }
    printf("kern: histogram + remap kernels on the resident image; lut: histograms down, LUTs on the host "
           "(core/clahe.c, %d threads), LUTs up; vs cv: OpenCV's time over kern (vs cv+lut: over kern + lut)\n",
           threads);
    return bad ? 1 : 0;
}
