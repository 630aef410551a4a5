/* facts.c — small facts derived from the inventory, the plan and the options: an item's mode and
 * CLAHE tiles, a block's bytes, images and group, whether it is fused, whether a group is summed
 * over ranks. Nothing here reads, writes or talks to another rank. */
#include "run_internal.h"

hq_mode run_mode_of(const run *r, uint64_t item)
{
    return hq_item_mode(&r->inv.items[item], r->o->bits, r->o->color, r->o->fbins);
}

size_t run_hist_len(const hq_mode *m)
{
    return (size_t)hq_mode_nhist(m) * hq_mode_bins(m);
}

int run_is_clahe(const run *r)
{
    return r->o->method == HQ_METHOD_CLAHE;
}

/* The item's CLAHE tiles (run_check_modes has refused the items where the grid does not fit). */
hq_clahe_geom run_geom_of(const run *r, uint64_t item)
{
    hq_clahe_geom g = {0};
    hq_clahe_geom_make(&r->o->clahe, r->inv.items[item].height, r->inv.items[item].width, &g);
    return g;
}

/* Counters of one image's histogram group: one histogram per tile under CLAHE. */
size_t run_group_len(const run *r, uint64_t item)
{
    const hq_mode m = run_mode_of(r, item);
    if (!run_is_clahe(r))
        return run_hist_len(&m);
    const hq_clahe_geom g = run_geom_of(r, item);
    return (size_t)hq_clahe_ntiles(&g) * run_hist_len(&m);
}

uint64_t run_total_bytes(const run *r)
{
    uint64_t total = 0;
    for (size_t i = 0; i < r->inv.n; i++)
        total += r->inv.items[i].bad ? 0 : r->inv.items[i].slices * hq_item_image_bytes(&r->inv.items[i]);
    return total;
}

uint64_t run_block_bytes(const run *r, const hq_block *b)
{
    const hq_item *it = &r->inv.items[b->item];
    return hq_block_pixels(b) * it->channels * it->sample_bytes;
}

/* A block's buffer: its pixels, then its mask plane when it has one (app/mask.h), so that the plane
 * travels with the pixels through the pipeline and between the passes. */
uint64_t run_buf_bytes(const run *r, const hq_block *b)
{
    return run_block_bytes(r, b) + hq_mask_plane_bytes(r->mask, b);
}

uint64_t run_image_of(const run *r, const hq_block *b, uint64_t s)
{
    return r->plan.item_image0[b->item] + s;
}

/* The histogram group of a pending block (one that holds part of one group): 0 under scope
 * global; the dataset's first image under scope dataset, so that group numbers stay image numbers
 * (the journal keeps both under one key); the block's image under scope image. */
uint64_t run_group_of(const run *r, const hq_block *b)
{
    if (r->scope == HQ_SCOPE_GLOBAL)
        return 0;
    return run_image_of(r, b, r->scope == HQ_SCOPE_DATASET ? 0 : b->s0);
}

/* The images that share group g's LUT, for the record (provenance, report, journal): the dataset's
 * slices under scope dataset, the image itself under scope image. */
uint64_t run_group_images(const run *r, uint64_t item)
{
    return r->scope == HQ_SCOPE_DATASET ? r->inv.items[item].slices : 1;
}

/* A block is fused when every group in it ends inside it: whole images under scope image, the
 * whole dataset under scope dataset, or never under scope global (every rank reduces the one
 * histogram). */
int run_is_fused(const run *r, const hq_block *b)
{
    const hq_item *it = &r->inv.items[b->item];
    if (r->scope == HQ_SCOPE_GLOBAL)
        return 0;
    if (r->scope == HQ_SCOPE_DATASET && (b->s0 != 0 || b->s1 != it->slices))
        return 0;
    return hq_block_whole(b, it->height, it->width);
}

int run_is_float(const run *r, uint64_t item)
{
    return !r->inv.items[item].bad && r->inv.items[item].sample == HQ_SAMPLE_FLOAT;
}

/* Under scope global every image bins alike (run_check_modes): the mode of the first usable item. */
int run_global_mode(const run *r, hq_mode *m)
{
    for (size_t i = 0; i < r->inv.n; i++)
        if (!r->inv.items[i].bad) {
            *m = run_mode_of(r, i);
            return 1;
        }
    return 0;
}

int run_is_shared_group(const run *r, uint64_t g)
{
    for (uint64_t k = 0; k < r->nshared; k++)
        if (r->shared[k] == g)
            return 1;
    return 0;
}
