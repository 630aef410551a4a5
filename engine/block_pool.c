#define _GNU_SOURCE /* MADV_HUGEPAGE */
#include "block_pool.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Each buffer carries its size in a 64-byte header, so the data stays 64-byte aligned. */
#define HEAD 64
#define HUGE_MIN ((size_t)8 << 20)
#define HUGE_ALIGN ((size_t)2 << 20)

static size_t size_of(void *buf)
{
    return *(size_t *)((char *)buf - HEAD);
}

void hq_pool_init(hq_block_pool *p)
{
    pthread_mutex_init(&p->mu, NULL);
    p->nspare = 0;
}

void *hq_pool_alloc(hq_block_pool *p, size_t bytes)
{
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < p->nspare; i++) {
        size_t s = size_of(p->spare[i]);
        if (s >= bytes && s / 2 <= bytes) {
            void *b = p->spare[i];
            p->spare[i] = p->spare[--p->nspare];
            pthread_mutex_unlock(&p->mu);
            return b;
        }
    }
    pthread_mutex_unlock(&p->mu);
    void *raw = NULL;
    const int huge = bytes >= HUGE_MIN && !(getenv("HQ_THP") && strcmp(getenv("HQ_THP"), "0") == 0);
    if (bytes > SIZE_MAX - HEAD || posix_memalign(&raw, huge ? HUGE_ALIGN : HEAD, bytes + HEAD) != 0)
        return NULL;
    /* A fresh block is written once by a read (or a decode) and then faulted in page by page: with
     * transparent huge pages ("madvise", the usual setting) a 2 MiB fault replaces 512 small ones. */
    if (huge)
        madvise(raw, bytes + HEAD, MADV_HUGEPAGE);
    *(size_t *)raw = bytes;
    return (char *)raw + HEAD;
}

void hq_pool_free(hq_block_pool *p, void *buf)
{
    if (!buf)
        return;
    pthread_mutex_lock(&p->mu);
    if (p->nspare < HQ_POOL_KEEP) {
        p->spare[p->nspare++] = buf;
        buf = NULL;
    }
    pthread_mutex_unlock(&p->mu);
    if (buf)
        free((char *)buf - HEAD);
}

void hq_pool_destroy(hq_block_pool *p)
{
    for (int i = 0; i < p->nspare; i++)
        free((char *)p->spare[i] - HEAD);
    p->nspare = 0;
    pthread_mutex_destroy(&p->mu);
}
