/* dma_paths.cu — how fast can P ranks of one host move their disjoint parts of ONE input file
 * through their GPUs and into their disjoint parts of ONE output file?
 *
 *   mpirun -np P dma_paths DIR GIB_PER_RANK [BLOCK_MIB]
 *
 * Each rank binds GPU (node-local rank % GPUs), takes GIB_PER_RANK of a shared input file in DIR
 * (written by rank 0 first, so it sits in the page cache) and moves it, block by block, host ->
 * GPU -> host into its region of a shared output file. Ways of doing it:
 *
 *   staged      fallocate the output (rank 0, whole file), pread into a pinned buffer, copy H2D,
 *               D2H into the pinned buffer, pwrite: what histeq_dist does now
 *   staged-own  staged, but each rank writes a file of its own, not reserved first (pwrite
 *               allocates the pages): one output file per rank, as HDF5's subfiling would make
 *   mapped-reg  mmap the block's input and output ranges, cudaHostRegister them (input read-only),
 *               so the GPU's DMA reads the input's page-cache pages and writes the output's; no
 *               fallocate: registering the output allocates its pages, or fails on a full disk
 *   mapped-fa   mapped-reg, but each block's output range is first reserved with fallocate (which
 *               allocates tmpfs pages under the inode lock, without clearing them)
 *   mapped-own  mapped-reg, but each rank writes a file of its own (the no-sharing ceiling)
 *   mapped-hp   mapped-reg, with MADV_HUGEPAGE on the output mapping (tmpfs honours it only when
 *               /sys/kernel/mm/transparent_hugepage/shmem_enabled allows "advise")
 *   mapped-page mmap without registering: the driver stages the pageable copies itself
 *   populate    no GPU: MADV_POPULATE_READ on the input mapping, MADV_POPULATE_WRITE on the
 *               output's, then unmap (what the kernel's page work alone costs)
 *   register-in only the input side of mapped-reg: registering pages that already exist
 *
 * Prints, per way, the slowest rank's time and the aggregate GB/s, and rank 0's split: in_s (staged:
 * the preads; mapped: mapping and registering the input), out_s (mapping and registering or
 * populating the output, mapped-fa's fallocate included), copy_s (the DMA both ways),
 * unreg+unmap_s (staged: the pwrites) and create_s (staged: the whole file's fallocate). WAYS (a
 * comma list of the names above) runs only those. Run it with 1 rank, then P, side by side;
 * bench/results/io_ceiling.txt holds what it measured on the 4-GPU host.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <cuda_runtime.h>
#include <fcntl.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define CK(x)                                                                                      \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "rank %d: %s: %s\n", rank, #x, cudaGetErrorString(e_));                 \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                          \
        }                                                                                          \
    } while (0)

static int rank, nranks;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void die(const char *what)
{
    fprintf(stderr, "rank %d: ", rank);
    perror(what);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#define MADV_POPULATE_WRITE 23
#endif

enum { STAGED, STAGED_OWN, MAPPED_REG, MAPPED_FA, MAPPED_OWN, MAPPED_HP, MAPPED_PAGE, POPULATE, REGISTER_IN, NWAYS };
static const char *way_name[NWAYS] = {"staged",     "staged-own", "mapped-reg",  "mapped-fa", "mapped-own",
                                      "mapped-hp",  "mapped-page", "populate",   "register-in"};

/* Whether name is one of the comma-separated entries of list. */
static int listed(const char *list, const char *name)
{
    const size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)) != NULL; p += n)
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (argc < 3) {
        if (rank == 0)
            fprintf(stderr, "usage: dma_paths DIR GIB_PER_RANK [BLOCK_MIB]\n");
        MPI_Finalize();
        return 2;
    }
    const uint64_t per = (uint64_t)(atof(argv[2]) * 1073741824.0) & ~(uint64_t)0xFFFFF;
    const uint64_t blk = (argc > 3 ? strtoull(argv[3], NULL, 10) : 256) << 20;
    char in_path[4096], out_path[4096];
    snprintf(in_path, sizeof in_path, "%s/dma_in", argv[1]);
    snprintf(out_path, sizeof out_path, "%s/dma_out", argv[1]);

    MPI_Comm node;
    int local, ngpu;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local);
    CK(cudaGetDeviceCount(&ngpu));
    CK(cudaSetDevice(local % ngpu));
    int ro = 0;
    CK(cudaDeviceGetAttribute(&ro, cudaDevAttrHostRegisterReadOnlySupported, local % ngpu));

    unsigned char *dev, *pin;
    CK(cudaMalloc((void **)&dev, blk));
    CK(cudaHostAlloc((void **)&pin, blk, cudaHostAllocDefault));
    memset(pin, 7, blk);

    if (rank == 0) {
        int fd = open(in_path, O_RDWR | O_CREAT | O_TRUNC, 0644);
        if (fd < 0)
            die(in_path);
        for (uint64_t o = 0; o < per * nranks; o += blk)
            if (pwrite(fd, pin, blk, (off_t)o) != (ssize_t)blk)
                die("pwrite input");
        close(fd);
        FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/shmem_enabled", "r");
        char line[256] = "unknown";
        if (f && fgets(line, sizeof line, f))
            line[strcspn(line, "\n")] = 0;
        if (f)
            fclose(f);
        printf("# dma_paths %s %.2f GiB a rank, %llu MiB blocks, %d rank(s), %d GPU(s); read-only register %s; shmem THP: %s\n",
               argv[1], per / 1073741824.0, (unsigned long long)(blk >> 20), nranks, ngpu,
               ro ? "supported" : "NOT supported", line);
        printf("way          slowest_s  agg_GB/s   r0: in_s   out_s  copy_s  unreg+unmap_s  create_s\n");
    }
    MPI_Barrier(MPI_COMM_WORLD);

    char own_path[4200];
    snprintf(own_path, sizeof own_path, "%s.%d", out_path, rank);
    const char *only = getenv("WAYS"); /* e.g. "staged,mapped-fa": run only these */
    for (int way = 0; way < NWAYS; way++) {
        if (only && !listed(only, way_name[way]))
            continue;
        const int own = way == MAPPED_OWN || way == STAGED_OWN;
        if (rank == 0 || own) {
            const char *p = own ? own_path : out_path;
            unlink(p);
            int fd = open(p, O_RDWR | O_CREAT, 0644);
            if (fd < 0 || ftruncate(fd, (off_t)(per * nranks)) != 0)
                die(p);
            close(fd);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = now();
        double t_create = 0, t_map = 0, t_out = 0, t_copy = 0, t_unmap = 0;
        int in_fd = open(in_path, O_RDONLY), out_fd = open(own ? own_path : out_path, O_RDWR);
        if (in_fd < 0 || out_fd < 0)
            die("open");
        if (way == STAGED) {
            if (rank == 0 && fallocate(out_fd, 0, 0, (off_t)(per * nranks)) != 0)
                die("fallocate");
            MPI_Barrier(MPI_COMM_WORLD);
            t_create = now() - t0;
        }
        for (uint64_t o = (uint64_t)rank * per; o < (uint64_t)(rank + 1) * per; o += blk) {
            double a = now();
            if (way == STAGED || way == STAGED_OWN) {
                if (pread(in_fd, pin, blk, (off_t)o) != (ssize_t)blk)
                    die("pread");
                double b = now();
                CK(cudaMemcpy(dev, pin, blk, cudaMemcpyHostToDevice));
                CK(cudaMemcpy(pin, dev, blk, cudaMemcpyDeviceToHost));
                double c = now();
                if (pwrite(out_fd, pin, blk, (off_t)o) != (ssize_t)blk)
                    die("pwrite");
                t_map += b - a;
                t_copy += c - b;
                t_unmap += now() - c;
                continue;
            }
            void *src = mmap(NULL, blk, PROT_READ, MAP_SHARED, in_fd, (off_t)o);
            if (src == MAP_FAILED)
                die("mmap");
            void *dst = NULL;
            if (way != REGISTER_IN) {
                dst = mmap(NULL, blk, PROT_READ | PROT_WRITE, MAP_SHARED, out_fd, (off_t)o);
                if (dst == MAP_FAILED)
                    die("mmap");
            }
            if (way == POPULATE) {
                if (madvise(src, blk, MADV_POPULATE_READ) != 0)
                    die("MADV_POPULATE_READ");
            } else if (way != MAPPED_PAGE) {
                CK(cudaHostRegister(src, blk, ro ? cudaHostRegisterReadOnly : cudaHostRegisterDefault));
            }
            double a2 = now();
            if (way == MAPPED_FA && fallocate(out_fd, 0, (off_t)o, (off_t)blk) != 0)
                die("fallocate");
            if (way == MAPPED_HP)
                madvise(dst, blk, MADV_HUGEPAGE);
            if (way == POPULATE) {
                if (madvise(dst, blk, MADV_POPULATE_WRITE) != 0)
                    die("MADV_POPULATE_WRITE");
                memset(dst, 7, 4096); /* the check below reads one byte per block */
                memcpy((char *)dst + blk / 2, pin, 1);
            } else if (dst && way != MAPPED_PAGE) {
                CK(cudaHostRegister(dst, blk, cudaHostRegisterDefault));
            }
            double b = now();
            if (way != POPULATE) {
                CK(cudaMemcpy(dev, src, blk, cudaMemcpyHostToDevice));
                if (dst)
                    CK(cudaMemcpy(dst, dev, blk, cudaMemcpyDeviceToHost));
            }
            double c = now();
            if (way != POPULATE && way != MAPPED_PAGE) {
                CK(cudaHostUnregister(src));
                if (dst)
                    CK(cudaHostUnregister(dst));
            }
            munmap(src, blk);
            if (dst)
                munmap(dst, blk);
            t_map += a2 - a;
            t_out += b - a2;
            t_copy += c - b;
            t_unmap += now() - c;
        }
        close(in_fd);
        close(out_fd);
        const double mine = now() - t0;
        double slowest;
        MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (own)
            unlink(own_path);
        /* Check one byte per block of the output, so a path that moved nothing cannot pass. */
        if (rank == 0 && !own && way != REGISTER_IN) {
            int fd = open(out_path, O_RDONLY);
            unsigned char c = 0;
            for (uint64_t o = 0; o < per * nranks; o += blk)
                if (pread(fd, &c, 1, (off_t)(o + blk / 2)) != 1 || c != 7) {
                    fprintf(stderr, "%s: output byte at %llu is %d, not 7\n", way_name[way],
                            (unsigned long long)(o + blk / 2), c);
                    MPI_Abort(MPI_COMM_WORLD, 1);
                }
            close(fd);
        }
        if (rank == 0) {
            printf("%-12s %9.3f  %8.2f   %8.3f  %6.3f  %6.3f  %13.3f  %8.3f\n", way_name[way], slowest,
                   per * nranks / slowest / 1e9, t_map, t_out, t_copy, t_unmap, t_create);
            fflush(stdout);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    if (rank == 0) {
        unlink(out_path);
        unlink(in_path);
    }
    MPI_Finalize();
    return 0;
}
