/* gpu_engine.cu — the GPU engine behind engine/engine.h: same results as the CPU engine, bit for
 * bit, for every mode (the per-pixel math is core/pixel.h compiled for the device).
 *
 * Blocks arrive in pageable host memory. They travel in chunks through a ring of pinned staging
 * buffers on two streams, so the host copy of one chunk, the DMA of another and the kernels of a
 * third overlap. The uploaded block stays on the device after histogram(); a remap() of the same
 * pointer and byte size right after it remaps that copy without uploading again when the caller
 * says the pixels are the same (hq_block_data.same_as_histogram: the driver's fused blocks), or
 * when HQ_GPU_RESIDENT=1 (for the harness). A pointer and a size alone cannot tell that the caller
 * freed the block and read another one of the same size into the same address (the driver's pass 2
 * after dropping held blocks does exactly that), and reusing then would write the wrong pixels.
 *
 * A block larger than the device can hold goes through in pieces: the device buffer holds pixels
 * [q0, q1) of the block, kernels are handed the buffer's address minus q0 pixels (q0 is a
 * multiple of 16 pixels, so the 16-byte vector grid is kept) and touch only [q0, q1); the
 * histograms of the segments a piece touches are downloaded and added per piece, and the LUTs of
 * those segments uploaded per piece. The piece is the whole block when it fits: the pixel buffer is
 * capped by HQ_GPU_MEM_CAP (bytes, optional K/M/G suffix; for tests) and by what cudaMalloc grants
 * (a failed allocation is retried smaller, down to one 16-pixel vector, before it is an error).
 *
 * Binding: one visible device -> device 0; otherwise local_rank % count. Every CUDA call goes
 * through GPU_CHECK, which names the call, file and line and returns HQ_EDEVICE; nothing here
 * prints or exits.
 *
 * This file makes the engine object and binds the device; gpu_passes.cu moves blocks through
 * histogram() and remap(), gpu_buffers.cu holds the memory (gpu_engine_impl.h, shared by the three). */
#include <atomic>
#include <ctype.h>
#include <new>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu_engine_impl.h"
#include "gpu_launch.h"

namespace hqe {
namespace {

void gpu_destroy(hq_engine *e)
{
    if (!e)
        return;
    gpu_impl *g = static_cast<gpu_impl *>(e->impl);
    if (g) {
        gpu_release(g);
        delete g;
    }
    free(e);
}

void gpu_describe(hq_engine *e, char *buf, size_t len)
{
    const gpu_impl *g = static_cast<const gpu_impl *>(e->impl);
    snprintf(buf, len, "%s", g->desc);
}

/* CLAHE calls leave d_data alone, but a later remap must not take it for this piece's pixels. */
int gpu_clahe_histogram(hq_engine *e, const hq_clahe_piece *p, const hq_mode *m, const hq_clahe_geom *geo,
                        uint64_t *hist, hq_err *err)
{
    gpu_impl *g = static_cast<gpu_impl *>(e->impl);
    g->res_ptr = NULL;
    GPU_CHECK(cudaSetDevice(g->dev));
    return hq_gpu_clahe_histogram(&g->clahe, p, m, geo, hist, err);
}

int gpu_clahe_remap(hq_engine *e, hq_clahe_piece *p, const hq_mode *m, const hq_clahe_geom *geo, const uint16_t *lut,
                    hq_err *err)
{
    gpu_impl *g = static_cast<gpu_impl *>(e->impl);
    g->res_ptr = NULL;
    GPU_CHECK(cudaSetDevice(g->dev));
    return hq_gpu_clahe_remap(&g->clahe, p, m, geo, lut, err);
}

int gpu_clahe_luts(hq_engine *e, const hq_mode *m, const hq_clahe_geom *geo, int64_t limit, uint16_t *lut,
                   hq_err *err)
{
    gpu_impl *g = static_cast<gpu_impl *>(e->impl);
    GPU_CHECK(cudaSetDevice(g->dev));
    return hq_gpu_clahe_luts(&g->clahe, m, geo, limit, lut, err);
}

const hq_engine_ops gpu_ops = {"gpu",           gpu_histogram,  gpu_remap,     gpu_destroy,
                               gpu_describe,    gpu_block_alloc, gpu_block_free, gpu_device_peak,
                               gpu_clahe_histogram, gpu_clahe_remap, gpu_minmax, 0,
                               gpu_hold_ok,     gpu_clahe_luts};

int gpu_open(gpu_impl *g, const hq_engine_cfg *cfg, hq_err *err)
{
    cudaDeviceProp prop;
    char bus[32] = "?";
    GPU_CHECK(cudaSetDevice(g->dev));
    GPU_CHECK(cudaGetDeviceProperties(&prop, g->dev));
    if (cudaDeviceGetPCIBusId(bus, (int)sizeof bus, g->dev) == cudaSuccess)
        for (char *c = bus; *c; c++)
            *c = (char)tolower((unsigned char)*c);
    snprintf(g->desc, sizeof g->desc, "gpu %d: %s (%s)", g->dev, prop.name, bus);
    cudaError_t ke = hqg::kernels_usable();
    if (ke != cudaSuccess)
        return hq_fail(err, HQ_EDEVICE,
                       "gpu: %s cannot run this build's kernels (%s); rebuild for compute capability %d.%d",
                       g->desc, cudaGetErrorString(ke), prop.major, prop.minor);
    for (int i = 0; i < 2; i++)
        GPU_CHECK(cudaStreamCreateWithFlags(&g->st[i], cudaStreamNonBlocking));
    GPU_CHECK(cudaEventCreateWithFlags(&g->ready, cudaEventDisableTiming));
    for (int i = 0; i < kSlots; i++) {
        GPU_CHECK(cudaEventCreateWithFlags(&g->slot_free[i], cudaEventDisableTiming));
        GPU_CHECK(cudaMallocHost(&g->pin[i], kChunk));
    }
    const long nproc = sysconf(_SC_NPROCESSORS_ONLN);
    const int per_rank = (int)(nproc > 0 ? nproc : 1) / (cfg->local_size > 0 ? cfg->local_size : 1);
    const int want = cfg->threads > 0 ? cfg->threads : per_rank;
    g->copy_threads = want < 1 ? 1 : want > 8 ? 8 : want;
    const char *r = getenv("HQ_GPU_RESIDENT");
    g->reuse = r && strcmp(r, "1") == 0;
    g->data_limit = parse_bytes(getenv("HQ_GPU_MEM_CAP"));
    return 0;
}

} /* namespace */
} /* namespace hqe */

using namespace hqe;

/* Set by every entry point here that starts CUDA (engine.h, hq_gpu_started). */
static std::atomic<int> cuda_started;

int hq_gpu_started(void)
{
    return cuda_started.load();
}

/* The binding rule (see the top of this file), for the engine and for hq_gpu_bound_id alike. */
static int bound_device(int local_rank, int count)
{
    return count == 1 ? 0 : (local_rank > 0 ? local_rank : 0) % count;
}

int hq_gpu_bound_id(int local_rank, char *buf, size_t len)
{
    cuda_started = 1;
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count < 1) {
        cudaGetLastError();
        return -1;
    }
    const int dev = bound_device(local_rank, count);
    /* The UUID, not the PCI bus id: MIG instances of one GPU share a bus but are separate devices. */
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
        cudaGetLastError();
        snprintf(buf, len, "device %d", dev);
        return 0;
    }
    size_t at = 0;
    for (int i = 0; i < 16 && at + 3 <= len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%02x", (unsigned char)prop.uuid.bytes[i]);
    return 0;
}

/* The driver's control node is there wherever the NVIDIA driver is (a container given GPUs gets it
 * too); CUDA_VISIBLE_DEVICES set empty or to -1 hides every device from CUDA. */
int hq_gpu_maybe_present(void)
{
    const char *v = getenv("CUDA_VISIBLE_DEVICES");
    if (v && (!*v || v[0] == '-' || strcmp(v, "NoDevFiles") == 0))
        return 0;
    return access("/dev/nvidiactl", F_OK) == 0;
}

int hq_gpu_device_count(void)
{
    cuda_started = 1;
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n;
}

int hq_gpu_engine_create(const hq_engine_cfg *cfg, hq_engine **out, hq_err *err)
{
    cuda_started = 1;
    *out = NULL;
    int count = 0;
    cudaError_t ce = cudaGetDeviceCount(&count);
    if (ce != cudaSuccess || count < 1) {
        cudaGetLastError();
        return hq_fail(err, HQ_EDEVICE, "gpu: no CUDA device visible (%s)",
                       cudaGetErrorString(ce != cudaSuccess ? ce : cudaErrorNoDevice));
    }
    hq_engine *e = static_cast<hq_engine *>(calloc(1, sizeof *e));
    gpu_impl *g = new (std::nothrow) gpu_impl(); /* value-initialised: zeroed, and a real std::mutex */
    if (!e || !g) {
        free(e);
        delete g;
        return hq_fail(err, HQ_EMEM, "gpu engine: out of memory");
    }
    g->dev = bound_device(cfg->local_rank, count);
    e->ops = &gpu_ops;
    e->impl = g;
    int rc = gpu_open(g, cfg, err);
    if (rc) {
        gpu_destroy(e);
        return rc;
    }
    *out = e;
    return 0;
}
