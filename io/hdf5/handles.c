/* handles.c — the datasets' HDF5 handles, opened as the run reaches them, and no more than
 * KEPT_MAX a side left open at once.
 *
 * An open dataset costs HDF5 about 10 KiB and slows every later open, create and close (its IDs
 * and open objects are kept in skip lists): a file of 20,000 small images held 40,000 handles
 * from open_input to close, 594 MiB of resident memory, and half of the create phase and most of
 * close went to them. A million images would have needed some 20 GiB.
 *
 * Contract:
 *  - hdf5_in_dset / hdf5_out_dset give item i's handle, opening it again if it was let go
 *    (H5I_INVALID_HID for an item without one: a bad item, an output not made); the handle stays
 *    valid until the next call for ANOTHER item of the same side, which may close the side's least
 *    recently used one. Input and output keep separate lists, so an input handle survives any
 *    number of output calls, and the reverse.
 *  - Opening again and letting go are independent, never collective: the input is read with
 *    independent metadata reads anyway, and the output is reopened with a dataset access list that
 *    turns the file's collective metadata reads off for that open. An output reopened that way is
 *    only written raw (its storage was allocated at creation and its metadata flushed then).
 *  - Pinned outputs are never let go before close: with several ranks, a compressed output is
 *    written collectively, and parallel HDF5 1.10 allocates its chunks as it goes.
 *  - hdf5_keep_in / hdf5_keep_out take a handle just opened or created into the lists. */
#include <stdlib.h>
#include <string.h>

#include "hdf5_internal.h"

/* Enough for any one caller's working set (a block's item, the next), few enough that a
 * collection of any size keeps its memory. */
#define KEPT_MAX 64

struct hdf5_kept {
    uint64_t item[KEPT_MAX];
    uint64_t used[KEPT_MAX]; /* when last handed out; the smallest goes first */
    int n;
    uint64_t clock;
};

int hdf5_handles_alloc(hq_io *io)
{
    for (int s = 0; s < 2; s++) {
        io->kept[s] = calloc(1, sizeof *io->kept[s]);
        if (!io->kept[s])
            return -1;
    }
    return 0;
}

void hdf5_handles_free(hq_io *io)
{
    for (int s = 0; s < 2; s++) {
        free(io->kept[s]);
        io->kept[s] = NULL;
    }
}

static hid_t *side_ids(hq_io *io, int side)
{
    return side ? io->out_dset : io->in_dset;
}

/* Marks item i as just used; 1 if it was in the list. */
static int touch(struct hdf5_kept *k, uint64_t i)
{
    for (int j = 0; j < k->n; j++)
        if (k->item[j] == i) {
            k->used[j] = ++k->clock;
            return 1;
        }
    return 0;
}

/* Takes item i (open now) into the list, letting the least recently used other item go when the
 * list is full. */
static void keep(hq_io *io, int side, uint64_t i)
{
    struct hdf5_kept *k = io->kept[side];
    if (!k || touch(k, i))
        return;
    int j = k->n;
    if (k->n == KEPT_MAX) {
        j = 0;
        for (int m = 1; m < k->n; m++)
            if (k->used[m] < k->used[j])
                j = m;
        hdf5_close_id(&side_ids(io, side)[k->item[j]], H5Dclose);
        H5Eclear2(H5E_DEFAULT);
    } else {
        k->n++;
    }
    k->item[j] = i;
    k->used[j] = ++k->clock;
}

void hdf5_keep_in(hq_io *io, uint64_t i, hid_t d)
{
    io->in_dset[i] = d;
    keep(io, 0, i);
}

void hdf5_keep_out(hq_io *io, uint64_t i, hid_t d, int pinned)
{
    io->out_dset[i] = d;
    io->flags[i] |= OUT_MADE;
    if (pinned)
        io->flags[i] |= OUT_PINNED;
    else
        keep(io, 1, i);
}

hid_t hdf5_in_dset(hq_io *io, uint64_t i)
{
    if (i >= io->inv.n || !io->in_dset || !(io->flags[i] & IN_OPENED))
        return H5I_INVALID_HID;
    if (io->in_dset[i] < 0) {
        hid_t dapl = hdf5_input_dapl(io, i);
        io->in_dset[i] = H5Dopen2(io->in_file, io->inv.items[i].name, dapl >= 0 ? dapl : H5P_DEFAULT);
        if (dapl >= 0)
            H5Pclose(dapl);
        if (io->in_dset[i] < 0)
            return H5I_INVALID_HID;
    }
    keep(io, 0, i);
    return io->in_dset[i];
}

hid_t hdf5_out_dset(hq_io *io, uint64_t i)
{
    if (i >= io->inv.n || !io->out_dset || !(io->flags[i] & OUT_MADE))
        return H5I_INVALID_HID;
    if (io->out_dset[i] < 0) {
        hid_t dapl = H5Pcreate(H5P_DATASET_ACCESS);
        if (dapl >= 0 && H5Pset_all_coll_metadata_ops(dapl, 0) < 0) {
            H5Pclose(dapl);
            return H5I_INVALID_HID; /* the file's collective reads would make this open collective */
        }
        io->out_dset[i] = dapl >= 0 ? H5Dopen2(io->out_file, io->inv.items[i].name, dapl) : H5I_INVALID_HID;
        if (dapl >= 0)
            H5Pclose(dapl);
        if (io->out_dset[i] < 0)
            return H5I_INVALID_HID;
    }
    if (!(io->flags[i] & OUT_PINNED))
        keep(io, 1, i);
    return io->out_dset[i];
}

int hdf5_close_side(hq_io *io, int side, const char **failed)
{
    hid_t *ids = side_ids(io, side);
    int rc = 0;
    for (size_t i = 0; ids && i < io->inv.n; i++) {
        if (ids[i] >= 0 && H5Dclose(ids[i]) < 0 && !rc) {
            rc = -1;
            if (failed)
                *failed = io->inv.items[i].name;
        }
        ids[i] = H5I_INVALID_HID;
        if (side)
            io->flags[i] &= (unsigned char)~(OUT_MADE | OUT_PINNED);
    }
    if (io->kept[side])
        io->kept[side]->n = 0;
    return rc;
}
