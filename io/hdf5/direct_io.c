/* direct_io.c — one block moved the direct way: the calling thread asks HDF5 where the block's
 * bytes lie (the chunk index, the contiguous offset) and cuts the block into tasks; the backend's
 * workers then pread/pwrite them, (un)shuffle and inflate/deflate them, and swap big-endian
 * samples, side by side. Filtered chunks written with one rank go through H5Dwrite_chunk, in
 * order, on the calling thread, while the workers encode the next ones.
 *
 * Contract:
 *  - hdf5_direct_transfer returns 0 when the block was moved, 2 when a chunk's complete deflate
 *    stream decodes to another length than the chunk's (damaged; HDF5 would take it and fill the
 *    rest with whatever its buffer held, codec.h), 1 when HDF5 should move it as before: whatever the direct path does not take (a chunk the block covers in part, a chunk not
 *    allocated, a chunk index it cannot read) and whatever fails on it (a short read, a chunk that
 *    does not decode, a failed write). HDF5 then repeats the block from the start and reports any
 *    failure as it always did, so errors read the same on either path.
 *  - The block's memory layout is the library path's: row order, or chunk order (CHUNK_ORDER)
 *    with each chunk's part dense, in walk order. Outputs decode to the same data; unfiltered
 *    bytes are the same bytes, edge chunks' padding included (zeros, as the file held before).
 *  - No HDF5 call runs off the calling thread. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../box.h"
#include "hdf5_internal.h"
#include "../../core/fdio.h"
#include "../../core/sample.h"

/* The largest run of bytes one task moves: big enough that a pread costs little besides the
 * copy, small enough that a block is cut in pieces for every worker. */
#define PIECE ((uint64_t)4 << 20)

typedef struct task {
    int chunk;                 /* 0: runs between the file and the block; 1: a chunk through scratch */
    uint64_t file_off, file_len;
    uint64_t mem_off;          /* runs: the first run's place in the block; chunk order: the chunk's */
    uint64_t count, file_stride, mem_stride; /* runs: `count` runs of file_len bytes */
    unsigned mask;             /* chunk: the filters skipped when it was written */
    uint64_t n[MAX_RANK], in_block[MAX_RANK];
    hsize_t coord[MAX_RANK];   /* chunk: its first element */
    int whole;                 /* chunk: no padding past the dataset's edge */
    unsigned char *z;          /* filtered write: the encoded chunk, until written */
    size_t zlen;
} task;

typedef struct xfer {
    hq_io *io;
    uint64_t item;
    unsigned char *buf;
    int writing, dense, k;
    const hdf5_side *side;
    size_t elem;
    uint64_t dims[MAX_RANK], cd[MAX_RANK], bcount[MAX_RANK], chunk_bytes;
    hsize_t start[MAX_RANK];   /* the block's first element */
    int fd;
    task *t;
    uint64_t nt, cap;
    int wrong_length; /* a worker met a chunk decoding to another length (set by any, read after) */
} xfer;

static task *add_task(xfer *x)
{
    if (x->nt == x->cap) {
        const uint64_t cap = x->cap ? 2 * x->cap : 64;
        task *t = realloc(x->t, cap * sizeof *t);
        if (!t)
            return NULL;
        x->t = t;
        x->cap = cap;
    }
    task *t = &x->t[x->nt++];
    memset(t, 0, sizeof *t);
    return t;
}

/* `count` runs of `len` bytes, strided in the file and the block, cut into tasks of about PIECE. */
static int add_runs(xfer *x, uint64_t file_off, uint64_t mem_off, uint64_t len, uint64_t count, uint64_t fstride,
                    uint64_t mstride)
{
    if (len >= PIECE) {
        for (uint64_t r = 0; r < count; r++)
            for (uint64_t p = 0; p < len; p += PIECE) {
                task *t = add_task(x);
                if (!t)
                    return -1;
                t->file_off = file_off + r * fstride + p;
                t->mem_off = mem_off + r * mstride + p;
                t->file_len = len - p < PIECE ? len - p : PIECE;
                t->count = 1;
            }
        return 0;
    }
    const uint64_t per = PIECE / len;
    for (uint64_t r = 0; r < count; r += per) {
        task *t = add_task(x);
        if (!t)
            return -1;
        t->file_off = file_off + r * fstride;
        t->mem_off = mem_off + r * mstride;
        t->file_len = len;
        t->count = count - r < per ? count - r : per;
        t->file_stride = fstride;
        t->mem_stride = mstride;
    }
    return 0;
}

/* A contiguous dataset: the block's rows, merged where the block spans whole rows or images. */
static int plan_contig(xfer *x, const hsize_t *start)
{
    const int k = x->k;
    uint64_t fs[MAX_RANK], ms[MAX_RANK], base = x->side->addr;
    fs[k - 1] = ms[k - 1] = x->elem;
    for (int i = k - 2; i >= 0; i--) {
        fs[i] = fs[i + 1] * x->dims[i + 1];
        ms[i] = ms[i + 1] * x->bcount[i + 1];
    }
    for (int i = 0; i < k; i++)
        base += start[i] * fs[i];
    int m = k - 1;
    uint64_t run = x->elem * x->bcount[m];
    while (m > 0 && x->bcount[m] == x->dims[m]) {
        m--;
        run *= x->bcount[m];
    }
    if (m == 0)
        return add_runs(x, base, 0, run, 1, 0, 0);
    /* Runs along dimension m - 1, for every index over the dimensions outside it. */
    uint64_t idx[MAX_RANK] = {0};
    for (;;) {
        uint64_t f = base, mo = 0;
        for (int i = 0; i < m - 1; i++) {
            f += idx[i] * fs[i];
            mo += idx[i] * ms[i];
        }
        if (add_runs(x, f, mo, run, x->bcount[m - 1], fs[m - 1], ms[m - 1]))
            return -1;
        int i = m - 2;
        for (; i >= 0 && idx[i] == x->bcount[i] - 1; i--)
            idx[i] = 0;
        if (i < 0)
            return 0;
        idx[i]++;
    }
}

/* Where chunk `coord` lies: the input's chunk index, or the output's table. 0, or 1 to leave the
 * block to HDF5 (as for a large grid whose index only HDF5's per-chunk calls can read: in 1.10.8
 * each walks the index, and the library path's own reads cost no such walk). */
static int chunk_place(xfer *x, const chunk_walk *w, const hsize_t *coord, task *t)
{
    if (x->writing) {
        if (x->side->kind == DIRECT_FILTERED)
            return 0;
        uint64_t lin = 0;
        for (int i = 0; i < x->k; i++)
            lin = lin * ((x->dims[i] + x->cd[i] - 1) / x->cd[i]) + w->idx[i];
        t->file_off = x->side->chunk_addr[lin];
        t->file_len = x->chunk_bytes;
        return 0;
    }
    haddr_t addr = HADDR_UNDEF;
    hsize_t size = 0;
    unsigned mask = 0;
    if (hdf5_chunk_lookup_slow(x->io, x->item))
        return 1;
    if (hdf5_chunk_lookup(x->io, x->item, coord, &mask, &addr, &size) < 0) {
        H5Eclear2(H5E_DEFAULT);
        return 1;
    }
    const int filtered = x->side->kind == DIRECT_FILTERED;
    if (addr == HADDR_UNDEF || size == 0 || (!filtered && size != x->chunk_bytes) ||
        (filtered && size > 2 * x->chunk_bytes + ((uint64_t)1 << 20)) || addr > UINT64_MAX - x->io->in_base)
        return 1; /* not written (HDF5 fills it), or a size no encoder made: HDF5 judges */
    t->file_off = x->io->in_base + addr; /* HDF5's addresses start at the base address */
    t->file_len = size;
    t->mask = mask;
    return 0;
}

/* Where a whole chunk lands in the block as one run of bytes: dense in chunk order, or in row
 * order when it spans the block in every dimension but the first (a slice of a stack); else
 * UINT64_MAX. */
static uint64_t run_place(const xfer *x, const chunk_walk *w, uint64_t at)
{
    if (x->dense)
        return at;
    uint64_t plane = x->elem;
    for (int i = 1; i < x->k; i++) {
        if (w->n[i] != x->bcount[i])
            return UINT64_MAX;
        plane *= x->bcount[i];
    }
    return w->in_block[0] * plane;
}

/* A chunked dataset: a task per chunk the block touches, each covered whole by the block (as far
 * as the dataset reaches); a whole unfiltered chunk that lands in the block as one run is a run. */
static int plan_chunks(xfer *x, const hq_block *b)
{
    chunk_walk w;
    if (!hdf5_walk_begin(&w, x->io, x->item, b))
        return 1;
    const int filtered = x->side->kind == DIRECT_FILTERED;
    uint64_t at = 0;
    do {
        task probe = {0};
        hsize_t coord[MAX_RANK];
        int whole = 1;
        uint64_t len = x->elem;
        for (int i = 0; i < x->k; i++) {
            coord[i] = w.idx[i] * w.cd[i];
            const uint64_t inside = x->dims[i] - coord[i] < w.cd[i] ? x->dims[i] - coord[i] : w.cd[i];
            if (w.s[i] != coord[i] || w.n[i] != inside)
                return 1; /* the block holds part of this chunk: HDF5 merges it with the rest */
            whole &= w.n[i] == w.cd[i];
            len *= w.n[i];
        }
        const int rc = chunk_place(x, &w, coord, &probe);
        if (rc)
            return rc;
        const uint64_t place = !filtered && whole ? run_place(x, &w, at) : UINT64_MAX;
        if (place != UINT64_MAX) {
            if (add_runs(x, probe.file_off, place, x->chunk_bytes, 1, 0, 0))
                return -1;
        } else {
            task *t = add_task(x);
            if (!t)
                return -1;
            *t = probe;
            t->chunk = 1;
            t->mem_off = at;
            t->whole = whole;
            for (int i = 0; i < x->k; i++) {
                t->n[i] = w.n[i];
                t->in_block[i] = w.in_block[i];
                t->coord[i] = coord[i];
            }
        }
        at += len;
    } while (hdf5_walk_next(&w));
    return 0;
}

static int do_runs(xfer *x, const task *t, int worker)
{
    for (uint64_t r = 0; r < t->count; r++) {
        unsigned char *p = x->buf + t->mem_off + r * t->mem_stride;
        const uint64_t off = t->file_off + r * t->file_stride;
        if (!x->writing) {
            if (hq_pread_full(x->fd, p, t->file_len, off))
                return -1;
            if (x->side->swap)
                hq_swap16(p, t->file_len);
            continue;
        }
        if (x->side->swap) { /* the caller's block stays as it is */
            unsigned char *s = hdf5_scratch_buf(x->io, worker, 0, t->file_len);
            if (!s)
                return -1;
            memcpy(s, p, t->file_len);
            hq_swap16(s, t->file_len);
            p = s;
        }
        if (hdf5_out_put(x->io, p, t->file_len, off))
            return -1;
    }
    return 0;
}

static hdf5_codec *codec_of(hq_io *io, int worker)
{
    hdf5_scratch *s = &io->scratch[worker];
    if (!s->codec)
        s->codec = hdf5_codec_new();
    return s->codec;
}

/* HDF5's shuffle of one-byte elements leaves the bytes as they are: no stage to run. */
static int stage_is_noop(const xfer *x, int j)
{
    return x->side->filt[j] == FILT_SHUFFLE && x->side->shuffle_elem <= 1;
}

/* The stored bytes in `raw` decoded back to the chunk: the pipeline undone, last filter first,
 * skipping those the chunk's mask says were not applied. The last stage that runs writes into
 * `dst` when given (the chunk's place in the block: one copy less), else into scratch. Returns
 * where the chunk is, or NULL when it does not decode. */
static unsigned char *decode(xfer *x, const task *t, int worker, unsigned char *raw, unsigned char *dst)
{
    unsigned char *cur = raw;
    uint64_t len = t->file_len;
    int next = 1, last = -1;
    for (int j = 0; j < x->side->nfilt; j++)
        if (!(t->mask & (1u << j)) && !stage_is_noop(x, j)) {
            last = j;
            break;
        }
    for (int j = x->side->nfilt - 1; j >= 0; j--) {
        if ((t->mask & (1u << j)) || stage_is_noop(x, j))
            continue;
        unsigned char *out = j == last && dst ? dst : hdf5_scratch_buf(x->io, worker, next, x->chunk_bytes);
        hdf5_codec *c = codec_of(x->io, worker);
        if (!out || !c)
            return NULL;
        if (x->side->filt[j] == FILT_DEFLATE) {
            const int r = hdf5_inflate(c, cur, len, out, x->chunk_bytes);
            if (r == -2)
                __atomic_store_n(&x->wrong_length, 1, __ATOMIC_RELAXED);
            if (r)
                return NULL;
            len = x->chunk_bytes;
        } else {
            if (len > x->chunk_bytes)
                return NULL;
            hdf5_unshuffle(out, cur, len, x->side->shuffle_elem);
        }
        cur = out;
        next = next == 1 ? 2 : 1;
    }
    return len == x->chunk_bytes ? cur : NULL;
}

/* The chunk encoded through the pipeline into a buffer of its own (t->z), written later. */
static int encode(xfer *x, task *t, int worker, const unsigned char *chunk)
{
    const unsigned char *cur = chunk;
    unsigned char *own = NULL;
    uint64_t len = x->chunk_bytes;
    int next = 1;
    hdf5_codec *c = codec_of(x->io, worker);
    if (!c)
        return -1;
    for (int j = 0; j < x->side->nfilt; j++) {
        unsigned char *out;
        if (stage_is_noop(x, j))
            continue;
        if (x->side->filt[j] == FILT_DEFLATE) {
            const size_t cap = hdf5_deflate_bound(c, x->side->level, len);
            out = cap ? malloc(cap) : NULL;
            const size_t got = out ? hdf5_deflate(c, x->side->level, cur, len, out, cap) : 0;
            free(own);
            own = out;
            if (!got)
                return -1;
            len = got;
        } else {
            out = hdf5_scratch_buf(x->io, worker, next, len);
            if (!out) {
                free(own);
                return -1;
            }
            hdf5_shuffle(out, cur, len, x->side->shuffle_elem);
            next = next == 1 ? 2 : 1;
        }
        cur = out;
    }
    if (cur != own) { /* the pipeline did not end with deflate */
        unsigned char *z = malloc(len);
        if (z)
            memcpy(z, cur, len);
        free(own);
        own = z;
        if (!z)
            return -1;
    }
    t->z = own;
    t->zlen = len;
    return 0;
}

/* The block's side of a chunk task: dense in chunk order, or a box of the row-order block. */
static hq_box_side block_side(const xfer *x, const task *t)
{
    static const uint64_t zero[MAX_RANK];
    if (x->dense)
        return (hq_box_side){x->buf + t->mem_off, t->n, zero};
    return (hq_box_side){x->buf, x->bcount, t->in_block};
}

/* A whole chunk that lies in the block as one run of bytes (the block in chunk order, or a chunk
 * spanning the block in every dimension but the first, as a slice of a stack) is the chunk's own
 * bytes, in place: it is decoded into the block and encoded from it without a copy through
 * scratch. NULL otherwise. */
static unsigned char *chunk_in_block(const xfer *x, const task *t)
{
    if (!t->whole || x->side->swap)
        return NULL;
    if (x->dense)
        return x->buf + t->mem_off;
    uint64_t plane = x->elem;
    for (int i = 1; i < x->k; i++) {
        if (t->n[i] != x->bcount[i])
            return NULL;
        plane *= x->bcount[i];
    }
    return x->buf + t->in_block[0] * plane;
}

static int do_chunk(xfer *x, task *t, int worker)
{
    static const uint64_t zero[MAX_RANK];
    unsigned char *in_block = chunk_in_block(x, t);
    if (!x->writing) {
        unsigned char *raw = hdf5_scratch_buf(x->io, worker, 0, t->file_len);
        if (!raw || hq_pread_full(x->fd, raw, t->file_len, t->file_off))
            return -1;
        unsigned char *chunk = x->side->kind == DIRECT_FILTERED ? decode(x, t, worker, raw, in_block) : raw;
        if (!chunk)
            return -1;
        if (chunk == in_block)
            return 0;
        if (x->side->swap)
            hq_swap16(chunk, x->chunk_bytes);
        hq_box_copy(block_side(x, t), (hq_box_side){chunk, x->cd, zero}, t->n, x->k, x->elem);
        return 0;
    }
    if (in_block && x->side->kind == DIRECT_FILTERED)
        return encode(x, t, worker, in_block);
    unsigned char *chunk = hdf5_scratch_buf(x->io, worker, 0, x->chunk_bytes);
    if (!chunk)
        return -1;
    if (!t->whole)
        memset(chunk, 0, x->chunk_bytes);
    hq_box_copy((hq_box_side){chunk, x->cd, zero}, block_side(x, t), t->n, x->k, x->elem);
    if (x->side->swap)
        hq_swap16(chunk, x->chunk_bytes);
    if (x->side->kind == DIRECT_FILTERED)
        return encode(x, t, worker, chunk);
    return hdf5_out_put(x->io, chunk, x->chunk_bytes, t->file_off);
}

static int task_fn(void *ctx, uint64_t i, int worker)
{
    xfer *x = ctx;
    task *t = &x->t[i];
    return t->chunk ? do_chunk(x, t, worker) : do_runs(x, t, worker);
}

/* Calling thread, in chunk order: the encoded chunk into the file. */
static int write_chunk(void *ctx, uint64_t i)
{
    xfer *x = ctx;
    task *t = &x->t[i];
    const herr_t st = H5Dwrite_chunk(hdf5_out_dset(x->io, x->item), H5P_DEFAULT, 0, t->coord, t->zlen, t->z);
    free(t->z);
    t->z = NULL;
    if (st < 0) {
        H5Eclear2(H5E_DEFAULT);
        return -1;
    }
    return 0;
}

/* The file bytes the planned tasks write lie in [*lo, *hi). */
static void tasks_extent(const xfer *x, uint64_t *lo, uint64_t *hi)
{
    uint64_t a = UINT64_MAX, end = 0;
    for (uint64_t i = 0; i < x->nt; i++) {
        const task *t = &x->t[i];
        const uint64_t e = t->chunk ? t->file_off + (t->file_len > x->chunk_bytes ? t->file_len : x->chunk_bytes)
                                    : t->file_off + (t->count ? t->count - 1 : 0) * t->file_stride + t->file_len;
        a = t->file_off < a ? t->file_off : a;
        end = e > end ? e : end;
    }
    *lo = a < end ? a : 0;
    *hi = end;
}

/* The transfer's shape: the block's extent, the dataset's and its chunks'. */
static void xfer_setup(xfer *x, hq_io *io, uint64_t item, const hq_block *b, void *buf, int writing)
{
    const hdf5_side *side = writing ? &io->dir[item].out : &io->dir[item].in;
    *x = (xfer){.io = io, .item = item, .buf = buf, .writing = writing, .side = side};
    x->elem = io->inv.items[item].sample_bytes;
    x->dense = (io->flags[item] & CHUNK_ORDER) != 0;
    x->fd = writing ? io->out_fd : io->in_fd;
    hsize_t count[MAX_RANK];
    x->k = hdf5_block_extent(&io->inv.items[item], io->frank[item], b, x->start, count);
    hdf5_item_dims(io, item, x->dims);
    x->chunk_bytes = x->elem;
    for (int i = 0; i < x->k; i++) {
        x->bcount[i] = count[i];
        x->cd[i] = io->in_chunk[item][i];
        x->chunk_bytes *= x->cd[i] ? x->cd[i] : 1;
    }
}

static int xfer_plan(xfer *x, const hq_block *b)
{
    return x->side->kind == DIRECT_CONTIG ? plan_contig(x, x->start) : plan_chunks(x, b);
}

int hdf5_direct_transfer(hq_io *io, uint64_t item, const hq_block *b, void *buf, int writing)
{
    xfer x;
    xfer_setup(&x, io, item, b, buf, writing);
    if (hdf5_scratch_ready(io))
        return 1;
    int rc = xfer_plan(&x, b);
    const int ordered = writing && x.side->kind == DIRECT_FILTERED;
    /* Nothing is written where the disk space is not yet reserved (reserve.c); compressed chunks
     * land wherever HDF5 puts them, so they wait for all of it. Stores through the mapping wait for
     * all of it too: faulting pages in while the fallocates still run on the file was slower for
     * everyone. H200 host, 8 GiB a rank on tmpfs, both orders of the two ways: 1 rank 2.54 / 1.90 s
     * against 2.03 / 1.50 s waiting for all, 2 ranks 5.74 / 5.00 s against 3.49 / 4.59 s
     * (bench/results/scaling_x2.txt, 08:49 and 08:51 UTC). */
    if (!rc && writing && io->bg) {
        uint64_t lo = 0, hi = UINT64_MAX;
        if (!ordered && !io->omap)
            tasks_extent(&x, &lo, &hi);
        rc = hdf5_reserve_wait(io, lo, hi, NULL);
    }
    if (!rc)
        rc = hdf5_pool_run(io->pool, x.nt, task_fn, ordered ? write_chunk : NULL, &x,
                           2 * (uint64_t)hdf5_pool_threads(io->pool));
    for (uint64_t i = 0; i < x.nt; i++)
        free(x.t[i].z);
    free(x.t);
    return !rc ? 0 : __atomic_load_n(&x.wrong_length, __ATOMIC_RELAXED) ? 2 : 1;
}

int hdf5_direct_span(hq_io *io, uint64_t item, const hq_block *b, uint64_t *off, uint64_t *len)
{
    xfer x;
    xfer_setup(&x, io, item, b, NULL, 0);
    if ((x.side->kind != DIRECT_CONTIG && x.side->kind != DIRECT_CHUNKED) || x.side->swap)
        return 1;
    uint64_t bytes = x.elem;
    for (int i = 0; i < x.k; i++)
        bytes *= x.bcount[i];
    int rc = xfer_plan(&x, b);
    /* One run: every piece follows the one before it, in the block and in the file alike. */
    uint64_t at = 0, base = 0;
    for (uint64_t i = 0; !rc && i < x.nt; i++) {
        const task *t = &x.t[i];
        rc = t->chunk; /* a chunk through scratch: not the file's bytes as they are */
        for (uint64_t r = 0; !rc && r < t->count; r++) {
            const uint64_t m = t->mem_off + r * t->mem_stride, f = t->file_off + r * t->file_stride;
            if (at == 0)
                base = f;
            rc = m != at || f != base + at;
            at += t->file_len;
        }
    }
    free(x.t);
    if (rc || at != bytes || bytes == 0)
        return 1;
    *off = base;
    *len = bytes;
    return 0;
}
