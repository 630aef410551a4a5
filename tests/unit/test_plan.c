/* test_plan.c — the work split (jobs/plan.h): a pure function whose blocks cover every pixel of
 * every non-skipped item exactly once, in input order within each rank, each block within
 * block_bytes unless it is one indivisible piece (a whole non-splittable image, a compressed chunk,
 * a pixel), aligned to the chunks, with balanced shares (max/mean <= 1.05 where the sizes allow). Shapes far beyond 4 GiB
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

static uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

/* The most a block of this item may hold: block_bytes, or more when one indivisible piece is
 * larger (an image that must stay whole, a compressed chunk, one pixel). */
static uint64_t allowed_bytes(const hq_plan_item *it, uint64_t block_bytes)
{
    uint64_t unit = it->pixel_bytes;
    if (!it->splittable)
        unit = item_image_pixels(it) * it->pixel_bytes;
    else if (it->whole_chunks && it->chunk_height)
        unit = min_u64(it->chunk_height, it->height) * min_u64(it->chunk_width, it->width) * it->pixel_bytes;
    return unit > block_bytes ? unit : block_bytes;
}

/* One image's part of a block. */
typedef struct rect {
    uint64_t g, r0, r1, c0, c1;
} rect;

static int by_image_then_place(const void *a, const void *b)
{
    const rect *x = a, *y = b;
    if (x->g != y->g)
        return x->g < y->g ? -1 : 1;
    if (x->r0 != y->r0)
        return x->r0 < y->r0 ? -1 : 1;
    return x->c0 < y->c0 ? -1 : x->c0 > y->c0;
}

/* The rects of one image cover it exactly once: painted pixel by pixel when it is small, else by
 * area and pairwise disjointness (rects sorted by r0, so only those starting above r1 can meet). */
static void check_cover(const rect *rs, uint64_t n, uint64_t h, uint64_t w)
{
    if (n == 1 && rs[0].r0 == 0 && rs[0].r1 == h && rs[0].c0 == 0 && rs[0].c1 == w)
        return;
    if (h * w <= (1u << 24)) {
        unsigned char *seen = calloc(h * w, 1);
        assert_non_null(seen);
        for (uint64_t k = 0; k < n; k++)
            for (uint64_t y = rs[k].r0; y < rs[k].r1; y++)
                for (uint64_t x = rs[k].c0; x < rs[k].c1; x++)
                    seen[y * w + x]++;
        for (uint64_t p = 0; p < h * w; p++)
            if (seen[p] != 1)
                fail_msg("image %llu pixel (%llu, %llu) covered %d times", (unsigned long long)rs[0].g,
                         (unsigned long long)(p / w), (unsigned long long)(p % w), seen[p]);
        free(seen);
        return;
    }
    uint64_t area = 0;
    for (uint64_t k = 0; k < n; k++) {
        area += (rs[k].r1 - rs[k].r0) * (rs[k].c1 - rs[k].c0);
        for (uint64_t j = k + 1; j < n && rs[j].r0 < rs[k].r1; j++)
            if (rs[j].c0 < rs[k].c1 && rs[k].c0 < rs[j].c1)
                fail_msg("image %llu: blocks at rows %llu, %llu overlap", (unsigned long long)rs[k].g,
                         (unsigned long long)rs[k].r0, (unsigned long long)rs[j].r0);
    }
    if (area != h * w)
        fail_msg("image %llu: blocks cover %llu of %llu pixels", (unsigned long long)rs[0].g,
                 (unsigned long long)area, (unsigned long long)(h * w));
}

static int place_less(const hq_plan *p, const hq_block *a, const hq_block *b)
{
    const uint64_t ga = p->item_image0[a->item] + a->s0, gb = p->item_image0[b->item] + b->s0;
    if (ga != gb)
        return ga < gb;
    return a->r0 < b->r0 || (a->r0 == b->r0 && a->c0 < b->c0);
}

/* All invariants of one plan; fails the test on the first broken one. */
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

    /* Each block on its own, and every image's blocks as rects. */
    uint64_t nrects = 0, max_bytes = 0;
    for (uint64_t k = 0; k < p->nblocks; k++)
        nrects += p->blocks[k].s1 > p->blocks[k].s0 ? p->blocks[k].s1 - p->blocks[k].s0 : 1;
    rect *rs = malloc((nrects ? nrects : 1) * sizeof *rs);
    assert_non_null(rs);
    uint64_t nr = 0;
    for (int rank = 0; rank < nranks; rank++) {
        uint64_t rank_sum = 0;
        for (uint64_t k = p->first[rank]; k < p->first[rank + 1]; k++) {
            assert_int_equal(hq_plan_owner(p, k), rank);
            const hq_block *b = &p->blocks[k];
            assert_true(b->item < n);
            const hq_plan_item *it = &items[b->item];
            assert_false(it->skip);
            assert_true(b->s1 > b->s0 && b->s1 <= it->slices);
            assert_true(b->r1 > b->r0 && b->r1 <= it->height);
            assert_true(b->c1 > b->c0 && b->c1 <= it->width);
            const int whole = hq_block_whole(b, it->height, it->width);
            if (b->s1 - b->s0 > 1)
                assert_true(whole); /* several slices: whole slices only */
            if (!it->splittable)
                assert_true(whole); /* never split a PNG-like image */
            const uint64_t px = hq_block_pixels(b);
            const uint64_t bytes = px * it->pixel_bytes;
            const int whole_unsplittable = !it->splittable && b->s1 - b->s0 == 1;
            const uint64_t allowed = allowed_bytes(it, block_bytes);
            if (bytes > allowed && !whole_unsplittable && !(whole && b->s1 - b->s0 == 1 && it->whole_chunks))
                fail_msg("block %llu holds %llu bytes > %llu allowed", (unsigned long long)k,
                         (unsigned long long)bytes, (unsigned long long)allowed);
            max_bytes = bytes > max_bytes ? bytes : max_bytes;
            /* Aligned to the chunks, where chunks are kept whole or fit a block. */
            const uint64_t ch = it->chunk_height, cw = it->chunk_width;
            if (ch && cw && (it->whole_chunks || ch * cw * it->pixel_bytes <= block_bytes)) {
                if (b->r0 % ch || b->c0 % cw || (b->r1 % ch && b->r1 != it->height) ||
                    (b->c1 % cw && b->c1 != it->width))
                    fail_msg("block %llu (rows %llu-%llu, cols %llu-%llu) is not aligned to %llux%llu chunks",
                             (unsigned long long)k, (unsigned long long)b->r0, (unsigned long long)b->r1,
                             (unsigned long long)b->c0, (unsigned long long)b->c1, (unsigned long long)ch,
                             (unsigned long long)cw);
            }
            /* A rank's blocks in input order; without dealing, the ranks' shares in order too. */
            if (k > p->first[rank] || (!p->dealt && k > 0))
                assert_true(place_less(p, &p->blocks[k - 1], b));
            for (uint64_t s = b->s0; s < b->s1; s++)
                rs[nr++] = (rect){p->item_image0[b->item] + s, b->r0, b->r1, b->c0, b->c1};
            rank_sum += px;
        }
        assert_true(rank_sum == p->rank_pixels[rank]);
    }
    assert_true(max_bytes == p->max_block_bytes);

    /* Every image's first block (in block order; dealt, its only one) names the rank that speaks for it. */
    int *speaker = malloc((nimages ? nimages : 1) * sizeof *speaker);
    assert_non_null(speaker);
    for (uint64_t g = 0; g < nimages; g++)
        speaker[g] = -1;
    for (uint64_t k = 0; k < p->nblocks; k++)
        for (uint64_t s = p->blocks[k].s0; s < p->blocks[k].s1; s++) {
            const uint64_t g = p->item_image0[p->blocks[k].item] + s;
            if (speaker[g] < 0)
                speaker[g] = hq_plan_owner(p, k);
        }
    for (uint64_t g = 0; g < nimages; g++)
        if (speaker[g] >= 0 && hq_plan_image_owner(p, g) != speaker[g])
            fail_msg("image %llu: hq_plan_image_owner says rank %d, its first block is on rank %d", (unsigned long long)g,
                     hq_plan_image_owner(p, g), speaker[g]);
    free(speaker);

    /* Every pixel of every non-skipped image exactly once. */
    qsort(rs, nr, sizeof *rs, by_image_then_place);
    uint64_t k = 0;
    for (size_t i = 0; i < n; i++)
        for (uint64_t s = 0; s < items[i].slices; s++) {
            const uint64_t g = p->item_image0[i] + s;
            uint64_t e = k;
            while (e < nr && rs[e].g == g)
                e++;
            if (items[i].skip || item_image_pixels(&items[i]) == 0) {
                assert_true(e == k);
                continue;
            }
            if (e == k)
                fail_msg("image %llu (item %zu slice %llu) is not covered", (unsigned long long)g, i,
                         (unsigned long long)s);
            check_cover(rs + k, e - k, items[i].height, items[i].width);
            k = e;
        }
    assert_true(k == nr);
    free(rs);

    /* Balance: no share exceeds the mean by more than the largest image (contiguous shares end
     * within half an image of their ideal end; dealing largest-first does no worse). */
    if (total > 0) {
        const uint64_t mean = total / (uint64_t)nranks;
        for (int r = 0; r < nranks; r++)
            if (p->rank_pixels[r] > mean + largest + 1)
                fail_msg("rank %d holds %llu pixels > mean %llu + largest image %llu", r,
                         (unsigned long long)p->rank_pixels[r], (unsigned long long)mean,
                         (unsigned long long)largest);
    }
}

/* max / mean of the ranks' pixels. */
static double imbalance(const hq_plan *p)
{
    uint64_t most = 0;
    for (int r = 0; r < p->nranks; r++)
        most = p->rank_pixels[r] > most ? p->rank_pixels[r] : most;
    return p->total_pixels ? (double)most * p->nranks / (double)p->total_pixels : 1.0;
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
        {10, 64, 80, 1, 1, 0, 0, 0, 0, 0}, {1, 500, 300, 2, 1, 0, 0, 0, 0, 0}, {3, 20, 20, 3, 0, 0, 0, 0, 0, 0}, {5, 33, 17, 4, 1, 0, 0, 0, 0, 0}};
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
    const hq_plan_item stack = {100, 256, 256, 2, 1, 0, 0, 0, 0, 0};
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
                                  (uint64_t)(1 + i % 4), i % 2, 0, 0, 0, 0, 0};
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
    const hq_plan_item img = {1, 1000, 777, 2, 1, 0, 0, 0, 0, 0};
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
    const hq_plan_item items[] = {{2, 100, 50, 1, 1, 0, 0, 0, 0, 0}, {1, 100, 50, 1, 1, 0, 0, 0, 0, 0}};
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
    const hq_plan_item one = {1, 300, 200, 4, 0, 0, 0, 0, 0, 0};
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
        dir[i] = (hq_plan_item){1, 40 + (uint64_t)i * 30, 50 + (uint64_t)i * 7, 3, 0, 0, 0, 0, 0, 0};
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
    const hq_plan_item items[] = {{1, 100, 100, 1, 0, 1, 0, 0, 0, 0}, {1, 80, 90, 1, 0, 0, 0, 0, 0, 0}, {1, 100, 100, 1, 0, 1, 0, 0, 0, 0},
                                  {1, 70, 60, 3, 0, 0, 0, 0, 0, 0},   {4, 10, 10, 2, 1, 1, 0, 0, 0, 0}, {2, 10, 10, 2, 1, 0, 0, 0, 0, 0},
                                  {1, 100, 100, 1, 0, 1, 0, 0, 0, 0}};
    for (int nr = 1; nr <= 8; nr++) {
        hq_plan p;
        make_and_check(items, 7, nr, 4 * KiB, &p);
        for (uint64_t k = 0; k < p.nblocks; k++)
            assert_false(items[p.blocks[k].item].skip);
        hq_plan_free(&p);
    }
    /* Everything skipped: no blocks, no pixels, and no crash. */
    const hq_plan_item all_bad[] = {{1, 10, 10, 1, 0, 1, 0, 0, 0, 0}, {1, 10, 10, 1, 0, 1, 0, 0, 0, 0}};
    hq_plan p;
    make_and_check(all_bad, 2, 3, 1 * MiB, &p);
    assert_true(p.nblocks == 0);
    assert_true(p.total_pixels == 0);
    hq_plan_free(&p);
}

static void test_block_bytes_respected(void **state)
{
    (void)state;
    const hq_plan_item items[] = {{7, 123, 45, 2, 1, 0, 0, 0, 0, 0}, {1, 999, 31, 6, 1, 0, 0, 0, 0, 0}, {3, 64, 64, 8, 1, 0, 0, 0, 0, 0}};
    const uint64_t blocks[] = {1, 45, 90, 91, 1000, 64 * KiB, 100 * KiB, 1 * MiB, 64 * MiB};
    for (int nr = 1; nr <= 5; nr++)
        for (size_t k = 0; k < sizeof blocks / sizeof *blocks; k++) {
            hq_plan p;
            make_and_check(items, 3, nr, blocks[k], &p);
            hq_plan_free(&p);
        }
    /* A small block forces several blocks per rank. */
    const hq_plan_item big = {1, 1000, 777, 1, 1, 0, 0, 0, 0, 0};
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
    const hq_plan_item huge = {3, 100000, 100000, 2, 1, 0, 0, 0, 0, 0};
    for (int nr = 1; nr <= 8; nr++) {
        hq_plan p;
        make_and_check(&huge, 1, nr, 256 * MiB, &p);
        assert_true(p.total_pixels == 30000000000ull);
        hq_plan_free(&p);
    }
    /* One image over 4 ranks: row bands, still exact. */
    const hq_plan_item one = {1, 200000, 50000, 4, 1, 0, 0, 0, 0, 0};
    hq_plan p;
    make_and_check(&one, 1, 4, 1 * GiB, &p);
    check_row_balance(&p, 50000);
    hq_plan_free(&p);
    /* A single row larger than 4 GiB: pieces of a row, 20 per row. */
    const hq_plan_item wide = {1, 4, 5ull << 30, 1, 1, 0, 0, 0, 0, 0};
    make_and_check(&wide, 1, 2, 256 * MiB, &p);
    assert_true(p.nblocks == 4 * 20);
    for (uint64_t k = 0; k < p.nblocks; k++)
        assert_true(p.blocks[k].r1 - p.blocks[k].r0 == 1 && hq_block_pixels(&p.blocks[k]) == 256 * MiB);
    hq_plan_free(&p);
    /* A compressed 100000 x 100000 16-bit image in 1024 x 1024 chunks over 8 ranks, 16 MiB blocks:
     * 2-D tiles of 8 chunks (a chunk row is 195 MiB), balanced to a chunk. */
    const hq_plan_item slide = {1, 100000, 100000, 2, 1, 0, 1, 1024, 1024, 1};
    make_and_check(&slide, 1, 8, 16 * MiB, &p);
    assert_true(imbalance(&p) <= 1.001);
    for (uint64_t k = 0; k < p.nblocks; k++)
        assert_true(p.blocks[k].r1 - p.blocks[k].r0 <= 1024 && p.blocks[k].c1 - p.blocks[k].c0 <= 8 * 1024);
    hq_plan_free(&p);
    /* Many slices (2^33 images of 1 pixel would be too many blocks; 2^20 slices of 64 KiB). */
    const hq_plan_item tall = {1u << 20, 256, 256, 1, 1, 0, 0, 0, 0, 0};
    make_and_check(&tall, 1, 7, 4 * GiB, &p);
    assert_true(p.total_pixels == (1ull << 36));
    hq_plan_free(&p);
    /* A non-splittable image bigger than 4 GiB stays whole. */
    const hq_plan_item png = {1, 70000, 70000, 1, 0, 0, 0, 0, 0, 0};
    make_and_check(&png, 1, 3, 256 * MiB, &p);
    assert_true(p.nblocks == 1);
    hq_plan_free(&p);
}

/* Counts blocks that are 2-D tiles: part of an image in both directions. */
static uint64_t tiles_2d(const hq_plan *p, const hq_plan_item *items)
{
    uint64_t n = 0;
    for (uint64_t k = 0; k < p->nblocks; k++) {
        const hq_block *b = &p->blocks[k];
        const hq_plan_item *it = &items[b->item];
        n += (b->r0 > 0 || b->r1 < it->height) && (b->c0 > 0 || b->c1 < it->width);
    }
    return n;
}

/* A single compressed image: tiles are whole chunks, bands of chunk rows when a chunk row fits the
 * block, else 2-D tiles; every rank's share within a chunk of the ideal. */
static void test_single_image_tiles(void **state)
{
    (void)state;
    const hq_plan_item img = {1, 3000, 2000, 1, 1, 0, 1, 256, 128, 1}; /* chunk row 500 KiB */
    for (int nr = 1; nr <= 8; nr++) {
        hq_plan p;
        make_and_check(&img, 1, nr, 1 * MiB, &p); /* bands of two chunk rows */
        assert_true(imbalance(&p) <= 1.0 + (double)nr * 256 * 128 / (3000.0 * 2000));
        hq_plan_free(&p);
        make_and_check(&img, 1, nr, 100 * KiB, &p); /* a chunk row does not fit: 3 chunks a tile */
        assert_true(tiles_2d(&p, &img) > 0);
        for (uint64_t k = 0; k < p.nblocks; k++)
            assert_true(p.blocks[k].r1 - p.blocks[k].r0 <= 256 && p.blocks[k].c1 - p.blocks[k].c0 <= 3 * 128);
        if (nr > 1)
            assert_int_equal(p.whole_images, 0);
        hq_plan_free(&p);
    }
}

/* Compressed chunks larger than the block stay whole (one chunk a block); uncompressed ones are cut
 * into strips of rows, and a contiguous row larger than the block into pieces. */
static void test_chunks_larger_than_block(void **state)
{
    (void)state;
    hq_plan_item img = {1, 1000, 1000, 2, 1, 0, 1, 300, 300, 1}; /* chunks of 176 KiB */
    size_t which = 9;
    assert_true(hq_plan_min_block(&img, 1, &which) == 300 * 300 * 2);
    assert_true(which == 0);
    hq_plan p;
    make_and_check(&img, 1, 3, 16 * KiB, &p);
    assert_true(p.nblocks == 16);
    assert_true(p.max_block_bytes == 300 * 300 * 2);
    hq_plan_free(&p);
    img.whole_chunks = 0;
    assert_true(hq_plan_min_block(&img, 1, NULL) == 2);
    make_and_check(&img, 1, 3, 16 * KiB, &p);
    assert_true(p.max_block_bytes <= 16 * KiB);
    for (uint64_t k = 0; k < p.nblocks; k++) /* strips inside one chunk column */
        assert_true(p.blocks[k].c0 / 300 == (p.blocks[k].c1 - 1) / 300);
    hq_plan_free(&p);
    const hq_plan_item rows = {1, 50, 100000, 3, 1, 0, 0, 0, 0, 0};
    make_and_check(&rows, 1, 4, 64 * KiB, &p);
    assert_true(p.max_block_bytes <= 64 * KiB);
    hq_plan_free(&p);
}

/* A stack of many equal images keeps whole images when that is balanced enough (no image then needs
 * two passes); when it is not (9 on 4 ranks), images at share ends are cut, by their chunks. */
static void test_whole_images_when_balanced(void **state)
{
    (void)state;
    const hq_plan_item stack = {100, 64, 64, 1, 1, 0, 1, 64, 64, 1};
    hq_plan p;
    make_and_check(&stack, 1, 8, 1 * MiB, &p);
    assert_int_equal(p.whole_images, 1);
    assert_true(imbalance(&p) <= 1.05);
    hq_plan_free(&p);
    const hq_plan_item nine = {9, 60, 70, 2, 1, 0, 1, 30, 70, 1};
    make_and_check(&nine, 1, 4, 16 * KiB, &p);
    assert_int_equal(p.whole_images, 0);
    assert_true(imbalance(&p) <= 1.0 + 0.5 / 2.25); /* to half an image (one chunk) */
    hq_plan_free(&p);
    const hq_plan_item nine_rows = {9, 60, 70, 2, 1, 0, 0, 0, 0, 0};
    make_and_check(&nine_rows, 1, 4, 16 * KiB, &p);
    assert_true(imbalance(&p) <= 1.01);
    hq_plan_free(&p);
}

/* Collections of very different sizes (HDF5-like: images can be cut): max/mean <= 1.05 on 2..16
 * ranks, whatever the mix of contiguous, chunked and compressed items. */
static void test_mixed_collection_balance(void **state)
{
    (void)state;
    hq_plan_item items[30];
    uint64_t seed = 12345;
    for (int i = 0; i < 30; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        const uint64_t h = 20 + (seed >> 33) % 900, w = 20 + (seed >> 43) % 700;
        const int kind = i % 3;
        items[i] = (hq_plan_item){1 + (uint64_t)(i % 4 == 0) * 5, h, w, 1 + (uint64_t)(i % 2), 1, 0,
                                  kind ? 1 : 0, kind ? 64 : 0, kind ? 48 : 0, kind == 2};
    }
    items[7].height = items[7].width = 6000; /* one image far larger than the others together */
    for (int nr = 2; nr <= 16; nr++) {
        hq_plan p;
        make_and_check(items, 30, nr, 512 * KiB, &p);
        if (imbalance(&p) > 1.05)
            fail_msg("%d ranks: max/mean %.4f", nr, imbalance(&p));
        hq_plan_free(&p);
    }
}

/* PNG-like collections (nothing can be cut): dealt largest first when contiguous shares are out of
 * balance, to <= 1.05 where the sizes allow; one image larger than the mean share stands alone. */
static void test_unsplittable_collection_dealt(void **state)
{
    (void)state;
    hq_plan_item items[200];
    uint64_t seed = 777;
    for (int i = 0; i < 200; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        items[i] = (hq_plan_item){1, 50 + (seed >> 33) % 950, 50 + (seed >> 45) % 950, 3, 0, 0, 0, 0, 0, 0};
    }
    for (int nr = 2; nr <= 12; nr++) {
        hq_plan p;
        make_and_check(items, 200, nr, 256 * MiB, &p);
        if (imbalance(&p) > 1.05)
            fail_msg("%d ranks: max/mean %.4f", nr, imbalance(&p));
        hq_plan_free(&p);
    }
    /* Sorted ascending, the contiguous shares are badly out of balance: the plan must deal. */
    hq_plan_item grow[40];
    for (int i = 0; i < 40; i++)
        grow[i] = (hq_plan_item){1, 10 + (uint64_t)i * i, 100, 1, 0, 0, 0, 0, 0, 0};
    hq_plan p;
    make_and_check(grow, 40, 7, 256 * MiB, &p);
    assert_int_equal(p.dealt, 1);
    assert_true(imbalance(&p) <= 1.05);
    hq_plan_free(&p);
    /* One image holds most of the pixels: its rank holds it alone, the others share the rest. */
    grow[20].height = 100000;
    make_and_check(grow, 40, 4, 256 * MiB, &p);
    uint64_t most = 0;
    for (int r = 0; r < 4; r++)
        most = p.rank_pixels[r] > most ? p.rank_pixels[r] : most;
    assert_true(most == 100000ull * 100);
    hq_plan_free(&p);
}

/* Stacks chunked across slices: blocks of whole slices start on the chunks' slice boundaries. */
static void test_chunk_depth_alignment(void **state)
{
    (void)state;
    const hq_plan_item stack = {40, 32, 32, 1, 1, 0, 4, 32, 32, 1};
    hq_plan p;
    make_and_check(&stack, 1, 1, 10 * KiB, &p); /* 10 slices fit; 8 are taken */
    for (uint64_t k = 0; k < p.nblocks; k++)
        assert_true(p.blocks[k].s0 % 4 == 0 && (p.blocks[k].s1 % 4 == 0 || p.blocks[k].s1 == 40));
    hq_plan_free(&p);
}

/* Every rank count gives a plan with the same coverage; the blocks of a given rank count are the
 * same whatever else is computed (a pure function of its inputs). */
static void test_many_rank_counts_cover(void **state)
{
    (void)state;
    const hq_plan_item items[] = {{3, 517, 389, 2, 1, 0, 1, 64, 64, 1}, {1, 1000, 999, 1, 1, 0, 0, 0, 0, 0},
                                  {2, 33, 4000, 3, 1, 0, 1, 33, 512, 0}, {1, 5, 5, 1, 1, 1, 0, 0, 0, 0}};
    for (int nr = 1; nr <= 24; nr++) {
        const uint64_t blocks[] = {7 * KiB, 100 * KiB, 64 * MiB};
        for (size_t k = 0; k < 3; k++) {
            hq_plan p;
            make_and_check(items, 4, nr, blocks[k], &p);
            hq_plan_free(&p);
        }
    }
}

static void test_bad_arguments(void **state)
{
    (void)state;
    const hq_plan_item it = {1, 10, 10, 1, 1, 0, 0, 0, 0, 0};
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
    const hq_plan_item items[] = {{0, 10, 10, 1, 1, 0, 0, 0, 0, 0}, {2, 10, 10, 1, 1, 0, 0, 0, 0, 0}, {0, 5, 5, 1, 0, 0, 0, 0, 0, 0}, {1, 7, 9, 1, 0, 0, 0, 0, 0, 0}};
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
        cmocka_unit_test(test_single_image_tiles),
        cmocka_unit_test(test_chunks_larger_than_block),
        cmocka_unit_test(test_whole_images_when_balanced),
        cmocka_unit_test(test_mixed_collection_balance),
        cmocka_unit_test(test_unsplittable_collection_dealt),
        cmocka_unit_test(test_chunk_depth_alignment),
        cmocka_unit_test(test_many_rank_counts_cover),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
