/* test_scan_isolated.c — the scan in a child process (io/scan_isolated.c, io.h): the same inventory
 * and the same errors as hq_io_scan in process; a child that crashes inside libhdf5, or hangs past
 * the time limit, becomes one HQ_EINPUT line naming the input, and this process goes on (run from
 * the repository root, as `make unit` does: it reads fuzz/seeds and fuzz/regress). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "../../io/io.h"

static void assert_same_scan(const char *path, int skip_bad)
{
    hq_inventory a, b;
    hq_err ea = {{0}}, eb = {{0}};
    const int ra = hq_io_scan(path, skip_bad, &a, &ea);
    const int rb = hq_io_scan_isolated(path, skip_bad, 30, &b, &eb);
    assert_int_equal(ra, rb);
    if (ra) {
        assert_string_equal(ea.msg, eb.msg);
        assert_int_equal(b.n, 0);
        hq_inventory_free(&a); /* a failed scan may hold part of an inventory */
        hq_inventory_free(&b);
        return;
    }
    assert_int_equal(a.format, b.format);
    assert_string_equal(a.root, b.root);
    assert_int_equal(a.n, b.n);
    for (size_t i = 0; i < a.n; i++) {
        assert_string_equal(a.items[i].name, b.items[i].name);
        assert_int_equal(a.items[i].slices, b.items[i].slices);
        assert_int_equal(a.items[i].height, b.items[i].height);
        assert_int_equal(a.items[i].width, b.items[i].width);
        assert_int_equal(a.items[i].channels, b.items[i].channels);
        assert_int_equal(a.items[i].bad, b.items[i].bad);
    }
    hq_inventory_free(&a);
    hq_inventory_free(&b);
}

static void same_as_in_process(void **state)
{
    (void)state;
    assert_same_scan("fuzz/seeds/png/gray16.png", 0);
    assert_same_scan("fuzz/seeds/png", 1);
    assert_same_scan("fuzz/seeds/hdf5/u8_3d_stack_chunked.h5", 0);
    assert_same_scan("fuzz/seeds/hdf5/mixed_groups_attrs.h5", 1);
    assert_same_scan("fuzz/seeds/png/dmg_trunc_ihdr.png", 0);     /* an error, passed back */
    assert_same_scan("no/such/input.h5", 0);
}

static void crash_becomes_one_line(void **state)
{
    (void)state;
    const char *in = "fuzz/regress/hdf5/lib-local-heap-accumulator-memcpy.h5";
    hq_inventory inv;
    hq_err err = {{0}};
    assert_int_equal(hq_io_scan_isolated(in, 0, 30, &inv, &err), HQ_EINPUT);
    assert_non_null(strstr(err.msg, in));
    /* "crashed" (a signal), or "ended abnormally" under a sanitizer that exits instead */
    assert_non_null(strstr(err.msg, ": damaged: reading its metadata "));
    assert_null(strchr(err.msg, '\n'));
    assert_int_equal(inv.n, 0);
}

static void hang_cut_at_the_limit(void **state)
{
    (void)state;
    const char *in = "fuzz/regress/hdf5/lib-vlen-attr-global-heap-hang.h5";
    hq_inventory inv;
    hq_err err = {{0}};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    /* skip_bad: the 5-D dataset is left out, so the child reaches the attribute that hangs. */
    assert_int_equal(hq_io_scan_isolated(in, 1, 1.5, &inv, &err), HQ_EINPUT);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    assert_true(s >= 1.4 && s < 20);
    assert_non_null(strstr(err.msg, in));
    assert_non_null(strstr(err.msg, "took over 2 s"));
}

/* Storage recorded shorter than the data, which H5Dread would copy past while reading pixels in
 * the MPI process: refused by the scan itself (so by the child too), and with skip_bad the dataset
 * becomes a bad item carrying the reason. */
static void short_storage_refused(void **state)
{
    (void)state;
    static const struct {
        const char *path, *why;
    } cases[] = {
        {"fuzz/regress/hdf5/lib-chunk-btree-record-size0-memcpy.h5",
         ":/s: damaged: its chunk index records 286 bytes for 4 uncompressed chunks of 128 bytes"},
        {"fuzz/regress/hdf5/lib-chunk-btree-record-short-memcpy.h5",
         ":/s: damaged: its chunk index records 448 bytes for 4 uncompressed chunks of 128 bytes"},
        {"fuzz/regress/hdf5/lib-compact-storage-short-memcpy.h5",
         ":/s: damaged: its compact storage records 8 bytes, its data take 384"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        char want[512];
        snprintf(want, sizeof want, "%s%s", cases[k].path, cases[k].why);
        hq_inventory inv;
        hq_err err = {{0}};
        assert_int_equal(hq_io_scan_isolated(cases[k].path, 0, 30, &inv, &err), HQ_EINPUT);
        assert_string_equal(err.msg, want);
        hq_inventory_free(&inv);
        assert_int_equal(hq_io_scan_isolated(cases[k].path, 1, 30, &inv, &err), 0);
        assert_int_equal(inv.n, 1);
        assert_true(inv.items[0].bad);
        assert_string_equal(inv.items[0].why, want);
        hq_inventory_free(&inv);
        assert_same_scan(cases[k].path, 0);
    }
    /* valid files of each layout pass: contiguous, compact, chunked with a v1 B-tree (partly
     * written, and filtered) and with the newest indexes, never written */
    static const char *const good[] = {"u8_2d_contig", "u8_compact", "u16_chunked_partial", "u16_3d_deflate_fletcher",
                                       "latest_u16_chunked_partial", "u8_3d_stack_chunked", "u8_unallocated_fill"};
    for (size_t k = 0; k < sizeof good / sizeof *good; k++) {
        char path[256];
        snprintf(path, sizeof path, "fuzz/seeds/hdf5/%s.h5", good[k]);
        hq_inventory inv;
        hq_err err = {{0}};
        assert_int_equal(hq_io_scan(path, 0, &inv, &err), 0);
        hq_inventory_free(&inv);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(same_as_in_process),
        cmocka_unit_test(crash_becomes_one_line),
        cmocka_unit_test(hang_cut_at_the_limit),
        cmocka_unit_test(short_storage_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
