/* make_stack.c — writes a uint8 HDF5 stack of about SIZE GiB for the end-to-end benchmark, where
 * the GPU machines have no h5py: low-contrast ramps plus a little noise, so that the data is neither
 * constant nor random (both would flatter or punish the histogram kernels).
 *
 *   mpicc -O2 -o build/make_stack bench/make_stack.c -lhdf5 && build/make_stack OUT.h5 8 [H W]
 * Serial: one process writes the whole file with the default (POSIX) driver. */
#include <hdf5.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: make_stack OUT.h5 SIZE_GIB [HEIGHT WIDTH]\n");
        return 2;
    }
    const double gib = atof(argv[2]);
    const hsize_t h = argc > 4 ? (hsize_t)atoll(argv[3]) : 4096, w = argc > 4 ? (hsize_t)atoll(argv[4]) : 4096;
    const hsize_t n = (hsize_t)(gib * 1073741824.0) / (h * w);
    if (n == 0 || h == 0 || w == 0) {
        fprintf(stderr, "make_stack: size too small for one %llux%llu slice\n", (unsigned long long)h,
                (unsigned long long)w);
        return 2;
    }
    uint8_t *slice = malloc(h * w);
    if (!slice)
        return 6;
    hid_t f = H5Fcreate(argv[1], H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t dims[3] = {n, h, w}, chunk[3] = {1, h, w};
    hid_t space = H5Screate_simple(3, dims, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 3, chunk);
    hid_t d = H5Dcreate2(f, "stack", H5T_NATIVE_UINT8, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (f < 0 || d < 0) {
        fprintf(stderr, "make_stack: %s: cannot create\n", argv[1]);
        return 1;
    }
    uint32_t lcg = 12345;
    for (hsize_t i = 0; i < n; i++) {
        for (hsize_t y = 0; y < h; y++)
            for (hsize_t x = 0; x < w; x++) {
                lcg = lcg * 1664525u + 1013904223u;
                slice[y * w + x] = (uint8_t)(90 + (x + y) / 64 % 48 + (lcg >> 29) + i % 16);
            }
        hsize_t start[3] = {i, 0, 0}, count[3] = {1, h, w};
        hid_t fs = H5Dget_space(d), ms = H5Screate_simple(3, count, NULL);
        H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL);
        herr_t st = H5Dwrite(d, H5T_NATIVE_UINT8, ms, fs, H5P_DEFAULT, slice);
        H5Sclose(fs);
        H5Sclose(ms);
        if (st < 0) {
            fprintf(stderr, "make_stack: %s: write failed\n", argv[1]);
            return 1;
        }
    }
    H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(space);
    H5Fclose(f);
    free(slice);
    printf("made %s: %llu x %llu x %llu uint8 = %.2f GiB\n", argv[1], (unsigned long long)n, (unsigned long long)h,
           (unsigned long long)w, (double)(n * h * w) / 1073741824.0);
    return 0;
}
