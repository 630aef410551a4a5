/* error.h — how every module reports failure.
 *
 * Contract: a function that can fail returns 0 on success or an HQ_E* code, and fills the caller's
 * hq_err with one line "PATH: what is wrong" (no program name, no newline: control characters a
 * name brings in become '?'). Only app/ prints it,
 * prefixed with "histeq_dist: ". The codes double as the process exit status. */
#ifndef HQ_ERROR_H
#define HQ_ERROR_H

#include <stdarg.h>

enum {
    HQ_OK = 0,
    HQ_EIO = 1,      /* a file could not be read or written, or a library call failed */
    HQ_EUSAGE = 2,   /* bad command line, or options that contradict each other */
    HQ_ESKIPPED = 3, /* --on-error skip: the run finished but some inputs were left out */
    HQ_EINPUT = 4,   /* an input exists but is not something we can equalize */
    HQ_EDEVICE = 5,  /* the requested engine is not available (no GPU, CUDA error) */
    HQ_EMEM = 6,     /* out of memory, or a budget too small for one block */
};

typedef struct hq_err {
    char msg[1024];
} hq_err;

/* Formats msg into e (if e is non-NULL) and returns code, so callers can write
 * `return hq_fail(err, HQ_EIO, "%s: cannot open", path);`. */
int hq_fail(hq_err *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Where a failure reached through another source (a --mask list's entry, say) does not already
 * begin with that source's name `src`: puts "what src: " in front of e's line, so that it says
 * which option brought the file in. Returns code. */
int hq_fail_within(hq_err *e, int code, const char *what, const char *src);

#endif
