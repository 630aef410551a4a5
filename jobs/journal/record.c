/* record.c — the log's records: their checksum, and names in OUT.journal/ (journal_internal.h). */
#include "journal_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t journal_fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 0x100000001b3ull;
    return h;
}

/* Record checksums: four lanes of 64-bit words, each xor-then-multiply (FNV's step on words),
 * folded with the length at the end. Byte-wise FNV-1a is one multiply per byte in one chain,
 * about 1 GB/s: 8 ms or more for each 16-bit image's CLAHE LUTs (8 MiB at the default grid),
 * which a GPU remaps in a fraction of that. Four chains of words overlap. Streaming: a record's
 * sum is the same whatever pieces its bytes are fed in. */
#define SUM_PRIME 0x100000001b3ull
typedef struct rec_sum {
    uint64_t lane[4];
    unsigned char tail[32]; /* bytes of an unfinished 32-byte step */
    size_t ntail;
    uint64_t total;
} rec_sum;

static void sum_init(rec_sum *r)
{
    for (int k = 0; k < 4; k++)
        r->lane[k] = FNV0 + (uint64_t)k;
    r->ntail = 0;
    r->total = 0;
}

static void sum_step(rec_sum *r, const unsigned char *p)
{
    for (int k = 0; k < 4; k++) {
        uint64_t w;
        memcpy(&w, p + 8 * k, 8);
        r->lane[k] = (r->lane[k] ^ w) * SUM_PRIME;
    }
}

static void sum_feed(rec_sum *r, const void *data, size_t n)
{
    const unsigned char *p = data;
    r->total += n;
    if (r->ntail) {
        const size_t take = n < 32 - r->ntail ? n : 32 - r->ntail;
        memcpy(r->tail + r->ntail, p, take);
        r->ntail += take;
        p += take;
        n -= take;
        if (r->ntail < 32)
            return;
        sum_step(r, r->tail);
        r->ntail = 0;
    }
    for (; n >= 32; p += 32, n -= 32)
        sum_step(r, p);
    memcpy(r->tail, p, n);
    r->ntail = n;
}

static uint64_t sum_done(rec_sum *r)
{
    uint64_t h = journal_fnv(FNV0, r->tail, r->ntail) ^ r->total;
    for (int k = 0; k < 4; k++)
        h = (h ^ r->lane[k]) * SUM_PRIME;
    return h;
}

uint64_t journal_rec_sum(const void *a, size_t na, const void *b, size_t nb)
{
    rec_sum r;
    sum_init(&r);
    sum_feed(&r, a, na);
    if (nb)
        sum_feed(&r, b, nb);
    return sum_done(&r);
}

uint64_t journal_owner(const char *id)
{
    return journal_fnv(FNV0, id, strlen(id));
}

int journal_read_file(const char *path, unsigned char **out, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    size_t cap = 4096, n = 0;
    unsigned char *b = malloc(cap);
    while (b) {
        if (n + 1 >= cap) { /* room for the NUL after the contents */
            unsigned char *nb = realloc(b, cap * 2);
            if (!nb) {
                free(b);
                b = NULL;
                break;
            }
            b = nb;
            cap *= 2;
        }
        size_t got = fread(b + n, 1, cap - 1 - n, f);
        n += got;
        if (got == 0)
            break;
    }
    int bad = ferror(f) || !b;
    fclose(f);
    if (bad) {
        free(b);
        return -1;
    }
    b[n] = '\0';
    *out = b;
    *len = n;
    return 0;
}

char *journal_join(const char *a, const char *b)
{
    size_t n = strlen(a) + strlen(b) + 2;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%s/%s", a, b);
    return s;
}

/* Whether name is a rank's log ("rank-NNNNNN.log"). */
int journal_is_log(const char *name)
{
    const size_t n = strlen(name);
    return strncmp(name, "rank-", 5) == 0 && n > 9 && strcmp(name + n - 4, ".log") == 0;
}
