/* gpu_dispatch.cuh — host-side choices shared by gpu_launch.cu and gpu_fused.cu: which shared-memory
 * layout a mode gets (Plan), how a runtime mode selects a compiled kernel (dispatch), and the grid
 * size from the device's occupancy. Only the instantiations a mode can reach are compiled. */
#ifndef HQ_GPU_DISPATCH_CUH
#define HQ_GPU_DISPATCH_CUH

#include "gpu_kernels.cuh"
#include "gpu_launch.h"

namespace hqg {

constexpr uint32_t kReplicatedMax = 48u << 10; /* replicated histograms up to this many bytes */
constexpr uint32_t kWindowBins = 32768;        /* 128 KiB of u32 counters per window */
constexpr uint32_t kLutSmemMax = 128u << 10;   /* plain shared-memory LUTs up to this many bytes */

struct Plan {
    Bins bn;
    HistLayout L;
    bool win;           /* windowed (many-bin) histogram */
    uint32_t hist_smem; /* bytes */
    int lutk;           /* LutRead kind for the engine's remap */
};

static inline Plan make_plan(const hq_mode *m)
{
    Plan p;
    p.bn.bins = hq_mode_bins(m);
    p.bn.maxv = p.bn.bins - 1;
    p.bn.nhist = hq_mode_nhist(m);
    p.bn.nf = p.bn.nhist * p.bn.bins;
    const uint32_t nf = p.bn.nf;
    if (nf * 4u <= kReplicatedMax) {
        uint32_t r = 0;
        while (r < 5 && (nf << (r + 1)) * 4u <= kReplicatedMax)
            r++;
        p.win = false;
        p.L.rep_shift = r;
        p.L.wbins = nf;
        p.L.nwin = 1;
        p.hist_smem = (nf << r) * 4u;
    } else {
        p.win = true;
        p.L.rep_shift = 0;
        p.L.wbins = nf < kWindowBins ? nf : kWindowBins;
        p.L.nwin = (nf + p.L.wbins - 1) / p.L.wbins;
        p.hist_smem = p.L.wbins * 4u;
    }
    p.lutk = p.bn.bins <= 256 ? 0 : nf * 2u <= kLutSmemMax ? 1 : 2;
    return p;
}

/* Runs Op<T, CH, COLOR>::run(args...) for the mode's sample type and layout. */
template <typename T, template <typename, int, int> class Op, typename... A>
static cudaError_t dispatch_layout(uint32_t ch, int color, A... a)
{
    switch (ch) {
    case 1:
        return Op<T, 1, 0>::run(a...);
    case 2:
        return Op<T, 2, 0>::run(a...);
    case 3:
        return color == HQ_COLOR_CHANNELS ? Op<T, 3, HQ_COLOR_CHANNELS>::run(a...)
               : color == HQ_COLOR_VALUE  ? Op<T, 3, HQ_COLOR_VALUE>::run(a...)
                                          : Op<T, 3, HQ_COLOR_LUMA>::run(a...);
    case 4:
        return color == HQ_COLOR_CHANNELS ? Op<T, 4, HQ_COLOR_CHANNELS>::run(a...)
               : color == HQ_COLOR_VALUE  ? Op<T, 4, HQ_COLOR_VALUE>::run(a...)
                                          : Op<T, 4, HQ_COLOR_LUMA>::run(a...);
    default:
        return cudaErrorInvalidValue;
    }
}

template <template <typename, int, int> class Op, typename... A>
static cudaError_t dispatch(const hq_mode *m, A... a)
{
    const int color = m->channels >= 3 ? (int)m->color : 0;
    if (m->sample_bytes == 1)
        return dispatch_layout<uint8_t, Op>(m->channels, color, a...);
    if (m->sample_bytes == 2)
        return dispatch_layout<uint16_t, Op>(m->channels, color, a...);
    return cudaErrorInvalidValue;
}

static inline bool mode_ok(const hq_mode *m)
{
    return m->channels >= 1 && m->channels <= 4 && (m->sample_bytes == 1 || m->sample_bytes == 2) && m->bits >= 1 &&
           m->bits <= 8 * m->sample_bytes && (unsigned)m->color <= HQ_COLOR_VALUE;
}

/* Resident blocks of kernel K per multiprocessor at (threads, smem), times the multiprocessors.
 * The dynamic shared-memory cap of K is raised once; the answer is cached per kernel for the last
 * (threads, smem) asked, which is what a run of same-mode launches repeats. One device per process. */
template <auto K> static cudaError_t resident_blocks(int threads, uint32_t smem, int *out)
{
    static bool raised = false;
    static int last_threads = -1, last_occ = 0, sms = 0;
    static uint32_t last_smem = 0;
    cudaError_t e;
    if (!raised) {
        int dev = 0, optin = 0;
        cudaFuncAttributes fa;
        if ((e = cudaGetDevice(&dev)) != cudaSuccess ||
            (e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev)) != cudaSuccess ||
            (e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess ||
            (e = cudaFuncGetAttributes(&fa, K)) != cudaSuccess ||
            (e = cudaFuncSetAttribute(K, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      optin - (int)fa.sharedSizeBytes)) != cudaSuccess)
            return e;
        raised = true;
    }
    if (threads != last_threads || smem != last_smem) {
        int occ = 0;
        if ((e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, K, threads, smem)) != cudaSuccess)
            return e;
        if (occ < 1)
            return cudaErrorInvalidConfiguration;
        last_threads = threads;
        last_smem = smem;
        last_occ = occ;
    }
    *out = last_occ * sms;
    return cudaSuccess;
}

} /* namespace hqg */

#endif
