/* szip_masks.c — an szip chunk that szip could not shrink, recorded as stored without szip.
 *
 * Why: szip is an optional filter: where a chunk's coded form would not be smaller, HDF5 stores
 * the chunk without it and sets the filter's bit in the chunk's filter mask. Parallel HDF5 1.10.8
 * writes filtered datasets collectively (every output goes through its MPI-IO driver, one rank
 * too) and stores such a chunk with mask 0: every reader then runs szip's decoder on bytes szip
 * never coded: "szip_filter: decompression failed", or worse, pixels decoded from noise without an
 * error (equalized noise does not compress). Rewriting the chunk with H5Dwrite_chunk and the right
 * mask does not help by itself: 1.10.8 keeps the old record, mask included, when the new chunk has
 * the old one's size; a chunk one byte longer first makes it take the record anew. In the parallel
 * file, 1.10.8 rewrote such chunks with another chunk's bytes: this runs on the closed file.
 *
 * Contract:
 *  - hdf5_fix_szip_masks: rank 0 alone, once every rank has closed OUT.part and before it is
 *    checked and renamed (close.c), with the file opened again through the serial driver. For
 *    every output dataset whose pipeline holds szip, every chunk whose mask says szip coded it:
 *    the filters after szip are undone as they were applied (fletcher32, deflate, shuffle), and
 *    what is left is szip's work only if it starts with HDF5's 4-byte size header and decodes
 *    (libaec's szip interface) to exactly that many bytes that code back to the same bytes. No
 *    other bytes pass that: an uncoded chunk is rewritten as it is stored, with szip's bit set,
 *    and read back once all are, through the dataset opened anew: one that does not read is
 *    HQ_EIO naming the dataset.
 *  - Built without libaec (no szlib.h): a chunk is taken for uncoded only where only shuffle comes
 *    before szip, nothing after it, and its header is not the chunk's size: uncoded chunks whose
 *    first bytes spell it, or behind other filters, are missed.
 *  - A filter after szip that cannot be undone here (nbit, scale-offset, third-party) leaves the
 *    chunk as it is. Chunks HDF5 recorded rightly (another version) have szip's bit set already.
 *  - It reads every such chunk once and decodes it (libaec: some hundred MB/s): szip outputs
 *    cost that much more at close; datasets without szip cost nothing. */
#define _GNU_SOURCE /* O_CLOEXEC */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>
#ifdef HQ_HAVE_SZLIB
#include <szlib.h>
#endif

#include "hdf5_internal.h"

/* The pipeline as far as this file needs it: szip's place, its parameters, and the filters. */
typedef struct pipeline {
    int n, szip; /* filters; szip's place (-1: none) */
    H5Z_filter_t f[32];
    unsigned shuffle_elem[32];
    unsigned sz_mask, sz_bpp, sz_ppb, sz_pps;
} pipeline;

static void describe(hid_t dcpl, pipeline *p)
{
    memset(p, 0, sizeof *p);
    p->szip = -1;
    p->n = H5Pget_nfilters(dcpl);
    if (p->n < 0 || p->n > 32)
        p->n = 0;
    for (int k = 0; k < p->n; k++) {
        unsigned flags = 0, cd[16] = {0};
        size_t ncd = sizeof cd / sizeof cd[0];
        p->f[k] = H5Pget_filter2(dcpl, (unsigned)k, &flags, &ncd, cd, 0, NULL, NULL);
        if (p->f[k] == H5Z_FILTER_SHUFFLE)
            p->shuffle_elem[k] = ncd >= 1 ? cd[0] : 0;
        if (p->f[k] == H5Z_FILTER_SZIP && p->szip < 0 && ncd >= 4) {
            p->szip = k;
            p->sz_mask = cd[H5Z_SZIP_PARM_MASK];
            p->sz_ppb = cd[H5Z_SZIP_PARM_PPB];
            p->sz_bpp = cd[H5Z_SZIP_PARM_BPP];
            p->sz_pps = cd[H5Z_SZIP_PARM_PPS];
        }
    }
}

/* Undoes the filters after szip on the stored chunk (buf, *len; mask: the filters skipped), in
 * place (tmp: scratch of cap bytes). 0, or -1 where one cannot be undone here. */
static int undo_after_szip(const pipeline *p, unsigned mask, unsigned char *buf, size_t *len, unsigned char *tmp,
                           size_t cap)
{
    for (int k = p->n - 1; k > p->szip; k--) {
        if (mask & 1u << k)
            continue;
        if (p->f[k] == H5Z_FILTER_FLETCHER32) {
            if (*len < 4)
                return -1;
            *len -= 4;
        } else if (p->f[k] == H5Z_FILTER_DEFLATE) {
            uLongf out = (uLongf)cap;
            if (uncompress(tmp, &out, buf, (uLong)*len) != Z_OK)
                return -1;
            memcpy(buf, tmp, out);
            *len = out;
        } else if (p->f[k] == H5Z_FILTER_SHUFFLE && p->shuffle_elem[k] > 1) {
            if (*len % p->shuffle_elem[k])
                return -1;
            hdf5_unshuffle(tmp, buf, *len, p->shuffle_elem[k]);
            memcpy(buf, tmp, *len);
        } else if (p->f[k] != H5Z_FILTER_SHUFFLE) {
            return -1;
        }
    }
    return 0;
}

/* Whether x[0, len) is szip's work: HDF5's header (the coded bytes' count, little-endian), then a
 * stream that decodes to exactly that many bytes and codes back to itself. */
static int szip_coded(const pipeline *p, const unsigned char *x, size_t len, uint64_t nbytes, int only_shuffle,
                      unsigned char *tmp, unsigned char *tmp2, size_t cap)
{
    if (len < 4)
        return 0;
    const uint32_t header = (uint32_t)x[0] | (uint32_t)x[1] << 8 | (uint32_t)x[2] << 16 | (uint32_t)x[3] << 24;
#ifdef HQ_HAVE_SZLIB
    (void)nbytes;
    (void)only_shuffle;
    if (header == 0 || header > cap)
        return 0;
    SZ_com_t sz = {(int)p->sz_mask, (int)p->sz_bpp, (int)p->sz_ppb, (int)p->sz_pps};
    size_t got = header;
    if (SZ_BufftoBuffDecompress(tmp, &got, x + 4, len - 4, &sz) != SZ_OK || got != header)
        return 0;
    size_t back = cap;
    return SZ_BufftoBuffCompress(tmp2, &back, tmp, header, &sz) == SZ_OK && back == len - 4 &&
           memcmp(tmp2, x + 4, back) == 0;
#else
    (void)p;
    (void)tmp;
    (void)tmp2;
    (void)cap;
    return !only_shuffle || header == nbytes;
#endif
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
    hdf5_close_id(&fs, H5Sclose);
    hdf5_close_id(&ms, H5Sclose);
    H5Eclear2(H5E_DEFAULT);
    return ok;
}

/* Stores the chunk at off again, its bytes (raw, size of them; room for one more) as they are,
 * with mask: one byte longer first, or 1.10.8 keeps the old record. */
static int rewrite_uncoded(hid_t d, const hsize_t *off, unsigned mask, unsigned char *raw, size_t size)
{
    raw[size] = 0;
    if (H5Dwrite_chunk(d, H5P_DEFAULT, mask, off, size + 1, raw) < 0 ||
        H5Dwrite_chunk(d, H5P_DEFAULT, mask, off, size, raw) < 0)
        return -1;
    return 0;
}

/* A chunk's filter mask and stored size, from the one-pass table where it reads (chunk_index.c),
 * else from HDF5 (one walk of the index a call). */
static int chunk_record(hid_t d, const hdf5_chunk_table *tab, const hsize_t *off, unsigned *mask, hsize_t *size)
{
    haddr_t addr = HADDR_UNDEF;
    if (tab)
        return hdf5_chunk_table_get(tab, off, mask, &addr, size) == 0 && addr != HADDR_UNDEF ? 0 : -1;
    const int ok = H5Dget_chunk_info_by_coord(d, off, mask, &addr, size) >= 0 && addr != HADDR_UNDEF;
    H5Eclear2(H5E_DEFAULT);
    return ok ? 0 : -1;
}

static int fix_dataset(hid_t f, int fd, const char *path, const char *name, hq_err *err)
{
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    hid_t dcpl = d >= 0 ? H5Dget_create_plist(d) : H5I_INVALID_HID;
    hid_t t = d >= 0 ? H5Dget_type(d) : H5I_INVALID_HID, sp = d >= 0 ? H5Dget_space(d) : H5I_INVALID_HID;
    int rc = 0, rank = 0;
    pipeline p;
    unsigned char *buf = NULL, *raw = NULL, *tmp = NULL, *stage = NULL, *tmp3 = NULL;
    uint64_t *bad = NULL, nbad = 0, cap_bad = 0; /* chunks stored uncoded, by grid index */
    hdf5_chunk_table *tab = NULL;
    hsize_t dims[MAX_RANK], cd[MAX_RANK];
    if (d < 0 || dcpl < 0 || t < 0 || sp < 0)
        goto fail;
    describe(dcpl, &p);
    if (p.szip < 0)
        goto out;
    int only_shuffle = 1; /* before szip: what it coded is the chunk's size */
    for (int k = 0; k < p.szip; k++)
        only_shuffle &= p.f[k] == H5Z_FILTER_SHUFFLE;
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
    /* A stored chunk, and every stage of it, is the chunk's bytes and a few more (headers, checks,
     * incompressible deflate). */
    const size_t cap = (size_t)nbytes + nbytes / 8 + 4096;
    buf = malloc((size_t)nbytes);
    raw = malloc(cap + 1);
    tmp = malloc(cap);
    stage = malloc(cap); /* the chunk as szip left it: undone in a copy, raw kept */
    tmp3 = malloc(cap);
    if (!buf || !raw || !tmp || !stage || !tmp3) {
        rc = hq_fail(err, HQ_EMEM, "%s:%s: out of memory", path, name);
        goto out;
    }
    tab = hdf5_chunk_table_read(d, fd);
    for (uint64_t c = 0; c < nchunks; c++) {
        hsize_t off[MAX_RANK], size = 0;
        unsigned mask = 0;
        hdf5_chunk_offset(c, rank, grid, cd, off);
        if (chunk_record(d, tab, off, &mask, &size) != 0 || size == 0 || size > cap || (mask & 1u << p.szip))
            continue; /* not written (read as the fill value), or recorded rightly */
        uint32_t m32 = 0;
        if (H5Dread_chunk(d, H5P_DEFAULT, off, &m32, raw) < 0) {
            H5Eclear2(H5E_DEFAULT);
            continue; /* whoever reads it will say so */
        }
        const size_t len0 = (size_t)size; /* raw keeps the stored bytes for the rewrite */
        size_t len = len0;
        memcpy(stage, raw, len);
        if (undo_after_szip(&p, mask, stage, &len, tmp, cap) != 0)
            continue; /* a filter this file cannot undo: left as it is */
#ifndef HQ_HAVE_SZLIB
        if (!only_shuffle || p.szip != p.n - 1 || len < nbytes)
            continue; /* without libaec only this case is certain */
#endif
        if (szip_coded(&p, stage, len, nbytes, only_shuffle, tmp, tmp3, cap))
            continue;
        uint64_t *more = nbad == cap_bad ? realloc(bad, (cap_bad = cap_bad ? 2 * cap_bad : 64) * sizeof *bad) : bad;
        if (!more) {
            rc = hq_fail(err, HQ_EMEM, "%s:%s: out of memory", path, name);
            goto out;
        }
        bad = more;
        bad[nbad++] = c;
        if (rewrite_uncoded(d, off, mask | 1u << p.szip, raw, len0) != 0) {
            char det[512];
            hdf5_detail(det, sizeof det);
            rc = hq_fail(err, HQ_EIO, "%s:%s: a chunk szip could not shrink cannot be recorded as stored without it%s",
                         path, name, det);
            goto out;
        }
    }
    /* 1.10.8 keeps the last chunk it looked up, mask included, with the open dataset: the chunks
     * rewritten above are read again through the dataset opened anew. */
    if (nbad) {
        hdf5_close_id(&d, H5Dclose);
        if ((d = H5Dopen2(f, name, H5P_DEFAULT)) < 0)
            goto fail;
    }
    for (uint64_t b = 0; b < nbad && !rc; b++) {
        hsize_t off[MAX_RANK];
        hdf5_chunk_offset(bad[b], rank, grid, cd, off);
        if (!chunk_reads(d, t, rank, dims, cd, off, buf)) {
            char det[512];
            hdf5_detail(det, sizeof det);
            rc = hq_fail(err, HQ_EIO, "%s:%s: a chunk szip could not shrink cannot be read back%s", path, name, det);
        }
    }
    goto out;
fail:
    rc = hq_fail(err, HQ_EIO, "%s:%s: cannot read the output's layout", path, name);
out:
    hdf5_chunk_table_free(tab);
    free(bad);
    free(buf);
    free(raw);
    free(tmp);
    free(stage);
    free(tmp3);
    hdf5_close_id(&dcpl, H5Pclose);
    hdf5_close_id(&t, H5Tclose);
    hdf5_close_id(&sp, H5Sclose);
    hdf5_close_id(&d, H5Dclose);
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
    const int fd = open(io->part_path, O_RDONLY | O_CLOEXEC); /* the chunk tables' reads */
    for (uint64_t i = 0; i < io->inv.n && !rc; i++)
        if (!io->inv.items[i].bad && (io->flags[i] & OUT_FILTERED))
            rc = fix_dataset(f, fd, io->out_path, io->inv.items[i].name, err);
    if (fd >= 0)
        close(fd);
    if (H5Fclose(f) < 0 && !rc) {
        char det[512];
        hdf5_detail(det, sizeof det);
        rc = hq_fail(err, HQ_EIO, "%s: closing the output failed%s", io->out_path, det);
    }
    return rc;
}
