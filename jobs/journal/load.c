/* load.c — rank 0 reading OUT.journal/ into a hq_journal_state (jobs/journal.h). */
#define _GNU_SOURCE
#include "journal_internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *hq_journal_what_differs(const char *old, const char *now)
{
    if (strncmp(old, ID_LINE, strlen(ID_LINE)) != 0)
        return "another version of histeq_dist made it";
    const char *o = strstr(old, "\noptions "), *n = strstr(now, "\noptions ");
    const char *oe = o ? strchr(o + 1, '\n') : NULL, *ne = n ? strchr(n + 1, '\n') : NULL;
    if (!o || !n || !oe || !ne || oe - o != ne - n || memcmp(o, n, (size_t)(oe - o)) != 0)
        return "it was made with other options";
    return "the input changed since it was made";
}

/* Reads the records of one log up to its first damaged one (a kill in mid-write). */
static int load_log(const char *path, uint64_t owner, hq_journal_state *st, size_t *cap)
{
    unsigned char *b = NULL;
    size_t len = 0, off = 0;
    if (journal_read_file(path, &b, &len))
        return -1;
    /* Another journal's log (REC_OWNER): its claims are not this output's. */
    rec_head h0;
    uint64_t mark = 0;
    if (len >= sizeof h0 + sizeof mark) {
        memcpy(&h0, b, sizeof h0);
        memcpy(&mark, b + sizeof h0, sizeof mark);
    }
    if (len < sizeof h0 + sizeof mark || h0.magic != REC_MAGIC || h0.type != REC_OWNER || h0.len != sizeof mark ||
        journal_rec_sum(&mark, sizeof mark, NULL, 0) != h0.sum || mark != owner) {
        free(b);
        return 0;
    }
    off = sizeof h0 + sizeof mark;
    int rc = 0;
    while (off + sizeof(rec_head) <= len && !rc) {
        rec_head h;
        memcpy(&h, b + off, sizeof h);
        const unsigned char *p = b + off + sizeof h;
        if (h.magic != REC_MAGIC || h.len > len - off - sizeof h || journal_rec_sum(p, h.len, NULL, 0) != h.sum)
            break;
        if (h.type == REC_BLOCK && h.len == sizeof(hq_journal_block)) {
            hq_journal_block blk;
            memcpy(&blk, p, sizeof blk);
            rc = journal_state_add_block(st, cap, &blk);
        } else if ((h.type == REC_HIST || h.type == REC_LUT) && h.len >= 2 * sizeof(uint64_t)) {
            /* (group or image, n, n values): u64 counts or u16 LUT entries */
            const size_t elem = h.type == REC_HIST ? sizeof(uint64_t) : sizeof(uint16_t);
            uint64_t id, n;
            memcpy(&id, p, sizeof id);
            memcpy(&n, p + 8, sizeof n);
            if (n != (h.len - 16) / elem)
                break;
            rc = h.type == REC_HIST ? journal_state_add_hist(st, id, p + 16, n) : journal_state_add_lut(st, id, p + 16, n);
        }
        off += sizeof h + h.len;
    }
    free(b);
    return rc;
}

int hq_journal_load(const char *out, const char *id, const char *alt_id, hq_journal_state *st, hq_err *err)
{
    memset(st, 0, sizeof *st);
    char *dir = hq_journal_dir(out);
    char *idp = dir ? journal_join(dir, "id") : NULL;
    unsigned char *old = NULL;
    size_t oldlen = 0;
    int rc = 0;
    if (!idp) {
        rc = hq_fail(err, HQ_EMEM, "%s: out of memory", out);
        goto done;
    }
    if (journal_read_file(idp, &old, &oldlen)) {
        rc = hq_fail(err, HQ_EIO, "%s: cannot read the journal's id (%s)", idp, strerror(errno));
        goto done;
    }
    /* The recorded id, less its nonce line (journals made before it have none); the logs are
     * marked with the whole text. */
    size_t base = oldlen;
    if (oldlen > 1) {
        size_t k = oldlen - 1; /* the final newline; k goes back to the start of the last line */
        while (k > 0 && old[k - 1] != '\n')
            k--;
        if (oldlen - k > strlen(NONCE_KEY) && !memcmp(old + k, NONCE_KEY, strlen(NONCE_KEY)))
            base = k;
    }
    if ((base != strlen(id) || memcmp(old, id, base) != 0) &&
        (!alt_id || base != strlen(alt_id) || memcmp(old, alt_id, base) != 0)) {
        old[base] = '\0';
        rc = hq_fail(err, HQ_EUSAGE, "%s: cannot resume: %s (use --force without --resume to start over)",
                     out, hq_journal_what_differs((char *)old, id));
        goto done;
    }
    DIR *d = opendir(dir);
    if (!d) {
        rc = hq_fail(err, HQ_EIO, "%s: cannot list (%s)", dir, strerror(errno));
        goto done;
    }
    size_t cap = 0;
    struct dirent *e;
    while (!rc && (e = readdir(d)) != NULL) {
        if (!journal_is_log(e->d_name))
            continue;
        char *lp = journal_join(dir, e->d_name);
        if (!lp || load_log(lp, journal_owner((const char *)old), st, &cap))
            rc = hq_fail(err, HQ_EIO, "%s/%s: cannot read the journal", dir, e->d_name);
        free(lp);
    }
    closedir(d);
    if (!rc)
        journal_state_sort(st);
done:
    if (rc)
        hq_journal_state_free(st);
    free(old);
    free(idp);
    free(dir);
    return rc;
}
