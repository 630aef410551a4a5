/* summary.c — --summary FILE; contract in summary.h. */
#include "summary.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../core/doomed.h"
#include "../core/samepath.h"
#include "../jobs/journal.h"
#include "outname.h"
#include "../io/io.h"
#include "../report/html.h"

static void put_field(FILE *f, const char *key, const char *val, int last)
{
    fprintf(f, "  \"%s\": ", key);
    hq_json_put(f, val); /* valid UTF-8 whatever bytes a path holds */
    fputs(last ? "\n" : ",\n", f);
}

/* The temporary name the summary is written under: PATH.part-PID (malloc'd), this process's own,
 * so that no file of the user's is truncated or removed by the probe or the write. */
static char *part_path(const char *path)
{
    size_t n = strlen(path) + sizeof ".part-" + 20;
    char *tmp = malloc(n);
    if (tmp)
        snprintf(tmp, n, "%s.part-%ld", path, (long)getpid());
    return tmp;
}

/* Creates tmp for writing, registered for removal on a signal (*slot). A file of that name is a
 * leftover of an earlier process with this id: replaced. */
static FILE *create_part(const char *tmp, int *slot)
{
    *slot = hq_doomed_add(tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno == EEXIST && unlink(tmp) == 0)
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        const int e = errno;
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        hq_doomed_drop(*slot);
        errno = e;
    }
    return f;
}

/* A FILE that exists and is neither a regular file nor a directory (a FIFO, /dev/stdout, a
 * terminal): written into as it is, never replaced by a rename. */
static int is_special(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
}

/* The file hq_summary_check approved for the FILE given (a link followed once, there): the write
 * goes there, so that a link pointed elsewhere during the run cannot aim it at another file. */
static char *checked_given, *checked_target;

/* Where the summary goes: a symbolic link's target, followed as text (core/samepath.h) so that
 * the check before the run and the write after it name one file, whether or not it exists yet;
 * the rename then replaces the file the link names, not the link. malloc'd; NULL on a loop. */
static char *target_of(const char *path)
{
    int loop = 0;
    char *t = hq_follow_links(path, &loop);
    return t ? t : loop ? NULL : strdup(path);
}

/* Whether path is OUT's journal or lock, or lies in the journal: the run removes those. */
static int own_bookkeeping(const char *path, const char *out)
{
    char *names[2] = {hq_journal_dir(out), hq_journal_lock_path(out)};
    const int yes = (names[0] && (hq_same_path(path, names[0]) || hq_in_dir(path, names[0]))) ||
                    (names[1] && hq_same_path(path, names[1]));
    free(names[0]);
    free(names[1]);
    return yes;
}

/* The files the run reads or writes that the summary must not replace. */
static int guard(const char *path, const hq_options *o, const hq_inventory *inv, hq_err *err)
{
    struct stat st;
    const int exists = stat(path, &st) == 0;
    if (!path[0])
        return hq_fail(err, HQ_EUSAGE, "--summary: empty file name");
    if (exists && S_ISDIR(st.st_mode))
        return hq_fail(err, HQ_EUSAGE, "%s: --summary FILE is a directory", path);
    if (exists && S_ISSOCK(st.st_mode))
        return hq_fail(err, HQ_EUSAGE, "%s: --summary FILE is a socket", path);
    if (own_bookkeeping(path, o->output))
        return hq_fail(err, HQ_EUSAGE, "%s: --summary FILE cannot be the output's journal or lock", path);
    if (hq_same_path(path, o->output))
        return hq_fail(err, HQ_EUSAGE, "%s: --summary FILE cannot be the output", path);
    if (hq_same_path(path, inv->root))
        return hq_fail(err, HQ_EUSAGE, "%s: --summary FILE cannot be the input", path);
    if (inv->format == HQ_FMT_PNG && inv->root_is_dir && hq_output_file_in(path, o->output, inv))
        return hq_fail(err, HQ_EUSAGE, "%s: --summary FILE cannot be one of the output's files", path);
    if (o->report && (hq_same_path(path, o->report) || hq_in_dir(path, o->report)))
        return hq_fail(err, HQ_EUSAGE, "%s: --summary FILE cannot be the --report directory or a file in it", path);
    const char *specs[HQ_SIDE_N];
    hq_side_specs(o, specs);
    for (int k = 0; k < HQ_SIDE_N; k++) {
        char *file = specs[k] ? hq_io_spec_file(specs[k]) : NULL;
        const int clash = file && (hq_same_path(path, file) || (stat(file, &st) == 0 && S_ISDIR(st.st_mode) &&
                                                               hq_item_file_in(path, file, inv)));
        free(file);
        if (clash)
            return hq_fail(err, HQ_EUSAGE, "%s: --summary FILE cannot be a file of %s", path, hq_side_option[k]);
    }
    for (size_t i = 0; exists && i < inv->n; i++)
        if (hq_same_path(path, inv->items[i].src))
            return hq_fail(err, HQ_EUSAGE, "%s: --summary FILE cannot be an input file", path);
    return 0;
}

int hq_summary_check(const char *given, const hq_options *o, const hq_inventory *inv, hq_err *err)
{
    int rc = guard(given, o, inv, err);
    if (rc)
        return rc;
    if (is_special(given))
        return access(given, W_OK) == 0 ? 0 : hq_fail(err, HQ_EIO, "%s: cannot write (%s)", given, strerror(errno));
    char *path = target_of(given);
    if (!path)
        return hq_fail(err, HQ_EUSAGE, "%s: --summary FILE is a loop of symbolic links", given);
    if (strcmp(path, given) && (rc = guard(path, o, inv, err)) != 0) {
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err->msg);
        rc = hq_fail(err, rc, "%s: links to %s", given, why);
        free(path);
        return rc;
    }
    /* The rename would replace a file the user may not write (it needs only the directory). */
    if (access(path, F_OK) == 0 && access(path, W_OK) != 0) {
        rc = hq_fail(err, HQ_EIO, "%s: cannot write (%s)", given, strerror(errno));
        free(path);
        return rc;
    }
    char *tmp = part_path(path);
    if (!tmp) {
        free(path);
        return hq_fail(err, HQ_EMEM, "%s: out of memory", given);
    }
    int slot;
    FILE *f = create_part(tmp, &slot);
    if (!f)
        rc = hq_fail(err, HQ_EIO, "%s: cannot write (%s)", given, strerror(errno));
    else {
        fclose(f);
        unlink(tmp);
        hq_doomed_drop(slot);
    }
    free(tmp);
    free(checked_given);
    free(checked_target);
    checked_given = rc ? NULL : strdup(given);
    checked_target = rc ? NULL : path;
    if (rc)
        free(path);
    return rc;
}

static void put_summary(FILE *f, const hq_summary *s);

int hq_summary_write(const char *given, const hq_summary *s, hq_err *err)
{
    if (is_special(given)) {
        /* A FIFO nobody reads would block here for ever, with the run's lock held: 10 s, then
         * an error (the output is committed by now). */
        int fd = -1;
        for (int tries = 0; tries < 100; tries++) {
            fd = open(given, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
            if (fd >= 0 || errno != ENXIO)
                break;
            const struct timespec pause = {0, 100 * 1000 * 1000};
            nanosleep(&pause, NULL);
        }
        if (fd < 0)
            return hq_fail(err, HQ_EIO, "%s: cannot write (%s)", given,
                           errno == ENXIO ? "no process reads the FIFO: waited 10 s" : strerror(errno));
        const int fl = fcntl(fd, F_GETFL);
        if (fl >= 0)
            fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
        FILE *f = fdopen(fd, "w");
        if (!f) {
            close(fd);
            return hq_fail(err, HQ_EIO, "%s: cannot write (%s)", given, strerror(errno));
        }
        put_summary(f, s);
        const int bad = ferror(f) | (fclose(f) != 0);
        return bad ? hq_fail(err, HQ_EIO, "%s: cannot write (%s)", given, strerror(errno)) : 0;
    }
    char *path = checked_given && checked_target && !strcmp(checked_given, given) ? strdup(checked_target)
                                                                                  : target_of(given);
    char *tmp = path ? part_path(path) : NULL;
    if (!tmp) {
        free(path);
        return hq_fail(err, HQ_EMEM, "%s: out of memory", given);
    }
    int slot;
    FILE *f = create_part(tmp, &slot);
    if (!f) {
        int rc = hq_fail(err, HQ_EIO, "%s: cannot write (%s)", given, strerror(errno));
        free(tmp);
        free(path);
        return rc;
    }
    put_summary(f, s);
    int bad = ferror(f);
    bad |= fclose(f) != 0;
    int rc = 0;
    if (bad || rename(tmp, path) != 0) {
        rc = hq_fail(err, HQ_EIO, "%s: cannot write (%s)", given, strerror(errno));
        unlink(tmp);
    }
    hq_doomed_drop(slot);
    free(tmp);
    free(path);
    return rc;
}

static void put_summary(FILE *f, const hq_summary *s)
{
    fputs("{\n", f);
    put_field(f, "version", s->version, 0);
    put_field(f, "input", s->input, 0);
    put_field(f, "output", s->output, 0);
    put_field(f, "engine", s->engine, 0);
    put_field(f, "scope", s->scope, 0);
    put_field(f, "method", s->method, 0);
    put_field(f, "color", s->color, 0);
    fprintf(f, "  \"ranks\": %d,\n  \"images\": %llu,\n  \"pixels\": %llu,\n  \"bytes\": %llu,\n  \"skipped\": %llu,\n",
            s->ranks, (unsigned long long)s->images, (unsigned long long)s->pixels, (unsigned long long)s->bytes,
            (unsigned long long)s->skipped);
    fprintf(f, "  \"wall_s\": %.6f,\n  \"mib_per_s\": %.3f,\n", s->wall_s,
            s->wall_s > 0 ? (double)s->bytes / 1048576.0 / s->wall_s : 0.0);
    fprintf(f, "  \"peak_rss_bytes\": %llu,\n", (unsigned long long)s->peak_rss);
    if (s->has_device_peak)
        fprintf(f, "  \"device_peak_bytes\": %llu,\n", (unsigned long long)s->device_peak);
    else
        fputs("  \"device_peak_bytes\": null,\n", f);
    fputs("  \"phases\": {\n", f);
    for (int k = 0; k < HQ_SUMMARY_PHASES; k++)
        fprintf(f, "    \"%s\": {\"max_s\": %.6f, \"mean_s\": %.6f}%s\n", s->phase_names[k], s->phase_max[k],
                s->phase_mean[k], k + 1 < HQ_SUMMARY_PHASES ? "," : "");
    fputs("  }\n}\n", f);
}
