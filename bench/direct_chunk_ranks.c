/* direct_chunk_ranks.c — may several ranks of parallel HDF5 write different chunks of one filtered
 * dataset with H5Dwrite_chunk (direct chunk write) through the MPI-IO driver? Each rank deflates and
 * writes chunks r, r + P, r + 2P, ... of an 8 x 64 uint8 dataset (chunks of one row), the file is
 * closed, and rank 0 reads it back with the serial driver and counts the rows that hold what was
 * written. io/hdf5/direct.c uses H5Dwrite_chunk only with one rank because of what this prints.
 *
 *   mpicc -O2 $(pkg-config --cflags hdf5-openmpi) -o build/direct_chunk_ranks bench/direct_chunk_ranks.c \
 *     $(pkg-config --libs hdf5-openmpi) -lz
 *   mpirun -np 2 build/direct_chunk_ranks /dev/shm/dcr.h5 */
#include <hdf5.h>
#include <mpi.h>
#include <stdio.h>
#include <zlib.h>

enum { ROWS = 8, COLS = 64 };

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *path = argc > 1 ? argv[1] : "direct_chunk_ranks.h5";
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL);
    H5Pset_all_coll_metadata_ops(fapl, 1); /* as io/hdf5/create_output.c opens its output */
    H5Pset_coll_metadata_write(fapl, 1);
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    const hsize_t dims[2] = {ROWS, COLS}, chunk[2] = {1, COLS};
    hid_t space = H5Screate_simple(2, dims, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 2, chunk);
    H5Pset_deflate(dcpl, 1);
    H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER);
    hid_t d = H5Dcreate2(f, "x", H5T_STD_U8LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    int failed = 0;
    for (int r = rank; r < ROWS; r += size) {
        unsigned char raw[COLS], z[256];
        for (int i = 0; i < COLS; i++)
            raw[i] = (unsigned char)(r * 10 + i + 1);
        uLongf zn = sizeof z;
        compress2(z, &zn, raw, COLS, 1);
        const hsize_t off[2] = {(hsize_t)r, 0};
        failed += H5Dwrite_chunk(d, H5P_DEFAULT, 0, off, zn, z) < 0;
    }
    H5Dclose(d);
    H5Fclose(f);
    H5Pclose(fapl);
    int any = 0;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        unsigned char back[ROWS][COLS] = {{0}};
        hid_t g = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
        hid_t e = g >= 0 ? H5Dopen2(g, "x", H5P_DEFAULT) : H5I_INVALID_HID;
        const int read = e >= 0 && H5Dread(e, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, back) >= 0;
        int good = 0;
        for (int r = 0; read && r < ROWS; r++) {
            int ok = 1;
            for (int i = 0; i < COLS; i++)
                ok &= back[r][i] == (unsigned char)(r * 10 + i + 1);
            good += ok;
        }
        printf("%d rank%s: %d H5Dwrite_chunk calls failed; %d of %d chunks read back as written%s\n", size,
               size == 1 ? "" : "s", any, good, ROWS, read ? "" : " (the file does not read)");
        if (e >= 0)
            H5Dclose(e);
        if (g >= 0)
            H5Fclose(g);
    }
    MPI_Finalize();
    return 0;
}
