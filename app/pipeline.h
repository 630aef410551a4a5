/* pipeline.h — overlap storage I/O with compute: I/O threads read blocks ahead and write finished
 * ones while the caller's thread computes, so a long run costs about max(read, compute, write), not
 * their sum.
 *
 * The caller's thread makes every compute call, in block order. Reads start in block order; writes
 * start in block order too, each after its block's compute. With io_threads = 1 one I/O thread
 * makes every read and write, one at a time (a format whose calls must not run at once, such as
 * HDF5 through the library, stays safe as long as nothing else calls it meanwhile); with more,
 * reads and writes of different blocks run at the same time on different threads and finish in any
 * order. A free I/O thread writes a computed block first, unless the compute thread has no block
 * read ahead: then it reads. At most `depth` blocks are alive (being read, waiting, computed or
 * being written) at a time: that is what the caller's memory budget must count.
 *
 * On the first failure no new read, compute or write starts; calls under way finish. finish() is
 * called exactly once for every block that read() produced, failure or not, from whichever thread
 * ends the block (its writer, the compute thread when nothing is written, or the caller at the
 * end). */
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

typedef struct hq_pipeline_cfg {
    /* 0: everything on the calling thread, block by block (debugging: HQ_SERIAL_IO=1);
     * 1: one I/O thread; N > 1: N I/O threads, whose reads and writes may run at once. */
    int io_threads;
    /* The most blocks alive at once; below HQ_PIPELINE_MIN_DEPTH it is raised to that. */
    int depth;
} hq_pipeline_cfg;

/* One block being read or written, one being computed, one waiting between them. */
#define HQ_PIPELINE_MIN_DEPTH 3

/* The depth that keeps io_threads I/O threads and the compute thread busy: one block per I/O
 * thread, one being computed, one waiting (HQ_PIPELINE_MIN_DEPTH for one I/O thread). */
int hq_pipeline_depth_for(int io_threads);

/* Runs blocks 0..n-1 through read -> compute -> write. Returns the first failure's code (its message
 * in err). */
int hq_pipeline_run(const hq_pipeline_ops *ops, void *ctx, uint64_t n, const hq_pipeline_cfg *cfg, hq_err *err);

#endif
