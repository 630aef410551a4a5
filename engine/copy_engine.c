/* copy_engine.c — an engine that leaves pixels alone: `--device copy` reads and writes exactly
 * what a real run does, through the same calls, so a benchmark can put a run's wall time beside the
 * cost of its I/O alone. Never used for real output. */
#include <stdio.h>
#include <stdlib.h>

#include "engine.h"

static int copy_histogram(hq_engine *e, const hq_block_data *b, const hq_mode *m, uint64_t *const *hist, hq_err *err)
{
    (void)e, (void)b, (void)m, (void)hist, (void)err;
    return 0;
}

static int copy_remap(hq_engine *e, hq_block_data *b, const hq_mode *m, const uint16_t *const *lut, hq_err *err)
{
    (void)e, (void)b, (void)m, (void)lut, (void)err;
    return 0;
}

static void copy_destroy(hq_engine *e)
{
    free(e);
}

static void copy_describe(hq_engine *e, char *buf, size_t len)
{
    (void)e;
    snprintf(buf, len, "copy (I/O only, no equalization)");
}

static const hq_engine_ops copy_ops = {"copy", copy_histogram, copy_remap, copy_destroy, copy_describe, NULL, NULL};

int hq_copy_engine_create(hq_engine **out, hq_err *err)
{
    hq_engine *e = calloc(1, sizeof *e);
    if (!e)
        return hq_fail(err, HQ_EMEM, "copy engine: out of memory");
    e->ops = &copy_ops;
    *out = e;
    return 0;
}
