/* fast.c — whole-image PNG decode and encode through libdeflate for the common kinds (see
 * fast.h). libpng inflates and deflates through zlib a row at a time; libdeflate works on the
 * whole stream at once and is 2-3x faster at both, which is most of a PNG's cost.
 *
 * Every size is computed in 64 bits with overflow checks; a size that does not fit makes the
 * decoder decline (libpng then says what is wrong) and the encoder report out of memory. */
#include "fast.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <png.h>
#include <zlib.h>

#include "../../core/sample.h"
#include "../zfast.h"

#ifndef HQ_PNG_FAST_LEVEL
/* libdeflate level 1 on UP-filtered rows: faster than zlib level 1 with Z_RLE and no larger on
 * bench/png_bench.cpp's images (bench/results/png_bench.txt). */
#define HQ_PNG_FAST_LEVEL 1
#endif
/* IDAT chunks of at most this many bytes: any size up to 2^31-1 is valid; this keeps each write
 * moderate and matches what common decoders expect to see. */
#define HQ_PNG_FAST_IDAT ((size_t)1 << 20)
/* libpng (codec.c's HQ_PNG_CHUNK_MAX) refuses a non-IDAT chunk longer than this. */
#define HQ_PNG_FAST_CHUNK_MAX ((uint32_t)256 << 20)

#ifdef HQ_HAVE_LIBDEFLATE
#include <libdeflate.h>

int hq_png_fast_enabled(void)
{
    const char *e = getenv("HQ_PNG_FAST");
    return !(e && strcmp(e, "0") == 0);
}

static int channels_of(int color_type)
{
    switch (color_type) {
    case PNG_COLOR_TYPE_GRAY: return 1;
    case PNG_COLOR_TYPE_GRAY_ALPHA: return 2;
    case PNG_COLOR_TYPE_RGB: return 3;
    case PNG_COLOR_TYPE_RGB_ALPHA: return 4;
    default: return 0; /* palette or invalid: not ours */
    }
}

/* Bytes of one row of samples and of the whole filtered stream (rows of 1 + row_bytes); 0 when a
 * size overflows 64 bits or size_t. */
static int stream_sizes(uint32_t width, uint32_t height, int channels, int depth, size_t *row_bytes,
                        size_t *raw_bytes)
{
    uint64_t rb, raw;
    if (__builtin_mul_overflow((uint64_t)width, (uint64_t)channels * (uint64_t)(depth / 8), &rb) ||
        __builtin_mul_overflow(rb + 1, (uint64_t)height, &raw) || raw > SIZE_MAX)
        return 0;
    *row_bytes = (size_t)rb;
    *raw_bytes = (size_t)raw;
    return 1;
}

/* ---- decoding ---------------------------------------------------------------------------- */

/* What the chunk walk found: the header and where the IDAT run starts. */
typedef struct fast_scan {
    hq_png_info info;
    size_t row_bytes, raw_bytes;
    size_t idat_pos;   /* offset of the first IDAT chunk's length field */
    size_t idat_total; /* sum of IDAT payload lengths */
    int nidat;
} fast_scan;

/* libpng rejects chunk types that are not four ASCII letters. */
static int valid_chunk_type(const unsigned char *t)
{
    for (int i = 0; i < 4; i++)
        if (!((t[i] >= 'A' && t[i] <= 'Z') || (t[i] >= 'a' && t[i] <= 'z')))
            return 0;
    return 1;
}

/* IHDR: only the kinds we decode; anything else (palette, sub-byte, interlaced, invalid) declines. */
static int take_ihdr(fast_scan *s, const unsigned char *d, uint32_t n)
{
    if (n != 13)
        return 0;
    const uint32_t w = hq_png_be32(d), h = hq_png_be32(d + 4);
    const int depth = d[8], ctype = d[9], channels = channels_of(ctype);
    if (w == 0 || h == 0 || w > 0x7fffffffu || h > 0x7fffffffu || channels == 0 || (depth != 8 && depth != 16) ||
        d[10] != 0 || d[11] != 0 || d[12] != 0)
        return 0;
    if (!stream_sizes(w, h, channels, depth, &s->row_bytes, &s->raw_bytes))
        return 0;
    hq_png_info *in = &s->info;
    memset(in, 0, sizeof *in);
    in->width = w;
    in->height = h;
    in->color_type = ctype;
    in->bit_depth = depth;
    in->channels = (uint32_t)channels;
    in->sample_bytes = depth == 16 ? 2 : 1;
    in->depth = (uint32_t)depth;
    return 1;
}

/* libpng's cap on one IDAT chunk (png_check_chunk_length): the raw size plus zlib's worst-case
 * overhead. A longer chunk is libpng's error to word. */
static uint64_t idat_limit(const fast_scan *s)
{
    const uint64_t row = s->row_bytes + 1, per = row > 32566 ? 32566 : row;
    const uint64_t limit = (uint64_t)s->raw_bytes + 6 + 5 * ((uint64_t)s->raw_bytes / per + 1);
    return limit < 0x7fffffffu ? limit : 0x7fffffffu;
}

/* Walks the chunks from the signature to IEND, checking every CRC. 1: a file we decode. */
static int scan_chunks(const unsigned char *buf, size_t len, fast_scan *s)
{
    if (!hq_png_has_signature(buf, len))
        return 0;
    memset(s, 0, sizeof *s);
    size_t pos = 8;
    int seen_ihdr = 0, idat_state = 0; /* 0 none yet, 1 in the run, 2 after it */
    for (;;) {
        if (len - pos < 12)
            return 0; /* truncated: libpng says how */
        const uint32_t n = hq_png_be32(buf + pos);
        const unsigned char *type = buf + pos + 4, *data = buf + pos + 8;
        if (n > 0x7fffffffu || len - pos - 12 < n || !valid_chunk_type(type))
            return 0;
        if (libdeflate_crc32(0, type, (size_t)n + 4) != hq_png_be32(data + n))
            return 0;
        const int is_idat = memcmp(type, "IDAT", 4) == 0;
        if (!seen_ihdr) {
            if (memcmp(type, "IHDR", 4) != 0 || !take_ihdr(s, data, n))
                return 0;
            seen_ihdr = 1;
        } else if (is_idat) {
            if (idat_state == 2 || n > idat_limit(s))
                return 0;
            if (idat_state == 0)
                s->idat_pos = pos;
            idat_state = 1;
            s->idat_total += n;
            s->nidat++;
        } else if (memcmp(type, "IEND", 4) == 0) {
            return n == 0 && idat_state != 0;
        } else if (type[0] >= 'A' && type[0] <= 'Z') {
            return 0; /* IHDR again, PLTE, or an unknown critical chunk */
        } else if (memcmp(type, "tRNS", 4) == 0) {
            return 0; /* a transparent colour: libpng makes it an alpha channel (codec.c) */
        } else if (n > HQ_PNG_FAST_CHUNK_MAX) {
            return 0;
        }
        /* Other ancillary chunks (gAMA, sBIT, pHYs, text, ...) change nothing the libpng path
         * gives: it applies no transform from them and format.h records none of them. */
        if (is_idat == 0 && idat_state == 1)
            idat_state = 2;
        pos += (size_t)n + 12;
    }
}

/* The zlib stream: the one IDAT's payload in place, or the run's payloads copied together. */
static const unsigned char *gather_idat(const unsigned char *buf, const fast_scan *s, unsigned char **owned)
{
    *owned = NULL;
    if (s->nidat == 1)
        return buf + s->idat_pos + 8;
    unsigned char *z = malloc(s->idat_total ? s->idat_total : 1);
    if (!z)
        return NULL;
    size_t pos = s->idat_pos, at = 0;
    for (int i = 0; i < s->nidat; i++) {
        const uint32_t n = hq_png_be32(buf + pos);
        memcpy(z + at, buf + pos + 8, n);
        at += n;
        pos += (size_t)n + 12;
    }
    *owned = z;
    return z;
}

static inline uint8_t paeth(int a, int b, int c)
{
    const int p = a + b - c;
    const int pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);
    return (uint8_t)(pa <= pb && pa <= pc ? a : pb <= pc ? b : c);
}

/* Gray 8-bit rows (one byte per pixel) keep the left neighbour in a register: the Sub, Average
 * and Paeth recurrences are serial, and reloading out[i - 1] from memory doubles their cost. */
static void unfilter_row_bpp1(uint8_t *restrict out, const uint8_t *restrict in, const uint8_t *restrict prior,
                              size_t n, int f)
{
    uint8_t left = 0, ul = 0;
    for (size_t i = 0; i < n; i++) {
        const uint8_t up = prior[i];
        switch (f) {
        case 1: left = (uint8_t)(in[i] + left); break;
        case 3: left = (uint8_t)(in[i] + ((left + up) >> 1)); break;
        default: left = (uint8_t)(in[i] + paeth(left, up, ul)); break;
        }
        ul = up;
        out[i] = left;
    }
}

/* One row: out = unfiltered in, prior = the previous unfiltered row (zeros for the first). */
static int unfilter_row(uint8_t *restrict out, const uint8_t *restrict in, const uint8_t *restrict prior, size_t n,
                        size_t bpp, int f)
{
    size_t i;
    if (f > 4)
        return 0; /* libpng: "bad adaptive filter value" */
    if (f == 0) {
        memcpy(out, in, n);
        return 1;
    }
    if (f == 2) {
        for (i = 0; i < n; i++)
            out[i] = (uint8_t)(in[i] + prior[i]);
        return 1;
    }
    if (bpp == 1) {
        unfilter_row_bpp1(out, in, prior, n, f);
        return 1;
    }
    switch (f) {
    case 1:
        memcpy(out, in, bpp < n ? bpp : n);
        for (i = bpp; i < n; i++)
            out[i] = (uint8_t)(in[i] + out[i - bpp]);
        return 1;
    case 3:
        for (i = 0; i < bpp && i < n; i++)
            out[i] = (uint8_t)(in[i] + (prior[i] >> 1));
        for (; i < n; i++)
            out[i] = (uint8_t)(in[i] + ((out[i - bpp] + prior[i]) >> 1));
        return 1;
    default:
        for (i = 0; i < bpp && i < n; i++)
            out[i] = (uint8_t)(in[i] + prior[i]); /* paeth(0, b, 0) == b */
        for (; i < n; i++)
            out[i] = (uint8_t)(in[i] + paeth(out[i - bpp], prior[i], prior[i - bpp]));
        return 1;
    }
}

/* Unfilters every row into dst. Rows stay big-endian until the next row has used them as its
 * prior, then become native. */
static int unfilter_image(const fast_scan *s, const uint8_t *raw, uint8_t *dst)
{
    const size_t rb = s->row_bytes, bpp = (size_t)s->info.channels * s->info.sample_bytes;
    const int swap = s->info.bit_depth == 16 && hq_host_little_endian();
    uint8_t *zero = calloc(rb, 1);
    if (!zero)
        return 0;
    int ok = 1;
    for (size_t r = 0; ok && r < s->info.height; r++) {
        const uint8_t *in = raw + r * (rb + 1);
        uint8_t *out = dst + r * rb;
        ok = unfilter_row(out, in + 1, r ? out - rb : zero, rb, bpp, in[0]);
        if (ok && swap && r)
            hq_swap16(out - rb, rb);
    }
    if (ok && swap)
        hq_swap16(dst + (s->info.height - 1) * rb, rb);
    free(zero);
    return ok;
}

int hq_png_fast_decode(const unsigned char *buf, size_t len, hq_png_info *info, void *dst, uint64_t dst_bytes)
{
    fast_scan s;
    if (!hq_png_fast_enabled() || !dst || !scan_chunks(buf, len, &s))
        return 0;
    if (dst_bytes != (uint64_t)s.row_bytes * s.info.height)
        return 0; /* the libpng path words the mismatch */
    unsigned char *owned = NULL, *raw = NULL;
    const unsigned char *z = gather_idat(buf, &s, &owned);
    struct libdeflate_decompressor *d = z ? libdeflate_alloc_decompressor() : NULL;
    raw = d ? malloc(s.raw_bytes) : NULL;
    int ok = 0;
    if (raw) {
        size_t in_used = 0, out_got = 0;
        ok = libdeflate_zlib_decompress_ex(d, z, s.idat_total, raw, s.raw_bytes, &in_used, &out_got) ==
                     LIBDEFLATE_SUCCESS &&
             in_used == s.idat_total && out_got == s.raw_bytes && unfilter_image(&s, raw, dst);
    }
    free(raw);
    if (d)
        libdeflate_free_decompressor(d);
    free(owned);
    if (ok)
        *info = s.info;
    return ok;
}

/* ---- encoding ---------------------------------------------------------------------------- */

int hq_png_fast_can_encode(const hq_png_info *info, const hq_png_zopts *z)
{
    const hq_png_zopts def = hq_png_zopts_for_level(-1);
    return hq_png_fast_enabled() && info->width > 0 && info->height > 0 &&
           channels_of(info->color_type) == (int)info->channels &&
           (info->bit_depth == 8 || info->bit_depth == 16) && z->level == def.level &&
           z->strategy == def.strategy && z->filters == def.filters && z->mem_level == def.mem_level &&
           z->zbuf == def.zbuf;
}

/* Filters every row with UP (the libpng path's choice at the default; the first row, whose prior
 * is zeros, as NONE) into raw, from native samples to big-endian PNG bytes. */
static int filter_image(const hq_png_info *in, const uint8_t *px, size_t rb, uint8_t *raw)
{
    const int swap = in->bit_depth == 16 && hq_host_little_endian();
    uint8_t *rows = swap ? malloc(2 * rb) : NULL;
    if (swap && !rows)
        return 0;
    const uint8_t *prev = NULL;
    for (size_t r = 0; r < in->height; r++) {
        const uint8_t *cur = px + r * rb;
        uint8_t *out = raw + r * (rb + 1);
        if (swap) {
            uint8_t *be = rows + (r & 1) * rb;
            memcpy(be, cur, rb);
            hq_swap16(be, rb);
            cur = be;
        }
        out[0] = prev ? 2 : 0;
        if (prev)
            for (size_t i = 0; i < rb; i++)
                out[1 + i] = (uint8_t)(cur[i] - prev[i]);
        else
            memcpy(out + 1, cur, rb);
        prev = cur;
    }
    free(rows);
    return 1;
}

typedef struct fast_out {
    hq_png_sink *snk;
    int io_errno, oom;
} fast_out;

static int put(fast_out *o, const void *p, size_t n)
{
    hq_png_sink *s = o->snk;
    if (n == 0)
        return 1; /* IEND's empty payload: no NULL pointer reaches fwrite or memcpy */
    if (s->fp) {
        if (fwrite(p, 1, n, s->fp) != n) {
            o->io_errno = errno ? errno : EIO;
            return 0;
        }
        return 1;
    }
    if (n > s->cap - s->len) {
        size_t cap = s->cap ? s->cap : 1 << 20;
        while (cap - s->len < n)
            cap *= 2;
        unsigned char *b = realloc(s->buf, cap);
        if (!b) {
            o->oom = 1;
            return 0;
        }
        s->buf = b;
        s->cap = cap;
    }
    memcpy(s->buf + s->len, p, n);
    s->len += n;
    return 1;
}

static int put_chunk(fast_out *o, const char *type, const unsigned char *data, uint32_t n)
{
    unsigned char head[8], tail[4];
    hq_png_put_be32(head, n);
    memcpy(head + 4, type, 4);
    /* libdeflate_crc32 with a NULL buffer restarts the checksum (zlib's idiom): IEND has none. */
    uint32_t crc = libdeflate_crc32(0, type, 4);
    if (n)
        crc = libdeflate_crc32(crc, data, n);
    hq_png_put_be32(tail, crc);
    return put(o, head, 8) && put(o, data, n) && put(o, tail, 4);
}

static int put_file(fast_out *o, const hq_png_info *in, const unsigned char *z, size_t zn)
{
    unsigned char ihdr[13];
    hq_png_put_be32(ihdr, in->width);
    hq_png_put_be32(ihdr + 4, in->height);
    ihdr[8] = (unsigned char)in->bit_depth;
    ihdr[9] = (unsigned char)in->color_type;
    ihdr[10] = ihdr[11] = ihdr[12] = 0;
    if (!put(o, hq_png_signature, 8) || !put_chunk(o, "IHDR", ihdr, 13))
        return 0;
    for (size_t at = 0; at < zn; at += HQ_PNG_FAST_IDAT) {
        const size_t n = zn - at < HQ_PNG_FAST_IDAT ? zn - at : HQ_PNG_FAST_IDAT;
        if (!put_chunk(o, "IDAT", z + at, (uint32_t)n))
            return 0;
    }
    return put_chunk(o, "IEND", NULL, 0);
}

int hq_png_fast_encode(hq_png_sink *snk, const hq_png_info *info, const void *pixels, hq_err *err)
{
    size_t rb = 0, raw_bytes = 0;
    if (!stream_sizes(info->width, info->height, (int)info->channels, info->bit_depth, &rb, &raw_bytes))
        return hq_fail(err, HQ_EMEM, "%s: out of memory encoding PNG", snk->name);
    fast_out o = {.snk = snk};
    struct libdeflate_compressor *c = libdeflate_alloc_compressor(HQ_PNG_FAST_LEVEL);
    uint8_t *raw = c ? malloc(raw_bytes ? raw_bytes : 1) : NULL;
    size_t bound = c ? libdeflate_zlib_compress_bound(c, raw_bytes) : 0;
    if (hq_zfast_on() && hq_zfast_bound(raw_bytes) > bound)
        bound = hq_zfast_bound(raw_bytes);
    unsigned char *z = raw ? malloc(bound) : NULL;
    int ok = z && filter_image(info, pixels, rb, raw);
    /* igzip where the build has it (../zfast.h): twice libdeflate's speed, a few per cent larger. */
    hq_zfast *fast = NULL;
    size_t zn = ok ? hq_zfast_compress(&fast, raw, raw_bytes, z, bound) : 0;
    hq_zfast_free(fast);
    if (ok && zn == 0)
        zn = libdeflate_zlib_compress(c, raw, raw_bytes, z, bound);
    free(raw);
    if (c)
        libdeflate_free_compressor(c);
    o.oom = !ok || zn == 0; /* the bound makes zn == 0 impossible short of a bug */
    if (!o.oom)
        ok = put_file(&o, info, z, zn);
    free(z);
    if (o.io_errno)
        return hq_fail(err, HQ_EIO, "%s: cannot write (%s)", snk->name, strerror(o.io_errno));
    if (o.oom || !ok)
        return hq_fail(err, HQ_EMEM, "%s: out of memory encoding PNG", snk->name);
    return 0;
}

#else /* no libdeflate: libpng does everything */

int hq_png_fast_enabled(void)
{
    return 0;
}

int hq_png_fast_decode(const unsigned char *buf, size_t len, hq_png_info *info, void *dst, uint64_t dst_bytes)
{
    (void)buf, (void)len, (void)info, (void)dst, (void)dst_bytes;
    return 0;
}

int hq_png_fast_can_encode(const hq_png_info *info, const hq_png_zopts *z)
{
    (void)info, (void)z;
    return 0;
}

int hq_png_fast_encode(hq_png_sink *snk, const hq_png_info *info, const void *pixels, hq_err *err)
{
    (void)info, (void)pixels;
    return hq_fail(err, HQ_EIO, "%s: PNG fast path not built", snk->name);
}

#endif
