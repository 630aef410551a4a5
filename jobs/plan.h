/* plan.h — who does what: the work split, a pure function of (input shapes, rank count, block size).
 *
 * Every rank computes the same plan from the same inventory, so no plan is ever sent. The images
 * of all items, in order, form one sequence of pixels; rank r gets one contiguous share of it,
 * balanced by pixel count. When there are at least as many images as ranks (or nothing can be
 * split), shares end on image boundaries; otherwise they end on row boundaries (row bands of a
 * single image). Each share is then cut into blocks of at most block_bytes (never less than one
 * row) that the driver reads, processes and writes one at a time. */
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
} hq_plan_item;

/* Slices [s0, s1) of an item; when s1 == s0 + 1, only rows [r0, r1) of that slice. Blocks of
 * several slices always hold whole slices (r0 == 0, r1 == height). */
typedef struct hq_block {
    uint64_t item, s0, s1, r0, r1;
} hq_block;

typedef struct hq_plan {
    int nranks;
    int whole_images;     /* 1 when shares end on image boundaries */
    uint64_t nblocks;
    hq_block *blocks;     /* every rank's blocks, in global order */
    uint64_t *first;      /* rank r owns blocks[first[r] .. first[r+1]) */
    uint64_t *rank_pixels;
    uint64_t total_pixels;
    uint64_t nimages;
    uint64_t *item_image0; /* global index of each item's first image; [n] = nimages */
    size_t nitems;
} hq_plan;

int hq_plan_make(const hq_plan_item *items, size_t n, int nranks, uint64_t block_bytes, hq_plan *out, hq_err *err);
void hq_plan_free(hq_plan *p);

static inline uint64_t hq_block_pixels(const hq_block *b, uint64_t width)
{
    return (b->s1 - b->s0) * (b->r1 - b->r0) * width;
}

/* The rank that owns block index k. */
int hq_plan_owner(const hq_plan *p, uint64_t k);

#endif
