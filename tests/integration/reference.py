"""reference.py — the equalization rule of cli.md, written independently in numpy / Python ints.

An image is an (H, W) or (H, W, C) integer array; C = 1 or 2 is gray (+alpha), 3 or 4 is RGB(A).
Nothing here calls the program.
"""
import numpy as np

LUMA = (4899, 9617, 1868)


def lut_equalize(hist, bins):
    hist = [int(x) for x in hist]
    n = sum(hist)
    nz = [v for v in range(bins) if hist[v]]
    if not nz:
        return np.arange(bins, dtype=np.int64)
    h0 = nz[0]
    c0 = hist[h0]
    if c0 == n:
        return np.arange(bins, dtype=np.int64)
    lut = np.zeros(bins, dtype=np.int64)
    c = 0
    span = n - c0
    for v in range(bins):
        c += hist[v]
        if v >= h0:
            lut[v] = (2 * (c - c0) * (bins - 1) + span) // (2 * span)
    return lut


def lut_stretch(hist, bins):
    nz = np.flatnonzero(np.asarray(hist))
    if len(nz) == 0 or nz[0] == nz[-1]:
        return np.arange(bins, dtype=np.int64)
    lo, hi = int(nz[0]), int(nz[-1])
    v = np.arange(bins, dtype=np.int64)
    lut = (2 * (v - lo) * (bins - 1) + (hi - lo)) // (2 * (hi - lo))
    lut[v <= lo] = 0
    lut[v >= hi] = bins - 1
    return lut


def build_lut(method, hist, bins):
    return lut_stretch(hist, bins) if method == "stretch" else lut_equalize(hist, bins)


def _as3(img):
    a = np.asarray(img).astype(np.int64)
    return a[:, :, None] if a.ndim == 2 else a


def _rgb(a, maxv):
    return [np.minimum(a[:, :, k], maxv) for k in range(3)]


def luma_fx(r, g, b):
    return LUMA[0] * r + LUMA[1] * g + LUMA[2] * b


def histograms(img, bits, color):
    """The histogram(s) of one image: a list of 1 (gray, luma, value) or 3 (channels) arrays."""
    bins = 1 << bits
    maxv = bins - 1
    a = _as3(img)
    if a.shape[2] < 3:
        keys = [np.minimum(a[:, :, 0], maxv)]
    else:
        r, g, b = _rgb(a, maxv)
        if color == "channels":
            keys = [r, g, b]
        elif color == "value":
            keys = [np.maximum(np.maximum(r, g), b)]
        else:
            keys = [(luma_fx(r, g, b) + 8192) >> 14]
    return [np.bincount(k.ravel(), minlength=bins).astype(np.int64) for k in keys]


def apply(img, luts, bits, color):
    """The image after remapping with luts (one per histogram); same dtype and shape as img."""
    maxv = (1 << bits) - 1
    src = np.asarray(img)
    a = _as3(src)
    out = a.copy()
    if a.shape[2] < 3:
        out[:, :, 0] = luts[0][np.minimum(a[:, :, 0], maxv)]
    else:
        r, g, b = _rgb(a, maxv)
        if color == "channels":
            for k, c in enumerate((r, g, b)):
                out[:, :, k] = luts[k][c]
        elif color == "value":
            v = np.maximum(np.maximum(r, g), b)
            v2 = luts[0][v]
            safe_v = np.where(v == 0, 1, v)
            for k, c in enumerate((r, g, b)):
                out[:, :, k] = np.where(v == 0, v2, (2 * c * v2 + v) // (2 * safe_v))
        else:
            y_fx = luma_fx(r, g, b)
            y2 = luts[0][(y_fx + 8192) >> 14]
            for k, c in enumerate((r, g, b)):
                t = (c << 14) + (y2 << 14) - y_fx + 8192
                o = np.where(t < 0, 0, t >> 14)
                out[:, :, k] = np.minimum(o, maxv)
    out = out.astype(src.dtype)
    return out[:, :, 0] if src.ndim == 2 else out


def equalize_images(images, bits, color="luma", method="equalize", scope="image"):
    """images: a list of images sharing channels; returns (outputs, global histograms or None)."""
    bins = 1 << bits
    hists = [histograms(im, bits, color) for im in images]
    if scope == "global":
        total = [sum(h[k] for h in hists) for k in range(len(hists[0]))]
        luts = [build_lut(method, t, bins) for t in total]
        return [apply(im, luts, bits, color) for im in images], np.array(total, dtype=np.uint64)
    outs = []
    for im, h in zip(images, hists):
        luts = [build_lut(method, x, bins) for x in h]
        outs.append(apply(im, luts, bits, color))
    return outs, None


def equalize_stack(stack, bits, color="luma", method="equalize", scope="image"):
    """An (N, H, W[, C]) array: each slice an image; scope "dataset" is one histogram over the
    whole stack (a 3-D image), as "global" over this stack alone."""
    outs, gh = equalize_images(list(stack), bits, color, method, "global" if scope == "dataset" else scope)
    return np.stack(outs).astype(stack.dtype), gh


def equalize_one(img, bits, color="luma", method="equalize"):
    return equalize_images([img], bits, color, method, "image")[0][0]


# ---- low-contrast test data (smooth structure in a narrow band, a little noise) ----------------


def smooth_field(h, w, rng, blobs=6):
    """A smooth field in [0, 1]: a tilted ramp plus Gaussian blobs and a ripple."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    f = 0.3 * (x / max(w - 1, 1)) + 0.2 * (y / max(h - 1, 1))
    for _ in range(blobs):
        cy, cx = rng.uniform(0, h), rng.uniform(0, w)
        s = rng.uniform(0.05, 0.3) * max(h, w)
        f += rng.uniform(-0.6, 1.0) * np.exp(-((y - cy) ** 2 + (x - cx) ** 2) / (2 * s * s))
    f += 0.05 * np.sin(x / 7.0 + rng.uniform(0, 6)) * np.cos(y / 11.0)
    f -= f.min()
    return f / max(f.max(), 1e-12)


def low_contrast(h, w, lo, hi, dtype, seed, noise=0.01):
    rng = np.random.default_rng(seed)
    f = smooth_field(h, w, rng) + rng.normal(0, noise, (h, w))
    v = np.rint(lo + (hi - lo) * np.clip(f, 0, 1))
    return v.astype(dtype)


def low_contrast_rgb(h, w, lo, hi, dtype, seed, channels=3):
    rng = np.random.default_rng(seed)
    base = smooth_field(h, w, rng)
    planes = []
    for k in range(3):
        tint = smooth_field(h, w, rng, blobs=3)
        f = np.clip(0.7 * base + 0.3 * tint + rng.normal(0, 0.01, (h, w)), 0, 1)
        planes.append(np.rint(lo + (hi - lo) * f))
    if channels == 4:
        planes.append(np.rint(np.linspace(0, float(np.iinfo(dtype).max), w))[None, :].repeat(h, 0))
    return np.stack(planes, axis=2).astype(dtype)


def stack_of(n, h, w, lo, hi, dtype, seed, rgb=False):
    """Slices of increasing brightness and width, so each slice's own LUT differs."""
    out = []
    for i in range(n):
        a, b = lo + i * (hi - lo) // (2 * n), lo + (i + 2) * (hi - lo) // (n + 1)
        out.append(low_contrast_rgb(h, w, a, b, dtype, seed + i) if rgb else low_contrast(h, w, a, b, dtype, seed + i))
    return np.stack(out)


# ---- masks, ignored levels and histogram matching (README: --mask, --ignore, --method match) ----


def _keys(img, bits, color):
    """What each histogram counts, per pixel: a list of 1 or 3 (H, W) arrays of levels."""
    maxv = (1 << bits) - 1
    a = _as3(img)
    if a.shape[2] < 3:
        return [np.minimum(a[:, :, 0], maxv)]
    r, g, b = _rgb(a, maxv)
    if color == "channels":
        return [r, g, b]
    if color == "value":
        return [np.maximum(np.maximum(r, g), b)]
    return [(luma_fx(r, g, b) + 8192) >> 14]


def counted_histograms(img, bits, color, mask=None, ignore=None):
    """histograms() over the pixels with mask != 0, less the levels in ignore = (lo, hi)."""
    bins = 1 << bits
    out = []
    for k in _keys(img, bits, color):
        sel = k if mask is None else k[np.asarray(mask) != 0]
        h = np.bincount(sel.ravel(), minlength=bins).astype(np.int64)
        if ignore is not None:
            h[ignore[0]:ignore[1] + 1] = 0
        out.append(h)
    return out


def lut_match(src, tgt, bins):
    """The smallest w with C_t(w) * N_s >= C_s(v) * N_t, in Python ints, by bisection."""
    import bisect
    src, tgt = [int(x) for x in src], [int(x) for x in tgt]
    ns, nt = sum(src), sum(tgt)
    if ns == 0 or nt == 0:
        return np.arange(bins, dtype=np.int64)
    ct, c = [], 0
    for x in tgt:
        c += x
        ct.append(c * ns)
    lut, cs = np.zeros(bins, dtype=np.int64), 0
    for v in range(bins):
        cs += src[v]
        lut[v] = bisect.bisect_left(ct, cs * nt)
    return lut


def process_one(img, bits, color="luma", method="equalize", mask=None, ignore=None, inside=False, target=None,
                hists=None):
    """One image through the whole rule: counted histograms (or `hists`, e.g. a global one), the LUT
    (match: onto `target`, a list of histograms), the remap, and --mask-apply inside."""
    bins = 1 << bits
    hs = hists if hists is not None else counted_histograms(img, bits, color, mask, ignore)
    if sum(int(h.sum()) for h in hs) == 0:
        return np.asarray(img).copy()
    if method == "match":
        luts = [lut_match(h, t, bins) for h, t in zip(hs, target)]
    else:
        luts = [build_lut(method, h, bins) for h in hs]
    if ignore is not None and inside:
        for lut in luts:
            lo, hi = ignore[0], min(ignore[1], bins - 1)
            if lo < bins:
                lut[lo:hi + 1] = np.arange(lo, hi + 1)
    out = apply(img, luts, bits, color)
    if inside:
        keep = np.zeros(np.asarray(img).shape[:2], dtype=bool)
        if mask is not None:
            keep |= np.asarray(mask) == 0
        a = _as3(img)
        if ignore is not None and a.shape[2] >= 3 and color == "luma":
            y = _keys(img, bits, color)[0]
            keep |= (y >= ignore[0]) & (y <= ignore[1])
        out[keep] = np.asarray(img)[keep]
    return out
