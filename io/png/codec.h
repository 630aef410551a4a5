/* codec.h — whole-image PNG decode and encode on top of libpng, with no MPI and no knowledge of
 * inventories or plans, so that the PNG backend, report/thumb.c and bench/png_bench.cpp share one
 * codec (the types and settings they exchange: format.h).
 *
 * Samples come out the way the engines want them: native-endian, [row][col][channel], one byte per
 * sample for depth <= 8 (gray 1/2/4-bit samples hold their value 0..2^depth-1, not scaled), two for
 * 16-bit. Palette images decode to RGB (RGBA when they have tRNS) and also give their index array,
 * so that an encoder can write them back as palette images with a remapped palette. A tRNS chunk on
 * a gray or RGB image (one transparent colour) is decoded as an alpha channel (gray+alpha, RGBA;
 * 1/2/4-bit gray widened to 8 bits), which is what hq_png_info then says and encoders write.
 *
 * Every function returns 0 or an HQ_E* code with one line "NAME: problem" in err, NAME being the
 * source's or sink's name (a path). libpng errors are caught with setjmp/longjmp inside this file;
 * libpng warnings are dropped. Nothing here prints. */
#ifndef HQ_PNG_CODEC_H
#define HQ_PNG_CODEC_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../../core/error.h"
#include "format.h"

#ifdef __cplusplus
extern "C" {
#endif

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

/* Encodes an image laid out as hq_png_decode gives it, with info's color type, bit depth and palette tRNS
 * (never interlaced). Palette images are written from `indices` with info->palette; `pixels` is
 * then unused. */
int hq_png_encode(hq_png_sink *snk, const hq_png_info *info, const void *pixels, const uint8_t *indices,
                  const hq_png_zopts *z, hq_err *err);

#ifdef __cplusplus
}
#endif

#endif
