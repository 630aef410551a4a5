/* read.c — the PNG input opened and an item decoded whole into its block; each item's header (and a
 * palette image's indices) kept until its write takes them (png_internal.h says how many). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "png_internal.h"

int png_open_input(const hq_inventory *inv, MPI_Comm comm, int any_order, hq_io **out, hq_err *err)
{
    (void)any_order; /* a decoded PNG is in row order already */
    hq_io *io = calloc(1, sizeof *io);
    held_item *held = calloc(HELD_MAX, sizeof *held);
    if (!io || !held) {
        free(io);
        free(held);
        return hq_fail(err, HQ_EMEM, "%s: out of memory", inv->root ? inv->root : "input");
    }
    pthread_mutex_init(&io->mu, NULL);
    io->held = held;
    io->pending.slot = -1;
    io->inv = inv;
    io->comm = comm;
    MPI_Comm_rank(comm, &io->rank);
    *out = io;
    return 0;
}

void png_drop_held(hq_io *io)
{
    for (size_t i = 0; io->held && i < HELD_MAX; i++) {
        free(io->held[i].indices);
        io->held[i].indices = NULL;
        io->held[i].used = 0;
    }
}

/* Keeps an item's header for its write, in place of an older one of the same item or else of the
 * oldest kept. */
static void keep_held(hq_io *io, uint64_t item, const hq_png_info *info, uint8_t *indices)
{
    pthread_mutex_lock(&io->mu);
    size_t at = HELD_MAX;
    for (size_t i = 0; i < HELD_MAX && at == HELD_MAX; i++)
        if (io->held[i].used && io->held[i].item == item)
            at = i;
    if (at == HELD_MAX) {
        at = io->next_held;
        io->next_held = (io->next_held + 1) % HELD_MAX;
    }
    free(io->held[at].indices);
    io->held[at] = (held_item){1, item, *info, indices};
    pthread_mutex_unlock(&io->mu);
}

/* Takes an item's kept header: 1 if there was one. */
static int take_held(hq_io *io, uint64_t item, hq_png_info *info, uint8_t **indices)
{
    int found = 0;
    pthread_mutex_lock(&io->mu);
    for (size_t i = 0; i < HELD_MAX && !found; i++) {
        held_item *h = &io->held[i];
        if (!h->used || h->item != item)
            continue;
        *info = h->info;
        *indices = h->indices;
        h->indices = NULL;
        h->used = 0;
        found = 1;
    }
    pthread_mutex_unlock(&io->mu);
    return found;
}

/* The item, if it can be read or written: in range, not bad, and the block is the whole image. */
int png_usable_item(const hq_io *io, uint64_t item, const hq_block *b, const hq_item **out, hq_err *err)
{
    if (item >= io->inv->n)
        return hq_fail(err, HQ_EIO, "%s: no item %llu", io->inv->root, (unsigned long long)item);
    const hq_item *it = &io->inv->items[item];
    if (it->bad)
        return hq_fail(err, HQ_EINPUT, "%s", it->why ? it->why : it->src);
    if (b->item != item || b->s0 != 0 || b->s1 != 1 || !hq_block_whole(b, it->height, it->width))
        return hq_fail(err, HQ_EIO, "%s: a PNG block must be the whole image", it->src);
    *out = it;
    return 0;
}

static FILE *open_for_read(const char *path, hq_err *err, int *rc)
{
    FILE *fp = png_open_file(path, err);
    if (!fp) {
        *rc = HQ_EINPUT;
        return NULL;
    }
    setvbuf(fp, NULL, _IOFBF, STDIO_BUF_BYTES);
    *rc = 0;
    return fp;
}

/* Decodes the item's file: samples into dst (or not, when dst is NULL) and palette indices. */
static int decode_item(const hq_item *it, hq_png_info *info, void *dst, uint8_t **indices, hq_err *err)
{
    int rc;
    FILE *fp = open_for_read(it->src, err, &rc);
    if (!fp)
        return rc;
    hq_png_source s = {.name = it->src, .fp = fp};
    rc = hq_png_decode(&s, info, dst, dst ? hq_item_image_bytes(it) : 0, indices, err);
    fclose(fp);
    if (!rc && (info->width != it->width || info->height != it->height || info->channels != it->channels ||
                info->sample_bytes != it->sample_bytes)) {
        rc = hq_fail(err, HQ_EINPUT, "%s: changed since it was listed", it->src);
        if (indices) {
            free(*indices);
            *indices = NULL;
        }
    }
    return rc;
}

int png_read_block(hq_io *io, uint64_t item, const hq_block *b, int collective, void *dst, hq_err *err)
{
    (void)collective;
    if (!b)
        return 0;
    const hq_item *it = NULL;
    int rc = png_usable_item(io, item, b, &it, err);
    if (rc)
        return rc;
    if (!dst)
        return hq_fail(err, HQ_EIO, "%s: no buffer to read into", it->src);
    uint8_t *indices = NULL;
    hq_png_info info;
    rc = decode_item(it, &info, dst, &indices, err);
    if (rc)
        return rc;
    keep_held(io, item, &info, indices);
    return 0;
}

/* The header (and palette indices) of an item for writing: kept from read_block, otherwise read
 * again from the input. */
int png_item_for_write(hq_io *io, uint64_t item, const hq_item *it, hq_png_info *info, uint8_t **indices,
                          hq_err *err)
{
    if (take_held(io, item, info, indices))
        return 0;
    return decode_item(it, info, NULL, indices, err);
}
