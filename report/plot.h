/* plot.h — the report's plots as inline SVG: no plotting library, no JavaScript, readable printed.
 *
 * Every plot has axes with values. Histograms are drawn from display bins (hq_plot_rebin: at most
 * HQ_PLOT_BINS bars, each the sum of 2^k adjacent levels), before and after as translucent bars on
 * one count scale, linear or log (log10(1 + count), for the huge background spikes of medical
 * images). The LUT plot shows the mapping (output level against input level) with the cumulative
 * distributions before and after on a 0..1 axis at the right. The tile LUT plot (CLAHE) shows
 * several tiles' mappings on one output-level axis, one colour each (hq_plot_color), the identity
 * dashed for reference. level0 is the value that level 0 stands for (0, or -2^(n-1) for signed
 * n-bit data, which the engines equalize offset: core/sample.h): the axes show the data's values. */
#ifndef HQ_PLOT_H
#define HQ_PLOT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define HQ_PLOT_BINS 256u

/* Display bins for a histogram of `levels` levels (a power of two): min(levels, HQ_PLOT_BINS). */
static inline uint32_t hq_plot_nbins(uint32_t levels)
{
    return levels < HQ_PLOT_BINS ? levels : HQ_PLOT_BINS;
}

/* out[i] = sum of hist over display bin i (hq_plot_nbins(levels) entries). */
void hq_plot_rebin(const uint64_t *hist, uint32_t levels, uint64_t *out);

/* Before and after display bins (n each) over `levels` input levels; after_label names the after
 * series in the legend ("after", "after (Y through the LUT)"). */
void hq_plot_histograms(FILE *f, const uint64_t *before, const uint64_t *after, uint32_t n, uint32_t levels,
                        int32_t level0, int log_scale, const char *title, const char *after_label);

/* lut and the full histograms before and after, `levels` entries each. */
void hq_plot_lut(FILE *f, const uint16_t *lut, const uint64_t *before, const uint64_t *after, uint32_t levels,
                 int32_t level0, const char *title);

/* The colour of series k of a multi-series plot, the same wherever it is used (the page outlines
 * each plotted tile on the thumbnails in its curve's colour). */
const char *hq_plot_color(size_t k);

/* n LUTs of `levels` entries each, luts[k] named names[k] in the legend and drawn in
 * hq_plot_color(k); each curve is a <polyline class="hq-tile-lut"> carrying data-series="k", so
 * that it can be told apart in the page. */
void hq_plot_tile_luts(FILE *f, const uint16_t *const *luts, const char *const *names, size_t n, uint32_t levels,
                       int32_t level0, const char *title);

#endif
