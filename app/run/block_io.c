/* block_io.c — one block's pixels in and out: read (signed samples offset to unsigned, the mask
 * plane after the pixels) or viewed in place in the input (io.h, view_block), and written (the
 * output's writeback kicked, the block claimed in the journal, progress ticked); read and write
 * time counted once however many I/O threads overlap; a pending block's pixels held for pass 2
 * while the memory budget allows. The compute thread and the I/O threads call these alike: what
 * they share is under r->mu, the tick under r->tick_mu. */
#include <pthread.h>
#include <time.h>

#include "../../core/sample.h"
#include "run_internal.h"

enum { IO_READ, IO_WRITE };

/* Progress counts each block's bytes twice: once histogrammed, once written. Several I/O threads
 * may finish blocks at once; the tick (an MPI call) is made by one of them, the others go on. */
void run_tick(run *r)
{
    if (pthread_mutex_trylock(&r->tick_mu) != 0)
        return;
    const uint64_t w = __atomic_load_n(&r->bytes_done, __ATOMIC_RELAXED);
    const uint64_t h = __atomic_load_n(&r->bytes_histogrammed, __ATOMIC_RELAXED);
    hq_progress_tick(&r->prog, __atomic_load_n(&r->pixels_done, __ATOMIC_RELAXED), w + h);
    pthread_mutex_unlock(&r->tick_mu);
}

/* Read and write time is wall time during which at least one read (write) was under way: with
 * several I/O threads, calls that overlap count once, so the phases still add up to the run. */
static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void io_enter(run *r, int k)
{
    pthread_mutex_lock(&r->mu);
    if (r->io_busy[k]++ == 0)
        r->io_since[k] = mono_now();
    pthread_mutex_unlock(&r->mu);
}

static void io_leave(run *r, int k)
{
    pthread_mutex_lock(&r->mu);
    if (--r->io_busy[k] == 0)
        r->t[k == IO_READ ? PH_READ : PH_WRITE] += mono_now() - r->io_since[k];
    pthread_mutex_unlock(&r->mu);
}

int run_block_alloc(run *r, const hq_block *b, void **data, hq_err *err)
{
    *data = hq_block_alloc(r->eng, run_buf_bytes(r, b));
    return *data ? 0
                 : hq_fail(err, HQ_EMEM, "%s: out of memory for a block of %llu bytes (lower --block)",
                           r->inv.items[b->item].src, (unsigned long long)run_buf_bytes(r, b));
}

int run_timed_read(run *r, const hq_block *b, uint64_t item, int collective, void **data, hq_err *err)
{
    io_enter(r, IO_READ);
    *data = NULL;
    if (b && run_block_alloc(r, b, data, err)) {
        io_leave(r, IO_READ);
        return HQ_EMEM;
    }
    int rc = r->io_ops->read_block(r->io, item, b, collective, *data, err);
    if (!rc && *data && r->inv.items[item].sample == HQ_SAMPLE_INT)
        hq_sample_flip(*data, hq_block_pixels(b) * r->inv.items[item].channels, r->inv.items[item].sample_bytes);
    if (!rc && b && hq_mask_plane_bytes(r->mask, b))
        rc = hq_mask_read(r->mask, b, *data, (uint8_t *)*data + run_block_bytes(r, b), err);
    io_leave(r, IO_READ);
    if (rc) {
        hq_block_free(r->eng, *data);
        *data = NULL;
    }
    return rc;
}

/* A streamed block (stream.c) read as a view of the input, where the engine reads host memory
 * in place and remaps out of place (remap_out) and nothing needs the block's own memory: signed
 * samples are offset in place, float data is binned in place, a mask plane travels after the
 * pixels, CLAHE works on pieces. NULL: the block is read. */
const void *run_timed_view(run *r, const hq_block *b)
{
    const hq_item *it = &r->inv.items[b->item];
    if (!r->io_ops->view_block || !r->eng->ops->remap_out || run_is_clahe(r) || it->sample != HQ_SAMPLE_UINT ||
        hq_mask_plane_bytes(r->mask, b))
        return NULL;
    io_enter(r, IO_READ);
    const void *v = r->io_ops->view_block(r->io, b->item, b);
    io_leave(r, IO_READ);
    return v;
}

void run_view_release(run *r, my_block *mb)
{
    if (mb->view)
        r->io_ops->view_release(r->io, mb->view, run_block_bytes(r, mb->b));
    mb->view = NULL;
}

int run_timed_write(run *r, const hq_block *b, uint64_t item, int collective, const void *data, hq_err *err)
{
    io_enter(r, IO_WRITE);
    /* Signed data back from the offset form for the file, and again after: the caller's pixels are
     * const here (and the block is this thread's alone while it is written). */
    const int flip = b && data && r->inv.items[item].sample == HQ_SAMPLE_INT;
    const uint64_t nflip = flip ? hq_block_pixels(b) * r->inv.items[item].channels : 0;
    if (flip)
        hq_sample_flip((void *)data, nflip, r->inv.items[item].sample_bytes);
    int rc = r->io_ops->write_block(r->io, item, b, collective, data, err);
    if (flip)
        hq_sample_flip((void *)data, nflip, r->inv.items[item].sample_bytes);
    if (!rc && b) {
        hq_writeback_kick(r->wb);
        __atomic_add_fetch(&r->pixels_done, hq_block_pixels(b), __ATOMIC_RELAXED);
        __atomic_add_fetch(&r->bytes_done, run_block_bytes(r, b), __ATOMIC_RELAXED);
        /* Compressed datasets written by several ranks are claimed after their round's flush.
         * A journal flush syncs the output to disk: write time too. */
        if (!run_needs_round_flush(r, item))
            rc = run_note_written(r, b, err);
    }
    io_leave(r, IO_WRITE);
    run_tick(r);
    return rc;
}

/* Keeps a pending block's pixels for pass 2 if the budget and the engine allow (hold_ok: the GPU
 * engine's copies from pageable memory are slower than reading the block again into a pinned
 * buffer); otherwise pass 2 re-reads them. */
void run_hold_or_drop(run *r, my_block *mb, void *data)
{
    uint64_t n = run_buf_bytes(r, mb->b);
    if (!hq_block_hold_ok(r->eng, data)) {
        hq_block_free(r->eng, data);
        return;
    }
    pthread_mutex_lock(&r->mu);
    const int keep = r->held_bytes + n <= r->budget;
    if (keep)
        r->held_bytes += n;
    pthread_mutex_unlock(&r->mu);
    if (keep)
        mb->held = data;
    else
        hq_block_free(r->eng, data);
}

/* Done with a block's pixels: held ones leave the budget, freshly read ones are simply freed. */
void run_release(run *r, my_block *mb, void *data)
{
    if (mb->held) {
        pthread_mutex_lock(&r->mu);
        r->held_bytes -= run_buf_bytes(r, mb->b);
        pthread_mutex_unlock(&r->mu);
        hq_block_free(r->eng, mb->held);
        mb->held = NULL;
    } else {
        hq_block_free(r->eng, data);
    }
}
