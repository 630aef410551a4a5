/* gpu_engine.cu — the GPU engine behind engine/engine.h: same results as the CPU engine, bit for
 * bit, for every mode (the per-pixel math is core/pixel.h compiled for the device).
 *
 * Blocks arrive in pageable host memory. They travel in chunks through a ring of pinned staging
 * buffers on two streams, so the host copy of one chunk, the DMA of another and the kernels of a
 * third overlap. The uploaded block stays on the device after histogram(); a remap() of the same
 * pointer and byte size right after it remaps that copy without uploading again when the caller
 * says the pixels are the same (hq_block_data.same_as_histogram: the driver's fused blocks), or
 * when HQ_GPU_RESIDENT=1 (for the harness). A pointer and a size alone cannot tell that the caller
 * freed the block and read another one of the same size into the same address (the driver's pass 2
 * after dropping held blocks does exactly that), and reusing then would write the wrong pixels.
 *
 * A block larger than the device can hold goes through in pieces: the device buffer holds pixels
 * [q0, q1) of the block, kernels are handed the buffer's address minus q0 pixels (q0 is a
 * multiple of 16 pixels, so the 16-byte vector grid is kept) and touch only [q0, q1); the
 * histograms of the segments a piece touches are downloaded and added per piece, and the LUTs of
 * those segments uploaded per piece. The piece is the whole block when it fits: the pixel buffer is
 * capped by HQ_GPU_MEM_CAP (bytes, optional K/M/G suffix; for tests) and by what cudaMalloc grants
 * (a failed allocation is retried smaller, down to one 16-pixel vector, before it is an error).
 *
 * Binding: one visible device -> device 0; otherwise local_rank % count. Every CUDA call goes
 * through GPU_CHECK, which names the call, file and line and returns HQ_EDEVICE; nothing here
 * prints or exits. */
#include <cuda_runtime.h>
#include <mutex>
#include <new>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

extern "C" {
#include "../engine/engine.h"
}
#include "gpu_clahe.h"
#include "gpu_float.h"
#include "gpu_launch.h"

namespace {

constexpr int kSlots = 4;                /* pinned staging buffers in the ring */
constexpr size_t kChunk = (size_t)8 << 20; /* bytes per staged chunk */
constexpr int kPool = 8;                  /* pinned block buffers handed out by block_alloc */

struct gpu_impl {
    int dev;
    int copy_threads;
    char desc[320];
    cudaStream_t st[2];
    cudaEvent_t slot_free[kSlots]; /* the device is done with staging slot i */
    cudaEvent_t ready;             /* cross-stream ordering point */
    void *pin[kSlots];
    uint8_t *d_data;
    size_t data_cap;
    unsigned long long *d_hist, *h_hist;
    size_t hist_cap, hhist_cap; /* bytes */
    uint16_t *d_lut, *h_lut;
    size_t lut_cap, hlut_cap; /* bytes */
    uint8_t *d_mask;          /* the piece's mask plane (hq_block_data.mask), pixel q0 at d_mask */
    size_t mask_cap;
    const void *res_ptr;      /* host block whose bytes d_data holds, NULL when none */
    size_t res_bytes;
    bool reuse;               /* HQ_GPU_RESIDENT=1: remap may trust res_ptr/res_bytes */
    size_t data_limit;        /* HQ_GPU_MEM_CAP: most bytes for d_data, 0 = no limit */
    uint64_t dev_now, dev_peak; /* device bytes held by d_data, d_hist, d_lut: now, and the most */
    /* Pinned block buffers handed to the driver (block_alloc): blocks in them travel by DMA
     * straight from and to the caller's memory, with no staging copy. A few are enough: the
     * driver's pipeline keeps three blocks alive, plus any held between the passes. */
    struct pinned { void *p; size_t size; bool used; } pool[kPool];
    std::mutex pool_mu;
    hq_gpu_clahe *clahe;      /* CLAHE's own device buffers (gpu_clahe.h), made on first use */
    hqg::FloatBufs fl; /* the float path's buffers (gpu_float.h) */
};

int gpu_fail(hq_err *err, cudaError_t e, const char *call, const char *file, int line)
{
    return hq_fail(err, HQ_EDEVICE, "gpu: %s failed: %s (%s:%d)", call, cudaGetErrorString(e), file, line);
}

#define GPU_CHECK(call)                                                                                            \
    do {                                                                                                           \
        cudaError_t e_ = (call);                                                                                   \
        if (e_ != cudaSuccess)                                                                                     \
            return gpu_fail(err, e_, #call, __FILE__, __LINE__);                                                   \
    } while (0)

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
int grow_device(gpu_impl *g, void **p, size_t *cap, size_t need, hq_err *err, bool *oom = NULL, size_t limit = 0)
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

/* The segments [s0, s1] that pixels [q0, q1) of a block touch. */
void piece_segments(const hq_block_data *b, uint64_t q0, uint64_t q1, uint64_t *s0, uint64_t *s1)
{
    *s0 = q0 / b->seg_pixels;
    *s1 = (q1 - 1) / b->seg_pixels;
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

bool mode_valid(const hq_mode *m)
{
    return m->channels >= 1 && m->channels <= 4 && (m->sample_bytes == 1 || m->sample_bytes == 2) && m->bits >= 1 &&
           m->bits <= 8 * m->sample_bytes && (unsigned)m->color <= HQ_COLOR_VALUE;
}

int check_block(const hq_block_data *b, const hq_mode *m, uint64_t *px, size_t *bytes, hq_err *err)
{
    if (!mode_valid(m))
        return hq_fail(err, HQ_EINPUT, "gpu: unsupported sample layout (%u channels, %u-byte samples, %u bits)",
                       m->channels, m->sample_bytes, m->bits);
    *px = b->nseg * b->seg_pixels;
    *bytes = (size_t)*px * m->channels * m->sample_bytes;
    if (*px && !b->data)
        return hq_fail(err, HQ_EINPUT, "gpu: block of %llu pixels has no data", (unsigned long long)*px);
    return 0;
}

/* Pixels per staged chunk: a multiple of 16 so that no two chunks share a 16-byte vector. */
uint64_t chunk_pixels(size_t pixel_bytes)
{
    const uint64_t n = kChunk / pixel_bytes / 16 * 16;
    return n ? n : 16;
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

cudaError_t remap_chunk(const hq_mode *m, uint8_t *dbase, const uint8_t *mbase, uint64_t p0, uint64_t p1,
                        uint64_t seg_pixels, const uint16_t *lbase, cudaStream_t st)
{
    return mbase ? hqg::remap_masked_launch(m, dbase, mbase, p0, p1, seg_pixels, lbase, st)
                 : hqg::remap_launch(m, dbase, p0, p1, seg_pixels, lbase, st);
}

/* Histograms of pixels [q0, q1) of a block, the device buffer holding pixel q0 at d_data. */
int histogram_piece(gpu_impl *g, const hq_block_data *b, const hq_mode *m, uint64_t q0, uint64_t q1,
                    uint64_t *const *hist, hq_err *err)
{
    const size_t pb = (size_t)m->channels * m->sample_bytes;
    const uint32_t nf = hqg::mode_nf(m);
    uint64_t s0, s1;
    piece_segments(b, q0, q1, &s0, &s1);
    const uint64_t nsp = s1 - s0 + 1;
    const size_t hbytes = (size_t)nsp * nf * sizeof(unsigned long long);
    int rc;
    if ((rc = grow_device(g, (void **)&g->d_hist, &g->hist_cap, hbytes, err)) ||
        (rc = grow_pinned((void **)&g->h_hist, &g->hhist_cap, hbytes, err)))
        return rc;
    const size_t bytes = (size_t)(q1 - q0) * pb;
    const bool pinned = is_pinned(g, (const char *)b->data + (size_t)q0 * pb, bytes);
    /* Kernels index from pixel 0 and segment 0: hand them bases shifted back by q0 and s0. */
    uint8_t *dbase = g->d_data - (size_t)q0 * pb;
    unsigned long long *hbase = g->d_hist - (size_t)s0 * nf;
    GPU_CHECK(cudaMemsetAsync(g->d_hist, 0, hbytes, g->st[0]));
    const uint8_t *mbase = NULL;
    if (b->mask && (rc = upload_mask(g, b, q0, q1, &mbase, err)))
        return rc;
    GPU_CHECK(cudaEventRecord(g->ready, g->st[0]));
    GPU_CHECK(cudaStreamWaitEvent(g->st[1], g->ready, 0));
    const uint64_t cpx = chunk_pixels(pb), nchunks = (q1 - q0 + cpx - 1) / cpx;
    for (uint64_t i = 0; i < nchunks; i++) {
        const int slot = (int)(i % kSlots);
        cudaStream_t st = g->st[i & 1];
        const uint64_t p0 = q0 + i * cpx, p1 = q1 - p0 < cpx ? q1 : p0 + cpx;
        const size_t off = (size_t)(p0 - q0) * pb, len = (size_t)(p1 - p0) * pb;
        const char *host = (const char *)b->data + (size_t)p0 * pb;
        if (pinned) {
            GPU_CHECK(cudaMemcpyAsync(g->d_data + off, host, len, cudaMemcpyHostToDevice, st));
        } else {
            GPU_CHECK(cudaEventSynchronize(g->slot_free[slot]));
            copy_par(g->pin[slot], host, len, g->copy_threads);
            GPU_CHECK(cudaMemcpyAsync(g->d_data + off, g->pin[slot], len, cudaMemcpyHostToDevice, st));
            GPU_CHECK(cudaEventRecord(g->slot_free[slot], st));
        }
        if (mbase)
            GPU_CHECK(hqg::hist_masked_launch(m, dbase, mbase, p0, p1, b->seg_pixels, hbase, st));
        else
            GPU_CHECK(hqg::hist_launch(m, dbase, p0, p1, b->seg_pixels, hbase, st));
    }
    GPU_CHECK(cudaEventRecord(g->ready, g->st[1]));
    GPU_CHECK(cudaStreamWaitEvent(g->st[0], g->ready, 0));
    GPU_CHECK(cudaMemcpyAsync(g->h_hist, g->d_hist, hbytes, cudaMemcpyDeviceToHost, g->st[0]));
    GPU_CHECK(cudaStreamSynchronize(g->st[0]));
    for (uint64_t s = 0; s < nsp; s++) {
        const unsigned long long *src = g->h_hist + s * nf;
        uint64_t *dst = hist[s0 + s];
        for (uint32_t f = 0; f < nf; f++)
            dst[f] += src[f];
    }
    return 0;
}

/* How gpu_histogram and gpu_remap begin: the block resident on the device is forgotten (a call
 * that fails must not leave it to the next), this block is checked (px: its pixels, bytes: their
 * size; px == 0: nothing to do) and the engine's device is selected. */
int begin_block(gpu_impl *g, const hq_block_data *b, const hq_mode *m, uint64_t *px, size_t *bytes, hq_err *err)
{
    g->res_ptr = NULL;
    const int rc = check_block(b, m, px, bytes, err);
    if (rc || *px == 0)
        return rc;
    GPU_CHECK(cudaSetDevice(g->dev));
    return 0;
}

/* Float modes go their own way (gpu_float.cu); the resident integer block is forgotten first. */
int float_begin(gpu_impl *g, hq_err *err)
{
    g->res_ptr = NULL;
    GPU_CHECK(cudaSetDevice(g->dev));
    return 0;
}

void float_end(gpu_impl *g)
{
    const uint64_t now = g->dev_now + g->fl.dev_bytes;
    g->dev_peak = now > g->dev_peak ? now : g->dev_peak;
}

int gpu_minmax(hq_engine *e, const hq_block_data *b, const hq_mode *m, hq_frange *mm, hq_err *err)
{
    gpu_impl *g = static_cast<gpu_impl *>(e->impl);
    int rc = float_begin(g, err);
    if (!rc)
        rc = hqg::float_minmax(&g->fl, g->st[0], b, m, mm, err);
    float_end(g);
    return rc;
}

int gpu_histogram(hq_engine *e, const hq_block_data *b, const hq_mode *m, uint64_t *const *hist, hq_err *err)
{
    gpu_impl *g = static_cast<gpu_impl *>(e->impl);
    if (m->fbins) {
        int rc = float_begin(g, err);
        if (!rc)
            rc = hqg::float_histogram(&g->fl, g->st[0], b, m, hist, err);
        float_end(g);
        return rc;
    }
    uint64_t px, piece;
    size_t bytes;
    int rc = begin_block(g, b, m, &px, &bytes, err);
    if (rc || px == 0)
        return rc;
    const size_t pb = (size_t)m->channels * m->sample_bytes;
    if ((rc = piece_pixels(g, px, pb, &piece, err)))
        return rc;
    for (uint64_t q0 = 0; q0 < px; q0 += piece)
        if ((rc = histogram_piece(g, b, m, q0, px - q0 < piece ? px : q0 + piece, hist, err)))
            return rc;
    if (piece >= px) { /* the whole block is on the device: a remap may reuse it */
        g->res_ptr = b->data;
        g->res_bytes = bytes;
    }
    return 0;
}

/* Remaps pixels [q0, q1) of a block in place through the device buffer (pixel q0 at d_data);
 * resident: the buffer already holds them (the histogram's upload). */
int remap_piece(gpu_impl *g, hq_block_data *b, const hq_mode *m, uint64_t q0, uint64_t q1, const uint16_t *const *lut,
                bool resident, hq_err *err)
{
    const size_t pb = (size_t)m->channels * m->sample_bytes;
    const uint32_t nf = hqg::mode_nf(m);
    uint64_t s0, s1;
    piece_segments(b, q0, q1, &s0, &s1);
    const uint64_t nsp = s1 - s0 + 1;
    const size_t lbytes = (size_t)nsp * nf * sizeof(uint16_t);
    int rc;
    if ((rc = grow_device(g, (void **)&g->d_lut, &g->lut_cap, lbytes, err)) ||
        (rc = grow_pinned((void **)&g->h_lut, &g->hlut_cap, lbytes, err)))
        return rc;
    /* The previous piece's LUT upload may still be in flight from h_lut. */
    GPU_CHECK(cudaStreamSynchronize(g->st[0]));
    for (uint64_t s = 0; s < nsp; s++)
        memcpy(g->h_lut + s * nf, lut[s0 + s], nf * sizeof(uint16_t));
    GPU_CHECK(cudaMemcpyAsync(g->d_lut, g->h_lut, lbytes, cudaMemcpyHostToDevice, g->st[0]));
    const uint8_t *mbase = NULL;
    if (b->mask && (rc = upload_mask(g, b, q0, q1, &mbase, err)))
        return rc;
    GPU_CHECK(cudaEventRecord(g->ready, g->st[0]));
    GPU_CHECK(cudaStreamWaitEvent(g->st[1], g->ready, 0));
    uint8_t *dbase = g->d_data - (size_t)q0 * pb;
    const uint16_t *lbase = g->d_lut - (size_t)s0 * nf;
    const uint64_t cpx = chunk_pixels(pb), nchunks = (q1 - q0 + cpx - 1) / cpx;
    /* Chunk i is issued (upload, remap, download into its slot) kSlots steps before the host
     * drains it, which frees its slot for chunk i + kSlots. */
    if (is_pinned(g, (const char *)b->data + (size_t)q0 * pb, (size_t)(q1 - q0) * pb)) {
        for (uint64_t i = 0; i < nchunks; i++) {
            cudaStream_t st = g->st[i & 1];
            const uint64_t p0 = q0 + i * cpx, p1 = q1 - p0 < cpx ? q1 : p0 + cpx;
            const size_t off = (size_t)(p0 - q0) * pb, len = (size_t)(p1 - p0) * pb;
            char *host = (char *)b->data + (size_t)p0 * pb;
            if (!resident)
                GPU_CHECK(cudaMemcpyAsync(g->d_data + off, host, len, cudaMemcpyHostToDevice, st));
            GPU_CHECK(remap_chunk(m, dbase, mbase, p0, p1, b->seg_pixels, lbase, st));
            GPU_CHECK(cudaMemcpyAsync(host, g->d_data + off, len, cudaMemcpyDeviceToHost, st));
        }
        GPU_CHECK(cudaStreamSynchronize(g->st[0]));
        GPU_CHECK(cudaStreamSynchronize(g->st[1]));
        return 0;
    }
    for (uint64_t i = 0; i < nchunks + kSlots; i++) {
        if (i >= (uint64_t)kSlots) {
            const uint64_t j = i - kSlots, p0 = q0 + j * cpx, p1 = q1 - p0 < cpx ? q1 : p0 + cpx;
            if (j < nchunks) {
                const int slot = (int)(j % kSlots);
                GPU_CHECK(cudaEventSynchronize(g->slot_free[slot]));
                copy_par((char *)b->data + (size_t)p0 * pb, g->pin[slot], (size_t)(p1 - p0) * pb, g->copy_threads);
            }
        }
        if (i < nchunks) {
            const int slot = (int)(i % kSlots);
            cudaStream_t st = g->st[i & 1];
            const uint64_t p0 = q0 + i * cpx, p1 = q1 - p0 < cpx ? q1 : p0 + cpx;
            const size_t off = (size_t)(p0 - q0) * pb, len = (size_t)(p1 - p0) * pb;
            if (!resident) {
                copy_par(g->pin[slot], (const char *)b->data + (size_t)p0 * pb, len, g->copy_threads);
                GPU_CHECK(cudaMemcpyAsync(g->d_data + off, g->pin[slot], len, cudaMemcpyHostToDevice, st));
            }
            GPU_CHECK(remap_chunk(m, dbase, mbase, p0, p1, b->seg_pixels, lbase, st));
            GPU_CHECK(cudaMemcpyAsync(g->pin[slot], g->d_data + off, len, cudaMemcpyDeviceToHost, st));
            GPU_CHECK(cudaEventRecord(g->slot_free[slot], st));
        }
    }
    return 0;
}

int gpu_remap(hq_engine *e, hq_block_data *b, const hq_mode *m, const uint16_t *const *lut, hq_err *err)
{
    gpu_impl *g = static_cast<gpu_impl *>(e->impl);
    if (m->fbins) {
        int rc = float_begin(g, err);
        if (!rc)
            rc = hqg::float_remap(&g->fl, g->st[0], b, m, lut, err);
        float_end(g);
        return rc;
    }
    uint64_t px, piece;
    size_t bytes;
    const void *held = g->res_ptr; /* begin_block forgets it */
    const size_t held_bytes = g->res_bytes;
    int rc = begin_block(g, b, m, &px, &bytes, err);
    if (rc || px == 0)
        return rc;
    const bool resident = (g->reuse || b->same_as_histogram) && held && held == b->data && held_bytes == bytes;
    const size_t pb = (size_t)m->channels * m->sample_bytes;
    if (resident) { /* d_data holds the whole block */
        piece = px;
    } else if ((rc = piece_pixels(g, px, pb, &piece, err))) {
        return rc;
    }
    for (uint64_t q0 = 0; q0 < px; q0 += piece)
        if ((rc = remap_piece(g, b, m, q0, px - q0 < piece ? px : q0 + piece, lut, resident, err)))
            return rc;
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

void gpu_destroy(hq_engine *e)
{
    if (!e)
        return;
    gpu_impl *g = static_cast<gpu_impl *>(e->impl);
    if (g) {
        gpu_release(g);
        delete g;
    }
    free(e);
}

void gpu_describe(hq_engine *e, char *buf, size_t len)
{
    const gpu_impl *g = static_cast<const gpu_impl *>(e->impl);
    snprintf(buf, len, "%s", g->desc);
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

/* CLAHE calls leave d_data alone, but a later remap must not take it for this piece's pixels. */
int gpu_clahe_histogram(hq_engine *e, const hq_clahe_piece *p, const hq_mode *m, const hq_clahe_geom *geo,
                        uint64_t *hist, hq_err *err)
{
    gpu_impl *g = static_cast<gpu_impl *>(e->impl);
    g->res_ptr = NULL;
    GPU_CHECK(cudaSetDevice(g->dev));
    return hq_gpu_clahe_histogram(&g->clahe, p, m, geo, hist, err);
}

int gpu_clahe_remap(hq_engine *e, hq_clahe_piece *p, const hq_mode *m, const hq_clahe_geom *geo, const uint16_t *lut,
                    hq_err *err)
{
    gpu_impl *g = static_cast<gpu_impl *>(e->impl);
    g->res_ptr = NULL;
    GPU_CHECK(cudaSetDevice(g->dev));
    return hq_gpu_clahe_remap(&g->clahe, p, m, geo, lut, err);
}

int gpu_clahe_luts(hq_engine *e, const hq_mode *m, const hq_clahe_geom *geo, int64_t limit, uint16_t *lut,
                   hq_err *err)
{
    gpu_impl *g = static_cast<gpu_impl *>(e->impl);
    GPU_CHECK(cudaSetDevice(g->dev));
    return hq_gpu_clahe_luts(&g->clahe, m, geo, limit, lut, err);
}

const hq_engine_ops gpu_ops = {"gpu",           gpu_histogram,  gpu_remap,     gpu_destroy,
                               gpu_describe,    gpu_block_alloc, gpu_block_free, gpu_device_peak,
                               gpu_clahe_histogram, gpu_clahe_remap, gpu_minmax, 0,
                               gpu_hold_ok,     gpu_clahe_luts};

int gpu_open(gpu_impl *g, const hq_engine_cfg *cfg, hq_err *err)
{
    cudaDeviceProp prop;
    char bus[32] = "?";
    GPU_CHECK(cudaSetDevice(g->dev));
    GPU_CHECK(cudaGetDeviceProperties(&prop, g->dev));
    if (cudaDeviceGetPCIBusId(bus, (int)sizeof bus, g->dev) == cudaSuccess)
        for (char *c = bus; *c; c++)
            *c = (char)tolower((unsigned char)*c);
    snprintf(g->desc, sizeof g->desc, "gpu %d: %s (%s)", g->dev, prop.name, bus);
    cudaError_t ke = hqg::kernels_usable();
    if (ke != cudaSuccess)
        return hq_fail(err, HQ_EDEVICE,
                       "gpu: %s cannot run this build's kernels (%s); rebuild for compute capability %d.%d",
                       g->desc, cudaGetErrorString(ke), prop.major, prop.minor);
    for (int i = 0; i < 2; i++)
        GPU_CHECK(cudaStreamCreateWithFlags(&g->st[i], cudaStreamNonBlocking));
    GPU_CHECK(cudaEventCreateWithFlags(&g->ready, cudaEventDisableTiming));
    for (int i = 0; i < kSlots; i++) {
        GPU_CHECK(cudaEventCreateWithFlags(&g->slot_free[i], cudaEventDisableTiming));
        GPU_CHECK(cudaMallocHost(&g->pin[i], kChunk));
    }
    const long nproc = sysconf(_SC_NPROCESSORS_ONLN);
    const int per_rank = (int)(nproc > 0 ? nproc : 1) / (cfg->local_size > 0 ? cfg->local_size : 1);
    const int want = cfg->threads > 0 ? cfg->threads : per_rank;
    g->copy_threads = want < 1 ? 1 : want > 8 ? 8 : want;
    const char *r = getenv("HQ_GPU_RESIDENT");
    g->reuse = r && strcmp(r, "1") == 0;
    g->data_limit = parse_bytes(getenv("HQ_GPU_MEM_CAP"));
    return 0;
}

} /* namespace */

/* The binding rule (see the top of this file), for the engine and for hq_gpu_bound_id alike. */
static int bound_device(int local_rank, int count)
{
    return count == 1 ? 0 : (local_rank > 0 ? local_rank : 0) % count;
}

int hq_gpu_bound_id(int local_rank, char *buf, size_t len)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count < 1) {
        cudaGetLastError();
        return -1;
    }
    const int dev = bound_device(local_rank, count);
    /* The UUID, not the PCI bus id: MIG instances of one GPU share a bus but are separate devices. */
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
        cudaGetLastError();
        snprintf(buf, len, "device %d", dev);
        return 0;
    }
    size_t at = 0;
    for (int i = 0; i < 16 && at + 3 <= len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%02x", (unsigned char)prop.uuid.bytes[i]);
    return 0;
}

int hq_gpu_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n;
}

int hq_gpu_engine_create(const hq_engine_cfg *cfg, hq_engine **out, hq_err *err)
{
    *out = NULL;
    int count = 0;
    cudaError_t ce = cudaGetDeviceCount(&count);
    if (ce != cudaSuccess || count < 1) {
        cudaGetLastError();
        return hq_fail(err, HQ_EDEVICE, "gpu: no CUDA device visible (%s)",
                       cudaGetErrorString(ce != cudaSuccess ? ce : cudaErrorNoDevice));
    }
    hq_engine *e = static_cast<hq_engine *>(calloc(1, sizeof *e));
    gpu_impl *g = new (std::nothrow) gpu_impl(); /* value-initialised: zeroed, and a real std::mutex */
    if (!e || !g) {
        free(e);
        delete g;
        return hq_fail(err, HQ_EMEM, "gpu engine: out of memory");
    }
    g->dev = bound_device(cfg->local_rank, count);
    e->ops = &gpu_ops;
    e->impl = g;
    int rc = gpu_open(g, cfg, err);
    if (rc) {
        gpu_destroy(e);
        return rc;
    }
    *out = e;
    return 0;
}
