/* gpu_equal.c — the GPU engine against the CPU engine, bit for bit, over every mode.
 *
 * For each layout (channels 1..4, 1- or 2-byte samples, bits 1/4/8/12/16 where they fit, every
 * colour mode for 3+ channels) and geometry (1 or 37 segments of odd sizes), fresh random data of
 * several kinds (full-range noise with samples above the significant bits, in-range noise, smooth
 * gradient plus noise, constant) go through both engines: histograms are accumulated into
 * pre-poisoned counters (checks +=), then remapped with LUTs built by core/lut.c (equalize,
 * stretch) or drawn at random. Half the cases remap right after their own histogram, half after a
 * histogram of another block of the same size; a third run on an engine that reuses the uploaded
 * block (HQ_GPU_RESIDENT=1), which must do so only in the first situation, and a third on an engine
 * whose pixel buffer is capped (HQ_GPU_MEM_CAP) below most blocks, which must split them into
 * pieces. Last, one 8 MB block through a fresh plain engine and a fresh engine capped at 1 MB: the
 * same output, and the capped one's device peak (device_peak) under half the plain one's.
 * Every other pair of cases carries a mask plane (hq_block_data.mask: random bytes, a third zero,
 * runs of zeros, one segment wholly masked out) for both the histogram and the remap: only pixels
 * with a non-zero byte may count, and the others must come back exactly as they were.
 * CLAHE (--method clahe): images of several sizes and grids (padding, reflections of reflections),
 * cut into four uneven pieces as blocks of several ranks are, every layout and colour mode: each
 * piece's tile histograms and its remap through tile LUTs built by core/clahe.c, GPU = CPU.
 * Float data (float32, float64; core/fbin.h): pass-0 extremes and counts, binned histograms and
 * remaps through both engines at 256, 1000 and 65536 bins, over noise with NaNs, values on bin
 * edges, a constant block, float64 ranges that would overflow, a --range narrower than the data
 * (clamps), geometries that cross the GPU's chunk and segment limits, half of them with a mask
 * plane; infinite samples must be refused alike.
 * Prints "N passed, N failed"; exits 1 on any difference. --small keeps blocks tiny and --every N
 * runs every Nth case only (for the sanitizers, which are slow). */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/clahe.h"
#include "../../core/lut.h"
#include "../../engine/engine.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

enum { PAT_FULL, PAT_RANGE, PAT_SMOOTH, PAT_CONST, NPAT };
static const char *pat_name[NPAT] = {"full-range noise", "in-range noise", "smooth+noise", "constant"};

static void fill(void *buf, uint64_t pixels, const hq_mode *m, int pat)
{
    const uint64_t n = pixels * m->channels;
    const uint32_t tmax = m->sample_bytes == 1 ? 0xffu : 0xffffu, maxv = hq_mode_bins(m) - 1;
    uint32_t cval[4];
    for (int c = 0; c < 4; c++)
        cval[c] = (uint32_t)(rnd() % ((uint64_t)maxv + 1));
    for (uint64_t i = 0; i < n; i++) {
        uint32_t v;
        if (pat == PAT_FULL)
            v = (uint32_t)(rnd() & tmax);
        else if (pat == PAT_RANGE)
            v = (uint32_t)(rnd() % ((uint64_t)maxv + 1));
        else if (pat == PAT_CONST)
            v = cval[i % m->channels];
        else {
            /* runs of 32 equal pixels, an eighth of them nudged: uniform and mixed vectors */
            const uint64_t px = i / m->channels;
            const uint64_t ramp = ((px >> 5) * 13 + (i % m->channels) * 1000) % ((uint64_t)maxv + 1);
            const uint64_t r = rnd();
            const int64_t noise = (r & 7) ? 0 : (int64_t)((r >> 3) % 5) - 2;
            int64_t t = (int64_t)ramp + noise;
            v = (uint32_t)(t < 0 ? 0 : t > (int64_t)maxv ? (int64_t)maxv : t);
        }
        if (m->sample_bytes == 1)
            ((uint8_t *)buf)[i] = (uint8_t)v;
        else
            ((uint16_t *)buf)[i] = (uint16_t)v;
    }
}

typedef struct {
    int passed, failed;
} tally;

static uint64_t **seg_ptrs64(uint64_t *base, uint64_t nseg, uint32_t nf)
{
    uint64_t **p = malloc(nseg * sizeof *p);
    for (uint64_t s = 0; s < nseg; s++)
        p[s] = base + s * nf;
    return p;
}

/* A third of the bytes zero, others any non-zero value; runs of 40 zeros here and there; the
 * first segment wholly zero when there are several. */
static void fill_mask(uint8_t *mk, uint64_t nseg, uint64_t sp)
{
    const uint64_t n = nseg * sp;
    for (uint64_t i = 0; i < n; i++) {
        const uint64_t r = rnd();
        mk[i] = r % 3 == 0 ? 0 : (uint8_t)(1 + (r >> 8) % 255);
    }
    for (uint64_t i = 0; i + 40 <= n; i += 997)
        memset(mk + i, 0, 40);
    if (nseg > 1)
        memset(mk, 0, sp);
}

static int run_case(hq_engine *cpu, hq_engine *gpu, const hq_mode *m, uint64_t nseg, uint64_t sp, int pat,
                    int lutkind, int stale, int masked, char *why, size_t whylen)
{
    const uint32_t nf = hq_mode_nhist(m) * hq_mode_bins(m), bins = hq_mode_bins(m);
    const size_t bytes = (size_t)(nseg * sp) * m->channels * m->sample_bytes;
    uint8_t *orig = malloc(bytes ? bytes : 1), *a = malloc(bytes ? bytes : 1), *b = malloc(bytes ? bytes : 1),
            *other = malloc(bytes ? bytes : 1);
    uint64_t *poison = malloc(nseg * nf * sizeof(uint64_t)), *hc = malloc(nseg * nf * sizeof(uint64_t)),
             *hg = malloc(nseg * nf * sizeof(uint64_t)), *hscratch = calloc(nseg * nf, sizeof(uint64_t));
    uint16_t *lutbuf = malloc(nseg * nf * sizeof(uint16_t));
    uint64_t **pc = seg_ptrs64(hc, nseg, nf), **pg = seg_ptrs64(hg, nseg, nf), **ps = seg_ptrs64(hscratch, nseg, nf);
    const uint16_t **pl = malloc(nseg * sizeof *pl);
    int ok = 1;
    hq_err err = {{0}};

    fill(orig, nseg * sp, m, pat);
    fill(other, nseg * sp, m, PAT_FULL);
    memcpy(a, orig, bytes);
    memcpy(b, orig, bytes);
    for (uint64_t i = 0; i < nseg * nf; i++)
        poison[i] = rnd() >> 20;
    memcpy(hc, poison, nseg * nf * sizeof(uint64_t));
    memcpy(hg, poison, nseg * nf * sizeof(uint64_t));
    uint8_t *mk = masked ? malloc(nseg * sp > 0 ? nseg * sp : 1) : NULL;
    if (mk)
        fill_mask(mk, nseg, sp);
    hq_block_data ba = {a, nseg, sp, 0, mk, NULL, NULL}, bb = {b, nseg, sp, 0, mk, NULL, NULL},
                  bo = {other, nseg, sp, 0, mk, NULL, NULL};

    if (cpu->ops->histogram(cpu, &ba, m, pc, &err)) {
        snprintf(why, whylen, "cpu histogram: %s", err.msg);
        ok = 0;
        goto out;
    }
    if (gpu->ops->histogram(gpu, &bb, m, pg, &err)) {
        snprintf(why, whylen, "gpu histogram: %s", err.msg);
        ok = 0;
        goto out;
    }
    for (uint64_t i = 0; i < nseg * nf; i++)
        if (hc[i] != hg[i]) {
            snprintf(why, whylen, "histogram differs: segment %llu entry %llu: cpu %llu gpu %llu",
                     (unsigned long long)(i / nf), (unsigned long long)(i % nf),
                     (unsigned long long)(hc[i] - poison[i]), (unsigned long long)(hg[i] - poison[i]));
            ok = 0;
            goto out;
        }
    if (stale && gpu->ops->histogram(gpu, &bo, m, ps, &err)) {
        snprintf(why, whylen, "gpu histogram (other block): %s", err.msg);
        ok = 0;
        goto out;
    }
    for (uint64_t s = 0; s < nseg; s++) {
        uint16_t *l = lutbuf + s * nf;
        for (uint32_t h = 0; h < hq_mode_nhist(m); h++) {
            uint64_t *clean = malloc(bins * sizeof *clean);
            for (uint32_t v = 0; v < bins; v++)
                clean[v] = hc[s * nf + h * bins + v] - poison[s * nf + h * bins + v];
            if (lutkind == 2)
                for (uint32_t v = 0; v < bins; v++)
                    l[h * bins + v] = (uint16_t)(rnd() % bins);
            else
                hq_lut_build(lutkind == 1 ? HQ_METHOD_STRETCH : HQ_METHOD_EQUALIZE, clean, bins, l + h * bins);
            free(clean);
        }
        pl[s] = l;
    }
    if (cpu->ops->remap(cpu, &ba, m, pl, &err)) {
        snprintf(why, whylen, "cpu remap: %s", err.msg);
        ok = 0;
        goto out;
    }
    if (gpu->ops->remap(gpu, &bb, m, pl, &err)) {
        snprintf(why, whylen, "gpu remap: %s", err.msg);
        ok = 0;
        goto out;
    }
    for (size_t i = 0; i < bytes; i++)
        if (a[i] != b[i]) {
            snprintf(why, whylen, "remap differs at byte %zu (pixel %zu): cpu %u gpu %u (input %u)", i,
                     i / (m->channels * m->sample_bytes), a[i], b[i], orig[i]);
            ok = 0;
            goto out;
        }
    /* Masked out: exactly the input (a wrong mask on both engines alike would pass the check above). */
    for (uint64_t p = 0; mk && p < nseg * sp; p++) {
        const size_t pb = (size_t)m->channels * m->sample_bytes;
        if (!mk[p] && memcmp(a + p * pb, orig + p * pb, pb) != 0) {
            snprintf(why, whylen, "pixel %llu is masked out but changed", (unsigned long long)p);
            ok = 0;
            goto out;
        }
    }
out:
    free(mk);
    free(orig);
    free(a);
    free(b);
    free(other);
    free(poison);
    free(hc);
    free(hg);
    free(hscratch);
    free(lutbuf);
    free(pc);
    free(pg);
    free(ps);
    free(pl);
    return ok;
}

/* Rows [r0, r1) x columns [c0, c1) of an image w pixels wide, px bytes a pixel, copied densely. */
static void *crop(const uint8_t *img, uint64_t w, uint64_t px, uint64_t r0, uint64_t r1, uint64_t c0, uint64_t c1)
{
    uint8_t *out = malloc((r1 - r0) * (c1 - c0) * px);
    for (uint64_t y = r0; out && y < r1; y++)
        memcpy(out + (y - r0) * (c1 - c0) * px, img + (y * w + c0) * px, (c1 - c0) * px);
    return out;
}

/* One CLAHE case: the image in 2x2 uneven pieces (whole when split is 0) through both engines. */
static int clahe_case(hq_engine *cpu, hq_engine *gpu, const hq_mode *m, uint64_t h, uint64_t w, uint64_t gy,
                      uint64_t gx, double clip, int split, int pat, char *why, size_t whylen)
{
    hq_clahe_cfg cfg = {gy, gx, 0, clip};
    hq_clahe_geom g;
    if (hq_clahe_geom_make(&cfg, h, w, &g)) {
        snprintf(why, whylen, "bad geometry");
        return 0;
    }
    const uint64_t px = (uint64_t)m->channels * m->sample_bytes, bins = hq_mode_bins(m);
    const uint64_t len = hq_clahe_ntiles(&g) * hq_mode_nhist(m) * bins;
    uint8_t *img = malloc(h * w * px);
    uint64_t *hc = malloc(len * sizeof *hc), *hg = malloc(len * sizeof *hg), *scratch = malloc(bins * sizeof *scratch);
    uint16_t *lut = malloc(len * sizeof *lut);
    int ok = img && hc && hg && scratch && lut;
    if (ok)
        fill(img, h * w, m, pat);
    for (uint64_t i = 0; ok && i < len; i++)
        hc[i] = hg[i] = i * 7919; /* poisoned: the engines must add (+=) */
    /* Pieces of uneven sizes; an image of one or two columns is split by rows only. */
    const uint64_t rs[3] = {0, split ? h / 3 + 1 : h, h}, cs[3] = {0, split && w > 2 ? w / 2 - 1 : w, w};
    hq_err err = {{0}};
    for (int pass = 0; ok && pass < 2; pass++) {
        for (int a = 0; ok && a < 2; a++)
            for (int b = 0; ok && b < 2; b++) {
                if (rs[a + 1] == rs[a] || cs[b + 1] == cs[b])
                    continue;
                uint8_t *dc = crop(img, w, px, rs[a], rs[a + 1], cs[b], cs[b + 1]);
                uint8_t *dg = crop(img, w, px, rs[a], rs[a + 1], cs[b], cs[b + 1]);
                hq_clahe_piece pc = {dc, rs[a], cs[b], rs[a + 1] - rs[a], cs[b + 1] - cs[b], 0}, pg = pc;
                pg.data = dg;
                const size_t bytes = pc.rows * pc.cols * px;
                if (!dc || !dg) {
                    ok = 0;
                } else if (pass == 0) {
                    ok = !cpu->ops->clahe_histogram(cpu, &pc, m, &g, hc, &err) &&
                         !gpu->ops->clahe_histogram(gpu, &pg, m, &g, hg, &err);
                } else {
                    ok = !cpu->ops->clahe_remap(cpu, &pc, m, &g, lut, &err) &&
                         !gpu->ops->clahe_remap(gpu, &pg, m, &g, lut, &err);
                    if (ok && memcmp(dc, dg, bytes)) {
                        snprintf(why, whylen, "remap of piece (%d,%d) differs", a, b);
                        ok = 0;
                    }
                }
                free(dc);
                free(dg);
                if (!ok && !why[0])
                    snprintf(why, whylen, "%s", err.msg[0] ? err.msg : "out of memory");
            }
        if (ok && pass == 0) {
            if (memcmp(hc, hg, len * sizeof *hc)) {
                snprintf(why, whylen, "tile histograms differ");
                ok = 0;
            }
            const int64_t limit = hq_clahe_clip_limit(clip, hq_clahe_area(&g), (uint32_t)bins);
            for (uint64_t t = 0; ok && t < len / bins; t++) {
                for (uint64_t v = 0; v < bins; v++)
                    hc[t * bins + v] -= (t * bins + v) * 7919;
                hq_clahe_tile_lut(hc + t * bins, (uint32_t)bins, hq_clahe_area(&g), limit, lut + t * bins, scratch);
            }
        }
    }
    /* Whole: the GPU's own LUTs (clahe_luts) against the host's, the counts, LUTs and pixels kept
     * on the device between the calls. The host copy of the pixels is poisoned before the remap,
     * which must not read it again; every other image asks for no LUTs on the host. */
    if (ok && !split && gpu->ops->clahe_luts) {
        const size_t bytes = h * w * px;
        uint8_t *dc = crop(img, w, px, 0, h, 0, w), *dg = crop(img, w, px, 0, h, 0, w);
        uint16_t *dl = malloc(len * sizeof *dl);
        const int host = h % 2 == 0;
        hq_clahe_piece pc = {dc, 0, 0, h, w, 0}, pg = pc;
        pg.data = dg;
        const int64_t limit = hq_clahe_clip_limit(clip, hq_clahe_area(&g), (uint32_t)bins);
        ok = dc && dg && dl && !gpu->ops->clahe_histogram(gpu, &pg, m, &g, NULL, &err) &&
             !gpu->ops->clahe_luts(gpu, m, &g, limit, host ? dl : NULL, &err);
        if (ok && host && memcmp(dl, lut, len * sizeof *lut)) {
            snprintf(why, whylen, "device LUTs differ from the host's");
            ok = 0;
        }
        if (ok) {
            memset(dg, 0xa5, bytes);
            pg.same_as_histogram = 1;
            ok = !cpu->ops->clahe_remap(cpu, &pc, m, &g, lut, &err) &&
                 !gpu->ops->clahe_remap(gpu, &pg, m, &g, host ? dl : NULL, &err);
            if (ok && memcmp(dc, dg, bytes)) {
                snprintf(why, whylen, "remap with the device's LUTs and pixels differs");
                ok = 0;
            }
        }
        if (!ok && !why[0])
            snprintf(why, whylen, "%s", err.msg[0] ? err.msg : "out of memory");
        free(dc);
        free(dg);
        free(dl);
    }
    free(img);
    free(hc);
    free(hg);
    free(scratch);
    free(lut);
    return ok;
}

static void clahe_cases(hq_engine *cpu, hq_engine *gpu, int small, tally *t)
{
    /* {31, 1000, 2, 100}: 8-bit gray LUTs of 100 tile columns too many for shared memory when whole
     * (the global-memory remap); {300, 1, 5, 1}: one column (no 16-byte vector in a row). The last
     * two: rows of 16-byte multiples (the aligned gray remaps) with padding, tiles wider than a
     * block's strip, and 10 geometries so that every one is also taken whole (caseno % 4 == 3). */
    static const uint64_t geo[][4] = {{97, 131, 8, 8},   {9, 11, 8, 8},       {64, 40, 3, 5},
                                      {33, 21, 1, 1},    {1080, 1920, 8, 8},  {517, 1203, 7, 13},
                                      {31, 1000, 2, 100}, {300, 1, 5, 1},     {203, 1024, 3, 5},
                                      {70, 4096, 2, 3}};
    static const uint32_t bitsv[] = {4, 8, 12, 16};
    static const double clips[] = {0.0, 1.0, 2.0, 40.0};
    int caseno = 0;
    for (uint32_t bytes = 1; bytes <= 2; bytes++)
        for (int bi = 0; bi < 4; bi++) {
            if (bitsv[bi] > 8 * bytes)
                continue;
            for (uint32_t ch = 1; ch <= 4; ch++)
                for (int color = 0; color < (ch >= 3 ? 3 : 1); color++)
                    for (int gi = 0; gi < (small ? 4 : 10); gi++) {
                        hq_mode m = {ch, bytes, bitsv[bi], (hq_color)color, 0};
                        const int pat = caseno % NPAT, split = caseno % 4 != 3;
                        const double clip = clips[caseno % 4];
                        caseno++;
                        char why[1200] = "";
                        if (clahe_case(cpu, gpu, &m, geo[gi][0], geo[gi][1], geo[gi][2], geo[gi][3], clip, split, pat,
                                       why, sizeof why)) {
                            t->passed++;
                        } else {
                            t->failed++;
                            printf("FAIL clahe ch=%u bytes=%u bits=%u color=%s %llux%llu grid %llux%llu clip %g %s "
                                   "data=%s: %s\n",
                                   ch, bytes, bitsv[bi], hq_color_name((hq_color)color),
                                   (unsigned long long)geo[gi][0], (unsigned long long)geo[gi][1],
                                   (unsigned long long)geo[gi][2], (unsigned long long)geo[gi][3], clip,
                                   split ? "in 4 pieces" : "whole", pat_name[pat], why);
                        }
                    }
        }
}

/* 16-bit gray (12 and 16 bits), whole images whose rows start on 16-byte boundaries and whose tiles
 * are wider than a remap strip (the cells and k_clahe_remap16), on every pattern: a block's levels
 * few (a constant), local (smooth data) or spread over the whole range (noise), strips inside one
 * column pair and across two, one tile and several. */
static void clahe_stage_cases(hq_engine *cpu, hq_engine *gpu, tally *t)
{
    static const uint64_t geo[][4] = {{70, 4096, 2, 3}, {129, 4000, 2, 2}, {300, 2048, 3, 4}, {64, 8192, 1, 1}};
    static const uint32_t bitsv[] = {12, 16};
    static const double clips[] = {0.0, 2.0, 40.0};
    int caseno = 0;
    for (int bi = 0; bi < 2; bi++)
        for (int gi = 0; gi < 4; gi++)
            for (int pat = 0; pat < NPAT; pat++) {
                hq_mode m = {1, 2, bitsv[bi], HQ_COLOR_LUMA, 0};
                const double clip = clips[caseno++ % 3];
                char why[1200] = "";
                if (clahe_case(cpu, gpu, &m, geo[gi][0], geo[gi][1], geo[gi][2], geo[gi][3], clip, 0, pat, why,
                               sizeof why)) {
                    t->passed++;
                } else {
                    t->failed++;
                    printf("FAIL clahe 16-bit wide tiles bits=%u %llux%llu grid %llux%llu clip %g data=%s: %s\n", bitsv[bi],
                           (unsigned long long)geo[gi][0], (unsigned long long)geo[gi][1],
                           (unsigned long long)geo[gi][2], (unsigned long long)geo[gi][3], clip, pat_name[pat], why);
                }
            }
}

/* ---- float data ---- */

enum { FPAT_NOISE, FPAT_EDGES, FPAT_CONST, FPAT_HUGE, FPAT_RANGE, FPAT_INF, NFPAT };
static const char *fpat_name[NFPAT] = {"noise with NaNs", "values on bin edges", "constant",
                                       "float64 range past DBL_MAX/N", "--range narrower than the data",
                                       "with +-inf (refused)"};

static double unit01(void)
{
    return (double)(rnd() >> 11) * 0x1p-53;
}

static void ffill(void *buf, uint64_t n, uint32_t sb, uint32_t bins, int pat)
{
    const double c = 1000 * unit01() - 500;
    for (uint64_t i = 0; i < n; i++) {
        double v;
        if (pat == FPAT_EDGES) /* on the bin edges of [0.1, 0.7], where the order of operations shows */
            v = 0.1 + 0.6 * (double)(rnd() % ((uint64_t)bins + 1)) / bins;
        else if (pat == FPAT_CONST)
            v = c;
        else if (pat == FPAT_HUGE)
            v = (sb == 8 ? DBL_MAX : FLT_MAX) * (2 * unit01() - 1);
        else
            v = (unit01() - 0.25) * 1e4 * unit01() * unit01();
        if ((pat == FPAT_NOISE || pat == FPAT_RANGE) && rnd() % 61 == 0)
            v = NAN;
        if (pat == FPAT_INF && (i % 1009 == 3 || i == n - 1)) /* the last too: a one-pixel block holds one */
            v = (i & 1) ? INFINITY : -INFINITY;
        if (sb == 4)
            ((float *)buf)[i] = (float)v;
        else
            ((double *)buf)[i] = v;
    }
    if (pat == FPAT_EDGES && n >= 2) { /* both ends present, so the extremes are the range's */
        if (sb == 4) {
            ((float *)buf)[0] = (float)0.1;
            ((float *)buf)[n - 1] = (float)(0.1 + 0.6);
        } else {
            ((double *)buf)[0] = 0.1;
            ((double *)buf)[n - 1] = 0.1 + 0.6;
        }
    }
}

static int run_float_case(hq_engine *cpu, hq_engine *gpu, uint32_t sb, uint32_t bins, uint64_t nseg, uint64_t sp,
                          int pat, int lutkind, int masked, char *why, size_t whylen)
{
    const uint64_t n = nseg * sp;
    const size_t bytes = (size_t)n * sb;
    uint8_t *a = malloc(bytes), *b = malloc(bytes);
    hq_frange *mc = malloc(nseg * sizeof *mc), *mg = malloc(nseg * sizeof *mg);
    hq_fbin *fb = malloc(nseg * sizeof *fb);
    uint64_t *hc = malloc(nseg * bins * sizeof(uint64_t)), *hg = malloc(nseg * bins * sizeof(uint64_t));
    uint64_t **pc = seg_ptrs64(hc, nseg, bins), **pg = seg_ptrs64(hg, nseg, bins);
    uint16_t *lut = malloc(nseg * bins * sizeof(uint16_t));
    const uint16_t **pl = malloc(nseg * sizeof *pl);
    const hq_mode m = {1, sb, 0, HQ_COLOR_LUMA, bins};
    hq_err ec = {{0}}, eg = {{0}};
    int ok = 1;
    ffill(a, n, sb, bins, pat);
    memcpy(b, a, bytes);
    uint8_t *mk = masked ? malloc(n > 0 ? n : 1) : NULL;
    if (mk)
        fill_mask(mk, nseg, sp);
    hq_block_data ba = {a, nseg, sp, 0, mk, NULL, NULL}, bb = {b, nseg, sp, 0, mk, NULL, NULL};
    for (uint64_t s = 0; s < nseg; s++)
        mc[s] = mg[s] = hq_frange_empty();
    if (cpu->ops->minmax(cpu, &ba, &m, mc, &ec) || gpu->ops->minmax(gpu, &bb, &m, mg, &eg)) {
        snprintf(why, whylen, "minmax failed: cpu '%s' gpu '%s'", ec.msg, eg.msg);
        ok = 0;
        goto out;
    }
    for (uint64_t s = 0; s < nseg; s++) {
        /* Equal up to the sign of a zero extreme, which hq_fbin_make drops. */
        const hq_fbin x = hq_fbin_make(mc[s].lo, mc[s].hi, bins), y = hq_fbin_make(mg[s].lo, mg[s].hi, bins);
        if (memcmp(&x.lo, &y.lo, 8) || memcmp(&x.hi, &y.hi, 8) || mc[s].finite != mg[s].finite ||
            mc[s].inf != mg[s].inf) {
            snprintf(why, whylen, "minmax differs, segment %llu: cpu [%.17g, %.17g] %llu finite %llu inf, gpu "
                     "[%.17g, %.17g] %llu finite %llu inf", (unsigned long long)s, mc[s].lo, mc[s].hi,
                     (unsigned long long)mc[s].finite, (unsigned long long)mc[s].inf, mg[s].lo, mg[s].hi,
                     (unsigned long long)mg[s].finite, (unsigned long long)mg[s].inf);
            ok = 0;
            goto out;
        }
        fb[s] = pat == FPAT_RANGE ? hq_fbin_make(-100, 2000, bins)
                : mc[s].lo <= mc[s].hi ? x : hq_fbin_make(NAN, NAN, bins);
    }
    ba.fbin = bb.fbin = fb;
    for (uint64_t i = 0; i < nseg * bins; i++)
        hc[i] = hg[i] = rnd() >> 20;
    const int rc = cpu->ops->histogram(cpu, &ba, &m, pc, &ec), rg = gpu->ops->histogram(gpu, &bb, &m, pg, &eg);
    uint64_t counted_inf = 0; /* infinities the histogram sees: those the mask lets through */
    for (uint64_t i = 0; i < n; i++) {
        const double v = sb == 4 ? (double)((float *)a)[i] : ((double *)a)[i];
        counted_inf += isinf(v) && (!mk || mk[i]);
    }
    if (counted_inf) {
        if (rc != HQ_EINPUT || rg != HQ_EINPUT || strcmp(ec.msg, eg.msg)) {
            snprintf(why, whylen, "infinite samples: cpu %d '%s', gpu %d '%s' (both must be %d, same message)", rc,
                     ec.msg, rg, eg.msg, HQ_EINPUT);
            ok = 0;
        }
        goto out;
    }
    if (rc || rg) {
        snprintf(why, whylen, "histogram failed: cpu '%s' gpu '%s'", ec.msg, eg.msg);
        ok = 0;
        goto out;
    }
    if (memcmp(hc, hg, nseg * bins * sizeof(uint64_t))) {
        for (uint64_t i = 0; i < nseg * bins; i++)
            if (hc[i] != hg[i]) {
                snprintf(why, whylen, "histogram differs: segment %llu bin %llu: cpu %llu gpu %llu",
                         (unsigned long long)(i / bins), (unsigned long long)(i % bins), (unsigned long long)hc[i],
                         (unsigned long long)hg[i]);
                break;
            }
        ok = 0;
        goto out;
    }
    for (uint64_t s = 0; s < nseg; s++) {
        uint16_t *l = lut + s * bins;
        if (lutkind == 2)
            for (uint32_t v = 0; v < bins; v++)
                l[v] = (uint16_t)(rnd() % bins);
        else
            hq_lut_build(lutkind == 1 ? HQ_METHOD_STRETCH : HQ_METHOD_EQUALIZE, pc[s], bins, l); /* poison: any LUT does */
        pl[s] = l;
    }
    if (cpu->ops->remap(cpu, &ba, &m, pl, &ec) || gpu->ops->remap(gpu, &bb, &m, pl, &eg)) {
        snprintf(why, whylen, "remap failed: cpu '%s' gpu '%s'", ec.msg, eg.msg);
        ok = 0;
        goto out;
    }
    if (memcmp(a, b, bytes)) {
        for (uint64_t i = 0; i < n; i++)
            if (memcmp(a + i * sb, b + i * sb, sb)) {
                const double va = sb == 4 ? ((float *)a)[i] : ((double *)a)[i],
                             vb = sb == 4 ? ((float *)b)[i] : ((double *)b)[i];
                snprintf(why, whylen, "remap differs at sample %llu: cpu %.17g gpu %.17g", (unsigned long long)i, va,
                         vb);
                break;
            }
        ok = 0;
    }
out:
    free(mk);
    free(a);
    free(b);
    free(mc);
    free(mg);
    free(fb);
    free(hc);
    free(hg);
    free(pc);
    free(pg);
    free(lut);
    free(pl);
    return ok;
}

static void float_cases(hq_engine *cpu, hq_engine *gpu, int small, int every, tally *t)
{
    /* 3 x 3000017 float64 crosses the GPU path's 64 MiB chunks; 40 segments cross its 16 a chunk. */
    static const uint64_t big_geo[][2] = {{1, 1}, {1, 1000003}, {37, 1023}, {40, 4099}, {3, 3000017}};
    static const uint64_t small_geo[][2] = {{1, 1}, {1, 70001}, {37, 7}, {40, 129}};
    static const uint32_t binsv[] = {256, 1000, 65536};
    int caseno = 0;
    for (uint32_t sb = 4; sb <= 8; sb += 4)
        for (int bi = 0; bi < 3; bi++)
            for (int gi = 0; gi < (small ? 4 : 5); gi++)
                for (int pat = 0; pat < NFPAT; pat++) {
                    const uint64_t *g = small ? small_geo[gi] : big_geo[gi];
                    const int lutkind = caseno % 3;
                    char why[4096] = "";
                    if (caseno++ % every)
                        continue;
                    const int masked = (caseno / 3) & 1;
                    if (run_float_case(cpu, gpu, sb, binsv[bi], g[0], g[1], pat, lutkind, masked, why, sizeof why)) {
                        t->passed++;
                    } else {
                        t->failed++;
                        printf("FAIL float%u bins=%u nseg=%llu seg_pixels=%llu data=%s lut=%s%s: %s\n", 8 * sb,
                               binsv[bi], (unsigned long long)g[0], (unsigned long long)g[1], fpat_name[pat],
                               lutkind == 0 ? "equalize" : lutkind == 1 ? "stretch" : "random",
                               masked ? " masked" : "", why);
                    }
                }
}

int main(int argc, char **argv)
{
    int small = 0, every = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--small") == 0)
            small = 1;
        else if (strcmp(argv[i], "--every") == 0 && i + 1 < argc)
            every = atoi(argv[++i]) > 0 ? atoi(argv[i]) : 1;
        else {
            fprintf(stderr, "usage: gpu_equal [--small] [--every N]\n");
            return 2;
        }
    }
    if (hq_gpu_device_count() < 1) {
        hq_engine *g = NULL;
        hq_err err = {{0}};
        hq_engine_cfg cfg = {0, 0, 1, 0};
        int rc = hq_gpu_engine_create(&cfg, &g, &err);
        printf("no CUDA device: hq_gpu_engine_create returned %d: %s\n", rc, err.msg);
        printf("0 passed, 0 failed\n");
        return rc == HQ_EDEVICE ? 0 : 1;
    }
    hq_engine_cfg cfg = {0, 0, 1, 0};
    hq_engine *cpu = NULL, *gpu = NULL, *gpu_res = NULL, *gpu_split = NULL;
    hq_err err = {{0}};
    /* Three GPU engines: the default one, one that reuses the uploaded block (HQ_GPU_RESIDENT), and
     * one whose pixel buffer is capped at an odd size below most blocks (HQ_GPU_MEM_CAP). */
    if (hq_cpu_engine_create(&cfg, &cpu, &err) || hq_gpu_engine_create(&cfg, &gpu, &err) ||
        setenv("HQ_GPU_RESIDENT", "1", 1) || hq_gpu_engine_create(&cfg, &gpu_res, &err) ||
        unsetenv("HQ_GPU_RESIDENT") || setenv("HQ_GPU_MEM_CAP", small ? "3000" : "100003", 1) ||
        hq_gpu_engine_create(&cfg, &gpu_split, &err)) {
        fprintf(stderr, "gpu_equal: %s\n", err.msg);
        return 1;
    }
    unsetenv("HQ_GPU_MEM_CAP");
    char desc[400];
    gpu->ops->describe(gpu, desc, sizeof desc);
    printf("engine: %s\n", desc);

    /* 3 x 3000017 spans several 8 MiB staging chunks, with segments across chunk edges */
    static const uint64_t big_geo[][2] = {{1, 1},  {1, 7},  {1, 1023},  {1, 1000003},
                                          {37, 1}, {37, 7}, {37, 1023}, {37, 27031}, {3, 3000017}};
    static const uint64_t small_geo[][2] = {{1, 1}, {1, 7}, {37, 7}, {3, 2049}};
    const uint64_t(*geo)[2] = small ? small_geo : big_geo;
    const int ngeo = small ? 4 : 9;
    static const uint32_t bitsv[] = {1, 4, 8, 12, 16};
    tally t = {0, 0};
    int caseno = 0;
    for (uint32_t bytes = 1; bytes <= 2; bytes++)
        for (int bi = 0; bi < 5; bi++) {
            if (bitsv[bi] > 8 * bytes)
                continue;
            for (uint32_t ch = 1; ch <= 4; ch++)
                for (int color = 0; color < (ch >= 3 ? 3 : 1); color++)
                    for (int gi = 0; gi < ngeo; gi++) {
                        hq_mode m = {ch, bytes, bitsv[bi], (hq_color)color, 0};
                        const int npat = (geo[gi][1] == 1023 || geo[gi][1] == 27031 || geo[gi][1] == 2049) ? 4 : 1;
                        for (int pk = 0; pk < npat; pk++) {
                            const int pat = npat == 4 ? pk : caseno % 3;
                            const int lutkind = caseno % 3, stale = caseno & 1;
                            char why[1200] = "";
                            if (caseno++ % every)
                                continue;
                            const int which = (caseno / 2) % 3;
                            hq_engine *eng = which == 1 ? gpu_res : which == 2 ? gpu_split : gpu;
                            const int masked = (caseno / 2) % 2;
                            if (run_case(cpu, eng, &m, geo[gi][0], geo[gi][1], pat, lutkind, stale, masked, why,
                                         sizeof why)) {
                                t.passed++;
                            } else {
                                t.failed++;
                                printf("FAIL ch=%u bytes=%u bits=%u color=%s nseg=%llu seg_pixels=%llu data=%s "
                                       "lut=%s %s%s%s: %s\n",
                                       ch, bytes, bitsv[bi], hq_color_name((hq_color)color),
                                       (unsigned long long)geo[gi][0], (unsigned long long)geo[gi][1],
                                       pat_name[pat], lutkind == 0 ? "equalize" : lutkind == 1 ? "stretch" : "random",
                                       stale ? "after another block" : "right after its histogram",
                                       eng == gpu_res     ? " (reusing uploads)"
                                       : eng == gpu_split ? " (pixel buffer capped: pieces)"
                                                          : "",
                                       masked ? " (masked)" : "", why);
                            }
                        }
                    }
        }
    {
        const int before = t.passed + t.failed;
        float_cases(cpu, gpu, small, every, &t);
        printf("float cases: %d\n", t.passed + t.failed - before);
    }
    {
        /* The capped engine holds a block 8x its cap in pieces: less device memory than whole. */
        hq_engine *plain = NULL, *capped = NULL;
        const hq_mode m = {1, 1, 8, HQ_COLOR_LUMA, 0};
        char why[1200] = "";
        int ok = hq_gpu_engine_create(&cfg, &plain, &err) == 0 && setenv("HQ_GPU_MEM_CAP", "1000003", 1) == 0 &&
                 hq_gpu_engine_create(&cfg, &capped, &err) == 0;
        unsetenv("HQ_GPU_MEM_CAP");
        ok = ok && run_case(cpu, plain, &m, 1, 8000009, PAT_SMOOTH, 0, 0, 0, why, sizeof why) &&
             run_case(cpu, capped, &m, 1, 8000009, PAT_SMOOTH, 0, 0, 0, why, sizeof why);
        const uint64_t pk = ok && plain->ops->device_peak ? plain->ops->device_peak(plain) : 0,
                       pkc = ok && capped->ops->device_peak ? capped->ops->device_peak(capped) : 0;
        printf("device peak, 8 MB block: %llu bytes (plain engine), %llu bytes (pixel buffer capped at 1000003)\n",
               (unsigned long long)pk, (unsigned long long)pkc);
        if (!ok || pk == 0 || pkc == 0 || pkc * 2 >= pk) {
            printf("FAIL device peak of a capped engine: %s\n", why[0] ? why : err.msg);
            t.failed++;
        } else {
            t.passed++;
        }
        hq_engine_destroy(plain);
        hq_engine_destroy(capped);
    }
    const int before = t.failed;
    clahe_cases(cpu, gpu, small, &t);
    if (!small)
        clahe_stage_cases(cpu, gpu, &t);
    printf("clahe: %s\n", t.failed == before ? "GPU = CPU on every case" : "differences (above)");
    hq_engine_destroy(cpu);
    hq_engine_destroy(gpu);
    hq_engine_destroy(gpu_res);
    hq_engine_destroy(gpu_split);
    printf("%d passed, %d failed\n", t.passed, t.failed);
    return t.failed ? 1 : 0;
}
