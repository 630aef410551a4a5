/* fast.h — a libdeflate fast path under codec.c for the common PNGs: non-interlaced 8- and
 * 16-bit gray, gray+alpha, RGB and RGBA. Only codec.c calls it; codec.h's interface is the one the
 * rest of the program sees.
 *
 * Contract: the decoder never reports an error. It either decodes (returns 1, same samples and
 * hq_png_info as the libpng path) or declines (returns 0, dst contents unspecified), and the
 * caller then runs the libpng path on the same bytes, so that every damaged or unusual file reads
 * exactly as before: palette, sub-byte or interlaced images, a bad CRC on any chunk, an unknown
 * critical chunk, any tRNS chunk (a transparent colour is made an alpha channel by libpng's path),
 * IDATs that are not consecutive,
 * a zlib stream that does not inflate to exactly height * (1 + rowbytes) bytes with nothing left
 * over, a filter byte over 4, a missing IEND.
 *
 * The encoder writes IHDR, IDAT and IEND — the chunks libpng writes for these kinds — with the UP
 * filter, compressed by
 * libdeflate at level HQ_PNG_FAST_LEVEL. It runs only for the default settings
 * (hq_png_zopts_for_level(-1)): an explicit level keeps zlib's exact semantics through libpng.
 *
 * Both are off (hq_png_fast_enabled() is 0) without libdeflate, or when the environment has
 * HQ_PNG_FAST=0, which forces libpng for tests and benchmarks. */
#ifndef HQ_PNG_FAST_H
#define HQ_PNG_FAST_H

#include <stddef.h>
#include <stdint.h>

#include "../../core/error.h"
#include "format.h"

/* 1 when the fast path may be used (built with libdeflate and HQ_PNG_FAST is not "0"). */
int hq_png_fast_enabled(void);

/* Decodes the whole file in buf[0..len) into dst (dst_bytes must equal the image's size) and fills
 * *info. 1: done; 0: declined, use libpng. */
int hq_png_fast_decode(const unsigned char *buf, size_t len, hq_png_info *info, void *dst, uint64_t dst_bytes);

/* 1 when hq_png_fast_encode handles this image at these settings. */
int hq_png_fast_can_encode(const hq_png_info *info, const hq_png_zopts *z);

/* Encodes into snk. Returns 0 or an HQ_E* code with one line in err, worded as the libpng path's
 * ("NAME: cannot write (...)", "NAME: out of memory encoding PNG"). */
int hq_png_fast_encode(hq_png_sink *snk, const hq_png_info *info, const void *pixels, hq_err *err);

#endif
