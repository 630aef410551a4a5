"""--scope dataset: one histogram per dataset, an N x H x W stack equalized as one 3-D image, each
dataset of a file with its own; every PNG file is a dataset of one image. Checked against the numpy
reference (reference.equalize_stack with scope "dataset"), with equalize and stretch, on 1-4 ranks
with blocks small enough that datasets are cut into row bands and tiles over several ranks (their
histograms reduced), held or read again; the provenance records the dataset's LUT for every slice."""
import os

import h5py
import numpy as np
import pytest

import pngio
import reference as ref
from helpers import assert_array_equal, assert_same_output, equalize, run, run_ok

RANKS = [1, 2, 3, 4]


def make_h5(path):
    """Datasets whose slices differ in brightness, so per-image and per-dataset LUTs differ."""
    data = {
        "ct/volume": ref.stack_of(7, 40, 50, 1000, 3000, np.uint16, seed=70),
        "gray2d": ref.low_contrast(90, 60, 40, 90, np.uint8, seed=71),
        "stack8": ref.stack_of(5, 30, 20, 10, 200, np.uint8, seed=72),
        "rgbstack": ref.stack_of(3, 24, 30, 20, 180, np.uint8, seed=73, rgb=True),
    }
    with h5py.File(path, "w") as f:
        f.create_dataset("ct/volume", data=data["ct/volume"], chunks=(2, 20, 25), compression="gzip")
        f["gray2d"] = data["gray2d"]
        f.create_dataset("stack8", data=data["stack8"], chunks=(1, 30, 20))
        f["rgbstack"] = data["rgbstack"]
    return data


def want_of(data, bits, method, color="luma"):
    out = {}
    for name, a in data.items():
        b = bits if bits else a.dtype.itemsize * 8
        if name == "gray2d":
            out[name] = ref.equalize_stack(a[None], b, color, method, "dataset")[0][0]
        else:
            out[name] = ref.equalize_stack(a, b, color, method, "dataset")[0]
    return out


@pytest.mark.parametrize("method", ["equalize", "stretch"])
def test_hdf5_datasets_against_reference(tmp, method):
    inp = tmp / "in.h5"
    data = make_h5(inp)
    # --bits 12 applies to 16-bit data only if every dataset has at least 12 bits: keep the depth.
    want = want_of(data, 0, method)
    outs = []
    for n in RANKS:
        out = tmp / f"out_np{n}.h5"
        # Small blocks: the volume is cut into chunk tiles spread over the ranks.
        equalize(inp, out, "--scope", "dataset", "--method", method, "--block", "4K", "--memory", "40K", np_=n)
        outs.append(out)
    for o in outs[1:]:
        assert_same_output(str(outs[0]), str(o))
    with h5py.File(outs[0], "r") as f:
        assert f.attrs["scope"] == "dataset"
        for name, w in want.items():
            assert_array_equal(f[name][()], w, name)
        # Every slice carries the dataset's LUT; applying it reproduces the output.
        vol = data["ct/volume"]
        lut = f["histeq_dist/lut/ct/volume"][()]
        assert lut.shape == (vol.shape[0], 1, 1 << 16)
        assert (lut == lut[0]).all()
        hist = np.bincount(vol.ravel(), minlength=1 << 16)
        assert_array_equal(lut[0, 0].astype(np.int64), ref.build_lut(method, hist, 1 << 16), "the dataset's LUT")
        assert_array_equal(lut[0, 0][vol], f["ct/volume"][()], "lut[vol]")


def test_dataset_differs_from_image_and_global(tmp):
    """The three scopes give three different results on a stack whose slices differ."""
    inp = tmp / "in.h5"
    stack = ref.stack_of(4, 30, 40, 50, 150, np.uint8, seed=74)
    with h5py.File(inp, "w") as f:
        f["s"] = stack
        f["t"] = stack[:, :, ::-1] // 2
    got = {}
    for scope in ("image", "dataset", "global"):
        out = tmp / f"{scope}.h5"
        equalize(inp, out, "--scope", scope, np_=2)
        with h5py.File(out, "r") as f:
            got[scope] = f["s"][()]
    assert_array_equal(got["dataset"], ref.equalize_stack(stack, 8, scope="dataset")[0], "dataset")
    assert not np.array_equal(got["dataset"], got["image"])
    assert not np.array_equal(got["dataset"], got["global"])


def test_single_rank_whole_dataset_in_one_block(tmp):
    """A dataset read in one block (the fused path) equals the same dataset cut into bands."""
    inp = tmp / "in.h5"
    stack = ref.stack_of(6, 32, 32, 100, 4000, np.uint16, seed=75)
    with h5py.File(inp, "w") as f:
        f["v"] = stack
    want = ref.equalize_stack(stack, 12, scope="dataset")[0]
    for block in ("256M", "2K"):
        out = tmp / f"out_{block}.h5"
        equalize(inp, out, "--scope", "dataset", "--bits", "12", "--block", block)
        with h5py.File(out, "r") as f:
            assert_array_equal(f["v"][()], want, f"--block {block}")


def test_rgb_channels(tmp):
    inp = tmp / "in.h5"
    stack = ref.stack_of(3, 20, 24, 30, 200, np.uint8, seed=76, rgb=True)
    with h5py.File(inp, "w") as f:
        f["rgb"] = stack
    for n in (1, 3):
        out = tmp / f"out{n}.h5"
        equalize(inp, out, "--scope", "dataset", "--color", "channels", "--block", "1K", np_=n)
        with h5py.File(out, "r") as f:
            assert_array_equal(f["rgb"][()], ref.equalize_stack(stack, 8, "channels", scope="dataset")[0], f"np {n}")


def test_png_files_are_their_own_datasets(tmp):
    """For PNG input scope dataset is scope image: the same bytes."""
    d = tmp / "pngs"
    d.mkdir()
    for k in range(5):
        img = ref.low_contrast(30 + k, 40, 20 + 10 * k, 90 + 10 * k, np.uint8, seed=80 + k)
        pngio.write(str(d / f"p{k}.png"), img, 8, 0)
    for n in (1, 3):
        a, b = tmp / f"image{n}", tmp / f"dataset{n}"
        equalize(d, a, "--scope", "image", np_=n)
        equalize(d, b, "--scope", "dataset", np_=n)
        assert_same_output(str(a), str(b))


def test_kill_and_resume(tmp):
    """A run under scope dataset killed after some writes is finished by --resume, equal to an
    uninterrupted run (journal keys: a dataset's histogram is kept under its first image)."""
    inp, want, out = tmp / "in.h5", tmp / "want.h5", tmp / "out.h5"
    make_h5(inp)
    opts = ["--scope", "dataset", "--block", "4K", "-q"]
    run_ok(["--input", inp, "--output", want] + opts, 3)
    env = {"HQ_JOURNAL_FLUSH_S": "0", "HQ_FAULT_KILL": "1:3"}
    r = run(["--input", inp, "--output", out] + opts, 3, env=env)
    assert r.rc != 0, str(r)
    run_ok(["--input", inp, "--output", out, "--resume"] + opts, 3, env={"HQ_JOURNAL_FLUSH_S": "0"})
    assert_same_output(str(want), str(out))
    with h5py.File(want, "r") as fw, h5py.File(out, "r") as fo:
        assert np.array_equal(fw["histeq_dist/lut/ct/volume"][()], fo["histeq_dist/lut/ct/volume"][()])


def test_report_shows_the_datasets_histogram(tmp):
    """--report under scope dataset: a sampled image's section holds its dataset's histogram and
    LUT (checked against numpy like scope image's in test_report.py), its thumbnails its own slice."""
    from test_report import check_section, check_summary, check_thumbs, decode_thumbs, parse_report
    inp = tmp / "in.h5"
    stack = ref.stack_of(5, 30, 40, 200, 3000, np.uint16, seed=77)
    with h5py.File(inp, "w") as f:
        f["v"] = stack
    out, rep = tmp / "out.h5", tmp / "rep"
    run_ok(["--input", inp, "--output", out, "--scope", "dataset", "--bits", "12", "--report", rep,
            "--report-sample", "2", "--block", "2K"], 2)
    p = parse_report(rep)
    check_summary(p, 2, 5, "dataset")
    thumbs = decode_thumbs(rep, p)
    with h5py.File(out, "r") as f:
        got = f["v"][()]
    assert_array_equal(got, ref.equalize_stack(stack, 12, scope="dataset")[0], "output")
    secs = [s for s in p.sections if s["kind"] == "image"]
    assert [s["image"] for s in secs] == [0, 4]
    for s in secs:
        check_section(s, list(stack), list(got), 12, "luma", "equalize")
        check_thumbs(s, stack[s["image"]], got[s["image"]], 12, thumbs)
