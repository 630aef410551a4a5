/* carry.c — what a whole-file input holds beside its images (strings, tables, 1-D axes, scalars,
 * and the groups that hold only such) copied unchanged into the output.
 *
 * Why: an archive's file keeps its metadata next to its images. The scan refused the whole file
 * for one string dataset (exit 4), and with --on-error skip the output went without it.
 *
 * Contract:
 *  - hdf5_image_kind(d): 1 when dataset d could be an image (an integer or float type, two
 *    dimensions or more). The whole-file scan takes such a dataset as an image (refused or skipped
 *    when it is not a supported one, as before) and leaves every other out of the inventory; a
 *    dataset named on the command line is judged as an image whatever it is.
 *  - hdf5_carry (rank 0 alone, serially, after every rank has closed OUT.part and before it is
 *    checked and renamed, as szip_masks.c; a whole-file input only): walks the input's links.
 *    Every hard link to a dataset that is not an item of the inventory (images, and the skipped
 *    ones, which stay out), under a path the output lacks, gets the dataset copied with H5Ocopy:
 *    type, shape, layout, filters and bytes as they are (values whose bytes lie in external raw
 *    files or a virtual dataset's sources are copied into a contiguous dataset of the output: a
 *    copy of the layout would name files the output cannot reach), and its attributes as output_layout.c
 *    copies an image's (hdf5_attr_cb: no references, none over 32 KiB). A group the output lacks
 *    is made, with its attributes; a further hard link to something copied here is made a hard
 *    link to the copy. Soft links are made at create (links.c); external links, named datatypes,
 *    datasets of references (they would point into the input; counted in *refs), variable-length
 *    data behind a filter this HDF5 lacks (H5Ocopy would run it; *unfiltered) and /histeq_dist
 *    (unless the input's own images lie there) are left out. A path the output
 *    already has is left as it is, so a close that a kill interrupted can run again on --resume.
 *    Counts what it copied in *copied; an error names the output and the dataset (HQ_EIO).
 *  - hdf5_carry_bytes (rank 0, at create): the storage what hdf5_carry will copy takes in the
 *    input, for the disk reservation (reserve.c), so that a disk too small for it is found before
 *    the work and not by H5Ocopy at close (where 1.10 crashed on ENOSPC).
 *  - hdf5_carry_check (the scan's child, hdf5_check_metadata): the same walk into a file in
 *    memory, datasets over CHECK_MAX bytes of storage left out unless their data is variable-length
 *    (the only data H5Ocopy decodes), so that metadata HDF5 cannot copy (or that crashes it) is
 *    found before any pixel moves: HQ_EINPUT naming the dataset. */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../core/samepath.h"
#include "hdf5_internal.h"

#define CHECK_MAX ((hsize_t)64 << 20)

/* copy_vlen_fill copies a partly written dataset chunk by chunk, a read and a write each. Its
 * written chunks come from the one-pass chunk table (chunk_index.c: v1 B-tree indexes, h5py's
 * default), or else listed by HDF5, which walks its index from the start for each (1.10.8,
 * dataset.c): a run over 4,096 written chunks of one string each took 2.7 s on the 2-core VM (the
 * scan's trial copy and the real one). Past this many HDF5 would list, the dataset is copied as
 * stored (H5Ocopy, its fill value as HDF5 copies it: the README says so). */
#define PARTIAL_CHUNKS_MAX ((hsize_t)1 << 12)

int hdf5_image_kind(hid_t d)
{
    const hid_t t = H5Dget_type(d), s = H5Dget_space(d);
    const H5T_class_t cls = t >= 0 ? H5Tget_class(t) : H5T_NO_CLASS;
    const int rank = s >= 0 ? H5Sget_simple_extent_ndims(s) : -1;
    if (t >= 0)
        H5Tclose(t);
    if (s >= 0)
        H5Sclose(s);
    H5Eclear2(H5E_DEFAULT);
    /* Unreadable type or space: an image's problem to report, not metadata to copy. */
    if (cls == H5T_NO_CLASS || rank < 0)
        return 1;
    return (cls == H5T_INTEGER || cls == H5T_FLOAT) && rank >= 2;
}

/* An object of the input by its address, and its path in the output. */
typedef struct addr_path {
    haddr_t addr;
    char *path; /* NULL: an item of the inventory, never copied */
    int used;
} addr_path;

typedef struct carry_walk {
    hid_t in, out;
    const char *in_name, *out_name; /* for messages */
    int mirror_own;                 /* links under /histeq_dist are the input's own, copied too */
    hsize_t max_storage;            /* datasets with more storage are not copied (the check); 0: all */
    int err_code;                   /* HQ_EIO at close, HQ_EINPUT in the check */
    int measure;                    /* only add up the storage of what would be copied (bytes) */
    const char *guard;              /* measure: a file to look for among the values' other files */
    int guard_hit;                  /* ... and one of them is it */
    uint64_t bytes;
    addr_path *known;               /* open addressing by address: a file can hold 10^5 images */
    size_t n, cap;
    hdf5_carry_counts counts;       /* what was copied and left out */
    int rc;
    hq_err *err;
} carry_walk;

static size_t slot_of(const carry_walk *w, haddr_t a)
{
    size_t h = (size_t)((uint64_t)a * 0x9E3779B97F4A7C15ull >> 17) & (w->cap - 1);
    while (w->known[h].used && w->known[h].addr != a)
        h = (h + 1) & (w->cap - 1);
    return h;
}

static addr_path *find(carry_walk *w, haddr_t a)
{
    if (!w->cap)
        return NULL;
    addr_path *k = &w->known[slot_of(w, a)];
    return k->used ? k : NULL;
}

static int remember(carry_walk *w, haddr_t a, const char *path)
{
    if (2 * (w->n + 1) > w->cap) {
        const size_t cap = w->cap ? 2 * w->cap : 1024;
        addr_path *old = w->known;
        const size_t old_cap = w->cap;
        if (!(w->known = calloc(cap, sizeof *w->known))) {
            w->known = old;
            return -1;
        }
        w->cap = cap;
        for (size_t i = 0; i < old_cap; i++)
            if (old[i].used)
                w->known[slot_of(w, old[i].addr)] = old[i];
        free(old);
    }
    addr_path *k = &w->known[slot_of(w, a)];
    if (k->used)
        return 0; /* an item listed twice */
    k->addr = a;
    k->path = path ? strdup(path) : NULL;
    if (path && !k->path)
        return -1;
    k->used = 1;
    w->n++;
    return 0;
}

/* Whether every group on the way to `path` and the link itself exist in f (H5Lexists needs its
 * parents to). */
static int path_exists(hid_t f, const char *path)
{
    char *p = strdup(path);
    if (!p)
        return -1;
    int yes = 1;
    for (char *s = strchr(p + 1, '/'); yes && s; s = strchr(s + 1, '/')) {
        *s = '\0';
        yes = H5Lexists(f, p, H5P_DEFAULT) > 0;
        *s = '/';
    }
    if (yes)
        yes = H5Lexists(f, p, H5P_DEFAULT) > 0;
    free(p);
    H5Eclear2(H5E_DEFAULT);
    return yes;
}

static int fail(carry_walk *w, const char *path, const char *what)
{
    char det[512];
    hdf5_detail(det, sizeof det);
    if (w->err_code == HQ_EINPUT)
        w->rc = hq_fail(w->err, HQ_EINPUT, "%s:%s: cannot copy it to the output (%s)%s", w->in_name, path, what, det);
    else
        w->rc = hq_fail(w->err, HQ_EIO, "%s:%s: cannot copy it from the input (%s)%s", w->out_name, path, what, det);
    return -1;
}

static int copy_attrs(carry_walk *w, const char *path)
{
    hid_t src = H5Oopen(w->in, path, H5P_DEFAULT), dst = H5Oopen(w->out, path, H5P_DEFAULT);
    int rc = src >= 0 && dst >= 0 ? 0 : fail(w, path, "opening it");
    /* In the check an attribute that will not copy is the input's problem: exit 4, not 1. */
    if (!rc && (w->rc = hdf5_copy_attrs(src, dst, w->out_name, path, NULL, w->err)) != 0) {
        if (w->err_code == HQ_EINPUT)
            w->rc = HQ_EINPUT;
        rc = -1;
    }
    hdf5_close_id(&src, H5Oclose);
    hdf5_close_id(&dst, H5Oclose);
    return rc;
}

/* What copy_dataset decides by, read through one open of the dataset. */
typedef struct dset_facts {
    hsize_t storage;
    int refs;    /* its type holds references: they would point into the input */
    int vlen;    /* variable-length data: H5Ocopy decodes its chunks to copy the heap objects they
                    point to, through every filter of the pipeline; other data is copied as stored */
    int missing; /* vlen, behind a filter not in this HDF5 (lzf, blosc...), where H5Ocopy crashed */
    int by_value; /* data in external raw files or a virtual dataset's sources: H5Ocopy would copy
                     the names of those files, which the output cannot reach (a relative name is
                     taken from the reader's working directory), so the values are copied instead */
    int virt;     /* a virtual dataset: one with a source that cannot be found is left out
                     (vds_lost), as external raw files that cannot be read are */
    int vlen_fill; /* variable-length data with a fill value of its own: HDF5 1.10's H5Ocopy copies
                      that fill value as stored, a global heap id of the input's, which in the
                      output names whatever object lies there (our provenance's version string,
                      seen), so copy_vlen_fill makes it again */
} dset_facts;

/* Whether dataset dname can be opened in file f. */
static int dataset_opens(hid_t f, const char *dname)
{
    hid_t d = H5Dopen2(f, dname, H5P_DEFAULT);
    const int ok = d >= 0;
    hdf5_close_id(&d, H5Dclose);
    return ok;
}

/* Where beside the input file in HDF5 1.10 also looks for a file the dataset's values lie in, when
 * not found as named: a relative name from the input's directory; an absolute one by its last
 * component there, for a virtual dataset's source only (the copy's ${ORIGIN} prefix for external
 * raw files leaves absolute names alone). 0 with the path in buf, -1 where there is no such place. */
static int beside_input(hid_t in, const char *name, int virtual_source, char *buf, size_t len)
{
    char file[PATH_MAX], dir[PATH_MAX];
    const ssize_t fl = H5Fget_name(in, file, sizeof file);
    if (fl <= 0 || (size_t)fl >= sizeof file || hq_dir_of(file, dir, sizeof dir) != 0 ||
        (name[0] == '/' && !virtual_source))
        return -1;
    unsigned long bn;
    const char *base = hq_base_of(name, &bn);
    const int n = snprintf(buf, len, "%s/%.*s", dir, (int)(name[0] == '/' ? bn : strlen(name)),
                           name[0] == '/' ? base : name);
    return n > 0 && (size_t)n < len ? 0 : -1;
}

/* Whether a source of virtual dataset (dcpl) is missing: its file nowhere HDF5 looks for it (as
 * named, from the working directory when relative, or beside the input file, what HDF5 1.10 also
 * tries), not an HDF5 file, or without the source dataset. HDF5 reads a missing source as fill
 * values without an error, and a copy by value would then hold those in place of the data. Names
 * with printf patterns, and runs that set HDF5_VDS_PREFIX, are taken as found: HDF5 resolves those
 * by rules of its own. */
static int vds_source_missing(hid_t in, hid_t dcpl)
{
    size_t n = 0;
    if (H5Pget_virtual_count(dcpl, &n) < 0 || getenv("HDF5_VDS_PREFIX"))
        return 0;
    char name[PATH_MAX], dname[PATH_MAX], beside[2 * PATH_MAX + 2];
    int missing = 0;
    for (size_t i = 0; i < n && !missing; i++) {
        const ssize_t l = H5Pget_virtual_filename(dcpl, i, name, sizeof name);
        const ssize_t dl = H5Pget_virtual_dsetname(dcpl, i, dname, sizeof dname);
        if (l <= 0 || (size_t)l >= sizeof name || dl <= 0 || (size_t)dl >= sizeof dname || strchr(name, '%') ||
            strchr(dname, '%'))
            continue;
        if (strcmp(name, ".") == 0) {
            missing = !dataset_opens(in, dname);
            continue;
        }
        const int near = beside_input(in, name, 1, beside, sizeof beside) == 0;
        const char *found = access(name, R_OK) == 0 ? name : near && access(beside, R_OK) == 0 ? beside : NULL;
        hid_t f = found ? H5Fopen(found, H5F_ACC_RDONLY, H5P_DEFAULT) : H5I_INVALID_HID;
        missing = f < 0 || !dataset_opens(f, dname);
        hdf5_close_id(&f, H5Fclose);
    }
    H5Eclear2(H5E_DEFAULT);
    return missing;
}

/* Whether one of the files the values of dataset path lie in (external raw files, a virtual
 * dataset's source files) is file: as named (from the working directory when relative), or beside
 * the input (beside_input), the places vds_source_missing and the copy look. */
static int reads_file(hid_t in, const char *path, const char *file)
{
    hid_t d = H5Dopen2(in, path, H5P_DEFAULT);
    hid_t dcpl = d >= 0 ? H5Dget_create_plist(d) : H5I_INVALID_HID;
    char name[PATH_MAX], beside[2 * PATH_MAX + 2];
    const int nx = dcpl >= 0 ? H5Pget_external_count(dcpl) : 0;
    const size_t ext = nx > 0 ? (size_t)nx : 0;
    size_t nv = 0;
    if (dcpl >= 0 && H5Pget_layout(dcpl) == H5D_VIRTUAL && H5Pget_virtual_count(dcpl, &nv) < 0)
        nv = 0;
    int hit = 0;
    for (size_t i = 0; i < ext + nv && !hit; i++) {
        off_t off;
        hsize_t size;
        const ssize_t l = i < ext ? (H5Pget_external(dcpl, (unsigned)i, sizeof name, name, &off, &size) < 0 ? -1
                                                                                                        : (ssize_t)strlen(name))
                                  : H5Pget_virtual_filename(dcpl, i - ext, name, sizeof name);
        if (l <= 0 || (size_t)l >= sizeof name || strcmp(name, ".") == 0)
            continue;
        hit = hq_same_path(name, file) ||
              (beside_input(in, name, i >= ext, beside, sizeof beside) == 0 && hq_same_path(beside, file));
    }
    hdf5_close_id(&dcpl, H5Pclose);
    hdf5_close_id(&d, H5Dclose);
    H5Eclear2(H5E_DEFAULT);
    return hit;
}

/* vds_source_missing for the virtual dataset at path. */
static int vds_lost(hid_t in, const char *path)
{
    hid_t d = H5Dopen2(in, path, H5P_DEFAULT);
    hid_t dcpl = d >= 0 ? H5Dget_create_plist(d) : H5I_INVALID_HID;
    const int lost = dcpl >= 0 && vds_source_missing(in, dcpl);
    hdf5_close_id(&dcpl, H5Pclose);
    hdf5_close_id(&d, H5Dclose);
    return lost;
}

static void dataset_facts(hid_t in, const char *path, dset_facts *f)
{
    memset(f, 0, sizeof *f);
    hid_t d = H5Dopen2(in, path, H5P_DEFAULT);
    hid_t t = d >= 0 ? H5Dget_type(d) : H5I_INVALID_HID;
    hid_t dcpl = d >= 0 ? H5Dget_create_plist(d) : H5I_INVALID_HID;
    f->storage = d >= 0 ? H5Dget_storage_size(d) : 0;
    f->refs = t >= 0 && H5Tdetect_class(t, H5T_REFERENCE) > 0;
    f->vlen = t >= 0 && hdf5_holds_vlen(t);
    H5D_fill_value_t fv = H5D_FILL_VALUE_UNDEFINED;
    const int vlen_fill = f->vlen && dcpl >= 0 && H5Pfill_value_defined(dcpl, &fv) >= 0 &&
                          fv == H5D_FILL_VALUE_USER_DEFINED;
    const int elsewhere = dcpl >= 0 && (H5Pget_external_count(dcpl) > 0 || H5Pget_layout(dcpl) == H5D_VIRTUAL);
    f->by_value = elsewhere;
    f->vlen_fill = vlen_fill;
    f->virt = dcpl >= 0 && H5Pget_layout(dcpl) == H5D_VIRTUAL;
    if (elsewhere) { /* their storage in this file is none: the values' size counts */
        hid_t s = H5Dget_space(d);
        const hssize_t n = s >= 0 ? H5Sget_simple_extent_npoints(s) : 0;
        f->storage = n > 0 && t >= 0 ? (hsize_t)n * H5Tget_size(t) : 0;
        hdf5_close_id(&s, H5Sclose);
    }
    const int nf = f->vlen && dcpl >= 0 ? H5Pget_nfilters(dcpl) : 0;
    for (int k = 0; k < nf; k++) {
        unsigned flags = 0, cd[16];
        size_t ncd = 16;
        const H5Z_filter_t z = H5Pget_filter2(dcpl, (unsigned)k, &flags, &ncd, cd, 0, NULL, NULL);
        if (z < 0 || H5Zfilter_avail(z) <= 0)
            f->missing = 1;
    }
    hdf5_close_id(&dcpl, H5Pclose);
    hdf5_close_id(&t, H5Tclose);
    hdf5_close_id(&d, H5Dclose);
    H5Eclear2(H5E_DEFAULT);
}

/* The box [start, start + count) of d, read in type t and written at the same place of o (s: d's
 * space, o's shape too; ndims 0 for a scalar): 0, -1 (out of memory, or the write failed), -2 (the
 * read failed). */
static int copy_region(hid_t d, hid_t o, hid_t t, hid_t s, int ndims, const hsize_t *start, const hsize_t *count)
{
    hid_t ms = H5I_INVALID_HID;
    if (ndims > 0 && (H5Sselect_hyperslab(s, H5S_SELECT_SET, start, NULL, count, NULL) < 0 ||
                      (ms = H5Screate_simple(ndims, count, NULL)) < 0))
        return -1;
    const hssize_t n = ndims > 0 ? H5Sget_select_npoints(s) : 1;
    void *buf = calloc(n > 0 ? (size_t)n : 1, H5Tget_size(t));
    const hid_t mspace = ndims > 0 ? ms : H5S_ALL, fspace = ndims > 0 ? s : H5S_ALL;
    /* A conversion buffer of 64 KiB, not HDF5's 1 MiB: that one is allocated (and, past malloc's
     * mmap threshold, faulted in page by page) on every call, and a dataset copied a chunk at a time
     * spent 17 s of a 1,024-chunk copy there (perf: memset, page faults). */
    const size_t conv = (size_t)64 << 10 > 4 * H5Tget_size(t) ? (size_t)64 << 10 : 4 * H5Tget_size(t);
    hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
    if (dxpl >= 0 && H5Pset_buffer(dxpl, conv, NULL, NULL) < 0)
        hdf5_close_id(&dxpl, H5Pclose);
    const hid_t x = dxpl >= 0 ? dxpl : H5P_DEFAULT;
    const int read = buf && H5Dread(d, t, mspace, fspace, x, buf) >= 0;
    int rc = !read ? (buf ? -2 : -1) : H5Dwrite(o, t, mspace, fspace, x, buf) >= 0 ? 0 : -1;
    if (read && hdf5_holds_vlen(t))
        H5Dvlen_reclaim(t, ndims > 0 ? ms : s, H5P_DEFAULT, buf);
    free(buf);
    hdf5_close_id(&dxpl, H5Pclose);
    hdf5_close_id(&ms, H5Sclose);
    return rc;
}

/* Rows of d from `row` on, at most `rows` of them (copy_region's codes). */
static int copy_rows(hid_t d, hid_t o, hid_t t, hid_t s, int ndims, hsize_t row, hsize_t rows)
{
    hsize_t count[H5S_MAX_RANK], start[H5S_MAX_RANK] = {0};
    if (ndims > 0) {
        H5Sget_simple_extent_dims(s, count, NULL);
        if (rows > count[0] - row)
            rows = count[0] - row;
        start[0] = row;
        count[0] = rows;
    }
    return copy_region(d, o, t, s, ndims, start, count);
}

/* Every value of d into o, 64 MiB of rows at a time (copy_region's codes); dims: d's extent. */
static int copy_all_rows(hid_t d, hid_t o, hid_t t, hid_t s, int ndims, const hsize_t *dims)
{
    const hsize_t total = ndims > 0 ? dims[0] : 1;
    const hssize_t n = H5Sget_simple_extent_npoints(s);
    const uint64_t row_bytes = ndims > 0 && dims[0] ? (uint64_t)n / dims[0] * H5Tget_size(t) : 1;
    hsize_t rows = row_bytes ? ((uint64_t)64 << 20) / row_bytes : 1;
    rows = rows ? rows : 1;
    int rc = 0;
    for (hsize_t r = 0; !rc && r < total; r += rows)
        rc = copy_rows(d, o, t, s, ndims, r, rows);
    return rc;
}

/* A copy made at path that is not kept, removed from the output: 0, or fail()'s -1. */
static int take_back(carry_walk *w, const char *path)
{
    H5Eclear2(H5E_DEFAULT);
    return H5Ldelete(w->out, path, H5P_DEFAULT) < 0 ? fail(w, path, "taking back a copy it could not fill") : 0;
}

/* The output dataset for copy_values: the input's type and shape, fixed at its size (contiguous
 * storage takes no unlimited dimension), and its fill value where the input sets one. */
static hid_t create_like(carry_walk *w, const char *path, hid_t d, hid_t mt, hid_t s)
{
    hid_t sp = H5Scopy(s), dcpl = H5Pcreate(H5P_DATASET_CREATE), in_dcpl = H5Dget_create_plist(d);
    hsize_t dims[H5S_MAX_RANK];
    const int ndims = sp >= 0 ? H5Sget_simple_extent_ndims(sp) : -1;
    if (ndims > 0 && (H5Sget_simple_extent_dims(sp, dims, NULL) < 0 || H5Sset_extent_simple(sp, ndims, dims, dims) < 0))
        hdf5_close_id(&sp, H5Sclose);
    H5D_fill_value_t fv = H5D_FILL_VALUE_UNDEFINED;
    void *fill = calloc(1, H5Tget_size(mt));
    if (in_dcpl >= 0 && dcpl >= 0 && fill && H5Pfill_value_defined(in_dcpl, &fv) >= 0 &&
        fv == H5D_FILL_VALUE_USER_DEFINED && H5Pget_fill_value(in_dcpl, mt, fill) >= 0) {
        /* A variable-length value is read into memory the library allocated (taken back below),
         * and set from there: H5Dcreate2 then stores it in the output's own heap. */
        H5Pset_fill_value(dcpl, mt, fill);
        if (hdf5_holds_vlen(mt)) {
            hid_t one = H5Screate(H5S_SCALAR);
            if (one >= 0)
                H5Dvlen_reclaim(mt, one, H5P_DEFAULT, fill);
            hdf5_close_id(&one, H5Sclose);
        }
    }
    free(fill);
    hid_t o = sp >= 0 && dcpl >= 0 ? H5Dcreate2(w->out, path, mt, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT)
                                    : H5I_INVALID_HID;
    hdf5_close_id(&in_dcpl, H5Pclose);
    hdf5_close_id(&dcpl, H5Pclose);
    hdf5_close_id(&sp, H5Sclose);
    return o;
}

/* A dataset's values into a new contiguous dataset at the same path, 64 MiB of rows at a time:
 * 0 copied, 1 left out (its values cannot be read: a raw file missing), -1 failed. HDF5 reads a
 * relative external file name from the working directory; failing that, it is looked for beside
 * the input file, where the file's maker most likely put it. */
static int copy_values(carry_walk *w, const char *path)
{
    hid_t d = H5Dopen2(w->in, path, H5P_DEFAULT);
    hid_t t = d >= 0 ? H5Dget_type(d) : H5I_INVALID_HID, s = d >= 0 ? H5Dget_space(d) : H5I_INVALID_HID;
    hid_t mt = t >= 0 ? H5Tcopy(t) : H5I_INVALID_HID; /* transient, should the input name its type */
    hid_t o = mt >= 0 && s >= 0 ? create_like(w, path, d, mt, s) : H5I_INVALID_HID;
    int rc = o >= 0 ? 0 : -1;
    const int ndims = s >= 0 ? H5Sget_simple_extent_ndims(s) : -1;
    const int empty = s >= 0 && H5Sget_simple_extent_type(s) == H5S_NULL;
    hsize_t dims[H5S_MAX_RANK];
    if (!rc && !empty && ndims >= 0) {
        if (ndims > 0)
            H5Sget_simple_extent_dims(s, dims, NULL);
        for (int tries = 0; tries < 2; tries++) {
            rc = copy_all_rows(d, o, mt, s, ndims, dims);
            if (!rc || tries)
                break;
            /* Closed first: a dataset open twice shares the first open's prefix. */
            hdf5_close_id(&d, H5Dclose);
            hid_t dapl = H5Pcreate(H5P_DATASET_ACCESS);
            if (dapl >= 0 && H5Pset_efile_prefix(dapl, "${ORIGIN}") >= 0)
                d = H5Dopen2(w->in, path, dapl);
            hdf5_close_id(&dapl, H5Pclose);
            if (d < 0)
                break;
        }
    } else if (ndims < 0)
        rc = -1;
    hdf5_close_id(&o, H5Dclose);
    hdf5_close_id(&mt, H5Tclose);
    hdf5_close_id(&s, H5Sclose);
    hdf5_close_id(&t, H5Tclose);
    hdf5_close_id(&d, H5Dclose);
    if (rc == -2) { /* the input's own problem, as a dangling link is: the rest goes on */
        if (take_back(w, path))
            return -1;
        w->counts.unreadable++;
        return 1;
    }
    return rc ? fail(w, path, "its values, which lie in other files") : 0;
}

/* The box of the chunk that starts at start, cut at the extent dims: 0 when nothing of it shows
 * (a chunk past a shrunk extent). */
static int chunk_box(int ndims, const hsize_t *dims, const hsize_t *cdims, const hsize_t *start, hsize_t *count)
{
    int inside = 1;
    for (int k = 0; k < ndims; k++) {
        count[k] = start[k] >= dims[k] ? 0 : dims[k] - start[k] < cdims[k] ? dims[k] - start[k] : cdims[k];
        inside &= count[k] > 0;
    }
    return inside;
}

/* The written chunks of d (nchunks of them) into o, listed by HDF5 one by one (copy_region's codes). */
static int copy_listed_chunks(hid_t d, hid_t o, hid_t t, hid_t s, hid_t all, int ndims, const hsize_t *dims,
                              const hsize_t *cdims, hsize_t nchunks)
{
    hsize_t start[H5S_MAX_RANK], count[H5S_MAX_RANK];
    int rc = 0;
    for (hsize_t i = 0; !rc && i < nchunks; i++) {
        unsigned mask;
        haddr_t addr;
        hsize_t size;
        if (H5Dget_chunk_info(d, all, i, start, &mask, &addr, &size) < 0)
            return -2;
        if (chunk_box(ndims, dims, cdims, start, count))
            rc = copy_region(d, o, t, s, ndims, start, count);
    }
    return rc;
}

/* The same from the chunk table of the input file in_name: 2 when there is none for d (the
 * caller lists or copies as stored), else copy_region's codes. */
static int copy_table_chunks(const char *in_name, hid_t d, hid_t o, hid_t t, hid_t s, int ndims,
                             const hsize_t *dims, const hsize_t *cdims)
{
    const int fd = open(in_name, O_RDONLY | O_CLOEXEC);
    hdf5_chunk_table *tab = fd >= 0 ? hdf5_chunk_table_read(d, fd) : NULL;
    if (fd >= 0)
        close(fd);
    if (!tab)
        return 2;
    const uint64_t n = hdf5_chunk_table_chunks(tab);
    hsize_t start[H5S_MAX_RANK], count[H5S_MAX_RANK];
    uint64_t grid[H5S_MAX_RANK];
    for (int k = 0; k < ndims; k++)
        grid[k] = (dims[k] + cdims[k] - 1) / cdims[k];
    int rc = 0;
    for (uint64_t c = 0; !rc && c < n; c++) {
        hdf5_chunk_offset(c, ndims, grid, cdims, start);
        unsigned mask;
        haddr_t addr = HADDR_UNDEF;
        hsize_t size;
        if (hdf5_chunk_table_get(tab, start, &mask, &addr, &size) == 0 && addr != HADDR_UNDEF &&
            chunk_box(ndims, dims, cdims, start, count))
            rc = copy_region(d, o, t, s, ndims, start, count);
    }
    hdf5_chunk_table_free(tab);
    return rc;
}

/* The dataset as stored, attributes apart (H5Ocopy would carry references into the input's address
 * space): 0, or -1 failed. */
static int copy_object(carry_walk *w, const char *path)
{
    hid_t ocpy = H5Pcreate(H5P_OBJECT_COPY);
    const int rc = ocpy >= 0 && H5Pset_copy_object(ocpy, H5O_COPY_WITHOUT_ATTR_FLAG) >= 0 &&
                           H5Ocopy(w->in, path, w->out, path, ocpy, H5P_DEFAULT) >= 0
                       ? 0
                       : fail(w, path, "the data");
    hdf5_close_id(&ocpy, H5Pclose);
    return rc;
}

/* Variable-length data with a fill value of its own (dset_facts.vlen_fill), made again in the
 * output with the input's creation properties, whose fill value HDF5 hands over in memory and
 * stores in the output's own heap; then its values: every written chunk's box (an unwritten one
 * stays unwritten, as in the input: HDF5 1.10 reads one only from a file open for writing), or
 * all of them, 64 MiB of rows at a time, when not chunked. 0, 1 left out (a written chunk cannot
 * be read: the input's problem), -1 failed. */
static int copy_vlen_fill(carry_walk *w, const char *path)
{
    hid_t d = H5Dopen2(w->in, path, H5P_DEFAULT);
    hid_t t = d >= 0 ? H5Dget_type(d) : H5I_INVALID_HID, s = d >= 0 ? H5Dget_space(d) : H5I_INVALID_HID;
    hid_t dcpl = d >= 0 ? H5Dget_create_plist(d) : H5I_INVALID_HID;
    hid_t mt = t >= 0 ? H5Tcopy(t) : H5I_INVALID_HID; /* transient, should the input name its type */
    hid_t o = mt >= 0 && s >= 0 && dcpl >= 0 ? H5Dcreate2(w->out, path, mt, s, H5P_DEFAULT, dcpl, H5P_DEFAULT)
                                               : H5I_INVALID_HID;
    int rc = o >= 0 ? 0 : -1;
    const int ndims = s >= 0 ? H5Sget_simple_extent_ndims(s) : -1;
    hsize_t dims[H5S_MAX_RANK], cdims[H5S_MAX_RANK];
    if (!rc && (ndims < 0 || (ndims > 0 && H5Sget_simple_extent_dims(s, dims, NULL) < 0)))
        rc = -1;
    if (rc || H5Sget_simple_extent_type(s) == H5S_NULL) {
        /* nothing to copy, or a failure already */
    } else if (ndims > 0 && H5Pget_layout(dcpl) == H5D_CHUNKED) {
        hsize_t nchunks = 0, grid = 1;
        hid_t all = H5Dget_space(d); /* 1.10.8 takes no H5S_ALL here */
        if (all < 0 || H5Pget_chunk(dcpl, ndims, cdims) != ndims || H5Dget_num_chunks(d, all, &nchunks) < 0)
            rc = -2;
        for (int k = 0; !rc && k < ndims; k++)
            grid *= cdims[k] ? (dims[k] + cdims[k] - 1) / cdims[k] : 1;
        if (!rc && nchunks == grid) /* every chunk written: all the values, in rows */
            rc = copy_all_rows(d, o, mt, s, ndims, dims);
        else if (!rc)
            rc = copy_table_chunks(w->in_name, d, o, mt, s, ndims, dims, cdims);
        if (rc == 2 && nchunks <= PARTIAL_CHUNKS_MAX)
            rc = copy_listed_chunks(d, o, mt, s, all, ndims, dims, cdims, nchunks);
        hdf5_close_id(&all, H5Sclose);
    } else {
        rc = copy_all_rows(d, o, mt, s, ndims, dims);
    }
    hdf5_close_id(&o, H5Dclose);
    hdf5_close_id(&mt, H5Tclose);
    hdf5_close_id(&dcpl, H5Pclose);
    hdf5_close_id(&s, H5Sclose);
    hdf5_close_id(&t, H5Tclose);
    hdf5_close_id(&d, H5Dclose);
    if (rc == 2) /* too many chunks to list one by one: as stored, as before */
        return take_back(w, path) ? -1 : copy_object(w, path);
    if (rc == -2) { /* the input's own problem: the rest goes on */
        if (take_back(w, path))
            return -1;
        w->counts.unreadable++;
        return 1;
    }
    return rc ? fail(w, path, "its values") : 0;
}

/* 0 copied, 1 left out (its further names too), -1 failed. */
static int copy_dataset(carry_walk *w, const char *path)
{
    dset_facts f;
    dataset_facts(w->in, path, &f);
    if (w->measure) {
        w->bytes += f.storage;
        if (w->guard && f.by_value && !w->guard_hit)
            w->guard_hit = reads_file(w->in, path, w->guard);
        return 1;
    }
    if (f.refs) {
        w->counts.refs++;
        return 1;
    }
    if (f.missing) {
        w->counts.unfiltered++;
        return 1;
    }
    if (f.virt && vds_lost(w->in, path)) { /* here, not in every walk: it opens the source files */
        w->counts.unreadable++;
        return 1;
    }
    /* The scan's trial copies what H5Ocopy decodes whatever its size: a damaged chunk there would
     * crash the close after all the work, and the trial's child takes the crash instead. */
    if (w->max_storage && !f.vlen && f.storage > w->max_storage)
        return 1;
    int rc = f.by_value ? copy_values(w, path) : f.vlen_fill ? copy_vlen_fill(w, path) : copy_object(w, path);
    if (rc)
        return rc; /* 1: left out */
    rc = copy_attrs(w, path);
    if (!rc)
        w->counts.copied++;
    return rc;
}

static int make_group(carry_walk *w, const char *path)
{
    hid_t g = H5Gcreate2(w->out, path, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (g < 0)
        return fail(w, path, "making the group");
    H5Gclose(g);
    return copy_attrs(w, path);
}

static herr_t visit_link(hid_t g, const char *name, const H5L_info_t *li, void *data)
{
    (void)g;
    carry_walk *w = data;
    const size_t len = strlen(name) + 2;
    char *path = malloc(len);
    if (!path) {
        w->rc = hq_fail(w->err, HQ_EMEM, "%s: out of memory", w->out_name);
        return -1;
    }
    snprintf(path, len, "/%s", name);
    int rc = 0;
    H5O_info_t oi;
    if (li->type != H5L_TYPE_HARD || (hdf5_under_own_group(path) && !w->mirror_own))
        goto done;
    /* An image (or a skipped one) under this or a further name (links.c's), or what was left out
     * here: known by the link's own address, before any lookup in either file (a file of 20,000
     * images made two lookups a link, on each of the three walks). */
    const addr_path *k = find(w, li->u.address);
    if (k && !k->path)
        goto done;
    const int have = w->measure ? 0 : path_exists(w->out, path);
    if (have < 0) {
        rc = -1;
        w->rc = hq_fail(w->err, HQ_EMEM, "%s: out of memory", w->out_name);
        goto done;
    }
    if (have)
        goto done;
    if (H5Oget_info_by_name2(w->in, path, &oi, H5O_INFO_BASIC, H5P_DEFAULT) < 0) {
        rc = fail(w, path, "reading what it is");
        goto done;
    }
    if (oi.type != H5O_TYPE_DATASET && oi.type != H5O_TYPE_GROUP)
        goto done; /* a named datatype */
    if (k) {
        if (H5Lcreate_hard(w->out, k->path, w->out, path, H5P_DEFAULT, H5P_DEFAULT) < 0)
            rc = fail(w, path, "linking it");
        goto done;
    }
    rc = oi.type == H5O_TYPE_DATASET ? copy_dataset(w, path) : w->measure ? 1 : make_group(w, path);
    if (rc >= 0 && remember(w, oi.addr, rc ? NULL : path)) {
        rc = -1;
        w->rc = hq_fail(w->err, HQ_EMEM, "%s: out of memory", w->out_name);
    }
done:
    free(path);
    H5Eclear2(H5E_DEFAULT);
    return rc < 0 ? -1 : 0;
}

/* The walk itself: the items are known by address first, so that none of them is copied. */
static int walk(carry_walk *w, const hq_inventory *inv)
{
    for (size_t i = 0; i < inv->n && !w->rc; i++) {
        H5O_info_t oi = {.addr = (haddr_t)inv->items[i].object}; /* the scan's, where it has one */
        if ((oi.addr || H5Oget_info_by_name2(w->in, inv->items[i].name, &oi, H5O_INFO_BASIC, H5P_DEFAULT) >= 0) &&
            remember(w, oi.addr, NULL))
            w->rc = hq_fail(w->err, HQ_EMEM, "%s: out of memory", w->out_name);
        H5Eclear2(H5E_DEFAULT);
    }
    /* Native order: HDF5 1.10 sorting a damaged dense group's links frees garbage (scan_file.c). */
    if (!w->rc && H5Lvisit(w->in, H5_INDEX_NAME, H5_ITER_NATIVE, visit_link, w) < 0 && !w->rc)
        fail(w, "/", "listing its links");
    for (size_t i = 0; i < w->cap; i++)
        free(w->known[i].path);
    free(w->known);
    return w->rc;
}

int hdf5_carry(hq_io *io, hdf5_carry_counts *n, hq_err *err)
{
    memset(n, 0, sizeof *n);
    if (io->inv.one_dataset)
        return 0;
    hid_t in = H5Fopen(io->inv.root, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t out = in >= 0 ? H5Fopen(io->part_path, H5F_ACC_RDWR, H5P_DEFAULT) : H5I_INVALID_HID;
    carry_walk w = {.in = in, .out = out, .in_name = io->inv.root, .out_name = io->out_path,
                    .mirror_own = hdf5_collides_with_own_group(io), .err_code = HQ_EIO, .err = err};
    int rc = in >= 0 && out >= 0 ? walk(&w, &io->inv) : fail(&w, "/", "opening the files");
    *n = w.counts;
    hdf5_close_id(&in, H5Fclose);
    if (out >= 0 && H5Fclose(out) < 0 && !rc)
        rc = fail(&w, "/", "closing the output");
    H5Eclear2(H5E_DEFAULT);
    return rc;
}

uint64_t hdf5_carry_bytes(hq_io *io)
{
    if (io->inv.one_dataset)
        return 0;
    /* A file of its own, as hdf5_carry's: opening a virtual dataset through the MPI-IO file dups
     * its communicator, which rank 0 alone would wait in for ever. */
    hid_t in = H5Fopen(io->inv.root, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (in < 0) {
        H5Eclear2(H5E_DEFAULT);
        return 0;
    }
    hq_err scratch;
    carry_walk w = {.in = in, .out = H5I_INVALID_HID, .in_name = io->inv.root, .out_name = io->out_path,
                    .mirror_own = hdf5_collides_with_own_group(io), .err_code = HQ_EIO, .measure = 1, .err = &scratch};
    walk(&w, &io->inv);
    hdf5_close_id(&in, H5Fclose);
    return w.bytes;
}

int hdf5_carry_reads_file(const hq_inventory *inv, const char *file)
{
    if (inv->one_dataset)
        return 0;
    hid_t in = H5Fopen(inv->root, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (in < 0) {
        H5Eclear2(H5E_DEFAULT);
        return 0;
    }
    hq_err scratch;
    carry_walk w = {.in = in, .out = H5I_INVALID_HID, .in_name = inv->root, .out_name = file,
                    .mirror_own = hdf5_inv_collides_with_own_group(inv), .err_code = HQ_EIO, .measure = 1,
                    .guard = file, .err = &scratch};
    walk(&w, inv);
    hdf5_close_id(&in, H5Fclose);
    return w.guard_hit;
}

int hdf5_carry_check(hid_t in, const hq_inventory *inv, hq_err *err)
{
    if (inv->one_dataset)
        return 0;
    /* A file in memory only: nothing reaches a disk. */
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    hid_t out = fapl >= 0 && H5Pset_fapl_core(fapl, (size_t)1 << 20, 0) >= 0
                    ? H5Fcreate("histeq_dist-carry-check", H5F_ACC_TRUNC, H5P_DEFAULT, fapl)
                    : H5I_INVALID_HID;
    hdf5_close_id(&fapl, H5Pclose);
    carry_walk w = {.in = in, .out = out, .in_name = inv->root, .out_name = inv->root,
                    .mirror_own = hdf5_inv_collides_with_own_group(inv),
                    .max_storage = CHECK_MAX, .err_code = HQ_EINPUT, .err = err};
    int rc = out >= 0 ? walk(&w, inv) : 0; /* no file in memory: the close finds out */
    hdf5_close_id(&out, H5Fclose);
    H5Eclear2(H5E_DEFAULT);
    return rc;
}
