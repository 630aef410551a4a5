/* close.c — hq_hdf5_ops.close / flush / output_state / sync_path: the end of a run.
 *
 * Contract:
 *  - close is collective and returns the same code and message on every rank. With commit = 1 it
 *    records the run (provenance.c), marks the file complete, closes everything, and rank 0 sets
 *    szip's chunk masks (szip_masks.c), copies what is not an image (carry.c) and checks that
 *    OUT.part reads back before renaming it to OUT; otherwise OUT.part is removed. Every rank
 *    has closed (and so flushed) before anyone renames or removes the file. The io is freed.
 *  - OUT.part is unfinished, OUT finished (output_state); sync_path is OUT.part. */
#define _GNU_SOURCE /* renameat2 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hdf5_internal.h"

/* Closes the output's datasets and file; a failure here is a failed flush (disk full). */
static int close_output_ids(hq_io *io, hq_err *err)
{
    hdf5_direct_close_output(io);
    hdf5_luts_forget(io);
    int rc = 0;
    char det[512];
    const char *failed = NULL;
    if (hdf5_close_side(io, 1, &failed) < 0) {
        hdf5_detail(det, sizeof det);
        rc = hq_fail(err, HQ_EIO, "%s:%s: closing the dataset failed%s", io->out_path, failed, det);
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
    hdf5_close_side(io, 0, NULL);
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

/* OUT.part renamed to OUT. Without --force never over a file: OUT was checked absent at create,
 * and one made there since (by a user, another tool) is not the run's to replace. A file system
 * without RENAME_NOREPLACE gets a link, which fails on an existing name the same way. */
static int move_into_place(const hq_io *io)
{
    if (io->replace)
        return rename(io->part_path, io->out_path);
    if (renameat2(AT_FDCWD, io->part_path, AT_FDCWD, io->out_path, RENAME_NOREPLACE) == 0)
        return 0;
    if (errno != EINVAL && errno != ENOSYS)
        return -1;
    if (link(io->part_path, io->out_path) != 0)
        return -1;
    return unlink(io->part_path);
}

/* Rank 0 gives OUT.part its final name (replacing OUT atomically under --force) or removes it. */
static int finish_output(hq_io *io, int keep, hq_err *err)
{
    int rc = 0;
    if (io->rank == 0) {
        /* The chunks szip could not shrink are written again and the other datasets copied into
         * the blocks reserved past the end (reserve.c), which are given back after. */
        hdf5_carry_counts cn = {0, 0, 0, 0};
        if (keep && ((rc = hdf5_fix_szip_masks(io, err)) != 0 || (rc = hdf5_carry(io, &cn, err)) != 0))
            keep = 0;
        const uint64_t carried = cn.copied, refs = cn.refs, unfiltered = cn.unfiltered, unreadable = cn.unreadable;
        if (keep)
            hdf5_release_reserve(io);
        if (keep && (rc = verify_output(io, err)) != 0)
            keep = 0;
        if (keep && move_into_place(io) != 0) {
            rc = errno == EEXIST ? hq_fail(err, HQ_EUSAGE, "%s: a file appeared there while the run went; it is left "
                                           "as it is (use --force to replace it)", io->out_path)
                                 : hq_fail(err, HQ_EIO, "%s: cannot rename %s to it (%s)", io->out_path, io->part_path,
                                           strerror(errno));
            keep = 0;
        }
        if (keep && (carried || refs || unfiltered || unreadable) && !io->quiet) {
            char tail[512] = "";
            int n = 0;
            if (refs)
                n = snprintf(tail, sizeof tail, "; %llu left out, as %s references into the input",
                             (unsigned long long)refs, refs == 1 ? "it holds" : "they hold");
            if (unfiltered && n >= 0 && (size_t)n < sizeof tail)
                n += snprintf(tail + n, sizeof tail - (size_t)n, "; %llu of variable-length data left out, as copying "
                              "%s needs a filter this HDF5 lacks", (unsigned long long)unfiltered,
                              unfiltered == 1 ? "it" : "them");
            if (unreadable && n >= 0 && (size_t)n < sizeof tail)
                snprintf(tail + n, sizeof tail - (size_t)n, "; %llu left out, as %s values lie in external files that "
                         "cannot be read", (unsigned long long)unreadable, unreadable == 1 ? "its" : "their");
            fprintf(stderr, "histeq_dist: note: %s: %llu dataset%s of the input that the run does not equalize "
                    "(strings, tables, 1-D arrays, scalars, the mask) copied as %s%s\n", io->out_path,
                    (unsigned long long)carried, carried == 1 ? "" : "s", carried == 1 ? "it is" : "they are", tail);
        }
        uint64_t arefs = 0, abig = 0;
        hdf5_attrs_left_out(&arefs, &abig);
        if (keep && (arefs || abig) && !io->quiet)
            fprintf(stderr, "histeq_dist: note: %s: %llu attribute%s of the input left out: %llu over 32 KiB, "
                    "%llu holding references into the input\n", io->out_path, (unsigned long long)(arefs + abig),
                    arefs + abig == 1 ? "" : "s", (unsigned long long)abig, (unsigned long long)arefs);
        if (!keep)
            unlink(io->part_path);
    }
    return hdf5_share_from_root(io->comm, rc, err);
}

int hdf5_close(hq_io *io, int commit, const hq_run_meta *meta, hq_err *err)
{
    if (!io)
        return 0;
    hdf5_quiet();
    hdf5_report_fallbacks(io);
    hdf5_report_direct(io);
    const int had_output = io->part_ours;
    int rc = 0, keep = 0;
    if (had_output) {
        /* The metadata written from here on lies past the pixels: all of the reservation first. */
        if (commit)
            rc = hdf5_agree(io->comm, hdf5_reserve_wait(io, 0, UINT64_MAX, err), err);
        if (commit && !rc)
            rc = hdf5_agree(io->comm, hdf5_luts_drain(io, err), err);
        hdf5_reserve_stop(io);
        if (commit && meta && !rc)
            rc = hdf5_record_meta(io, meta, err);
        if (commit && !rc)
            rc = hdf5_mark_complete(io, err);
        /* Whether the output is kept is settled before closing, as the two closes differ. */
        rc = hdf5_agree(io->comm, rc, err);
        keep = commit && !rc;
        if (!keep)
            hdf5_empty_output(io);
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
    rc = hdf5_agree(io->comm, rc, err);
    if (had_output) {
        hq_err e4;
        int rc4 = finish_output(io, keep && !rc, rc ? &e4 : err);
        rc = rc ? rc : rc4;
    }
    hdf5_free_io(io);
    return rc;
}

int hdf5_flush(hq_io *io, int collective, hq_err *err)
{
    if (!io || io->out_file < 0)
        return 0;
    /* Every rank's staged LUTs, whatever the flush: the claims that follow it cover them. */
    const int rc = hdf5_luts_drain(io, err);
    if (rc || (!collective && io->nranks > 1))
        return rc;
    if (H5Fflush(io->out_file, H5F_SCOPE_LOCAL) < 0) {
        char det[512];
        hdf5_detail(det, sizeof det);
        return hq_fail(err, HQ_EIO, "%s: cannot flush%s", io->out_path, det);
    }
    return 0;
}

/* A variable-length string attribute of the root (as write_string_attr makes them), malloc'd;
 * NULL if it cannot be read. */
static char *read_root_string(hid_t f, const char *aname)
{
    char *out = NULL, *v = NULL;
    const hid_t a = H5Aopen_by_name(f, "/", aname, H5P_DEFAULT, H5P_DEFAULT);
    const hid_t t = a >= 0 ? H5Aget_type(a) : H5I_INVALID_HID;
    const hid_t mt = H5Tcopy(H5T_C_S1);
    /* The file's character set too: HDF5 converts no string between ASCII and UTF-8. */
    if (t >= 0 && mt >= 0 && H5Tget_class(t) == H5T_STRING && H5Tis_variable_str(t) > 0 &&
        H5Tset_size(mt, H5T_VARIABLE) >= 0 && H5Tset_cset(mt, H5Tget_cset(t)) >= 0 && H5Aread(a, mt, &v) >= 0 && v) {
        out = strdup(v);
        H5free_memory(v);
    }
    if (mt >= 0)
        H5Tclose(mt);
    if (t >= 0)
        H5Tclose(t);
    if (a >= 0)
        H5Aclose(a);
    return out;
}

/* Whether OUT is a file this program finished: its root carries OWN_COMPLETE_ATTR. A foreign file
 * at OUT, or one that is not HDF5 at all, is not; --resume must not call it done. *run_id: its
 * OWN_RUN_ID_ATTR, or NULL. */
static int is_finished_output(const char *out, char **run_id)
{
    int yes = 0;
    *run_id = NULL;
    H5E_BEGIN_TRY
    {
        const hid_t f = H5Fopen(out, H5F_ACC_RDONLY, H5P_DEFAULT);
        if (f >= 0) {
            yes = H5Aexists_by_name(f, "/", OWN_COMPLETE_ATTR, H5P_DEFAULT) > 0;
            if (yes && H5Aexists_by_name(f, "/", OWN_RUN_ID_ATTR, H5P_DEFAULT) > 0)
                *run_id = read_root_string(f, OWN_RUN_ID_ATTR);
            H5Fclose(f);
        }
    }
    H5E_END_TRY;
    return yes;
}

/* The output takes its final name only once complete: OUT.part is unfinished, OUT (marked
 * complete) finished. */
int hdf5_output_state(const hq_inventory *inv, const char *out, int *partial, int *finished, char **run_id)
{
    (void)inv;
    struct stat st;
    char *part = hdf5_part_name(out);
    *partial = part && stat(part, &st) == 0;
    *run_id = NULL;
    *finished = stat(out, &st) == 0 && S_ISREG(st.st_mode) && is_finished_output(out, run_id);
    free(part);
    return 1;
}

const char *hdf5_sync_path(const hq_io *io)
{
    return io ? io->part_path : NULL;
}
