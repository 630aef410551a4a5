/* gpu_none.c — the GPU entry points of a build made without nvcc (CUDA=0): no device, and a clear
 * error for --device gpu instead of a link failure. */
#include "../engine/engine.h"

int hq_gpu_device_count(void)
{
    return 0;
}

int hq_gpu_maybe_present(void)
{
    return 0;
}

int hq_gpu_started(void)
{
    return 0;
}

int hq_gpu_bound_id(int local_rank, char *buf, size_t len)
{
    (void)local_rank, (void)buf, (void)len;
    return -1;
}

int hq_gpu_engine_create(const hq_engine_cfg *cfg, hq_engine **out, hq_err *err)
{
    (void)cfg;
    *out = NULL;
    return hq_fail(err, HQ_EDEVICE, "gpu: this histeq_dist was built without CUDA (rebuild with nvcc on PATH)");
}
