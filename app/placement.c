#define _GNU_SOURCE /* sched_getaffinity, CPU_SET */
#include "placement.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int hq_cpu_share(int node_cpus, int local_size)
{
    const int s = node_cpus / (local_size > 0 ? local_size : 1);
    return s > 0 ? s : 1;
}

int hq_auto_uses_gpu(int gpus_on_node, int ranks_on_node)
{
    return gpus_on_node > 0 && ranks_on_node <= gpus_on_node;
}

static int online_cpus(void)
{
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

void hq_place_cpus(int local_rank, int local_size, hq_cpus *out)
{
    memset(out, 0, sizeof *out);
    cpu_set_t cur;
    if (sched_getaffinity(0, sizeof cur, &cur) != 0) {
        out->node = out->bound = online_cpus();
        out->share = out->cpus = hq_cpu_share(out->node, local_size);
        return;
    }
    out->bound = CPU_COUNT(&cur);
    /* The CPUs the process may use at all: the kernel trims a full mask to the online CPUs of
     * the process's cpuset (a container's, a batch job's). */
    cpu_set_t all, avail;
    CPU_ZERO(&all);
    const long conf = sysconf(_SC_NPROCESSORS_CONF);
    for (long c = 0; c < (conf > 0 ? conf : CPU_SETSIZE) && c < CPU_SETSIZE; c++)
        CPU_SET((int)c, &all);
    const char *keep = getenv("HQ_KEEP_BINDING");
    int may_widen = !(keep && strcmp(keep, "1") == 0);
    if (!may_widen || sched_setaffinity(0, sizeof all, &all) != 0 || sched_getaffinity(0, sizeof avail, &avail) != 0) {
        sched_setaffinity(0, sizeof cur, &cur);
        out->node = online_cpus();
        out->share = hq_cpu_share(out->node, local_size);
        out->cpus = out->bound < out->share ? out->bound : out->share;
        return;
    }
    out->node = CPU_COUNT(&avail);
    out->share = hq_cpu_share(out->node, local_size);
    if (out->bound >= out->share) {
        sched_setaffinity(0, sizeof cur, &cur);
        out->cpus = out->share;
        return;
    }
    /* Ranks widened this way take disjoint runs of CPUs, in node-local rank order. */
    cpu_set_t mine;
    CPU_ZERO(&mine);
    const int first = (local_rank % (local_size > 0 ? local_size : 1)) * out->share;
    int seen = 0, taken = 0;
    for (int c = 0; c < CPU_SETSIZE && taken < out->share; c++) {
        if (!CPU_ISSET(c, &avail))
            continue;
        if (seen++ >= first) {
            CPU_SET(c, &mine);
            taken++;
        }
    }
    if (taken == 0 || sched_setaffinity(0, sizeof mine, &mine) != 0) {
        sched_setaffinity(0, sizeof cur, &cur);
        out->cpus = out->bound;
        return;
    }
    out->cpus = taken;
    out->widened = 1;
}
