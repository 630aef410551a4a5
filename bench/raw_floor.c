/* raw_floor.c — the least any equalizer of a raw 8-bit file must do, without HDF5 or MPI, timed
 * beside cp and cat in one run: the floor under issue 14's 2-core bar (raw 1 GiB <= 1.5x cp).
 *
 *   raw_floor IN OUT [ROUNDS [THREADS [IMAGE_MIB [COMMAND]]]]   (defaults: 7 rounds, 2 threads, 16 MiB)
 *
 * IN is read as a stack of images of IMAGE_MIB each (bench/e2e.sh's raw_1g.h5 holds 64 of
 * 4096 x 4096; its HDF5 header is counted as pixels here: a few KiB of 1 GiB). Each thread takes
 * every THREADS-th image and, into a buffer of its own reused from image to image (the cheapest
 * memory there is: no fresh page after the first image):
 *
 *   copy       pread the image, pwrite it to OUT at the same offset: the bytes through user
 *              memory, nothing computed (what any program that looks at the pixels pays)
 *   histogram  pread, the 8-bit histogram as the CPU engine counts it, pwrite of the bytes as
 *              they were: less than any equalizer does (it must also remap), so a lower bound
 *
 * beside, in the same rounds, `cp IN OUT` and `cat IN > /dev/null` run as processes, and COMMAND
 * (a shell command line that writes OUT, e.g. histeq_dist -q -i IN -o OUT --device cpu) if given. OUT is
 * removed before every run (as bench/e2e.sh does), so every run allocates its pages afresh.
 * Prints the median and minimum wall seconds of each, the median CPU seconds (user + system, all
 * threads or the child process), and the ratio of the wall medians to cp's.
 * Build: gcc -O3 -march=native -fopenmp -o build/raw_floor bench/raw_floor.c */
#define _GNU_SOURCE
#include <fcntl.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* User + system seconds of this process (who = RUSAGE_SELF) or of its waited-for children. */
static double cpu_seconds(int who)
{
    struct rusage u;
    getrusage(who, &u);
    return (double)u.ru_utime.tv_sec + 1e-6 * (double)u.ru_utime.tv_usec + (double)u.ru_stime.tv_sec +
           1e-6 * (double)u.ru_stime.tv_usec;
}

static int full_pread(int fd, uint8_t *buf, size_t n, off_t off)
{
    while (n) {
        ssize_t got = pread(fd, buf, n, off);
        if (got <= 0)
            return -1;
        buf += got, n -= (size_t)got, off += got;
    }
    return 0;
}

static int full_pwrite(int fd, const uint8_t *buf, size_t n, off_t off)
{
    while (n) {
        ssize_t put = pwrite(fd, buf, n, off);
        if (put <= 0)
            return -1;
        buf += put, n -= (size_t)put, off += put;
    }
    return 0;
}

/* The histogram alone, as the CPU engine counts 8-bit gray (engine/cpu/histogram.c: eight
 * sub-histograms, one byte of each 8-byte load in each); the counts go nowhere but a checksum. */
static uint64_t histogram(const uint8_t *p, size_t n)
{
    static _Thread_local uint32_t h[8][256];
    memset(h, 0, sizeof h);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint8_t q[8];
        memcpy(q, p + i, 8);
        h[0][q[0]]++, h[1][q[4]]++, h[2][q[1]]++, h[3][q[5]]++;
        h[4][q[2]]++, h[5][q[6]]++, h[6][q[3]]++, h[7][q[7]]++;
    }
    for (; i < n; i++)
        h[i & 7][p[i]]++;
    uint64_t sum = 0;
    for (int v = 0; v < 256; v++)
        for (int k = 0; k < 8; k++)
            sum += (uint64_t)h[k][v] * (uint64_t)v;
    return sum;
}

/* One run of a way (0 copy, 1 with the histogram); its wall seconds, or -1. */
static double run_way(int way, const char *in, const char *out, int threads, size_t image)
{
    unlink(out);
    const double t0 = now();
    int fi = open(in, O_RDONLY), fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    struct stat st;
    if (fi < 0 || fo < 0 || fstat(fi, &st) != 0)
        return -1;
    const size_t size = (size_t)st.st_size, nimg = (size + image - 1) / image;
    int bad = 0;
    uint64_t sink = 0;
#pragma omp parallel num_threads(threads) reduction(| : bad) reduction(+ : sink)
    {
        uint8_t *buf = malloc(image);
        bad |= !buf;
#pragma omp for schedule(static, 1)
        for (size_t k = 0; k < nimg; k++) {
            const off_t off = (off_t)(k * image);
            const size_t n = size - k * image < image ? size - k * image : image;
            if (bad || full_pread(fi, buf, n, off) != 0) {
                bad = 1;
                continue;
            }
            if (way == 1)
                sink += histogram(buf, n);
            bad |= full_pwrite(fo, buf, n, off) != 0;
        }
        free(buf);
    }
    bad |= close(fo) != 0;
    close(fi);
    const double t = now() - t0;
    return bad || sink == UINT64_MAX ? -1 : t;
}

static double run_cmd(const char *cmd, const char *out)
{
    unlink(out);
    const double t0 = now();
    const int rc = system(cmd);
    const double t = now() - t0;
    return rc == 0 ? t : -1;
}

static int cmp_d(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: raw_floor IN OUT [ROUNDS [THREADS [IMAGE_MIB [COMMAND]]]]\n");
        return 2;
    }
    const char *in = argv[1], *out = argv[2];
    const int rounds = argc > 3 ? atoi(argv[3]) : 7, threads = argc > 4 ? atoi(argv[4]) : 2;
    const size_t image = (size_t)(argc > 5 ? atoi(argv[5]) : 16) << 20;
    if (rounds < 1 || threads < 1 || image == 0)
        return 2;
    char cp[8192], cat[8192];
    snprintf(cp, sizeof cp, "cp '%s' '%s'", in, out);
    snprintf(cat, sizeof cat, "cat '%s' > /dev/null", in);
    const char *cmd = argc > 6 ? argv[6] : NULL;
    enum { CAT, CP, COPY1, COPYT, EQ1, EQT, CMD, NALL };
    const char *names[NALL] = {"cat", "cp", "pread+pwrite, 1 thread", "pread+pwrite, T threads",
                               "pread+histogram+pwrite, 1 thread", "pread+histogram+pwrite, T threads", cmd};
    const int NWAYS = cmd ? NALL : CMD;
    double *t = calloc((size_t)NALL * (size_t)rounds, sizeof *t), *u = calloc((size_t)NALL * (size_t)rounds, sizeof *u);
    if (!t || !u)
        return 1;
    for (int r = 0; r < rounds; r++) {
        for (int w = 0; w < NWAYS; w++) {
            const int k = (w + r) % NWAYS; /* the order rotated round to round */
            const int who = k == CAT || k == CP || k == CMD ? RUSAGE_CHILDREN : RUSAGE_SELF;
            const double c0 = cpu_seconds(who);
            double s = k == CAT   ? run_cmd(cat, out)
                       : k == CP  ? run_cmd(cp, out)
                       : k == CMD ? run_cmd(cmd, out)
                                 : run_way(k >= EQ1, in, out, k == COPYT || k == EQT ? threads : 1, image);
            if (s < 0) {
                fprintf(stderr, "raw_floor: %s failed\n", names[k]);
                return 1;
            }
            t[k * rounds + r] = s;
            u[k * rounds + r] = cpu_seconds(who) - c0;
        }
    }
    unlink(out);
    double med[NALL], cpu[NALL];
    for (int w = 0; w < NWAYS; w++) {
        qsort(t + w * rounds, (size_t)rounds, sizeof *t, cmp_d);
        qsort(u + w * rounds, (size_t)rounds, sizeof *u, cmp_d);
        med[w] = t[w * rounds + rounds / 2];
        cpu[w] = u[w * rounds + rounds / 2];
    }
    printf("raw_floor: %s, %d rounds, T = %d threads, images of %zu MiB\n", in, rounds, threads, image >> 20);
    printf("| what | median s | min s | median CPU s | x cp |\n|---|---|---|---|---|\n");
    for (int w = 0; w < NWAYS; w++)
        printf("| %s | %.3f | %.3f | %.3f | %.2f |\n", names[w], med[w], t[w * rounds], cpu[w], med[w] / med[CP]);
    free(t);
    free(u);
    return 0;
}
