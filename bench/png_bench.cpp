/* png_bench.cpp — our PNG codec (io/png/codec.c) against OpenCV's cv::imencode/cv::imdecode defaults,
 * single thread, on natural-looking synthetic 7680x4320 8-bit images: gray, RGB (smooth gradients,
 * shapes, blur and sensor-like noise; neither constant nor pure noise) and a gray object on a flat
 * black background (where Huffman-only coding, fast elsewhere, falls behind run-length matching).
 *
 * MB/s = raw pixel bytes / 1e6 / seconds of thread CPU time, best of N runs taken round-robin
 * (the build machine is shared: interference only ever adds time, and CPU time leaves out the time
 * spent descheduled). Decoders are timed on the same bytes (the file OpenCV's default encoder
 * wrote, and our level-6 file). The "candidates" table is how the fast default in
 * hq_png_zopts_for_level was chosen.
 *
 * Build and run (from the repository root): `make build/bench/png_bench`, or by hand after `make`:
 *
 *   g++ -O2 -std=c++17 -I. bench/png_bench.cpp build/io/png/codec.o build/io/png/fast.o build/io/png/format.o \
 *       build/io/zfast.o build/core/error.o $(pkg-config --cflags --libs opencv4 libpng zlib) -lisal -ldeflate -o build/png_bench
 *   build/png_bench [runs]      # runs: timed repetitions per measurement, default 5
 *   HQ_ISAL=0 build/png_bench [runs]   # the default encoder with libdeflate instead of igzip
 *
 * Output: bench/results/png_bench.txt. */
#include <opencv2/core.hpp>
#include <opencv2/core/utility.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <png.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

#include "io/png/codec.h"

namespace {

/* Thread CPU time, not wall time: the build machine is shared, and time spent descheduled is
 * not the codec's. Both codecs run on the calling thread (cv::setNumThreads(1)). */
double cpu_now()
{
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Runs the functions round-robin `runs` times and returns each one's best time, so that a slow
 * phase of the machine hits all of them alike. */
std::vector<double> best_seconds(int runs, const std::vector<std::function<void()>> &fs)
{
    std::vector<double> best(fs.size(), 1e30);
    for (int r = 0; r < runs; r++)
        for (size_t i = 0; i < fs.size(); i++) {
            double t0 = cpu_now();
            fs[i]();
            best[i] = std::min(best[i], cpu_now() - t0);
        }
    return best;
}

/* A scene: two-axis gradients and a radial falloff, filled shapes, a blur to soften the edges,
 * then Gaussian noise of sigma 2 (what a camera or detector adds). `sparse`: the scene only inside
 * an ellipse over a constant black background, like a CT slice or a microscope field. */
cv::Mat synthetic(int channels, bool sparse)
{
    const int W = 7680, H = 4320;
    cv::RNG rng(12345);
    std::vector<cv::Mat> planes;
    for (int c = 0; c < channels; c++) {
        cv::Mat p(H, W, CV_32F);
        for (int y = 0; y < H; y++) {
            float *row = p.ptr<float>(y);
            for (int x = 0; x < W; x++) {
                double dx = (x - W * (0.3 + 0.2 * c)) / W, dy = (y - H * 0.6) / H;
                row[x] = (float)(60 + 50.0 * x / W + 30.0 * y / H * (c + 1) + 60 * std::exp(-4 * (dx * dx + dy * dy)));
            }
        }
        planes.push_back(p);
    }
    cv::Mat img;
    cv::merge(planes, img);
    for (int i = 0; i < 60; i++) {
        cv::Point ctr(rng.uniform(0, W), rng.uniform(0, H));
        cv::Scalar col(rng.uniform(0, 255), rng.uniform(0, 255), rng.uniform(0, 255));
        if (i % 2)
            cv::circle(img, ctr, rng.uniform(50, 600), col, cv::FILLED, cv::LINE_AA);
        else
            cv::rectangle(img, cv::Rect(ctr.x, ctr.y, rng.uniform(100, 1500), rng.uniform(100, 900)), col, cv::FILLED);
    }
    cv::GaussianBlur(img, img, cv::Size(0, 0), 3.0);
    cv::Mat noise(img.size(), img.type());
    rng.fill(noise, cv::RNG::NORMAL, cv::Scalar::all(0), cv::Scalar::all(2));
    img += noise;
    cv::Mat out;
    img.convertTo(out, CV_8U);
    if (sparse) {
        cv::Mat mask = cv::Mat::zeros(out.size(), CV_8U);
        cv::ellipse(mask, cv::Point(W / 2, H / 2), cv::Size(W / 4, H / 3), 0, 0, 360, cv::Scalar(255), cv::FILLED);
        cv::Mat bg = cv::Mat::zeros(out.size(), out.type());
        out.copyTo(bg, mask);
        out = bg;
    }
    return out;
}

hq_png_info info_for(const cv::Mat &m)
{
    hq_png_info info;
    std::memset(&info, 0, sizeof info);
    info.width = (uint32_t)m.cols;
    info.height = (uint32_t)m.rows;
    info.channels = (uint32_t)m.channels();
    info.color_type = m.channels() == 1 ? PNG_COLOR_TYPE_GRAY : PNG_COLOR_TYPE_RGB;
    info.bit_depth = 8;
    info.sample_bytes = 1;
    info.depth = 8;
    return info;
}

[[noreturn]] void die(const char *what, const hq_err &e)
{
    std::fprintf(stderr, "png_bench: %s: %s\n", what, e.msg);
    std::exit(1);
}

/* Encodes into a buffer kept across runs, as cv::imencode reuses the vector it is given. */
struct encoded {
    hq_png_sink sink;
    encoded() { std::memset(&sink, 0, sizeof sink); sink.name = "memory"; }
    ~encoded() { std::free(sink.buf); }
    encoded(const encoded &) = delete;
    encoded &operator=(const encoded &) = delete;
    size_t size() const { return sink.len; }
    std::vector<unsigned char> bytes() const { return std::vector<unsigned char>(sink.buf, sink.buf + sink.len); }
};

void our_encode(const cv::Mat &m, const hq_png_zopts &z, encoded &out)
{
    hq_png_info info = info_for(m);
    out.sink.len = 0;
    hq_err e;
    if (hq_png_encode(&out.sink, &info, m.data, nullptr, &z, &e))
        die("encode", e);
}

void our_decode(const std::vector<unsigned char> &png, cv::Mat &dst)
{
    hq_png_source s;
    std::memset(&s, 0, sizeof s);
    s.name = "memory";
    s.buf = png.data();
    s.len = png.size();
    hq_png_info info;
    hq_err e;
    if (hq_png_read_info(&s, &info, &e))
        die("read_info", e);
    dst.create((int)info.height, (int)info.width, CV_8UC((int)info.channels));
    if (hq_png_decode(&s, &info, dst.data, hq_png_image_bytes(&info), nullptr, &e))
        die("decode", e);
}

const char *filter_name(int f)
{
    switch (f) {
    case PNG_FILTER_NONE: return "none";
    case PNG_FILTER_SUB: return "sub";
    case PNG_FILTER_UP: return "up";
    case PNG_FILTER_AVG: return "avg";
    case PNG_FILTER_PAETH: return "paeth";
    case PNG_ALL_FILTERS: return "adaptive";
    default: return "mix";
    }
}

const char *strategy_name(int s)
{
    switch (s) {
    case Z_DEFAULT_STRATEGY: return "default";
    case Z_FILTERED: return "filtered";
    case Z_HUFFMAN_ONLY: return "huffman";
    case Z_RLE: return "rle";
    default: return "?";
    }
}

void bench_image(const char *label, const cv::Mat &img, int runs)
{
    /* OpenCV expects BGR; the channel order does not change its cost, only which byte is which. */
    const double raw_mb = (double)img.total() * img.elemSize() / 1e6;
    std::printf("\n== %s %dx%d, %d channel(s), 8-bit: %.1f MB raw, best of %d run(s), thread CPU time\n", label, img.cols, img.rows,
                img.channels(), raw_mb, runs);

    std::vector<unsigned char> cv_png;
    encoded enc_fast, enc_l6;
    const hq_png_zopts fast = hq_png_zopts_for_level(-1), l6 = hq_png_zopts_for_level(6);
    const int slow_runs = std::max(1, runs / 3); /* level 6 runs ~15x slower */
    std::vector<double> te = best_seconds(runs, {[&] { cv::imencode(".png", img, cv_png); },
                                                 [&] { our_encode(img, fast, enc_fast); }});
    const double t_cv_enc = te[0], t_fast_enc = te[1];
    const double t_l6_enc = best_seconds(slow_runs, {[&] { our_encode(img, l6, enc_l6); }})[0];
    const std::vector<unsigned char> ours_fast = enc_fast.bytes(), ours_l6 = enc_l6.bytes();

    cv::Mat d;
    std::vector<double> td = best_seconds(runs, {[&] { d = cv::imdecode(cv_png, cv::IMREAD_UNCHANGED); },
                                                 [&] { our_decode(cv_png, d); },
                                                 [&] { d = cv::imdecode(ours_l6, cv::IMREAD_UNCHANGED); },
                                                 [&] { our_decode(ours_l6, d); }});
    const double t_cv_dec = td[0], t_our_dec = td[1], t_cv_dec6 = td[2], t_our_dec6 = td[3];

    /* Round trips must be exact, or the speed means nothing. */
    cv::Mat back;
    our_decode(ours_fast, back);
    bool ok = cv::norm(back, img, cv::NORM_INF) == 0;
    our_decode(ours_l6, back);
    ok = ok && cv::norm(back, img, cv::NORM_INF) == 0;
    cv::Mat cvback = cv::imdecode(ours_fast, cv::IMREAD_UNCHANGED);
    if (img.channels() == 3)
        cv::cvtColor(cvback, cvback, cv::COLOR_RGB2BGR);
    ok = ok && cv::norm(cvback, img, cv::NORM_INF) == 0;
    std::printf("round trip (ours -> ours, ours -> OpenCV): %s\n", ok ? "exact" : "MISMATCH");

    std::printf("%-34s %10s %12s %10s\n", "encode", "MB/s", "bytes", "vs OpenCV");
    std::printf("%-34s %10.1f %12zu %10s\n", "OpenCV imencode default", raw_mb / t_cv_enc, cv_png.size(), "1.00");
    std::printf("%-34s %10.1f %12zu %9.2fx  size %.3f\n", "ours default (png_level -1)", raw_mb / t_fast_enc,
                ours_fast.size(), t_cv_enc / t_fast_enc, (double)ours_fast.size() / cv_png.size());
    std::printf("%-34s %10.1f %12zu %9.2fx  size %.3f\n", "ours png_level 6", raw_mb / t_l6_enc, ours_l6.size(),
                t_cv_enc / t_l6_enc, (double)ours_l6.size() / cv_png.size());
    std::printf("%-34s %10s %12s %10s\n", "decode", "MB/s", "", "vs OpenCV");
    std::printf("%-34s %10.1f %12s %10s\n", "OpenCV imdecode (OpenCV's file)", raw_mb / t_cv_dec, "", "1.00");
    std::printf("%-34s %10.1f %12s %9.2fx\n", "ours (OpenCV's file)", raw_mb / t_our_dec, "", t_cv_dec / t_our_dec);
    std::printf("%-34s %10.1f %12s %10s\n", "OpenCV imdecode (our level-6 file)", raw_mb / t_cv_dec6, "", "1.00");
    std::printf("%-34s %10.1f %12s %9.2fx\n", "ours (our level-6 file)", raw_mb / t_our_dec6, "", t_cv_dec6 / t_our_dec6);

    std::printf("candidates for the fast default (encode; size relative to OpenCV's file):\n");
    std::printf("  %-5s %-9s %-8s %-4s %-7s %10s %12s %7s\n", "level", "strategy", "filter", "mem", "zbuf", "MB/s",
                "bytes", "size");
    struct cand { int level, strategy, filters, mem; size_t zbuf; };
    const cand cands[] = {
        {1, Z_RLE, PNG_FILTER_SUB, 8, 8192},          /* OpenCV's settings, libpng's buffer */
        {1, Z_RLE, PNG_FILTER_SUB, 8, 256 << 10},
        {1, Z_RLE, PNG_FILTER_SUB, 9, 256 << 10},
        {1, Z_RLE, PNG_FILTER_UP, 8, 256 << 10},
        {1, Z_RLE, PNG_FILTER_UP, 8, 1 << 20},
        {1, Z_RLE, PNG_FILTER_UP, 9, 256 << 10},
        {1, Z_RLE, PNG_FILTER_NONE, 8, 256 << 10},
        {1, Z_RLE, PNG_FILTER_PAETH, 8, 256 << 10},
        {1, Z_HUFFMAN_ONLY, PNG_FILTER_UP, 8, 256 << 10},
        {1, Z_DEFAULT_STRATEGY, PNG_FILTER_SUB, 8, 256 << 10},
        {2, Z_DEFAULT_STRATEGY, PNG_FILTER_SUB, 9, 256 << 10},
    };
    const size_t nc = sizeof cands / sizeof cands[0];
    std::vector<encoded> outs(nc);
    std::vector<std::function<void()>> fs;
    for (size_t i = 0; i < nc; i++)
        fs.push_back([&, i] {
            const cand &c = cands[i];
            hq_png_zopts z = {c.level, c.strategy, c.filters, c.mem, c.zbuf};
            our_encode(img, z, outs[i]);
        });
    std::vector<double> tc = best_seconds(runs, fs);
    for (size_t i = 0; i < nc; i++) {
        const cand &c = cands[i];
        std::printf("  %-5d %-9s %-8s %-4d %-7zu %10.1f %12zu %7.3f\n", c.level, strategy_name(c.strategy),
                    filter_name(c.filters), c.mem, c.zbuf, raw_mb / tc[i], outs[i].size(),
                    (double)outs[i].size() / cv_png.size());
    }
}

} // namespace

int main(int argc, char **argv)
{
    int runs = argc > 1 ? std::atoi(argv[1]) : 5;
    if (runs < 1)
        runs = 1;
    cv::setNumThreads(1); /* both codecs single-threaded; this only pins OpenCV's own helpers */
    const hq_png_zopts z = hq_png_zopts_for_level(-1);
    std::printf("png_bench: libpng %s, zlib %s, OpenCV %s\n", png_get_libpng_ver(nullptr), zlibVersion(),
                CV_VERSION);
    std::printf("our default: zlib level %d, strategy %s, filter %s, memLevel %d, IDAT buffer %zu bytes\n", z.level,
                strategy_name(z.strategy), filter_name(z.filters), z.mem_level, z.zbuf);
    bench_image("gray", synthetic(1, false), runs);
    bench_image("RGB", synthetic(3, false), runs);
    bench_image("gray, sparse (object on a black background)", synthetic(1, true), runs);
    return 0;
}
