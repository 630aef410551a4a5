"""Tiles and balance: images cut into 2-D tiles aligned to their HDF5 chunks give the same bytes on
any rank count; a compressed output written by several ranks in small tiles is no bigger than one
written whole (each chunk is written once); mixed-size collections are shared out within 5% of the
mean; a chunk that does not decompress is named with its tile; verbose mode says once per run when
HDF5 fell back to independent I/O."""
import os
import re

import h5py
import numpy as np
import pytest

import pngio
import reference as ref
from helpers import DEVICES, assert_array_equal, assert_same_output, equalize, read_png, run, run_ok

RANKS = [1, 2, 3, 4]
PLAN_LINE = re.compile(r"histeq_dist: rank (\d+) on .*; (\d+) blocks, (\d+) pixels")


def rank_pixels(result):
    """{rank: pixels} from the -v plan lines."""
    found = {int(m.group(1)): int(m.group(3)) for m in map(PLAN_LINE.match, result.err.splitlines()) if m}
    assert found, f"no plan lines in the verbose output\n{result}"
    return found


def imbalance(pixels):
    vals = list(pixels.values())
    return max(vals) * len(vals) / sum(vals)


def tiled_inputs(tmp):
    """(name, path, options, {dataset: expected}) for inputs whose blocks are 2-D tiles."""
    cases = []
    stack = ref.stack_of(3, 300, 257, 900, 1400, np.uint16, seed=40)
    p = tmp / "stack.h5"  # a chunk row (64 x 257 x 2 bytes) does not fit a 16K block: 2 chunks a tile
    with h5py.File(p, "w") as f:
        f.create_dataset("s", data=stack, chunks=(1, 64, 50), compression="gzip", shuffle=True)
    cases.append(("stack", p, ["--block", "16K", "--bits", "11"], {"s": ref.equalize_stack(stack, 11)[0]}))
    rgb = ref.low_contrast_rgb(301, 203, 40, 90, np.uint8, seed=41)
    p = tmp / "rgb.h5"  # one 64 x 64 x 3 chunk a tile
    with h5py.File(p, "w") as f:
        f.create_dataset("rgb", data=rgb, chunks=(64, 64, 3), compression="gzip")
    cases.append(("rgb", p, ["--block", "20K", "--color", "value"], {"rgb": ref.equalize_one(rgb, 8, "value")}))
    wide = ref.low_contrast(40, 3000, 20000, 21000, np.uint16, seed=42)
    p = tmp / "wide.h5"  # contiguous, a row (6000 bytes) larger than the block: pieces of rows
    with h5py.File(p, "w") as f:
        f.create_dataset("w", data=wide)
    cases.append(("wide", p, ["--block", "4K"], {"w": ref.equalize_one(wide, 16)}))
    return cases


@pytest.mark.parametrize("which", ["stack", "rgb", "wide"])
def test_tiles_same_bytes_on_any_rank_count(tmp, which):
    name, inp, opts, want = next(c for c in tiled_inputs(tmp) if c[0] == which)
    outs = []
    for n in RANKS + [None]:
        out = tmp / f"out_{n}.h5"
        equalize(inp, out, *opts, np_=n)
        outs.append(out)
    for o in outs[1:]:
        assert_same_output(str(outs[0]), str(o))
    with h5py.File(outs[0], "r") as f:
        for dset, w in want.items():
            assert_array_equal(f[dset][()], w, f"{name}:{dset}")


def test_compressed_output_not_grown_by_tiles(tmp):
    """Each compressed chunk is written once, whole: the output of several ranks writing small tiles
    is as small as the output of one rank writing the image at once. (Row bands that cut chunks
    made this file 28% bigger: every partial write re-compressed the chunk into new space.)"""
    img = ref.low_contrast(1000, 1200, 60, 160, np.uint8, seed=43)
    inp = tmp / "in.h5"
    with h5py.File(inp, "w") as f:
        f.create_dataset("img", data=img, chunks=(200, 300), compression="gzip", compression_opts=4)
    one = tmp / "one.h5"
    equalize(inp, one)
    base = os.path.getsize(one)
    for n, block in ((3, "20K"), (4, "130K"), (2, "64K")):
        out = tmp / f"np{n}.h5"
        equalize(inp, out, "--block", block, np_=n)
        assert_same_output(str(one), str(out))
        size = os.path.getsize(out)
        assert size <= base * 1.02, f"-np {n} --block {block}: {size} bytes, one rank wrote {base}"
    with h5py.File(one, "r") as f:
        assert f["img"].compression == "gzip" and f["img"].chunks == (200, 300)
        assert_array_equal(f["img"][()], ref.equalize_one(img, 8), "img")


def test_hdf5_collection_balanced(tmp):
    """One big contiguous image, small compressed ones and a stack: every rank within 5% of the mean."""
    data = {"big": ref.low_contrast(1200, 1000, 30, 90, np.uint8, seed=44)}
    for k in range(6):
        data[f"small/{k}"] = ref.low_contrast(50 + 30 * k, 60 + 20 * k, 40, 120, np.uint8, seed=45 + k)
    data["stack"] = ref.stack_of(4, 100, 120, 50, 110, np.uint8, seed=52)
    inp = tmp / "in.h5"
    with h5py.File(inp, "w") as f:
        f.create_dataset("big", data=data["big"])
        for k in range(6):
            f.create_dataset(f"small/{k}", data=data[f"small/{k}"], chunks=(25, 30), compression="gzip")
        f.create_dataset("stack", data=data["stack"], chunks=(1, 50, 60))
    outs = []
    for n in (1, 3, 4):
        out = tmp / f"out{n}.h5"
        r = equalize(inp, out, "-v", "--block", "64K", np_=n)
        if n > 1:
            px = rank_pixels(r)
            assert sorted(px) == list(range(n))
            assert imbalance(px) <= 1.05, f"-np {n}: pixels per rank {px}"
        outs.append(out)
    for o in outs[1:]:
        assert_same_output(str(outs[0]), str(o))
    with h5py.File(outs[0], "r") as f:
        for name, a in data.items():
            want = ref.equalize_stack(a, 8)[0] if a.ndim == 3 else ref.equalize_one(a, 8)
            assert_array_equal(f[name][()], want, name)


def test_png_collection_dealt(tmp):
    """PNGs cannot be cut: sorted by size, contiguous shares would be far apart; dealt largest
    first they are within 5% of the mean, and each file is still equalized on its own."""
    d = tmp / "in"
    os.makedirs(d)
    want = {}
    for i in range(12):
        im = ref.low_contrast(20 + 6 * i * i, 64, 60, 140, np.uint8, seed=60 + i)
        pngio.write(d / f"p{i:02d}.png", im, 8, pngio.GRAY)
        want[f"p{i:02d}.png"] = ref.equalize_one(im, 8)
    out = tmp / "out"
    r = equalize(d, out, "-v", np_=3)
    px = rank_pixels(r)
    assert imbalance(px) <= 1.05, f"pixels per rank {px}"
    for name, w in want.items():
        assert_array_equal(read_png(out / name).samples.reshape(w.shape), w, name)


def corrupt_chunk(path, dset, coord):
    """Flips bytes inside the compressed chunk at `coord` (its HDF5 checksum-free deflate stream)."""
    with h5py.File(path, "r") as f:
        info = f[dset].id.get_chunk_info_by_coord(coord)
    data = bytearray(open(path, "rb").read())
    at = info.byte_offset + info.size // 3
    for k in range(at, at + 16):
        data[k] ^= 0x5A
    open(path, "wb").write(bytes(data))


@pytest.mark.parametrize("np_", [None, 2, 3], ids=["single", "np2", "np3"])
def test_corrupt_chunk_names_its_tile(tmp, np_):
    img = ref.low_contrast(300, 400, 60, 160, np.uint8, seed=70)
    inp = tmp / "in.h5"
    with h5py.File(inp, "w") as f:
        f.create_dataset("img", data=img, chunks=(100, 100), compression="gzip")
    corrupt_chunk(inp, "img", (100, 200))
    out = tmp / "out.h5"
    # A chunk row (100 x 400) does not fit 20K: tiles of two chunks, the bad one in cols 200-399.
    r = run(["--input", inp, "--output", out, "--device", DEVICES[0], "--block", "20K"], np_, timeout=60)
    assert not r.timed_out, f"hung\n{r}"
    assert r.rc == 4, f"want exit 4 (bad input)\n{r}"
    lines = r.err_lines if np_ is None else r.hq_lines
    assert len(lines) == 1, f"want one line\n{r}"
    assert f"{inp}:/img [rows 100-199, cols 200-399]: cannot decompress" in lines[0], str(r)
    assert not os.path.exists(out) and not os.path.exists(str(out) + ".part")


def test_verbose_collective_fallback_once(tmp):
    """Big-endian samples need a type conversion, which makes HDF5 transfer independently: -v says
    so in one line for the whole run (not per block or rank), with the cause; without -v, never.
    Uncompressed data is transferred independently unless HQ_HDF5_COLLECTIVE=1 asks otherwise."""
    coll = {"HQ_HDF5_COLLECTIVE": "1"}
    a = ref.low_contrast(300, 400, 1000, 6000, np.uint16, seed=71).astype(">u2")
    inp = tmp / "be.h5"
    with h5py.File(inp, "w") as f:
        f.create_dataset("img", data=a)
    r = run_ok(["--input", inp, "--output", tmp / "v.h5", "--device", DEVICES[0], "--block", "20K", "-v"], 3, env=coll)
    said = [l for l in r.err.splitlines() if "fell back to independent I/O" in l]
    assert len(said) == 1, f"want the fall back reported once\n{r}"
    assert "datatype conversion" in said[0] and f"{inp}:/img" in said[0], said[0]
    r = run_ok(["--input", inp, "--output", tmp / "q.h5", "--device", DEVICES[0], "--block", "20K"], 3, env=coll)
    assert "fell back" not in r.err, str(r)
    r = run_ok(["--input", inp, "--output", tmp / "i.h5", "--device", DEVICES[0], "--block", "20K", "-v"], 3)
    assert "fell back" not in r.err, f"independent transfers cannot fall back\n{r}"
    assert_same_output(str(tmp / "v.h5"), str(tmp / "i.h5"))
    with h5py.File(tmp / "v.h5", "r") as f:
        assert_array_equal(f["img"][()], ref.equalize_one(a.astype(np.uint16), 16).astype(">u2"), "big-endian")


@pytest.mark.parametrize("method", ["equalize", "clahe"])
def test_shared_dataset_streams_unless_collective(tmp, method):
    """An image split between ranks is streamed by each rank (reads and writes overlapped with the
    compute, no lockstep rounds) where its transfers may be independent: uncompressed. A compressed
    one, or HQ_HDF5_COLLECTIVE=1, keeps the lockstep rounds of collective transfers. -v says which;
    every way gives the one-rank output byte for byte."""
    a = ref.low_contrast(600, 500, 20, 90, np.uint8, seed=73)
    plain, packed = tmp / "plain.h5", tmp / "packed.h5"
    with h5py.File(plain, "w") as f:
        f.create_dataset("img", data=a)
    with h5py.File(packed, "w") as f:
        f.create_dataset("img", data=a, chunks=(100, 100), compression="gzip")
    extra = ["--method", "clahe", "--clahe-grid", "3x4"] if method == "clahe" else []
    cases = [(plain, {}, 1, 0), (packed, {}, 0, 1), (plain, {"HQ_HDF5_COLLECTIVE": "1"}, 0, 1)]
    for k, (inp, env, streamed, lockstep) in enumerate(cases):
        one = tmp / f"one{k}.h5"
        run_ok(["--input", inp, "--output", one, "--device", DEVICES[0]] + extra, None)
        out = tmp / f"three{k}.h5"
        r = run_ok(["--input", inp, "--output", out, "--device", DEVICES[0], "--block", "20K", "-v"] + extra, 3, env=env)
        want = f"1 dataset shared by several ranks: {streamed} streamed (independent transfers), {lockstep} in lockstep"
        assert want in r.err, f"want '{want}'\n{r}"
        assert_same_output(str(one), str(out))
