/* direct.c — which datasets the direct path may move itself, and what it needs for them: the
 * file offsets HDF5 gives (H5Dget_offset; chunk addresses from chunk_index.c's one-pass table,
 * or H5Dget_chunk_info_by_coord, plus the file's base address), file descriptors of its own
 * for pread/pwrite, the worker pool and each worker's scratch. HDF5 1.10 is not thread-safe:
 * everything here runs on the one thread that calls the backend.
 *
 * Contract:
 *  - A side (input or output dataset) is direct only when its bytes are exactly what the block
 *    holds, up to a byte swap and the filters codec.c runs: unsigned 8/16-bit integers using every
 *    bit, little- or big-endian; contiguous with its storage allocated, or chunked and unfiltered,
 *    or chunked with a pipeline of shuffle and deflate only. Anything else stays with HDF5.
 *  - A filtered output is direct only with one rank in the communicator: parallel HDF5 1.10 lets
 *    a rank allocate chunks (H5Dwrite_chunk) only when every rank makes the same allocations, and
 *    two ranks writing different chunks each lose the other's (tried: 1.10.8, Open MPI, 2 ranks,
 *    half the chunks read back as zeros). With several ranks it stays collective, through HDF5.
 *  - hdf5_direct_note_out_item describes one output dataset as it is made, and
 *    hdf5_direct_note_output then reads the chunked ones' indexes, once every rank has flushed
 *    the metadata (a dataset reopened by handles.c reads its index independently). Both make the
 *    same HDF5 calls on every rank and never fail: a side they cannot describe is left to HDF5.
 *  - HQ_HDF5_DIRECT=0 sends every block through HDF5 as before (for tests and benchmarks); the
 *    input's one-pass chunk table still answers the checks blocks.c makes before a read. */
#define _GNU_SOURCE /* O_CLOEXEC */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hdf5_internal.h"

/* Larger chunk grids keep the library path for an unfiltered chunked output: their address
 * table (8 bytes a chunk, on every rank) is not worth it. */
#define OUT_TABLE_MAX ((uint64_t)1 << 22)

void hdf5_direct_init(hq_io *io)
{
    const char *s = getenv("HQ_HDF5_DIRECT");
    io->direct = !(s && strcmp(s, "0") == 0);
    io->in_fd = io->out_fd = -1;
    pthread_mutex_init(&io->put_lock, NULL);
}

int hdf5_direct_alloc(hq_io *io)
{
    io->dir = calloc(io->inv.n ? io->inv.n : 1, sizeof *io->dir);
    return io->dir ? 0 : -1;
}

/* The type: unsigned, every bit used, 1 or 2 bytes, either byte order. */
static int plain_type(hid_t d, int *swap)
{
    hid_t t = H5Dget_type(d);
    if (t < 0)
        return 0;
    const size_t size = H5Tget_size(t);
    const H5T_order_t order = H5Tget_order(t);
    const int ok = H5Tget_class(t) == H5T_INTEGER && H5Tget_sign(t) == H5T_SGN_NONE && (size == 1 || size == 2) &&
                   H5Tget_precision(t) == 8 * size && H5Tget_offset(t) == 0 &&
                   (size == 1 || order == H5T_ORDER_LE || order == H5T_ORDER_BE);
    *swap = ok && size == 2 && order == H5T_ORDER_BE;
    H5Tclose(t);
    return ok;
}

/* The filter pipeline, if codec.c can run every filter of it. */
static int plain_pipeline(hid_t dcpl, size_t elem, hdf5_side *s)
{
    const int nf = H5Pget_nfilters(dcpl);
    if (nf < 1 || nf > PIPE_MAX)
        return 0;
    for (int i = 0; i < nf; i++) {
        unsigned flags = 0, cd[8];
        size_t ncd = sizeof cd / sizeof cd[0];
        char name[32];
        const H5Z_filter_t f = H5Pget_filter2(dcpl, (unsigned)i, &flags, &ncd, cd, sizeof name, name, NULL);
        if (f == H5Z_FILTER_DEFLATE && ncd >= 1 && cd[0] <= 9) {
            s->filt[i] = FILT_DEFLATE;
            s->level = (int)cd[0];
        } else if (f == H5Z_FILTER_SHUFFLE) {
            s->filt[i] = FILT_SHUFFLE;
            s->shuffle_elem = ncd >= 1 && cd[0] > 0 ? cd[0] : elem;
        } else {
            return 0;
        }
    }
    s->nfilt = nf;
    return 1;
}

/* Fills *s for dataset d; kind DIRECT_NONE when the direct path cannot take it. */
static void describe_side(hq_io *io, uint64_t i, hid_t d, hdf5_side *s)
{
    memset(s, 0, sizeof *s);
    hid_t dcpl = d >= 0 ? H5Dget_create_plist(d) : H5I_INVALID_HID;
    int swap = 0;
    if (dcpl < 0 || !plain_type(d, &swap) || H5Pget_external_count(dcpl) > 0) {
        if (dcpl >= 0)
            H5Pclose(dcpl);
        H5Eclear2(H5E_DEFAULT);
        return;
    }
    const H5D_layout_t layout = H5Pget_layout(dcpl);
    s->swap = swap;
    if (layout == H5D_CONTIGUOUS) {
        const haddr_t a = H5Dget_offset(d);
        if (a != HADDR_UNDEF) {
            s->kind = DIRECT_CONTIG;
            s->addr = a;
        }
    } else if (layout == H5D_CHUNKED && io->in_chunk[i][0] != 0) {
        if (H5Pget_nfilters(dcpl) == 0)
            s->kind = DIRECT_CHUNKED;
        else if (plain_pipeline(dcpl, io->inv.items[i].sample_bytes, s))
            s->kind = DIRECT_FILTERED;
    }
    H5Pclose(dcpl);
    H5Eclear2(H5E_DEFAULT);
}

/* The descriptor is opened even with the direct path off: the chunk index is read through it
 * (chunk_index.c) for the checks every chunked read makes (blocks.c). */
void hdf5_direct_note_input(hq_io *io, uint64_t i, hid_t d)
{
    if (!io->dir)
        return;
    if (io->in_fd < 0) {
        io->in_fd = open(io->inv.root, O_RDONLY | O_CLOEXEC);
        io->in_base = hdf5_base_addr(d);
    }
    if (io->direct && io->in_fd >= 0)
        describe_side(io, i, d, &io->dir[i].in);
}

/* Every chunk's address in an unfiltered chunked output, allocated at creation, from the one-pass
 * table (chunk_index.c) when every rank could read it; else from one HDF5 call per chunk, only for
 * grids small enough that 1.10.8's walk of the index at every call costs little (PER_CHUNK_MAX);
 * a larger grid without a table stays with HDF5. Collective: every rank makes the same HDF5 calls,
 * to the end, whatever they return, and the ranks agree on which way the table is filled. */
static void chunk_table(hq_io *io, uint64_t i, hid_t d, hdf5_side *s)
{
    uint64_t dims[MAX_RANK], grid[MAX_RANK], n = 1, chunk_bytes = io->inv.items[i].sample_bytes;
    const int k = hdf5_item_dims(io, i, dims);
    for (int j = 0; j < k; j++) {
        grid[j] = (dims[j] + io->in_chunk[i][j] - 1) / io->in_chunk[i][j];
        n *= grid[j];
        chunk_bytes *= io->in_chunk[i][j];
    }
    hdf5_chunk_table *t = d >= 0 ? hdf5_chunk_table_read(d, io->out_fd) : NULL;
    int have = t && hdf5_chunk_table_chunks(t) == n, all = 0;
    MPI_Allreduce(&have, &all, 1, MPI_INT, MPI_MIN, io->comm);
    if (all) {
        io->one_pass[1]++;
        io->one_pass_chunks[1] += n;
    }
    /* Without a table, one HDF5 call a chunk on every rank, the same calls to the end whatever
     * they (or this rank's malloc) return; with one, local lookups that may stop at a miss. */
    const int per_chunk = !all && n <= PER_CHUNK_MAX;
    s->chunk_addr = n <= OUT_TABLE_MAX && (all || per_chunk) ? malloc(n * sizeof *s->chunk_addr) : NULL;
    int ok = s->chunk_addr != NULL;
    uint64_t idx[MAX_RANK] = {0};
    for (uint64_t c = 0; c < n && (ok || per_chunk); c++) {
        hsize_t off[MAX_RANK], size = 0;
        haddr_t addr = HADDR_UNDEF;
        unsigned mask = 0;
        for (int j = 0; j < k; j++)
            off[j] = idx[j] * io->in_chunk[i][j];
        const int rc = all ? hdf5_chunk_table_get(t, off, &mask, &addr, &size)
                           : H5Dget_chunk_info_by_coord(d, off, &mask, &addr, &size);
        if (rc < 0 || addr == HADDR_UNDEF || size != chunk_bytes)
            ok = 0;
        else if (ok && (s->chunk_addr[c] = io->out_base + addr) + chunk_bytes > s->chunk_end)
            s->chunk_end = s->chunk_addr[c] + chunk_bytes;
        for (int j = k - 1; j >= 0 && ++idx[j] == grid[j]; j--)
            idx[j] = 0;
    }
    hdf5_chunk_table_free(t);
    H5Eclear2(H5E_DEFAULT);
    if (!ok) {
        free(s->chunk_addr);
        s->chunk_addr = NULL;
        s->kind = DIRECT_NONE;
    }
}

void hdf5_direct_note_out_item(hq_io *io, uint64_t i, hid_t o)
{
    if (!io->direct || !io->dir || i >= io->inv.n)
        return;
    hdf5_side *s = &io->dir[i].out;
    describe_side(io, i, o, s);
    /* The same decision on every rank: it decides which collective calls follow. */
    if (s->kind == DIRECT_FILTERED && io->nranks > 1)
        s->kind = DIRECT_NONE;
}

void hdf5_direct_note_output(hq_io *io)
{
    if (!io->direct || !io->dir || !io->out_dset)
        return;
    if (io->out_fd < 0)
        io->out_fd = open(io->part_path, O_RDWR | O_CLOEXEC); /* a shared mapping needs read access */
    io->out_base = hdf5_base_addr(io->out_file);
    int chunked = 0;
    for (size_t i = 0; i < io->inv.n; i++)
        chunked |= !io->inv.items[i].bad && (io->flags[i] & OUT_MADE) && io->dir[i].out.kind == DIRECT_CHUNKED;
    /* The chunk tables are read from the file: the object headers and B-trees HDF5 holds in its
     * metadata cache go there first, written by whichever ranks write metadata, before any reads. */
    if (chunked) {
        if (io->out_file < 0 || H5Fflush(io->out_file, H5F_SCOPE_LOCAL) < 0)
            H5Eclear2(H5E_DEFAULT); /* then the tables do not match HDF5's answers and are not used */
        MPI_Barrier(io->comm);
    }
    for (size_t i = 0; i < io->inv.n; i++)
        if (io->dir[i].out.kind == DIRECT_CHUNKED && !io->inv.items[i].bad && (io->flags[i] & OUT_MADE))
            chunk_table(io, i, hdf5_out_dset(io, i), &io->dir[i].out);
    if (io->out_fd < 0)
        for (size_t i = 0; i < io->inv.n; i++)
            if (io->dir[i].out.kind != DIRECT_FILTERED) /* H5Dwrite_chunk needs no descriptor */
                io->dir[i].out.kind = DIRECT_NONE;
}

void hdf5_direct_close_output(hq_io *io)
{
    hdf5_out_unmap(io);
    for (size_t i = 0; io->dir && i < io->inv.n; i++) {
        free(io->dir[i].out.chunk_addr);
        memset(&io->dir[i].out, 0, sizeof io->dir[i].out);
    }
    if (io->out_fd >= 0)
        close(io->out_fd);
    io->out_fd = -1;
}

void hdf5_direct_free(hq_io *io)
{
    hdf5_direct_close_output(io);
    for (size_t i = 0; io->dir && i < io->inv.n; i++)
        hdf5_chunk_table_free(io->dir[i].in_table);
    if (io->in_fd >= 0)
        close(io->in_fd);
    io->in_fd = -1;
    hdf5_pool_free(io->pool);
    io->pool = NULL;
    pthread_mutex_destroy(&io->put_lock);
    for (int w = 0; io->scratch && w < io->nscratch; w++) {
        for (int j = 0; j < 3; j++)
            free(io->scratch[w].buf[j]);
        hdf5_codec_free(io->scratch[w].codec);
    }
    free(io->scratch);
    io->scratch = NULL;
    free(io->dir);
    io->dir = NULL;
}

void hdf5_set_threads(hq_io *io, int threads)
{
    if (!io || threads < 1 || io->pool)
        return;
    io->threads = threads;
    io->pool = threads > 1 ? hdf5_pool_new(threads) : NULL;
    const int n = hdf5_pool_threads(io->pool);
    hdf5_scratch *s = calloc((size_t)n, sizeof *s);
    if (!s) {
        hdf5_pool_free(io->pool);
        io->pool = NULL;
        return;
    }
    if (io->scratch) /* the calling thread's, made before: it keeps its buffers as the last one */
        s[n - 1] = io->scratch[0];
    free(io->scratch);
    io->scratch = s;
    io->nscratch = n;
}

/* Calling thread, before a transfer: every thread's scratch exists (one, without a pool). */
int hdf5_scratch_ready(hq_io *io)
{
    if (!io->scratch) {
        io->scratch = calloc(1, sizeof *io->scratch);
        io->nscratch = io->scratch ? 1 : 0;
    }
    return io->scratch ? 0 : -1;
}

/* Worker w's buffer `which` (0-2), at least `bytes` long; NULL when out of memory. Each worker
 * touches its own only. */
unsigned char *hdf5_scratch_buf(hq_io *io, int worker, int which, size_t bytes)
{
    if (worker < 0 || worker >= io->nscratch)
        return NULL;
    hdf5_scratch *s = &io->scratch[worker];
    if (s->len[which] < bytes) {
        unsigned char *p = realloc(s->buf[which], bytes);
        if (!p)
            return NULL;
        s->buf[which] = p;
        s->len[which] = bytes;
    }
    return s->buf[which];
}

/* Whether a block of this item, in this direction, may go the direct way. coll_io: HDF5 would
 * make the transfer collective; only a one-rank filtered write may still go direct. */
int hdf5_direct_wanted(const hq_io *io, uint64_t item, int writing, int coll_io)
{
    if (!io->direct || !io->dir || item >= io->inv.n)
        return 0;
    const hdf5_side *s = writing ? &io->dir[item].out : &io->dir[item].in;
    if (s->kind == DIRECT_NONE)
        return 0;
    if (coll_io)
        return writing && s->kind == DIRECT_FILTERED && io->nranks == 1;
    return 1;
}
