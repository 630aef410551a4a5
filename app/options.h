/* options.h — the command line, parsed into one struct; every default is decided here.
 *
 * hq_options_parse returns 0 and fills *o, or HQ_EUSAGE with a one-line reason in err; for
 * --help and --version it prints (when `print` is set, i.e. on rank 0) and sets o->exit_now. */
#ifndef HQ_OPTIONS_H
#define HQ_OPTIONS_H

#include <stdint.h>

#include "../core/clahe.h"
#include "../core/error.h"
#include "../core/mode.h"

typedef enum { HQ_DEV_AUTO = 0, HQ_DEV_CPU = 1, HQ_DEV_GPU = 2, HQ_DEV_COPY = 3 } hq_device;
typedef enum { HQ_ONERR_STOP = 0, HQ_ONERR_SKIP = 1 } hq_on_error;

typedef struct hq_options {
    const char *input, *output; /* output NULL: beside the input (app/outname.h), named in hq_run */
    hq_scope scope;
    hq_color color;
    hq_method method;
    hq_clahe_cfg clahe;   /* --method clahe: grid (default 8x8) or tile side, clip limit (default 40) */
    uint32_t bits;        /* 0 = the data's own depth */
    uint32_t fbins;       /* --bins: bins of float data, 2..65536 (default 65536) */
    int range_set;        /* --range LO:HI given: float data binned over [range_lo, range_hi], no pass 0 */
    double range_lo, range_hi;
    hq_device device;
    int threads;          /* 0 = the rank's CPUs (app/placement.h) */
    int io_threads;       /* 0 = the rank's CPUs; formats that cannot take calls at once use one */
    int verbose, quiet, force;
    int png_level;        /* -1 = fast default */
    int no_luts;          /* --luts none: the output records no per-image LUTs */
    hq_on_error on_error;
    uint64_t memory;      /* per-rank budget for held blocks, bytes */
    uint64_t block_bytes; /* largest block read at once */
    int block_given;      /* --block was given: block_bytes as is, not cut down for small shares */
    double progress;      /* seconds between progress lines; 0 = none */
    const char *summary;  /* --summary FILE: the end-of-run summary as JSON, or NULL */
    int resume;           /* --resume: finish an interrupted run from its journal */
    const char *report;   /* --report DIR: HTML report with histogram/CDF plots, or NULL */
    int report_sample;    /* --report-sample N: images shown in the report (scope image) */
    int report_log;       /* --report-scale log: counts on a log axis (default linear) */
    int ignore;           /* --ignore LO[:HI]: histogrammed values in [ignore_lo, ignore_hi] are not counted */
    uint32_t ignore_lo, ignore_hi;
    const char *mask;     /* --mask SRC: FILE.h5:/dset, a PNG file or a directory of PNGs; NULL: none */
    int mask_inside;      /* --mask-apply inside: masked-out and ignored pixels are left unchanged */
    const char *reference; /* --method match: the target, an image (PNG, FILE.h5:/dset) or "global" */
    int exit_now;
    int version; /* --version: main adds what the build links (the I/O's codecs) */
} hq_options;

int hq_options_parse(int argc, char **argv, int print, hq_options *o, hq_err *err);

/* The files a run reads besides its input, as the options give them: spec[0] --mask's, spec[1]
 * --reference's; NULL where the option is absent or names no file (--reference global). */
enum { HQ_SIDE_N = 2 };
extern const char *const hq_side_option[HQ_SIDE_N]; /* "--mask", "--reference" */
void hq_side_specs(const hq_options *o, const char *spec[HQ_SIDE_N]);

/* The --help text: also the source of the man page (man/usage2man.awk, `make man`). */
const char *hq_options_usage(void);

#endif
