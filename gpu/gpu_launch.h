/* gpu_launch.h — host entry points to the GPU kernels on device-resident data (C++ only; used by
 * the engine, gpu_passes.cu and gpu_engine.cu, and by bench/gpu_bench.cu).
 *
 * Contract: every function enqueues on `stream` and returns the launch's cudaError_t; none
 * synchronizes. Data pointers are cudaMalloc'd (16-byte aligned) and hold the whole block, pixel 0
 * at the pointer. Histograms are u64 counters, segment-major then flat bin (h*bins + bin), exactly
 * the layout the engine interface hands the host; LUTs are u16 with the same indexing. */
#ifndef HQ_GPU_LAUNCH_H
#define HQ_GPU_LAUNCH_H

#include <cuda_runtime.h>
#include <stdint.h>

extern "C" {
#include "../core/mode.h"
}

namespace hqg {

/* Flat histogram entries per segment: nhist * bins. */
static inline uint32_t mode_nf(const hq_mode *m)
{
    return hq_mode_nhist(m) * hq_mode_bins(m);
}

/* Adds the histograms of pixels [p0, p1) of a block (segments of seg_pixels) into d_hist. */
cudaError_t hist_launch(const hq_mode *m, const void *d_data, uint64_t p0, uint64_t p1, uint64_t seg_pixels,
                        unsigned long long *d_hist, cudaStream_t stream);

/* Remaps pixels [p0, p1) in place with d_lut (mode_nf entries per segment). */
cudaError_t remap_launch(const hq_mode *m, void *d_data, uint64_t p0, uint64_t p1, uint64_t seg_pixels,
                         const uint16_t *d_lut, cudaStream_t stream);

/* The same two with a mask plane (engine/engine.h, hq_block_data.mask): d_mask[p] is pixel p's byte,
 * indexed like the pixels (the same shift). Histogram: only pixels with a non-zero byte count;
 * remap: pixels with a zero byte are left as they are (gpu_masked.cu). */
cudaError_t hist_masked_launch(const hq_mode *m, const void *d_data, const uint8_t *d_mask, uint64_t p0, uint64_t p1,
                               uint64_t seg_pixels, unsigned long long *d_hist, cudaStream_t stream);
cudaError_t remap_masked_launch(const hq_mode *m, void *d_data, const uint8_t *d_mask, uint64_t p0, uint64_t p1,
                                uint64_t seg_pixels, const uint16_t *d_lut, cudaStream_t stream);

/* LUTs of nseg segments from their histograms by method (hq_method: core/lut.c's rules, built on
 * the device); lut_equalize_launch is method HQ_METHOD_EQUALIZE. */
cudaError_t lut_build_launch(const hq_mode *m, int method, const unsigned long long *d_hist, uint64_t nseg,
                             uint16_t *d_lut, cudaStream_t stream);
cudaError_t lut_equalize_launch(const hq_mode *m, const unsigned long long *d_hist, uint64_t nseg, uint16_t *d_lut,
                                cudaStream_t stream);

/* The whole equalization of a resident block in one cooperative launch: histogram, grid barrier,
 * LUT (method: hq_method), remap in place. d_hist (nseg * mode_nf u64) must be zero on entry and
 * holds the histograms on return; d_hist_next (same size, may be NULL) is zeroed on the way, so
 * that callers alternating two buffers need no memset between runs. d_lut (nseg * mode_nf u16)
 * receives the LUTs when the mode has more than 1024 bins or nseg > 1 (and is untouched otherwise;
 * may then be NULL). One 8-bit gray image that fits in the multiprocessors' shared memory and
 * registers (about 33 MB on an H200: 7680x4320) is read from memory once: it stays on chip across
 * the grid barrier. */
cudaError_t equalize_fused(const hq_mode *m, int method, void *d_data, uint64_t nseg, uint64_t seg_pixels,
                           unsigned long long *d_hist, unsigned long long *d_hist_next, uint16_t *d_lut,
                           cudaStream_t stream);

/* Bench hooks: allow 0 keeps equalize_fused off the on-chip path (to time the tiled one beside
 * it); grid_cap > 0 runs the on-chip kernel on at most that many blocks (so that small images reach
 * all of its parts); stamps (not NULL) selects the variant that records its phase ends
 * (%globaltimer ns) into stamps[block * 8 + 0..4]: start, counted, grid barrier, LUT, remapped. */
void fused_set_onchip(int allow, int grid_cap, unsigned long long *stamps);

/* The 8-bit RGB luma fast formulation (gpu_kernels.cuh, remap_luma4) against core/pixel.h on every
 * (r, g, b) and LUT value 0..511 (and the luma bin on every colour). Synchronous; returns the
 * number of differing cases in *bad (0 expected). */
cudaError_t luma8_selftest(unsigned long long *bad);

/* 0 when this build has kernels for the current device, else the CUDA error (e.g. no sm_90). */
cudaError_t kernels_usable(void);

} /* namespace hqg */

#endif
