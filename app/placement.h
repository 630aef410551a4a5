/* placement.h — where a rank runs on its node: the CPUs it works on, and the engine that
 * --device auto picks.
 *
 * CPUs. A rank's share of its node is the node's CPUs divided by the ranks on the node (at least
 * one). A launcher may bind a rank to fewer: Open MPI's mpirun binds each rank to a single core
 * when it starts one or two ranks, which would leave the one rank per GPU that this tool is laid
 * out for on one core of sixteen. hq_place_cpus then widens the binding to the rank's share (the
 * local_rank-th run of `share` CPUs among those the process may use), unless HQ_KEEP_BINDING=1.
 * A binding at least as wide as the share is kept. Call it on the main thread before any other
 * thread of the rank starts (threads inherit the mask when they are created).
 *
 * Engine. A GPU shared by several ranks was measured slower than the CPU engine on the same ranks
 * (8 ranks on one H200: 5.6 s against 4.4 s on an 8 GiB stack; 16 ranks, 192 PNGs: 8.1 s against
 * 5.3-6.6 s), so --device auto takes the GPU only when every rank of the node has one of its own. */
#ifndef HQ_PLACEMENT_H
#define HQ_PLACEMENT_H

typedef struct hq_cpus {
    int node;    /* CPUs the process may use on this node */
    int share;   /* node / ranks on the node, at least 1 */
    int bound;   /* CPUs of the rank's binding at start */
    int cpus;    /* CPUs the rank works on: its share, or fewer when its binding could not widen */
    int widened; /* 1: the binding was widened to the share */
} hq_cpus;

/* The share of node_cpus for one of local_size ranks: at least 1. */
int hq_cpu_share(int node_cpus, int local_size);

/* Reads (and, see above, widens) the calling thread's CPU binding. Never fails: where the
 * affinity cannot be read, the node's online CPUs are taken as the binding. */
void hq_place_cpus(int local_rank, int local_size, hq_cpus *out);

/* 1 when --device auto takes the GPU: the node has GPUs, and no more ranks than distinct GPUs
 * bound by them (gpus_on_node: distinct devices the node's ranks bind, 0 without any). */
int hq_auto_uses_gpu(int gpus_on_node, int ranks_on_node);

#endif
