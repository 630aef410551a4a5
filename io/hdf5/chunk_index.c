/* chunk_index.c — every chunk of a chunked dataset, (address, stored size, filter mask) keyed by
 * its position in the chunk grid, read in one pass over the dataset's chunk index.
 *
 * Why: libhdf5 1.10.8 answers H5Dget_chunk_info_by_coord (and H5Dget_chunk_info) by iterating the
 * chunk index from its start until the chunk matches, so one call per chunk costs O(n^2) for n
 * chunks: 16,384 chunks took 11 s of lookups, a million more than ten minutes. 1.10 has no
 * H5Dchunk_iter. The one-pass reader below parses the index from the file with pread instead.
 *
 * Contract:
 *  - hdf5_chunk_table_read(d, fd) returns a table, or NULL where the one-pass reader does not
 *    apply or anything about the file is unexpected; the caller then keeps the per-chunk calls.
 *    It applies to two index types:
 *      H5D_CHUNK_IDX_BTREE (v1 B-tree: files in the earliest format, h5py's default and our own
 *        outputs): the object header (version 1 or 2, with continuation blocks) gives the layout
 *        message (version 3), whose B-tree is walked: raw-data nodes ("TREE", type 1), keys of
 *        (size u32, filter mask u32, rank + 1 offsets u64), children the chunks at level 0;
 *      H5D_CHUNK_IDX_NONE (implicit: early allocation, fixed dimensions, no filters): chunk c in
 *        row-major grid order lies at first + c * chunk bytes, `first` from H5Dget_chunk_info(0),
 *        which stops at the first chunk.
 *    Single-chunk, fixed-array, extensible-array and v2 B-tree indexes are not read here. Elements
 *    of variable length (carry.c copies such metadata chunk by chunk) are their stored size, a
 *    length and a global heap id, not their size in memory.
 *  - Addresses are HDF5's, relative to the file's base address (the user block's size, see
 *    hdf5_base_addr), as H5Dget_chunk_info_by_coord gives them; a chunk never written has none,
 *    exactly as that call reports it (HADDR_UNDEF: HDF5 fills it).
 *  - The file is untrusted (fuzz/regress/hdf5): every read is bounded by the file's size, node
 *    fan-out by the B-tree's K, depth by LEVEL_MAX with levels strictly decreasing (no loops),
 *    entries by the grid's chunk count, offsets must be multiples of the chunk shape inside the
 *    grid, a grid position found twice is refused. Then HDF5 is asked for the chunk count
 *    (H5Dget_num_chunks, one walk) and for a handful of grid positions (each call one walk at
 *    most), and any difference from the table refuses it: a wrong address would silently corrupt
 *    an output, a slower path only costs time.
 *  - The HDF5 calls it makes depend only on the dataset's index type and shape, never on what
 *    pread found, so every rank makes the same calls (collective metadata reads on the output);
 *    the caller agrees across ranks on the result where that matters (direct.c).
 *  - hdf5_chunk_lookup is H5Dget_chunk_info_by_coord for an input dataset, answered from a table
 *    read on first use (kept in io->dir[item], freed with the direct path's state). */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "hdf5_internal.h"
#include "../../core/fdio.h"

#define LEVEL_MAX 48           /* a B-tree of 2^64 chunks with the smallest fan-out (2) is 64 deep */
#define TABLE_MAX ((uint64_t)1 << 22) /* chunks: 16 bytes each, per dataset, on every rank */
#define HEADER_BLOCKS_MAX 64   /* object header chunks (the first and its continuations) */
#define HEADER_BYTES_MAX ((uint64_t)1 << 24)
#define PROBES 5

struct hdf5_chunk_table {
    int k;                      /* the dataset's rank */
    uint64_t grid[MAX_RANK], cd[MAX_RANK], n, chunk_bytes;
    uint64_t found;             /* chunks the index holds */
    int vlen;                   /* variable-length elements: stored as a length and a global heap id */
    /* Implicit index: no arrays, chunk c at first + c * chunk_bytes. */
    int implicit;
    uint64_t first;
    /* B-tree: per grid position, row-major. A stored size fits 32 bits: that is all the v1 B-tree
     * key holds (HDF5 limits a chunk to 4 GiB). */
    uint64_t *addr;             /* HADDR_UNDEF: no chunk */
    uint32_t *size, *mask;
};

/* What the parser needs of the file: where it starts and ends, and its encoding sizes. */
typedef struct file_view {
    int fd;
    uint64_t base, eof;         /* absolute offsets */
    unsigned sa, ss;            /* sizes of offsets (addresses) and of lengths, bytes */
    unsigned istore_k;          /* a chunk B-tree node holds up to 2K children */
    uint64_t nodes;             /* B-tree nodes read so far, bounded */
} file_view;

static uint64_t le(const unsigned char *p, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = n; i-- > 0;)
        v = v << 8 | p[i];
    return v;
}

/* An address field of the file: HADDR_UNDEF when all its bits are set. */
static uint64_t le_addr(const unsigned char *p, unsigned sa)
{
    const uint64_t v = le(p, sa);
    return (sa == 8 ? v == UINT64_MAX : v == ((uint64_t)1 << (8 * sa)) - 1) ? HADDR_UNDEF : v;
}

/* len bytes at relative address rel, only inside the file. */
static int view_read(const file_view *f, uint64_t rel, void *p, uint64_t len)
{
    if (rel == HADDR_UNDEF || rel > f->eof || f->base > f->eof - rel || len > f->eof - f->base - rel)
        return -1;
    return hq_pread_full(f->fd, p, len, f->base + rel);
}

static unsigned char *view_load(const file_view *f, uint64_t rel, uint64_t len)
{
    unsigned char *p = len ? malloc(len) : NULL;
    if (p && view_read(f, rel, p, len)) {
        free(p);
        p = NULL;
    }
    return p;
}

/* ---- object header: the Data Layout message ---- */

enum { MSG_LAYOUT = 0x0008, MSG_CONT = 0x0010 };

typedef struct header_walk {
    const file_view *f;
    int version;
    int crt_order;              /* version 2: messages carry a creation order */
    uint64_t cont_addr[HEADER_BLOCKS_MAX], cont_len[HEADER_BLOCKS_MAX];
    int nblocks, nconts;
    uint64_t bytes;
    unsigned char *layout;      /* the layout message's bytes (malloc'd) */
    uint64_t layout_len;
} header_walk;

/* The messages in buf[0, len): remembers continuations and the layout message. */
static int scan_messages(header_walk *h, const unsigned char *buf, uint64_t len)
{
    const uint64_t mh = h->version == 1 ? 8 : 4 + (h->crt_order ? 2 : 0);
    uint64_t p = 0;
    while (len - p >= mh) {
        unsigned type, flags;
        uint64_t size;
        if (h->version == 1) {
            type = (unsigned)le(buf + p, 2);
            size = le(buf + p + 2, 2);
            flags = buf[p + 4];
        } else {
            type = buf[p];
            size = le(buf + p + 1, 2);
            flags = buf[p + 3];
        }
        p += mh;
        if (size > len - p)
            return -1;
        const unsigned char *m = buf + p;
        if (type == MSG_CONT) {
            if (size < h->f->sa + h->f->ss || h->nconts == HEADER_BLOCKS_MAX)
                return -1;
            h->cont_addr[h->nconts] = le_addr(m, h->f->sa);
            h->cont_len[h->nconts++] = le(m + h->f->sa, h->f->ss);
        } else if (type == MSG_LAYOUT) {
            if (h->layout || (flags & 0x02)) /* twice, or shared: not a layout we know */
                return -1;
            h->layout = malloc(size ? size : 1);
            if (!h->layout)
                return -1;
            memcpy(h->layout, m, size);
            h->layout_len = size;
        }
        p += size;
    }
    return 0;
}

/* The dataset's layout message, from its object header at relative address oh. */
static int find_layout(header_walk *h, uint64_t oh)
{
    unsigned char pre[64];
    const file_view *f = h->f;
    if (view_read(f, oh, pre, 16))
        return -1;
    uint64_t start, len;
    if (memcmp(pre, "OHDR", 4) == 0) {
        if (pre[4] != 2)
            return -1;
        const unsigned flags = pre[5];
        uint64_t p = 6 + ((flags & 0x20) ? 16 : 0) + ((flags & 0x10) ? 4 : 0);
        const unsigned w = 1u << (flags & 3);
        if (view_read(f, oh, pre, p + w))
            return -1;
        h->version = 2;
        h->crt_order = (flags & 0x04) != 0;
        start = oh + p + w;
        len = le(pre + p, w);
    } else {
        if (pre[0] != 1)
            return -1;
        h->version = 1;
        start = oh + 16; /* the 12-byte prefix, padded to 8 */
        len = le(pre + 8, 4);
    }
    for (int next = 0;;) {
        if (len > HEADER_BYTES_MAX - h->bytes || ++h->nblocks > HEADER_BLOCKS_MAX)
            return -1;
        h->bytes += len;
        unsigned char *buf = view_load(f, start, len);
        if (!buf && len)
            return -1;
        const int rc = buf ? scan_messages(h, buf, len) : 0;
        free(buf);
        if (rc)
            return -1;
        if (next == h->nconts)
            break;
        start = h->cont_addr[next];
        len = h->cont_len[next++];
        if (start == HADDR_UNDEF)
            return -1;
        if (h->version == 2) { /* "OCHK", messages, checksum */
            unsigned char sig[4];
            if (len < 8 || view_read(f, start, sig, 4) || memcmp(sig, "OCHK", 4) != 0)
                return -1;
            start += 4;
            len -= 8;
        }
    }
    return h->layout ? 0 : -1;
}

/* The v1 B-tree's address from a version 3 chunked layout message, whose chunk shape must be
 * the dataset's (its last dimension is the element size). */
static int btree_root(const file_view *f, const unsigned char *m, uint64_t len, const hdf5_chunk_table *t,
                      uint64_t elem, uint64_t *root)
{
    if (len < 3 || m[0] != 3 || m[1] != 2 || m[2] != t->k + 1)
        return -1;
    const uint64_t need = 3 + f->sa + 4 * (uint64_t)(t->k + 1);
    if (len < need)
        return -1;
    *root = le_addr(m + 3, f->sa);
    const unsigned char *d = m + 3 + f->sa;
    if (t->vlen)
        elem = 4 + (uint64_t)f->sa + 4; /* the sequence's length, then the heap's address and index */
    for (int i = 0; i <= t->k; i++)
        if (le(d + 4 * i, 4) != (i < t->k ? t->cd[i] : elem))
            return -1;
    return 0;
}

/* ---- the v1 B-tree ---- */

/* The node at rel: at `level` (or any level up to LEVEL_MAX for the root, level < 0), its
 * chunks entered in the table. */
static int walk_node(file_view *f, hdf5_chunk_table *t, uint64_t rel, int level)
{
    const uint64_t hdr = 8 + 2 * (uint64_t)f->sa;
    const uint64_t key = 8 + 8 * (uint64_t)(t->k + 1);
    unsigned char h[24];
    /* Each visit below the root reaches a leaf that adds at least one new chunk or fails, so
     * visits are at most LEVEL_MAX per chunk. */
    if (++f->nodes > LEVEL_MAX * (t->n + 1) || view_read(f, rel, h, hdr))
        return -1;
    const int lv = h[5];
    const uint64_t used = le(h + 6, 2);
    if (memcmp(h, "TREE", 4) != 0 || h[4] != 1 || (level < 0 ? lv > LEVEL_MAX : lv != level) ||
        used > 2 * (uint64_t)f->istore_k || (used == 0 && level >= 0))
        return -1;
    if (used == 0)
        return 0; /* an empty root: no chunk written */
    const uint64_t len = used * (key + f->sa) + key;
    unsigned char *node = view_load(f, rel + hdr, len);
    if (!node)
        return -1;
    int rc = 0;
    for (uint64_t u = 0; u < used && !rc; u++) {
        const unsigned char *k = node + u * (key + f->sa);
        const uint64_t child = le_addr(k + key, f->sa);
        if (child == HADDR_UNDEF) {
            rc = -1;
        } else if (lv > 0) {
            rc = walk_node(f, t, child, lv - 1);
        } else {
            uint64_t lin = 0;
            for (int i = 0; i < t->k && !rc; i++) {
                const uint64_t off = le(k + 8 + 8 * i, 8);
                if (off % t->cd[i] != 0 || off / t->cd[i] >= t->grid[i])
                    rc = -1;
                lin = lin * t->grid[i] + off / t->cd[i];
            }
            if (rc || le(k + 8 + 8 * t->k, 8) != 0 || t->addr[lin] != HADDR_UNDEF || t->found == t->n) {
                rc = -1;
            } else {
                t->addr[lin] = child;
                t->size[lin] = (uint32_t)le(k, 4);
                t->mask[lin] = (uint32_t)le(k + 4, 4);
                t->found++;
            }
        }
    }
    free(node);
    return rc;
}

/* ---- the table ---- */

void hdf5_chunk_table_free(hdf5_chunk_table *t)
{
    if (!t)
        return;
    free(t->addr);
    free(t->size);
    free(t->mask);
    free(t);
}

void hdf5_chunk_offset(uint64_t c, int rank, const uint64_t *grid, const hsize_t *cd, hsize_t *off)
{
    for (int k = rank - 1; k >= 0; k--) {
        off[k] = (c % grid[k]) * cd[k];
        c /= grid[k];
    }
}

uint64_t hdf5_chunk_table_chunks(const hdf5_chunk_table *t)
{
    return t ? t->n : 0;
}

/* The grid position of a chunk's first element; UINT64_MAX when it is none. */
static uint64_t grid_pos(const hdf5_chunk_table *t, const hsize_t *coord)
{
    uint64_t lin = 0;
    for (int i = 0; i < t->k; i++) {
        if (coord[i] % t->cd[i] != 0 || coord[i] / t->cd[i] >= t->grid[i])
            return UINT64_MAX;
        lin = lin * t->grid[i] + coord[i] / t->cd[i];
    }
    return lin;
}

static void entry(const hdf5_chunk_table *t, uint64_t lin, unsigned *mask, haddr_t *addr, hsize_t *size)
{
    if (t->implicit) {
        *addr = t->first + lin * t->chunk_bytes;
        *size = t->chunk_bytes;
        *mask = 0;
        return;
    }
    *addr = t->addr[lin];
    *size = t->addr[lin] == HADDR_UNDEF ? 0 : t->size[lin];
    *mask = t->addr[lin] == HADDR_UNDEF ? 0 : t->mask[lin];
}

/* As H5Dget_chunk_info_by_coord: 0, or -1 for a coordinate that is no chunk's first element. */
int hdf5_chunk_table_get(const hdf5_chunk_table *t, const hsize_t *coord, unsigned *mask, haddr_t *addr,
                         hsize_t *size)
{
    const uint64_t lin = grid_pos(t, coord);
    if (lin == UINT64_MAX)
        return -1;
    entry(t, lin, mask, addr, size);
    return 0;
}

/* The dataset's shape, chunk shape and element size into t; 0 when they make a grid. */
static int shape_of(hid_t d, hdf5_chunk_table *t, uint64_t *elem)
{
    hid_t s = H5Dget_space(d), dcpl = H5Dget_create_plist(d), ty = H5Dget_type(d);
    hsize_t dims[MAX_RANK], cd[MAX_RANK];
    const int k = s >= 0 ? H5Sget_simple_extent_ndims(s) : -1;
    int ok = k >= 1 && k <= MAX_RANK && dcpl >= 0 && ty >= 0 && H5Pget_layout(dcpl) == H5D_CHUNKED &&
             H5Sget_simple_extent_dims(s, dims, NULL) == k && H5Pget_chunk(dcpl, k, cd) == k;
    *elem = ok ? H5Tget_size(ty) : 0;
    ok = ok && *elem > 0;
    /* In memory such an element is a pointer or an hvl_t; the file's size comes with its
     * addresses' size (btree_root). */
    t->vlen = ok && (H5Tget_class(ty) == H5T_VLEN || H5Tis_variable_str(ty) > 0);
    t->k = k;
    t->n = 1;
    t->chunk_bytes = *elem;
    for (int i = 0; ok && i < k; i++) {
        ok = cd[i] > 0 && dims[i] > 0;
        if (!ok)
            break;
        t->cd[i] = cd[i];
        t->grid[i] = (dims[i] + cd[i] - 1) / cd[i];
        ok = t->grid[i] <= TABLE_MAX && t->n <= TABLE_MAX / t->grid[i] && cd[i] <= UINT32_MAX / t->chunk_bytes;
        t->n *= t->grid[i];
        t->chunk_bytes *= cd[i];
    }
    if (s >= 0)
        H5Sclose(s);
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (ty >= 0)
        H5Tclose(ty);
    return ok ? 0 : -1;
}

/* The file's encoding sizes and base address; the view's descriptor bounds. */
static int view_of(hid_t d, int fd, file_view *f)
{
    memset(f, 0, sizeof *f);
    f->fd = fd;
    struct stat st;
    hid_t file = H5Iget_file_id(d);
    hid_t fcpl = file >= 0 ? H5Fget_create_plist(file) : H5I_INVALID_HID;
    size_t sa = 0, ss = 0;
    hsize_t ub = 0;
    unsigned ik = 0;
    const int ok = fcpl >= 0 && H5Pget_sizes(fcpl, &sa, &ss) >= 0 && H5Pget_userblock(fcpl, &ub) >= 0 &&
                   H5Pget_istore_k(fcpl, &ik) >= 0 && fd >= 0 && fstat(fd, &st) == 0 && st.st_size > 0;
    if (fcpl >= 0)
        H5Pclose(fcpl);
    if (file >= 0)
        H5Fclose(file);
    if (!ok || (sa != 2 && sa != 4 && sa != 8) || (ss != 2 && ss != 4 && ss != 8) || ik == 0 || ik > 32767)
        return -1;
    f->sa = (unsigned)sa;
    f->ss = (unsigned)ss;
    f->istore_k = ik;
    f->base = ub;
    f->eof = (uint64_t)st.st_size;
    return f->base < f->eof ? 0 : -1;
}

/* The v1 B-tree's chunks, parsed from the file. */
static int read_btree(hid_t d, file_view *f, hdf5_chunk_table *t, uint64_t elem, int parse)
{
    H5O_info_t oi;
    if (H5Oget_info2(d, &oi, H5O_INFO_BASIC) < 0 || !parse)
        return -1;
    t->addr = malloc(t->n * sizeof *t->addr);
    t->size = calloc(t->n, sizeof *t->size);
    t->mask = calloc(t->n, sizeof *t->mask);
    if (!t->addr || !t->size || !t->mask)
        return -1;
    for (uint64_t c = 0; c < t->n; c++)
        t->addr[c] = HADDR_UNDEF;
    header_walk h = {.f = f};
    uint64_t root = HADDR_UNDEF;
    int rc = find_layout(&h, oi.addr) || btree_root(f, h.layout, h.layout_len, t, elem, &root) ? -1 : 0;
    free(h.layout);
    if (!rc && root != HADDR_UNDEF) /* no B-tree yet: nothing written */
        rc = walk_node(f, t, root, -1);
    return rc;
}

/* The implicit index's first chunk; the rest follow it in grid order. */
static int read_implicit(hid_t d, hdf5_chunk_table *t)
{
    hid_t s = H5Dget_space(d);
    hsize_t off[MAX_RANK] = {0}, size = 0;
    haddr_t a = HADDR_UNDEF;
    unsigned mask = 0;
    const int ok = s >= 0 && H5Dget_chunk_info(d, s, 0, off, &mask, &a, &size) >= 0;
    if (s >= 0)
        H5Sclose(s);
    if (!ok || a == HADDR_UNDEF || size != t->chunk_bytes || mask != 0 || a > UINT64_MAX - t->n * t->chunk_bytes)
        return -1;
    for (int i = 0; i < t->k; i++)
        if (off[i] != 0)
            return -1;
    t->implicit = 1;
    t->first = a;
    t->found = t->n;
    return 0;
}

/* HDF5's own answers, for the chunk count and a few grid positions, against the table. Every call
 * is made whatever `ok` says, so that every rank makes the same ones. */
static int agrees_with_hdf5(hid_t d, const hdf5_chunk_table *t, int ok)
{
    hid_t s = H5Dget_space(d);
    hsize_t nchunks = 0;
    if (s < 0 || H5Dget_num_chunks(d, s, &nchunks) < 0 || nchunks != t->found)
        ok = 0;
    if (s >= 0)
        H5Sclose(s);
    const uint64_t pos[PROBES] = {0, t->n / 4, t->n / 2, t->n - t->n / 4, t->n - 1};
    for (int p = 0; p < PROBES; p++) {
        hsize_t coord[MAX_RANK], size = 0, tsize = 0;
        haddr_t addr = HADDR_UNDEF, taddr = HADDR_UNDEF;
        unsigned mask = 0, tmask = 0;
        uint64_t rest = pos[p] < t->n ? pos[p] : t->n - 1;
        for (int i = t->k - 1; i >= 0; i--) {
            coord[i] = rest % t->grid[i] * t->cd[i];
            rest /= t->grid[i];
        }
        if (H5Dget_chunk_info_by_coord(d, coord, &mask, &addr, &size) < 0) {
            ok = 0;
            continue;
        }
        if (!ok)
            continue;
        hdf5_chunk_table_get(t, coord, &tmask, &taddr, &tsize);
        if (addr != taddr || (addr != HADDR_UNDEF && (size != tsize || mask != tmask)))
            ok = 0;
    }
    H5Eclear2(H5E_DEFAULT);
    return ok;
}

hdf5_chunk_table *hdf5_chunk_table_read(hid_t d, int fd)
{
    H5D_chunk_index_t idx;
    hdf5_chunk_table *t = calloc(1, sizeof *t);
    uint64_t elem = 0;
    file_view f;
    if (!t || shape_of(d, t, &elem) || H5Dget_chunk_index_type(d, &idx) < 0 ||
        (idx != H5D_CHUNK_IDX_BTREE && idx != H5D_CHUNK_IDX_NONE)) {
        H5Eclear2(H5E_DEFAULT);
        hdf5_chunk_table_free(t);
        return NULL;
    }
    int ok = view_of(d, fd, &f) == 0;
    if (idx == H5D_CHUNK_IDX_BTREE)
        ok = read_btree(d, &f, t, elem, ok) == 0;
    else
        ok = read_implicit(d, t) == 0 && ok;
    ok = agrees_with_hdf5(d, t, ok);
    if (!ok) {
        hdf5_chunk_table_free(t);
        return NULL;
    }
    return t;
}

/* ---- the input's lookups ---- */

/* The file's base address: HDF5 keeps chunk addresses relative to it (H5Dget_chunk_info gives them
 * so in 1.10.8), while pread needs them absolute. It is where the superblock lies, after the user
 * block: HDF5 itself sets the base there when it opens a file. */
uint64_t hdf5_base_addr(hid_t obj)
{
    hid_t file = H5Iget_file_id(obj);
    hid_t fcpl = file >= 0 ? H5Fget_create_plist(file) : H5I_INVALID_HID;
    hsize_t ub = 0;
    if (fcpl < 0 || H5Pget_userblock(fcpl, &ub) < 0)
        ub = 0;
    if (fcpl >= 0)
        H5Pclose(fcpl);
    if (file >= 0)
        H5Fclose(file);
    H5Eclear2(H5E_DEFAULT);
    return ub;
}

/* The input table of an item, read on first use; NULL where it does not apply. */
static const hdf5_chunk_table *input_table(hq_io *io, uint64_t item)
{
    hdf5_direct *dir = io->dir ? &io->dir[item] : NULL;
    if (!dir || io->in_fd < 0 || !(io->flags[item] & IN_OPENED))
        return NULL;
    if (!dir->in_table_tried) {
        const hid_t d = hdf5_in_dset(io, item);
        if (d < 0)
            return NULL;
        dir->in_table_tried = 1;
        dir->in_table = hdf5_chunk_table_read(d, io->in_fd);
        if (dir->in_table) {
            io->one_pass[0]++;
            io->one_pass_chunks[0] += dir->in_table->n;
        }
    }
    return dir->in_table;
}

herr_t hdf5_chunk_lookup(hq_io *io, uint64_t item, const hsize_t *coord, unsigned *mask, haddr_t *addr,
                         hsize_t *size)
{
    const hdf5_chunk_table *t = input_table(io, item);
    if (t && hdf5_chunk_table_get(t, coord, mask, addr, size) == 0)
        return 0;
    return H5Dget_chunk_info_by_coord(hdf5_in_dset(io, item), coord, mask, addr, size);
}

/* Whether a per-chunk lookup of the item's input would cost a walk of a large index: no table,
 * and more chunks than PER_CHUNK_MAX. */
int hdf5_chunk_lookup_slow(hq_io *io, uint64_t item)
{
    if (input_table(io, item))
        return 0;
    uint64_t dims[MAX_RANK], n = 1;
    const int k = hdf5_item_dims(io, item, dims);
    for (int i = 0; i < k; i++)
        n *= io->in_chunk[item][i] ? (dims[i] + io->in_chunk[item][i] - 1) / io->in_chunk[item][i] : 1;
    return n > PER_CHUNK_MAX;
}
