/* remap.h — the CPU engine's remap pass over integer samples (engine.h's remap contract), in place
 * or into b->out: OpenMP over `threads` threads, per-pixel results from core/pixel.h, 8-bit
 * layouts through byte tables filled from the LUT by the same functions. A remap that would change
 * nothing in place is skipped. */
#ifndef HQ_CPU_REMAP_H
#define HQ_CPU_REMAP_H

#include "../engine.h"

int hq_cpu_remap(int threads, hq_block_data *b, const hq_mode *m, const uint16_t *const *lut, hq_err *err);

#endif
