/* box.h — copy an n-dimensional box of fixed-size elements between two row-major arrays.
 *
 * Each side is an array of extent ext[0..k-1] (elements, slowest dimension first); the box of size
 * n[] sits at off[] in it. io/hdf5/blocks.c packs a block's part of each chunk into a dense buffer with it
 * (by_chunk, for writes in row order). Trailing dimensions the box spans whole on both sides are
 * merged into one memcpy run. No allocation, no failure: the caller keeps the box inside both
 * arrays. */
#ifndef HQ_BOX_H
#define HQ_BOX_H

#include <stddef.h>
#include <stdint.h>

#define HQ_BOX_MAX_RANK 8

typedef struct hq_box_side {
    unsigned char *base;
    const uint64_t *ext; /* the array's extent */
    const uint64_t *off; /* where the box sits in it */
} hq_box_side;

void hq_box_copy(hq_box_side dst, hq_box_side src, const uint64_t *n, int k, size_t elem);

#endif
