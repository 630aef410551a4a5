/* mode.h — what is being equalized: the sample layout of a block and the options that decide how.
 *
 * A block is a run of pixels, channels interleaved, samples native-endian uint8 or uint16, or, for
 * float data (fbins != 0, one channel), float32 or float64.
 * hq_mode fixes how many histograms a block yields (nhist) and how many bins each has (1 << bits,
 * or fbins for float data, binned as core/fbin.h says). */
#ifndef HQ_MODE_H
#define HQ_MODE_H

#include <stdint.h>

typedef enum { HQ_COLOR_LUMA = 0, HQ_COLOR_CHANNELS = 1, HQ_COLOR_VALUE = 2 } hq_color;
/* clahe: local, per tile (core/clahe.h); the others build one LUT per histogram (core/lut.h). */
typedef enum { HQ_METHOD_EQUALIZE = 0, HQ_METHOD_STRETCH = 1, HQ_METHOD_MATCH = 2, HQ_METHOD_CLAHE = 3 } hq_method;
/* What one histogram covers: an image (a slice of a stack), everything, or a dataset (an N x H x W
 * stack as one 3-D image; a PNG file is a dataset of one image). */
typedef enum { HQ_SCOPE_AUTO = 0, HQ_SCOPE_IMAGE = 1, HQ_SCOPE_GLOBAL = 2, HQ_SCOPE_DATASET = 3 } hq_scope;

typedef struct hq_mode {
    uint32_t channels;     /* 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA; alpha is never touched */
    uint32_t sample_bytes; /* 1 or 2 */
    uint32_t bits;         /* significant bits: 1..16; bins = 1 << bits */
    hq_color color;        /* only read when channels >= 3 */
    uint32_t fbins;        /* float data: bins of equal width, 2..65536 (sample_bytes 4: float32,
                              8: float64; bits unused); 0: integer samples */
} hq_mode;

static inline uint32_t hq_mode_bins(const hq_mode *m)
{
    return m->fbins ? m->fbins : 1u << m->bits;
}

/* Histograms per block: three for independent R, G, B; one otherwise (gray, luma, value). */
static inline uint32_t hq_mode_nhist(const hq_mode *m)
{
    return (m->channels >= 3 && m->color == HQ_COLOR_CHANNELS) ? 3u : 1u;
}

static inline const char *hq_color_name(hq_color c)
{
    return c == HQ_COLOR_CHANNELS ? "channels" : c == HQ_COLOR_VALUE ? "value" : "luma";
}
static inline const char *hq_method_name(hq_method m)
{
    return m == HQ_METHOD_STRETCH ? "stretch" : m == HQ_METHOD_MATCH ? "match" : m == HQ_METHOD_CLAHE ? "clahe"
                                                                                                   : "equalize";
}
static inline const char *hq_scope_name(hq_scope s)
{
    return s == HQ_SCOPE_GLOBAL ? "global" : s == HQ_SCOPE_IMAGE ? "image" : s == HQ_SCOPE_DATASET ? "dataset" : "auto";
}

#endif
