/* resume.c — the fresh / continue / done decision of resume.h, made on rank 0 and broadcast. */
#include "resume.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static char *with_suffix(const char *a, const char *b)
{
    size_t n = strlen(a) + strlen(b) + 2;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%s%s", a, b);
    return s;
}

/* The options that shape the output; a resume under other ones would mix two results. */
static void options_text(const hq_options *o, char *buf, size_t len)
{
    static const char *const SCOPES[] = {"auto", "image", "global"};
    snprintf(buf, len, "scope=%s method=%s color=%s bits=%u png-level=%d on-error=%s", SCOPES[o->scope],
             hq_method_name(o->method), hq_color_name(o->color), o->bits, o->png_level,
             o->on_error == HQ_ONERR_SKIP ? "skip" : "stop");
}

/* Rank 0. partial: what an interrupted run leaves (HDF5: OUT.part; PNG directory: OUT);
 * finished: what a finished one leaves (OUT; the directory's completion record). */
static int decide(const hq_options *o, const hq_inventory *inv, hq_resume *res, hq_err *err)
{
    const int hdf5 = inv->format == HQ_FMT_HDF5;
    if (!hdf5 && !inv->root_is_dir) {
        res->action = HQ_RESUME_OFF;
        return 0;
    }
    char opts[512];
    options_text(o, opts, sizeof opts);
    hq_journal_make_id(inv, opts, res->id, sizeof res->id);
    char *part = hdf5 ? with_suffix(o->output, ".part") : strdup(o->output);
    char *done = hdf5 ? strdup(o->output) : with_suffix(o->output, "/histeq_dist.complete");
    if (!part || !done) {
        free(part);
        free(done);
        return hq_fail(err, HQ_EMEM, "%s: out of memory", o->output);
    }
    const int journal = hq_journal_exists(o->output);
    int rc = 0;
    res->action = HQ_RESUME_FRESH;
    if (!o->resume) {
        if (journal && !o->force)
            rc = hq_fail(err, HQ_EUSAGE, "%s: an interrupted run left its journal %s.journal: add --resume to "
                         "finish it, or --force to start over", o->output, o->output);
    } else if (journal && exists(part) && !(!hdf5 && exists(done))) {
        res->action = HQ_RESUME_CONTINUE;
        rc = hq_journal_load(o->output, res->id, &res->st, err);
    } else if (exists(done)) {
        /* Finished, perhaps killed between the rename and removing the journal. */
        res->action = HQ_RESUME_DONE;
        if (journal)
            hq_journal_remove(o->output);
    } else if (journal && !o->quiet) {
        fprintf(stderr, "histeq_dist: note: %s: the interrupted run's output is gone; starting over\n", o->output);
    }
    free(part);
    free(done);
    return rc;
}

int hq_resume_decide(const hq_options *o, const hq_comm *c, const hq_inventory *inv, hq_resume *res, hq_err *err)
{
    memset(res, 0, sizeof *res);
    int rc = c->rank == 0 ? decide(o, inv, res, err) : 0;
    if ((rc = hq_comm_agree(c, rc, err)))
        return rc;
    int act = (int)res->action;
    MPI_Bcast(&act, 1, MPI_INT, 0, c->world);
    MPI_Bcast(res->id, (int)sizeof res->id, MPI_CHAR, 0, c->world);
    res->action = (hq_resume_action)act;
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
