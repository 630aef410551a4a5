/* clahe.h — the CPU engine's CLAHE (core/clahe.h's rule), OpenMP over `threads` threads.
 *
 * Histogram: work items are (tile, run of rows) pairs, each counted into narrow per-thread counters
 * and added to the tile's 64-bit histogram atomically, so no thread holds a private copy of every
 * tile (64 tiles of 65,536 bins would be 32 MiB a thread). Remap: rows in parallel, the column
 * weights computed once per piece. Results do not depend on the thread count. */
#ifndef HQ_CPU_CLAHE_H
#define HQ_CPU_CLAHE_H

#include "../engine.h"

int hq_cpu_clahe_histogram(int threads, const hq_clahe_piece *p, const hq_mode *m, const hq_clahe_geom *g,
                           uint64_t *hist, hq_err *err);
int hq_cpu_clahe_remap(int threads, hq_clahe_piece *p, const hq_mode *m, const hq_clahe_geom *g, const uint16_t *lut,
                       hq_err *err);

#endif
