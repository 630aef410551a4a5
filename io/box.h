/* box.h — copy an n-dimensional box of fixed-size elements between two row-major arrays.
 *
 * Each side is an array of extent ext[0..k-1] (elements, slowest dimension first); the box of size
 * n[] sits at off[] in it. HDF5 blocks, chunks and dense staging buffers are all such arrays, so one
 * copy serves the staged chunk writes and the mapped writes of hdf5_io.c. A side may hold only
 * part of its array (a mapped window): origin says which byte of the array base points at. Trailing dimensions the
 * box spans whole on both sides are merged into one memcpy run. No allocation, no failure: the
 * caller keeps the box inside both arrays. */
#ifndef HQ_BOX_H
#define HQ_BOX_H

#include <stddef.h>
#include <stdint.h>

#define HQ_BOX_MAX_RANK 8

typedef struct hq_box_side {
    unsigned char *base;
    const uint64_t *ext; /* the array's extent */
    const uint64_t *off; /* where the box sits in it */
    uint64_t origin;     /* the byte of the array that base points at (0: its first) */
} hq_box_side;

void hq_box_copy(hq_box_side dst, hq_box_side src, const uint64_t *n, int k, size_t elem);

/* The same on up to `threads` OpenMP threads, the box cut along its first dimension longer than 1.
 * For stores into fresh file mappings, whose page faults are the cost and run in parallel. */
void hq_box_copy_par(hq_box_side dst, hq_box_side src, const uint64_t *n, int k, size_t elem, int threads);

#endif
