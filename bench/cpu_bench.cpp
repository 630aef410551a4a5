/* cpu_bench.cpp — is the CPU engine at least as fast as OpenCV's cv::equalizeHist?
 *
 * Build and run (from the repository root):
 *   make build/bench/cpu_bench
 *   build/bench/cpu_bench                 # 21 timed runs per case, T = 1 and T = 2, all cases
 *   build/bench/cpu_bench --runs 31 --threads 1,2 --only gray8    # just the 8-bit gray bar
 *
 * What is timed (one 7680x4320 image held in memory, median of --runs after 3 warm-up runs):
 *   opencv      cv::equalizeHist(src, dst) after cv::setNumThreads(T)
 *   ours        zeroed histogram + engine histogram + hq_lut_build + engine remap, in place on a
 *               buffer that received a copy of src outside the timed region (what the tool does)
 *   ours+copy   the same with the copy src -> dst inside the timed region (a separate dst, as
 *               OpenCV writes one; our engine API only remaps in place)
 * Every timed run starts with the caches flushed (a 64 MiB buffer is rewritten, which also lets
 * the other side's spinning worker threads go to sleep), and the contenders take turns within
 * each repetition, so that load from other processes and cache state fall on both alike. The contract: 8-bit gray output must equal OpenCV's byte for byte,
 * and every output must be the same at every thread count; the program says so or exits 1. */
#include <opencv2/core.hpp>
#include <opencv2/core/utility.hpp>
#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

extern "C" {
#include "../core/lut.h"
#include "../core/pixel.h"
#include "../engine/engine.h"
}

namespace {

const int W = 7680, H = 4320;
const uint64_t NPIX = (uint64_t)W * H;
const int WARMUP = 3;

// ---------------------------------------------------------------- test images

// Deterministic generator (splitmix64): the same image on every machine and every run.
struct Rng {
    uint64_t s;
    uint64_t next()
    {
        uint64_t z = (s += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    double uniform() { return (double)(next() >> 11) * (1.0 / 9007199254740992.0); }
    // Roughly Gaussian, mean 0, sd 1 (sum of four uniforms).
    double noise() { return (uniform() + uniform() + uniform() + uniform() - 2.0) * 1.7320508; }
};

// A "scan": dark noisy background, an elliptical body with smooth gradients and slow waves,
// brighter discs, a darker rectangle and a ring, plus sensor noise. Values in [0, 1].
std::vector<float> natural_field(uint64_t seed, double noise_sd)
{
    std::vector<float> f(NPIX);
    const double cx = W * 0.5, cy = H * 0.5, ax = W * 0.44, ay = H * 0.45;
    struct Disc { double x, y, r, dv; };
    const Disc discs[] = {{2100, 1500, 420, 0.22}, {5200, 2600, 640, 0.18}, {3900, 1100, 250, 0.30},
                          {4600, 3300, 300, -0.15}, {2800, 3000, 520, 0.12}};
    // One generator per row (seeded by the row), so the rows can be made in parallel.
#pragma omp parallel for schedule(static)
    for (int y = 0; y < H; y++) {
        Rng rng{seed * 1000003u + (uint64_t)y};
        for (int x = 0; x < W; x++) {
            const double ex = (x - cx) / ax, ey = (y - cy) / ay, e2 = ex * ex + ey * ey;
            double v;
            if (e2 > 1.0) {
                v = 0.03;
            } else {
                v = 0.25 + 0.25 * x / W + 0.15 * y / H + 0.08 * std::sin(x * 0.0033) * std::cos(y * 0.0047) +
                    0.10 * (1.0 - e2);
                for (const Disc &d : discs) {
                    const double dx = x - d.x, dy = y - d.y;
                    if (dx * dx + dy * dy < d.r * d.r)
                        v += d.dv * (1.0 - std::sqrt(dx * dx + dy * dy) / d.r * 0.5);
                }
                if (x > 1000 && x < 1700 && y > 2500 && y < 3600)
                    v -= 0.12;
                const double rr = std::hypot(x - 6100.0, y - 1300.0);
                if (rr > 380 && rr < 430)
                    v += 0.25;
            }
            v += noise_sd * rng.noise();
            f[(uint64_t)y * W + x] = (float)std::min(1.0, std::max(0.0, v));
        }
    }
    return f;
}

cv::Mat gray8_from(const std::vector<float> &f)
{
    cv::Mat m(H, W, CV_8UC1);
#pragma omp parallel for schedule(static)
    for (uint64_t i = 0; i < NPIX; i++)
        m.data[i] = (uint8_t)std::lround(f[i] * 255.0);
    return m;
}

cv::Mat gray16_from(const std::vector<float> &f)
{
    cv::Mat m(H, W, CV_16UC1);
    uint16_t *p = (uint16_t *)m.data;
#pragma omp parallel for schedule(static)
    for (uint64_t i = 0; i < NPIX; i++)
        p[i] = (uint16_t)std::lround(f[i] * 65535.0);
    return m;
}

// RGB with a colour cast that varies across the image, so luma is not just one channel.
cv::Mat rgb8_from(const std::vector<float> &f)
{
    cv::Mat m(H, W, CV_8UC3);
#pragma omp parallel for schedule(static)
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            const double v = f[(uint64_t)y * W + x] * 255.0;
            uint8_t *px = m.data + ((uint64_t)y * W + x) * 3;
            px[0] = (uint8_t)std::lround(std::min(255.0, v * (0.85 + 0.3 * x / W)));
            px[1] = (uint8_t)std::lround(v);
            px[2] = (uint8_t)std::lround(std::min(255.0, v * (1.15 - 0.3 * y / H)));
        }
    return m;
}

// ---------------------------------------------------------------- timing

std::vector<uint8_t> flush_buf(64u << 20);
unsigned flush_round;

// Evicts the image from every cache level so that each timed run starts cold, for all alike.
void flush_caches()
{
    std::memset(flush_buf.data(), (int)(++flush_round & 0xff), flush_buf.size());
}

double now_ms()
{
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Stats {
    double med, lo, hi;
};

Stats stats_of(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    const double med = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    return {med, v.front(), v.back()};
}

// One contender: prepare() runs untimed before each run (after the cache flush), run() is timed.
struct Contender {
    std::string name;
    std::function<void()> prepare, run;
    std::vector<double> ms;
};

// Runs the contenders in turn, WARMUP + runs times; warm-up samples are dropped.
void time_round_robin(std::vector<Contender> &cs, int runs)
{
    for (int r = 0; r < WARMUP + runs; r++)
        for (Contender &c : cs) {
            flush_caches();
            if (c.prepare)
                c.prepare();
            const double t0 = now_ms();
            c.run();
            const double t1 = now_ms();
            if (r >= WARMUP)
                c.ms.push_back(t1 - t0);
        }
}

// ---------------------------------------------------------------- our engine

// One image as a one-segment block (fields set by name: the struct may grow).
hq_block_data block_of(void *data, uint64_t pixels)
{
    hq_block_data b{};
    b.data = data;
    b.nseg = 1;
    b.seg_pixels = pixels;
    return b;
}

struct Ours {
    hq_engine *eng = nullptr;
    explicit Ours(int threads)
    {
        hq_engine_cfg cfg{};
        cfg.threads = threads;
        hq_err err{};
        if (hq_cpu_engine_create(&cfg, &eng, &err) != 0) {
            std::fprintf(stderr, "cpu_bench: %s\n", err.msg);
            std::exit(1);
        }
    }
    ~Ours() { hq_engine_destroy(eng); }
    Ours(const Ours &) = delete;
    Ours &operator=(const Ours &) = delete;

    // Our full equalization of one image in place: histogram, LUT, remap.
    void equalize(void *data, const hq_mode &m)
    {
        const uint32_t bins = hq_mode_bins(&m);
        std::vector<uint64_t> hist((size_t)hq_mode_nhist(&m) * bins, 0);
        std::vector<uint16_t> lut(hist.size());
        hq_block_data b = block_of(data, NPIX);
        uint64_t *hp[1] = {hist.data()};
        const uint16_t *lp[1] = {lut.data()};
        hq_err err{};
        if (eng->ops->histogram(eng, &b, &m, hp, &err) != 0) {
            std::fprintf(stderr, "cpu_bench: histogram: %s\n", err.msg);
            std::exit(1);
        }
        for (uint32_t h = 0; h < hq_mode_nhist(&m); h++)
            hq_lut_build(HQ_METHOD_EQUALIZE, hist.data() + (size_t)h * bins, bins, lut.data() + (size_t)h * bins);
        if (eng->ops->remap(eng, &b, &m, lp, &err) != 0) {
            std::fprintf(stderr, "cpu_bench: remap: %s\n", err.msg);
            std::exit(1);
        }
    }
};

// ---------------------------------------------------------------- reporting

int failures;

void check(bool ok, const std::string &what)
{
    std::printf("  check: %-66s %s\n", what.c_str(), ok ? "OK" : "FAILED");
    if (!ok)
        failures++;
}

uint64_t count_diff(const cv::Mat &a, const cv::Mat &b)
{
    const size_t n = a.total() * a.elemSize();
    uint64_t d = 0;
    for (size_t i = 0; i < n; i++)
        d += a.data[i] != b.data[i];
    return d;
}

bool same_bytes(const cv::Mat &a, const cv::Mat &b)
{
    return a.total() * a.elemSize() == b.total() * b.elemSize() &&
           std::memcmp(a.data, b.data, a.total() * a.elemSize()) == 0;
}

void print_header()
{
    std::printf("  %-30s %9s %9s %9s %10s %12s\n", "contender", "median ms", "min ms", "max ms", "Mpixel/s",
                "opencv/this");
}

void print_row(const Contender &c, const Stats *ref)
{
    const Stats s = stats_of(c.ms);
    char ratio[32] = "";
    if (ref)
        std::snprintf(ratio, sizeof ratio, "%.2fx", ref->med / s.med);
    std::printf("  %-30s %9.2f %9.2f %9.2f %10.0f %12s\n", c.name.c_str(), s.med, s.lo, s.hi, NPIX / s.med / 1e3,
                ratio);
}

// Prints a table; ratio column against contender ref_index (-1: none).
void report(const std::vector<Contender> &cs, int ref_index)
{
    print_header();
    Stats ref{};
    if (ref_index >= 0)
        ref = stats_of(cs[(size_t)ref_index].ms);
    for (const Contender &c : cs)
        print_row(c, ref_index >= 0 ? &ref : nullptr);
}

// ---------------------------------------------------------------- the cases

// 8-bit gray: OpenCV against ours (in place, and with the copy to a separate dst).
// Returns our output for the thread-invariance check.
cv::Mat bench_gray8(const char *label, const cv::Mat &src, int threads, int runs)
{
    std::printf("\n[%s, 8-bit gray %dx%d, T=%d]\n", label, W, H, threads);
    cv::setNumThreads(threads);
    Ours ours(threads);
    const hq_mode m{1, 1, 8, HQ_COLOR_LUMA};
    cv::Mat cv_dst(H, W, CV_8UC1), our_dst(H, W, CV_8UC1), our_dst2(H, W, CV_8UC1);
    std::vector<Contender> cs = {
        {"opencv equalizeHist", nullptr, [&] { cv::equalizeHist(src, cv_dst); }, {}},
        {"ours (in place)", [&] { std::memcpy(our_dst.data, src.data, NPIX); }, [&] { ours.equalize(our_dst.data, m); },
         {}},
        {"ours+copy (separate dst)", nullptr,
         [&] {
             std::memcpy(our_dst2.data, src.data, NPIX);
             ours.equalize(our_dst2.data, m);
         },
         {}},
    };
    time_round_robin(cs, runs);
    report(cs, 0);
    const uint64_t d = count_diff(cv_dst, our_dst);
    check(d == 0, "ours == opencv byte for byte (" + std::to_string(d) + " of " + std::to_string(NPIX) +
                      " pixels differ)");
    check(same_bytes(our_dst, our_dst2), "ours in place == ours+copy");
    return our_dst;
}

// 16-bit gray: ours only — OpenCV's equalizeHist accepts CV_8UC1 only.
cv::Mat bench_gray16(const cv::Mat &src, int threads, int runs)
{
    std::printf("\n[natural, 16-bit gray (bits=16, 65536 bins) %dx%d, T=%d; ours only: OpenCV has no 16-bit "
                "equalizeHist]\n",
                W, H, threads);
    Ours ours(threads);
    const hq_mode m{1, 2, 16, HQ_COLOR_LUMA};
    cv::Mat dst(H, W, CV_16UC1);
    std::vector<Contender> cs = {
        {"ours (in place)", [&] { std::memcpy(dst.data, src.data, NPIX * 2); }, [&] { ours.equalize(dst.data, m); },
         {}},
    };
    time_round_robin(cs, runs);
    report(cs, -1);
    return dst;
}

// RGB: our luma equalization against OpenCV's usual recipe (RGB -> YCrCb, equalizeHist on Y,
// back to RGB). A rough peer only: a different colour algorithm with different output.
cv::Mat bench_rgb(const cv::Mat &src, int threads, int runs)
{
    std::printf("\n[natural, 8-bit RGB %dx%d, T=%d; DIFFERENT ALGORITHMS: ours = luma remap (core/pixel.h), "
                "opencv = YCrCb round trip + equalizeHist(Y)]\n",
                W, H, threads);
    cv::setNumThreads(threads);
    Ours ours(threads);
    const hq_mode m{3, 1, 8, HQ_COLOR_LUMA};
    cv::Mat cv_dst, ycc, dst(H, W, CV_8UC3);
    std::vector<cv::Mat> planes;
    std::vector<Contender> cs = {
        {"opencv YCrCb+equalizeHist(Y)", nullptr,
         [&] {
             cv::cvtColor(src, ycc, cv::COLOR_RGB2YCrCb);
             cv::split(ycc, planes);
             cv::equalizeHist(planes[0], planes[0]);
             cv::merge(planes, ycc);
             cv::cvtColor(ycc, cv_dst, cv::COLOR_YCrCb2RGB);
         },
         {}},
        {"ours luma (in place)", [&] { std::memcpy(dst.data, src.data, NPIX * 3); },
         [&] { ours.equalize(dst.data, m); }, {}},
    };
    time_round_robin(cs, runs);
    report(cs, 0);
    return dst;
}

// The "Parallel framework:" line of OpenCV's build information (TBB, pthreads, OpenMP...).
std::string opencv_parallel_framework()
{
    const std::string info = cv::getBuildInformation(), key = "Parallel framework:";
    const size_t at = info.find(key);
    if (at == std::string::npos)
        return "parallel framework unknown";
    const size_t val = info.find_first_not_of(' ', at + key.size()), eol = info.find('\n', at);
    return "parallel framework: " + info.substr(val, eol - val);
}

// The engine's 8-bit RGB loops replace the pixel.h arithmetic by tables; here they meet the rule
// itself, evaluated directly, on an image holding every RGB triple once, for each colour mode,
// with a random LUT (any value may meet any pixel) and an identity LUT.
void check_rgb_rule(int threads)
{
    std::printf("\n[rule check: every 8-bit RGB triple, engine (T=%d) against core/pixel.h evaluated here]\n",
                threads);
    const uint64_t n = 1u << 24;
    std::vector<uint8_t> cube(n * 3);
    for (uint64_t i = 0; i < n; i++) {
        cube[3 * i] = (uint8_t)(i >> 16);
        cube[3 * i + 1] = (uint8_t)(i >> 8);
        cube[3 * i + 2] = (uint8_t)i;
    }
    Ours ours(threads);
    Rng rng{7};
    const hq_color colors[] = {HQ_COLOR_LUMA, HQ_COLOR_VALUE, HQ_COLOR_CHANNELS};
    for (hq_color color : colors) {
        for (int identity = 0; identity < 2; identity++) {
            const hq_mode m{3, 1, 8, color};
            const uint32_t nh = hq_mode_nhist(&m);
            std::vector<uint16_t> lut(nh * 256);
            for (size_t v = 0; v < lut.size(); v++)
                lut[v] = identity ? (uint16_t)(v & 255) : (uint16_t)(rng.next() & 255);
            std::vector<uint64_t> want_hist(nh * 256, 0), hist(nh * 256, 0);
            std::vector<uint8_t> want(cube), got(cube);
            for (uint64_t i = 0; i < n; i++) {
                uint8_t *px = &want[3 * i];
                const uint32_t r = px[0], g = px[1], b = px[2];
                if (color == HQ_COLOR_LUMA) {
                    const uint32_t y_fx = hq_luma_fx(r, g, b), y = hq_luma_of_fx(y_fx);
                    const int32_t d = (int32_t)((uint32_t)lut[y] << HQ_LUMA_SHIFT) - (int32_t)y_fx;
                    want_hist[y]++;
                    px[0] = (uint8_t)hq_luma_apply(r, d, 255);
                    px[1] = (uint8_t)hq_luma_apply(g, d, 255);
                    px[2] = (uint8_t)hq_luma_apply(b, d, 255);
                } else if (color == HQ_COLOR_VALUE) {
                    const uint32_t v = hq_max3(r, g, b);
                    want_hist[v]++;
                    px[0] = (uint8_t)hq_value_apply(r, v, lut[v]);
                    px[1] = (uint8_t)hq_value_apply(g, v, lut[v]);
                    px[2] = (uint8_t)hq_value_apply(b, v, lut[v]);
                } else {
                    for (uint32_t c = 0; c < 3; c++) {
                        want_hist[c * 256 + px[c]]++;
                        px[c] = (uint8_t)lut[c * 256 + px[c]];
                    }
                }
            }
            hq_block_data b = block_of(got.data(), n);
            uint64_t *hp[1] = {hist.data()};
            const uint16_t *lp[1] = {lut.data()};
            hq_err err{};
            const bool ran = ours.eng->ops->histogram(ours.eng, &b, &m, hp, &err) == 0 &&
                             ours.eng->ops->remap(ours.eng, &b, &m, lp, &err) == 0;
            check(ran && hist == want_hist && got == want,
                  std::string(hq_color_name(color)) + (identity ? ", identity LUT" : ", random LUT") +
                      ": histogram and output == rule");
        }
    }
}

std::vector<int> parse_threads(const char *s)
{
    std::vector<int> t;
    for (const char *p = s; *p;) {
        char *end;
        const long v = std::strtol(p, &end, 10);
        if (end == p || v < 1 || v > 1024) {
            std::fprintf(stderr, "cpu_bench: --threads wants a list like 1,2\n");
            std::exit(2);
        }
        t.push_back((int)v);
        p = *end == ',' ? end + 1 : end;
    }
    return t;
}

} // namespace

int main(int argc, char **argv)
{
    int runs = 21;
    std::vector<int> threads = {1, 2};
    std::string only = "gray8,gray16,rgb";
    for (int i = 1; i < argc; i++) {
        if (!std::strcmp(argv[i], "--runs") && i + 1 < argc) {
            runs = std::atoi(argv[++i]);
        } else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) {
            threads = parse_threads(argv[++i]);
        } else if (!std::strcmp(argv[i], "--only") && i + 1 < argc) {
            only = argv[++i];
        } else {
            std::fprintf(stderr, "usage: cpu_bench [--runs N (>= 15)] [--threads 1,2] [--only gray8,gray16,rgb]\n");
            return 2;
        }
    }
    if (runs < 15) {
        std::fprintf(stderr, "cpu_bench: --runs must be at least 15\n");
        return 2;
    }
    const bool do8 = only.find("gray8") != std::string::npos, do16 = only.find("gray16") != std::string::npos,
               dorgb = only.find("rgb") != std::string::npos;
    std::printf("cpu_bench: %dx%d (%.1f Mpixel), median of %d runs after %d warm-up, caches flushed before "
                "each run\n",
                W, H, NPIX / 1e6, runs, WARMUP);
    std::printf("opencv %s, %s\n", CV_VERSION, opencv_parallel_framework().c_str());

    const double t0 = now_ms();
    const std::vector<float> field8 = natural_field(1, 0.02), field16 = natural_field(2, 0.004);
    const cv::Mat nat8 = gray8_from(field8), nat16 = gray16_from(field16), rgb = rgb8_from(field8);
    const cv::Mat flat8(H, W, CV_8UC1, cv::Scalar(117));
    std::printf("images generated in %.0f ms\n", now_ms() - t0);

    std::vector<cv::Mat> out_nat, out_flat, out16, outrgb;
    for (int t : threads) {
        if (do8) {
            out_nat.push_back(bench_gray8("natural", nat8, t, runs));
            out_flat.push_back(bench_gray8("constant 117", flat8, t, runs));
        }
        if (do16)
            out16.push_back(bench_gray16(nat16, t, runs));
        if (dorgb)
            outrgb.push_back(bench_rgb(rgb, t, runs));
    }

    if (dorgb)
        check_rgb_rule(threads.back());

    std::printf("\n[checks across thread counts]\n");
    for (size_t i = 1; i < threads.size(); i++) {
        const std::string ts = "T=" + std::to_string(threads[i]) + " == T=" + std::to_string(threads[0]);
        if (do8) {
            check(same_bytes(out_nat[i], out_nat[0]), "8-bit natural " + ts);
            check(same_bytes(out_flat[i], out_flat[0]), "8-bit constant " + ts);
        }
        if (do16)
            check(same_bytes(out16[i], out16[0]), "16-bit natural " + ts);
        if (dorgb)
            check(same_bytes(outrgb[i], outrgb[0]), "RGB luma " + ts);
    }
    if (do8)
        check(same_bytes(out_flat[0], flat8), "constant image left unchanged");
    std::printf("\n%s\n", failures ? "SOME CHECKS FAILED" : "all checks passed");
    return failures ? 1 : 0;
}
