/* png_io.c — the PNG backend of io.h: a PNG file, a directory of PNGs, or a list file of PNG paths.
 *
 * A PNG item is never split: every block is the whole image, and each rank reads and writes only
 * its own items, independently (`collective` is ignored; a NULL block returns 0 at once).
 *
 * Output: a directory for a directory or list input (one PNG per item, named item.name), a file
 * for a single PNG input. Each PNG is written to ".NAME.part-<pid>" in its final directory; in a
 * directory output it takes its final name (rename) as soon as it is complete and a failed write
 * removes its temporary at once, so a failed run leaves only whole PNGs (a killed one may leave a
 * hidden .part file); a single-file output keeps the temporary name until close(commit = 1). Outputs keep the input's color type,
 * bit depth, palette (remapped) and tRNS; they are written without interlacing.
 *
 * Threads: read_block and write_block of different items may run at the same time on different
 * threads (io.h `concurrent`): libpng and zlib keep their state per call, and what the calls share
 * here (the headers kept for writing, the list of files written) is under one mutex.
 *
 * read_block keeps each item's header (and, for palette images, its index array) until its
 * write_block takes it, so that write_block can write the same indices with a remapped palette.
 * At most HELD_MAX items are kept; past that the oldest is dropped, and its write_block decodes
 * the header (and indices) from the input again. The inventory passed to open_input must outlive
 * the hq_io. */
#include "io.h"

#include <errno.h>
#include <png.h> /* PNG_COLOR_TYPE_*: a palette image written as RGB(A) */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <dirent.h>
#include <pthread.h>
#include <unistd.h>

#include "png_codec.h"

#define STDIO_BUF_BYTES (1u << 20)
/* In a finished output directory: written last, so a directory without it is unfinished. */
#define COMPLETE_NAME "histeq_dist.complete"
#ifndef HQ_VERSION
#define HQ_VERSION "dev"
#endif

/* Items read whose write has not come yet: more than the blocks in flight of any sane pipeline. */
#define HELD_MAX 256

/* An item's header (and palette indices) from read_block, for its write_block. */
typedef struct held_item {
    int used;
    uint64_t item;
    hq_png_info info;
    uint8_t *indices;
} held_item;

/* One file written under a temporary name, waiting to take its final name. */
typedef struct pending_out {
    char *tmp, *final;
} pending_out;

struct hq_io {
    const hq_inventory *inv;
    MPI_Comm comm;
    int rank;
    pthread_mutex_t mu; /* guards held, pending, written: read/write run on several threads */
    held_item *held;    /* HELD_MAX slots, filled round robin: the oldest is dropped first */
    size_t next_held;
    /* output */
    int have_output;
    char *out_path;
    int out_is_dir;
    int created_dir; /* rank 0 made the output directory: removed again if the run fails and it is empty */
    int per_pixel;   /* hq_out_opts.per_pixel: palette images go out as RGB(A) */
    hq_png_zopts zopts;
    pending_out pending; /* single-file output waiting for close(commit = 1) */
    char **written;      /* directory outputs this rank finished in this run: removed if the run fails */
    size_t nwritten, cap_written;
};

/* ---- paths ------------------------------------------------------------------------------ */

static char *join_path(const char *dir, const char *name)
{
    size_t dl = strlen(dir), nl = strlen(name);
    size_t slash = dl > 0 && dir[dl - 1] != '/' ? 1 : 0;
    char *p = malloc(dl + slash + nl + 1);
    if (!p)
        return NULL;
    memcpy(p, dir, dl);
    if (slash)
        p[dl] = '/';
    memcpy(p + dl + slash, name, nl + 1);
    return p;
}

/* The last component of a path (pointer into it); "" for a path ending in '/'. */
static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* The directory part of a path as a new string: "." when there is none. */
static char *dir_name(const char *path)
{
    const char *s = strrchr(path, '/');
    if (!s)
        return strdup(".");
    if (s == path)
        return strdup("/");
    return strndup(path, (size_t)(s - path));
}

static int has_png_suffix(const char *name)
{
    size_t n = strlen(name);
    return n > 4 && strcasecmp(name + n - 4, ".png") == 0;
}

static int same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* "DIR/.NAME.part-PID": the temporary name an output takes until it is complete. */
static char *temp_path_for(const char *final)
{
    char *dir = dir_name(final);
    if (!dir)
        return NULL;
    const char *name = base_name(final);
    size_t n = strlen(name) + 48;
    char *tmpname = malloc(n);
    char *p = NULL;
    if (tmpname) {
        snprintf(tmpname, n, ".%s.part-%ld", name, (long)getpid());
        p = join_path(dir, tmpname);
    }
    free(tmpname);
    free(dir);
    return p;
}

/* ---- scan ------------------------------------------------------------------------------- */

/* Reads the header of one PNG into an item. An unusable file is an error, or with skip_bad an
 * item marked bad with the reason. */
static int add_png(hq_inventory *inv, const char *src, const char *name, int skip_bad, hq_err *err)
{
    hq_item it = {.src = (char *)src, .name = (char *)name, .slices = 1};
    hq_png_info info;
    int rc;
    FILE *fp = fopen(src, "rb");
    if (!fp) {
        rc = hq_fail(err, HQ_EINPUT, "%s: cannot open (%s)", src, strerror(errno));
    } else {
        hq_png_source s = {.name = src, .fp = fp};
        rc = hq_png_read_info(&s, &info, err);
        fclose(fp);
    }
    if (rc == HQ_EMEM)
        return rc;
    if (rc && !skip_bad)
        return rc == HQ_EIO ? HQ_EINPUT : rc;
    if (rc) {
        it.bad = 1;
        it.why = err->msg;
    } else {
        it.height = info.height;
        it.width = info.width;
        it.channels = info.channels;
        it.sample_bytes = info.sample_bytes;
        it.depth = info.depth;
    }
    return hq_inventory_add(inv, &it, err);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_strs(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static int push_str(char ***v, size_t *n, size_t *cap, char *s)
{
    if (!s)
        return -1;
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 64;
        char **p = realloc(*v, c * sizeof *p);
        if (!p) {
            free(s);
            return -1;
        }
        *v = p;
        *cap = c;
    }
    (*v)[(*n)++] = s;
    return 0;
}

/* Names of the *.png entries (any case) directly in dir that are not directories. */
static int list_dir_pngs(const char *dir, char ***names, size_t *count, hq_err *err)
{
    DIR *d = opendir(dir);
    if (!d)
        return hq_fail(err, HQ_EIO, "%s: cannot open directory (%s)", dir, strerror(errno));
    char **v = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    struct dirent *e;
    errno = 0;
    while ((e = readdir(d)) != NULL) {
        if (!has_png_suffix(e->d_name))
            continue;
        char *full = join_path(dir, e->d_name);
        struct stat st;
        if (full && stat(full, &st) == 0 && S_ISDIR(st.st_mode)) {
            free(full);
            continue;
        }
        free(full);
        if (push_str(&v, &n, &cap, strdup(e->d_name))) {
            rc = hq_fail(err, HQ_EMEM, "%s: out of memory listing the directory", dir);
            break;
        }
        errno = 0;
    }
    if (!rc && errno)
        rc = hq_fail(err, HQ_EIO, "%s: cannot read directory (%s)", dir, strerror(errno));
    closedir(d);
    if (rc) {
        free_strs(v, n);
        return rc;
    }
    if (n == 0) {
        free(v);
        return hq_fail(err, HQ_EINPUT, "%s: no PNG files", dir);
    }
    qsort(v, n, sizeof *v, cmp_str);
    *names = v;
    *count = n;
    return 0;
}

static int scan_dir(const char *dir, int skip_bad, hq_inventory *inv, hq_err *err)
{
    char **names = NULL;
    size_t n = 0;
    int rc = list_dir_pngs(dir, &names, &n, err);
    for (size_t i = 0; !rc && i < n; i++) {
        char *src = join_path(dir, names[i]);
        rc = src ? add_png(inv, src, names[i], skip_bad, err)
                 : hq_fail(err, HQ_EMEM, "%s: out of memory listing the directory", dir);
        free(src);
    }
    free_strs(names, n);
    return rc;
}

/* A list file is text: a NUL or another control character means it is neither a PNG nor a list. */
static int looks_like_text(const char *buf, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)buf[i];
        if (ch < 0x20 && ch != '\n' && ch != '\r' && ch != '\t')
            return 0;
    }
    return 1;
}

static int read_whole_file(const char *path, char **out, size_t *len, hq_err *err)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return hq_fail(err, HQ_EIO, "%s: cannot open (%s)", path, strerror(errno));
    char *buf = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            size_t c = cap ? cap * 2 : 8192;
            char *b = realloc(buf, c);
            if (!b) {
                rc = hq_fail(err, HQ_EMEM, "%s: out of memory reading the list", path);
                break;
            }
            buf = b;
            cap = c;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, fp);
        n += got;
        if (got == 0)
            break;
    }
    if (!rc && ferror(fp))
        rc = hq_fail(err, HQ_EIO, "%s: cannot read (%s)", path, strerror(errno ? errno : EIO));
    fclose(fp);
    if (rc) {
        free(buf);
        return rc;
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return 0;
}

/* Splits the list into entries: one path a line, surrounding blanks trimmed, blank lines and
 * '#' comments skipped. Returns pointers into buf (which it modifies). */
static int parse_list(const char *list, char *buf, char ***entries, size_t *count, hq_err *err)
{
    char **v = NULL;
    size_t n = 0, cap = 0;
    for (char *line = buf; line && *line;) {
        char *nl = strchr(line, '\n');
        char *next = nl ? nl + 1 : NULL;
        char *end = nl ? nl : line + strlen(line);
        while (*line == ' ' || *line == '\t')
            line++;
        while (end > line && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
            end--;
        *end = '\0';
        if (*line && *line != '#') {
            if (n == cap) {
                size_t c = cap ? cap * 2 : 64;
                char **p = realloc(v, c * sizeof *p);
                if (!p) {
                    free(v);
                    return hq_fail(err, HQ_EMEM, "%s: out of memory reading the list", list);
                }
                v = p;
                cap = c;
            }
            v[n++] = line;
        }
        line = next;
    }
    if (n == 0) {
        free(v);
        return hq_fail(err, HQ_EINPUT, "%s: no PNG files", list);
    }
    *entries = v;
    *count = n;
    return 0;
}

/* Outputs are named by base name, so two entries with one base name would overwrite each other. */
static int check_unique_names(const char *list, char **entries, size_t n, hq_err *err)
{
    const char **names = malloc(n * sizeof *names);
    if (!names)
        return hq_fail(err, HQ_EMEM, "%s: out of memory reading the list", list);
    for (size_t i = 0; i < n; i++)
        names[i] = base_name(entries[i]);
    qsort(names, n, sizeof *names, cmp_str);
    int rc = 0;
    for (size_t i = 1; i < n && !rc; i++)
        if (strcmp(names[i - 1], names[i]) == 0)
            rc = hq_fail(err, HQ_EINPUT, "%s: two inputs named %s", list, names[i]);
    free(names);
    return rc;
}

static int scan_list(const char *list, int skip_bad, hq_inventory *inv, hq_err *err)
{
    char *buf = NULL, **entries = NULL, *dir = NULL;
    size_t len = 0, n = 0;
    int rc = read_whole_file(list, &buf, &len, err);
    if (!rc && !looks_like_text(buf, len))
        rc = hq_fail(err, HQ_EINPUT, "%s: not a PNG file or a list of PNG paths", list);
    if (!rc)
        rc = parse_list(list, buf, &entries, &n, err);
    if (!rc)
        rc = check_unique_names(list, entries, n, err);
    if (!rc && !(dir = dir_name(list)))
        rc = hq_fail(err, HQ_EMEM, "%s: out of memory reading the list", list);
    for (size_t i = 0; !rc && i < n; i++) {
        const char *e = entries[i];
        char *src = e[0] == '/' || strcmp(dir, ".") == 0 ? strdup(e) : join_path(dir, e);
        rc = src ? add_png(inv, src, base_name(e), skip_bad, err)
                 : hq_fail(err, HQ_EMEM, "%s: out of memory reading the list", list);
        free(src);
    }
    free(dir);
    free(entries);
    free(buf);
    return rc;
}

/* A PNG by content, or by name when the content is not even a PNG (so that "x.png" that is
 * damaged reads "not a PNG file" rather than being parsed as a list). */
static int is_png_path(const char *path)
{
    if (has_png_suffix(path))
        return 1;
    unsigned char sig[8];
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return 0;
    size_t got = fread(sig, 1, sizeof sig, fp);
    fclose(fp);
    return hq_png_has_signature(sig, got);
}

static int png_scan(const char *path, const char *dset, int skip_bad, hq_inventory *inv, hq_err *err)
{
    (void)dset;
    struct stat st;
    if (stat(path, &st) != 0)
        return hq_fail(err, HQ_EIO, "%s: cannot open (%s)", path, strerror(errno));
    const int is_dir = S_ISDIR(st.st_mode);
    const int single = !is_dir && is_png_path(path);
    inv->format = HQ_FMT_PNG;
    inv->root_is_dir = !single;
    if (!inv->root && !(inv->root = strdup(path)))
        return hq_fail(err, HQ_EMEM, "%s: out of memory", path);
    if (is_dir)
        return scan_dir(path, skip_bad, inv, err);
    if (single)
        return add_png(inv, path, base_name(path), skip_bad, err);
    return scan_list(path, skip_bad, inv, err);
}

/* ---- input ------------------------------------------------------------------------------ */

static int png_open_input(const hq_inventory *inv, MPI_Comm comm, int any_order, hq_io **out, hq_err *err)
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
    io->inv = inv;
    io->comm = comm;
    MPI_Comm_rank(comm, &io->rank);
    *out = io;
    return 0;
}

static void drop_held(hq_io *io)
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
static int usable_item(const hq_io *io, uint64_t item, const hq_block *b, const hq_item **out, hq_err *err)
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
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        *rc = hq_fail(err, HQ_EINPUT, "%s: cannot open (%s)", path, strerror(errno));
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

static int png_read_block(hq_io *io, uint64_t item, const hq_block *b, int collective, void *dst, hq_err *err)
{
    (void)collective;
    if (!b)
        return 0;
    const hq_item *it = NULL;
    int rc = usable_item(io, item, b, &it, err);
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
static int item_for_write(hq_io *io, uint64_t item, const hq_item *it, hq_png_info *info, uint8_t **indices,
                          hq_err *err)
{
    if (take_held(io, item, info, indices))
        return 0;
    return decode_item(it, info, NULL, indices, err);
}

/* ---- output checks (rank 0) ------------------------------------------------------------- */

static int make_dirs(const char *path, hq_err *err)
{
    char *p = strdup(path);
    if (!p)
        return hq_fail(err, HQ_EMEM, "%s: out of memory", path);
    int rc = 0;
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s != '\0')
            continue;
        const char saved = *s;
        *s = '\0';
        struct stat st;
        if (mkdir(p, 0777) != 0 && !(errno == EEXIST && stat(p, &st) == 0 && S_ISDIR(st.st_mode))) {
            rc = hq_fail(err, HQ_EIO, "%s: cannot create directory (%s)", path, strerror(errno));
            break;
        }
        *s = saved;
        if (saved == '\0')
            break;
    }
    free(p);
    return rc;
}

static int dir_is_empty(const char *path, int *empty, hq_err *err)
{
    DIR *d = opendir(path);
    if (!d)
        return hq_fail(err, HQ_EIO, "%s: cannot open directory (%s)", path, strerror(errno));
    struct dirent *e;
    *empty = 1;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            *empty = 0;
            break;
        }
    closedir(d);
    return 0;
}

/* Writability, proven by creating (and removing) the temporary file that `final` would use. */
static int check_writable(const char *dir, const char *shown, const char *final, hq_err *err)
{
    if (access(dir, W_OK | X_OK) != 0)
        return hq_fail(err, HQ_EIO, "%s: cannot write (%s)", shown, strerror(errno));
    char *tmp = temp_path_for(final);
    if (!tmp)
        return hq_fail(err, HQ_EMEM, "%s: out of memory", shown);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0666);
    int rc = 0;
    if (fd < 0)
        rc = hq_fail(err, HQ_EIO, "%s: cannot write (%s)", shown, strerror(errno));
    else {
        close(fd);
        unlink(tmp);
    }
    free(tmp);
    return rc;
}

/* With --force an existing output directory is written into: no output may land on an input. */
static int check_no_input_replaced(const hq_inventory *inv, const char *out, hq_err *err)
{
    for (size_t i = 0; i < inv->n; i++) {
        const hq_item *it = &inv->items[i];
        if (it->bad)
            continue;
        char *dst = join_path(out, it->name);
        if (!dst)
            return hq_fail(err, HQ_EMEM, "%s: out of memory", out);
        struct stat so, si;
        int clash = stat(dst, &so) == 0 && stat(it->src, &si) == 0 && same_file(&so, &si);
        int rc = clash ? hq_fail(err, HQ_EUSAGE, "%s: output is the input", dst) : 0;
        free(dst);
        if (rc)
            return rc;
    }
    return 0;
}

static int prepare_output_dir(const hq_inventory *inv, const hq_out_opts *o, int *created, hq_err *err)
{
    const char *out = o->path;
    struct stat so, si;
    *created = 0;
    if (stat(out, &so) == 0) {
        if (!S_ISDIR(so.st_mode))
            return hq_fail(err, HQ_EUSAGE, "%s: exists and is not a directory", out);
        if (stat(inv->root, &si) == 0 && same_file(&so, &si))
            return hq_fail(err, HQ_EUSAGE, "%s: output is the input", out);
        int empty = 0, rc = dir_is_empty(out, &empty, err);
        if (rc)
            return rc;
        if (!empty && !o->force && !o->resume)
            return hq_fail(err, HQ_EUSAGE, "%s: output exists (use --force to replace)", out);
        if ((rc = check_no_input_replaced(inv, out, err)))
            return rc;
        /* An old run's mark must not stand for this run until it has finished. */
        char *mark = join_path(out, COMPLETE_NAME);
        if (!mark)
            return hq_fail(err, HQ_EMEM, "%s: out of memory", out);
        int gone = unlink(mark) == 0 || errno == ENOENT;
        free(mark);
        if (!gone)
            return hq_fail(err, HQ_EIO, "%s: cannot remove its old %s (%s)", out, COMPLETE_NAME, strerror(errno));
    } else {
        int rc = make_dirs(out, err);
        if (rc)
            return rc;
        *created = 1;
    }
    char *probe = join_path(out, "histeq_dist-probe.png");
    int rc = probe ? check_writable(out, out, probe, err) : hq_fail(err, HQ_EMEM, "%s: out of memory", out);
    free(probe);
    if (rc && *created) {
        rmdir(out); /* only the last component: its parents may have existed or be shared */
        *created = 0;
    }
    return rc;
}

static int prepare_output_file(const hq_inventory *inv, const hq_out_opts *o, hq_err *err)
{
    const char *out = o->path;
    struct stat so, si;
    if (stat(out, &so) == 0) {
        if (S_ISDIR(so.st_mode))
            return hq_fail(err, HQ_EUSAGE, "%s: is a directory (the input is one PNG file)", out);
        if (stat(inv->root, &si) == 0 && same_file(&so, &si))
            return hq_fail(err, HQ_EUSAGE, "%s: output is the input", out);
        if (!o->force)
            return hq_fail(err, HQ_EUSAGE, "%s: output exists (use --force to replace)", out);
    }
    char *dir = dir_name(out);
    if (!dir)
        return hq_fail(err, HQ_EMEM, "%s: out of memory", out);
    int rc = check_writable(dir, out, out, err);
    free(dir);
    return rc;
}

static int png_create_output(hq_io *io, const hq_out_opts *o, MPI_Comm comm, hq_err *err)
{
    hq_err e0 = {{0}};
    int rc = 0, created = 0;
    if (io->rank == 0) {
        if (!o->path || !o->path[0])
            rc = hq_fail(&e0, HQ_EUSAGE, "%s: no output path given", io->inv->root);
        else if (io->inv->root_is_dir)
            rc = prepare_output_dir(io->inv, o, &created, &e0);
        else
            rc = prepare_output_file(io->inv, o, &e0);
    }
    /* Every rank returns rank 0's verdict, and none writes before the directory exists. */
    MPI_Bcast(&rc, 1, MPI_INT, 0, comm);
    if (rc) {
        MPI_Bcast(e0.msg, (int)sizeof e0.msg, MPI_CHAR, 0, comm);
        e0.msg[sizeof e0.msg - 1] = '\0';
        return hq_fail(err, rc, "%s", e0.msg);
    }
    if (!(io->out_path = strdup(o->path)))
        return hq_fail(err, HQ_EMEM, "%s: out of memory", o->path);
    io->out_is_dir = io->inv->root_is_dir;
    io->created_dir = created;
    io->zopts = hq_png_zopts_for_level(o->png_level);
    io->per_pixel = o->per_pixel;
    io->have_output = 1;
    return 0;
}

/* ---- writing ---------------------------------------------------------------------------- */

/* Encodes into tmp and closes it; on failure tmp is removed. */
static int write_temp(const char *tmp, const char *shown, const hq_png_info *info, const void *pixels,
                      const uint8_t *indices, const hq_png_zopts *z, hq_err *err)
{
    FILE *fp = fopen(tmp, "wb");
    if (!fp)
        return hq_fail(err, HQ_EIO, "%s: cannot write (%s)", shown, strerror(errno));
    setvbuf(fp, NULL, _IOFBF, STDIO_BUF_BYTES);
    hq_png_sink s = {.name = shown, .fp = fp};
    int rc = hq_png_encode(&s, info, pixels, indices, z, err);
    if (!rc && fflush(fp) != 0)
        rc = hq_fail(err, HQ_EIO, "%s: cannot write (%s)", shown, strerror(errno));
    if (fclose(fp) != 0 && !rc)
        rc = hq_fail(err, HQ_EIO, "%s: cannot write (%s)", shown, strerror(errno));
    if (rc)
        unlink(tmp);
    return rc;
}

static int png_write_block(hq_io *io, uint64_t item, const hq_block *b, int collective, const void *src, hq_err *err)
{
    (void)collective;
    if (!b)
        return 0;
    const hq_item *it = NULL;
    int rc = usable_item(io, item, b, &it, err);
    if (rc)
        return rc;
    if (!io->have_output || !src)
        return hq_fail(err, HQ_EIO, "%s: %s", it->src, src ? "no output was created" : "no pixels to write");
    char *final = io->out_is_dir ? join_path(io->out_path, it->name) : strdup(io->out_path);
    char *tmp = final ? temp_path_for(final) : NULL;
    if (!tmp) {
        free(final);
        return hq_fail(err, HQ_EMEM, "%s: out of memory", io->out_path);
    }
    hq_png_info info;
    uint8_t *indices = NULL;
    rc = item_for_write(io, item, it, &info, &indices, err);
    if (!rc && indices && io->per_pixel) {
        /* One palette entry per index cannot hold what a per-pixel remap made of it: 8-bit RGB(A),
         * the decoded samples as they are (tRNS alpha became the fourth channel). */
        free(indices);
        indices = NULL;
        info.color_type = info.channels == 4 ? PNG_COLOR_TYPE_RGB_ALPHA : PNG_COLOR_TYPE_RGB;
        info.bit_depth = 8;
        info.npalette = 0;
        info.ntrans = 0;
    }
    if (!rc && indices)
        hq_png_repalette(&info, indices, src);
    if (!rc)
        rc = write_temp(tmp, final, &info, src, indices, &io->zopts, err);
    free(indices);
    if (!rc && io->out_is_dir && rename(tmp, final) != 0) {
        rc = hq_fail(err, HQ_EIO, "%s: cannot write (%s)", final, strerror(errno));
        unlink(tmp);
    }
    if (!rc && io->out_is_dir) {
        /* Remembered so that a run that fails later takes it back: a directory holding some of
         * its outputs must not pass for a finished one. */
        pthread_mutex_lock(&io->mu);
        if (io->nwritten == io->cap_written) {
            size_t cap = io->cap_written ? io->cap_written * 2 : 64;
            char **w = realloc(io->written, cap * sizeof *w);
            if (!w) {
                pthread_mutex_unlock(&io->mu);
                unlink(final);
                free(tmp);
                free(final);
                return hq_fail(err, HQ_EMEM, "%s: out of memory", io->out_path);
            }
            io->written = w;
            io->cap_written = cap;
        }
        io->written[io->nwritten++] = final;
        pthread_mutex_unlock(&io->mu);
        final = NULL;
    }
    if (!rc && !io->out_is_dir) {
        pthread_mutex_lock(&io->mu);
        free(io->pending.tmp);
        free(io->pending.final);
        io->pending.tmp = tmp;
        io->pending.final = final;
        pthread_mutex_unlock(&io->mu);
        return 0;
    }
    free(tmp);
    free(final);
    return rc;
}

/* Rank 0, once every rank has renamed its files: the directory's completion record. */
static int mark_dir_complete(const char *dir, uint64_t nimages, hq_err *err)
{
    char *mark = join_path(dir, COMPLETE_NAME);
    char *tmp = mark ? temp_path_for(mark) : NULL;
    int rc = 0;
    FILE *f = tmp ? fopen(tmp, "w") : NULL;
    if (!tmp)
        rc = hq_fail(err, HQ_EMEM, "%s: out of memory", dir);
    else if (!f || fprintf(f, "histeq_dist %s: complete, %llu input files\n", HQ_VERSION, (unsigned long long)nimages) < 0 ||
             fclose(f) != 0 || rename(tmp, mark) != 0) {
        rc = hq_fail(err, HQ_EIO, "%s: cannot write (%s)", mark, strerror(errno));
        unlink(tmp);
    }
    free(tmp);
    free(mark);
    return rc;
}

static int png_close(hq_io *io, int commit, const hq_run_meta *meta, hq_err *err)
{
    (void)meta;
    if (!io)
        return 0;
    int rc = 0;
    if (io->pending.tmp) {
        if (commit && rename(io->pending.tmp, io->pending.final) != 0) {
            rc = hq_fail(err, HQ_EIO, "%s: cannot write (%s)", io->pending.final, strerror(errno));
            commit = 0;
        }
        if (!commit)
            unlink(io->pending.tmp);
    }
    for (size_t i = 0; i < io->nwritten; i++) {
        if (!commit)
            unlink(io->written[i]);
        free(io->written[i]);
    }
    free(io->written);
    /* A failed run leaves no new directory behind: once every rank has taken back its files, the
     * directory this run created is empty again (rmdir refuses one that is not). */
    if (io->have_output)
        MPI_Barrier(io->comm);
    if (!commit && io->created_dir)
        rmdir(io->out_path);
    if (commit && io->out_is_dir && io->rank == 0)
        rc = mark_dir_complete(io->out_path, io->inv->n, err);
    free(io->pending.tmp);
    free(io->pending.final);
    drop_held(io);
    free(io->held);
    pthread_mutex_destroy(&io->mu);
    free(io->out_path);
    free(io);
    return rc;
}

/* Each file is renamed into place whole, so there is nothing to flush. */
static int png_flush(hq_io *io, int collective, hq_err *err)
{
    (void)io, (void)collective, (void)err;
    return 0;
}

/* A directory output is unfinished until its completion record is there; a single PNG is written
 * whole at the end, so there is nothing to resume. */
static int png_output_state(const hq_inventory *inv, const char *out, int *partial, int *finished)
{
    *partial = *finished = 0;
    if (!inv->root_is_dir)
        return 0;
    struct stat st;
    char *mark = join_path(out, COMPLETE_NAME);
    *finished = mark && stat(mark, &st) == 0;
    *partial = !*finished && stat(out, &st) == 0;
    free(mark);
    return 1;
}

static const char *png_sync_path(const hq_io *io)
{
    (void)io;
    return NULL;
}

const hq_io_ops hq_png_ops = {
    .name = "png",
    .concurrent = 1,
    .scan = png_scan,
    .open_input = png_open_input,
    .read_block = png_read_block,
    .create_output = png_create_output,
    .write_block = png_write_block,
    .close = png_close,
    .flush = png_flush,
    .output_state = png_output_state,
    .sync_path = png_sync_path,
};
