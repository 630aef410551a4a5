/* gpu_buffers.cu — the GPU engine's memory (gpu_engine_impl.h): device buffers grown on demand and
 * counted for the peak, the pinned staging ring's host copies, the piece a block is cut into when
 * the device cannot hold it, and the pool of pinned block buffers handed to the driver. */
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "gpu_engine_impl.h"

namespace hqe {

/* Host copies are the engine's bottleneck (pageable memory): split large ones over a few threads. */
void copy_par(void *dst, const void *src, size_t n, int threads)
{
#ifdef _OPENMP
    if (threads > 1 && n >= ((size_t)2 << 20)) {
        const size_t per = (n / (size_t)threads + 4095) & ~(size_t)4095;
#pragma omp parallel for num_threads(threads) schedule(static)
        for (int t = 0; t < threads; t++) {
            const size_t lo = (size_t)t * per;
            if (lo < n)
                memcpy((char *)dst + lo, (const char *)src + lo, n - lo < per ? n - lo : per);
        }
        return;
    }
#else
    (void)threads;
#endif
    memcpy(dst, src, n);
}

/* Device buffer of at least `need` bytes (rounded up to 1 MiB, but not past limit when limit is
 * not 0); *oom tells a refused allocation apart from other errors when it is not NULL (no error is
 * set then: the caller retries smaller). */
int grow_device(gpu_impl *g, void **p, size_t *cap, size_t need, hq_err *err, bool *oom, size_t limit)
{
    if (oom)
        *oom = false;
    if (need <= *cap)
        return 0;
    const size_t mib = (size_t)1 << 20;
    size_t want = need > SIZE_MAX - mib ? need : (need + mib - 1) & ~(mib - 1);
    if (limit && want > limit)
        want = need > limit ? need : limit;
    if (*p)
        GPU_CHECK(cudaFree(*p));
    g->dev_now -= *cap;
    *p = NULL;
    *cap = 0;
    const cudaError_t e = cudaMalloc(p, want);
    if (e == cudaErrorMemoryAllocation && oom) {
        cudaGetLastError();
        *p = NULL;
        *oom = true;
        return 0;
    }
    if (e != cudaSuccess)
        return gpu_fail(err, e, "cudaMalloc(p, want)", __FILE__, __LINE__);
    *cap = want;
    g->dev_now += want;
    g->dev_peak = g->dev_now > g->dev_peak ? g->dev_now : g->dev_peak;
    return 0;
}

/* Pixels per device piece for a block of px pixels: all of them when the pixel buffer can hold
 * the block, else the most (a multiple of 16 pixels) that the cap and the allocator allow. */
int piece_pixels(gpu_impl *g, uint64_t px, size_t pb, uint64_t *piece, hq_err *err)
{
    uint64_t want = px;
    if (g->data_limit && (size_t)want * pb > g->data_limit) {
        want = g->data_limit / pb / 16 * 16;
        want = want < 16 ? 16 : want;
    }
    for (;;) {
        if ((size_t)want * pb <= g->data_cap) {
            *piece = want;
            return 0;
        }
        bool oom = false;
        int rc = grow_device(g, (void **)&g->d_data, &g->data_cap, (size_t)want * pb, err, &oom, g->data_limit);
        if (rc)
            return rc;
        if (!oom) {
            *piece = want;
            return 0;
        }
        if (want <= 16)
            return hq_fail(err, HQ_EDEVICE, "gpu: out of device memory (%zu bytes for pixels refused)",
                           (size_t)want * pb);
        size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        cudaGetLastError();
        uint64_t next = want / 2;
        const uint64_t fit = (uint64_t)(free_b / 4 * 3) / pb;
        next = fit < next ? fit : next;
        want = next / 16 * 16;
        want = want < 16 ? 16 : want;
    }
}

/* "1048576", "64K", "3M", "2G" -> bytes; 0 when unset or unreadable. */
size_t parse_bytes(const char *v)
{
    if (!v || !*v)
        return 0;
    char *end = NULL;
    unsigned long long n = strtoull(v, &end, 10);
    if (end == v)
        return 0;
    const int sh = *end == 'K' || *end == 'k' ? 10 : *end == 'M' || *end == 'm' ? 20 : *end == 'G' || *end == 'g' ? 30 : 0;
    return (size_t)(n << sh);
}

int grow_pinned(void **p, size_t *cap, size_t need, hq_err *err)
{
    if (need <= *cap)
        return 0;
    const size_t want = (need + ((size_t)1 << 16) - 1) & ~(((size_t)1 << 16) - 1);
    if (*p)
        GPU_CHECK(cudaFreeHost(*p));
    *p = NULL;
    *cap = 0;
    GPU_CHECK(cudaMallocHost(p, want));
    *cap = want;
    return 0;
}

/* Whether [p, p + bytes) lies in one of the pool's pinned buffers. */
bool is_pinned(gpu_impl *g, const void *p, size_t bytes)
{
    std::lock_guard<std::mutex> lock(g->pool_mu);
    for (int i = 0; i < kPool; i++) {
        const char *b = static_cast<const char *>(g->pool[i].p);
        if (b && (const char *)p >= b && (const char *)p + bytes <= b + g->pool[i].size)
            return true;
    }
    return false;
}

/* The mask bytes of pixels [q0, q1) onto the device, on stream 0 (the kernels' streams wait for
 * it); *mbase is d_mask shifted back by q0, as the kernels index it. No kernel of an earlier piece
 * is still reading d_mask: every piece ends with its streams drained. */
int upload_mask(gpu_impl *g, const hq_block_data *b, uint64_t q0, uint64_t q1, const uint8_t **mbase, hq_err *err)
{
    int rc = grow_device(g, (void **)&g->d_mask, &g->mask_cap, (size_t)(q1 - q0), err);
    if (rc)
        return rc;
    GPU_CHECK(cudaMemcpyAsync(g->d_mask, b->mask + q0, (size_t)(q1 - q0), cudaMemcpyHostToDevice, g->st[0]));
    *mbase = g->d_mask - q0;
    return 0;
}

void gpu_release(gpu_impl *g)
{
    cudaSetDevice(g->dev);
    for (int i = 0; i < 2; i++)
        if (g->st[i])
            cudaStreamSynchronize(g->st[i]);
    for (int i = 0; i < kSlots; i++) {
        if (g->pin[i])
            cudaFreeHost(g->pin[i]);
        if (g->slot_free[i])
            cudaEventDestroy(g->slot_free[i]);
    }
    if (g->ready)
        cudaEventDestroy(g->ready);
    for (int i = 0; i < 2; i++)
        if (g->st[i])
            cudaStreamDestroy(g->st[i]);
    for (int i = 0; i < kPool; i++)
        if (g->pool[i].p)
            cudaFreeHost(g->pool[i].p);
    cudaFree(g->d_data);
    cudaFree(g->d_hist);
    cudaFree(g->d_lut);
    cudaFree(g->d_mask);
    cudaFreeHost(g->h_hist);
    cudaFreeHost(g->h_lut);
    hq_gpu_clahe_free(g->clahe);
    hqg::float_release(&g->fl);
}

/* A pinned buffer of at least `bytes` from the pool (reused when one fits without wasting half of
 * it), or plain malloc when the pool is full or pinning fails: correct either way, only slower. */
void *gpu_block_alloc(hq_engine *e, size_t bytes)
{
    gpu_impl *g = static_cast<gpu_impl *>(e->impl);
    std::lock_guard<std::mutex> lock(g->pool_mu);
    int spare = -1;
    for (int i = 0; i < kPool; i++) {
        gpu_impl::pinned &s = g->pool[i];
        if (s.used)
            continue;
        if (s.p && s.size >= bytes && s.size / 2 <= bytes) {
            s.used = true;
            return s.p;
        }
        if (spare < 0 || !s.p)
            spare = i;
    }
    if (spare >= 0 && bytes > 0) {
        gpu_impl::pinned &s = g->pool[spare];
        /* The calling thread may be the driver's I/O thread: bind it to this rank's device first,
         * or the allocation would wake a context on device 0. */
        cudaSetDevice(g->dev);
        if (s.p)
            cudaFreeHost(s.p);
        s.p = NULL;
        if (cudaHostAlloc(&s.p, bytes, cudaHostAllocPortable) == cudaSuccess) {
            s.size = bytes;
            s.used = true;
            return s.p;
        }
        cudaGetLastError();
        s.p = NULL;
        s.size = 0;
    }
    return malloc(bytes);
}

void gpu_block_free(hq_engine *e, void *p)
{
    if (!p)
        return;
    gpu_impl *g = static_cast<gpu_impl *>(e->impl);
    std::lock_guard<std::mutex> lock(g->pool_mu);
    for (int i = 0; i < kPool; i++)
        if (g->pool[i].p == p) {
            g->pool[i].used = false;
            return;
        }
    free(p);
}

/* A pinned buffer, while at least half the pool stays for pass 1's reads (engine.h says why). */
int gpu_hold_ok(hq_engine *e, const void *p)
{
    gpu_impl *g = static_cast<gpu_impl *>(e->impl);
    std::lock_guard<std::mutex> lock(g->pool_mu);
    int used = 0, pinned = 0;
    for (int i = 0; i < kPool; i++) {
        used += g->pool[i].used;
        pinned |= g->pool[i].p == p;
    }
    return pinned && used <= kPool / 2;
}

/* CLAHE's buffers are counted beside the others': a bound on what was held at once. */
uint64_t gpu_device_peak(hq_engine *e)
{
    const gpu_impl *g = static_cast<const gpu_impl *>(e->impl);
    return g->dev_peak + hq_gpu_clahe_peak(g->clahe);
}

} /* namespace hqe */
