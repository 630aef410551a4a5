#include "report.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../core/clahe.h"
#include "../core/lut.h"
#include "page.h"
#include "thumb.h"
#include "tile_view.h"

#ifndef HQ_VERSION
#define HQ_VERSION "dev"
#endif

#define LINE 256          /* a device line gathered from each rank */

typedef struct sample {
    uint64_t image, item, slice;
    hq_thumb_geom g;
    uint32_t *xmap;
    uint64_t *acc[2];  /* thumbnail sums before, after (allocated when this rank first sees the image) */
    uint64_t *hist;    /* scope image, on the rank owning the image's first block: its histogram ... */
    uint16_t *lut;     /* ... and LUT; under CLAHE no histogram, and the picked tiles' LUTs (tile_view.h) */
} sample;

struct hq_report {
    hq_report_cfg cfg;
    /* Scope image, an output that records LUTs (hq_report_set_output): each image's LUT goes into
     * it as it is handed over. */
    int provenance;
    const hq_io_ops *out_ops;
    hq_io *out_io;
    sample *samples;   /* ascending by image */
    size_t nsamples;
    uint64_t *global_hist; /* scope global, rank 0, with --report: the copy the page plots */
    uint16_t *global_lut;
    uint32_t global_nhist, global_bins;
    char *options, *command_line;
    int has_float;     /* the input holds float data (--bins and --range then shape the output) */
    int rc;            /* the first failure of a hook, reported by hq_report_meta */
    hq_err err;
};

/* ---- facts from the inventory and options (the same rules as app/run/facts.c) ---- */

static hq_mode mode_of(const hq_report *r, uint64_t item)
{
    return hq_item_mode(&r->cfg.inv->items[item], r->cfg.o->bits, r->cfg.o->color, r->cfg.o->fbins);
}

static size_t hist_len(const hq_mode *m)
{
    return (size_t)hq_mode_nhist(m) * hq_mode_bins(m);
}

/* The item and slice of a global image index (the item holding it: largest i with image0[i] <= g). */
static uint64_t item_of(const hq_report *r, uint64_t image)
{
    size_t lo = 0, hi = r->cfg.inv->n;
    while (hi - lo > 1) {
        const size_t mid = (lo + hi) / 2;
        if (r->cfg.plan->item_image0[mid] <= image)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* The rank owning the first block of an image: the one that records its LUT, so that an image cut
 * into tiles over several ranks (each holding the same reduced histogram) counts once. */
static int first_owner(const hq_plan *p, uint64_t image)
{
    return hq_plan_image_owner(p, image);
}

static void fail_once(hq_report *r, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fail_once(hq_report *r, int code, const char *fmt, ...)
{
    if (r->rc)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err.msg, sizeof r->err.msg, fmt, ap);
    va_end(ap);
    r->rc = code;
}

/* ---- the sample ---- */

/* N images evenly through the good ones (items not left out), the first and the last included. */
static int pick_samples(hq_report *r, hq_err *err)
{
    const hq_inventory *inv = r->cfg.inv;
    uint64_t good = 0;
    for (size_t i = 0; i < inv->n; i++)
        good += inv->items[i].bad ? 0 : inv->items[i].slices;
    const uint64_t n = good < (uint64_t)r->cfg.o->report_sample ? good : (uint64_t)r->cfg.o->report_sample;
    if (!n)
        return 0;
    r->samples = calloc(n, sizeof *r->samples);
    if (!r->samples)
        return hq_fail(err, HQ_EMEM, "%s: out of memory for the report", r->cfg.o->report);
    size_t item = 0;
    uint64_t seen = 0; /* good images in the items before `item` */
    for (uint64_t k = 0; k < n; k++) {
        const uint64_t want = n == 1 ? (good - 1) / 2 : k * (good - 1) / (n - 1);
        while (inv->items[item].bad || want >= seen + inv->items[item].slices) {
            seen += inv->items[item].bad ? 0 : inv->items[item].slices;
            item++;
        }
        sample *s = &r->samples[r->nsamples++];
        const hq_item *it = &inv->items[item];
        s->item = item;
        s->slice = want - seen;
        s->image = r->cfg.plan->item_image0[item] + s->slice;
        s->g = hq_thumb_geometry(it->width, it->height, it->channels, HQ_THUMB_SIDE);
    }
    return 0;
}

static sample *first_sample_from(const hq_report *r, uint64_t image)
{
    size_t lo = 0, hi = r->nsamples;
    while (lo < hi) {
        const size_t mid = (lo + hi) / 2;
        if (r->samples[mid].image < image)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < r->nsamples ? &r->samples[lo] : NULL;
}

static int is_sampled(const hq_report *r, uint64_t image)
{
    const sample *s = first_sample_from(r, image);
    return s && s->image == image;
}

static int is_clahe(const hq_report *r)
{
    return r->cfg.o->method == HQ_METHOD_CLAHE;
}

/* An item's CLAHE geometry (core/clahe.h's) and the tiles the page plots; returns how many (0: not
 * a CLAHE run). Every rank gets the same answer: it depends on the inventory and options alone. */
static size_t picked_tiles(const hq_report *r, uint64_t item, hq_clahe_geom *g, hq_tile_pos pick[HQ_TILE_VIEW_MAX])
{
    const hq_item *it = &r->cfg.inv->items[item];
    if (!is_clahe(r) || hq_clahe_geom_make(&r->cfg.o->clahe, it->height, it->width, g))
        return 0;
    return hq_tile_view_pick(g, pick);
}

/* ---- checking DIR up front ---- */

/* Whether two paths name the same file: by inode when both exist, else by spelling. */
static int same_path(const char *a, const char *b)
{
    struct stat sa, sb;
    if (stat(a, &sa) == 0 && stat(b, &sb) == 0)
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    size_t na = strlen(a), nb = strlen(b);
    while (na > 1 && a[na - 1] == '/')
        na--;
    while (nb > 1 && b[nb - 1] == '/')
        nb--;
    return na == nb && !strncmp(a, b, na);
}

static char *join(const char *dir, const char *name)
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
    char *probe = join(dir, ".index.html.part");
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
static int make_dirs(const char *dir, int (*check)(const char *, hq_err *), hq_err *err)
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

/* DIR must not be the input or the output, and must take a file: checked by making it (and its
 * missing parents) and a probe file in it, then removing all of that again. */
static int check_dir(const hq_report *r, hq_err *err)
{
    const char *dir = r->cfg.o->report;
    if (!dir[0])
        return hq_fail(err, HQ_EUSAGE, "--report: empty directory name");
    if (same_path(dir, r->cfg.o->output))
        return hq_fail(err, HQ_EUSAGE, "%s: --report DIR cannot be the output", dir);
    if (same_path(dir, r->cfg.inv->root))
        return hq_fail(err, HQ_EUSAGE, "%s: --report DIR cannot be the input", dir);
    struct stat st;
    if (stat(dir, &st) == 0 && !S_ISDIR(st.st_mode))
        return hq_fail(err, HQ_EIO, "%s: not a directory (--report)", dir);
    const int e = make_dirs(dir, probe_dir, err);
    if (e > 0)
        return hq_fail(err, HQ_EIO, "%s: cannot create the report directory (%s)", dir, strerror(e));
    return e ? HQ_EIO : 0;
}

/* ---- what the run was asked to do ---- */

static void add(char **buf, size_t *len, size_t *cap, const char *s)
{
    const size_t n = strlen(s);
    if (!*buf || *len + n + 1 > *cap) {
        size_t c = (*cap ? *cap * 2 : 256) + n;
        char *b = realloc(*buf, c);
        if (!b)
            return;
        *buf = b;
        *cap = c;
    }
    memcpy(*buf + *len, s, n + 1);
    *len += n;
}

/* An argument as a POSIX shell reads it: bare when it is made of safe characters, else quoted. */
static void add_arg(char **buf, size_t *len, size_t *cap, const char *a)
{
    if (*len)
        add(buf, len, cap, " ");
    int bare = a[0] != '\0';
    for (const char *p = a; *p && bare; p++)
        bare = strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_./:=+,@%", *p) != NULL;
    if (bare) {
        add(buf, len, cap, a);
        return;
    }
    add(buf, len, cap, "'");
    for (const char *p = a; *p; p++) {
        char one[2] = {*p, 0};
        add(buf, len, cap, *p == '\'' ? "'\\''" : one);
    }
    add(buf, len, cap, "'");
}

/* This process's argv, from /proc/self/cmdline (Linux); NULL where there is none. */
static char *command_line(void)
{
    FILE *f = fopen("/proc/self/cmdline", "rb");
    if (!f)
        return NULL;
    char *raw = NULL, *out = NULL;
    size_t n = 0, cap = 0, len = 0, ocap = 0;
    int ch;
    while ((ch = fgetc(f)) != EOF) {
        if (n + 1 >= cap) {
            char *b = realloc(raw, cap = cap ? cap * 2 : 1024);
            if (!b)
                break;
            raw = b;
        }
        raw[n++] = (char)ch;
    }
    fclose(f);
    for (size_t i = 0; raw && i < n; i += strlen(raw + i) + 1) {
        raw[n] = '\0';
        add_arg(&out, &len, &ocap, raw + i);
    }
    free(raw);
    return out;
}

/* The settings that decide the output, defaults resolved, as a command line. */
static char *options_line(const hq_report *r)
{
    static const char *const DEV[] = {"auto", "cpu", "gpu", "copy"};
    const hq_options *o = r->cfg.o;
    char *s = NULL, num[32];
    size_t len = 0, cap = 0;
    const char *pairs[][2] = {{"--input", o->input},
                              {"--output", o->output},
                              {"--scope", hq_scope_name(r->cfg.scope)},
                              {"--color", hq_color_name(o->color)},
                              {"--method", hq_method_name(o->method)},
                              {"--device", DEV[o->device]},
                              {"--on-error", o->on_error == HQ_ONERR_SKIP ? "skip" : "stop"}};
    const int color = hq_inventory_has_color(r->cfg.inv); /* gray data: --color decides nothing */
    for (size_t k = 0; k < sizeof pairs / sizeof *pairs; k++) {
        if (!color && !strcmp(pairs[k][0], "--color"))
            continue;
        add_arg(&s, &len, &cap, pairs[k][0]);
        add_arg(&s, &len, &cap, pairs[k][1]);
    }
    if (o->bits) {
        snprintf(num, sizeof num, "%u", o->bits);
        add_arg(&s, &len, &cap, "--bits");
        add_arg(&s, &len, &cap, num);
    }
    if (r->has_float) {
        snprintf(num, sizeof num, "%u", o->fbins);
        add_arg(&s, &len, &cap, "--bins");
        add_arg(&s, &len, &cap, num);
    }
    if (r->has_float && o->range_set) {
        char range[64];
        snprintf(range, sizeof range, "%.17g:%.17g", o->range_lo, o->range_hi);
        add_arg(&s, &len, &cap, "--range");
        add_arg(&s, &len, &cap, range);
    }
    if (o->reference) {
        add_arg(&s, &len, &cap, "--reference");
        add_arg(&s, &len, &cap, o->reference);
    }
    if (o->ignore) {
        snprintf(num, sizeof num, "%u:%u", o->ignore_lo, o->ignore_hi);
        add_arg(&s, &len, &cap, "--ignore");
        add_arg(&s, &len, &cap, num);
    }
    if (o->mask) {
        add_arg(&s, &len, &cap, "--mask");
        add_arg(&s, &len, &cap, o->mask);
    }
    if (o->mask || o->ignore) {
        add_arg(&s, &len, &cap, "--mask-apply");
        add_arg(&s, &len, &cap, o->mask_inside ? "inside" : "all");
    }
    if (o->method == HQ_METHOD_CLAHE) {
        if (o->clahe.tile) {
            snprintf(num, sizeof num, "%llu", (unsigned long long)o->clahe.tile);
            add_arg(&s, &len, &cap, "--clahe-tile");
        } else {
            snprintf(num, sizeof num, "%llux%llu", (unsigned long long)o->clahe.grid_y,
                     (unsigned long long)o->clahe.grid_x);
            add_arg(&s, &len, &cap, "--clahe-grid");
        }
        add_arg(&s, &len, &cap, num);
        snprintf(num, sizeof num, "%.17g", o->clahe.clip);
        add_arg(&s, &len, &cap, "--clip-limit");
        add_arg(&s, &len, &cap, num);
    }
    return s;
}

/* ---- the hooks ---- */

int hq_report_open(const hq_report_cfg *cfg, hq_report **out, hq_err *err)
{
    *out = NULL;
    hq_report *r = calloc(1, sizeof *r);
    int rc = r ? 0 : hq_fail(err, HQ_EMEM, "out of memory for the run's record");
    if (!rc) {
        r->cfg = *cfg;
        for (size_t i = 0; i < cfg->inv->n; i++)
            r->has_float |= !cfg->inv->items[i].bad && cfg->inv->items[i].sample == HQ_SAMPLE_FLOAT;
        /* The page's thumbnails and plots are made for integer levels. */
        if (cfg->o->report && r->has_float)
            rc = hq_fail(err, HQ_EUSAGE, "%s: --report does not support float data yet", cfg->o->input);
        r->options = options_line(r);
        r->command_line = command_line();
        if (!rc && cfg->o->report && cfg->c->rank == 0)
            rc = check_dir(r, err);
        if (!rc && cfg->o->report)
            rc = pick_samples(r, err);
    }
    rc = hq_comm_agree(cfg->c, rc, err);
    if (rc)
        hq_report_free(r);
    else
        *out = r;
    return rc;
}

int hq_report_wants_pixels(const hq_report *r)
{
    return r && r->nsamples > 0;
}

void hq_report_pixels(hq_report *r, const hq_block *b, const void *data, int after)
{
    if (!hq_report_wants_pixels(r) || !data)
        return;
    const uint64_t i0 = r->cfg.plan->item_image0[b->item];
    const hq_mode m = mode_of(r, b->item);
    const uint64_t slice_samples = (b->r1 - b->r0) * (b->c1 - b->c0) * m.channels;
    for (sample *s = first_sample_from(r, i0 + b->s0); s && s < r->samples + r->nsamples && s->image < i0 + b->s1;
         s++) {
        if (!s->acc[after]) {
            s->acc[after] = calloc(hq_thumb_len(&s->g), sizeof *s->acc[after]);
            if (!s->xmap)
                s->xmap = hq_thumb_xmap(&s->g);
            if (!s->acc[after] || !s->xmap) {
                fail_once(r, HQ_EMEM, "%s: out of memory for a thumbnail", r->cfg.o->report);
                continue;
            }
        }
        const unsigned char *rows = (const unsigned char *)data + (s->slice - b->s0) * slice_samples * m.sample_bytes;
        hq_thumb_add(s->acc[after], &s->g, s->xmap, rows, b->r0, b->r1, b->c0, b->c1, m.sample_bytes,
                     hq_mode_bins(&m) - 1);
    }
}

void hq_report_set_output(hq_report *r, const hq_io_ops *ops, hq_io *io)
{
    if (!r)
        return;
    r->out_ops = ops;
    r->out_io = io;
    r->provenance = ops && io && ops->write_lut && r->cfg.scope != HQ_SCOPE_GLOBAL;
}

static int record_provenance(hq_report *r, uint64_t item, uint64_t slice, const uint16_t *lut, hq_err *err)
{
    return r->provenance ? r->out_ops->write_lut(r->out_io, item, slice, lut, err) : 0;
}

/* Under CLAHE an image's LUT is every tile's, (tiles_y, tiles_x, hl): all of it goes into the
 * provenance, the picked tiles' LUTs into a sampled image's section. */
static void keep_clahe(hq_report *r, uint64_t image, uint64_t item, const uint16_t *lut, size_t hl)
{
    hq_clahe_geom g;
    hq_tile_pos pick[HQ_TILE_VIEW_MAX];
    const size_t n = picked_tiles(r, item, &g, pick);
    sample *s = n ? first_sample_from(r, image) : NULL;
    if (!s || s->image != image || s->lut) /* a resumed image's LUT may come again: the first stands */
        return;
    s->lut = malloc(n * hl * sizeof *s->lut);
    if (!s->lut) {
        fail_once(r, HQ_EMEM, "%s: out of memory for a sampled image's tile LUTs", r->cfg.o->report);
        return;
    }
    for (size_t k = 0; k < n; k++)
        memcpy(s->lut + k * hl, lut + (size_t)(pick[k].row * g.tiles_x + pick[k].col) * hl, hl * sizeof *lut);
}

int hq_report_needs_tiles(const hq_report *r, uint64_t image)
{
    return r && is_clahe(r) && is_sampled(r, image);
}

/* A sampled image's section plots its histogram and LUT, under CLAHE some of its tile LUTs. */
int hq_report_journal_wants(hq_report *r, uint64_t image, int *lut, int *hist)
{
    *lut = *hist = 0;
    if (!r || r->cfg.scope == HQ_SCOPE_GLOBAL || first_owner(r->cfg.plan, image) != r->cfg.c->rank)
        return 0;
    *lut = is_sampled(r, image);
    *hist = *lut && !is_clahe(r);
    return *lut;
}

int hq_report_wants(hq_report *r, uint64_t image, int *lut, int *hist)
{
    hq_report_journal_wants(r, image, lut, hist);
    if (r && r->provenance && first_owner(r->cfg.plan, image) == r->cfg.c->rank)
        *lut = 1;
    return *lut || *hist;
}

int hq_report_lut(hq_report *r, uint64_t image, const uint64_t *hist, const uint16_t *lut, hq_err *err)
{
    if (!r || r->cfg.scope == HQ_SCOPE_GLOBAL || first_owner(r->cfg.plan, image) != r->cfg.c->rank)
        return 0;
    const uint64_t item = item_of(r, image), slice = image - r->cfg.plan->item_image0[item];
    const hq_mode m = mode_of(r, item);
    const int rc = record_provenance(r, item, slice, lut, err);
    if (rc)
        return rc;
    if (is_clahe(r)) {
        keep_clahe(r, image, item, lut, hist_len(&m));
        return 0;
    }
    const size_t n = hist_len(&m);
    sample *s = hist ? first_sample_from(r, image) : NULL;
    if (!s || s->image != image || s->hist)
        return 0;
    s->hist = malloc(n * sizeof *s->hist);
    s->lut = malloc(n * sizeof *s->lut);
    if (!s->hist || !s->lut) {
        fail_once(r, HQ_EMEM, "%s: out of memory for a sampled histogram", r->cfg.o->report);
        return 0;
    }
    memcpy(s->hist, hist, n * sizeof *hist);
    memcpy(s->lut, lut, n * sizeof *lut);
    return 0;
}

int hq_report_meta(hq_report *r, hq_run_meta *meta, hq_err *err)
{
    if (!r)
        return 0;
    meta->options = r->options;
    meta->command_line = r->command_line;
    if (meta->global_hist && !r->global_lut) {
        const size_t n = (size_t)meta->global_nhist * meta->global_bins;
        r->global_lut = malloc(n * sizeof *r->global_lut);
        r->global_hist = malloc(n * sizeof *r->global_hist);
        if (!r->global_lut || !r->global_hist) {
            fail_once(r, HQ_EMEM, "%s: out of memory for the global LUT", r->cfg.o->output);
        } else {
            memcpy(r->global_hist, meta->global_hist, n * sizeof *r->global_hist);
            /* The run's own LUT when it gives one (match, --ignore with --mask-apply inside: not a
             * function of the histogram alone); else the rule over the histogram. */
            if (meta->global_lut)
                memcpy(r->global_lut, meta->global_lut, n * sizeof *r->global_lut);
            else
                for (uint32_t h = 0; h < meta->global_nhist; h++)
                    hq_lut_build(r->cfg.o->method, meta->global_hist + (size_t)h * meta->global_bins,
                                 meta->global_bins, r->global_lut + (size_t)h * meta->global_bins);
            r->global_nhist = meta->global_nhist;
            r->global_bins = meta->global_bins;
        }
    }
    meta->global_lut = r->global_lut;
    if (r->rc)
        *err = r->err;
    return r->rc;
}

/* ---- the end: gathering to rank 0 and the page ---- */

typedef struct facts {
    double tmax[16], tmean[16];
    uint64_t pixels, bytes;
    char *dev_lines;   /* rank 0: LINE chars per rank */
    const char **devices;
    char *skipped_buf; /* rank 0: decode-time skips, '\n'-separated */
    const char **skipped;
    size_t nskipped;
} facts;

static void free_facts(facts *f)
{
    free(f->dev_lines);
    free(f->devices);
    free(f->skipped_buf);
    free(f->skipped);
}

/* Rank 0's allocations are agreed before each gather that needs them, so that a root out of memory
 * never meets the others in a gather it cannot receive. */
static int agree_alloc(hq_report *r, int ok, hq_err *err)
{
    return hq_comm_agree(r->cfg.c, ok ? 0 : hq_fail(err, HQ_EMEM, "%s: out of memory for the report", r->cfg.o->report),
                         err);
}

/* Collective. Rank 0 ends with everything the summary part of the page shows. */
static int gather_facts(hq_report *r, const hq_report_end *e, facts *f, hq_err *err)
{
    const hq_comm *c = r->cfg.c;
    const int np = e->nphases < 16 ? e->nphases : 16;
    double tsum[16] = {0};
    MPI_Reduce(e->phase_s, f->tmax, np, MPI_DOUBLE, MPI_MAX, 0, c->world);
    MPI_Reduce(e->phase_s, tsum, np, MPI_DOUBLE, MPI_SUM, 0, c->world);
    for (int k = 0; k < np; k++)
        f->tmean[k] = tsum[k] / c->size;
    uint64_t mine[2] = {e->pixels, e->bytes}, tot[2] = {0, 0};
    MPI_Reduce(mine, tot, 2, MPI_UINT64_T, MPI_SUM, 0, c->world);
    f->pixels = tot[0];
    f->bytes = tot[1];

    int *lens = NULL, *offs = NULL, total = 0;
    if (c->rank == 0) {
        const size_t nskip = r->cfg.inv->n;
        f->dev_lines = malloc((size_t)LINE * c->size);
        f->devices = malloc((size_t)c->size * sizeof *f->devices);
        lens = calloc((size_t)c->size, sizeof *lens);
        offs = calloc((size_t)c->size, sizeof *offs);
        f->skipped = malloc((nskip + 1) * sizeof *f->skipped);
    }
    int rc = agree_alloc(r, c->rank || (f->dev_lines && f->devices && lens && offs && f->skipped), err);
    if (!rc) {
        char line[LINE] = {0}, dev[LINE - 64] = "";
        if (e->eng)
            e->eng->ops->describe(e->eng, dev, sizeof dev);
        snprintf(line, sizeof line, "%.60s: %s", c->host, dev);
        MPI_Gather(line, LINE, MPI_CHAR, f->dev_lines, LINE, MPI_CHAR, 0, c->world);
        int len = e->skipped ? (int)strlen(e->skipped) : 0;
        MPI_Gather(&len, 1, MPI_INT, lens, 1, MPI_INT, 0, c->world);
        for (int k = 0; c->rank == 0 && k < c->size; k++) {
            offs[k] = total;
            total += lens[k];
        }
        if (c->rank == 0)
            f->skipped_buf = malloc((size_t)total + 1);
        rc = agree_alloc(r, c->rank || f->skipped_buf, err);
        if (!rc)
            MPI_Gatherv(e->skipped ? e->skipped : "", len, MPI_CHAR, f->skipped_buf, lens, offs, MPI_CHAR, 0, c->world);
    }
    free(lens);
    free(offs);
    if (rc || c->rank != 0)
        return rc;
    for (int k = 0; k < c->size; k++) {
        f->dev_lines[(size_t)k * LINE + LINE - 1] = '\0';
        f->devices[k] = f->dev_lines + (size_t)k * LINE;
    }
    const hq_inventory *inv = r->cfg.inv;
    for (size_t i = 0; i < inv->n; i++)
        if (inv->items[i].bad)
            f->skipped[f->nskipped++] = inv->items[i].why ? inv->items[i].why : inv->items[i].src;
    f->skipped_buf[total] = '\0';
    size_t lines = 0;
    for (int i = 0; i < total; i++)
        lines += f->skipped_buf[i] == '\n';
    const char **more = realloc(f->skipped, (f->nskipped + lines + 2) * sizeof *more);
    if (!more)
        return hq_fail(err, HQ_EMEM, "%s: out of memory for the report", r->cfg.o->report);
    f->skipped = more;
    for (char *save = NULL, *l = strtok_r(f->skipped_buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
        f->skipped[f->nskipped++] = l;
    return 0;
}

static const char *hist_label(const hq_mode *m, uint32_t h)
{
    static const char *const RGB[3] = {"R", "G", "B"};
    if (hq_mode_nhist(m) == 3)
        return RGB[h];
    return m->channels < 3 ? "gray" : hq_color_name(m->color);
}

static int write_file(const char *dir, const char *name, const unsigned char *p, size_t n, hq_err *err)
{
    char *path = join(dir, name);
    if (!path)
        return hq_fail(err, HQ_EMEM, "%s: out of memory", dir);
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(p, 1, n, f) == n;
    if (f)
        ok &= fclose(f) == 0;
    int rc = ok ? 0 : hq_fail(err, HQ_EIO, "%s: cannot write (%s)", path, strerror(errno));
    free(path);
    return rc;
}

static void image_name(const hq_report *r, const sample *s, char *buf, size_t len)
{
    const hq_item *it = &r->cfg.inv->items[s->item];
    if (it->slices > 1)
        snprintf(buf, len, "%s [slice %llu]", it->name, (unsigned long long)s->slice);
    else
        snprintf(buf, len, "%s", it->name);
}

/* Per sampled image, one reduction to rank 0 of: [captured, seen before, seen after], the histogram,
 * the LUT (widened to uint64 so one MPI_SUM carries all), the two thumbnail sums. Only one rank
 * contributes a histogram and LUT; the thumbnails add up over every rank that held a piece of the
 * image. Under CLAHE the LUT part is the picked tiles' LUTs only, never the whole tile array. At
 * most 5 tiles x 3 histograms x 2^16 levels plus two 256 x 256 x 3 thumbnails: an int count. */
typedef struct packed {
    uint64_t *buf, *sum;
    size_t hl, ll, tl, n; /* histogram counters, LUT entries, thumbnail counters, in all */
} packed;

/* Counters of a sampled image's histogram section: scope image or dataset, and not under CLAHE,
 * whose histograms are per tile and which the page does not plot. */
static size_t sample_hist_len(const hq_report *r, const hq_mode *m)
{
    return r->cfg.scope != HQ_SCOPE_GLOBAL && !is_clahe(r) ? hist_len(m) : 0;
}

/* LUT entries of a sampled image's section: its LUT with its histogram, or the picked tiles'. */
static size_t sample_lut_len(const hq_report *r, uint64_t item, const hq_mode *m)
{
    hq_clahe_geom g;
    hq_tile_pos pick[HQ_TILE_VIEW_MAX];
    return is_clahe(r) ? picked_tiles(r, item, &g, pick) * hist_len(m) : sample_hist_len(r, m);
}

static size_t packed_len(const hq_report *r, const sample *s, packed *p)
{
    const hq_mode m = mode_of(r, s->item);
    p->hl = sample_hist_len(r, &m);
    p->ll = sample_lut_len(r, s->item, &m);
    p->tl = hq_thumb_len(&s->g);
    return p->n = 3 + p->hl + p->ll + 2 * p->tl;
}

static void pack_sample(const hq_report *r, const sample *s, packed *p)
{
    packed_len(r, s, p);
    memset(p->buf, 0, p->n * sizeof *p->buf);
    p->buf[0] = s->lut && (s->hist || !p->hl);
    p->buf[1] = s->acc[0] != NULL;
    p->buf[2] = s->acc[1] != NULL;
    for (size_t i = 0; p->buf[0] && i < p->hl; i++)
        p->buf[3 + i] = s->hist[i];
    for (size_t i = 0; p->buf[0] && i < p->ll; i++)
        p->buf[3 + p->hl + i] = s->lut[i];
    for (int k = 0; k < 2; k++)
        if (s->acc[k])
            memcpy(p->buf + 3 + p->hl + p->ll + (size_t)k * p->tl, s->acc[k], p->tl * sizeof *p->buf);
}

/* Rank 0: what a CLAHE section shows besides the thumbnails, from the reduced tile LUTs. */
static void clahe_section(const hq_report *r, const sample *s, const hq_mode *m, const uint16_t *luts,
                          const char *const *labels, hq_tile_pos pick[HQ_TILE_VIEW_MAX], hq_page_clahe *pc)
{
    memset(pc, 0, sizeof *pc);
    pc->ntiles = picked_tiles(r, s->item, &pc->g, pick);
    pc->tiles = pick;
    pc->clip = r->cfg.o->clahe.clip;
    pc->clip_count = hq_clahe_clip_limit(pc->clip, hq_clahe_area(&pc->g), hq_mode_bins(m));
    pc->thumb_w = s->g.w;
    pc->thumb_h = s->g.h;
    pc->grid = hq_tile_view_drawable(&pc->g, s->g.w, s->g.h);
    pc->nhist = hq_mode_nhist(m);
    pc->labels = labels;
    pc->luts = luts;
}

/* Rank 0: one sampled image's section, from its reduced data. */
static int write_sample(hq_report *r, FILE *f, const sample *s, const packed *p, hq_err *err)
{
    const hq_item *it = &r->cfg.inv->items[s->item];
    const hq_mode m = mode_of(r, s->item);
    const uint64_t *d = p->sum;
    char name[1024], files[2][64];
    image_name(r, s, name, sizeof name);
    const char *labels[3];
    for (uint32_t h = 0; h < hq_mode_nhist(&m); h++)
        labels[h] = hist_label(&m, h);
    uint16_t *lut = p->ll ? malloc(p->ll * sizeof *lut) : NULL;
    if (p->ll && !lut)
        return hq_fail(err, HQ_EMEM, "%s: out of memory for the report", r->cfg.o->report);
    for (size_t i = 0; i < p->ll; i++)
        lut[i] = (uint16_t)d[3 + p->hl + i];
    hq_page_section sec = {0, s->image, name, it->width, it->height, it->channels, m.bits,
                           p->hl && d[0] ? hq_mode_nhist(&m) : 0, labels, d + 3, lut,
                           m.channels >= 3 && m.color != HQ_COLOR_CHANNELS, NULL, {NULL, NULL}, {0, 0},
                           {files[0], files[1]}, NULL};
    hq_page_clahe pc;
    hq_tile_pos pick[HQ_TILE_VIEW_MAX];
    unsigned char *png[2] = {NULL, NULL};
    int rc = 0;
    if (!d[1] || !d[2] || (p->ll && !d[0])) {
        sec.note = "no pixels: this image was skipped (see Skipped inputs)";
        sec.nhist = 0;
    } else {
        if (is_clahe(r) && p->ll) {
            clahe_section(r, s, &m, lut, labels, pick, &pc);
            sec.clahe = &pc;
        }
        static const char *const WHEN[2] = {"before", "after"};
        for (int k = 0; k < 2 && !rc; k++) {
            snprintf(files[k], sizeof files[k], "thumb-%llu-%s.png", (unsigned long long)s->image, WHEN[k]);
            rc = hq_thumb_png(d + 3 + p->hl + p->ll + (size_t)k * p->tl, &s->g, hq_mode_bins(&m) - 1, files[k], &png[k],
                              &sec.png_len[k], err);
            if (!rc)
                rc = write_file(r->cfg.o->report, files[k], png[k], sec.png_len[k], err);
            sec.png[k] = png[k];
        }
    }
    if (!rc && hq_page_section_write(f, &sec, r->cfg.o->report_log))
        rc = hq_fail(err, HQ_EMEM, "%s: out of memory for the report", r->cfg.o->report);
    free(png[0]);
    free(png[1]);
    free(lut);
    return rc;
}

static int write_global(hq_report *r, FILE *f, hq_err *err)
{
    if (!r->global_hist)
        return 0;
    hq_mode m = {1, 1, 8, r->cfg.o->color, 0};
    for (size_t i = 0; i < r->cfg.inv->n; i++)
        if (!r->cfg.inv->items[i].bad) {
            m = mode_of(r, i);
            break;
        }
    const char *labels[3];
    for (uint32_t h = 0; h < r->global_nhist; h++)
        labels[h] = hist_label(&m, h);
    hq_page_section sec = {1, 0, "global", 0, 0, m.channels, m.bits, r->global_nhist, labels, r->global_hist,
                           r->global_lut, m.channels >= 3 && m.color != HQ_COLOR_CHANNELS, NULL, {NULL, NULL}, {0, 0},
                           {NULL, NULL}, NULL};
    if (hq_page_section_write(f, &sec, r->cfg.o->report_log))
        return hq_fail(err, HQ_EMEM, "%s: out of memory for the report", r->cfg.o->report);
    return 0;
}

/* Rank 0: the page's head and run summary. */
static FILE *start_page(hq_report *r, const hq_report_end *e, const facts *fa, char **part, hq_err *err)
{
    const char *dir = r->cfg.o->report;
    int errn = make_dirs(dir, NULL, NULL);
    if (errn) {
        hq_fail(err, HQ_EIO, "%s: cannot create the report directory (%s)", dir, strerror(errn));
        return NULL;
    }
    *part = join(dir, "index.html.part");
    FILE *f = *part ? fopen(*part, "w") : NULL;
    if (!f) {
        hq_fail(err, HQ_EIO, "%s: cannot write the report (%s)", dir, strerror(errno));
        return NULL;
    }
    char when[64] = "";
    const time_t now = time(NULL);
    struct tm tm;
    if (localtime_r(&now, &tm))
        strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S %Z", &tm);
    const hq_options *o = r->cfg.o;
    hq_page_run pr = {HQ_VERSION, o->input, o->output, hq_scope_name(r->cfg.scope), hq_method_name(o->method),
                      hq_color_name(o->color), r->options, r->command_line ? r->command_line : "", when,
                      r->cfg.c->size, r->cfg.plan->nimages, fa->pixels, fa->bytes, r->nsamples, e->wall_s,
                      e->nskipped ? HQ_ESKIPPED : 0, e->nphases < 16 ? e->nphases : 16, e->phase_names, fa->tmax,
                      fa->tmean, fa->devices, fa->skipped, fa->nskipped, o->report_log};
    hq_page_begin(f, &pr);
    return f;
}

static int end_page(hq_report *r, FILE *f, const char *part, int rc, hq_err *err)
{
    if (!f)
        return rc;
    hq_page_end(f);
    const int bad = ferror(f) | (fclose(f) != 0);
    if (!rc && bad)
        rc = hq_fail(err, HQ_EIO, "%s: cannot write the report (%s)", r->cfg.o->report, strerror(errno));
    char *final = join(r->cfg.o->report, "index.html");
    if (!rc && (!final || rename(part, final) != 0))
        rc = hq_fail(err, HQ_EIO, "%s: cannot write the report (%s)", r->cfg.o->report, strerror(errno));
    if (rc)
        unlink(part);
    free(final);
    return rc;
}

int hq_report_finish(hq_report *r, const hq_report_end *e, hq_err *err)
{
    if (!r || !r->cfg.o->report)
        return 0;
    const hq_comm *c = r->cfg.c;
    facts fa;
    memset(&fa, 0, sizeof fa);
    int rc = gather_facts(r, e, &fa, err);
    /* Scratch for the largest sample, on every rank; everyone must have it before the reductions. */
    size_t most = 3;
    packed p = {NULL, NULL, 0, 0, 0, 0};
    for (size_t k = 0; k < r->nsamples; k++) {
        const size_t n = packed_len(r, &r->samples[k], &p);
        most = n > most ? n : most;
    }
    p.buf = malloc(most * sizeof *p.buf);
    p.sum = c->rank == 0 ? malloc(most * sizeof *p.sum) : NULL;
    rc = hq_comm_agree(c, rc, err); /* rank 0 may have failed alone while sorting the facts */
    if (!rc)
        rc = agree_alloc(r, p.buf && (c->rank != 0 || p.sum), err);
    if (rc) {
        free(p.buf);
        free(p.sum);
        free_facts(&fa);
        return rc;
    }
    char *part = NULL;
    FILE *f = NULL;
    if (c->rank == 0) {
        f = start_page(r, e, &fa, &part, err);
        rc = f ? write_global(r, f, err) : HQ_EIO;
    }
    for (size_t k = 0; k < r->nsamples; k++) {
        /* Rank 0 keeps joining the reductions after a failure of its own, or the others would hang. */
        pack_sample(r, &r->samples[k], &p);
        MPI_Reduce(p.buf, p.sum, (int)p.n, MPI_UINT64_T, MPI_SUM, 0, c->world);
        if (c->rank == 0 && !rc)
            rc = write_sample(r, f, &r->samples[k], &p, err);
    }
    if (c->rank == 0)
        rc = end_page(r, f, part, rc, err);
    if (rc) { /* said once: the run exits 1, but what it wrote stands */
        const size_t n = strlen(err->msg);
        snprintf(err->msg + n, sizeof err->msg - n, "; the output is complete and kept");
    }
    free(part);
    free(p.buf);
    free(p.sum);
    free_facts(&fa);
    return rc;
}

void hq_report_free(hq_report *r)
{
    if (!r)
        return;
    for (size_t k = 0; k < r->nsamples; k++) {
        free(r->samples[k].xmap);
        free(r->samples[k].acc[0]);
        free(r->samples[k].acc[1]);
        free(r->samples[k].hist);
        free(r->samples[k].lut);
    }
    free(r->samples);
    free(r->global_hist);
    free(r->global_lut);
    free(r->options);
    free(r->command_line);
    free(r);
}
