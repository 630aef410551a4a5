/* png_codec.h — whole-image PNG decode and encode on top of libpng, with no MPI and no knowledge of
 * inventories or plans, so that png_io.c and bench/png_bench.cpp share one codec.
 *
 * Samples come out the way the engines want them: native-endian, [row][col][channel], one byte per
 * sample for depth <= 8 (gray 1/2/4-bit samples hold their value 0..2^depth-1, not scaled), two for
 * 16-bit. Palette images decode to RGB (RGBA when they have tRNS) and also give their index array,
 * so that an encoder can write them back as palette images with a remapped palette. A tRNS chunk on
 * a gray or RGB image is kept in hq_png_info but never turned into an alpha channel.
 *
 * Every function returns 0 or an HQ_E* code with one line "NAME: problem" in err, NAME being the
 * source's or sink's name (a path). libpng errors are caught with setjmp/longjmp inside this file;
 * libpng warnings are dropped. Nothing here prints. */
#ifndef HQ_PNG_CODEC_H
#define HQ_PNG_CODEC_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../core/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a PNG header says, and what its decoded samples look like. */
typedef struct hq_png_info {
    uint32_t width, height;
    int color_type;       /* PNG_COLOR_TYPE_* as stored */
    int bit_depth;        /* as stored: 1, 2, 4, 8 or 16 */
    int interlaced;       /* 1: Adam7 */
    uint32_t channels;    /* decoded: 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA (palette: 3 or 4) */
    uint32_t sample_bytes;/* decoded: 1 or 2 */
    uint32_t depth;       /* decoded significant bits per sample: 1, 2, 4, 8 or 16 */
    int npalette;         /* palette entries (0 when not a palette image) */
    uint8_t palette[256][3];
    int ntrans;           /* palette alpha entries from tRNS (entries past it are opaque) */
    uint8_t trans_alpha[256];
    int has_trans_color;  /* gray/RGB tRNS: the one transparent color, kept for output only */
    uint16_t trans_color[3]; /* gray: [0]; RGB: [0..2] */
} hq_png_info;

/* Where PNG bytes come from: an open file, or a memory buffer (fp == NULL). */
typedef struct hq_png_source {
    const char *name; /* for messages */
    FILE *fp;
    const unsigned char *buf;
    size_t len;
} hq_png_source;

/* Where PNG bytes go: an open file, or (fp == NULL) a malloc'd buffer that grows; the caller frees
 * sink.buf, also after a failure. */
typedef struct hq_png_sink {
    const char *name;
    FILE *fp;
    unsigned char *buf;
    size_t len, cap;
} hq_png_sink;

/* How the encoder compresses. hq_png_zopts_for_level gives the tuned settings. */
typedef struct hq_png_zopts {
    int level;       /* zlib level 0..9 */
    int strategy;    /* Z_DEFAULT_STRATEGY, Z_FILTERED, Z_HUFFMAN_ONLY, Z_RLE */
    int filters;     /* PNG_FILTER_* mask (PNG_ALL_FILTERS: libpng's adaptive choice) */
    int mem_level;   /* zlib memLevel 1..9 */
    size_t zbuf;     /* libpng compression buffer (IDAT chunk) size in bytes */
} hq_png_zopts;

/* png_level -1 (or anything outside 0..9): our fast default (measured in bench/png_bench.cpp: at
 * least as fast as OpenCV's cv::imencode default, files no larger); 0..9: that zlib level with
 * adaptive filters and the Z_FILTERED strategy, as libpng does by default. */
hq_png_zopts hq_png_zopts_for_level(int png_level);

/* 1 when buf starts with the 8-byte PNG signature. */
int hq_png_has_signature(const void *buf, size_t len);

/* Bytes of the decoded image: height * width * channels * sample_bytes (UINT64_MAX when that does
 * not fit 64 bits: 2^31 x 2^31 RGBA16 would wrap around). */
uint64_t hq_png_image_bytes(const hq_png_info *info);

/* Reads the signature and header only. A zero width or height is "NAME: zero-sized image"; a file
 * that does not start with the PNG signature is "NAME: not a PNG file" (both HQ_EINPUT). */
int hq_png_read_info(const hq_png_source *src, hq_png_info *info, hq_err *err);

/* Decodes the whole image. dst (dst_bytes == hq_png_image_bytes(info), or NULL to skip samples)
 * receives the samples; for palette images *indices (when indices is non-NULL) receives a malloc'd
 * width*height array of palette indices, else NULL. At least one of dst and indices is given. */
int hq_png_decode(const hq_png_source *src, hq_png_info *info, void *dst, uint64_t dst_bytes,
                  uint8_t **indices, hq_err *err);

/* For a palette image: replaces info->palette entry i with the color that `pixels` (decoded
 * samples, info->channels per pixel) holds at the first pixel whose index is i. Entries no pixel
 * uses keep their color; indices past npalette (decoded as black) grow the palette to cover them. */
void hq_png_repalette(hq_png_info *info, const uint8_t *indices, const void *pixels);

/* Encodes an image laid out as hq_png_decode gives it, with info's color type, bit depth and tRNS
 * (never interlaced). Palette images are written from `indices` with info->palette; `pixels` is
 * then unused. */
int hq_png_encode(hq_png_sink *snk, const hq_png_info *info, const void *pixels, const uint8_t *indices,
                  const hq_png_zopts *z, hq_err *err);

#ifdef __cplusplus
}
#endif

#endif
