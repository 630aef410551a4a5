#include "box.h"

#include <string.h>

/* Byte strides of an array of extent ext[], and the byte offset of off[] in it. */
static size_t strides(const uint64_t *ext, const uint64_t *off, int k, size_t elem, size_t *stride)
{
    size_t at = 0;
    stride[k - 1] = elem;
    for (int i = k - 2; i >= 0; i--)
        stride[i] = stride[i + 1] * ext[i + 1];
    for (int i = 0; i < k; i++)
        at += off[i] * stride[i];
    return at;
}

void hq_box_copy(hq_box_side dst, hq_box_side src, const uint64_t *n, int k, size_t elem)
{
    if (k < 1 || k > HQ_BOX_MAX_RANK)
        return;
    for (int i = 0; i < k; i++)
        if (n[i] == 0)
            return;
    size_t ds[HQ_BOX_MAX_RANK], ss[HQ_BOX_MAX_RANK];
    const size_t d0 = strides(dst.ext, dst.off, k, elem, ds), s0 = strides(src.ext, src.off, k, elem, ss);
    /* Merge from the innermost dimension while the box spans it whole on both sides: then the
     * next dimension out is contiguous with it too. */
    int m = k - 1;
    size_t run = elem * n[m];
    while (m > 0 && n[m] == dst.ext[m] && n[m] == src.ext[m]) {
        m--;
        run *= n[m];
    }
    uint64_t idx[HQ_BOX_MAX_RANK] = {0};
    for (;;) {
        size_t da = d0, sa = s0;
        for (int i = 0; i < m; i++) {
            da += idx[i] * ds[i];
            sa += idx[i] * ss[i];
        }
        memcpy(dst.base + da, src.base + sa, run);
        int i = m - 1; /* next run, odometer order over the walked dimensions */
        for (; i >= 0 && idx[i] == n[i] - 1; i--)
            idx[i] = 0;
        if (i < 0)
            return;
        idx[i]++;
    }
}

