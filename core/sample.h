/* sample.h — signed integer samples (int8, int16) in the offset form the engines equalize:
 * u = v + 2^(n-1), which in two's complement is the sign bit flipped, exact and its own inverse.
 * The driver flips a block after reading it and flips it back before writing it, so the integer
 * rule (core/lut.h) applies unchanged, in the offset domain, and the output keeps its dtype.
 * And the host's byte order, and the swap of 16-bit samples, for the formats that store samples
 * in a fixed one. */
#ifndef HQ_SAMPLE_H
#define HQ_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

/* 1 when this host stores the low byte of a sample first (PNG and the HDF5 record are big- and
 * little-endian on disk whatever the host). */
static inline int hq_host_little_endian(void)
{
    const uint16_t one = 1;
    return *(const unsigned char *)&one == 1;
}

/* Swaps the two bytes of each 16-bit sample in n bytes (a trailing odd byte stays): between the
 * host's order and a file's other one. */
static inline void hq_swap16(void *data, size_t n)
{
    unsigned char *p = (unsigned char *)data;
    for (size_t i = 0; i + 1 < n; i += 2) {
        const unsigned char t = p[i];
        p[i] = p[i + 1];
        p[i + 1] = t;
    }
}

/* Reverses the bytes of each `width`-byte word (2, 4 or 8) in n bytes: a file's other byte order. */
static inline void hq_swap_words(void *data, size_t n, unsigned width)
{
    unsigned char *p = (unsigned char *)data;
    for (size_t i = 0; width > 1 && i + width <= n; i += width)
        for (unsigned a = 0, b = width - 1; a < b; a++, b--) {
            const unsigned char t = p[i + a];
            p[i + a] = p[i + b];
            p[i + b] = t;
        }
}

/* Flips the sign bit of n samples of `bytes` (1 or 2) bytes each, in place. */
static inline void hq_sample_flip(void *data, uint64_t n, uint32_t bytes)
{
    if (bytes == 1) {
        uint8_t *p = data;
        for (uint64_t i = 0; i < n; i++)
            p[i] ^= 0x80u;
    } else {
        uint16_t *p = data;
        for (uint64_t i = 0; i < n; i++)
            p[i] ^= 0x8000u;
    }
}

#endif
