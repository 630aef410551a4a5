/* plan.h — who does what: the work split, a pure function of (input shapes, rank count, block size).
 *
 * Every rank computes the same plan from the same inventory, so no plan is ever sent.
 *
 * Cells. Each image is a grid of cells, the smallest pieces it is ever cut into: the HDF5 chunks of
 * a chunked dataset (so that a compressed chunk is always read and written whole, by one block, in
 * one transfer); rows of a contiguous one (or pieces of a row when one row is larger than a
 * block: a piece of a row is one contiguous range of the file); the whole image for an image that
 * must stay whole (PNG). Uncompressed chunks larger than a block are cut into strips of rows (or
 * row pieces); compressed ones never are: such a chunk becomes a block of its own, larger than
 * block_bytes (hq_plan_min_block says how large blocks must be allowed to get).
 *
 * Shares. The images of all items, in order, and their cells in row-major order form one sequence
 * of pixels. Rank r gets one contiguous share of it, balanced by pixel count: each share ends at the
 * cell boundary nearest its ideal end, or at an image boundary where that keeps every share within
 * 5% of the mean (a whole image needs no second pass and no reduction). When no image can be split
 * (PNG collections) and contiguous shares would be unbalanced, images are dealt out largest first
 * to the least loaded rank instead (then a rank's images are not contiguous).
 *
 * Blocks. Each share is cut into blocks of at most block_bytes that the driver reads, processes and
 * writes one at a time: runs of whole images of one item (whole slices); else rectangles of cells of
 * one image — bands of full cell rows when one cell row of the share's part fits, else pieces of one
 * cell row (2-D tiles). A block of one cell is allowed to exceed block_bytes. */
#ifndef HQ_PLAN_H
#define HQ_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "../core/error.h"

typedef struct hq_plan_item {
    uint64_t slices, height, width;
    uint64_t pixel_bytes; /* bytes per pixel, all channels */
    int splittable;       /* 0: an image of this item must stay whole on one rank and in one block (PNG) */
    int skip;             /* 1: contributes no work (a bad input left out with --on-error skip) */
    /* The HDF5 chunk shape over (slices, rows, columns); all 0 for a contiguous dataset. */
    uint64_t chunk_slices, chunk_height, chunk_width;
    int whole_chunks;     /* 1: never cut a chunk (compressed: a chunk is decoded and encoded whole) */
} hq_plan_item;

/* Slices [s0, s1) of an item; when s1 == s0 + 1, only rows [r0, r1) x columns [c0, c1) of that
 * slice. Blocks of several slices always hold whole slices (r0 == 0, r1 == height, c0 == 0,
 * c1 == width). */
typedef struct hq_block {
    uint64_t item, s0, s1, r0, r1, c0, c1;
} hq_block;

typedef struct hq_plan {
    int nranks;
    int whole_images;     /* 1 when no image is split between ranks */
    int dealt;            /* 1: images dealt out by size (shares not contiguous), see above */
    uint64_t nblocks;
    hq_block *blocks;     /* every rank's blocks, rank by rank; a rank's in input order */
    uint64_t *first;      /* rank r owns blocks[first[r] .. first[r+1]) */
    uint64_t *rank_pixels;
    uint64_t total_pixels;
    uint64_t max_block_bytes; /* the largest block of the plan */
    uint64_t nimages;
    uint64_t *item_image0; /* global index of each item's first image; [n] = nimages */
    size_t nitems;
} hq_plan;

int hq_plan_make(const hq_plan_item *items, size_t n, int nranks, uint64_t block_bytes, hq_plan *out, hq_err *err);
void hq_plan_free(hq_plan *p);

/* The size below which no block of these items can go, whatever block_bytes: the largest image
 * that must stay whole, or compressed chunk (one slice of it), or pixel. *which: that item. */
uint64_t hq_plan_min_block(const hq_plan_item *items, size_t n, size_t *which);

static inline uint64_t hq_block_pixels(const hq_block *b)
{
    return (b->s1 - b->s0) * (b->r1 - b->r0) * (b->c1 - b->c0);
}

/* 1 when the block holds whole images (every image it touches, entirely). */
static inline int hq_block_whole(const hq_block *b, uint64_t height, uint64_t width)
{
    return b->r0 == 0 && b->r1 == height && b->c0 == 0 && b->c1 == width;
}

/* The rank that owns block index k. */
int hq_plan_owner(const hq_plan *p, uint64_t k);

/* The rank holding the first of global image g's blocks (the one that speaks for the image when
 * it is split over ranks), dealt plans included; -1 when no block lies at or past g. */
int hq_plan_image_owner(const hq_plan *p, uint64_t g);

#endif
