/* threads.c — see threads.h. */
#include "threads.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static void *idle(void *arg)
{
    return arg;
}

/* RLIMIT_AS in bytes; UINT64_MAX without one. */
static uint64_t address_limit(void)
{
    struct rlimit as;
    return getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY ? (uint64_t)as.rlim_cur : UINT64_MAX;
}

/* "ulimit -v 614400" or "the process limits": what most likely stopped thread creation. */
static void limit_text(char *buf, size_t len)
{
    const uint64_t limit = address_limit();
    if (limit != UINT64_MAX)
        snprintf(buf, len, "the address-space limit (ulimit -v %llu)", (unsigned long long)(limit / 1024));
    else
        snprintf(buf, len, "the process limits (ulimit -u, -s)");
}

/* Each thread that allocates gets a malloc arena of its own, which reserves 64 MiB of address
 * space: 16 threads took 1 GiB of a 1 GB `ulimit -v`, and a block's malloc then failed. Under a
 * limit, one arena for each GiB of it (the main one included). */
static void fewer_arenas(void)
{
    const uint64_t limit = address_limit();
    if (limit == UINT64_MAX)
        return;
    mallopt(M_ARENA_MAX, (int)(1 + (limit >> 30 < 64 ? limit >> 30 : 64)));
}

int hq_threads_start(int n, hq_err *err)
{
    fewer_arenas();
    if (n < 2)
        return 0;
    pthread_t *th = calloc((size_t)n - 1, sizeof *th);
    if (!th)
        return hq_fail(err, HQ_EMEM, "out of memory before starting %d threads", n);
    int started = 0, why = 0;
    while (started < n - 1 && (why = pthread_create(&th[started], NULL, idle, NULL)) == 0)
        started++;
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    free(th);
    if (started < n - 1) {
        char lim[96];
        limit_text(lim, sizeof lim);
        return hq_fail(err, HQ_EMEM, "cannot start %d threads a rank within %s: %s; lower --threads or raise "
                       "the limit", n, lim, strerror(why));
    }
    /* The pool libgomp keeps for this thread's later regions, made now while the room is there. */
    int team = 0;
#pragma omp parallel num_threads(n)
    {
#pragma omp atomic
        team++;
    }
    (void)team;
    return 0;
}

uint64_t hq_address_room(uint64_t *limit)
{
    *limit = address_limit();
    if (*limit == UINT64_MAX)
        return UINT64_MAX;
    unsigned long long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    const int got = f && fscanf(f, "%llu", &pages) == 1;
    if (f)
        fclose(f);
    const long page = sysconf(_SC_PAGESIZE);
    const uint64_t mapped = got && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
    return mapped < *limit ? *limit - mapped : 0;
}
