/* summary.h — the end-of-run summary as JSON (--summary FILE), for batch systems and dashboards
 * that should not parse log lines. Written by rank 0 under a temporary name (PATH.part-PID), then
 * renamed; a FILE that is a link is the file it names (followed as text, checked as that file); a
 * FIFO or a device is written into directly (a FIFO nobody opens within 10 s: HQ_EIO). */
#ifndef HQ_SUMMARY_H
#define HQ_SUMMARY_H

#include <stdint.h>

#include "../core/error.h"
#include "../io/inventory.h"
#include "options.h"

#define HQ_SUMMARY_PHASES 7

typedef struct hq_summary {
    const char *version, *input, *output, *engine, *scope, *method, *color;
    int ranks;
    uint64_t images, pixels, bytes, skipped;
    double wall_s;
    const char *const *phase_names;          /* HQ_SUMMARY_PHASES names */
    double phase_max[HQ_SUMMARY_PHASES];     /* seconds, max over ranks */
    double phase_mean[HQ_SUMMARY_PHASES];    /* seconds, mean over ranks */
    uint64_t peak_rss;          /* bytes: the largest peak resident set of any rank (getrusage) */
    uint64_t device_peak;       /* bytes: the most device memory any rank's engine held at once */
    int has_device_peak;        /* 0: the engine has no device memory to report (JSON null) */
} hq_summary;

int hq_summary_write(const char *path, const hq_summary *s, hq_err *err);

/* Rank 0, before the run: the summary can be written at path (a probe file made and removed), so a
 * long run does not fail at its end, and path is none of the files the run reads or writes (the
 * input, the output or a file in an output directory, its journal or lock, the --reference or
 * --mask file, the --report directory or a file in it): HQ_EUSAGE
 * naming the path otherwise, as for a directory. */
int hq_summary_check(const char *path, const hq_options *o, const hq_inventory *inv, hq_err *err);

#endif
