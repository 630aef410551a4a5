/* scan.c — from --input to an inventory: decides which format backend owns the input by looking at
 * the bytes, not the name (a PNG renamed .h5 is still a PNG), then lets that backend list the items. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "io.h"

static const unsigned char PNG_SIG[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
static const unsigned char HDF5_SIG[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};

typedef enum { KIND_UNKNOWN, KIND_PNG, KIND_HDF5, KIND_TEXT } file_kind;

/* HDF5 allows a user block before the superblock: the signature may sit at 0, 512, 1024, 2048, ... */
static int has_hdf5_sig(FILE *f, long size)
{
    unsigned char b[8];
    for (long off = 0; off + 8 <= size; off = off ? off * 2 : 512) {
        if (fseek(f, off, SEEK_SET) != 0 || fread(b, 1, 8, f) != 8)
            return 0;
        if (!memcmp(b, HDF5_SIG, 8))
            return 1;
    }
    return 0;
}

/* A list of paths is printable text: no NUL, no control bytes but line ends and tabs. */
static int looks_like_text(FILE *f)
{
    unsigned char b[4096];
    if (fseek(f, 0, SEEK_SET) != 0)
        return 0;
    size_t n = fread(b, 1, sizeof b, f);
    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (b[i] == 0 || (b[i] < 0x20 && !isspace(b[i])))
            return 0;
    return 1;
}

static int classify(const char *path, file_kind *kind, hq_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return hq_fail(err, HQ_EINPUT, "%s: cannot open (%s)", path, strerror(errno));
    unsigned char b[8] = {0};
    size_t n = fread(b, 1, 8, f);
    long size = 0;
    if (fseek(f, 0, SEEK_END) == 0)
        size = ftell(f);
    *kind = KIND_UNKNOWN;
    /* HDF5 first: a user block may start with anything, a PNG thumbnail of the file included. */
    if (has_hdf5_sig(f, size))
        *kind = KIND_HDF5;
    else if (n == 8 && !memcmp(b, PNG_SIG, 8))
        *kind = KIND_PNG;
    else if (looks_like_text(f))
        *kind = KIND_TEXT;
    fclose(f);
    return 0;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcasecmp(s + a - b, suffix);
}

int hq_io_split_dataset(const char *spec, char **file, char **dset)
{
    /* From the last ':' back to the first: a dataset name may hold colons ("f.h5:/a:b"), and so
     * may a file name ("run:2.h5:/d"); the rightmost split whose prefix is a file wins. */
    for (size_t at = strlen(spec); at > 1;) {
        while (--at > 0 && spec[at] != ':')
            ;
        if (at == 0)
            break;
        char *f = strndup(spec, at);
        struct stat st;
        if (f && stat(f, &st) == 0 && S_ISREG(st.st_mode)) {
            char *d = strdup(spec + at + 1);
            if (d) {
                *file = f;
                *dset = d;
                return 1;
            }
        }
        free(f);
    }
    return 0;
}

char *hq_io_spec_file(const char *spec)
{
    char *file = NULL, *dset = NULL;
    struct stat st;
    if (stat(spec, &st) != 0 && hq_io_split_dataset(spec, &file, &dset)) {
        free(dset);
        return file;
    }
    return strdup(spec);
}

/* Every size derived from an item (image, block, plan offsets, the run's totals) is a product or a
 * sum of its dimensions in 64 bits, and a header of a few bytes can claim 2^80 (PNG: 2^31 x 2^31
 * RGBA16; HDF5: any dims). Such an item would wrap those sizes around, to a division by zero in
 * the plan or a small buffer for a huge read, so the whole input must stay below 2^62 bytes. */
#define INPUT_BYTES_MAX ((uint64_t)1 << 62)

static int item_bytes(const hq_item *it, uint64_t *bytes)
{
    uint64_t n = 0;
    const int over = __builtin_mul_overflow(it->slices, it->height, &n) || __builtin_mul_overflow(n, it->width, &n) ||
                     __builtin_mul_overflow(n, (uint64_t)it->channels * it->sample_bytes, &n);
    *bytes = n;
    return !over && n <= INPUT_BYTES_MAX;
}

/* Refuses (or with skip_bad marks bad) the items that would take the input past the limit. */
static int check_sizes(hq_inventory *inv, int skip_bad, hq_err *err)
{
    uint64_t total = 0;
    for (size_t i = 0; i < inv->n; i++) {
        hq_item *it = &inv->items[i];
        uint64_t n = 0;
        if (it->bad || (item_bytes(it, &n) && n <= INPUT_BYTES_MAX - total)) {
            total += it->bad ? 0 : n;
            continue;
        }
        const int hdf5 = inv->format == HQ_FMT_HDF5;
        const char *sep = hdf5 ? ":" : "", *dset = hdf5 ? it->name : "";
        hq_err why;
        if (item_bytes(it, &n))
            hq_fail(&why, HQ_EINPUT, "%s%s%s: too large (the input's images together pass 2^62 bytes)", it->src, sep,
                    dset);
        else
            hq_fail(&why, HQ_EINPUT, "%s%s%s: too large (%llu x %llu x %llu pixels of %u x %u bytes: over 2^62 bytes)",
                    it->src, sep, dset, (unsigned long long)it->slices, (unsigned long long)it->height,
                    (unsigned long long)it->width, it->channels, it->sample_bytes);
        if (!skip_bad) {
            *err = why;
            return HQ_EINPUT;
        }
        int rc = hq_item_set_bad(it, why.msg, err);
        if (rc)
            return rc;
    }
    return 0;
}

static int scan_input(const char *input, unsigned flags, hq_inventory *inv, hq_err *err);

int hq_io_scan(const char *input, unsigned flags, hq_inventory *inv, hq_err *err)
{
    int rc = scan_input(input, flags, inv, err);
    return rc ? rc : check_sizes(inv, (flags & HQ_SCAN_SKIP_BAD) != 0, err);
}

static int scan_input(const char *input, unsigned flags, hq_inventory *inv, hq_err *err)
{
    memset(inv, 0, sizeof *inv);
    inv->planes = (flags & HQ_SCAN_PLANES) != 0;
    struct stat st;
    if (stat(input, &st) != 0) {
        const int why = errno;
        char *file = NULL, *dset = NULL;
        if (!hq_io_split_dataset(input, &file, &dset))
            return why == ENOENT ? hq_fail(err, HQ_EINPUT, "%s: no such file or directory", input)
                   : why == ENOTDIR
                       ? hq_fail(err, HQ_EINPUT, "%s: part of the path is a file, not a directory (a dataset in an "
                                 "HDF5 file is named FILE:/DATASET)", input)
                       : hq_fail(err, HQ_EINPUT, "%s: cannot open (%s)", input, strerror(why));
        file_kind kind;
        int rc = classify(file, &kind, err);
        if (!rc && kind != KIND_HDF5)
            rc = hq_fail(err, HQ_EINPUT, "%s: not an HDF5 file (a dataset path was given)", file);
        if (!rc)
            rc = hq_hdf5_ops.scan(file, dset, flags, inv, err);
        free(file);
        free(dset);
        return rc;
    }
    if (S_ISDIR(st.st_mode))
        return hq_png_ops.scan(input, NULL, flags, inv, err);
    if (!S_ISREG(st.st_mode))
        return hq_fail(err, HQ_EINPUT, "%s: not a regular file or directory", input);
    if (st.st_size == 0)
        return hq_fail(err, HQ_EINPUT, "%s: empty file", input);
    file_kind kind;
    int rc = classify(input, &kind, err);
    if (rc)
        return rc;
    switch (kind) {
    case KIND_HDF5:
        return hq_hdf5_ops.scan(input, NULL, flags, inv, err);
    case KIND_PNG:
        return hq_png_ops.scan(input, NULL, flags, inv, err);
    case KIND_TEXT:
        if (ends_with(input, ".h5") || ends_with(input, ".hdf5") || ends_with(input, ".he5"))
            return hq_fail(err, HQ_EINPUT, "%s: not an HDF5 file", input);
        if (ends_with(input, ".png"))
            return hq_fail(err, HQ_EINPUT, "%s: not a PNG file", input);
        return hq_png_ops.scan(input, NULL, flags, inv, err); /* a list of PNG paths */
    default:
        return hq_fail(err, HQ_EINPUT, "%s: neither an HDF5 file, a PNG file nor a list of PNG files", input);
    }
}
