/* groups.c — the pending groups' histograms (one per image, per dataset, or the one global group)
 * and the LUTs built from complete histograms: --ignore's levels dropped, the method's rule (CLAHE:
 * every tile's, in parallel), each image's LUT recorded for the report. A group with nothing
 * counted is left unchanged, and said so once. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "../../core/lut.h"
#include "run_internal.h"

/* len: the group's counters, for creating it (0: find only). */
group_hist *run_find_group(run *r, uint64_t g, size_t len)
{
    for (size_t i = 0; i < r->ngroups; i++)
        if (r->groups[i].group == g)
            return &r->groups[i];
    if (!len)
        return NULL;
    if (r->ngroups == r->cap_groups) {
        size_t cap = r->cap_groups ? r->cap_groups * 2 : 8;
        group_hist *n = realloc(r->groups, cap * sizeof *n);
        if (!n)
            return NULL;
        r->groups = n;
        r->cap_groups = cap;
    }
    group_hist *gh = &r->groups[r->ngroups];
    gh->group = g;
    gh->restored = 0;
    gh->empty = 0;
    gh->len = len;
    gh->hist = calloc(len, sizeof *gh->hist);
    gh->lut = malloc(len * sizeof *gh->lut);
    if (!gh->hist || !gh->lut) {
        free(gh->hist);
        free(gh->lut);
        return NULL;
    }
    r->ngroups++;
    return gh;
}

void run_drop_group(run *r, uint64_t g)
{
    for (size_t i = 0; i < r->ngroups; i++) {
        if (r->groups[i].group != g)
            continue;
        free(r->groups[i].hist);
        free(r->groups[i].lut);
        r->groups[i] = r->groups[--r->ngroups];
        return;
    }
}

/* --ignore: the ignored levels' counts dropped from a histogram (exact: a pixel adds to exactly one
 * bin of each of the mode's histograms, so zeroing a bin removes exactly the pixels at that level). */
void run_ignore_bins(const run *r, const hq_mode *m, uint64_t *hist)
{
    const uint32_t bins = hq_mode_bins(m);
    if (!r->o->ignore || r->o->ignore_lo >= bins)
        return;
    const uint32_t hi = r->o->ignore_hi < bins ? r->o->ignore_hi : bins - 1;
    for (uint32_t h = 0; h < hq_mode_nhist(m); h++)
        for (uint32_t v = r->o->ignore_lo; v <= hi; v++)
            hist[(size_t)h * bins + v] = 0;
}

/* The item holding global image g. */
static uint64_t item_of_image(const run *r, uint64_t g)
{
    uint64_t i = 0;
    while (i + 1 < r->plan.nitems && r->plan.item_image0[i + 1] <= g)
        i++;
    return i;
}

/* Why nothing was counted, from what can leave a sample out: the mask, --ignore, and for float
 * data NaN and infinities (it: the image's item, or NULL for every item: scope global). */
static const char *why_nothing(const run *r, const hq_item *it)
{
    int fl = it && it->sample == HQ_SAMPLE_FLOAT;
    for (size_t i = 0; !it && i < r->inv.n; i++)
        fl |= !r->inv.items[i].bad && r->inv.items[i].sample == HQ_SAMPLE_FLOAT;
    const int mk = r->o->mask != NULL, ig = r->o->ignore != 0;
    if (fl)
        return mk && ig ? "no finite sample inside the mask and not ignored"
               : mk     ? "no finite sample inside the mask"
               : ig     ? "no finite sample that is not ignored"
                        : "no finite sample";
    return mk && ig ? "every pixel masked out or ignored" : mk ? "every pixel masked out" : "every value ignored";
}

/* Said once per group, by the rank that speaks for its first image. */
static void note_nothing_counted(const run *r, uint64_t group)
{
    const uint64_t image = r->scope == HQ_SCOPE_GLOBAL ? 0 : group;
    /* --device copy counts nothing by design: every group is empty there, and saying so for each
     * image would bury the benchmark's own output. */
    if (r->o->quiet || r->o->device == HQ_DEV_COPY || hq_plan_image_owner(&r->plan, image) != r->c->rank)
        return;
    /* An image left out while read (--on-error skip) counted nothing too, but was not masked out:
     * the list of skipped inputs says what happened to it. */
    if (__atomic_load_n(&r->nskipped, __ATOMIC_RELAXED))
        return;
    if (r->scope == HQ_SCOPE_GLOBAL) {
        fprintf(stderr, "histeq_dist: note: %s: nothing counted (%s); the images are left unchanged\n", r->o->input,
                why_nothing(r, NULL));
        return;
    }
    const hq_item *it = &r->inv.items[item_of_image(r, image)];
    const int hdf5 = r->inv.format == HQ_FMT_HDF5;
    char slice[48] = "";
    if (it->slices > 1 && r->scope != HQ_SCOPE_DATASET)
        snprintf(slice, sizeof slice, " slice %llu", (unsigned long long)(image - r->plan.item_image0[item_of_image(r, image)]));
    fprintf(stderr, "histeq_dist: note: %s%s%s%s: nothing counted (%s); left unchanged\n", it->src, hdf5 ? ":" : "",
            hdf5 ? it->name : "", slice, why_nothing(r, it));
}

/* CLAHE: every tile's LUT, tiles in parallel (each is independent and exact). */
static int build_clahe_luts(const run *r, uint64_t item, const uint64_t *hist, uint16_t *lut)
{
    const hq_mode m = run_mode_of(r, item);
    const hq_clahe_geom g = run_geom_of(r, item);
    const uint32_t bins = hq_mode_bins(&m);
    const uint64_t n = hq_clahe_ntiles(&g) * hq_mode_nhist(&m), area = hq_clahe_area(&g);
    const int64_t limit = hq_clahe_clip_limit(r->o->clahe.clip, area, bins);
    const int t = run_threads_per_rank(r), threads = t > 0 ? t : 1;
    uint64_t *scratch = malloc((size_t)threads * bins * sizeof *scratch);
    if (!scratch)
        return -1;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int64_t k = 0; k < (int64_t)n; k++)
        hq_clahe_tile_lut(hist + (uint64_t)k * bins, bins, area, limit, lut + (uint64_t)k * bins,
                          scratch + (size_t)omp_get_thread_num() * bins);
    free(scratch);
    return 0;
}

/* The LUTs of one group from its complete histogram: --ignore's levels dropped first, then the
 * method's rule (match: onto r->target; clahe: every tile's, core/clahe.h, which takes neither
 * --ignore nor --mask: app/options.c refuses them). With --ignore and --mask-apply inside, ignored
 * levels map to themselves, which leaves gray, value and channels pixels exactly as they were
 * (luma pixels are kept by the mask plane instead: app/mask.h). Each image of the group records
 * the LUT (the output's provenance, the report). *empty: nothing was counted. */
int run_build_luts(const run *r, const hq_mode *m, uint64_t item, uint64_t group, uint64_t *hist, uint16_t *lut,
                   int *empty, hq_err *err)
{
    const uint32_t bins = hq_mode_bins(m), nh = hq_mode_nhist(m);
    *empty = 0;
    if (run_is_clahe(r) && r->o->device == HQ_DEV_COPY) {
        /* The copy engine counts nothing and writes its input back: what the output records is
         * the identity, as equalize's empty histograms give it. */
        const hq_clahe_geom g = run_geom_of(r, item);
        const uint64_t n = g.tiles_y * g.tiles_x * nh;
        for (uint64_t t = 0; t < n; t++)
            for (uint32_t v = 0; v < bins; v++)
                lut[t * bins + v] = (uint16_t)v;
    } else if (run_is_clahe(r)) {
        if (build_clahe_luts(r, item, hist, lut))
            return hq_fail(err, HQ_EMEM, "%s: out of memory building CLAHE LUTs", r->inv.items[item].src);
    } else {
        run_ignore_bins(r, m, hist);
        for (uint32_t h = 0; h < nh; h++) {
            if (r->o->method == HQ_METHOD_MATCH)
                hq_lut_match(hist + (size_t)h * bins, r->target + (size_t)h * bins, bins, lut + (size_t)h * bins);
            else
                hq_lut_build(r->o->method, hist + (size_t)h * bins, bins, lut + (size_t)h * bins);
            if (r->o->ignore && r->o->mask_inside)
                for (uint32_t v = r->o->ignore_lo; v <= r->o->ignore_hi && v < bins; v++)
                    lut[(size_t)h * bins + v] = (uint16_t)v;
        }
    }
    /* Scope global: the one LUT is recorded at close. */
    for (uint64_t s = 0; r->scope != HQ_SCOPE_GLOBAL && s < run_group_images(r, item); s++) {
        const int rc = hq_report_lut(r->rep, group + s, hist, lut, err);
        if (rc)
            return rc;
    }
    /* CLAHE counts every padded position of every tile: never empty. */
    *empty = !run_is_clahe(r) && hq_hist_total(hist, nh * bins) == 0;
    if (*empty)
        note_nothing_counted(r, group);
    return 0;
}

int run_build_pending_luts(run *r, hq_err *err)
{
    for (size_t i = 0; i < r->ngroups; i++) {
        /* A pending group's mode is the mode of any of its blocks; the global group's LUT is built
         * on every rank, blocks or not: the output records it collectively. */
        hq_mode m;
        uint64_t item = 0; /* scope global: any; the LUT is recorded once, at close */
        int found = r->scope == HQ_SCOPE_GLOBAL && r->groups[i].group == 0 && run_global_mode(r, &m);
        for (uint64_t j = 0; j < r->nmine && !found; j++) {
            const hq_block *b = r->mine[j].b;
            if (r->mine[j].fused || run_group_of(r, b) != r->groups[i].group)
                continue;
            m = run_mode_of(r, b->item);
            item = b->item;
            found = 1;
        }
        int empty = 0;
        const int rc =
            found ? run_build_luts(r, &m, item, r->groups[i].group, r->groups[i].hist, r->groups[i].lut, &empty, err) : 0;
        if (rc)
            return rc;
        r->groups[i].empty = empty;
    }
    return 0;
}
