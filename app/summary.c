#include "summary.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A JSON string: quotes, backslashes and control bytes escaped; other bytes pass through (paths
 * are bytes, and JSON readers accept UTF-8). */
static void put_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

static void put_field(FILE *f, const char *key, const char *val, int last)
{
    fprintf(f, "  \"%s\": ", key);
    put_str(f, val);
    fputs(last ? "\n" : ",\n", f);
}

/* The temporary name the summary is written under: PATH.part (malloc'd). */
static char *part_path(const char *path)
{
    size_t n = strlen(path) + sizeof ".part";
    char *tmp = malloc(n);
    if (tmp)
        snprintf(tmp, n, "%s.part", path);
    return tmp;
}

int hq_summary_check(const char *path, hq_err *err)
{
    char *tmp = part_path(path);
    if (!tmp)
        return hq_fail(err, HQ_EMEM, "%s: out of memory", path);
    FILE *f = fopen(tmp, "w");
    int rc = f ? 0 : hq_fail(err, HQ_EIO, "%s: cannot write (%s)", path, strerror(errno));
    if (f) {
        fclose(f);
        unlink(tmp);
    }
    free(tmp);
    return rc;
}

int hq_summary_write(const char *path, const hq_summary *s, hq_err *err)
{
    char *tmp = part_path(path);
    if (!tmp)
        return hq_fail(err, HQ_EMEM, "%s: out of memory", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        int rc = hq_fail(err, HQ_EIO, "%s: cannot write (%s)", path, strerror(errno));
        free(tmp);
        return rc;
    }
    fputs("{\n", f);
    put_field(f, "version", s->version, 0);
    put_field(f, "input", s->input, 0);
    put_field(f, "output", s->output, 0);
    put_field(f, "engine", s->engine, 0);
    put_field(f, "scope", s->scope, 0);
    put_field(f, "method", s->method, 0);
    put_field(f, "color", s->color, 0);
    fprintf(f, "  \"ranks\": %d,\n  \"images\": %llu,\n  \"pixels\": %llu,\n  \"bytes\": %llu,\n  \"skipped\": %llu,\n",
            s->ranks, (unsigned long long)s->images, (unsigned long long)s->pixels, (unsigned long long)s->bytes,
            (unsigned long long)s->skipped);
    fprintf(f, "  \"wall_s\": %.6f,\n  \"mib_per_s\": %.3f,\n", s->wall_s,
            s->wall_s > 0 ? (double)s->bytes / 1048576.0 / s->wall_s : 0.0);
    fprintf(f, "  \"peak_rss_bytes\": %llu,\n", (unsigned long long)s->peak_rss);
    if (s->has_device_peak)
        fprintf(f, "  \"device_peak_bytes\": %llu,\n", (unsigned long long)s->device_peak);
    else
        fputs("  \"device_peak_bytes\": null,\n", f);
    fputs("  \"phases\": {\n", f);
    for (int k = 0; k < HQ_SUMMARY_PHASES; k++)
        fprintf(f, "    \"%s\": {\"max_s\": %.6f, \"mean_s\": %.6f}%s\n", s->phase_names[k], s->phase_max[k],
                s->phase_mean[k], k + 1 < HQ_SUMMARY_PHASES ? "," : "");
    fputs("  }\n}\n", f);
    int bad = ferror(f);
    bad |= fclose(f) != 0;
    int rc = 0;
    if (bad || rename(tmp, path) != 0) {
        rc = hq_fail(err, HQ_EIO, "%s: cannot write (%s)", path, strerror(errno));
        unlink(tmp);
    }
    free(tmp);
    return rc;
}
