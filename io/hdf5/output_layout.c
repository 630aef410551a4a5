/* output_layout.c — an output dataset laid out like its input: the input's chunk shape and filter
 * pipeline (a mandatory filter we cannot encode with is an error, an optional one is dropped;
 * scale-offset sizes itself), allocation at creation unless filtered, and the input's plain
 * attributes (numbers and strings of modest size) copied through hdf5_attr_cb. */
#include <stdio.h>
#include <stdlib.h>

#include "hdf5_internal.h"
#define ATTR_COPY_MAX 32768 /* larger attributes would need the dense attribute storage of newer formats */

/* Copies the input's filter pipeline; a mandatory filter we cannot encode with is an error, an
 * optional one is dropped (HDF5 would skip it on failure anyway). */
static int copy_filters(hid_t in_dcpl, hid_t out_dcpl, int is_float, const char *out, const char *name, hq_err *err)
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
        /* Scale-offset on floats keeps a fixed number of decimals: lossy, and fitted to the input's
         * range, not to [0, 1]. Float outputs go without it. */
        if (f == H5Z_FILTER_SCALEOFFSET && is_float)
            continue;
        if (f == H5Z_FILTER_SCALEOFFSET) {
            if (H5Pset_scaleoffset(out_dcpl, H5Z_SO_INT, H5Z_SO_INT_MINBITS_DEFAULT) < 0)
                return hq_fail(err, HQ_EIO, "%s:%s: cannot set the scale-offset filter", out, name);
            continue;
        }
        if (!can || H5Pset_filter(out_dcpl, f, flags, ncd, cd) < 0)
            return hq_fail(err, HQ_EIO, "%s:%s: cannot compress with filter %d (%s) like the input", out, name, (int)f,
                           hdf5_filter_label(f));
    }
    return 0;
}

/* The output's creation properties: the input's chunks and filters, nothing else of its layout
 * (compact, external or virtual storage become contiguous). Space is allocated at creation, as
 * independent parallel writes need, except with filters, where chunks are sized as written. */
int hdf5_output_dcpl(hid_t in, int frank, const char *out, const char *name, hid_t *dcpl_out, hq_err *err)
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
        const hid_t t = H5Dget_type(in);
        const int is_float = t >= 0 && H5Tget_class(t) == H5T_FLOAT;
        if (t >= 0)
            H5Tclose(t);
        rc = copy_filters(in_dcpl, dcpl, is_float, out, name, err);
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

enum { ATTR_OK, ATTR_REFS, ATTR_BIG };

/* Any type without references (they would point into the input), numbers, strings, compounds,
 * enums and arrays alike, of modest size, scalar, simple or empty: ATTR_OK, or why not; the
 * decision depends only on the input, so every rank makes the same one. */
static int attr_copyable(hid_t t, hid_t s)
{
    const H5S_class_t sc = H5Sget_simple_extent_type(s);
    if (H5Tdetect_class(t, H5T_REFERENCE) != 0 || (sc != H5S_SCALAR && sc != H5S_SIMPLE && sc != H5S_NULL))
        return ATTR_REFS;
    const hssize_t n = sc == H5S_NULL ? 0 : H5Sget_simple_extent_npoints(s);
    const size_t elem = H5Tget_size(t);
    return n >= 0 && elem > 0 && (uint64_t)n * elem <= ATTR_COPY_MAX ? ATTR_OK : ATTR_BIG;
}

/* Attributes left out of this process's copies so far (the HDF5 thread's alone), for close.c's
 * note: a user's calibration table of 36 KB went missing without a word. */
static uint64_t left_out[3];
static int count_only; /* hdf5_attrs_count_only */

void hdf5_attrs_left_out(uint64_t *refs, uint64_t *big)
{
    *refs = left_out[ATTR_REFS];
    *big = left_out[ATTR_BIG];
}

void hdf5_attrs_count_only(int on)
{
    count_only = on;
}

/* Whether type t holds variable-length data anywhere: a vlen sequence, or a variable-length string
 * at the top, in a compound's member or an array's elements (H5Tdetect_class does not see a
 * variable-length string inside an array). */
int hdf5_holds_vlen(hid_t t)
{
    switch (H5Tget_class(t)) {
    case H5T_VLEN:
        return 1;
    case H5T_STRING:
        return H5Tis_variable_str(t) > 0;
    case H5T_ARRAY: {
        const hid_t b = H5Tget_super(t);
        const int yes = b >= 0 && hdf5_holds_vlen(b);
        if (b >= 0)
            H5Tclose(b);
        return yes;
    }
    case H5T_COMPOUND: {
        const int n = H5Tget_nmembers(t);
        int yes = 0;
        for (int k = 0; k < n && !yes; k++) {
            const hid_t m = H5Tget_member_type(t, (unsigned)k);
            yes = m >= 0 && hdf5_holds_vlen(m);
            if (m >= 0)
                H5Tclose(m);
        }
        return yes;
    }
    default:
        return 0;
    }
}

/* Read and written in the attribute's own type: its bytes go across as they are (a 128-bit
 * integer or float read through a native type came out as another value). Variable-length data
 * is read into memory by HDF5 and given back after. */
static int copy_attr(hid_t src_obj, const char *aname, attr_ctx *c)
{
    hid_t a = H5Aopen(src_obj, aname, H5P_DEFAULT);
    hid_t t = a >= 0 ? H5Aget_type(a) : H5I_INVALID_HID;
    hid_t s = a >= 0 ? H5Aget_space(a) : H5I_INVALID_HID;
    hid_t mt = H5I_INVALID_HID, na = H5I_INVALID_HID;
    void *buf = NULL;
    int rc = 0, read = 0;
    if (a < 0 || t < 0 || s < 0) {
        rc = -2;
        goto out;
    }
    const int why = attr_copyable(t, s);
    if (why != ATTR_OK) {
        if (c->dst >= 0)
            left_out[why]++;
        goto out;
    }
    if (count_only)
        goto out;
    const int vlen = hdf5_holds_vlen(t);
    const int empty = H5Sget_simple_extent_type(s) == H5S_NULL;
    mt = H5Tcopy(t); /* a transient copy, should the input use a named datatype */
    const hssize_t n = empty ? 0 : H5Sget_simple_extent_npoints(s);
    buf = calloc(n > 0 ? (size_t)n : 1, H5Tget_size(t));
    if (mt < 0 || !buf) {
        rc = -1;
        goto out;
    }
    if (!empty && H5Aread(a, mt, buf) < 0) {
        rc = -2;
        goto out;
    }
    read = !empty;
    if (c->dst >= 0) {
        na = H5Acreate2(c->dst, aname, mt, s, H5P_DEFAULT, H5P_DEFAULT);
        if (na < 0 || (!empty && H5Awrite(na, mt, buf) < 0))
            rc = -1;
    }
out:
    if (read && vlen)
        H5Dvlen_reclaim(mt, s, H5P_DEFAULT, buf);
    free(buf);
    if (na >= 0)
        H5Aclose(na);
    if (mt >= 0)
        H5Tclose(mt);
    if (s >= 0)
        H5Sclose(s);
    if (t >= 0)
        H5Tclose(t);
    if (a >= 0)
        H5Aclose(a);
    return rc;
}

/* The file obj lies in, for a message that names the input (H5Fget_name; "?" where it fails). */
static void file_of(hid_t obj, char *buf, size_t len)
{
    if (H5Fget_name(obj, buf, len) <= 0)
        snprintf(buf, len, "?");
}

herr_t hdf5_attr_cb(hid_t obj, const char *aname, const H5A_info_t *info, void *data)
{
    (void)info;
    attr_ctx *c = data;
    const int rc = copy_attr(obj, aname, c);
    if (rc < 0) {
        char det[512], in[4096];
        hdf5_detail(det, sizeof det);
        /* Unreadable in the input (a damaged file, a fuzzed one): the input's problem, exit 4. */
        if (rc == -2)
            file_of(obj, in, sizeof in);
        c->rc = rc == -2 ? hq_fail(c->err, HQ_EINPUT, "%s:%s: cannot read attribute \"%s\" (damaged?)%s", in, c->name, aname, det)
                         : hq_fail(c->err, HQ_EIO, "%s:%s: cannot copy attribute \"%s\"%s", c->out, c->name, aname, det);
        return 1;
    }
    return 0;
}

int hdf5_copy_attrs(hid_t src, hid_t dst, const char *out, const char *name, H5A_operator2_t cb, hq_err *err)
{
    attr_ctx c = {dst, out, name, err, 0};
    hsize_t idx = 0;
    if (H5Aiterate2(src, H5_INDEX_NAME, H5_ITER_INC, &idx, cb ? cb : hdf5_attr_cb, &c) < 0 && !c.rc) {
        char det[512], in[4096];
        hdf5_detail(det, sizeof det);
        file_of(src, in, sizeof in);
        c.rc = hq_fail(err, HQ_EINPUT, "%s:%s: cannot list its attributes (damaged?)%s", in, name, det);
    }
    return c.rc;
}

void hdf5_read_attrs(hid_t d, const char *file, const char *name)
{
    hq_err scratch;
    attr_ctx c = {H5I_INVALID_HID, file, name, &scratch, 0};
    hsize_t idx = 0;
    H5Aiterate2(d, H5_INDEX_NAME, H5_ITER_INC, &idx, hdf5_attr_cb, &c);
    H5Eclear2(H5E_DEFAULT);
}

int hdf5_check_metadata(const hq_inventory *inv, hq_err *err)
{
    hid_t f = H5Fopen(inv->root, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0)
        return 0; /* open_input says why */
    /* The items' own attributes were read by the scan, once it had succeeded (hdf5_read_attrs). */
    if (!inv->one_dataset)
        hdf5_check_group_attrs(f);
    const int rc = hdf5_carry_check(f, inv, err);
    H5Fclose(f);
    return rc;
}
