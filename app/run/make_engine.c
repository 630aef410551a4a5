/* make_engine.c — the engine this rank computes with (engine/engine.h), and how many threads it and
 * the I/O backend's workers use. Collective over the node (who has a GPU of its own); agreed. */
#include <stdio.h>
#include <stdlib.h>

#include "run_internal.h"

/* --threads, or this rank's share of the node's CPUs (app/placement.h): the engine's threads, and
 * the I/O backend's workers. */
int run_threads_per_rank(const run *r)
{
    return r->o->threads ? r->o->threads : r->cpus.cpus;
}

/* --device auto takes the GPU for images of at least this many pixels on average. Smaller ones go
 * faster through the CPU engine, whose cost per image is far below the GPU's transfers and launches:
 * on one H200 node (16 cores, 1 rank, tmpfs) 20,000 images of 64 x 64 took 5.9 s on the CPU against
 * 7.5 s on the GPU, 1,000 of 512 x 512 0.99 s against 1.05, 250 of 1024 x 1024 0.66 against 0.84;
 * 16 Mpixel slices of an 8 GiB stack 2.55 s against 2.25 (bench/results/e2e_device_many.txt). */
#define AUTO_GPU_MIN_PIXELS ((uint64_t)1 << 22)

/* --device auto leaves a rank's share to the CPU engine below this many bytes, except for CLAHE. A
 * GPU costs 0.3-0.4 s to start and end (CUDA's driver and context, then their teardown) and equalize
 * runs no faster on it end to end than on the node's cores, so it pays only on a large share: on one
 * H200 node (16 cores, 1 rank, tmpfs, raw 8-bit stack) 1 GiB took 0.36 s on the CPU engine against
 * 0.63 s on the GPU, 8 GiB 2.72 s against 2.21 s; the two crossed at 3.2-3.4 GiB in two series
 * (bench/results/auto_share.txt). CLAHE's work a pixel is many times equalize's: any size. */
#define AUTO_GPU_MIN_SHARE ((uint64_t)4 << 30)

/* What --device auto decides by, from the inventory's good items and the plan, the same on every
 * rank: the pixels per image (0: none), and the largest rank's share in bytes (its pixels at the
 * inventory's mean bytes a pixel). */
typedef struct auto_facts {
    uint64_t mean_image_pixels;
    uint64_t most_share_bytes;
} auto_facts;

static auto_facts facts_for_auto(const run *r)
{
    uint64_t images = 0, pixels = 0, bytes = 0, most = 0;
    for (size_t i = 0; i < r->inv.n; i++)
        if (!r->inv.items[i].bad) {
            const hq_item *it = &r->inv.items[i];
            const uint64_t px = it->slices * it->height * it->width;
            images += it->slices;
            pixels += px;
            bytes += px * it->channels * it->sample_bytes;
        }
    for (int k = 0; r->plan.rank_pixels && k < r->plan.nranks; k++)
        most = r->plan.rank_pixels[k] > most ? r->plan.rank_pixels[k] : most;
    return (auto_facts){images ? pixels / images : 0,
                        pixels ? (uint64_t)((double)most * ((double)bytes / (double)pixels)) : 0};
}

/* --device auto: the GPU only where every rank of the node has one of its own (app/placement.h)
 * and the images and the shares are large enough for it (AUTO_GPU_MIN_PIXELS, AUTO_GPU_MIN_SHARE);
 * otherwise the CPU engine, said once per node. */
int run_make_engine(run *r, hq_err *err)
{
    const hq_options *o = r->o;
    hq_engine_cfg cfg = {run_threads_per_rank(r), r->c->local_rank, r->c->local_size, o->verbose};
    int rc;
    if (o->device == HQ_DEV_COPY)
        return hq_comm_agree(r->c, hq_copy_engine_create(&r->eng, err), err);
    char id[64] = "";
    const auto_facts af = facts_for_auto(r);
    const uint64_t mean = af.mean_image_pixels, share = af.most_share_bytes;
    /* auto with small images or a small share never looks for a GPU: starting the CUDA driver alone
     * costs ~0.3 s. HQ_AUTO_GPU_MIN_SHARE (bytes) moves the share's bar, for tests. */
    const char *bar = getenv("HQ_AUTO_GPU_MIN_SHARE");
    const uint64_t min_share = bar && *bar ? strtoull(bar, NULL, 10) : AUTO_GPU_MIN_SHARE;
    const int little = o->device == HQ_DEV_AUTO && !run_is_clahe(r) && share < min_share;
    const int small = o->device == HQ_DEV_AUTO && (mean < AUTO_GPU_MIN_PIXELS || little);
    const int mine = o->device != HQ_DEV_CPU && !small && hq_gpu_bound_id(r->c->local_rank, id, sizeof id) == 0;
    const int gpus = hq_comm_node_distinct(r->c, mine ? id : NULL); /* collective over the node */
    const int use_gpu = o->device == HQ_DEV_GPU || (o->device == HQ_DEV_AUTO && hq_auto_uses_gpu(gpus, r->c->local_size));
    if (use_gpu) {
        rc = hq_gpu_engine_create(&cfg, &r->eng, err);
        if (!rc && gpus > 0 && r->c->local_size > gpus && r->c->local_rank == 0 && !o->quiet)
            fprintf(stderr, "histeq_dist: note: %s: %d ranks share %d GPU%s\n", r->c->host, r->c->local_size, gpus,
                    gpus == 1 ? "" : "s");
    } else {
        if (small && mean < AUTO_GPU_MIN_PIXELS && r->c->rank == 0 && !o->quiet)
            fprintf(stderr, "histeq_dist: note: images of %llu pixels on average: using the CPU engine, which is "
                    "faster than a GPU for images under %llu Mpixel (--device gpu to use one anyway)\n",
                    (unsigned long long)mean, (unsigned long long)(AUTO_GPU_MIN_PIXELS >> 20));
        else if (small && r->c->rank == 0 && !o->quiet && hq_gpu_maybe_present())
            fprintf(stderr, "histeq_dist: note: %.1f MiB a rank at most: using the CPU engine, which is faster "
                    "than starting a GPU for shares under %llu GiB (--device gpu to use one anyway)\n",
                    (double)share / 1048576.0, (unsigned long long)(min_share >> 30));
        else if (small && r->c->rank == 0 && !o->quiet) /* not asked, but no driver is there to ask */
            fprintf(stderr, "histeq_dist: note: no GPU visible, using the CPU engine\n");
        else if (o->device == HQ_DEV_AUTO && gpus > 0 && r->c->local_rank == 0 && !o->quiet)
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
