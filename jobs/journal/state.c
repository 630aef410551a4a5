/* state.c — what an interrupted run had done, in memory: lookups, and the serialization rank 0
 * broadcasts (jobs/journal.h). */
#include "journal_internal.h"

#include <stdlib.h>
#include <string.h>

int journal_state_add_block(hq_journal_state *st, size_t *cap, const hq_journal_block *b)
{
    if (st->nblocks == *cap) {
        size_t c = *cap ? *cap * 2 : 256;
        hq_journal_block *nb = realloc(st->blocks, c * sizeof *nb);
        if (!nb)
            return -1;
        st->blocks = nb;
        *cap = c;
    }
    st->blocks[st->nblocks++] = *b;
    return 0;
}

/* counts and lut: n values, at any alignment (straight from a log's bytes). */
int journal_state_add_hist(hq_journal_state *st, uint64_t group, const void *counts, uint64_t n)
{
    for (uint64_t k = 0; k < st->nhists; k++)
        if (st->hists[k].group == group)
            return 0; /* logged twice (a resumed run that reduced again): the same counts */
    hq_journal_hist *nh = realloc(st->hists, (st->nhists + 1) * sizeof *nh);
    if (!nh)
        return -1;
    st->hists = nh;
    uint64_t *c = malloc(n * sizeof *c + 1);
    if (!c)
        return -1;
    memcpy(c, counts, n * sizeof *c);
    st->hists[st->nhists++] = (hq_journal_hist){group, n, c};
    return 0;
}

int journal_state_add_lut(hq_journal_state *st, uint64_t image, const void *lut, uint64_t n)
{
    for (uint64_t k = 0; k < st->nluts; k++)
        if (st->luts[k].image == image)
            return 0;
    hq_journal_lut *nl = realloc(st->luts, (st->nluts + 1) * sizeof *nl);
    if (!nl)
        return -1;
    st->luts = nl;
    uint16_t *c = malloc(n * sizeof *c + 1);
    if (!c)
        return -1;
    memcpy(c, lut, n * sizeof *c);
    st->luts[st->nluts++] = (hq_journal_lut){image, n, c};
    return 0;
}

/* Orders by the numbers, not by memcmp's bytes, so the order does not depend on endianness. */
static int cmp_block_num(const void *pa, const void *pb)
{
    const uint64_t *a = pa, *b = pb;
    for (size_t k = 0; k < BLOCK_WORDS; k++)
        if (a[k] != b[k])
            return a[k] < b[k] ? -1 : 1;
    return 0;
}

static int cmp_lut(const void *pa, const void *pb)
{
    const hq_journal_lut *a = pa, *b = pb;
    return a->image < b->image ? -1 : a->image > b->image;
}

void journal_state_sort(hq_journal_state *st)
{
    if (st->nblocks)
        qsort(st->blocks, st->nblocks, sizeof *st->blocks, cmp_block_num);
    if (st->nluts)
        qsort(st->luts, st->nluts, sizeof *st->luts, cmp_lut);
}

const hq_journal_lut *hq_journal_find_lut(const hq_journal_state *st, uint64_t image)
{
    const hq_journal_lut key = {image, 0, NULL};
    return st->nluts ? bsearch(&key, st->luts, st->nluts, sizeof key, cmp_lut) : NULL;
}

int hq_journal_has_block(const hq_journal_state *st, const hq_block *b)
{
    const hq_journal_block key = {b->item, b->s0, b->s1, b->r0, b->r1, b->c0, b->c1};
    return st->nblocks && bsearch(&key, st->blocks, st->nblocks, sizeof key, cmp_block_num) != NULL;
}

const hq_journal_hist *hq_journal_find_hist(const hq_journal_state *st, uint64_t group)
{
    for (uint64_t k = 0; k < st->nhists; k++)
        if (st->hists[k].group == group)
            return &st->hists[k];
    return NULL;
}

void hq_journal_state_free(hq_journal_state *st)
{
    for (uint64_t k = 0; k < st->nhists; k++)
        free(st->hists[k].counts);
    free(st->hists);
    for (uint64_t k = 0; k < st->nluts; k++)
        free(st->luts[k].lut);
    free(st->luts);
    free(st->blocks);
    memset(st, 0, sizeof *st);
}

/* Layout: nblocks, nhists, the blocks, then per hist: group, n, counts; then nluts and per LUT:
 * image, n, the entries packed 4 to a word. */
int hq_journal_state_pack(const hq_journal_state *st, unsigned char **buf, uint64_t *len, hq_err *err)
{
    uint64_t n = 2 + st->nblocks * BLOCK_WORDS;
    for (uint64_t k = 0; k < st->nhists; k++)
        n += 2 + st->hists[k].n;
    n += 1;
    for (uint64_t k = 0; k < st->nluts; k++)
        n += 2 + (st->luts[k].n + 3) / 4;
    uint64_t *w = calloc(n, sizeof *w);
    if (!w)
        return hq_fail(err, HQ_EMEM, "journal: out of memory");
    uint64_t *p = w;
    *p++ = st->nblocks;
    *p++ = st->nhists;
    if (st->nblocks) /* blocks is NULL while none were logged */
        memcpy(p, st->blocks, st->nblocks * sizeof *st->blocks);
    p += st->nblocks * BLOCK_WORDS;
    for (uint64_t k = 0; k < st->nhists; k++) {
        *p++ = st->hists[k].group;
        *p++ = st->hists[k].n;
        memcpy(p, st->hists[k].counts, st->hists[k].n * sizeof *p);
        p += st->hists[k].n;
    }
    *p++ = st->nluts;
    for (uint64_t k = 0; k < st->nluts; k++) {
        *p++ = st->luts[k].image;
        *p++ = st->luts[k].n;
        memcpy(p, st->luts[k].lut, st->luts[k].n * sizeof *st->luts[k].lut);
        p += (st->luts[k].n + 3) / 4;
    }
    *buf = (unsigned char *)w;
    *len = n * sizeof *w;
    return 0;
}

int hq_journal_state_unpack(const unsigned char *buf, uint64_t len, hq_journal_state *st, hq_err *err)
{
    memset(st, 0, sizeof *st);
    const uint64_t words = len / 8;
    uint64_t *w = malloc(len + 8);
    if (!w)
        return hq_fail(err, HQ_EMEM, "journal: out of memory");
    memcpy(w, buf, len);
    uint64_t at = 2;
    int ok = words >= 2 && w[0] <= (words - 2) / BLOCK_WORDS;
    if (ok) {
        st->blocks = malloc(w[0] * sizeof *st->blocks + 1);
        ok = st->blocks != NULL;
    }
    if (ok) {
        st->nblocks = w[0];
        memcpy(st->blocks, w + at, w[0] * sizeof *st->blocks);
        at += w[0] * BLOCK_WORDS;
    }
    for (uint64_t k = 0; ok && k < w[1]; k++) {
        ok = at + 2 <= words && w[at + 1] <= words - at - 2 && journal_state_add_hist(st, w[at], w + at + 2, w[at + 1]) == 0;
        if (ok)
            at += 2 + w[at + 1];
    }
    ok = ok && at < words;
    const uint64_t nluts = ok ? w[at++] : 0;
    for (uint64_t k = 0; ok && k < nluts; k++) {
        ok = at + 2 <= words && (w[at + 1] + 3) / 4 <= words - at - 2 &&
             journal_state_add_lut(st, w[at], w + at + 2, w[at + 1]) == 0;
        if (ok)
            at += 2 + (w[at + 1] + 3) / 4;
    }
    free(w);
    if (!ok) {
        hq_journal_state_free(st);
        return hq_fail(err, HQ_EIO, "journal: damaged in transit");
    }
    return 0;
}
