/* lut_store.c — every image's LUT in the output (/histeq_dist/lut/<dataset path>): room made with
 * the output, each image's LUT written into it as soon as it is built.
 *
 * Why: the LUTs used to be held in memory until close, and a 16-bit CLAHE image's are 8 MiB (64
 * tiles of 65,536 levels); 64 such images took 886 MiB of RSS, and the cost grew with the
 * collection. Written at once, a rank holds none, and they are as durable as the pixels.
 *
 * Contract:
 *  - hdf5_luts_create (collective, in create_output, after the unfiltered pixel datasets and before
 *    the filtered ones, so that the disk reservation covers them): under scope image or dataset,
 *    for every good item, (slices, nhist, bins) uint16 little-endian, under CLAHE (slices, tiles_y,
 *    tiles_x, nhist, bins) with the attributes tiles, tile_size, clip_limit and clip_count:
 *    contiguous, allocated at creation, never filtered, so that a LUT is one run of the file. Where
 *    an input dataset lies under /histeq_dist the record would collide with it: nothing is made.
 *    Nothing either under --luts none (m->no_luts).
 *  - hdf5_luts_note_size (rank 0, after create): a note when the LUTs would take more than 64 MiB
 *    and twice the pixels (small 16-bit images: 128 KiB a slice), naming --luts none.
 *  - hdf5_luts_reopen (--resume): the same datasets of the interrupted OUT.part, with the shapes
 *    these settings give; a missing or different one refuses the resume.
 *  - hdf5_write_lut (io.h's write_lut): the slice's LUT written at its offset, through the
 *    descriptor the direct path writes pixels with (opened here when that path is off): no HDF5
 *    call, so any thread. A no-op where nothing was made. LUTs under STAGE_MAX bytes are gathered
 *    first while they follow one another in the file (the slices of a stack do), and go out as one
 *    write when the next does not follow, the stage is full, or at hdf5_luts_drain.
 *  - hdf5_luts_drain (hdf5_flush and hdf5_close call it, on every rank, before anything else):
 *    writes what is staged, so that a flush before a journal's claim covers every LUT given before
 *    it. Any thread. */
#define _GNU_SOURCE /* O_CLOEXEC */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hdf5_internal.h"
#include "../../core/sample.h"

/* Why a stage: each write of OUT.part waits for the background reservation's fallocate of the
 * moment (reserve_bg.c), on the thread that gives the LUT, which drives the engine. Written one by
 * one, the 64 LUTs of an 8-bit stack (32 KiB each under CLAHE) cost 50 ms of a 0.7 s GPU run (H100
 * node, bench/clahe_stack.sh); a 16-bit CLAHE image's 8 MiB go out at once either way. */
#define STAGE_MAX ((uint64_t)8 << 20)

/* LUTs above this size and twice the pixels' are noted at creation (hdf5_luts_note_size). */
#define LUTS_NOTE_MIN ((uint64_t)64 << 20)

/* The shape of an item's LUT dataset: (slices, nhist, bins) of its mode, or under CLAHE
 * (slices, tiles_y, tiles_x, nhist, bins); returns the rank, 3 or 5. */
static int lut_dims(const hq_io *io, const hq_run_meta *m, uint64_t i, hsize_t dims[5])
{
    const hq_item *it = &io->inv.items[i];
    const hq_mode mode = hq_item_mode(it, m->bits, m->color, m->fbins);
    hq_clahe_geom g = {0};
    dims[0] = it->slices;
    if (m->clahe && !it->bad && hq_clahe_geom_make(m->clahe, it->height, it->width, &g) == 0) {
        dims[1] = g.tiles_y;
        dims[2] = g.tiles_x;
        dims[3] = hq_mode_nhist(&mode);
        dims[4] = hq_mode_bins(&mode);
        return 5;
    }
    dims[1] = hq_mode_nhist(&mode);
    dims[2] = hq_mode_bins(&mode);
    return 3;
}

static uint64_t slice_bytes(const hsize_t *dims, int rank)
{
    uint64_t n = sizeof(uint16_t);
    for (int k = 1; k < rank; k++)
        n *= dims[k];
    return n;
}

/* CLAHE: what an item's tile LUTs are made with, on its LUT dataset (collective, like all attribute
 * writes): tiles (tiles_y, tiles_x), tile_size (rows, columns, in the padded image), clip_limit
 * (--clip-limit) and clip_count (the per-bin limit it gives: 0 none). */
static int write_clahe_attrs(hid_t d, const hq_io *io, const hq_run_meta *m, uint64_t i)
{
    const hq_item *it = &io->inv.items[i];
    hq_clahe_geom g;
    if (hq_clahe_geom_make(m->clahe, it->height, it->width, &g))
        return -1;
    const hq_mode mode = hq_item_mode(it, m->bits, m->color, m->fbins);
    const int64_t limit = hq_clahe_clip_limit(m->clahe->clip, hq_clahe_area(&g), hq_mode_bins(&mode));
    const int ok = hdf5_u64_pair_attr(d, "tiles", g.tiles_y, g.tiles_x) == 0 &&
                   hdf5_u64_pair_attr(d, "tile_size", g.tile_h, g.tile_w) == 0 &&
                   hdf5_num_attr(d, "clip_limit", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 1, &m->clahe->clip) == 0 &&
                   hdf5_num_attr(d, "clip_count", H5T_STD_I64LE, H5T_NATIVE_INT64, 1, &limit) == 0;
    return ok ? 0 : -1;
}

static char *lut_path(const hq_item *it)
{
    const size_t len = strlen(OWN_LUTS) + strlen(it->name) + 2;
    char *path = malloc(len);
    if (path)
        snprintf(path, len, "%s%s%s", OWN_LUTS, it->name[0] == '/' ? "" : "/", it->name);
    return path;
}

static int wanted(const hq_io *io, const hq_run_meta *m)
{
    return m && !m->no_luts && m->scope != HQ_SCOPE_GLOBAL && !hdf5_collides_with_own_group(io);
}

uint64_t hdf5_luts_bytes(const hq_io *io, const hq_run_meta *m)
{
    uint64_t luts = 0;
    for (size_t i = 0; wanted(io, m) && i < io->inv.n; i++) {
        const hq_item *it = &io->inv.items[i];
        if (it->bad)
            continue;
        hsize_t dims[5];
        const int rank = lut_dims(io, m, i, dims);
        luts += slice_bytes(dims, rank) * it->slices;
    }
    return luts;
}

void hdf5_luts_note_size(const hq_io *io, const hq_run_meta *m)
{
    if (!wanted(io, m))
        return;
    const uint64_t luts = hdf5_luts_bytes(io, m);
    uint64_t pixels = 0;
    for (size_t i = 0; i < io->inv.n; i++)
        if (!io->inv.items[i].bad)
            pixels += hq_item_image_bytes(&io->inv.items[i]) * io->inv.items[i].slices;
    /* Small images at 16 bits: the LUTs can dwarf the pixels, and a user should hear it before
     * the disk fills rather than after. */
    if (luts > LUTS_NOTE_MIN && luts / 2 > pixels)
        fprintf(stderr, "histeq_dist: note: %s: the images' LUTs under %s take %.3g GB, %.3g times their pixels; "
                "--luts none leaves them out\n", io->out_path, OWN_LUTS, (double)luts / 1e9,
                pixels ? (double)luts / (double)pixels : 0.0);
}

static int alloc_table(hq_io *io, hq_err *err)
{
    if (!io->lut_lock_ready)
        io->lut_lock_ready = pthread_mutex_init(&io->lut_lock, NULL) == 0;
    if (!io->lut_lock_ready)
        return hq_fail(err, HQ_EMEM, "%s: cannot make a lock", io->out_path);
    io->lut_addr = calloc(io->inv.n ? io->inv.n : 1, sizeof *io->lut_addr);
    io->lut_bytes = calloc(io->inv.n ? io->inv.n : 1, sizeof *io->lut_bytes);
    if (!io->lut_addr || !io->lut_bytes)
        return hq_fail(err, HQ_EMEM, "%s: out of memory", io->out_path);
    return 0;
}

/* Where item i's LUTs lie, from its dataset d: absolute (base: the output's hdf5_base_addr), as
 * pwrite needs them. */
static int note_place(hq_io *io, uint64_t base, uint64_t i, hid_t d, const hsize_t *dims, int rank)
{
    const haddr_t a = H5Dget_offset(d);
    if (a == HADDR_UNDEF)
        return -1;
    io->lut_addr[i] = base + a;
    io->lut_bytes[i] = slice_bytes(dims, rank);
    return 0;
}

static int open_descriptor(hq_io *io, hq_err *err)
{
    if (io->out_fd < 0)
        io->out_fd = open(io->part_path, O_RDWR | O_CLOEXEC); /* O_RDWR: the direct path may map it */
    return io->out_fd >= 0 ? 0 : hq_fail(err, HQ_EIO, "%s: cannot open %s to record LUTs", io->out_path, io->part_path);
}

int hdf5_luts_create(hq_io *io, const hq_run_meta *m, hq_err *err)
{
    if (!wanted(io, m))
        return 0;
    int rc = alloc_table(io, err);
    const uint64_t base = hdf5_base_addr(io->out_file);
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    const int ok = lcpl >= 0 && dcpl >= 0 && H5Pset_create_intermediate_group(lcpl, 1) >= 0 &&
                   H5Pset_layout(dcpl, H5D_CONTIGUOUS) >= 0 && H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY) >= 0 &&
                   H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER) >= 0;
    if (!rc && !ok)
        rc = hq_fail(err, HQ_EIO, "%s:%s: cannot prepare the LUT datasets", io->out_path, OWN_LUTS);
    /* Every rank makes every dataset, in the same order: metadata is collective. */
    for (size_t i = 0; !rc && i < io->inv.n; i++) {
        const hq_item *it = &io->inv.items[i];
        if (it->bad)
            continue;
        hsize_t dims[5];
        const int rank = lut_dims(io, m, i, dims);
        char *path = lut_path(it);
        hid_t s = H5Screate_simple(rank, dims, NULL);
        hid_t d = path && s >= 0 ? H5Dcreate2(io->out_file, path, H5T_STD_U16LE, s, lcpl, dcpl, H5P_DEFAULT)
                                 : H5I_INVALID_HID;
        const int made = d >= 0 && (!m->clahe || write_clahe_attrs(d, io, m, i) == 0) &&
                         note_place(io, base, i, d, dims, rank) == 0;
        char det[512] = "";
        if (!made)
            hdf5_detail(det, sizeof det);
        if (d >= 0)
            H5Dclose(d);
        if (s >= 0)
            H5Sclose(s);
        if (!made)
            rc = hq_fail(err, path ? HQ_EIO : HQ_EMEM, "%s:%s%s%s: cannot create%s", io->out_path, OWN_LUTS,
                         it->name[0] == '/' ? "" : "/", it->name, det);
        free(path);
    }
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (lcpl >= 0)
        H5Pclose(lcpl);
    return rc ? rc : open_descriptor(io, err);
}

int hdf5_luts_reopen(hq_io *io, const hq_run_meta *m, hq_err *err)
{
    if (!wanted(io, m))
        return 0;
    int rc = alloc_table(io, err);
    const uint64_t base = hdf5_base_addr(io->out_file);
    for (size_t i = 0; !rc && i < io->inv.n; i++) {
        const hq_item *it = &io->inv.items[i];
        if (it->bad)
            continue;
        hsize_t want[5], have[5];
        const int rank = lut_dims(io, m, i, want);
        char *path = lut_path(it);
        hid_t d = path ? H5Dopen2(io->out_file, path, H5P_DEFAULT) : H5I_INVALID_HID;
        hid_t s = d >= 0 ? H5Dget_space(d) : H5I_INVALID_HID;
        const int ok = s >= 0 && H5Sget_simple_extent_dims(s, have, NULL) == rank &&
                       memcmp(want, have, (size_t)rank * sizeof *want) == 0 && note_place(io, base, i, d, want, rank) == 0;
        if (s >= 0)
            H5Sclose(s);
        if (d >= 0)
            H5Dclose(d);
        H5Eclear2(H5E_DEFAULT);
        if (!ok)
            rc = hq_fail(err, path ? HQ_EUSAGE : HQ_EMEM,
                         "%s:%s%s%s: cannot resume: the interrupted output has no LUT dataset of this run's shape "
                         "(use --force without --resume to start over)",
                         io->part_path, OWN_LUTS, it->name[0] == '/' ? "" : "/", it->name);
        free(path);
    }
    return rc ? rc : open_descriptor(io, err);
}

static int put(hq_io *io, const void *p, uint64_t n, uint64_t off, hq_err *err)
{
    if (hdf5_out_put(io, p, n, off) == 0)
        return 0;
    const int e = errno;
    return hq_fail(err, HQ_EIO, "%s:%s: cannot write LUTs at byte %llu (%s)", io->out_path, OWN_LUTS,
                   (unsigned long long)off, strerror(e));
}

/* Under lut_lock. */
static int drain_locked(hq_io *io, hq_err *err)
{
    const int rc = io->lut_stage_len ? put(io, io->lut_stage, io->lut_stage_len, io->lut_stage_off, err) : 0;
    io->lut_stage_len = 0;
    return rc;
}

/* Under lut_lock: n bytes for offset off, staged, or written at once when they are too many. */
static int stage_or_put(hq_io *io, const unsigned char *p, uint64_t n, uint64_t off, hq_err *err)
{
    int rc = 0;
    if (io->lut_stage_len && (off != io->lut_stage_off + io->lut_stage_len || io->lut_stage_len + n > STAGE_MAX))
        rc = drain_locked(io, err);
    if (rc || n >= STAGE_MAX)
        return rc ? rc : put(io, p, n, off, err);
    if (!io->lut_stage && !(io->lut_stage = malloc(STAGE_MAX)))
        return put(io, p, n, off, err);
    if (!io->lut_stage_len)
        io->lut_stage_off = off;
    memcpy(io->lut_stage + io->lut_stage_len, p, n);
    io->lut_stage_len += n;
    return 0;
}

int hdf5_write_lut(hq_io *io, uint64_t item, uint64_t slice, const uint16_t *lut, hq_err *err)
{
    if (!io->lut_addr || item >= io->inv.n || !io->lut_addr[item])
        return 0;
    const hq_item *it = &io->inv.items[item];
    if (slice >= it->slices)
        return hq_fail(err, HQ_EUSAGE, "%s:%s: no slice %llu to record a LUT for", io->out_path, it->name,
                       (unsigned long long)slice);
    const uint64_t n = io->lut_bytes[item];
    const unsigned char *src = (const unsigned char *)lut;
    unsigned char *le = NULL;
    if (!hq_host_little_endian()) {
        if (!(le = malloc(n)))
            return hq_fail(err, HQ_EMEM, "%s: out of memory", io->out_path);
        memcpy(le, lut, n);
        hq_swap16(le, n);
        src = le;
    }
    pthread_mutex_lock(&io->lut_lock);
    const int rc = stage_or_put(io, src, n, io->lut_addr[item] + slice * n, err);
    pthread_mutex_unlock(&io->lut_lock);
    free(le);
    return rc;
}

int hdf5_luts_drain(hq_io *io, hq_err *err)
{
    if (!io->lut_addr)
        return 0;
    pthread_mutex_lock(&io->lut_lock);
    const int rc = drain_locked(io, err);
    pthread_mutex_unlock(&io->lut_lock);
    return rc;
}

void hdf5_luts_forget(hq_io *io)
{
    free(io->lut_addr);
    free(io->lut_bytes);
    free(io->lut_stage);
    io->lut_addr = io->lut_bytes = NULL;
    io->lut_stage = NULL;
    io->lut_stage_len = 0;
    if (io->lut_lock_ready)
        pthread_mutex_destroy(&io->lut_lock);
    io->lut_lock_ready = 0;
}
