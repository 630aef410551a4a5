/* codec.c — the filters the backend runs itself on its workers, bit-compatible with HDF5's own:
 * deflate (H5Z_FILTER_DEFLATE: a zlib stream, as zlib's compress2 writes it), shuffle
 * (H5Z_FILTER_SHUFFLE: byte planes), and the byte swap of big-endian 16-bit samples.
 *
 * Contract:
 *  - One hdf5_codec per worker thread (libdeflate's (de)compressors are not shared); everything
 *    else here is a pure function of its arguments and safe on any thread.
 *  - hdf5_inflate succeeds only when the stream decodes to exactly `want` bytes; anything else is
 *    left for HDF5 to judge (the caller falls back to the library path).
 *  - hdf5_deflate writes a zlib stream any inflater reads (h5py, h5dump, HDF5 itself); its bytes may
 *    differ from zlib's at the same level, never the data they decode to. With libdeflate (built
 *    with HQ_HAVE_LIBDEFLATE) both ways run 2-3x faster than zlib; zlib is the fallback.
 *  - Level 1, the level asked for speed, deflates with ISA-L's igzip (built with HQ_HAVE_ISAL;
 *    HQ_ISAL=0 in the environment turns it off) at its level 2: on 4096^2 uint8 slices of noisy
 *    and of smooth images, one core of the 2-core build VM, 194 and 224 MB/s against libdeflate's
 *    level 1 at 96 and 102 MB/s and zlib's at 41, with streams 5% larger than zlib's level 1
 *    (0.620 and 0.658 of the data against 0.590 and 0.624; libdeflate 0.603 and 0.635). Its level
 *    1 was 2% slower and 15% faster on the two, and 7-13% larger. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef HQ_HAVE_LIBDEFLATE
#include <libdeflate.h>
#else
#include <zlib.h>
#endif
#ifdef HQ_HAVE_ISAL
#include <isa-l/igzip_lib.h>
#define ISAL_LEVEL 2
#define ISAL_LEVEL_BUF ISAL_DEF_LVL2_DEFAULT
#endif

#include "hdf5_internal.h"

struct hdf5_codec {
#ifdef HQ_HAVE_LIBDEFLATE
    struct libdeflate_decompressor *dec;
    struct libdeflate_compressor *enc;
    int enc_level;
#else
    int unused;
#endif
#ifdef HQ_HAVE_ISAL
    unsigned char *isal_buf; /* igzip's hash tables for ISAL_LEVEL, made on first use */
#endif
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
#ifdef HQ_HAVE_ISAL
    free(c->isal_buf);
#endif
    free(c);
}

int hdf5_inflate(hdf5_codec *c, const void *in, size_t n, void *out, size_t want)
{
#ifdef HQ_HAVE_LIBDEFLATE
    if (!c->dec && !(c->dec = libdeflate_alloc_decompressor()))
        return -1;
    size_t got = 0;
    return libdeflate_zlib_decompress(c->dec, in, n, out, want, &got) == LIBDEFLATE_SUCCESS && got == want ? 0 : -1;
#else
    (void)c;
    uLongf got = (uLongf)want;
    return uncompress(out, &got, in, (uLong)n) == Z_OK && got == want ? 0 : -1;
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

const char *hq_io_deflate_info(void)
{
#if defined HQ_HAVE_ISAL && defined HQ_HAVE_LIBDEFLATE
    return "ISA-L igzip for level 1 (HQ_ISAL=0: off), libdeflate for the other levels and for inflating";
#elif defined HQ_HAVE_ISAL
    return "ISA-L igzip for level 1 (HQ_ISAL=0: off), zlib for the other levels and for inflating";
#elif defined HQ_HAVE_LIBDEFLATE
    return "libdeflate";
#else
    return "zlib";
#endif
}

#ifdef HQ_HAVE_ISAL
/* Whether level goes to igzip: level 1 unless HQ_ISAL=0. */
static int use_isal(int level)
{
    static int off = -1;
    if (off < 0) {
        const char *s = getenv("HQ_ISAL");
        __atomic_store_n(&off, s && strcmp(s, "0") == 0, __ATOMIC_RELAXED);
    }
    return level == 1 && !__atomic_load_n(&off, __ATOMIC_RELAXED);
}

/* One zlib stream of in, or 0 when it does not fit cap (the caller then stores nothing direct). */
static size_t igzip_deflate(hdf5_codec *c, const void *in, size_t n, void *out, size_t cap)
{
    if (n > UINT32_MAX || cap > UINT32_MAX || (!c->isal_buf && !(c->isal_buf = malloc(ISAL_LEVEL_BUF))))
        return 0;
    struct isal_zstream s;
    isal_deflate_stateless_init(&s);
    s.level = ISAL_LEVEL;
    s.level_buf = c->isal_buf;
    s.level_buf_size = ISAL_LEVEL_BUF;
    s.gzip_flag = IGZIP_ZLIB;
    s.end_of_stream = 1;
    s.flush = NO_FLUSH;
    s.next_in = (uint8_t *)in;
    s.avail_in = (uint32_t)n;
    s.next_out = out;
    s.avail_out = (uint32_t)cap;
    return isal_deflate_stateless(&s) == COMP_OK ? (size_t)s.total_out : 0;
}
#endif

size_t hdf5_deflate_bound(hdf5_codec *c, int level, size_t n)
{
#ifdef HQ_HAVE_ISAL
    /* Stored blocks at worst: 5 bytes each of up to 64 KiB, and the zlib wrapper; generous. */
    if (use_isal(level))
        return n + n / 1024 * 5 + 1024;
#endif
#ifdef HQ_HAVE_LIBDEFLATE
    struct libdeflate_compressor *e = encoder(c, level);
    return e ? libdeflate_zlib_compress_bound(e, n) : 0;
#else
    (void)c;
    (void)level;
    return (size_t)compressBound((uLong)n);
#endif
}

size_t hdf5_deflate(hdf5_codec *c, int level, const void *in, size_t n, void *out, size_t cap)
{
#ifdef HQ_HAVE_ISAL
    if (use_isal(level)) {
        const size_t got = igzip_deflate(c, in, n, out, cap);
        if (got)
            return got;
    }
#endif
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

void hdf5_swap16(unsigned char *p, size_t n)
{
    for (size_t i = 0; i + 1 < n; i += 2) {
        const unsigned char t = p[i];
        p[i] = p[i + 1];
        p[i + 1] = t;
    }
}
