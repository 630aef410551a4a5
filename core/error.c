#include "error.h"

#include <stdio.h>
#include <string.h>

int hq_fail(hq_err *e, int code, const char *fmt, ...)
{
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
        /* One line whatever a path or a dataset name holds: a newline in a name (legal in POSIX
         * paths and HDF5 names) would split the error, and a terminal's escapes would run. */
        for (char *c = e->msg; *c; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f)
                *c = '?';
    }
    return code;
}

int hq_fail_within(hq_err *e, int code, const char *what, const char *src)
{
    if (e && src && (strncmp(e->msg, src, strlen(src)) != 0 || e->msg[strlen(src)] != ':')) {
        char line[sizeof e->msg];
        snprintf(line, sizeof line, "%s", e->msg);
        hq_fail(e, code, "%s %s: %s", what, src, line);
    }
    return code;
}
