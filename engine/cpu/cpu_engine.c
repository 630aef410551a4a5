/* cpu_engine.c — the validation reference, also built to be fast: OpenMP over pieces of each image
 * handed out dynamically, per-thread private histograms merged once, and integer-only pixel math
 * from core/pixel.h.
 * Thread count cannot change a result: histograms are integer sums, remaps are per pixel.
 *
 * The common layouts (8-bit gray, 16-bit gray, 8-bit RGB/RGBA in each colour mode) have loops of
 * their own: sub-histograms with narrow counters, and remaps through tables filled from the LUT by
 * the same pixel.h functions, so they agree with the generic loops bit for bit. A remap that would
 * change nothing is skipped. What each trick buys, measured: bench/README.md.
 *
 * This file holds the engine object; the passes have a file each: histogram.c and remap.c (integer
 * samples, split over threads as work.h says), float_path.c (float32/float64), clahe.c (CLAHE). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "../block_pool.h"
#include "../engine.h"
#include "clahe.h"
#include "float_path.h"
#include "histogram.h"
#include "remap.h"
#include "work.h"

typedef struct cpu_impl {
    int threads;
    hq_block_pool pool;
} cpu_impl;

static int cpu_histogram(hq_engine *e, const hq_block_data *b, const hq_mode *m, uint64_t *const *hist, hq_err *err)
{
    cpu_impl *c = e->impl;
    if (m->fbins)
        return hq_cpu_float_histogram(c->threads, b, m, hist, err);
    return hq_cpu_histogram(c->threads, b, m, hist, err);
}

static int cpu_remap(hq_engine *e, hq_block_data *b, const hq_mode *m, const uint16_t *const *lut, hq_err *err)
{
    cpu_impl *c = e->impl;
    if (m->fbins && b->out)
        return hq_fail(err, HQ_EIO, "cpu engine: internal error: float data remapped out of place");
    if (m->fbins)
        return hq_cpu_float_remap(c->threads, b, m, lut, err);
    return hq_cpu_remap(c->threads, b, m, lut, err);
}

static void cpu_destroy(hq_engine *e)
{
    hq_pool_destroy(&((cpu_impl *)e->impl)->pool);
    free(e->impl);
    free(e);
}

static void cpu_describe(hq_engine *e, char *buf, size_t len)
{
    cpu_impl *c = e->impl;
    snprintf(buf, len, "cpu, %d thread%s", c->threads, c->threads == 1 ? "" : "s");
}

static void *cpu_block_alloc(hq_engine *e, size_t bytes)
{
    return hq_pool_alloc(&((cpu_impl *)e->impl)->pool, bytes);
}

static void cpu_block_free(hq_engine *e, void *p)
{
    hq_pool_free(&((cpu_impl *)e->impl)->pool, p);
}

static int cpu_clahe_histogram(hq_engine *e, const hq_clahe_piece *p, const hq_mode *m, const hq_clahe_geom *g,
                               uint64_t *hist, hq_err *err)
{
    const uint64_t samples = p->rows * p->cols * m->channels;
    return hq_cpu_clahe_histogram(block_threads(samples, ((cpu_impl *)e->impl)->threads), p, m, g, hist, err);
}

static int cpu_clahe_remap(hq_engine *e, hq_clahe_piece *p, const hq_mode *m, const hq_clahe_geom *g,
                           const uint16_t *lut, hq_err *err)
{
    const uint64_t samples = p->rows * p->cols * m->channels;
    return hq_cpu_clahe_remap(block_threads(samples, ((cpu_impl *)e->impl)->threads), p, m, g, lut, err);
}

static int cpu_minmax(hq_engine *e, const hq_block_data *b, const hq_mode *m, hq_frange *mm, hq_err *err)
{
    return hq_cpu_float_minmax(((cpu_impl *)e->impl)->threads, b, m, mm, err);
}

static const hq_engine_ops cpu_ops = {"cpu", cpu_histogram, cpu_remap, cpu_destroy, cpu_describe, cpu_block_alloc,
                                      cpu_block_free, NULL, cpu_clahe_histogram, cpu_clahe_remap, cpu_minmax, 1, NULL,
                                      NULL};

int hq_cpu_engine_create(const hq_engine_cfg *cfg, hq_engine **out, hq_err *err)
{
    hq_engine *e = calloc(1, sizeof *e);
    cpu_impl *c = calloc(1, sizeof *c);
    if (!e || !c) {
        free(e);
        free(c);
        return hq_fail(err, HQ_EMEM, "cpu engine: out of memory");
    }
    hq_pool_init(&c->pool);
    c->threads = cfg->threads > 0 ? cfg->threads : omp_get_num_procs();
    e->ops = &cpu_ops;
    e->impl = c;
    *out = e;
    return 0;
}
