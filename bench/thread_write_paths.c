/* thread_write_paths.c — how fast can the T threads of ONE process fill a new file (as histeq_dist's
 * workers fill its output), by each way the program could do it?
 *
 *   thread_write_paths DIR GIB T
 *
 * Every way writes GIB GiB from a buffer in memory into a new file in DIR, cut into 4 MiB pieces
 * that the T threads take in turn, and prints the seconds of its phases:
 *
 *   falloc+pwrite     fallocate by one thread, then pwrite of the pieces (histeq_dist before)
 *   falloc+pwrite1    the same with one writer at a time (a mutex): the file lock uncontended
 *   populate+memcpy   the file grown with ftruncate, mapped, every thread populating a share with
 *                     MADV_POPULATE_WRITE, then memcpy into the mapping, then munmap
 *   falloc+memcpy     fallocate by one thread, mapped, memcpy (each page faulted in by the copy)
 *   falloc+mcpy+zap   the same, each piece's pages unmapped (MADV_DONTNEED) by its thread right
 *                     after its copy, so that munmap finds nothing left to tear down
 *
 * Why: on tmpfs a file's page allocation serializes on locks of that file whatever the number of
 * threads, and pwrite takes the file's lock, while stores through a mapping into pages that exist
 * take neither. Which combination is fastest is for the machine to say (bench/results/). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#define PIECE ((size_t)4 << 20)

enum { FALLOC_PWRITE, FALLOC_PWRITE1, POPULATE_MEMCPY, FALLOC_MEMCPY, FALLOC_MEMCPY_ZAP, NWAYS };
static const char *way_name[NWAYS] = {"falloc+pwrite", "falloc+pwrite1", "populate+memcpy", "falloc+memcpy",
                                      "falloc+mcpy+zap"};

typedef struct job {
    int way, fd, threads;
    unsigned char *map;
    const unsigned char *src;
    size_t bytes, next;
    pthread_mutex_t mu, one;
    int err;
} job;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static size_t take(job *j)
{
    pthread_mutex_lock(&j->mu);
    const size_t at = j->next;
    j->next += PIECE;
    pthread_mutex_unlock(&j->mu);
    return at;
}

static void *writer(void *arg)
{
    job *j = arg;
    for (size_t at; (at = take(j)) < j->bytes;) {
        const size_t n = j->bytes - at < PIECE ? j->bytes - at : PIECE;
        if (j->way == FALLOC_PWRITE || j->way == FALLOC_PWRITE1) {
            if (j->way == FALLOC_PWRITE1)
                pthread_mutex_lock(&j->one);
            if (pwrite(j->fd, j->src + at, n, (off_t)at) != (ssize_t)n)
                j->err = 1;
            if (j->way == FALLOC_PWRITE1)
                pthread_mutex_unlock(&j->one);
        } else {
            memcpy(j->map + at, j->src + at, n);
            if (j->way == FALLOC_MEMCPY_ZAP)
                madvise(j->map + at, n, MADV_DONTNEED);
        }
    }
    return NULL;
}

static void *populater(void *arg)
{
    job *j = arg;
    for (size_t at; (at = take(j)) < j->bytes;) {
        const size_t n = j->bytes - at < PIECE ? j->bytes - at : PIECE;
        if (madvise(j->map + at, n, MADV_POPULATE_WRITE) != 0)
            j->err = 1;
    }
    return NULL;
}

static void run_threads(job *j, void *(*fn)(void *))
{
    pthread_t tid[256];
    j->next = 0;
    for (int t = 0; t < j->threads; t++)
        pthread_create(&tid[t], NULL, fn, j);
    for (int t = 0; t < j->threads; t++)
        pthread_join(tid[t], NULL);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: thread_write_paths DIR GIB THREADS\n");
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/thread_write_paths.tmp", argv[1]);
    const size_t bytes = (size_t)(atof(argv[2]) * (double)(1ull << 30)) / PIECE * PIECE;
    const int threads = atoi(argv[3]) < 1 ? 1 : atoi(argv[3]) > 256 ? 256 : atoi(argv[3]);
    unsigned char *src = malloc(bytes);
    if (!src)
        return 1;
    for (size_t i = 0; i < bytes; i += 4096)
        memset(src + i, (int)(i >> 12), 4096);
    printf("# thread_write_paths %s %s %d: %.2f GiB from memory into a new file, %d threads, 4 MiB pieces\n",
           argv[1], argv[2], threads, bytes / (double)(1ull << 30), threads);
    printf("%-17s %9s %9s %9s %9s %8s\n", "way", "alloc_s", "write_s", "unmap_s", "total_s", "GB/s");
    for (int w = 0; w < NWAYS; w++) {
        unlink(path);
        job j = {.way = w, .threads = threads, .src = src, .bytes = bytes};
        pthread_mutex_init(&j.mu, NULL);
        pthread_mutex_init(&j.one, NULL);
        j.fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
        const double t0 = now();
        if (w == POPULATE_MEMCPY) {
            if (ftruncate(j.fd, (off_t)bytes) != 0)
                j.err = 1;
        } else if (fallocate(j.fd, 0, 0, (off_t)bytes) != 0) {
            j.err = 1;
        }
        if (w >= POPULATE_MEMCPY) {
            j.map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, j.fd, 0);
            if (j.map == MAP_FAILED) {
                perror("mmap");
                return 1;
            }
            if (w == POPULATE_MEMCPY)
                run_threads(&j, populater);
        }
        const double t1 = now();
        run_threads(&j, writer);
        const double t2 = now();
        if (j.map)
            munmap(j.map, bytes);
        const double t3 = now();
        close(j.fd);
        printf("%-17s %9.3f %9.3f %9.3f %9.3f %8.2f%s\n", way_name[w], t1 - t0, t2 - t1, t3 - t2, t3 - t0,
               bytes / (t3 - t0) / 1e9, j.err ? "  (an error)" : "");
        unlink(path);
    }
    free(src);
    return 0;
}
