/* clahe_image.h — the synthetic image both CLAHE benches measure (clahe_bench.cpp on the CPU,
 * clahe_gpu_bench.cu on the GPU), so that their figures are of the same pixels: 7680x4320, a smooth
 * pattern at two scales plus 4% uniform noise from a fixed LCG, scaled to [0, top]. And the median
 * both take of their timings. */
#ifndef HQ_BENCH_CLAHE_IMAGE_H
#define HQ_BENCH_CLAHE_IMAGE_H

#include <opencv2/core.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

const int W = 7680, H = 4320;

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

inline double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

#endif
