/* gpu_engine_impl.h — what the GPU engine's three files share: its state (gpu_impl) and its error
 * check. gpu_engine.cu makes the engine object and binds the device, gpu_buffers.cu holds its memory
 * (device buffers, the pinned staging ring, the pinned block pool), gpu_passes.cu moves a block
 * through histogram() and remap() piece by piece. Internal to gpu/; engine/engine.h is the interface. */
#ifndef HQ_GPU_ENGINE_IMPL_H
#define HQ_GPU_ENGINE_IMPL_H

#include <cuda_runtime.h>
#include <mutex>
#include <stddef.h>
#include <stdint.h>

extern "C" {
#include "../engine/engine.h"
}
#include "gpu_clahe.h"
#include "gpu_float.h"

namespace hqe {

constexpr int kSlots = 4;                /* pinned staging buffers in the ring */
constexpr size_t kChunk = (size_t)8 << 20; /* bytes per staged chunk */
constexpr int kPool = 8;                  /* pinned block buffers handed out by block_alloc */

struct gpu_impl {
    int dev;
    int copy_threads;
    char desc[320];
    cudaStream_t st[2];
    cudaEvent_t slot_free[kSlots]; /* the device is done with staging slot i */
    cudaEvent_t ready;             /* cross-stream ordering point */
    void *pin[kSlots];
    uint8_t *d_data;
    size_t data_cap;
    unsigned long long *d_hist, *h_hist;
    size_t hist_cap, hhist_cap; /* bytes */
    uint16_t *d_lut, *h_lut;
    size_t lut_cap, hlut_cap; /* bytes */
    uint8_t *d_mask;          /* the piece's mask plane (hq_block_data.mask), pixel q0 at d_mask */
    size_t mask_cap;
    const void *res_ptr;      /* host block whose bytes d_data holds, NULL when none */
    size_t res_bytes;
    bool reuse;               /* HQ_GPU_RESIDENT=1: remap may trust res_ptr/res_bytes */
    size_t data_limit;        /* HQ_GPU_MEM_CAP: most bytes for d_data, 0 = no limit */
    uint64_t dev_now, dev_peak; /* device bytes held by d_data, d_hist, d_lut: now, and the most */
    /* Pinned block buffers handed to the driver (block_alloc): blocks in them travel by DMA
     * straight from and to the caller's memory, with no staging copy. A few are enough: the
     * driver's pipeline keeps three blocks alive, plus any held between the passes. */
    struct pinned { void *p; size_t size; bool used; } pool[kPool];
    std::mutex pool_mu;
    hq_gpu_clahe *clahe;      /* CLAHE's own device buffers (gpu_clahe.h), made on first use */
    hqg::FloatBufs fl; /* the float path's buffers (gpu_float.h) */
};

inline int gpu_fail(hq_err *err, cudaError_t e, const char *call, const char *file, int line)
{
    return hq_fail(err, HQ_EDEVICE, "gpu: %s failed: %s (%s:%d)", call, cudaGetErrorString(e), file, line);
}

#define GPU_CHECK(call)                                                                                            \
    do {                                                                                                           \
        cudaError_t e_ = (call);                                                                                   \
        if (e_ != cudaSuccess)                                                                                     \
            return gpu_fail(err, e_, #call, __FILE__, __LINE__);                                                   \
    } while (0)

/* gpu_buffers.cu */
void copy_par(void *dst, const void *src, size_t n, int threads);
int grow_device(gpu_impl *g, void **p, size_t *cap, size_t need, hq_err *err, bool *oom = NULL, size_t limit = 0);
int grow_pinned(void **p, size_t *cap, size_t need, hq_err *err);
int piece_pixels(gpu_impl *g, uint64_t px, size_t pb, uint64_t *piece, hq_err *err);
size_t parse_bytes(const char *v);
bool is_pinned(gpu_impl *g, const void *p, size_t bytes);
int upload_mask(gpu_impl *g, const hq_block_data *b, uint64_t q0, uint64_t q1, const uint8_t **mbase, hq_err *err);
void gpu_release(gpu_impl *g);
void *gpu_block_alloc(hq_engine *e, size_t bytes);
void gpu_block_free(hq_engine *e, void *p);
int gpu_hold_ok(hq_engine *e, const void *p);
uint64_t gpu_device_peak(hq_engine *e);

/* gpu_passes.cu: engine.h's minmax, histogram and remap */
int gpu_minmax(hq_engine *e, const hq_block_data *b, const hq_mode *m, hq_frange *mm, hq_err *err);
int gpu_histogram(hq_engine *e, const hq_block_data *b, const hq_mode *m, uint64_t *const *hist, hq_err *err);
int gpu_remap(hq_engine *e, hq_block_data *b, const hq_mode *m, const uint16_t *const *lut, hq_err *err);

} /* namespace hqe */

#endif
