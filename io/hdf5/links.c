/* links.c — the input's other names in the output: when the output mirrors a whole file, every
 * further hard link to a dataset or group the output holds is made again, as a hard link to the
 * output's object, and every soft link as a soft link with the same target path.
 *
 * Why: the scan (scan_file.c) walks objects with H5Ovisit, which meets each object once, under the
 * first name it finds; a dataset's second hard link (h5py: f['y'] = f['x']), a group's, and every
 * soft link were missing from the output, which should have the input's dataset paths.
 *
 * Contract:
 *  - hdf5_copy_links: collective, in create_output once every output dataset exists (not on
 *    --resume: the reopened OUT.part has its links). Rank 0 walks the input's links and plans;
 *    every rank makes the planned groups and links from the same plan, in the same order
 *    (collective metadata), and returns the same code; an error names the output (HQ_EIO).
 *  - Only for a whole-file input: nothing is made when one dataset was named (FILE.h5:/dset,
 *    hq_inventory.one_dataset).
 *  - A hard link is made when its object is a dataset the output created or a group the output
 *    holds, under another path than the output's own; its primary name is known by the object's
 *    address, not by which name a walk met first. A group that holds a link made here but no
 *    image (only soft links, say) is made too, and then counts as held.
 *  - Left out: external and user-defined links (they point into other files); links whose path
 *    the output has already; hard links to what the output does not hold (a group without images,
 *    a named datatype, a skipped dataset; carry.c copies metadata and links to it at close); links under /histeq_dist, unless an input dataset lies
 *    there (hdf5_collides_with_own_group: then the output records nothing of its own there). In
 *    a file this tool wrote they are its record; in another file they would collide with the
 *    record this run writes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hdf5_internal.h"

enum { KIND_GROUP = 'G', KIND_HARD = 'H', KIND_SOFT = 'S' };
enum { UNDECIDED = 0, PLANNED, DROPPED };

typedef struct link_rec {
    char *path;   /* "/a/b", as the walk met it */
    int hard;     /* else soft */
    haddr_t addr; /* hard: the object's address in the input */
    char *target; /* soft: the link's value; hard, once planned: the output's path of the object */
    int state;
} link_rec;

/* An object the output holds, by its address in the input. */
typedef struct held_obj {
    haddr_t addr;
    char *path;
} held_obj;

typedef struct link_plan {
    hq_io *io;
    int mirror_own; /* links under /histeq_dist are mirrored too */
    link_rec *links;
    size_t nlinks, cap_links;
    held_obj *held;
    size_t nheld, cap_held, sorted; /* held[0, sorted) sorted by address; the rest not yet */
    char **groups; /* groups to make, where missing */
    size_t ngroups, cap_groups;
    char *last_parent; /* the parent whose groups were held last: siblings need no second look */
    uint64_t left_out;   /* external and user-defined links */
    int oom;
    int rc;
    hq_err *err;
} link_plan;

static int cmp_link(const void *a, const void *b)
{
    return hdf5_path_cmp(((const link_rec *)a)->path, ((const link_rec *)b)->path);
}

static int cmp_str(const void *a, const void *b)
{
    return hdf5_path_cmp(*(char *const *)a, *(char *const *)b);
}

static int cmp_held(const void *a, const void *b)
{
    const haddr_t x = ((const held_obj *)a)->addr, y = ((const held_obj *)b)->addr;
    return x < y ? -1 : x > y;
}

/* arr (of *cap elements of size sz) with room for one more than n: arr itself, or a larger copy;
 * NULL when there is no memory (arr is then left as it was). */
static void *grow(void *arr, size_t *cap, size_t n, size_t sz)
{
    if (n < *cap)
        return arr;
    const size_t c = *cap ? *cap * 2 : 16;
    void *q = realloc(arr, c * sz);
    if (q)
        *cap = c;
    return q;
}

static char *slash_path(const char *name)
{
    const size_t len = strlen(name) + 2;
    char *p = malloc(len);
    if (p)
        snprintf(p, len, "%s%s", name[0] == '/' ? "" : "/", name);
    return p;
}

static int no_memory(link_plan *p)
{
    p->oom = 1;
    return -1;
}

static void plan_free(link_plan *p)
{
    for (size_t i = 0; i < p->nlinks; i++) {
        free(p->links[i].path);
        free(p->links[i].target);
    }
    for (size_t i = 0; i < p->nheld; i++)
        free(p->held[i].path);
    for (size_t i = 0; i < p->ngroups; i++)
        free(p->groups[i]);
    free(p->links);
    free(p->held);
    free(p->groups);
    free(p->last_parent);
}

static const held_obj *find_held(link_plan *p, haddr_t addr)
{
    const held_obj key = {addr, NULL};
    const held_obj *o = p->sorted ? bsearch(&key, p->held, p->sorted, sizeof *p->held, cmp_held) : NULL;
    for (size_t i = p->sorted; !o && i < p->nheld; i++)
        if (p->held[i].addr == addr)
            o = &p->held[i];
    return o;
}

static void sort_held(link_plan *p)
{
    if (p->nheld)
        qsort(p->held, p->nheld, sizeof *p->held, cmp_held);
    p->sorted = p->nheld;
}

static int add_held(link_plan *p, haddr_t addr, const char *path)
{
    char *s = strdup(path);
    held_obj *h = s ? grow(p->held, &p->cap_held, p->nheld, sizeof *h) : NULL;
    if (!h) {
        free(s);
        return no_memory(p);
    }
    p->held = h;
    p->held[p->nheld++] = (held_obj){addr, s};
    return 0;
}

static int add_group(link_plan *p, const char *path)
{
    char *s = strdup(path);
    char **g = s ? grow(p->groups, &p->cap_groups, p->ngroups, sizeof *g) : NULL;
    if (!g) {
        free(s);
        return no_memory(p);
    }
    p->groups = g;
    p->groups[p->ngroups++] = s;
    return 0;
}

static int lookup_fail(link_plan *p, const char *what, const char *path)
{
    char det[512];
    hdf5_detail(det, sizeof det);
    p->rc = hq_fail(p->err, HQ_EIO, "%s: cannot copy the links of %s: %s %s%s", p->io->out_path, p->io->inv.root,
                    what, path, det);
    return -1;
}

/* The groups above `path` ("/a/b/c": /a and /a/b) are held by the output; `make`: they may be
 * missing from it and are to be made. Each group's address comes from the input by name. */
static int hold_parents(link_plan *p, const char *path, int make)
{
    const char *last = strrchr(path, '/');
    if (!last || last == path)
        return 0; /* under the root, which is held from the start */
    const size_t plen = (size_t)(last - path);
    if (p->last_parent && strlen(p->last_parent) == plen && !strncmp(p->last_parent, path, plen))
        return 0;
    char *parent = strndup(path, plen);
    if (!parent)
        return no_memory(p);
    free(p->last_parent);
    p->last_parent = parent;
    char *buf = strdup(parent);
    if (!buf)
        return no_memory(p);
    int rc = 0;
    for (char *s = strchr(buf + 1, '/');; s = strchr(s + 1, '/')) {
        if (s)
            *s = '\0';
        H5O_info_t oi;
        if (H5Oget_info_by_name2(p->io->in_file, buf, &oi, H5O_INFO_BASIC, H5P_DEFAULT) < 0) {
            rc = lookup_fail(p, "cannot look up the group", buf);
            break;
        }
        const held_obj *o = find_held(p, oi.addr);
        if ((!o && add_held(p, oi.addr, buf)) || (make && (!o || strcmp(o->path, buf)) && add_group(p, buf))) {
            rc = -1;
            break;
        }
        if (!s)
            break;
        *s = '/';
    }
    free(buf);
    return rc;
}

static herr_t walk_cb(hid_t g, const char *name, const H5L_info_t *info, void *data)
{
    link_plan *p = data;
    if (info->type != H5L_TYPE_HARD && info->type != H5L_TYPE_SOFT) {
        p->left_out++; /* external or user-defined: they point into other files */
        return 0;
    }
    char *path = slash_path(name);
    if (!path) {
        no_memory(p);
        return 1;
    }
    if (!p->mirror_own && hdf5_under_own_group(path)) {
        free(path);
        return 0;
    }
    link_rec r = {path, info->type == H5L_TYPE_HARD, HADDR_UNDEF, NULL, UNDECIDED};
    if (r.hard) {
        r.addr = info->u.address;
    } else {
        const size_t n = info->u.val_size ? info->u.val_size : 1;
        r.target = calloc(n, 1);
        if (!r.target) {
            free(path);
            no_memory(p);
            return 1;
        }
        if (info->u.val_size && H5Lget_val(g, name, r.target, n, H5P_DEFAULT) < 0) {
            lookup_fail(p, "cannot read the soft link", path);
            free(r.target);
            free(path);
            return 1;
        }
        r.target[n - 1] = '\0';
    }
    link_rec *l = grow(p->links, &p->cap_links, p->nlinks, sizeof *l);
    if (!l) {
        free(r.target);
        free(path);
        no_memory(p);
        return 1;
    }
    p->links = l;
    p->links[p->nlinks++] = r;
    return 0;
}

/* Every link of the input, sorted by path. Native order, then sorted here: asked for name order,
 * HDF5 1.10 first copies a dense group's links into a table and crashes on a damaged link heap
 * (the reason scan_file.c's H5Ovisit does the same). */
static int walk_links(link_plan *p)
{
    if (H5Lvisit(p->io->in_file, H5_INDEX_NAME, H5_ITER_NATIVE, walk_cb, p) < 0 && !p->rc && !p->oom) {
        char det[512];
        hdf5_detail(det, sizeof det);
        p->rc = hq_fail(p->err, HQ_EIO, "%s: cannot list the links of %s%s", p->io->out_path, p->io->inv.root, det);
    }
    if (!p->rc && !p->oom && p->nlinks)
        qsort(p->links, p->nlinks, sizeof *p->links, cmp_link);
    return p->rc || p->oom ? -1 : 0;
}

/* The output created every good item's dataset, and the groups above it: held from the start. */
static int hold_datasets(link_plan *p)
{
    hq_io *io = p->io;
    H5O_info_t oi;
    if (H5Oget_info_by_name2(io->in_file, "/", &oi, H5O_INFO_BASIC, H5P_DEFAULT) < 0)
        return lookup_fail(p, "cannot look up the group", "/");
    if (add_held(p, oi.addr, "/"))
        return -1;
    for (size_t i = 0; i < io->inv.n; i++) {
        if (io->inv.items[i].bad || !(io->flags[i] & OUT_MADE))
            continue;
        /* The scan's address, where it has one: opening every dataset again costs more than the
         * rest of the plan on a file of many small ones. */
        oi.addr = (haddr_t)io->inv.items[i].object;
        if (!oi.addr && H5Oget_info2(hdf5_in_dset(io, i), &oi, H5O_INFO_BASIC) < 0)
            return lookup_fail(p, "cannot look up the dataset", io->inv.items[i].name);
        if (add_held(p, oi.addr, io->inv.items[i].name) || hold_parents(p, io->inv.items[i].name, 0))
            return -1;
    }
    sort_held(p);
    return 0;
}

/* Decides one undecided link: soft links are made; hard links once their object is held, unless
 * their path is the object's own in the output. */
static int decide(link_plan *p, link_rec *r)
{
    if (r->hard) {
        const held_obj *o = find_held(p, r->addr);
        if (!o)
            return 0;
        if (!strcmp(o->path, r->path)) {
            r->state = DROPPED;
            return 0;
        }
        if (!(r->target = strdup(o->path)))
            return no_memory(p);
    }
    r->state = PLANNED;
    return hold_parents(p, r->path, 1);
}

/* Groups made for a link's sake are held from then on, so hard links to them may follow: repeat
 * until a pass holds nothing new. */
static int decide_all(link_plan *p)
{
    for (;;) {
        const size_t before = p->nheld;
        for (size_t i = 0; i < p->nlinks; i++)
            if (p->links[i].state == UNDECIDED && decide(p, &p->links[i]))
                return -1;
        sort_held(p);
        if (p->nheld == before)
            return 0;
    }
}

static int put(char **buf, size_t *len, size_t *cap, int kind, const char *path, const char *target)
{
    const size_t a = strlen(path) + 1, b = strlen(target) + 1;
    while (*len + 1 + a + b > *cap) {
        const size_t c = *cap ? *cap * 2 : 4096;
        char *q = realloc(*buf, c);
        if (!q)
            return -1;
        *buf = q;
        *cap = c;
    }
    (*buf)[(*len)++] = (char)kind;
    memcpy(*buf + *len, path, a);
    memcpy(*buf + *len + a, target, b);
    *len += a + b;
    return 0;
}

/* The plan as records "kind path\0 target\0": groups first (parents before children), then links
 * in path order. */
static int pack_plan(link_plan *p, char **buf, size_t *len)
{
    size_t cap = 0;
    if (p->ngroups)
        qsort(p->groups, p->ngroups, sizeof *p->groups, cmp_str);
    for (size_t i = 0; i < p->ngroups; i++)
        if ((i == 0 || strcmp(p->groups[i], p->groups[i - 1])) && put(buf, len, &cap, KIND_GROUP, p->groups[i], ""))
            return no_memory(p);
    for (size_t i = 0; i < p->nlinks; i++) {
        const link_rec *r = &p->links[i];
        if (r->state == PLANNED && put(buf, len, &cap, r->hard ? KIND_HARD : KIND_SOFT, r->path, r->target))
            return no_memory(p);
    }
    return 0;
}

/* Rank 0: what to make, packed; *len 0 when nothing. */
static int plan_links(hq_io *io, char **buf, size_t *len, hq_err *err)
{
    link_plan p = {.io = io, .mirror_own = hdf5_collides_with_own_group(io), .err = err};
    if (io->inv.one_dataset)
        return 0;
    int rc = walk_links(&p);
    if (!rc)
        rc = hold_datasets(&p) || decide_all(&p) || pack_plan(&p, buf, len) ? -1 : 0;
    if (!rc && io->verbose && p.left_out)
        fprintf(stderr, "histeq_dist: note: %s: %llu external or user-defined link%s of the input left out\n",
                io->out_path, (unsigned long long)p.left_out, p.left_out == 1 ? "" : "s");
    if (rc && !p.rc)
        p.rc = p.oom ? hq_fail(err, HQ_EMEM, "%s: out of memory copying the links of %s", io->out_path, io->inv.root)
                     : hq_fail(err, HQ_EIO, "%s: cannot copy the links of %s", io->out_path, io->inv.root);
    rc = p.rc;
    plan_free(&p);
    return rc;
}

/* Whether the output has a link at `path`, each level checked in turn (H5Lexists needs the
 * parents to exist): 1, 0, or -1 on error. Collective metadata: every rank calls it alike. */
static htri_t path_exists(hid_t file, const char *path)
{
    char *buf = strdup(path);
    if (!buf)
        return -1;
    htri_t e = 1;
    for (char *s = strchr(buf + 1, '/'); e > 0; s = strchr(s + 1, '/')) {
        if (s)
            *s = '\0';
        e = H5Lexists(file, buf, H5P_DEFAULT);
        if (!s)
            break;
        *s = '/';
    }
    free(buf);
    return e;
}

/* One record of the plan, on every rank. */
static int make_one(hq_io *io, hid_t lcpl, int kind, const char *path, const char *target, hq_err *err)
{
    const htri_t e = path_exists(io->out_file, path);
    if (e > 0)
        return 0;
    herr_t ok = -1;
    if (e == 0 && kind == KIND_GROUP) {
        const hid_t g = H5Gcreate2(io->out_file, path, lcpl, H5P_DEFAULT, H5P_DEFAULT);
        ok = g >= 0 ? H5Gclose(g) : -1;
    } else if (e == 0 && kind == KIND_HARD) {
        ok = H5Lcreate_hard(io->out_file, target, io->out_file, path, lcpl, H5P_DEFAULT);
    } else if (e == 0) {
        ok = H5Lcreate_soft(target, io->out_file, path, lcpl, H5P_DEFAULT);
    }
    if (ok >= 0)
        return 0;
    char det[512];
    hdf5_detail(det, sizeof det);
    return hq_fail(err, HQ_EIO, "%s:%s: cannot create the %s%s", io->out_path, path,
                   kind == KIND_GROUP ? "group" : kind == KIND_HARD ? "hard link" : "soft link", det);
}

static int make_links(hq_io *io, const char *buf, size_t len, hq_err *err)
{
    const hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    if (lcpl < 0 || H5Pset_create_intermediate_group(lcpl, 1) < 0) {
        if (lcpl >= 0)
            H5Pclose(lcpl);
        return hq_fail(err, HQ_EIO, "%s: cannot prepare the links", io->out_path);
    }
    int rc = 0;
    for (size_t at = 0; at < len && !rc;) {
        const int kind = buf[at];
        const char *path = buf + at + 1, *target = path + strlen(path) + 1;
        at = (size_t)(target + strlen(target) + 1 - buf);
        rc = make_one(io, lcpl, kind, path, target, err);
    }
    H5Pclose(lcpl);
    return rc;
}

/* Rank 0's plan to every rank, in pieces an int counts. */
static int share_plan(hq_io *io, char **buf, size_t *len, hq_err *err)
{
    uint64_t n = *len;
    MPI_Bcast(&n, 1, MPI_UINT64_T, 0, io->comm);
    int rc = 0;
    if (io->rank != 0 && n && !(*buf = malloc(n)))
        rc = hq_fail(err, HQ_EMEM, "%s: out of memory copying the links", io->out_path);
    if ((rc = hdf5_agree(io->comm, rc, err)))
        return rc;
    for (uint64_t at = 0; at < n;) {
        const int piece = n - at > (1u << 30) ? 1 << 30 : (int)(n - at);
        MPI_Bcast(*buf + at, piece, MPI_CHAR, 0, io->comm);
        at += (uint64_t)piece;
    }
    *len = (size_t)n;
    return 0;
}

int hdf5_copy_links(hq_io *io, hq_err *err)
{
    char *buf = NULL;
    size_t len = 0;
    int rc = hdf5_share_from_root(io->comm, io->rank == 0 ? plan_links(io, &buf, &len, err) : 0, err);
    if (!rc)
        rc = share_plan(io, &buf, &len, err);
    if (!rc)
        rc = hdf5_agree(io->comm, make_links(io, buf, len, err), err);
    free(buf);
    return rc;
}
