/* mask.c — the mask plane of mask.h: --mask read through the io layer, --ignore folded in for luma. */
#include "mask.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/pixel.h"
#include "../io/io.h"

struct hq_mask {
    const hq_options *o;
    const hq_inventory *inv; /* the input's */
    int have_file;
    hq_inventory minv;       /* --mask's items */
    const hq_io_ops *ops;
    hq_io *io;
    uint64_t *map;           /* per input item: its mask item */
    struct mask_name *by_name; /* a directory or list of masks: its items by name (match_item) */
    uint8_t *per_slice;      /* per input item: 1 = mask slice s for image slice s; 0 = one mask for all */
    uint8_t *luma;           /* per input item: --ignore folded in on luma (--mask-apply inside) */
    /* The driver's I/O threads may read blocks at once (io.h `concurrent`, a PNG input); a mask in
     * a format that is not concurrent (HDF5) is then read one block at a time. */
    pthread_mutex_t lock;
};

static int is_luma_ignore(const hq_options *o, const hq_item *it)
{
    return o->ignore && o->mask_inside && it->channels >= 3 && o->color == HQ_COLOR_LUMA;
}

/* A mask of a directory or list is found by its name. A scan of every mask name for every image
 * is quadratic (13 s at 64,000 PNGs, four times that per doubling), so the names are sorted once
 * and each image's is searched. Equal names sort by position, so that the first of them wins as in
 * a scan in order (a list with two of one base name is refused by the scan anyway). */
struct mask_name {
    const char *name;
    uint64_t k;
};

static int cmp_mask_name(const void *a, const void *b)
{
    const struct mask_name *x = a, *y = b;
    const int c = strcmp(x->name, y->name);
    return c ? c : (x->k > y->k) - (x->k < y->k);
}

static int sort_mask_names(hq_mask *m, hq_err *err)
{
    const size_t n = m->minv.n;
    if (!(m->by_name = malloc((n ? n : 1) * sizeof *m->by_name)))
        return hq_fail(err, HQ_EMEM, "out of memory for the mask");
    for (size_t k = 0; k < n; k++)
        m->by_name[k] = (struct mask_name){m->minv.items[k].name, k};
    qsort(m->by_name, n, sizeof *m->by_name, cmp_mask_name);
    return 0;
}

/* The first mask item named name (byte for byte, as strcmp), or minv.n when none is. */
static size_t find_mask_name(const hq_mask *m, const char *name)
{
    size_t lo = 0, hi = m->minv.n;
    while (lo < hi) { /* the lowest entry not below name: the first of its equals */
        const size_t mid = lo + (hi - lo) / 2;
        if (strcmp(m->by_name[mid].name, name) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < m->minv.n && strcmp(m->by_name[lo].name, name) == 0 ? (size_t)m->by_name[lo].k : m->minv.n;
}

/* "H x W", or "N x H x W" for a stack of N > 1 slices, as the user shaped it. */
static void dims_text(char *buf, size_t len, const hq_item *it)
{
    if (it->slices > 1)
        snprintf(buf, len, "%llu x %llu x %llu", (unsigned long long)it->slices, (unsigned long long)it->height,
                 (unsigned long long)it->width);
    else
        snprintf(buf, len, "%llu x %llu", (unsigned long long)it->height, (unsigned long long)it->width);
}

/* Which mask item masks input item i, and how; the same answer on every rank (both inventories
 * are the same everywhere). */
static int match_item(hq_mask *m, size_t i, hq_err *err)
{
    const hq_item *it = &m->inv->items[i];
    const char *src = m->o->mask;
    size_t k = 0;
    if (m->minv.root_is_dir) {
        if (m->inv->format != HQ_FMT_PNG)
            return hq_fail(err, HQ_EINPUT, "%s: a directory or list of masks goes with PNG input only; for HDF5 "
                           "give FILE.h5:/dataset", src);
        int rc = m->by_name ? 0 : sort_mask_names(m, err);
        if (rc)
            return rc;
        if ((k = find_mask_name(m, it->name)) == m->minv.n)
            return hq_fail(err, HQ_EINPUT, "%s: no mask named %s (for %s)", src, it->name, it->src);
    } else if (m->inv->format == HQ_FMT_PNG && m->minv.format != HQ_FMT_PNG) {
        /* PNG input is read by several I/O threads at once, which HDF5 does not allow. */
        return hq_fail(err, HQ_EINPUT, "%s: the mask of PNG input is a PNG file or a directory of PNGs", src);
    } else if (m->minv.n != 1) {
        return hq_fail(err, HQ_EINPUT, "%s: holds %llu images; a mask is one dataset (FILE.h5:/path), one PNG, or "
                       "a directory of PNGs", src, (unsigned long long)m->minv.n);
    }
    const hq_item *mk = &m->minv.items[k];
    const int hdf5 = m->inv->format == HQ_FMT_HDF5;
    /* A mask is read as integers, non-zero counting (read_file_plane): a float's low bytes are not
     * its value (1.0f is 0x3f800000), so a float mask would read as all zeros. */
    if (mk->sample == HQ_SAMPLE_FLOAT)
        return hq_fail(err, HQ_EINPUT, "%s%s%s: a float mask; a mask is 8- or 16-bit integers (uint8, uint16, int8 or "
                       "int16; non-zero: counted)",
                       mk->src, m->minv.format == HQ_FMT_HDF5 ? ":" : "",
                       m->minv.format == HQ_FMT_HDF5 ? mk->name : "");
    if (mk->height != it->height || mk->width != it->width || (mk->slices != 1 && mk->slices != it->slices) ||
        (m->minv.format == HQ_FMT_HDF5 && mk->channels != 1))
    {
        char ms[96], is[96];
        dims_text(ms, sizeof ms, mk);
        dims_text(is, sizeof is, it);
        return hq_fail(err, HQ_EINPUT, "%s%s%s: the mask is %s%s, but %s%s%s is %s (a mask is H x W, or N x H x W for "
                       "an N-slice stack)", mk->src, m->minv.format == HQ_FMT_HDF5 ? ":" : "",
                       m->minv.format == HQ_FMT_HDF5 ? mk->name : "", ms,
                       mk->channels != 1 && m->minv.format == HQ_FMT_HDF5 ? " with channels" : "", it->src,
                       hdf5 ? ":" : "", hdf5 ? it->name : "", is);
    }
    m->map[i] = k;
    m->per_slice[i] = mk->slices > 1 || it->slices == 1;
    return 0;
}

static int scan_and_share(hq_mask *m, const hq_comm *c, hq_err *err)
{
    int rc = 0;
    unsigned char *buf = NULL;
    uint64_t len = 0;
    if (c->rank == 0) {
        /* In a child, as the input is: a damaged mask file must not take the run down either. */
        rc = hq_io_scan_isolated(m->o->mask, HQ_SCAN_PLANES, 0, &m->minv, err);
        /* A list's entry that fails names only itself, which says nothing of the mask. */
        rc = rc ? hq_fail_within(err, rc, "--mask", m->o->mask) : 0;
        if (!rc)
            rc = hq_inventory_pack(&m->minv, &buf, &len, err);
    }
    if ((rc = hq_comm_agree(c, rc, err)))
        return rc;
    rc = hq_comm_bcast_bytes(c, &buf, &len, err);
    if (!rc && c->rank != 0)
        rc = hq_inventory_unpack(buf, len, &m->minv, err);
    free(buf);
    return hq_comm_agree(c, rc, err);
}

static void free_mask(hq_mask *m)
{
    pthread_mutex_destroy(&m->lock);
    hq_inventory_free(&m->minv);
    free(m->map);
    free(m->by_name);
    free(m->per_slice);
    free(m->luma);
    free(m);
}

int hq_mask_open(const hq_options *o, const hq_inventory *inv, const hq_comm *c, hq_mask **out, hq_err *err)
{
    *out = NULL;
    int luma = 0;
    for (size_t i = 0; i < inv->n; i++)
        luma |= !inv->items[i].bad && is_luma_ignore(o, &inv->items[i]);
    if (!o->mask && !luma)
        return 0;
    hq_mask *m = calloc(1, sizeof *m);
    const size_t n = inv->n ? inv->n : 1;
    if (m) {
        pthread_mutex_init(&m->lock, NULL);
        m->map = calloc(n, sizeof *m->map);
        m->per_slice = calloc(n, 1);
        m->luma = calloc(n, 1);
    }
    int rc = m && m->map && m->per_slice && m->luma ? 0 : hq_fail(err, HQ_EMEM, "out of memory for the mask");
    if (!rc) {
        m->o = o;
        m->inv = inv;
        m->have_file = o->mask != NULL;
        for (size_t i = 0; i < inv->n; i++)
            m->luma[i] = !inv->items[i].bad && is_luma_ignore(o, &inv->items[i]);
    }
    rc = hq_comm_agree(c, rc, err);
    if (!rc && m->have_file) {
        rc = scan_and_share(m, c, err);
        for (size_t i = 0; !rc && i < inv->n; i++)
            if (!inv->items[i].bad)
                rc = match_item(m, i, err);
        rc = hq_comm_agree(c, rc, err);
        if (!rc) {
            m->ops = hq_io_ops_for(m->minv.format);
            rc = m->ops->open_input(&m->minv, c->world, 0, &m->io, err);
        }
    }
    if (rc) {
        if (m)
            free_mask(m);
        return rc;
    }
    *out = m;
    return 0;
}

int hq_mask_has_file(const hq_mask *m)
{
    return m && m->have_file;
}

uint64_t hq_mask_plane_bytes(const hq_mask *m, const hq_block *b)
{
    return m && (m->have_file || m->luma[b->item]) ? hq_block_pixels(b) : 0;
}

/* The mask's samples for block b, first channel, as 0/1 bytes into plane. */
static int read_file_plane(hq_mask *m, const hq_block *b, uint8_t *plane, hq_err *err)
{
    const hq_item *mk = &m->minv.items[m->map[b->item]];
    const int per_slice = m->per_slice[b->item];
    hq_block mb = {m->map[b->item], per_slice ? b->s0 : 0, per_slice ? b->s1 : 1, b->r0, b->r1, b->c0, b->c1};
    const uint64_t px = hq_block_pixels(&mb), spb = (uint64_t)mk->channels * mk->sample_bytes;
    /* One-byte gray samples land in the plane as they are; others are read beside it. */
    uint8_t *raw = spb == 1 ? plane : malloc(px * spb);
    if (!raw)
        return hq_fail(err, HQ_EMEM, "%s: out of memory for a mask block", mk->src);
    const int serial = !m->ops->concurrent;
    if (serial)
        pthread_mutex_lock(&m->lock);
    int rc = m->ops->read_block(m->io, mb.item, &mb, 0, raw, err);
    if (serial)
        pthread_mutex_unlock(&m->lock);
    if (!rc && spb != 1) {
        for (uint64_t p = 0; p < px; p++) {
            const uint8_t *s = raw + p * spb;
            plane[p] = mk->sample_bytes == 1 ? s[0] != 0 : (s[0] | s[1]) != 0;
        }
    }
    if (raw != plane)
        free(raw);
    /* One mask for every slice of a multi-slice block: repeated. */
    const uint64_t slices = b->s1 - b->s0;
    for (uint64_t s = 1; !rc && !per_slice && s < slices; s++)
        memcpy(plane + s * px, plane, px);
    return rc;
}

/* Zero where the pixel's luma Y (core/pixel.h, as histogrammed) lies in the ignored range. */
#define DEFINE_LUMA_FOLD(NAME, T)                                                                             \
    static void NAME(const T *p, uint64_t n, uint32_t ch, uint32_t maxv, uint32_t lo, uint32_t hi, uint8_t *pl) \
    {                                                                                                         \
        for (uint64_t i = 0; i < n; i++) {                                                                    \
            const T *px = p + i * ch;                                                                         \
            const uint32_t y = hq_luma_of_fx(hq_luma_fx(hq_bin(px[0], maxv), hq_bin(px[1], maxv),              \
                                                       hq_bin(px[2], maxv)));                                 \
            if (y >= lo && y <= hi)                                                                           \
                pl[i] = 0;                                                                                    \
        }                                                                                                     \
    }
DEFINE_LUMA_FOLD(luma_fold8, uint8_t)
DEFINE_LUMA_FOLD(luma_fold16, uint16_t)

int hq_mask_read(hq_mask *m, const hq_block *b, const void *pixels, uint8_t *plane, hq_err *err)
{
    const uint64_t px = hq_block_pixels(b);
    if (m->have_file) {
        int rc = read_file_plane(m, b, plane, err);
        if (rc)
            return rc;
    } else {
        memset(plane, 1, px);
    }
    if (m->luma[b->item]) {
        const hq_item *it = &m->inv->items[b->item];
        const uint32_t bits = m->o->bits ? m->o->bits : it->depth, maxv = (1u << bits) - 1;
        if (it->sample_bytes == 1)
            luma_fold8(pixels, px, it->channels, maxv, m->o->ignore_lo, m->o->ignore_hi, plane);
        else
            luma_fold16(pixels, px, it->channels, maxv, m->o->ignore_lo, m->o->ignore_hi, plane);
    }
    return 0;
}

int hq_mask_close(hq_mask *m, hq_err *err)
{
    if (!m)
        return 0;
    int rc = m->io ? m->ops->close(m->io, 0, NULL, err) : 0;
    free_mask(m);
    return rc;
}
