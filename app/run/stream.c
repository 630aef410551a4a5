/* stream.c — this rank's own blocks through the I/O pipeline (app/pipeline.h): I/O threads read the
 * next blocks and write the finished ones while this thread computes. One kind of stream per job:
 * ranges (pass 0, nothing written), fused and histogram (pass 1), remap (pass 2). Where the engine
 * and the input allow (block_io.c, run_timed_view), a block is not read but viewed where it lies in
 * the input: counted there, and remapped from there into a buffer of its own, which is written; a
 * viewed block is never held between the passes. A bad PNG under --on-error skip is listed with its
 * block and goes on as an empty one. */
#include <stdlib.h>
#include <string.h>

#include "run_internal.h"

typedef struct stream {
    run *r;
    stream_kind kind;
    my_block **list;
} stream;

/* A bad PNG met while decoding: with --on-error skip it is listed and left out, not fatal. The
 * reason stays with its block (I/O threads decode in any order), listed in block order at the end. */
static int maybe_skip(run *r, my_block *mb, int rc, const hq_err *err)
{
    if (!rc || r->o->on_error != HQ_ONERR_SKIP || r->inv.format != HQ_FMT_PNG || rc != HQ_EINPUT)
        return rc;
    free(mb->why);
    mb->why = strdup(err->msg);
    __atomic_add_fetch(&r->nskipped, 1, __ATOMIC_RELAXED);
    mb->done = 1;
    return 0;
}

static int stream_read(void *ctx, uint64_t i, void **data, hq_err *err)
{
    stream *st = ctx;
    my_block *mb = st->list[i];
    /* Passes 0 and 1 write nothing, and writes are where progress is told: theirs is told here, on
     * the I/O thread (the one thread of a rank that calls MPI meanwhile). Without it a long pass 1
     * (a huge image, --scope global) left a batch log silent for half the run. */
    if (st->kind == STREAM_RANGE || st->kind == STREAM_HIST)
        run_tick(st->r);
    if (mb->held) {
        *data = mb->held;
        return 0;
    }
    if (st->kind != STREAM_RANGE && (mb->view = run_timed_view(st->r, mb->b)) != NULL) {
        mb->viewed = 1;
        *data = (void *)mb->view;
        return 0;
    }
    int rc = run_timed_read(st->r, mb->b, mb->b->item, 0, data, err);
    /* A bad file under --on-error skip: listed, and the block goes on as an empty one. */
    return maybe_skip(st->r, mb, rc, err);
}

/* A viewed block is remapped into a buffer of its own, which is what gets written; the view is
 * given back as soon as the remap has read it. */
static int compute_viewed(run *r, stream_kind kind, my_block *mb, hq_err *err)
{
    const hq_block *b = mb->b;
    void *view = (void *)mb->view;
    if (kind == STREAM_HIST) /* pass 2 takes another view: nothing is held between the passes */
        return run_histogram_pending(r, b, view, err);
    int rc = run_block_alloc(r, b, &mb->out, err);
    if (!rc)
        rc = kind == STREAM_FUSED ? run_equalize_fused(r, b, view, mb->out, err)
                                  : run_remap_pending(r, b, view, mb->out, err);
    run_view_release(r, mb);
    return rc;
}

static int stream_compute(void *ctx, uint64_t i, void *data, hq_err *err)
{
    stream *st = ctx;
    my_block *mb = st->list[i];
    const hq_block *b = mb->b;
    if (!data)
        return 0;
    if (st->kind == STREAM_RANGE)
        return run_range_block(st->r, b, data, err);
    if (mb->viewed)
        return compute_viewed(st->r, st->kind, mb, err);
    if (st->kind == STREAM_FUSED)
        return run_equalize_fused(st->r, b, data, NULL, err);
    if (st->kind == STREAM_HIST)
        return run_histogram_pending(st->r, b, data, err);
    return run_remap_pending(st->r, b, data, NULL, err);
}

static int stream_write(void *ctx, uint64_t i, void *data, hq_err *err)
{
    stream *st = ctx;
    my_block *mb = st->list[i];
    if (mb->viewed)
        data = mb->out;
    return data ? run_timed_write(st->r, mb->b, mb->b->item, 0, data, err) : 0;
}

static void stream_finish(void *ctx, uint64_t i, void *data, int ok)
{
    stream *st = ctx;
    my_block *mb = st->list[i];
    if (mb->viewed) { /* the view, if the compute never gave it back; the buffer remapped into */
        run_view_release(st->r, mb);
        data = mb->out;
        mb->out = NULL;
        mb->viewed = 0;
    }
    if (st->kind == STREAM_RANGE) { /* pass 0 only looks */
        hq_block_free(st->r->eng, data);
        return;
    }
    if (st->kind == STREAM_HIST && ok && data) {
        run_hold_or_drop(st->r, mb, data);
        return;
    }
    run_release(st->r, mb, data);
    if (st->kind != STREAM_HIST)
        mb->done = 1;
}

int run_stream(run *r, stream_kind kind, my_block **list, uint64_t n, hq_err *err)
{
    static const hq_pipeline_ops with_write = {stream_read, stream_compute, stream_write, stream_finish};
    static const hq_pipeline_ops hist_only = {stream_read, stream_compute, NULL, stream_finish};
    stream st = {r, kind, list};
    return hq_pipeline_run(kind == STREAM_HIST || kind == STREAM_RANGE ? &hist_only : &with_write, &st, n, &r->pipe, err);
}

int run_stream_own(run *r, stream_kind kind, int (*pick)(const run *, const my_block *), hq_err *err)
{
    my_block **list = malloc((r->nmine ? r->nmine : 1) * sizeof *list);
    if (!list)
        return hq_fail(err, HQ_EMEM, "out of memory listing blocks");
    uint64_t n = 0;
    for (uint64_t j = 0; j < r->nmine; j++)
        if (!r->item_lockstep[r->mine[j].b->item] && pick(r, &r->mine[j]))
            list[n++] = &r->mine[j];
    const int rc = run_stream(r, kind, list, n, err);
    free(list);
    return rc;
}
