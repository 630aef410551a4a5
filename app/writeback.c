#define _GNU_SOURCE /* sync_file_range */
#include "writeback.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>

struct hq_writeback {
    int fd;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int kicked, stop;
};

static void *writeback_thread(void *arg)
{
    hq_writeback *wb = arg;
    pthread_mutex_lock(&wb->mu);
    for (;;) {
        while (!wb->kicked && !wb->stop)
            pthread_cond_wait(&wb->cv, &wb->mu);
        if (wb->stop)
            break;
        wb->kicked = 0;
        pthread_mutex_unlock(&wb->mu);
        /* Errors are the journal's fdatasync's to report: this is only a head start. */
        (void)sync_file_range(wb->fd, 0, 0, SYNC_FILE_RANGE_WRITE);
        pthread_mutex_lock(&wb->mu);
    }
    pthread_mutex_unlock(&wb->mu);
    return NULL;
}

hq_writeback *hq_writeback_start(int fd)
{
    if (fd < 0)
        return NULL;
    hq_writeback *wb = calloc(1, sizeof *wb);
    if (!wb)
        return NULL;
    wb->fd = fd;
    pthread_mutex_init(&wb->mu, NULL);
    pthread_cond_init(&wb->cv, NULL);
    if (pthread_create(&wb->th, NULL, writeback_thread, wb) != 0) {
        pthread_mutex_destroy(&wb->mu);
        pthread_cond_destroy(&wb->cv);
        free(wb);
        return NULL;
    }
    return wb;
}

void hq_writeback_kick(hq_writeback *wb)
{
    if (!wb)
        return;
    pthread_mutex_lock(&wb->mu);
    wb->kicked = 1;
    pthread_cond_signal(&wb->cv);
    pthread_mutex_unlock(&wb->mu);
}

void hq_writeback_stop(hq_writeback *wb)
{
    if (!wb)
        return;
    pthread_mutex_lock(&wb->mu);
    wb->stop = 1;
    pthread_cond_signal(&wb->cv);
    pthread_mutex_unlock(&wb->mu);
    pthread_join(wb->th, NULL);
    pthread_mutex_destroy(&wb->mu);
    pthread_cond_destroy(&wb->cv);
    free(wb);
}
