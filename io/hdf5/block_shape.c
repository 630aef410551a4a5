/* block_shape.c — where a block lies in its dataset: fits or not, its hyperslab, its place in
 * words for messages, and the walk over the chunks it touches (odometer order: slices, rows,
 * columns, channels). Pure arithmetic on the item's shape and chunk shape: no HDF5 call, no MPI. */
#include <stdio.h>

#include "hdf5_internal.h"

int hdf5_block_fits(const hq_item *it, int frank, const hq_block *b)
{
    int has_n, has_c;
    hdf5_item_roles(frank, it, &has_n, &has_c);
    if (b->s0 >= b->s1 || b->s1 > it->slices || b->r0 >= b->r1 || b->r1 > it->height || b->c0 >= b->c1 ||
        b->c1 > it->width)
        return 0;
    if (!has_n && (b->s0 != 0 || b->s1 != 1))
        return 0;
    return b->s1 - b->s0 == 1 || hq_block_whole(b, it->height, it->width);
}

/* Where a block lies, for messages: "rows 0-99, cols 200-299" (inclusive), the slices first in a
 * stack. */
const char *hdf5_block_text(const hq_item *it, const hq_block *b, char *buf, size_t len)
{
    size_t used = 0;
    if (it->slices > 1)
        used = (size_t)snprintf(buf, len, b->s1 - b->s0 > 1 ? "slices %llu-%llu, " : "slice %llu, ",
                                (unsigned long long)b->s0, (unsigned long long)(b->s1 - 1));
    if (used < len)
        snprintf(buf + used, len - used, "rows %llu-%llu, cols %llu-%llu", (unsigned long long)b->r0,
                 (unsigned long long)(b->r1 - 1), (unsigned long long)b->c0, (unsigned long long)(b->c1 - 1));
    return buf;
}

/* The block as a hyperslab of the dataset: for a stack start (s0, r0, c0[, 0]) count (s1-s0,
 * r1-r0, c1-c0[, C]); for a single image start (r0, c0[, 0]). Returns the rank. */
int hdf5_block_extent(const hq_item *it, int frank, const hq_block *b, hsize_t *start, hsize_t *count)
{
    int has_n, has_c, k = 0;
    hdf5_item_roles(frank, it, &has_n, &has_c);
    if (has_n) {
        start[k] = b->s0;
        count[k++] = b->s1 - b->s0;
    }
    start[k] = b->r0;
    count[k++] = b->r1 - b->r0;
    start[k] = b->c0;
    count[k++] = b->c1 - b->c0;
    if (has_c) {
        start[k] = 0;
        count[k++] = it->channels;
    }
    return k;
}

static void walk_step(chunk_walk *w)
{
    for (int i = 0; i < w->k; i++) {
        const uint64_t lo = w->idx[i] * w->cd[i], hi = lo + w->cd[i], end = w->start[i] + w->count[i];
        w->s[i] = lo > w->start[i] ? lo : w->start[i];
        w->n[i] = (hi < end ? hi : end) - w->s[i];
        w->in_block[i] = w->s[i] - w->start[i];
    }
}

/* Starts a walk over block b of a chunked item; 0 when the item is not chunked. */
int hdf5_walk_begin(chunk_walk *w, const hq_io *io, uint64_t item, const hq_block *b)
{
    const hq_item *it = &io->inv.items[item];
    if (io->in_chunk[item][0] == 0)
        return 0;
    hsize_t start[MAX_RANK], count[MAX_RANK];
    w->k = hdf5_block_extent(it, io->frank[item], b, start, count);
    w->chunks = 1;
    w->chunk_bytes = it->sample_bytes;
    for (int i = 0; i < w->k; i++) {
        w->cd[i] = io->in_chunk[item][i];
        w->start[i] = start[i];
        w->count[i] = count[i];
        w->first[i] = w->idx[i] = start[i] / w->cd[i];
        w->last[i] = (start[i] + count[i] - 1) / w->cd[i];
        w->chunks *= w->last[i] - w->first[i] + 1;
        w->chunk_bytes *= w->cd[i];
    }
    walk_step(w);
    return 1;
}

/* The next chunk; 0 after the last. */
int hdf5_walk_next(chunk_walk *w)
{
    int i = w->k - 1;
    for (; i >= 0 && w->idx[i] == w->last[i]; i--)
        w->idx[i] = w->first[i];
    if (i < 0)
        return 0;
    w->idx[i]++;
    walk_step(w);
    return 1;
}

/* The dataset's extent in the order block_extent uses (slices, rows, columns, channels, as the
 * dataset has them). Returns the rank. */
int hdf5_item_dims(const hq_io *io, uint64_t item, uint64_t *dims)
{
    const hq_item *it = &io->inv.items[item];
    const hq_block all = {item, 0, it->slices, 0, it->height, 0, it->width};
    hsize_t start[MAX_RANK], count[MAX_RANK];
    const int k = hdf5_block_extent(it, io->frank[item], &all, start, count);
    for (int i = 0; i < k; i++)
        dims[i] = count[i];
    return k;
}
