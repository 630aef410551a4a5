/* write_paths.c — how fast can P processes of one host write their disjoint parts of ONE file?
 *
 *   write_paths DIR GIB_PER_PROC P
 *
 * For each way of writing, runs 1 process, then P processes at once (fork), each writing
 * GIB_PER_PROC GiB into its own region of a shared file in DIR that was preallocated with
 * fallocate (as histeq_dist reserves its output), and prints the aggregate GB/s and the ratio
 * P-process rate / (P x 1-process rate), i.e. the weak-scaling efficiency of that write path:
 *
 *   pwrite       1 MiB pwrite calls (what HDF5's MPI-IO driver issues)
 *   mmap         memcpy into a MAP_SHARED mapping of the region, faulted page by page
 *   mmap+popul   the same after MADV_POPULATE_WRITE on each 64 MiB window
 *   own-file     1 MiB pwrites, but each process into a file of its own (the no-sharing ceiling)
 *   direct       8 MiB O_DIRECT pwrites from an aligned buffer (ext4 and XFS take the inode lock
 *                shared for aligned direct writes inside the file's size into allocated blocks,
 *                so the processes' writes may go side by side; the bytes go to the device)
 *   direct-own   the same, each process into a file of its own
 *
 * and, into a file that is only sized first (sparse), the allocation alone, nothing copied:
 *
 *   alloc:falloc   each process fallocates its region (what reserve_bg.c's slices do)
 *   alloc:popul    each process maps its region and MADV_POPULATE_WRITEs it, 64 MiB at a time
 *   alloc:own      fallocate, each process into a file of its own
 *
 * Why: buffered writes to one inode take its lock (i_rwsem) on tmpfs, ext4 and XFS, so ranks on
 * one host that write one shared file queue behind each other; stores through a shared mapping
 * take only page locks. bench/results/scaling.txt holds its numbers on the 4-GPU host, and what
 * came of trying mappings inside histeq_dist (they lost there; see bench/README.md). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define PIECE (1u << 20)
#define DIRECT_PIECE (8u << 20)
#define WINDOW (64u << 20)

enum { PWRITE, MMAP, MMAP_POPULATE, OWN_FILE, DIRECT, DIRECT_OWN, ALLOC_FALLOC, ALLOC_POPULATE, ALLOC_OWN, NMODES };
static const char *mode_name[NMODES] = {"pwrite",       "mmap",        "mmap+popul", "own-file", "direct", "direct-own",
                                        "alloc:falloc", "alloc:popul", "alloc:own"};

static int own_file(int mode)
{
    return mode == OWN_FILE || mode == ALLOC_OWN || mode == DIRECT_OWN;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int writer(int mode, const char *path, int own, uint64_t off, uint64_t bytes, const unsigned char *src)
{
    const int direct = mode == DIRECT || mode == DIRECT_OWN;
    int fd = open(path, O_RDWR | (direct ? O_DIRECT : 0));
    if (fd < 0)
        return perror(path), 1;
    if (own)
        off = 0;
    if (mode == ALLOC_FALLOC || mode == ALLOC_OWN) {
        for (uint64_t done = 0; done < bytes; done += WINDOW)
            if (fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t)(off + done), WINDOW) != 0)
                return perror("fallocate"), 1;
    } else if (mode == ALLOC_POPULATE) {
        for (uint64_t w = 0; w < bytes; w += WINDOW) {
            unsigned char *m = mmap(NULL, WINDOW, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)(off + w));
            if (m == MAP_FAILED)
                return perror("mmap"), 1;
            if (madvise(m, WINDOW, MADV_POPULATE_WRITE) != 0)
                return perror("madvise(MADV_POPULATE_WRITE)"), 1;
            munmap(m, WINDOW);
        }
    } else if (direct || mode == PWRITE || mode == OWN_FILE) {
        const size_t piece = direct ? DIRECT_PIECE : PIECE;
        for (uint64_t done = 0; done < bytes; done += piece)
            if (pwrite(fd, src + done % WINDOW, piece, (off_t)(off + done)) != (ssize_t)piece)
                return perror(direct ? "pwrite (O_DIRECT)" : "pwrite"), 1;
    } else {
        for (uint64_t w = 0; w < bytes; w += WINDOW) {
            const size_t len = bytes - w < WINDOW ? bytes - w : WINDOW;
            unsigned char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)(off + w));
            if (m == MAP_FAILED)
                return perror("mmap"), 1;
            if (mode == MMAP_POPULATE && madvise(m, len, MADV_POPULATE_WRITE) != 0)
                return perror("madvise(MADV_POPULATE_WRITE)"), 1;
            for (size_t d = 0; d < len; d += PIECE)
                memcpy(m + d, src + d, PIECE);
            munmap(m, len);
        }
    }
    close(fd);
    return 0;
}

/* Returns the aggregate GB/s of p processes, or -1. */
static double run(int mode, const char *dir, int p, uint64_t per, const unsigned char *src)
{
    char path[4096];
    for (int i = 0; i < p; i++) {
        snprintf(path, sizeof path, "%s/write_paths.%d", dir, own_file(mode) ? i : 0);
        if (!own_file(mode) && i > 0)
            break;
        unlink(path);
        int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
        const uint64_t size = own_file(mode) ? per : per * (uint64_t)p;
        const int sparse = mode >= ALLOC_FALLOC;
        if (fd < 0 || (sparse ? ftruncate(fd, (off_t)size) : posix_fallocate(fd, 0, (off_t)size)) != 0)
            return perror(path), -1.0;
        close(fd);
    }
    const double t0 = now();
    for (int i = 0; i < p; i++) {
        if (fork() == 0) {
            snprintf(path, sizeof path, "%s/write_paths.%d", dir, own_file(mode) ? i : 0);
            _exit(writer(mode, path, own_file(mode), per * (uint64_t)i, per, src));
        }
    }
    int bad = 0, st;
    while (wait(&st) > 0)
        bad |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    const double t = now() - t0;
    for (int i = 0; i < p; i++) {
        snprintf(path, sizeof path, "%s/write_paths.%d", dir, i);
        unlink(path);
    }
    return bad ? -1.0 : (double)per * p / t / 1e9;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: write_paths DIR GIB_PER_PROC P\n");
        return 2;
    }
    const uint64_t per = (uint64_t)(atof(argv[2]) * (1 << 30)) / WINDOW * WINDOW;
    const int p = atoi(argv[3]);
    if (per == 0 || p < 1) {
        fprintf(stderr, "write_paths: need at least 64 MiB a process and P >= 1\n");
        return 2;
    }
    unsigned char *src = NULL;
    if (posix_memalign((void **)&src, 4096, WINDOW) != 0) /* O_DIRECT needs aligned buffers */
        return 1;
    for (size_t i = 0; i < WINDOW; i++)
        src[i] = (unsigned char)(i * 131 + (i >> 12));
    printf("# write_paths %s %s %d: %.2f GiB a process, one shared file (own: one each), fallocated first (alloc: sized only)\n",
           argv[1], argv[2], p, per / 1073741824.0);
    printf("%-12s %12s %12s %11s\n", "path", "1 proc GB/s", "P procs GB/s", "efficiency");
    for (int m = 0; m < NMODES; m++) {
        const double one = run(m, argv[1], 1, per, src), many = run(m, argv[1], p, per, src);
        if (one < 0 || many < 0)
            printf("%-12s %12s\n", mode_name[m], "failed");
        else
            printf("%-12s %12.2f %12.2f %10.1f%%\n", mode_name[m], one, many, 100.0 * many / (p * one));
        fflush(stdout);
    }
    free(src);
    return 0;
}
