/* group_attrs.c — the attributes of the groups a whole-file output holds, the root's among them,
 * copied from the input's groups of the same path.
 *
 * Why: archives keep what describes a scan or a collection (instrument, patient, units) on its
 * groups and on the file's root; only dataset attributes used to reach the output.
 *
 * Contract:
 *  - hdf5_copy_group_attrs: collective, in create_output once every group exists (datasets and
 *    links made; not on --resume: the reopened OUT.part has them). Every rank walks the output's
 *    groups and copies in the same order (collective metadata), returning the same code; an
 *    attribute is copied as output_layout.c copies a dataset's (hdf5_attr_cb: any type without
 *    references, of modest size).
 *  - Only for a whole-file input (hq_inventory.one_dataset: nothing). Groups under /histeq_dist
 *    are the run's record and are left alone, unless the input's own datasets lie there
 *    (hdf5_collides_with_own_group). On the root, the names the run records itself
 *    (provenance.c: histeq_dist_*, method, scope, ...) are not copied: a file this tool wrote
 *    would otherwise pass on its completion mark and a previous run's settings. */
#include <stdlib.h>
#include <string.h>

#include "hdf5_internal.h"

static int own_root_attr(const char *name)
{
    if (!strncmp(name, "histeq_dist_", 12))
        return 1;
    for (size_t k = 0; hdf5_own_root_attrs[k]; k++)
        if (!strcmp(name, hdf5_own_root_attrs[k]))
            return 1;
    return 0;
}

static herr_t root_attr_cb(hid_t obj, const char *aname, const H5A_info_t *info, void *data)
{
    return own_root_attr(aname) ? 0 : hdf5_attr_cb(obj, aname, info, data);
}

typedef struct group_list {
    char **paths;
    size_t n, cap;
    int oom;
} group_list;

static herr_t collect_group(hid_t obj, const char *name, const H5O_info_t *info, void *data)
{
    (void)obj;
    group_list *g = data;
    if (info->type != H5O_TYPE_GROUP || !strcmp(name, "."))
        return 0;
    if (g->n == g->cap) {
        const size_t cap = g->cap ? 2 * g->cap : 32;
        char **p = realloc(g->paths, cap * sizeof *p);
        if (!p) {
            g->oom = 1;
            return 1;
        }
        g->paths = p;
        g->cap = cap;
    }
    const size_t len = strlen(name) + 2;
    char *s = malloc(len);
    if (!s) {
        g->oom = 1;
        return 1;
    }
    s[0] = '/';
    memcpy(s + 1, name, len - 1);
    g->paths[g->n++] = s;
    return 0;
}

/* The input group at path's attributes onto the output group at path, where the input has a group
 * there (a soft link's target in the output may be a group the input names otherwise). */
static int copy_one(hq_io *io, const char *path, hq_err *err)
{
    const int root = !strcmp(path, "/");
    const size_t own = strlen(OWN_GROUP);
    if (!root && !strncmp(path, OWN_GROUP, own) && (path[own] == 0 || path[own] == '/') &&
        !hdf5_collides_with_own_group(io))
        return 0;
    H5O_info_t oi;
    if (!root && (H5Lexists(io->in_file, path, H5P_DEFAULT) <= 0 ||
                  H5Oget_info_by_name2(io->in_file, path, &oi, H5O_INFO_BASIC, H5P_DEFAULT) < 0 || oi.type != H5O_TYPE_GROUP)) {
        H5Eclear2(H5E_DEFAULT);
        return 0;
    }
    hid_t in = H5Oopen(io->in_file, path, H5P_DEFAULT), out = H5Oopen(io->out_file, path, H5P_DEFAULT);
    int rc = 0;
    if (in < 0 || out < 0) {
        char det[512];
        hdf5_detail(det, sizeof det);
        rc = hq_fail(err, HQ_EIO, "%s:%s: cannot open the group%s", io->out_path, path, det);
    } else {
        rc = hdf5_copy_attrs(in, out, io->out_path, path, root ? root_attr_cb : NULL, err);
    }
    hdf5_close_id(&in, H5Oclose);
    hdf5_close_id(&out, H5Oclose);
    return rc;
}

int hdf5_copy_group_attrs(hq_io *io, hq_err *err)
{
    if (io->inv.one_dataset)
        return hdf5_agree(io->comm, 0, err);
    group_list g = {NULL, 0, 0, 0};
    int rc = copy_one(io, "/", err);
    if (!rc && (H5Ovisit2(io->out_file, H5_INDEX_NAME, H5_ITER_INC, collect_group, &g, H5O_INFO_BASIC) < 0 || g.oom))
        rc = hq_fail(err, g.oom ? HQ_EMEM : HQ_EIO, "%s: cannot list the output's groups", io->out_path);
    for (size_t i = 0; i < g.n; i++) {
        if (!rc)
            rc = copy_one(io, g.paths[i], err);
        free(g.paths[i]);
    }
    free(g.paths);
    return hdf5_agree(io->comm, rc, err);
}

/* The same reads in the scan's child (hdf5_check_metadata): every group's attributes, read. */
static herr_t read_group_attrs(hid_t obj, const char *name, const H5O_info_t *info, void *data)
{
    (void)data;
    if (info->type != H5O_TYPE_GROUP)
        return 0;
    hid_t gid = H5Oopen(obj, name, H5P_DEFAULT);
    if (gid < 0) {
        H5Eclear2(H5E_DEFAULT);
        return 0;
    }
    hq_err scratch;
    attr_ctx c = {H5I_INVALID_HID, "", name, &scratch, 0};
    hsize_t idx = 0;
    H5Aiterate2(gid, H5_INDEX_NAME, H5_ITER_INC, &idx, hdf5_attr_cb, &c);
    H5Oclose(gid);
    H5Eclear2(H5E_DEFAULT);
    return 0;
}

void hdf5_check_group_attrs(hid_t file)
{
    H5Ovisit2(file, H5_INDEX_NAME, H5_ITER_INC, read_group_attrs, NULL, H5O_INFO_BASIC);
    H5Eclear2(H5E_DEFAULT);
}
