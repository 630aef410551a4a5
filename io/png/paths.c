/* paths.c — the pieces of paths the PNG backend cuts and joins: a directory and a name, the last
 * component, the directory part, the .png suffix, one file under two names, the temporary name
 * an output takes until it is whole; and opening an input file, which must be a regular one. */
#define _GNU_SOURCE /* strndup */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "png_internal.h"

char *png_join_path(const char *dir, const char *name)
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
const char *png_base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* The directory part of a path as a new string: "." when there is none. */
char *png_dir_name(const char *path)
{
    const char *s = strrchr(path, '/');
    if (!s)
        return strdup(".");
    if (s == path)
        return strdup("/");
    return strndup(path, (size_t)(s - path));
}

int png_has_suffix(const char *name)
{
    size_t n = strlen(name);
    return n > 4 && strcasecmp(name + n - 4, ".png") == 0;
}

int png_same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

void png_temp_stem(const char *name, char stem[PNG_STEM_MAX + 1])
{
    const size_t n = strlen(name);
    if (n <= PNG_STEM_MAX) {
        memcpy(stem, name, n + 1);
        return;
    }
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a of the whole name */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)name[i]) * 0x100000001b3ull;
    const size_t keep = PNG_STEM_MAX - 17; /* "~" and 16 hex digits */
    memcpy(stem, name, keep);
    snprintf(stem + keep, 18, "~%016llx", (unsigned long long)h);
}

/* "DIR/.STEM.part-PID": the temporary name an output takes until it is complete. */
char *png_temp_path(const char *final)
{
    char *dir = png_dir_name(final);
    if (!dir)
        return NULL;
    char stem[PNG_STEM_MAX + 1], tmpname[PNG_STEM_MAX + 48];
    png_temp_stem(png_base_name(final), stem);
    snprintf(tmpname, sizeof tmpname, ".%s.part-%ld", stem, (long)getpid());
    char *p = png_join_path(dir, tmpname);
    free(dir);
    return p;
}

FILE *png_open_file(const char *path, hq_err *err)
{
    /* O_NONBLOCK: opening a FIFO for reading waits for a writer, forever if none comes. */
    const int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        hq_fail(err, HQ_EINPUT, "%s: cannot open (%s)", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        hq_fail(err, HQ_EINPUT, "%s: not a regular file", path);
        close(fd);
        return NULL;
    }
    const int fl = fcntl(fd, F_GETFL);
    FILE *fp = fl >= 0 && fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) == 0 ? fdopen(fd, "rb") : NULL;
    if (!fp) {
        hq_fail(err, HQ_EINPUT, "%s: cannot open (%s)", path, strerror(errno));
        close(fd);
    }
    return fp;
}
