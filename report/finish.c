/* finish.c — the end of the record (hq_report_finish): the thumbnails summed, the sampled
 * histograms and LUTs, devices, times and skipped inputs gathered to rank 0, which writes the page
 * (index.html.part, then renamed) and the thumbnails. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../core/clahe.h"
#include "../core/lut.h"
#include "page.h"
#include "report_internal.h"

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
    char *path = rep_join(dir, name);
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
    return r->cfg.scope != HQ_SCOPE_GLOBAL && !rep_is_clahe(r) ? rep_hist_len(m) : 0;
}

/* LUT entries of a sampled image's section: its LUT with its histogram, or the picked tiles'. */
static size_t sample_lut_len(const hq_report *r, uint64_t item, const hq_mode *m)
{
    hq_clahe_geom g;
    hq_tile_pos pick[HQ_TILE_VIEW_MAX];
    return rep_is_clahe(r) ? rep_picked_tiles(r, item, &g, pick) * rep_hist_len(m) : sample_hist_len(r, m);
}

static size_t packed_len(const hq_report *r, const sample *s, packed *p)
{
    const hq_mode m = rep_mode_of(r, s->item);
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
    pc->ntiles = rep_picked_tiles(r, s->item, &pc->g, pick);
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

/* The value level 0 of an item's histogram stands for: signed samples are equalized offset by
 * 2^(bits-1) (core/sample.h), and the page shows their own values. */
static int32_t level0_of(const hq_item *it, uint32_t bits)
{
    return it->sample == HQ_SAMPLE_INT ? -(int32_t)(1u << (bits - 1)) : 0;
}

/* Rank 0: one sampled image's section, from its reduced data. state: 0 not resuming; resuming, 1
 * an image this run equalized, 2 one the interrupted run finished, 3 one both did a part of (its
 * thumbnails would show this run's part alone). */
static int write_sample(hq_report *r, FILE *f, const sample *s, const packed *p, int state, hq_err *err)
{
    const hq_item *it = &r->cfg.inv->items[s->item];
    const hq_mode m = rep_mode_of(r, s->item);
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
                           {files[0], files[1]}, NULL, level0_of(it, m.bits)};
    hq_page_clahe pc;
    hq_tile_pos pick[HQ_TILE_VIEW_MAX];
    unsigned char *png[2] = {NULL, NULL};
    int rc = 0;
    /* state 2: an image the interrupted run finished, whose pixels this run never reads; its LUT
     * (and histogram) came back from the journal where that run sampled it for a report of its
     * own. State 3, and 1 without thumbnails: this run equalized the image, or the part of it the
     * interrupted run had not, its histogram perhaps from that run (pass 1 not done again).
     * Only a scanned-out item or a PNG that failed to decode (a PNG is one block, never part
     * done) is "skipped". */
    const int thumbs = d[1] && d[2], data = p->ll && d[0];
    const int by_this_run = (state == 1 && !thumbs && !it->bad && r->cfg.inv->format != HQ_FMT_PNG) || state == 3;
    if (state == 2 || by_this_run) {
        sec.note = state == 2 ? (data ? "finished by the interrupted run that this one resumed: no thumbnails"
                                      : "finished by the interrupted run that this one resumed, which kept no "
                                        "report data of it")
                              : "equalized by this run, which resumed an interrupted one: part of the image, or "
                                "its histogram, came from that run, so no thumbnails";
        if (!data)
            sec.nhist = 0;
        else if (rep_is_clahe(r)) {
            clahe_section(r, s, &m, lut, labels, pick, &pc);
            pc.grid = -1; /* no thumbnail to draw it on */
            sec.clahe = &pc;
        }
    } else if (!thumbs || (p->ll && !d[0])) {
        sec.note = "no pixels: this image was skipped (see Skipped inputs)";
        sec.nhist = 0;
    } else {
        if (rep_is_clahe(r) && p->ll) {
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
    size_t first = r->cfg.inv->n;
    for (size_t i = 0; i < r->cfg.inv->n; i++)
        if (!r->cfg.inv->items[i].bad) {
            m = rep_mode_of(r, i);
            first = i;
            break;
        }
    /* One axis for every item: their own values where all are signed alike, else the levels. */
    int32_t level0 = first < r->cfg.inv->n ? level0_of(&r->cfg.inv->items[first], m.bits) : 0;
    for (size_t i = first; i < r->cfg.inv->n && level0; i++)
        if (!r->cfg.inv->items[i].bad && r->cfg.inv->items[i].sample != HQ_SAMPLE_INT)
            level0 = 0;
    const char *labels[3];
    for (uint32_t h = 0; h < r->global_nhist; h++)
        labels[h] = hist_label(&m, h);
    hq_page_section sec = {1, 0, "global", 0, 0, m.channels, m.bits, r->global_nhist, labels, r->global_hist,
                           r->global_lut, m.channels >= 3 && m.color != HQ_COLOR_CHANNELS, NULL, {NULL, NULL}, {0, 0},
                           {NULL, NULL}, NULL, level0};
    if (hq_page_section_write(f, &sec, r->cfg.o->report_log))
        return hq_fail(err, HQ_EMEM, "%s: out of memory for the report", r->cfg.o->report);
    return 0;
}

/* Rank 0: the page's head and run summary. */
static FILE *start_page(hq_report *r, const hq_report_end *e, const facts *fa, char **part, hq_err *err)
{
    const char *dir = r->cfg.o->report;
    int errn = rep_make_dirs(dir, NULL, NULL);
    if (errn) {
        hq_fail(err, HQ_EIO, "%s: cannot create the report directory (%s)", dir, strerror(errn));
        return NULL;
    }
    *part = rep_join(dir, "index.html.part");
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
                      r->cfg.c->size, e->images, fa->pixels, fa->bytes, r->nsamples, e->wall_s,
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
    char *final = rep_join(r->cfg.o->report, "index.html");
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
            rc = write_sample(r, f, &r->samples[k], &p, e->resumed ? 1 + e->resumed[r->samples[k].image] : 0, err);
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
