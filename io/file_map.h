/* file_map.h — a block of pixels read in place: one read-only mapping of the input file over the
 * chunks a block touches, and the block's bytes inside it as spans, in block order.
 *
 * Why: a GPU engine can then copy the pixels straight from the page cache by DMA (after
 * engine.host_register), with no pread into a buffer first; the CPU engine gathers the spans
 * (hq_mapped_gather), which is what a read would have done. Formats build one with
 * hq_mapped_open from file offsets they have checked lie inside the file: a mapping read past
 * the file's end would fault. */
#ifndef HQ_FILE_MAP_H
#define HQ_FILE_MAP_H

#include <stddef.h>
#include <stdint.h>

#include "../core/span.h"

typedef struct hq_mapped {
    void *base;        /* the mapping: file bytes [base_off, base_off + len) */
    size_t len;
    uint64_t base_off;
    hq_span *spans;    /* the block's bytes, in block order; adjacent runs merged */
    uint64_t nspans;
    uint64_t bytes;    /* sum of the spans */
    int registered;    /* an engine's host_register took base (the caller tracks and undoes it) */
} hq_mapped;

/* Maps file bytes [lo, hi) of fd read-only, for spans added next; NULL when mmap refuses. */
hq_mapped *hq_mapped_open(int fd, uint64_t lo, uint64_t hi, uint64_t max_spans);

/* Appends file bytes [off, off + bytes), which lie inside [lo, hi), to the block's spans. */
void hq_mapped_add(hq_mapped *m, uint64_t off, uint64_t bytes);

/* Copies the block's bytes, in order, to dst (hq_mapped.bytes of them). */
void hq_mapped_gather(const hq_mapped *m, void *dst);

void hq_mapped_close(hq_mapped *m);

#endif
