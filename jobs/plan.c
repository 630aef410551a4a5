#include "plan.h"

#include <stdlib.h>
#include <string.h>

/* A position in the pixel sequence: image g (global index), row r of it. (nimages, 0) is the end. */
typedef struct pos {
    uint64_t g, r;
} pos;

typedef struct ctx {
    const hq_plan_item *items;
    size_t n;
    uint64_t *image0;    /* per item, first global image */
    uint64_t *pix0;      /* per item, pixels before it */
} ctx;

static size_t item_of_image(const ctx *c, uint64_t g)
{
    size_t lo = 0, hi = c->n; /* largest i with image0[i] <= g */
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (c->image0[mid] <= g)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

static uint64_t image_pixels(const hq_plan_item *it)
{
    return it->skip ? 0 : it->height * it->width;
}

static uint64_t offset_of(const ctx *c, pos p)
{
    if (p.g >= c->image0[c->n])
        return c->pix0[c->n];
    size_t i = item_of_image(c, p.g);
    const hq_plan_item *it = &c->items[i];
    return c->pix0[i] + (p.g - c->image0[i]) * image_pixels(it) + (it->skip ? 0 : p.r * it->width);
}

/* The position nearest to pixel offset `target` that a share may end at. */
static pos boundary_near(const ctx *c, uint64_t target, int whole_images)
{
    const uint64_t nimg = c->image0[c->n];
    if (c->pix0[c->n] == 0)
        return (pos){nimg, 0}; /* nothing to share out */
    /* Find the item holding the target: the last non-empty item whose first pixel is <= target. */
    size_t i = 0;
    for (size_t k = 0; k < c->n; k++)
        if (c->pix0[k] <= target && image_pixels(&c->items[k]) > 0)
            i = k;
    const hq_plan_item *it = &c->items[i];
    const uint64_t ip = image_pixels(it);
    if (ip == 0)
        return (pos){nimg, 0};
    const uint64_t rel = target - c->pix0[i];
    uint64_t s = rel / ip;
    if (s >= it->slices)
        return (pos){c->image0[i] + it->slices, 0};
    const uint64_t within = rel - s * ip;
    if (whole_images || !it->splittable) {
        if (2 * within >= ip)
            s++;
        return (pos){c->image0[i] + s, 0};
    }
    uint64_t row = (within + it->width / 2) / it->width;
    if (row >= it->height)
        return (pos){c->image0[i] + s + 1, 0};
    return (pos){c->image0[i] + s, row};
}

static int pos_less(pos a, pos b)
{
    return a.g < b.g || (a.g == b.g && a.r < b.r);
}

typedef struct blist {
    hq_block *b;
    uint64_t n, cap;
} blist;

static int push(blist *l, hq_block b)
{
    if (l->n == l->cap) {
        uint64_t cap = l->cap ? l->cap * 2 : 64;
        hq_block *p = realloc(l->b, cap * sizeof *p);
        if (!p)
            return -1;
        l->b = p;
        l->cap = cap;
    }
    l->b[l->n++] = b;
    return 0;
}

/* Cuts rows [r0, r1) of one slice into blocks of at most block_bytes (at least one row each). */
static int cut_rows(blist *l, uint64_t item, uint64_t s, uint64_t r0, uint64_t r1, const hq_plan_item *it,
                    uint64_t block_bytes)
{
    const uint64_t row_bytes = it->width * it->pixel_bytes;
    uint64_t rows = it->splittable ? block_bytes / row_bytes : r1 - r0;
    if (rows == 0)
        rows = 1;
    for (uint64_t r = r0; r < r1; r += rows)
        if (push(l, (hq_block){item, s, s + 1, r, r + rows < r1 ? r + rows : r1}))
            return -1;
    return 0;
}

/* Emits the blocks of the share [a, b). */
static int cut_share(blist *l, const ctx *c, pos a, pos b, uint64_t block_bytes)
{
    while (pos_less(a, b)) {
        size_t i = item_of_image(c, a.g);
        const hq_plan_item *it = &c->items[i];
        const uint64_t s = a.g - c->image0[i];
        const uint64_t item_end = c->image0[i] + it->slices;
        if (it->skip || it->slices == 0) {
            a = (pos){item_end, 0};
            continue;
        }
        if (a.r > 0 || (b.g == a.g)) {
            /* A partial slice: the share starts or ends inside it. */
            const uint64_t r1 = b.g == a.g ? b.r : it->height;
            if (cut_rows(l, i, s, a.r, r1, it, block_bytes))
                return -1;
            a = r1 == it->height ? (pos){a.g + 1, 0} : (pos){a.g, r1};
            continue;
        }
        const uint64_t img_bytes = it->height * it->width * it->pixel_bytes;
        if (img_bytes > block_bytes) {
            if (cut_rows(l, i, s, 0, it->height, it, block_bytes))
                return -1;
            a = (pos){a.g + 1, 0};
            continue;
        }
        /* Whole slices, as many as fit a block, not past the item or the share. */
        uint64_t last = b.g < item_end ? b.g : item_end;
        uint64_t k = block_bytes / img_bytes;
        if (k > last - a.g)
            k = last - a.g;
        if (push(l, (hq_block){i, s, s + k, 0, it->height}))
            return -1;
        a = (pos){a.g + k, 0};
    }
    return 0;
}

int hq_plan_make(const hq_plan_item *items, size_t n, int nranks, uint64_t block_bytes, hq_plan *out, hq_err *err)
{
    memset(out, 0, sizeof *out);
    if (nranks < 1 || block_bytes == 0)
        return hq_fail(err, HQ_EUSAGE, "plan: needs at least one rank and a non-zero block size");
    ctx c = {items, n, calloc(n + 1, sizeof(uint64_t)), calloc(n + 1, sizeof(uint64_t))};
    out->first = calloc((size_t)nranks + 1, sizeof *out->first);
    out->rank_pixels = calloc((size_t)nranks, sizeof *out->rank_pixels);
    blist l = {0};
    int rc = HQ_EMEM;
    if (!c.image0 || !c.pix0 || !out->first || !out->rank_pixels)
        goto done;
    int any_split = 0;
    for (size_t i = 0; i < n; i++) {
        c.image0[i + 1] = c.image0[i] + items[i].slices;
        c.pix0[i + 1] = c.pix0[i] + items[i].slices * image_pixels(&items[i]);
        any_split |= items[i].splittable && !items[i].skip;
    }
    const uint64_t nimg = c.image0[n], total = c.pix0[n];
    uint64_t good_images = 0;
    for (size_t i = 0; i < n; i++)
        good_images += items[i].skip ? 0 : items[i].slices;
    out->whole_images = good_images >= (uint64_t)nranks || !any_split;
    pos prev = {0, 0};
    for (int r = 0; r < nranks; r++) {
        pos end = {nimg, 0};
        if (r + 1 < nranks) {
            uint64_t target = (uint64_t)((unsigned __int128)total * (unsigned)(r + 1) / (unsigned)nranks);
            end = boundary_near(&c, target, out->whole_images);
            if (pos_less(end, prev))
                end = prev;
        }
        out->first[r] = l.n;
        if (cut_share(&l, &c, prev, end, block_bytes))
            goto done;
        out->rank_pixels[r] = offset_of(&c, end) - offset_of(&c, prev);
        prev = end;
    }
    out->first[nranks] = l.n;
    out->nranks = nranks;
    out->blocks = l.b;
    out->nblocks = l.n;
    out->total_pixels = total;
    out->nimages = nimg;
    out->item_image0 = c.image0;
    out->nitems = n;
    c.image0 = NULL;
    l.b = NULL;
    rc = 0;
done:
    free(c.image0);
    free(c.pix0);
    free(l.b);
    if (rc) {
        hq_plan_free(out);
        return hq_fail(err, rc, "plan: out of memory");
    }
    return 0;
}

void hq_plan_free(hq_plan *p)
{
    free(p->blocks);
    free(p->first);
    free(p->rank_pixels);
    free(p->item_image0);
    memset(p, 0, sizeof *p);
}

int hq_plan_owner(const hq_plan *p, uint64_t k)
{
    int lo = 0, hi = p->nranks; /* largest r with first[r] <= k */
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (p->first[mid] <= k)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}
