/* report.c — the hooks the driver calls (report.h): the record opened (DIR checked, the sample
 * picked), the pixels of sampled images summed into thumbnails, each image's LUT handed to the
 * output's provenance and kept for the page, the provenance fields of the run's metadata. The
 * other files of report/ do the rest (report_internal.h lists them). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/clahe.h"
#include "../core/lut.h"
#include "report_internal.h"

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
        r->options = rep_options_line(r);
        r->command_line = rep_command_line();
        if (!rc && cfg->o->report && cfg->c->rank == 0)
            rc = rep_check_dir(r, err);
        if (!rc && cfg->o->report)
            rc = rep_pick_samples(r, err);
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
    const hq_mode m = rep_mode_of(r, b->item);
    const uint64_t slice_samples = (b->r1 - b->r0) * (b->c1 - b->c0) * m.channels;
    for (sample *s = rep_first_sample_from(r, i0 + b->s0); s && s < r->samples + r->nsamples && s->image < i0 + b->s1;
         s++) {
        if (!s->acc[after]) {
            s->acc[after] = calloc(hq_thumb_len(&s->g), sizeof *s->acc[after]);
            if (!s->xmap)
                s->xmap = hq_thumb_xmap(&s->g);
            if (!s->acc[after] || !s->xmap) {
                rep_fail_once(r, HQ_EMEM, "%s: out of memory for a thumbnail", r->cfg.o->report);
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
    const size_t n = rep_picked_tiles(r, item, &g, pick);
    sample *s = n ? rep_first_sample_from(r, image) : NULL;
    if (!s || s->image != image || s->lut) /* a resumed image's LUT may come again: the first stands */
        return;
    s->lut = malloc(n * hl * sizeof *s->lut);
    if (!s->lut) {
        rep_fail_once(r, HQ_EMEM, "%s: out of memory for a sampled image's tile LUTs", r->cfg.o->report);
        return;
    }
    for (size_t k = 0; k < n; k++)
        memcpy(s->lut + k * hl, lut + (size_t)(pick[k].row * g.tiles_x + pick[k].col) * hl, hl * sizeof *lut);
}

int hq_report_needs_tiles(const hq_report *r, uint64_t image)
{
    return r && rep_is_clahe(r) && rep_is_sampled(r, image);
}

/* A sampled image's section plots its histogram and LUT, under CLAHE some of its tile LUTs. */
int hq_report_journal_wants(hq_report *r, uint64_t image, int *lut, int *hist)
{
    *lut = *hist = 0;
    if (!r || r->cfg.scope == HQ_SCOPE_GLOBAL || rep_first_owner(r->cfg.plan, image) != r->cfg.c->rank)
        return 0;
    *lut = rep_is_sampled(r, image);
    *hist = *lut && !rep_is_clahe(r);
    return *lut;
}

int hq_report_wants(hq_report *r, uint64_t image, int *lut, int *hist)
{
    hq_report_journal_wants(r, image, lut, hist);
    if (r && r->provenance && rep_first_owner(r->cfg.plan, image) == r->cfg.c->rank)
        *lut = 1;
    return *lut || *hist;
}

int hq_report_lut(hq_report *r, uint64_t image, const uint64_t *hist, const uint16_t *lut, hq_err *err)
{
    if (!r || r->cfg.scope == HQ_SCOPE_GLOBAL || rep_first_owner(r->cfg.plan, image) != r->cfg.c->rank)
        return 0;
    const uint64_t item = rep_item_of(r, image), slice = image - r->cfg.plan->item_image0[item];
    const hq_mode m = rep_mode_of(r, item);
    const int rc = record_provenance(r, item, slice, lut, err);
    if (rc)
        return rc;
    if (rep_is_clahe(r)) {
        keep_clahe(r, image, item, lut, rep_hist_len(&m));
        return 0;
    }
    const size_t n = rep_hist_len(&m);
    sample *s = hist ? rep_first_sample_from(r, image) : NULL;
    if (!s || s->image != image || s->hist)
        return 0;
    s->hist = malloc(n * sizeof *s->hist);
    s->lut = malloc(n * sizeof *s->lut);
    if (!s->hist || !s->lut) {
        rep_fail_once(r, HQ_EMEM, "%s: out of memory for a sampled histogram", r->cfg.o->report);
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
            rep_fail_once(r, HQ_EMEM, "%s: out of memory for the global LUT", r->cfg.o->output);
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
