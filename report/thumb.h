/* thumb.h — small before/after pictures of an image, built from its blocks while their pixels are in
 * memory, so the report never reads an image twice.
 *
 * A thumbnail is a box filter: every pixel of the image falls in exactly one thumbnail pixel, whose
 * value is the mean of the samples that fell in it. The accumulator holds only sums (uint64 per
 * thumbnail pixel and channel), so partial accumulators of the same image made on different ranks
 * or from different blocks (row bands) add up: sum them (MPI_SUM) and encode once. The counts are a
 * function of the geometry alone and are recomputed when encoding. Gray images (1 or 2 channels)
 * give a gray thumbnail of channel 0; RGB(A) gives RGB; alpha is left out. Samples are clamped to
 * the significant range (maxv), as the histogram sees them, and scaled to 8 bits for display. */
#ifndef HQ_THUMB_H
#define HQ_THUMB_H

#include <stddef.h>
#include <stdint.h>

#include "../core/error.h"

typedef struct hq_thumb_geom {
    uint64_t img_w, img_h;    /* the image */
    uint32_t channels;        /* of the image: 1..4 */
    uint32_t w, h, tch;       /* the thumbnail: w x h pixels of tch (1 or 3) channels */
} hq_thumb_geom;

/* The geometry of the thumbnail of an img_w x img_h image: the long side max_side pixels (never
 * more than the image's own), the aspect ratio kept, at least one pixel each way. */
hq_thumb_geom hq_thumb_geometry(uint64_t img_w, uint64_t img_h, uint32_t channels, uint32_t max_side);

/* Counters in an accumulator: w * h * tch. */
static inline size_t hq_thumb_len(const hq_thumb_geom *g)
{
    return (size_t)g->w * g->h * g->tch;
}

/* Which thumbnail column each image column falls in: img_w entries (malloc'd; NULL when out of
 * memory). Passed to hq_thumb_add, so that the per-pixel loop has no division. */
uint32_t *hq_thumb_xmap(const hq_thumb_geom *g);

/* Adds rows [r0, r1) x columns [c0, c1) of the image (a tile), laid out [row][col][channel] with
 * sample_bytes (1 or 2) per native-endian sample, to acc. */
void hq_thumb_add(uint64_t *acc, const hq_thumb_geom *g, const uint32_t *xmap, const void *rows, uint64_t r0,
                  uint64_t r1, uint64_t c0, uint64_t c1, uint32_t sample_bytes, uint32_t maxv);

/* The thumbnail as an 8-bit PNG in a malloc'd buffer (*png, *len; the caller frees *png).
 * name is for messages. */
int hq_thumb_png(const uint64_t *acc, const hq_thumb_geom *g, uint32_t maxv, const char *name, unsigned char **png,
                 size_t *len, hq_err *err);

#endif
