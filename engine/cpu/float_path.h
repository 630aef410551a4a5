/* float_path.h — the CPU engine's float path (float32/float64, core/fbin.h), called by engine.c
 * when the mode has fbins. Same contracts as the engine interface (engine/engine.h); OpenMP over
 * static pieces, per-thread private histograms merged once, so the thread count changes nothing. */
#ifndef HQ_CPU_FLOAT_H
#define HQ_CPU_FLOAT_H

#include "../engine.h"

int hq_cpu_float_minmax(int threads, const hq_block_data *b, const hq_mode *m, hq_frange *mm, hq_err *err);
int hq_cpu_float_histogram(int threads, const hq_block_data *b, const hq_mode *m, uint64_t *const *hist, hq_err *err);
int hq_cpu_float_remap(int threads, hq_block_data *b, const hq_mode *m, const uint16_t *const *lut, hq_err *err);

#endif
