/* hdf5_io.c — the HDF5 backend of io.h: image datasets in, equalized datasets out, through
 * parallel HDF5 (MPI-IO).
 *
 * Contract:
 *  - scan (rank 0, serial): every dataset of the file (or the one named) becomes an item. Supported:
 *    unsigned 8- or 16-bit integers of any byte order, shaped (H,W) gray, (N,H,W) a stack of gray,
 *    (H,W,3|4) one RGB/RGBA image, (N,H,W,C) a stack with C = 1..4 channels. A 3-D dataset whose
 *    last dimension is 3 or 4 is read as colour, so a stack of images 3 or 4 pixels wide is
 *    (ambiguously) taken for one RGB/RGBA image. In a file this tool wrote (root attribute
 *    histeq_dist_version), everything under /histeq_dist is our record, not an image: left out.
 *    Compressed (filtered) datasets get item.collective = 1: parallel HDF5 1.10 writes them only
 *    collectively (alone in the communicator, any write is made collective here).
 *  - open_input / create_output / close are collective and return the same code and the same
 *    message on every rank (the message of the lowest failing rank), so no rank can hang or go on
 *    alone. read_block / write_block are collective only when asked; a rank with no block then
 *    still takes part with an empty selection, and a collective transfer, too, ends with the same
 *    result on every rank. Whatever HDF5 would refuse on some ranks only (a chunk past the end of
 *    the input, a full disk) is checked and agreed before the transfer: parallel HDF5 1.10 hangs
 *    when a collective transfer fails on some ranks only.
 *  - The output is written as OUT.part, each dataset laid out like its input (type, shape, chunks,
 *    filters), with its disk space reserved ahead (fallocate) where the filesystem allows, and is
 *    renamed to OUT only by close(commit = 1) once every rank succeeded and the file reads back.
 *  - close(commit = 1) first records the run: root attributes, and under /histeq_dist the global
 *    histogram and LUT (scope global) or, per dataset, every image's LUT (scope image:
 *    /histeq_dist/lut/<dataset path>, (slices, nhist, bins) uint16, contiguous and unfiltered so
 *    that each rank writes the LUTs it recorded independently).
 *  - The input is only ever opened read-only. HDF5's own error printing is turned off: failures
 *    come back as one line naming the file and dataset, with HDF5's innermost reason appended.
 *  - Verbose (HQ_VERBOSE set and not "0" at open_input, or opts->verbose at create_output): if
 *    HDF5 turned collective transfers independent, close() says so in one line for the whole run,
 *    with the causes (H5Pget_mpio_no_collective_cause) over all ranks.
 *  - A block that fails to read names the dataset and where the block lies ("FILE:/dset [rows
 *    0-255, cols 512-767]: ..."); a chunk that does not decompress is bad input (HQ_EINPUT). */
#define _GNU_SOURCE /* fallocate */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hdf5.h>

#include "box.h"
#include "io.h"

#define OWN_GROUP "/histeq_dist"
#define OWN_HIST OWN_GROUP "/global_histogram"
#define OWN_GLOBAL_LUT OWN_GROUP "/global_lut"
#define OWN_LUTS OWN_GROUP "/lut" /* + each dataset's path: that dataset's per-image LUTs */
#define OWN_VERSION_ATTR "histeq_dist_version"
#define OWN_COMPLETE_ATTR "histeq_dist_complete" /* written last: a file without it is unfinished */
#define MAX_RANK 4
#define CHANNELS_MAX 4
#define MiB ((hsize_t)1 << 20)
#define CHUNK_CACHE_MAX (32 * MiB)
#define RESERVE_MARGIN_MAX (4 * MiB)
#define ATTR_COPY_MAX 32768 /* larger attributes would need the dense attribute storage of newer formats */

/* Per item flags: whether the output dataset is filtered (then parallel HDF5 1.10 writes it only
 * collectively); whether the item's blocks travel in chunk order (see chunk_order_ok). */
enum { OUT_FILTERED = 4, CHUNK_ORDER = 8 };

struct hq_io {
    MPI_Comm comm; /* our own duplicate, so our collectives never mix with the caller's */
    int rank, nranks;
    int verbose;
    int any_order; /* open_input's any_order: the caller never looks at where a pixel lies */
    hq_inventory inv; /* a private copy: the io does not depend on the caller's inventory */
    hid_t in_file;
    hid_t *in_dset;    /* per item; H5I_INVALID_HID for bad items */
    int *frank;        /* per item, the rank of the dataset in the file */
    hsize_t (*in_chunk)[MAX_RANK]; /* per item, the input's chunk shape; all 0 when not chunked */
    uint64_t in_eoa;   /* the input's end of allocated space (0: unknown); HDF5 reads nothing past it */
    unsigned char *flags;
    hid_t dxpl_coll, dxpl_ind;
    /* Output: present between create_output and close. */
    hid_t out_file;
    hid_t *out_dset;
    char *out_path, *part_path;
    int part_ours; /* OUT.part passed the checks (it is not the input): ours to create and remove */
    uint64_t reserved; /* rank 0: bytes of OUT.part reserved with fallocate */
    int no_fallocate;  /* rank 0: the filesystem cannot reserve */
    /* Collective transfers, and those HDF5 made independent: how many, the first (item * 2 + writing),
     * and the union of the causes; reported once, at close, in verbose mode. */
    uint64_t coll_transfers, fell_back, fell_first;
    uint32_t fell_causes;
    unsigned char *stage; /* one chunk, for by_chunk's row-order writes */
    size_t stage_bytes;
};

/* ---------------------------------------------------------------------------------------------- */
/* HDF5 plumbing                                                                                  */

static void quiet_hdf5(void)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

static void close_id(hid_t *id, herr_t (*closer)(hid_t))
{
    if (*id >= 0)
        closer(*id);
    *id = H5I_INVALID_HID;
}

typedef struct detail_ctx {
    char *buf;
    size_t len;
    int n;
} detail_ctx;

/* Keeps the innermost two messages of the error stack: the innermost alone is often too terse
 * ("MPI_File_write_at failed") while its caller says what failed in words. */
static herr_t detail_cb(unsigned n, const H5E_error2_t *e, void *data)
{
    (void)n;
    detail_ctx *c = data;
    if (!e->desc || !e->desc[0])
        return 0;
    size_t used = strlen(c->buf);
    if (c->n > 0 && used + 2 < c->len) {
        strcat(c->buf, "; ");
        used += 2;
    }
    snprintf(c->buf + used, c->len - used, "%s", e->desc);
    return ++c->n >= 2 ? 1 : 0;
}

/* HDF5 messages may span lines (the collective-I/O ones do); ours are one line. */
static void one_line(char *s)
{
    char *w = s;
    for (const char *r = s; *r; r++) {
        const char ch = (*r == '\n' || *r == '\t' || *r == '\r') ? ' ' : *r;
        if (ch == ' ' && (w == s || w[-1] == ' '))
            continue;
        *w++ = ch;
    }
    while (w > s && (w[-1] == ' ' || w[-1] == '.'))
        w--;
    *w = '\0';
}

/* The reason HDF5 gave for the failure that just happened, as ": reason" (empty if none).
 * Must be called before any other HDF5 call, which would clear the stack. */
static void hdf5_detail(char *buf, size_t len)
{
    char inner[384] = "";
    detail_ctx c = {inner, sizeof inner, 0};
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, detail_cb, &c);
    H5Eclear2(H5E_DEFAULT);
    one_line(inner);
    snprintf(buf, len, "%s%s", inner[0] ? ": " : "", inner);
}

static int verbose_from_env(void)
{
    const char *v = getenv("HQ_VERBOSE");
    return v && v[0] && strcmp(v, "0") != 0;
}

/* ---------------------------------------------------------------------------------------------- */
/* What a dataset holds                                                                           */

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
static void item_roles(int frank, const hq_item *it, int *has_n, int *has_c)
{
    *has_c = frank == 4 || (frank == 3 && it->channels > 1);
    *has_n = frank - 2 - *has_c;
}

/* Fills it->slices/height/width/channels/sample_bytes/depth from the dataset's type and shape and
 * returns its rank in *frank; HQ_EINPUT with "FILE:/dset: why" when it is not an image. */
static int describe_dataset(hid_t d, const char *file, const char *name, hq_item *it, int *frank, hq_err *err)
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
    if (H5Tget_class(t) != H5T_INTEGER || H5Tget_sign(t) != H5T_SGN_NONE || (size != 1 && size != 2)) {
        char tn[64];
        type_name(t, tn, sizeof tn);
        rc = hq_fail(err, HQ_EINPUT, "%s:%s: unsupported type (%s) — only uint8 and uint16 images", file, name, tn);
        goto out;
    }
    /* A damaged datatype message can claim more significant bits than the type has bytes; HDF5
     * converts by them, and its conversion overruns (fuzz/regress/hdf5/type-precision-*). */
    const size_t precision = H5Tget_precision(t);
    const int offset = H5Tget_offset(t);
    if (precision == 0 || offset < 0 || precision + (size_t)offset > 8 * size) {
        rc = hq_fail(err, HQ_EINPUT, "%s:%s: corrupt type (%zu bits from bit %d in a uint%zu)", file, name, precision,
                     offset, 8 * size);
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
    hsize_t dims[MAX_RANK];
    H5Sget_simple_extent_dims(s, dims, NULL);
    for (int i = 0; i < n; i++)
        if (dims[i] == 0) {
            rc = hq_fail(err, HQ_EINPUT, "%s:%s: zero-sized dimension", file, name);
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

static const char *filter_label(H5Z_filter_t f)
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
    H5Tclose(t);
    if (f == H5Z_FILTER_SCALEOFFSET) /* integer scaling, elements, class integer, size, unsigned, order */
        return ncd == 20 && cd[0] == H5Z_SO_INT && cd[2] == nelmts && cd[3] == 0 && cd[4] == size && cd[5] == 0 &&
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
static int check_storage(hid_t d, const char *file, const char *name, hq_err *err)
{
    hid_t dcpl = H5Dget_create_plist(d);
    if (dcpl < 0)
        return hq_fail(err, HQ_EINPUT, "%s:%s: cannot read the dataset's layout", file, name);
    int rc = 0;
    const H5D_layout_t layout = H5Pget_layout(dcpl);
    if (layout == H5D_VIRTUAL)
        rc = hq_fail(err, HQ_EINPUT, "%s:%s: unsupported layout (virtual dataset)", file, name);
    else if (H5Pget_external_count(dcpl) > 0)
        rc = hq_fail(err, HQ_EINPUT, "%s:%s: unsupported layout (data in external files)", file, name);
    const int nf = rc ? 0 : H5Pget_nfilters(dcpl);
    for (int i = 0; i < nf && !rc; i++) {
        unsigned flags = 0, cfg = 0, cd[32];
        size_t nelm = sizeof cd / sizeof cd[0];
        char fname[64];
        H5Z_filter_t f = H5Pget_filter2(dcpl, (unsigned)i, &flags, &nelm, cd, sizeof fname, fname, NULL);
        if (f < 0 || H5Zfilter_avail(f) <= 0 || H5Zget_filter_info(f, &cfg) < 0 || !(cfg & H5Z_FILTER_CONFIG_DECODE_ENABLED))
            rc = hq_fail(err, HQ_EINPUT, "%s:%s: compressed with filter %d (%s), which this HDF5 cannot decode", file,
                         name, (int)f, filter_label(f));
        else if (!filter_params_match(d, dcpl, f, cd, nelm))
            rc = hq_fail(err, HQ_EINPUT, "%s:%s: filter %d (%s) has parameters that do not fit the dataset (corrupt?)",
                         file, name, (int)f, filter_label(f));
    }
    H5Pclose(dcpl);
    return rc;
}

/* Filtered (compressed) chunks: the output copies the filters, so parallel HDF5 1.10 can write
 * the item only collectively. */
static int input_compressed(hid_t in)
{
    hid_t dcpl = H5Dget_create_plist(in);
    const int yes = dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CHUNKED && H5Pget_nfilters(dcpl) > 0;
    if (dcpl >= 0)
        H5Pclose(dcpl);
    return yes;
}

/* The chunk shape over (slices, rows, columns), which the plan's tiles follow; all 0 when the
 * dataset is not chunked. A chunk spanning channels is all the same to a block, which holds them all. */
static void note_chunk_shape(hid_t d, int frank, hq_item *it)
{
    hid_t dcpl = H5Dget_create_plist(d);
    hsize_t cd[MAX_RANK];
    if (dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CHUNKED && H5Pget_chunk(dcpl, frank, cd) == frank) {
        int has_n, has_c;
        item_roles(frank, it, &has_n, &has_c);
        it->chunk_slices = has_n ? cd[0] : 1;
        it->chunk_height = cd[has_n];
        it->chunk_width = cd[has_n + 1];
    }
    if (dcpl >= 0)
        H5Pclose(dcpl);
    H5Eclear2(H5E_DEFAULT);
}

/* Whether [addr, addr + size) ends past `end`, without computing addr + size: a damaged file may
 * hold an address near 2^64, which the sum wraps below `end` (then Open MPI's read fails, HDF5 does
 * not notice, and the run equalizes whatever the buffer held: fuzz/regress/hdf5/contig-addr-wraps-*). */
static int ends_past(uint64_t addr, uint64_t size, uint64_t end)
{
    return addr > end || size > end - addr;
}

/* A contiguous dataset whose bytes lie past the end of the file was cut short; chunked ones are
 * caught when a chunk is read. */
static int check_contiguous_extent(hid_t file_id, hid_t d, const char *file, const char *name, hq_err *err)
{
    hsize_t fsize = 0;
    const haddr_t off = H5Dget_offset(d);
    if (off == HADDR_UNDEF || H5Fget_filesize(file_id, &fsize) < 0)
        return 0;
    const hsize_t need = H5Dget_storage_size(d);
    if (ends_past(off, need, fsize))
        return hq_fail(err, HQ_EINPUT, "%s:%s: data lies past the end of the file (truncated?)", file, name);
    return 0;
}

/* ---------------------------------------------------------------------------------------------- */
/* scan                                                                                           */

typedef struct scan_ctx {
    const char *file;
    hid_t file_id;
    int skip_bad;
    int skip_own; /* the file is one of our outputs: its global histogram is a record, not an image */
    hq_inventory *inv;
    hq_err *err;
    int rc;
    uint64_t found;
} scan_ctx;

/* Adds the dataset at `name` ("/a/b") as an item, or as a bad item (skip_bad), or fails. */
static int add_dataset(scan_ctx *c, const char *name)
{
    hq_item it = {.src = (char *)c->file, .name = (char *)name};
    hq_err why = {{0}};
    int frank = 0, rc;
    hid_t d = H5Dopen2(c->file_id, name, H5P_DEFAULT);
    if (d < 0) {
        char det[512];
        hdf5_detail(det, sizeof det);
        rc = hq_fail(&why, HQ_EINPUT, "%s:%s: cannot open the dataset%s", c->file, name, det);
    } else {
        rc = describe_dataset(d, c->file, name, &it, &frank, &why);
        if (!rc)
            rc = check_storage(d, c->file, name, &why);
        if (!rc)
            rc = check_contiguous_extent(c->file_id, d, c->file, name, &why);
        it.collective = !rc && input_compressed(d);
        if (!rc)
            note_chunk_shape(d, frank, &it);
        H5Dclose(d);
    }
    c->found++;
    if (rc && !c->skip_bad) {
        if (c->err)
            *c->err = why;
        return rc;
    }
    if (rc) {
        it.slices = it.height = it.width = 0;
        it.channels = it.sample_bytes = it.depth = 0;
        it.bad = 1;
        it.why = why.msg;
    }
    return hq_inventory_add(c->inv, &it, c->err);
}

static int under_own_group(const char *name)
{
    const size_t n = strlen(OWN_GROUP);
    return !strncmp(name, OWN_GROUP, n) && (name[n] == '\0' || name[n] == '/');
}

static herr_t visit_cb(hid_t obj, const char *name, const H5O_info_t *info, void *data)
{
    (void)obj;
    scan_ctx *c = data;
    if (info->type != H5O_TYPE_DATASET)
        return 0;
    const size_t len = strlen(name) + 2;
    char *path = malloc(len);
    if (!path) {
        c->rc = hq_fail(c->err, HQ_EMEM, "%s: out of memory listing datasets", c->file);
        return 1;
    }
    snprintf(path, len, "/%s", name);
    if (!(c->skip_own && under_own_group(path)))
        c->rc = add_dataset(c, path);
    free(path);
    return c->rc ? 1 : 0;
}

/* Name order as a depth-first walk of the groups meets the names: component by component, so "/a/x"
 * (inside group a) comes before "/a-b", as '/' ends a component. */
static int cmp_item_path(const void *pa, const void *pb)
{
    const unsigned char *a = (const unsigned char *)((const hq_item *)pa)->name;
    const unsigned char *b = (const unsigned char *)((const hq_item *)pb)->name;
    for (; *a && *a == *b; a++, b++)
        ;
    const int ca = *a == '/' ? 1 : *a ? *a + 1 : 0, cb = *b == '/' ? 1 : *b ? *b + 1 : 0;
    return ca - cb;
}

static int scan_all(scan_ctx *c)
{
    c->skip_own = H5Aexists(c->file_id, OWN_VERSION_ATTR) > 0;
    H5Eclear2(H5E_DEFAULT);
    const size_t first = c->inv->n;
    /* H5Ovisit visits each object once even when hard-linked twice (under the first name it meets).
     * In native order, then sorted by name here: asked for name order, HDF5 1.10 first copies a
     * dense group's links into a table, and frees garbage pointers when a damaged link heap stops
     * that copy halfway (fuzz/regress/hdf5/dense-links-*: a crash inside H5Ovisit). */
    if (H5Ovisit2(c->file_id, H5_INDEX_NAME, H5_ITER_NATIVE, visit_cb, c, H5O_INFO_BASIC) < 0 && !c->rc) {
        char det[512];
        hdf5_detail(det, sizeof det);
        return hq_fail(c->err, HQ_EINPUT, "%s: cannot list the file's contents (truncated or corrupt?)%s", c->file,
                       det);
    }
    if (c->rc)
        return c->rc;
    if (c->found == 0)
        return hq_fail(c->err, HQ_EINPUT, "%s: no image datasets", c->file);
    qsort(c->inv->items + first, c->inv->n - first, sizeof *c->inv->items, cmp_item_path);
    return 0;
}

static int scan_one(scan_ctx *c, const char *dset)
{
    const size_t len = strlen(dset) + 2;
    char *name = malloc(len);
    if (!name)
        return hq_fail(c->err, HQ_EMEM, "%s: out of memory", c->file);
    snprintf(name, len, "%s%s", dset[0] == '/' ? "" : "/", dset);
    H5O_info_t oi;
    int rc;
    if (H5Oget_info_by_name2(c->file_id, name, &oi, H5O_INFO_BASIC, H5P_DEFAULT) < 0) {
        H5Eclear2(H5E_DEFAULT);
        rc = hq_fail(c->err, HQ_EINPUT, "%s:%s: no such dataset", c->file, name);
    } else if (oi.type != H5O_TYPE_DATASET) {
        rc = hq_fail(c->err, HQ_EINPUT, "%s:%s: is a %s, not a dataset", c->file, name,
                     oi.type == H5O_TYPE_GROUP ? "group" : "named datatype");
    } else {
        rc = add_dataset(c, name);
    }
    free(name);
    return rc;
}

static int hdf5_scan(const char *path, const char *dset, int skip_bad, hq_inventory *inv, hq_err *err)
{
    quiet_hdf5();
    struct stat st;
    if (stat(path, &st) != 0)
        return errno == ENOENT ? hq_fail(err, HQ_EINPUT, "%s: no such file", path)
                               : hq_fail(err, HQ_EINPUT, "%s: cannot open (%s)", path, strerror(errno));
    if (S_ISDIR(st.st_mode))
        return hq_fail(err, HQ_EINPUT, "%s: not an HDF5 file (a directory)", path);
    if (access(path, R_OK) != 0)
        return hq_fail(err, HQ_EINPUT, "%s: cannot open (%s)", path, strerror(errno));
    if (H5Fis_hdf5(path) <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return hq_fail(err, HQ_EINPUT, "%s: not an HDF5 file", path);
    }
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) {
        char det[512];
        hdf5_detail(det, sizeof det);
        return hq_fail(err, HQ_EINPUT, "%s: cannot open HDF5 file (truncated or corrupt?)%s", path, det);
    }
    inv->format = HQ_FMT_HDF5;
    inv->root_is_dir = 0;
    int rc = 0;
    if (!inv->root && !(inv->root = strdup(path)))
        rc = hq_fail(err, HQ_EMEM, "%s: out of memory", path);
    scan_ctx c = {.file = path, .file_id = f, .skip_bad = skip_bad, .inv = inv, .err = err};
    if (!rc)
        rc = dset && dset[0] ? scan_one(&c, dset) : scan_all(&c);
    if (H5Fclose(f) < 0 && !rc)
        rc = hq_fail(err, HQ_EINPUT, "%s: cannot close HDF5 file", path);
    return rc;
}

/* ---------------------------------------------------------------------------------------------- */
/* Agreement between ranks                                                                        */

/* Every rank returns the worst code; the message is that of the lowest rank that had it, so the
 * rank that prints shows the real reason whichever rank met it. */
static int agree(MPI_Comm comm, int rc, hq_err *err)
{
    int worst = 0;
    MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, comm);
    if (!worst)
        return 0;
    int rank, src = 0;
    MPI_Comm_rank(comm, &rank);
    int me = rc == worst ? rank : INT_MAX;
    MPI_Allreduce(&me, &src, 1, MPI_INT, MPI_MIN, comm);
    hq_err scratch = {{0}};
    hq_err *e = err ? err : &scratch;
    if (rank == src && !err)
        snprintf(e->msg, sizeof e->msg, "failed on rank %d", rank);
    MPI_Bcast(e->msg, (int)sizeof e->msg, MPI_CHAR, src, comm);
    return worst;
}

/* Rank 0 decided; the others learn its code and message. */
static int share_from_root(MPI_Comm comm, int rc, hq_err *err)
{
    MPI_Bcast(&rc, 1, MPI_INT, 0, comm);
    if (rc) {
        hq_err scratch = {{0}};
        hq_err *e = err ? err : &scratch;
        MPI_Bcast(e->msg, (int)sizeof e->msg, MPI_CHAR, 0, comm);
    }
    return rc;
}

/* ---------------------------------------------------------------------------------------------- */
/* open_input                                                                                     */

/* Enough chunk cache that a row band (or, for chunks deeper than one slice, a whole slice) is
 * decompressed once rather than once per block; bounded, as each dataset keeps its own cache. */
static hid_t input_dapl(hid_t d, int frank, const hq_item *it)
{
    hid_t dcpl = H5Dget_create_plist(d);
    hsize_t cd[MAX_RANK];
    const int sized = dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CHUNKED && H5Pget_nfilters(dcpl) > 0 &&
                      H5Pget_chunk(dcpl, frank, cd) == frank;
    if (dcpl >= 0)
        H5Pclose(dcpl);
    hid_t dapl = sized ? H5Pcreate(H5P_DATASET_ACCESS) : H5I_INVALID_HID;
    if (dapl < 0)
        return H5I_INVALID_HID; /* the default cache will do */
    int has_n, has_c;
    item_roles(frank, it, &has_n, &has_c);
    const hsize_t ch = cd[has_n], cw = cd[has_n + 1], cc = has_c ? cd[frank - 1] : 1;
    hsize_t nchunks = (it->width + cw - 1) / cw * ((it->channels + cc - 1) / cc);
    if (has_n && cd[0] > 1)
        nchunks *= (it->height + ch - 1) / ch;
    hsize_t chunk_bytes = it->sample_bytes;
    for (int i = 0; i < frank; i++)
        chunk_bytes *= cd[i];
    hsize_t bytes = nchunks * chunk_bytes;
    bytes = bytes < MiB ? MiB : bytes > CHUNK_CACHE_MAX ? CHUNK_CACHE_MAX : bytes;
    size_t slots = (size_t)(bytes / chunk_bytes + 1) * 10 + 1;
    H5Pset_chunk_cache(dapl, slots < 521 ? 521 : slots, (size_t)bytes, 1.0);
    return dapl;
}

/* Remembers the input's chunk shape, and refuses a contiguous dataset that ends past the end of
 * allocated space: HDF5 would fail the read on some ranks only. */
static int note_storage(hq_io *io, uint64_t i, hid_t d, int frank, hq_err *err)
{
    hid_t dcpl = H5Dget_create_plist(d);
    const H5D_layout_t layout = dcpl >= 0 ? H5Pget_layout(dcpl) : H5D_LAYOUT_ERROR;
    if (layout == H5D_CHUNKED && H5Pget_chunk(dcpl, frank, io->in_chunk[i]) != frank)
        memset(io->in_chunk[i], 0, sizeof io->in_chunk[i]);
    if (dcpl >= 0)
        H5Pclose(dcpl);
    const haddr_t off = layout == H5D_CONTIGUOUS ? H5Dget_offset(d) : HADDR_UNDEF;
    H5Eclear2(H5E_DEFAULT);
    if (off != HADDR_UNDEF && io->in_eoa && ends_past(off, H5Dget_storage_size(d), io->in_eoa))
        return hq_fail(err, HQ_EINPUT, "%s:%s: data lies past the end of the file (truncated?)", io->inv.root,
                       io->inv.items[i].name);
    return 0;
}

static int needs_collective(const hq_io *io, uint64_t item, int writing);

/* Whether item i's blocks can travel in chunk order: each chunk's part of the block dense, one
 * after another in the order the chunks are walked (slices, then rows, then columns), instead of
 * [slice][row][col][channel]. Then every whole chunk comes from the file straight into the block
 * in one pread, not through HDF5's chunk cache and a copy out of it, and goes out with a plain
 * copy instead of a strided pack (by_chunk). On one rank of the 4-GPU host an 8 GiB stack was read
 * in 2.1-2.3 s instead of 2.8-3.0 s (bench/results/scaling.txt). Only where the caller said that
 * positions do not matter (histogram and remap see pixels one at a time), the data are chunked and
 * unfiltered (filtered chunks are decompressed whole anyway), and transfers are independent (a
 * rank's chunk count is its own). A block must still hold its slices in order, each whole, and a
 * pixel's channels together: chunks one slice deep, and spanning every channel.
 * HQ_BLOCK_ORDER=row keeps row order, for benchmarks that compare the two (bench/scaling.sh). */
static int chunk_order_ok(const hq_io *io, uint64_t i)
{
    const hq_item *it = &io->inv.items[i];
    const int frank = io->frank[i];
    const char *order = getenv("HQ_BLOCK_ORDER");
    /* Unfiltered input makes an unfiltered output, so only HQ_HDF5_COLLECTIVE can make its
     * transfers collective, in either direction. */
    if (!io->any_order || (order && strcmp(order, "row") == 0) || io->in_chunk[i][0] == 0 || it->collective ||
        needs_collective(io, i, 0))
        return 0;
    int has_n, has_c;
    item_roles(frank, it, &has_n, &has_c);
    return (!has_n || io->in_chunk[i][0] == 1) && (!has_c || io->in_chunk[i][frank - 1] == it->channels);
}

/* No chunk cache: an unfiltered chunk that fits the cache is read into it whole and then copied
 * out; without one, HDF5 reads a whole chunk selected into contiguous memory straight into it. */
static hid_t unbuffered_dapl(void)
{
    hid_t dapl = H5Pcreate(H5P_DATASET_ACCESS);
    if (dapl >= 0 && H5Pset_chunk_cache(dapl, 1, 0, 1.0) < 0) {
        H5Pclose(dapl);
        return H5I_INVALID_HID;
    }
    return dapl;
}

static int open_item(hq_io *io, uint64_t i, hq_err *err)
{
    const hq_item *it = &io->inv.items[i];
    const char *file = io->inv.root;
    char det[512];
    hid_t d = H5Dopen2(io->in_file, it->name, H5P_DEFAULT);
    if (d < 0) {
        hdf5_detail(det, sizeof det);
        return hq_fail(err, HQ_EIO, "%s:%s: cannot open the dataset%s", file, it->name, det);
    }
    hq_item now = {0};
    int frank = 0;
    int rc = describe_dataset(d, file, it->name, &now, &frank, err);
    if (!rc && (now.slices != it->slices || now.height != it->height || now.width != it->width ||
                now.channels != it->channels || now.sample_bytes != it->sample_bytes))
        rc = hq_fail(err, HQ_EINPUT, "%s:%s: the dataset changed since it was scanned", file, it->name);
    if (rc) {
        H5Dclose(d);
        return rc;
    }
    rc = note_storage(io, i, d, frank, err);
    if (rc) {
        H5Dclose(d);
        return rc;
    }
    io->frank[i] = frank;
    if (chunk_order_ok(io, i))
        io->flags[i] |= CHUNK_ORDER;
    hid_t dapl = (io->flags[i] & CHUNK_ORDER) ? unbuffered_dapl() : input_dapl(d, frank, it);
    if (dapl >= 0) {
        /* Reopened so that the sized chunk cache applies (it is fixed at open). */
        H5Dclose(d);
        d = H5Dopen2(io->in_file, it->name, dapl);
        H5Pclose(dapl);
    }
    if (d < 0) {
        hdf5_detail(det, sizeof det);
        return hq_fail(err, HQ_EIO, "%s:%s: cannot open the dataset%s", file, it->name, det);
    }
    io->in_dset[i] = d;
    return 0;
}

static void free_io(hq_io *io)
{
    if (!io)
        return;
    const size_t n = io->inv.n;
    for (size_t i = 0; io->in_dset && i < n; i++)
        close_id(&io->in_dset[i], H5Dclose);
    for (size_t i = 0; io->out_dset && i < n; i++)
        close_id(&io->out_dset[i], H5Dclose);
    close_id(&io->out_file, H5Fclose);
    close_id(&io->in_file, H5Fclose);
    close_id(&io->dxpl_coll, H5Pclose);
    close_id(&io->dxpl_ind, H5Pclose);
    free(io->in_dset);
    free(io->out_dset);
    free(io->frank);
    free(io->in_chunk);
    free(io->stage);
    free(io->flags);
    free(io->out_path);
    free(io->part_path);
    hq_inventory_free(&io->inv);
    if (io->comm != MPI_COMM_NULL)
        MPI_Comm_free(&io->comm);
    free(io);
}

static int copy_inventory(const hq_inventory *src, hq_inventory *dst, hq_err *err)
{
    unsigned char *buf = NULL;
    uint64_t len = 0;
    int rc = hq_inventory_pack(src, &buf, &len, err);
    if (!rc)
        rc = hq_inventory_unpack(buf, len, dst, err);
    free(buf);
    return rc;
}

static hq_io *new_io(void)
{
    hq_io *io = calloc(1, sizeof *io);
    if (!io)
        return NULL;
    io->comm = MPI_COMM_NULL;
    io->in_file = io->out_file = H5I_INVALID_HID;
    io->dxpl_coll = io->dxpl_ind = H5I_INVALID_HID;
    return io;
}

/* Everything of open_input that involves no other rank. */
static int prepare_io(hq_io *io, const hq_inventory *inv, hq_err *err)
{
    if (!inv->root)
        return hq_fail(err, HQ_EUSAGE, "HDF5 input: no file in the input list");
    int rc = copy_inventory(inv, &io->inv, err);
    if (rc)
        return rc;
    const size_t n = io->inv.n;
    io->in_dset = malloc((n ? n : 1) * sizeof *io->in_dset);
    io->frank = calloc(n ? n : 1, sizeof *io->frank);
    io->in_chunk = calloc(n ? n : 1, sizeof *io->in_chunk);
    io->flags = calloc(n ? n : 1, 1);
    io->dxpl_coll = H5Pcreate(H5P_DATASET_XFER);
    io->dxpl_ind = H5Pcreate(H5P_DATASET_XFER);
    if (!io->in_dset || !io->frank || !io->flags || !io->in_chunk)
        return hq_fail(err, HQ_EMEM, "%s: out of memory", inv->root);
    for (size_t i = 0; i < n; i++)
        io->in_dset[i] = H5I_INVALID_HID;
    if (io->dxpl_coll < 0 || io->dxpl_ind < 0 || H5Pset_dxpl_mpio(io->dxpl_coll, H5FD_MPIO_COLLECTIVE) < 0 ||
        H5Pset_dxpl_mpio(io->dxpl_ind, H5FD_MPIO_INDEPENDENT) < 0)
        return hq_fail(err, HQ_EIO, "%s: cannot set up HDF5 transfer properties", inv->root);
    return 0;
}

/* The input's end of allocated space, read by rank 0 through the serial driver (the MPI-IO one
 * does not report it) and shared; 0 when unknown. */
static void learn_input_eoa(hq_io *io)
{
    uint64_t eoa = 0;
    if (io->rank == 0) {
        hid_t f = H5Fopen(io->inv.root, H5F_ACC_RDONLY, H5P_DEFAULT);
        haddr_t a = HADDR_UNDEF;
        if (f >= 0 && H5Fget_eoa(f, &a) >= 0 && a != HADDR_UNDEF)
            eoa = a;
        if (f >= 0)
            H5Fclose(f);
        H5Eclear2(H5E_DEFAULT);
    }
    MPI_Bcast(&eoa, 1, MPI_UINT64_T, 0, io->comm);
    io->in_eoa = eoa;
}

static int open_input_file(hq_io *io, hq_err *err)
{
    learn_input_eoa(io);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0 || H5Pset_fapl_mpio(fapl, io->comm, MPI_INFO_NULL) < 0) {
        if (fapl >= 0)
            H5Pclose(fapl);
        return hq_fail(err, HQ_EIO, "%s: cannot set up MPI-IO access", io->inv.root);
    }
    /* Metadata reads stay independent: ranks read different datasets at different times. */
    io->in_file = H5Fopen(io->inv.root, H5F_ACC_RDONLY, fapl);
    H5Pclose(fapl);
    if (io->in_file < 0) {
        char det[512];
        hdf5_detail(det, sizeof det);
        return hq_fail(err, HQ_EIO, "%s: cannot open HDF5 file (truncated or corrupt?)%s", io->inv.root, det);
    }
    return 0;
}

static int hdf5_open_input(const hq_inventory *inv, MPI_Comm comm, int any_order, hq_io **out, hq_err *err)
{
    quiet_hdf5();
    *out = NULL;
    hq_io *io = new_io();
    MPI_Comm dup = MPI_COMM_NULL;
    MPI_Comm_dup(comm, &dup);
    int rc = io ? 0 : hq_fail(err, HQ_EMEM, "%s: out of memory", inv->root ? inv->root : "HDF5 input");
    if (io) {
        io->comm = dup;
        MPI_Comm_rank(dup, &io->rank);
        MPI_Comm_size(dup, &io->nranks);
        io->verbose = verbose_from_env();
        io->any_order = any_order;
        rc = prepare_io(io, inv, err);
    }
    /* Each step below is collective: a rank goes on only when all ranks can. */
    rc = agree(dup, rc, err);
    if (!rc)
        rc = agree(dup, open_input_file(io, err), err);
    if (!rc) {
        int mine = 0;
        for (size_t i = 0; i < io->inv.n && !mine; i++)
            if (!io->inv.items[i].bad)
                mine = open_item(io, i, err);
        rc = agree(dup, mine, err);
    }
    if (rc) {
        if (io)
            free_io(io);
        else
            MPI_Comm_free(&dup);
        return rc;
    }
    *out = io;
    return 0;
}

/* ---------------------------------------------------------------------------------------------- */
/* Blocks                                                                                         */

static int block_fits(const hq_item *it, int frank, const hq_block *b)
{
    int has_n, has_c;
    item_roles(frank, it, &has_n, &has_c);
    if (b->s0 >= b->s1 || b->s1 > it->slices || b->r0 >= b->r1 || b->r1 > it->height || b->c0 >= b->c1 ||
        b->c1 > it->width)
        return 0;
    if (!has_n && (b->s0 != 0 || b->s1 != 1))
        return 0;
    return b->s1 - b->s0 == 1 || hq_block_whole(b, it->height, it->width);
}

/* Where a block lies, for messages: "rows 0-99, cols 200-299" (inclusive), the slices first in a
 * stack. */
static const char *block_text(const hq_item *it, const hq_block *b, char *buf, size_t len)
{
    size_t used = 0;
    if (it->slices > 1)
        used = (size_t)snprintf(buf, len, b->s1 - b->s0 > 1 ? "slices %llu-%llu, " : "slice %llu, ",
                                (unsigned long long)b->s0, (unsigned long long)(b->s1 - 1));
    if (used < len)
        snprintf(buf + used, len - used, "rows %llu-%llu, cols %llu-%llu", (unsigned long long)b->r0,
                 (unsigned long long)(b->r1 - 1), (unsigned long long)b->c0, (unsigned long long)(b->c1 - 1));
    return buf;
}

/* The block as a hyperslab of the dataset: for a stack start (s0, r0, c0[, 0]) count (s1-s0,
 * r1-r0, c1-c0[, C]); for a single image start (r0, c0[, 0]). Returns the rank. */
static int block_extent(const hq_item *it, int frank, const hq_block *b, hsize_t *start, hsize_t *count)
{
    int has_n, has_c, k = 0;
    item_roles(frank, it, &has_n, &has_c);
    if (has_n) {
        start[k] = b->s0;
        count[k++] = b->s1 - b->s0;
    }
    start[k] = b->r0;
    count[k++] = b->r1 - b->r0;
    start[k] = b->c0;
    count[k++] = b->c1 - b->c0;
    if (has_c) {
        start[k] = 0;
        count[k++] = it->channels;
    }
    return k;
}

/* The chunks a block touches, walked in odometer order: each step gives the box where the block
 * and the chunk meet, in dataset coordinates. */
typedef struct chunk_walk {
    int k;
    uint64_t cd[MAX_RANK], start[MAX_RANK], count[MAX_RANK], first[MAX_RANK], last[MAX_RANK], idx[MAX_RANK];
    uint64_t s[MAX_RANK], n[MAX_RANK]; /* this step's meeting box */
    uint64_t in_block[MAX_RANK];        /* the box's offset in the block */
    uint64_t chunks, chunk_bytes;
} chunk_walk;

static void walk_step(chunk_walk *w)
{
    for (int i = 0; i < w->k; i++) {
        const uint64_t lo = w->idx[i] * w->cd[i], hi = lo + w->cd[i], end = w->start[i] + w->count[i];
        w->s[i] = lo > w->start[i] ? lo : w->start[i];
        w->n[i] = (hi < end ? hi : end) - w->s[i];
        w->in_block[i] = w->s[i] - w->start[i];
    }
}

/* Starts a walk over block b of a chunked item; 0 when the item is not chunked. */
static int walk_begin(chunk_walk *w, const hq_io *io, uint64_t item, const hq_block *b)
{
    const hq_item *it = &io->inv.items[item];
    if (io->in_chunk[item][0] == 0)
        return 0;
    hsize_t start[MAX_RANK], count[MAX_RANK];
    w->k = block_extent(it, io->frank[item], b, start, count);
    w->chunks = 1;
    w->chunk_bytes = it->sample_bytes;
    for (int i = 0; i < w->k; i++) {
        w->cd[i] = io->in_chunk[item][i];
        w->start[i] = start[i];
        w->count[i] = count[i];
        w->first[i] = w->idx[i] = start[i] / w->cd[i];
        w->last[i] = (start[i] + count[i] - 1) / w->cd[i];
        w->chunks *= w->last[i] - w->first[i] + 1;
        w->chunk_bytes *= w->cd[i];
    }
    walk_step(w);
    return 1;
}

/* The next chunk; 0 after the last. */
static int walk_next(chunk_walk *w)
{
    int i = w->k - 1;
    for (; i >= 0 && w->idx[i] == w->last[i]; i--)
        w->idx[i] = w->first[i];
    if (i < 0)
        return 0;
    w->idx[i]++;
    walk_step(w);
    return 1;
}

/* Collective reads only: HDF5 refuses a chunk that lies past the end of allocated space on the
 * rank that reads it, after the other ranks entered the MPI collective, and the job hangs. So the
 * chunks of the block are looked up first, and the ranks agree before reading. (A file cut short
 * fails at open; this catches one whose chunk index points past its recorded end.) */
static int check_block_chunks(hq_io *io, uint64_t item, const hq_block *b, hq_err *err)
{
    const hq_item *it = &io->inv.items[item];
    chunk_walk w;
    if (!b || !io->in_eoa || !walk_begin(&w, io, item, b))
        return 0;
    do {
        unsigned mask = 0;
        haddr_t addr = HADDR_UNDEF;
        hsize_t size = 0, off[MAX_RANK];
        for (int d = 0; d < w.k; d++)
            off[d] = w.idx[d] * w.cd[d];
        if (H5Dget_chunk_info_by_coord(io->in_dset[item], off, &mask, &addr, &size) < 0) {
            char det[512], where[160];
            hdf5_detail(det, sizeof det);
            return hq_fail(err, HQ_EINPUT, "%s:%s [%s]: cannot read the chunk index%s", io->inv.root, it->name,
                           block_text(it, b, where, sizeof where), det);
        }
        if (addr != HADDR_UNDEF && ends_past(addr, size, io->in_eoa)) {
            char where[160];
            return hq_fail(err, HQ_EINPUT, "%s:%s [%s]: a chunk lies past the end of the file (truncated?)",
                           io->inv.root, it->name, block_text(it, b, where, sizeof where));
        }
    } while (walk_next(&w));
    return 0;
}

/* Room for metadata: allocated in the file before it is written (at close, mostly), so the end
 * of allocated space runs ahead of the file's size by up to this much. */
static uint64_t metadata_margin(uint64_t file_bytes)
{
    const uint64_t m = 64 * 1024 + file_bytes / 64;
    return m > RESERVE_MARGIN_MAX ? RESERVE_MARGIN_MAX : m;
}

/* Rank 0: makes sure OUT.part has disk blocks up to `end`. 0, or the errno of a full disk. */
static int reserve_to(hq_io *io, uint64_t end)
{
    if (io->no_fallocate || end <= io->reserved)
        return 0;
    int fd = open(io->part_path, O_WRONLY);
    if (fd < 0)
        return 0;
    int e = fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, (off_t)end) == 0 ? 0 : errno;
    close(fd);
    if (e == 0)
        io->reserved = end;
    else if (e != ENOSPC && e != EDQUOT && e != EFBIG)
        io->no_fallocate = 1; /* not supported here: nothing is reserved, nothing is refused */
    return e == ENOSPC || e == EDQUOT || e == EFBIG ? e : 0;
}

/* The raw bytes of the chunks a block touches: the most a collective write of it can add to a
 * compressed dataset (a chunk partly written is rewritten whole; deflate barely grows data). */
static uint64_t touched_chunk_bytes(hq_io *io, uint64_t item, const hq_block *b)
{
    const hsize_t *cd = io->in_chunk[item];
    const hq_item *it = &io->inv.items[item];
    if (!b || cd[0] == 0)
        return 0;
    hsize_t start[MAX_RANK], count[MAX_RANK];
    const int k = block_extent(it, io->frank[item], b, start, count);
    uint64_t chunks = 1, chunk_bytes = it->sample_bytes;
    for (int d = 0; d < k; d++) {
        chunks *= (start[d] + count[d] - 1) / cd[d] - start[d] / cd[d] + 1;
        chunk_bytes *= cd[d];
    }
    return chunks * (chunk_bytes + chunk_bytes / 512 + 64);
}

/* Rank 0 extends the reservation past the file's current end by `more` bytes, the most the
 * next step can add. Every rank passes the same `more`; the ranks must then agree on the result. */
static int reserve_more(hq_io *io, uint64_t more, const char *what, hq_err *err)
{
    struct stat st;
    if (io->rank != 0 || io->no_fallocate || stat(io->part_path, &st) != 0)
        return 0;
    const int e = reserve_to(io, (uint64_t)st.st_size + metadata_margin((uint64_t)st.st_size) + more);
    return e ? hq_fail(err, HQ_EIO, "%s:%s: write failed: not enough disk space (%s)", io->out_path, what,
                       strerror(e))
             : 0;
}

/* Before a collective write of a compressed dataset: room for what this round can add, all
 * ranks' blocks together. Collective. */
static int reserve_for_write(hq_io *io, uint64_t item, const hq_block *b, hq_err *err)
{
    uint64_t mine = touched_chunk_bytes(io, item, b), round = 0;
    MPI_Allreduce(&mine, &round, 1, MPI_UINT64_T, MPI_SUM, io->comm);
    return reserve_more(io, round, io->inv.items[item].name, err);
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
    const int k = block_extent(it, frank, b, start, count);
    *mspace = H5Screate_simple(k, count, NULL);
    if (*mspace < 0 || H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, count, NULL) < 0)
        return -1;
    return 0;
}

static void cause_text(uint32_t cause, char *buf, size_t len)
{
    static const struct {
        uint32_t bit;
        const char *text;
    } causes[] = {
        {H5D_MPIO_SET_INDEPENDENT, "independent transfer requested"},
        {H5D_MPIO_DATATYPE_CONVERSION, "datatype conversion (e.g. byte order)"},
        {H5D_MPIO_DATA_TRANSFORMS, "data transform"},
        {H5D_MPIO_MPI_OPT_TYPES_ENV_VAR_DISABLED, "MPI derived types disabled by environment"},
        {H5D_MPIO_NOT_SIMPLE_OR_SCALAR_DATASPACES, "dataspace neither simple nor scalar"},
        {H5D_MPIO_NOT_CONTIGUOUS_OR_CHUNKED_DATASET, "dataset neither contiguous nor chunked"},
        {H5D_MPIO_PARALLEL_FILTERED_WRITES_DISABLED, "parallel filtered writes disabled"},
        {H5D_MPIO_ERROR_WHILE_CHECKING_COLLECTIVE_POSSIBLE, "error while checking whether collective is possible"},
    };
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof causes / sizeof causes[0] && used < len; i++)
        if (cause & causes[i].bit)
            used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? ", " : "", causes[i].text);
    if (!buf[0])
        snprintf(buf, len, "unknown cause (0x%x)", (unsigned)cause);
}

/* After a collective transfer: if HDF5 made it independent, remember why (reported once, at close). */
static void note_fallback(hq_io *io, uint64_t item, int writing)
{
    io->coll_transfers++;
    if (!io->verbose)
        return;
    H5D_mpio_actual_io_mode_t mode;
    uint32_t local = 0, global = 0;
    if (H5Pget_mpio_actual_io_mode(io->dxpl_coll, &mode) < 0 ||
        H5Pget_mpio_no_collective_cause(io->dxpl_coll, &local, &global) < 0) {
        H5Eclear2(H5E_DEFAULT);
        return;
    }
    if (mode != H5D_MPIO_NO_COLLECTIVE || !(local | global))
        return;
    if (!io->fell_back++)
        io->fell_first = item * 2 + (uint64_t)writing;
    io->fell_causes |= local | global;
}

/* Collective, verbose only: one line for the whole run saying whether HDF5 turned collective
 * transfers independent, how often, where first, and why (H5Pget_mpio_no_collective_cause). */
static void report_fallbacks(hq_io *io)
{
    uint64_t mine[2] = {io->fell_back, io->coll_transfers}, all[2] = {0, 0};
    uint64_t first = io->fell_back ? io->fell_first : UINT64_MAX, first_all = UINT64_MAX;
    uint32_t causes = 0;
    int verbose = io->verbose, any_verbose = 0;
    MPI_Allreduce(&verbose, &any_verbose, 1, MPI_INT, MPI_MAX, io->comm);
    if (!any_verbose)
        return;
    MPI_Reduce(mine, all, 2, MPI_UINT64_T, MPI_SUM, 0, io->comm);
    MPI_Reduce(&first, &first_all, 1, MPI_UINT64_T, MPI_MIN, 0, io->comm);
    MPI_Reduce(&io->fell_causes, &causes, 1, MPI_UINT32_T, MPI_BOR, 0, io->comm);
    if (io->rank != 0 || !all[0] || first_all / 2 >= io->inv.n)
        return;
    char why[512];
    cause_text(causes, why, sizeof why);
    const int writing = (int)(first_all % 2);
    fprintf(stderr, "histeq_dist: HDF5 fell back to independent I/O in %llu of %llu collective transfers (first: %s "
            "%s:%s): %s\n", (unsigned long long)all[0], (unsigned long long)all[1], writing ? "writing" : "reading",
            writing && io->out_path ? io->out_path : io->inv.root, io->inv.items[first_all / 2].name, why);
}

/* Whether the failure on HDF5's error stack came from the filter pipeline (a chunk that does not
 * decompress: corrupt input, not an I/O error). Leaves the stack as it is. */
static herr_t pline_cb(unsigned n, const H5E_error2_t *e, void *data)
{
    (void)n;
    if (e->maj_num == H5E_PLINE)
        *(int *)data = 1;
    return 0;
}

static int filter_failed(void)
{
    int yes = 0;
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, pline_cb, &yes);
    return yes;
}

/* One read or write of a block (or of nothing, to take part in a collective transfer). */
/* Whether a transfer the driver asks to be collective must be. Only writes of compressed datasets
 * must (parallel HDF5 compresses chunks in collective writes only); elsewhere each rank's blocks
 * are large, disjoint and chunk-aligned, and independent MPI-IO beats two-phase collective I/O:
 * on one host with 4 ranks, a 30 GiB chunked image read collectively ran at a quarter of the
 * speed of independent reads (bench/results/scaling.txt). HQ_HDF5_COLLECTIVE=1 keeps every such
 * transfer collective, for parallel file systems where aggregation pays. Depends only on the item
 * and the direction, so every rank decides alike. */
static int needs_collective(const hq_io *io, uint64_t item, int writing)
{
    static int forced = -1;
    if (forced < 0) {
        const char *s = getenv("HQ_HDF5_COLLECTIVE");
        forced = s && *s && strcmp(s, "0") != 0;
    }
    return forced || (writing && item < io->inv.n && (io->flags[item] & OUT_FILTERED));
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
    if (!walk_begin(&w, io, item, b))
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
    } while (walk_next(&w));
    return 0;
}

static int transfer(hq_io *io, uint64_t item, const hq_block *b, int collective, void *buf, int writing, hq_err *err)
{
    if (collective && !needs_collective(io, item, writing))
        collective = 0;
    if (!b && !collective)
        return 0;
    const char *file = writing ? io->out_path : io->inv.root;
    if (item >= io->inv.n)
        return hq_fail(err, HQ_EIO, "%s: item %llu out of range", file ? file : "HDF5", (unsigned long long)item);
    const hq_item *it = &io->inv.items[item];
    hid_t d = writing ? (io->out_dset ? io->out_dset[item] : H5I_INVALID_HID) : io->in_dset[item];
    if (d < 0)
        return hq_fail(err, HQ_EIO, "%s:%s: not open for %s", file ? file : "HDF5 output", it->name,
                       writing ? "writing" : "reading");
    const char *verb = writing ? "write" : "read";
    char where[160] = "";
    int rc = 0;
    if (b && !block_fits(it, io->frank[item], b)) {
        rc = hq_fail(err, HQ_EIO, "%s:%s [slices %llu-%llu, rows %llu-%llu, cols %llu-%llu]: %s failed: outside the "
                     "dataset", file, it->name, (unsigned long long)b->s0, (unsigned long long)b->s1 - 1,
                     (unsigned long long)b->r0, (unsigned long long)b->r1 - 1, (unsigned long long)b->c0,
                     (unsigned long long)b->c1 - 1, verb);
        if (!collective)
            return rc;
        b = NULL; /* still take part, so that the other ranks do not hang */
    }
    if (b)
        block_text(it, b, where, sizeof where);
    if (writing && (io->flags[item] & OUT_FILTERED) && !collective) {
        if (io->nranks > 1)
            return hq_fail(err, HQ_EIO, "%s:%s [%s]: write failed: a compressed dataset can only be written "
                           "collectively", file, it->name, where);
        collective = 1; /* alone in the communicator, a collective write is just a write */
    }
    /* Checks agreed before the transfer, so that all ranks skip it together. */
    if (!writing && collective) {
        rc = agree(io->comm, rc ? rc : check_block_chunks(io, item, b, err), err);
        if (rc)
            return rc;
    } else if (!writing && b && (rc = check_block_chunks(io, item, b, err)) != 0) {
        return rc; /* MPI-IO's short read of a truncated chunk can pass HDF5 unnoticed */
    }
    if (writing && collective && (io->flags[item] & OUT_FILTERED)) {
        const int pre = reserve_for_write(io, item, b, err);
        rc = agree(io->comm, rc ? rc : pre, err);
        if (rc)
            return rc;
    }
    static unsigned char nothing;
    const hid_t mtype = it->sample_bytes == 2 ? H5T_NATIVE_UINT16 : H5T_NATIVE_UINT8;
    hid_t mspace = H5I_INVALID_HID, fspace = H5Dget_space(d);
    herr_t st = -1;
    /* Compressed input is read independently even when the caller asks for a collective read (the
     * ranks still meet in the agreements around it): HDF5 1.10's collective read of filtered
     * chunks trusts a damaged chunk index that its independent read refuses, and dies in its
     * Fletcher-32 check on a chunk listed twice, once with size 0 (fuzz/regress/hdf5/chunk-index-*). */
    const int coll_io = collective && (writing || !it->collective);
    if (fspace >= 0 && select_block(fspace, it, io->frank[item], b, &mspace) >= 0) {
        const hid_t dxpl = coll_io ? io->dxpl_coll : io->dxpl_ind;
        void *p = b ? buf : &nothing;
        /* by_chunk: 1 leaves the whole block to HDF5, 0 moved it, -1 failed */
        const int whole = b && !coll_io ? by_chunk(io, item, b, d, fspace, mtype, buf, writing) : 1;
        if (whole <= 0)
            st = whole;
        else
            st = writing ? H5Dwrite(d, mtype, mspace, fspace, dxpl, p) : H5Dread(d, mtype, mspace, fspace, dxpl, p);
    }
    if (st < 0 && !rc) {
        char det[512];
        const int corrupt = !writing && filter_failed();
        hdf5_detail(det, sizeof det);
        if (b && corrupt)
            rc = hq_fail(err, HQ_EINPUT, "%s:%s [%s]: cannot decompress (corrupt chunk?)%s", file, it->name, where, det);
        else if (b)
            rc = hq_fail(err, HQ_EIO, "%s:%s [%s]: %s failed%s", file, it->name, where, verb, det);
        else
            rc = hq_fail(err, HQ_EIO, "%s:%s: %s failed (collective, no selection)%s", file, it->name, verb, det);
    }
    if (st >= 0 && coll_io)
        note_fallback(io, item, writing);
    if (mspace >= 0)
        H5Sclose(mspace);
    if (fspace >= 0)
        H5Sclose(fspace);
    /* After a failed collective transfer HDF5's state may differ between ranks; every rank must
     * learn of it now, so that all stop together instead of meeting in different collectives. */
    return collective ? agree(io->comm, rc, err) : rc;
}

static int hdf5_read_block(hq_io *io, uint64_t item, const hq_block *b, int collective, void *dst, hq_err *err)
{
    return transfer(io, item, b, collective, dst, 0, err);
}

static int hdf5_write_block(hq_io *io, uint64_t item, const hq_block *b, int collective, const void *src,
                            hq_err *err)
{
    if (!io->out_dset || io->out_file < 0)
        return hq_fail(err, HQ_EIO, "%s: no output was created", io->inv.root);
    return transfer(io, item, b, collective, (void *)src, 1, err);
}

/* ---------------------------------------------------------------------------------------------- */
/* create_output                                                                                  */

static int same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

static int check_dir_writable(const char *out, hq_err *err)
{
    char *dir = strdup(out);
    if (!dir)
        return hq_fail(err, HQ_EMEM, "%s: out of memory", out);
    char *slash = strrchr(dir, '/');
    if (!slash)
        strcpy(dir, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    int rc = 0;
    if (access(dir, W_OK | X_OK) != 0)
        rc = hq_fail(err, HQ_EIO, "%s: cannot write (%s)", out, strerror(errno));
    free(dir);
    return rc;
}

/* Rank 0: may we write OUT (as OUT.part, renamed at the end)? */
static int check_output_path(const hq_io *io, const hq_out_opts *o, hq_err *err)
{
    const char *out = o->path;
    struct stat in_st, st;
    const int have_in = stat(io->inv.root, &in_st) == 0;
    if (stat(out, &st) == 0) {
        if (have_in && same_file(&in_st, &st))
            return hq_fail(err, HQ_EUSAGE, "%s: output is the input", out);
        if (S_ISDIR(st.st_mode))
            return hq_fail(err, HQ_EUSAGE, "%s: output is a directory", out);
        if (!o->force)
            return hq_fail(err, HQ_EUSAGE, "%s: output exists (use --force to replace)", out);
    }
    if (stat(io->part_path, &st) == 0) {
        if (have_in && same_file(&in_st, &st))
            return hq_fail(err, HQ_EUSAGE, "%s: its temporary file %s is the input", out, io->part_path);
        if (S_ISDIR(st.st_mode))
            return hq_fail(err, HQ_EIO, "%s: cannot write (%s is a directory)", out, io->part_path);
    }
    return check_dir_writable(out, err);
}

/* The output's file access: MPI-IO with collective metadata, and 1 MiB alignment, which suits
 * parallel file systems. */
static hid_t output_fapl(hq_io *io)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl >= 0 && (H5Pset_fapl_mpio(fapl, io->comm, MPI_INFO_NULL) < 0 ||
                      H5Pset_all_coll_metadata_ops(fapl, 1) < 0 || H5Pset_coll_metadata_write(fapl, 1) < 0 ||
                      H5Pset_alignment(fapl, MiB, MiB) < 0)) {
        H5Pclose(fapl);
        fapl = H5I_INVALID_HID;
    }
    return fapl;
}

/* Creates OUT.part, or with `reopen` opens the one an interrupted run left (--resume). */
static int create_output_file(hq_io *io, int reopen, hq_err *err)
{
    hid_t fapl = output_fapl(io);
    if (fapl >= 0)
        io->out_file = reopen ? H5Fopen(io->part_path, H5F_ACC_RDWR, fapl)
                              : H5Fcreate(io->part_path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    char det[512] = "";
    if (io->out_file < 0)
        hdf5_detail(det, sizeof det);
    if (fapl < 0)
        return hq_fail(err, HQ_EIO, "%s: cannot set up MPI-IO access", io->out_path);
    H5Pclose(fapl);
    if (io->out_file < 0)
        return hq_fail(err, HQ_EIO, "%s: cannot %s %s%s", io->out_path, reopen ? "reopen the interrupted" : "create",
                       io->part_path, det);
    return 0;
}

/* Copies the input's filter pipeline; a mandatory filter we cannot encode with is an error, an
 * optional one is dropped (HDF5 would skip it on failure anyway). */
static int copy_filters(hid_t in_dcpl, hid_t out_dcpl, const char *out, const char *name, hq_err *err)
{
    const int nf = H5Pget_nfilters(in_dcpl);
    for (int i = 0; i < nf; i++) {
        unsigned flags = 0, cfg = 0, cd[32];
        size_t ncd = sizeof cd / sizeof cd[0];
        char fname[64];
        H5Z_filter_t f = H5Pget_filter2(in_dcpl, (unsigned)i, &flags, &ncd, cd, sizeof fname, fname, NULL);
        if (f < 0)
            return hq_fail(err, HQ_EIO, "%s:%s: cannot read the input's filter %d", out, name, i);
        if (ncd > sizeof cd / sizeof cd[0])
            ncd = sizeof cd / sizeof cd[0];
        const int can = H5Zget_filter_info(f, &cfg) >= 0 && (cfg & H5Z_FILTER_CONFIG_ENCODE_ENABLED);
        if (!can && (flags & H5Z_FLAG_OPTIONAL))
            continue;
        /* Fixed scale-offset bits suited the input's range, not necessarily the equalized one:
         * let the filter size each chunk itself, which is lossless for integers. */
        if (f == H5Z_FILTER_SCALEOFFSET) {
            if (H5Pset_scaleoffset(out_dcpl, H5Z_SO_INT, H5Z_SO_INT_MINBITS_DEFAULT) < 0)
                return hq_fail(err, HQ_EIO, "%s:%s: cannot set the scale-offset filter", out, name);
            continue;
        }
        if (!can || H5Pset_filter(out_dcpl, f, flags, ncd, cd) < 0)
            return hq_fail(err, HQ_EIO, "%s:%s: cannot compress with filter %d (%s) like the input", out, name, (int)f,
                           filter_label(f));
    }
    return 0;
}

/* The output's creation properties: the input's chunks and filters, nothing else of its layout
 * (compact, external or virtual storage become contiguous). Space is allocated at creation, as
 * independent parallel writes need, except with filters, where chunks are sized as written. */
static int output_dcpl(hid_t in, int frank, const char *out, const char *name, hid_t *dcpl_out, hq_err *err)
{
    hid_t in_dcpl = H5Dget_create_plist(in);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    int rc = 0;
    if (in_dcpl < 0 || dcpl < 0) {
        rc = hq_fail(err, HQ_EIO, "%s:%s: cannot read the input's layout", out, name);
        goto out;
    }
    int filtered = 0;
    if (H5Pget_layout(in_dcpl) == H5D_CHUNKED) {
        hsize_t cd[MAX_RANK];
        if (H5Pget_chunk(in_dcpl, frank, cd) != frank || H5Pset_chunk(dcpl, frank, cd) < 0) {
            rc = hq_fail(err, HQ_EIO, "%s:%s: cannot copy the input's chunk shape", out, name);
            goto out;
        }
        rc = copy_filters(in_dcpl, dcpl, out, name, err);
        filtered = H5Pget_nfilters(dcpl) > 0;
    } else if (H5Pset_layout(dcpl, H5D_CONTIGUOUS) < 0) {
        rc = hq_fail(err, HQ_EIO, "%s:%s: cannot set a contiguous layout", out, name);
    }
    if (!rc && (H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER) < 0 ||
                H5Pset_alloc_time(dcpl, filtered ? H5D_ALLOC_TIME_INCR : H5D_ALLOC_TIME_EARLY) < 0))
        rc = hq_fail(err, HQ_EIO, "%s:%s: cannot set allocation properties", out, name);
out:
    if (in_dcpl >= 0)
        H5Pclose(in_dcpl);
    if (rc && dcpl >= 0)
        H5Pclose(dcpl);
    *dcpl_out = rc ? H5I_INVALID_HID : dcpl;
    return rc;
}

typedef struct attr_ctx {
    hid_t dst;
    const char *out, *name;
    hq_err *err;
    int rc;
} attr_ctx;

/* Numbers and strings, of modest size, are copied; anything else (references, compounds, ...)
 * is left out: the decision depends only on the input, so every rank makes the same one. */
static int attr_copyable(hid_t t, hid_t s)
{
    const H5T_class_t cls = H5Tget_class(t);
    const H5S_class_t sc = H5Sget_simple_extent_type(s);
    const hssize_t n = H5Sget_simple_extent_npoints(s);
    if ((cls != H5T_INTEGER && cls != H5T_FLOAT && cls != H5T_STRING) || (sc != H5S_SCALAR && sc != H5S_SIMPLE))
        return 0;
    const size_t elem = H5Tis_variable_str(t) > 0 ? sizeof(char *) : H5Tget_size(t);
    return n > 0 && (uint64_t)n * elem <= ATTR_COPY_MAX;
}

static int copy_attr(hid_t src_obj, const char *aname, attr_ctx *c)
{
    hid_t a = H5Aopen(src_obj, aname, H5P_DEFAULT);
    hid_t t = a >= 0 ? H5Aget_type(a) : H5I_INVALID_HID;
    hid_t s = a >= 0 ? H5Aget_space(a) : H5I_INVALID_HID;
    hid_t ft = H5I_INVALID_HID, mt = H5I_INVALID_HID, na = H5I_INVALID_HID;
    void *buf = NULL;
    int rc = 0;
    if (a < 0 || t < 0 || s < 0) {
        rc = -1;
        goto out;
    }
    if (!attr_copyable(t, s))
        goto out;
    const int vstr = H5Tis_variable_str(t) > 0;
    ft = H5Tcopy(t); /* a transient copy, should the input use a named datatype */
    mt = H5Tget_class(t) == H5T_STRING ? H5Tcopy(t) : H5Tget_native_type(t, H5T_DIR_ASCEND);
    const hssize_t n = H5Sget_simple_extent_npoints(s);
    const size_t elem = vstr ? sizeof(char *) : (mt >= 0 ? H5Tget_size(mt) : 0);
    buf = calloc((size_t)n, elem ? elem : 1);
    if (ft < 0 || mt < 0 || !buf || H5Aread(a, mt, buf) < 0) {
        rc = -1;
        goto out;
    }
    na = H5Acreate2(c->dst, aname, ft, s, H5P_DEFAULT, H5P_DEFAULT);
    if (na < 0 || H5Awrite(na, mt, buf) < 0)
        rc = -1;
    if (vstr)
        H5Dvlen_reclaim(mt, s, H5P_DEFAULT, buf);
out:
    free(buf);
    if (na >= 0)
        H5Aclose(na);
    if (mt >= 0)
        H5Tclose(mt);
    if (ft >= 0)
        H5Tclose(ft);
    if (s >= 0)
        H5Sclose(s);
    if (t >= 0)
        H5Tclose(t);
    if (a >= 0)
        H5Aclose(a);
    return rc;
}

static herr_t attr_cb(hid_t obj, const char *aname, const H5A_info_t *info, void *data)
{
    (void)info;
    attr_ctx *c = data;
    if (copy_attr(obj, aname, c) < 0) {
        char det[512];
        hdf5_detail(det, sizeof det);
        c->rc = hq_fail(c->err, HQ_EIO, "%s:%s: cannot copy attribute \"%s\"%s", c->out, c->name, aname, det);
        return 1;
    }
    return 0;
}

static int create_item_output(hq_io *io, uint64_t i, hq_err *err)
{
    const hq_item *it = &io->inv.items[i];
    const char *out = io->out_path;
    hid_t in = io->in_dset[i];
    hid_t dcpl = H5I_INVALID_HID, lcpl = H5I_INVALID_HID, t = H5I_INVALID_HID, s = H5I_INVALID_HID;
    int rc = output_dcpl(in, io->frank[i], out, it->name, &dcpl, err);
    if (rc)
        return rc;
    hid_t it_type = H5Dget_type(in);
    t = it_type >= 0 ? H5Tcopy(it_type) : H5I_INVALID_HID; /* transient, even from a named datatype */
    if (it_type >= 0)
        H5Tclose(it_type);
    /* A type of fewer significant bits than its size (12 of 16) would clip equalized values
     * that use the full depth; the output keeps the size and byte order with all bits. */
    if (t >= 0 && (H5Tget_precision(t) != H5Tget_size(t) * 8 || H5Tget_offset(t) != 0) &&
        (H5Tset_offset(t, 0) < 0 || H5Tset_precision(t, H5Tget_size(t) * 8) < 0)) {
        H5Tclose(t);
        t = H5I_INVALID_HID;
    }
    hsize_t dims[MAX_RANK];
    hid_t in_space = H5Dget_space(in);
    if (in_space >= 0 && H5Sget_simple_extent_dims(in_space, dims, NULL) == io->frank[i])
        s = H5Screate_simple(io->frank[i], dims, NULL); /* fixed size, whatever the input's max dims */
    if (in_space >= 0)
        H5Sclose(in_space);
    lcpl = H5Pcreate(H5P_LINK_CREATE);
    if (t < 0 || s < 0 || lcpl < 0 || H5Pset_create_intermediate_group(lcpl, 1) < 0) {
        rc = hq_fail(err, HQ_EIO, "%s:%s: cannot prepare the dataset", out, it->name);
        goto out;
    }
    if (H5Pget_nfilters(dcpl) > 0)
        io->flags[i] |= OUT_FILTERED;
    io->out_dset[i] = H5Dcreate2(io->out_file, it->name, t, s, lcpl, dcpl, H5P_DEFAULT);
    if (io->out_dset[i] < 0) {
        char det[512];
        hdf5_detail(det, sizeof det);
        rc = hq_fail(err, HQ_EIO, "%s:%s: cannot create the dataset%s", out, it->name, det);
        goto out;
    }
    attr_ctx c = {io->out_dset[i], out, it->name, err, 0};
    hsize_t idx = 0;
    if (H5Aiterate2(in, H5_INDEX_NAME, H5_ITER_INC, &idx, attr_cb, &c) < 0 && !c.rc) {
        char det[512];
        hdf5_detail(det, sizeof det);
        c.rc = hq_fail(err, HQ_EIO, "%s:%s: cannot list the input's attributes%s", out, it->name, det);
    }
    rc = c.rc;
out:
    if (lcpl >= 0)
        H5Pclose(lcpl);
    if (s >= 0)
        H5Sclose(s);
    if (t >= 0)
        H5Tclose(t);
    if (dcpl >= 0)
        H5Pclose(dcpl);
    return rc;
}

/* Collective, before closing an output that will be thrown away: emptying OUT.part gives back the
 * space of its data, so that the metadata HDF5 flushes on close fits even when the disk filled up.
 * A flush that fails on some ranks only leaves parallel HDF5 waiting in different collectives. */
static void empty_output(hq_io *io)
{
    MPI_Barrier(io->comm);
    if (io->rank == 0 && io->part_ours && truncate(io->part_path, 0) != 0) {
        /* nothing more to do: the close below may still succeed */
    }
    MPI_Barrier(io->comm);
}

/* Undoes create_output: closes what it opened and removes OUT.part. Collective. */
static void drop_output(hq_io *io)
{
    if (io->out_file >= 0)
        empty_output(io);
    for (size_t i = 0; io->out_dset && i < io->inv.n; i++)
        close_id(&io->out_dset[i], H5Dclose);
    close_id(&io->out_file, H5Fclose);
    H5Eclear2(H5E_DEFAULT);
    MPI_Barrier(io->comm);
    if (io->rank == 0 && io->part_ours)
        unlink(io->part_path);
    MPI_Barrier(io->comm);
    io->part_ours = 0;
    free(io->out_dset);
    free(io->out_path);
    free(io->part_path);
    io->out_dset = NULL;
    io->out_path = io->part_path = NULL;
}

/* The end of the space allocated in the output so far. H5Fget_eoa needs a SWMR driver and
 * H5Fget_filesize fails under MPI-IO once the EOF is unknown; then the datasets' sizes, each
 * possibly aligned to 1 MiB, make an estimate. */
static uint64_t allocated_bytes(hq_io *io)
{
    hsize_t size = 0;
    if (H5Fget_filesize(io->out_file, &size) >= 0)
        return size;
    H5Eclear2(H5E_DEFAULT);
    uint64_t sum = MiB;
    for (size_t i = 0; i < io->inv.n; i++)
        if (io->out_dset[i] >= 0)
            sum += H5Dget_storage_size(io->out_dset[i]) + MiB;
    return sum;
}

/* What the compressed datasets take at least: as much as the input's compressed chunks. */
static uint64_t compressed_lower_bound(hq_io *io)
{
    uint64_t lo = 0;
    for (size_t i = 0; i < io->inv.n; i++)
        if (io->flags[i] & OUT_FILTERED)
            lo += H5Dget_storage_size(io->in_dset[i]);
    H5Eclear2(H5E_DEFAULT);
    return lo;
}

/* Disk blocks are reserved ahead of every write, so that a full disk is found before a write
 * rather than in the middle of one: a write failing on some ranks only leaves parallel HDF5 1.10
 * (compressed collective writes above all) waiting in different collectives. Uncompressed
 * datasets are allocated at creation (up to `allocated`, placed first in the file) and reserved
 * here whole, with room for the metadata written at close; compressed ones grow as written and
 * are reserved round by round (reserve_for_write), after a first check that at least their
 * input's size fits. Filesystems without fallocate are left alone. Collective. */
static int reserve_space(hq_io *io, uint64_t allocated, hq_err *err)
{
    int rc = 0;
    if (io->rank == 0) {
        const uint64_t lo = compressed_lower_bound(io);
        int e = reserve_to(io, allocated + metadata_margin(allocated + lo) + lo);
        if (e)
            rc = hq_fail(err, HQ_EIO, "%s: not enough disk space for the output (%llu bytes%s: %s)", io->out_path,
                         (unsigned long long)(allocated + lo), lo ? " or more, as compressed" : "", strerror(e));
    }
    return share_from_root(io->comm, rc, err);
}

/* Rank 0, once the output is complete: gives back the reserved blocks past its end. */
static void release_reserve(hq_io *io)
{
    struct stat st;
    if (!io->reserved || stat(io->part_path, &st) != 0 || (uint64_t)st.st_size >= io->reserved)
        return;
    int fd = open(io->part_path, O_WRONLY);
    if (fd < 0)
        return;
    if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, st.st_size,
                  (off_t)(io->reserved - (uint64_t)st.st_size)) != 0) {
        /* the reservation stays allocated past the end; harmless but for the space */
    }
    close(fd);
}

/* --resume: the datasets of the OUT.part an interrupted run left, which must have the input's
 * shapes (a journal is only trusted with the file it was written with). */
static int reopen_datasets(hq_io *io, hq_err *err)
{
    for (size_t i = 0; i < io->inv.n; i++) {
        const hq_item *it = &io->inv.items[i];
        if (it->bad)
            continue;
        io->out_dset[i] = H5Dopen2(io->out_file, it->name, H5P_DEFAULT);
        hsize_t din[MAX_RANK], dout[MAX_RANK];
        hid_t si = H5Dget_space(io->in_dset[i]);
        hid_t so = io->out_dset[i] >= 0 ? H5Dget_space(io->out_dset[i]) : H5I_INVALID_HID;
        hid_t dcpl = io->out_dset[i] >= 0 ? H5Dget_create_plist(io->out_dset[i]) : H5I_INVALID_HID;
        const int k = io->frank[i];
        int ok = si >= 0 && so >= 0 && dcpl >= 0 && H5Sget_simple_extent_dims(si, din, NULL) == k &&
                 H5Sget_simple_extent_dims(so, dout, NULL) == k && memcmp(din, dout, (size_t)k * sizeof *din) == 0;
        if (ok && H5Pget_nfilters(dcpl) > 0)
            io->flags[i] |= OUT_FILTERED;
        if (si >= 0)
            H5Sclose(si);
        if (so >= 0)
            H5Sclose(so);
        if (dcpl >= 0)
            H5Pclose(dcpl);
        if (!ok)
            return hq_fail(err, HQ_EUSAGE, "%s:%s: cannot resume: the interrupted output has no such dataset of "
                           "the input's shape (use --force without --resume to start over)", io->part_path, it->name);
    }
    return 0;
}

/* The output datasets of the good items whose input is compressed (or not). */
static int create_datasets(hq_io *io, int compressed, hq_err *err)
{
    for (size_t i = 0; i < io->inv.n; i++) {
        if (io->inv.items[i].bad || input_compressed(io->in_dset[i]) != compressed)
            continue;
        int rc = create_item_output(io, i, err);
        if (rc)
            return rc;
    }
    return 0;
}

/* OUT.part, where the output is written until it is complete (malloc'd). */
static char *part_name(const char *out)
{
    const size_t len = strlen(out) + sizeof ".part";
    char *p = malloc(len);
    if (p)
        snprintf(p, len, "%s.part", out);
    return p;
}

static int name_output(hq_io *io, const hq_out_opts *o, hq_err *err)
{
    if (!o || !o->path || !o->path[0])
        return hq_fail(err, HQ_EUSAGE, "%s: no output path given", io->inv.root);
    io->out_path = strdup(o->path);
    io->part_path = part_name(o->path);
    io->out_dset = malloc((io->inv.n ? io->inv.n : 1) * sizeof *io->out_dset);
    if (!io->out_path || !io->part_path || !io->out_dset)
        return hq_fail(err, HQ_EMEM, "%s: out of memory", o->path);
    for (size_t i = 0; i < io->inv.n; i++)
        io->out_dset[i] = H5I_INVALID_HID;
    return 0;
}

static int hdf5_create_output(hq_io *io, const hq_out_opts *o, MPI_Comm comm, hq_err *err)
{
    (void)comm; /* io->comm is the duplicate of the communicator given to open_input */
    quiet_hdf5();
    if (io->out_file >= 0 || io->out_path)
        return hq_fail(err, HQ_EUSAGE, "%s: output already created", io->out_path ? io->out_path : "output");
    if (o && o->verbose)
        io->verbose = 1;
    int rc = agree(io->comm, name_output(io, o, err), err);
    if (!rc) {
        int mine = io->rank == 0 ? check_output_path(io, o, err) : 0;
        rc = share_from_root(io->comm, mine, err);
    }
    if (!rc) {
        io->part_ours = 1;
        rc = agree(io->comm, create_output_file(io, o->resume, err), err);
    }
    if (!rc && o->resume) {
        rc = agree(io->comm, reopen_datasets(io, err), err);
    } else {
        /* Metadata is collective: every rank creates every dataset, in the same order. The
         * uncompressed ones come first, so that their space can be reserved before compressed
         * ones make the file's end unknown. */
        uint64_t allocated = 0;
        if (!rc)
            rc = agree(io->comm, create_datasets(io, 0, err), err);
        if (!rc && io->rank == 0)
            allocated = allocated_bytes(io);
        if (!rc)
            rc = agree(io->comm, create_datasets(io, 1, err), err);
        if (!rc)
            rc = reserve_space(io, allocated, err);
        /* On disk now, so that a run killed from here on leaves a file that --resume can open. */
        if (!rc && H5Fflush(io->out_file, H5F_SCOPE_LOCAL) < 0)
            rc = hq_fail(err, HQ_EIO, "%s: cannot flush %s", io->out_path, io->part_path);
        rc = agree(io->comm, rc, err);
    }
    if (rc)
        drop_output(io);
    return rc;
}

/* ---------------------------------------------------------------------------------------------- */
/* close                                                                                          */

static int write_string_attr(hid_t obj, const char *aname, const char *value)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    hid_t s = H5Screate(H5S_SCALAR);
    hid_t a = H5I_INVALID_HID;
    int ok = t >= 0 && s >= 0 && H5Tset_size(t, H5T_VARIABLE) >= 0 && H5Tset_cset(t, H5T_CSET_UTF8) >= 0;
    if (ok && H5Aexists(obj, aname) > 0)
        ok = H5Adelete(obj, aname) >= 0;
    if (ok)
        a = H5Acreate2(obj, aname, t, s, H5P_DEFAULT, H5P_DEFAULT);
    const char *v = value ? value : "";
    ok = ok && a >= 0 && H5Awrite(a, t, &v) >= 0;
    if (a >= 0)
        H5Aclose(a);
    if (s >= 0)
        H5Sclose(s);
    if (t >= 0)
        H5Tclose(t);
    return ok ? 0 : -1;
}

static int write_u32_attr(hid_t obj, const char *aname, uint32_t value)
{
    hid_t s = H5Screate(H5S_SCALAR);
    hid_t a = H5I_INVALID_HID;
    int ok = s >= 0;
    if (ok && H5Aexists(obj, aname) > 0)
        ok = H5Adelete(obj, aname) >= 0;
    if (ok)
        a = H5Acreate2(obj, aname, H5T_STD_U32LE, s, H5P_DEFAULT, H5P_DEFAULT);
    ok = ok && a >= 0 && H5Awrite(a, H5T_NATIVE_UINT32, &value) >= 0;
    if (a >= 0)
        H5Aclose(a);
    if (s >= 0)
        H5Sclose(s);
    return ok ? 0 : -1;
}

static int collides_with_own_group(const hq_io *io)
{
    for (size_t i = 0; i < io->inv.n; i++)
        if (!io->inv.items[i].bad && under_own_group(io->inv.items[i].name))
            return 1;
    return 0;
}

/* A run killed while closing may have made our own datasets already (--resume): they go, to be
 * made again. Checks the path's link at every level, as H5Lexists needs its parents to exist. */
static int drop_if_there(hq_io *io, const char *path)
{
    char buf[1024];
    if (strlen(path) >= sizeof buf)
        return -1;
    strcpy(buf, path);
    for (char *p = strchr(buf + 1, '/');; p = strchr(p + 1, '/')) {
        if (p)
            *p = '\0';
        htri_t e = H5Lexists(io->out_file, buf, H5P_DEFAULT);
        if (e <= 0)
            return e < 0 ? -1 : 0;
        if (!p)
            break;
        *p = '/';
    }
    return H5Ldelete(io->out_file, path, H5P_DEFAULT) >= 0 ? 0 : -1;
}

/* A small dataset of our own under /histeq_dist, created by all ranks (metadata is collective),
 * written by rank 0 alone: early allocation allows that. */
static int write_own_dataset(hq_io *io, const char *path, hid_t ftype, hid_t mtype, const hsize_t dims[2],
                             const void *data)
{
    hid_t s = H5Screate_simple(2, dims, NULL);
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    hid_t d = H5I_INVALID_HID;
    int ok = s >= 0 && lcpl >= 0 && dcpl >= 0 && H5Pset_create_intermediate_group(lcpl, 1) >= 0 &&
             H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY) >= 0 && H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER) >= 0;
    ok = ok && drop_if_there(io, path) == 0;
    if (ok)
        d = H5Dcreate2(io->out_file, path, ftype, s, lcpl, dcpl, H5P_DEFAULT);
    ok = ok && d >= 0;
    if (ok && io->rank == 0)
        ok = H5Dwrite(d, mtype, H5S_ALL, H5S_ALL, io->dxpl_ind, data) >= 0;
    if (d >= 0 && H5Dclose(d) < 0)
        ok = 0;
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (lcpl >= 0)
        H5Pclose(lcpl);
    if (s >= 0)
        H5Sclose(s);
    return ok ? 0 : -1;
}

/* Global scope: /histeq_dist/global_histogram (uint64) and /histeq_dist/global_lut (uint16), both
 * (nhist, bins). */
static int write_global(hq_io *io, const hq_run_meta *m, hq_err *err)
{
    const hsize_t dims[2] = {m->global_nhist, m->global_bins};
    const uint64_t n = (uint64_t)m->global_nhist * m->global_bins;
    int rc = agree(io->comm, reserve_more(io, n * (sizeof(uint64_t) + sizeof(uint16_t)), OWN_HIST, err), err);
    const char *failed = NULL;
    if (!rc && write_own_dataset(io, OWN_HIST, H5T_STD_U64LE, H5T_NATIVE_UINT64, dims, m->global_hist) < 0)
        failed = OWN_HIST;
    if (!rc && !failed && m->global_lut &&
        write_own_dataset(io, OWN_GLOBAL_LUT, H5T_STD_U16LE, H5T_NATIVE_UINT16, dims, m->global_lut) < 0)
        failed = OWN_GLOBAL_LUT;
    if (failed) {
        char det[512];
        hdf5_detail(det, sizeof det);
        rc = hq_fail(err, HQ_EIO, "%s:%s: cannot write%s", io->out_path, failed, det);
    }
    return rc;
}

/* The shape of an item's LUT dataset: (slices, nhist, bins) of its mode. */
static void lut_dims(const hq_io *io, const hq_run_meta *m, uint64_t i, hsize_t dims[3])
{
    const hq_item *it = &io->inv.items[i];
    const hq_mode mode = {it->channels, it->sample_bytes, m->bits ? m->bits : it->depth, m->color};
    dims[0] = it->slices;
    dims[1] = hq_mode_nhist(&mode);
    dims[2] = hq_mode_bins(&mode);
}

/* Creates /histeq_dist/lut/<dataset> for every good item, on every rank in the same order
 * (metadata is collective): uint16, contiguous, allocated at creation and never filtered, so that
 * each rank can then write the LUTs it computed with independent transfers (parallel HDF5 writes
 * filtered data only collectively). */
static int create_lut_datasets(hq_io *io, const hq_run_meta *m, hid_t *d, hq_err *err)
{
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    int ok = lcpl >= 0 && dcpl >= 0 && H5Pset_create_intermediate_group(lcpl, 1) >= 0 &&
             H5Pset_layout(dcpl, H5D_CONTIGUOUS) >= 0 && H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY) >= 0 &&
             H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER) >= 0;
    int rc = 0;
    for (size_t i = 0; ok && i < io->inv.n; i++) {
        if (io->inv.items[i].bad)
            continue;
        hsize_t dims[3];
        lut_dims(io, m, i, dims);
        const size_t len = strlen(OWN_LUTS) + strlen(io->inv.items[i].name) + 2;
        char *path = malloc(len);
        hid_t s = H5Screate_simple(3, dims, NULL);
        if (path) {
            snprintf(path, len, "%s%s%s", OWN_LUTS, io->inv.items[i].name[0] == '/' ? "" : "/", io->inv.items[i].name);
            d[i] = s >= 0 && drop_if_there(io, path) == 0
                       ? H5Dcreate2(io->out_file, path, H5T_STD_U16LE, s, lcpl, dcpl, H5P_DEFAULT)
                       : H5I_INVALID_HID;
        }
        if (s >= 0)
            H5Sclose(s);
        if (!path || d[i] < 0) {
            char det[512];
            hdf5_detail(det, sizeof det);
            rc = hq_fail(err, path ? HQ_EIO : HQ_EMEM, "%s:%s%s: cannot create%s", io->out_path, OWN_LUTS,
                         io->inv.items[i].name, det);
            ok = 0;
        }
        free(path);
    }
    if (!ok && !rc)
        rc = hq_fail(err, HQ_EIO, "%s:%s: cannot prepare the LUT datasets", io->out_path, OWN_LUTS);
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (lcpl >= 0)
        H5Pclose(lcpl);
    return rc;
}

/* This rank's LUTs, each one slice (1, nhist, bins) of its item's dataset. */
static int write_my_luts(hq_io *io, const hq_run_meta *m, const hid_t *d, hq_err *err)
{
    for (uint64_t k = 0; k < m->nluts; k++) {
        const hq_lut_rec *rec = &m->luts[k];
        hsize_t dims[3];
        lut_dims(io, m, rec->item, dims);
        const hsize_t start[3] = {rec->slice, 0, 0}, count[3] = {1, dims[1], dims[2]}, n = dims[1] * dims[2];
        hid_t fs = H5Dget_space(d[rec->item]), ms = H5Screate_simple(1, &n, NULL);
        int ok = fs >= 0 && ms >= 0 && rec->slice < dims[0] &&
                 H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL) >= 0 &&
                 H5Dwrite(d[rec->item], H5T_NATIVE_UINT16, ms, fs, io->dxpl_ind, rec->lut) >= 0;
        char det[512] = "";
        if (!ok)
            hdf5_detail(det, sizeof det);
        if (fs >= 0)
            H5Sclose(fs);
        if (ms >= 0)
            H5Sclose(ms);
        if (!ok)
            return hq_fail(err, HQ_EIO, "%s:%s%s: cannot write the LUT of slice %llu%s", io->out_path, OWN_LUTS,
                           io->inv.items[rec->item].name, (unsigned long long)rec->slice, det);
    }
    return 0;
}

/* Scope image: every image's LUT, in /histeq_dist/lut/<dataset path>, (slices, nhist, bins) uint16:
 * lut[s, h, v] is the output level of input level v, histogram h, slice s. Each LUT is written by
 * the rank that recorded it. Collective. */
static int write_item_luts(hq_io *io, const hq_run_meta *m, hq_err *err)
{
    uint64_t bytes = 0;
    for (size_t i = 0; i < io->inv.n; i++) {
        hsize_t dims[3];
        lut_dims(io, m, i, dims);
        bytes += io->inv.items[i].bad ? 0 : dims[0] * dims[1] * dims[2] * sizeof(uint16_t);
    }
    int rc = agree(io->comm, reserve_more(io, bytes, OWN_LUTS, err), err);
    hid_t *d = NULL;
    if (!rc) {
        d = malloc((io->inv.n ? io->inv.n : 1) * sizeof *d);
        rc = agree(io->comm, d ? 0 : hq_fail(err, HQ_EMEM, "%s: out of memory", io->out_path), err);
    }
    if (rc) {
        free(d);
        return rc;
    }
    for (size_t i = 0; i < io->inv.n; i++)
        d[i] = H5I_INVALID_HID;
    rc = agree(io->comm, create_lut_datasets(io, m, d, err), err);
    if (!rc)
        rc = write_my_luts(io, m, d, err); /* independent: agreed below, after the collective closes */
    for (size_t i = 0; i < io->inv.n; i++)
        close_id(&d[i], H5Dclose);
    free(d);
    return agree(io->comm, rc, err);
}

/* Collective: every rank writes the same attributes with the same values. */
static int record_meta(hq_io *io, const hq_run_meta *m, hq_err *err)
{
    hid_t root = H5Gopen2(io->out_file, "/", H5P_DEFAULT);
    int ok = root >= 0 && write_string_attr(root, OWN_VERSION_ATTR, m->version) == 0 &&
             write_string_attr(root, "method", hq_method_name(m->method)) == 0 &&
             write_string_attr(root, "scope", hq_scope_name(m->scope)) == 0 &&
             write_string_attr(root, "color", hq_color_name(m->color)) == 0 &&
             write_u32_attr(root, "bits", m->bits) == 0 && write_string_attr(root, "source", io->inv.root) == 0 &&
             (!m->options || write_string_attr(root, "options", m->options) == 0) &&
             (!m->command_line || write_string_attr(root, "command_line", m->command_line) == 0);
    char det[512] = "";
    if (!ok)
        hdf5_detail(det, sizeof det);
    if (root >= 0)
        H5Gclose(root);
    int rc = ok ? 0 : hq_fail(err, HQ_EIO, "%s: cannot record the run's attributes%s", io->out_path, det);
    rc = agree(io->comm, rc, err);
    if (rc || collides_with_own_group(io))
        return rc;
    if (m->global_hist && m->global_nhist && m->global_bins)
        return write_global(io, m, err);
    if (m->scope != HQ_SCOPE_GLOBAL) /* image or dataset: a LUT per slice */
        return write_item_luts(io, m, err);
    return 0;
}

/* The last thing written: a reader (or --resume) can tell a finished file by it. Collective. */
static int mark_complete(hq_io *io, hq_err *err)
{
    hid_t root = H5Gopen2(io->out_file, "/", H5P_DEFAULT);
    int ok = root >= 0 && write_u32_attr(root, OWN_COMPLETE_ATTR, 1) == 0;
    if (root >= 0)
        H5Gclose(root);
    return agree(io->comm, ok ? 0 : hq_fail(err, HQ_EIO, "%s: cannot mark the output complete", io->out_path), err);
}

/* Closes the output's datasets and file; a failure here is a failed flush (disk full). */
static int close_output_ids(hq_io *io, hq_err *err)
{
    int rc = 0;
    char det[512];
    for (size_t i = 0; io->out_dset && i < io->inv.n; i++) {
        if (io->out_dset[i] >= 0 && H5Dclose(io->out_dset[i]) < 0 && !rc) {
            hdf5_detail(det, sizeof det);
            rc = hq_fail(err, HQ_EIO, "%s:%s: closing the dataset failed%s", io->out_path, io->inv.items[i].name, det);
        }
        io->out_dset[i] = H5I_INVALID_HID;
    }
    if (io->out_file >= 0 && H5Fclose(io->out_file) < 0 && !rc) {
        hdf5_detail(det, sizeof det);
        rc = hq_fail(err, HQ_EIO, "%s: closing the output failed%s", io->out_path, det);
    }
    io->out_file = H5I_INVALID_HID;
    return rc;
}

static int close_input_ids(hq_io *io, hq_err *err)
{
    for (size_t i = 0; i < io->inv.n; i++)
        close_id(&io->in_dset[i], H5Dclose);
    int rc = 0;
    if (io->in_file >= 0 && H5Fclose(io->in_file) < 0)
        rc = hq_fail(err, HQ_EIO, "%s: closing the input failed", io->inv.root);
    io->in_file = H5I_INVALID_HID;
    return rc;
}

/* Rank 0, after every rank closed: the file must open again and hold every dataset. Some MPI-IO
 * layers (Open MPI's OMPIO collective writes) have been seen to drop a failed write without
 * reporting it; this catches the worst of it (a lost superblock or object header) before the
 * file takes its final name. */
static int verify_output(hq_io *io, hq_err *err)
{
    hid_t f = H5Fopen(io->part_path, H5F_ACC_RDONLY, H5P_DEFAULT);
    int ok = f >= 0;
    for (size_t i = 0; ok && i < io->inv.n; i++) {
        H5O_info_t oi;
        if (!io->inv.items[i].bad)
            ok = H5Oget_info_by_name2(f, io->inv.items[i].name, &oi, H5O_INFO_BASIC, H5P_DEFAULT) >= 0 &&
                 oi.type == H5O_TYPE_DATASET;
    }
    char det[512] = "";
    if (!ok)
        hdf5_detail(det, sizeof det);
    if (f >= 0)
        H5Fclose(f);
    if (!ok)
        return hq_fail(err, HQ_EIO, "%s: the written file does not read back (disk full or I/O error?)%s",
                       io->out_path, det);
    return 0;
}

/* Rank 0 gives OUT.part its final name (replacing OUT atomically under --force) or removes it. */
static int finish_output(hq_io *io, int keep, hq_err *err)
{
    int rc = 0;
    if (io->rank == 0) {
        if (keep)
            release_reserve(io);
        if (keep && (rc = verify_output(io, err)) != 0)
            keep = 0;
        if (keep && rename(io->part_path, io->out_path) != 0) {
            rc = hq_fail(err, HQ_EIO, "%s: cannot rename %s to it (%s)", io->out_path, io->part_path, strerror(errno));
            keep = 0;
        }
        if (!keep)
            unlink(io->part_path);
    }
    return share_from_root(io->comm, rc, err);
}

static int hdf5_close(hq_io *io, int commit, const hq_run_meta *meta, hq_err *err)
{
    if (!io)
        return 0;
    quiet_hdf5();
    report_fallbacks(io);
    const int had_output = io->part_ours;
    int rc = 0, keep = 0;
    if (had_output) {
        if (commit && meta)
            rc = record_meta(io, meta, err);
        if (commit && !rc)
            rc = mark_complete(io, err);
        /* Whether the output is kept is settled before closing, as the two closes differ. */
        rc = agree(io->comm, rc, err);
        keep = commit && !rc;
        if (!keep)
            empty_output(io);
        hq_err e2;
        int rc2 = close_output_ids(io, rc ? &e2 : err);
        rc = rc ? rc : rc2;
    }
    {
        hq_err e3;
        int rc3 = close_input_ids(io, rc ? &e3 : err);
        rc = rc ? rc : rc3;
    }
    /* All ranks have closed (and so flushed) before anyone renames or removes the file. */
    rc = agree(io->comm, rc, err);
    if (had_output) {
        hq_err e4;
        int rc4 = finish_output(io, keep && !rc, rc ? &e4 : err);
        rc = rc ? rc : rc4;
    }
    free_io(io);
    return rc;
}

static int hdf5_flush(hq_io *io, int collective, hq_err *err)
{
    if (!io || io->out_file < 0 || (!collective && io->nranks > 1))
        return 0;
    if (H5Fflush(io->out_file, H5F_SCOPE_LOCAL) < 0) {
        char det[512];
        hdf5_detail(det, sizeof det);
        return hq_fail(err, HQ_EIO, "%s: cannot flush%s", io->out_path, det);
    }
    return 0;
}

/* The output takes its final name only once complete: OUT.part is unfinished, OUT finished. */
static int hdf5_output_state(const hq_inventory *inv, const char *out, int *partial, int *finished)
{
    (void)inv;
    struct stat st;
    char *part = part_name(out);
    *partial = part && stat(part, &st) == 0;
    *finished = stat(out, &st) == 0;
    free(part);
    return 1;
}

static const char *hdf5_sync_path(const hq_io *io)
{
    return io ? io->part_path : NULL;
}

const hq_io_ops hq_hdf5_ops = {
    .name = "hdf5",
    .scan = hdf5_scan,
    .open_input = hdf5_open_input,
    .read_block = hdf5_read_block,
    .create_output = hdf5_create_output,
    .write_block = hdf5_write_block,
    .close = hdf5_close,
    .flush = hdf5_flush,
    .output_state = hdf5_output_state,
    .sync_path = hdf5_sync_path,
};
