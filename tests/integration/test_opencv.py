"""Agreement with OpenCV: for 8-bit gray, the output equals cv2.equalizeHist exactly.

OpenCV scales with a float and rounds half to even, we round half up in exact integers; the two
agree whenever no LUT entry is an exact tie and the float error stays far from .5. With
N - c(h0) odd no entry can be a tie (2 (c - c0) 255 is even), and small images keep the float
error (< 3.1e-5: two float roundings of a value <= 255) below the distance to .5, which is at
least 1 / (2 (N - c0)) >= 1.25e-4 for images of at most 4000 pixels."""
import cv2
import h5py
import numpy as np

import pngio
import reference as ref
from helpers import assert_array_equal, equalize, read_png


def no_tie_image(h, w, lo, hi, seed):
    img = ref.low_contrast(h, w, lo, hi, np.uint8, seed)
    for _ in range(10):
        hist = np.bincount(img.ravel(), minlength=256)
        h0 = int(np.flatnonzero(hist)[0])
        if (img.size - hist[h0]) % 2 == 1:
            break
        # Move one pixel off the first bin to make N - c(h0) odd.
        y, x = np.argwhere(img == h0)[0]
        img[y, x] = h0 + 1
    hist = np.bincount(img.ravel(), minlength=256)
    assert (img.size - hist[int(np.flatnonzero(hist)[0])]) % 2 == 1
    assert img.size <= 4000
    return img


def test_reference_matches_opencv():
    """The reference itself, before the program is compared with either."""
    for seed in range(10):
        img = no_tie_image(50 + seed, 60, 40 + seed, 120 + 3 * seed, seed)
        assert_array_equal(ref.equalize_one(img, 8), cv2.equalizeHist(img), f"reference vs OpenCV, seed {seed}")


def test_hdf5_gray8_equals_opencv(tmp):
    imgs = [no_tie_image(55, 61, 70 + 5 * i, 130 + 7 * i, 100 + i) for i in range(4)]
    inp = tmp / "in.h5"
    with h5py.File(inp, "w") as f:
        for i, im in enumerate(imgs):
            f.create_dataset(f"img{i}", data=im)
    out = tmp / "out.h5"
    equalize(inp, out)
    with h5py.File(out, "r") as f:
        for i, im in enumerate(imgs):
            assert_array_equal(f[f"img{i}"][()], cv2.equalizeHist(im), f"img{i} vs cv2.equalizeHist")


def test_png_gray8_equals_opencv(tmp):
    d = tmp / "in"
    d.mkdir()
    imgs = [no_tie_image(50, 60 + i, 20 + 9 * i, 60 + 11 * i, 200 + i) for i in range(3)]
    for i, im in enumerate(imgs):
        pngio.write(d / f"s{i}.png", im, 8, pngio.GRAY)
    out = tmp / "out"
    equalize(d, out)
    for i, im in enumerate(imgs):
        got = read_png(out / f"s{i}.png").samples[:, :, 0]
        assert_array_equal(got, cv2.equalizeHist(im), f"s{i}.png vs cv2.equalizeHist")
        assert_array_equal(got, cv2.equalizeHist(cv2.imread(str(d / f"s{i}.png"), cv2.IMREAD_UNCHANGED)),
                           "via cv2.imread")
