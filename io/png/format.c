/* format.c — what the PNG codecs share (format.h): the signature, an image's size, the encoder's
 * settings for a level. */
#include "format.h"

#include <string.h>

#include <png.h>
#include <zlib.h>

const unsigned char hq_png_signature[8] = {137, 80, 78, 71, 13, 10, 26, 10};

int hq_png_has_signature(const void *buf, size_t len)
{
    return len >= 8 && memcmp(buf, hq_png_signature, 8) == 0;
}

/* Saturates rather than wraps: 2^31 x 2^31 RGBA16 is 2^65 bytes, and a wrapped size could match
 * a small buffer that hq_png_decode would then overrun. */
uint64_t hq_png_image_bytes(const hq_png_info *info)
{
    uint64_t n = 0;
    if (__builtin_mul_overflow((uint64_t)info->height, (uint64_t)info->width, &n) ||
        __builtin_mul_overflow(n, (uint64_t)info->channels * info->sample_bytes, &n))
        return UINT64_MAX;
    return n;
}

hq_png_zopts hq_png_zopts_for_level(int png_level)
{
    /* An explicit level behaves like libpng's own defaults at that level: adaptive filters with
     * the Z_FILTERED strategy (on filtered image data it beats Z_DEFAULT_STRATEGY by ~8%). */
    hq_png_zopts z = {.level = png_level, .strategy = Z_FILTERED, .filters = PNG_ALL_FILTERS,
                      .mem_level = 8, .zbuf = 256 << 10};
    if (png_level < 0 || png_level > 9) {
        /* OpenCV's choice (level 1, run-length matching) with the UP filter and a larger IDAT
         * buffer, which measured a little faster and smaller (bench/results/png_bench.txt).
         * Run-length matching, unlike Huffman-only, still shrinks flat backgrounds to nothing. */
        z.level = 1;
        z.strategy = Z_RLE;
        z.filters = PNG_FILTER_UP;
    }
    return z;
}
