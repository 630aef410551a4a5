/* codec.c — libpng behind the small whole-image interface of codec.h.
 *
 * libpng reports errors by longjmp. Each libpng call sequence that may fail runs in its own small
 * "stage" function that calls setjmp first and touches no local it set before the setjmp, so no
 * local needs to be volatile; every allocation is owned by the codec struct or by the caller and
 * freed on one path, whether the stage failed or not. */
#include "codec.h"
#include "fast.h"

#include <errno.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <png.h>
#include <zlib.h>

#include "../../core/sample.h"

/* Large enough for gigapixel-wide rows; PNG itself caps dimensions at 2^31-1. */
#define HQ_PNG_MAX_DIM 0x7fffffffu
/* libpng's cap on one chunk's allocation. Only a second line: libpng reports a chunk over it as a
 * benign error, which reading turns into a warning by default, and then allocates anyway. */
#define HQ_PNG_CHUNK_MAX ((png_alloc_size_t)256 << 20)

/* One decode or encode. `head` holds the first bytes, read before libpng to tell "not a PNG" and
 * "zero-sized" from other damage; the read callback serves them first. */
typedef struct codec {
    png_structp png;
    png_infop info;
    int writing;
    const hq_png_source *src;
    size_t mem_pos;
    unsigned char head[24];
    size_t head_len, head_pos;
    hq_png_sink *snk;
    char msg[256];
    int io_errno; /* a read or write of the underlying file failed: an I/O error, not corrupt data */
    int oom;      /* growing the memory sink failed */
} codec;

static void on_png_error(png_structp png, png_const_charp msg)
{
    codec *c = png_get_error_ptr(png);
    snprintf(c->msg, sizeof c->msg, "%s", msg ? msg : "unknown libpng error");
    png_longjmp(png, 1);
}

/* Warnings (unknown chunks, bad ancillary CRCs, sRGB profile quibbles) never stop us or print. */
static void on_png_warning(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg;
}

/* ---- reading ---------------------------------------------------------------------------- */

/* Reads up to n bytes from the source (file or memory) without libpng; returns the count. */
static size_t source_read(codec *c, unsigned char *dst, size_t n)
{
    if (c->src->fp) {
        size_t got = fread(dst, 1, n, c->src->fp);
        if (got < n && ferror(c->src->fp))
            c->io_errno = errno ? errno : EIO;
        return got;
    }
    size_t left = c->src->len - c->mem_pos;
    size_t got = n < left ? n : left;
    memcpy(dst, c->src->buf + c->mem_pos, got);
    c->mem_pos += got;
    return got;
}

static void read_callback(png_structp png, png_bytep dst, size_t n)
{
    codec *c = png_get_io_ptr(png);
    size_t from_head = c->head_len - c->head_pos;
    if (from_head > n)
        from_head = n;
    memcpy(dst, c->head + c->head_pos, from_head);
    c->head_pos += from_head;
    if (from_head < n && source_read(c, dst + from_head, n - from_head) != n - from_head)
        png_error(png, c->io_errno ? "read error" : "unexpected end of file");
}

/* Signature and IHDR size, checked by hand so that these cases get plain messages. */
static int check_head(codec *c, hq_err *err)
{
    const char *name = c->src->name;
    c->head_len = source_read(c, c->head, sizeof c->head);
    if (c->io_errno)
        return hq_fail(err, HQ_EIO, "%s: cannot read (%s)", name, strerror(c->io_errno));
    if (!hq_png_has_signature(c->head, c->head_len))
        return hq_fail(err, HQ_EINPUT, c->head_len ? "%s: not a PNG file" : "%s: empty file", name);
    if (c->head_len == sizeof c->head && memcmp(c->head + 12, "IHDR", 4) == 0 &&
        (hq_png_be32(c->head + 16) == 0 || hq_png_be32(c->head + 20) == 0))
        return hq_fail(err, HQ_EINPUT, "%s: zero-sized image", name);
    return 0;
}

static int codec_fail(codec *c, const char *name, hq_err *err)
{
    if (c->io_errno)
        return hq_fail(err, HQ_EIO, "%s: %s (%s)", name, c->writing ? "cannot write" : "cannot read",
                       strerror(c->io_errno));
    if (c->oom)
        return hq_fail(err, HQ_EMEM, "%s: out of memory encoding PNG", name);
    if (c->writing)
        return hq_fail(err, HQ_EIO, "%s: cannot encode PNG (%s)", name, c->msg);
    return hq_fail(err, HQ_EINPUT, "%s: corrupt PNG (%s)", name, c->msg);
}

static int open_reader(codec *c, const hq_png_source *src, hq_err *err)
{
    memset(c, 0, sizeof *c);
    c->src = src;
    int rc = check_head(c, err);
    if (rc)
        return rc;
    c->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, c, on_png_error, on_png_warning);
    if (c->png)
        c->info = png_create_info_struct(c->png);
    if (!c->png || !c->info)
        return hq_fail(err, HQ_EMEM, "%s: out of memory opening PNG", src->name);
    png_set_read_fn(c->png, c, read_callback);
    png_set_user_limits(c->png, HQ_PNG_MAX_DIM, HQ_PNG_MAX_DIM);
    png_set_chunk_malloc_max(c->png, HQ_PNG_CHUNK_MAX);
    png_set_benign_errors(c->png, 1);
    /* Only IHDR, PLTE, tRNS, IDAT and IEND matter to us; every other chunk is skipped unread.
     * Otherwise a 57-byte file whose tEXt chunk claims 2 GiB makes libpng allocate 2 GiB (the
     * limit above being only benign), and an iCCP or zTXt chunk is inflated for nothing. */
    png_set_keep_unknown_chunks(c->png, PNG_HANDLE_CHUNK_NEVER, NULL, -1);
    /* Checking every chunk CRC costs little and is how a damaged file is told from a good one. */
    png_set_crc_action(c->png, PNG_CRC_DEFAULT, PNG_CRC_DEFAULT);
    return 0;
}

static void close_codec(codec *c)
{
    if (c->png && c->writing)
        png_destroy_write_struct(&c->png, &c->info);
    else if (c->png)
        png_destroy_read_struct(&c->png, &c->info, NULL);
}

/* Copies what the header says into *out. Runs inside a stage: png_get_* may png_error. */
static void fill_info(codec *c, hq_png_info *out)
{
    png_uint_32 w, h;
    int depth, ctype, interlace;
    png_get_IHDR(c->png, c->info, &w, &h, &depth, &ctype, &interlace, NULL, NULL);
    memset(out, 0, sizeof *out);
    out->width = w;
    out->height = h;
    out->bit_depth = depth;
    out->color_type = ctype;
    out->interlaced = interlace != PNG_INTERLACE_NONE;
    out->sample_bytes = depth == 16 ? 2 : 1;
    out->depth = (uint32_t)depth;

    png_colorp pal = NULL;
    int npal = 0;
    if (ctype == PNG_COLOR_TYPE_PALETTE && png_get_PLTE(c->png, c->info, &pal, &npal) && pal) {
        out->npalette = npal > 256 ? 256 : npal;
        for (int i = 0; i < out->npalette; i++) {
            out->palette[i][0] = pal[i].red;
            out->palette[i][1] = pal[i].green;
            out->palette[i][2] = pal[i].blue;
        }
    }
    png_bytep alpha = NULL;
    int ntrans = 0;
    png_color_16p tc = NULL;
    if (png_get_valid(c->png, c->info, PNG_INFO_tRNS) && png_get_tRNS(c->png, c->info, &alpha, &ntrans, &tc)) {
        if (ctype == PNG_COLOR_TYPE_PALETTE && alpha) {
            out->ntrans = ntrans > 256 ? 256 : ntrans;
            memcpy(out->trans_alpha, alpha, (size_t)out->ntrans);
        } else if (tc && (ctype == PNG_COLOR_TYPE_GRAY || ctype == PNG_COLOR_TYPE_RGB)) {
            /* One colour is transparent: it becomes an alpha channel (stage_set_transforms), so
             * that the same pixels stay transparent whatever the remap makes of their colour. */
            out->key_alpha = 1;
        }
    }
    switch (ctype) {
    case PNG_COLOR_TYPE_GRAY: out->channels = 1; break;
    case PNG_COLOR_TYPE_GRAY_ALPHA: out->channels = 2; break;
    case PNG_COLOR_TYPE_RGB: out->channels = 3; break;
    case PNG_COLOR_TYPE_RGB_ALPHA: out->channels = 4; break;
    default: /* palette: the samples we produce are 8-bit RGB or RGBA */
        out->channels = out->ntrans > 0 ? 4 : 3;
        out->depth = 8;
        break;
    }
    if (out->key_alpha) {
        /* Gray+alpha and RGBA hold 8 or 16 bits: 1/2/4-bit gray is read as 8-bit, scaled as libpng
         * scales it (a 4-bit 15 is 255). */
        out->channels += 1;
        out->color_type = ctype == PNG_COLOR_TYPE_GRAY ? PNG_COLOR_TYPE_GRAY_ALPHA : PNG_COLOR_TYPE_RGB_ALPHA;
        out->bit_depth = depth < 8 ? 8 : depth;
        out->depth = (uint32_t)out->bit_depth;
    }
}

static int stage_read_info(codec *c, hq_png_info *out)
{
    if (setjmp(png_jmpbuf(c->png)))
        return -1;
    png_read_info(c->png, c->info);
    fill_info(c, out);
    return 0;
}

/* Transforms to our sample layout. Palette images are read as one index byte per pixel and
 * expanded here (expand_palette), which also gives us the indices for writing back. */
static int stage_set_transforms(codec *c, const hq_png_info *in, size_t row_bytes, int *passes)
{
    if (setjmp(png_jmpbuf(c->png)))
        return -1;
    if (in->bit_depth == 16 && hq_host_little_endian())
        png_set_swap(c->png);
    if (in->key_alpha)
        png_set_tRNS_to_alpha(c->png); /* also widens 1/2/4-bit gray to 8 bits (fill_info) */
    else if (in->bit_depth < 8)
        png_set_packing(c->png);
    *passes = png_set_interlace_handling(c->png);
    png_read_update_info(c->png, c->info);
    if (png_get_rowbytes(c->png, c->info) != row_bytes)
        png_error(c->png, "unexpected row size after transforms");
    return 0;
}

/* Row by row into the image itself (each Adam7 pass fills in the rows the earlier passes began),
 * so no row-pointer array is needed: for a one-pixel-wide image it would be 8x the image. */
static int stage_read_rows(codec *c, uint8_t *image, size_t row_bytes, uint32_t height, int passes)
{
    if (setjmp(png_jmpbuf(c->png)))
        return -1;
    for (int p = 0; p < passes; p++)
        for (size_t r = 0; r < height; r++)
            png_read_row(c->png, image + r * row_bytes, NULL);
    /* Reads to IEND so that a damaged tail (bad CRC, truncation) is noticed too. */
    png_read_end(c->png, NULL);
    return 0;
}

/* An index past the palette makes the file invalid (PNG spec, PLTE). libpng lets it pass as a
 * benign error and would show it black; it is refused instead, naming the file. */
static int check_indices(const hq_png_info *in, const uint8_t *idx, uint64_t npix, const char *name, hq_err *err)
{
    uint8_t top = 0;
    for (uint64_t p = 0; p < npix; p++)
        top = idx[p] > top ? idx[p] : top;
    if (top >= in->npalette)
        return hq_fail(err, HQ_EINPUT, "%s: palette index %u past the palette's %d entries", name, top,
                       in->npalette);
    return 0;
}

static void expand_palette(const hq_png_info *in, const uint8_t *idx, uint8_t *dst, uint64_t npix)
{
    uint8_t lut[256][4];
    memset(lut, 0, sizeof lut); /* libpng expands an index past the palette to black too */
    for (int i = 0; i < 256; i++) {
        if (i < in->npalette)
            memcpy(lut[i], in->palette[i], 3);
        lut[i][3] = i < in->ntrans ? in->trans_alpha[i] : 255;
    }
    if (in->channels == 4) {
        for (uint64_t p = 0; p < npix; p++)
            memcpy(dst + 4 * p, lut[idx[p]], 4);
    } else {
        for (uint64_t p = 0; p < npix; p++)
            memcpy(dst + 3 * p, lut[idx[p]], 3);
    }
}

int hq_png_read_info(const hq_png_source *src, hq_png_info *info, hq_err *err)
{
    codec c;
    int rc = open_reader(&c, src, err);
    if (!rc && stage_read_info(&c, info))
        rc = codec_fail(&c, src->name, err);
    close_codec(&c);
    return rc;
}

/* Reads rows into `image` (row_bytes each). */
static int decode_body(codec *c, const hq_png_info *info, uint8_t *image, size_t row_bytes, hq_err *err)
{
    int passes = 1;
    if (stage_set_transforms(c, info, row_bytes, &passes) || stage_read_rows(c, image, row_bytes, info->height, passes))
        return codec_fail(c, c->src->name, err);
    return 0;
}

/* The whole file in memory for the fast path: *buf is malloc'd (the caller frees it). A read
 * error reads as check_head's. */
static int slurp(const hq_png_source *src, unsigned char **buf, size_t *len, hq_err *err)
{
    struct stat st;
    size_t cap = fstat(fileno(src->fp), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0
                     ? (size_t)st.st_size + 1 /* +1: end of file is seen without a regrowth */
                     : (size_t)1 << 20;
    unsigned char *b = malloc(cap);
    size_t n = 0;
    while (b) {
        n += fread(b + n, 1, cap - n, src->fp);
        if (n < cap)
            break;
        unsigned char *g = cap <= SIZE_MAX / 2 ? realloc(b, cap * 2) : NULL;
        if (!g)
            free(b);
        b = g;
        cap *= 2;
    }
    if (!b)
        return hq_fail(err, HQ_EMEM, "%s: out of memory decoding PNG", src->name);
    if (ferror(src->fp)) {
        int e = errno ? errno : EIO;
        free(b);
        return hq_fail(err, HQ_EIO, "%s: cannot read (%s)", src->name, strerror(e));
    }
    *buf = b;
    *len = n;
    return 0;
}

static int decode_libpng(const hq_png_source *src, hq_png_info *info, void *dst, uint64_t dst_bytes,
                         uint8_t **indices, hq_err *err);

/* The libdeflate fast path first (fast.h) on the file's bytes in memory; whatever it declines,
 * libpng decodes from those same bytes, so messages read as they always did. */
int hq_png_decode(const hq_png_source *src, hq_png_info *info, void *dst, uint64_t dst_bytes,
                  uint8_t **indices, hq_err *err)
{
    if (indices)
        *indices = NULL;
    if (!dst || !hq_png_fast_enabled())
        return decode_libpng(src, info, dst, dst_bytes, indices, err);
    if (!src->fp)
        return hq_png_fast_decode(src->buf, src->len, info, dst, dst_bytes)
                   ? 0
                   : decode_libpng(src, info, dst, dst_bytes, indices, err);
    unsigned char *buf = NULL;
    size_t len = 0;
    int rc = slurp(src, &buf, &len, err);
    if (rc)
        return rc;
    if (!hq_png_fast_decode(buf, len, info, dst, dst_bytes)) {
        const hq_png_source mem = {.name = src->name, .buf = buf, .len = len};
        rc = decode_libpng(&mem, info, dst, dst_bytes, indices, err);
    }
    free(buf);
    return rc;
}

static int decode_libpng(const hq_png_source *src, hq_png_info *info, void *dst, uint64_t dst_bytes,
                         uint8_t **indices, hq_err *err)
{
    codec c;
    int rc = open_reader(&c, src, err);
    if (!rc && stage_read_info(&c, info))
        rc = codec_fail(&c, src->name, err);
    if (rc) {
        close_codec(&c);
        return rc;
    }
    const int palette = info->color_type == PNG_COLOR_TYPE_PALETTE;
    const uint64_t npix = (uint64_t)info->width * info->height;
    if (dst && dst_bytes != hq_png_image_bytes(info)) {
        close_codec(&c);
        return hq_fail(err, HQ_EINPUT, "%s: image is %llu bytes, expected %llu (changed since it was listed?)",
                       src->name, (unsigned long long)hq_png_image_bytes(info), (unsigned long long)dst_bytes);
    }
    uint8_t *idx = NULL;
    if (palette) {
        idx = malloc(npix ? npix : 1);
        if (!idx)
            rc = hq_fail(err, HQ_EMEM, "%s: out of memory decoding PNG", src->name);
        else
            rc = decode_body(&c, info, idx, info->width, err);
        if (!rc)
            rc = check_indices(info, idx, npix, src->name, err);
        if (!rc && dst)
            expand_palette(info, idx, dst, npix);
    } else if (dst) {
        rc = decode_body(&c, info, dst, (size_t)info->width * info->channels * info->sample_bytes, err);
    }
    close_codec(&c);
    if (!rc && palette && indices)
        *indices = idx;
    else
        free(idx);
    return rc;
}

void hq_png_repalette(hq_png_info *info, const uint8_t *indices, const void *pixels)
{
    const uint8_t *px = pixels;
    const uint64_t npix = (uint64_t)info->width * info->height;
    uint8_t seen[256] = {0};
    int nseen = 0, top = info->npalette;
    for (uint64_t p = 0; p < npix && nseen < 256; p++) {
        const uint8_t i = indices[p];
        if (seen[i])
            continue;
        seen[i] = 1;
        nseen++;
        memcpy(info->palette[i], px + p * info->channels, 3);
        if (i >= top) {
            /* Entries between the old end and i were black on input; no pixel uses them. */
            for (int k = top; k < i; k++)
                if (!seen[k])
                    memset(info->palette[k], 0, 3);
            top = i + 1;
        }
    }
    info->npalette = top;
}

/* ---- writing ---------------------------------------------------------------------------- */

static void write_callback(png_structp png, png_bytep data, size_t n)
{
    codec *c = png_get_io_ptr(png);
    hq_png_sink *s = c->snk;
    if (s->fp) {
        if (fwrite(data, 1, n, s->fp) != n) {
            c->io_errno = errno ? errno : EIO;
            png_error(png, "write error");
        }
        return;
    }
    if (s->len + n > s->cap) {
        size_t cap = s->cap ? s->cap : 1 << 20;
        while (cap < s->len + n)
            cap *= 2;
        unsigned char *b = realloc(s->buf, cap);
        if (!b) {
            c->oom = 1;
            png_error(png, "out of memory");
        }
        s->buf = b;
        s->cap = cap;
    }
    memcpy(s->buf + s->len, data, n);
    s->len += n;
}

/* The caller flushes and closes the file; libpng's default flush would take our io_ptr for a FILE. */
static void flush_callback(png_structp png)
{
    (void)png;
}

static int stage_write(codec *c, const hq_png_info *in, const void *pixels, const uint8_t *indices,
                       const hq_png_zopts *z)
{
    if (setjmp(png_jmpbuf(c->png)))
        return -1;
    png_structp png = c->png;
    const int palette = in->color_type == PNG_COLOR_TYPE_PALETTE;
    png_set_write_fn(png, c, write_callback, flush_callback);
    png_set_compression_level(png, z->level);
    png_set_compression_strategy(png, z->strategy);
    png_set_compression_mem_level(png, z->mem_level);
    png_set_compression_buffer_size(png, z->zbuf);
    /* Filtering does not help palette or sub-byte images (PNG spec, section 12.8). */
    png_set_filter(png, PNG_FILTER_TYPE_BASE, palette || in->bit_depth < 8 ? PNG_FILTER_NONE : z->filters);
    png_set_IHDR(png, c->info, in->width, in->height, in->bit_depth, in->color_type, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    if (palette) {
        png_color pal[256];
        for (int i = 0; i < in->npalette; i++) {
            pal[i].red = in->palette[i][0];
            pal[i].green = in->palette[i][1];
            pal[i].blue = in->palette[i][2];
        }
        png_set_PLTE(png, c->info, pal, in->npalette);
        if (in->ntrans > 0)
            png_set_tRNS(png, c->info, in->trans_alpha, in->ntrans, NULL);
    }
    png_write_info(png, c->info);
    if (in->bit_depth == 16 && hq_host_little_endian())
        png_set_swap(png);
    if (in->bit_depth < 8)
        png_set_packing(png);
    const size_t row_bytes = palette ? in->width : (size_t)in->width * in->channels * in->sample_bytes;
    const uint8_t *base = palette ? indices : pixels;
    for (size_t r = 0; r < in->height; r++)
        png_write_row(png, base + r * row_bytes);
    png_write_end(png, NULL);
    return 0;
}

int hq_png_encode(hq_png_sink *snk, const hq_png_info *info, const void *pixels, const uint8_t *indices,
                  const hq_png_zopts *z, hq_err *err)
{
    if (info->color_type == PNG_COLOR_TYPE_PALETTE ? !indices : !pixels)
        return hq_fail(err, HQ_EIO, "%s: nothing to encode", snk->name);
    if (hq_png_fast_can_encode(info, z))
        return hq_png_fast_encode(snk, info, pixels, err);
    codec c;
    memset(&c, 0, sizeof c);
    c.writing = 1;
    c.snk = snk;
    c.png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &c, on_png_error, on_png_warning);
    if (c.png) {
        /* As for reading: libpng's default of 1,000,000 a side refused (after all the work) to write
         * what it had read. */
        png_set_user_limits(c.png, HQ_PNG_MAX_DIM, HQ_PNG_MAX_DIM);
        c.info = png_create_info_struct(c.png);
    }
    int rc = 0;
    if (!c.png || !c.info)
        rc = hq_fail(err, HQ_EMEM, "%s: out of memory creating PNG", snk->name);
    else if (stage_write(&c, info, pixels, indices, z))
        rc = codec_fail(&c, snk->name, err);
    close_codec(&c);
    return rc;
}
