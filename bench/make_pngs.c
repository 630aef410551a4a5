/* make_pngs.c — writes a collection of 8-bit gray PNGs for the end-to-end benchmark (bench/e2e.sh):
 * the low-contrast ramps plus noise of make_stack.c, so that the images are neither constant nor
 * random, written with zlib level 1 (what OpenCV's imwrite uses by default) by one thread per core.
 *
 *   cc -O2 -fopenmp -o build/make_pngs bench/make_pngs.c $(pkg-config --cflags --libs libpng)
 *   build/make_pngs DIR COUNT SIDE        # DIR/img00000.png .. , SIDE x SIDE pixels each */
#include <png.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <zlib.h>

static int write_one(const char *path, uint32_t side, uint32_t seed, uint8_t *row)
{
    FILE *fp = fopen(path, "wb");
    if (!fp)
        return -1;
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info || setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        fclose(fp);
        return -1;
    }
    png_init_io(png, fp);
    png_set_compression_level(png, 1);
    png_set_IHDR(png, info, side, side, 8, PNG_COLOR_TYPE_GRAY, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    uint32_t lcg = 12345u + seed * 7919u;
    for (uint32_t y = 0; y < side; y++) {
        for (uint32_t x = 0; x < side; x++) {
            lcg = lcg * 1664525u + 1013904223u;
            row[x] = (uint8_t)(90 + (x + y) / 64 % 48 + (lcg >> 29) + seed % 16);
        }
        png_write_row(png, row);
    }
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    return fclose(fp);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: make_pngs DIR COUNT SIDE\n");
        return 2;
    }
    const long n = atol(argv[2]), side = atol(argv[3]);
    if (n < 1 || side < 1) {
        fprintf(stderr, "make_pngs: COUNT and SIDE must be positive\n");
        return 2;
    }
    int bad = 0;
#pragma omp parallel for schedule(dynamic, 1) reduction(| : bad)
    for (long i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/img%05ld.png", argv[1], i);
        uint8_t *row = malloc((size_t)side);
        if (!row || write_one(path, (uint32_t)side, (uint32_t)i, row) != 0) {
            fprintf(stderr, "make_pngs: %s: cannot write\n", path);
            bad = 1;
        }
        free(row);
    }
    return bad;
}
