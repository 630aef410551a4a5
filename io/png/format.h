/* format.h — what the PNG codecs (codec.h: libpng; fast.h: libdeflate) and their callers exchange:
 * an image's header and decoded shape, where bytes come from and go to, how the encoder compresses;
 * and the few facts of the format they share. No I/O, nothing printed. */
#ifndef HQ_PNG_FORMAT_H
#define HQ_PNG_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

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
    int key_alpha;        /* gray/RGB tRNS (one transparent colour): decoded with an alpha channel
                             made from it, color_type and channels saying so; outputs are gray+alpha
                             or RGBA, with no tRNS */
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

/* The 8 bytes every PNG file starts with. */
extern const unsigned char hq_png_signature[8];

/* 1 when buf starts with the 8-byte PNG signature. */
int hq_png_has_signature(const void *buf, size_t len);

/* Bytes of the decoded image: height * width * channels * sample_bytes (UINT64_MAX when that does
 * not fit 64 bits: 2^31 x 2^31 RGBA16 would wrap around). */
uint64_t hq_png_image_bytes(const hq_png_info *info);

/* PNG's 32-bit big-endian fields (chunk lengths, CRCs, IHDR sizes), read and written. */
static inline uint32_t hq_png_be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static inline void hq_png_put_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

#ifdef __cplusplus
}
#endif

#endif
