/* plumbing.c — HDF5 plumbing shared by the whole backend: silencing HDF5's own error printing,
 * closing ids, and turning HDF5's error stack into the one-line reason our messages end with.
 *
 * Contract:
 *  - hdf5_quiet turns HDF5's automatic error printing off; every entry point calls it first.
 *  - hdf5_detail must be called right after the failing HDF5 call (any other call clears the
 *    stack); it gives ": reason" (the innermost two messages, on one line) or "", and clears it.
 *  - hdf5_filter_failed tells whether the failure on the stack came from the filter pipeline (a
 *    chunk that does not decompress), leaving the stack as it is.
 *  - hdf5_verbose_from_env: HQ_VERBOSE set and not "0".
 *  - hdf5_small_metadata_cache(fapl) caps the metadata cache of a file opened with it (below). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hdf5_internal.h"

void hdf5_quiet(void)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

void hdf5_close_id(hid_t *id, herr_t (*closer)(hid_t))
{
    if (*id >= 0)
        closer(*id);
    *id = H5I_INVALID_HID;
}

typedef struct detail_ctx {
    char *buf;
    size_t len;
    int n;
} detail_ctx;

/* Keeps the innermost two messages of the error stack: the innermost alone is often too terse
 * ("MPI_File_write_at failed") while its caller says what failed in words. */
static herr_t detail_cb(unsigned n, const H5E_error2_t *e, void *data)
{
    (void)n;
    detail_ctx *c = data;
    if (!e->desc || !e->desc[0])
        return 0;
    size_t used = strlen(c->buf);
    if (c->n > 0 && used + 2 < c->len) {
        strcat(c->buf, "; ");
        used += 2;
    }
    snprintf(c->buf + used, c->len - used, "%s", e->desc);
    return ++c->n >= 2 ? 1 : 0;
}

/* HDF5 messages may span lines (the collective-I/O ones do); ours are one line. */
static void one_line(char *s)
{
    char *w = s;
    for (const char *r = s; *r; r++) {
        const char ch = (*r == '\n' || *r == '\t' || *r == '\r') ? ' ' : *r;
        if (ch == ' ' && (w == s || w[-1] == ' '))
            continue;
        *w++ = ch;
    }
    while (w > s && (w[-1] == ' ' || w[-1] == '.'))
        w--;
    *w = '\0';
}

/* The reason HDF5 gave for the failure that just happened, as ": reason" (empty if none).
 * Must be called before any other HDF5 call, which would clear the stack. */
void hdf5_detail(char *buf, size_t len)
{
    char inner[384] = "";
    detail_ctx c = {inner, sizeof inner, 0};
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, detail_cb, &c);
    H5Eclear2(H5E_DEFAULT);
    one_line(inner);
    snprintf(buf, len, "%s%s", inner[0] ? ": " : "", inner);
}

int hdf5_verbose_from_env(void)
{
    const char *v = getenv("HQ_VERBOSE");
    return v && v[0] && strcmp(v, "0") != 0;
}

/* Whether the failure on HDF5's error stack came from the filter pipeline (a chunk that does not
 * decompress: corrupt input, not an I/O error). Leaves the stack as it is. */
static herr_t pline_cb(unsigned n, const H5E_error2_t *e, void *data)
{
    (void)n;
    if (e->maj_num == H5E_PLINE)
        *(int *)data = 1;
    return 0;
}

int hdf5_filter_failed(void)
{
    int yes = 0;
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, pline_cb, &yes);
    return yes;
}

/* HDF5's metadata cache counts an entry by its size on disk, but a v1 B-tree node of a chunk
 * index lives in memory with native keys of H5O_LAYOUT_NDIMS (33) offsets each: about 18 KiB for a
 * node of 2.6 KiB on disk. With 1.10's default ceiling of 32 MiB the cache of one file grew to
 * some 250 MiB of resident memory on an image of 4 Mi chunks (the chunk index walked once by
 * H5Dget_num_chunks, chunk_index.c), outside --memory and ten times a 64M budget. The index is
 * read by our own parser and the direct path; HDF5's walks (the check, the library path's reads)
 * go down one branch at a time and need few nodes cached, so a small ceiling costs them little. */
#define MDC_MAX ((size_t)2 << 20)

void hdf5_small_metadata_cache(hid_t fapl)
{
    H5AC_cache_config_t c;
    memset(&c, 0, sizeof c);
    c.version = H5AC__CURR_CACHE_CONFIG_VERSION;
    if (fapl < 0 || H5Pget_mdc_config(fapl, &c) < 0) {
        H5Eclear2(H5E_DEFAULT);
        return;
    }
    c.max_size = MDC_MAX;
    if (c.min_size > MDC_MAX)
        c.min_size = MDC_MAX;
    c.set_initial_size = 1;
    c.initial_size = c.initial_size < c.min_size ? c.min_size : c.initial_size > MDC_MAX ? MDC_MAX : c.initial_size;
    if (H5Pset_mdc_config(fapl, &c) < 0) /* the default cache still works, only larger */
        H5Eclear2(H5E_DEFAULT);
}
