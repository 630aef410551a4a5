/* samepath.c — contract in samepath.h. */
#define _DEFAULT_SOURCE /* realpath */
#include "samepath.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Length of path without its trailing slashes (a lone "/" stays). */
static size_t trimmed(const char *path)
{
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    return n;
}

const char *hq_base_of(const char *path, unsigned long *n)
{
    const size_t end = trimmed(path);
    size_t b = end;
    while (b > 0 && path[b - 1] != '/')
        b--;
    *n = end - b;
    return path + b;
}

int hq_dir_of(const char *path, char *buf, unsigned long len)
{
    unsigned long bn;
    const char *base = hq_base_of(path, &bn);
    size_t d = (size_t)(base - path);
    while (d > 1 && path[d - 1] == '/')
        d--;
    const char *dir = d == 0 ? "." : path;
    const size_t dn = d == 0 ? 1 : d;
    if (dn + 1 > len)
        return -1;
    memcpy(buf, dir, dn);
    buf[dn] = '\0';
    return 0;
}

static int is_dot(const char *b, unsigned long n)
{
    return (n == 1 && b[0] == '.') || (n == 2 && b[0] == '.' && b[1] == '.');
}

int hq_same_path(const char *a, const char *b)
{
    struct stat sa, sb;
    const int ea = stat(a, &sa) == 0, eb = stat(b, &sb) == 0;
    if (ea && eb)
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    if (ea != eb)
        return 0; /* one exists and the other does not */
    unsigned long na, nb;
    const char *ba = hq_base_of(a, &na), *bb = hq_base_of(b, &nb);
    if (na != nb || memcmp(ba, bb, na) != 0)
        return 0;
    char da[4096], db[4096];
    if (!is_dot(ba, na) && !hq_dir_of(a, da, sizeof da) && !hq_dir_of(b, db, sizeof db) && stat(da, &sa) == 0 &&
        stat(db, &sb) == 0)
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    const size_t la = trimmed(a), lb = trimmed(b);
    return la == lb && !strncmp(a, b, la);
}

int hq_dir_writable(const char *dir)
{
    struct stat st;
    if (stat(dir, &st) == 0 && !S_ISDIR(st.st_mode))
        return ENOTDIR;
    return access(dir, W_OK | X_OK) == 0 ? 0 : errno;
}

char *hq_follow_links(const char *path, int *loop)
{
    if (loop)
        *loop = 0;
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/')
        len--; /* "link/" would be followed by lstat */
    char *cur = malloc(len + 1);
    if (!cur)
        return NULL;
    memcpy(cur, path, len);
    cur[len] = '\0';
    int hops = 0;
    struct stat st;
    while (cur && lstat(cur, &st) == 0 && S_ISLNK(st.st_mode)) {
        char target[4096];
        ssize_t n = hops < 40 ? readlink(cur, target, sizeof target - 1) : -1;
        if (n <= 0) {
            if (loop)
                *loop = 1;
            free(cur);
            return NULL;
        }
        hops++;
        /* A target that ends in "/" or "/." names the same as without (lstat would follow a
         * "link/" and stop there, and "dir/." would name a lock "..lock" inside dir). */
        size_t t = (size_t)n;
        for (;;) {
            if (t > 1 && target[t - 1] == '/')
                t--;
            else if (t > 2 && target[t - 1] == '.' && target[t - 2] == '/')
                t -= 2;
            else
                break;
        }
        n = (ssize_t)t;
        target[n] = '\0';
        const char *slash = strrchr(cur, '/');
        const size_t dir = target[0] == '/' || !slash ? 0 : (size_t)(slash - cur) + 1;
        char *next = malloc(dir + (size_t)n + 1);
        if (next) {
            memcpy(next, cur, dir);
            memcpy(next + dir, target, (size_t)n + 1);
        }
        free(cur);
        cur = next;
    }
    if (!hops) {
        free(cur);
        return NULL;
    }
    /* "..", or a bare ".", as the last component: the name of what it stands for, where it exists. */
    unsigned long bn;
    const char *base = cur ? hq_base_of(cur, &bn) : NULL;
    if (base && ((bn == 1 && base[0] == '.') || (bn == 2 && base[0] == '.' && base[1] == '.'))) {
        char *real = realpath(cur, NULL);
        if (real) {
            free(cur);
            cur = real;
        }
    }
    return cur;
}

const char *hq_unreplaceable(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)
               ? "not a regular file (a device, FIFO or socket), which the output would replace: name a file"
               : NULL;
}
