/* gpu_clahe.h — the GPU engine's CLAHE (core/clahe.h's rule on the device), C++ only.
 *
 * A piece is uploaded whole (it must fit in device memory beside its tile histograms: --block
 * bounds it), counted per tile into device histograms of the tiles it touches (shared-memory
 * counters folded once into u64 counters; gpu/clahe/hist_*.cuh), and remapped by the
 * blend of core/clahe.h with every float operation __fmul_rn/__fadd_rn, so the bytes equal the CPU
 * engine's. Synchronous; the caller has selected the device. A whole image may keep its counts,
 * LUTs and pixels on the device from its histogram to its remap (engine.h: clahe_luts,
 * hq_clahe_piece.same_as_histogram). */
#ifndef HQ_GPU_CLAHE_H
#define HQ_GPU_CLAHE_H

extern "C" {
#include "../engine/engine.h"
}

struct hq_gpu_clahe; /* device buffers kept between calls */

int hq_gpu_clahe_histogram(hq_gpu_clahe **st, const hq_clahe_piece *p, const hq_mode *m, const hq_clahe_geom *g,
                           uint64_t *hist, hq_err *err);
/* After hq_gpu_clahe_histogram of a whole image with hist NULL: its tile LUTs on the device
 * (clahe/luts.cuh, core/clahe.h's rule), copied into lut unless NULL (engine.h, clahe_luts). */
int hq_gpu_clahe_luts(hq_gpu_clahe **st, const hq_mode *m, const hq_clahe_geom *g, int64_t limit, uint16_t *lut,
                      hq_err *err);
int hq_gpu_clahe_remap(hq_gpu_clahe **st, hq_clahe_piece *p, const hq_mode *m, const hq_clahe_geom *g,
                       const uint16_t *lut, hq_err *err);
/* Most device bytes held at once by these buffers. */
uint64_t hq_gpu_clahe_peak(const hq_gpu_clahe *st);
void hq_gpu_clahe_free(hq_gpu_clahe *st);

#endif
