/* test_tile_view.c — report/tile_view: which tiles a CLAHE section plots (corners and centre, each
 * once, row-major, whatever the grid's shape), which tile boundaries lie inside the image under
 * OpenCV's padding, and when a grid is too fine to draw. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../../report/tile_view.h"

static hq_clahe_geom grid(uint64_t gy, uint64_t gx, uint64_t h, uint64_t w)
{
    hq_clahe_cfg cfg = {gy, gx, 0, 40.0};
    hq_clahe_geom g = {0};
    assert_int_equal(hq_clahe_geom_make(&cfg, h, w, &g), 0);
    return g;
}

/* The picks of a gy x gx grid, as "row,col" pairs flattened into want[0..2n). */
static void check_pick(uint64_t gy, uint64_t gx, const uint64_t *want, size_t n)
{
    const hq_clahe_geom g = grid(gy, gx, 100, 100);
    hq_tile_pos got[HQ_TILE_VIEW_MAX];
    assert_int_equal(hq_tile_view_pick(&g, got), n);
    for (size_t k = 0; k < n; k++) {
        assert_int_equal(got[k].row, want[2 * k]);
        assert_int_equal(got[k].col, want[2 * k + 1]);
    }
}

static void test_pick(void **state)
{
    (void)state;
    check_pick(8, 8, (const uint64_t[]){0, 0, 0, 7, 4, 4, 7, 0, 7, 7}, 5);
    check_pick(5, 7, (const uint64_t[]){0, 0, 0, 6, 2, 3, 4, 0, 4, 6}, 5);
    check_pick(1, 1, (const uint64_t[]){0, 0}, 1);
    check_pick(1, 5, (const uint64_t[]){0, 0, 0, 2, 0, 4}, 3); /* one row: the centre between the ends */
    check_pick(2, 2, (const uint64_t[]){0, 0, 0, 1, 1, 0, 1, 1}, 4); /* the centre (1, 1) is a corner */
    check_pick(2, 3, (const uint64_t[]){0, 0, 0, 2, 1, 0, 1, 1, 1, 2}, 5); /* the centre in the last row */
    check_pick(3, 1, (const uint64_t[]){0, 0, 1, 0, 2, 0}, 3);
}

static void test_edges(void **state)
{
    (void)state;
    hq_clahe_geom g = grid(5, 7, 300, 410); /* rows divide, yet are padded: tiles of 61 x 59 */
    assert_int_equal(g.tile_h, 61);
    assert_int_equal(hq_tile_view_edges(g.height, g.tiles_y, g.tile_h), 4);
    assert_int_equal(hq_tile_view_edges(g.width, g.tiles_x, g.tile_w), 6);
    g = grid(12, 12, 30, 40); /* padded to 36 x 48: the last two tiles each way lie in the padding */
    assert_int_equal(hq_tile_view_edges(g.height, g.tiles_y, g.tile_h), 9);
    assert_int_equal(hq_tile_view_edges(g.width, g.tiles_x, g.tile_w), 9);
    g = grid(4, 4, 40, 40); /* divides: no padding, every boundary inside */
    assert_int_equal(hq_tile_view_edges(g.height, g.tiles_y, g.tile_h), 3);
    g = grid(1, 1, 7, 9);
    assert_int_equal(hq_tile_view_edges(g.width, g.tiles_x, g.tile_w), 0);
    /* Past 2^32 tiles a side: 64-bit all through. */
    const uint64_t big = (uint64_t)1 << 40;
    assert_true(hq_tile_view_edges(big, (uint64_t)1 << 34, 64) == ((uint64_t)1 << 34) - 1);
}

static void test_drawable(void **state)
{
    (void)state;
    hq_clahe_geom g = grid(12, 12, 30, 40); /* tiles 3 x 4 on a thumbnail of the image's own size */
    assert_true(hq_tile_view_drawable(&g, 40, 30));
    assert_false(hq_tile_view_drawable(&g, 20, 15)); /* 1.5 x 2 thumbnail pixels */
    g = grid(15, 20, 30, 40);                          /* 2 x 2 */
    assert_false(hq_tile_view_drawable(&g, 40, 30));
    g = grid(8, 8, 4096, 4096);
    assert_true(hq_tile_view_drawable(&g, 256, 256));
    g = grid(1024, 8, 4096, 4096); /* rows too fine, columns fine: both or neither */
    assert_false(hq_tile_view_drawable(&g, 256, 256));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pick),
        cmocka_unit_test(test_edges),
        cmocka_unit_test(test_drawable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
