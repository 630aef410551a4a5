/* work.h — how the CPU engine deals a block to its OpenMP threads, shared by its histogram and remap
 * passes (histogram.c, remap.c) so that both split a block the same way.
 *
 * A segment (one image of the block) of at least SMALL_SEGMENT pixels is cut into pieces
 * (piece_pixels) handed out dynamically; smaller segments go to the threads whole. The split never
 * changes a result: histograms are integer sums and remaps are per pixel. */
#ifndef HQ_CPU_WORK_H
#define HQ_CPU_WORK_H

#include <stdint.h>

#include "../../core/mode.h"

/* Below this many pixels a segment is not worth splitting across threads; segments are then
 * spread over threads instead (collections of small slices). */
#define SMALL_SEGMENT (1u << 18)

/* A block (or CLAHE piece) of fewer samples than this runs on the calling thread alone: waking
 * the team (its threads sleep between blocks under OMP_WAIT_POLICY=passive) costs more than such
 * a block's work, and a file of thousands of small datasets, one block each, paid it at every
 * block (20,000 images of 64 x 64: 0.5 s of work took 5 s on 2 threads). */
#define PARALLEL_MIN_SAMPLES ((uint64_t)1 << 18)

static inline int block_threads(uint64_t samples, int threads)
{
    return samples < PARALLEL_MIN_SAMPLES ? 1 : threads;
}

/* A big segment is handed to the threads in pieces of about 1/16 of a thread's share, at least
 * MIN_PIECE pixels: a thread slowed down by another process on its core then holds the others
 * back by one piece at most, not by its whole static share. */
#define MIN_PIECE ((uint64_t)1 << 16)
#define PIECES_PER_THREAD 16

/* Pieces of a big segment: see MIN_PIECE. */
static inline uint64_t piece_pixels(uint64_t n, int threads)
{
    const uint64_t piece = n / ((uint64_t)threads * PIECES_PER_THREAD);
    return piece < MIN_PIECE ? MIN_PIECE : piece;
}

/* 8-bit samples with at most 8 significant bits: the layouts with loops and byte tables of their own. */
static inline int fast8(const hq_mode *m)
{
    return m->sample_bytes == 1 && m->bits <= 8;
}

#define ALWAYS_INLINE static inline __attribute__((always_inline))

#endif
