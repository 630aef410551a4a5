/* gpu_passes.cu — histogram() and remap() of the GPU engine (engine/engine.h's contract; state in
 * gpu_engine_impl.h). A block travels in chunks through the ring of pinned staging buffers on two
 * streams, so the host copy of one chunk, the DMA of another and the kernels of a third overlap;
 * a block bigger than the device's pixel buffer goes through in pieces (gpu_buffers.cu sizes them),
 * each piece's histograms downloaded and its LUTs uploaded. Float modes go to gpu_float.cu. */
#include <string.h>

#include "gpu_engine_impl.h"
#include "gpu_launch.h"

namespace hqe {
namespace {

/* The segments [s0, s1] that pixels [q0, q1) of a block touch. */
void piece_segments(const hq_block_data *b, uint64_t q0, uint64_t q1, uint64_t *s0, uint64_t *s1)
{
    *s0 = q0 / b->seg_pixels;
    *s1 = (q1 - 1) / b->seg_pixels;
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

/* Float modes go their own way (gpu_float.cu): run() is one of its passes, with the resident
 * integer block forgotten first and the float buffers' size counted in the device's peak after. */
template <typename F> int float_pass(gpu_impl *g, hq_err *err, F run)
{
    g->res_ptr = NULL;
    GPU_CHECK(cudaSetDevice(g->dev));
    const int rc = run();
    const uint64_t now = g->dev_now + g->fl.dev_bytes;
    g->dev_peak = now > g->dev_peak ? now : g->dev_peak;
    return rc;
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

} /* namespace */

int gpu_minmax(hq_engine *e, const hq_block_data *b, const hq_mode *m, hq_frange *mm, hq_err *err)
{
    gpu_impl *g = static_cast<gpu_impl *>(e->impl);
    return float_pass(g, err, [&] { return hqg::float_minmax(&g->fl, g->st[0], b, m, mm, err); });
}

int gpu_histogram(hq_engine *e, const hq_block_data *b, const hq_mode *m, uint64_t *const *hist, hq_err *err)
{
    gpu_impl *g = static_cast<gpu_impl *>(e->impl);
    if (m->fbins)
        return float_pass(g, err, [&] { return hqg::float_histogram(&g->fl, g->st[0], b, m, hist, err); });
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

int gpu_remap(hq_engine *e, hq_block_data *b, const hq_mode *m, const uint16_t *const *lut, hq_err *err)
{
    gpu_impl *g = static_cast<gpu_impl *>(e->impl);
    if (m->fbins)
        return float_pass(g, err, [&] { return hqg::float_remap(&g->fl, g->st[0], b, m, lut, err); });
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

} /* namespace hqe */
