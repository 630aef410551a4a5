"""Bad input and bad usage: the exit code of cli.md, exactly one stderr line
`histeq_dist: ...` naming the path, no crash or hang, nothing left under the output's final name
(nor a stray .part), and the input unchanged. Each case runs as an MPI singleton and under
mpirun -np 2 (where mpirun adds its own banner lines around ours)."""
import json
import os
import shutil
import signal
import struct
import subprocess
import zlib

import h5py
import numpy as np
import pytest

import pngio
import reference as ref
from helpers import BIN, DEVICES, assert_array_equal, equalize, read_png, run, run_env, run_ok, tree_hash

E_IO, E_USAGE, E_SKIPPED, E_INPUT, E_DEVICE = 1, 2, 3, 4, 5
RANKS = [None, 2]
ERR_TIMEOUT = 60


def good_h5(path, shape=(40, 50), dtype=np.uint8):
    a = ref.low_contrast(shape[0], shape[1], 50, 100, dtype, seed=90)
    with h5py.File(path, "w") as f:
        f.create_dataset("img", data=a)
    return str(path)


def good_png(path, seed=91, shape=(40, 50)):
    pngio.write(path, ref.low_contrast(shape[0], shape[1], 50, 100, np.uint8, seed), 8, pngio.GRAY)
    return str(path)


def flip_idat(path, fix_crc):
    """Flips bytes in the middle of the first IDAT payload; with fix_crc the chunk CRC is
    recomputed so that only the zlib stream is damaged."""
    data = bytearray(open(path, "rb").read())
    off, n = pngio.idat_offsets(bytes(data))[0]
    for k in range(n // 3, n // 3 + 8):
        data[off + k] ^= 0x5A
    if fix_crc:
        payload = bytes(data[off - 4 : off + n])  # type + payload
        data[off + n : off + n + 4] = struct.pack(">I", zlib.crc32(payload) & 0xFFFFFFFF)
    open(path, "wb").write(bytes(data))


def truncate(path, frac=0.5):
    data = open(path, "rb").read()
    open(path, "wb").write(data[: int(len(data) * frac)])


def leftovers(out):
    """Anything under the final name, or a temporary .part next to it."""
    found = []
    if os.path.lexists(out):
        found.append(out)
    parent = os.path.dirname(out) or "."
    if os.path.isdir(parent):
        found += [os.path.join(parent, n) for n in os.listdir(parent) if n.endswith(".part")]
    return found


def expect_failure(args, code, named, inputs, outputs, np_, one_line=True):
    hashes = {p: tree_hash(p) for p in inputs if os.path.exists(p)}
    for dev in DEVICES:
        r = run(args + ["--device", dev], np_, timeout=ERR_TIMEOUT)
        assert not r.timed_out, f"hung\n{r}"
        assert r.rc == code, f"exit {r.rc}, want {code}\n{r}"
        lines = r.err_lines if np_ is None else r.hq_lines
        if one_line:
            assert len(lines) == 1, f"want exactly one stderr line\n{r}"
        assert lines and all(l.startswith("histeq_dist: ") for l in lines), f"want 'histeq_dist: ...'\n{r}"
        assert len(set(lines)) == len(lines), f"a line printed twice\n{r}"
        if named:
            assert any(os.path.basename(str(named)) in l for l in lines), f"the message does not name {named}\n{r}"
        for o in outputs:
            assert not leftovers(str(o)), f"left behind: {leftovers(str(o))}\n{r}"
        for p, h in hashes.items():
            assert tree_hash(p) == h, f"input {p} changed"
    return r


# ---- bad inputs: (name, builder(tmp) -> (input path, path the message must name)) -------------


def case_missing(tmp):
    return str(tmp / "no_such.h5"), "no_such.h5"


def case_text_as_h5(tmp):
    (tmp / "notes.h5").write_text("just some text\nnot an image\n")
    return str(tmp / "notes.h5"), "notes.h5"


def case_text_as_png(tmp):
    (tmp / "notes.png").write_text("just some text\nnot an image\n")
    return str(tmp / "notes.png"), "notes.png"


def case_truncated_png(tmp):
    p = good_png(tmp / "cut.png", shape=(120, 100))
    truncate(p)
    return p, "cut.png"


def case_png_idat_crc(tmp):
    p = good_png(tmp / "crc.png", shape=(120, 100))
    flip_idat(p, fix_crc=False)
    return p, "crc.png"


def case_png_idat_zlib(tmp):
    p = good_png(tmp / "zlib.png", shape=(120, 100))
    flip_idat(p, fix_crc=True)
    return p, "zlib.png"


def case_truncated_h5(tmp):
    p = good_h5(tmp / "cut.h5", shape=(300, 300))
    truncate(p)
    return p, "cut.h5"


def case_missing_dataset(tmp):
    p = good_h5(tmp / "in.h5")
    return p + ":/no/such/dataset", "in.h5"


def _one_dset(tmp, name, data):
    p = str(tmp / name)
    with h5py.File(p, "w") as f:
        f.create_dataset("d", data=data)
    return p, name


def case_float16(tmp):
    return _one_dset(tmp, "f16.h5", np.linspace(0, 1, 600, dtype=np.float16).reshape(20, 30))


def case_int32(tmp):
    return _one_dset(tmp, "i32.h5", np.arange(600, dtype=np.int32).reshape(20, 30) - 300)


def case_float_inf(tmp):
    a = np.linspace(0, 1, 600, dtype=np.float32).reshape(20, 30)
    a[3, 4] = np.inf
    return _one_dset(tmp, "finf.h5", a)


def case_float_rgb(tmp):
    return _one_dset(tmp, "frgb.h5", np.zeros((2, 20, 30, 3), np.float32))


def case_5d(tmp):
    return _one_dset(tmp, "d5.h5", np.zeros((2, 2, 3, 4, 5), np.uint8))


def case_zero_sized(tmp):
    return _one_dset(tmp, "empty.h5", np.zeros((0, 10), np.uint8))


def case_zero_sized_stack(tmp):
    return _one_dset(tmp, "empty3.h5", np.zeros((3, 0, 10), np.uint16))


def case_empty_png_dir(tmp):
    os.makedirs(tmp / "nopngs")
    (tmp / "nopngs" / "readme.txt").write_text("no images here\n")
    return str(tmp / "nopngs"), "nopngs"


def case_list_missing_entry(tmp):
    d = tmp / "lst"
    os.makedirs(d)
    good_png(d / "a.png")
    (d / "list.txt").write_text("a.png\ngone.png\n")
    return str(d / "list.txt"), "gone.png"


def case_fifo_in_png_dir(tmp):
    """A FIFO named like a PNG: opening it to read would wait for a writer forever."""
    d = tmp / "withfifo"
    os.makedirs(d)
    good_png(d / "a.png")
    os.mkfifo(d / "b.png")
    return str(d), "b.png"


def case_fifo_in_list(tmp):
    d = tmp / "lstfifo"
    os.makedirs(d)
    good_png(d / "a.png")
    os.mkfifo(d / "pipe.png")
    (d / "list.txt").write_text("a.png\npipe.png\n")
    return str(d / "list.txt"), "pipe.png"


def case_palette_index_past_plte(tmp):
    """Indices 8..15 with an 8-entry palette: an invalid PNG that libpng would let pass as black."""
    pal = [(100 + i, 100 + i, 100 + i) for i in range(8)]
    idx = np.random.default_rng(5).integers(0, 16, (30, 33))
    pngio.write(str(tmp / "badidx.png"), idx, 8, pngio.PALETTE, palette=pal)
    return str(tmp / "badidx.png"), "badidx.png"


def case_damaged_attribute(tmp):
    """The file's end (a string attribute's global heap) cut off, the superblock's end of file moved
    to match: the image reads, the attribute does not. It said "OUT:/: cannot copy attribute", exit
    1, naming the output."""
    p = tmp / "attr_cut.h5"
    with h5py.File(p, "w") as f:
        f["img"] = np.arange(10000, dtype=np.uint32).reshape(100, 100).astype(np.uint8)
        f.attrs["note"] = "hello"
    b = bytearray(p.read_bytes())
    cut = len(b) - 4000
    b = b[:cut]
    b[40:48] = struct.pack("<Q", cut)  # version 0 superblock: end of file address
    p.write_bytes(bytes(b))
    return str(p), "attr_cut.h5"


BAD_INPUTS = [case_missing, case_text_as_h5, case_text_as_png, case_truncated_png, case_png_idat_crc,
              case_png_idat_zlib, case_truncated_h5, case_missing_dataset, case_float16, case_int32, case_float_inf,
              case_float_rgb, case_5d,
              case_zero_sized, case_zero_sized_stack, case_empty_png_dir, case_list_missing_entry,
              case_fifo_in_png_dir, case_fifo_in_list, case_palette_index_past_plte, case_damaged_attribute]


@pytest.mark.parametrize("np_", RANKS, ids=["single", "np2"])
@pytest.mark.parametrize("case", BAD_INPUTS, ids=[c.__name__[5:] for c in BAD_INPUTS])
def test_bad_input(tmp, case, np_):
    inp, named = case(tmp)
    ext = ".png" if inp.endswith(".png") else "" if os.path.isdir(inp) or inp.endswith(".txt") else ".h5"
    out = str(tmp / "out") + ext
    src = inp.split(":")[0]
    expect_failure(["--input", inp, "--output", out], E_INPUT, named, [src], [out], np_)


# ---- bad outputs -------------------------------------------------------------------------------


# A failing mpirun costs ~1.5 s of its own, so the -np 2 variants are a representative subset.
OUT_IS_IN = [(k, f, None) for k in ("h5", "png", "h5-other-spelling") for f in (False, True)] + \
    [("h5", True, 2), ("png", False, 2)]


@pytest.mark.parametrize("kind,force,np_", OUT_IS_IN, ids=lambda v: {None: "single", 2: "np2", True: "force",
                                                                     False: "noforce"}.get(v, v))
def test_output_is_input(tmp, kind, force, np_):
    if kind == "png":
        inp = good_png(tmp / "a.png")
        out = inp
    else:
        inp = good_h5(tmp / "a.h5")
        out = inp if kind == "h5" else os.path.join(str(tmp), ".", "sub", "..", "a.h5")
        os.makedirs(tmp / "sub", exist_ok=True)
    args = ["--input", inp, "--output", out] + (["--force"] if force else [])
    hashes = tree_hash(inp)
    expect_failure(args, E_USAGE, os.path.basename(inp), [inp], [], np_)
    assert tree_hash(inp) == hashes
    assert not [n for n in os.listdir(tmp) if n.endswith(".part")]


@pytest.mark.parametrize("kind,np_", [("h5", None), ("png", None), ("pngdir", None), ("pngdir", 2), ("h5", 2)],
                         ids=["h5", "png", "pngdir", "pngdir-np2", "h5-np2"])
def test_existing_output(tmp, kind, np_):
    if kind == "h5":
        inp, out = good_h5(tmp / "a.h5"), str(tmp / "out.h5")
        open(out, "w").write("precious\n")
    elif kind == "png":
        inp, out = good_png(tmp / "a.png"), str(tmp / "out.png")
        open(out, "w").write("precious\n")
    else:
        os.makedirs(tmp / "in")
        good_png(tmp / "in" / "x.png")
        inp, out = str(tmp / "in"), str(tmp / "out")
        os.makedirs(out)
        open(os.path.join(out, "keep.txt"), "w").write("precious\n")
    before = tree_hash(out)
    args = ["--input", inp, "--output", out]
    r = run(args + ["--device", DEVICES[0]], np_, timeout=ERR_TIMEOUT)
    assert not r.timed_out and r.rc == E_USAGE, f"want exit 2\n{r}"
    lines = r.err_lines if np_ is None else r.hq_lines
    assert len(lines) == 1 and lines[0].startswith("histeq_dist: ") and os.path.basename(out) in lines[0], str(r)
    assert tree_hash(out) == before, "the existing output was touched without --force"
    # With --force it works and replaces the output.
    equalize(inp, out, "--force", np_=np_)
    if kind == "h5":
        assert h5py.is_hdf5(out)
    elif kind == "png":
        assert read_png(out).width == 50
    else:
        assert os.path.exists(os.path.join(out, "x.png"))
    assert not [n for n in os.listdir(tmp) if n.endswith(".part")]


@pytest.mark.parametrize("kind,np_", [("h5", None), ("png", None), ("pngdir", None), ("h5", 2), ("pngdir", 2)],
                         ids=["h5", "png", "pngdir", "h5-np2", "pngdir-np2"])
def test_unwritable_output_location(tmp, kind, np_):
    """/proc refuses new files even to root."""
    if kind == "h5":
        inp, out = good_h5(tmp / "a.h5"), "/proc/histeq_dist_test/out.h5"
    elif kind == "png":
        inp, out = good_png(tmp / "a.png"), "/proc/histeq_dist_test.png"
    else:
        os.makedirs(tmp / "in")
        good_png(tmp / "in" / "x.png")
        inp, out = str(tmp / "in"), "/proc/histeq_dist_test_dir"
    expect_failure(["--input", inp, "--output", out], E_IO, out, [inp], [out], np_)


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory modes")
def test_read_only_output_dir(tmp):
    inp = good_h5(tmp / "a.h5")
    ro = tmp / "ro"
    os.makedirs(ro)
    os.chmod(ro, 0o555)
    try:
        expect_failure(["--input", inp, "--output", str(ro / "out.h5")], E_IO, "out.h5", [inp], [str(ro / "out.h5")],
                       None)
    finally:
        os.chmod(ro, 0o755)


# ---- --on-error -------------------------------------------------------------------------------


def dir_with_one_bad(tmp, how):
    d = tmp / "in"
    os.makedirs(d)
    imgs = {}
    for i in range(4):
        if i == 2:
            continue
        imgs[f"ok{i}.png"] = ref.low_contrast(30, 40 + i, 60, 90, np.uint8, 95 + i)
        pngio.write(d / f"ok{i}.png", imgs[f"ok{i}.png"], 8, pngio.GRAY)
    bad = d / "bad2.png"
    if how == "text":
        bad.write_text("not a png\n")
    elif how == "forged":
        # A header declaring 100000 x 100000 pixels over a few bytes of data: it asked for a
        # --memory of 28 GiB for the whole collection (exit 2) instead of being a bad file.
        def chunk(t, b):
            return struct.pack(">I", len(b)) + t + b + struct.pack(">I", zlib.crc32(t + b) & 0xFFFFFFFF)
        bad.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 100000, 100000, 8, 0, 0, 0, 0)) +
                        chunk(b"IDAT", zlib.compress(b"\0" * 1000)) + chunk(b"IEND", b""))
    else:
        good_png(bad, shape=(120, 100))
        if how == "truncated":
            truncate(str(bad))
        else:
            flip_idat(str(bad), fix_crc=(how == "zlib"))
    return d, imgs


@pytest.mark.parametrize("how,np_", [("text", None), ("truncated", None), ("crc", None), ("zlib", None),
                                     ("forged", None), ("text", 2), ("zlib", 2), ("forged", 2)],
                         ids=["text", "truncated", "crc", "zlib", "forged", "text-np2", "zlib-np2", "forged-np2"])
def test_on_error_skip(tmp, how, np_):
    d, imgs = dir_with_one_bad(tmp, how)
    before = tree_hash(d)
    out = tmp / "out"
    r = run(["--input", d, "--output", out, "--on-error", "skip", "--device", DEVICES[0]], np_, timeout=ERR_TIMEOUT)
    assert not r.timed_out and r.rc == E_SKIPPED, f"want exit 3\n{r}"
    lines = r.err_lines if np_ is None else r.hq_lines
    assert any("bad2.png" in l for l in lines), f"the skipped file is not listed\n{r}"
    assert all(l.startswith("histeq_dist") for l in lines), str(r)
    assert len(set(lines)) == len(lines), f"a line printed twice\n{r}"
    n = len(imgs)
    assert any(f"equalized {n} images" in l for l in lines), f"the closing line must count {n} images, not the skipped\n{r}"
    assert sorted(os.listdir(out)) == sorted(list(imgs) + ["histeq_dist.complete"]), f"output holds {sorted(os.listdir(out))}"
    for name, im in imgs.items():
        assert_array_equal(read_png(out / name).samples[:, :, 0], ref.equalize_one(im, 8), name)
    assert tree_hash(d) == before


@pytest.mark.parametrize("how,np_", [("text", None), ("zlib", None), ("zlib", 2), ("forged", None)],
                         ids=["text", "zlib", "zlib-np2", "forged"])
def test_on_error_stop(tmp, how, np_):
    d, _ = dir_with_one_bad(tmp, how)
    out = tmp / "out"
    expect_failure(["--input", d, "--output", out], E_INPUT, "bad2.png", [str(d)], [str(out)], np_)


def test_on_error_skip_hdf5_dataset(tmp):
    """A file of several datasets is a collection: an unsupported dataset is left out."""
    good = ref.low_contrast(30, 40, 60, 90, np.uint8, 99)
    inp = str(tmp / "in.h5")
    with h5py.File(inp, "w") as f:
        f.create_dataset("good", data=good)
        f.create_dataset("bad", data=np.zeros((5, 5), np.float16))
    out = tmp / "out.h5"
    r = run(["--input", inp, "--output", out, "--on-error", "skip", "--device", DEVICES[0]], timeout=ERR_TIMEOUT)
    assert r.rc == E_SKIPPED, f"want exit 3\n{r}"
    assert any("bad" in l for l in r.err_lines), str(r)
    with h5py.File(out, "r") as f:
        assert_array_equal(f["good"][()], ref.equalize_one(good, 8), "/good")


# ---- usage ------------------------------------------------------------------------------------


@pytest.mark.parametrize("args", [
    ["--no-such-option"],
    ["--bits", "0"],
    ["--bits", "17"],
    ["--color", "purple"],
    ["--method", "magic"],
    ["--scope", "everything"],
    ["--device", "tpu"],
    ["--memory", "lots"],
    ["--block", "0"],
    ["--png-level", "10"],
    ["--on-error", "ignore"],
    ["--threads", "-1"],
    ["--bins", "1"],
    ["--bins", "65537"],
    ["--range", "5:3"],
    ["--range", "0:inf"],
    ["--range", "1"],
    # strtoull's edges: past 2^64 (ERANGE), a sign after blanks (" -5" would be 2^64 - 5)
    ["--memory", "18446744073709551616"],
    ["--memory", "99999999999999999999999"],
    ["--memory", " -5"],
    ["--block", " -5"],
    ["--block", "+64M"],
    ["--threads", " 2"],
    ["--threads", "+2"],
    ["--png-level", "99999999999999999999"],
], ids=lambda a: " ".join(a))
def test_usage_errors(tmp, args):
    inp = good_h5(tmp / "a.h5")
    out = str(tmp / "out.h5")
    r = run(["--input", inp, "--output", out] + args, timeout=ERR_TIMEOUT)
    assert not r.timed_out and r.rc == E_USAGE, f"want exit 2\n{r}"
    assert len(r.err_lines) == 1 and r.err_lines[0].startswith("histeq_dist: "), str(r)
    assert not leftovers(out)


@pytest.mark.parametrize("opt", ["--input", "--mask", "--reference"])
def test_empty_names_are_usage_errors(tmp, opt):
    """An empty --input, --mask or --reference was looked for as a file: "histeq_dist: : no such
    file or directory", exit 4, naming nothing."""
    inp = good_h5(tmp / "a.h5")
    out = str(tmp / "out.h5")
    args = ["--input", "", "--output", out] if opt == "--input" else \
        ["--input", inp, "--output", out, "--method", "match" if opt == "--reference" else "equalize", opt, ""]
    r = run(args, timeout=ERR_TIMEOUT)
    assert not r.timed_out and r.rc == E_USAGE and r.err_lines == [f"histeq_dist: {opt}: empty name"], str(r)
    assert not leftovers(out)


@pytest.mark.parametrize("args, named", [
    (["-xq"], "-x"),                  # inside a cluster getopt has not moved past the word
    (["-vX"], "-X"),
    (["--bits", "8", "-Zv"], "-Z"),   # not the value before it
    (["-x"], "-x"),
    (["--re", "x"], "--re"),          # --reference or --report: ambiguous
])
def test_unknown_option_is_named(tmp, args, named):
    inp = good_h5(tmp / "a.h5")
    out = str(tmp / "out.h5")
    r = run(args + ["--input", inp, "--output", out], timeout=ERR_TIMEOUT)
    assert not r.timed_out and r.rc == E_USAGE, f"want exit 2\n{r}"
    assert len(r.err_lines) == 1 and r.err_lines[0].startswith(f"histeq_dist: {named}: unknown option"), str(r)
    assert not leftovers(out)


@pytest.mark.parametrize("opt", ["--input", "--output"])
def test_input_or_output_twice_is_refused(tmp, opt):
    """-i a -i b took b alone, silently: a user who meant both got half the work."""
    inp = good_h5(tmp / "a.h5")
    other = good_h5(tmp / "b.h5")
    out = str(tmp / "out.h5")
    args = ["--input", inp, "--input", other, "--output", out] if opt == "--input" else \
        ["--input", inp, "--output", out, "--output", str(tmp / "o2.h5")]
    r = run(args, timeout=ERR_TIMEOUT)
    assert not r.timed_out and r.rc == E_USAGE, f"want exit 2\n{r}"
    assert len(r.err_lines) == 1 and f"{opt} given twice" in r.err_lines[0], str(r)
    assert not leftovers(out) and not os.path.exists(tmp / "o2.h5")


def test_usage_error_without_output_is_one_line(tmp):
    """The default output's note comes after the checks: a usage error found by them is the
    only line (it named an output that was never written)."""
    inp = good_h5(tmp / "a.h5")
    r = run(["--input", inp, "--method", "clahe", "--clahe-grid", "999x999"], timeout=ERR_TIMEOUT)
    assert not r.timed_out and r.rc == E_USAGE, f"want exit 2\n{r}"
    assert len(r.err.strip().splitlines()) == 1 and "--clahe-grid 999x999" in r.err, str(r)
    assert not os.path.exists(tmp / "a_clahe.h5")


@pytest.mark.parametrize("np_", RANKS, ids=["single", "np2"])
def test_missing_required(tmp, np_):
    """--input is required (--output is not: test_default_output.py)."""
    cases = (["--output", str(tmp / "o.h5")], []) if np_ is None else (["--output", str(tmp / "o.h5")],)
    for args in cases:
        r = run(args, np_, timeout=ERR_TIMEOUT)
        assert not r.timed_out and r.rc == E_USAGE, f"want exit 2\n{r}"
        lines = r.err_lines if np_ is None else r.hq_lines
        assert len(lines) == 1 and lines[0].startswith("histeq_dist: "), str(r)


def test_help_and_version():
    r = run(["--help"], timeout=ERR_TIMEOUT)
    assert r.rc == 0 and "--input" in r.out and "--output" in r.out, str(r)
    r2 = run(["-h"], timeout=ERR_TIMEOUT)
    assert r2.rc == 0 and r2.out == r.out
    r = run(["--version"], timeout=ERR_TIMEOUT)
    assert r.rc == 0 and "0.1.0" in r.out, str(r)


def gpu_visible():
    if not shutil.which("nvidia-smi"):
        return False
    return subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0


@pytest.mark.skipif("gpu" in DEVICES or gpu_visible(), reason="a GPU is present")
@pytest.mark.parametrize("np_", RANKS, ids=["single", "np2"])
def test_device_gpu_without_gpu(tmp, np_):
    inp = good_h5(tmp / "a.h5")
    out = str(tmp / "out.h5")
    r = run(["--input", inp, "--output", out, "--device", "gpu"], np_, timeout=ERR_TIMEOUT)
    assert not r.timed_out and r.rc == E_DEVICE, f"want exit 5\n{r}"
    lines = r.err_lines if np_ is None else r.hq_lines
    assert len(lines) == 1 and lines[0].startswith("histeq_dist: "), str(r)
    assert not leftovers(out)


def test_quiet_and_auto_notice(tmp):
    inp = good_h5(tmp / "a.h5")
    r = run(["--input", inp, "--output", tmp / "q.h5", "-q"], timeout=ERR_TIMEOUT)
    assert r.rc == 0 and r.err == "", f"-q: want a silent stderr\n{r}"
    if not gpu_visible():
        r = run(["--input", inp, "--output", tmp / "n.h5"], timeout=ERR_TIMEOUT)
        notices = [l for l in r.err.splitlines() if l.startswith("histeq_dist: note:") and "gpu" in l.lower()]
        assert r.rc == 0 and len(notices) == 1, f"--device auto without a GPU: want one notice line\n{r}"


def test_error_naming_a_newline_is_one_line(tmp):
    """A newline in a dataset name or a file name (both legal) split the error in two lines; control
    characters now print as '?'."""
    inp = tmp / "in.h5"
    with h5py.File(inp, "w") as f:
        f["bad\nname"] = np.zeros((4, 4), np.float16)
    r = run(["-i", inp, "-o", tmp / "out.h5"], timeout=ERR_TIMEOUT)
    assert r.rc == E_INPUT and r.err.count("\n") == 1 and "in.h5:/bad?name: unsupported type" in r.err, str(r)
    bad = tmp / "a\nb\x1b[31m.png"
    bad.write_bytes(b"x")
    r = run(["-i", bad, "-o", tmp / "o.png"], timeout=ERR_TIMEOUT)
    assert r.rc == E_INPUT and r.err.count("\n") == 1 and "a?b?[31m.png: not a PNG file" in r.err, str(r)


def test_input_locked_by_a_writer_is_an_io_error(tmp):
    """An HDF5 file another process has open for writing: HDF5's lock refuses it. That is no fault of
    the file, so it is not called truncated or corrupt (exit 4), but locked (exit 1)."""
    inp = tmp / "in.h5"
    with h5py.File(inp, "w") as f:
        f["a"] = np.zeros((8, 8), np.uint8)
    with h5py.File(inp, "a"):
        r = run(["-i", inp, "-o", tmp / "out.h5"], timeout=ERR_TIMEOUT)
    assert r.rc == E_IO and len(r.err_lines) == 1, str(r)
    assert "in.h5: locked by a process writing it" in r.err_lines[0] and "corrupt" not in r.err_lines[0], str(r)
    assert not (tmp / "out.h5").exists()


@pytest.mark.parametrize("method", [[], ["--method", "match", "--reference", "global"]], ids=["equalize", "match-global"])
@pytest.mark.parametrize("n,np_", [(2, None), (2, 2), (1, None)], ids=["two", "two-np2", "one"])
def test_on_error_skip_every_image_bad_in_its_pixels_is_nothing_to_equalize(tmp, n, np_, method):
    """Every PNG of a collection bad only in its pixel data (the header reads): each was skipped as
    it was read, and the run ended 'finished with skips' (exit 3) with an output directory holding
    nothing but its completion mark, and for one image a note blaming a mask. As when the scan
    finds them all bad: exit 4, 'nothing to equalize', no output. --reference global read them
    first and said only 'the reference has no counted pixels'."""
    d = tmp / "in"
    d.mkdir()
    for i in range(n):
        good_png(d / f"b{i}.png", shape=(40, 30))
        flip_idat(str(d / f"b{i}.png"), fix_crc=(i == 1))
    before = tree_hash(d)
    out = tmp / "out"
    r = run(["--input", d, "--output", out, "--on-error", "skip", "--device", DEVICES[0]] + method, np_,
            timeout=ERR_TIMEOUT)
    assert not r.timed_out and r.rc == E_INPUT, f"want exit 4\n{r}"
    lines = [l for l in (r.err_lines if np_ is None else r.hq_lines)]
    assert len(lines) == 1 and "nothing to equalize" in lines[0] and "b0.png" in lines[0], str(r)
    assert "masked out" not in r.err, str(r)
    assert not out.exists() and not leftovers(str(out))
    assert tree_hash(d) == before


@pytest.mark.parametrize("opt", ["--input", "--output", "--mask", "--reference"])
def test_dash_is_not_a_stream(tmp, opt):
    """-i - or -o -: other tools read standard input or write standard output there, and HDF5 seeks
    in its files. -i - said "-: cannot open HDF5 file (truncated or corrupt?)" of a file named -
    (exit 4); -o - wrote a file named -. Now exit 2, naming the option and ./- for such a file,
    and a file named - is read as ./-. --summary - is standard output (it wrote a file named -)."""
    inp = good_h5(tmp / "-")
    out = tmp / "out.h5"
    args = {"--input": ["--input", "-", "--output", out], "--output": ["--input", inp, "--output", "-"],
            "--mask": ["--input", inp, "--output", out, "--mask", "-"],
            "--reference": ["--input", inp, "--output", out, "--method", "match", "--reference", "-"]}[opt]
    r = run(args, timeout=ERR_TIMEOUT, cwd=tmp)
    assert r.rc == E_USAGE and len(r.err_lines) == 1, str(r)
    assert r.err_lines[0].startswith(f"histeq_dist: {opt} -: standard ") and "./-" in r.err_lines[0], str(r)
    assert not out.exists() and sorted(os.listdir(tmp)) == ["-"]
    r = run_ok(["--input", "./-", "--output", out, "-q", "--summary", "-"], cwd=tmp)
    assert json.loads(r.out)["output"] == str(out) and sorted(os.listdir(tmp)) == ["-", "out.h5"], str(r)


@pytest.mark.parametrize("kind", ["device", "fifo", "link to a fifo"])
@pytest.mark.parametrize("fmt", ["hdf5", "png", "png dir"])
def test_output_no_run_may_replace(tmp, kind, fmt):
    """An output is made under a temporary name and renamed over OUT: with --force a device node or
    FIFO there was replaced by a regular file (-o /dev/null --force took the system's /dev/null).
    Each is refused, exit 2, one line naming it, with or without --force, and left as it was."""
    if fmt == "hdf5":
        inp, name = good_h5(tmp / "in.h5"), "out.h5"
    else:
        (tmp / "pngs").mkdir()
        pngio.write(str(tmp / "pngs" / "a.png"), np.arange(48 * 64, dtype=np.uint8).reshape(48, 64) % 251, 8, pngio.GRAY)
        inp, name = (tmp / "pngs" / "a.png", "out.png") if fmt == "png" else (tmp / "pngs", "outdir")
    out = tmp / name
    if kind == "device":
        if subprocess.run(["mknod", "-m", "666", str(out), "c", "1", "3"], capture_output=True).returncode:
            pytest.skip("mknod needs root")
    elif kind == "fifo":
        os.mkfifo(out)
    else:
        os.mkfifo(tmp / "pipe")
        os.symlink("pipe", out)
    before = os.lstat(out)
    want = "not a regular file (a device, FIFO or socket)"
    for force in ([], ["--force"]):
        r = run(["-i", inp, "-o", out] + force, timeout=ERR_TIMEOUT)
        assert r.rc == E_USAGE and len(r.err_lines) == 1, str(r)
        assert r.err_lines[0].startswith(f"histeq_dist: {out}: {want}"), str(r)
        after = os.lstat(out)
        assert (after.st_mode, after.st_ino, after.st_rdev) == (before.st_mode, before.st_ino, before.st_rdev)
        assert sorted(os.listdir(tmp)) == sorted(["in.h5" if fmt == "hdf5" else "pngs", name] +
                                                 (["pipe"] if kind == "link to a fifo" else [])), os.listdir(tmp)


def test_empty_png_says_empty_alone_or_in_a_directory(tmp):
    """A zero-byte .png said "empty file" given alone but "not a PNG file" in a directory."""
    d = tmp / "pngs"
    d.mkdir()
    good_png(d / "a.png")
    (d / "b.png").write_bytes(b"")
    for given, skip in ((d / "b.png", []), (d, []), (d, ["--on-error", "skip"])):
        r = run(["-i", given, "-o", tmp / ("o.png" if given.suffix else "o")] + skip, timeout=ERR_TIMEOUT)
        assert r.rc == (E_SKIPPED if skip else E_INPUT) and f"{d / 'b.png'}: empty file" in r.err, str(r)


@pytest.mark.parametrize("rows,want,code", [(2 ** 24, "not enough disk space for the output", E_IO),
                                             (2 ** 40, "blocks of at most", E_USAGE)], ids=["16TiB", "1PiB"])
def test_a_small_file_describing_a_huge_image_is_refused_up_front(tmp, rows, want, code):
    """A 1.4 KB file holding a dataset never written, of 2^24 (or 2^40) rows of 2^20 bytes: HDF5
    sized the 16 TiB output at create (EFBIG on ext4), then crashed in H5Fclose (SIGSEGV); the
    1 PiB one's plan took 10 GB of memory and growing. Refused before anything is made: the disk
    cannot hold it, or its plan would need more blocks than a rank holds (a larger --block)."""
    inp = tmp / "huge.h5"
    with h5py.File(inp, "w") as f:
        f.create_dataset("d", shape=(rows, 2 ** 20), dtype=np.uint8, chunks=(1024, 1024))
    r = run(["-i", inp, "-o", tmp / "out.h5"], timeout=ERR_TIMEOUT)
    assert not r.timed_out and r.rc == code and len(r.err_lines) == 1, str(r)
    assert want in r.err_lines[0] and str(tmp / ("out.h5" if code == E_IO else "huge.h5")) in r.err_lines[0], str(r)
    assert sorted(os.listdir(tmp)) == ["huge.h5"], os.listdir(tmp)


def test_input_path_through_a_file_says_so(tmp):
    """A path that goes on past a file (a.h5/ or a.h5/img, where a dataset is a.h5:/img) said "no
    such file or directory", though the file is there."""
    inp = good_h5(tmp / "a.h5")
    for given in (inp + "/", inp + "/img"):
        r = run(["-i", given, "-o", tmp / "o.h5"], timeout=ERR_TIMEOUT)
        assert r.rc == E_INPUT and len(r.err_lines) == 1, str(r)
        assert r.err_lines[0] == f"histeq_dist: {given}: part of the path is a file, not a directory (a dataset in " \
                                 "an HDF5 file is named FILE:/DATASET)", str(r)


def test_unreadable_input_path_names_the_reason(tmp):
    """stat() failing for another reason than absence (a symlink loop here; a directory without
    search permission alike) said 'no such file or directory'."""
    os.symlink("loopB", tmp / "loopA")
    os.symlink("loopA", tmp / "loopB")
    r = run(["-i", tmp / "loopA", "-o", tmp / "o.png"], timeout=ERR_TIMEOUT)
    assert r.rc == E_INPUT and len(r.err_lines) == 1, str(r)
    assert "loopA: cannot open (Too many levels of symbolic links)" in r.err_lines[0], str(r)


@pytest.mark.skipif(not shutil.which("gdb"), reason="needs gdb to stop the run between the read and the histogram")
def test_input_cut_short_while_read_in_place_is_one_line_not_a_crash(tmp):
    """The CPU engine reads an unfiltered input in place, through a mapping of the file whose pages
    the read populates. Another process cutting the file short after that made the histogram fault:
    SIGBUS, no line, exit 135 (mpirun: 'signal 7'). Now one line naming the input, exit 4. gdb stops
    the run at its first histogram (the block is read, the pages are there), the file is cut to a
    page, and the run goes on."""
    inp = tmp / "in.h5"
    with h5py.File(inp, "w") as f:
        f["v"] = np.random.default_rng(5).integers(0, 200, (8, 256, 256), dtype=np.uint8)
    g = subprocess.run(["gdb", "-q", "-batch", "-ex", "handle SIGBUS nostop noprint pass",
                        "-ex", "set breakpoint pending on", "-ex", "break hq_cpu_histogram", "-ex", "run",
                        "-ex", f"shell truncate -s 4096 {inp}", "-ex", "delete", "-ex", "continue", "--args",
                        BIN, "--input", str(inp), "--output", str(tmp / "out.h5"), "--device", "cpu"],
                       capture_output=True, text=True, timeout=120,
                       env=run_env({"HQ_INPUT_VIEW": "1"}))  # in place, whatever the machine's page costs
    assert "Breakpoint 1, hq_cpu_histogram" in g.stdout, g.stdout + g.stderr
    lines = [l for l in g.stderr.splitlines() if l.startswith("histeq_dist:") and "note:" not in l]
    assert lines == [f"histeq_dist: {inp}: the input changed while it was read (cut short by another process?)"], \
        g.stdout + g.stderr
    assert "exited with code 04" in g.stdout, g.stdout
    assert not (tmp / "out.h5").exists()


@pytest.mark.parametrize("kind", ["h5", "png", "pngdir"])
def test_output_under_a_file_says_not_a_directory(tmp, kind):
    """An output whose parent is a file: root was told 'Permission denied' (access() answers EACCES
    there), a PNG directory 'File exists'. The reason is the parent's kind."""
    (tmp / "notdir").write_text("x")
    img = (np.arange(64) % 50).reshape(8, 8).astype(np.uint8)
    if kind == "h5":
        inp = tmp / "in.h5"
        with h5py.File(inp, "w") as f:
            f["a"] = img
        out = tmp / "notdir" / "x.h5"
    elif kind == "png":
        inp = tmp / "a.png"
        pngio.write(str(inp), img, 8, pngio.GRAY)
        out = tmp / "notdir" / "x.png"
    else:
        inp = tmp / "d"
        inp.mkdir()
        pngio.write(str(inp / "a.png"), img, 8, pngio.GRAY)
        out = tmp / "notdir" / "outd"
    r = run(["-i", inp, "-o", out], timeout=ERR_TIMEOUT)
    assert r.rc == E_IO and len(r.err_lines) == 1 and "Not a directory" in r.err_lines[0], str(r)


@pytest.mark.skipif(not shutil.which("gdb"), reason="needs gdb to stop the run between two blocks")
def test_input_rewritten_or_cut_while_read_is_not_committed(tmp):
    """Another process cutting the input short while it was read through HDF5 (which reads past a
    file's end as zeros): the run finished, exit 0, marked complete, with slices of zeros. The
    input files' identity, size and times are compared after the work with those taken at the scan:
    a change fails the run, exit 4, nothing written. gdb stops the run at its first histogram, the
    file is cut to a quarter, the run goes on."""
    inp = tmp / "in.h5"
    with h5py.File(inp, "w") as f:
        f["v"] = np.random.default_rng(6).integers(0, 200, (16, 128, 128), dtype=np.uint8)
    size = inp.stat().st_size
    env = run_env({"HQ_INPUT_VIEW": "0", "HQ_HDF5_DIRECT": "0"})
    g = subprocess.run(["gdb", "-q", "-batch", "-ex", "set breakpoint pending on", "-ex", "break hq_cpu_histogram",
                        "-ex", "run", "-ex", f"shell truncate -s {size // 4} {inp}", "-ex", "delete", "-ex", "continue",
                        "--args", BIN, "--input", str(inp), "--output", str(tmp / "out.h5"), "--device", "cpu",
                        "--block", "32K", "--scope", "image"],
                       capture_output=True, text=True, timeout=120, env=env)
    assert "Breakpoint 1, hq_cpu_histogram" in g.stdout, g.stdout + g.stderr
    lines = [l for l in g.stderr.splitlines() if l.startswith("histeq_dist:") and "note:" not in l]
    assert len(lines) == 1 and "the input changed while it was read" in lines[0], g.stdout + g.stderr
    assert "exited with code 04" in g.stdout, g.stdout
    assert not (tmp / "out.h5").exists()


@pytest.mark.skipif(not shutil.which("gdb"), reason="needs gdb to stop the run between two blocks")
def test_a_file_made_at_the_output_during_the_run_is_not_replaced(tmp):
    """OUT was checked absent at the start; a file someone made there while the run went was
    replaced by the final rename, exit 0, without --force. Now it stays, and the run says so in
    one line (exit 2); with --force it is replaced, as asked."""
    inp = tmp / "in.h5"
    with h5py.File(inp, "w") as f:
        f["v"] = np.random.default_rng(7).integers(0, 200, (4, 64, 64), dtype=np.uint8)
    for force in ([], ["--force"]):
        out = tmp / f"out{len(force)}.h5"
        # Stopped at close, before the rename: the metadata copy comes right before it.
        g = subprocess.run(["gdb", "-q", "-batch", "-ex", "set breakpoint pending on", "-ex", "break hdf5_carry",
                            "-ex", "run", "-ex", f"shell echo precious > {out}", "-ex", "delete", "-ex", "continue",
                            "--args", BIN, "--input", str(inp), "--output", str(out), "--device", "cpu"] + force,
                           capture_output=True, text=True, timeout=120, env=run_env({}))
        assert "Breakpoint 1, hdf5_carry" in g.stdout, g.stdout + g.stderr
        lines = [l for l in g.stderr.splitlines() if l.startswith("histeq_dist:") and "note:" not in l]
        if force:
            assert "exited normally" in g.stdout and "appeared" not in g.stderr, g.stdout + g.stderr
            with h5py.File(out, "r") as f:
                assert f["v"].shape == (4, 64, 64)
        else:
            assert len(lines) == 1 and "appeared there while the run went" in lines[0], g.stdout + g.stderr
            assert "exited with code 02" in g.stdout, g.stdout
            assert out.read_text() == "precious\n"
        assert not os.path.exists(str(out) + ".part")


@pytest.mark.parametrize("np_", [None, 2])
def test_output_named_for_the_other_format_is_refused(tmp, np_):
    """HDF5 input to 'x.png' wrote an HDF5 file named .png, one PNG to 'x.h5' a PNG named .h5,
    exit 0: every reader after it was misled. Each is one line, exit 2, nothing written; the
    right names, and a PNG directory's output of any name, work."""
    h5, png = good_h5(tmp / "a.h5"), good_png(tmp / "b.png")
    for inp, out in ((h5, "x.png"), (h5, "x.PNG"), (png, "y.h5"), (png, "y.hdf5")):
        r = run(["-i", inp, "-o", tmp / out], np_, timeout=ERR_TIMEOUT)
        lines = r.err_lines if np_ is None else r.hq_lines
        assert r.rc == E_USAGE and len(lines) == 1 and out in lines[0], str(r)
        assert not (tmp / out).exists()
    d = tmp / "pngs"
    d.mkdir()
    good_png(d / "c.png")
    for inp, out in ((h5, "ok.h5"), (png, "ok.png"), (d, "dir.h5")):
        r = run(["-i", inp, "-o", tmp / out, "-q"], np_, timeout=ERR_TIMEOUT)
        assert r.rc == 0, str(r)


# ---- the environment a batch job runs in ---------------------------------------------------------


def test_file_size_limit_is_said_not_a_silent_death(tmp):
    """Under ulimit -f (a batch system's h_fsize), a write past the limit sent SIGXFSZ: the run died
    with no word (exit 153). An HDF5 output whose pixels cannot fit is now refused before it is
    made (exit 1, nothing left); a run that outgrows the limit later (PNG files, compressed chunks,
    copied metadata) ends by SIGXFSZ with the interrupted line, its temporaries gone and its
    journal kept for --resume under a larger limit."""
    h5 = tmp / "in.h5"
    with h5py.File(h5, "w") as f:
        f["d"] = np.random.default_rng(1).integers(0, 4000, (24, 256, 512), dtype=np.uint16)
    gz = tmp / "gz.h5"
    with h5py.File(gz, "w") as f:
        f.create_dataset("d", data=np.random.default_rng(2).integers(0, 4000, (1200, 1200), dtype=np.uint16),
                         chunks=(200, 200), compression="gzip")
    pngs = tmp / "pngs"
    pngs.mkdir()
    for i in range(6):
        pngio.write(pngs / f"p{i}.png", np.random.default_rng(i).integers(0, 256, (300, 300), dtype=np.uint8), 8,
                    pngio.GRAY)

    def under_limit(inp, out, kib):
        before = tree_hash(inp) if inp.is_dir() else inp.read_bytes()
        p = subprocess.run(["bash", "-c", f"ulimit -f {kib}; exec {BIN} -i {inp} -o {out} --luts none"],
                           capture_output=True, text=True, timeout=ERR_TIMEOUT, env=run_env(), cwd=tmp)
        assert (tree_hash(inp) if inp.is_dir() else inp.read_bytes()) == before
        return p, [l for l in p.stderr.splitlines() if l.startswith("histeq_dist") and "note:" not in l]

    p, lines = under_limit(h5, tmp / "out.h5", 2048)
    assert p.returncode == E_IO and len(lines) == 1 and "(ulimit -f)" in lines[0], p
    assert [n for n in os.listdir(tmp) if n.startswith(("out", ".out"))] == []
    for inp, out, kib in ((pngs, tmp / "outp", 40), (gz, tmp / "outz.h5", 1024)):
        p, lines = under_limit(inp, out, kib)
        assert p.returncode == -signal.SIGXFSZ and lines == [
            f"histeq_dist: {out}: interrupted by SIGXFSZ; the work done is kept ({out}.journal): run again with "
            "--resume to finish"], p
        assert os.path.isdir(f"{out}.journal") and not (out / "histeq_dist.complete").exists() if out.is_dir() \
            else not out.exists()
        assert not [n for n in os.listdir(tmp) + (os.listdir(out) if out.is_dir() else []) if ".part-" in n]


def test_summary_into_a_pipe_whose_reader_left(tmp):
    """--summary /dev/stdout into a pipe already closed: the write fails (EPIPE), which is said (exit
    1) with the output complete and kept, as any failed summary write; SIGPIPE killed the run instead
    (exit 141) and left its lock."""
    inp, out = good_h5(tmp / "in.h5"), tmp / "out.h5"
    p = subprocess.Popen([BIN, "-i", inp, "-o", out, "--summary", "/dev/stdout"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=run_env(), text=True)
    p.stdout.close()
    err = p.stderr.read()
    rc = p.wait(timeout=ERR_TIMEOUT)
    assert rc == E_IO and "/dev/stdout: cannot write (Broken pipe); the output is complete and kept" in err, \
        f"exit {rc}\n{err}"
    with h5py.File(out, "r") as f:
        assert f.attrs.get("histeq_dist_complete") == 1
    assert not (tmp / ".out.h5.lock").exists()


def test_relative_paths_from_a_removed_working_directory(tmp):
    """Started in a directory that was then removed, with relative paths: Open MPI's file open
    crashed on them (SIGSEGV, exit 139). Refused in one line, exit 2."""
    inp = good_h5(tmp / "in.h5")
    gone = tmp / "gone"
    gone.mkdir()
    cmd = f"cd {gone} && rmdir {gone} && exec {BIN} -i ../in.h5 -o ../out.h5"
    p = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=ERR_TIMEOUT, env=run_env())
    lines = [l for l in p.stderr.splitlines() if l.startswith("histeq_dist")]
    assert p.returncode == E_USAGE and lines == [
        "histeq_dist: ../in.h5: a relative path, and the working directory cannot be read (it was removed): "
        "give an absolute path"], p
    assert not (tmp / "out.h5").exists() and os.path.exists(inp)


@pytest.mark.parametrize("what", ["--help", "--version"])
def test_help_into_a_full_disk_is_a_failure(what):
    with open("/dev/full", "w") as full:
        p = subprocess.run([BIN, what], stdout=full, stderr=subprocess.PIPE, text=True, timeout=ERR_TIMEOUT,
                           env=run_env())
    assert p.returncode == E_IO and "standard output: write failed" in p.stderr, p
