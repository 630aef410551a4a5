/* codec.c — the filters the backend runs itself on its workers, bit-compatible with HDF5's own:
 * deflate (H5Z_FILTER_DEFLATE: a zlib stream, as zlib's compress2 writes it), shuffle
 * (H5Z_FILTER_SHUFFLE: byte planes), and the byte swap of big-endian 16-bit samples.
 *
 * Contract:
 *  - One hdf5_codec per worker thread (libdeflate's (de)compressors are not shared); everything
 *    else here is a pure function of its arguments and safe on any thread.
 *  - hdf5_inflate succeeds only when the stream decodes to exactly `want` bytes. A complete stream
 *    of another length is -2: the chunk is damaged, and HDF5 1.10 would take it (its deflate
 *    filter returns what it got, and the rest of the chunk is whatever its buffer held). Anything
 *    else is -1, left for HDF5 to judge (the caller falls back to the library path).
 *  - hdf5_deflate writes a zlib stream any inflater reads (h5py, h5dump, HDF5 itself); its bytes may
 *    differ from zlib's at the same level, never the data they decode to. With libdeflate (built
 *    with HQ_HAVE_LIBDEFLATE) both ways run 2-3x faster than zlib; zlib is the fallback.
 *  - Level 1, the level asked for speed, deflates with ISA-L's igzip where the build has it
 *    (../zfast.h: twice libdeflate's speed, streams about 5% larger than zlib's). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef HQ_HAVE_LIBDEFLATE
#include <libdeflate.h>
#else
#include <zlib.h>
#endif

#include "../zfast.h"
#include "hdf5_internal.h"

struct hdf5_codec {
#ifdef HQ_HAVE_LIBDEFLATE
    struct libdeflate_decompressor *dec;
    struct libdeflate_compressor *enc;
    int enc_level;
#else
    int unused;
#endif
    hq_zfast *fast; /* level 1's igzip state (../zfast.h), made on first use */
};

hdf5_codec *hdf5_codec_new(void)
{
    return calloc(1, sizeof(hdf5_codec));
}

void hdf5_codec_free(hdf5_codec *c)
{
    if (!c)
        return;
#ifdef HQ_HAVE_LIBDEFLATE
    if (c->dec)
        libdeflate_free_decompressor(c->dec);
    if (c->enc)
        libdeflate_free_compressor(c->enc);
#endif
    hq_zfast_free(c->fast);
    free(c);
}

int hdf5_inflate(hdf5_codec *c, const void *in, size_t n, void *out, size_t want)
{
#ifdef HQ_HAVE_LIBDEFLATE
    if (!c->dec && !(c->dec = libdeflate_alloc_decompressor()))
        return -1;
    size_t got = 0;
    const enum libdeflate_result r = libdeflate_zlib_decompress(c->dec, in, n, out, want, &got);
    if (r == LIBDEFLATE_SUCCESS)
        return got == want ? 0 : -2;
    return r == LIBDEFLATE_INSUFFICIENT_SPACE ? -2 : -1;
#else
    (void)c;
    uLongf got = (uLongf)want;
    const int r = uncompress(out, &got, in, (uLong)n);
    if (r == Z_OK)
        return got == want ? 0 : -2;
    return -1;
#endif
}

#ifdef HQ_HAVE_LIBDEFLATE
/* The worker's compressor at `level` (HDF5's 0-9 mean the same in libdeflate, which goes to 12). */
static struct libdeflate_compressor *encoder(hdf5_codec *c, int level)
{
    if (c->enc && c->enc_level != level) {
        libdeflate_free_compressor(c->enc);
        c->enc = NULL;
    }
    if (!c->enc) {
        c->enc = libdeflate_alloc_compressor(level);
        c->enc_level = level;
    }
    return c->enc;
}
#endif

/* Room for either deflater: level 1 falls back to libdeflate (or zlib) where igzip declines. */
size_t hdf5_deflate_bound(hdf5_codec *c, int level, size_t n)
{
#ifdef HQ_HAVE_LIBDEFLATE
    struct libdeflate_compressor *e = encoder(c, level);
    size_t bound = e ? libdeflate_zlib_compress_bound(e, n) : 0;
#else
    (void)c;
    size_t bound = (size_t)compressBound((uLong)n);
#endif
    if (level == 1 && hq_zfast_on() && hq_zfast_bound(n) > bound)
        bound = hq_zfast_bound(n);
    return bound;
}

size_t hdf5_deflate(hdf5_codec *c, int level, const void *in, size_t n, void *out, size_t cap)
{
    if (level == 1 && hq_zfast_on()) {
        const size_t got = hq_zfast_compress(&c->fast, in, n, out, cap);
        if (got)
            return got;
    }
#ifdef HQ_HAVE_LIBDEFLATE
    struct libdeflate_compressor *e = encoder(c, level);
    return e ? libdeflate_zlib_compress(e, in, n, out, cap) : 0;
#else
    (void)c;
    uLongf got = (uLongf)cap;
    return compress2(out, &got, in, (uLong)n, level) == Z_OK ? (size_t)got : 0;
#endif
}

/* HDF5's shuffle: byte j of element i goes to plane j, position i; bytes past the last whole
 * element stay where they are. Elements of one byte are left as they are. */
void hdf5_shuffle(unsigned char *dst, const unsigned char *src, size_t n, size_t elem)
{
    const size_t count = elem > 1 ? n / elem : 0;
    for (size_t j = 0; j < elem && count; j++)
        for (size_t i = 0; i < count; i++)
            dst[j * count + i] = src[i * elem + j];
    memcpy(dst + count * elem, src + count * elem, n - count * elem);
}

void hdf5_unshuffle(unsigned char *dst, const unsigned char *src, size_t n, size_t elem)
{
    const size_t count = elem > 1 ? n / elem : 0;
    for (size_t j = 0; j < elem && count; j++)
        for (size_t i = 0; i < count; i++)
            dst[i * elem + j] = src[j * count + i];
    memcpy(dst + count * elem, src + count * elem, n - count * elem);
}
