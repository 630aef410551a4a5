/* clahe_bench.cpp — the CPU engine's CLAHE beside OpenCV's cv::createCLAHE, same thread count.
 *
 *   make build/bench/clahe_bench && build/bench/clahe_bench [--runs N] [--threads 1,2]
 *
 * One 7680x4320 image in memory (a smooth field with noise, 8-bit and 16-bit), clip limit 40 and
 * 2, grid 8x8, median of --runs (default 11) after 2 warm-up runs, contenders taking turns:
 *   opencv  cv::createCLAHE(clip, Size(8, 8))->apply(src, dst) after cv::setNumThreads(T)
 *   ours    zeroed tile histograms + engine clahe_histogram + tile LUTs (hq_clahe_tile_lut, tiles
 *           over T OpenMP threads, as app/run/clahe.c builds them) + engine clahe_remap in place
 *           on a copy of src made outside the timed region (what the tool does with a block)
 * The outputs must be equal byte for byte, or the program says so and exits 1. */
#include <opencv2/core.hpp>
#include <opencv2/core/utility.hpp>
#include <opencv2/imgproc.hpp>

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "clahe_image.h"

extern "C" {
#include "../core/clahe.h"
#include "../engine/engine.h"
}

namespace {


double now()
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Ours {
    hq_engine *eng = nullptr;
    std::vector<uint64_t> hist, scratch;
    std::vector<uint16_t> lut;
};

void ours_run(Ours &o, cv::Mat &img, const hq_mode &m, const hq_clahe_geom &g, double clip, int threads)
{
    std::fill(o.hist.begin(), o.hist.end(), 0);
    hq_clahe_piece p = {img.data, 0, 0, (uint64_t)H, (uint64_t)W, 0};
    hq_err err;
    if (o.eng->ops->clahe_histogram(o.eng, &p, &m, &g, o.hist.data(), &err)) {
        fprintf(stderr, "%s\n", err.msg);
        exit(1);
    }
    const uint32_t bins = hq_mode_bins(&m);
    const int64_t limit = hq_clahe_clip_limit(clip, hq_clahe_area(&g), bins);
    const int64_t n = (int64_t)hq_clahe_ntiles(&g);
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int64_t t = 0; t < n; t++)
        hq_clahe_tile_lut(o.hist.data() + t * bins, bins, hq_clahe_area(&g), limit, o.lut.data() + t * bins,
                          o.scratch.data() + (size_t)omp_get_thread_num() * bins);
    if (o.eng->ops->clahe_remap(o.eng, &p, &m, &g, o.lut.data(), &err)) {
        fprintf(stderr, "%s\n", err.msg);
        exit(1);
    }
}

} // namespace

int main(int argc, char **argv)
{
    int runs = 11;
    std::vector<int> threads = {1, 2};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--runs") && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            threads.clear();
            for (char *t = strtok(argv[++i], ","); t; t = strtok(NULL, ","))
                threads.push_back(atoi(t));
        }
    }
    printf("CLAHE, %dx%d, grid 8x8, median of %d runs; OpenCV %s\n", W, H, runs, CV_VERSION);
    printf("%-7s %5s %7s %12s %12s %8s  %s\n", "image", "clip", "threads", "opencv ms", "ours ms", "ratio", "equal");
    int bad = 0;
    for (int depth = 8; depth <= 16; depth += 8) {
        const cv::Mat src = depth == 8 ? make_image<uint8_t>(CV_8UC1, 255) : make_image<uint16_t>(CV_16UC1, 65535);
        const hq_mode m = {1, (uint32_t)depth / 8, (uint32_t)depth, HQ_COLOR_LUMA, 0};
        for (double clip : {40.0, 2.0}) {
            hq_clahe_cfg cfg = {8, 8, 0, clip};
            hq_clahe_geom g;
            hq_clahe_geom_make(&cfg, H, W, &g);
            for (int t : threads) {
                cv::setNumThreads(t);
                cv::Ptr<cv::CLAHE> cl = cv::createCLAHE(clip, cv::Size(8, 8));
                hq_engine_cfg ec = {t, 0, 1, 0};
                Ours o;
                hq_err err;
                if (hq_cpu_engine_create(&ec, &o.eng, &err)) {
                    fprintf(stderr, "%s\n", err.msg);
                    return 1;
                }
                const size_t len = hq_clahe_ntiles(&g) * hq_mode_bins(&m);
                o.hist.assign(len, 0);
                o.lut.assign(len, 0);
                o.scratch.assign((size_t)t * hq_mode_bins(&m), 0);
                cv::Mat dst, mine;
                std::vector<double> tc, to;
                for (int r = 0; r < runs + 2; r++) {
                    double t0 = now();
                    cl->apply(src, dst);
                    double t1 = now();
                    mine = src.clone();
                    double t2 = now();
                    ours_run(o, mine, m, g, clip, t);
                    double t3 = now();
                    if (r >= 2) {
                        tc.push_back(t1 - t0);
                        to.push_back(t3 - t2);
                    }
                }
                const bool eq = cv::countNonZero(dst != mine) == 0;
                bad += !eq;
                printf("%-7s %5.0f %7d %12.1f %12.1f %7.2fx  %s\n", depth == 8 ? "8-bit" : "16-bit", clip, t,
                       median(tc) * 1e3, median(to) * 1e3, median(tc) / median(to), eq ? "yes" : "NO");
                hq_engine_destroy(o.eng);
            }
        }
    }
    printf("ratio: OpenCV's time over ours (>= 1: ours at least as fast)\n");
    return bad ? 1 : 0;
}
