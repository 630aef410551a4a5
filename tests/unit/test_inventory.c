/* test_inventory.c — the inventory (io/inventory.h): add copies its strings, pack/unpack round
 * trips every field (NULL strings included), and a damaged buffer fails cleanly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../io/inventory.h"

static void assert_str_or_null_equal(const char *a, const char *b)
{
    if (!a || !b)
        assert_true(a == b);
    else
        assert_string_equal(a, b);
}

static void assert_same_inventory(const hq_inventory *a, const hq_inventory *b)
{
    assert_int_equal(a->format, b->format);
    assert_int_equal(a->root_is_dir, b->root_is_dir);
    assert_str_or_null_equal(a->root, b->root);
    assert_int_equal(a->n, b->n);
    for (size_t i = 0; i < a->n; i++) {
        const hq_item *x = &a->items[i], *y = &b->items[i];
        assert_str_or_null_equal(x->src, y->src);
        assert_str_or_null_equal(x->name, y->name);
        assert_str_or_null_equal(x->why, y->why);
        assert_true(x->slices == y->slices);
        assert_true(x->height == y->height);
        assert_true(x->width == y->width);
        assert_int_equal(x->channels, y->channels);
        assert_int_equal(x->sample_bytes, y->sample_bytes);
        assert_int_equal(x->depth, y->depth);
        assert_int_equal(x->bad, y->bad);
        assert_int_equal(x->collective, y->collective);
        assert_true(x->chunk_slices == y->chunk_slices);
        assert_true(x->chunk_height == y->chunk_height);
        assert_true(x->chunk_width == y->chunk_width);
    }
}

static void fill(hq_inventory *inv, size_t n)
{
    memset(inv, 0, sizeof *inv);
    inv->format = HQ_FMT_PNG;
    inv->root_is_dir = 1;
    inv->root = strdup("/data/scans dir/ünïcode");
    hq_err err = {{0}};
    for (size_t i = 0; i < n; i++) {
        char src[64], name[64], why[96];
        snprintf(src, sizeof src, "/data/scans dir/img_%04zu.png", i);
        snprintf(name, sizeof name, "img_%04zu.png", i);
        snprintf(why, sizeof why, "%s: not a PNG file", src);
        hq_item it = {
            .src = src,
            .name = (i % 5 == 3) ? NULL : name,
            .slices = (i % 3 == 0) ? (1ull << 40) + i : 1,
            .height = 1000 + i,
            .width = (5ull << 32) + i, /* beyond 32 bits */
            .channels = 1 + (uint32_t)(i % 4),
            .sample_bytes = 1 + (uint32_t)(i % 2),
            .depth = (i % 7 == 0) ? 4 : 8 * (1 + (uint32_t)(i % 2)),
            .bad = (i % 4 == 1),
            .collective = (i % 3 == 2),
            .chunk_slices = i % 3,
            .chunk_height = (i % 3) * 64,
            .chunk_width = (i % 3) ? (1ull << 33) + i : 0,
            .why = (i % 4 == 1) ? why : NULL,
        };
        assert_int_equal(hq_inventory_add(inv, &it, &err), 0);
        /* The inventory holds copies: scribbling on ours must not change it. */
        memset(src, 'x', sizeof src - 1);
        memset(name, 'y', sizeof name - 1);
    }
}

static void test_add_copies_strings(void **state)
{
    (void)state;
    hq_inventory inv;
    fill(&inv, 3);
    assert_string_equal(inv.items[0].src, "/data/scans dir/img_0000.png");
    assert_string_equal(inv.items[2].name, "img_0002.png");
    assert_string_equal(inv.items[1].why, "/data/scans dir/img_0001.png: not a PNG file");
    assert_null(inv.items[0].why);
    hq_inventory_free(&inv);
    assert_int_equal(inv.n, 0);
    assert_null(inv.items);
}

static void test_round_trip(void **state)
{
    (void)state;
    const size_t sizes[] = {0, 1, 2, 17, 1000};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        hq_inventory a, b;
        fill(&a, sizes[k]);
        unsigned char *buf = NULL;
        uint64_t len = 0;
        hq_err err = {{0}};
        assert_int_equal(hq_inventory_pack(&a, &buf, &len, &err), 0);
        assert_non_null(buf);
        assert_true(len > 0);
        assert_int_equal(hq_inventory_unpack(buf, len, &b, &err), 0);
        assert_same_inventory(&a, &b);
        /* And again from the copy: packing is deterministic. */
        unsigned char *buf2 = NULL;
        uint64_t len2 = 0;
        assert_int_equal(hq_inventory_pack(&b, &buf2, &len2, &err), 0);
        assert_true(len2 == len);
        assert_memory_equal(buf, buf2, len);
        free(buf);
        free(buf2);
        hq_inventory_free(&a);
        hq_inventory_free(&b);
    }
}

static void test_hdf5_inventory_with_null_root(void **state)
{
    (void)state;
    hq_inventory a = {0}, b;
    a.format = HQ_FMT_HDF5;
    hq_err err = {{0}};
    hq_item it = {.src = "stack.h5", .name = "/scans/ct", .slices = 8, .height = 512, .width = 512,
                  .channels = 1, .sample_bytes = 2, .depth = 16};
    assert_int_equal(hq_inventory_add(&a, &it, &err), 0);
    unsigned char *buf = NULL;
    uint64_t len = 0;
    assert_int_equal(hq_inventory_pack(&a, &buf, &len, &err), 0);
    assert_int_equal(hq_inventory_unpack(buf, len, &b, &err), 0);
    assert_same_inventory(&a, &b);
    free(buf);
    hq_inventory_free(&a);
    hq_inventory_free(&b);
}

/* Every truncation of a valid buffer is an error, never a crash or a half-filled inventory. */
static void test_truncated_buffers_fail(void **state)
{
    (void)state;
    hq_inventory a;
    fill(&a, 5);
    unsigned char *buf = NULL;
    uint64_t len = 0;
    hq_err err = {{0}};
    assert_int_equal(hq_inventory_pack(&a, &buf, &len, &err), 0);
    for (uint64_t cut = 0; cut < len; cut++) {
        hq_inventory b;
        unsigned char *copy = malloc(cut ? cut : 1);
        memcpy(copy, buf, cut);
        err.msg[0] = '\0';
        int rc = hq_inventory_unpack(copy, cut, &b, &err);
        if (rc == 0)
            fail_msg("unpack of %llu of %llu bytes succeeded", (unsigned long long)cut, (unsigned long long)len);
        assert_true(strlen(err.msg) > 0);
        assert_int_equal(b.n, 0);
        free(copy);
    }
    free(buf);
    hq_inventory_free(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add_copies_strings),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_hdf5_inventory_with_null_root),
        cmocka_unit_test(test_truncated_buffers_fail),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
