/* clahe_gpu_bench.cu — the GPU engine's CLAHE kernels on a device-resident 7680x4320 image, against
 * the device-to-device copy roofline and OpenCV's CLAHE on the host's cores.
 *
 *   nvcc -O3 -std=c++17 -arch=sm_90 -I. -Xcompiler -fopenmp -o build/bench/clahe_gpu_bench \
 *        bench/clahe_gpu_bench.cu build/core/clahe.o build/core/error.o $(pkg-config --cflags --libs opencv4)
 *   build/bench/clahe_gpu_bench [--runs N] [--threads 16] [--parts]
 *
 * The image (the smooth field with noise of bench/clahe_bench.cpp, 8-bit and 16-bit gray, grid 8x8,
 * clip 40 and 2) stays on the device. Per run, timed with CUDA events (median of --runs, default
 * 51, after 3 warm-ups), launched as the engine launches them (gpu/gpu_clahe_kernels.cuh): zeroed
 * tile histograms + the histogram kernels (hist), the tile LUTs built on the device from them
 * (lut: launch_luts, core/clahe.h's rule), the remap in place (remap; 16-bit: the LUTs' cells
 * built, then the blend). Work lists are built once. The engine's own path builds the LUTs on the
 * host (histograms down, core/clahe.c on --threads threads, LUTs up): timed apart as "host lut".
 * Bytes of a run: 3 a pixel per sample byte (the histogram's read, the remap's read and write);
 * roofline: a device-to-device copy of 1 GiB in the same run (read + write), and below each row the copy
 * of that image alone (its own size, timed as the kernels are). The result of the first
 * run is compared byte for byte with cv::createCLAHE on the host (the program exits 1 if not equal),
 * whose time at --threads (default 16) threads is the CPU column, and the device LUTs with
 * hq_clahe_tile_lut's of the same histograms (exits 1 if not equal). */
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

#include "clahe_image.h"

#include "../gpu/gpu_clahe_kernels.cuh"

namespace {


#define CK(call)                                                                                                  \
    do {                                                                                                          \
        cudaError_t e_ = (call);                                                                                  \
        if (e_ != cudaSuccess) {                                                                                  \
            fprintf(stderr, "clahe_gpu_bench: %s: %s (%s:%d)\n", #call, cudaGetErrorString(e_), __FILE__, __LINE__); \
            exit(1);                                                                                              \
        }                                                                                                         \
    } while (0)

double now()
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/* Seconds from event a to event b, waiting for b. */
double seconds(cudaEvent_t a, cudaEvent_t b)
{
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    return ms * 1e-3;
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
        const double sec = seconds(e0, e1);
        if (r >= 3)
            t.push_back(sec);
    }
    cudaFree(a);
    cudaFree(b);
    return 2.0 * n / median(t) / 1e9;
}

struct Case {
    hq_mode m;
    hq_clahe_geom g;
    double clip;
    std::vector<uint64_t> rsrc, rat, rown, csrc, cat, cown;
    std::vector<Item> items; /* the reflections (none when the grid divides the image) */
    std::vector<Unit> units;
    std::vector<uint32_t> starts;
    std::vector<RowGroup> groups;
    OwnLaunch own;
    GrayLaunch gray;
    uint64_t *d_r, *d_c;
    Item *d_i;
    Unit *d_u;
    uint32_t *d_s;
    RowGroup *d_g;
    unsigned long long *d_h;
    uint16_t *d_l;
    uint2 *d_cell;
};

void setup(Case &c, const void *d)
{
    hq_clahe_side rs = {}, cs = {};
    hq_clahe_side_make(H, c.g.tiles_y, c.g.tile_h, 0, H, &rs);
    hq_clahe_side_make(W, c.g.tiles_x, c.g.tile_w, 0, W, &cs);
    flatten(&rs, c.rsrc, c.rat, c.rown);
    flatten(&cs, c.csrc, c.cat, c.cown);
    const uint32_t hl = hq_mode_bins(&c.m);
    CK(plan_own(c.m.sample_bytes, hl, &c.own));
    own_work(&rs, &cs, 0, 0, 0, c.g.tiles_y - 1, 0, c.g.tiles_x - 1, c.m.sample_bytes, &c.own, c.units, c.starts);
    hq_clahe_side_free(&rs);
    hq_clahe_side_free(&cs);
    make_items(c.rat, c.cat, 0, c.g.tiles_y - 1, 0, c.g.tiles_x - 1, hl <= kSharedCounters ? kItemPixels : kItemPixelsWin,
               c.items, &c.rown, &c.cown);
    CK(plan_gray(c.m.sample_bytes, hl, 0, H, 0, W, &c.g, d, &c.gray));
    if (!c.gray.kind) {
        fprintf(stderr, "clahe_gpu_bench: no fast remap for this image\n");
        exit(1);
    }
    if (c.gray.kind != 8)
        make_groups(0, H, c.gray.group_rows, hq_clahe_inv(c.g.tile_h), c.g.tiles_y, c.groups);
    const size_t len = hq_clahe_ntiles(&c.g) * hl;
    CK(cudaMalloc(&c.d_r, c.rsrc.size() * 8));
    CK(cudaMalloc(&c.d_c, c.csrc.size() * 8));
    CK(cudaMalloc(&c.d_i, std::max<size_t>(1, c.items.size()) * sizeof(Item)));
    CK(cudaMalloc(&c.d_u, c.units.size() * sizeof(Unit)));
    CK(cudaMalloc(&c.d_s, std::max<size_t>(1, c.starts.size()) * sizeof(uint32_t)));
    CK(cudaMalloc(&c.d_g, std::max<size_t>(1, c.groups.size()) * sizeof(RowGroup)));
    CK(cudaMalloc(&c.d_h, len * 8));
    CK(cudaMalloc(&c.d_l, len * 2));
    CK(cudaMalloc(&c.d_cell, std::max<uint64_t>(8, c.gray.cell_bytes)));
    CK(cudaMemcpy(c.d_r, c.rsrc.data(), c.rsrc.size() * 8, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(c.d_c, c.csrc.data(), c.csrc.size() * 8, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(c.d_i, c.items.data(), c.items.size() * sizeof(Item), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(c.d_u, c.units.data(), c.units.size() * sizeof(Unit), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(c.d_s, c.starts.data(), c.starts.size() * sizeof(uint32_t), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(c.d_g, c.groups.data(), c.groups.size() * sizeof(RowGroup), cudaMemcpyHostToDevice));
}

void release(Case &c)
{
    cudaFree(c.d_r);
    cudaFree(c.d_c);
    cudaFree(c.d_i);
    cudaFree(c.d_u);
    cudaFree(c.d_s);
    cudaFree(c.d_cell);
    cudaFree(c.d_g);
    cudaFree(c.d_h);
    cudaFree(c.d_l);
}

/* The engine's launches (gpu/gpu_clahe.cu) for a whole gray image: the tile histograms zeroed,
 * then counted. */
void zero_hist(const Case &c)
{
    CK(cudaMemsetAsync(c.d_h, 0, hq_clahe_ntiles(&c.g) * hq_mode_bins(&c.m) * 8));
}
template <typename T> void count_hist(const Case &c, const T *d)
{
    const uint32_t bins = hq_mode_bins(&c.m);
    launch_own(c.own, d, sizeof(T), W, c.d_u, c.d_s, (uint32_t)c.units.size(), bins, c.d_h);
    const uint32_t nb = (uint32_t)c.items.size();
    if (!nb) {
    } else if (bins <= kSharedCounters) {
        k_clahe_hist<T><<<nb, kThreads, bins * 4>>>(d, W, 1, c.d_r, c.d_c, c.d_i, 0, 0, bins, 1, 0, bins - 1, c.d_h);
    } else {
        const size_t shm = (bins < kWindow ? bins : kWindow) * 4;
        CK(cudaFuncSetAttribute(k_clahe_hist_win<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)shm));
        k_clahe_hist_win<T><<<dim3(nb, (bins + kWindow - 1) / kWindow), kWinThreads, shm>>>(
            d, W, 1, c.d_r, c.d_c, c.d_i, 0, 0, bins, 1, 0, bins - 1, c.d_h);
    }
    CK(cudaGetLastError());
}
template <typename T> void launch_hist(const Case &c, const T *d)
{
    zero_hist(c);
    count_hist<T>(c, d);
}

/* The tile LUTs from the device histograms, on the device. */
void device_luts(const Case &c)
{
    const uint32_t bins = hq_mode_bins(&c.m);
    launch_luts(c.d_h, bins, (uint32_t)hq_clahe_ntiles(&c.g), hq_clahe_area(&c.g),
                hq_clahe_clip_limit(c.clip, hq_clahe_area(&c.g), bins), c.d_l);
    CK(cudaGetLastError());
}

template <typename T> void launch_remap(const Case &c, T *d)
{
    launch_gray(c.gray, d, 0, H, 0, W, &c.g, c.d_l, 0, 0, (uint32_t)c.g.tiles_x, hq_mode_bins(&c.m), c.d_g,
                (uint32_t)c.groups.size(), c.d_cell);
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
int run_case(const cv::Mat &src, double clip, int runs, int threads, double roof, bool parts)
{
    Case c;
    c.m = {1, (uint32_t)sizeof(T), (uint32_t)(8 * sizeof(T)), HQ_COLOR_LUMA, 0};
    c.clip = clip;
    hq_clahe_cfg cfg = {8, 8, 0, clip};
    hq_clahe_geom_make(&cfg, H, W, &c.g);
    const size_t bytes = (size_t)W * H * sizeof(T), len = hq_clahe_ntiles(&c.g) * hq_mode_bins(&c.m);
    T *d_src, *d_src2, *d;
    CK(cudaMalloc(&d_src, bytes));
    CK(cudaMalloc(&d_src2, bytes));
    CK(cudaMalloc(&d, bytes));
    setup(c, d);
    std::vector<uint64_t> h(len);
    std::vector<uint16_t> lut(len), dlut(len);
    CK(cudaMemcpy(d_src, src.data, bytes, cudaMemcpyHostToDevice));
    /* The result, checked against OpenCV; the device LUTs against core/clahe.c's. */
    CK(cudaMemcpy(d, d_src, bytes, cudaMemcpyDeviceToDevice));
    launch_hist<T>(c, d);
    device_luts(c);
    CK(cudaMemcpy(dlut.data(), c.d_l, len * 2, cudaMemcpyDeviceToHost));
    launch_remap<T>(c, d);
    cv::Mat mine(H, W, src.type());
    CK(cudaMemcpy(mine.data, d, bytes, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(d, d_src, bytes, cudaMemcpyDeviceToDevice));
    launch_hist<T>(c, d);
    CK(cudaDeviceSynchronize());
    host_luts(c, h, lut, threads);
    const bool lut_eq = lut == dlut;
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
    cudaEvent_t e0, e1, e2, e3;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaEventCreate(&e2));
    CK(cudaEventCreate(&e3));
    std::vector<double> th, tl, tr, thl;
    CK(cudaMemcpy(d, d_src, bytes, cudaMemcpyDeviceToDevice));
    for (int r = 0; r < runs + 3; r++) {
        /* A copy ahead of the timed work keeps the device busy while the host enqueues it, so the
         * events time the kernels, not the host's launch latency. */
        CK(cudaMemcpyAsync(d_src2, d_src, bytes, cudaMemcpyDeviceToDevice));
        CK(cudaEventRecord(e0));
        launch_hist<T>(c, d);
        CK(cudaEventRecord(e1));
        device_luts(c);
        CK(cudaEventRecord(e2));
        launch_remap<T>(c, d);
        CK(cudaEventRecord(e3));
        const double sr = seconds(e2, e3), sh = seconds(e0, e1), sl = seconds(e1, e2);
        if (r >= 3) {
            th.push_back(sh);
            tl.push_back(sl);
            tr.push_back(sr);
        }
    }
    /* --parts: the histogram's two launches timed each on its own (a copy ahead of each, as above). */
    std::vector<double> tz, tk;
    for (int r = 0; parts && r < runs + 3; r++) {
        CK(cudaMemcpyAsync(d_src2, d_src, bytes, cudaMemcpyDeviceToDevice));
        CK(cudaEventRecord(e0));
        zero_hist(c);
        CK(cudaEventRecord(e1));
        CK(cudaMemcpyAsync(d_src2, d_src, bytes, cudaMemcpyDeviceToDevice));
        CK(cudaEventRecord(e2));
        count_hist<T>(c, d);
        CK(cudaEventRecord(e3));
        if (r >= 3) {
            tz.push_back(seconds(e0, e1));
            tk.push_back(seconds(e2, e3));
        }
    }
    /* The same image's own copy (a device-to-device copy of its bytes, timed as the kernels are): the
     * roofline at this size, where a launch's ramp and tail weigh more than in the 1 GiB copy. */
    std::vector<double> tcp;
    for (int r = 0; r < runs + 3; r++) {
        CK(cudaMemcpyAsync(d_src2, d_src, bytes, cudaMemcpyDeviceToDevice));
        CK(cudaEventRecord(e0));
        CK(cudaMemcpyAsync(d_src2, d, bytes, cudaMemcpyDeviceToDevice));
        CK(cudaEventRecord(e1));
        if (r >= 3)
            tcp.push_back(seconds(e0, e1));
    }
    for (int r = 0; r < std::max(5, runs / 5) + 2; r++) {
        const double l0 = now();
        host_luts(c, h, lut, threads);
        if (r >= 2)
            thl.push_back(now() - l0);
    }
    const double hs = median(th), lt = median(tl), rm = median(tr), k = hs + rm, cvt = median(tc), hlt = median(thl);
    const double gbs = 3.0 * bytes / k / 1e9;
    printf("%-7s %5.0f %9.3f %9.3f %9.3f %8.1f %6.0f%% %9.3f %9.3f %6.0f%% %10.1f %8.1fx %9.1fx %9.3f  %s  %s\n",
           sizeof(T) == 1 ? "8-bit" : "16-bit", clip, hs * 1e3, rm * 1e3, k * 1e3, gbs, 100.0 * gbs / roof, lt * 1e3,
           (k + lt) * 1e3, 100.0 * 3.0 * bytes / (k + lt) / 1e9 / roof, cvt * 1e3, cvt / k, cvt / (k + lt), hlt * 1e3,
           eq ? "yes" : "NO", lut_eq ? "yes" : "NO");
    const double ci = median(tcp), ri = 2.0 * bytes / ci / 1e9;
    printf("  (the image's own copy: %.4f ms, %.1f GB/s read + write; kern at %.0f%% of it for 3 bytes a pixel)\n",
           ci * 1e3, ri, 100.0 * gbs / ri);
    if (parts)
        printf("  (parts: zeroing the tile histograms %.4f ms, counting %.4f ms, each timed alone)\n", median(tz) * 1e3,
               median(tk) * 1e3);
    cudaFree(d_src);
    cudaFree(d_src2);
    cudaFree(d);
    release(c);
    return eq && lut_eq ? 0 : 1;
}

} // namespace

int main(int argc, char **argv)
{
    int runs = 51, threads = 16;
    bool parts = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--parts"))
            parts = true;
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc)
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
    printf("%-7s %5s %9s %9s %9s %8s %7s %9s %9s %7s %10s %9s %10s %9s  %s  %s\n", "image", "clip", "hist ms",
           "remap ms", "kern ms", "GB/s", "roof", "lut ms", "total ms", "roof", "opencv ms", "vs cv", "vs cv+lut",
           "host lut", "equal", "lut=");
    int bad = 0;
    const cv::Mat s8 = make_image<uint8_t>(CV_8UC1, 255), s16 = make_image<uint16_t>(CV_16UC1, 65535);
    for (double clip : {40.0, 2.0}) {
        bad += run_case<uint8_t>(s8, clip, runs, threads, roof, parts);
        bad += run_case<uint16_t>(s16, clip, runs, threads, roof, parts);
    }
    printf("kern: histogram + remap kernels on the resident image (16-bit remap: cells + blend); lut: tile LUTs built "
           "on the device; total: kern + lut (its roof: 3 bytes a pixel over total); vs cv: OpenCV's time over kern, "
           "vs cv+lut: over total; host lut: the engine's round trip instead (histograms down, core/clahe.c on %d "
           "threads, LUTs up); equal: = OpenCV; lut=: device LUTs = core/clahe.c's\n",
           threads);
    return bad ? 1 : 0;
}
