/* scan.c — the inventory on every rank: rank 0 scans the input (in a child: hq_io_scan_isolated,
 * io/io.h, or the one main started before MPI_Init), leaves out a --mask that is one of its items,
 * and broadcasts the list; without --output, rank 0 names the output beside the input
 * (app/outname.h). Both collective, their errors agreed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../../jobs/journal.h"
#include "../outname.h"
#include "run_internal.h"

/* The HDF5 object a mask spec inside the input file names, through every soft link and further
 * hard link (its own scan, isolated as the input's); 0 when that scan fails, which the mask's
 * reader reports in its turn. */
static uint64_t mask_object(const char *mask)
{
    hq_inventory m;
    hq_err scratch;
    if (hq_io_scan_isolated(mask, HQ_SCAN_PLANES, 0, &m, &scratch))
        return 0;
    const uint64_t obj = m.n == 1 ? m.items[0].object : 0;
    hq_inventory_free(&m);
    return obj;
}

/* Rank 0: a --mask that is one of the input's items (FILE.h5:/path inside the input file, under
 * whichever of its names; a mask PNG inside the input directory) is a mask, not an image: it is
 * left out of the items (and so of the output). Where the input names it alone (FILE.h5:/dset, a
 * PNG file) it is the image, masked by itself; where it was the collection's only image there is
 * nothing to equalize (HQ_EINPUT). */
static int leave_out_mask(run *r, hq_err *err)
{
    const char *mask = r->o->mask;
    struct stat sm, si;
    char *file = NULL, *dspec = NULL;
    const char *dset = NULL;
    uint64_t obj = 0;
    int ok = 0, rc = 0;
    if (mask && r->inv.format == HQ_FMT_PNG) {
        ok = stat(mask, &sm) == 0 && S_ISREG(sm.st_mode);
    } else if (mask && r->inv.format == HQ_FMT_HDF5 && hq_io_split_dataset(mask, &file, &dspec)) {
        ok = stat(file, &sm) == 0 && r->inv.n && stat(r->inv.items[0].src, &si) == 0 &&
             si.st_dev == sm.st_dev && si.st_ino == sm.st_ino;
        dset = dspec + (dspec[0] == '/');
        obj = ok ? mask_object(mask) : 0;
    }
    for (size_t i = 0; ok && i < r->inv.n; i++) {
        hq_item *it = &r->inv.items[i];
        const char *name = it->name + (it->name[0] == '/');
        const int same = dset ? (obj ? it->object == obj : !strcmp(name, dset))
                              : stat(it->src, &si) == 0 && si.st_dev == sm.st_dev && si.st_ino == sm.st_ino;
        if (!same)
            continue;
        if (r->inv.n == 1 && (r->inv.one_dataset || (r->inv.format == HQ_FMT_PNG && !r->inv.root_is_dir)))
            break; /* the input named alone: an image masked by itself */
        if (r->inv.n == 1) {
            rc = hq_fail(err, HQ_EINPUT, "%s: its only image is the --mask %s: nothing to equalize", r->inv.root,
                         mask);
            break;
        }
        if (!r->o->quiet)
            fprintf(stderr, "histeq_dist: note: %s%s%s is the mask; it is not equalized\n", it->src, dset ? ":" : "",
                    dset ? it->name : "");
        free(it->src);
        free(it->name);
        free(it->why);
        memmove(it, it + 1, (r->inv.n - i - 1) * sizeof *it);
        r->inv.n--;
        break;
    }
    free(file);
    free(dspec);
    return rc;
}

unsigned hq_run_scan_flags(const hq_options *o)
{
    return o->on_error == HQ_ONERR_SKIP ? HQ_SCAN_SKIP_BAD : 0;
}

int run_scan_and_share(run *r, hq_err *err)
{
    int rc = 0;
    unsigned char *buf = NULL;
    uint64_t len = 0;
    if (r->c->rank == 0) {
        const unsigned flags = hq_run_scan_flags(r->o);
        rc = hq_io_scan_matches(r->early_scan, r->o->input, flags) ? hq_io_scan_finish(r->early_scan, &r->inv, err)
                                                                   : hq_io_scan_isolated(r->o->input, flags, 0, &r->inv, err);
        if (!rc)
            rc = leave_out_mask(r, err);
        if (!rc)
            r->input_mark = run_input_mark(r);
        if (!rc)
            rc = hq_inventory_pack(&r->inv, &buf, &len, err);
    }
    if ((rc = hq_comm_agree(r->c, rc, err)))
        return rc;
    rc = hq_comm_bcast_bytes(r->c, &buf, &len, err);
    if (!rc && r->c->rank != 0)
        rc = hq_inventory_unpack(buf, len, &r->inv, err);
    free(buf);
    return hq_comm_agree(r->c, rc, err);
}

/* Rank 0: every input file's mark (hq_journal_file_mark), folded in input order. */
uint64_t run_input_mark(const run *r)
{
    uint64_t h = 0;
    const char *last = NULL;
    for (size_t i = 0; i < r->inv.n; i++) {
        const char *src = r->inv.items[i].src;
        if (last && !strcmp(src, last))
            continue; /* an HDF5 file's datasets: one file */
        last = src;
        h = h * 1099511628211ull ^ hq_journal_file_mark(src, src);
    }
    return h;
}

/* Collective, before the output is committed: an input changed while it was read (another
 * process rewrote or cut it short: HDF5 reads past a file's end as zeros, and a run finished
 * with slices of zeros, exit 0) fails the run rather than commit what was read. */
int run_check_input_unchanged(const run *r, hq_err *err)
{
    int rc = 0;
    if (r->c->rank == 0 && run_input_mark(r) != r->input_mark)
        rc = hq_fail(err, HQ_EINPUT, "%s: the input changed while it was read (rewritten or cut short by another "
                     "process?): nothing was written", r->o->input);
    return hq_comm_agree(r->c, rc, err);
}

/* Without --output, rank 0 names the output beside the input (app/outname.h); hq_run says so once
 * the options have passed their checks. */
int run_name_output(const run *r, char **name, hq_err *err)
{
    unsigned char *buf = NULL;
    uint64_t len = 0;
    int rc = 0;
    if (r->c->rank == 0) {
        rc = hq_default_output(&r->inv, hq_output_suffix(hq_method_name(r->o->method)), name, err);
        if (!rc) {
            buf = (unsigned char *)*name;
            len = strlen(*name) + 1;
        }
    }
    if ((rc = hq_comm_agree(r->c, rc, err)))
        return rc;
    rc = hq_comm_bcast_bytes(r->c, &buf, &len, err);
    if (r->c->rank != 0)
        *name = (char *)buf;
    return hq_comm_agree(r->c, rc, err);
}
