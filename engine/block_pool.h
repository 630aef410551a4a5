/* block_pool.h — recycled host buffers for blocks, for the engines without memory of their own
 * kind (CPU, copy). A run streams blocks of one or two sizes; handing a freed buffer back out
 * spares the page faults and zeroing of a fresh mapping on every block (a 256 MiB block costs
 * tens of milliseconds of faults), which would otherwise slow the I/O thread. Thread-safe. */
#ifndef HQ_BLOCK_POOL_H
#define HQ_BLOCK_POOL_H

#include <pthread.h>
#include <stddef.h>

#define HQ_POOL_KEEP 8

typedef struct hq_block_pool {
    pthread_mutex_t mu;
    void *spare[HQ_POOL_KEEP]; /* freed buffers kept for reuse */
    int nspare;
} hq_block_pool;

void hq_pool_init(hq_block_pool *p);
/* A buffer of at least `bytes`, 64-byte aligned: a kept one that fits without wasting half, else new. */
void *hq_pool_alloc(hq_block_pool *p, size_t bytes);
void hq_pool_free(hq_block_pool *p, void *buf);
/* Frees every kept buffer (buffers still out must be returned with hq_pool_free first). */
void hq_pool_destroy(hq_block_pool *p);

#endif
