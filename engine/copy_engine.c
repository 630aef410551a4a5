/* copy_engine.c — an engine that leaves pixels alone: `--device copy` reads and writes exactly
 * what a real run does, through the same calls, so a benchmark can put a run's wall time beside the
 * cost of its I/O alone. Never used for real output. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "block_pool.h"
#include "engine.h"

static int copy_histogram(hq_engine *e, const hq_block_data *b, const hq_mode *m, uint64_t *const *hist, hq_err *err)
{
    (void)e, (void)b, (void)m, (void)hist, (void)err;
    return 0;
}

/* Out of place, the pixels still go to out: what a CPU run's remap would store, unchanged. */
static int copy_remap(hq_engine *e, hq_block_data *b, const hq_mode *m, const uint16_t *const *lut, hq_err *err)
{
    (void)e, (void)lut, (void)err;
    if (b->out)
        memcpy(b->out, b->data, b->nseg * b->seg_pixels * m->channels * m->sample_bytes);
    return 0;
}

static int copy_clahe_histogram(hq_engine *e, const hq_clahe_piece *p, const hq_mode *m, const hq_clahe_geom *g,
                                uint64_t *hist, hq_err *err)
{
    (void)e, (void)p, (void)m, (void)g, (void)hist, (void)err;
    return 0;
}

static int copy_clahe_remap(hq_engine *e, hq_clahe_piece *p, const hq_mode *m, const hq_clahe_geom *g,
                            const uint16_t *lut, hq_err *err)
{
    (void)e, (void)p, (void)m, (void)g, (void)lut, (void)err;
    return 0;
}

/* The copy engine allocates block memory as the CPU engine does, so that the I/O baseline pays
 * exactly what a CPU run pays for it. */
static void *copy_block_alloc(hq_engine *e, size_t bytes)
{
    return hq_pool_alloc(e->impl, bytes);
}

static void copy_block_free(hq_engine *e, void *p)
{
    hq_pool_free(e->impl, p);
}

static void copy_destroy(hq_engine *e)
{
    hq_pool_destroy(e->impl);
    free(e->impl);
    free(e);
}

static void copy_describe(hq_engine *e, char *buf, size_t len)
{
    (void)e;
    snprintf(buf, len, "copy (I/O only, no equalization)");
}

static const hq_engine_ops copy_ops = {"copy", copy_histogram, copy_remap, copy_destroy, copy_describe, copy_block_alloc,
                                       copy_block_free, NULL, copy_clahe_histogram, copy_clahe_remap, NULL, 1, NULL,
                                       NULL};

int hq_copy_engine_create(hq_engine **out, hq_err *err)
{
    hq_engine *e = calloc(1, sizeof *e);
    hq_block_pool *pool = malloc(sizeof *pool);
    if (!e || !pool) {
        free(e);
        free(pool);
        return hq_fail(err, HQ_EMEM, "copy engine: out of memory");
    }
    hq_pool_init(pool);
    e->impl = pool;
    e->ops = &copy_ops;
    *out = e;
    return 0;
}
