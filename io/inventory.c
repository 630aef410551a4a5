#include "inventory.h"

#include <stdlib.h>
#include <string.h>

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

int hq_inventory_add(hq_inventory *inv, const hq_item *it, hq_err *err)
{
    if (inv->n == inv->cap) {
        size_t cap = inv->cap ? inv->cap * 2 : 16;
        hq_item *p = realloc(inv->items, cap * sizeof *p);
        if (!p)
            return hq_fail(err, HQ_EMEM, "%s: out of memory listing inputs", it->src);
        inv->items = p;
        inv->cap = cap;
    }
    hq_item *d = &inv->items[inv->n];
    *d = *it;
    d->src = dup_or_null(it->src);
    d->name = dup_or_null(it->name);
    d->why = dup_or_null(it->why);
    if ((it->src && !d->src) || (it->name && !d->name) || (it->why && !d->why))
        return hq_fail(err, HQ_EMEM, "%s: out of memory listing inputs", it->src);
    inv->n++;
    return 0;
}

int hq_item_set_bad(hq_item *it, const char *why, hq_err *err)
{
    char *w = strdup(why);
    if (!w)
        return hq_fail(err, HQ_EMEM, "%s: out of memory listing inputs", it->src);
    free(it->why);
    it->why = w;
    it->bad = 1;
    it->slices = it->height = it->width = 0;
    it->channels = it->sample_bytes = it->depth = it->collective = 0;
    return 0;
}

void hq_inventory_free(hq_inventory *inv)
{
    for (size_t i = 0; i < inv->n; i++) {
        free(inv->items[i].src);
        free(inv->items[i].name);
        free(inv->items[i].why);
    }
    free(inv->items);
    free(inv->root);
    memset(inv, 0, sizeof *inv);
}

/* The packed form: a header of u64s, then per item its numbers and three length-prefixed strings. */
typedef struct packer {
    unsigned char *buf;
    uint64_t len, cap;
    int oom;
} packer;

static void put(packer *p, const void *src, uint64_t n)
{
    if (p->oom)
        return;
    if (p->len + n > p->cap) {
        uint64_t cap = p->cap ? p->cap : 4096;
        while (cap < p->len + n)
            cap *= 2;
        unsigned char *b = realloc(p->buf, cap);
        if (!b) {
            p->oom = 1;
            return;
        }
        p->buf = b;
        p->cap = cap;
    }
    memcpy(p->buf + p->len, src, n);
    p->len += n;
}

static void put_u64(packer *p, uint64_t v)
{
    put(p, &v, sizeof v);
}

static void put_str(packer *p, const char *s)
{
    uint64_t n = s ? strlen(s) + 1 : 0; /* 0 encodes NULL */
    put_u64(p, n);
    if (n)
        put(p, s, n);
}

int hq_inventory_pack(const hq_inventory *inv, unsigned char **buf, uint64_t *len, hq_err *err)
{
    packer p = {0};
    put_u64(&p, (uint64_t)inv->format);
    put_u64(&p, (uint64_t)inv->root_is_dir);
    put_u64(&p, (uint64_t)inv->one_dataset);
    put_u64(&p, (uint64_t)inv->own_name_taken);
    put_u64(&p, (uint64_t)inv->planes);
    put_str(&p, inv->root);
    put_u64(&p, inv->n);
    for (size_t i = 0; i < inv->n; i++) {
        const hq_item *it = &inv->items[i];
        const uint64_t nums[] = {it->slices,       it->height,       it->width,        it->channels,
                                 it->sample_bytes, it->depth,        it->bad,          it->collective,
                                 it->chunk_slices, it->chunk_height, it->chunk_width, it->sample,
                                 it->object};
        put(&p, nums, sizeof nums);
        put_str(&p, it->src);
        put_str(&p, it->name);
        put_str(&p, it->why);
    }
    if (p.oom) {
        free(p.buf);
        return hq_fail(err, HQ_EMEM, "%s: out of memory packing the input list", inv->root ? inv->root : "input");
    }
    *buf = p.buf;
    *len = p.len;
    return 0;
}

typedef struct reader {
    const unsigned char *buf;
    uint64_t len, pos;
    int bad;
} reader;

static void get(reader *r, void *dst, uint64_t n)
{
    if (r->bad || r->pos + n > r->len) {
        r->bad = 1;
        memset(dst, 0, n);
        return;
    }
    memcpy(dst, r->buf + r->pos, n);
    r->pos += n;
}

static uint64_t get_u64(reader *r)
{
    uint64_t v;
    get(r, &v, sizeof v);
    return v;
}

static char *get_str(reader *r)
{
    uint64_t n = get_u64(r);
    if (n == 0 || r->bad || r->pos + n > r->len || r->buf[r->pos + n - 1] != '\0') {
        if (n)
            r->bad = 1;
        return NULL;
    }
    char *s = strdup((const char *)r->buf + r->pos);
    r->pos += n;
    if (!s)
        r->bad = 1;
    return s;
}

int hq_inventory_unpack(const unsigned char *buf, uint64_t len, hq_inventory *inv, hq_err *err)
{
    reader r = {buf, len, 0, 0};
    memset(inv, 0, sizeof *inv);
    inv->format = (hq_format)get_u64(&r);
    inv->root_is_dir = (int)get_u64(&r);
    inv->one_dataset = (int)get_u64(&r);
    inv->own_name_taken = (int)get_u64(&r);
    inv->planes = (int)get_u64(&r);
    inv->root = get_str(&r);
    uint64_t n = get_u64(&r);
    for (uint64_t i = 0; i < n && !r.bad; i++) {
        uint64_t nums[13];
        get(&r, nums, sizeof nums);
        hq_item it = {.slices = nums[0], .height = nums[1], .width = nums[2], .channels = (uint32_t)nums[3],
                      .sample_bytes = (uint32_t)nums[4], .depth = (uint32_t)nums[5], .bad = (uint32_t)nums[6],
                      .collective = (uint32_t)nums[7], .chunk_slices = nums[8], .chunk_height = nums[9],
                      .chunk_width = nums[10], .sample = (uint32_t)nums[11], .object = nums[12]};
        it.src = get_str(&r);
        it.name = get_str(&r);
        it.why = get_str(&r);
        int rc = r.bad ? 0 : hq_inventory_add(inv, &it, err);
        free(it.src);
        free(it.name);
        free(it.why);
        if (rc) {
            hq_inventory_free(inv);
            return rc;
        }
    }
    if (r.bad) {
        hq_inventory_free(inv);
        return hq_fail(err, HQ_EIO, "input list: corrupt broadcast buffer");
    }
    return 0;
}
