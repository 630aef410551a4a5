"""--report DIR: the HTML run report and the provenance HDF5 outputs carry.

Each case runs the real program under mpirun and checks the page against numpy: the page parses as
well-formed HTML with no script to run and nothing fetched; each thumbnail PNG decodes (PIL) and
equals, pixel for pixel, a box filter of the input / output computed here; the histograms, LUTs and
plotted bars embedded in the page's JSON equal reference.py's; the run summary matches the run.
HDF5 outputs: /histeq_dist/lut/<dataset> holds each image's LUT (= the reference LUT, and applying
it to the input gives the output), /histeq_dist/global_lut the global one."""
import base64
import io
import json
import os
import struct
import zlib
from html.parser import HTMLParser

import h5py
import numpy as np
import pytest
from PIL import Image

import pngio
import reference as ref
from helpers import DEVICES, read_png, run, run_ok

VOID = {"meta", "img", "br", "hr", "input", "link", "area", "base", "col", "embed", "source", "track", "wbr"}
SIDE = 256


class Page(HTMLParser):
    """Checks that every element is closed in order, and collects the JSON blocks and images."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.problems = [], []
        self.summary, self.sections, self.images, self.svgs = None, [], [], 0
        self._json = None
        self.urls = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "script":
            assert a.get("type") == "application/json", f"a script that would run: {attrs}"
            self._json = a.get("id") or a.get("class")
            self._buf = []
        if tag == "svg":
            self.svgs += 1
        if tag == "img":
            self.images.append(a)
        for k in ("src", "href"):
            if k in a:
                self.urls.append(a[k])
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        if tag == "img":
            self.images.append(dict(attrs))

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.problems.append(f"</{tag}> closes {self.stack[-1:]} ")
            return
        self.stack.pop()
        if tag == "script":
            doc = json.loads("".join(self._buf))
            if self._json == "hq-summary":
                self.summary = doc
            else:
                self.sections.append(doc)
            self._json = None

    def handle_data(self, data):
        if self._json:
            self._buf.append(data)


def parse_report(d):
    html = (d / "index.html").read_text(encoding="utf-8")
    p = Page()
    p.feed(html)
    p.close()
    assert not p.problems and not p.stack, f"not well-formed: {p.problems} open: {p.stack}"
    assert html.startswith("<!DOCTYPE html>") and p.summary is not None
    assert all(u.startswith("data:image/png;base64,") for u in p.urls), "the page fetches something"
    assert not (d / "index.html.part").exists()
    return p


def decode_thumbs(d, p):
    """{file name: array} for every <img>: the data: URI decodes and equals the file beside the page."""
    out = {}
    for a in p.images:
        raw = base64.b64decode(a["src"].split(",", 1)[1])
        im = Image.open(io.BytesIO(raw))
        im.load()
        assert raw == (d / a["data-file"]).read_bytes()
        out[a["data-file"]] = np.asarray(im)
    return out


def thumb(img, bits):
    """The box-filtered 8-bit thumbnail of thumb.h, in numpy."""
    a = np.asarray(img).astype(np.int64)
    a = a[:, :, None] if a.ndim == 2 else a
    h, w, c = a.shape
    maxv = (1 << bits) - 1
    a = np.minimum(a[:, :, :1] if c < 3 else a[:, :, :3], maxv)
    longest = max(h, w)
    side = min(longest, SIDE)
    tw = min(max((w * side + longest // 2) // longest, 1), w)
    th = min(max((h * side + longest // 2) // longest, 1), h)
    ty, tx = np.arange(h) * th // h, np.arange(w) * tw // w
    sums = np.zeros((th, tw, a.shape[2]), np.int64)
    np.add.at(sums, (ty[:, None], tx[None, :]), a)
    cnt = (np.bincount(ty, minlength=th)[:, None] * np.bincount(tx, minlength=tw)[None, :])[:, :, None]
    v = (sums * 510 + cnt * maxv) // (2 * cnt * maxv)
    v = v.astype(np.uint8)
    return v[:, :, 0] if v.shape[2] == 1 else v


def dense(pairs, bins):
    out = np.zeros(bins, np.int64)
    for v, c in pairs:
        out[v] = c
    return out


def labels_for(channels, color):
    if channels < 3:
        return ["gray"]
    return ["R", "G", "B"] if color == "channels" else [color]


def check_section(sec, images, outs, bits, color, method, thumbs=None):
    """One histogram section against numpy: images/outs are the inputs and outputs it covers (one
    image for a sample, all of them for the global section)."""
    bins = 1 << bits
    channels = 1 if images[0].ndim == 2 else images[0].shape[2]
    assert sec["bits"] == bits and sec["bins"] == bins
    through = channels >= 3 and color != "channels"
    assert sec["after_kind"] == ("through_lut" if through else "output")
    hs = [sum(x) for x in zip(*[ref.histograms(im, bits, color) for im in images])]
    assert [h["label"] for h in sec["hists"]] == labels_for(channels, color)
    assert len(sec["hists"]) == len(hs)
    for k, (h, want) in enumerate(zip(sec["hists"], hs)):
        before = dense(h["before"], bins)
        assert np.array_equal(before, want), f"{sec['name']} {h['label']}: before differs"
        lut = ref.build_lut(method, want, bins)
        got_lut = dict(map(tuple, h["lut"]))
        assert sorted(got_lut) == list(np.flatnonzero(want))
        assert all(got_lut[v] == lut[v] for v in got_lut), f"{sec['name']}: LUT differs"
        after = dense(h["after"], bins)
        pushed = np.zeros(bins, np.int64)
        np.add.at(pushed, lut, want)
        assert np.array_equal(after, pushed)
        if not through:  # exact: the histogram of the output
            got = sum(ref.histograms(o, bits, color)[k] for o in outs)
            assert np.array_equal(after, got), f"{sec['name']}: after is not the output's histogram"
        w = h["plot"]["bin_width"]
        assert w == bins // min(bins, 256)
        assert np.array_equal(h["plot"]["before"], want.reshape(-1, w).sum(1))
        assert np.array_equal(h["plot"]["after"], pushed.reshape(-1, w).sum(1))
    if thumbs is not None:
        check_thumbs(sec, images[0], outs[0], bits, thumbs)


def check_thumbs(sec, img, out, bits, thumbs):
    t = sec["thumbs"]
    assert t is not None, f"{sec['name']}: no thumbnails"
    assert np.array_equal(thumbs[t["before"]], thumb(img, bits)), f"{sec['name']}: thumbnail before"
    assert np.array_equal(thumbs[t["after"]], thumb(out, bits)), f"{sec['name']}: thumbnail after"


def evenly(good, n):
    n = min(n, good)
    return [(good - 1) // 2] if n == 1 else [k * (good - 1) // (n - 1) for k in range(n)]


def check_summary(p, np_, images, scope, skipped=0):
    s = p.summary
    assert s["ranks"] == (np_ or 1) and len(s["devices"]) == s["ranks"]
    assert s["images"] == images and s["scope"] == scope
    assert set(s["phases"]) == {"create", "read", "histogram", "allreduce", "remap", "write", "close"}
    assert all(v["max_s"] >= v["mean_s"] >= 0 for v in s["phases"].values())
    assert len(s["skipped"]) == skipped and s["exit_status"] == (3 if skipped else 0)
    assert f"--scope {scope}" in s["options"] and "--report" in s["command_line"]


def h5_write(path, **dsets):
    with h5py.File(path, "w") as f:
        for k, v in dsets.items():
            f.create_dataset(k, data=v)
    return str(path)


def check_provenance(out, inp, names, bits, color, method):
    """Each image's LUT in /histeq_dist/lut/<dataset> equals the reference and reproduces the output."""
    with h5py.File(inp, "r") as fi, h5py.File(out, "r") as fo:
        a = fo.attrs
        assert "--report" in str(a["command_line"]) and "--scope image" in str(a["options"])
        for name, stacked in names:
            src, got, luts = fi[name][()], fo[name][()], fo["histeq_dist/lut/" + name][()]
            imgs, outs = (list(src), list(got)) if stacked else ([src], [got])
            assert luts.dtype == np.uint16 and luts.shape[0] == len(imgs)
            for k, (im, o) in enumerate(zip(imgs, outs)):
                want = [ref.build_lut(method, h, 1 << bits) for h in ref.histograms(im, bits, color)]
                assert luts.shape[1:] == (len(want), 1 << bits)
                assert all(np.array_equal(luts[k, h], want[h]) for h in range(len(want))), f"{name}[{k}]: LUT"
                again = ref.apply(im, [luts[k, h].astype(np.int64) for h in range(len(want))], bits, color)
                assert np.array_equal(again, o), f"{name}[{k}]: the recorded LUT does not reproduce the output"


# ---- cases ------------------------------------------------------------------------------------


@pytest.mark.parametrize("np_", [None, 3], ids=["single", "np3"])
def test_gray_u8_image_scope(tmp, np_):
    """Two datasets (a stack and a 2-D image); small blocks cut images into row bands, so LUTs are
    made on several paths (whole images, local bands)."""
    stack = ref.stack_of(7, 70, 90, 50, 120, np.uint8, seed=10)
    flat = ref.low_contrast(80, 60, 100, 160, np.uint8, seed=11)
    inp = h5_write(tmp / "in.h5", **{"a/stack": stack, "b": flat})
    out, rep = tmp / "out.h5", tmp / "rep"
    run_ok(["-i", inp, "-o", out, "--device", DEVICES[0], "--report", rep, "--report-sample", "3", "--block", "2K",
            "-q"], np_)
    p = parse_report(rep)
    thumbs = decode_thumbs(rep, p)
    check_summary(p, np_, 8, "image")
    with h5py.File(out, "r") as f:
        outs = list(f["a/stack"][()]) + [f["b"][()]]
    images = list(stack) + [flat]
    assert [s["image"] for s in p.sections] == evenly(8, 3) == [0, 3, 7]
    for s in p.sections:
        check_section(s, [images[s["image"]]], [outs[s["image"]]], 8, "luma", "equalize", thumbs)
    assert p.svgs == 2 * 3 and not p.summary["log_scale"]
    check_provenance(out, inp, [("a/stack", True), ("b", False)], 8, "luma", "equalize")


@pytest.mark.parametrize("color", ["luma", "value"])
def test_rgb_rows_shared_over_ranks(tmp, color):
    """Two RGB images on 3 ranks: each image is cut into row bands held by different ranks, so its
    histogram is reduced and its thumbnails are summed over ranks."""
    stack = ref.stack_of(2, 150, 110, 40, 170, np.uint8, seed=20, rgb=True)
    inp = h5_write(tmp / "in.h5", rgb=stack)
    out, rep = tmp / "out.h5", tmp / "rep"
    run_ok(["-i", inp, "-o", out, "--device", DEVICES[0], "--color", color, "--report", rep,
            "--report-scale", "log", "-q"], 3)
    p = parse_report(rep)
    thumbs = decode_thumbs(rep, p)
    check_summary(p, 3, 2, "image")
    assert p.summary["log_scale"] and "(log scale)" in (rep / "index.html").read_text()
    with h5py.File(out, "r") as f:
        outs = f["rgb"][()]
    assert [s["image"] for s in p.sections] == [0, 1]
    for s in p.sections:
        check_section(s, [stack[s["image"]]], [outs[s["image"]]], 8, color, "equalize", thumbs)
    check_provenance(out, inp, [("rgb", True)], 8, color, "equalize")


@pytest.mark.parametrize("np_", [None, 3], ids=["single", "np3"])
def test_u16_global(tmp, np_):
    """One 16-bit image with 12 significant bits: global scope, bars of 16 levels, the global
    histogram and LUT in the output; on 3 ranks the image is split in row bands."""
    img = ref.low_contrast(170, 130, 1500, 2600, np.uint16, seed=30)
    inp = h5_write(tmp / "in.h5", img=img)
    out, rep = tmp / "out.h5", tmp / "rep"
    run_ok(["-i", inp, "-o", out, "--device", DEVICES[0], "--bits", "12", "--method", "stretch", "--report", rep,
            "-q"], np_)
    p = parse_report(rep)
    thumbs = decode_thumbs(rep, p)
    check_summary(p, np_, 1, "global")
    with h5py.File(out, "r") as f:
        got = f["img"][()]
        gh, glut = f["histeq_dist/global_histogram"][()], f["histeq_dist/global_lut"][()]
        assert "--bits 12" in str(f.attrs["options"])
        assert "lut" not in f["histeq_dist"]
    glob = [s for s in p.sections if s["kind"] == "global"]
    samples = [s for s in p.sections if s["kind"] == "image"]
    assert len(glob) == 1 and [s["image"] for s in samples] == [0]
    check_section(glob[0], [img], [got], 12, "luma", "stretch")
    assert glob[0]["hists"][0]["plot"]["bin_width"] == 16
    want = ref.histograms(img, 12, "luma")[0]
    assert np.array_equal(gh[0], want)
    assert np.array_equal(glut[0], ref.build_lut("stretch", want, 4096))
    assert np.array_equal(ref.apply(img, [glut[0].astype(np.int64)], 12, "luma"), got)
    check_thumbs(samples[0], img, got, 12, thumbs)


@pytest.mark.parametrize("np_", [None, 3], ids=["single", "np3"])
def test_thumbnails_of_chunked_tiles(tmp, np_):
    """A chunked image cut into tiles of many chunks each. Without a report such blocks travel in
    chunk order (io/io.h); thumbnails need to know where each pixel lies, so with a sampled image
    they must come in row order, and the thumbnails must be the image's."""
    img = ref.low_contrast(190, 230, 40, 200, np.uint8, seed=40)
    inp = tmp / "in.h5"
    with h5py.File(inp, "w") as f:
        f.create_dataset("img", data=img, chunks=(16, 24))
    out, rep = tmp / "out.h5", tmp / "rep"
    run_ok(["-i", inp, "-o", out, "--device", DEVICES[0], "--report", rep, "--block", "12K", "-q"], np_)
    p = parse_report(rep)
    thumbs = decode_thumbs(rep, p)
    with h5py.File(out, "r") as f:
        got = f["img"][()]
        assert f["img"].chunks == (16, 24)
    assert np.array_equal(got, ref.equalize_one(img, 8))
    samples = [s for s in p.sections if s["kind"] == "image"]
    assert [s["image"] for s in samples] == [0]
    check_thumbs(samples[0], img, got, 8, thumbs)


def corrupt_idat(path):
    data = bytearray(open(path, "rb").read())
    off, n = pngio.idat_offsets(bytes(data))[0]
    for k in range(n // 3, n // 3 + 8):
        data[off + k] ^= 0x5A
    payload = bytes(data[off - 4 : off + n])
    data[off + n : off + n + 4] = struct.pack(">I", zlib.crc32(payload) & 0xFFFFFFFF)
    open(path, "wb").write(bytes(data))


def test_png_mixed_channels_skip(tmp):
    """A PNG directory of RGB, gray+alpha, 16-bit gray and 1-bit gray files plus one that fails to
    decode, --color channels, --on-error skip on 3 ranks: every image sampled, the bad one shown as
    skipped, exit 3, the report still written."""
    d = tmp / "in"
    os.makedirs(d)
    files = {
        "a_rgb.png": (ref.low_contrast_rgb(60, 80, 30, 140, np.uint8, seed=40), 8, pngio.RGB),
        "b_ga.png": (np.dstack([ref.low_contrast(50, 70, 80, 130, np.uint8, seed=41),
                                np.full((50, 70), 200, np.uint8)]), 8, pngio.GRAY_ALPHA),
        "c_bad.png": (ref.low_contrast(40, 40, 50, 90, np.uint8, seed=42), 8, pngio.GRAY),
        "d_u16.png": (ref.low_contrast(300, 40, 20000, 26000, np.uint16, seed=43), 16, pngio.GRAY),
        "e_1bit.png": ((ref.low_contrast(30, 33, 0, 1, np.uint8, seed=44)), 1, pngio.GRAY),
    }
    for name, (a, depth, ct) in files.items():
        pngio.write(d / name, a, depth, ct)
    corrupt_idat(str(d / "c_bad.png"))
    out, rep = tmp / "out", tmp / "rep"
    r = run(["-i", d, "-o", out, "--device", DEVICES[0], "--color", "channels", "--on-error", "skip", "--report", rep,
             "--report-sample", "10", "-q"], 3)
    assert r.rc == 3, str(r)
    p = parse_report(rep)
    thumbs = decode_thumbs(rep, p)
    check_summary(p, 3, 5, "image", skipped=1)
    assert "c_bad.png" in p.summary["skipped"][0]
    names = sorted(files)
    assert [s["image"] for s in p.sections] == [0, 1, 2, 3, 4]
    for s in p.sections:
        name = names[s["image"]]
        if name == "c_bad.png":
            assert s["note"] and not s["hists"] and s["thumbs"] is None
            continue
        a, depth, _ = files[name]
        got = read_png(out / name).samples
        src = a if a.ndim == 3 else a[:, :, None]
        check_section(s, [src], [got], depth, "channels", "equalize", thumbs)
    assert len(thumbs) == 2 * 4


def test_provenance_without_report_and_reequalize(tmp):
    """The LUTs are written without --report too; a file we wrote is scanned for its images only."""
    stack = ref.stack_of(3, 40, 50, 60, 110, np.uint8, seed=50)
    inp = h5_write(tmp / "in.h5", s=stack)
    out = tmp / "out.h5"
    run_ok(["-i", inp, "-o", out, "--device", DEVICES[0], "-q"], 2)
    with h5py.File(out, "r") as f:
        luts = f["histeq_dist/lut/s"][()]
        got = f["s"][()]
    for k in range(3):
        assert np.array_equal(luts[k, 0], ref.build_lut("equalize", ref.histograms(stack[k], 8, "luma")[0], 256))
    again = tmp / "again.h5"
    run_ok(["-i", out, "-o", again, "--device", DEVICES[0], "-q"])
    with h5py.File(again, "r") as f:
        assert sorted(f["histeq_dist/lut"]) == ["s"]
        assert np.array_equal(f["s"][()], ref.equalize_stack(got, 8)[0])


@pytest.mark.parametrize("where", ["unwritable", "a-file", "is-output"])
def test_report_dir_checked_up_front(tmp, where):
    stack = ref.stack_of(2, 20, 20, 60, 90, np.uint8, seed=60)
    inp = h5_write(tmp / "in.h5", s=stack)
    out = tmp / "out.h5"
    if where == "unwritable":
        rep, code = "/proc/hq-no/such", 1
    elif where == "a-file":
        rep, code = tmp / "file.txt", 1
        rep.write_text("x")
    else:
        rep, code = out, 2
    r = run(["-i", inp, "-o", out, "--device", DEVICES[0], "--report", rep], 2)
    assert not r.timed_out and r.rc == code, str(r)
    assert len(r.hq_lines) == 1 and str(rep) in r.hq_lines[0], str(r)
    assert not out.exists() and not (tmp / "out.h5.part").exists()


def test_report_failing_at_the_end_keeps_the_output(tmp):
    """A report that cannot be written at the end (here DIR/index.html is a directory, which the
    up-front check cannot foresee) fails the run with exit 1 and one line, after the output was
    committed: the output is complete and correct, and no index.html or .part is left."""
    stack = ref.stack_of(3, 30, 40, 60, 90, np.uint8, seed=70)
    inp = h5_write(tmp / "in.h5", s=stack)
    out, rep = tmp / "out.h5", tmp / "rep"
    os.makedirs(rep / "index.html")
    (rep / "index.html" / "keep").write_text("x")
    r = run(["-i", inp, "-o", out, "--device", DEVICES[0], "--report", rep], 2)
    assert not r.timed_out and r.rc == 1, str(r)
    assert len(r.hq_lines) == 1 and str(rep) in r.hq_lines[0], str(r)
    with h5py.File(out, "r") as f:
        assert np.array_equal(f["s"][()], ref.equalize_stack(stack, 8)[0])
    assert (rep / "index.html").is_dir() and not (rep / "index.html.part").exists()
