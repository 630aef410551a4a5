/* kernels/luma8.cuh — 8-bit RGB luma, all 8 bits significant: the same integers as core/pixel.h
 * with fewer instructions (the generic path spends ~40 a pixel, enough to make the remap
 * issue-bound). Part of gpu_kernels.cuh, which says the whole contract.
 *
 * luma4: y = hq_luma_fx(r, g, b) + HQ_LUMA_HALF of the 4 pixels packed in 3 words
 * (r0 g0 b0 r1 | g1 b1 r2 g2 | b2 r3 g3 b3) by byte dot products, each weight split into its high
 * and low byte (4899 = 19 * 256 + 35, ...): exact integers, no byte extraction. The luma bin is
 * y >> 14 (hq_luma_of_fx).
 *
 * remap_luma4: hq_luma_apply(c, (L << 14) - y_fx, 255) = clamp(c + L - Q, 0, 255) with
 * Q = (y - 1) >> 14, because (c << 14) + (L << 14) - y_fx + 2^13 = (c + L + 1) * 2^14 - y and
 * floor(-y / 2^14) = -1 - floor((y - 1) / 2^14) for y >= 1; t < 0 exactly when c + L - Q < 0.
 * The channels then go two at a time through 16-bit lanes (add, min 255, max 0: one DPX
 * instruction a pair on sm_90). L <= 510 (lut_stage CAP) keeps c + L - Q inside int16.
 * bench/gpu_bench.cu checks both against core/pixel.h on all 2^24 colours x 2^9 LUT values. */
#ifndef HQ_GPU_KERNELS_LUMA8_CUH
#define HQ_GPU_KERNELS_LUMA8_CUH

#include "common.cuh"

namespace hqg {

template <typename T, int CH, int COLOR> struct Luma8 {
    static constexpr bool value = sizeof(T) == 1 && CH == 3 && COLOR == HQ_COLOR_LUMA;
};

__device__ __forceinline__ void luma4(uint32_t a, uint32_t b, uint32_t c, uint32_t y[4])
{
    constexpr uint32_t RH = HQ_LUMA_R >> 8, RL = HQ_LUMA_R & 255u, GH = HQ_LUMA_G >> 8, GL = HQ_LUMA_G & 255u,
                       BH = HQ_LUMA_B >> 8, BL = HQ_LUMA_B & 255u;
    static_assert(HQ_LUMA_R < 65536u && HQ_LUMA_G < 65536u && HQ_LUMA_B < 65536u, "weights split in two bytes");
    const uint32_t h0 = __dp4a(a, RH | GH << 8 | BH << 16, 0u);
    const uint32_t l0 = __dp4a(a, RL | GL << 8 | BL << 16, HQ_LUMA_HALF);
    const uint32_t h1 = __dp4a(b, GH | BH << 8, __dp4a(a, RH << 24, 0u));
    const uint32_t l1 = __dp4a(b, GL | BL << 8, __dp4a(a, RL << 24, HQ_LUMA_HALF));
    const uint32_t h2 = __dp4a(c, BH, __dp4a(b, RH << 16 | GH << 24, 0u));
    const uint32_t l2 = __dp4a(c, BL, __dp4a(b, RL << 16 | GL << 24, HQ_LUMA_HALF));
    const uint32_t h3 = __dp4a(c, RH << 8 | GH << 16 | BH << 24, 0u);
    const uint32_t l3 = __dp4a(c, RL << 8 | GL << 16 | BL << 24, HQ_LUMA_HALF);
    y[0] = (h0 << 8) + l0;
    y[1] = (h1 << 8) + l1;
    y[2] = (h2 << 8) + l2;
    y[3] = (h3 << 8) + l3;
}

/* Byte offset of luma bin y >> 14 in the [bin][32 lanes] u32 layout, lane part left out. */
__device__ __forceinline__ uint32_t luma_slot(uint32_t y)
{
    return (y >> 7) & 0x7f80u;
}

/* Remaps 4 packed pixels in place; lbase = the per-lane LUT slots (capped entries) + lane * 4. */
__device__ __forceinline__ void remap_luma4(uint32_t &a, uint32_t &b, uint32_t &c, const char *lbase)
{
    uint32_t y[4];
    luma4(a, b, c, y);
    int32_t k[4];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const uint32_t L = *reinterpret_cast<const uint32_t *>(lbase + luma_slot(y[i]));
        k[i] = (int32_t)L - (int32_t)((y[i] - 1u) >> HQ_LUMA_SHIFT);
    }
    const uint32_t K00 = __byte_perm(k[0], k[0], 0x1010), K01 = __byte_perm(k[0], k[1], 0x5410),
                   K11 = __byte_perm(k[1], k[1], 0x1010), K22 = __byte_perm(k[2], k[2], 0x1010),
                   K23 = __byte_perm(k[2], k[3], 0x5410), K33 = __byte_perm(k[3], k[3], 0x1010);
    constexpr uint32_t M = 0x00ff00ffu;
    const uint32_t o0 = __viaddmin_s16x2_relu(__byte_perm(a, 0, 0x4140), K00, M); /* r0 g0 */
    const uint32_t o1 = __viaddmin_s16x2_relu(__byte_perm(a, 0, 0x4342), K01, M); /* b0 r1 */
    const uint32_t o2 = __viaddmin_s16x2_relu(__byte_perm(b, 0, 0x4140), K11, M); /* g1 b1 */
    const uint32_t o3 = __viaddmin_s16x2_relu(__byte_perm(b, 0, 0x4342), K22, M); /* r2 g2 */
    const uint32_t o4 = __viaddmin_s16x2_relu(__byte_perm(c, 0, 0x4140), K23, M); /* b2 r3 */
    const uint32_t o5 = __viaddmin_s16x2_relu(__byte_perm(c, 0, 0x4342), K33, M); /* g3 b3 */
    a = __byte_perm(o0, o1, 0x6420);
    b = __byte_perm(o2, o3, 0x6420);
    c = __byte_perm(o4, o5, 0x6420);
}

} /* namespace hqg */

#endif
