/* szip_masks.c — an szip chunk that szip could not shrink, recorded as stored without szip.
 *
 * Why: szip is an optional filter: where a chunk's coded form would not be smaller, HDF5 stores
 * the chunk without it and sets the filter's bit in the chunk's filter mask. Parallel HDF5 1.10.8
 * writes filtered datasets collectively (every output goes through its MPI-IO driver, one rank
 * too) and stores such a chunk with mask 0: every reader then runs szip's decoder on bytes szip
 * never coded ("szip_filter: decompression failed") — a complete-looking output nobody could read
 * (equalized noise does not compress). Rewriting the chunk with H5Dwrite_chunk and the right mask
 * does not help by itself: 1.10.8 keeps the old record, mask included, when the new chunk has the
 * old one's size; a chunk one byte longer first makes it take the record anew.
 *
 * Contract:
 *  - hdf5_fix_szip_masks: rank 0 alone, once every rank has closed OUT.part and before it is
 *    checked and renamed (close.c), with the file opened again through the serial driver: in
 *    parallel, 1.10.8 rewrote such chunks with another chunk's bytes. For every output dataset
 *    whose pipeline holds szip: each chunk's stored size; each chunk that could be uncoded read
 *    back through HDF5 (those at least as large as the chunk, where only shuffle comes before
 *    szip; else every chunk); each one that does not read rewritten as it is stored, with szip's
 *    bit set, then read again through the dataset opened anew. A chunk that still does not read
 *    is HQ_EIO naming the dataset.
 *  - Chunks HDF5 recorded rightly (another HDF5 version) read back and are left alone, as are
 *    datasets without szip: they cost nothing. */
#include <stdlib.h>
#include <string.h>

#include "hdf5_internal.h"

/* szip's place in the pipeline (-1: none) and whether only shuffle (which keeps a chunk's size)
 * comes before it. */
static int szip_place(hid_t dcpl, int *only_shuffle_before)
{
    const int nf = H5Pget_nfilters(dcpl);
    *only_shuffle_before = 1;
    for (int k = 0; k < nf; k++) {
        unsigned flags = 0, cd[16];
        size_t ncd = sizeof cd / sizeof cd[0];
        const H5Z_filter_t f = H5Pget_filter2(dcpl, (unsigned)k, &flags, &ncd, cd, 0, NULL, NULL);
        if (f == H5Z_FILTER_SZIP)
            return k < 32 ? k : -1;
        if (f != H5Z_FILTER_SHUFFLE)
            *only_shuffle_before = 0;
    }
    return -1;
}

/* Whether the chunk at off reads back through the filters (every rank reads it). */
static int chunk_reads(hid_t d, hid_t t, int rank, const hsize_t *dims, const hsize_t *cd, const hsize_t *off,
                       void *buf)
{
    hsize_t count[MAX_RANK];
    for (int k = 0; k < rank; k++)
        count[k] = off[k] + cd[k] <= dims[k] ? cd[k] : dims[k] - off[k];
    hid_t fs = H5Dget_space(d), ms = H5Screate_simple(rank, count, NULL);
    int ok = fs >= 0 && ms >= 0 && H5Sselect_hyperslab(fs, H5S_SELECT_SET, off, NULL, count, NULL) >= 0 &&
             H5Dread(d, t, ms, fs, H5P_DEFAULT, buf) >= 0;
    if (fs >= 0)
        H5Sclose(fs);
    if (ms >= 0)
        H5Sclose(ms);
    H5Eclear2(H5E_DEFAULT);
    return ok;
}

/* Whether the chunk at off (size bytes stored) is held uncoded under a mask that says szip coded it.
 * szip's coded form starts with the size of what it coded (HDF5's 4-byte header) and is at most
 * that plus the header: with only shuffle before szip, that size is the chunk's, so a chunk stored
 * smaller is coded and one whose header differs is not. Where the header matches (pixels that
 * happen to spell it) or other filters come first, the chunk is coded only if it reads back:
 * reading is no proof (szip's decoder took some uncoded chunks without an error), the header is. */
static int uncoded(hid_t d, const hsize_t *off, hsize_t size, uint64_t nbytes, int only_shuffle, unsigned char *raw,
                   size_t cap, hid_t t, int rank, const hsize_t *dims, const hsize_t *cd, void *buf)
{
    if (only_shuffle && size < nbytes)
        return 0;
    uint32_t mask = 0;
    if (only_shuffle && size <= cap && H5Dread_chunk(d, H5P_DEFAULT, off, &mask, raw) >= 0) {
        const uint32_t header = (uint32_t)raw[0] | (uint32_t)raw[1] << 8 | (uint32_t)raw[2] << 16 | (uint32_t)raw[3] << 24;
        if (header != nbytes)
            return 1;
    }
    H5Eclear2(H5E_DEFAULT);
    return !chunk_reads(d, t, rank, dims, cd, off, buf);
}

/* Stores the chunk at off again, its bytes as they are, with szip's bit set in its mask. */
static int rewrite_uncoded(hid_t d, const hsize_t *off, unsigned bit, unsigned char *raw, size_t cap)
{
    hsize_t size = 0;
    uint32_t mask = 0;
    if (H5Dget_chunk_storage_size(d, off, &size) < 0 || size == 0 || size + 1 > cap ||
        H5Dread_chunk(d, H5P_DEFAULT, off, &mask, raw) < 0)
        return -1;
    raw[size] = 0;
    mask = bit; /* not what H5Dread_chunk says: 1.10.8 gives the mask of the chunk it looked up last */
    if (H5Dwrite_chunk(d, H5P_DEFAULT, mask, off, (size_t)size + 1, raw) < 0 ||
        H5Dwrite_chunk(d, H5P_DEFAULT, mask, off, (size_t)size, raw) < 0)
        return -1;
    return 0;
}

static void chunk_offset(uint64_t c, int rank, const uint64_t *grid, const hsize_t *cd, hsize_t *off)
{
    for (int k = rank - 1; k >= 0; k--) {
        off[k] = (c % grid[k]) * cd[k];
        c /= grid[k];
    }
}

static int fix_dataset(hid_t f, const char *path, const char *name, hq_err *err)
{
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    hid_t dcpl = H5Dget_create_plist(d), t = H5Dget_type(d), sp = H5Dget_space(d);
    int rc = 0, only_shuffle = 1, place = -1, rank = 0;
    unsigned char *buf = NULL, *raw = NULL;
    uint64_t *bad = NULL, nbad = 0, cap_bad = 0; /* chunks stored uncoded, by grid index */
    hsize_t dims[MAX_RANK], cd[MAX_RANK];
    if (d < 0 || dcpl < 0 || t < 0 || sp < 0)
        goto fail;
    place = szip_place(dcpl, &only_shuffle);
    if (place < 0)
        goto out;
    rank = H5Sget_simple_extent_ndims(sp);
    if (rank < 1 || rank > MAX_RANK || H5Sget_simple_extent_dims(sp, dims, NULL) != rank ||
        H5Pget_chunk(dcpl, rank, cd) != rank)
        goto fail;
    uint64_t nbytes = H5Tget_size(t), nchunks = 1, grid[MAX_RANK];
    for (int k = 0; k < rank; k++) {
        grid[k] = (dims[k] + cd[k] - 1) / cd[k];
        nbytes *= cd[k];
        nchunks *= grid[k];
    }
    /* A stored chunk is the chunk's bytes through the filters: at most a few bytes over it. */
    const size_t cap = (size_t)nbytes + 4096;
    buf = malloc((size_t)nbytes);
    raw = malloc(cap);
    if (!buf || !raw) {
        rc = hq_fail(err, HQ_EMEM, "%s:%s: out of memory", path, name);
        goto out;
    }
    for (uint64_t c = 0; c < nchunks; c++) {
        hsize_t off[MAX_RANK], size = 0;
        chunk_offset(c, rank, grid, cd, off);
        if (H5Dget_chunk_storage_size(d, off, &size) < 0 || size == 0) {
            H5Eclear2(H5E_DEFAULT);
            continue; /* not written: HDF5 reads it as the fill value */
        }
        if (!uncoded(d, off, size, nbytes, only_shuffle, raw, cap, t, rank, dims, cd, buf))
            continue;
        uint64_t *more = nbad == cap_bad ? realloc(bad, (cap_bad = cap_bad ? 2 * cap_bad : 64) * sizeof *bad) : bad;
        if (!more) {
            rc = hq_fail(err, HQ_EMEM, "%s:%s: out of memory", path, name);
            goto out;
        }
        bad = more;
        bad[nbad++] = c;
    }
    /* 1.10.8 keeps the last chunk it looked up, mask included, with the open dataset: the chunks
     * are rewritten first, then read again through the dataset opened anew. */
    for (int pass = 0; pass < 2 && !rc && nbad; pass++) {
        if (pass == 1) {
            H5Dclose(d);
            d = H5Dopen2(f, name, H5P_DEFAULT);
            if (d < 0)
                goto fail;
        }
        for (uint64_t b = 0; b < nbad && !rc; b++) {
            hsize_t off[MAX_RANK];
            chunk_offset(bad[b], rank, grid, cd, off);
            if (pass == 0 ? rewrite_uncoded(d, off, 1u << place, raw, cap) < 0
                          : !chunk_reads(d, t, rank, dims, cd, off, buf)) {
                char det[512];
                hdf5_detail(det, sizeof det);
                rc = hq_fail(err, HQ_EIO, "%s:%s: a chunk szip could not shrink cannot be %s%s", path, name, pass ? "read back" : "recorded as stored without it", det);
            }
        }
    }
    goto out;
fail:
    rc = hq_fail(err, HQ_EIO, "%s:%s: cannot read the output's layout", path, name);
out:
    free(bad);
    free(buf);
    free(raw);
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (t >= 0)
        H5Tclose(t);
    if (sp >= 0)
        H5Sclose(sp);
    if (d >= 0)
        H5Dclose(d);
    return rc;
}

int hdf5_fix_szip_masks(hq_io *io, hq_err *err)
{
    int any = 0;
    for (uint64_t i = 0; i < io->inv.n; i++)
        any |= !io->inv.items[i].bad && (io->flags[i] & OUT_FILTERED);
    if (!any)
        return 0;
    hid_t f = H5Fopen(io->part_path, H5F_ACC_RDWR, H5P_DEFAULT);
    if (f < 0) {
        char det[512];
        hdf5_detail(det, sizeof det);
        return hq_fail(err, HQ_EIO, "%s: cannot open %s again%s", io->out_path, io->part_path, det);
    }
    int rc = 0;
    for (uint64_t i = 0; i < io->inv.n && !rc; i++)
        if (!io->inv.items[i].bad && (io->flags[i] & OUT_FILTERED))
            rc = fix_dataset(f, io->out_path, io->inv.items[i].name, err);
    if (H5Fclose(f) < 0 && !rc) {
        char det[512];
        hdf5_detail(det, sizeof det);
        rc = hq_fail(err, HQ_EIO, "%s: closing the output failed%s", io->out_path, det);
    }
    return rc;
}
