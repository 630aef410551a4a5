"""clahe_ref.py — CLAHE as README's rule states it (OpenCV 4.6's createCLAHE), in numpy, written
independently of the program: whole-image padding with reflect-101, per-tile histograms, clip and
redistribution in Python ints, float32 LUT and bilinear weights (numpy's float32 operations round
each result, as C without contraction does), round half to even. Any number of bins (--bits).
Colour images go through the same keys and formulas as reference.py. Nothing here calls the program.
"""
import numpy as np

from reference import LUMA, _as3, _rgb, luma_fx

F32 = np.float32


def reflect101(p, n):
    """cv::borderInterpolate(p, n, BORDER_REFLECT_101) for p >= 0, repeated reflections."""
    if n == 1:
        return np.zeros_like(p)
    p = p.copy()
    while True:
        out = p >= n
        if not out.any():
            return p
        p[out] = 2 * n - 2 - p[out]
        p = np.abs(p)


def geometry(h, w, grid=None, tile=None):
    """(tiles_y, tiles_x, tile_h, tile_w): --clahe-grid ROWSxCOLS or --clahe-tile N."""
    if tile:
        gy, gx = -(-h // tile), -(-w // tile)
    else:
        gy, gx = grid
    if h % gy or w % gx:
        return gy, gx, (h + gy - h % gy) // gy, (w + gx - w % gx) // gx
    return gy, gx, h // gy, w // gx


def tile_luts(key, bins, geo, clip):
    """LUTs (tiles_y, tiles_x, bins) of one key plane."""
    h, w = key.shape
    gy, gx, th, tw = geo
    padded = key[reflect101(np.arange(gy * th), h)][:, reflect101(np.arange(gx * tw), w)]
    area = th * tw
    luts = np.zeros((gy, gx, bins), np.int64)
    for ty in range(gy):
        for tx in range(gx):
            hist = np.bincount(padded[ty * th:(ty + 1) * th, tx * tw:(tx + 1) * tw].ravel(), minlength=bins)
            luts[ty, tx] = lut_of(hist, bins, area, clip)
    return luts


def lut_of(hist, bins, area, clip):
    """One tile's LUT from its histogram (any integer counts; int64 holds 2^63)."""
    hist = np.asarray(hist).astype(np.int64)
    limit = max(1, int(clip * area / bins)) if clip > 0 else 0
    scale = F32(bins - 1) / F32(area)
    if limit:
        clipped = int(np.maximum(hist - limit, 0).sum())
        hist = np.minimum(hist, limit) + clipped // bins
        residual = clipped % bins
        if residual:
            # one each to bins 0, step, 2 step, ... while any is left and the bins last
            hist[np.arange(0, bins, max(bins // residual, 1))[:residual]] += 1
    cum = np.cumsum(hist).astype(F32)
    return np.clip(np.rint(cum * scale), 0, bins - 1).astype(np.int64)


def _weights(n, size, tiles):
    t = np.arange(n).astype(F32) * (F32(1) / F32(size)) - F32(0.5)
    t1 = np.floor(t).astype(np.int64)
    a = t - t1.astype(F32)
    return np.maximum(t1, 0), np.minimum(t1 + 1, tiles - 1), F32(1) - a, a


def clahe_plane(key, bins, geo, clip):
    """The key plane after CLAHE, as int64."""
    h, w = key.shape
    return blend(tile_luts(key, bins, geo, clip), key, 0, 0, h, w, geo)


def blend(luts, key, y0, x0, h, w, geo):
    """The output of the window of `key` whose top left pixel is (y0, x0) of an h x w image."""
    gy, gx, th, tw = geo
    x1, x2, xa1, xa = (a[x0:x0 + key.shape[1]] for a in _weights(w, tw, gx))
    y1, y2, ya1, ya = (a[y0:y0 + key.shape[0]] for a in _weights(h, th, gy))
    bins = luts.shape[2]
    k = key.astype(np.int64)

    def lut(ty, tx):
        return luts[ty[:, None], tx[None, :], k].astype(F32)

    top = lut(y1, x1) * xa1[None, :] + lut(y1, x2) * xa[None, :]
    bot = lut(y2, x1) * xa1[None, :] + lut(y2, x2) * xa[None, :]
    res = top * ya1[:, None] + bot * ya[:, None]
    return np.clip(np.rint(res), 0, bins - 1).astype(np.int64)


def clahe(img, bits, clip=40.0, grid=(8, 8), tile=None, color="luma"):
    """One image (H, W) or (H, W, C) after --method clahe; same dtype and shape."""
    bins = 1 << bits
    maxv = bins - 1
    src = np.asarray(img)
    a = _as3(src)
    geo = geometry(a.shape[0], a.shape[1], grid, tile)
    out = a.copy()
    if a.shape[2] < 3:
        out[:, :, 0] = clahe_plane(np.minimum(a[:, :, 0], maxv), bins, geo, clip)
    else:
        r, g, b = _rgb(a, maxv)
        if color == "channels":
            for k, c in enumerate((r, g, b)):
                out[:, :, k] = clahe_plane(c, bins, geo, clip)
        elif color == "value":
            v = np.maximum(np.maximum(r, g), b)
            v2 = clahe_plane(v, bins, geo, clip)
            safe_v = np.where(v == 0, 1, v)
            for k, c in enumerate((r, g, b)):
                out[:, :, k] = np.where(v == 0, v2, (2 * c * v2 + v) // (2 * safe_v))
        else:
            y_fx = luma_fx(r, g, b)
            y2 = clahe_plane((y_fx + 8192) >> 14, bins, geo, clip)
            for k, c in enumerate((r, g, b)):
                t = (c << 14) + (y2 << 14) - y_fx + 8192
                out[:, :, k] = np.minimum(np.where(t < 0, 0, t >> 14), maxv)
    out = out.astype(src.dtype)
    return out[:, :, 0] if src.ndim == 2 else out


assert sum(LUMA) == 1 << 14
