/* create_output.c — hq_hdf5_ops.create_output: OUT.part created (or with --resume reopened) by
 * every rank through MPI-IO with collective metadata, one output dataset per good item, laid out
 * like its input, and its disk space reserved.
 *
 * Contract:
 *  - Collective: every rank creates every dataset in the same order (unfiltered first, then the
 *    images' LUTs when o->settings asks for them, so that their space is reserved before filtered
 *    ones make the file's end unknown) and returns the same code and message. On failure OUT.part
 *    is removed (if ours) and the io holds no output.
 *  - OUT must not be the input, nor a directory, nor exist without --force; OUT.part is flushed
 *    once created, so that a run killed from then on leaves a file --resume can open. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "hdf5_internal.h"
#include "../../core/samepath.h"

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
    const int e = hq_dir_writable(dir);
    const int rc = e ? hq_fail(err, HQ_EIO, "%s: cannot write (%s)", out, strerror(e)) : 0;
    free(dir);
    return rc;
}

/* Does the output fit under the file size limit and in the free space? Under a file size limit
 * (ulimit -f, a batch system's h_fsize) smaller than the output, the first flush of OUT.part
 * failed (EFBIG), its close failed with it, and HDF5 crashed closing the file again inside
 * MPI_Finalize: refused before anything is made. What the output takes at least: the
 * uncompressed items' pixels (each of a MiB or more aligned to a MiB, as output_fapl asks) and
 * the LUTs; compressed items count nothing, so that what fits is not refused. */
static int check_output_fits(const hq_io *io, const hq_out_opts *o, hq_err *err)
{
    struct rlimit rl;
    uint64_t need = hdf5_luts_bytes(io, o->settings);
    for (size_t i = 0; i < io->inv.n; i++) {
        const hq_item *it = &io->inv.items[i];
        if (!it->bad && !it->collective)
            need += hdf5_aligned_bytes(it->slices * hq_item_image_bytes(it));
    }
    const char *out = o->path;
    if (getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && need > (uint64_t)rl.rlim_cur)
        return hq_fail(err, HQ_EIO, "%s: the output needs at least %llu bytes, more than the file size limit of %llu "
                       "(ulimit -f)", out, (unsigned long long)need, (unsigned long long)rl.rlim_cur);
    /* The same crash where the disk cannot hold it: HDF5 sizes the file for the uncompressed items
     * at create, before the reservation (reserve.c) could refuse it (a 1.4 KB input describing
     * 16 TiB that was never written: EFBIG, then SIGSEGV in H5Fclose). What OUT.part already
     * holds (a resumed run's) counts as free. */
    struct statvfs v;
    struct stat st;
    char dir[PATH_MAX];
    if (hq_dir_of(io->part_path, dir, sizeof dir) != 0 || statvfs(dir, &v) != 0)
        return 0; /* the writability check that follows says why */
    const uint64_t held = stat(io->part_path, &st) == 0 ? (uint64_t)st.st_blocks * 512 : 0;
    const uint64_t avail = (uint64_t)v.f_bavail * v.f_frsize + held;
    if (need > held && !hdf5_free_space_holds(dir, need - held))
        return hq_fail(err, HQ_EIO, "%s: not enough disk space for the output (%llu bytes at least, %llu free)", out,
                       (unsigned long long)need, (unsigned long long)avail);
    return 0;
}

/* Rank 0: may we write OUT (as OUT.part, renamed at the end)? */
static int check_output_path(const hq_io *io, const hq_out_opts *o, hq_err *err)
{
    const char *out = o->path;
    struct stat in_st, st;
    const int have_in = stat(io->inv.root, &in_st) == 0;
    const char *why = hq_unreplaceable(out);
    if (why)
        return hq_fail(err, HQ_EUSAGE, "%s: %s", out, why);
    if (stat(out, &st) == 0) {
        if (have_in && same_file(&in_st, &st))
            return hq_fail(err, HQ_EUSAGE, "%s: output is the input", out);
        if (S_ISDIR(st.st_mode))
            return hq_fail(err, HQ_EUSAGE, "%s: output is a directory", out);
        if (!o->force)
            return hq_fail(err, HQ_EUSAGE, "%s: output exists (use --force to replace)", out);
        /* Only a file that is there can be one the input's other datasets read from. */
        if (hdf5_carry_reads_file(&io->inv, out))
            return hq_fail(err, HQ_EUSAGE, "%s: the input's datasets read values from this file (external raw data "
                           "or a virtual dataset's source): name another output", out);
    }
    if (stat(io->part_path, &st) == 0) {
        if (have_in && same_file(&in_st, &st))
            return hq_fail(err, HQ_EUSAGE, "%s: its temporary file %s is the input", out, io->part_path);
        if (S_ISDIR(st.st_mode))
            return hq_fail(err, HQ_EIO, "%s: cannot write (%s is a directory)", out, io->part_path);
    }
    const int rc = check_output_fits(io, o, err);
    return rc ? rc : check_dir_writable(out, err);
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
    hdf5_small_metadata_cache(fapl);
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

/* With several ranks a compressed output is written collectively, its chunks allocated as it goes:
 * its handle stays open on every rank until close (handles.c). */
static int pinned_output(const hq_io *io, uint64_t i)
{
    return io->nranks > 1 && (io->flags[i] & OUT_FILTERED);
}

/* Item i's output dataset o, just made or reopened: kept (handles.c), its storage and its
 * direct-path description noted while it is open. */
static void note_made(hq_io *io, uint64_t i, hid_t o)
{
    hdf5_keep_out(io, i, o, pinned_output(io, i));
    io->out_storage[i] = H5Dget_storage_size(o);
    hdf5_direct_note_out_item(io, i, o);
}

static int create_item_output(hq_io *io, uint64_t i, hq_err *err)
{
    const hq_item *it = &io->inv.items[i];
    const char *out = io->out_path;
    hid_t in = hdf5_in_dset(io, i);
    if (in < 0)
        return hq_fail(err, HQ_EIO, "%s:%s: cannot open the input dataset again", io->inv.root, it->name);
    hid_t dcpl = H5I_INVALID_HID, lcpl = H5I_INVALID_HID, t = H5I_INVALID_HID, s = H5I_INVALID_HID;
    int rc = hdf5_output_dcpl(in, io->frank[i], out, it->name, &dcpl, err);
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
    hsize_t dims[MAX_RANK], maxd[MAX_RANK], cd[MAX_RANK];
    hid_t in_space = H5Dget_space(in);
    if (in_space >= 0 && H5Sget_simple_extent_dims(in_space, dims, maxd) == io->frank[i]) {
        /* Fixed size, whatever the input's max dims; except along a dimension that a chunk is
         * longer than (a stack made to grow: chunks of 4 slices, 3 written), which HDF5 allows only
         * where the dataset may grow: there the output keeps the input's maximum, and so its chunks. */
        const int chunked = H5Pget_layout(dcpl) == H5D_CHUNKED && H5Pget_chunk(dcpl, io->frank[i], cd) == io->frank[i];
        for (int k = 0; k < io->frank[i]; k++)
            if (!chunked || cd[k] <= dims[k])
                maxd[k] = dims[k];
        s = H5Screate_simple(io->frank[i], dims, maxd);
    }
    if (in_space >= 0)
        H5Sclose(in_space);
    lcpl = H5Pcreate(H5P_LINK_CREATE);
    if (t < 0 || s < 0 || lcpl < 0 || H5Pset_create_intermediate_group(lcpl, 1) < 0) {
        rc = hq_fail(err, HQ_EIO, "%s:%s: cannot prepare the dataset", out, it->name);
        goto out;
    }
    if (H5Pget_nfilters(dcpl) > 0)
        io->flags[i] |= OUT_FILTERED;
    const hid_t o = H5Dcreate2(io->out_file, it->name, t, s, lcpl, dcpl, H5P_DEFAULT);
    if (o < 0) {
        char det[512];
        hdf5_detail(det, sizeof det);
        rc = hq_fail(err, HQ_EIO, "%s:%s: cannot create the dataset%s", out, it->name, det);
        goto out;
    }
    note_made(io, i, o);
    rc = hdf5_copy_attrs(in, o, out, it->name, NULL, err);
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
void hdf5_empty_output(hq_io *io)
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
    hdf5_direct_close_output(io);
    hdf5_luts_forget(io);
    if (io->out_file >= 0)
        hdf5_empty_output(io);
    hdf5_close_side(io, 1, NULL);
    hdf5_close_id(&io->out_file, H5Fclose);
    H5Eclear2(H5E_DEFAULT);
    MPI_Barrier(io->comm);
    if (io->rank == 0 && io->part_ours)
        unlink(io->part_path);
    MPI_Barrier(io->comm);
    io->part_ours = 0;
    free(io->out_dset);
    free(io->out_storage);
    free(io->out_path);
    free(io->part_path);
    io->out_dset = NULL;
    io->out_storage = NULL;
    io->out_path = io->part_path = NULL;
}

/* --resume: the datasets of the OUT.part an interrupted run left, which must have the input's
 * shapes (a journal is only trusted with the file it was written with). */
static int reopen_datasets(hq_io *io, hq_err *err)
{
    for (size_t i = 0; i < io->inv.n; i++) {
        const hq_item *it = &io->inv.items[i];
        if (it->bad)
            continue;
        const hid_t o = H5Dopen2(io->out_file, it->name, H5P_DEFAULT);
        hsize_t din[MAX_RANK], dout[MAX_RANK];
        const hid_t in = hdf5_in_dset(io, i);
        hid_t si = in >= 0 ? H5Dget_space(in) : H5I_INVALID_HID;
        hid_t so = o >= 0 ? H5Dget_space(o) : H5I_INVALID_HID;
        hid_t dcpl = o >= 0 ? H5Dget_create_plist(o) : H5I_INVALID_HID;
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
        if (o >= 0)
            note_made(io, i, o);
        if (!ok)
            return hq_fail(err, HQ_EUSAGE, "%s:%s: cannot resume: the interrupted output has no such dataset of "
                           "the input's shape (use --force without --resume to start over)", io->part_path, it->name);
    }
    return 0;
}

/* --resume: what the interrupted run's copies of the images' and groups' attributes left out,
 * counted again for close.c's note (the copies themselves are in OUT.part already). */
static int count_copied_attrs(hq_io *io, hq_err *err)
{
    hdf5_attrs_count_only(1);
    int rc = 0;
    for (size_t i = 0; i < io->inv.n && !rc; i++)
        if (!io->inv.items[i].bad && (io->flags[i] & OUT_MADE))
            rc = hdf5_copy_attrs(hdf5_in_dset(io, i), hdf5_out_dset(io, i), io->out_path, io->inv.items[i].name,
                                 NULL, err);
    if (!rc)
        rc = hdf5_copy_group_attrs(io, err);
    hdf5_attrs_count_only(0);
    return rc;
}

/* The output datasets of the good items whose input is compressed (or not): the scan's
 * item.collective, which is hdf5_input_compressed of each good item. */
static int create_datasets(hq_io *io, int compressed, hq_err *err)
{
    for (size_t i = 0; i < io->inv.n; i++) {
        if (io->inv.items[i].bad || (int)io->inv.items[i].collective != compressed)
            continue;
        int rc = create_item_output(io, i, err);
        if (rc)
            return rc;
    }
    return 0;
}

/* OUT.part, where the output is written until it is complete (malloc'd). */
char *hdf5_part_name(const char *out)
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
    io->part_path = hdf5_part_name(o->path);
    io->out_dset = malloc((io->inv.n ? io->inv.n : 1) * sizeof *io->out_dset);
    io->out_storage = calloc(io->inv.n ? io->inv.n : 1, sizeof *io->out_storage);
    if (!io->out_path || !io->part_path || !io->out_dset || !io->out_storage)
        return hq_fail(err, HQ_EMEM, "%s: out of memory", o->path);
    for (size_t i = 0; i < io->inv.n; i++)
        io->out_dset[i] = H5I_INVALID_HID;
    return 0;
}

int hdf5_create_output(hq_io *io, const hq_out_opts *o, MPI_Comm comm, hq_err *err)
{
    (void)comm; /* io->comm is the duplicate of the communicator given to open_input */
    hdf5_quiet();
    if (io->out_file >= 0 || io->out_path)
        return hq_fail(err, HQ_EUSAGE, "%s: output already created", io->out_path ? io->out_path : "output");
    if (o && o->verbose)
        io->verbose = 1;
    io->quiet = o && o->quiet;
    io->replace = o && o->force;
    /* The input's own /histeq_dist (not ours: ours is left out of the scan) is mirrored there, and
     * the run's record (LUTs, global histogram) cannot share the name: said, not silently missed. */
    if (o && !o->quiet && io->rank == 0 && hdf5_collides_with_own_group(io))
        fprintf(stderr, "histeq_dist: note: %s: the input has %s of its own; it keeps that name, and the output "
                "records no LUTs or histograms there\n", io->inv.root, OWN_GROUP);
    int rc = hdf5_agree(io->comm, name_output(io, o, err), err);
    if (!rc) {
        int mine = io->rank == 0 ? check_output_path(io, o, err) : 0;
        /* What the check let stand at OUT (a link to nothing) the rename may replace. */
        struct stat st;
        if (io->rank == 0 && !mine && lstat(o->path, &st) == 0)
            io->replace = 1;
        rc = hdf5_share_from_root(io->comm, mine, err);
    }
    if (!rc) {
        io->part_ours = 1;
        rc = hdf5_agree(io->comm, create_output_file(io, o->resume, err), err);
    }
    if (!rc && o->resume) {
        rc = hdf5_agree(io->comm, reopen_datasets(io, err), err);
        if (!rc)
            rc = hdf5_agree(io->comm, hdf5_luts_reopen(io, o->settings, err), err);
        if (!rc)
            hdf5_direct_note_output(io);
        if (!rc)
            rc = hdf5_agree(io->comm, count_copied_attrs(io, err), err);
    } else {
        /* Metadata is collective: every rank creates every dataset, in the same order. The
         * uncompressed ones come first, then the images' LUTs (lut_store.c), so that their space
         * can be reserved before compressed ones make the file's end unknown. */
        uint64_t allocated = 0;
        if (!rc)
            rc = hdf5_agree(io->comm, create_datasets(io, 0, err), err);
        if (!rc)
            rc = hdf5_agree(io->comm, hdf5_luts_create(io, o->settings, err), err);
        if (!rc && io->rank == 0 && !o->quiet)
            hdf5_luts_note_size(io, o->settings);
        if (!rc && io->rank == 0)
            allocated = hdf5_allocated_bytes(io);
        if (!rc)
            rc = hdf5_agree(io->comm, create_datasets(io, 1, err), err);
        if (!rc)
            rc = hdf5_copy_links(io, err);
        if (!rc)
            rc = hdf5_copy_group_attrs(io, err);
        /* The metadata goes to the file (the chunk tables are read from it, and a run killed from
         * here on leaves a file that --resume can open) before the background reservation takes
         * the file's lock for its pieces: on tmpfs each of HDF5's small writes waited behind one
         * 32 MiB fallocate, and the create phase grew with the chunk count. */
        if (!rc) {
            hdf5_direct_note_output(io);
            if (H5Fflush(io->out_file, H5F_SCOPE_LOCAL) < 0)
                rc = hq_fail(err, HQ_EIO, "%s: cannot flush %s", io->out_path, io->part_path);
            rc = hdf5_agree(io->comm, rc, err);
        }
        /* The reservation reaches the last chunk the direct path writes, whatever the file's size
         * said: right after creating a 32 GiB dataset of 32,768 chunks with 4 ranks, parallel HDF5
         * 1.10.8 gave a size 0.6 GB short of the last chunk's end (4-GPU host), and those chunks
         * would have been written unreserved, with pwrite rather than through the mapping. */
        if (!rc && io->rank == 0) {
            const uint64_t data_end = hdf5_direct_data_end(io);
            allocated = data_end > allocated ? data_end : allocated;
        }
        if (!rc)
            rc = hdf5_reserve_space(io, allocated, err);
        /* Only reserved pages are stored to through the mapping (out_map.c); a resume, which
         * reserves nothing, keeps pwrite. */
        if (!rc)
            hdf5_out_map(io);
    }
    if (rc)
        drop_output(io);
    return rc;
}
