/* scan_file.c — hq_hdf5_ops.scan: every dataset of one HDF5 file (or the one named) becomes an
 * item of the inventory, in name order. Rank 0 alone, serial driver, no MPI.
 *
 * Contract:
 *  - A dataset that is not a supported image fails the scan, or with skip_bad becomes a bad item
 *    carrying its reason. In a whole file, one that could not be an image at all (not a number,
 *    or fewer than two dimensions: carry.c's hdf5_image_kind) is not an item: the output carries
 *    it unchanged. In a file this tool wrote (root attribute histeq_dist_version), everything
 *    under /histeq_dist is our record, not an image: left out (hdf5_under_own_group), unless
 *    that output kept the input's own /histeq_dist (OWN_FOREIGN_ATTR).
 *  - Compressed datasets get item.collective = 1; chunked ones their chunk shape.
 *  - Once the scan has succeeded, every good item's attributes are read, as create_output will
 *    copy them: the scan runs in hq_io_scan_isolated's child, where damaged metadata that crashes
 *    HDF5 costs only the child (hdf5_check_metadata's share, made here, where the scan knows
 *    which items have attributes at all). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hdf5_internal.h"

typedef struct scan_ctx {
    const char *file;
    hid_t file_id;
    int skip_bad;
    int planes;   /* HQ_SCAN_PLANES: rank-3 datasets are N x H x W (masks) */
    int skip_own; /* the file is one of our outputs: its global histogram is a record, not an image */
    hq_inventory *inv;
    hq_err *err;
    int rc;
    uint64_t found;
    /* The good items that have attributes, by object address (their attributes are read once the
     * whole scan has succeeded: read_item_attrs); read_all: one could not be noted. */
    uint64_t *with_attrs;
    size_t n_with_attrs, cap_with_attrs;
    int read_all;
} scan_ctx;

/* Notes a good item's object address when it has attributes to read (read_item_attrs). */
static void note_attrs(scan_ctx *c, hid_t d, uint64_t object)
{
    H5O_info_t oi;
    const int none = H5Oget_info2(d, &oi, H5O_INFO_NUM_ATTRS) >= 0 && oi.num_attrs == 0;
    H5Eclear2(H5E_DEFAULT);
    if (none || c->read_all)
        return;
    if (!object) {
        c->read_all = 1; /* an item known by name only: every item's attributes are read */
        return;
    }
    if (c->n_with_attrs == c->cap_with_attrs) {
        const size_t cap = c->cap_with_attrs ? 2 * c->cap_with_attrs : 64;
        uint64_t *p = realloc(c->with_attrs, cap * sizeof *p);
        if (!p) {
            c->read_all = 1;
            return;
        }
        c->with_attrs = p;
        c->cap_with_attrs = cap;
    }
    c->with_attrs[c->n_with_attrs++] = object;
}

static int cmp_u64(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Every good item's attributes read (hdf5_read_attrs), after the scan: a damaged attribute that
 * hangs the library must not come before a later item's own, precise refusal. Only the items
 * that have any are opened again (a file of 20,000 images without attributes opened each a
 * second time, a second in all). */
static void read_item_attrs(scan_ctx *c, size_t first)
{
    if (!c->read_all && c->n_with_attrs == 0)
        return; /* (and qsort and bsearch below never see an empty table) */
    if (c->n_with_attrs)
        qsort(c->with_attrs, c->n_with_attrs, sizeof *c->with_attrs, cmp_u64);
    for (size_t i = first; i < c->inv->n; i++) {
        const hq_item *it = &c->inv->items[i];
        if (it->bad || (!c->read_all && !bsearch(&it->object, c->with_attrs, c->n_with_attrs,
                                                 sizeof *c->with_attrs, cmp_u64)))
            continue;
        hid_t d = H5Dopen2(c->file_id, it->name, H5P_DEFAULT);
        if (d >= 0) {
            hdf5_read_attrs(d, c->file, it->name);
            H5Dclose(d);
        }
        H5Eclear2(H5E_DEFAULT);
    }
}

/* Adds the dataset at `name` ("/a/b") as an item, or as a bad item (skip_bad), or fails. In a
 * whole-file scan (any_kind 0), a dataset that could not be an image is metadata, which the output
 * carries as it is (carry.c): left out here. */
/* addr: the object's address, where the caller knows it (H5Ovisit's info), else HADDR_UNDEF. */
static int add_dataset(scan_ctx *c, const char *name, haddr_t addr, int any_kind)
{
    hq_item it = {.src = (char *)c->file, .name = (char *)name};
    hq_err why = {{0}};
    int frank = 0, rc;
    hid_t d = H5Dopen2(c->file_id, name, H5P_DEFAULT);
    if (d >= 0 && !any_kind && !hdf5_image_kind(d)) {
        H5Dclose(d);
        return 0;
    }
    if (d < 0) {
        char det[512];
        hdf5_detail(det, sizeof det);
        rc = hq_fail(&why, HQ_EINPUT, "%s:%s: cannot open the dataset%s", c->file, name, det);
    } else {
        H5O_info_t oi;
        if (addr != HADDR_UNDEF)
            it.object = (uint64_t)addr;
        else if (H5Oget_info2(d, &oi, H5O_INFO_BASIC) >= 0)
            it.object = (uint64_t)oi.addr;
        H5Eclear2(H5E_DEFAULT);
        const hid_t dcpl = H5Dget_create_plist(d);
        rc = hdf5_describe_dataset(d, c->file, name, c->planes, &it, &frank, &why);
        if (!rc)
            rc = hdf5_check_storage(d, dcpl, c->file, name, &why);
        if (!rc)
            rc = hdf5_check_storage_size(d, dcpl, c->file, name, &why);
        if (!rc)
            rc = hdf5_check_contiguous_extent(c->file_id, d, c->file, name, &why);
        it.collective = !rc && hdf5_input_compressed(dcpl);
        if (!rc)
            hdf5_note_chunk_shape(dcpl, frank, &it);
        if (!rc)
            note_attrs(c, d, it.object);
        if (dcpl >= 0)
            H5Pclose(dcpl);
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

int hdf5_under_own_group(const char *name)
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
    if (!(c->skip_own && hdf5_under_own_group(path)))
        c->rc = add_dataset(c, path, info->addr, 0);
    free(path);
    return c->rc ? 1 : 0;
}

int hdf5_path_cmp(const char *pa, const char *pb)
{
    const unsigned char *a = (const unsigned char *)pa, *b = (const unsigned char *)pb;
    for (; *a && *a == *b; a++, b++)
        ;
    const int ca = *a == '/' ? 1 : *a ? *a + 1 : 0, cb = *b == '/' ? 1 : *b ? *b + 1 : 0;
    return ca - cb;
}

static int cmp_item_path(const void *pa, const void *pb)
{
    return hdf5_path_cmp(((const hq_item *)pa)->name, ((const hq_item *)pb)->name);
}

static int scan_all(scan_ctx *c)
{
    /* Our output, unless it kept someone else's /histeq_dist (OWN_FOREIGN_ATTR): that stays data
     * through any number of runs, or a second run would drop the user's datasets there. */
    c->skip_own = H5Aexists(c->file_id, OWN_VERSION_ATTR) > 0 && H5Aexists(c->file_id, OWN_FOREIGN_ATTR) <= 0;
    /* Someone else's file with a link of our group's name: whatever it names (an image's group, a
     * hard link to one, a soft link), the output keeps it, and the run's record goes without. */
    c->inv->own_name_taken = !c->skip_own && H5Lexists(c->file_id, OWN_GROUP + 1, H5P_DEFAULT) > 0;
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

/* 1 when the object lies in another file than the one opened: an external link on its path. The
 * rest of the backend moves a dataset's bytes at the offsets HDF5 gives, in the file it opened, so
 * such a dataset would be read from the wrong file (and a whole-file scan does not follow them). */
static int in_another_file(scan_ctx *c, const H5O_info_t *oi)
{
    H5O_info_t root;
    if (H5Oget_info2(c->file_id, &root, H5O_INFO_BASIC) < 0) {
        H5Eclear2(H5E_DEFAULT);
        return 0;
    }
    return root.fileno != oi->fileno;
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
    } else if (in_another_file(c, &oi)) {
        rc = hq_fail(c->err, HQ_EINPUT, "%s:%s: lies in another file (an external link on its path): name that "
                     "file and its dataset instead", c->file, name);
    } else {
        rc = add_dataset(c, name, HADDR_UNDEF, 1);
    }
    free(name);
    return rc;
}

int hdf5_scan(const char *path, const char *dset, unsigned flags, hq_inventory *inv, hq_err *err)
{
    hdf5_quiet();
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
        /* Another process has it open for writing (HDF5's file lock): nothing wrong with the file. */
        if (strstr(det, "unable to lock file"))
            return hq_fail(err, HQ_EIO, "%s: locked by a process writing it (HDF5 file locking): run again when it "
                           "is done%s", path, det);
        return hq_fail(err, HQ_EINPUT, "%s: cannot open HDF5 file (truncated or corrupt?)%s", path, det);
    }
    inv->format = HQ_FMT_HDF5;
    inv->root_is_dir = 0;
    inv->one_dataset = dset && dset[0];
    int rc = 0;
    if (!inv->root && !(inv->root = strdup(path)))
        rc = hq_fail(err, HQ_EMEM, "%s: out of memory", path);
    scan_ctx c = {.file = path,
                  .file_id = f,
                  .skip_bad = (flags & HQ_SCAN_SKIP_BAD) != 0,
                  .planes = (flags & HQ_SCAN_PLANES) != 0,
                  .inv = inv,
                  .err = err};
    const size_t first = inv->n;
    if (!rc)
        rc = dset && dset[0] ? scan_one(&c, dset) : scan_all(&c);
    if (!rc)
        read_item_attrs(&c, first);
    free(c.with_attrs);
    if (H5Fclose(f) < 0 && !rc)
        rc = hq_fail(err, HQ_EINPUT, "%s: cannot close HDF5 file", path);
    return rc;
}
