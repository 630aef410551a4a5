/* utf8.h — telling valid UTF-8 from bytes that only look like text, for pages and JSON that declare
 * UTF-8: a file name is whatever bytes the file system holds (a Latin-1 "caf\xe9.png"), and written
 * raw it makes the page or the JSON invalid. */
#ifndef HQ_UTF8_H
#define HQ_UTF8_H

/* The length (1-4) of the valid UTF-8 sequence at p, or 0 where p starts none (a stray
 * continuation byte, a truncated or overlong sequence, a surrogate, past U+10FFFF). p[0] != 0. */
static inline int hq_utf8_len(const unsigned char *p)
{
    const unsigned c = p[0];
    if (c < 0x80)
        return 1;
    int n;
    unsigned lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf)
        n = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        lo = c == 0xe0 ? 0xa0 : 0x80; /* no overlong */
        hi = c == 0xed ? 0x9f : 0xbf; /* no surrogate */
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        lo = c == 0xf0 ? 0x90 : 0x80;
        hi = c == 0xf4 ? 0x8f : 0xbf; /* up to U+10FFFF */
    } else
        return 0;
    if (p[1] < lo || p[1] > hi)
        return 0;
    for (int k = 2; k < n; k++)
        if (p[k] < 0x80 || p[k] > 0xbf)
            return 0;
    return n;
}

#endif
