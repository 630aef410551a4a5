/* scan.c — the PNG inventory: one PNG file, the PNGs of a directory (sorted by name), or the paths a
 * list file names; one item each, its header read. With skip_bad an unusable file becomes an item
 * marked bad, with the reason. */
#define _GNU_SOURCE /* strndup */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "png_internal.h"

/* deflate codes at most 258 bytes in a match of a few bits: no stream inflates much more than
 * 1032 times its size. The factor leaves room; the slack covers the chunks around the data. */
#define INFLATE_MAX_RATIO 1100u
#define INFLATE_SLACK ((uint64_t)1 << 20)

/* A header that declares more pixel bytes than the file could hold compressed (at the fewest
 * bits a pixel the format has, one, and a filter byte a row): damaged or forged. Caught here, it
 * is a bad file like any other, not a --memory too small for the whole collection. */
static int check_declared_size(FILE *fp, const char *src, const hq_png_info *info, hq_err *err)
{
    struct stat st;
    if (fstat(fileno(fp), &st) != 0 || !S_ISREG(st.st_mode))
        return 0;
    const uint64_t least = (uint64_t)info->height * (1 + ((uint64_t)info->width + 7) / 8);
    if (least <= (uint64_t)st.st_size * INFLATE_MAX_RATIO + INFLATE_SLACK)
        return 0;
    return hq_fail(err, HQ_EINPUT, "%s: corrupt PNG: its header declares %u x %u pixels, more than its %lld bytes "
                   "can hold", src, info->width, info->height, (long long)st.st_size);
}

/* Reads the header of one PNG into an item. An unusable file is an error, or with skip_bad an
 * item marked bad with the reason. */
static int add_png(hq_inventory *inv, const char *src, const char *name, int skip_bad, hq_err *err)
{
    hq_item it = {.src = (char *)src, .name = (char *)name, .slices = 1};
    hq_png_info info;
    int rc;
    FILE *fp = png_open_file(src, err);
    if (!fp) {
        rc = HQ_EINPUT;
    } else {
        hq_png_source s = {.name = src, .fp = fp};
        rc = hq_png_read_info(&s, &info, err);
        if (!rc)
            rc = check_declared_size(fp, src, &info, err);
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
        if (!png_has_suffix(e->d_name))
            continue;
        char *full = png_join_path(dir, e->d_name);
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
        char *src = png_join_path(dir, names[i]);
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
 * '#' comments skipped, a UTF-8 byte-order mark at the start (editors on Windows write one) too.
 * Returns pointers into buf (which it modifies). */
static int parse_list(const char *list, char *buf, char ***entries, size_t *count, hq_err *err)
{
    char **v = NULL;
    size_t n = 0, cap = 0;
    if (!strncmp(buf, "\xEF\xBB\xBF", 3))
        buf += 3;
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
        names[i] = png_base_name(entries[i]);
    qsort(names, n, sizeof *names, cmp_str);
    int rc = 0;
    for (size_t i = 1; i < n && !rc; i++)
        if (strcmp(names[i - 1], names[i]) == 0)
            rc = hq_fail(err, HQ_EINPUT, "%s: two inputs named %s", list, names[i]);
    /* A list names files of any name: this one would be overwritten by the output directory's
     * completion mark, and, killed, leave a directory that looks finished. */
    for (size_t i = 0; i < n && !rc; i++)
        if (!strcmp(names[i], HQ_PNG_DIR_MARK))
            rc = hq_fail(err, HQ_EINPUT, "%s: an input named %s, the name of the output directory's completion "
                         "mark: rename it", list, names[i]);
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
    if (!rc && !(dir = png_dir_name(list)))
        rc = hq_fail(err, HQ_EMEM, "%s: out of memory reading the list", list);
    for (size_t i = 0; !rc && i < n; i++) {
        const char *e = entries[i];
        char *src = e[0] == '/' || strcmp(dir, ".") == 0 ? strdup(e) : png_join_path(dir, e);
        rc = src ? add_png(inv, src, png_base_name(e), skip_bad, err)
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
    if (png_has_suffix(path))
        return 1;
    unsigned char sig[8];
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return 0;
    size_t got = fread(sig, 1, sizeof sig, fp);
    fclose(fp);
    return hq_png_has_signature(sig, got);
}

int png_scan(const char *path, const char *dset, unsigned flags, hq_inventory *inv, hq_err *err)
{
    (void)dset;
    const int skip_bad = (flags & HQ_SCAN_SKIP_BAD) != 0; /* PLANES: a PNG's channels are its own */
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
        return add_png(inv, path, png_base_name(path), skip_bad, err);
    return scan_list(path, skip_bad, inv, err);
}
