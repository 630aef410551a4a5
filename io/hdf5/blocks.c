/* blocks.c — hq_hdf5_ops.read_block / write_block: one block of one item moved between memory
 * and the file.
 *
 * Contract:
 *  - Collective only when asked and needed (hdf5_needs_collective: writes of filtered datasets, or
 *    HQ_HDF5_COLLECTIVE=1); a rank with no block then still takes part with an empty selection,
 *    and every rank ends with the same result.
 *  - What HDF5 would refuse on some ranks only (a chunk past the end of the input, a full disk) is
 *    checked and agreed before a collective transfer: parallel HDF5 1.10 hangs otherwise.
 *  - Independent transfers of unfiltered chunked data go chunk by chunk (by_chunk): one call per
 *    whole chunk, straight into the block in chunk order (CHUNK_ORDER), or through a one-chunk
 *    stage for writes in row order.
 *  - A block that fails names the dataset and where the block lies ("FILE:/dset [rows 0-255, cols
 *    512-767]: ..."); a chunk that does not decompress is bad input (HQ_EINPUT). */
#include <stdlib.h>
#include <string.h>

#include "../../core/sample.h"
#include "../box.h"
#include "hdf5_internal.h"

/* Collective reads only: HDF5 refuses a chunk that lies past the end of allocated space on the
 * rank that reads it, after the other ranks entered the MPI collective, and the job hangs. So the
 * chunks of the block are looked up first, and the ranks agree before reading. (A file cut short
 * fails at open; this catches one whose chunk index points past its recorded end.) The lookups
 * come from the one-pass chunk table (chunk_index.c) where it applies: HDF5 1.10.8 walks the
 * whole index for each one. */
static int check_block_chunks(hq_io *io, uint64_t item, const hq_block *b, hq_err *err)
{
    const hq_item *it = &io->inv.items[item];
    chunk_walk w;
    if (!b || !io->in_eoa || !hdf5_walk_begin(&w, io, item, b))
        return 0;
    do {
        unsigned mask = 0;
        haddr_t addr = HADDR_UNDEF;
        hsize_t size = 0, off[MAX_RANK];
        for (int d = 0; d < w.k; d++)
            off[d] = w.idx[d] * w.cd[d];
        if (hdf5_chunk_lookup(io, item, off, &mask, &addr, &size) < 0) {
            char det[512], where[160];
            hdf5_detail(det, sizeof det);
            return hq_fail(err, HQ_EINPUT, "%s:%s [%s]: cannot read the chunk index%s", io->inv.root, it->name,
                           hdf5_block_text(it, b, where, sizeof where), det);
        }
        if (addr != HADDR_UNDEF && hdf5_ends_past(addr, size, io->in_eoa)) {
            char where[160];
            return hq_fail(err, HQ_EINPUT, "%s:%s [%s]: a chunk lies past the end of the file (truncated?)",
                           io->inv.root, it->name, hdf5_block_text(it, b, where, sizeof where));
        }
    } while (hdf5_walk_next(&w));
    return 0;
}

/* Selects the block in the file space and makes the matching contiguous memory space; with
 * b == NULL both select nothing, for a rank that only joins a collective transfer. */
static int select_block(hid_t fspace, const hq_item *it, int frank, const hq_block *b, hid_t *mspace)
{
    if (!b) {
        const hsize_t one = 1;
        *mspace = H5Screate_simple(1, &one, NULL);
        if (*mspace < 0 || H5Sselect_none(*mspace) < 0 || H5Sselect_none(fspace) < 0)
            return -1;
        return 0;
    }
    hsize_t start[MAX_RANK], count[MAX_RANK];
    const int k = hdf5_block_extent(it, frank, b, start, count);
    *mspace = H5Screate_simple(k, count, NULL);
    if (*mspace < 0 || H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, count, NULL) < 0)
        return -1;
    return 0;
}

/* Parallel HDF5 1.10 breaks a collective write that needs a type conversion into independent
 * writes, which it refuses for a filtered dataset ("Can't perform independent write with filters
 * in pipeline"): a compressed dataset stored in the other byte order (big-endian on x86) could not
 * be written by several ranks. Such a dataset is written with its own type as the memory type,
 * from a byte-swapped copy of the block: nothing is converted. Returns
 * that type (to close), or H5I_INVALID_HID where the native memory type is the file's. Depends
 * only on the dataset: every rank of a collective write decides alike. */
static hid_t foreign_order_type(hid_t d, hid_t mtype)
{
    const hid_t t = H5Dget_type(d);
    if (t < 0)
        return H5I_INVALID_HID;
    const size_t size = H5Tget_size(mtype);
    const H5T_class_t cls = H5Tget_class(mtype);
    const int same_but_order = size > 1 && H5Tget_class(t) == cls && H5Tget_size(t) == size &&
                               H5Tget_order(t) != H5Tget_order(mtype) && H5Tget_precision(t) == 8 * size &&
                               H5Tget_offset(t) == 0 && (cls != H5T_INTEGER || H5Tget_sign(t) == H5Tget_sign(mtype));
    if (same_but_order)
        return t;
    H5Tclose(t);
    return H5I_INVALID_HID;
}

/* Whether a transfer the driver asks to be collective must be. Only writes of compressed datasets
 * must (parallel HDF5 compresses chunks in collective writes only); elsewhere each rank's blocks
 * are large, disjoint and chunk-aligned, and independent MPI-IO beats two-phase collective I/O:
 * on one host with 4 ranks, a 30 GiB chunked image read collectively ran at a quarter of the
 * speed of independent reads (bench/results/scaling.txt). HQ_HDF5_COLLECTIVE=1 keeps every such
 * transfer collective, for parallel file systems where aggregation pays. Depends only on the item
 * and the direction, so every rank decides alike. */
int hdf5_needs_collective(const hq_io *io, uint64_t item, int writing)
{
    static int forced = -1;
    if (forced < 0) {
        const char *s = getenv("HQ_HDF5_COLLECTIVE");
        forced = s && *s && strcmp(s, "0") != 0;
    }
    return forced || (writing && item < io->inv.n && (io->flags[item] & OUT_FILTERED));
}

int hdf5_independent(hq_io *io, uint64_t item)
{
    return item < io->inv.n && io->out_dset && !hdf5_needs_collective(io, item, 0) && !hdf5_needs_collective(io, item, 1);
}

/* Largest chunk staged by by_chunk; bigger ones go through HDF5 as they are. */
#define STAGE_MAX (64 * MiB)

/* A buffer for one chunk, kept for the next; 0 when it cannot be had (then go without). */
static int have_stage(hq_io *io, size_t bytes)
{
    if (bytes > STAGE_MAX)
        return 0;
    if (io->stage_bytes < bytes) {
        unsigned char *p = realloc(io->stage, bytes);
        if (!p)
            return 0;
        io->stage = p;
        io->stage_bytes = bytes;
    }
    return 1;
}

/* A block's independent transfer chunk by chunk, for unfiltered chunked datasets. Handed a whole
 * block in row order, HDF5's independent path cuts the transfer into pieces contiguous in both file
 * and memory: a row of a chunk each (1 KiB for 1024 x 1024 chunks), one pread or pwrite per piece;
 * 2 GiB took 2.1 million pwrites and went out at 0.45 GiB/s on tmpfs. Chunk by chunk, a whole
 * chunk is one call (2,177 pwrites for the same 2 GiB, at 2.2 GiB/s).
 *  - Reads in chunk order (CHUNK_ORDER) go straight into the block, each chunk's part dense. In
 *    row order they are left to HDF5, which reads a chunk that fits its cache whole and copies it
 *    out: a copy more.
 *  - Writes go through a one-chunk buffer either way, packed there (row order) or copied (chunk
 *    order). A write into a file's page cache holds the file's lock (tmpfs; ext4 and xfs
 *    buffered), and the copy from a buffer still in the CPU's cache is the shorter one to hold it
 *    for. Measured: with 4 ranks writing one file, 6.1 s of write phase straight from the block
 *    against 3.4-5.2 s staged; at 1 rank no difference (bench/results/scaling.txt). The spread
 *    between runs is as large, so this is a lead, not a proof.
 * Returns 1 when HDF5 should move the block as it is (row order and: a read, one chunk, or chunks
 * too large for the buffer), 0 when done, -1 on a failure (HDF5's stack kept). */
static int by_chunk(hq_io *io, uint64_t item, const hq_block *b, hid_t d, hid_t fspace, hid_t mtype, void *buf,
                    int writing)
{
    chunk_walk w;
    const int dense = (io->flags[item] & CHUNK_ORDER) != 0;
    if (!dense && (!writing || (io->flags[item] & OUT_FILTERED)))
        return 1;
    if (!hdf5_walk_begin(&w, io, item, b))
        return 1;
    const int staged = writing && have_stage(io, w.chunk_bytes);
    if (!dense && (!staged || w.chunks < 2))
        return 1;
    static const uint64_t zero[MAX_RANK];
    const size_t elem = io->inv.items[item].sample_bytes;
    unsigned char *at = buf;
    do {
        hsize_t s[MAX_RANK], n[MAX_RANK], len = elem;
        for (int i = 0; i < w.k; i++) {
            s[i] = w.s[i];
            n[i] = w.n[i];
            len *= w.n[i];
        }
        if (staged && dense)
            memcpy(io->stage, at, len);
        else if (staged)
            hq_box_copy((hq_box_side){io->stage, w.n, zero}, (hq_box_side){buf, w.count, w.in_block}, w.n, w.k, elem);
        void *p = staged ? io->stage : at;
        const hid_t m = H5Screate_simple(w.k, n, NULL);
        herr_t st = m < 0 ? -1 : H5Sselect_hyperslab(fspace, H5S_SELECT_SET, s, NULL, n, NULL);
        if (st >= 0)
            st = writing ? H5Dwrite(d, mtype, m, fspace, io->dxpl_ind, p)
                         : H5Dread(d, mtype, m, fspace, io->dxpl_ind, p);
        if (m >= 0)
            H5Sclose(m);
        if (st < 0)
            return -1;
        at += len;
    } while (hdf5_walk_next(&w));
    return 0;
}

static int transfer(hq_io *io, uint64_t item, const hq_block *b, int collective, void *buf, int writing, hq_err *err)
{
    if (collective && !hdf5_needs_collective(io, item, writing))
        collective = 0;
    if (!b && !collective)
        return 0;
    const char *file = writing ? io->out_path : io->inv.root;
    if (item >= io->inv.n)
        return hq_fail(err, HQ_EIO, "%s: item %llu out of range", file ? file : "HDF5", (unsigned long long)item);
    const hq_item *it = &io->inv.items[item];
    /* The handle itself only where HDF5 moves the block: the direct path needs none, and opening
     * each of 20,000 small datasets again cost more than moving their pixels. */
    hid_t d = H5I_INVALID_HID;
    if (!(io->flags[item] & (writing ? OUT_MADE : IN_OPENED)))
        return hq_fail(err, HQ_EIO, "%s:%s: not open for %s", file ? file : "HDF5 output", it->name,
                       writing ? "writing" : "reading");
    const char *verb = writing ? "write" : "read";
    char where[160] = "";
    int rc = 0;
    if (b && !hdf5_block_fits(it, io->frank[item], b)) {
        rc = hq_fail(err, HQ_EIO, "%s:%s [slices %llu-%llu, rows %llu-%llu, cols %llu-%llu]: %s failed: outside the "
                     "dataset", file, it->name, (unsigned long long)b->s0, (unsigned long long)b->s1 - 1,
                     (unsigned long long)b->r0, (unsigned long long)b->r1 - 1, (unsigned long long)b->c0,
                     (unsigned long long)b->c1 - 1, verb);
        if (!collective)
            return rc;
        b = NULL; /* still take part, so that the other ranks do not hang */
    }
    if (b)
        hdf5_block_text(it, b, where, sizeof where);
    if (writing && (io->flags[item] & OUT_FILTERED) && !collective) {
        if (io->nranks > 1)
            return hq_fail(err, HQ_EIO, "%s:%s [%s]: write failed: a compressed dataset can only be written "
                           "collectively", file, it->name, where);
        collective = 1; /* alone in the communicator, a collective write is just a write */
    }
    /* Checks agreed before the transfer, so that all ranks skip it together. */
    if (!writing && collective) {
        rc = hdf5_agree(io->comm, rc ? rc : check_block_chunks(io, item, b, err), err);
        if (rc)
            return rc;
    } else if (!writing && b && !hdf5_chunk_lookup_slow(io, item) && (rc = check_block_chunks(io, item, b, err)) != 0) {
        /* MPI-IO's short read of a truncated chunk can pass HDF5 unnoticed. Where each lookup is
         * a walk of the whole index (no one-pass table, a large grid), the walks cost the square
         * of the chunk count (16,384 chunks: 17 s; 65,536: minutes), and the independent read is
         * left to HDF5's own check of each chunk against the end of allocated space. */
        return rc;
    }
    /* A collective write that one rank may not make (its bytes met a full disk under the
     * background reservation) is settled by all ranks first. */
    if (writing && collective && io->bg_started) {
        rc = hdf5_agree(io->comm, rc ? rc : hdf5_reserve_wait(io, 0, UINT64_MAX, err), err);
        if (rc)
            return rc;
    }
    if (writing && collective && (io->flags[item] & OUT_FILTERED)) {
        const int pre = hdf5_reserve_for_write(io, item, b, err);
        rc = hdf5_agree(io->comm, rc ? rc : pre, err);
        if (rc)
            return rc;
    }
    if (b && !writing && buf && (io->flags[item] & FILL_NEVER))
        memset(buf, 0, (size_t)(hq_block_pixels(b) * it->channels * it->sample_bytes));
    static unsigned char nothing;
    const hid_t mtype = it->sample == HQ_SAMPLE_FLOAT ? (it->sample_bytes == 8 ? H5T_NATIVE_DOUBLE : H5T_NATIVE_FLOAT)
                        : it->sample == HQ_SAMPLE_INT ? (it->sample_bytes == 2 ? H5T_NATIVE_INT16 : H5T_NATIVE_INT8)
                        : it->sample_bytes == 2        ? H5T_NATIVE_UINT16
                                                       : H5T_NATIVE_UINT8;
    hid_t mspace = H5I_INVALID_HID, fspace = H5I_INVALID_HID;
    herr_t st = -1;
    /* Compressed input is read independently even when the caller asks for a collective read (the
     * ranks still meet in the agreements around it): HDF5 1.10's collective read of filtered
     * chunks trusts a damaged chunk index that its independent read refuses, and dies in its
     * Fletcher-32 check on a chunk listed twice, once with size 0 (fuzz/regress/hdf5/chunk-index-*). */
    const int coll_io = collective && (writing || !it->collective);
    /* The direct path (direct_io.c) moves the block itself where it can; else HDF5, as before. */
    const int moved = b && !rc && hdf5_direct_wanted(io, item, writing, coll_io)
                          ? hdf5_direct_transfer(io, item, b, buf, writing)
                          : 1;
    const int direct = moved == 0;
    if (moved == 2)
        rc = hq_fail(err, HQ_EINPUT, "%s:%s [%s]: cannot decompress (corrupt chunk?): a chunk decodes to another "
                     "size than its own", file, it->name, where);
    if (b) {
        io->blocks[writing]++;
        io->direct_blocks[writing] += (uint64_t)direct;
    }
    if (direct)
        st = 0;
    else if (moved == 2)
        st = -1; /* said above; an independent read (compressed input), so no rank waits for it */
    else if (writing && !rc && (rc = hdf5_reserve_wait(io, 0, UINT64_MAX, err)) != 0)
        st = -1; /* the background reservation met a full disk: nothing is written */
    else if ((d = writing ? hdf5_out_dset(io, item) : hdf5_in_dset(io, item)) >= 0 &&
             (fspace = H5Dget_space(d)) >= 0 && select_block(fspace, it, io->frank[item], b, &mspace) >= 0) {
        const hid_t dxpl = coll_io ? io->dxpl_coll : io->dxpl_ind;
        void *p = b ? buf : &nothing;
        /* by_chunk: 1 leaves the whole block to HDF5, 0 moved it, -1 failed */
        const int whole = b && !coll_io ? by_chunk(io, item, b, d, fspace, mtype, buf, writing) : 1;
        const hid_t ftype = writing && coll_io && (io->flags[item] & OUT_FILTERED) && whole > 0
                                ? foreign_order_type(d, mtype)
                                : H5I_INVALID_HID;
        const size_t nbytes = b && ftype >= 0 ? (size_t)H5Sget_select_npoints(mspace) * H5Tget_size(mtype) : 0;
        /* A swapped copy: other threads may still read the block (the report's samples). Without
         * memory for it, the block itself, swapped back after, rather than a rank missing from the
         * collective write. */
        void *swapped = nbytes ? malloc(nbytes) : NULL;
        void *w = swapped ? memcpy(swapped, p, nbytes) : p;
        if (nbytes)
            hq_swap_words(w, nbytes, (unsigned)H5Tget_size(mtype));
        if (whole <= 0)
            st = whole;
        else if (ftype >= 0)
            st = H5Dwrite(d, ftype, mspace, fspace, dxpl, w);
        else
            st = writing ? H5Dwrite(d, mtype, mspace, fspace, dxpl, p) : H5Dread(d, mtype, mspace, fspace, dxpl, p);
        if (nbytes && !swapped)
            hq_swap_words(p, nbytes, (unsigned)H5Tget_size(mtype));
        free(swapped);
        if (ftype >= 0)
            H5Tclose(ftype);
    }
    if (st < 0 && !rc) {
        char det[512];
        const int corrupt = !writing && hdf5_filter_failed();
        hdf5_detail(det, sizeof det);
        if (b && corrupt)
            rc = hq_fail(err, HQ_EINPUT, "%s:%s [%s]: cannot decompress (corrupt chunk?)%s", file, it->name, where, det);
        else if (b)
            rc = hq_fail(err, HQ_EIO, "%s:%s [%s]: %s failed%s", file, it->name, where, verb, det);
        else
            rc = hq_fail(err, HQ_EIO, "%s:%s: %s failed (collective, no selection)%s", file, it->name, verb, det);
    }
    if (st >= 0 && coll_io && !direct)
        hdf5_note_fallback(io, item, writing);
    if (mspace >= 0)
        H5Sclose(mspace);
    if (fspace >= 0)
        H5Sclose(fspace);
    /* After a failed collective transfer HDF5's state may differ between ranks; every rank must
     * learn of it now, so that all stop together instead of meeting in different collectives. */
    return collective ? hdf5_agree(io->comm, rc, err) : rc;
}

int hdf5_read_block(hq_io *io, uint64_t item, const hq_block *b, int collective, void *dst, hq_err *err)
{
    return transfer(io, item, b, collective, dst, 0, err);
}

int hdf5_write_block(hq_io *io, uint64_t item, const hq_block *b, int collective, const void *src,
                            hq_err *err)
{
    if (!io->out_dset || io->out_file < 0)
        return hq_fail(err, HQ_EIO, "%s: no output was created", io->inv.root);
    return transfer(io, item, b, collective, (void *)src, 1, err);
}
