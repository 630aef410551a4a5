/* gpu_kernels.cuh — the device code of the GPU engine, shared by the engine's kernels and the
 * resident whole-equalization kernel (gpu_launch.cu and gpu_fused.cu instantiate them).
 *
 * Contract: every per-pixel result comes from core/pixel.h and every LUT entry from core/lut_rule.h,
 * so results are bit-identical to the CPU engine (engine/cpu/) and core/lut.c. A launch covers a pixel range
 * [p0, p1) of a block of equal segments, so many small images share one launch. Pixels travel as
 * 16-byte vectors (16 / sizeof(sample) pixels per vector and channel), with scalar heads and tails
 * where a segment does not start or end on a vector.
 *
 * Histograms (read-only pass): each CUDA block takes one contiguous part of the range and walks it
 * segment piece by segment piece. u32 counters privatized in shared memory (exact: a piece never
 * exceeds 2^30 pixels), merged once per piece into the segment's u64 histogram with atomics.
 *  - few bins (nhist*bins*4 <= 48 KiB): every bin replicated per lane (layout [bin][lane]), so a
 *    warp's 32 atomics hit 32 different banks whatever the values: a constant image costs the same
 *    as a natural one. 8-bit gray computes the counter's offset from the packed word directly;
 *  - many bins (16-bit): one window of up to 32768 bins (128 KiB) per CUDA block, blocks of a pair
 *    count the two halves of the same range at the same time (the second read hits L2); equal values
 *    are aggregated per thread, and per warp with __match_any_sync when the whole warp is uniform.
 * Remap (read-write pass, in place): tiles dealt round-robin to the CUDA blocks (one moving window
 * of memory: ~30% faster than contiguous ranges for an in-place pass on an H200), the LUT in shared
 * memory (one u32 slot per entry and lane for <= 256 bins, so lookups never conflict), results
 * packed back into words with byte permutes; luma and value remaps fused with their pixel math.
 *
 * One file a job under gpu/kernels/, included here in dependency order:
 *   common.cuh     launch geometry, bin arithmetic, histogram layout, Group (16-byte vectors)
 *   luma8.cuh      8-bit RGB luma in fewer instructions, same integers as core/pixel.h
 *   histogram.cuh  counting into shared memory, hist_range over a launch's part
 *   remap.cuh      LUT staging, per-pixel remap, remap_tiles over a launch's tiles
 *   lut.cuh        block reductions and the device LUT build of the resident pipeline */
#ifndef HQ_GPU_KERNELS_CUH
#define HQ_GPU_KERNELS_CUH

#include "kernels/common.cuh"
#include "kernels/luma8.cuh"
#include "kernels/histogram.cuh"
#include "kernels/remap.cuh"
#include "kernels/lut.cuh"

#endif
