/* test_outname.c — the default output name (app/outname.h): the suffix goes before the base
 * name's last extension (files), after the name (directories, trailing slashes dropped), or
 * replaces the extension (list files, whose output is a directory); names that cannot carry a
 * suffix are refused. hq_default_output is checked against real files and directories. */
#define _DEFAULT_SOURCE /* realpath, mkdtemp */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../app/outname.h"

static void expect_name(const char *path, hq_outname_kind kind, const char *suffix, const char *want)
{
    char *got = NULL;
    hq_err err;
    assert_int_equal(hq_output_name(path, kind, suffix, &got, &err), 0);
    assert_string_equal(got, want);
    free(got);
}

static void expect_refused(const char *path, hq_outname_kind kind)
{
    char *got = NULL;
    hq_err err;
    assert_int_equal(hq_output_name(path, kind, "_eq", &got, &err), HQ_EUSAGE);
    assert_null(got);
    assert_non_null(strstr(err.msg, "--output"));
}

static void suffix_by_method_name(void **state)
{
    (void)state;
    assert_string_equal(hq_output_suffix("equalize"), "_eq");
    assert_string_equal(hq_output_suffix("stretch"), "_eq");
    assert_string_equal(hq_output_suffix("clahe"), "_clahe");
    assert_string_equal(hq_output_suffix("match"), "_match");
    assert_string_equal(hq_output_suffix(NULL), "_eq");
}

static void files(void **state)
{
    (void)state;
    expect_name("dataset.h5", HQ_OUTNAME_FILE, "_eq", "dataset_eq.h5");
    expect_name("/data/scans/ct.v2.h5", HQ_OUTNAME_FILE, "_eq", "/data/scans/ct.v2_eq.h5");
    expect_name("a.png", HQ_OUTNAME_FILE, "_clahe", "a_clahe.png");
    expect_name("noext", HQ_OUTNAME_FILE, "_eq", "noext_eq");
    expect_name("dir.d/noext", HQ_OUTNAME_FILE, "_eq", "dir.d/noext_eq");
    expect_name(".hidden", HQ_OUTNAME_FILE, "_eq", ".hidden_eq");
    expect_name("./a.png", HQ_OUTNAME_FILE, "_match", "./a_match.png");
}

static void directories_and_lists(void **state)
{
    (void)state;
    expect_name("photos/", HQ_OUTNAME_DIR, "_eq", "photos_eq");
    expect_name("photos//", HQ_OUTNAME_DIR, "_eq", "photos_eq");
    expect_name("/data/slides.v1", HQ_OUTNAME_DIR, "_eq", "/data/slides.v1_eq");
    expect_name("list.txt", HQ_OUTNAME_LIST, "_eq", "list_eq");
    expect_name("in/slides.list", HQ_OUTNAME_LIST, "_clahe", "in/slides_clahe");
    expect_name("paths", HQ_OUTNAME_LIST, "_eq", "paths_eq");
    expect_refused("/", HQ_OUTNAME_DIR);
    expect_refused(".", HQ_OUTNAME_DIR);
    expect_refused("..", HQ_OUTNAME_DIR);
    expect_refused("a/..", HQ_OUTNAME_DIR);
    expect_refused("", HQ_OUTNAME_FILE);
}

/* From an inventory as the scan leaves it: the kind comes from the format and the file system. */
static void from_inventory(void **state)
{
    (void)state;
    char dir[] = "/tmp/hq_outname_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char pngdir[512], list[512], cwd[4096], want[4200];
    snprintf(pngdir, sizeof pngdir, "%s/photos", dir);
    snprintf(list, sizeof list, "%s/set.txt", dir);
    assert_int_equal(mkdir(pngdir, 0755), 0);
    FILE *f = fopen(list, "w");
    assert_non_null(f);
    fclose(f);
    hq_err err;
    char *got = NULL;
    hq_inventory inv = {.format = HQ_FMT_HDF5, .root = "scans.h5"};
    assert_int_equal(hq_default_output(&inv, "_eq", &got, &err), 0);
    assert_string_equal(got, "scans_eq.h5");
    free(got);
    inv = (hq_inventory){.format = HQ_FMT_PNG, .root = "one.png", .root_is_dir = 0};
    assert_int_equal(hq_default_output(&inv, "_eq", &got, &err), 0);
    assert_string_equal(got, "one_eq.png");
    free(got);
    inv = (hq_inventory){.format = HQ_FMT_PNG, .root = pngdir, .root_is_dir = 1};
    assert_int_equal(hq_default_output(&inv, "_eq", &got, &err), 0);
    snprintf(want, sizeof want, "%s_eq", pngdir);
    assert_string_equal(got, want);
    free(got);
    inv = (hq_inventory){.format = HQ_FMT_PNG, .root = list, .root_is_dir = 1};
    assert_int_equal(hq_default_output(&inv, "_eq", &got, &err), 0);
    snprintf(want, sizeof want, "%s/set_eq", dir);
    assert_string_equal(got, want);
    free(got);
    /* "." is named by what it really is. */
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(pngdir), 0);
    inv = (hq_inventory){.format = HQ_FMT_PNG, .root = ".", .root_is_dir = 1};
    assert_int_equal(hq_default_output(&inv, "_eq", &got, &err), 0);
    assert_int_equal(chdir(cwd), 0);
    char real[4096];
    assert_non_null(realpath(pngdir, real));
    snprintf(want, sizeof want, "%s_eq", real);
    assert_string_equal(got, want);
    free(got);
    unlink(list);
    rmdir(pngdir);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(suffix_by_method_name),
        cmocka_unit_test(files),
        cmocka_unit_test(directories_and_lists),
        cmocka_unit_test(from_inventory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
