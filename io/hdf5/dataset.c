/* dataset.c — what an input dataset holds, checked on rank 0 at scan and again on every rank at
 * open: type and shape as an image (uint8/uint16 and int8/int16: (H,W), (N,H,W), (H,W,3|4),
 * (N,H,W,C); float32/float64 IEEE, gray only: (H,W), (N,H,W), (N,H,W,1)), layout and
 * filters we can honestly read, chunk shape, and data that lies inside the file.
 *
 * Contract:
 *  - hdf5_describe_dataset fills an item's shape and sample size from the dataset, or fails with
 *    HQ_EINPUT "FILE:/dset: why"; hdf5_item_roles says which dimensions are N and C.
 *  - hdf5_check_storage refuses virtual and external layouts, filters this HDF5 cannot decode and
 *    filter parameters that do not fit the dataset; hdf5_check_storage_size refuses recorded
 *    storage (chunk index records, compact data) too short for the data, which H5Dread would
 *    overrun ("FILE:/dset: damaged: ..."); hdf5_check_contiguous_extent refuses a
 *    contiguous dataset that ends past the file's end. hdf5_ends_past compares without overflow.
 *  - No function here keeps an HDF5 id open; none talks to other ranks. */
#include <stdio.h>

#include "hdf5_internal.h"

static void type_name(hid_t t, char *buf, size_t len)
{
    const size_t bits = H5Tget_size(t) * 8;
    switch (H5Tget_class(t)) {
    case H5T_INTEGER:
        snprintf(buf, len, "%sint%zu", H5Tget_sign(t) == H5T_SGN_NONE ? "u" : "", bits);
        break;
    case H5T_FLOAT:
        snprintf(buf, len, "float%zu", bits);
        break;
    case H5T_STRING:
        snprintf(buf, len, "string");
        break;
    case H5T_COMPOUND:
        snprintf(buf, len, "compound");
        break;
    case H5T_ENUM:
        snprintf(buf, len, "enum");
        break;
    case H5T_ARRAY:
        snprintf(buf, len, "array");
        break;
    case H5T_VLEN:
        snprintf(buf, len, "variable-length");
        break;
    case H5T_BITFIELD:
        snprintf(buf, len, "bitfield%zu", bits);
        break;
    case H5T_OPAQUE:
        snprintf(buf, len, "opaque");
        break;
    case H5T_REFERENCE:
        snprintf(buf, len, "reference");
        break;
    default:
        snprintf(buf, len, "unknown");
        break;
    }
}

static void dims_text(const hsize_t *d, int n, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%llu", i ? "x" : "", (unsigned long long)d[i]);
}

/* Which dimensions a dataset of rank frank has besides H and W: a leading N (a stack) and a
 * trailing C (channels). Rank 3 is (H,W,C) only when the last dimension is 3 or 4 (colour). */
static void dims_roles(int frank, uint64_t last, int *has_n, int *has_c)
{
    *has_c = frank == 4 || (frank == 3 && (last == 3 || last == 4));
    *has_n = frank - 2 - *has_c;
}

/* The same for an item already described: a rank-3 item has channels only if it is colour. */
void hdf5_item_roles(int frank, const hq_item *it, int *has_n, int *has_c)
{
    *has_c = frank == 4 || (frank == 3 && it->channels > 1 && it->sample != HQ_SAMPLE_FLOAT);
    *has_n = frank - 2 - *has_c;
}

/* Fills it->slices/height/width/channels/sample_bytes/depth from the dataset's type and shape and
 * returns its rank in *frank; HQ_EINPUT with "FILE:/dset: why" when it is not an image. planes
 * (HQ_SCAN_PLANES, masks): a rank-3 dataset is N x H x W, as float data always is. */
int hdf5_describe_dataset(hid_t d, const char *file, const char *name, int planes, hq_item *it, int *frank,
                          hq_err *err)
{
    hid_t t = H5Dget_type(d);
    hid_t s = H5Dget_space(d);
    int rc = 0;
    if (t < 0 || s < 0) {
        char why[512];
        hdf5_detail(why, sizeof why);
        rc = hq_fail(err, HQ_EINPUT, "%s:%s: cannot read the dataset's type or shape%s", file, name, why);
        goto out;
    }
    const size_t size = H5Tget_size(t);
    const H5T_class_t cls = H5Tget_class(t);
    /* Floats only in IEEE's own layouts: HDF5 converts them to native doubles by their fields, and
     * damaged fields are not worth trusting. */
    const int is_float = cls == H5T_FLOAT &&
                         ((size == 4 && (H5Tequal(t, H5T_IEEE_F32LE) > 0 || H5Tequal(t, H5T_IEEE_F32BE) > 0)) ||
                          (size == 8 && (H5Tequal(t, H5T_IEEE_F64LE) > 0 || H5Tequal(t, H5T_IEEE_F64BE) > 0)));
    if (!is_float && (cls != H5T_INTEGER || (size != 1 && size != 2))) {
        char tn[64];
        type_name(t, tn, sizeof tn);
        if (planes)
            rc = hq_fail(err, HQ_EINPUT, "%s:%s: unsupported type for a mask (%s) — a mask is 8- or 16-bit integers "
                         "(uint8, uint16, int8 or int16; non-zero: counted)%s", file, name, tn,
                         cls == H5T_ENUM ? ": store a bool mask as uint8" : "");
        else
            rc = hq_fail(err, HQ_EINPUT, "%s:%s: unsupported type (%s%s) — only uint8, uint16, int8, int16, float32 "
                         "and float64 images", file, name, tn, cls == H5T_FLOAT ? ", not IEEE 32- or 64-bit" : "");
        goto out;
    }
    it->sample = is_float ? HQ_SAMPLE_FLOAT : H5Tget_sign(t) == H5T_SGN_NONE ? HQ_SAMPLE_UINT : HQ_SAMPLE_INT;
    /* A damaged datatype message can claim more significant bits than the type has bytes; HDF5
     * converts by them, and its conversion overruns (fuzz/regress/hdf5/type-precision-*). */
    const size_t precision = H5Tget_precision(t);
    const int offset = H5Tget_offset(t);
    const int impossible = precision == 0 || offset < 0 || precision + (size_t)offset > 8 * size;
    if (!impossible && it->sample == HQ_SAMPLE_INT && (precision != 8 * size || offset != 0)) {
        /* Legal HDF5 (h5py reads it); the offset form of signed samples needs every bit. */
        rc = hq_fail(err, HQ_EINPUT, "%s:%s: unsupported type (a signed integer with %zu significant bits from bit "
                     "%d in an int%zu) — signed images must use all their bits", file, name, precision, offset,
                     8 * size);
        goto out;
    }
    if (impossible) {
        rc = hq_fail(err, HQ_EINPUT, "%s:%s: corrupt type (%zu bits from bit %d in a%s %s%zu)", file, name, precision,
                     offset, it->sample == HQ_SAMPLE_FLOAT ? "" : "n", it->sample == HQ_SAMPLE_FLOAT ? "float"
                     : it->sample == HQ_SAMPLE_INT ? "int" : "uint", 8 * size);
        goto out;
    }
    const int n = H5Sget_simple_extent_ndims(s);
    if (H5Sget_simple_extent_type(s) != H5S_SIMPLE || n < 2 || n > MAX_RANK) {
        if (n == 0 || H5Sget_simple_extent_type(s) != H5S_SIMPLE)
            rc = hq_fail(err, HQ_EINPUT, "%s:%s: unsupported shape (%s)", file, name,
                         H5Sget_simple_extent_type(s) == H5S_NULL ? "empty" : "scalar");
        else
            rc = hq_fail(err, HQ_EINPUT, "%s:%s: unsupported shape (%d dimension%s)", file, name, n, n == 1 ? "" : "s");
        goto out;
    }
    hsize_t dims[MAX_RANK], maxdims[MAX_RANK];
    H5Sget_simple_extent_dims(s, dims, maxdims);
    for (int i = 0; i < n; i++)
        if (dims[i] == 0) {
            rc = hq_fail(err, HQ_EINPUT, "%s:%s: zero-sized dimension", file, name);
            goto out;
        }
    /* HDF5 never lets a dataset grow past its maximum shape, so a dataspace message that says so is
     * damaged; the size it claims is what every read, and the output's allocation, would follow
     * (a 4-slice stack claiming 262,397 slices: fuzz/regress/hdf5/shape-past-maximum-*). */
    for (int i = 0; i < n; i++)
        if (maxdims[i] != H5S_UNLIMITED && dims[i] > maxdims[i]) {
            char dt[128], mt[128];
            dims_text(dims, n, dt, sizeof dt);
            dims_text(maxdims, n, mt, sizeof mt);
            rc = hq_fail(err, HQ_EINPUT, "%s:%s: damaged: its shape %s passes its maximum %s", file, name, dt, mt);
            goto out;
        }
    const hsize_t last = dims[n - 1];
    if (n == 4 && last > CHANNELS_MAX) {
        char dt[128];
        dims_text(dims, n, dt, sizeof dt);
        rc = hq_fail(err, HQ_EINPUT, "%s:%s: unsupported shape (%s: a 4-D dataset is N x H x W x 1..4 channels)",
                     file, name, dt);
        goto out;
    }
    int has_n, has_c;
    dims_roles(n, last, &has_n, &has_c);
    if (planes && n == 3) {
        has_c = 0;
        has_n = 1;
    }
    if (it->sample == HQ_SAMPLE_FLOAT) { /* gray only: a rank-3 float dataset is a stack */
        has_c = n == 4;
        has_n = n >= 3;
        if (has_c && last != 1) {
            char dt[128];
            dims_text(dims, n, dt, sizeof dt);
            rc = hq_fail(err, HQ_EINPUT, "%s:%s: unsupported shape (%s: float data must be gray, N x H x W x 1)",
                         file, name, dt);
            goto out;
        }
    }
    it->slices = has_n ? dims[0] : 1;
    it->height = dims[has_n];
    it->width = dims[has_n + 1];
    it->channels = has_c ? (uint32_t)last : 1;
    it->sample_bytes = (uint32_t)size;
    it->depth = (uint32_t)size * 8;
    *frank = n;
out:
    if (t >= 0)
        H5Tclose(t);
    if (s >= 0)
        H5Sclose(s);
    return rc;
}

const char *hdf5_filter_label(H5Z_filter_t f)
{
    switch (f) {
    case H5Z_FILTER_DEFLATE:
        return "deflate";
    case H5Z_FILTER_SHUFFLE:
        return "shuffle";
    case H5Z_FILTER_FLETCHER32:
        return "fletcher32";
    case H5Z_FILTER_SZIP:
        return "szip";
    case H5Z_FILTER_NBIT:
        return "nbit";
    case H5Z_FILTER_SCALEOFFSET:
        return "scaleoffset";
    case 32000:
        return "lzf";
    case 32001:
        return "blosc";
    case 32004:
        return "lz4";
    case 32008:
        return "bitshuffle";
    case 32015:
        return "zstd";
    default:
        return "unregistered";
    }
}

/* Whether the parameters stored with a scale-offset, n-bit or szip filter are the ones HDF5 derives
 * from this dataset's type and chunk shape when it writes them (H5Zscaleoffset.c, H5Znbit.c,
 * H5Zszip.c; checked against HDF5 1.10's output). Their coders trust them: damaged ones made
 * libhdf5 allocate gigabytes and crash in H5Dread (fuzz/regress/hdf5/scaleoffset-params-*), and
 * an szip filter without parameters, copied to the output, made libsz divide by zero
 * (fuzz/regress/hdf5/szip-no-params.h5). */
static int filter_params_match(hid_t d, hid_t dcpl, H5Z_filter_t f, const unsigned *cd, size_t ncd)
{
    if (f != H5Z_FILTER_SCALEOFFSET && f != H5Z_FILTER_NBIT && f != H5Z_FILTER_SZIP)
        return 1;
    hsize_t dims[MAX_RANK];
    const int k = H5Pget_chunk(dcpl, MAX_RANK, dims);
    const hid_t t = H5Dget_type(d);
    if (k <= 0 || k > MAX_RANK || t < 0) {
        if (t >= 0)
            H5Tclose(t);
        return 0;
    }
    uint64_t nelmts = 1;
    for (int i = 0; i < k; i++)
        nelmts *= dims[i];
    const size_t size = H5Tget_size(t), precision = H5Tget_precision(t);
    const int offset = H5Tget_offset(t);
    const unsigned order = H5Tget_order(t) == H5T_ORDER_BE;
    const H5T_class_t cls = H5Tget_class(t);
    const unsigned sign = cls == H5T_INTEGER && H5Tget_sign(t) != H5T_SGN_NONE;
    H5Tclose(t);
    /* integer scaling, elements, class integer, size, sign, order; floats: D-scaling, class float */
    if (f == H5Z_FILTER_SCALEOFFSET && cls == H5T_FLOAT)
        return ncd == 20 && cd[0] == H5Z_SO_FLOAT_DSCALE && cd[2] == nelmts && cd[3] == 1 && cd[4] == size &&
               cd[6] == order;
    if (f == H5Z_FILTER_SCALEOFFSET)
        return ncd == 20 && cd[0] == H5Z_SO_INT && cd[2] == nelmts && cd[3] == 0 && cd[4] == size && cd[5] == sign &&
               cd[6] == order;
    if (f == H5Z_FILTER_SZIP) {
        /* options (one coding, the byte order's flag), pixels per block (even, 2..32), bits per
         * pixel, pixels per scanline (a block at least, 128 blocks and the chunk at most) */
        if (ncd != 4)
            return 0;
        const unsigned coding = cd[0] & (H5_SZIP_EC_OPTION_MASK | H5_SZIP_NN_OPTION_MASK);
        const unsigned ppb = cd[1], pps = cd[3], order_flag = order ? 16u : 8u; /* SZ_MSB / SZ_LSB */
        return (coding == H5_SZIP_EC_OPTION_MASK || coding == H5_SZIP_NN_OPTION_MASK) &&
               (cd[0] & 24u) == order_flag && ppb >= 2 && ppb <= 32 && ppb % 2 == 0 &&
               (cd[2] == precision || cd[2] == 8 * size) && pps >= ppb && pps <= 128u * ppb && pps <= nelmts;
    }
    /* count, need-not-compress, elements, class atomic, size, order, precision, offset */
    return ncd == 8 && cd[0] == 8 && cd[1] <= 1 && cd[2] == nelmts && cd[3] == 1 && cd[4] == size && cd[5] == order &&
           cd[6] == precision && (int)cd[7] == offset;
}

/* Layouts we cannot honestly read in parallel or copy: external raw files and virtual datasets
 * point at other files; compact ones are fine to read. Filters must be decodable here. */
int hdf5_check_storage(hid_t d, hid_t dcpl, const char *file, const char *name, hq_err *err)
{
    if (dcpl < 0)
        return hq_fail(err, HQ_EINPUT, "%s:%s: cannot read the dataset's layout", file, name);
    int rc = 0;
    const H5D_layout_t layout = H5Pget_layout(dcpl);
    if (layout == H5D_VIRTUAL)
        rc = hq_fail(err, HQ_EINPUT, "%s:%s: unsupported layout (virtual dataset)", file, name);
    else if (H5Pget_external_count(dcpl) > 0)
        rc = hq_fail(err, HQ_EINPUT, "%s:%s: unsupported layout (data in external files)", file, name);
    const int nf = rc ? 0 : H5Pget_nfilters(dcpl);
    int coded_before = 0; /* deflate or another coder already in the pipeline */
    for (int i = 0; i < nf && !rc; i++) {
        unsigned flags = 0, cfg = 0, cd[32];
        size_t nelm = sizeof cd / sizeof cd[0];
        char fname[64];
        H5Z_filter_t f = H5Pget_filter2(dcpl, (unsigned)i, &flags, &nelm, cd, sizeof fname, fname, NULL);
        if (f < 0 || H5Zfilter_avail(f) <= 0 || H5Zget_filter_info(f, &cfg) < 0 || !(cfg & H5Z_FILTER_CONFIG_DECODE_ENABLED))
            rc = hq_fail(err, HQ_EINPUT, "%s:%s: compressed with filter %d (%s), which this HDF5 cannot decode", file,
                         name, (int)f, hdf5_filter_label(f));
        else if (!filter_params_match(d, dcpl, f, cd, nelm))
            rc = hq_fail(err, HQ_EINPUT, "%s:%s: filter %d (%s) has parameters that do not fit the dataset (corrupt?)",
                         file, name, (int)f, hdf5_filter_label(f));
        /* szip behind a coder: parallel HDF5 1.10.8 loses szip's skip bit on write (szip_masks.c)
         * and then reads such chunks back within the same write as garbage: 'inflate() failed'
         * on one rank, a hang with two. Said before any work. */
        else if (f == H5Z_FILTER_SZIP && coded_before)
            rc = hq_fail(err, HQ_EINPUT, "%s:%s: unsupported filter order (szip after another compressor): its output "
                         "could not be written", file, name);
        if (f != H5Z_FILTER_SHUFFLE && f != H5Z_FILTER_FLETCHER32 && f != H5Z_FILTER_NBIT && f != H5Z_FILTER_SCALEOFFSET)
            coded_before = 1;
    }
    return rc;
}

/* a * b, or 0 when it does not fit in 64 bits (no dataset we read is that large). */
static uint64_t mul_or_0(uint64_t a, uint64_t b)
{
    return b && a > UINT64_MAX / b ? 0 : a * b;
}

/* Whether HDF5's own bookkeeping says that the v1 B-tree indexes the chunks, the one chunk index
 * that records a size for unfiltered chunks (the others take the chunk size from the layout).
 * When it cannot tell, assume it does: the check is then merely spent. */
static int index_records_sizes(hid_t d)
{
    H5D_chunk_index_t idx;
    if (H5Dget_chunk_index_type(d, &idx) < 0) {
        H5Eclear2(H5E_DEFAULT);
        return 1;
    }
    return idx == H5D_CHUNK_IDX_BTREE;
}

/* Whether the storage the file records for the dataset holds its elements. HDF5 1.10.8 trusts the
 * recorded sizes where it reads pixels through a buffer of its own, and H5Dread copies whole
 * elements out of that buffer, past its end when it is short:
 *  - an unfiltered chunk indexed by a v1 B-tree: H5D__chunk_lock allocates and reads as many bytes
 *    as the chunk's B-tree record says (0 in fuzz/regress/hdf5/lib-chunk-btree-record-size0-*),
 *    then copies a whole chunk out (H5VM_memcpyvv under H5D__select_read reads past the buffer by
 *    up to a chunk). Reading the records one by one is quadratic in 1.10.8 (H5Dget_chunk_info and
 *    H5Dget_chunk_info_by_coord walk the index from its start at every call), so they are checked
 *    together, in two walks of the index: they must add up to one chunk size per chunk, as HDF5
 *    writes them. Two records damaged so that they still add up (one short, one long by as much)
 *    get through;
 *  - a compact dataset, whose data live in its object header: a short one is read past its end;
 *  - contiguous storage shorter than the data is not overrun in memory, but its recorded size is
 *    what the end-of-file checks compare, so it must cover the data as well.
 * Called on rank 0 in the scan's child process (io/scan_isolated.c): the walks of a damaged index
 * may themselves crash libhdf5, which there costs the child only. */
int hdf5_check_storage_size(hid_t d, hid_t dcpl, const char *file, const char *name, hq_err *err)
{
    hid_t t = H5Dget_type(d), s = H5Dget_space(d);
    int rc = 0;
    if (dcpl < 0 || t < 0 || s < 0) {
        rc = hq_fail(err, HQ_EINPUT, "%s:%s: cannot read the dataset's layout, type or shape", file, name);
        goto out;
    }
    const hssize_t npoints = H5Sget_simple_extent_npoints(s);
    const uint64_t esize = H5Tget_size(t), need = npoints > 0 ? mul_or_0((uint64_t)npoints, esize) : 0;
    const H5D_layout_t layout = H5Pget_layout(dcpl);
    if (need == 0)
        goto out; /* refused by size elsewhere (describe_dataset, io/scan.c) */
    if (layout == H5D_COMPACT || (layout == H5D_CONTIGUOUS && H5Dget_offset(d) != HADDR_UNDEF)) {
        const uint64_t have = H5Dget_storage_size(d);
        if (have < need)
            rc = hq_fail(err, HQ_EINPUT, "%s:%s: damaged: its %s storage records %llu bytes, its data take %llu", file,
                         name, layout == H5D_COMPACT ? "compact" : "contiguous", (unsigned long long)have,
                         (unsigned long long)need);
    } else if (layout == H5D_CHUNKED && H5Pget_nfilters(dcpl) == 0 && index_records_sizes(d)) {
        const int rank = H5Sget_simple_extent_ndims(s);
        hsize_t cd[MAX_RANK];
        uint64_t chunk = esize;
        if (rank < 1 || rank > MAX_RANK || H5Pget_chunk(dcpl, rank, cd) != rank) {
            rc = hq_fail(err, HQ_EINPUT, "%s:%s: damaged: cannot read its chunk shape", file, name);
            goto out;
        }
        for (int i = 0; i < rank; i++)
            chunk = mul_or_0(chunk, cd[i]);
        hsize_t nchunks = 0;
        if (chunk == 0 || H5Dget_num_chunks(d, s, &nchunks) < 0) {
            char det[512];
            hdf5_detail(det, sizeof det);
            rc = hq_fail(err, HQ_EINPUT, "%s:%s: damaged: cannot read its chunk index%s", file, name, det);
            goto out;
        }
        /* 0 when the walk fails as well as for no chunk: then nchunks must be 0 too */
        const uint64_t total = H5Dget_storage_size(d);
        if (total % chunk != 0 || total / chunk != nchunks)
            rc = hq_fail(err, HQ_EINPUT, "%s:%s: damaged: its chunk index records %llu bytes for %llu uncompressed "
                         "chunks of %llu bytes", file, name, (unsigned long long)total, (unsigned long long)nchunks,
                         (unsigned long long)chunk);
    }
out:
    if (t >= 0)
        H5Tclose(t);
    if (s >= 0)
        H5Sclose(s);
    H5Eclear2(H5E_DEFAULT);
    return rc;
}

/* Filtered (compressed) chunks: the output copies the filters, so parallel HDF5 1.10 can write
 * the item only collectively. */
int hdf5_input_compressed(hid_t dcpl)
{
    return dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CHUNKED && H5Pget_nfilters(dcpl) > 0;
}

/* The chunk shape over (slices, rows, columns), which the plan's tiles follow; all 0 when the
 * dataset is not chunked. A chunk spanning channels is all the same to a block, which holds them all. */
void hdf5_note_chunk_shape(hid_t dcpl, int frank, hq_item *it)
{
    hsize_t cd[MAX_RANK];
    if (dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CHUNKED && H5Pget_chunk(dcpl, frank, cd) == frank) {
        int has_n, has_c;
        hdf5_item_roles(frank, it, &has_n, &has_c);
        it->chunk_slices = has_n ? cd[0] : 1;
        it->chunk_height = cd[has_n];
        it->chunk_width = cd[has_n + 1];
    }
    H5Eclear2(H5E_DEFAULT);
}

/* Whether [addr, addr + size) ends past `end`, without computing addr + size: a damaged file may
 * hold an address near 2^64, which the sum wraps below `end` (then Open MPI's read fails, HDF5 does
 * not notice, and the run equalizes whatever the buffer held: fuzz/regress/hdf5/contig-addr-wraps-*). */
int hdf5_ends_past(uint64_t addr, uint64_t size, uint64_t end)
{
    return addr > end || size > end - addr;
}

/* A contiguous dataset whose bytes lie past the end of the file was cut short; chunked ones are
 * caught when a chunk is read. */
int hdf5_check_contiguous_extent(hid_t file_id, hid_t d, const char *file, const char *name, hq_err *err)
{
    hsize_t fsize = 0;
    const haddr_t off = H5Dget_offset(d);
    if (off == HADDR_UNDEF || H5Fget_filesize(file_id, &fsize) < 0)
        return 0;
    const hsize_t need = H5Dget_storage_size(d);
    if (hdf5_ends_past(off, need, fsize))
        return hq_fail(err, HQ_EINPUT, "%s:%s: data lies past the end of the file (truncated?)", file, name);
    return 0;
}
