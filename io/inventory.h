/* inventory.h — what the input holds: the list of items (an HDF5 dataset or a PNG file) with their
 * shapes, built once on rank 0 and broadcast, so that every rank plans from the same facts.
 *
 * An item is a stack of `slices` images (1 for a 2-D dataset or a PNG) of height x width pixels with
 * `channels` interleaved samples. Images are numbered globally in item order, slice order. */
#ifndef HQ_INVENTORY_H
#define HQ_INVENTORY_H

#include <stddef.h>
#include <stdint.h>

#include "../core/error.h"
#include "../core/mode.h"

typedef enum { HQ_FMT_NONE = 0, HQ_FMT_HDF5 = 1, HQ_FMT_PNG = 2 } hq_format;

/* What a sample is. Signed integers are handed to the engines offset to unsigned (v + 2^(n-1), the
 * sign bit flipped: core/sample.h) and flipped back before they are written, so the integer rule
 * applies to them unchanged and exactly; floats are binned (core/fbin.h). */
typedef enum { HQ_SAMPLE_UINT = 0, HQ_SAMPLE_INT = 1, HQ_SAMPLE_FLOAT = 2 } hq_sample;

typedef struct hq_item {
    char *src;  /* the file the item lives in */
    char *name; /* HDF5: dataset path ("/scans/ct"); PNG: the file's base name (its output name) */
    uint64_t slices, height, width;
    uint32_t channels;     /* 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA (palette PNGs read as RGB/RGBA) */
    uint32_t sample_bytes; /* 1 or 2, as held in memory; 4 or 8 for float32/float64 */
    uint32_t depth;        /* stored bits per sample: 8 or 16 (32, 64 for floats); PNG gray may be 1, 2 or 4 */
    uint32_t sample;       /* hq_sample: unsigned, signed (int8/int16) or float (gray only) */
    uint32_t bad;          /* 1: the item was found unusable while scanning (with --on-error skip) */
    uint32_t collective;   /* 1: every transfer must be collective (filtered HDF5 datasets: parallel
                              HDF5 compresses chunks only in collective writes) */
    uint64_t chunk_slices, chunk_height, chunk_width; /* HDF5 chunk shape over (slices, rows, columns);
                              all 0 when not chunked (contiguous HDF5, PNG). The plan's tiles follow it. */
    char *why;             /* for bad items: the one-line reason "PATH: problem" */
    uint64_t object;       /* HDF5: the dataset's address in its file, the same under every name
                              (soft links, further hard links); 0 for PNG and where unknown */
} hq_item;

typedef struct hq_inventory {
    hq_format format;
    char *root; /* the input as given: HDF5 file, PNG file, PNG directory or list file */
    int root_is_dir;
    int one_dataset; /* HDF5: one dataset was named (FILE.h5:/dset), not the whole file */
    int own_name_taken; /* HDF5, whole file not written by this tool: its root has a link named histeq_dist */
    int planes;      /* scanned with HQ_SCAN_PLANES (io.h): rank-3 HDF5 datasets are N x H x W */
    size_t n, cap;
    hq_item *items;
} hq_inventory;

/* Appends a copy of *it (strings duplicated). */
int hq_inventory_add(hq_inventory *inv, const hq_item *it, hq_err *err);

/* Makes it a bad item with the one-line reason why (copied): no pixels, as a scan under
 * --on-error skip records an unusable input. HQ_EMEM in err if the reason cannot be kept. */
int hq_item_set_bad(hq_item *it, const char *why, hq_err *err);
void hq_inventory_free(hq_inventory *inv);

/* Whether any usable item is RGB(A): only then does --color decide anything (and get recorded). */
static inline int hq_inventory_has_color(const hq_inventory *inv)
{
    for (size_t i = 0; i < inv->n; i++)
        if (!inv->items[i].bad && inv->items[i].channels >= 3)
            return 1;
    return 0;
}

/* Bytes of one whole image of the item (all channels). */
static inline uint64_t hq_item_image_bytes(const hq_item *it)
{
    return it->height * it->width * it->channels * it->sample_bytes;
}

/* How the engines see an item's samples: integer data with `bits` significant bits (0: its depth)
 * and `color`, float data binned into `fbins` bins. */
static inline hq_mode hq_item_mode(const hq_item *it, uint32_t bits, hq_color color, uint32_t fbins)
{
    hq_mode m = {it->channels, it->sample_bytes, bits ? bits : it->depth, color, 0};
    if (it->sample == HQ_SAMPLE_FLOAT) {
        m.bits = 0;
        m.fbins = fbins;
    }
    return m;
}

/* Serialization for MPI_Bcast: a flat byte buffer owned by the caller (free()). */
int hq_inventory_pack(const hq_inventory *inv, unsigned char **buf, uint64_t *len, hq_err *err);
int hq_inventory_unpack(const unsigned char *buf, uint64_t len, hq_inventory *inv, hq_err *err);

#endif
