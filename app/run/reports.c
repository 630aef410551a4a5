/* reports.c — what the run tells. At the start each rank's plan (--verbose, in rank order), the
 * progress' totals and the resume note; at the end the skipped inputs, --report's finish, the closing
 * line, the phases (--verbose) and --summary's JSON. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "../summary.h"
#include "run_internal.h"

static const char *const PHASE_NAMES[PH_N] = {"create", "read", "histogram", "allreduce", "remap", "write", "close"};
_Static_assert(PH_N == HQ_SUMMARY_PHASES, "the JSON summary lists every phase");

/* Rank 0 prints every rank's line, in rank order. */
static void say_all(const run *r, const char *line)
{
    enum { LINE = 512 };
    char mine[LINE] = {0};
    snprintf(mine, sizeof mine, "%s", line);
    char *all = r->c->rank == 0 ? malloc((size_t)LINE * (size_t)r->c->size) : NULL;
    MPI_Gather(mine, LINE, MPI_CHAR, all, LINE, MPI_CHAR, 0, r->c->world);
    if (all) {
        for (int k = 0; k < r->c->size; k++)
            fprintf(stderr, "histeq_dist: %.*s\n", LINE, all + (size_t)k * LINE);
        free(all);
    }
}

void run_report_plan(const run *r)
{
    char line[512], dev[128] = "", bound[64] = "";
    if (r->eng)
        r->eng->ops->describe(r->eng, dev, sizeof dev);
    if (r->cpus.widened)
        snprintf(bound, sizeof bound, " (bound to %d by the launcher, widened)", r->cpus.bound);
    snprintf(line, sizeof line, "rank %d on %.200s: %s; %llu blocks, %llu pixels; %d CPU%s%s, %d I/O thread%s, "
             "%d blocks in flight", r->c->rank, r->c->host, dev, (unsigned long long)r->nmine,
             (unsigned long long)r->plan.rank_pixels[r->c->rank], r->cpus.cpus, r->cpus.cpus == 1 ? "" : "s", bound,
             r->pipe.io_threads, r->pipe.io_threads == 1 ? "" : "s", r->pipe.depth);
    say_all(r, line);
    uint64_t shared = 0, lockstep = 0;
    for (size_t i = 0; i < r->inv.n; i++) {
        shared += r->item_shared[i] != 0;
        lockstep += r->item_lockstep[i] != 0;
    }
    if (shared && r->c->rank == 0)
        fprintf(stderr, "histeq_dist: note: %llu dataset%s shared by several ranks: %llu streamed (independent "
                "transfers), %llu in lockstep rounds (collective transfers)\n",
                (unsigned long long)shared, shared == 1 ? "" : "s", (unsigned long long)(shared - lockstep),
                (unsigned long long)lockstep);
}

/* Before the passes: progress over what is left to do (pixels written; bytes histogrammed, float
 * blocks read once more by pass 0, and written), and, when resuming, how much the interrupted run
 * did. done_pixels, done_bytes: this rank's share of that (run_apply_journal). */
void run_start_progress(run *r, uint64_t done_pixels, uint64_t done_bytes)
{
    const hq_options *o = r->o;
    const hq_comm *c = r->c;
    const uint64_t total_bytes = run_total_bytes(r);
    uint64_t pass0_bytes = 0;
    for (uint64_t j = 0; j < r->plan.nblocks && !o->range_set; j++) /* read once more, by pass 0 */
        if (run_is_float(r, r->plan.blocks[j].item) && !run_is_fused(r, &r->plan.blocks[j]))
            pass0_bytes += run_block_bytes(r, &r->plan.blocks[j]);
    /* What this run reads is fewer by the blocks written already; a pending block whose group's
     * histogram the journal kept is read once, by pass 2 (pass1.c, pass1_done): its histogram half
     * of the work is done. */
    uint64_t written = 0;
    for (uint64_t j = 0; j < r->nmine; j++) {
        const my_block *mb = &r->mine[j];
        const group_hist *gh = mb->done || mb->fused ? NULL : run_find_group(r, run_group_of(r, mb->b), 0);
        if (mb->done)
            written += run_block_bytes(r, mb->b);
        else if (gh && gh->restored)
            done_bytes += run_block_bytes(r, mb->b);
    }
    uint64_t done[3] = {done_pixels, done_bytes, written};
    MPI_Allreduce(MPI_IN_PLACE, done, 3, MPI_UINT64_T, MPI_SUM, c->world);
    if (r->res.action == HQ_RESUME_CONTINUE && c->rank == 0 && !o->quiet)
        fprintf(stderr, "histeq_dist: note: resuming %s: %.1f%% of the pixels were written by the interrupted "
                "run%s\n", o->output, r->plan.total_pixels ? 100.0 * (double)done[0] / (double)r->plan.total_pixels : 0.0,
                r->res.st.nhists ? ", and its histograms are kept" : "");
    hq_progress_start(&r->prog, c->world, o->quiet ? 0 : o->progress, r->plan.total_pixels - done[0],
                      2 * total_bytes + pass0_bytes - done[1], total_bytes - done[2]);
}

/* This rank's skipped inputs, one line each, in block order ("" for none; malloc'd, or NULL). */
static char *skipped_lines(const run *r)
{
    size_t len = 0;
    for (uint64_t j = 0; j < r->nmine; j++)
        len += r->mine[j].why ? strlen(r->mine[j].why) + 1 : 0;
    char *s = malloc(len + 1);
    if (!s)
        return NULL;
    len = 0;
    for (uint64_t j = 0; j < r->nmine; j++) {
        if (!r->mine[j].why)
            continue;
        const size_t n = strlen(r->mine[j].why);
        memcpy(s + len, r->mine[j].why, n);
        s[len + n] = '\n';
        len += n + 1;
    }
    s[len] = '\0';
    return s;
}

static void report_skipped(const run *r)
{
    /* Skipped at scan time: every rank knows them; rank 0 lists them. */
    if (r->c->rank == 0)
        for (size_t i = 0; i < r->inv.n; i++)
            if (r->inv.items[i].bad)
                fprintf(stderr, "histeq_dist: skipped %s\n", r->inv.items[i].why ? r->inv.items[i].why : r->inv.items[i].src);
    /* Skipped while decoding: gathered to rank 0 in rank order. */
    int len = (int)r->skipped_len, *lens = NULL, *offs = NULL;
    char *all = NULL;
    if (r->c->rank == 0)
        lens = calloc((size_t)r->c->size, sizeof *lens);
    MPI_Gather(&len, 1, MPI_INT, lens, 1, MPI_INT, 0, r->c->world);
    int total = 0;
    if (r->c->rank == 0 && lens) {
        offs = calloc((size_t)r->c->size, sizeof *offs);
        for (int k = 0; k < r->c->size && offs; k++) {
            offs[k] = total;
            total += lens[k];
        }
        all = malloc((size_t)total + 1);
    }
    MPI_Gatherv(r->skipped ? r->skipped : "", len, MPI_CHAR, all, lens, offs, MPI_CHAR, 0, r->c->world);
    if (all && offs) {
        all[total] = '\0';
        for (char *line = strtok(all, "\n"); line; line = strtok(NULL, "\n"))
            fprintf(stderr, "histeq_dist: skipped %s\n", line);
    }
    free(lens);
    free(offs);
    free(all);
}

/* This process's peak resident set, in bytes: VmHWM, its own memory's high-water mark. Not
 * getrusage's ru_maxrss, which Linux keeps across execve: a run started by a large process (a
 * Python driver holding its arrays, which forks and execs it) reported that process's size. */
static uint64_t peak_rss_bytes(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    unsigned long long kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %llu kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    if (kib)
        return (uint64_t)kib * 1024;
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 && ru.ru_maxrss > 0 ? (uint64_t)ru.ru_maxrss * 1024 : 0;
}

/* images: those equalized (the plan's, less the skipped inputs'). */
static int report_summary(const run *r, double wall, uint64_t images, uint64_t skipped, char *closing, size_t len,
                          hq_err *err)
{
    closing[0] = '\0';
    double tmax[PH_N], tsum[PH_N];
    MPI_Reduce(r->t, tmax, PH_N, MPI_DOUBLE, MPI_MAX, 0, r->c->world);
    MPI_Reduce(r->t, tsum, PH_N, MPI_DOUBLE, MPI_SUM, 0, r->c->world);
    uint64_t mine[2] = {r->pixels_done, r->bytes_done}, tot[2] = {0, 0};
    MPI_Reduce(mine, tot, 2, MPI_UINT64_T, MPI_SUM, 0, r->c->world);
    /* Memory high-water marks, the largest of any rank; device: +1, so that 0 means no engine had any. */
    uint64_t peaks[2] = {peak_rss_bytes(), 0}, most[2] = {0, 0};
    if (r->eng && r->eng->ops->device_peak)
        peaks[1] = r->eng->ops->device_peak(r->eng) + 1;
    MPI_Reduce(peaks, most, 2, MPI_UINT64_T, MPI_MAX, 0, r->c->world);
    if (r->c->rank != 0)
        return 0;
    int rc = 0;
    if (r->o->summary) {
        char dev[128] = "";
        r->eng->ops->describe(r->eng, dev, sizeof dev);
        hq_summary s = {HQ_VERSION, r->o->input, r->o->output, dev, hq_scope_name(r->scope),
                        hq_method_name(r->o->method), hq_color_name(r->o->color), r->c->size, images,
                        tot[0], tot[1], skipped, wall, PHASE_NAMES, {0}, {0}, most[0],
                        most[1] ? most[1] - 1 : 0, most[1] != 0};
        for (int k = 0; k < PH_N; k++) {
            s.phase_max[k] = tmax[k];
            s.phase_mean[k] = tsum[k] / r->c->size;
        }
        rc = hq_summary_write(r->o->summary, &s, err);
    }
    if (r->o->quiet)
        return rc;
    const double mib = (double)tot[1] / (1 << 20);
    char peak[96];
    int used = snprintf(peak, sizeof peak, "peak RSS %.1f MiB", (double)most[0] / (1 << 20));
    if (most[1] && used > 0 && (size_t)used < sizeof peak)
        snprintf(peak + used, sizeof peak - (size_t)used, ", device %.1f MiB", (double)(most[1] - 1) / (1 << 20));
    int n = snprintf(closing, len, "histeq_dist: %s %llu image%s (%.1f Mpixel, %.1f MiB) in %.3f s, %.1f MiB/s, "
                     "%d rank%s, scope %s; %s (max over ranks)\n", r->o->device == HQ_DEV_COPY ? "copied" : "equalized",
                     (unsigned long long)images, images == 1 ? "" : "s", (double)tot[0] / 1e6, mib, wall,
                     wall > 0 ? mib / wall : 0.0, r->c->size, r->c->size == 1 ? "" : "s", hq_scope_name(r->scope), peak);
    size_t at = n > 0 ? (size_t)n : len;
    for (int k = 0; r->o->verbose && k < PH_N && at < len; k++) {
        n = snprintf(closing + at, len - at, "histeq_dist:   %-9s max %8.3f s  mean %8.3f s\n", PHASE_NAMES[k], tmax[k],
                     tsum[k] / r->c->size);
        at += n > 0 ? (size_t)n : len;
    }
    return rc;
}

/* Rank 0, --resume over an output finished already: --summary still gets its file (a batch
 * script reads it after every submission), saying that nothing was done this time. */
int run_summary_nothing_done(const run *r, double t_start, hq_err *err)
{
    if (r->c->rank != 0 || !r->o->summary)
        return 0;
    hq_summary s = {HQ_VERSION, r->o->input, r->o->output, "none (complete already)", hq_scope_name(r->scope),
                    hq_method_name(r->o->method), hq_color_name(r->o->color), r->c->size, 0, 0, 0, 0,
                    hq_now() - t_start, PHASE_NAMES, {0}, {0}, peak_rss_bytes(), 0, 0};
    return hq_summary_write(r->o->summary, &s, err);
}

/* Collective, before the output is committed: under --on-error skip, inputs that failed only while
 * read (a PNG's pixel data) still left the run "finished with skips" (exit 3) when every image was
 * among them, an output directory holding nothing but its completion mark. Found at scan time,
 * that is "nothing to equalize" (exit 4, no output, run_make_plan): so it is here too. */
int run_check_something_left(run *r, hq_err *err)
{
    uint64_t skipped = r->nskipped;
    MPI_Allreduce(MPI_IN_PLACE, &skipped, 1, MPI_UINT64_T, MPI_SUM, r->c->world);
    uint64_t bad = 0;
    for (size_t i = 0; i < r->inv.n; i++)
        bad += r->inv.items[i].bad ? r->inv.items[i].slices : 0;
    if (!skipped || r->plan.nimages > skipped + bad)
        return 0;
    int rc = 0;
    for (uint64_t j = 0; j < r->nmine && !rc; j++)
        if (r->mine[j].why)
            rc = hq_fail(err, HQ_EINPUT, "%s: nothing to equalize (every input was left out; the first: %s)",
                         r->o->input, r->mine[j].why);
    return hq_comm_agree(r->c, rc, err) ? HQ_EINPUT : 0;
}

/* A run that succeeded: the skipped inputs listed, --summary, then --report finished, and the
 * closing line. Returns the agreed status: HQ_ESKIPPED when any input was left out. */
int run_report_end(run *r, double t_start, hq_err *err)
{
    const hq_comm *c = r->c;
    r->skipped = skipped_lines(r);
    r->skipped_len = r->skipped ? strlen(r->skipped) : 0;
    report_skipped(r);
    uint64_t skipped = r->nskipped;
    MPI_Allreduce(MPI_IN_PLACE, &skipped, 1, MPI_UINT64_T, MPI_SUM, c->world);
    /* Inputs skipped while read are PNGs, an image each; those found bad by the scan hold the
     * slices the plan gave them (a PNG's 1, an HDF5 dataset's 0). */
    uint64_t resumed = 0;
    unsigned char *done_before = run_resumed_images(r, &resumed);
    uint64_t images = r->plan.nimages - skipped - resumed;
    for (size_t i = 0; i < r->inv.n; i++) {
        skipped += r->inv.items[i].bad;
        images -= r->inv.items[i].bad ? r->inv.items[i].slices : 0;
    }
    /* The summary before the page: the page records the run's exit status, which a summary that
     * cannot be written (a full disk, a FIFO nobody reads) makes 1. A page that fails after it
     * leaves no index.html, and the summary holds no status to contradict. */
    char closing[2048]; /* said last, where everything stands: a run that then fails says one line */
    int rc = hq_comm_agree(c, report_summary(r, hq_now() - t_start, images, skipped, closing, sizeof closing, err), err);
    if (rc) { /* as for --report: the run exits non-zero, but what it wrote stands */
        const size_t n = strlen(err->msg);
        snprintf(err->msg + n, sizeof err->msg - n, "; the output is complete and kept");
    } else {
        hq_report_end end = {r->eng, r->t, PHASE_NAMES, PH_N, r->pixels_done, r->bytes_done, r->skipped, skipped,
                             images, done_before, hq_now() - t_start};
        rc = hq_comm_agree(c, hq_report_finish(r->rep, &end, err), err);
    }
    free(done_before);
    if (!rc && c->rank == 0)
        fputs(closing, stderr);
    if (!rc && skipped)
        rc = HQ_ESKIPPED;
    return rc;
}
