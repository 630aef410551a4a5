/* clahe_hist_floor.cu — what holds the 8-bit CLAHE histogram (k_clahe_hist_lane) at about twice the time of
 * reading its image: the image's access pattern or the counting. On a device-resident 7680x4320 8-bit image
 * (grid 8x8: tiles of 960 x 540) it times, median of 41 with CUDA events: a contiguous read of the whole image;
 * reads in the pattern the histogram uses (each block a rectangle of rows of one tile's width) and wider
 * (4 tiles, whole rows); and the same rectangles counted with one shared-memory atomic a pixel into per-lane
 * counters (the committed kernel's scheme, without its work lists), each after the memset of the tile
 * histograms. The 4-tile count is checked against a host histogram. Not the engine's code: a floor for it.
 *
 *   make build/bench/clahe_hist_floor      (nvcc -O3 -std=c++17 -arch=sm_90)
 *   build/bench/clahe_hist_floor
 * (bench/results/clahe_gpu_bench.txt, item 13, holds a run). */
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); exit(1);} } while (0)
constexpr int W = 7680, H = 4320, TW = 960, TH = 540;

__global__ void k_contig(const uint4 *d, size_t n, unsigned *sink) {
    unsigned x = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint4 a = __ldg(d + i); x ^= a.x ^ a.y ^ a.z ^ a.w;
    }
    if (x == 0x12345678) sink[0] = x;
}
// blocks: rectangles of RW bytes x rows; block b takes rows [b*rpb, ...) of column band cb. Warps take rows, lanes vectors.
// MODE 0: read only; 1: lane atomics into per-tile lane counters (tiles across the band: RW/TW of them, 32 KiB each)
template <int MODE, int RW, int NT>
__global__ void __launch_bounds__(NT) k_rect(const uint8_t *d, int rows_per_block, unsigned *sink, unsigned long long *hist) {
    extern __shared__ uint4 sh4[];
    char *sh = (char *)sh4;
    constexpr int NTILE = RW / TW, VPR = RW / 16, NW = NT / 32;
    const int bands = W / RW;
    const int band = blockIdx.x % bands, slab = blockIdx.x / bands;
    const int r0 = slab * rows_per_block, r1 = min(H, r0 + rows_per_block);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (MODE) { for (int k = threadIdx.x; k < NTILE * 2048; k += NT) sh4[k] = make_uint4(0,0,0,0); __syncthreads(); }
    unsigned x = 0;
    for (int r = r0 + warp; r < r1; r += NW) {
        const uint4 *p = (const uint4 *)(d + (size_t)r * W + band * RW);
        constexpr int PER = (VPR + 31) / 32;
        uint4 a[PER];
#pragma unroll
        for (int k = 0; k < PER; k++) if (lane + 32 * k < VPR) a[k] = __ldg(p + lane + 32 * k);
#pragma unroll
        for (int k = 0; k < PER; k++) if (lane + 32 * k < VPR) {
            if (MODE == 0) x ^= a[k].x ^ a[k].y ^ a[k].z ^ a[k].w;
            else {
                const int t = (lane + 32 * k) * 16 / TW; // tile within band
                char *c = sh + t * 32768;
                const unsigned w[4] = {a[k].x, a[k].y, a[k].z, a[k].w};
#pragma unroll
                for (int i = 0; i < 4; i++)
#pragma unroll
                    for (int b = 0; b < 4; b++)
                        atomicAdd((unsigned *)(c + ((((w[i] >> (8 * b)) & 0xff) << 7) | (lane * 4))), 1u);
            }
        }
    }
    if (MODE) {
        __syncthreads();
        for (int v = threadIdx.x; v < 256 * NTILE; v += NT) {
            const uint4 *row = sh4 + v * 8; unsigned s = 0;
            for (int g = 0; g < 8; g++) { uint4 c = row[(g + lane) & 7]; s += c.x + c.y + c.z + c.w; }
            const int t = v / 256, tile = (r0 / TH) * (W / TW) + band * NTILE + t; // block rows inside one tile row
            if (s) atomicAdd(hist + tile * 256 + (v & 255), (unsigned long long)s);
        }
    }
    if (x == 0x12345678) sink[0] = x;
}

template <typename F> double timeit(F f, int runs = 41) {
    cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b); std::vector<float> t;
    for (int r = 0; r < runs + 3; r++) { cudaEventRecord(a); f(); cudaEventRecord(b); cudaEventSynchronize(b); float ms; cudaEventElapsedTime(&ms, a, b); if (r >= 3) t.push_back(ms); }
    std::sort(t.begin(), t.end()); CK(cudaGetLastError()); return t[t.size() / 2] * 1e3;
}
template <int MODE, int RW, int NT> void rect(const uint8_t *d, unsigned *sink, unsigned long long *h, int rpb, const char *what) {
    const int bands = W / RW, slabs = (H + rpb - 1) / rpb; const size_t shm = MODE ? (RW / TW) * 32768 : 0;
    CK(cudaFuncSetAttribute(k_rect<MODE, RW, NT>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)shm));
    int nb; CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nb, k_rect<MODE, RW, NT>, NT, shm));
    double us = timeit([&] { if (MODE) cudaMemsetAsync(h, 0, 64 * 256 * 8); k_rect<MODE, RW, NT><<<bands * slabs, NT, shm>>>(d, rpb, sink, h); });
    double z = MODE ? timeit([&] { cudaMemsetAsync(h, 0, 64 * 256 * 8); }) : 0;
    printf("%-34s RW %5d rows/blk %4d blocks %5d (%d/SM) : %7.2f us (memset alone %.2f)\n", what, RW, rpb, bands * slabs, nb, us, z);
}
int main() {
    uint8_t *d; unsigned *sink; unsigned long long *h;
    const size_t n = (size_t)W * H; CK(cudaMalloc(&d, n)); CK(cudaMalloc(&sink, 4)); CK(cudaMalloc(&h, 64 * 256 * 8));
    std::vector<uint8_t> img(n); uint32_t s = 1; for (size_t i = 0; i < n; i++) { s = s * 1664525u + 1013904223u; int y = i / W, x = i % W; img[i] = (uint8_t)((x / 40 + y / 30) + (s >> 29)); }
    CK(cudaMemcpy(d, img.data(), n, cudaMemcpyHostToDevice));
    cudaDeviceProp p; cudaGetDeviceProperties(&p, 0); printf("%s, %d SMs\n", p.name, p.multiProcessorCount);
    for (int rep = 0; rep < 2; rep++) {
    for (int g : {528, 1056, 2112}) printf("contiguous read grid %d x 256: %.2f us\n", g, timeit([&] { k_contig<<<g, 256>>>((const uint4 *)d, n / 16, sink); }));
    rect<0, 960, 256>(d, sink, h, 52, "read, tile-wide pieces");
    rect<0, 3840, 1024>(d, sink, h, 45, "read, 4-tile pieces");
    rect<0, 7680, 1024>(d, sink, h, 12, "read, whole rows");
    rect<1, 960, 256>(d, sink, h, 54, "count, tile-wide (like committed)");
    rect<1, 960, 256>(d, sink, h, 27, "count, tile-wide, 2x blocks");
    rect<1, 1920, 512>(d, sink, h, 54, "count, 2-tile pieces");
    rect<1, 3840, 1024>(d, sink, h, 45, "count, 4-tile pieces");
    rect<1, 3840, 1024>(d, sink, h, 90, "count, 4-tile pieces, taller");
    }
    // check: the count kernel's histogram sums to n
    std::vector<unsigned long long> hh(64 * 256); CK(cudaMemset(h, 0, 64*256*8)); 
    k_rect<1, 3840, 1024><<<(W / 3840) * ((H + 44) / 45), 1024, 4 * 32768>>>(d, 45, sink, h); CK(cudaMemcpy(hh.data(), h, 64*256*8, cudaMemcpyDeviceToHost));
    unsigned long long tot = 0; for (auto v : hh) tot += v; 
    std::vector<unsigned long long> ref(64*256); for (size_t i = 0; i < n; i++) { int y = i / W, x = i % W; ref[((y/TH)*8 + x/TW)*256 + img[i]]++; }
    printf("4-tile count total %llu of %zu, equal to host: %s\n", tot, n, hh == ref ? "yes" : "NO");
    return 0;
}
