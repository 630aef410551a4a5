/* pipeline.h — overlap storage I/O with compute: one I/O thread reads block k+1 and writes block
 * k-1 while the caller's thread computes block k, so a long run costs max(I/O, compute), not the sum.
 *
 * The I/O thread makes every read and write call of the pipeline, in the order
 * R0 R1 W0 R2 W1 ... , and the compute thread makes every compute call, in block order; no two
 * I/O calls ever run at once (libraries that are not thread-safe, such as HDF5, stay safe as long as
 * nothing else calls them meanwhile). At most three blocks are alive at a time. On the first failure
 * both threads stop; finish() is called once for every block that read() produced, failure or not. */
#ifndef HQ_PIPELINE_H
#define HQ_PIPELINE_H

#include <stdint.h>

#include "../core/error.h"

typedef struct hq_pipeline_ops {
    /* Produces block i's pixels in *data (may hand back memory it already had). */
    int (*read)(void *ctx, uint64_t i, void **data, hq_err *err);
    int (*compute)(void *ctx, uint64_t i, void *data, hq_err *err);
    /* NULL: nothing to write (a histogram-only pass). */
    int (*write)(void *ctx, uint64_t i, void *data, hq_err *err);
    /* Releases or keeps block i's pixels; ok says whether every stage of the block succeeded. */
    void (*finish)(void *ctx, uint64_t i, void *data, int ok);
} hq_pipeline_ops;

/* Runs blocks 0..n-1 through read -> compute -> write. Returns the first failure's code (its message
 * in err). threaded = 0 runs everything on the calling thread in the same order (for debugging and
 * for libraries that must stay on one thread). */
int hq_pipeline_run(const hq_pipeline_ops *ops, void *ctx, uint64_t n, int threaded, hq_err *err);

#endif
