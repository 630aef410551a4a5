/* file_map.c — see file_map.h. */
#include "file_map.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

hq_mapped *hq_mapped_open(int fd, uint64_t lo, uint64_t hi, uint64_t max_spans)
{
    const long page = sysconf(_SC_PAGESIZE);
    const uint64_t start = lo - lo % (uint64_t)(page > 0 ? page : 4096);
    if (fd < 0 || hi <= lo || max_spans == 0)
        return NULL;
    hq_mapped *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->spans = malloc(max_spans * sizeof *m->spans);
    m->len = (size_t)(hi - start);
    m->base_off = start;
    m->base = m->spans ? mmap(NULL, m->len, PROT_READ, MAP_SHARED, fd, (off_t)start) : MAP_FAILED;
    if (m->base == MAP_FAILED) {
        free(m->spans);
        free(m);
        return NULL;
    }
    return m;
}

void hq_mapped_add(hq_mapped *m, uint64_t off, uint64_t bytes)
{
    const unsigned char *p = (const unsigned char *)m->base + (off - m->base_off);
    m->bytes += bytes;
    if (m->nspans && (const unsigned char *)m->spans[m->nspans - 1].p + m->spans[m->nspans - 1].bytes == p) {
        m->spans[m->nspans - 1].bytes += bytes;
        return;
    }
    m->spans[m->nspans++] = (hq_span){p, bytes};
}

void hq_mapped_gather(const hq_mapped *m, void *dst)
{
    unsigned char *at = dst;
    for (uint64_t i = 0; i < m->nspans; i++) {
        memcpy(at, m->spans[i].p, m->spans[i].bytes);
        at += m->spans[i].bytes;
    }
}

void hq_mapped_close(hq_mapped *m)
{
    if (!m)
        return;
    munmap(m->base, m->len);
    free(m->spans);
    free(m);
}
