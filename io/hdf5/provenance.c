/* provenance.c — close(commit = 1)'s record of the run in the output: root attributes (version,
 * method, scope, color, bits, source, options, command line), and under /histeq_dist the global
 * histogram and LUT (scope global); every image's LUT (scope image) is in the output already
 * (lut_store.c). Last, the histeq_dist_complete attribute that marks a finished file.
 * Float data adds root attributes bins and range_from ("data" or "--range"), and the binning's
 * [min, max]: root attributes min and max (scope global), or /histeq_dist/range/<dataset>, float64
 * (slices, 2), per slice (scope image).
 *
 * Contract: collective; every rank writes the same attributes and creates the same datasets in
 * the same order, and returns the same code and message. A run killed while closing may have left
 * our datasets: they are made again. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hdf5_internal.h"

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

int hdf5_num_attr(hid_t obj, const char *aname, hid_t ftype, hid_t mtype, hsize_t n, const void *v)
{
    hid_t s = n == 1 ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &n, NULL);
    hid_t a = H5I_INVALID_HID;
    int ok = s >= 0;
    if (ok && H5Aexists(obj, aname) > 0)
        ok = H5Adelete(obj, aname) >= 0;
    if (ok)
        a = H5Acreate2(obj, aname, ftype, s, H5P_DEFAULT, H5P_DEFAULT);
    ok = ok && a >= 0 && H5Awrite(a, mtype, v) >= 0;
    if (a >= 0)
        H5Aclose(a);
    if (s >= 0)
        H5Sclose(s);
    return ok ? 0 : -1;
}

static int write_u32_attr(hid_t obj, const char *aname, uint32_t value)
{
    return hdf5_num_attr(obj, aname, H5T_STD_U32LE, H5T_NATIVE_UINT32, 1, &value);
}

static int write_f64_attr(hid_t obj, const char *aname, double value)
{
    return hdf5_num_attr(obj, aname, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 1, &value);
}

int hdf5_u64_pair_attr(hid_t obj, const char *aname, uint64_t a0, uint64_t a1)
{
    const uint64_t v[2] = {a0, a1};
    return hdf5_num_attr(obj, aname, H5T_STD_U64LE, H5T_NATIVE_UINT64, 2, v);
}

/* Float data's root attributes: bins, where the range came from, and under scope global the
 * one range. Same values on every rank (pass 0's reduction). */
static int write_float_attrs(hid_t root, const hq_run_meta *m)
{
    if (!m->fbin)
        return 0;
    int ok = write_u32_attr(root, "bins", m->fbins) == 0 &&
             write_string_attr(root, "range_from", m->frange_given ? "--range" : "data") == 0;
    if (ok && m->scope == HQ_SCOPE_GLOBAL)
        ok = write_f64_attr(root, "min", m->fbin[0].lo) == 0 && write_f64_attr(root, "max", m->fbin[0].hi) == 0;
    return ok ? 0 : -1;
}

/* Every root attribute record_meta below may write (the histeq_dist_* ones aside): an input's of
 * the same names give way to them (group_attrs.c). Keep in step with record_meta. */
const char *const hdf5_own_root_attrs[] = {"method",  "scope",      "color",      "bits",      "source",
                                           "options", "command_line", "reference", "ignore",   "mask",
                                           "mask_apply", "clip_limit", "clahe_grid", "clahe_tile", "bins",
                                           "range_from", "min",       "max",        NULL};

int hdf5_inv_collides_with_own_group(const hq_inventory *inv)
{
    if (inv->own_name_taken)
        return 1;
    for (size_t i = 0; i < inv->n; i++)
        if (!inv->items[i].bad && hdf5_under_own_group(inv->items[i].name))
            return 1;
    return 0;
}

int hdf5_collides_with_own_group(const hq_io *io)
{
    return hdf5_inv_collides_with_own_group(&io->inv);
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
    int rc = hdf5_agree(io->comm, hdf5_reserve_more(io, n * (sizeof(uint64_t) + sizeof(uint16_t)), OWN_HIST, err), err);
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

/* Scope image or dataset, float items: /histeq_dist/range/<dataset>, float64 (slices, 2), each slice's
 * binning [min, max] (NaN, NaN: no finite sample). Created by every rank, written by rank 0. */
static int write_item_ranges(hq_io *io, const hq_run_meta *m, hq_err *err)
{
    uint64_t bytes = 0;
    for (size_t i = 0; i < io->inv.n; i++)
        if (!io->inv.items[i].bad && io->inv.items[i].sample == HQ_SAMPLE_FLOAT)
            bytes += io->inv.items[i].slices * 2 * sizeof(double);
    int rc = hdf5_agree(io->comm, hdf5_reserve_more(io, bytes, OWN_RANGES, err), err);
    for (size_t i = 0; i < io->inv.n && !rc; i++) {
        const hq_item *it = &io->inv.items[i];
        if (it->bad || it->sample != HQ_SAMPLE_FLOAT)
            continue;
        const size_t len = strlen(OWN_RANGES) + strlen(it->name) + 2;
        char *path = malloc(len);
        double *v = malloc(it->slices * 2 * sizeof *v);
        int ok = path && v;
        if (ok) {
            snprintf(path, len, "%s%s%s", OWN_RANGES, it->name[0] == '/' ? "" : "/", it->name);
            for (uint64_t s = 0; s < it->slices; s++) {
                v[2 * s] = m->fbin[m->item_image0[i] + s].lo;
                v[2 * s + 1] = m->fbin[m->item_image0[i] + s].hi;
            }
            const hsize_t dims[2] = {it->slices, 2};
            ok = write_own_dataset(io, path, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, dims, v) == 0;
        }
        char det[512] = "";
        if (!ok)
            hdf5_detail(det, sizeof det);
        rc = hdf5_agree(io->comm, ok ? 0 : hq_fail(err, path ? HQ_EIO : HQ_EMEM, "%s:%s%s: cannot write%s",
                                                    io->out_path, OWN_RANGES, it->name, det), err);
        free(path);
        free(v);
    }
    return rc;
}

/* Collective: every rank writes the same attributes with the same values. `color` only where it
 * applied: an output of gray data does not claim a colour mode. */
int hdf5_record_meta(hq_io *io, const hq_run_meta *m, hq_err *err)
{
    hid_t root = H5Gopen2(io->out_file, "/", H5P_DEFAULT);
    int ok = root >= 0 && write_string_attr(root, OWN_VERSION_ATTR, m->version) == 0 &&
             write_string_attr(root, "method", hq_method_name(m->method)) == 0 &&
             write_string_attr(root, "scope", hq_scope_name(m->scope)) == 0 &&
             (!hq_inventory_has_color(&io->inv) || write_string_attr(root, "color", hq_color_name(m->color)) == 0) &&
             write_u32_attr(root, "bits", m->bits) == 0 && write_string_attr(root, "source", io->inv.root) == 0 &&
             (!m->options || write_string_attr(root, "options", m->options) == 0) &&
             (!m->run_id || write_string_attr(root, OWN_RUN_ID_ATTR, m->run_id) == 0) &&
             (!m->command_line || write_string_attr(root, "command_line", m->command_line) == 0) &&
             (!m->reference || write_string_attr(root, "reference", m->reference) == 0) &&
             (!m->ignore || write_string_attr(root, "ignore", m->ignore) == 0) &&
             (!m->mask || write_string_attr(root, "mask", m->mask) == 0) &&
             (!m->mask_apply || write_string_attr(root, "mask_apply", m->mask_apply) == 0) &&
             (!m->clahe || write_f64_attr(root, "clip_limit", m->clahe->clip) == 0) &&
             (!m->clahe || m->clahe->tile || hdf5_u64_pair_attr(root, "clahe_grid", m->clahe->grid_y, m->clahe->grid_x) == 0) &&
             (!m->clahe || !m->clahe->tile || hdf5_u64_pair_attr(root, "clahe_tile", m->clahe->tile, m->clahe->tile) == 0) &&
             write_float_attrs(root, m) == 0 &&
             (!hdf5_collides_with_own_group(io) || write_u32_attr(root, OWN_FOREIGN_ATTR, 1) == 0);
    char det[512] = "";
    if (!ok)
        hdf5_detail(det, sizeof det);
    if (root >= 0)
        H5Gclose(root);
    int rc = ok ? 0 : hq_fail(err, HQ_EIO, "%s: cannot record the run's attributes%s", io->out_path, det);
    rc = hdf5_agree(io->comm, rc, err);
    if (rc || hdf5_collides_with_own_group(io))
        return rc;
    if (m->global_hist && m->global_nhist && m->global_bins)
        return write_global(io, m, err);
    if (m->scope != HQ_SCOPE_GLOBAL && m->fbin)
        rc = write_item_ranges(io, m, err);
    return rc;
}

/* The last thing written: a reader (or --resume) can tell a finished file by it. Collective. */
int hdf5_mark_complete(hq_io *io, hq_err *err)
{
    hid_t root = H5Gopen2(io->out_file, "/", H5P_DEFAULT);
    int ok = root >= 0 && write_u32_attr(root, OWN_COMPLETE_ATTR, 1) == 0;
    if (root >= 0)
        H5Gclose(root);
    return hdf5_agree(io->comm, ok ? 0 : hq_fail(err, HQ_EIO, "%s: cannot mark the output complete", io->out_path), err);
}
