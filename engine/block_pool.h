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

/* Touches every page of fresh memory p[0, bytes) from a few threads at once, so that the kernel's
 * page faults (and the zeroing of each page) are spread over cores instead of landing, one 4 KiB
 * page at a time, in the single I/O thread that reads into it. Pays off for blocks held between
 * the passes, which cannot be recycled: 30 GiB of them are 7.9 million faults. Small buffers are
 * left alone; HQ_PREFAULT=0 turns it off, for benchmarks that compare. */
void hq_prefault(void *p, size_t bytes);

#endif
