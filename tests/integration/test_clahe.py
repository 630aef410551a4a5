"""--method clahe: byte for byte OpenCV 4.6's cv2.createCLAHE(clip, (COLS, ROWS)).apply on 8- and
16-bit gray (grids that divide the image and grids that do not, clip limits 0, 1, 2, 40); the same
bytes whatever the rank count when an image is cut into 2-D tiles over 1-4 ranks; RGB modes and
--bits against clahe_ref.py (itself checked against OpenCV here); bad CLAHE options refused."""
import os

import cv2
import h5py
import numpy as np
import pytest

import clahe_ref
import pngio
import reference as ref
from helpers import assert_array_equal, assert_same_output, equalize, read_png, run, run_ok

GRIDS = [(8, 8), (3, 5), (1, 1), (7, 9)]
CLIPS = [0.0, 1.0, 2.0, 40.0]


def gray_images(dtype, seed):
    """Natural-looking and random images, sizes that divide the grids and sizes that do not."""
    top = np.iinfo(dtype).max
    rng = np.random.default_rng(seed)
    imgs = {
        "smooth": ref.low_contrast(120, 160, top // 5, top // 3, dtype, seed),        # divides 8x8, 3x5
        "odd": ref.low_contrast(97, 131, top // 4, top // 2, dtype, seed + 1),         # divides none
        "noise": rng.integers(0, top + 1, (64, 45), dtype=np.int64).astype(dtype),     # divides 8x? only
        "band": rng.integers(top // 2, top // 2 + 40, (63, 72), dtype=np.int64).astype(dtype),
        "flat": np.full((40, 45), top // 3, dtype),
        "edges": np.tile(np.array([0, top], dtype), (36, 27)),
    }
    return imgs


def test_reference_matches_opencv():
    """clahe_ref.py itself, before the program is compared with it."""
    rng = np.random.default_rng(7)
    for k in range(24):
        dtype = np.uint8 if k % 2 == 0 else np.uint16
        h, w = int(rng.integers(9, 90)), int(rng.integers(9, 90))
        grid = (int(rng.integers(1, 9)), int(rng.integers(1, 9)))
        clip = CLIPS[k % 4]
        img = rng.integers(0, np.iinfo(dtype).max + 1, (h, w), dtype=np.int64).astype(dtype)
        want = cv2.createCLAHE(clip, (grid[1], grid[0])).apply(img)
        assert_array_equal(clahe_ref.clahe(img, 8 * img.itemsize, clip, grid), want, f"case {k}")


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
@pytest.mark.parametrize("clip", CLIPS)
def test_gray_equals_opencv(tmp, dtype, clip):
    imgs = gray_images(dtype, 11 if dtype == np.uint8 else 12)
    inp = tmp / "in.h5"
    with h5py.File(inp, "w") as f:
        for name, im in imgs.items():
            f.create_dataset(name, data=im)
    for grid in GRIDS:
        out = tmp / f"out_{grid[0]}x{grid[1]}.h5"
        equalize(inp, out, "--method", "clahe", "--clahe-grid", f"{grid[0]}x{grid[1]}", "--clip-limit", str(clip))
        with h5py.File(out, "r") as f:
            for name, im in imgs.items():
                want = cv2.createCLAHE(clip, (grid[1], grid[0])).apply(im)
                assert_array_equal(f[name][()], want, f"{name} grid {grid} clip {clip} vs cv2.createCLAHE")


def test_clip_count_past_int_is_no_clipping(tmp):
    """Up to clipLimit·tileArea/bins < 2^31 the clip equals OpenCV's; from 2^31 on, where OpenCV's
    (int) conversion overflows (on x86 to the heaviest clipping), the count stays 64-bit: nothing
    is clipped, the same output as --clip-limit 0 (README, "Beyond OpenCV")."""
    im = ref.low_contrast(64, 64, 30, 120, np.uint8, 3)
    with h5py.File(tmp / "in.h5", "w") as f:
        f.create_dataset("im", data=im)
    outs = {}
    for clip in ["536870911", "536870912", "1e308", "0"]:  # 2x2 tiles of 32x32, 256 bins: 4·clip
        equalize(tmp / "in.h5", tmp / f"o{clip}.h5", "--method", "clahe", "--clahe-grid", "2x2", "--clip-limit", clip)
        with h5py.File(tmp / f"o{clip}.h5", "r") as f:
            outs[clip] = f["im"][()]
    assert_array_equal(outs["536870911"], cv2.createCLAHE(536870911, (2, 2)).apply(im), "just below 2^31")
    assert_array_equal(outs["536870912"], outs["0"], "2^31")
    assert_array_equal(outs["1e308"], outs["0"], "1e308")


def test_default_is_opencv_default(tmp):
    """No grid, no clip: OpenCV's defaults, 8x8 and 40; a PNG in, a PNG out."""
    im = ref.low_contrast(150, 203, 60, 110, np.uint8, 5)
    pngio.write(tmp / "in.png", im, 8, pngio.GRAY)
    equalize(tmp / "in.png", tmp / "out.png", "--method", "clahe")
    got = read_png(tmp / "out.png").samples[:, :, 0]
    assert_array_equal(got, cv2.createCLAHE().apply(im), "vs cv2.createCLAHE()")


def test_stack_slices_each_their_own(tmp):
    stack = ref.stack_of(4, 90, 77, 2000, 9000, np.uint16, seed=3)
    with h5py.File(tmp / "in.h5", "w") as f:
        f.create_dataset("s", data=stack)
    equalize(tmp / "in.h5", tmp / "out.h5", "--method", "clahe", "--clahe-grid", "4x3", "--clip-limit", "2")
    with h5py.File(tmp / "out.h5", "r") as f:
        got = f["s"][()]
    for i in range(len(stack)):
        assert_array_equal(got[i], cv2.createCLAHE(2.0, (3, 4)).apply(stack[i]), f"slice {i}")


@pytest.mark.parametrize("dtype,chunks,shape,tile", [(np.uint16, (48, 40), (410, 389), 100),
                                                     (np.uint8, (33, 70), (410, 389), 100),
                                                     (np.uint8, (50, 70), (1003, 777), 30)])
def test_tiles_over_ranks(tmp, dtype, chunks, shape, tile):
    """--clahe-tile on one image cut into 2-D tiles (chunk-aligned blocks far smaller than the image)
    over 1-4 ranks: the 1-rank bytes every time, and OpenCV's with the grid the tile size gives. The
    last case has 34 tile rows, each summed by its own ranks (mpi/tile_rows.h)."""
    top = np.iinfo(dtype).max
    im = ref.low_contrast(shape[0], shape[1], top // 6, top // 2, dtype, 21)
    inp = tmp / "in.h5"
    with h5py.File(inp, "w") as f:
        f.create_dataset("img", data=im, chunks=chunks)
    gy, gx, _, _ = clahe_ref.geometry(shape[0], shape[1], tile=tile)
    want = cv2.createCLAHE(3.0, (gx, gy)).apply(im)
    first = None
    for np_ in [1, 2, 3, 4]:
        out = tmp / f"out{np_}.h5"
        equalize(inp, out, "--method", "clahe", "--clahe-tile", str(tile), "--clip-limit", "3", "--block", "8K",
                 np_=np_)
        with h5py.File(out, "r") as f:
            got = f["img"][()]
        if first is None:
            first = got
        assert_array_equal(got, first, f"{np_} ranks vs 1 rank")
        assert_array_equal(got, want, f"{np_} ranks vs cv2.createCLAHE with grid {gy}x{gx}")


@pytest.mark.parametrize("color", ["luma", "channels", "value"])
def test_rgb_modes(tmp, color):
    rgb8 = ref.low_contrast_rgb(70, 93, 40, 150, np.uint8, 8)
    rgba16 = ref.low_contrast_rgb(66, 50, 9000, 30000, np.uint16, 9, channels=4)
    with h5py.File(tmp / "in.h5", "w") as f:
        f.create_dataset("rgb8", data=rgb8)
        f.create_dataset("rgba16", data=rgba16)
    equalize(tmp / "in.h5", tmp / "out.h5", "--method", "clahe", "--clahe-grid", "3x4", "--clip-limit", "2.5",
             "--color", color, np_=2)
    with h5py.File(tmp / "out.h5", "r") as f:
        assert_array_equal(f["rgb8"][()], clahe_ref.clahe(rgb8, 8, 2.5, (3, 4), color=color), "rgb8")
        got = f["rgba16"][()]
        assert_array_equal(got, clahe_ref.clahe(rgba16, 16, 2.5, (3, 4), color=color), "rgba16")
        assert_array_equal(got[:, :, 3], rgba16[:, :, 3], "alpha untouched")


def test_bits(tmp):
    """12-bit data in uint16 with --bits 12: 4096 bins, stray high samples clamped to 4095."""
    im = ref.low_contrast(81, 100, 1200, 2600, np.uint16, 30)
    im[0, :5] = 60000
    with h5py.File(tmp / "in.h5", "w") as f:
        f.create_dataset("ct", data=im)
    equalize(tmp / "in.h5", tmp / "out.h5", "--method", "clahe", "--bits", "12", "--clahe-grid", "5x6",
             "--clip-limit", "4")
    with h5py.File(tmp / "out.h5", "r") as f:
        assert_array_equal(f["ct"][()], clahe_ref.clahe(im, 12, 4.0, (5, 6)), "12-bit CLAHE")


@pytest.mark.parametrize("opts,words", [
    (["--method", "clahe", "--clahe-grid", "30x4"], "more tiles than the image"),
    (["--method", "clahe", "--clahe-tile", "0"], "--clahe-tile"),
    (["--method", "clahe", "--clip-limit", "abc"], "--clip-limit: 'abc' is not a finite number"),
    (["--method", "clahe", "--clip-limit", "nan"], "is not a finite number"),
    # Infinite (written so, or past a double's range): not "not a number", which it is.
    (["--method", "clahe", "--clip-limit", "inf"], "'inf' is not a finite number"),
    (["--method", "clahe", "--clip-limit", "1e400"], "'1e400' is not a finite number"),
    # A positive limit too small for a double read as 0, which means no clipping at all.
    (["--method", "clahe", "--clip-limit", "1e-400"], "'1e-400' is too small to tell from 0"),
    # strtod's further syntax: hexadecimal (0x10 was taken as 16) and blanks on one side only.
    (["--method", "clahe", "--clip-limit", "0x10"], "is not a finite number"),
    (["--method", "clahe", "--clip-limit", " 2"], "is not a finite number"),
    (["--method", "clahe", "--clip-limit", "2 "], "is not a finite number"),
    (["--method", "clahe", "--scope", "global"], "no --scope global"),
    (["--method", "clahe", "--scope", "dataset"], "no --scope dataset"),
    (["--method", "clahe", "--mask", "in.h5:/img"], "does not take --mask"),
    (["--method", "clahe", "--ignore", "0"], "does not take --ignore"),
    (["--method", "clahe", "--ignore", "0", "--mask-apply", "inside"], "does not take --ignore"),
    (["--method", "clahe", "--reference", "global"], "--reference is only used with --method match"),
    (["--clahe-grid", "4x4"], "only applies to --method clahe"),
    (["--report-sample", "3"], "--report-sample only applies with --report DIR"),
    (["--report-scale", "log"], "--report-scale only applies with --report DIR"),
    (["--method", "clahe", "--clahe-grid", "8x"], "ROWSxCOLS"),
    (["--method", "clahe", "--clahe-grid", "0x8"], "ROWSxCOLS"),
    (["--method", "clahe", "--clahe-grid", "2x2", "--clahe-tile", "16"], "contradict"),
])
def test_bad_options(tmp, opts, words):
    im = np.zeros((20, 30), np.uint8)
    with h5py.File(tmp / "in.h5", "w") as f:
        f.create_dataset("img", data=im)
    r = run(["-i", tmp / "in.h5", "-o", tmp / "out.h5"] + opts)
    assert r.rc == 2, str(r)
    assert len(r.hq_lines) == 1 and words in r.hq_lines[0], str(r)
    assert not (tmp / "out.h5").exists()


def make_mixed(path):
    """A stack of whole slices and a compressed 16-bit image that --block cuts over ranks."""
    rng = np.random.default_rng(17)
    stack = ref.stack_of(5, 120, 100, 30, 200, np.uint8, seed=6)
    big = rng.normal(1500, 300, (333, 250)).clip(0, 4095).astype(np.uint16)
    with h5py.File(path, "w") as f:
        f.create_dataset("stack", data=stack)
        f.create_dataset("ct/big", data=big, chunks=(50, 125), compression="gzip", shuffle=True)
    return {"stack": stack, "ct/big": big}


def test_provenance(tmp):
    """HDF5 outputs record the tile LUTs of every image, (slices, tiles_y, tiles_x, nhist, bins), with
    the tiles, tile size and clip limit; a split image's LUTs too."""
    imgs = make_mixed(tmp / "in.h5")
    out = tmp / "out.h5"
    equalize(tmp / "in.h5", out, "--method", "clahe", "--clahe-grid", "4x3", "--clip-limit", "3", "--block", "20K",
             np_=3)
    with h5py.File(out, "r") as f:
        assert f.attrs["method"] == "clahe"
        assert float(f.attrs["clip_limit"]) == 3.0
        assert list(f.attrs["clahe_grid"]) == [4, 3]
        assert "--clahe-grid 4x3 --clip-limit 3" in f.attrs["options"]
        for name, data in imgs.items():
            d = f[f"histeq_dist/lut/{name}"]
            stack = data if data.ndim == 3 else data[None]
            bits = 8 * data.itemsize
            geo = clahe_ref.geometry(stack.shape[1], stack.shape[2], (4, 3))
            assert d.shape == (len(stack), 4, 3, 1, 1 << bits), name
            assert list(d.attrs["tiles"]) == [4, 3] and list(d.attrs["tile_size"]) == [geo[2], geo[3]]
            assert float(d.attrs["clip_limit"]) == 3.0
            assert int(d.attrs["clip_count"]) == max(1, int(3.0 * geo[2] * geo[3] / (1 << bits)))
            for s in range(len(stack)):
                want = clahe_ref.tile_luts(stack[s], 1 << bits, geo, 3.0).astype(np.uint16)
                assert_array_equal(d[s, :, :, 0, :], want, f"{name} slice {s} tile LUTs")
            got = f[name][()]
            assert_array_equal(got if got.ndim == 3 else got[None],
                               np.stack([cv2.createCLAHE(3.0, (3, 4)).apply(im) for im in stack]), name)


@pytest.mark.parametrize("np_,kill", [(None, "0:2"), (2, "1:2"), (3, "0:3")])
def test_kill_and_resume(tmp, np_, kill):
    """A CLAHE run killed midway and resumed gives the uninterrupted run's bytes and LUTs."""
    make_mixed(tmp / "in.h5")
    opts = ["--method", "clahe", "--clahe-tile", "40", "--clip-limit", "2", "--block", "20K", "-q"]
    run_ok(["--input", tmp / "in.h5", "--output", tmp / "want.h5"] + opts, np_)
    flush = {"HQ_JOURNAL_FLUSH_S": "0"}
    r = run(["--input", tmp / "in.h5", "--output", tmp / "out.h5"] + opts, np_, env=dict(flush, HQ_FAULT_KILL=kill))
    assert r.rc != 0, f"the kill hook should have fired\n{r}"
    other = ["--method", "clahe", "--clahe-tile", "40", "--clip-limit", "3", "--block", "20K"]
    r = run(["--input", tmp / "in.h5", "--output", tmp / "out.h5", "--resume"] + other, np_, env=flush)
    assert r.rc == 2 and "other options" in r.err, f"a resume under another clip limit must be refused\n{r}"
    run_ok(["--input", tmp / "in.h5", "--output", tmp / "out.h5", "--resume"] + opts, np_, env=flush)
    assert_same_output(str(tmp / "want.h5"), str(tmp / "out.h5"))
    with h5py.File(tmp / "want.h5", "r") as fw, h5py.File(tmp / "out.h5", "r") as fo:
        for name in ("stack", "ct/big"):
            assert np.array_equal(fw[f"histeq_dist/lut/{name}"][()], fo[f"histeq_dist/lut/{name}"][()]), name


def test_tile_histograms_beyond_memory_refused(tmp):
    """2500 tiles of 65,536 bins (1.6 GB of counters) under --memory 64M: one line, exit 2, before any work."""
    with h5py.File(tmp / "in.h5", "w") as f:
        f.create_dataset("img", data=np.zeros((100, 100), np.uint16))
    r = run(["-i", tmp / "in.h5", "-o", tmp / "out.h5", "--method", "clahe", "--clahe-tile", "2", "--memory", "64M"])
    assert r.rc == 2, str(r)
    assert len(r.hq_lines) == 1 and "50x50 tile histograms" in r.hq_lines[0] and "--memory" in r.hq_lines[0], str(r)
    assert not (tmp / "out.h5").exists()


def test_default_output_name(tmp):
    """Without --output, a CLAHE run writes beside the input with the _clahe suffix (app/outname.c)."""
    im = ref.low_contrast(64, 80, 60, 110, np.uint8, 41)
    pngio.write(tmp / "scan.png", im, 8, pngio.GRAY)
    r = run_ok(["-i", tmp / "scan.png", "--method", "clahe", "--clahe-grid", "4x4", "--clip-limit", "2"])
    assert "scan_clahe.png" in r.err, str(r)
    assert not (tmp / "scan_eq.png").exists()
    got = read_png(tmp / "scan_clahe.png").samples[:, :, 0]
    assert_array_equal(got, cv2.createCLAHE(2.0, (4, 4)).apply(im), "default-named output vs cv2.createCLAHE")


@pytest.mark.parametrize("np_", [None, 2])
def test_png_collection_io_threads(tmp, np_):
    """A PNG collection through the I/O pipeline with one, three and no I/O threads (HQ_SERIAL_IO):
    the same bytes, each image OpenCV's."""
    imgs = {f"p{k}.png": ref.low_contrast(50 + 7 * k, 61 + 5 * k, 40 + k, 120, np.uint8, 50 + k) for k in range(7)}
    (tmp / "in").mkdir()
    for name, im in imgs.items():
        pngio.write(tmp / "in" / name, im, 8, pngio.GRAY)
    opts = ["--method", "clahe", "--clahe-grid", "3x5", "--clip-limit", "2", "-q"]
    outs = []
    for k, (threads, env) in enumerate([("1", None), ("3", None), ("3", {"HQ_SERIAL_IO": "1"})]):
        out = tmp / f"out{k}"
        run_ok(["-i", tmp / "in", "-o", out, "--io-threads", threads] + opts, np_, env=env)
        outs.append(out)
    for name, im in imgs.items():
        want = cv2.createCLAHE(2.0, (5, 3)).apply(im)
        for out in outs:
            assert_array_equal(read_png(out / name).samples[:, :, 0], want, f"{out.name}/{name} vs cv2.createCLAHE")


def test_png_kinds(tmp):
    """A directory of PNGs of every kind: each its own CLAHE. Palette images come out as RGB(A) (one
    palette entry per index cannot hold colours that now depend on position); the others keep
    their colour type and depth, 1-4-bit gray included (2^depth bins)."""
    from test_png import make_pngs
    make_pngs(tmp / "in")
    equalize(tmp / "in", tmp / "out", "--method", "clahe", "--clahe-grid", "3x3", "--clip-limit", "2",
             "--color", "value")
    for name in sorted(p.name for p in (tmp / "in").iterdir()):
        src, got = read_png(tmp / "in" / name), read_png(tmp / "out" / name)
        if src.color_type == pngio.PALETTE:
            rgb = src.rgb().astype(np.uint8)
            assert got.color_type == (pngio.RGBA if rgb.shape[2] == 4 else pngio.RGB) and got.depth == 8, name
            assert_array_equal(got.samples, clahe_ref.clahe(rgb, 8, 2.0, (3, 3), color="value"), name)
        else:
            assert (got.color_type, got.depth) == (src.color_type, src.depth), name
            img = src.samples if src.samples.shape[2] > 1 else src.samples[:, :, 0]
            want = clahe_ref.clahe(img, src.depth, 2.0, (3, 3), color="value")
            assert_array_equal(got.samples, (want if want.ndim == 3 else want[:, :, None]).astype(got.samples.dtype),
                               name)


def test_skip_leaves_out_an_image_smaller_than_the_grid(tmp):
    """--on-error skip: a thumbnail among scans, smaller than --clahe-grid, is left out and listed
    (exit 3); it ended the whole collection (exit 2). Without skip it still does."""
    d = tmp / "photos"
    d.mkdir()
    rng = np.random.default_rng(31)
    imgs = {f"p{i}.png": rng.integers(0, 256, (40, 56)).astype(np.uint8) for i in range(3)}
    imgs["tiny.png"] = rng.integers(0, 256, (4, 4)).astype(np.uint8)
    for name, a in imgs.items():
        pngio.write(d / name, a, 8, pngio.GRAY)
    r = run(["-i", d, "-o", tmp / "out", "--method", "clahe", "--on-error", "skip"])
    assert r.rc == 3, str(r)
    assert "skipped " in r.err and "tiny.png: --clahe-grid 8x8 has more tiles than the image's 4x4 pixels" in r.err
    assert sorted(os.listdir(tmp / "out")) == ["histeq_dist.complete", "p0.png", "p1.png", "p2.png"]
    for i in range(3):
        a = imgs[f"p{i}.png"]
        assert_array_equal(pngio.read(tmp / "out" / f"p{i}.png").samples[:, :, 0], clahe_ref.clahe(a, 8, 40.0, (8, 8)),
                           f"p{i}")
    r = run(["-i", d, "-o", tmp / "out2", "--method", "clahe"])
    assert r.rc == 2 and "tiny.png" in r.err and not os.path.exists(tmp / "out2"), str(r)


def test_report_shows_thumbnails(tmp):
    """--report with CLAHE: every sampled image's thumbnails before and after, no image reported as
    skipped (test_report.py checks the tile grid and the plotted tile LUTs)."""
    stack = ref.stack_of(3, 60, 80, 20, 90, np.uint8, seed=2)
    with h5py.File(tmp / "in.h5", "w") as f:
        f.create_dataset("s", data=stack)
    equalize(tmp / "in.h5", tmp / "out.h5", "--method", "clahe", "--report", tmp / "rep", "--report-sample", "3")
    page = (tmp / "rep" / "index.html").read_text()
    assert "no pixels" not in page
    for i in range(3):
        for when in ("before", "after"):
            assert f"thumb-{i}-{when}.png" in page and (tmp / "rep" / f"thumb-{i}-{when}.png").exists()


@pytest.mark.parametrize("dtype,udtype", [(np.int16, np.uint16), (np.int8, np.uint8)])
def test_signed_data(tmp, dtype, udtype):
    """int8/int16 go through CLAHE offset to unsigned (the sign bit flipped), as through equalize:
    OpenCV's CLAHE of the offset image, shifted back, on 1 and 3 ranks (blocks cut over ranks)."""
    off = 1 << (8 * np.dtype(dtype).itemsize - 1)
    u = ref.low_contrast(130, 117, 3 * off // 4, 5 * off // 4, udtype, 61)
    im = (u.astype(np.int64) - off).astype(dtype)
    with h5py.File(tmp / "in.h5", "w") as f:
        f.create_dataset("ct", data=im, chunks=(26, 39))
    want = (cv2.createCLAHE(2.0, (4, 3)).apply(u).astype(np.int64) - off).astype(dtype)
    for np_ in (None, 3):
        out = tmp / f"out{np_}.h5"
        equalize(tmp / "in.h5", out, "--method", "clahe", "--clahe-grid", "3x4", "--clip-limit", "2", "--block", "2K",
                 np_=np_)
        with h5py.File(out, "r") as f:
            assert f["ct"].dtype == dtype
            assert_array_equal(f["ct"][()], want, f"{np.dtype(dtype).name} CLAHE vs cv2 on the offset image")


def test_float_data_refused(tmp):
    """CLAHE counts integer levels: a float dataset is refused in one line, exit 2, nothing written."""
    with h5py.File(tmp / "in.h5", "w") as f:
        f.create_dataset("u8", data=np.zeros((20, 30), np.uint8))
        f.create_dataset("f32", data=np.linspace(0, 1, 600, dtype=np.float32).reshape(20, 30))
    r = run(["-i", tmp / "in.h5", "-o", tmp / "out.h5", "--method", "clahe"])
    assert r.rc == 2, str(r)
    assert len(r.hq_lines) == 1 and "f32: --method clahe does not apply to float data" in r.hq_lines[0], str(r)
    assert not (tmp / "out.h5").exists()


@pytest.mark.parametrize("np_", [None, 2], ids=["1rank", "2ranks"])
def test_device_copy_records_identity_tile_luts(tmp, np_):
    """--device copy writes its input back; under CLAHE it recorded tile LUTs of zeros, which
    reproduce nothing. They are the identity, as equalize's are under --device copy."""
    stack = np.random.default_rng(90).integers(0, 256, (2, 40, 30), dtype=np.uint8)
    big = np.random.default_rng(91).integers(0, 256, (400, 300), dtype=np.uint8)
    inp, out = tmp / "in.h5", tmp / "out.h5"
    with h5py.File(inp, "w") as f:
        f["s"] = stack
        f["big"] = big  # shared between the ranks under --block 16K
    run_ok(["-i", inp, "-o", out, "--device", "copy", "--method", "clahe", "--clahe-grid", "4x3", "--block", "16K",
            "-q"], np_)
    with h5py.File(out, "r") as f:
        assert np.array_equal(f["s"][()], stack) and np.array_equal(f["big"][()], big)
        for name, shape in (("s", (2, 4, 3, 1, 256)), ("big", (1, 4, 3, 1, 256))):
            lut = f["histeq_dist/lut/" + name][()]
            assert lut.shape == shape and (lut == np.arange(256)).all(), name
