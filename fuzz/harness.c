/* harness.c — the calls of one histeq_dist run on one rank, on one fuzzed input (harness.h). */
#define _GNU_SOURCE
#include "harness.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hdf5.h>
#include <mpi.h>

#include "../io/io.h"
#include "../jobs/plan.h"

/* Weak, so that a build without LeakSanitizer links too. */
void __lsan_disable(void) __attribute__((weak));
void __lsan_enable(void) __attribute__((weak));

static char workdir[PATH_MAX];
static int ready;


static void die(const char *what, const char *detail)
{
    fprintf(stderr, "hq-fuzz: RULE BROKEN: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    abort();
}

static void remove_workdir(void)
{
    DIR *d = opendir(workdir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            char p[PATH_MAX * 2];
            snprintf(p, sizeof p, "%s/%s", workdir, e->d_name);
            unlink(p);
        }
        closedir(d);
    }
    rmdir(workdir);
}

static void at_exit(void)
{
    remove_workdir();
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (__lsan_disable)
        __lsan_disable();
    if (init && !fin)
        MPI_Finalize();
    if (__lsan_enable)
        __lsan_enable();
}

void hqf_init(void)
{
    if (ready)
        return;
    int init = 0, provided = 0;
    MPI_Initialized(&init);
    /* What Open MPI and HDF5 allocate for good at start-up is theirs, not a leak of ours. */
    if (__lsan_disable)
        __lsan_disable();
    if (!init && MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
        die("MPI_Init_thread failed", NULL);
    H5open();
    if (__lsan_enable)
        __lsan_enable();
    const char *tmp = getenv("TMPDIR");
    snprintf(workdir, sizeof workdir, "%s/hq-fuzz-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(workdir))
        die("cannot create a work directory", strerror(errno));
    atexit(at_exit);
    ready = 1;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    hqf_init();
    return 0;
}

/* Open HDF5 files, datasets, groups, named datatypes and attributes, in every file. (HDF5 1.10
 * has no public count of dataspaces or property lists: a leak of those shows as growth in the
 * replay's HQ_FUZZ_LOOP mode instead.) */
static ssize_t open_hdf5_objects(void)
{
    return H5Fget_obj_count((hid_t)H5F_OBJ_ALL, H5F_OBJ_ALL);
}

/* ---- the rules ------------------------------------------------------------------------------- */

/* A failure: a known code and one line that names the input or the output. */
static void check_failure(const char *call, int rc, const hq_err *err, const char *in, const char *out)
{
    char what[128];
    snprintf(what, sizeof what, "%s returned %d", call, rc);
    if (rc != HQ_EIO && rc != HQ_EUSAGE && rc != HQ_EINPUT && rc != HQ_EMEM)
        die(what, "not an HQ_E* code a reader may return");
    const char *m = err->msg;
    if (!m[0])
        die(what, "with an empty message");
    if (strchr(m, '\n') || strchr(m, '\r'))
        die(what, m);
    if (!strstr(m, in) && !(out && strstr(m, out)))
        die("message names neither the input nor the output", m);
}

static int is_known_depth(uint32_t d)
{
    return d == 1 || d == 2 || d == 4 || d == 8 || d == 16;
}

static void check_inventory(const hq_inventory *inv, const char *in)
{
    if (inv->format != HQ_FMT_PNG && inv->format != HQ_FMT_HDF5)
        die("scan succeeded with no format", in);
    if (inv->n == 0 || !inv->root)
        die("scan succeeded with no items or no root", in);
    for (size_t i = 0; i < inv->n; i++) {
        const hq_item *it = &inv->items[i];
        if (!it->src || !it->name)
            die("item without source or name", in);
        if (it->bad) {
            if (!it->why || !it->why[0] || strchr(it->why, '\n'))
                die("bad item without a one-line reason", it->why);
            continue;
        }
        char shape[256];
        snprintf(shape, sizeof shape, "%s: %llux%llux%llu, %u channels, %u bytes, depth %u", it->name,
                 (unsigned long long)it->slices, (unsigned long long)it->height, (unsigned long long)it->width,
                 it->channels, it->sample_bytes, it->depth);
        const int is_float = it->sample == HQ_SAMPLE_FLOAT;
        if (!it->slices || !it->height || !it->width || it->channels < 1 || it->channels > 4 ||
            it->sample > HQ_SAMPLE_FLOAT ||
            (is_float ? (it->channels != 1 || (it->sample_bytes != 4 && it->sample_bytes != 8) ||
                         it->depth != 8 * it->sample_bytes)
                      : ((it->sample_bytes != 1 && it->sample_bytes != 2) || !is_known_depth(it->depth) ||
                         it->depth > 8 * it->sample_bytes)))
            die("item with a shape we cannot hold", shape);
    }
}

/* No file may be left in the work directory but the input. */
static void check_workdir_clean(const char *in)
{
    DIR *d = opendir(workdir);
    if (!d)
        die("cannot list the work directory", strerror(errno));
    const char *base = strrchr(in, '/') + 1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, base)) {
            closedir(d);
            die("a file was left behind", e->d_name);
        }
    closedir(d);
}

/* ---- one run ---------------------------------------------------------------------------------- */

/* Bytes of an item as histeq_dist computes them (64-bit, wrapping like the real thing, so that an
 * overflow there shows here too). */
static uint64_t item_bytes(const hq_item *it)
{
    return it->slices * hq_item_image_bytes(it);
}

static uint64_t block_bytes(const hq_item *it, const hq_block *b)
{
    return hq_block_pixels(b) * it->channels * it->sample_bytes;
}

/* *writable: every item fits the cap and one at least is good, so an output is made. */
static int make_plan(const hq_inventory *inv, hq_plan *plan, int *writable, hq_err *err)
{
    hq_plan_item *pi = calloc(inv->n, sizeof *pi);
    if (!pi)
        die("out of memory", NULL);
    int all_small = 1, any_good = 0;
    for (size_t i = 0; i < inv->n; i++) {
        const hq_item *it = &inv->items[i];
        const int big = !it->bad && item_bytes(it) > HQF_ITEM_CAP;
        all_small &= !big;
        any_good |= !it->bad;
        pi[i] = (hq_plan_item){it->slices,       it->height,       it->width,
                               (uint64_t)it->channels * it->sample_bytes,
                               inv->format == HQ_FMT_HDF5,       (int)it->bad || big,
                               it->chunk_slices, it->chunk_height, it->chunk_width, (int)it->collective};
    }
    *writable = all_small && any_good;
    int rc = hq_plan_make(pi, inv->n, 1, HQF_BLOCK_BYTES, plan, err);
    free(pi);
    return rc;
}

/* A read that succeeds must have filled the whole block: it is read into a buffer filled with one
 * pattern, then into one filled with another, and both must come out the same. (A short read that
 * the library swallows leaves the pattern showing; histeq_dist would equalize garbage.) */
static int read_twice(const hq_io_ops *ops, hq_io *io, const hq_block *b, int coll, uint8_t *buf, uint64_t n,
                      hq_err *err)
{
    memset(buf, 0xa5, n);
    int rc = ops->read_block(io, b->item, b, coll, buf, err);
    if (rc || !n)
        return rc;
    uint8_t *again = malloc(n);
    if (!again)
        die("out of memory", NULL);
    memset(again, 0x5a, n);
    rc = ops->read_block(io, b->item, b, coll, again, err);
    if (!rc && memcmp(buf, again, n) != 0)
        die("read_block succeeded but did not fill the block", NULL);
    free(again);
    return rc;
}

/* Every block read (and, with an output, written back unchanged); odd blocks read collectively, as
 * shared items are on several ranks. Stops at the first failure, as histeq_dist does. */
static int transfer_blocks(const hq_io_ops *ops, hq_io *io, const hq_inventory *inv, const hq_plan *plan,
                           int with_output, const char *in, const char *out, hq_err *err)
{
    for (uint64_t k = 0; k < plan->nblocks; k++) {
        const hq_block *b = &plan->blocks[k];
        const hq_item *it = &inv->items[b->item];
        const uint64_t n = block_bytes(it, b);
        if (n > HQF_ITEM_CAP)
            die("a block larger than its item", it->name);
        uint8_t *buf = malloc(n ? n : 1);
        if (!buf)
            die("out of memory", NULL);
        const int coll = it->collective || (k & 1);
        int rc = read_twice(ops, io, b, coll, buf, n, err);
        if (rc)
            check_failure("read_block", rc, err, in, out);
        if (!rc && with_output && (rc = ops->write_block(io, b->item, b, coll, buf, err))) {
            check_failure("write_block", rc, err, in, out);
            /* What the PNG reader accepted, the writer must write back (its header, palette
             * and tRNS are the input's own). */
            if (inv->format == HQ_FMT_PNG)
                die("a PNG that decoded could not be written back", err->msg);
        }
        free(buf);
        if (rc)
            return rc;
    }
    return 0;
}

static void run_io(const hq_inventory *inv, const char *in)
{
    hq_err err = {{0}};
    hq_plan plan;
    int writable = 0;
    int rc = make_plan(inv, &plan, &writable, &err);
    if (rc)
        return; /* "plan: ..." names no file; the plan is not what is fuzzed here */
    const hq_io_ops *ops = hq_io_ops_for(inv->format);
    hq_io *io = NULL;
    if ((rc = ops->open_input(inv, MPI_COMM_WORLD, 1, &io, &err))) {
        check_failure("open_input", rc, &err, in, NULL);
        hq_plan_free(&plan);
        return;
    }
    char out[PATH_MAX + 16];
    snprintf(out, sizeof out, "%s/output.%s", workdir, inv->format == HQ_FMT_HDF5 ? "h5" : "png");
    const int with_output = writable;
    if (with_output) {
        hq_out_opts oo = {.path = out, .force = 0, .png_level = -1, .verbose = 0};
        if ((rc = ops->create_output(io, &oo, MPI_COMM_WORLD, &err)))
            check_failure("create_output", rc, &err, in, out);
    }
    if (!rc)
        rc = transfer_blocks(ops, io, inv, &plan, with_output, in, out, &err);
    /* A global-scope record, so that an input already holding one (or a clashing name) is met. */
    uint64_t hist[256] = {0};
    hist[0] = 1;
    hq_run_meta meta = {.version = "fuzz", .method = HQ_METHOD_EQUALIZE, .scope = HQ_SCOPE_GLOBAL,
                        .color = HQ_COLOR_LUMA, .bits = 0, .global_hist = hist, .global_nhist = 1, .global_bins = 256};
    hq_err cerr = {{0}};
    const int commit = with_output && !rc;
    int rc_close = ops->close(io, commit, &meta, &cerr);
    if (rc_close)
        check_failure("close", rc_close, &cerr, in, out);
    if (commit && !rc_close && unlink(out) != 0)
        die("close(commit = 1) succeeded but left no output", out);
    hq_plan_free(&plan);
}

void hqf_run(const uint8_t *data, size_t size, const char *suffix)
{
    hqf_init();
    char in[PATH_MAX + 16];
    snprintf(in, sizeof in, "%s/input.%s", workdir, suffix);
    FILE *f = fopen(in, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0)
        die("cannot write the input file", strerror(errno));
    const ssize_t before = open_hdf5_objects();

    hq_inventory inv;
    hq_err err = {{0}};
#ifdef HQ_LIBFUZZER
    /* In process: libFuzzer sees the coverage of the scan only here (a child's is lost). */
    int rc = hq_io_scan(in, HQ_SCAN_SKIP_BAD, &inv, &err);
#else
    /* As histeq_dist scans: in a child, so that libhdf5's own faults (regress/hdf5/lib-* in
     * fuzz/README.md) end the child with an error, not the replay. */
    int rc = hq_io_scan_isolated(in, HQ_SCAN_SKIP_BAD, 0, &inv, &err);
#endif
    if (rc)
        check_failure("hq_io_scan", rc, &err, in, NULL);
    else {
        check_inventory(&inv, in);
        run_io(&inv, in);
    }
    hq_inventory_free(&inv);

    const ssize_t after = open_hdf5_objects();
    if (after != before) {
        char d[64];
        snprintf(d, sizeof d, "%zd open before, %zd after", before, after);
        die("HDF5 objects left open", d);
    }
    check_workdir_clean(in);
    unlink(in);
}
