/* resume.c — the fresh / continue / done decision of resume.h, made on rank 0 and broadcast. */
#define _DEFAULT_SOURCE /* realpath */
#include "resume.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../core/samepath.h"
#include "outname.h"
#include "../io/io.h"

/* The identity of what a --mask or --reference names (FILE of FILE.h5:/dset; every file of a mask
 * directory, in any order), so that a resume after it changed is refused as one after the input
 * changed is: the resumed blocks would mix two masks or two targets. */
static uint64_t spec_fingerprint(const char *spec)
{
    char *file = hq_io_spec_file(spec);
    const char *path = file ? file : spec;
    struct stat st;
    DIR *d = stat(path, &st) == 0 && S_ISDIR(st.st_mode) ? opendir(path) : NULL;
    if (!d) {
        const uint64_t h = hq_journal_file_mark(path, "");
        free(file);
        return h;
    }
    uint64_t h = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        const size_t n = strlen(path) + strlen(e->d_name) + 2;
        char *p = malloc(n);
        if (p) {
            snprintf(p, n, "%s/%s", path, e->d_name);
            h ^= hq_journal_file_mark(p, e->d_name); /* xor: the listing's order does not count */
        }
        free(p);
    }
    closedir(d);
    free(file);
    return h;
}

/* spec with its file by its real path (FILE of FILE.h5:/dset, or the spec itself); malloc'd, NULL
 * for NULL or when out of memory. */
static char *canonical_spec(const char *spec)
{
    char *file = spec ? hq_io_spec_file(spec) : NULL;
    char *real = file ? realpath(file, NULL) : NULL;
    char *out = NULL;
    if (real) {
        const char *rest = spec + strlen(file);
        const size_t n = strlen(real) + strlen(rest) + 1;
        if ((out = malloc(n)) != NULL)
            snprintf(out, n, "%s%s", real, rest);
    } else if (spec) {
        out = strdup(spec);
    }
    free(real);
    free(file);
    return out;
}

/* The options that shape the output; a resume under other ones would mix two results. canonical:
 * the --mask and --reference files by their real paths (hq_journal_make_ids' canonical id). */
static void options_text(const hq_options *o, hq_format format, int canonical, char *buf, size_t len)
{
    int n = snprintf(buf, len, "scope=%s method=%s color=%s bits=%u png-level=%d on-error=%s", hq_scope_name(o->scope),
                     hq_method_name(o->method), hq_color_name(o->color), o->bits, o->png_level,
                     o->on_error == HQ_ONERR_SKIP ? "skip" : "stop");
    /* Only when set, so that journals of runs without them keep their identity. */
    if (n > 0 && (size_t)n < len && (o->ignore || o->mask || o->reference || o->mask_inside)) {
        const char *side[HQ_SIDE_N];
        hq_side_specs(o, side);
        char *mask = canonical ? canonical_spec(side[0]) : NULL, *ref = canonical ? canonical_spec(side[1]) : NULL;
        snprintf(buf + n, len - (size_t)n, " ignore=%d:%u:%u mask=%s mask-apply=%s reference=%s", o->ignore,
                 o->ignore_lo, o->ignore_hi, mask ? mask : o->mask ? o->mask : "", o->mask_inside ? "inside" : "all",
                 ref ? ref : o->reference ? o->reference : "");
        free(mask);
        free(ref);
    }
    n = n > 0 && (size_t)n < len ? (int)strlen(buf) : n;
    /* --device copy writes the input's pixels: a resume that equalizes must not keep its blocks. */
    if (n > 0 && (size_t)n < len && o->device == HQ_DEV_COPY)
        snprintf(buf + n, len - (size_t)n, " device=copy");
    n = n > 0 && (size_t)n < len ? (int)strlen(buf) : n;
    /* %.17g: the clip limit exactly, so that any other limit is another run. */
    if (o->method == HQ_METHOD_CLAHE && n > 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, " clahe-grid=%llux%llu clahe-tile=%llu clip-limit=%.17g",
                 (unsigned long long)o->clahe.grid_y, (unsigned long long)o->clahe.grid_x,
                 (unsigned long long)o->clahe.tile, o->clahe.clip);
    n = n > 0 && (size_t)n < len ? (int)strlen(buf) : n;
    /* Float data: appended only when not the defaults, so journals of integer runs keep their id. */
    if (n > 0 && (size_t)n < len && (o->fbins != 65536 || o->range_set))
        snprintf(buf + n, len - (size_t)n, " bins=%u range=%s%.17g:%.17g", o->fbins, o->range_set ? "" : "data:",
                 o->range_lo, o->range_hi);
    n = n > 0 && (size_t)n < len ? (int)strlen(buf) : n;
    /* --luts none: the output has no LUT datasets to finish, and one with them has no room to drop.
     * Only HDF5 outputs record LUTs: elsewhere the setting changes nothing. */
    if (n > 0 && (size_t)n < len && o->no_luts && format == HQ_FMT_HDF5)
        snprintf(buf + n, len - (size_t)n, " luts=none");
}

/* The journal's claims on outputs that are no longer there (a PNG a user removed from the
 * unfinished directory) are dropped: those blocks are done again, not taken for done. */
static void drop_missing(const hq_io_ops *ops, const hq_inventory *inv, const char *out, hq_journal_state *st)
{
    if (!ops->item_present)
        return;
    uint64_t k = 0;
    for (uint64_t i = 0; i < st->nblocks; i++)
        if (ops->item_present(inv, out, st->blocks[i].item))
            st->blocks[k++] = st->blocks[i];
    st->nblocks = k;
}

/* Rank 0. What is at OUT (an unfinished or a finished output) the format says (io.h). */
static int decide(const hq_options *o, const hq_inventory *inv, hq_resume *res, hq_err *err)
{
    int partial = 0, finished = 0;
    char *made_by = NULL;
    const int kind = hq_io_ops_for(inv->format)->output_state(inv, o->output, &partial, &finished, &made_by);
    if (!kind) {
        res->action = HQ_RESUME_OFF;
        return 0;
    }
    char opts[4096], legacy_opts[4096];
    options_text(o, inv->format, 1, opts, sizeof opts);
    options_text(o, inv->format, 0, legacy_opts, sizeof legacy_opts);
    /* FILE:/DATASET writes that dataset alone, FILE every image and the rest of the file: with one
     * image in the file the two inventories are alike, not the outputs. Only then, so that the ids
     * of whole-file runs stay what they were. */
    if (inv->one_dataset && strlen(opts) + sizeof " input=one-dataset" <= sizeof opts)
        strcat(opts, " input=one-dataset");
    /* The files a --mask or --reference names are input too. */
    const char *side[HQ_SIDE_N];
    hq_side_specs(o, side);
    const uint64_t also = (side[0] ? spec_fingerprint(side[0]) : 0) * 3 + (side[1] ? spec_fingerprint(side[1]) : 0);
    /* The legacy id: as versions before the canonical one marked journals and outputs. */
    char *legacy = malloc(HQ_JOURNAL_ID_MAX);
    if (!legacy) {
        free(made_by);
        return hq_fail(err, HQ_EMEM, "%s: out of memory", o->output);
    }
    hq_journal_make_ids(inv, opts, legacy_opts, also, res->id, legacy, sizeof res->id);
    if (kind == 2) { /* written whole at the end (a single PNG): no journal, only its identity */
        int rc = 0;
        res->action = HQ_RESUME_OFF;
        if (o->resume && finished && strcmp(made_by, res->id) != 0)
            rc = hq_fail(err, HQ_EUSAGE, "%s: complete already, but %s (use --force without --resume to redo it)",
                         o->output, hq_journal_what_differs(made_by, res->id));
        else if (o->resume && finished)
            res->action = HQ_RESUME_DONE;
        free(made_by);
        free(legacy);
        return rc;
    }
    int journal = hq_journal_exists(o->output);
    const int in_use = journal && hq_journal_in_use(o->output);
    if (journal && !in_use && !hq_journal_has_id(o->output)) {
        hq_journal_remove(o->output); /* killed while it was being made: it claims nothing */
        journal = 0;
    }
    int rc = 0;
    res->action = HQ_RESUME_FRESH;
    if (in_use) {
        rc = hq_fail(err, HQ_EUSAGE, "%s: another run is still writing it (its journal %s.journal is in use): wait for "
                     "that run to end, or stop it first", o->output, o->output);
    } else if (!o->resume) {
        if (journal && !o->force)
            rc = hq_fail(err, HQ_EUSAGE, "%s: an interrupted run left its journal %s.journal: add --resume to "
                         "finish it, or --force to start over", o->output, o->output);
    } else if (journal && partial) {
        res->action = HQ_RESUME_CONTINUE;
        res->replace_finished = finished && (!made_by || !strcmp(made_by, res->id) || !strcmp(made_by, legacy));
        struct stat st;
        /* Said here, with what to do, rather than as create's bare "output exists": the advice
         * to use --force alone would throw the journaled work away. */
        if (inv->format == HQ_FMT_HDF5 && !res->replace_finished && !o->force && stat(o->output, &st) == 0)
            rc = hq_fail(err, HQ_EUSAGE, "%s: exists and is not this run's finished output; the interrupted run's "
                         "journal stays: --resume --force finishes that run over it, --force alone starts over",
                         o->output);
        /* A directory put at OUT since the kill: its files are not the claimed ones. */
        const int replaced = !rc && hq_journal_output_replaced(o->output);
        if (replaced && !o->force)
            rc = hq_fail(err, HQ_EUSAGE, "%s: not the directory the interrupted run wrote (it was replaced since); "
                         "--force starts over in it", o->output);
        if (replaced && !rc)
            res->action = HQ_RESUME_FRESH; /* its claims are of the directory that went */
        if (!rc && !replaced)
            rc = hq_journal_load(o->output, res->id, legacy, &res->st, err);
        if (!rc && !replaced)
            drop_missing(hq_io_ops_for(inv->format), inv, o->output, &res->st);
    } else if (finished && made_by && strcmp(made_by, res->id) != 0 && strcmp(made_by, legacy) != 0) {
        /* Finished by another run: a batch script that always passes --resume must not take it for
         * this one's (an older version's output records no identity, and is taken as it was). */
        rc = hq_fail(err, HQ_EUSAGE, "%s: complete already, but %s (use --force without --resume to redo it)",
                     o->output, hq_journal_what_differs(made_by, res->id));
    } else if (finished) {
        /* Finished, perhaps killed between the rename and removing the journal. */
        res->action = HQ_RESUME_DONE;
        if (journal)
            hq_journal_remove(o->output);
    } else if (journal && !o->quiet) {
        fprintf(stderr, "histeq_dist: note: %s: the interrupted run's output is gone; starting over\n", o->output);
    }
    /* Starting over: the old claims go before the output is touched (create truncates .part). */
    if (!rc && res->action == HQ_RESUME_FRESH && journal)
        hq_journal_remove(o->output);
    free(made_by);
    free(legacy);
    return rc;
}

void hq_resume_release(const hq_options *o, hq_resume *res)
{
    if (res->lock_fd >= 0)
        hq_journal_unlock(o->output, res->lock_fd);
    res->lock_fd = -1;
}

/* Whether path (or, for the journal, its directory) is the file at id. */
static int same_id(const char *path, const struct stat *id, int or_parent)
{
    struct stat st;
    if (path && stat(path, &st) == 0 && st.st_dev == id->st_dev && st.st_ino == id->st_ino)
        return 1;
    char dir[4096];
    return or_parent && path && !hq_dir_of(path, dir, sizeof dir) && stat(dir, &st) == 0 && st.st_dev == id->st_dev &&
           st.st_ino == id->st_ino;
}

/* Rank 0, before the lock is taken: the run removes its lock file and empties its journal, so
 * neither may be a file the run reads or --summary writes (an input named .OUT.lock was gone
 * after the run, one named OUT.journal emptied). Only where one of them exists already. */
static int clash_with_own_files(const hq_options *o, const hq_inventory *inv, hq_err *err)
{
    char *names[2] = {hq_journal_lock_path(o->output), hq_journal_dir(o->output)};
    const char *what[2] = {"lock", "journal"};
    int rc = 0;
    for (int k = 0; k < 2 && !rc; k++) {
        struct stat id;
        if (names[k] && k == 0 && o->summary && hq_same_path(o->summary, names[k])) {
            rc = hq_fail(err, HQ_EUSAGE, "%s: --summary FILE cannot be the run's lock %s", o->summary, names[k]);
            break;
        }
        if (names[k] && o->report && hq_same_path(o->report, names[k])) {
            rc = hq_fail(err, HQ_EUSAGE, "%s: --report DIR cannot be the run's %s %s", o->report, what[k], names[k]);
            break;
        }
        if (!names[k] || lstat(names[k], &id) != 0)
            continue;
        const char *side[HQ_SIDE_N];
        hq_side_specs(o, side);
        char *mask = side[0] ? hq_io_spec_file(side[0]) : NULL;
        char *ref = side[1] ? hq_io_spec_file(side[1]) : NULL;
        const char *clash = same_id(inv->root, &id, k)      ? "the input"
                            : same_id(mask, &id, k)           ? "the --mask file"
                            : same_id(ref, &id, k)            ? "the --reference file"
                            : same_id(o->summary, &id, k)     ? "the --summary file"
                                                              : NULL;
        for (size_t i = 0; !clash && inv->root_is_dir == 0 && i < inv->n; i++)
            if (same_id(inv->items[i].src, &id, k))
                clash = "an input file";
        if (clash)
            rc = hq_fail(err, HQ_EUSAGE, "%s: the run's %s, %s, is %s, which the run would remove: choose another "
                         "output", o->output, what[k], names[k], clash);
        free(mask);
        free(ref);
    }
    free(names[0]);
    free(names[1]);
    return rc;
}

/* Rank 0, before anything is touched: the output must not replace what the run reads besides its
 * input (the format checks that one): the --mask or --reference file, or for a PNG directory the
 * mask directory itself or a file the output will hold. With --force it would, and exit 0. */
static int output_replaces_a_read_file(const hq_options *o, const hq_inventory *inv, hq_err *err)
{
    const char *specs[HQ_SIDE_N];
    hq_side_specs(o, specs);
    const int png_dir = inv->format == HQ_FMT_PNG && inv->root_is_dir;
    int rc = 0;
    for (int k = 0; k < HQ_SIDE_N && !rc; k++) {
        char *file = specs[k] ? hq_io_spec_file(specs[k]) : NULL;
        if (!specs[k])
            continue;
        if (!file)
            return hq_fail(err, HQ_EMEM, "%s: out of memory", o->output);
        if (hq_same_path(o->output, file))
            rc = hq_fail(err, HQ_EUSAGE, "%s: the output is the %s file %s, which the run reads", o->output, hq_side_option[k],
                         file);
        else if (png_dir && hq_item_file_in(file, o->output, inv))
            rc = hq_fail(err, HQ_EUSAGE, "%s: the output directory would replace the %s file %s, which the run "
                         "reads", o->output, hq_side_option[k], file);
        free(file);
    }
    return rc;
}

int hq_resume_decide(const hq_options *o, const hq_comm *c, const hq_inventory *inv, hq_resume *res, hq_err *err)
{
    memset(res, 0, sizeof *res);
    res->lock_fd = -1;
    int rc = c->rank == 0 ? output_replaces_a_read_file(o, inv, err) : 0;
    if (!rc && c->rank == 0)
        rc = clash_with_own_files(o, inv, err);
    if (!rc && c->rank == 0)
        rc = hq_journal_foreign(o->output, err);
    if (!rc && c->rank == 0)
        rc = hq_journal_lock(o->output, &res->lock_fd, err);
    if (!rc && c->rank == 0)
        rc = decide(o, inv, res, err);
    if ((rc = hq_comm_agree(c, rc, err)))
        return rc;
    int act[2] = {(int)res->action, res->replace_finished};
    MPI_Bcast(act, 2, MPI_INT, 0, c->world);
    MPI_Bcast(res->id, (int)sizeof res->id, MPI_CHAR, 0, c->world);
    res->action = (hq_resume_action)act[0];
    res->replace_finished = act[1];
    if (res->action != HQ_RESUME_CONTINUE)
        return 0;
    unsigned char *buf = NULL;
    uint64_t len = 0;
    if (c->rank == 0)
        rc = hq_journal_state_pack(&res->st, &buf, &len, err);
    if ((rc = hq_comm_agree(c, rc, err)) == 0)
        rc = hq_comm_bcast_bytes(c, &buf, &len, err);
    if (!rc && c->rank != 0)
        rc = hq_journal_state_unpack(buf, len, &res->st, err);
    free(buf);
    return hq_comm_agree(c, rc, err);
}
