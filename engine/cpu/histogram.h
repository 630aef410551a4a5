/* histogram.h — the CPU engine's histogram pass over integer samples (engine.h's histogram
 * contract): OpenMP over `threads` threads, private histograms merged once, so the thread count
 * changes nothing. Gray data counts into narrow sub-histograms folded into the 64-bit result. */
#ifndef HQ_CPU_HISTOGRAM_H
#define HQ_CPU_HISTOGRAM_H

#include "../engine.h"

int hq_cpu_histogram(int threads, const hq_block_data *b, const hq_mode *m, uint64_t *const *hist, hq_err *err);

#endif
