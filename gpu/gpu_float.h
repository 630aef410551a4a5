/* gpu_float.h — the GPU engine's float path (float32/float64, core/fbin.h), called by gpu_passes.cu
 * when the mode has fbins. Same contracts as engine/engine.h's minmax, histogram and remap, and the
 * same results as engine/cpu/float_path.c bit for bit: bins from core/fbin.h compiled for the device
 * (__dsub_rn/__dmul_rn/__ddiv_rn, no contraction), extremes and counts exact.
 *
 * The block goes through in chunks (at most kFloatChunk bytes and kFloatSegs segments each, so the
 * device histograms stay small for stacks of many slices), copied synchronously on one stream:
 * float data is rare next to the integer path, and simple beats fast here. Buffers are grown on
 * demand and kept between calls; float_release frees them. Errors are HQ_EDEVICE naming the CUDA
 * call, or HQ_EINPUT for infinite samples (the caller names the file). A mask plane travels with
 * each chunk: pixels whose byte is 0 are neither counted nor (in a remap) changed. */
#ifndef HQ_GPU_FLOAT_H
#define HQ_GPU_FLOAT_H

#include <cuda_runtime.h>

extern "C" {
#include "../engine/engine.h"
}

namespace hqg {

struct FloatBufs {
    void *d_data = nullptr;
    size_t data_cap = 0;
    unsigned long long *d_hist = nullptr, *h_hist = nullptr; /* kFloatSegs * bins */
    size_t hist_cap = 0, hhist_cap = 0;
    uint16_t *d_lut = nullptr;
    size_t lut_cap = 0;
    hq_fbin *d_fbin = nullptr;
    size_t fbin_cap = 0;
    uint8_t *d_mask = nullptr; /* the chunk's mask plane (hq_block_data.mask), when there is one */
    size_t mask_cap = 0;
    unsigned long long *d_stat = nullptr, *h_stat = nullptr; /* 4 per segment: minmax's lo key, hi key,
                                              finite and inf counts; the histogram's inf count */
    size_t stat_cap = 0, hstat_cap = 0;
    uint64_t dev_bytes = 0;               /* device bytes held now */
};

int float_minmax(FloatBufs *f, cudaStream_t st, const hq_block_data *b, const hq_mode *m, hq_frange *mm, hq_err *err);
int float_histogram(FloatBufs *f, cudaStream_t st, const hq_block_data *b, const hq_mode *m, uint64_t *const *hist,
                    hq_err *err);
int float_remap(FloatBufs *f, cudaStream_t st, hq_block_data *b, const hq_mode *m, const uint16_t *const *lut,
                hq_err *err);
void float_release(FloatBufs *f);

} /* namespace hqg */

#endif
