/* outname.c — the default output name (outname.h). */
#define _DEFAULT_SOURCE /* realpath */
#include "outname.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/samepath.h"
#include "../io/io.h"

const char *hq_output_suffix(const char *method_name)
{
    static const char *const SUFFIX[][2] = {{"clahe", "_clahe"}, {"match", "_match"}};
    for (size_t k = 0; method_name && k < sizeof SUFFIX / sizeof *SUFFIX; k++)
        if (!strcmp(method_name, SUFFIX[k][0]))
            return SUFFIX[k][1];
    return "_eq";
}

int hq_output_name(const char *path, hq_outname_kind kind, const char *suffix, char **out, hq_err *err)
{
    *out = NULL;
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/')
        len--;
    const char *base = path + len;
    while (base > path && base[-1] != '/')
        base--;
    const size_t blen = (size_t)(path + len - base);
    if (blen == 0 || (blen == 1 && base[0] == '.') || (blen == 2 && base[0] == '.' && base[1] == '.') ||
        (blen == 1 && base[0] == '/'))
        return hq_fail(err, HQ_EUSAGE, "%s: cannot name an output beside it; give --output", path);
    /* Where the suffix goes: before the base name's last '.', unless that dot starts the name
     * (".hidden" has no extension). */
    size_t cut = len;
    if (kind != HQ_OUTNAME_DIR) {
        for (size_t k = blen; k-- > 1;)
            if (base[k] == '.') {
                cut = (size_t)(base - path) + k;
                break;
            }
    }
    const char *ext = kind == HQ_OUTNAME_FILE ? path + cut : "";
    const size_t elen = kind == HQ_OUTNAME_FILE ? len - cut : 0;
    const size_t n = cut + strlen(suffix) + elen + 1;
    char *s = malloc(n);
    if (!s)
        return hq_fail(err, HQ_EMEM, "%s: out of memory", path);
    snprintf(s, n, "%.*s%s%.*s", (int)cut, path, suffix, (int)elen, ext);
    *out = s;
    return 0;
}

int hq_default_output(const hq_inventory *inv, const char *suffix, char **out, hq_err *err)
{
    const char *root = inv->root ? inv->root : "";
    if (inv->format != HQ_FMT_PNG || !inv->root_is_dir) {
        int rc = hq_output_name(root, HQ_OUTNAME_FILE, suffix, out, err);
        hq_err scratch;
        if (rc || !hq_outname_check_kind(inv, *out, &scratch))
            return rc;
        /* An input named for the other format (a PNG called photo.h5): the name keeps its stem and
         * takes its format's extension, which hq_outname_check_kind asks of a given -o. */
        char *dot = strrchr(*out, '.');
        const char *ext = inv->format == HQ_FMT_HDF5 ? ".h5" : ".png";
        const size_t stem = dot && !strchr(dot, '/') ? (size_t)(dot - *out) : strlen(*out);
        char *s = malloc(stem + strlen(ext) + 1);
        if (!s) {
            free(*out);
            *out = NULL;
            return hq_fail(err, HQ_EMEM, "%s: out of memory", root);
        }
        memcpy(s, *out, stem);
        strcpy(s + stem, ext);
        free(*out);
        *out = s;
        return 0;
    }
    struct stat st;
    if (stat(root, &st) != 0 || !S_ISDIR(st.st_mode))
        return hq_output_name(root, HQ_OUTNAME_LIST, suffix, out, err);
    /* "." and ".." name nothing beside them: take the directory's real name. */
    hq_err scratch;
    if (!hq_output_name(root, HQ_OUTNAME_DIR, suffix, out, &scratch))
        return 0;
    char real[PATH_MAX];
    if (!realpath(root, real))
        return hq_fail(err, HQ_EUSAGE, "%s: cannot name an output beside it; give --output", root);
    return hq_output_name(real, HQ_OUTNAME_DIR, suffix, out, err);
}

int hq_in_dir(const char *path, const char *dir)
{
    char pd[4096];
    return !hq_dir_of(path, pd, sizeof pd) && hq_same_path(pd, dir);
}

int hq_item_file_in(const char *path, const char *dir, const hq_inventory *inv)
{
    unsigned long bn;
    const char *base = hq_base_of(path, &bn);
    if (!hq_in_dir(path, dir))
        return 0;
    for (size_t i = 0; i < inv->n; i++)
        if (strlen(inv->items[i].name) == bn && !memcmp(inv->items[i].name, base, bn))
            return 1;
    return 0;
}

int hq_output_file_in(const char *path, const char *dir, const hq_inventory *inv)
{
    unsigned long bn;
    const char *base = hq_base_of(path, &bn);
    const int mark = bn == strlen(HQ_PNG_DIR_MARK) && !memcmp(base, HQ_PNG_DIR_MARK, bn) && hq_in_dir(path, dir);
    return mark || hq_item_file_in(path, dir, inv);
}

/* Whether name ends with one of exts (no case), after its last '/'. */
static int ends_with_any(const char *name, const char *const *exts)
{
    const size_t n = strlen(name);
    for (size_t k = 0; exts[k]; k++) {
        const size_t e = strlen(exts[k]);
        if (n > e && !strcasecmp(name + n - e, exts[k]))
            return 1;
    }
    return 0;
}

int hq_outname_check_kind(const hq_inventory *inv, const char *out, hq_err *err)
{
    static const char *const HDF5_EXT[] = {".h5", ".hdf5", ".hdf", ".he5", NULL};
    static const char *const PNG_EXT[] = {".png", NULL};
    if (!out)
        return 0;
    if (inv->format == HQ_FMT_HDF5 && ends_with_any(out, PNG_EXT))
        return hq_fail(err, HQ_EUSAGE, "%s: HDF5 input is written as an HDF5 file: name the output .h5", out);
    if (inv->format == HQ_FMT_PNG && !inv->root_is_dir && inv->n == 1 && ends_with_any(out, HDF5_EXT))
        return hq_fail(err, HQ_EUSAGE, "%s: a PNG input is written as a PNG file: name the output .png", out);
    return 0;
}

int hq_outname_check_length(const hq_inventory *inv, const char *out, hq_err *err)
{
    if (!out)
        return 0;
    unsigned long n;
    hq_base_of(out, &n);
    char dir[PATH_MAX];
    long max = hq_dir_of(out, dir, sizeof dir) ? -1 : pathconf(dir, _PC_NAME_MAX);
    if (max <= 0 || max > NAME_MAX)
        max = NAME_MAX; /* unknown, or a file system that allows more than the C library's names */
    long room = max - (long)strlen(".journal");
    const char *why = "the run keeps its journal beside it under the name and \".journal\"";
    /* Open MPI's shared-file-pointer component "sm" names a file after OUT.part in the session
     * directory (OUT.part_cid-N-PID.sm); where that name does not fit, it prints an error line and
     * "individual" takes over, which leaves OUT.part.data.RANK files behind a killed run. */
    const long mpiio = NAME_MAX - (long)strlen(".part") - (long)strlen("_cid-99999-9999999.sm");
    if (inv && inv->format == HQ_FMT_HDF5 && mpiio < room) {
        room = mpiio;
        why = "MPI-IO names a file of its own after OUT.part";
    }
    if ((long)n > room)
        return hq_fail(err, HQ_EUSAGE, "%s: output name too long: %lu bytes, and %s: give --output a name of at most "
                       "%ld bytes", out, n, why, room);
    return 0;
}
