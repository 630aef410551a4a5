/* create_output.c — the PNG output prepared on rank 0 before any write: a directory or a single file,
 * never one of the inputs, checked writable; the ranks agree on the result. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "../../core/doomed.h"
#include "../../core/samepath.h"
#include "png_internal.h"

/* The file whose creation proves the output directory writable (check_writable). */
#define PROBE_NAME "histeq_dist-probe.png"

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
            /* A file where a directory must be: that, not "File exists", is the reason. */
            const int e = errno == EEXIST ? ENOTDIR : errno;
            rc = hq_fail(err, HQ_EIO, "%s: cannot create directory (%s)", path, strerror(e));
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
    const int e = hq_dir_writable(dir);
    if (e)
        return hq_fail(err, HQ_EIO, "%s: cannot write (%s)", shown, strerror(e));
    char *tmp = png_temp_path(final);
    if (!tmp)
        return hq_fail(err, HQ_EMEM, "%s: out of memory", shown);
    const int slot = hq_doomed_add(tmp); /* as the encodes' (write.c) */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0666);
    int rc = 0;
    if (fd < 0)
        rc = hq_fail(err, HQ_EIO, "%s: cannot write (%s)", shown, strerror(errno));
    else {
        close(fd);
        unlink(tmp);
    }
    hq_doomed_drop(slot);
    free(tmp);
    return rc;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Whether process `pid` is gone from this host. A zombie counts as gone: it writes nothing more,
 * yet kill(pid, 0) succeeds on it until its parent reaps it, which a container's init may do
 * seconds late (a killed job's rank 0 left its temporary behind a resume that ran meanwhile). */
static int process_gone(long pid)
{
    if (pid <= 0)
        return 0;
    if (kill((pid_t)pid, 0) != 0)
        return errno == ESRCH;
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    const size_t got = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[got] = '\0';
    /* "PID (COMM) STATE ...": COMM may hold anything, ')' included; the state follows the last. */
    const char *paren = strrchr(buf, ')');
    return paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X');
}

/* Leftovers of a killed run's writes, in directory dir: `.STEM.part-PID` (png_temp_path) for each
 * STEM of names[0..n), sorted (cmp_name): png_temp_stem of each output name, and the name itself
 * where the stem differs (versions before the stems wrote `.NAME.part-PID` for any name that fit).
 * dead_only: only those whose process is gone from this host (a single output file has no journal
 * to say that no other run is writing it); otherwise every one (the output directory's journal
 * lock keeps other runs away). A file that cannot be removed stays: it is hidden, and a finished
 * run never names it. */
static void remove_stale_temps(const char *dir, const char *const *names, size_t n, int dead_only)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        const char *nm = e->d_name, *tag = NULL;
        for (const char *q = strstr(nm, ".part-"); q; q = strstr(q + 1, ".part-"))
            tag = q; /* the last: NAME may hold ".part-" itself */
        if (nm[0] != '.' || !tag || tag == nm + 1)
            continue;
        const char *digits = tag + 6, *t = digits;
        while (*t >= '0' && *t <= '9')
            t++;
        if (t == digits || *t)
            continue;
        char name[NAME_MAX + 1];
        const size_t len = (size_t)(tag - nm - 1);
        if (len > NAME_MAX)
            continue;
        memcpy(name, nm + 1, len);
        name[len] = '\0';
        const char *key = name;
        if (!bsearch(&key, names, n, sizeof *names, cmp_name))
            continue;
        /* This process's own id: left by an earlier process that had it, as this one has not
         * written yet (and its probe creates that very name exclusively). */
        const long pid = strtol(digits, NULL, 10);
        if (dead_only && pid != (long)getpid() && !process_gone(pid))
            continue;
        unlinkat(dirfd(d), nm, 0);
    }
    closedir(d);
}

/* The directory output's names (its images, its completion mark, the writability probe): what a
 * killed run of it may have left under a temporary name. */
static int sweep_output_dir(const hq_inventory *inv, const char *out, hq_err *err)
{
    const char **v = malloc((2 * inv->n + 2) * sizeof *v);
    char **longs = calloc(inv->n + 1, sizeof *longs); /* the stems that are not the names */
    int rc = 0;
    if (!v || !longs) {
        rc = hq_fail(err, HQ_EMEM, "%s: out of memory", out);
        goto done;
    }
    size_t n = 0;
    for (size_t i = 0; i < inv->n; i++) {
        char stem[PNG_STEM_MAX + 1];
        png_temp_stem(inv->items[i].name, stem);
        if (strcmp(stem, inv->items[i].name) && !(longs[i] = strdup(stem))) {
            rc = hq_fail(err, HQ_EMEM, "%s: out of memory", out);
            goto done;
        }
        v[n++] = longs[i] ? longs[i] : inv->items[i].name;
        if (longs[i])
            v[n++] = inv->items[i].name;
    }
    v[n++] = COMPLETE_NAME;
    v[n++] = PROBE_NAME;
    qsort(v, n, sizeof *v, cmp_name);
    remove_stale_temps(out, v, n, 0);
done:
    for (size_t i = 0; longs && i < inv->n; i++)
        free(longs[i]);
    free(longs);
    free(v);
    return rc;
}

/* With --force an existing output directory is written into: no output may land on an input. */
static int check_no_input_replaced(const hq_inventory *inv, const char *out, hq_err *err)
{
    for (size_t i = 0; i < inv->n; i++) {
        const hq_item *it = &inv->items[i];
        if (it->bad)
            continue;
        char *dst = png_join_path(out, it->name);
        if (!dst)
            return hq_fail(err, HQ_EMEM, "%s: out of memory", out);
        struct stat so, si;
        int clash = stat(dst, &so) == 0 && stat(it->src, &si) == 0 && png_same_file(&so, &si);
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
    const char *why = hq_unreplaceable(out);
    if (why)
        return hq_fail(err, HQ_EUSAGE, "%s: %s", out, why);
    if (stat(out, &so) == 0) {
        if (!S_ISDIR(so.st_mode))
            return hq_fail(err, HQ_EUSAGE, "%s: exists and is not a directory", out);
        if (stat(inv->root, &si) == 0 && png_same_file(&so, &si))
            return hq_fail(err, HQ_EUSAGE, "%s: output is the input", out);
        int empty = 0, rc = dir_is_empty(out, &empty, err);
        if (rc)
            return rc;
        if (!empty && !o->force && !o->resume)
            return hq_fail(err, HQ_EUSAGE, "%s: output exists (use --force to replace)", out);
        if ((rc = check_no_input_replaced(inv, out, err)) || (!empty && (rc = sweep_output_dir(inv, out, err))))
            return rc;
        /* An old run's mark must not stand for this run until it has finished. */
        char *mark = png_join_path(out, COMPLETE_NAME);
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
    char *probe = png_join_path(out, PROBE_NAME);
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
    const char *why = hq_unreplaceable(out);
    if (why)
        return hq_fail(err, HQ_EUSAGE, "%s: %s", out, why);
    if (stat(out, &so) == 0) {
        if (S_ISDIR(so.st_mode))
            return hq_fail(err, HQ_EUSAGE, "%s: is a directory (the input is one PNG file)", out);
        if (stat(inv->root, &si) == 0 && png_same_file(&so, &si))
            return hq_fail(err, HQ_EUSAGE, "%s: output is the input", out);
        if (!o->force)
            return hq_fail(err, HQ_EUSAGE, "%s: output exists (use --force to replace)", out);
    }
    char *dir = png_dir_name(out);
    if (!dir)
        return hq_fail(err, HQ_EMEM, "%s: out of memory", out);
    char stem[PNG_STEM_MAX + 1];
    png_temp_stem(png_base_name(out), stem);
    const char *names[2] = {stem, png_base_name(out)};
    const size_t nn = strcmp(names[0], names[1]) ? 2 : 1;
    qsort(names, nn, sizeof *names, cmp_name);
    remove_stale_temps(dir, names, nn, 1);
    int rc = check_writable(dir, out, out, err);
    free(dir);
    return rc;
}

int png_create_output(hq_io *io, const hq_out_opts *o, MPI_Comm comm, hq_err *err)
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
