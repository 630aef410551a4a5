/* sample.c — which images the page shows (--report-sample N, evenly through the good images, the
 * first and the last included) and, under CLAHE, which of an image's tiles it plots. */
#include <stdlib.h>

#include "../core/clahe.h"
#include "report_internal.h"

/* N images evenly through the good ones (items not left out), the first and the last included. */
int rep_pick_samples(hq_report *r, hq_err *err)
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

sample *rep_first_sample_from(const hq_report *r, uint64_t image)
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

int rep_is_sampled(const hq_report *r, uint64_t image)
{
    const sample *s = rep_first_sample_from(r, image);
    return s && s->image == image;
}

int rep_is_clahe(const hq_report *r)
{
    return r->cfg.o->method == HQ_METHOD_CLAHE;
}

/* An item's CLAHE geometry (core/clahe.h's) and the tiles the page plots; returns how many (0: not
 * a CLAHE run). Every rank gets the same answer: it depends on the inventory and options alone. */
size_t rep_picked_tiles(const hq_report *r, uint64_t item, hq_clahe_geom *g, hq_tile_pos pick[HQ_TILE_VIEW_MAX])
{
    const hq_item *it = &r->cfg.inv->items[item];
    if (!rep_is_clahe(r) || hq_clahe_geom_make(&r->cfg.o->clahe, it->height, it->width, g))
        return 0;
    return hq_tile_view_pick(g, pick);
}
