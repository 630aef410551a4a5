/* fuzz_png.c — libFuzzer entry for the PNG reader: the input is one PNG file given as --input,
 * taken through scan, decode (every block) and the write-back (harness.h).
 *
 * libpng is not instrumented, so coverage cannot lead the fuzzer past its CRC checks or into the
 * zlib stream. The custom mutator (libFuzzer builds only) therefore often repairs the chunk CRCs
 * after a mutation, and sometimes mutates the inflated image data and deflates it again, so that
 * row filters, bit packing, Adam7 passes and palette indices see arbitrary values; a quarter of
 * the mutations are left as they are, so damaged files stay in the mix. */
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "harness.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* Named .png: bytes that are not a PNG then fail as "not a PNG file" instead of being read as a
     * list of paths, which would let the fuzzer open arbitrary files of this machine. */
    hqf_run(data, size, "png");
    return 0;
}

#ifdef HQ_LIBFUZZER
size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed);

#define RAW_MAX (1u << 20)

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* Rewrites the CRC of every whole chunk after the signature. */
static void fix_crcs(uint8_t *d, size_t n)
{
    for (size_t pos = 8; pos + 12 <= n;) {
        const uint32_t len = be32(d + pos);
        if (len > n - pos - 12)
            break;
        put_be32(d + pos + 8 + len, (uint32_t)crc32(0, d + pos + 4, len + 4));
        pos += 12 + (size_t)len;
    }
}

/* Inflates the IDAT stream, mutates it, deflates it into one IDAT in place of the old ones.
 * Returns the new size, or 0 when the input has no usable IDAT stream. */
static size_t mutate_raw(uint8_t *d, size_t n, size_t max)
{
    uint8_t *z = malloc(n), *raw = malloc(RAW_MAX), *out = NULL;
    size_t zn = 0, first = 0, last = 0, result = 0;
    if (!z || !raw)
        goto done;
    for (size_t pos = 8; pos + 12 <= n;) {
        const uint32_t len = be32(d + pos);
        if (len > n - pos - 12)
            break;
        if (!memcmp(d + pos + 4, "IDAT", 4)) {
            if (!first)
                first = pos;
            memcpy(z + zn, d + pos + 8, len);
            zn += len;
            last = pos + 12 + len;
        }
        pos += 12 + (size_t)len;
    }
    uLongf rn = RAW_MAX;
    if (!first || uncompress(raw, &rn, z, zn) != Z_OK || rn == 0)
        goto done;
    rn = LLVMFuzzerMutate(raw, rn, RAW_MAX);
    uLongf cn = compressBound(rn);
    out = malloc(cn);
    if (!out || compress2(out, &cn, raw, rn, 1) != Z_OK)
        goto done;
    const size_t tail = n - last, need = first + 12 + cn + tail;
    if (need > max)
        goto done;
    memmove(d + first + 12 + cn, d + last, tail);
    put_be32(d + first, (uint32_t)cn);
    memcpy(d + first + 4, "IDAT", 4);
    memcpy(d + first + 8, out, cn);
    result = need;
done:
    free(z);
    free(raw);
    free(out);
    return result;
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed)
{
    const unsigned mode = seed % 8;
    if (mode == 0 || mode == 1) /* as libFuzzer would: CRCs broken where the mutation fell */
        return LLVMFuzzerMutate(data, size, max_size);
    if (mode <= 4) {
        const size_t n = mutate_raw(data, size, max_size);
        if (n) {
            fix_crcs(data, n);
            return n;
        }
    }
    size = LLVMFuzzerMutate(data, size, max_size);
    fix_crcs(data, size);
    return size;
}
#endif
