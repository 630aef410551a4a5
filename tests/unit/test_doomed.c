/* core/doomed.h: the files registered (and not dropped) are the ones hq_doomed_unlink_all
 * removes, slots come back after a drop, a full table answers -1 without harm, and a slot reused
 * many times from several threads never hands the remover a path that was not registered whole. */
#include <pthread.h>
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

#include "../../core/doomed.h"

static char dir[64];

static void path_of(char *buf, size_t n, int i)
{
    snprintf(buf, n, "%s/f%03d", dir, i);
}

static void touch(int i)
{
    char p[128];
    path_of(p, sizeof p, i);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fclose(f);
}

static int exists(int i)
{
    char p[128];
    struct stat st;
    path_of(p, sizeof p, i);
    return stat(p, &st) == 0;
}

static void registered_ones_go(void **state)
{
    (void)state;
    char p[128];
    int slot[4];
    for (int i = 0; i < 4; i++) {
        touch(i);
        path_of(p, sizeof p, i);
        slot[i] = hq_doomed_add(p);
        assert_true(slot[i] >= 0);
    }
    touch(4); /* never registered */
    hq_doomed_drop(slot[1]);
    hq_doomed_drop(-1);
    hq_doomed_unlink_all();
    assert_false(exists(0));
    assert_true(exists(1));
    assert_false(exists(2));
    assert_false(exists(3));
    assert_true(exists(4));
    for (int i = 0; i < 4; i++)
        if (i != 1)
            hq_doomed_drop(slot[i]);
    hq_doomed_unlink_all();
    assert_true(exists(1) && exists(4));
}

static void full_table_and_reuse(void **state)
{
    (void)state;
    char p[128];
    int slot[HQ_DOOMED_SLOTS];
    for (int i = 0; i < HQ_DOOMED_SLOTS; i++) {
        path_of(p, sizeof p, 100 + i);
        slot[i] = hq_doomed_add(p);
        assert_true(slot[i] >= 0);
    }
    path_of(p, sizeof p, 999);
    assert_int_equal(hq_doomed_add(p), -1);
    hq_doomed_drop(slot[7]);
    touch(500);
    path_of(p, sizeof p, 500);
    assert_int_equal(hq_doomed_add(p), slot[7]);
    hq_doomed_unlink_all();
    assert_false(exists(500));
    for (int i = 0; i < HQ_DOOMED_SLOTS; i++)
        hq_doomed_drop(slot[i]);
    char big[8192];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = 0;
    assert_int_equal(hq_doomed_add(big), -1);
}

/* Writers register and drop two paths of one length in turn, as fast as they can; the remover
 * runs meanwhile. Only whole registered names may be removed: the decoys (every mix of the two
 * names' characters that is not one of them) must all survive. */
static volatile int stop;

static void *churn(void *arg)
{
    const char *const *names = arg;
    for (unsigned k = 0; !stop; k++)
        hq_doomed_drop(hq_doomed_add(names[k & 1]));
    return NULL;
}

static void torn_paths_never_removed(void **state)
{
    (void)state;
    char a[128], b[128];
    snprintf(a, sizeof a, "%s/xxxxxxxx", dir);
    snprintf(b, sizeof b, "%s/yyyyyyyy", dir);
    const char *names[2] = {a, b};
    /* decoys: the names with their last 8 characters mixed (256 mixes, two of them a and b) */
    char decoy[256][128];
    const size_t base = strlen(dir) + 1;
    for (int m = 0; m < 256; m++) {
        snprintf(decoy[m], sizeof decoy[m], "%s", a);
        for (int c = 0; c < 8; c++)
            decoy[m][base + c] = (m >> c) & 1 ? 'y' : 'x';
        if (m != 0 && m != 255) {
            FILE *f = fopen(decoy[m], "w");
            assert_non_null(f);
            fclose(f);
        }
    }
    pthread_t t[3];
    stop = 0;
    for (int i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, churn, names);
    for (int r = 0; r < 300000; r++)
        hq_doomed_unlink_all();
    stop = 1;
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    for (int m = 1; m < 255; m++) {
        struct stat st;
        assert_int_equal(stat(decoy[m], &st), 0);
        unlink(decoy[m]);
    }
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/hq_doomed.XXXXXX");
    if (!mkdtemp(dir))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(registered_ones_go),
        cmocka_unit_test(full_table_and_reuse),
        cmocka_unit_test(torn_paths_never_removed),
    };
    const int rc = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        return 1;
    return rc;
}
