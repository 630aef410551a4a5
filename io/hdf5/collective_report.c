/* collective_report.c — verbose mode: when HDF5 silently turned a collective transfer
 * independent, remember why (hdf5_note_fallback, after each collective transfer) and say so once
 * for the whole run at close (hdf5_report_fallbacks, collective: one line from rank 0 with the
 * count, the first dataset and the union of H5Pget_mpio_no_collective_cause over all ranks).
 * hdf5_report_direct (collective, verbose): one note from rank 0 with how many blocks, over all
 * ranks, the direct path (direct_io.c) moved, and on how many threads a rank; and, when any, how
 * many chunk indexes were read in one pass (chunk_index.c). */
#include <stdio.h>

#include "hdf5_internal.h"

static void cause_text(uint32_t cause, char *buf, size_t len)
{
    static const struct {
        uint32_t bit;
        const char *text;
    } causes[] = {
        {H5D_MPIO_SET_INDEPENDENT, "independent transfer requested"},
        {H5D_MPIO_DATATYPE_CONVERSION, "datatype conversion (e.g. byte order)"},
        {H5D_MPIO_DATA_TRANSFORMS, "data transform"},
        {H5D_MPIO_MPI_OPT_TYPES_ENV_VAR_DISABLED, "MPI derived types disabled by environment"},
        {H5D_MPIO_NOT_SIMPLE_OR_SCALAR_DATASPACES, "dataspace neither simple nor scalar"},
        {H5D_MPIO_NOT_CONTIGUOUS_OR_CHUNKED_DATASET, "dataset neither contiguous nor chunked"},
        {H5D_MPIO_PARALLEL_FILTERED_WRITES_DISABLED, "parallel filtered writes disabled"},
        {H5D_MPIO_ERROR_WHILE_CHECKING_COLLECTIVE_POSSIBLE, "error while checking whether collective is possible"},
    };
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof causes / sizeof causes[0] && used < len; i++)
        if (cause & causes[i].bit)
            used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? ", " : "", causes[i].text);
    if (!buf[0])
        snprintf(buf, len, "unknown cause (0x%x)", (unsigned)cause);
}

/* After a collective transfer: if HDF5 made it independent, remember why (reported once, at close). */
void hdf5_note_fallback(hq_io *io, uint64_t item, int writing)
{
    io->coll_transfers++;
    if (!io->verbose)
        return;
    H5D_mpio_actual_io_mode_t mode;
    uint32_t local = 0, global = 0;
    if (H5Pget_mpio_actual_io_mode(io->dxpl_coll, &mode) < 0 ||
        H5Pget_mpio_no_collective_cause(io->dxpl_coll, &local, &global) < 0) {
        H5Eclear2(H5E_DEFAULT);
        return;
    }
    if (mode != H5D_MPIO_NO_COLLECTIVE || !(local | global))
        return;
    if (!io->fell_back++)
        io->fell_first = item * 2 + (uint64_t)writing;
    io->fell_causes |= local | global;
}

/* Collective, verbose only: one line for the whole run saying whether HDF5 turned collective
 * transfers independent, how often, where first, and why (H5Pget_mpio_no_collective_cause). */
void hdf5_report_fallbacks(hq_io *io)
{
    uint64_t mine[2] = {io->fell_back, io->coll_transfers}, all[2] = {0, 0};
    uint64_t first = io->fell_back ? io->fell_first : UINT64_MAX, first_all = UINT64_MAX;
    uint32_t causes = 0;
    int verbose = io->verbose, any_verbose = 0;
    MPI_Allreduce(&verbose, &any_verbose, 1, MPI_INT, MPI_MAX, io->comm);
    if (!any_verbose)
        return;
    MPI_Reduce(mine, all, 2, MPI_UINT64_T, MPI_SUM, 0, io->comm);
    MPI_Reduce(&first, &first_all, 1, MPI_UINT64_T, MPI_MIN, 0, io->comm);
    MPI_Reduce(&io->fell_causes, &causes, 1, MPI_UINT32_T, MPI_BOR, 0, io->comm);
    if (io->rank != 0 || !all[0] || first_all / 2 >= io->inv.n)
        return;
    char why[512];
    cause_text(causes, why, sizeof why);
    const int writing = (int)(first_all % 2);
    fprintf(stderr, "histeq_dist: HDF5 fell back to independent I/O in %llu of %llu collective transfers (first: %s "
            "%s:%s): %s\n", (unsigned long long)all[0], (unsigned long long)all[1], writing ? "writing" : "reading",
            writing && io->out_path ? io->out_path : io->inv.root, io->inv.items[first_all / 2].name, why);
}

void hdf5_report_direct(hq_io *io)
{
    int verbose = io->verbose, any_verbose = 0;
    MPI_Allreduce(&verbose, &any_verbose, 1, MPI_INT, MPI_MAX, io->comm);
    if (!any_verbose)
        return;
    uint64_t mine[5] = {io->direct_blocks[0], io->blocks[0], io->direct_blocks[1], io->blocks[1], io->viewed_blocks};
    uint64_t all[5] = {0};
    MPI_Reduce(mine, all, 5, MPI_UINT64_T, MPI_SUM, 0, io->comm);
    char viewed[192] = "";
    if (all[4])
        snprintf(viewed, sizeof viewed, "; %llu read in place, from a mapping of the input", (unsigned long long)all[4]);
    else if (io->view_cal < 0) /* rank 0's measurement; each rank made its own */
        snprintf(viewed, sizeof viewed, "; none read in place: a page of a mapping of the input took %.0f ns to "
                 "reach, a pread of it %.0f ns", io->view_ns[0], io->view_ns[1]);
    if (io->rank == 0)
        fprintf(stderr, "histeq_dist: note: HDF5 direct path: %llu of %llu blocks read, %llu of %llu written (%d "
                "thread%s a rank%s)%s\n", (unsigned long long)all[0], (unsigned long long)all[1],
                (unsigned long long)all[2], (unsigned long long)all[3], hdf5_pool_threads(io->pool),
                hdf5_pool_threads(io->pool) == 1 ? "" : "s", io->direct ? "" : ", off: HQ_HDF5_DIRECT=0", viewed);
    /* Ranks read the same datasets' indexes: the most any rank read. */
    uint64_t mine_t[4] = {io->one_pass[0], io->one_pass_chunks[0], io->one_pass[1], io->one_pass_chunks[1]};
    uint64_t most[4] = {0};
    MPI_Reduce(mine_t, most, 4, MPI_UINT64_T, MPI_MAX, 0, io->comm);
    if (io->rank == 0 && (most[0] || most[2]))
        fprintf(stderr, "histeq_dist: note: HDF5 chunk index read in one pass: %llu input dataset%s (%llu chunks), "
                "%llu output dataset%s (%llu chunks)\n", (unsigned long long)most[0], most[0] == 1 ? "" : "s",
                (unsigned long long)most[1], (unsigned long long)most[2], most[2] == 1 ? "" : "s",
                (unsigned long long)most[3]);
}
