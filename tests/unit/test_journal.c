/* test_journal.c — the journal (jobs/journal.h): records written by several logs load back sorted
 * and deduplicated; a torn last record (a kill in mid-write) ends a log without failing it; a
 * record is only in the log after a flush, and the flush syncs the output first; a different id
 * is refused naming what differs; pack/unpack round trips; a big record goes to the log at once;
 * a rank log of another journal, copied in, is not read. */
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

#include "../../jobs/journal.h"

static char out[256];

static int setup(void **state)
{
    (void)state;
    char tmpl[] = "/tmp/hq_journal_XXXXXX";
    assert_non_null(mkdtemp(tmpl));
    snprintf(out, sizeof out, "%s/out.h5", tmpl);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    hq_journal_remove(out);
    char dir[256];
    snprintf(dir, sizeof dir, "%s", out);
    *strrchr(dir, '/') = '\0';
    rmdir(dir);
    return 0;
}

static int syncs;
static int count_sync(void *ctx, hq_err *err)
{
    (void)ctx, (void)err;
    syncs++;
    return 0;
}

static const char *ID = "histeq_dist journal 2\noptions scope=auto method=equalize\ninput x items 1 fingerprint 1\n";

static void test_records_round_trip(void **state)
{
    (void)state;
    hq_err err;
    assert_int_equal(hq_journal_create(out, ID, &err), 0);
    assert_true(hq_journal_exists(out));
    hq_journal *a, *b;
    assert_int_equal(hq_journal_open(out, 0, count_sync, NULL, 1e9, &a, &err), 0);
    assert_int_equal(hq_journal_open(out, 1, count_sync, NULL, 1e9, &b, &err), 0);
    const hq_block b1 = {2, 0, 1, 10, 20, 64, 128}, b2 = {1, 3, 4, 0, 5, 0, 8}, b3 = {1, 0, 3, 0, 5, 0, 8};
    const hq_block b1_left = {2, 0, 1, 10, 20, 0, 64}; /* the same rows, another tile */
    const uint64_t h[3] = {5, (uint64_t)1 << 40, 7};
    syncs = 0;
    assert_int_equal(hq_journal_note_block(a, &b1, &err), 0);
    assert_int_equal(hq_journal_note_hist(a, 9, h, 3, &err), 0);
    assert_int_equal(hq_journal_note_block(b, &b2, &err), 0);
    assert_int_equal(hq_journal_note_hist(b, 9, h, 3, &err), 0); /* the same group from two ranks */
    hq_journal_state st;
    /* Nothing flushed yet: nothing claimed. */
    assert_int_equal(hq_journal_load(out, ID, NULL, &st, &err), 0);
    assert_int_equal(st.nblocks, 0);
    hq_journal_state_free(&st);
    assert_int_equal(hq_journal_flush(a, &err), 0);
    assert_int_equal(hq_journal_flush(b, &err), 0);
    assert_int_equal(syncs, 2);
    assert_int_equal(hq_journal_note_block(b, &b3, &err), 0); /* never flushed */
    hq_journal_close(a);
    hq_journal_close(b);
    assert_int_equal(hq_journal_load(out, ID, NULL, &st, &err), 0);
    assert_int_equal(st.nblocks, 2);
    assert_int_equal(st.nhists, 1);
    assert_true(hq_journal_has_block(&st, &b1));
    assert_true(hq_journal_has_block(&st, &b2));
    assert_false(hq_journal_has_block(&st, &b3));
    assert_false(hq_journal_has_block(&st, &b1_left));
    const hq_journal_hist *g = hq_journal_find_hist(&st, 9);
    assert_non_null(g);
    assert_int_equal(g->n, 3);
    assert_memory_equal(g->counts, h, sizeof h);
    /* pack / unpack */
    unsigned char *buf;
    uint64_t len;
    assert_int_equal(hq_journal_state_pack(&st, &buf, &len, &err), 0);
    hq_journal_state st2;
    assert_int_equal(hq_journal_state_unpack(buf, len, &st2, &err), 0);
    assert_int_equal(st2.nblocks, 2);
    assert_true(hq_journal_has_block(&st2, &b2));
    assert_memory_equal(hq_journal_find_hist(&st2, 9)->counts, h, sizeof h);
    hq_journal_state_free(&st2);
    assert_int_not_equal(hq_journal_state_unpack(buf, len - 8, &st2, &err), 0);
    free(buf);
    hq_journal_state_free(&st);
}

static void test_torn_record_ends_the_log(void **state)
{
    (void)state;
    hq_err err;
    assert_int_equal(hq_journal_create(out, ID, &err), 0);
    hq_journal *a;
    assert_int_equal(hq_journal_open(out, 0, NULL, NULL, 0, &a, &err), 0); /* flush at every record */
    for (uint64_t k = 0; k < 10; k++) {
        const hq_block b = {0, k, k + 1, 0, 4, 0, 4};
        assert_int_equal(hq_journal_note_block(a, &b, &err), 0);
    }
    hq_journal_close(a);
    char log[300];
    snprintf(log, sizeof log, "%s.journal/rank-000000.log", out);
    struct stat s;
    assert_int_equal(stat(log, &s), 0);
    assert_int_equal(truncate(log, s.st_size - 7), 0); /* the last record torn */
    hq_journal_state st;
    assert_int_equal(hq_journal_load(out, ID, NULL, &st, &err), 0);
    assert_int_equal(st.nblocks, 9);
    hq_journal_state_free(&st);
    /* A flipped byte in the middle: the log ends before it. */
    FILE *f = fopen(log, "r+b");
    assert_non_null(f);
    fseek(f, s.st_size / 2, SEEK_SET);
    int c = fgetc(f);
    fseek(f, s.st_size / 2, SEEK_SET);
    fputc(c ^ 0x55, f);
    fclose(f);
    assert_int_equal(hq_journal_load(out, ID, NULL, &st, &err), 0);
    assert_true(st.nblocks < 9);
    hq_journal_state_free(&st);
}

/* A LUT record of 8 MiB (a 16-bit image's CLAHE tile LUTs) goes straight to the log, between
 * buffered block records, and loads back whole; the blocks are claimed only by the flush. A
 * record torn inside its payload ends the log there. */
static void test_big_record_written_at_once(void **state)
{
    (void)state;
    hq_err err;
    assert_int_equal(hq_journal_create(out, ID, &err), 0);
    hq_journal *a;
    assert_int_equal(hq_journal_open(out, 0, count_sync, NULL, 1e9, &a, &err), 0);
    const uint64_t n = (uint64_t)64 * 65536;
    uint16_t *lut = malloc(n * sizeof *lut);
    assert_non_null(lut);
    for (uint64_t i = 0; i < n; i++)
        lut[i] = (uint16_t)(i * 2654435761u >> 7);
    const hq_block b1 = {0, 0, 1, 0, 4, 0, 4}, b2 = {0, 1, 2, 0, 4, 0, 4};
    assert_int_equal(hq_journal_note_block(a, &b1, &err), 0);
    assert_int_equal(hq_journal_note_lut(a, 3, lut, n, &err), 0);
    char log[300];
    snprintf(log, sizeof log, "%s.journal/rank-000000.log", out);
    struct stat s;
    assert_int_equal(stat(log, &s), 0);
    assert_true((uint64_t)s.st_size > n * sizeof *lut); /* in the log before any flush */
    hq_journal_state st;
    assert_int_equal(hq_journal_load(out, ID, NULL, &st, &err), 0);
    assert_int_equal(st.nblocks, 0);
    assert_int_equal(st.nluts, 1);
    hq_journal_state_free(&st);
    assert_int_equal(hq_journal_note_block(a, &b2, &err), 0);
    assert_int_equal(hq_journal_flush(a, &err), 0);
    hq_journal_close(a);
    assert_int_equal(hq_journal_load(out, ID, NULL, &st, &err), 0);
    assert_int_equal(st.nblocks, 2);
    const hq_journal_lut *l = hq_journal_find_lut(&st, 3);
    assert_non_null(l);
    assert_int_equal(l->n, n);
    assert_memory_equal(l->lut, lut, n * sizeof *lut);
    hq_journal_state_free(&st);
    /* Cut inside the LUT's payload: nothing after it, and not the LUT, loads. */
    assert_int_equal(truncate(log, s.st_size - 1000), 0);
    assert_int_equal(hq_journal_load(out, ID, NULL, &st, &err), 0);
    assert_int_equal(st.nluts, 0);
    hq_journal_state_free(&st);
    free(lut);
}

static void test_other_id_is_refused(void **state)
{
    (void)state;
    hq_err err;
    assert_int_equal(hq_journal_create(out, ID, &err), 0);
    hq_journal_state st;
    const char *opts = "histeq_dist journal 2\noptions scope=auto method=stretch\ninput x items 1 fingerprint 1\n";
    assert_int_equal(hq_journal_load(out, opts, NULL, &st, &err), HQ_EUSAGE);
    assert_non_null(strstr(err.msg, "other options"));
    const char *input = "histeq_dist journal 2\noptions scope=auto method=equalize\ninput x items 1 fingerprint 2\n";
    assert_int_equal(hq_journal_load(out, input, NULL, &st, &err), HQ_EUSAGE);
    assert_non_null(strstr(err.msg, "input changed"));
    assert_non_null(strstr(err.msg, out));
    /* A journal of the byte-wise checksums (format 1) is another version's: refused, not misread. */
    hq_journal_remove(out);
    assert_int_equal(hq_journal_create(out, "histeq_dist journal 1\noptions scope=auto method=equalize\n", &err), 0);
    assert_int_equal(hq_journal_load(out, ID, NULL, &st, &err), HQ_EUSAGE);
    assert_non_null(strstr(err.msg, "another version"));
}

/* A log open in a live process marks the journal in use (flock), for another process or another
 * open of it alike; closed, it no longer does. */
static void test_open_log_marks_it_in_use(void **state)
{
    (void)state;
    hq_err err;
    assert_int_equal(hq_journal_create(out, ID, &err), 0);
    assert_false(hq_journal_in_use(out));
    hq_journal *a, *again;
    assert_int_equal(hq_journal_open(out, 3, NULL, NULL, 1e9, &a, &err), 0);
    assert_true(hq_journal_in_use(out));
    assert_int_equal(hq_journal_open(out, 3, NULL, NULL, 1e9, &again, &err), HQ_EUSAGE);
    assert_non_null(strstr(err.msg, "in use by another run"));
    hq_journal_close(a);
    assert_false(hq_journal_in_use(out));
}

/* A rank log of another journal (another run's output, copied in) is not read: its claims would
 * leave those blocks unwritten in this output. The log this journal wrote still is. */
static void test_another_journals_log_is_not_read(void **state)
{
    (void)state;
    hq_err err;
    static const char *OTHER = "histeq_dist journal 2\noptions scope=auto method=stretch\ninput y items 1 fingerprint 2\n";
    const hq_block mine = {0, 0, 1, 0, 8, 0, 8}, theirs = {0, 1, 2, 0, 8, 0, 8};
    hq_journal *j;
    char log0[512], log1[512], cmd[1200];
    snprintf(log0, sizeof log0, "%s.journal/rank-000000.log", out);
    snprintf(log1, sizeof log1, "%s.journal/rank-000001.log", out);
    /* Another run's journal, its rank 0 log kept aside. */
    assert_int_equal(hq_journal_create(out, OTHER, &err), 0);
    assert_int_equal(hq_journal_open(out, 0, NULL, NULL, 0, &j, &err), 0);
    assert_int_equal(hq_journal_note_block(j, &theirs, &err), 0);
    hq_journal_close(j);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s.foreign'", log0, out);
    assert_int_equal(system(cmd), 0);
    /* This run's journal, and the foreign log copied in as its rank 1. */
    assert_int_equal(hq_journal_create(out, ID, &err), 0);
    assert_int_equal(hq_journal_open(out, 0, NULL, NULL, 0, &j, &err), 0);
    assert_int_equal(hq_journal_note_block(j, &mine, &err), 0);
    hq_journal_close(j);
    snprintf(cmd, sizeof cmd, "cp '%s.foreign' '%s' && rm '%s.foreign'", out, log1, out);
    assert_int_equal(system(cmd), 0);
    hq_journal_state st;
    assert_int_equal(hq_journal_load(out, ID, NULL, &st, &err), 0);
    assert_int_equal(st.nblocks, 1);
    assert_true(hq_journal_has_block(&st, &mine));
    assert_false(hq_journal_has_block(&st, &theirs));
    hq_journal_state_free(&st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_records_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_torn_record_ends_the_log, setup, teardown),
        cmocka_unit_test_setup_teardown(test_big_record_written_at_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_other_id_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_log_marks_it_in_use, setup, teardown),
        cmocka_unit_test_setup_teardown(test_another_journals_log_is_not_read, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
