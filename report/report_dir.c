/* report_dir.c — the report's directory checked up front on rank 0 (neither the input nor the output,
 * and able to take a file: made with its missing parents and a probe file, then all of that removed
 * again), so that a long run never fails at its end for a reason it could have seen at the start;
 * and made for real when the page is written. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../app/outname.h"
#include "../core/samepath.h"
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
    struct stat st;
    if (stat(dir, &st) == 0 && !S_ISDIR(st.st_mode))
        return hq_fail(err, HQ_EUSAGE, "%s: not a directory (--report)", dir); /* the command line's mistake */
    const int e = rep_make_dirs(dir, probe_dir, err);
    if (e > 0)
        return hq_fail(err, HQ_EIO, "%s: cannot create the report directory (%s)", dir, strerror(e));
    return e ? HQ_EIO : 0;
}
