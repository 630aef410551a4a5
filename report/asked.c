/* asked.c — what the run was asked to do, as the record keeps it: the command line as typed (quoted
 * where a shell would need it) and every option's value. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report_internal.h"

void rep_add(char **buf, size_t *len, size_t *cap, const char *s)
{
    const size_t n = strlen(s);
    if (!*buf || *len + n + 1 > *cap) {
        size_t c = (*cap ? *cap * 2 : 256) + n;
        char *b = realloc(*buf, c);
        if (!b)
            return;
        *buf = b;
        *cap = c;
    }
    memcpy(*buf + *len, s, n + 1);
    *len += n;
}

/* An argument as a POSIX shell reads it: bare when it is made of safe characters, else quoted. */
static void add_arg(char **buf, size_t *len, size_t *cap, const char *a)
{
    if (*len)
        rep_add(buf, len, cap, " ");
    int bare = a[0] != '\0';
    for (const char *p = a; *p && bare; p++)
        bare = strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_./:=+,@%", *p) != NULL;
    if (bare) {
        rep_add(buf, len, cap, a);
        return;
    }
    rep_add(buf, len, cap, "'");
    for (const char *p = a; *p; p++) {
        char one[2] = {*p, 0};
        rep_add(buf, len, cap, *p == '\'' ? "'\\''" : one);
    }
    rep_add(buf, len, cap, "'");
}

/* This process's argv, from /proc/self/cmdline (Linux); NULL where there is none. */
char *rep_command_line(void)
{
    FILE *f = fopen("/proc/self/cmdline", "rb");
    if (!f)
        return NULL;
    char *raw = NULL, *out = NULL;
    size_t n = 0, cap = 0, len = 0, ocap = 0;
    int ch;
    while ((ch = fgetc(f)) != EOF) {
        if (n + 1 >= cap) {
            char *b = realloc(raw, cap = cap ? cap * 2 : 1024);
            if (!b)
                break;
            raw = b;
        }
        raw[n++] = (char)ch;
    }
    fclose(f);
    for (size_t i = 0; raw && i < n; i += strlen(raw + i) + 1) {
        raw[n] = '\0';
        add_arg(&out, &len, &ocap, raw + i);
    }
    free(raw);
    return out;
}

/* The settings that decide the output, defaults resolved, as a command line. */
char *rep_options_line(const hq_report *r)
{
    static const char *const DEV[] = {"auto", "cpu", "gpu", "copy"};
    const hq_options *o = r->cfg.o;
    char *s = NULL, num[32];
    size_t len = 0, cap = 0;
    const char *pairs[][2] = {{"--input", o->input},
                              {"--output", o->output},
                              {"--scope", hq_scope_name(r->cfg.scope)},
                              {"--color", hq_color_name(o->color)},
                              {"--method", hq_method_name(o->method)},
                              {"--device", DEV[o->device]},
                              {"--on-error", o->on_error == HQ_ONERR_SKIP ? "skip" : "stop"}};
    const int color = hq_inventory_has_color(r->cfg.inv); /* gray data: --color decides nothing */
    for (size_t k = 0; k < sizeof pairs / sizeof *pairs; k++) {
        if (!color && !strcmp(pairs[k][0], "--color"))
            continue;
        add_arg(&s, &len, &cap, pairs[k][0]);
        add_arg(&s, &len, &cap, pairs[k][1]);
    }
    if (o->bits) {
        snprintf(num, sizeof num, "%u", o->bits);
        add_arg(&s, &len, &cap, "--bits");
        add_arg(&s, &len, &cap, num);
    }
    if (r->has_float) {
        snprintf(num, sizeof num, "%u", o->fbins);
        add_arg(&s, &len, &cap, "--bins");
        add_arg(&s, &len, &cap, num);
    }
    if (r->has_float && o->range_set) {
        char range[64];
        snprintf(range, sizeof range, "%.17g:%.17g", o->range_lo, o->range_hi);
        add_arg(&s, &len, &cap, "--range");
        add_arg(&s, &len, &cap, range);
    }
    if (o->reference) {
        add_arg(&s, &len, &cap, "--reference");
        add_arg(&s, &len, &cap, o->reference);
    }
    if (o->ignore) {
        snprintf(num, sizeof num, "%u:%u", o->ignore_lo, o->ignore_hi);
        add_arg(&s, &len, &cap, "--ignore");
        add_arg(&s, &len, &cap, num);
    }
    if (o->mask) {
        add_arg(&s, &len, &cap, "--mask");
        add_arg(&s, &len, &cap, o->mask);
    }
    if (o->mask || o->ignore) {
        add_arg(&s, &len, &cap, "--mask-apply");
        add_arg(&s, &len, &cap, o->mask_inside ? "inside" : "all");
    }
    if (o->method == HQ_METHOD_CLAHE) {
        if (o->clahe.tile) {
            snprintf(num, sizeof num, "%llu", (unsigned long long)o->clahe.tile);
            add_arg(&s, &len, &cap, "--clahe-tile");
        } else {
            snprintf(num, sizeof num, "%llux%llu", (unsigned long long)o->clahe.grid_y,
                     (unsigned long long)o->clahe.grid_x);
            add_arg(&s, &len, &cap, "--clahe-grid");
        }
        add_arg(&s, &len, &cap, num);
        snprintf(num, sizeof num, "%.17g", o->clahe.clip);
        add_arg(&s, &len, &cap, "--clip-limit");
        add_arg(&s, &len, &cap, num);
    }
    if (o->no_luts) {
        add_arg(&s, &len, &cap, "--luts");
        add_arg(&s, &len, &cap, "none");
    }
    return s;
}
