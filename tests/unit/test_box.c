/* test_box.c — io/box.h against an element-by-element reference: random arrays of rank 1 to 4,
 * element sizes 1, 2 and 3, boxes anywhere inside both sides (whole rows, whole arrays, single
 * elements), which must write exactly the box and nothing around it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../io/box.h"

static uint64_t rng_state = 88172645463325252ull;
static uint64_t rnd(uint64_t n)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return ((rng_state * 0x2545F4914F6CDD1Dull) >> 32) % n;
}

static uint64_t volume(const uint64_t *e, int k)
{
    uint64_t v = 1;
    for (int i = 0; i < k; i++)
        v *= e[i];
    return v;
}

/* The byte offset of element idx + off in an array of extent e. */
static uint64_t at(const uint64_t *e, const uint64_t *off, const uint64_t *idx, int k, size_t elem)
{
    uint64_t lin = 0;
    for (int i = 0; i < k; i++)
        lin = lin * e[i] + off[i] + idx[i];
    return lin * elem;
}

static void reference(unsigned char *dst, const uint64_t *de, const uint64_t *doff, const unsigned char *src,
                      const uint64_t *se, const uint64_t *soff, const uint64_t *n, int k, size_t elem)
{
    uint64_t idx[HQ_BOX_MAX_RANK] = {0};
    for (uint64_t c = 0; c < volume(n, k); c++) {
        memcpy(dst + at(de, doff, idx, k, elem), src + at(se, soff, idx, k, elem), elem);
        for (int i = k - 1; i >= 0; i--) {
            if (++idx[i] < n[i])
                break;
            idx[i] = 0;
        }
    }
}

static void one_case(void)
{
    const int k = 1 + (int)rnd(4);
    const size_t elem = 1 + rnd(3);
    uint64_t de[4], se[4], n[4], doff[4], soff[4];
    for (int i = 0; i < k; i++) {
        n[i] = 1 + rnd(6);
        de[i] = n[i] + rnd(4);
        se[i] = n[i] + rnd(4);
        switch (rnd(3)) { /* whole dimensions on both sides, so that runs merge */
        case 0:
            de[i] = se[i] = n[i];
            break;
        default:
            break;
        }
        doff[i] = rnd(de[i] - n[i] + 1);
        soff[i] = rnd(se[i] - n[i] + 1);
    }
    const size_t db = volume(de, k) * elem, sb = volume(se, k) * elem;
    unsigned char *src = malloc(sb), *got = malloc(db), *want = malloc(db);
    assert_non_null(src);
    assert_non_null(got);
    assert_non_null(want);
    for (size_t i = 0; i < sb; i++)
        src[i] = (unsigned char)rnd(256);
    for (size_t i = 0; i < db; i++)
        got[i] = want[i] = (unsigned char)rnd(256);
    reference(want, de, doff, src, se, soff, n, k, elem);
    hq_box_copy((hq_box_side){got, de, doff}, (hq_box_side){src, se, soff}, n, k, elem);
    assert_memory_equal(got, want, db);
    free(src);
    free(got);
    free(want);
}

static void random_boxes(void **state)
{
    (void)state;
    for (int c = 0; c < 5000; c++)
        one_case();
}

/* A block of whole rows into a larger image: one run, nothing around it touched. */
static void whole_rows(void **state)
{
    (void)state;
    const uint64_t e[2] = {64, 96}, n[2] = {40, 96}, off[2] = {7, 0}, zero[2] = {0, 0};
    unsigned char *img = calloc(64 * 96, 1), *blk = malloc(40 * 96);
    assert_non_null(img);
    assert_non_null(blk);
    for (int i = 0; i < 40 * 96; i++)
        blk[i] = (unsigned char)(i % 251 + 1);
    hq_box_copy((hq_box_side){img, e, off}, (hq_box_side){blk, n, zero}, n, 2, 1);
    assert_memory_equal(img + 7 * 96, blk, 40 * 96);
    for (int i = 0; i < 7 * 96; i++)
        assert_int_equal(img[i], 0);
    for (int i = 47 * 96; i < 64 * 96; i++)
        assert_int_equal(img[i], 0);
    free(img);
    free(blk);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(random_boxes),
        cmocka_unit_test(whole_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
