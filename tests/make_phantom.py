#!/usr/bin/python3
"""make_phantom.py — a low-contrast CT-like sample for the demo, and its before/after summary.

  make_phantom.py make OUT.h5 [--slices 8] [--size 256]
      writes /phantoms: (slices, size, size) uint16, 12 significant bits, chunked one slice per
      chunk and gzip-compressed. Each slice is a cut through a 3-D modified Shepp-Logan phantom
      (Toft's contrasts), squeezed into the narrow band 1000..1400 of 0..4095 with a little
      noise, as a soft-tissue window of a CT scan looks before any contrast adjustment.
  make_phantom.py summary BEFORE.h5 AFTER.h5 BEFORE.png AFTER.png
      prints min / p1 / p50 / p99 / max per slice before and after, and writes both stacks as
      PNG montages on the same 0..4095 -> 0..255 scale, so the gain in contrast is visible.
"""
import argparse
import sys

import h5py
import numpy as np
from PIL import Image

# (contrast, semi-axis a, semi-axis b, centre x, centre y, angle in degrees, centre z, semi-axis c)
ELLIPSOIDS = [
    (1.0, 0.69, 0.92, 0.0, 0.0, 0.0, 0.0, 0.90),
    (-0.8, 0.6624, 0.874, 0.0, -0.0184, 0.0, 0.0, 0.88),
    (-0.2, 0.11, 0.31, 0.22, 0.0, -18.0, -0.25, 0.41),
    (-0.2, 0.16, 0.41, -0.22, 0.0, 18.0, -0.25, 0.32),
    (0.1, 0.21, 0.25, 0.0, 0.35, 0.0, -0.25, 0.50),
    (0.1, 0.046, 0.046, 0.0, 0.1, 0.0, 0.0, 0.046),
    (0.1, 0.046, 0.046, 0.0, -0.1, 0.0, 0.0, 0.046),
    (0.1, 0.046, 0.023, -0.08, -0.605, 0.0, 0.0, 0.05),
    (0.1, 0.023, 0.023, 0.0, -0.606, 0.0, 0.0, 0.05),
    (0.1, 0.023, 0.046, 0.06, -0.605, 0.0, 0.0, 0.05),
]

LO, HI, BITS = 1000, 1400, 12


def phantom_slice(n, z):
    """Density of the 3-D phantom on the plane at height z (-1..1), on an n x n grid."""
    y, x = np.mgrid[1 : -1 : n * 1j, -1 : 1 : n * 1j]
    img = np.zeros((n, n))
    for a, ax, by, x0, y0, phi, z0, cz in ELLIPSOIDS:
        dz = (z - z0) / cz
        if abs(dz) >= 1:
            continue
        s = np.sqrt(1 - dz * dz)  # the ellipse this plane cuts from the ellipsoid
        t = np.radians(phi)
        xr = (x - x0) * np.cos(t) + (y - y0) * np.sin(t)
        yr = -(x - x0) * np.sin(t) + (y - y0) * np.cos(t)
        img[(xr / (ax * s)) ** 2 + (yr / (by * s)) ** 2 <= 1] += a
    return img


def make(out, slices, size, seed=0):
    rng = np.random.default_rng(seed)
    zs = np.linspace(-0.45, 0.1, slices)  # through the ventricles and the small features at z = 0
    stack = np.empty((slices, size, size), np.uint16)
    for k, z in enumerate(zs):
        p = np.clip(phantom_slice(size, z), 0, 1)
        v = LO + (HI - LO) * p + rng.normal(0, 3, p.shape)
        stack[k] = np.clip(np.rint(v), 0, (1 << BITS) - 1)
    with h5py.File(out, "w") as f:
        d = f.create_dataset("phantoms", data=stack, chunks=(1, size, size), compression="gzip")
        d.attrs["description"] = "modified Shepp-Logan phantom, 12-bit CT-like, narrow window"
    print(f"wrote {out}: /phantoms {stack.shape} uint16, values {stack.min()}..{stack.max()} of 0..4095")


def stats(a):
    p1, p50, p99 = np.percentile(a, [1, 50, 99])
    return f"{a.min():5d} {p1:6.0f} {p50:6.0f} {p99:6.0f} {a.max():5d}"


def montage(stack, path):
    n, h, w = stack.shape
    cols = int(np.ceil(np.sqrt(2 * n)))  # landscape: 8 slices as 4 x 2
    rows = int(np.ceil(n / cols))
    m = np.zeros((rows * h, cols * w), np.uint8)
    for k in range(n):
        r, c = divmod(k, cols)
        m[r * h : (r + 1) * h, c * w : (c + 1) * w] = (stack[k].astype(np.uint32) * 255 // ((1 << BITS) - 1))
    Image.fromarray(m).save(path)


def summary(before, after, before_png, after_png):
    with h5py.File(before, "r") as f:
        a = f["phantoms"][()]
    with h5py.File(after, "r") as f:
        b = f["phantoms"][()]
        attrs = {k: f.attrs[k] for k in f.attrs}
    print("slice |  before: min     p1    p50    p99   max |  after:  min     p1    p50    p99   max")
    for k in range(a.shape[0]):
        print(f"{k:5d} |         {stats(a[k])} |         {stats(b[k])}")
    print(f"all   |         {stats(a)} |         {stats(b)}")
    if attrs:
        print("output attributes: " + ", ".join(f"{k}={v.decode() if isinstance(v, bytes) else v}"
                                                 for k, v in sorted(attrs.items())))
    montage(a, before_png)
    montage(b, after_png)
    print(f"montages (same 0..4095 scale): {before_png} {after_png}")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("out")
    m.add_argument("--slices", type=int, default=8)
    m.add_argument("--size", type=int, default=256)
    s = sub.add_parser("summary")
    s.add_argument("before")
    s.add_argument("after")
    s.add_argument("before_png")
    s.add_argument("after_png")
    args = ap.parse_args(argv)
    if args.cmd == "make":
        make(args.out, args.slices, args.size)
    else:
        summary(args.before, args.after, args.before_png, args.after_png)


if __name__ == "__main__":
    main(sys.argv[1:])
