#include "tile_view.h"

size_t hq_tile_view_pick(const hq_clahe_geom *g, hq_tile_pos out[HQ_TILE_VIEW_MAX])
{
    const uint64_t ly = g->tiles_y - 1, lx = g->tiles_x - 1;
    const hq_tile_pos want[HQ_TILE_VIEW_MAX] = {{0, 0}, {0, lx}, {g->tiles_y / 2, g->tiles_x / 2}, {ly, 0}, {ly, lx}};
    size_t n = 0;
    for (size_t k = 0; k < HQ_TILE_VIEW_MAX; k++) {
        int seen = 0;
        for (size_t j = 0; j < n && !seen; j++)
            seen = out[j].row == want[k].row && out[j].col == want[k].col;
        if (seen)
            continue;
        /* Inserted in row-major order: with one or two tile rows the centre shares a corner's row. */
        size_t at = n++;
        for (; at > 0 && (out[at - 1].row > want[k].row ||
                          (out[at - 1].row == want[k].row && out[at - 1].col > want[k].col)); at--)
            out[at] = out[at - 1];
        out[at] = want[k];
    }
    return n;
}

int hq_tile_view_drawable(const hq_clahe_geom *g, uint32_t thumb_w, uint32_t thumb_h)
{
    /* In doubles: tile * thumbnail side can pass 2^64 for sides past 2^56, where exactness does
     * not matter. */
    return (double)g->tile_w * thumb_w >= (double)HQ_TILE_VIEW_MIN_PX * (double)g->width &&
           (double)g->tile_h * thumb_h >= (double)HQ_TILE_VIEW_MIN_PX * (double)g->height;
}
