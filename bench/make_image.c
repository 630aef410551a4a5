/* make_image.c — writes a uint8 HDF5 image (or stack) of any size quickly, for the scaling
 * benchmark on machines without h5py: each row is a shifted copy of one precomputed low-contrast
 * pattern (ramps plus noise), so generating costs a memcpy per row and the file is written at disk
 * speed, one band of chunk rows at a time. Uncompressed, chunked like the tiles it is meant for.
 *
 *   mpicc -O2 -o build/make_image bench/make_image.c -lhdf5
 *   build/make_image OUT.h5 SLICES HEIGHT WIDTH [CHUNK_H CHUNK_W]
 * SLICES = 1 writes the 2-D dataset /image (H, W); more write /stack (N, H, W). Chunks default to
 * 1024 x 1024 (one slice deep). Serial: one process, the default (POSIX) driver. */
#include <hdf5.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PERIOD 8191 /* the pattern repeats after this many columns; rows start at different phases */

static int write_band(hid_t d, int stacked, hsize_t s, hsize_t r0, hsize_t rows, hsize_t w, const uint8_t *buf)
{
    hsize_t start[3] = {s, r0, 0}, count[3] = {1, rows, w};
    hsize_t *st = stacked ? start : start + 1, *ct = stacked ? count : count + 1;
    const int rank = stacked ? 3 : 2;
    hid_t fs = H5Dget_space(d), ms = H5Screate_simple(rank, ct, NULL);
    herr_t rc = H5Sselect_hyperslab(fs, H5S_SELECT_SET, st, NULL, ct, NULL);
    if (rc >= 0)
        rc = H5Dwrite(d, H5T_NATIVE_UINT8, ms, fs, H5P_DEFAULT, buf);
    H5Sclose(fs);
    H5Sclose(ms);
    return rc < 0 ? -1 : 0;
}

int main(int argc, char **argv)
{
    if (argc != 5 && argc != 7) {
        fprintf(stderr, "usage: make_image OUT.h5 SLICES HEIGHT WIDTH [CHUNK_H CHUNK_W]\n");
        return 2;
    }
    const hsize_t n = strtoull(argv[2], NULL, 10), h = strtoull(argv[3], NULL, 10), w = strtoull(argv[4], NULL, 10);
    hsize_t ch = argc == 7 ? strtoull(argv[5], NULL, 10) : 1024, cw = argc == 7 ? strtoull(argv[6], NULL, 10) : 1024;
    if (!n || !h || !w || !ch || !cw) {
        fprintf(stderr, "make_image: every size must be at least 1\n");
        return 2;
    }
    ch = ch < h ? ch : h;
    cw = cw < w ? cw : w;
    /* One pattern row of w + PERIOD samples; row y is the window starting at a phase of its own. */
    uint8_t *pattern = malloc(w + PERIOD), *band = malloc(ch * w);
    if (!pattern || !band) {
        fprintf(stderr, "make_image: out of memory for a band of %llu bytes\n", (unsigned long long)(ch * w));
        return 6;
    }
    uint32_t lcg = 12345;
    for (hsize_t x = 0; x < w + PERIOD; x++) {
        lcg = lcg * 1664525u + 1013904223u;
        pattern[x] = (uint8_t)(90 + x / 97 % 40 + (lcg >> 29));
    }
    const int stacked = n > 1;
    hsize_t dims[3] = {n, h, w}, chunk[3] = {1, ch, cw};
    hid_t f = H5Fcreate(argv[1], H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t space = H5Screate_simple(stacked ? 3 : 2, stacked ? dims : dims + 1, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, stacked ? 3 : 2, stacked ? chunk : chunk + 1);
    hid_t d = f < 0 ? H5I_INVALID_HID
                    : H5Dcreate2(f, stacked ? "stack" : "image", H5T_NATIVE_UINT8, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (d < 0) {
        fprintf(stderr, "make_image: %s: cannot create\n", argv[1]);
        return 1;
    }
    for (hsize_t s = 0; s < n; s++)
        for (hsize_t r0 = 0; r0 < h; r0 += ch) {
            const hsize_t rows = r0 + ch <= h ? ch : h - r0;
            for (hsize_t y = 0; y < rows; y++)
                memcpy(band + y * w, pattern + ((r0 + y) * 7919 + s * 131) % PERIOD, w);
            if (write_band(d, stacked, s, r0, rows, w, band)) {
                fprintf(stderr, "make_image: %s: write failed (disk full?)\n", argv[1]);
                return 1;
            }
        }
    int bad = H5Dclose(d) < 0;
    H5Pclose(dcpl);
    H5Sclose(space);
    bad |= H5Fclose(f) < 0;
    free(pattern);
    free(band);
    if (bad) {
        fprintf(stderr, "make_image: %s: close failed (disk full?)\n", argv[1]);
        return 1;
    }
    printf("made %s: %llu x %llu x %llu uint8 = %.2f GiB, chunks %llu x %llu\n", argv[1], (unsigned long long)n,
           (unsigned long long)h, (unsigned long long)w, (double)(n * h * w) / 1073741824.0, (unsigned long long)ch,
           (unsigned long long)cw);
    return 0;
}
