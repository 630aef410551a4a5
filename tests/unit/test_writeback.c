/* Early writeback: no thread without a file; with one, kicks from several threads while writes go
 * on never block or fail, and stop ends the thread with every kick served; the file's bytes are
 * what was written (writeback only starts the kernel's write-out). */
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "../../app/writeback.h"

static void no_file(void **state)
{
    (void)state;
    assert_null(hq_writeback_start(-1));
    hq_writeback_kick(NULL);
    hq_writeback_stop(NULL);
}

typedef struct writer {
    int fd;
    hq_writeback *wb;
    int part;
} writer;

enum { PIECE = 1 << 16, PIECES = 64, WRITERS = 3 };

static void *write_and_kick(void *arg)
{
    writer *w = arg;
    char *buf = malloc(PIECE);
    for (int k = 0; k < PIECES; k++) {
        memset(buf, 'a' + (w->part + k) % 26, PIECE);
        const off_t at = ((off_t)w->part * PIECES + k) * PIECE;
        if (pwrite(w->fd, buf, PIECE, at) != PIECE)
            abort();
        hq_writeback_kick(w->wb);
    }
    free(buf);
    return NULL;
}

static void kicks_while_writing(void **state)
{
    (void)state;
    char path[] = "/tmp/hq_writeback_XXXXXX"; /* a disk where there is one: tmpfs has no writeback */
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    /* as app/run/journal.c: the journal's read-only descriptor of the output */
    int ro = open(path, O_RDONLY);
    hq_writeback *wb = hq_writeback_start(ro);
    assert_non_null(wb);
    pthread_t th[WRITERS];
    writer w[WRITERS];
    for (int t = 0; t < WRITERS; t++) {
        w[t] = (writer){fd, wb, t};
        assert_int_equal(pthread_create(&th[t], NULL, write_and_kick, &w[t]), 0);
    }
    for (int t = 0; t < WRITERS; t++)
        pthread_join(th[t], NULL);
    hq_writeback_stop(wb);
    assert_int_equal(fdatasync(ro), 0);
    char *buf = malloc(PIECE);
    for (int part = 0; part < WRITERS; part++)
        for (int k = 0; k < PIECES; k += 13) {
            assert_int_equal(pread(fd, buf, PIECE, ((off_t)part * PIECES + k) * PIECE), PIECE);
            assert_int_equal(buf[0], 'a' + (part + k) % 26);
            assert_int_equal(buf[PIECE - 1], 'a' + (part + k) % 26);
        }
    free(buf);
    close(ro);
    close(fd);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(no_file),
        cmocka_unit_test(kicks_while_writing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
