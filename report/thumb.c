#include "thumb.h"

#include <png.h>
#include <stdlib.h>
#include <string.h>

#include "../io/png/codec.h"

hq_thumb_geom hq_thumb_geometry(uint64_t img_w, uint64_t img_h, uint32_t channels, uint32_t max_side)
{
    hq_thumb_geom g = {img_w, img_h, channels, 1, 1, channels >= 3 ? 3u : 1u};
    const uint64_t longest = img_w > img_h ? img_w : img_h;
    if (!longest)
        return g;
    const uint64_t side = longest < max_side ? longest : max_side;
    /* Rounded to nearest; never 0, never more than the image's own size. */
    uint64_t w = (img_w * side + longest / 2) / longest, h = (img_h * side + longest / 2) / longest;
    g.w = (uint32_t)(w < 1 ? 1 : w > img_w ? img_w : w);
    g.h = (uint32_t)(h < 1 ? 1 : h > img_h ? img_h : h);
    return g;
}

uint32_t *hq_thumb_xmap(const hq_thumb_geom *g)
{
    uint32_t *x = malloc((g->img_w ? g->img_w : 1) * sizeof *x);
    for (uint64_t c = 0; x && c < g->img_w; c++)
        x[c] = (uint32_t)(c * g->w / g->img_w);
    return x;
}

static inline uint32_t sample_at(const void *rows, uint64_t idx, uint32_t sample_bytes, uint32_t maxv)
{
    uint32_t v = sample_bytes == 2 ? ((const uint16_t *)rows)[idx] : ((const uint8_t *)rows)[idx];
    return v > maxv ? maxv : v;
}

void hq_thumb_add(uint64_t *acc, const hq_thumb_geom *g, const uint32_t *xmap, const void *rows, uint64_t r0,
                  uint64_t r1, uint64_t c0, uint64_t c1, uint32_t sample_bytes, uint32_t maxv)
{
    const uint64_t row_samples = (c1 - c0) * g->channels;
    for (uint64_t r = r0; r < r1; r++) {
        const uint64_t ty = r * g->h / g->img_h;
        uint64_t *line = acc + ty * g->w * g->tch;
        const uint64_t base = (r - r0) * row_samples;
        for (uint64_t c = c0; c < c1; c++) {
            uint64_t *px = line + (uint64_t)xmap[c] * g->tch;
            const uint64_t s = base + (c - c0) * g->channels;
            for (uint32_t k = 0; k < g->tch; k++)
                px[k] += sample_at(rows, s + k, sample_bytes, maxv);
        }
    }
}

/* How many image rows (or columns) fall in each thumbnail row (column): n entries. */
static uint64_t *span_counts(uint64_t img, uint32_t n)
{
    uint64_t *cnt = calloc(n, sizeof *cnt);
    for (uint64_t i = 0; cnt && i < img; i++)
        cnt[i * n / img]++;
    return cnt;
}

int hq_thumb_png(const uint64_t *acc, const hq_thumb_geom *g, uint32_t maxv, const char *name, unsigned char **png,
                 size_t *len, hq_err *err)
{
    *png = NULL;
    *len = 0;
    uint64_t *rows = span_counts(g->img_h, g->h), *cols = span_counts(g->img_w, g->w);
    uint8_t *pix = malloc(hq_thumb_len(g));
    int rc = 0;
    if (!rows || !cols || !pix) {
        rc = hq_fail(err, HQ_EMEM, "%s: out of memory for a thumbnail", name);
        goto out;
    }
    const uint64_t top = maxv ? maxv : 1;
    for (uint32_t y = 0; y < g->h; y++)
        for (uint32_t x = 0; x < g->w; x++) {
            const unsigned __int128 n = (unsigned __int128)rows[y] * cols[x];
            for (uint32_t k = 0; k < g->tch; k++) {
                const size_t i = ((size_t)y * g->w + x) * g->tch + k;
                /* mean * 255 / maxv, rounded half up, in integers */
                const unsigned __int128 num = (unsigned __int128)acc[i] * 255 * 2 + n * top;
                const unsigned __int128 v = n ? num / (2 * n * top) : 0;
                pix[i] = (uint8_t)(v > 255 ? 255 : v);
            }
        }
    hq_png_info info;
    memset(&info, 0, sizeof info);
    info.width = g->w;
    info.height = g->h;
    info.color_type = g->tch == 3 ? PNG_COLOR_TYPE_RGB : PNG_COLOR_TYPE_GRAY;
    info.bit_depth = 8;
    info.channels = g->tch;
    info.sample_bytes = 1;
    info.depth = 8;
    hq_png_sink snk = {name, NULL, NULL, 0, 0};
    const hq_png_zopts z = hq_png_zopts_for_level(6);
    rc = hq_png_encode(&snk, &info, pix, NULL, &z, err);
    if (rc) {
        free(snk.buf);
    } else {
        *png = snk.buf;
        *len = snk.len;
    }
out:
    free(rows);
    free(cols);
    free(pix);
    return rc;
}
