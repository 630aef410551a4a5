/* replay.c — a main() for the fuzz harnesses without libFuzzer, so that CI (gcc, no clang) runs
 * every kept input through the same LLVMFuzzerTestOneInput under AddressSanitizer and UBSan.
 *
 *     replay_png FILE|DIR...     each FILE, and each regular file directly in each DIR (name order)
 *
 * An input that crashes aborts the run (the sanitizer names it after "== INPUT"); one that runs
 * longer than HQ_FUZZ_TIMEOUT seconds (default 60) is a hang: SIGALRM ends the process. With
 * HQ_FUZZ_LOOP=N every input is run N times and the resident set size printed after each pass
 * over all of them, to show whether memory grows per input (a leak the sanitizers cannot see, such
 * as an identifier or a buffer freed only at exit). Built with LeakSanitizer, leaks are checked
 * after every input. */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* LeakSanitizer, when linked in (weak: a build without it links too). */
int __lsan_do_recoverable_leak_check(void) __attribute__((weak));

typedef struct list {
    char **v;
    size_t n, cap;
} list;

static void push(list *l, const char *s)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 64;
        l->v = realloc(l->v, l->cap * sizeof *l->v);
    }
    if (!l->v || !(l->v[l->n++] = strdup(s))) {
        fprintf(stderr, "replay: out of memory\n");
        exit(2);
    }
}

static int cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void add_path(list *l, const char *p)
{
    struct stat st;
    if (stat(p, &st) != 0) {
        fprintf(stderr, "replay: %s: no such file or directory\n", p);
        exit(2);
    }
    if (!S_ISDIR(st.st_mode)) {
        push(l, p);
        return;
    }
    DIR *d = opendir(p);
    if (!d) {
        fprintf(stderr, "replay: %s: cannot open directory\n", p);
        exit(2);
    }
    const size_t first = l->n;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char full[4096];
        snprintf(full, sizeof full, "%s/%s", p, e->d_name);
        if (e->d_name[0] != '.' && stat(full, &st) == 0 && S_ISREG(st.st_mode))
            push(l, full);
    }
    closedir(d);
    qsort(l->v + first, l->n - first, sizeof *l->v, cmp);
}

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: %s: cannot open\n", path);
        exit(2);
    }
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += got;
        if (n == cap)
            buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    if (!buf) {
        fprintf(stderr, "replay: out of memory\n");
        exit(2);
    }
    *len = n;
    return buf;
}

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6))
            kib = strtol(line + 6, NULL, 10);
    if (f)
        fclose(f);
    return kib;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
        return 2;
    }
    LLVMFuzzerInitialize(&argc, &argv);
    list inputs = {0};
    for (int i = 1; i < argc; i++)
        add_path(&inputs, argv[i]);
    const char *t = getenv("HQ_FUZZ_TIMEOUT");
    const unsigned timeout = t && atoi(t) > 0 ? (unsigned)atoi(t) : 60;
    const char *lp = getenv("HQ_FUZZ_LOOP");
    const long loops = lp && atol(lp) > 0 ? atol(lp) : 1;
    for (long pass = 0; pass < loops; pass++) {
        for (size_t i = 0; i < inputs.n; i++) {
            size_t len = 0;
            uint8_t *data = slurp(inputs.v[i], &len);
            if (loops == 1)
                fprintf(stderr, "== %s\n", inputs.v[i]);
            alarm(timeout);
            LLVMFuzzerTestOneInput(data, len);
            alarm(0);
            free(data);
            /* After each input, as libFuzzer does: at exit LeakSanitizer's tracer has crashed on
             * Open MPI's threads, and a leak is easier to read next to the input that made it. */
            if (__lsan_do_recoverable_leak_check && __lsan_do_recoverable_leak_check()) {
                fprintf(stderr, "replay: %s leaked memory (above)\n", inputs.v[i]);
                return 1;
            }
        }
        if (loops > 1)
            fprintf(stderr, "pass %ld: %zu inputs, VmRSS %ld KiB\n", pass + 1, inputs.n, rss_kib());
    }
    fprintf(stderr, "replay: %zu inputs x %ld, no crash, no hang\n", inputs.n, loops);
    for (size_t i = 0; i < inputs.n; i++)
        free(inputs.v[i]);
    free(inputs.v);
    return 0;
}
