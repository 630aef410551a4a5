#!/usr/bin/python3
"""make_inputs.py DIR — the small inputs of the SLURM test, written under DIR:

  stack.h5        /ct (6,48,40) uint16 12-bit values in a narrow band, chunked one slice per
                  chunk; /scan/img (64,64) uint8
  pngs/p0..p5.png 8-bit gray, 8-bit RGB and 16-bit gray PNGs of a few sizes
  h5s/a.h5        /x (3,32,32) uint8
  h5s/b.h5        /vol (2,32,32) uint16 and /other (16,16) uint8
  array.list      the job array's list: the six PNGs, a.h5 and b.h5:/vol, with relative paths,
                  a comment and a blank line
  dups.list       two PNGs of one file name in two directories (pngs/p0.png, again/p0.png)
  self.list       h5s/a.h5 alone (its output would be itself with HQ_OUTPUT=DIR/h5s)

Low-contrast random data, so that equalizing changes every image."""
import os
import sys

import h5py
import numpy as np
from PIL import Image


def main(out):
    rng = np.random.default_rng(20240605)
    os.makedirs(os.path.join(out, "pngs"), exist_ok=True)
    os.makedirs(os.path.join(out, "h5s"), exist_ok=True)

    with h5py.File(os.path.join(out, "stack.h5"), "w") as f:
        f.create_dataset("ct", data=rng.integers(1000, 1400, (6, 48, 40)).astype(np.uint16), chunks=(1, 48, 40))
        f.create_dataset("scan/img", data=rng.integers(60, 120, (64, 64)).astype(np.uint8))

    pngs = []
    for i in range(6):
        h, w = 30 + 3 * i, 40 - 2 * i
        if i % 3 == 0:
            img = Image.fromarray(rng.integers(40, 90, (h, w)).astype(np.uint8), "L")
        elif i % 3 == 1:
            img = Image.fromarray(rng.integers(100, 160, (h, w, 3)).astype(np.uint8), "RGB")
        else:
            img = Image.fromarray(rng.integers(20000, 24000, (h, w)).astype(np.uint16))
        name = f"p{i}.png"
        img.save(os.path.join(out, "pngs", name))
        pngs.append("pngs/" + name)

    with h5py.File(os.path.join(out, "h5s", "a.h5"), "w") as f:
        f.create_dataset("x", data=rng.integers(10, 50, (3, 32, 32)).astype(np.uint8))
    with h5py.File(os.path.join(out, "h5s", "b.h5"), "w") as f:
        f.create_dataset("vol", data=rng.integers(3000, 3500, (2, 32, 32)).astype(np.uint16))
        f.create_dataset("other", data=rng.integers(0, 20, (16, 16)).astype(np.uint8))

    with open(os.path.join(out, "array.list"), "w") as f:
        f.write("# the SLURM test's job array input\n")
        f.write("\n".join(pngs[:3]) + "\n\n" + "\n".join(pngs[3:]) + "\n")
        f.write("h5s/a.h5\nh5s/b.h5:/vol\n")
    os.makedirs(os.path.join(out, "again"), exist_ok=True)
    with open(os.path.join(out, "pngs", "p0.png"), "rb") as src, open(os.path.join(out, "again", "p0.png"), "wb") as dst:
        dst.write(src.read())
    with open(os.path.join(out, "dups.list"), "w") as f:
        f.write("pngs/p0.png\npngs/p1.png\nagain/p0.png\n")
    with open(os.path.join(out, "self.list"), "w") as f:
        f.write("h5s/a.h5\n")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_inputs.py DIR")
    main(sys.argv[1])
