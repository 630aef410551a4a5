/* tile_view.h — what the report shows of a CLAHE image's tiles: which tiles' LUTs it plots, and
 * where the tile grid falls on a thumbnail.
 *
 * The geometry is always core/clahe.h's (hq_clahe_geom_make: OpenCV's padding rule), never worked
 * out again here, so the grid drawn is the grid the run used.
 *
 * Picked tiles: the four corners and the centre tile (tiles_y / 2, tiles_x / 2), each once (a grid
 * of one row or column has fewer corners), in row-major order. Every rank picks the same tiles from
 * the same geometry, so only these tiles' LUTs ever travel to rank 0.
 *
 * Grid lines: the tile boundaries k * tile (k = 1 .. tiles - 1) of each side that fall inside the
 * image (k * tile < n): under OpenCV's padding the last tiles may lie partly, or even wholly, in the
 * padding, whose boundaries have no pixels to be drawn over. A grid is drawn only when each tile
 * spans at least HQ_TILE_VIEW_MIN_PX thumbnail pixels both ways; finer grids would cover the
 * picture (and bloat the page) without showing anything. */
#ifndef HQ_TILE_VIEW_H
#define HQ_TILE_VIEW_H

#include <stddef.h>
#include <stdint.h>

#include "../core/clahe.h"

#define HQ_TILE_VIEW_MAX 5    /* picked tiles at most: four corners and the centre */
#define HQ_TILE_VIEW_MIN_PX 3 /* thumbnail pixels a tile must span for the grid to be drawn */

typedef struct hq_tile_pos {
    uint64_t row, col;
} hq_tile_pos;

/* The picked tiles of g into out; returns how many (1 .. HQ_TILE_VIEW_MAX). */
size_t hq_tile_view_pick(const hq_clahe_geom *g, hq_tile_pos out[HQ_TILE_VIEW_MAX]);

/* Tile boundaries inside a side of n samples cut into tiles of `tile`: min(tiles - 1, (n - 1) / tile). */
static inline uint64_t hq_tile_view_edges(uint64_t n, uint64_t tiles, uint64_t tile)
{
    const uint64_t inside = tile ? (n - 1) / tile : 0;
    return tiles - 1 < inside ? tiles - 1 : inside;
}

/* Whether the grid of g is drawn on a thumb_w x thumb_h thumbnail of the image. */
int hq_tile_view_drawable(const hq_clahe_geom *g, uint32_t thumb_w, uint32_t thumb_h);

#endif
