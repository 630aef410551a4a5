/* backend.c — hq_hdf5_ops, the HDF5 backend of io.h: image datasets in, equalized datasets out,
 * through parallel HDF5 (MPI-IO). One file per job in io/hdf5/ (hdf5_internal.h lists them); this
 * one holds the table and the contract of the whole backend.
 *
 * Contract:
 *  - scan (rank 0, serial): every dataset of the file (or the one named) becomes an item. Supported:
 *    unsigned 8- or 16-bit integers of any byte order, shaped (H,W) gray, (N,H,W) a stack of gray,
 *    (H,W,3|4) one RGB/RGBA image, (N,H,W,C) a stack with C = 1..4 channels. A 3-D dataset whose
 *    last dimension is 3 or 4 is read as colour, so a stack of images 3 or 4 pixels wide is
 *    (ambiguously) taken for one RGB/RGBA image. In a file this tool wrote (root attribute
 *    histeq_dist_version), everything under /histeq_dist is our record, not an image: left out.
 *    Compressed (filtered) datasets get item.collective = 1: parallel HDF5 1.10 writes them only
 *    collectively (alone in the communicator, any write is made collective here).
 *  - open_input / create_output / close are collective and return the same code and the same
 *    message on every rank (the message of the lowest failing rank), so no rank can hang or go on
 *    alone. read_block / write_block are collective only when asked; a rank with no block then
 *    still takes part with an empty selection, and a collective transfer, too, ends with the same
 *    result on every rank. Whatever HDF5 would refuse on some ranks only (a chunk past the end of
 *    the input, a full disk) is checked and agreed before the transfer: parallel HDF5 1.10 hangs
 *    when a collective transfer fails on some ranks only.
 *  - The output is written as OUT.part, each dataset laid out like its input (type, shape, chunks,
 *    filters), with its disk space reserved ahead (fallocate) where the filesystem allows, and is
 *    renamed to OUT only by close(commit = 1) once every rank succeeded and the file reads back.
 *  - Scope image or dataset: create_output also makes /histeq_dist/lut/<dataset path>, (slices,
 *    nhist, bins) uint16, contiguous and unfiltered, and write_lut fills it image by image from
 *    whichever rank built the LUT, with its own pwrite (lut_store.c).
 *  - close(commit = 1) records the rest of the run: root attributes, and under /histeq_dist the
 *    global histogram and LUT (scope global).
 *  - The input is only ever opened read-only. HDF5's own error printing is turned off: failures
 *    come back as one line naming the file and dataset, with HDF5's innermost reason appended.
 *  - Verbose (HQ_VERBOSE set and not "0" at open_input, or opts->verbose at create_output): if
 *    HDF5 turned collective transfers independent, close() says so in one line for the whole run,
 *    with the causes (H5Pget_mpio_no_collective_cause) over all ranks.
 *  - A block that fails to read names the dataset and where the block lies ("FILE:/dset [rows
 *    0-255, cols 512-767]: ..."); a chunk that does not decompress is bad input (HQ_EINPUT). */

#include "hdf5_internal.h"

const hq_io_ops hq_hdf5_ops = {
    .name = "hdf5",
    .scan = hdf5_scan,
    .open_input = hdf5_open_input,
    .read_block = hdf5_read_block,
    .view_block = hdf5_view_block,
    .view_release = hdf5_view_release,
    .create_output = hdf5_create_output,
    .write_block = hdf5_write_block,
    .write_lut = hdf5_write_lut,
    .close = hdf5_close,
    .flush = hdf5_flush,
    .output_state = hdf5_output_state,
    .sync_path = hdf5_sync_path,
    .independent = hdf5_independent,
    .check_metadata = hdf5_check_metadata,
    .set_threads = hdf5_set_threads,
};
