/* gpu_clahe.cu — CLAHE on the device (see gpu_clahe.h). The work lists (which padded rows and
 * columns of each tile a piece supplies, reflections included) come from core/clahe.h's
 * hq_clahe_side, the per-pixel keys, blend and channel formulas from core/clahe.h and core/pixel.h
 * compiled for the device: the rule exists once. The kernels (gpu/clahe/, one file a job, included
 * through gpu_clahe_kernels.cuh): histograms in shared memory, whole or by 128 KiB windows (16-bit:
 * no device-wide atomic per pixel); the gray remap by groups of rows with 16-byte loads and stores,
 * 8-bit LUTs staged in shared memory. */
#include <cuda_runtime.h>
#include <new>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "gpu_clahe.h"
#include "gpu_clahe_kernels.cuh"

struct hq_gpu_clahe {
    void *d_px = nullptr;
    size_t px_cap = 0;
    void *d_hist = nullptr;
    size_t hist_cap = 0;
    void *d_lut = nullptr;
    size_t lut_cap = 0;
    void *d_aux = nullptr;
    size_t aux_cap = 0;
    void *d_cell = nullptr; /* 16-bit gray remap: the LUTs as cells (clahe/remap.cuh) */
    size_t cell_cap = 0;
    uint64_t now = 0, peak = 0;
    /* What the buffers hold for the next call (hq_clahe_piece.same_as_histogram, clahe_luts). */
    const void *px_src = nullptr; /* d_px: these host pixels of rectangle px_rect, as uploaded */
    uint64_t px_rect[4] = {0, 0, 0, 0};
    uint64_t whole_len = 0;            /* d_hist: every tile's counters of one whole image, or 0 */
    bool luts_ready = false;           /* d_lut: clahe_luts' LUTs of that image, tile-major */
    const uint16_t *lut_host = nullptr; /* where clahe_luts copied them (NULL: nowhere) */
};

namespace {

#define CL_CHECK(call)                                                                                             \
    do {                                                                                                           \
        cudaError_t e_ = (call);                                                                                   \
        if (e_ != cudaSuccess) {                                                                                   \
            cudaGetLastError();                                                                                    \
            return hq_fail(err, HQ_EDEVICE, "gpu: %s failed: %s (%s:%d)", #call, cudaGetErrorString(e_), __FILE__, \
                           __LINE__);                                                                              \
        }                                                                                                          \
    } while (0)

int grow(hq_gpu_clahe *s, void **p, size_t *cap, size_t need, hq_err *err)
{
    if (need <= *cap)
        return 0;
    if (*p) {
        cudaFree(*p);
        s->now -= *cap;
        *p = nullptr;
        *cap = 0;
    }
    if (cudaMalloc(p, need) != cudaSuccess) {
        cudaGetLastError();
        *p = nullptr;
        return hq_fail(err, HQ_EDEVICE, "gpu: no room on the device for %zu bytes of CLAHE data (lower --block)",
                       need);
    }
    *cap = need;
    s->now += need;
    s->peak = s->now > s->peak ? s->now : s->peak;
    return 0;
}

int state(hq_gpu_clahe **st, hq_err *err)
{
    if (!*st)
        *st = new (std::nothrow) hq_gpu_clahe();
    return *st ? 0 : hq_fail(err, HQ_EMEM, "gpu: out of memory");
}

} /* namespace */

int hq_gpu_clahe_histogram(hq_gpu_clahe **stp, const hq_clahe_piece *p, const hq_mode *m, const hq_clahe_geom *g,
                           uint64_t *hist, hq_err *err)
{
    if (!p->rows || !p->cols)
        return 0;
    int rc = state(stp, err);
    if (rc)
        return rc;
    hq_gpu_clahe *s = *stp;
    s->px_src = nullptr;
    s->whole_len = 0;
    s->luts_ready = false;
    const bool keep = hist == nullptr; /* clahe_luts follows: the counts stay here */
    if (keep && (p->r0 || p->c0 || p->rows != g->height || p->cols != g->width))
        return hq_fail(err, HQ_EDEVICE, "gpu: CLAHE histograms kept on the device for a piece of an image");
    hq_clahe_side rs = {}, cs = {};
    std::vector<uint64_t> rsrc, rat, rown, csrc, cat, cown;
    const uint32_t bins = hq_mode_bins(m), nh = hq_mode_nhist(m), hl = nh * bins;
    const int shared = hl <= kSharedCounters;
    /* Gray: each tile's own rectangle by k_clahe_hist_lane / _packed, the reflections by the
     * generic kernels; other modes: every entry by the generic kernels. */
    const bool gray = m->channels == 1 && nh == 1;
    std::vector<Item> items;
    std::vector<Unit> units;
    std::vector<uint32_t> starts;
    OwnLaunch ol = {};
    if (gray)
        CL_CHECK(plan_own(m->sample_bytes, bins, &ol));
    uint64_t ty0 = 0, ty1 = 0, tx0 = 0, tx1 = 0;
    bool any = false;
    try {
        if (hq_clahe_side_make(g->height, g->tiles_y, g->tile_h, p->r0, p->r0 + p->rows, &rs) ||
            hq_clahe_side_make(g->width, g->tiles_x, g->tile_w, p->c0, p->c0 + p->cols, &cs))
            throw std::bad_alloc();
        flatten(&rs, rsrc, rat, rown);
        flatten(&cs, csrc, cat, cown);
        any = touched(rat, &ty0, &ty1) && touched(cat, &tx0, &tx1);
        if (any && gray)
            own_work(&rs, &cs, p->r0, p->c0, ty0, ty1, tx0, tx1, m->sample_bytes, &ol, units, starts);
        if (any)
            make_items(rat, cat, ty0, ty1, tx0, tx1, shared ? kItemPixels : kItemPixelsWin, items,
                       gray ? &rown : nullptr, gray ? &cown : nullptr);
    } catch (...) {
        hq_clahe_side_free(&rs);
        hq_clahe_side_free(&cs);
        return hq_fail(err, HQ_EMEM, "gpu: out of memory for CLAHE tiles");
    }
    hq_clahe_side_free(&rs);
    hq_clahe_side_free(&cs);
    if (!any)
        return 0;
    const uint64_t nty = ty1 - ty0 + 1, ntx = tx1 - tx0 + 1;
    const size_t pb = (size_t)m->channels * m->sample_bytes, px_bytes = p->rows * p->cols * pb;
    const size_t hist_bytes = nty * ntx * hl * sizeof(unsigned long long);
    const size_t a_r = rsrc.size() * 8, a_c = csrc.size() * 8, a_i = items.size() * sizeof(Item);
    const size_t a_u = units.size() * sizeof(Unit), a_s = starts.size() * sizeof(uint32_t);
    if ((rc = grow(s, &s->d_px, &s->px_cap, px_bytes, err)) ||
        (rc = grow(s, &s->d_hist, &s->hist_cap, hist_bytes, err)) ||
        (rc = grow(s, &s->d_aux, &s->aux_cap, a_r + a_c + a_i + a_u + a_s, err)))
        return rc;
    char *aux = static_cast<char *>(s->d_aux);
    CL_CHECK(cudaMemcpy(s->d_px, p->data, px_bytes, cudaMemcpyHostToDevice));
    s->px_src = p->data;
    s->px_rect[0] = p->r0;
    s->px_rect[1] = p->c0;
    s->px_rect[2] = p->rows;
    s->px_rect[3] = p->cols;
    CL_CHECK(cudaMemcpy(aux, rsrc.data(), a_r, cudaMemcpyHostToDevice));
    CL_CHECK(cudaMemcpy(aux + a_r, csrc.data(), a_c, cudaMemcpyHostToDevice));
    CL_CHECK(cudaMemcpy(aux + a_r + a_c, items.data(), a_i, cudaMemcpyHostToDevice));
    CL_CHECK(cudaMemcpy(aux + a_r + a_c + a_i, units.data(), a_u, cudaMemcpyHostToDevice));
    CL_CHECK(cudaMemcpy(aux + a_r + a_c + a_i + a_u, starts.data(), a_s, cudaMemcpyHostToDevice));
    CL_CHECK(cudaMemset(s->d_hist, 0, hist_bytes));
    const uint64_t *d_r = reinterpret_cast<const uint64_t *>(aux), *d_c = reinterpret_cast<const uint64_t *>(aux + a_r);
    const Item *d_i = reinterpret_cast<const Item *>(aux + a_r + a_c);
    const Unit *d_u = reinterpret_cast<const Unit *>(aux + a_r + a_c + a_i);
    const uint32_t *d_s = reinterpret_cast<const uint32_t *>(aux + a_r + a_c + a_i + a_u);
    unsigned long long *d_h = static_cast<unsigned long long *>(s->d_hist);
    const uint32_t maxv = bins - 1;
    if (!units.empty()) {
        if (units.size() > UINT32_MAX)
            return hq_fail(err, HQ_EDEVICE, "gpu: a CLAHE piece of %zu histogram units is too large (lower --block)",
                           units.size());
        launch_own(ol, s->d_px, m->sample_bytes, p->cols, d_u, d_s, (uint32_t)units.size(), bins, d_h);
        CL_CHECK(cudaGetLastError());
    }
    const uint32_t nwin = shared ? 1 : (hl + kWindow - 1) / kWindow;
    const size_t shm = (shared ? hl : (hl < kWindow ? hl : kWindow)) * sizeof(uint32_t);
    if (!shared) {
        CL_CHECK(cudaFuncSetAttribute(k_clahe_hist_win<uint8_t>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)shm));
        CL_CHECK(cudaFuncSetAttribute(k_clahe_hist_win<uint16_t>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)shm));
    }
    for (size_t k0 = 0; k0 < items.size(); k0 += 0x7fffffff) {
        const uint32_t nb = (uint32_t)(items.size() - k0 < 0x7fffffff ? items.size() - k0 : 0x7fffffff);
        if (!shared && m->sample_bytes == 1)
            k_clahe_hist_win<uint8_t><<<dim3(nb, nwin), kWinThreads, shm>>>(
                static_cast<const uint8_t *>(s->d_px), p->cols, m->channels, d_r, d_c, d_i + k0, p->r0, p->c0, bins,
                nh, (int)m->color, maxv, d_h);
        else if (!shared)
            k_clahe_hist_win<uint16_t><<<dim3(nb, nwin), kWinThreads, shm>>>(
                static_cast<const uint16_t *>(s->d_px), p->cols, m->channels, d_r, d_c, d_i + k0, p->r0, p->c0,
                bins, nh, (int)m->color, maxv, d_h);
        else if (m->sample_bytes == 1)
            k_clahe_hist<uint8_t><<<nb, kThreads, shm>>>(static_cast<const uint8_t *>(s->d_px), p->cols, m->channels,
                                                          d_r, d_c, d_i + k0, p->r0, p->c0, bins, nh, (int)m->color,
                                                          maxv, d_h);
        else
            k_clahe_hist<uint16_t><<<nb, kThreads, shm>>>(static_cast<const uint16_t *>(s->d_px), p->cols,
                                                           m->channels, d_r, d_c, d_i + k0, p->r0, p->c0, bins, nh,
                                                           (int)m->color, maxv, d_h);
        CL_CHECK(cudaGetLastError());
    }
    if (keep) {
        if (nty != g->tiles_y || ntx != g->tiles_x)
            return hq_fail(err, HQ_EDEVICE, "gpu: a whole image's CLAHE piece missed some of its tiles");
        s->whole_len = nty * ntx * hl;
        return 0;
    }
    std::vector<unsigned long long> h;
    try {
        h.resize(nty * ntx * hl);
    } catch (...) {
        return hq_fail(err, HQ_EMEM, "gpu: out of memory for CLAHE histograms");
    }
    CL_CHECK(cudaMemcpy(h.data(), s->d_hist, hist_bytes, cudaMemcpyDeviceToHost));
    for (uint64_t ty = ty0; ty <= ty1; ty++)
        for (uint64_t tx = tx0; tx <= tx1; tx++) {
            const unsigned long long *src = h.data() + ((ty - ty0) * ntx + (tx - tx0)) * hl;
            uint64_t *dst = hist + (ty * g->tiles_x + tx) * hl;
            for (uint32_t v = 0; v < hl; v++)
                dst[v] += src[v];
        }
    return 0;
}

int hq_gpu_clahe_luts(hq_gpu_clahe **stp, const hq_mode *m, const hq_clahe_geom *g, int64_t limit, uint16_t *lut,
                      hq_err *err)
{
    hq_gpu_clahe *s = *stp;
    const uint32_t bins = hq_mode_bins(m);
    const uint64_t n = hq_clahe_ntiles(g) * hq_mode_nhist(m), len = n * bins;
    if (!s || !s->whole_len || s->whole_len != len)
        return hq_fail(err, HQ_EDEVICE, "gpu: CLAHE LUTs asked for without a whole image's histograms");
    s->whole_len = 0;
    if (n > 0x7fffffff)
        return hq_fail(err, HQ_EDEVICE, "gpu: %llu CLAHE tile LUTs in one image are too many for one launch",
                       (unsigned long long)n);
    int rc = grow(s, &s->d_lut, &s->lut_cap, len * sizeof(uint16_t), err);
    if (rc)
        return rc;
    launch_luts(static_cast<const unsigned long long *>(s->d_hist), bins, (uint32_t)n, hq_clahe_area(g), limit,
                static_cast<uint16_t *>(s->d_lut));
    CL_CHECK(cudaGetLastError());
    if (lut)
        CL_CHECK(cudaMemcpy(lut, s->d_lut, len * sizeof(uint16_t), cudaMemcpyDeviceToHost));
    s->luts_ready = true;
    s->lut_host = lut;
    return 0;
}

int hq_gpu_clahe_remap(hq_gpu_clahe **stp, hq_clahe_piece *p, const hq_mode *m, const hq_clahe_geom *g,
                       const uint16_t *lut, hq_err *err)
{
    if (!p->rows || !p->cols)
        return 0;
    int rc = state(stp, err);
    if (rc)
        return rc;
    hq_gpu_clahe *s = *stp;
    const float inv_h = hq_clahe_inv(g->tile_h), inv_w = hq_clahe_inv(g->tile_w);
    /* What the last calls left here (both are used up by this remap, which overwrites d_px): the
     * piece's pixels, and a whole image's LUTs laid out as the host's (every tile, tile-major, so
     * the span below becomes every tile: an image smaller than its padded grid never blends the
     * last padded tiles, but their LUTs sit between the others). */
    const bool have_px = p->same_as_histogram && s->px_src == p->data && s->px_rect[0] == p->r0 &&
                         s->px_rect[1] == p->c0 && s->px_rect[2] == p->rows && s->px_rect[3] == p->cols;
    const bool have_lut = p->same_as_histogram && s->luts_ready && (!lut || lut == s->lut_host) && !p->r0 && !p->c0 &&
                          p->rows == g->height && p->cols == g->width;
    /* The blend's tiles grow with the position: the first row's and the last row's bound them. */
    const uint32_t last_r = hq_clahe_weight(p->r0 + p->rows - 1, inv_h, g->tiles_y).t2;
    const uint32_t last_c = hq_clahe_weight(p->c0 + p->cols - 1, inv_w, g->tiles_x).t2;
    const uint32_t ty0 = have_lut ? 0 : hq_clahe_weight(p->r0, inv_h, g->tiles_y).t1;
    const uint32_t ty1 = have_lut ? (uint32_t)g->tiles_y - 1 : last_r;
    const uint32_t tx0 = have_lut ? 0 : hq_clahe_weight(p->c0, inv_w, g->tiles_x).t1;
    const uint32_t tx1 = have_lut ? (uint32_t)g->tiles_x - 1 : last_c;
    const uint32_t bins = hq_mode_bins(m), nh = hq_mode_nhist(m);
    const uint64_t hl = (uint64_t)nh * bins, nty = ty1 - ty0 + 1, ntx = tx1 - tx0 + 1;
    const size_t pb = (size_t)m->channels * m->sample_bytes, px_bytes = p->rows * p->cols * pb;
    const size_t lut_bytes = nty * ntx * hl * sizeof(uint16_t);
    s->px_src = nullptr;
    s->luts_ready = false;
    if (!lut && !have_lut)
        return hq_fail(err, HQ_EDEVICE, "gpu: a CLAHE remap without LUTs");
    if (!have_px && (rc = grow(s, &s->d_px, &s->px_cap, px_bytes, err)))
        return rc;
    if (!have_lut && (rc = grow(s, &s->d_lut, &s->lut_cap, lut_bytes, err)))
        return rc;
    for (uint64_t ty = ty0; !have_lut && ty <= ty1; ty++) /* the tile rows' runs of LUTs, side by side */
        CL_CHECK(cudaMemcpy(static_cast<uint16_t *>(s->d_lut) + (ty - ty0) * ntx * hl,
                            lut + (ty * g->tiles_x + tx0) * hl, ntx * hl * sizeof(uint16_t), cudaMemcpyHostToDevice));
    if (!have_px)
        CL_CHECK(cudaMemcpy(s->d_px, p->data, px_bytes, cudaMemcpyHostToDevice));
    const uint16_t *d_l = static_cast<const uint16_t *>(s->d_lut);
    if (m->channels == 1) {
        GrayLaunch gl;
        CL_CHECK(plan_gray(m->sample_bytes, bins, p->r0, p->rows, p->c0, p->cols, g, s->d_px, &gl));
        std::vector<RowGroup> groups;
        try {
            if (gl.kind != 8) /* kind 8 finds its runs of rows itself */
                make_groups(p->r0, p->rows, gl.group_rows, inv_h, g->tiles_y, groups);
        } catch (...) {
            return hq_fail(err, HQ_EMEM, "gpu: out of memory for CLAHE row groups");
        }
        const size_t gb = groups.size() * sizeof(RowGroup);
        if ((rc = grow(s, &s->d_aux, &s->aux_cap, gb, err)) ||
            (gl.kind == 16 && (rc = grow(s, &s->d_cell, &s->cell_cap, gl.cell_bytes, err))))
            return rc;
        if (gb)
            CL_CHECK(cudaMemcpy(s->d_aux, groups.data(), gb, cudaMemcpyHostToDevice));
        const RowGroup *d_g = static_cast<const RowGroup *>(s->d_aux);
        if (groups.size() > UINT32_MAX)
            return hq_fail(err, HQ_EDEVICE, "gpu: a CLAHE piece of %zu row groups is too large (lower --block)",
                           groups.size());
        if (gl.kind) {
            launch_gray(gl, s->d_px, p->r0, p->rows, p->c0, p->cols, g, d_l, ty0, tx0, (uint32_t)ntx, bins, d_g,
                        (uint32_t)groups.size(), static_cast<uint2 *>(s->d_cell));
            CL_CHECK(cudaGetLastError());
        }
        const bool sh8 = m->sample_bytes == 1 && bins == 256 && ntx * 512 <= kLut8Bytes;
        const size_t shm = sh8 ? ntx * 512 : 0;
        for (size_t k0 = 0; !gl.kind && k0 < groups.size(); k0 += 0x7fffffff) {
            const uint32_t nb = (uint32_t)(groups.size() - k0 < 0x7fffffff ? groups.size() - k0 : 0x7fffffff);
            if (sh8)
                k_clahe_remap_gray<uint8_t, true><<<nb, kThreads, shm>>>(
                    static_cast<uint8_t *>(s->d_px), p->cols, p->r0, p->c0, inv_h, inv_w, g->tiles_y, g->tiles_x, d_l,
                    ty0, tx0, (uint32_t)ntx, bins, bins - 1, d_g + k0);
            else if (m->sample_bytes == 1)
                k_clahe_remap_gray<uint8_t, false><<<nb, kThreads>>>(
                    static_cast<uint8_t *>(s->d_px), p->cols, p->r0, p->c0, inv_h, inv_w, g->tiles_y, g->tiles_x, d_l,
                    ty0, tx0, (uint32_t)ntx, bins, bins - 1, d_g + k0);
            else
                k_clahe_remap_gray<uint16_t, false><<<nb, kThreads>>>(
                    static_cast<uint16_t *>(s->d_px), p->cols, p->r0, p->c0, inv_h, inv_w, g->tiles_y, g->tiles_x,
                    d_l, ty0, tx0, (uint32_t)ntx, bins, bins - 1, d_g + k0);
            CL_CHECK(cudaGetLastError());
        }
    } else {
        const dim3 grid = grid_for(p->rows, p->cols);
        if (m->sample_bytes == 1)
            k_clahe_remap<uint8_t><<<grid, kThreads>>>(static_cast<uint8_t *>(s->d_px), p->rows, p->cols, m->channels,
                                                       p->r0, p->c0, inv_h, inv_w, g->tiles_y, g->tiles_x, d_l, ty0,
                                                       tx0, (uint32_t)ntx, bins, nh, (int)m->color, bins - 1);
        else
            k_clahe_remap<uint16_t><<<grid, kThreads>>>(static_cast<uint16_t *>(s->d_px), p->rows, p->cols,
                                                        m->channels, p->r0, p->c0, inv_h, inv_w, g->tiles_y,
                                                        g->tiles_x, d_l, ty0, tx0, (uint32_t)ntx, bins, nh,
                                                        (int)m->color, bins - 1);
    }
    CL_CHECK(cudaGetLastError());
    CL_CHECK(cudaMemcpy(p->data, s->d_px, px_bytes, cudaMemcpyDeviceToHost));
    return 0;
}

uint64_t hq_gpu_clahe_peak(const hq_gpu_clahe *st)
{
    return st ? st->peak : 0;
}

void hq_gpu_clahe_free(hq_gpu_clahe *st)
{
    if (!st)
        return;
    cudaFree(st->d_px);
    cudaFree(st->d_hist);
    cudaFree(st->d_lut);
    cudaFree(st->d_aux);
    cudaFree(st->d_cell);
    delete st;
}
