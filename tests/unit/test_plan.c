/* test_plan.c — the work split (jobs/plan.h): a pure function whose blocks cover every pixel of
 * every non-skipped item exactly once, in order, in balanced contiguous shares, each block within
 * block_bytes unless it is a single row or a whole non-splittable image. Shapes far beyond 4 GiB
 * are planned without allocating them, to exercise the 64-bit arithmetic. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../jobs/plan.h"

#define KiB (1024ull)
#define MiB (1024ull * KiB)
#define GiB (1024ull * MiB)

static uint64_t item_image_pixels(const hq_plan_item *it)
{
    return it->height * it->width;
}

/* All invariants of one plan; returns nothing, fails the test on the first broken one. */
static void check_plan(const hq_plan_item *items, size_t n, int nranks, uint64_t block_bytes, const hq_plan *p)
{
    assert_int_equal(p->nranks, nranks);
    assert_int_equal(p->nitems, n);

    /* Totals and the image numbering. */
    uint64_t total = 0, nimages = 0, largest = 0;
    for (size_t i = 0; i < n; i++) {
        assert_true(p->item_image0[i] == nimages);
        nimages += items[i].slices;
        if (!items[i].skip) {
            total += items[i].slices * item_image_pixels(&items[i]);
            if (item_image_pixels(&items[i]) > largest)
                largest = item_image_pixels(&items[i]);
        }
    }
    assert_true(p->item_image0[n] == nimages);
    assert_true(p->nimages == nimages);
    assert_true(p->total_pixels == total);

    /* Share bounds are monotone and cover all blocks. */
    assert_true(p->first[0] == 0);
    assert_true(p->first[nranks] == p->nblocks);
    for (int r = 0; r < nranks; r++)
        assert_true(p->first[r] <= p->first[r + 1]);

    /* Walk the blocks in global order against a cursor (item, slice, row) that must advance
     * exactly through every non-skipped pixel. */
    size_t ci = 0;
    uint64_t cs = 0, cr = 0;
    uint64_t rank_sum = 0, sum_all = 0;
    int rank = 0;
    for (uint64_t k = 0; k < p->nblocks; k++) {
        while (rank < nranks && k >= p->first[rank + 1]) {
            assert_true(rank_sum == p->rank_pixels[rank]);
            rank_sum = 0;
            rank++;
        }
        assert_int_equal(hq_plan_owner(p, k), rank);
        const hq_block *b = &p->blocks[k];
        /* Skip past finished or skipped items. */
        while (ci < n && (items[ci].skip || items[ci].slices == 0 || cs == items[ci].slices)) {
            ci++;
            cs = cr = 0;
        }
        if (ci >= n)
            fail_msg("block %llu (item %llu) is past the end of the work", (unsigned long long)k,
                     (unsigned long long)b->item);
        const hq_plan_item *it = &items[ci];
        if (b->item != ci || b->s0 != cs || b->r0 != cr)
            fail_msg("block %llu starts at item %llu slice %llu row %llu, expected item %zu slice %llu row %llu",
                     (unsigned long long)k, (unsigned long long)b->item, (unsigned long long)b->s0,
                     (unsigned long long)b->r0, ci, (unsigned long long)cs, (unsigned long long)cr);
        assert_true(b->s1 > b->s0 && b->s1 <= it->slices);
        assert_true(b->r1 > b->r0 && b->r1 <= it->height);
        if (b->s1 - b->s0 > 1)
            assert_true(b->r0 == 0 && b->r1 == it->height); /* several slices: whole slices only */
        if (!it->splittable)
            assert_true(b->r0 == 0 && b->r1 == it->height); /* never split a PNG-like image */
        const uint64_t px = hq_block_pixels(b, it->width);
        const uint64_t bytes = px * it->pixel_bytes;
        const int single_row = b->s1 - b->s0 == 1 && b->r1 - b->r0 == 1;
        const int whole_unsplittable = !it->splittable && b->s1 - b->s0 == 1;
        if (bytes > block_bytes && !single_row && !whole_unsplittable)
            fail_msg("block %llu holds %llu bytes > block_bytes %llu", (unsigned long long)k,
                     (unsigned long long)bytes, (unsigned long long)block_bytes);
        rank_sum += px;
        sum_all += px;
        if (b->s1 - b->s0 > 1 || b->r1 == it->height) {
            cs = b->s1;
            cr = 0;
        } else {
            cr = b->r1;
        }
    }
    while (rank < nranks) {
        assert_true(rank_sum == p->rank_pixels[rank]);
        rank_sum = 0;
        rank++;
    }
    while (ci < n && (items[ci].skip || items[ci].slices == 0 || cs == items[ci].slices)) {
        ci++;
        cs = cr = 0;
    }
    if (ci != n)
        fail_msg("work left uncovered: item %zu slice %llu row %llu", ci, (unsigned long long)cs,
                 (unsigned long long)cr);
    assert_true(sum_all == total);

    /* Balance. */
    if (nranks > 0 && total > 0) {
        const uint64_t mean = total / (uint64_t)nranks;
        for (int r = 0; r < nranks; r++) {
            if (p->whole_images) {
                if (p->rank_pixels[r] > mean + largest + 1)
                    fail_msg("rank %d holds %llu pixels > mean %llu + largest image %llu", r,
                             (unsigned long long)p->rank_pixels[r], (unsigned long long)mean,
                             (unsigned long long)largest);
            }
        }
    }
}

/* Row mode: every share within one row (plus rounding) of the ideal total / nranks. */
static void check_row_balance(const hq_plan *p, uint64_t width)
{
    assert_int_equal(p->whole_images, 0);
    const long double ideal = (long double)p->total_pixels / p->nranks;
    for (int r = 0; r < p->nranks; r++) {
        long double diff = (long double)p->rank_pixels[r] - ideal;
        if (diff < 0)
            diff = -diff;
        if (diff > (long double)width + 1)
            fail_msg("rank %d holds %llu pixels, ideal %.1Lf, width %llu", r, (unsigned long long)p->rank_pixels[r],
                     ideal, (unsigned long long)width);
    }
}

static void make_and_check(const hq_plan_item *items, size_t n, int nranks, uint64_t block_bytes, hq_plan *p)
{
    hq_err err = {{0}};
    int rc = hq_plan_make(items, n, nranks, block_bytes, p, &err);
    if (rc != 0)
        fail_msg("hq_plan_make(n=%zu, nranks=%d, block=%llu) = %d: %s", n, nranks, (unsigned long long)block_bytes,
                 rc, err.msg);
    check_plan(items, n, nranks, block_bytes, p);
}

static void assert_same_plan(const hq_plan *a, const hq_plan *b)
{
    assert_int_equal(a->nranks, b->nranks);
    assert_int_equal(a->whole_images, b->whole_images);
    assert_true(a->nblocks == b->nblocks);
    assert_memory_equal(a->blocks, b->blocks, a->nblocks * sizeof *a->blocks);
    assert_memory_equal(a->first, b->first, ((size_t)a->nranks + 1) * sizeof *a->first);
    assert_memory_equal(a->rank_pixels, b->rank_pixels, (size_t)a->nranks * sizeof *a->rank_pixels);
}

static void test_pure_function(void **state)
{
    (void)state;
    const hq_plan_item items[] = {
        {10, 64, 80, 1, 1, 0}, {1, 500, 300, 2, 1, 0}, {3, 20, 20, 3, 0, 0}, {5, 33, 17, 4, 1, 0}};
    for (int nr = 1; nr <= 9; nr++) {
        hq_plan a, b;
        make_and_check(items, 4, nr, 10 * KiB, &a);
        make_and_check(items, 4, nr, 10 * KiB, &b);
        assert_same_plan(&a, &b);
        hq_plan_free(&a);
        hq_plan_free(&b);
    }
}

/* A stack of many equal images: whole images per rank, balanced to within one image. */
static void test_stack_whole_images(void **state)
{
    (void)state;
    const hq_plan_item stack = {100, 256, 256, 2, 1, 0};
    for (int nr = 1; nr <= 8; nr++) {
        hq_plan p;
        make_and_check(&stack, 1, nr, 256 * MiB, &p);
        assert_int_equal(p.whole_images, 1);
        for (int r = 0; r < nr; r++)
            assert_true(p.rank_pixels[r] > 0);
        hq_plan_free(&p);
    }
}

/* Items of very different sizes: max share <= mean + the largest image. */
static void test_mixed_sizes_balanced(void **state)
{
    (void)state;
    hq_plan_item items[40];
    for (int i = 0; i < 40; i++)
        items[i] = (hq_plan_item){1 + (uint64_t)(i % 3), 10 + (uint64_t)(i * 37 % 200), 10 + (uint64_t)(i * 53 % 150),
                                  (uint64_t)(1 + i % 4), i % 2, 0};
    const uint64_t blocks[] = {1, 100, 4 * KiB, 1 * MiB, 1 * GiB};
    for (int nr = 1; nr <= 12; nr++)
        for (size_t k = 0; k < sizeof blocks / sizeof *blocks; k++) {
            hq_plan p;
            make_and_check(items, 40, nr, blocks[k], &p);
            hq_plan_free(&p);
        }
}

/* One image over 1..8 ranks: row bands within one row of the ideal share. */
static void test_single_image_over_ranks(void **state)
{
    (void)state;
    const hq_plan_item img = {1, 1000, 777, 2, 1, 0};
    for (int nr = 1; nr <= 8; nr++) {
        const uint64_t blocks[] = {256 * MiB, 64 * KiB, 1};
        for (size_t k = 0; k < 3; k++) {
            hq_plan p;
            make_and_check(&img, 1, nr, blocks[k], &p);
            if (nr == 1) {
                assert_true(p.rank_pixels[0] == 1000ull * 777);
            } else {
                check_row_balance(&p, 777);
                for (int r = 0; r < nr; r++)
                    assert_true(p.rank_pixels[r] > 0);
            }
            hq_plan_free(&p);
        }
    }
}

/* More ranks than images: shares become row bands, every rank gets work. */
static void test_more_ranks_than_images(void **state)
{
    (void)state;
    const hq_plan_item items[] = {{2, 100, 50, 1, 1, 0}, {1, 100, 50, 1, 1, 0}};
    for (int nr = 4; nr <= 16; nr++) {
        hq_plan p;
        make_and_check(items, 2, nr, 1 * MiB, &p);
        check_row_balance(&p, 50);
        for (int r = 0; r < nr; r++)
            assert_true(p.rank_pixels[r] > 0);
        hq_plan_free(&p);
    }
    /* Exactly as many images as ranks: whole images. */
    hq_plan p;
    make_and_check(items, 2, 3, 1 * MiB, &p);
    assert_int_equal(p.whole_images, 1);
    for (int r = 0; r < 3; r++)
        assert_true(p.rank_pixels[r] == 5000);
    hq_plan_free(&p);
}

/* PNG-like items are never split, however small the block and however many ranks. */
static void test_non_splittable_never_split(void **state)
{
    (void)state;
    const hq_plan_item one = {1, 300, 200, 4, 0, 0};
    for (int nr = 1; nr <= 6; nr++) {
        hq_plan p;
        make_and_check(&one, 1, nr, 1 * KiB, &p);
        assert_int_equal(p.whole_images, 1);
        assert_true(p.nblocks == 1);
        int owners = 0;
        for (int r = 0; r < nr; r++)
            owners += p.rank_pixels[r] > 0;
        assert_int_equal(owners, 1);
        hq_plan_free(&p);
    }
    hq_plan_item dir[7];
    for (int i = 0; i < 7; i++)
        dir[i] = (hq_plan_item){1, 40 + (uint64_t)i * 30, 50 + (uint64_t)i * 7, 3, 0, 0};
    for (int nr = 1; nr <= 10; nr++) {
        hq_plan p;
        make_and_check(dir, 7, nr, 2 * KiB, &p);
        assert_int_equal(p.whole_images, 1);
        assert_true(p.nblocks == 7);
        hq_plan_free(&p);
    }
}

static void test_skip_items_get_no_blocks(void **state)
{
    (void)state;
    const hq_plan_item items[] = {{1, 100, 100, 1, 0, 1}, {1, 80, 90, 1, 0, 0}, {1, 100, 100, 1, 0, 1},
                                  {1, 70, 60, 3, 0, 0},   {4, 10, 10, 2, 1, 1}, {2, 10, 10, 2, 1, 0},
                                  {1, 100, 100, 1, 0, 1}};
    for (int nr = 1; nr <= 8; nr++) {
        hq_plan p;
        make_and_check(items, 7, nr, 4 * KiB, &p);
        for (uint64_t k = 0; k < p.nblocks; k++)
            assert_false(items[p.blocks[k].item].skip);
        hq_plan_free(&p);
    }
    /* Everything skipped: no blocks, no pixels, and no crash. */
    const hq_plan_item all_bad[] = {{1, 10, 10, 1, 0, 1}, {1, 10, 10, 1, 0, 1}};
    hq_plan p;
    make_and_check(all_bad, 2, 3, 1 * MiB, &p);
    assert_true(p.nblocks == 0);
    assert_true(p.total_pixels == 0);
    hq_plan_free(&p);
}

static void test_block_bytes_respected(void **state)
{
    (void)state;
    const hq_plan_item items[] = {{7, 123, 45, 2, 1, 0}, {1, 999, 31, 6, 1, 0}, {3, 64, 64, 8, 1, 0}};
    const uint64_t blocks[] = {1, 45, 90, 91, 1000, 64 * KiB, 100 * KiB, 1 * MiB, 64 * MiB};
    for (int nr = 1; nr <= 5; nr++)
        for (size_t k = 0; k < sizeof blocks / sizeof *blocks; k++) {
            hq_plan p;
            make_and_check(items, 3, nr, blocks[k], &p);
            hq_plan_free(&p);
        }
    /* A small block forces several blocks per rank. */
    const hq_plan_item big = {1, 1000, 777, 1, 1, 0};
    hq_plan p;
    make_and_check(&big, 1, 2, 64 * KiB, &p);
    assert_true(p.first[1] - p.first[0] >= 5);
    assert_true(p.first[2] - p.first[1] >= 5);
    hq_plan_free(&p);
}

/* Shapes whose byte and pixel counts exceed 2^32 (never allocated). */
static void test_beyond_4gib(void **state)
{
    (void)state;
    /* 3 slices of 100000 x 100000 16-bit pixels: 20 GB per image, 3e10 pixels in all. */
    const hq_plan_item huge = {3, 100000, 100000, 2, 1, 0};
    for (int nr = 1; nr <= 8; nr++) {
        hq_plan p;
        make_and_check(&huge, 1, nr, 256 * MiB, &p);
        assert_true(p.total_pixels == 30000000000ull);
        hq_plan_free(&p);
    }
    /* One image over 4 ranks: row bands, still exact. */
    const hq_plan_item one = {1, 200000, 50000, 4, 1, 0};
    hq_plan p;
    make_and_check(&one, 1, 4, 1 * GiB, &p);
    check_row_balance(&p, 50000);
    hq_plan_free(&p);
    /* A single row larger than 4 GiB: one row per block. */
    const hq_plan_item wide = {1, 4, 5ull << 30, 1, 1, 0};
    make_and_check(&wide, 1, 2, 256 * MiB, &p);
    assert_true(p.nblocks == 4);
    hq_plan_free(&p);
    /* Many slices (2^33 images of 1 pixel would be too many blocks; 2^20 slices of 64 KiB). */
    const hq_plan_item tall = {1u << 20, 256, 256, 1, 1, 0};
    make_and_check(&tall, 1, 7, 4 * GiB, &p);
    assert_true(p.total_pixels == (1ull << 36));
    hq_plan_free(&p);
    /* A non-splittable image bigger than 4 GiB stays whole. */
    const hq_plan_item png = {1, 70000, 70000, 1, 0, 0};
    make_and_check(&png, 1, 3, 256 * MiB, &p);
    assert_true(p.nblocks == 1);
    hq_plan_free(&p);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    const hq_plan_item it = {1, 10, 10, 1, 1, 0};
    hq_plan p;
    hq_err err = {{0}};
    assert_int_not_equal(hq_plan_make(&it, 1, 0, 1 * MiB, &p, &err), 0);
    assert_true(strlen(err.msg) > 0);
    assert_int_not_equal(hq_plan_make(&it, 1, 2, 0, &p, &err), 0);
}

/* No items at all (an empty inventory, whose item array may be NULL): an empty plan, on any rank
 * count, without looking at items[0]. */
static void test_no_items(void **state)
{
    (void)state;
    for (int nr = 1; nr <= 4; nr++) {
        hq_plan p;
        make_and_check(NULL, 0, nr, 1 * MiB, &p);
        assert_true(p.nblocks == 0);
        assert_true(p.total_pixels == 0);
        hq_plan_free(&p);
    }
}

/* Zero-slice items and empty items between real ones. */
static void test_empty_items(void **state)
{
    (void)state;
    const hq_plan_item items[] = {{0, 10, 10, 1, 1, 0}, {2, 10, 10, 1, 1, 0}, {0, 5, 5, 1, 0, 0}, {1, 7, 9, 1, 0, 0}};
    for (int nr = 1; nr <= 5; nr++) {
        hq_plan p;
        make_and_check(items, 4, nr, 1 * MiB, &p);
        hq_plan_free(&p);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pure_function),
        cmocka_unit_test(test_stack_whole_images),
        cmocka_unit_test(test_mixed_sizes_balanced),
        cmocka_unit_test(test_single_image_over_ranks),
        cmocka_unit_test(test_more_ranks_than_images),
        cmocka_unit_test(test_non_splittable_never_split),
        cmocka_unit_test(test_skip_items_get_no_blocks),
        cmocka_unit_test(test_block_bytes_respected),
        cmocka_unit_test(test_beyond_4gib),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_no_items),
        cmocka_unit_test(test_empty_items),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
