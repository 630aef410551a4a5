/* gpu_clahe.cu — CLAHE on the device (see gpu_clahe.h). The work lists (which padded rows and
 * columns of each tile a piece supplies, reflections included) come from core/clahe.h's
 * hq_clahe_side, the per-pixel keys, blend and channel formulas from core/clahe.h and core/pixel.h
 * compiled for the device: the rule exists once. */
#include <cuda_runtime.h>
#include <new>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "gpu_clahe.h"

struct hq_gpu_clahe {
    void *d_px = nullptr;
    size_t px_cap = 0;
    void *d_hist = nullptr;
    size_t hist_cap = 0;
    void *d_lut = nullptr;
    size_t lut_cap = 0;
    void *d_aux = nullptr;
    size_t aux_cap = 0;
    uint64_t now = 0, peak = 0;
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

/* Pixels per histogram work item: enough to amortize a shared-memory histogram's fold. */
constexpr uint64_t kItemPixels = (uint64_t)1 << 16;
/* Tiles whose histograms fit this many u32 counters (48 KiB) count in shared memory. */
constexpr uint32_t kSharedCounters = 12288;
constexpr int kThreads = 256;

struct Item {
    uint64_t tile;        /* local tile index among the tiles the piece touches */
    uint64_t tx;          /* tile column, into cat */
    uint64_t i_lo, i_hi;  /* entries [i_lo, i_hi) of rsrc */
};

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

template <typename T>
__device__ __forceinline__ void load_px(const T *px, uint32_t ch, uint32_t *c)
{
    c[0] = px[0];
    c[1] = ch >= 3 ? px[1] : 0;
    c[2] = ch >= 3 ? px[2] : 0;
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    k_clahe_hist(const T *__restrict__ d, uint64_t cols, uint32_t ch, const uint64_t *__restrict__ rsrc,
                 const uint64_t *__restrict__ csrc, const uint64_t *__restrict__ cat, const Item *__restrict__ items,
                 uint64_t r0, uint64_t c0, uint32_t bins, uint32_t nh, int color, uint32_t maxv, int shared,
                 unsigned long long *hist)
{
    extern __shared__ uint32_t sh[];
    const Item it = items[blockIdx.x];
    const uint32_t hl = nh * bins;
    unsigned long long *dst = hist + it.tile * hl;
    if (shared) {
        for (uint32_t v = threadIdx.x; v < hl; v += blockDim.x)
            sh[v] = 0;
        __syncthreads();
    }
    /* An item holds at most max(kItemPixels, one row of its tile) pixels: 32-bit indexes (64-bit
     * division is slow on the device). */
    const uint64_t cb = cat[it.tx];
    const uint32_t nc = (uint32_t)(cat[it.tx + 1] - cb), n = (uint32_t)(it.i_hi - it.i_lo) * nc;
    for (uint32_t k = threadIdx.x; k < n; k += blockDim.x) {
        const uint64_t i = it.i_lo + k / nc, j = cb + k % nc;
        uint32_t c[3];
        load_px(d + ((rsrc[i] - r0) * cols + (csrc[j] - c0)) * ch, ch, c);
        for (uint32_t h = 0; h < nh; h++) {
            const uint32_t v = h * bins + hq_clahe_key(c, ch, (hq_color)color, h, maxv);
            if (shared)
                atomicAdd(&sh[v], 1u);
            else
                atomicAdd(&dst[v], 1ull);
        }
    }
    if (shared) {
        __syncthreads();
        for (uint32_t v = threadIdx.x; v < hl; v += blockDim.x)
            if (sh[v])
                atomicAdd(&dst[v], (unsigned long long)sh[v]);
    }
}

/* lut: the LUTs of tile rows [ty0, ..) x tile columns [tx0, tx0 + ntx), nh * bins entries each. */
template <typename T>
__global__ void __launch_bounds__(kThreads)
    k_clahe_remap(T *d, uint64_t rows, uint64_t cols, uint32_t ch, uint64_t r0, uint64_t c0, float inv_h, float inv_w,
                  uint64_t tiles_y, uint64_t tiles_x, const uint16_t *__restrict__ lut, uint32_t ty0, uint32_t tx0,
                  uint32_t ntx, uint32_t bins, uint32_t nh, int color, uint32_t maxv)
{
    /* Rows over grid y, columns over grid x and the threads: no division per pixel. */
    const uint64_t hl = (uint64_t)nh * bins;
    for (uint64_t i = blockIdx.y; i < rows; i += gridDim.y) {
        const hq_clahe_w wy = hq_clahe_weight(r0 + i, inv_h, tiles_y);
        const uint16_t *l1 = lut + (uint64_t)(wy.t1 - ty0) * ntx * hl, *l2 = lut + (uint64_t)(wy.t2 - ty0) * ntx * hl;
        const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
        for (uint64_t j = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; j < cols; j += stride) {
            const hq_clahe_w wx = hq_clahe_weight(c0 + j, inv_w, tiles_x);
            const uint64_t x1 = (uint64_t)(wx.t1 - tx0) * hl, x2 = (uint64_t)(wx.t2 - tx0) * hl;
            T *px = d + (i * cols + j) * ch;
            uint32_t c[3], k2[3] = {0, 0, 0};
            load_px(px, ch, c);
            for (uint32_t h = 0; h < nh; h++) {
                const uint64_t v = (uint64_t)h * bins + hq_clahe_key(c, ch, (hq_color)color, h, maxv);
                k2[h] = hq_clahe_blend(l1[x1 + v], l1[x2 + v], l2[x1 + v], l2[x2 + v], wx, wy, maxv);
            }
            hq_clahe_apply(c, ch, (hq_color)color, k2, maxv);
            px[0] = (T)c[0];
            if (ch >= 3) {
                px[1] = (T)c[1];
                px[2] = (T)c[2];
            }
        }
    }
}

/* The side's entries tile by tile (own samples, then reflections): src[at[t] .. at[t + 1]). */
void flatten(const hq_clahe_side *s, std::vector<uint64_t> &src, std::vector<uint64_t> &at)
{
    at.assign(s->tiles + 1, 0);
    for (uint64_t t = 0; t < s->tiles; t++) {
        at[t] = src.size();
        for (uint64_t q = s->own_lo[t]; q < s->own_hi[t]; q++)
            src.push_back(q);
        for (uint64_t e = s->ext_at[t]; e < s->ext_at[t + 1]; e++)
            src.push_back(s->ext[e]);
    }
    at[s->tiles] = src.size();
}

/* First and last tile with entries; false when none. */
bool touched(const std::vector<uint64_t> &at, uint64_t *lo, uint64_t *hi)
{
    const uint64_t n = at.size() - 1;
    uint64_t a = 0, b = n;
    while (a < n && at[a + 1] == at[a])
        a++;
    while (b > a && at[b] == at[b - 1])
        b--;
    if (a >= b)
        return false;
    *lo = a;
    *hi = b - 1;
    return true;
}

/* Grid x covers a row's columns (capped), grid y the rows (capped at CUDA's 65535); both stride. */
dim3 grid_for(uint64_t rows, uint64_t cols)
{
    const uint64_t bx = (cols + kThreads - 1) / kThreads;
    return dim3((unsigned)(bx < 1024 ? bx : 1024), (unsigned)(rows < 65535 ? rows : 65535), 1);
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
    hq_clahe_side rs = {}, cs = {};
    std::vector<uint64_t> rsrc, rat, csrc, cat;
    try {
        if (hq_clahe_side_make(g->height, g->tiles_y, g->tile_h, p->r0, p->r0 + p->rows, &rs) ||
            hq_clahe_side_make(g->width, g->tiles_x, g->tile_w, p->c0, p->c0 + p->cols, &cs)) {
            hq_clahe_side_free(&rs);
            hq_clahe_side_free(&cs);
            return hq_fail(err, HQ_EMEM, "gpu: out of memory for CLAHE tiles");
        }
        flatten(&rs, rsrc, rat);
        flatten(&cs, csrc, cat);
    } catch (...) {
        hq_clahe_side_free(&rs);
        hq_clahe_side_free(&cs);
        return hq_fail(err, HQ_EMEM, "gpu: out of memory for CLAHE tiles");
    }
    hq_clahe_side_free(&rs);
    hq_clahe_side_free(&cs);
    uint64_t ty0, ty1, tx0, tx1;
    if (!touched(rat, &ty0, &ty1) || !touched(cat, &tx0, &tx1))
        return 0;
    const uint64_t nty = ty1 - ty0 + 1, ntx = tx1 - tx0 + 1;
    std::vector<Item> items;
    for (uint64_t ty = ty0; ty <= ty1; ty++)
        for (uint64_t tx = tx0; tx <= tx1; tx++) {
            const uint64_t nc = cat[tx + 1] - cat[tx];
            if (!nc)
                continue;
            const uint64_t step = kItemPixels / nc ? kItemPixels / nc : 1;
            for (uint64_t i = rat[ty]; i < rat[ty + 1]; i += step)
                items.push_back({(ty - ty0) * ntx + (tx - tx0), tx, i, i + step < rat[ty + 1] ? i + step : rat[ty + 1]});
        }
    const uint32_t bins = hq_mode_bins(m), nh = hq_mode_nhist(m), hl = nh * bins;
    const size_t pb = (size_t)m->channels * m->sample_bytes, px_bytes = p->rows * p->cols * pb;
    const size_t hist_bytes = nty * ntx * hl * sizeof(unsigned long long);
    const size_t a_r = rsrc.size() * 8, a_c = csrc.size() * 8, a_t = cat.size() * 8, a_i = items.size() * sizeof(Item);
    if ((rc = grow(s, &s->d_px, &s->px_cap, px_bytes, err)) ||
        (rc = grow(s, &s->d_hist, &s->hist_cap, hist_bytes, err)) ||
        (rc = grow(s, &s->d_aux, &s->aux_cap, a_r + a_c + a_t + a_i, err)))
        return rc;
    char *aux = static_cast<char *>(s->d_aux);
    CL_CHECK(cudaMemcpy(s->d_px, p->data, px_bytes, cudaMemcpyHostToDevice));
    CL_CHECK(cudaMemcpy(aux, rsrc.data(), a_r, cudaMemcpyHostToDevice));
    CL_CHECK(cudaMemcpy(aux + a_r, csrc.data(), a_c, cudaMemcpyHostToDevice));
    CL_CHECK(cudaMemcpy(aux + a_r + a_c, cat.data(), a_t, cudaMemcpyHostToDevice));
    CL_CHECK(cudaMemcpy(aux + a_r + a_c + a_t, items.data(), a_i, cudaMemcpyHostToDevice));
    CL_CHECK(cudaMemset(s->d_hist, 0, hist_bytes));
    const int shared = hl <= kSharedCounters;
    const size_t shm = shared ? hl * sizeof(uint32_t) : 0;
    const uint64_t *d_r = reinterpret_cast<const uint64_t *>(aux), *d_c = reinterpret_cast<const uint64_t *>(aux + a_r);
    const uint64_t *d_t = reinterpret_cast<const uint64_t *>(aux + a_r + a_c);
    const Item *d_i = reinterpret_cast<const Item *>(aux + a_r + a_c + a_t);
    unsigned long long *d_h = static_cast<unsigned long long *>(s->d_hist);
    const uint32_t maxv = bins - 1;
    for (size_t k0 = 0; k0 < items.size(); k0 += 0x7fffffff) {
        const uint32_t nb = (uint32_t)(items.size() - k0 < 0x7fffffff ? items.size() - k0 : 0x7fffffff);
        if (m->sample_bytes == 1)
            k_clahe_hist<uint8_t><<<nb, kThreads, shm>>>(static_cast<const uint8_t *>(s->d_px), p->cols, m->channels,
                                                          d_r, d_c, d_t, d_i + k0, p->r0, p->c0, bins, nh,
                                                          (int)m->color, maxv, shared, d_h);
        else
            k_clahe_hist<uint16_t><<<nb, kThreads, shm>>>(static_cast<const uint16_t *>(s->d_px), p->cols,
                                                           m->channels, d_r, d_c, d_t, d_i + k0, p->r0, p->c0, bins,
                                                           nh, (int)m->color, maxv, shared, d_h);
        CL_CHECK(cudaGetLastError());
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
    /* The blend's tiles grow with the position: the first row's and the last row's bound them. */
    const uint32_t ty0 = hq_clahe_weight(p->r0, inv_h, g->tiles_y).t1;
    const uint32_t ty1 = hq_clahe_weight(p->r0 + p->rows - 1, inv_h, g->tiles_y).t2;
    const uint32_t tx0 = hq_clahe_weight(p->c0, inv_w, g->tiles_x).t1;
    const uint32_t tx1 = hq_clahe_weight(p->c0 + p->cols - 1, inv_w, g->tiles_x).t2;
    const uint32_t bins = hq_mode_bins(m), nh = hq_mode_nhist(m);
    const uint64_t hl = (uint64_t)nh * bins, nty = ty1 - ty0 + 1, ntx = tx1 - tx0 + 1;
    const size_t pb = (size_t)m->channels * m->sample_bytes, px_bytes = p->rows * p->cols * pb;
    const size_t lut_bytes = nty * ntx * hl * sizeof(uint16_t);
    if ((rc = grow(s, &s->d_px, &s->px_cap, px_bytes, err)) || (rc = grow(s, &s->d_lut, &s->lut_cap, lut_bytes, err)))
        return rc;
    for (uint64_t ty = ty0; ty <= ty1; ty++) /* the tile rows' runs of LUTs, side by side */
        CL_CHECK(cudaMemcpy(static_cast<uint16_t *>(s->d_lut) + (ty - ty0) * ntx * hl,
                            lut + (ty * g->tiles_x + tx0) * hl, ntx * hl * sizeof(uint16_t), cudaMemcpyHostToDevice));
    CL_CHECK(cudaMemcpy(s->d_px, p->data, px_bytes, cudaMemcpyHostToDevice));
    const dim3 grid = grid_for(p->rows, p->cols);
    const uint16_t *d_l = static_cast<const uint16_t *>(s->d_lut);
    if (m->sample_bytes == 1)
        k_clahe_remap<uint8_t><<<grid, kThreads>>>(static_cast<uint8_t *>(s->d_px), p->rows, p->cols,
                                                           m->channels, p->r0, p->c0, inv_h, inv_w, g->tiles_y,
                                                           g->tiles_x, d_l, ty0, tx0, (uint32_t)ntx, bins, nh,
                                                           (int)m->color, bins - 1);
    else
        k_clahe_remap<uint16_t><<<grid, kThreads>>>(static_cast<uint16_t *>(s->d_px), p->rows, p->cols,
                                                            m->channels, p->r0, p->c0, inv_h, inv_w, g->tiles_y,
                                                            g->tiles_x, d_l, ty0, tx0, (uint32_t)ntx, bins, nh,
                                                            (int)m->color, bins - 1);
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
    delete st;
}
