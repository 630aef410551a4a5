/* gpu_float.cu — float32/float64 on the GPU: pass-0 extremes, binned histograms, the remap to
 * lut[bin] / (bins - 1). See gpu_float.h for the contract; the arithmetic is core/fbin.h's. */
#include "gpu_float.h"

#include <float.h>
#include <stdio.h>
#include <string.h>

namespace hqg {

namespace {

typedef unsigned long long u64c;

constexpr size_t kFloatChunk = (size_t)64 << 20; /* bytes of samples on the device at once */
constexpr uint64_t kFloatSegs = 16;              /* segments (histograms) per chunk, at most */
constexpr int kThreads = 256;
constexpr uint32_t kNoBin = 0xffffffffu;

int fail(hq_err *err, cudaError_t e, const char *call, int line)
{
    return hq_fail(err, HQ_EDEVICE, "gpu: %s failed: %s (%s:%d)", call, cudaGetErrorString(e), __FILE__, line);
}

#define FCHECK(call)                                                                                               \
    do {                                                                                                           \
        cudaError_t e_ = (call);                                                                                   \
        if (e_ != cudaSuccess)                                                                                     \
            return fail(err, e_, #call, __LINE__);                                                                 \
    } while (0)

/* Doubles as unsigned keys in the same order (NaN excluded), so extremes reduce with integer
 * atomics: exact, and independent of the order the threads arrive in. */
__host__ __device__ inline u64c order_key(double x)
{
    u64c u;
    memcpy(&u, &x, sizeof u);
    return (u >> 63) ? ~u : u | (1ull << 63);
}

inline double from_key(u64c k)
{
    const u64c u = (k >> 63) ? k & ~(1ull << 63) : ~k;
    double x;
    memcpy(&x, &u, sizeof x);
    return x;
}

uint32_t grid_for(uint64_t n)
{
    const uint64_t b = (n + kThreads - 1) / kThreads;
    return (uint32_t)(b < 1 ? 1 : b > 4096 ? 4096 : b);
}

/* stat[0..3]: lo key (min), hi key (max), finite count, inf count of d[0..n). */
template <typename T>
__global__ void k_minmax(const T *__restrict__ d, const uint8_t *__restrict__ mask, uint64_t n, u64c *stat)
{
    double lo = DBL_MAX, hi = -DBL_MAX;
    u64c fin = 0, inf = 0;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) {
        if (mask && !mask[i])
            continue;
        const double x = (double)d[i];
        const hq_fsample k = hq_fsample_of(x);
        if (k == HQ_FS_NAN)
            continue;
        if (k == HQ_FS_INF) {
            inf++;
            continue;
        }
        lo = x < lo ? x : lo;
        hi = x > hi ? x : hi;
        fin++;
    }
    for (int off = 16; off > 0; off >>= 1) {
        const double l2 = __shfl_down_sync(0xffffffffu, lo, off), h2 = __shfl_down_sync(0xffffffffu, hi, off);
        lo = l2 < lo ? l2 : lo;
        hi = h2 > hi ? h2 : hi;
        fin += __shfl_down_sync(0xffffffffu, fin, off);
        inf += __shfl_down_sync(0xffffffffu, inf, off);
    }
    if ((threadIdx.x & 31u) == 0) {
        atomicMin(&stat[0], order_key(lo));
        atomicMax(&stat[1], order_key(hi));
        if (fin)
            atomicAdd(&stat[2], fin);
        if (inf)
            atomicAdd(&stat[3], inf);
    }
}

/* Pixels [p0, p1) of the block (d holds pixel `base` at d[0]); segment s's histogram at
 * hist[(s - s0) * bins]. Equal bins of a warp are counted with one atomic (flat backgrounds). */
template <typename T>
__global__ void k_hist(const T *__restrict__ d, const uint8_t *__restrict__ mask, uint64_t base, uint64_t p0, uint64_t p1,
                       uint64_t sp, uint64_t s0, const hq_fbin *__restrict__ fb, uint32_t bins, u64c *hist, u64c *ninf)
{
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    const uint32_t lane = threadIdx.x & 31u;
    /* Warp-uniform trip count: every lane reaches __match_any_sync together. */
    for (uint64_t w = p0 + (uint64_t)blockIdx.x * blockDim.x + (threadIdx.x & ~31u); w < p1; w += stride) {
        const uint64_t i = w + lane;
        uint32_t key = kNoBin;
        if (i < p1 && (!mask || mask[i - base])) {
            const double x = (double)d[i - base];
            const hq_fsample k = hq_fsample_of(x);
            if (k == HQ_FS_INF) {
                atomicAdd(ninf, 1ull);
            } else if (k == HQ_FS_FINITE) {
                const uint64_t s = i / sp;
                const hq_fbin p = fb[s];
                key = (uint32_t)(s - s0) * bins + hq_fbin_of(x, &p);
            }
        }
        const uint32_t same = __match_any_sync(0xffffffffu, key);
        if (key != kNoBin && lane == (uint32_t)(__ffs(same) - 1))
            atomicAdd(&hist[key], (u64c)__popc(same));
    }
}

template <typename T>
__global__ void k_remap(T *d, const uint8_t *__restrict__ mask, uint64_t base, uint64_t p0, uint64_t p1, uint64_t sp,
                        uint64_t s0, const hq_fbin *__restrict__ fb, uint32_t bins, const uint16_t *__restrict__ lut)
{
    for (uint64_t i = p0 + (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p1;
         i += (uint64_t)gridDim.x * blockDim.x) {
        const double x = (double)d[i - base];
        if (hq_fsample_of(x) == HQ_FS_NAN || (mask && !mask[i - base]))
            continue;
        const uint64_t s = i / sp;
        const hq_fbin p = fb[s];
        const uint16_t l = lut[(s - s0) * bins + hq_fbin_of(x, &p)];
        if (sizeof(T) == 4)
            d[i - base] = (T)hq_fout32(l, bins);
        else
            d[i - base] = (T)hq_fout(l, bins);
    }
}

int grow(FloatBufs *f, void **p, size_t *cap, size_t need, hq_err *err)
{
    if (need <= *cap)
        return 0;
    if (*p)
        FCHECK(cudaFree(*p));
    f->dev_bytes -= *cap;
    *p = nullptr;
    *cap = 0;
    FCHECK(cudaMalloc(p, need));
    *cap = need;
    f->dev_bytes += need;
    return 0;
}

int check(const hq_block_data *b, const hq_mode *m, bool need_fbin, hq_err *err)
{
    if (m->fbins < 2 || m->fbins > HQ_FBINS_MAX || m->channels != 1 || (m->sample_bytes != 4 && m->sample_bytes != 8))
        return hq_fail(err, HQ_EINPUT, "gpu: unsupported float layout (%u channels, %u-byte samples, %u bins)",
                       m->channels, m->sample_bytes, m->fbins);
    if (b->nseg * b->seg_pixels != 0 && !b->data)
        return hq_fail(err, HQ_EINPUT, "gpu: float block without data");
    if (need_fbin && !b->fbin)
        return hq_fail(err, HQ_EINPUT, "gpu: float block without its binning");
    return 0;
}

/* The next chunk from pixel p: [p, *end), segments [*s0, *s1]. */
void next_chunk(const hq_block_data *b, const hq_mode *m, uint64_t p, uint64_t *end, uint64_t *s0, uint64_t *s1)
{
    const uint64_t px = b->nseg * b->seg_pixels, cpx = kFloatChunk / m->sample_bytes;
    *s0 = p / b->seg_pixels;
    uint64_t e = px;
    e = p + cpx < e ? p + cpx : e;
    const uint64_t seg_end = (*s0 + kFloatSegs) * b->seg_pixels;
    e = seg_end < e ? seg_end : e;
    *end = e;
    *s1 = (e - 1) / b->seg_pixels;
}

/* Uploads pixels [p, end) (to d_data) and their mask bytes (to d_mask); *mask is d_mask, or NULL
 * when the block has no mask. */
int upload(FloatBufs *f, cudaStream_t st, const hq_block_data *b, const hq_mode *m, uint64_t p, uint64_t end,
           const uint8_t **mask, hq_err *err)
{
    const size_t bytes = (size_t)(end - p) * m->sample_bytes;
    int rc = grow(f, &f->d_data, &f->data_cap, kFloatChunk, err);
    if (!rc && b->mask)
        rc = grow(f, (void **)&f->d_mask, &f->mask_cap, kFloatChunk / 4, err); /* a chunk's pixels, at most */
    if (rc)
        return rc;
    FCHECK(cudaMemcpyAsync(f->d_data, (const char *)b->data + (size_t)p * m->sample_bytes, bytes,
                           cudaMemcpyHostToDevice, st));
    if (b->mask)
        FCHECK(cudaMemcpyAsync(f->d_mask, b->mask + p, (size_t)(end - p), cudaMemcpyHostToDevice, st));
    *mask = b->mask ? f->d_mask : nullptr;
    return 0;
}

int upload_fbins(FloatBufs *f, cudaStream_t st, const hq_block_data *b, hq_err *err)
{
    const size_t bytes = (size_t)b->nseg * sizeof(hq_fbin);
    int rc = grow(f, (void **)&f->d_fbin, &f->fbin_cap, bytes, err);
    if (rc)
        return rc;
    FCHECK(cudaMemcpyAsync(f->d_fbin, b->fbin, bytes, cudaMemcpyHostToDevice, st));
    return 0;
}

} /* namespace */

/* Pinned host mirrors of the small device arrays (histograms, stats), grown alongside. */
static int grow_host(void **p, size_t *cap, size_t need, hq_err *err)
{
    if (need <= *cap)
        return 0;
    if (*p)
        FCHECK(cudaFreeHost(*p));
    *p = nullptr;
    *cap = 0;
    FCHECK(cudaMallocHost(p, need));
    *cap = need;
    return 0;
}

static int stats_ready(FloatBufs *f, hq_err *err)
{
    const size_t bytes = kFloatSegs * 4 * sizeof(u64c);
    int rc = grow(f, (void **)&f->d_stat, &f->stat_cap, bytes, err);
    return rc ? rc : grow_host((void **)&f->h_stat, &f->hstat_cap, bytes, err);
}

int float_minmax(FloatBufs *f, cudaStream_t st, const hq_block_data *b, const hq_mode *m, hq_frange *mm, hq_err *err)
{
    int rc = check(b, m, false, err);
    const uint64_t px = b->nseg * b->seg_pixels;
    if (rc || px == 0)
        return rc;
    if ((rc = stats_ready(f, err)))
        return rc;
    for (uint64_t p = 0; p < px;) {
        uint64_t end, s0, s1;
        next_chunk(b, m, p, &end, &s0, &s1);
        const uint8_t *mk;
        if ((rc = upload(f, st, b, m, p, end, &mk, err)))
            return rc;
        const uint64_t ns = s1 - s0 + 1;
        for (uint64_t k = 0; k < ns; k++) {
            f->h_stat[4 * k] = order_key(DBL_MAX);
            f->h_stat[4 * k + 1] = order_key(-DBL_MAX);
            f->h_stat[4 * k + 2] = f->h_stat[4 * k + 3] = 0;
        }
        FCHECK(cudaMemcpyAsync(f->d_stat, f->h_stat, ns * 4 * sizeof(u64c), cudaMemcpyHostToDevice, st));
        for (uint64_t s = s0; s <= s1; s++) {
            const uint64_t a = s * b->seg_pixels > p ? s * b->seg_pixels : p;
            const uint64_t z = (s + 1) * b->seg_pixels < end ? (s + 1) * b->seg_pixels : end;
            const char *d = (const char *)f->d_data + (size_t)(a - p) * m->sample_bytes;
            const uint8_t *dm = mk ? mk + (a - p) : nullptr;
            if (m->sample_bytes == 4)
                k_minmax<float><<<grid_for(z - a), kThreads, 0, st>>>((const float *)d, dm, z - a,
                                                                      f->d_stat + 4 * (s - s0));
            else
                k_minmax<double><<<grid_for(z - a), kThreads, 0, st>>>((const double *)d, dm, z - a,
                                                                       f->d_stat + 4 * (s - s0));
            FCHECK(cudaGetLastError());
        }
        FCHECK(cudaMemcpyAsync(f->h_stat, f->d_stat, ns * 4 * sizeof(u64c), cudaMemcpyDeviceToHost, st));
        FCHECK(cudaStreamSynchronize(st));
        for (uint64_t k = 0; k < ns; k++) {
            hq_frange *r = &mm[s0 + k];
            const double lo = from_key(f->h_stat[4 * k]), hi = from_key(f->h_stat[4 * k + 1]);
            r->lo = lo < r->lo ? lo : r->lo;
            r->hi = hi > r->hi ? hi : r->hi;
            r->finite += f->h_stat[4 * k + 2];
            r->inf += f->h_stat[4 * k + 3];
        }
        p = end;
    }
    return 0;
}

int float_histogram(FloatBufs *f, cudaStream_t st, const hq_block_data *b, const hq_mode *m, uint64_t *const *hist,
                    hq_err *err)
{
    int rc = check(b, m, true, err);
    const uint64_t px = b->nseg * b->seg_pixels;
    if (rc || px == 0)
        return rc;
    const uint32_t bins = m->fbins;
    const size_t hbytes = kFloatSegs * bins * sizeof(u64c);
    if ((rc = stats_ready(f, err)) || (rc = grow(f, (void **)&f->d_hist, &f->hist_cap, hbytes, err)) ||
        (rc = grow_host((void **)&f->h_hist, &f->hhist_cap, hbytes, err)) || (rc = upload_fbins(f, st, b, err)))
        return rc;
    FCHECK(cudaMemsetAsync(f->d_stat, 0, sizeof(u64c), st));
    for (uint64_t p = 0; p < px;) {
        uint64_t end, s0, s1;
        next_chunk(b, m, p, &end, &s0, &s1);
        const uint8_t *mk;
        if ((rc = upload(f, st, b, m, p, end, &mk, err)))
            return rc;
        const uint64_t ns = s1 - s0 + 1;
        FCHECK(cudaMemsetAsync(f->d_hist, 0, ns * bins * sizeof(u64c), st));
        if (m->sample_bytes == 4)
            k_hist<float><<<grid_for(end - p), kThreads, 0, st>>>((const float *)f->d_data, mk, p, p, end,
                                                                  b->seg_pixels, s0, f->d_fbin, bins, f->d_hist,
                                                                  f->d_stat);
        else
            k_hist<double><<<grid_for(end - p), kThreads, 0, st>>>((const double *)f->d_data, mk, p, p, end,
                                                                   b->seg_pixels, s0, f->d_fbin, bins, f->d_hist,
                                                                   f->d_stat);
        FCHECK(cudaGetLastError());
        FCHECK(cudaMemcpyAsync(f->h_hist, f->d_hist, ns * bins * sizeof(u64c), cudaMemcpyDeviceToHost, st));
        FCHECK(cudaStreamSynchronize(st));
        for (uint64_t k = 0; k < ns; k++)
            for (uint32_t v = 0; v < bins; v++)
                hist[s0 + k][v] += f->h_hist[k * bins + v];
        p = end;
    }
    FCHECK(cudaMemcpyAsync(f->h_stat, f->d_stat, sizeof(u64c), cudaMemcpyDeviceToHost, st));
    FCHECK(cudaStreamSynchronize(st));
    const unsigned long long inf = f->h_stat[0];
    if (inf)
        return hq_fail(err, HQ_EINPUT, "%llu infinite sample%s (+inf or -inf)", inf, inf == 1 ? "" : "s");
    return 0;
}

int float_remap(FloatBufs *f, cudaStream_t st, hq_block_data *b, const hq_mode *m, const uint16_t *const *lut,
                hq_err *err)
{
    int rc = check(b, m, true, err);
    const uint64_t px = b->nseg * b->seg_pixels;
    if (rc || px == 0)
        return rc;
    const uint32_t bins = m->fbins;
    const size_t lbytes = kFloatSegs * bins * sizeof(uint16_t);
    if ((rc = grow(f, (void **)&f->d_lut, &f->lut_cap, lbytes, err)) || (rc = upload_fbins(f, st, b, err)))
        return rc;
    for (uint64_t p = 0; p < px;) {
        uint64_t end, s0, s1;
        next_chunk(b, m, p, &end, &s0, &s1);
        const uint8_t *mk;
        if ((rc = upload(f, st, b, m, p, end, &mk, err)))
            return rc;
        for (uint64_t s = s0; s <= s1; s++)
            FCHECK(cudaMemcpyAsync(f->d_lut + (s - s0) * bins, lut[s], bins * sizeof(uint16_t), cudaMemcpyHostToDevice,
                                   st));
        if (m->sample_bytes == 4)
            k_remap<float><<<grid_for(end - p), kThreads, 0, st>>>((float *)f->d_data, mk, p, p, end, b->seg_pixels,
                                                                   s0, f->d_fbin, bins, f->d_lut);
        else
            k_remap<double><<<grid_for(end - p), kThreads, 0, st>>>((double *)f->d_data, mk, p, p, end, b->seg_pixels,
                                                                    s0, f->d_fbin, bins, f->d_lut);
        FCHECK(cudaGetLastError());
        FCHECK(cudaMemcpyAsync((char *)b->data + (size_t)p * m->sample_bytes, f->d_data,
                               (size_t)(end - p) * m->sample_bytes, cudaMemcpyDeviceToHost, st));
        FCHECK(cudaStreamSynchronize(st));
        p = end;
    }
    return 0;
}

void float_release(FloatBufs *f)
{
    cudaFree(f->d_data);
    cudaFree(f->d_hist);
    cudaFree(f->d_lut);
    cudaFree(f->d_fbin);
    cudaFree(f->d_stat);
    cudaFree(f->d_mask);
    cudaFreeHost(f->h_hist);
    cudaFreeHost(f->h_stat);
    *f = FloatBufs();
}

} /* namespace hqg */
