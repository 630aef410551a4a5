/* clahe/common.cuh — what every part of CLAHE's GPU code agrees on: the tunables (each sized for
 * the kernel it names: shared memory a block, pixels a block's fold amortizes), the work-list
 * records that the host builds (work_lists.cuh) and the kernels read by value, and load_px. One
 * table of constants, because host planning and the kernels' launch bounds must use the same
 * numbers. Internal linkage, as everything under gpu/clahe/ (gpu_clahe_kernels.cuh). */
#ifndef HQ_GPU_CLAHE_COMMON_CUH
#define HQ_GPU_CLAHE_COMMON_CUH

#include <cuda_runtime.h>
#include <stdint.h>

extern "C" {
#include "../../core/clahe.h"
#include "../../engine/engine.h"
}

namespace {

/* Pixels per histogram work item: enough to amortize a shared-memory histogram's fold. */
constexpr uint64_t kItemPixels = (uint64_t)1 << 16;
/* Windowed items hold more: each block zeroes and folds a whole window. */
constexpr uint64_t kItemPixelsWin = (uint64_t)1 << 18;
/* Tiles whose histograms fit this many u32 counters (48 KiB) count in shared memory. */
constexpr uint32_t kSharedCounters = 12288;
/* Larger ones: windows of this many counters (128 KiB of shared memory a block). */
constexpr uint32_t kWindow = 32768;
constexpr int kThreads = 256;
/* Windowed histograms: one block a multiprocessor (128 KiB each), so a wide one. */
constexpr int kWinThreads = 1024;
/* Gray remap: pixels per group of rows (one CUDA block). */
constexpr uint64_t kGroupPixels = (uint64_t)1 << 16;
/* 8-bit gray remap stages two tile rows of LUTs as bytes when they fit this many. */
constexpr uint32_t kLut8Bytes = 48 * 1024;
/* Gray histograms of the own rectangles: per-lane counters up to this many bins (k_clahe_hist_lane),
 * one packed histogram a block above (k_clahe_hist_packed). */
constexpr uint32_t kLaneBins = 256;
constexpr int kLaneThreads = 256;
/* k_clahe_hist_lane: rows a warp loads at once (two 16-byte vectors of each a lane). */
constexpr uint32_t kLaneRows = 2;
constexpr int kPackedThreads = 1024;
/* Pixels a unit: the packed histogram's u16 halves hold any unit (< 65,536) whole. */
constexpr uint64_t kUnitPixels = 16384;
/* Device LUT build: threads a histogram, bins a thread per round. */
constexpr int kLutThreads = 1024;
constexpr uint32_t kLutPer = 4;
/* ... for bins <= 256: warps a block, bins a lane. */
constexpr uint32_t kLutWarps = 4, kLutWarpPer = 8;
/* Gray remap of aligned rows (k_clahe_remap8 / k_clahe_remap16): a block is kRemapBX vectors of a
 * row by kRemapBY rows; 16-bit over at most kRemapRows rows of one tile-row pair (8-bit: slabs). */
constexpr int kRemapBX = 32, kRemapBY = 8;
constexpr uint64_t kRemapRows = 64;
/* 8-bit: the cells of a strip's column pairs (2 KiB each) in shared memory up to this many pairs;
 * replicated (Remap8Rep, 32 KiB each) up to kRepPairs8, which keeps 2 blocks an SM. */
constexpr uint32_t kCellPairs8 = 24;
constexpr uint32_t kRepPairs8 = 3;
/* 16-bit: device cells ({l11, l12, l21, l22}, 8 bytes a level and pair of pairs) up to this size. */
constexpr uint64_t kCellBytes = (uint64_t)256 << 20;

struct Item {
    uint64_t tile;        /* local tile index among the tiles the piece touches */
    uint64_t i_lo, i_hi;  /* entries [i_lo, i_hi) of rsrc */
    uint64_t j_lo, j_hi;  /* by entries [j_lo, j_hi) of csrc */
};

/* Gray histograms: piece rows [r_lo, r_hi) x columns [c_lo, c_hi), inside one tile's own rectangle. */
struct Unit {
    uint64_t tile; /* local tile index, as Item's */
    uint64_t r_lo, r_hi, c_lo, c_hi;
};

/* Piece rows [lo, hi), all blending the same two tile rows. */
struct RowGroup {
    uint64_t lo, hi;
};

template <typename T>
__device__ __forceinline__ void load_px(const T *px, uint32_t ch, uint32_t *c)
{
    c[0] = px[0];
    c[1] = ch >= 3 ? px[1] : 0;
    c[2] = ch >= 3 ? px[2] : 0;
}

} /* namespace */

#endif
