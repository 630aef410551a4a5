#include "plan.h"

#include <stdlib.h>
#include <string.h>

/* Shares may differ from the mean by this fraction (1/20 = 5%) before images are cut to balance. */
#define SLACK_DIV 20

/* The cells of one image of an item: ch x cw pixels (the last row and column clipped), gr x gc of them. */
typedef struct grid {
    uint64_t ch, cw, gr, gc;
} grid;

/* A position in the pixel sequence: image g (global index), before its cell t (row-major).
 * (nimages, 0) is the end; t is never the image's cell count (that is (g + 1, 0)). */
typedef struct pos {
    uint64_t g, t;
} pos;

typedef struct ctx {
    const hq_plan_item *items;
    size_t n;
    uint64_t block;
    uint64_t *image0; /* per item, first global image; [n] = nimages */
    uint64_t *pix0;   /* per item, pixels before it; [n] = total */
    grid *grids;      /* per item */
} ctx;

typedef struct blist {
    hq_block *b;
    uint64_t n, cap;
    uint64_t max_bytes;
    int too_many; /* PLAN_BLOCKS_MAX reached */
} blist;

/* Every rank holds the whole plan (56 bytes a block): 4 Mi blocks are 224 MiB, and with the
 * default --block of 256 MiB a PiB of pixels. A 1.4 KB file can describe far more (a dataset never
 * written, 2^40 rows): its plan took 10 GB of memory and growing. Past this the run is refused, and
 * a larger --block is the way on. */
#define PLAN_BLOCKS_MAX ((uint64_t)1 << 22)

static uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

static uint64_t ceil_div(uint64_t a, uint64_t b)
{
    return (a + b - 1) / b;
}

static uint64_t image_pixels(const hq_plan_item *it)
{
    return it->skip ? 0 : it->height * it->width;
}

static uint64_t pixel_bytes(const hq_plan_item *it)
{
    return it->pixel_bytes ? it->pixel_bytes : 1;
}

/* ---- cells ---- */

/* Cells too large for a block, where cutting them costs nothing but locality: strips of whole
 * cell-width rows, or pieces of one row. */
static void fit_cell(grid *g, uint64_t px, uint64_t block)
{
    if (g->ch * g->cw * px <= block)
        return;
    if (g->cw * px <= block) {
        g->ch = block / (g->cw * px);
    } else {
        g->ch = 1;
        g->cw = block / px ? block / px : 1;
    }
}

static grid grid_of(const hq_plan_item *it, uint64_t block)
{
    grid g = {it->height ? it->height : 1, it->width ? it->width : 1, 0, 0};
    if (image_pixels(it) == 0)
        return g;
    if (it->splittable) {
        if (it->chunk_height && it->chunk_width) {
            g.ch = min_u64(it->chunk_height, it->height);
            g.cw = min_u64(it->chunk_width, it->width);
            if (!it->whole_chunks)
                fit_cell(&g, pixel_bytes(it), block);
        } else {
            g.ch = 1;
            fit_cell(&g, pixel_bytes(it), block);
        }
    }
    g.gr = ceil_div(it->height, g.ch);
    g.gc = ceil_div(it->width, g.cw);
    return g;
}

static uint64_t ncells(const ctx *c, size_t i)
{
    return c->grids[i].gr * c->grids[i].gc;
}

/* Pixels of an image before its cell t (row-major); t = ncells gives the whole image. */
static uint64_t cell_offset(const hq_plan_item *it, const grid *g, uint64_t t)
{
    const uint64_t row = t / g->gc, col = t % g->gc;
    const uint64_t top = min_u64(row * g->ch, it->height);
    if (top >= it->height)
        return it->height * it->width;
    const uint64_t rows = min_u64(it->height, top + g->ch) - top;
    return top * it->width + rows * min_u64(it->width, col * g->cw);
}

/* ---- positions ---- */

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

static uint64_t offset_of(const ctx *c, pos p)
{
    if (p.g >= c->image0[c->n])
        return c->pix0[c->n];
    size_t i = item_of_image(c, p.g);
    const hq_plan_item *it = &c->items[i];
    const uint64_t before = c->pix0[i] + (p.g - c->image0[i]) * image_pixels(it);
    return it->skip ? before : before + cell_offset(it, &c->grids[i], p.t);
}

static int pos_less(pos a, pos b)
{
    return a.g < b.g || (a.g == b.g && a.t < b.t);
}

static uint64_t dist(uint64_t a, uint64_t b)
{
    return a > b ? a - b : b - a;
}

/* The cell boundary of image g (item i) nearest to `within` pixels into it. */
static pos nearest_cell(const ctx *c, size_t i, uint64_t g, uint64_t within)
{
    const hq_plan_item *it = &c->items[i];
    const grid *gd = &c->grids[i];
    uint64_t row = within / (gd->ch * it->width);
    if (row >= gd->gr)
        row = gd->gr - 1;
    const uint64_t top = row * gd->ch;
    const uint64_t rows = min_u64(it->height, top + gd->ch) - top;
    const uint64_t col = (within - top * it->width) / (rows * gd->cw);
    uint64_t t = row * gd->gc + min_u64(col, gd->gc);
    const uint64_t next = row * gd->gc + min_u64(col + 1, gd->gc);
    if (dist(cell_offset(it, gd, next), within) < dist(cell_offset(it, gd, t), within))
        t = next;
    return t == ncells(c, i) ? (pos){g + 1, 0} : (pos){g, t};
}

/* Where a share that should end at pixel offset `target` ends: an image boundary if one lies
 * within `slack` pixels (or the image cannot be cut), else the nearest cell boundary. */
static pos boundary_near(const ctx *c, uint64_t target, uint64_t slack)
{
    const uint64_t nimg = c->image0[c->n];
    if (target >= c->pix0[c->n])
        return (pos){nimg, 0};
    /* The item holding the target: the last non-empty item whose first pixel is <= target. */
    size_t i = 0;
    for (size_t k = 0; k < c->n; k++)
        if (c->pix0[k] <= target && image_pixels(&c->items[k]) > 0 && c->items[k].slices > 0)
            i = k;
    const hq_plan_item *it = &c->items[i];
    const uint64_t ip = image_pixels(it);
    if (ip == 0)
        return (pos){nimg, 0};
    const uint64_t rel = target - c->pix0[i];
    const uint64_t s = rel / ip;
    if (s >= it->slices)
        return (pos){c->image0[i] + it->slices, 0};
    const uint64_t g = c->image0[i] + s, within = rel - s * ip;
    const pos img = 2 * within >= ip ? (pos){g + 1, 0} : (pos){g, 0};
    const uint64_t d_img = min_u64(within, ip - within);
    if (d_img <= slack || ncells(c, i) <= 1)
        return img;
    const pos cell = nearest_cell(c, i, g, within);
    return dist(offset_of(c, cell), target) < d_img ? cell : img;
}

/* ---- cutting shares into blocks ---- */

static int push(blist *l, const ctx *c, hq_block b)
{
    if (l->n == PLAN_BLOCKS_MAX) {
        l->too_many = 1;
        return -1;
    }
    if (l->n == l->cap) {
        uint64_t cap = l->cap ? l->cap * 2 : 64;
        hq_block *p = realloc(l->b, cap * sizeof *p);
        if (!p)
            return -1;
        l->b = p;
        l->cap = cap;
    }
    l->b[l->n++] = b;
    const uint64_t bytes = hq_block_pixels(&b) * pixel_bytes(&c->items[b.item]);
    if (bytes > l->max_bytes)
        l->max_bytes = bytes;
    return 0;
}

/* Cell rows [r0, r1) x cell columns [c0, c1) of slice s of item i: bands of whole cell rows when
 * one cell row fits a block, else pieces of one cell row, each at least one cell. */
static int cut_rect(blist *l, const ctx *c, size_t i, uint64_t s, uint64_t r0, uint64_t r1, uint64_t c0, uint64_t c1)
{
    const hq_plan_item *it = &c->items[i];
    const grid *g = &c->grids[i];
    const uint64_t px = pixel_bytes(it);
    const uint64_t x0 = c0 * g->cw, x1 = min_u64(it->width, c1 * g->cw);
    const uint64_t band = g->ch * (x1 - x0) * px;
    if (band <= c->block) {
        const uint64_t k = c->block / band;
        for (uint64_t r = r0; r < r1; r += k) {
            const uint64_t e = min_u64(r + k, r1);
            if (push(l, c, (hq_block){i, s, s + 1, r * g->ch, min_u64(it->height, e * g->ch), x0, x1}))
                return -1;
        }
        return 0;
    }
    uint64_t m = c->block / (g->ch * g->cw * px);
    if (m == 0)
        m = 1;
    for (uint64_t r = r0; r < r1; r++)
        for (uint64_t k = c0; k < c1; k += m) {
            const hq_block b = {i, s, s + 1, r * g->ch, min_u64(it->height, (r + 1) * g->ch), k * g->cw,
                                min_u64(it->width, min_u64(k + m, c1) * g->cw)};
            if (push(l, c, b))
                return -1;
        }
    return 0;
}

/* Cells [t0, t1) of slice s of item i, row-major: a partial first cell row, whole cell rows, a
 * partial last cell row. */
static int cut_cells(blist *l, const ctx *c, size_t i, uint64_t s, uint64_t t0, uint64_t t1)
{
    const uint64_t gc = c->grids[i].gc;
    uint64_t r0 = t0 / gc, r1 = t1 / gc;
    const uint64_t c0 = t0 % gc, c1 = t1 % gc;
    if (r0 == r1)
        return c1 > c0 ? cut_rect(l, c, i, s, r0, r0 + 1, c0, c1) : 0;
    if (c0 > 0) {
        if (cut_rect(l, c, i, s, r0, r0 + 1, c0, gc))
            return -1;
        r0++;
    }
    if (r1 > r0 && cut_rect(l, c, i, s, r0, r1, 0, gc))
        return -1;
    return c1 > 0 ? cut_rect(l, c, i, s, r1, r1 + 1, 0, c1) : 0;
}

/* How many whole slices from local slice s (at most `room`) one block takes: as many as fit, ending
 * on a chunk boundary of the slice dimension where that leaves at least one. */
static uint64_t slices_per_block(const hq_plan_item *it, uint64_t s, uint64_t room, uint64_t block)
{
    const uint64_t img_bytes = it->height * it->width * pixel_bytes(it);
    uint64_t k = min_u64(block / img_bytes, room);
    const uint64_t cs = it->chunk_slices;
    if (cs > 1 && k < room) {
        const uint64_t end = (s + k) / cs * cs;
        if (end > s)
            k = end - s;
    }
    return k ? k : 1;
}

/* Emits the blocks of the share [a, b). */
static int cut_share(blist *l, const ctx *c, pos a, pos b)
{
    while (pos_less(a, b)) {
        const size_t i = item_of_image(c, a.g);
        const hq_plan_item *it = &c->items[i];
        const uint64_t s = a.g - c->image0[i];
        const uint64_t item_end = c->image0[i] + it->slices;
        if (image_pixels(it) == 0 || it->slices == 0) {
            a = (pos){item_end, 0};
            continue;
        }
        const uint64_t img_bytes = image_pixels(it) * pixel_bytes(it);
        if (a.t > 0 || b.g == a.g || (img_bytes > c->block && ncells(c, i) > 1)) {
            /* Part of one image: the share starts or ends inside it, or it is too big for a block. */
            const uint64_t t1 = b.g == a.g ? b.t : ncells(c, i);
            if (cut_cells(l, c, i, s, a.t, t1))
                return -1;
            a = t1 == ncells(c, i) ? (pos){a.g + 1, 0} : (pos){a.g, t1};
            continue;
        }
        /* Whole slices, as many as fit a block, not past the item or the share. */
        const uint64_t last = b.g < item_end ? b.g : item_end;
        const uint64_t k = slices_per_block(it, s, last - a.g, c->block);
        if (push(l, c, (hq_block){i, s, s + k, 0, it->height, 0, it->width}))
            return -1;
        a = (pos){a.g + k, 0};
    }
    return 0;
}

/* ---- the two ways of sharing out ---- */

/* Contiguous shares ending at the given boundaries (end[r] for rank r; the last is the end). */
static int emit_contiguous(const ctx *c, const pos *end, hq_plan *out, blist *l)
{
    pos prev = {0, 0};
    for (int r = 0; r < out->nranks; r++) {
        out->first[r] = l->n;
        if (cut_share(l, c, prev, end[r]))
            return -1;
        out->rank_pixels[r] = offset_of(c, end[r]) - offset_of(c, prev);
        prev = end[r];
    }
    out->first[out->nranks] = l->n;
    return 0;
}

/* Share ends nearest the ideal ones, with image boundaries preferred within `slack` pixels.
 * Returns the largest share. */
static uint64_t choose_ends(const ctx *c, int nranks, uint64_t slack, pos *end)
{
    const uint64_t total = c->pix0[c->n];
    pos prev = {0, 0};
    uint64_t most = 0, prev_off = 0;
    for (int r = 0; r < nranks; r++) {
        pos e = {c->image0[c->n], 0};
        if (r + 1 < nranks) {
            const uint64_t target = (uint64_t)((unsigned __int128)total * (unsigned)(r + 1) / (unsigned)nranks);
            e = boundary_near(c, target, slack);
            if (pos_less(e, prev))
                e = prev;
        }
        const uint64_t off = offset_of(c, e);
        if (off - prev_off > most)
            most = off - prev_off;
        end[r] = e;
        prev = e;
        prev_off = off;
    }
    return most;
}

typedef struct sized {
    uint64_t g, pixels;
} sized;

static int larger_first(const void *a, const void *b)
{
    const sized *x = a, *y = b;
    if (x->pixels != y->pixels)
        return x->pixels > y->pixels ? -1 : 1;
    return x->g < y->g ? -1 : x->g > y->g;
}

/* A min-heap of ranks by (load, rank): the least loaded rank, the lowest on ties. */
static int lighter(const uint64_t *load, int a, int b)
{
    return load[a] < load[b] || (load[a] == load[b] && a < b);
}

static void sift_down(int *heap, int n, const uint64_t *load)
{
    for (int k = 0;;) {
        int m = k, l = 2 * k + 1, r = l + 1;
        if (l < n && lighter(load, heap[l], heap[m]))
            m = l;
        if (r < n && lighter(load, heap[r], heap[m]))
            m = r;
        if (m == k)
            return;
        int t = heap[k];
        heap[k] = heap[m];
        heap[m] = t;
        k = m;
    }
}

/* Largest image first to the least loaded rank: every image's rank in `owner`, the loads in
 * `load`. Returns the largest load (UINT64_MAX: out of memory). */
static uint64_t deal(const ctx *c, int nranks, int *owner, uint64_t *load)
{
    const uint64_t nimg = c->image0[c->n];
    sized *order = malloc((nimg ? nimg : 1) * sizeof *order);
    int *heap = malloc((size_t)nranks * sizeof *heap);
    if (!order || !heap) {
        free(order);
        free(heap);
        return UINT64_MAX;
    }
    for (size_t i = 0; i < c->n; i++)
        for (uint64_t s = 0; s < c->items[i].slices; s++)
            order[c->image0[i] + s] = (sized){c->image0[i] + s, image_pixels(&c->items[i])};
    qsort(order, nimg, sizeof *order, larger_first);
    memset(load, 0, (size_t)nranks * sizeof *load);
    for (int r = 0; r < nranks; r++)
        heap[r] = r; /* all loads 0: ascending ranks already form a heap */
    for (uint64_t k = 0; k < nimg; k++) {
        owner[order[k].g] = heap[0];
        load[heap[0]] += order[k].pixels;
        sift_down(heap, nranks, load);
    }
    free(order);
    free(heap);
    uint64_t most = 0;
    for (int r = 0; r < nranks; r++)
        most = load[r] > most ? load[r] : most;
    return most;
}

/* Every rank's dealt images, in input order, runs of one item cut into blocks of whole slices. */
static int emit_dealt(const ctx *c, const int *owner, const uint64_t *load, hq_plan *out, blist *l)
{
    const uint64_t nimg = c->image0[c->n];
    uint64_t *by_rank = malloc((nimg ? nimg : 1) * sizeof *by_rank);
    uint64_t *at = calloc((size_t)out->nranks + 1, sizeof *at);
    int rc = by_rank && at ? 0 : -1;
    /* Images grouped by rank, each group in input order (a counting sort). */
    for (uint64_t g = 0; g < nimg && !rc; g++)
        at[owner[g] + 1]++;
    for (int r = 0; r < out->nranks && !rc; r++)
        at[r + 1] += at[r];
    for (uint64_t g = 0; g < nimg && !rc; g++)
        by_rank[at[owner[g]]++] = g;
    for (int r = 0; r < out->nranks && !rc; r++) {
        out->first[r] = l->n;
        out->rank_pixels[r] = load[r];
        const uint64_t from = r ? at[r - 1] : 0, to = at[r];
        for (uint64_t k = from; k < to && !rc;) {
            const uint64_t g = by_rank[k];
            const size_t i = item_of_image(c, g);
            const uint64_t item_end = c->image0[i] + c->items[i].slices;
            uint64_t e = k + 1;
            while (e < to && by_rank[e] == g + (e - k) && by_rank[e] < item_end)
                e++;
            rc = cut_share(l, c, (pos){g, 0}, (pos){g + (e - k), 0});
            k = e;
        }
    }
    out->first[out->nranks] = l->n;
    free(by_rank);
    free(at);
    return rc;
}

/* Whether the largest share is within the slack of the mean: most / (total / nranks) <= 1 + 1/SLACK_DIV. */
static int tolerable(uint64_t most, uint64_t total, int nranks)
{
    return (unsigned __int128)most * (unsigned)nranks * SLACK_DIV <= (unsigned __int128)total * (SLACK_DIV + 1);
}

/* Contiguous shares; for collections that cannot be cut, dealt ones where those balance better. */
static int share_out(const ctx *c, int nranks, hq_plan *out, blist *l)
{
    const uint64_t total = c->pix0[c->n], nimg = c->image0[c->n];
    const uint64_t mean = total / (uint64_t)nranks;
    pos *end = malloc((size_t)nranks * sizeof *end);
    if (!end)
        return -1;
    /* Whole images first: no image is then split, so none needs a second pass or a reduction. */
    uint64_t most = choose_ends(c, nranks, UINT64_MAX, end);
    out->whole_images = 1;
    if (!tolerable(most, total, nranks)) {
        /* Each end within half the slack, so that no share exceeds the mean by more than the slack. */
        most = choose_ends(c, nranks, mean / SLACK_DIV / 2, end);
        out->whole_images = 1;
        for (int r = 0; r + 1 < nranks; r++)
            out->whole_images &= end[r].t == 0;
    }
    int any_split = 0;
    for (size_t i = 0; i < c->n; i++)
        any_split |= ncells(c, i) > 1;
    int rc = 0;
    if (!tolerable(most, total, nranks) && !any_split && nimg > 0) {
        int *owner = malloc(nimg * sizeof *owner);
        uint64_t *load = malloc((size_t)nranks * sizeof *load);
        const uint64_t dealt_most = owner && load ? deal(c, nranks, owner, load) : UINT64_MAX;
        if (dealt_most == UINT64_MAX) {
            rc = -1;
        } else if (dealt_most < most) {
            out->dealt = 1;
            rc = emit_dealt(c, owner, load, out, l);
        }
        free(owner);
        free(load);
        if (rc || out->dealt) {
            free(end);
            return rc;
        }
    }
    rc = emit_contiguous(c, end, out, l);
    free(end);
    return rc;
}

int hq_plan_make(const hq_plan_item *items, size_t n, int nranks, uint64_t block_bytes, hq_plan *out, hq_err *err)
{
    memset(out, 0, sizeof *out);
    if (nranks < 1 || block_bytes == 0)
        return hq_fail(err, HQ_EUSAGE, "plan: needs at least one rank and a non-zero block size");
    ctx c = {items, n, block_bytes, calloc(n + 1, sizeof(uint64_t)), calloc(n + 1, sizeof(uint64_t)),
             calloc(n + 1, sizeof(grid))};
    out->first = calloc((size_t)nranks + 1, sizeof *out->first);
    out->rank_pixels = calloc((size_t)nranks, sizeof *out->rank_pixels);
    out->nranks = nranks;
    blist l = {0};
    int rc = HQ_EMEM;
    if (!c.image0 || !c.pix0 || !c.grids || !out->first || !out->rank_pixels)
        goto done;
    for (size_t i = 0; i < n; i++) {
        c.image0[i + 1] = c.image0[i] + items[i].slices;
        c.pix0[i + 1] = c.pix0[i] + items[i].slices * image_pixels(&items[i]);
        c.grids[i] = grid_of(&items[i], block_bytes);
    }
    if (share_out(&c, nranks, out, &l))
        goto done;
    out->blocks = l.b;
    out->nblocks = l.n;
    out->max_block_bytes = l.max_bytes;
    out->total_pixels = c.pix0[n];
    out->nimages = c.image0[n];
    out->item_image0 = c.image0;
    out->nitems = n;
    c.image0 = NULL;
    l.b = NULL;
    rc = 0;
done:
    free(c.image0);
    free(c.pix0);
    free(c.grids);
    free(l.b);
    if (rc) {
        hq_plan_free(out);
        if (l.too_many)
            return hq_fail(err, HQ_EUSAGE, "more than %llu blocks of at most %llu bytes to plan: give a larger --block", (unsigned long long)PLAN_BLOCKS_MAX, (unsigned long long)block_bytes);
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

uint64_t hq_plan_min_block(const hq_plan_item *items, size_t n, size_t *which)
{
    uint64_t most = 0;
    for (size_t i = 0; i < n; i++) {
        const hq_plan_item *it = &items[i];
        if (image_pixels(it) == 0 || it->slices == 0)
            continue;
        uint64_t px = 1;
        if (!it->splittable)
            px = image_pixels(it);
        else if (it->whole_chunks && it->chunk_height && it->chunk_width)
            px = min_u64(it->chunk_height, it->height) * min_u64(it->chunk_width, it->width);
        const uint64_t bytes = px * pixel_bytes(it);
        if (bytes > most) {
            most = bytes;
            if (which)
                *which = i;
        }
    }
    return most;
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

/* The first block of blocks[lo, hi) whose last image is >= g (hi if none): blocks in input order. */
static uint64_t first_reaching(const hq_plan *p, uint64_t lo, uint64_t hi, uint64_t g)
{
    while (lo < hi) {
        const uint64_t mid = lo + (hi - lo) / 2;
        const hq_block *b = &p->blocks[mid];
        if (p->item_image0[b->item] + b->s1 - 1 >= g)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

int hq_plan_image_owner(const hq_plan *p, uint64_t g)
{
    if (!p->dealt) {
        const uint64_t k = first_reaching(p, 0, p->nblocks, g);
        return k < p->nblocks ? hq_plan_owner(p, k) : -1;
    }
    /* Dealt: each rank's blocks are in input order, and an image lies whole on one rank. */
    for (int r = 0; r < p->nranks; r++) {
        const uint64_t k = first_reaching(p, p->first[r], p->first[r + 1], g);
        if (k < p->first[r + 1] && p->item_image0[p->blocks[k].item] + p->blocks[k].s0 <= g)
            return r;
    }
    return -1;
}
