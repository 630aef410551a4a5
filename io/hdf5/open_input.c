/* open_input.c — hq_hdf5_ops.open_input: the input file opened read-only through MPI-IO on every
 * rank, each good item's dataset opened with a chunk cache suited to how its blocks are read, and
 * the hq_io that the rest of the backend works on (hdf5_free_io undoes it).
 *
 * Contract:
 *  - Collective: returns the same code and message on every rank (hdf5_agree after each step).
 *  - The io keeps a private copy of the inventory; the input's end of allocated space (learned by
 *    rank 0 through the serial driver) bounds every read, so a cut file is refused before a
 *    transfer rather than failing on some ranks only.
 *  - An item gets CHUNK_ORDER (blocks laid out chunk by chunk) only when the caller allowed any
 *    order and the chunks are unfiltered, one slice deep and span every channel. */
#include <stdlib.h>
#include <string.h>

#include "hdf5_internal.h"
#define CHUNK_CACHE_MAX (32 * MiB)

/* Enough chunk cache that a row band (or, for chunks deeper than one slice, a whole slice) is
 * decompressed once rather than once per block; bounded, as each dataset keeps its own cache.
 * CHUNK_ORDER items get none: an unfiltered chunk that fits the cache is read into it whole and
 * then copied out; without one, HDF5 reads a whole chunk selected into contiguous memory straight
 * into it. Noted in io->in_cache_* (slots 0: HDF5's default), for every opening of the item. */
static void note_input_cache(hq_io *io, uint64_t i, hid_t dcpl, int frank)
{
    const hq_item *it = &io->inv.items[i];
    hsize_t cd[MAX_RANK];
    io->in_cache_slots[i] = io->in_cache_bytes[i] = 0;
    if (io->flags[i] & CHUNK_ORDER) {
        io->in_cache_slots[i] = 1;
        return;
    }
    const int sized = dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CHUNKED && H5Pget_nfilters(dcpl) > 0 &&
                      H5Pget_chunk(dcpl, frank, cd) == frank;
    if (!sized)
        return; /* the default cache will do */
    int has_n, has_c;
    hdf5_item_roles(frank, it, &has_n, &has_c);
    const hsize_t ch = cd[has_n], cw = cd[has_n + 1], cc = has_c ? cd[frank - 1] : 1;
    hsize_t nchunks = (it->width + cw - 1) / cw * ((it->channels + cc - 1) / cc);
    if (has_n && cd[0] > 1)
        nchunks *= (it->height + ch - 1) / ch;
    hsize_t chunk_bytes = it->sample_bytes;
    for (int k = 0; k < frank; k++)
        chunk_bytes *= cd[k];
    hsize_t bytes = nchunks * chunk_bytes;
    bytes = bytes < MiB ? MiB : bytes > CHUNK_CACHE_MAX ? CHUNK_CACHE_MAX : bytes;
    size_t slots = (size_t)(bytes / chunk_bytes + 1) * 10 + 1;
    io->in_cache_slots[i] = slots < 521 ? 521 : slots;
    io->in_cache_bytes[i] = (size_t)bytes;
}

hid_t hdf5_input_dapl(const hq_io *io, uint64_t i)
{
    if (!io->in_cache_slots || io->in_cache_slots[i] == 0)
        return H5I_INVALID_HID;
    hid_t dapl = H5Pcreate(H5P_DATASET_ACCESS);
    if (dapl >= 0 && H5Pset_chunk_cache(dapl, io->in_cache_slots[i], io->in_cache_bytes[i], 1.0) < 0) {
        H5Pclose(dapl);
        dapl = H5I_INVALID_HID;
    }
    return dapl;
}

/* Remembers the input's chunk shape, and refuses a contiguous dataset that ends past the end of
 * allocated space: HDF5 would fail the read on some ranks only. */
static int note_storage(hq_io *io, uint64_t i, hid_t d, hid_t dcpl, int frank, hq_err *err)
{
    const H5D_layout_t layout = dcpl >= 0 ? H5Pget_layout(dcpl) : H5D_LAYOUT_ERROR;
    if (layout == H5D_CHUNKED && H5Pget_chunk(dcpl, frank, io->in_chunk[i]) != frank)
        memset(io->in_chunk[i], 0, sizeof io->in_chunk[i]);
    const haddr_t off = layout == H5D_CONTIGUOUS ? H5Dget_offset(d) : HADDR_UNDEF;
    H5Eclear2(H5E_DEFAULT);
    if (off != HADDR_UNDEF && io->in_eoa && hdf5_ends_past(off, H5Dget_storage_size(d), io->in_eoa))
        return hq_fail(err, HQ_EINPUT, "%s:%s: data lies past the end of the file (truncated?)", io->inv.root,
                       io->inv.items[i].name);
    return 0;
}

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
        hdf5_needs_collective(io, i, 0))
        return 0;
    int has_n, has_c;
    hdf5_item_roles(frank, it, &has_n, &has_c);
    return (!has_n || io->in_chunk[i][0] == 1) && (!has_c || io->in_chunk[i][frank - 1] == it->channels);
}

/* HDF5 writes nothing into a read's buffer where storage was never written and the fill time is
 * never: the pixels there would be whatever memory held (a legal file; h5py shows zeros). */
static int fill_never(hid_t dcpl)
{
    H5D_fill_time_t ft = H5D_FILL_TIME_IFSET;
    const int never = dcpl >= 0 && H5Pget_fill_time(dcpl, &ft) >= 0 && ft == H5D_FILL_TIME_NEVER;
    H5Eclear2(H5E_DEFAULT);
    return never;
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
    int rc = hdf5_describe_dataset(d, file, it->name, io->inv.planes, &now, &frank, err);
    if (!rc && (now.slices != it->slices || now.height != it->height || now.width != it->width ||
                now.channels != it->channels || now.sample_bytes != it->sample_bytes || now.sample != it->sample))
        rc = hq_fail(err, HQ_EINPUT, "%s:%s: the dataset changed since it was scanned", file, it->name);
    if (rc) {
        H5Dclose(d);
        return rc;
    }
    /* One copy of the creation properties for every question below: a copy costs ~5 us, which a
     * file of 20,000 small datasets paid five times a dataset. */
    hid_t dcpl = H5Dget_create_plist(d);
    rc = note_storage(io, i, d, dcpl, frank, err);
    if (rc) {
        if (dcpl >= 0)
            H5Pclose(dcpl);
        H5Dclose(d);
        return rc;
    }
    io->frank[i] = frank;
    if (chunk_order_ok(io, i))
        io->flags[i] |= CHUNK_ORDER;
    if (fill_never(dcpl))
        io->flags[i] |= FILL_NEVER;
    note_input_cache(io, i, dcpl, frank);
    hid_t dapl = hdf5_input_dapl(io, i);
    if (dcpl >= 0)
        H5Pclose(dcpl);
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
    io->flags[i] |= IN_OPENED;
    hdf5_keep_in(io, i, d);
    hdf5_direct_note_input(io, i, d);
    return 0;
}

void hdf5_free_io(hq_io *io)
{
    if (!io)
        return;
    hdf5_reserve_stop(io);
    hdf5_close_side(io, 0, NULL);
    hdf5_close_side(io, 1, NULL);
    hdf5_handles_free(io);
    hdf5_close_id(&io->out_file, H5Fclose);
    hdf5_close_id(&io->in_file, H5Fclose);
    hdf5_close_id(&io->dxpl_coll, H5Pclose);
    hdf5_close_id(&io->dxpl_ind, H5Pclose);
    hdf5_view_unmap(io); /* the input view stands on the direct path: it goes first */
    hdf5_direct_free(io);
    hdf5_luts_forget(io);
    free(io->in_dset);
    free(io->out_dset);
    free(io->out_storage);
    free(io->in_cache_slots);
    free(io->in_cache_bytes);
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
    hdf5_direct_init(io);
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
    io->in_cache_slots = calloc(n ? n : 1, sizeof *io->in_cache_slots);
    io->in_cache_bytes = calloc(n ? n : 1, sizeof *io->in_cache_bytes);
    io->dxpl_coll = H5Pcreate(H5P_DATASET_XFER);
    io->dxpl_ind = H5Pcreate(H5P_DATASET_XFER);
    if (!io->in_dset || !io->frank || !io->flags || !io->in_chunk || !io->in_cache_slots || !io->in_cache_bytes ||
        hdf5_direct_alloc(io) || hdf5_handles_alloc(io))
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
    hdf5_small_metadata_cache(fapl);
    /* Metadata reads stay independent: ranks read different datasets at different times. */
    io->in_file = H5Fopen(io->inv.root, H5F_ACC_RDONLY, fapl);
    H5Pclose(fapl);
    if (io->in_file < 0) {
        char det[512];
        hdf5_detail(det, sizeof det);
        return hq_fail(err, HQ_EINPUT, "%s: cannot open HDF5 file (truncated or corrupt?)%s", io->inv.root, det);
    }
    return 0;
}

int hdf5_open_input(const hq_inventory *inv, MPI_Comm comm, int any_order, hq_io **out, hq_err *err)
{
    hdf5_quiet();
    *out = NULL;
    hq_io *io = new_io();
    MPI_Comm dup = MPI_COMM_NULL;
    MPI_Comm_dup(comm, &dup);
    int rc = io ? 0 : hq_fail(err, HQ_EMEM, "%s: out of memory", inv->root ? inv->root : "HDF5 input");
    if (io) {
        io->comm = dup;
        MPI_Comm_rank(dup, &io->rank);
        MPI_Comm_size(dup, &io->nranks);
        io->verbose = hdf5_verbose_from_env();
        io->any_order = any_order;
        rc = prepare_io(io, inv, err);
    }
    /* Each step below is collective: a rank goes on only when all ranks can. */
    rc = hdf5_agree(dup, rc, err);
    if (!rc)
        rc = hdf5_agree(dup, open_input_file(io, err), err);
    if (!rc) {
        int mine = 0;
        for (size_t i = 0; i < io->inv.n && !mine; i++)
            if (!io->inv.items[i].bad)
                mine = open_item(io, i, err);
        rc = hdf5_agree(dup, mine, err);
    }
    if (rc) {
        if (io)
            hdf5_free_io(io);
        else
            MPI_Comm_free(&dup);
        return rc;
    }
    *out = io;
    return 0;
}
