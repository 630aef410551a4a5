/* gpu_clahe_kernels.cuh — CLAHE's device code and the host-side work lists that drive it, shared by
 * gpu/gpu_clahe.cu (the engine) and bench/clahe_gpu_bench.cu (device-resident timing), so that the
 * bench times exactly what the engine launches. Internal linkage: each includer gets its own copy.
 * One file a job under gpu/clahe/, each stating its contract, included here in dependency order:
 *   common.cuh        the tunables (k*), the work-list records (Item, Unit, RowGroup), load_px
 *   hist_generic.cuh  histograms by work items: gray images' reflected entries, every other mode
 *   hist_own.cuh      gray histograms of each tile's own rectangle, per-lane or packed counters
 *   luts.cuh          every tile's LUT built on the device from its histogram
 *   remap.cuh         the remap: aligned gray rows by cells, other gray pieces by row groups,
 *                     other modes a pixel a thread
 *   work_lists.cuh    host side: flattened sides, items, units, row groups, launch plans
 * Every per-pixel result, and every device-built LUT, is core/clahe.h's. */
#ifndef HQ_GPU_CLAHE_KERNELS_CUH
#define HQ_GPU_CLAHE_KERNELS_CUH

#include "clahe/common.cuh"
#include "clahe/hist_generic.cuh"
#include "clahe/hist_own.cuh"
#include "clahe/luts.cuh"
#include "clahe/remap.cuh"
#include "clahe/work_lists.cuh"

#endif
