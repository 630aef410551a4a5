/* clahe/work_lists.cuh — the host side: the work lists the kernels read (Items for
 * hist_generic.cuh, Units for hist_own.cuh, RowGroups for remap.cuh), built from core/clahe.h's
 * hq_clahe_side, and the launch plans that pick a kernel and its shape (plan_own / launch_own,
 * plan_gray / launch_gray). Here rather than in gpu_clahe.cu so that bench/clahe_gpu_bench.cu
 * launches exactly as the engine does. */
#ifndef HQ_GPU_CLAHE_WORK_LISTS_CUH
#define HQ_GPU_CLAHE_WORK_LISTS_CUH

#include <cuda_runtime.h>
#include <stdint.h>
#include <vector>

#include "common.cuh"
#include "hist_own.cuh"
#include "remap.cuh"

namespace {

/* The side's entries tile by tile (own samples, then reflections): src[at[t] .. at[t + 1]), the
 * first own[t] of them the own samples. */
inline void flatten(const hq_clahe_side *s, std::vector<uint64_t> &src, std::vector<uint64_t> &at,
                    std::vector<uint64_t> &own)
{
    at.assign(s->tiles + 1, 0);
    own.assign(s->tiles, 0);
    for (uint64_t t = 0; t < s->tiles; t++) {
        at[t] = src.size();
        own[t] = s->own_hi[t] - s->own_lo[t];
        for (uint64_t q = s->own_lo[t]; q < s->own_hi[t]; q++)
            src.push_back(q);
        for (uint64_t e = s->ext_at[t]; e < s->ext_at[t + 1]; e++)
            src.push_back(s->ext[e]);
    }
    at[s->tiles] = src.size();
}

/* First and last tile with entries; false when none. */
inline bool touched(const std::vector<uint64_t> &at, uint64_t *lo, uint64_t *hi)
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
inline dim3 grid_for(uint64_t rows, uint64_t cols)
{
    const uint64_t bx = (cols + kThreads - 1) / kThreads;
    return dim3((unsigned)(bx < 1024 ? bx : 1024), (unsigned)(rows < 65535 ? rows : 65535), 1);
}

/* Work items of tiles [ty0, ty1] x [tx0, tx1], item_px pixels each at most (one row at least).
 * own_r, own_c (ext_only): each tile's count of own entries (they come first in rsrc, csrc); then
 * the items hold only the entries outside the own rectangle (a reflected row or column), which
 * k_clahe_hist_lane / k_clahe_hist_packed leave out. */
inline void make_items(const std::vector<uint64_t> &rat, const std::vector<uint64_t> &cat, uint64_t ty0, uint64_t ty1,
                       uint64_t tx0, uint64_t tx1, uint64_t item_px, std::vector<Item> &items,
                       const std::vector<uint64_t> *own_r = nullptr, const std::vector<uint64_t> *own_c = nullptr)
{
    const uint64_t ntx = tx1 - tx0 + 1;
    auto add = [&](uint64_t tile, uint64_t i0, uint64_t i1, uint64_t j0, uint64_t j1) {
        if (i0 >= i1 || j0 >= j1)
            return;
        const uint64_t step = item_px / (j1 - j0) ? item_px / (j1 - j0) : 1;
        for (uint64_t i = i0; i < i1; i += step)
            items.push_back({tile, i, i + step < i1 ? i + step : i1, j0, j1});
    };
    for (uint64_t ty = ty0; ty <= ty1; ty++)
        for (uint64_t tx = tx0; tx <= tx1; tx++) {
            const uint64_t tile = (ty - ty0) * ntx + (tx - tx0);
            if (!own_r) {
                add(tile, rat[ty], rat[ty + 1], cat[tx], cat[tx + 1]);
                continue;
            }
            const uint64_t ri = rat[ty] + (*own_r)[ty], cj = cat[tx] + (*own_c)[tx];
            add(tile, rat[ty], ri, cj, cat[tx + 1]);           /* own rows x reflected columns */
            add(tile, ri, rat[ty + 1], cat[tx], cat[tx + 1]);  /* reflected rows x every column */
        }
}

/* Gray histograms' own rectangles in units of at most max_px pixels (one row segment at least, a
 * segment max_px columns at most), tile by tile so that a block's run of units mostly stays in
 * one tile. Piece coordinates. */
inline void make_units(const hq_clahe_side *rs, const hq_clahe_side *cs, uint64_t r0, uint64_t c0, uint64_t ty0,
                       uint64_t ty1, uint64_t tx0, uint64_t tx1, uint64_t max_px, std::vector<Unit> &units)
{
    const uint64_t ntx = tx1 - tx0 + 1;
    for (uint64_t ty = ty0; ty <= ty1; ty++)
        for (uint64_t tx = tx0; tx <= tx1; tx++) {
            const uint64_t rl = rs->own_lo[ty] - r0, rh = rs->own_hi[ty] - r0;
            const uint64_t cl = cs->own_lo[tx] - c0, ch = cs->own_hi[tx] - c0;
            if (rl >= rh || cl >= ch)
                continue;
            const uint64_t cw = ch - cl < max_px ? ch - cl : max_px, per = max_px / cw;
            for (uint64_t c = cl; c < ch; c += cw)
                for (uint64_t r = rl; r < rh; r += per)
                    units.push_back({(ty - ty0) * ntx + (tx - tx0), r, r + per < rh ? r + per : rh, c,
                                     c + cw < ch ? c + cw : ch});
        }
}

/* k_clahe_hist_lane's work: the own rectangles (whole, make_units) cut by rows into grid runs of
 * about equal pixels, block b taking units[starts[b] .. starts[b + 1]); no unit over 2^31 pixels
 * (the block's u32 counters fold before they could wrap). grid: at most the rows there are. */
inline void make_lane_units(const hq_clahe_side *rs, const hq_clahe_side *cs, uint64_t r0, uint64_t c0, uint64_t ty0,
                            uint64_t ty1, uint64_t tx0, uint64_t tx1, uint32_t *grid, std::vector<Unit> &units,
                            std::vector<uint32_t> &starts)
{
    std::vector<Unit> rect;
    make_units(rs, cs, r0, c0, ty0, ty1, tx0, tx1, UINT64_MAX >> 1, rect);
    uint64_t total = 0, rows = 0;
    for (const Unit &q : rect) {
        total += (q.r_hi - q.r_lo) * (q.c_hi - q.c_lo);
        rows += q.r_hi - q.r_lo;
    }
    *grid = (uint32_t)(rows < *grid ? rows : *grid);
    starts.assign(*grid + 1, 0);
    size_t k = 0;
    uint64_t done = 0, row = rect.empty() ? 0 : rect[0].r_lo; /* pixels of rect[0 .. k), next row of rect[k] */
    for (uint32_t b = 0; b < *grid; b++) {
        starts[b] = (uint32_t)units.size();
        const uint64_t end = total * (b + 1) / *grid;
        while (k < rect.size()) {
            const Unit &q = rect[k];
            const uint64_t w = q.c_hi - q.c_lo, cap = ((uint64_t)1 << 31) / w ? ((uint64_t)1 << 31) / w : 1;
            if (done + (row - q.r_lo) * w >= end)
                break;
            uint64_t stop = q.r_lo + (end - done + w - 1) / w;
            stop = stop < q.r_hi ? stop : q.r_hi;
            stop = stop - row < cap ? stop : row + cap;
            units.push_back({q.tile, row, stop, q.c_lo, q.c_hi});
            row = stop;
            if (row == q.r_hi) {
                done += (q.r_hi - q.r_lo) * w;
                if (++k < rect.size())
                    row = rect[k].r_lo;
            }
        }
    }
    starts[*grid] = (uint32_t)units.size();
}

/* Threads along a row for units of width w samples (T): a power of two from 32 to threads, about
 * one 16-byte vector each. */
template <typename T> inline dim3 unit_block(uint64_t w, int threads)
{
    const uint64_t nvec = (w * sizeof(T) + 15) / 16;
    uint32_t l = 32;
    while (l < (uint32_t)threads && l < nvec)
        l *= 2;
    return dim3(l, (uint32_t)threads / l, 1);
}

/* How the own rectangles' histograms launch: per-lane counters (k_clahe_hist_lane) or packed ones
 * (k_clahe_hist_packed), a persistent grid of at most as many blocks as the device runs at once. */
struct OwnLaunch {
    bool lane;
    dim3 block;
    uint32_t grid;
    size_t shm;
};

/* Samples of sample_bytes, bins bins: the kernel, its shared memory and the grid the device holds. */
inline cudaError_t plan_own(uint32_t sample_bytes, uint32_t bins, OwnLaunch *o)
{
    o->lane = bins <= kLaneBins;
    const int threads = o->lane ? kLaneThreads : kPackedThreads;
    o->block = dim3(threads, 1, 1);
    o->shm = o->lane ? (size_t)256 * 32 * 4 : (size_t)((bins + 1) / 2) * 4;
    const void *f = o->lane ? (sample_bytes == 1 ? (const void *)k_clahe_hist_lane<uint8_t>
                                                 : (const void *)k_clahe_hist_lane<uint16_t>)
                            : (sample_bytes == 1 ? (const void *)k_clahe_hist_packed<uint8_t>
                                                 : (const void *)k_clahe_hist_packed<uint16_t>);
    cudaError_t e = cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)o->shm);
    int dev = 0, sms = 1, per = 1;
    if (e == cudaSuccess)
        e = cudaGetDevice(&dev);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (e == cudaSuccess)
        e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, f, threads, o->shm);
    const uint64_t g = (uint64_t)sms * (per > 0 ? per : 1);
    o->grid = (uint32_t)(g < UINT32_MAX ? g : UINT32_MAX);
    return e;
}

/* The own rectangles of tiles [ty0, ty1] x [tx0, tx1] as plan o's kernel takes them: units (and,
 * per-lane, the blocks' starts); o's grid and block fitted to them. */
inline void own_work(const hq_clahe_side *rs, const hq_clahe_side *cs, uint64_t r0, uint64_t c0, uint64_t ty0,
                     uint64_t ty1, uint64_t tx0, uint64_t tx1, uint32_t sample_bytes, OwnLaunch *o,
                     std::vector<Unit> &units, std::vector<uint32_t> &starts)
{
    if (o->lane) {
        make_lane_units(rs, cs, r0, c0, ty0, ty1, tx0, tx1, &o->grid, units, starts);
        return;
    }
    make_units(rs, cs, r0, c0, ty0, ty1, tx0, tx1, kUnitPixels, units);
    uint64_t w = 0;
    for (const Unit &u : units)
        w = u.c_hi - u.c_lo > w ? u.c_hi - u.c_lo : w;
    o->block = sample_bytes == 1 ? unit_block<uint8_t>(w, kPackedThreads) : unit_block<uint16_t>(w, kPackedThreads);
    o->grid = (uint32_t)(units.size() < o->grid ? units.size() : o->grid);
}

/* starts: own_work's (per-lane plans only). */
inline void launch_own(const OwnLaunch &o, const void *d, uint32_t sample_bytes, uint64_t cols, const Unit *units,
                       const uint32_t *starts, uint32_t nunits, uint32_t bins, unsigned long long *hist,
                       cudaStream_t st = 0)
{
    if (!o.grid)
        return;
    if (o.lane && sample_bytes == 1)
        k_clahe_hist_lane<uint8_t><<<o.grid, o.block, o.shm, st>>>(static_cast<const uint8_t *>(d), cols, units,
                                                                   starts, bins - 1, hist);
    else if (o.lane)
        k_clahe_hist_lane<uint16_t><<<o.grid, o.block, o.shm, st>>>(static_cast<const uint16_t *>(d), cols, units,
                                                                    starts, bins - 1, hist);
    else if (sample_bytes == 1)
        k_clahe_hist_packed<uint8_t><<<o.grid, o.block, o.shm, st>>>(static_cast<const uint8_t *>(d), cols, units,
                                                                     nunits, bins, bins - 1, hist);
    else
        k_clahe_hist_packed<uint16_t><<<o.grid, o.block, o.shm, st>>>(static_cast<const uint16_t *>(d), cols, units,
                                                                      nunits, bins, bins - 1, hist);
}

/* How a gray piece's remap launches: kind 8 (k_clahe_remap8), 16 (k_clahe_cells, then
 * k_clahe_remap16) for rows that start on 16-byte boundaries, else 0 (k_clahe_remap_gray). */
struct GrayLaunch {
    int kind;
    uint32_t strips;             /* grid x */
    uint32_t slabs;              /* kind 8: grid y */
    size_t shm;                  /* kind 8: the most cells a strip stages */
    bool rep;                    /* kind 8: in Remap8Rep's layout (else Remap8Half's) */
    uint32_t py0, npy, px0, npx; /* kind 16: the pairs the cells cover */
    uint64_t cell_bytes;         /* kind 16 */
    uint64_t group_rows;         /* kinds 16 and 0: rows a row group at most */
};

inline cudaError_t plan_gray(uint32_t sample_bytes, uint32_t bins, uint64_t r0, uint64_t rows, uint64_t c0,
                             uint64_t cols, const hq_clahe_geom *g, const void *d, GrayLaunch *o)
{
    const float inv_h = hq_clahe_inv(g->tile_h), inv_w = hq_clahe_inv(g->tile_w);
    const bool aligned = (uintptr_t)d % 16 == 0 && (cols * sample_bytes) % 16 == 0;
    *o = GrayLaunch{};
    o->group_rows = kGroupPixels / cols ? kGroupPixels / cols : 1;
    if (!aligned || bins < 2)
        return cudaSuccess;
    if (sample_bytes == 1 && bins <= 256) {
        const uint64_t sw = kRemapBX * 16;
        uint32_t most = 0;
        for (uint64_t x0 = 0; x0 < cols; x0 += sw) {
            const uint64_t x1 = x0 + sw < cols ? x0 + sw : cols;
            const uint32_t n = pair_of(hq_clahe_weight(c0 + x1 - 1, inv_w, g->tiles_x), g->tiles_x) -
                               pair_of(hq_clahe_weight(c0 + x0, inv_w, g->tiles_x), g->tiles_x) + 1;
            most = n > most ? n : most;
        }
        if (most > kCellPairs8)
            return cudaSuccess;
        o->kind = 8;
        o->strips = (uint32_t)((cols + sw - 1) / sw);
        int dev = 0, sms = 1, per = 1, optin = 48 * 1024;
        cudaError_t e = cudaGetDevice(&dev);
        if (e == cudaSuccess)
            e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
        if (e == cudaSuccess)
            e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
        /* The copies where the device gives a block that much shared memory (96 KiB for 3 pairs). */
        const size_t rep_shm = (size_t)most * 256 * Remap8Rep::kCopies * sizeof(Remap8Rep::Cell);
        o->rep = most <= kRepPairs8 && rep_shm <= (size_t)optin;
        o->shm = o->rep ? rep_shm : (size_t)most * 256 * sizeof(Remap8Half::Cell);
        /* One block a strip and slab, all resident at once: every thread keeps its columns' weights
         * over a slab, and no block waits for a second wave. */
        const void *k = o->rep ? (const void *)k_clahe_remap8<Remap8Rep> : (const void *)k_clahe_remap8<Remap8Half>;
        if (e == cudaSuccess && o->shm > 48 * 1024) /* past the default limit: allowed explicitly */
            e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)o->shm);
        if (e == cudaSuccess)
            e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, k, kRemapBX * kRemapBY, o->shm);
        const uint64_t fit = (uint64_t)sms * (per > 0 ? per : 1) / o->strips, slabs = fit < rows ? fit : rows;
        o->slabs = (uint32_t)(slabs < 1 ? 1 : slabs < 65535 ? slabs : 65535);
        return e;
    }
    if (sample_bytes != 2)
        return cudaSuccess;
    o->py0 = pair_of(hq_clahe_weight(r0, inv_h, g->tiles_y), g->tiles_y);
    o->npy = pair_of(hq_clahe_weight(r0 + rows - 1, inv_h, g->tiles_y), g->tiles_y) - o->py0 + 1;
    o->px0 = pair_of(hq_clahe_weight(c0, inv_w, g->tiles_x), g->tiles_x);
    o->npx = pair_of(hq_clahe_weight(c0 + cols - 1, inv_w, g->tiles_x), g->tiles_x) - o->px0 + 1;
    o->cell_bytes = (uint64_t)o->npy * o->npx * bins * sizeof(uint2);
    if (o->cell_bytes > kCellBytes)
        return cudaSuccess;
    o->kind = 16;
    o->strips = (uint32_t)((cols / 8 + kRemapBX - 1) / kRemapBX);
    o->group_rows = kRemapRows;
    return cudaSuccess;
}

/* The remap of plan o (not kind 0) of piece rows r0 .. r0 + rows; kind 16 over ngroups row groups
 * (make_groups, group_rows), its cells cell_bytes of device memory. lut as k_clahe_remap's. */
inline void launch_gray(const GrayLaunch &o, void *d, uint64_t r0, uint64_t rows, uint64_t c0, uint64_t cols,
                        const hq_clahe_geom *g, const uint16_t *lut, uint32_t ty0, uint32_t tx0, uint32_t ntx,
                        uint32_t bins, const RowGroup *groups, uint32_t ngroups, uint2 *cells, cudaStream_t st = 0)
{
    const float inv_h = hq_clahe_inv(g->tile_h), inv_w = hq_clahe_inv(g->tile_w);
    const dim3 block(kRemapBX, kRemapBY);
    if (o.kind == 8) {
        const dim3 grid(o.strips, o.slabs);
        uint8_t *p = static_cast<uint8_t *>(d);
        if (o.rep)
            k_clahe_remap8<Remap8Rep><<<grid, block, o.shm, st>>>(p, rows, cols, r0, c0, inv_h, inv_w, g->tiles_y,
                                                                  g->tiles_x, lut, ty0, tx0, ntx, bins);
        else
            k_clahe_remap8<Remap8Half><<<grid, block, o.shm, st>>>(p, rows, cols, r0, c0, inv_h, inv_w, g->tiles_y,
                                                                   g->tiles_x, lut, ty0, tx0, ntx, bins);
        return;
    }
    /* Pairs of pairs: at most kCellBytes / 8 / bins (plan_gray), within grid x's 2^31 - 1. */
    k_clahe_cells<<<dim3(o.npy * o.npx, (bins + kThreads - 1) / kThreads), kThreads, 0, st>>>(
        lut, ty0, tx0, ntx, g->tiles_y, g->tiles_x, o.py0, o.px0, o.npx, bins, cells);
    for (uint32_t k0 = 0; k0 < ngroups; k0 += 65535) {
        const uint32_t ng = ngroups - k0 < 65535 ? ngroups - k0 : 65535;
        k_clahe_remap16<<<dim3(o.strips, ng), block, 0, st>>>(static_cast<uint16_t *>(d), cols, r0, c0, inv_h, inv_w,
                                                               g->tiles_y, g->tiles_x, cells, o.py0, o.px0, o.npx,
                                                               bins, groups + k0);
    }
}

/* Row groups of rows piece rows: at most per rows each, one tile-row pair. */
inline void make_groups(uint64_t r0, uint64_t rows, uint64_t per, float inv_h, uint64_t tiles_y,
                        std::vector<RowGroup> &groups)
{
    uint32_t t1 = UINT32_MAX, t2 = UINT32_MAX;
    for (uint64_t i = 0; i < rows; i++) {
        const hq_clahe_w w = hq_clahe_weight(r0 + i, inv_h, tiles_y);
        if (w.t1 != t1 || w.t2 != t2 || groups.back().hi - groups.back().lo == per) {
            groups.push_back({i, i + 1});
            t1 = w.t1;
            t2 = w.t2;
        } else {
            groups.back().hi = i + 1;
        }
    }
}

} /* namespace */

#endif
