"""--report DIR: the HTML run report and the provenance HDF5 outputs carry.

Each case runs the real program under mpirun and checks the page against numpy: the page parses as
well-formed HTML with no script to run and nothing fetched; each thumbnail PNG decodes (PIL) and
equals, pixel for pixel, a box filter of the input / output computed here; the histograms, LUTs and
plotted bars embedded in the page's JSON equal reference.py's; the run summary matches the run.
HDF5 outputs: /histeq_dist/lut/<dataset> holds each image's LUT (= the reference LUT, and applying
it to the input gives the output), /histeq_dist/global_lut the global one.
CLAHE reports: the tile grid over each thumbnail has its lines where OpenCV's tiles meet (clahe_ref's
geometry, in thumbnail pixels), and the plotted corner and centre tiles' LUTs are the ones the HDF5
output records (and clahe_ref's), curve by curve."""
import base64
import io
import json
import os
import re
import struct
import zlib
from html.parser import HTMLParser

import h5py
import numpy as np
import pytest
from PIL import Image

import clahe_ref
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


SECTION_KEYS = {"kind", "image", "name", "width", "height", "channels", "bits", "bins", "after_kind", "level0", "note", "hists",
                "thumbs"}


def check_plain_structure(d, p):
    """A report that is not CLAHE's: the section JSON has exactly its keys, and no grid or tile plot."""
    html = (d / "index.html").read_text(encoding="utf-8")
    assert all(set(s) == SECTION_KEYS for s in p.sections), [sorted(s) for s in p.sections]
    assert not any(f'class="{c}"' in html for c in ("hq-tiles", "hq-tile-lut", "tiled", "hq-pick"))
    assert "CLAHE:" not in html and "Equalized with the global LUT" not in html


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
    check_plain_structure(rep, p)
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


def axis_labels(svg):
    """The numbers under a plot's x axis (the labels centred below the frame), in order."""
    return [int(t) for t in re.findall(r'text-anchor="middle" [^>]*>(-?\d+)</text>', svg)]


@pytest.mark.parametrize("dtype", [np.int16, np.int8, np.uint16])
def test_signed_levels_shown_as_values(tmp, dtype):
    """Signed data is equalized offset by 2^(n-1) (README, Signed integers); its sections say so
    (level0) and the plots' axes show the data's own values: ticks at round values, 0 among them,
    none past the type's range. The histograms and LUTs stay in the offset domain, as recorded in
    the output."""
    bits = np.iinfo(dtype).bits
    lo = int(np.iinfo(dtype).min)
    rng = np.random.default_rng(7)
    hi = int(np.iinfo(dtype).max)
    img = rng.integers(lo + (hi - lo) // 4, hi - (hi - lo) // 4, size=(3, 64, 80)).astype(dtype)
    inp = h5_write(tmp / "in.h5", ct=img)
    out, rep = tmp / "out.h5", tmp / "rep"
    run_ok(["-i", inp, "-o", out, "--device", DEVICES[0], "--report", rep, "--report-sample", "1", "-q"], None)
    p = parse_report(rep)
    check_plain_structure(rep, p)
    assert p.sections and all(s["level0"] == (lo if lo < 0 else 0) for s in p.sections)
    sec = p.sections[0]
    offset = -lo if lo < 0 else 0
    want = np.bincount((img[sec["image"]].astype(np.int64) + offset).ravel(), minlength=1 << bits)
    assert np.array_equal(dense(sec["hists"][0]["before"], 1 << bits), want)
    html = (rep / "index.html").read_text(encoding="utf-8")
    svgs = re.findall(r"<svg.*?</svg>", html, re.S)
    hist_svg = next(s for s in svgs if "Histogram, gray" in s)
    ticks = axis_labels(hist_svg)
    first, top = (lo, -lo - 1) if lo < 0 else (0, (1 << bits) - 1)
    assert ticks and 0 in ticks and all(first <= t <= top for t in ticks), ticks
    assert (min(ticks) < 0) == (lo < 0) and ticks == sorted(ticks)
    step = ticks[1] - ticks[0]
    assert all(t % step == 0 for t in ticks) and top - ticks[-1] < step and ticks[0] - first < step


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
    # The images equalized, as the closing line counts them (the bad one was counted too).
    check_summary(p, 3, 4, "image", skipped=1)
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


def test_luts_none_leaves_the_record_out_and_large_luts_are_noted(tmp):
    """A stack of small 16-bit slices records 128 KiB of LUT a slice, hundreds of times its pixels:
    the run says so and names --luts none, which leaves the per-image LUTs out, pixels unchanged,
    at any rank count; the provenance names the setting, and a resume under the other one is refused."""
    rng = np.random.default_rng(61)
    small = rng.integers(0, 65536, (520, 6, 6), dtype=np.uint16)  # LUTs 68 MB, pixels 37 KB
    inp = h5_write(tmp / "in.h5", s=small, big=ref.stack_of(2, 90, 120, 300, 60000, np.uint16, seed=62))
    full = tmp / "full.h5"
    r = run_ok(["-i", inp, "-o", full, "--device", DEVICES[0]])
    notes = [l for l in r.err.splitlines() if "--luts none" in l]
    assert len(notes) == 1 and str(full) in notes[0] and "/histeq_dist/lut" in notes[0], r.err
    with h5py.File(full, "r") as f:
        assert f["histeq_dist/lut/s"].shape == (520, 1, 65536)
        want = {k: f[k][()] for k in ("s", "big")}
    for np_ in (None, 2):
        out = tmp / f"none{np_}.h5"
        r = run_ok(["-i", inp, "-o", out, "--device", DEVICES[0], "--luts", "none"], np_)
        assert "--luts none" not in r.err, r.err
        with h5py.File(out, "r") as f:
            assert "histeq_dist" not in f and all(np.array_equal(f[k][()], want[k]) for k in want)
            assert "--luts none" in str(f.attrs["options"])
        assert os.path.getsize(out) < os.path.getsize(full) // 50
    # Small LUTs are not worth a note.
    r = run_ok(["-i", h5_write(tmp / "few.h5", s=small[:40]), "-o", tmp / "few_eq.h5"])
    assert "--luts" not in r.err, r.err
    # A kill, then a resume with the other setting: another output, refused.
    out = tmp / "killed.h5"
    r = run(["-i", inp, "-o", out, "--block", "16K", "-q"], None, env={"HQ_JOURNAL_FLUSH_S": "0", "HQ_FAULT_KILL": "0:2"})
    assert r.rc != 0 and os.path.isdir(str(out) + ".journal"), str(r)
    r = run(["-i", inp, "-o", out, "--block", "16K", "--resume", "--luts", "none"])
    assert r.rc == 2 and "other options" in r.err_lines[0], str(r)
    r = run(["-i", inp, "-o", out, "--luts", "some"])
    assert r.rc == 2 and r.err_lines == ["histeq_dist: --luts: 'some' is not one of all, none"], str(r)


@pytest.mark.parametrize("where", ["unwritable", "a-file", "is-output"])
def test_report_dir_checked_up_front(tmp, where):
    stack = ref.stack_of(2, 20, 20, 60, 90, np.uint8, seed=60)
    inp = h5_write(tmp / "in.h5", s=stack)
    out = tmp / "out.h5"
    if where == "unwritable":
        rep, code = "/proc/hq-no/such", 1
    elif where == "a-file":  # a file where a directory must go: the command line's mistake, as --summary DIR
        rep, code = tmp / "file.txt", 2
        rep.write_text("x")
    else:
        rep, code = out, 2
    r = run(["-i", inp, "-o", out, "--device", DEVICES[0], "--report", rep], 2)
    assert not r.timed_out and r.rc == code, str(r)
    assert len(r.hq_lines) == 1 and str(rep) in r.hq_lines[0], str(r)
    assert not out.exists() and not (tmp / "out.h5.part").exists()


@pytest.mark.parametrize("where", ["in-h5-output", "output-png", "completion-mark", "under-output-png"])
def test_report_dir_in_a_file_of_the_output_is_refused_up_front(tmp, where):
    """A DIR that is, or lies in, a file the output will be or hold passed the check and failed
    the run at its end (exit 1, "Not a directory"), after all the work."""
    if where == "in-h5-output":
        inp, out = h5_write(tmp / "in.h5", s=ref.stack_of(2, 20, 20, 60, 90, np.uint8, seed=61)), tmp / "o.h5"
        rep = out / "rep"
    else:
        inp, out = tmp / "pngs", tmp / "out"
        inp.mkdir()
        for i in range(3):
            pngio.write(inp / f"a{i}.png", np.full((8, 8), 10 * i, np.uint8), 8, pngio.GRAY)
        rep = {"output-png": out / "a1.png", "completion-mark": out / "histeq_dist.complete",
               "under-output-png": out / "a0.png" / "deeper"}[where]
    r = run(["-i", inp, "-o", out, "--device", DEVICES[0], "--report", rep])
    assert r.rc == 2 and len(r.err_lines) == 1 and str(rep) in r.err_lines[0] and "--report" in r.err_lines[0], str(r)
    assert not out.exists() or not os.listdir(out)


@pytest.mark.parametrize("where", ["output", "single-png-output", "reference", "mask", "listed-input"])
def test_report_never_writes_over_a_file_of_the_run(tmp, where):
    """The page (index.html) and the thumbnails (thumb-N-before/after.png) replaced a file of the
    same name in DIR that the run wrote or read, and the run said exit 0: the HDF5 output became
    the HTML page, a --reference or --mask PNG or a listed input became a thumbnail."""
    rep = tmp / "rep"
    rep.mkdir()
    pngs = tmp / "pngs"
    pngs.mkdir()
    for i in range(2):
        pngio.write(pngs / f"a{i}.png", ref.low_contrast(20, 30, 40, 90, np.uint8, i), 8, pngio.GRAY)
    guarded = None
    if where == "output":
        args = ["-i", h5_write(tmp / "in.h5", s=ref.stack_of(2, 20, 20, 60, 90, np.uint8, seed=62)),
                "-o", rep / "index.html"]
    elif where == "single-png-output":
        args = ["-i", pngs / "a0.png", "-o", rep / "thumb-0-after.png"]
    elif where in ("reference", "mask"):
        guarded = rep / "thumb-0-before.png"
        pngio.write(guarded, np.ones((20, 30), np.uint8), 8, pngio.GRAY)
        if where == "reference":
            args = ["-i", pngs, "-o", tmp / "out", "--method", "match", "--reference", guarded]
        else:  # the mask of one PNG is one PNG
            args = ["-i", pngs / "a1.png", "-o", tmp / "o.png", "--mask", guarded]
    else:
        guarded = rep / "index.html"
        pngio.write(guarded, np.full((20, 30), 7, np.uint8), 8, pngio.GRAY)
        (tmp / "l.txt").write_text(f"{guarded}\n{pngs / 'a1.png'}\n")
        args = ["-i", tmp / "l.txt", "-o", tmp / "out"]
    before = guarded.read_bytes() if guarded else None
    r = run(args + ["--device", DEVICES[0], "--report", rep])
    assert r.rc == 2 and len(r.hq_lines) == 1 and "--report DIR would write its page or thumbnails over" in r.hq_lines[0], \
        str(r)
    if guarded:
        assert guarded.read_bytes() == before
    assert os.listdir(rep) == ([guarded.name] if guarded else [])


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


def test_a_summary_that_fails_leaves_no_page_saying_success(tmp):
    """The page was written before --summary: with the summary failing (here /dev/full) the run
    exits 1, yet DIR/index.html said "exit status 0 (done)". The summary comes first now, and a
    run whose summary fails writes no page."""
    stack = ref.stack_of(2, 30, 40, 60, 90, np.uint8, seed=71)
    inp = h5_write(tmp / "in.h5", s=stack)
    out, rep = tmp / "out.h5", tmp / "rep"
    r = run(["-i", inp, "-o", out, "--device", DEVICES[0], "--report", rep, "--summary", "/dev/full"], 2)
    assert not r.timed_out and r.rc == 1 and len(r.hq_lines) == 1 and "/dev/full" in r.hq_lines[0], str(r)
    assert "the output is complete and kept" in r.hq_lines[0], str(r)
    assert not (rep / "index.html").exists()
    with h5py.File(out, "r") as f:
        assert np.array_equal(f["s"][()], ref.equalize_stack(stack, 8)[0])


# ---- CLAHE: the tile grid over the thumbnails and the tiles' LUTs ------------------------------


class TileSvg(HTMLParser):
    """Per section, in page order: its grid overlays (the lines and outlined tiles of each) and its
    tile LUT plots (each curve's points by series, the plot's texts)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.sections, self._svg, self._text = [], None, None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "section":
            self.sections.append({"overlays": [], "plots": []})
        elif tag == "svg" and a.get("class") == "hq-tiles":
            self._svg = {"attrs": a, "x": [], "y": [], "picks": []}
            self.sections[-1]["overlays"].append(self._svg)
        elif tag == "svg" and a.get("aria-label", "").startswith("Tile LUTs"):
            self._svg = {"attrs": a, "curves": {}, "texts": []}
            self.sections[-1]["plots"].append(self._svg)
        elif tag == "line" and a.get("class") in ("hq-grid-x", "hq-grid-y"):
            self._svg[a["class"][-1]].append(a)
        elif tag == "rect" and a.get("class") == "hq-pick":
            self._svg["picks"].append(a)
        elif tag == "polyline" and a.get("class") == "hq-tile-lut":
            pts = [[float(v) for v in xy.split(",")] for xy in a["points"].split()]
            self._svg["curves"][int(a["data-series"])] = np.array(pts)
        elif tag == "text" and self._svg is not None and "texts" in self._svg:
            self._text = []

    def handle_endtag(self, tag):
        if tag == "svg":
            self._svg = None
        elif tag == "text" and self._text is not None:
            self._svg["texts"].append("".join(self._text))
            self._text = None

    def handle_data(self, data):
        if self._text is not None:
            self._text.append(data)


def tile_svgs(d):
    t = TileSvg()
    t.feed((d / "index.html").read_text(encoding="utf-8"))
    t.close()
    return t.sections


def picked(gy, gx):
    """README: the four corners and the centre tile, each once, in row-major order."""
    return sorted({(0, 0), (0, gx - 1), (gy // 2, gx // 2), (gy - 1, 0), (gy - 1, gx - 1)})


def check_curves(curves, luts, levels):
    """The curves draw these LUTs: each has a point per level, and one affine map from (level, output
    level) to the plot's (x, y) fits every point of every curve to the 0.1 pixel the page prints, so
    a curve drawn from another tile's LUT, or from wrong values, does not fit."""
    assert sorted(curves) == list(range(len(luts)))
    assert np.ptp(np.concatenate(luts)) > 0, "degenerate case: the LUTs cannot tell curves apart"
    v = np.arange(levels, dtype=float)
    xs, ys, outs = [], [], []
    for k, lut in enumerate(luts):
        pts = curves[k]
        assert len(pts) == levels
        xs.append(pts[:, 0])
        ys.append(pts[:, 1])
        outs.append(np.asarray(lut, dtype=float))
    for x in xs:
        assert np.allclose(x, xs[0]), "curves drawn over different input levels"
    bx, ax = np.polyfit(v, xs[0], 1)
    assert bx > 0 and np.abs(ax + bx * v - xs[0]).max() <= 0.06
    out, y = np.concatenate(outs), np.concatenate(ys)
    by, ay = np.polyfit(out, y, 1)
    assert by < 0, "higher output levels must be drawn higher"
    assert np.abs(ay + by * out - y).max() <= 0.06, "a curve is not its tile's LUT"


def check_clahe_section(sec, svg, img, luts, grid, bits, thumbs):
    """One CLAHE section against OpenCV's geometry (clahe_ref) and the tile LUTs `luts`
    (tiles_y, tiles_x, nhist, bins) that the run recorded or clahe_ref computed."""
    h, w = img.shape[:2]
    gy, gx, th, tw = clahe_ref.geometry(h, w, grid)
    c = sec["clahe"]
    assert sec["hists"] == [] and c["tiles"] == [gy, gx] and c["tile_size"] == [th, tw]
    assert c["labels"] == labels_for(1 if img.ndim == 2 else img.shape[2], "channels")
    want_x = [k * tw for k in range(1, gx) if k * tw < w]
    want_y = [k * th for k in range(1, gy) if k * th < h]
    picks = picked(gy, gx)
    assert [tuple(t["tile"]) for t in c["tile_luts"]] == picks
    for t in c["tile_luts"]:
        assert np.array_equal(np.array(t["luts"]), luts[t["tile"][0], t["tile"][1]]), f"tile {t['tile']}: LUT"
    if c["grid"] is None:  # too fine to draw: tile_view.h
        t = thumbs[sec["thumbs"]["before"]]
        assert th * t.shape[0] < 3 * h or tw * t.shape[1] < 3 * w
        assert svg["overlays"] == []
    else:
        tw_px, th_px = c["grid"]["thumb"]
        assert thumbs[sec["thumbs"]["before"]].shape[:2] == (th_px, tw_px)
        assert c["grid"]["x"] == want_x and c["grid"]["y"] == want_y
        assert len(svg["overlays"]) == 2, "one grid over each thumbnail, before and after"
        for ov in svg["overlays"]:
            assert ov["attrs"]["viewbox"] == f"0 0 {tw_px} {th_px}"
            assert [int(l["data-pos"]) for l in ov["x"]] == want_x
            assert [int(l["data-pos"]) for l in ov["y"]] == want_y
            for l, pos in zip(ov["x"], want_x):  # a boundary at image column pos lies at pos * tw_px / w
                assert float(l["x1"]) == float(l["x2"]) == pytest.approx(pos * tw_px / w, abs=1e-4)
                assert (float(l["y1"]), float(l["y2"])) == (0, th_px)
            for l, pos in zip(ov["y"], want_y):
                assert float(l["y1"]) == float(l["y2"]) == pytest.approx(pos * th_px / h, abs=1e-4)
                assert (float(l["x1"]), float(l["x2"])) == (0, tw_px)
            inside = [(r, col) for r, col in picks if r * th < h and col * tw < w]
            assert [tuple(map(int, r["data-tile"].split(","))) for r in ov["picks"]] == inside
    assert len(svg["plots"]) == luts.shape[2], "one tile LUT plot per histogram"
    for k, plot in enumerate(svg["plots"]):
        assert all(f"tile ({r}, {col})" in plot["texts"] for r, col in picks)
        check_curves(plot["curves"], [luts[r, col, k] for r, col in picks], 1 << bits)


@pytest.mark.parametrize("np_", [None, 3], ids=["single", "np3"])
def test_clahe_grid_and_tile_luts(tmp, np_):
    """CLAHE on a gray stack and an RGB stack (--color channels: three LUTs per tile), 300 x 410 under
    --clahe-grid 5x7: 300 rows divide by 5, yet OpenCV pads them by a whole grid count because the
    columns do not divide, so tiles are 61 x 59 (not 60 x 59). Thumbnails are 256 x 187, so grid
    lines fall between thumbnail pixels. On 3 ranks small blocks split each image over ranks (tile
    rows are exchanged, -v says so), and the page still plots the tile LUTs the output records."""
    stack = ref.stack_of(2, 300, 410, 40, 150, np.uint8, seed=80)
    rgb = ref.stack_of(2, 300, 410, 30, 170, np.uint8, seed=81, rgb=True)
    inp = h5_write(tmp / "in.h5", **{"g/stack": stack, "rgb": rgb})
    out, rep = tmp / "out.h5", tmp / "rep"
    r = run_ok(["-i", inp, "-o", out, "--device", DEVICES[0], "--method", "clahe", "--clahe-grid", "5x7",
                "--clip-limit", "2", "--color", "channels", "--report", rep, "--report-sample", "4", "--block", "16K",
                "-v"], np_)
    if np_:
        sent = [int(b) for b in re.findall(r"CLAHE tile rows exchanged: (\d+) bytes", r.err)]
        assert len(sent) == np_ and sum(sent) > 0, f"no image was shared between ranks\n{r}"
    p = parse_report(rep)
    thumbs = decode_thumbs(rep, p)
    svgs = tile_svgs(rep)
    assert len(svgs) == len(p.sections) == 4 and p.summary["method"] == "clahe"
    with h5py.File(out, "r") as f:
        data = {"g/stack": (list(stack), list(f["g/stack"][()]), f["histeq_dist/lut/g/stack"][()]),
                "rgb": (list(rgb), list(f["rgb"][()]), f["histeq_dist/lut/rgb"][()])}
        assert list(f["histeq_dist/lut/rgb"].attrs["tile_size"]) == [61, 59]
    order = [("g/stack", 0), ("g/stack", 1), ("rgb", 0), ("rgb", 1)]
    assert [s["image"] for s in p.sections] == [0, 1, 2, 3]
    for sec, svg, (name, k) in zip(p.sections, svgs, order):
        imgs, outs, luts = data[name]
        assert name in sec["name"]
        want = np.stack([clahe_ref.tile_luts(pl, 256, clahe_ref.geometry(300, 410, (5, 7)), 2.0)
                         for pl in (imgs[k][:, :, c] for c in range(3))] if imgs[k].ndim == 3 else
                        [clahe_ref.tile_luts(imgs[k], 256, clahe_ref.geometry(300, 410, (5, 7)), 2.0)], axis=2)
        assert np.array_equal(luts[k], want), f"{name}[{k}]: recorded tile LUTs"
        check_clahe_section(sec, svg, imgs[k], luts[k], (5, 7), 8, thumbs)
        check_thumbs(sec, imgs[k], outs[k], 8, thumbs)


@pytest.mark.parametrize("np_,grid", [(None, "12x12"), (3, "12x12"), (None, "15x20")])
def test_clahe_fine_grids_png(tmp, np_, grid):
    """30 x 40 PNGs. Under 12x12 the image is padded to 36 x 48 (tiles of 3 x 4), so the last tile rows
    and columns lie wholly in the padding: 9 lines each way, and of the plotted tiles only (0, 0) and
    the centre (6, 6) are outlined on the picture. Under 15x20 (tiles of 2 x 2 thumbnail pixels) the
    grid is not drawn. Either way the picked tiles' LUTs are plotted, equal to clahe_ref's (a PNG
    output records none); on 3 ranks the images are dealt to different ranks."""
    d = tmp / "in"
    os.makedirs(d)
    imgs = {f"p{k}.png": ref.low_contrast(30, 40, 50 + 10 * k, 140, np.uint8, seed=90 + k) for k in range(3)}
    for name, a in imgs.items():
        pngio.write(d / name, a, 8, pngio.GRAY)
    out, rep = tmp / "out", tmp / "rep"
    run_ok(["-i", d, "-o", out, "--device", DEVICES[0], "--method", "clahe", "--clahe-grid", grid, "--clip-limit", "3",
            "--report", rep, "--report-sample", "3", "-q"], np_)
    p = parse_report(rep)
    thumbs = decode_thumbs(rep, p)
    svgs = tile_svgs(rep)
    rows, cols = map(int, grid.split("x"))
    geo = clahe_ref.geometry(30, 40, (rows, cols))
    names = sorted(imgs)
    for sec, svg in zip(p.sections, svgs):
        a = imgs[names[sec["image"]]]
        luts = clahe_ref.tile_luts(a, 256, geo, 3.0)[:, :, None, :]
        check_clahe_section(sec, svg, a, luts, (rows, cols), 8, thumbs)
        check_thumbs(sec, a, read_png(out / names[sec["image"]]).samples[:, :, 0], 8, thumbs)
        if grid == "12x12":
            assert [r["data-tile"] for r in svg["overlays"][0]["picks"]] == ["0,0", "6,6"]
        else:
            assert sec["clahe"]["grid"] is None


@pytest.mark.parametrize("method", ["equalize", "clahe"])
def test_report_after_resume_shows_what_the_interrupted_run_finished(tmp, method):
    """After a kill and --resume, the images the interrupted run finished were called "skipped"
    (none was) and shown without their histograms, LUTs or tile LUTs, which the journal keeps.
    They now show all of that as an uninterrupted run's report does, without thumbnails."""
    src = tmp / "in"
    src.mkdir()
    for i in range(8):
        pngio.write(src / f"p{i}.png", np.random.default_rng(i).integers(0, 200, (64, 64)).astype(np.uint8), 8,
                    pngio.GRAY)
    extra = ["--method", method] + (["--clahe-grid", "2x2"] if method == "clahe" else [])
    base = ["-i", src, "--device", DEVICES[0], "--report-sample", "8", "--io-threads", "1", "-q"] + extra
    run_ok(base + ["-o", tmp / "whole", "--report", tmp / "rep_whole"])
    r = run(base + ["-o", tmp / "out", "--report", tmp / "rep"],
            env={"HQ_FAULT_KILL": "0:4", "HQ_JOURNAL_FLUSH_S": "0"})
    assert r.rc != 0 and (tmp / "out.journal").is_dir(), str(r)
    run_ok(base + ["-o", tmp / "out", "--report", tmp / "rep", "--resume"])
    whole, p = parse_report(tmp / "rep_whole"), parse_report(tmp / "rep")
    resumed = [s for s in p.sections if s["note"]]
    assert 1 <= len(resumed) < 8, [s["note"] for s in p.sections]
    # The images this run equalized: the interrupted run's are left out (run_images_resumed).
    assert p.summary["images"] == 8 - len(resumed) and not p.summary["skipped"]
    for got, want in zip(p.sections, whole.sections):
        assert got["name"] == want["name"] and (got["note"] is None or "interrupted run" in got["note"]), got
        assert got["hists"] == want["hists"], got["name"]
        assert (got.get("clahe") or {}).get("tile_luts") == (want.get("clahe") or {}).get("tile_luts"), got["name"]
    if method == "clahe":
        # A 2x2 grid on 64x64 images is drawn on thumbnails; the resumed images have none, and the
        # caption said the grid was "too fine to draw at thumbnail size".
        page = (tmp / "rep" / "index.html").read_text()
        assert "too fine to draw" not in page and "Without thumbnails there is no grid to draw" in page
    # Killed without --report: the journal keeps nothing for the page, which says so (it said
    # "skipped", with none skipped).
    unreported = [a for k, a in enumerate(base) if k not in (4, 5)]  # --report-sample goes with --report
    r = run(unreported + ["-o", tmp / "out2"], env={"HQ_FAULT_KILL": "0:4", "HQ_JOURNAL_FLUSH_S": "0"})
    assert r.rc != 0 and (tmp / "out2.journal").is_dir(), str(r)
    run_ok(base + ["-o", tmp / "out2", "--report", tmp / "rep2", "--resume"])
    p2 = parse_report(tmp / "rep2")
    notes = [s["note"] for s in p2.sections]
    assert not p2.summary["skipped"] and not any(n and "skipped" in n for n in notes), notes
    kept_none = [s for s in p2.sections if s["note"] and "kept no report data" in s["note"]]
    assert 1 <= len(kept_none) < 8 and all(not s["hists"] for s in kept_none), notes
    assert p2.summary["images"] == 8 - len(kept_none)


@pytest.mark.parametrize("scope", ["image", "dataset", "global"])
def test_report_after_resume_of_images_cut_in_blocks(tmp, scope):
    """Images of four blocks each, the kill in the middle of one: the page called this run's own
    images "finished by the interrupted run" (their histograms came from the journal, so no
    thumbnails were made) or, under --scope global, "skipped", with none skipped. Only the images
    whose every block the interrupted run wrote are its; the summary counts the others."""
    inp = h5_write(tmp / "in.h5", s=np.random.default_rng(80).integers(0, 200, (8, 128, 128), dtype=np.uint8))
    base = ["-i", inp, "-o", tmp / "out.h5", "--device", DEVICES[0], "--block", "4K", "--scope", scope, "-q"]
    r = run(base, env={"HQ_FAULT_KILL": "0:6", "HQ_JOURNAL_FLUSH_S": "0"})
    assert r.rc != 0 and (tmp / "out.h5.journal").is_dir(), str(r)
    run_ok(base + ["--resume", "--report", tmp / "rep", "--report-sample", "8"])
    p = parse_report(tmp / "rep")
    notes = [s["note"] or "" for s in p.sections if s["kind"] != "global"]
    assert len(notes) == 8 and not any("skipped" in n for n in notes), notes
    before = [n for n in notes if n.startswith("finished by the interrupted run")]
    assert before == notes[:1], notes  # 6 blocks of 4: slice 0 whole, slice 1 in part
    assert all(n.startswith("equalized by this run") for n in notes[1:2]), notes
    assert p.summary["images"] == 7 and not p.summary["skipped"]
