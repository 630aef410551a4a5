/* engine.h — the one interface behind which the CPU and GPU engines sit.
 *
 * An engine turns blocks of pixels into histograms and applies LUTs to them; it knows nothing of
 * files, ranks or scopes. A block holds nseg equal segments back to back (seg_pixels pixels each,
 * e.g. the slices of a stack), each with its own histogram and LUT, so that many small images go
 * through in one call. Histograms are accumulated (+=), never overwritten: the caller zeroes them.
 * Results are bit-identical across engines and thread counts.
 *
 * Float data (hq_mode.fbins, core/fbin.h): minmax reduces each segment's finite extremes (pass 0),
 * histogram bins each sample by its segment's hq_fbin and fails with HQ_EINPUT on an infinite
 * sample (the caller names the file), and remap writes lut[bin] / (bins - 1) in the samples' own
 * float type, leaving NaN as it is. */
#ifndef HQ_ENGINE_H
#define HQ_ENGINE_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "../core/clahe.h"
#include "../core/error.h"
#include "../core/fbin.h"
#include "../core/mode.h"

typedef struct hq_block_data {
    void *data;          /* host memory, channels interleaved, native-endian samples */
    uint64_t nseg;       /* segments (images) in the block */
    uint64_t seg_pixels; /* pixels per segment */
    int same_as_histogram; /* remap only: these exact pixels went through histogram() just before,
                              unchanged, so an engine may use the copy it kept (the GPU skips an
                              upload). A pointer alone cannot say it: a freed block's address can
                              come back holding another block. */
    const uint8_t *mask; /* NULL, or one byte per pixel (pixel order, like data): histogram() counts
                            only pixels whose byte is non-zero; remap() leaves the pixels whose byte
                            is zero exactly as they are (the driver hands remap a mask only for
                            --mask-apply inside). */
    const hq_fbin *fbin;   /* float modes (m->fbins): nseg binnings, one per segment; else NULL */
    void *out;             /* remap only: NULL remaps data in place; else the remapped pixels go to
                              out (as many bytes, the same layout) and data is only read (a view of
                              the input file, app/run/stream.c). Given only to an engine whose
                              remap_out is set, and never for float modes. */
} hq_block_data;

/* CLAHE (core/clahe.h): a rectangle of one image, rows [r0, r0 + rows) x columns [c0, c0 + cols),
 * stored densely row by row, channels interleaved. */
typedef struct hq_clahe_piece {
    void *data;
    uint64_t r0, c0, rows, cols;
    int same_as_histogram; /* clahe_remap only: the engine's last clahe_histogram was of this piece
                              (same data, same rectangle) and nothing changed its pixels since, so
                              an engine may use the copy it kept (as hq_block_data's flag). */
} hq_clahe_piece;

typedef struct hq_engine hq_engine;

typedef struct hq_engine_ops {
    const char *name;
    /* hist[s] points at hq_mode_nhist(m) * bins counters for segment s (channel-major). */
    int (*histogram)(hq_engine *e, const hq_block_data *b, const hq_mode *m, uint64_t *const *hist, hq_err *err);
    /* lut[s] points at hq_mode_nhist(m) * bins entries for segment s; the block is remapped in place. */
    int (*remap)(hq_engine *e, hq_block_data *b, const hq_mode *m, const uint16_t *const *lut, hq_err *err);
    void (*destroy)(hq_engine *e);
    /* One line describing where the engine runs (threads, GPU name and bus id). */
    void (*describe)(hq_engine *e, char *buf, size_t len);
    /* Optional (NULL: malloc/free): host memory for blocks, suited to the engine. The GPU engine
     * hands out pinned buffers from a small pool, which its copies reach by DMA without staging.
     * Both may be called from any thread. */
    void *(*block_alloc)(hq_engine *e, size_t bytes);
    void (*block_free)(hq_engine *e, void *p);
    /* Optional (NULL: none): the most device memory this engine has held at once, in bytes. */
    uint64_t (*device_peak)(hq_engine *e);
    /* CLAHE. hist: ntiles * nhist * bins counters, tile-major (tile ty * tiles_x + tx), to which the
     * piece adds each padded position it supplies (a source pixel counts once for itself and once for
     * each reflection of it in the padding). */
    int (*clahe_histogram)(hq_engine *e, const hq_clahe_piece *p, const hq_mode *m, const hq_clahe_geom *g,
                           uint64_t *hist, hq_err *err);
    /* lut: ntiles * nhist * bins entries laid out as hist; the piece is remapped in place. NULL
     * (same_as_histogram set): the LUTs clahe_luts has just built, where the engine keeps them. */
    int (*clahe_remap)(hq_engine *e, hq_clahe_piece *p, const hq_mode *m, const hq_clahe_geom *g,
                       const uint16_t *lut, hq_err *err);
    /* Float modes: accumulates each segment's finite minimum and maximum and its counts of finite
     * and infinite samples into mm[0..nseg-1]. NULL: leaves mm alone (the copy engine). */
    int (*minmax)(hq_engine *e, const hq_block_data *b, const hq_mode *m, hq_frange *mm, hq_err *err);
    /* 1: remap takes hq_block_data.out, and histogram reads host memory where it lies, so a block
     * may be a read-only view of the input (the CPU engine). 0: the block is read into memory from
     * block_alloc (the GPU engine, whose copies want pinned memory). */
    int remap_out;
    /* Optional (NULL: always): whether a block in p (from block_alloc) is worth holding between the
     * passes rather than reading it again in pass 2. The GPU engine holds only pinned buffers, and
     * no more than half its pool: its copies from pageable memory ran at about 4.7 GB/s against 55
     * from pinned (8 GiB image on an H100, bench/results/clahe_e2e_device.txt), and a pool taken by
     * held blocks leaves pass 1's reads in pageable memory too. */
    int (*hold_ok)(hq_engine *e, const void *p);
    /* Optional (NULL: the caller builds the LUTs on the host from clahe_histogram's counts). Right
     * after a clahe_histogram of one whole image (r0 = c0 = 0, the image's rows and columns) made
     * with hist NULL, which only an engine with this op accepts: every tile's LUT (limit from
     * hq_clahe_clip_limit) by core/clahe.h's rule, bit for bit, built where the engine counted,
     * and copied into lut unless it is NULL. The counts never cross to the host: a 16-bit image's
     * are 32 MiB at the default 8x8 grid, four times a 2048 x 2048 image's pixels. The
     * clahe_remap of that piece that follows takes lut NULL or this same lut and uses the LUTs
     * where they lie. */
    int (*clahe_luts)(hq_engine *e, const hq_mode *m, const hq_clahe_geom *g, int64_t limit, uint16_t *lut,
                      hq_err *err);
} hq_engine_ops;

struct hq_engine {
    const hq_engine_ops *ops;
    void *impl;
};

typedef struct hq_engine_cfg {
    int threads;    /* CPU worker threads; 0 = all cores */
    int local_rank; /* node-local rank, for binding a GPU */
    int local_size; /* ranks on this node */
    int verbose;
} hq_engine_cfg;

/* CPU engine: always available. */
int hq_cpu_engine_create(const hq_engine_cfg *cfg, hq_engine **out, hq_err *err);

/* GPU engine: HQ_EDEVICE when this build has no CUDA or no GPU is visible. */
int hq_gpu_engine_create(const hq_engine_cfg *cfg, hq_engine **out, hq_err *err);

/* Whether this process started CUDA (a GPU engine, or a device count or id asked for). main then
 * ends it with _exit once the outputs are closed, MPI is down and stdio is flushed: CUDA's own
 * teardown at exit is work for a context that is going away with the process anyway. */
int hq_gpu_started(void);

/* Whether this node may have an NVIDIA GPU, known without starting CUDA (the driver's device node):
 * 0 in a build without CUDA. A yes can still find no usable device. */
int hq_gpu_maybe_present(void);

/* Copy engine: histograms stay empty and pixels unchanged; for I/O-only benchmark runs. */
int hq_copy_engine_create(hq_engine **out, hq_err *err);

/* Number of visible CUDA devices; 0 without CUDA or without a GPU. */
int hq_gpu_device_count(void);

/* In buf: an identifier (the UUID) of the device that a rank of this node-local rank binds, by the
 * rule of hq_gpu_engine_create; -1 without a visible device. Ranks compare them to tell a GPU of
 * their own from a shared one (app/placement.h). */
int hq_gpu_bound_id(int local_rank, char *buf, size_t len);

static inline void *hq_block_alloc(hq_engine *e, size_t bytes)
{
    return e && e->ops->block_alloc ? e->ops->block_alloc(e, bytes) : malloc(bytes);
}

static inline void hq_block_free(hq_engine *e, void *p)
{
    if (e && e->ops->block_free)
        e->ops->block_free(e, p);
    else
        free(p);
}

static inline int hq_block_hold_ok(hq_engine *e, const void *p)
{
    return !e || !e->ops->hold_ok || e->ops->hold_ok(e, p);
}

static inline void hq_engine_destroy(hq_engine *e)
{
    if (e)
        e->ops->destroy(e);
}

#endif
