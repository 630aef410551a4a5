/* report_dir.c — the report's directory checked up front on rank 0 (neither the input nor the output,
 * and able to take a file: made with its missing parents and a probe file, then all of that removed
 * again), so that a long run never fails at its end for a reason it could have seen at the start;
 * and made for real when the page is written. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../app/outname.h"
#include "../core/samepath.h"
#include "../io/io.h"
#include "report_internal.h"

char *rep_join(const char *dir, const char *name)
{
    const size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* DIR takes a new file: create and remove a probe file in it. */
static int probe_dir(const char *dir, hq_err *err)
{
    char *probe = rep_join(dir, ".index.html.part");
    if (!probe)
        return hq_fail(err, HQ_EMEM, "%s: out of memory", dir);
    int fd = open(probe, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    int rc = fd >= 0 ? 0 : hq_fail(err, HQ_EIO, "%s: cannot write the report there (%s)", dir, strerror(errno));
    if (fd >= 0) {
        close(fd);
        unlink(probe);
    }
    free(probe);
    return rc;
}

/* Creates the missing directories of `dir`, from the top down; returns 0, an errno, or -1 when
 * `check` (if given) failed on the result. With a check, the directories it created are removed
 * again afterwards, from the bottom up: the run has not started, and a run that fails later must
 * not leave an empty DIR behind. */
int rep_make_dirs(const char *dir, int (*check)(const char *, hq_err *), hq_err *err)
{
    char *p = strdup(dir);
    if (!p)
        return ENOMEM;
    size_t n = strlen(p), made[64], nmade = 0;
    int e = 0;
    for (size_t i = 1; i <= n && !e; i++) {
        if (p[i] != '/' && p[i] != '\0')
            continue;
        const char keep = p[i];
        p[i] = '\0';
        if (mkdir(p, 0777) == 0) {
            if (nmade < sizeof made / sizeof *made)
                made[nmade++] = i;
        } else if (errno != EEXIST) {
            e = errno;
        }
        p[i] = keep;
    }
    if (!e && check && check(dir, err))
        e = -1;
    for (size_t k = nmade; check && k-- > 0;) {
        p[made[k]] = '\0';
        rmdir(p);
    }
    free(p);
    return e;
}

/* Whether DIR, or a directory above it, is a file the output will be or hold: the HDF5 file or
 * the single PNG, a PNG directory's images or its completion mark. Their making would fail the
 * report at the end of the run (ENOTDIR), or the report replace them. */
static const char *in_output_file(const hq_report *r, const char *dir)
{
    const char *out = r->cfg.o->output;
    const hq_inventory *inv = r->cfg.inv;
    const int png_dir = inv->format == HQ_FMT_PNG && inv->root_is_dir;
    char p[4096], up[4096];
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p)
        return NULL; /* longer than any path the run could make */
    for (;;) { /* DIR, then each directory above it, up to "/" or "." */
        if (!png_dir && hq_same_path(p, out))
            return "lie inside the output file";
        if (png_dir && hq_output_file_in(p, out, inv))
            return "be one of the output's files, or lie inside one";
        if (hq_dir_of(p, up, sizeof up) || !strcmp(up, p))
            return NULL;
        strcpy(p, up);
    }
}

/* Whether a file named `name` (n bytes) is one the report writes in DIR: the page, its temporary,
 * or a thumbnail (finish.c). */
static int report_name(const char *name, size_t n)
{
    char b[256];
    if (n >= sizeof b)
        return 0;
    memcpy(b, name, n);
    b[n] = '\0';
    if (!strcmp(b, "index.html") || !strcmp(b, "index.html.part"))
        return 1;
    if (strncmp(b, "thumb-", 6) || !isdigit((unsigned char)b[6]))
        return 0;
    const char *p = b + 6;
    while (isdigit((unsigned char)*p))
        p++;
    return !strcmp(p, "-before.png") || !strcmp(p, "-after.png");
}

/* Whether the report would write over `path`: a file of DIR under one of the report's names. */
static int report_replaces(const char *dir, const char *path)
{
    char up[4096];
    unsigned long n = 0;
    if (!path || hq_dir_of(path, up, sizeof up))
        return 0;
    const char *base = hq_base_of(path, &n);
    return report_name(base, n) && hq_same_path(up, dir);
}

/* The files the run reads or writes that the page or a thumbnail would replace in DIR: the
 * output, the input's files, the --mask and --reference files (or their directory, which may
 * hold a PNG of any name). What it is, for the message, or NULL. --summary FILE cannot lie in
 * DIR (app/summary.c). */
static const char *run_file_in_dir(const hq_report *r, const char *dir, const char **which)
{
    const hq_options *o = r->cfg.o;
    const hq_inventory *inv = r->cfg.inv;
    if (report_replaces(dir, o->output))
        return *which = o->output, "the output";
    if (report_replaces(dir, inv->root))
        return *which = inv->root, "the input";
    for (size_t i = 0; i < inv->n; i++)
        if (report_replaces(dir, inv->items[i].src))
            return *which = inv->items[i].src, "an input file";
    const char *specs[HQ_SIDE_N];
    hq_side_specs(o, specs);
    for (int k = 0; k < HQ_SIDE_N; k++) {
        char *file = specs[k] ? hq_io_spec_file(specs[k]) : NULL;
        struct stat st;
        const int clash = file && (report_replaces(dir, file) ||
                                   (stat(file, &st) == 0 && S_ISDIR(st.st_mode) && hq_same_path(file, dir)));
        free(file);
        if (clash)
            return *which = specs[k], hq_side_option[k];
    }
    return NULL;
}

/* DIR must not be the input or the output, nor lie in a file of the output, and must take a file:
 * checked by making it (and its missing parents) and a probe file in it, then removing all of that
 * again. */
int rep_check_dir(const hq_report *r, hq_err *err)
{
    const char *dir = r->cfg.o->report;
    if (!dir[0])
        return hq_fail(err, HQ_EUSAGE, "--report: empty directory name");
    if (hq_same_path(dir, r->cfg.o->output))
        return hq_fail(err, HQ_EUSAGE, "%s: --report DIR cannot be the output", dir);
    if (hq_same_path(dir, r->cfg.inv->root))
        return hq_fail(err, HQ_EUSAGE, "%s: --report DIR cannot be the input", dir);
    const char *why = in_output_file(r, dir);
    if (why)
        return hq_fail(err, HQ_EUSAGE, "%s: --report DIR cannot %s (%s)", dir, why, r->cfg.o->output);
    const char *which = NULL, *what = run_file_in_dir(r, dir, &which);
    if (what)
        return hq_fail(err, HQ_EUSAGE, "%s: --report DIR would write its page or thumbnails over %s (%s): give another "
                       "directory", dir, what, which);
    struct stat st;
    if (stat(dir, &st) == 0 && !S_ISDIR(st.st_mode))
        return hq_fail(err, HQ_EUSAGE, "%s: not a directory (--report)", dir); /* the command line's mistake */
    const int e = rep_make_dirs(dir, probe_dir, err);
    if (e > 0)
        return hq_fail(err, HQ_EIO, "%s: cannot create the report directory (%s)", dir, strerror(e));
    return e ? HQ_EIO : 0;
}
