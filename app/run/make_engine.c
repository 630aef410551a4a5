/* make_engine.c — the engine this rank computes with (engine/engine.h), and how many threads it and
 * the I/O backend's workers use. Collective over the node (who has a GPU of its own); agreed. */
#include <stdio.h>

#include "run_internal.h"

/* --threads, or this rank's share of the node's CPUs (app/placement.h): the engine's threads, and
 * the I/O backend's workers. */
int run_threads_per_rank(const run *r)
{
    return r->o->threads ? r->o->threads : r->cpus.cpus;
}

/* --device auto: the GPU only where every rank of the node has one of its own (app/placement.h);
 * where ranks would share one, the CPU engine, said once per node. */
int run_make_engine(run *r, hq_err *err)
{
    const hq_options *o = r->o;
    hq_engine_cfg cfg = {run_threads_per_rank(r), r->c->local_rank, r->c->local_size, o->verbose};
    int rc;
    if (o->device == HQ_DEV_COPY)
        return hq_comm_agree(r->c, hq_copy_engine_create(&r->eng, err), err);
    char id[64] = "";
    const int mine = o->device != HQ_DEV_CPU && hq_gpu_bound_id(r->c->local_rank, id, sizeof id) == 0;
    const int gpus = hq_comm_node_distinct(r->c, mine ? id : NULL); /* collective over the node */
    const int use_gpu = o->device == HQ_DEV_GPU || (o->device == HQ_DEV_AUTO && hq_auto_uses_gpu(gpus, r->c->local_size));
    if (use_gpu) {
        rc = hq_gpu_engine_create(&cfg, &r->eng, err);
        if (!rc && gpus > 0 && r->c->local_size > gpus && r->c->local_rank == 0 && !o->quiet)
            fprintf(stderr, "histeq_dist: note: %s: %d ranks share %d GPU%s\n", r->c->host, r->c->local_size, gpus,
                    gpus == 1 ? "" : "s");
    } else {
        if (o->device == HQ_DEV_AUTO && gpus > 0 && r->c->local_rank == 0 && !o->quiet)
            fprintf(stderr, "histeq_dist: note: %s: %d ranks would share %d GPU%s; using the CPU engine, which is "
                    "faster then (--device gpu to use the GPU anyway)\n", r->c->host, r->c->local_size, gpus,
                    gpus == 1 ? "" : "s");
        else if (o->device == HQ_DEV_AUTO && gpus == 0 && r->c->rank == 0 && !o->quiet)
            fprintf(stderr, "histeq_dist: note: no GPU visible, using the CPU engine\n");
        rc = hq_cpu_engine_create(&cfg, &r->eng, err);
    }
    if (!rc && run_is_clahe(r) && (!r->eng->ops->clahe_histogram || !r->eng->ops->clahe_remap))
        rc = hq_fail(err, HQ_EDEVICE, "%s: the %s engine has no CLAHE (use --device cpu)", r->o->input,
                     r->eng->ops->name);
    return hq_comm_agree(r->c, rc, err);
}
