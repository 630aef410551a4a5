"""The libdeflate PNG fast path (io/png_fast.c) against the libpng path (HQ_PNG_FAST=0).

Inputs of every fast kind (8/16-bit gray, gray+alpha, RGB, RGBA; widths 1, 3, 37, 4097) written
with each row filter by our own writer, and by Pillow and cv2 at several compression levels, go
through `--device copy` (read and written, not equalized) with the fast path on and off. Both
outputs must hold exactly the input's samples as an independent decoder (pngio), Pillow and cv2
read them, with the same ancillary chunks; damaged inputs must fail the same way either way."""
import os
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

import pngio
from helpers import assert_array_equal, run

cv2 = pytest.importorskip("cv2")

KINDS = [(pngio.GRAY, 8), (pngio.GRAY, 16), (pngio.GRAY_ALPHA, 8), (pngio.GRAY_ALPHA, 16),
         (pngio.RGB, 8), (pngio.RGB, 16), (pngio.RGBA, 8), (pngio.RGBA, 16)]
WIDTHS = [1, 3, 37, 4097]
FAST_OFF = {"HQ_PNG_FAST": "0"}
FAST_ON = {"HQ_PNG_FAST": "1"}


def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def samples(ct, depth, h, w, seed):
    """Smooth plus noise, so that every filter sees non-trivial neighbours."""
    rng = np.random.default_rng(seed)
    c = pngio.CHANNELS[ct]
    top = (1 << depth) - 1
    ramp = (np.add.outer(np.arange(h) * 7, np.arange(w) * 3)[:, :, None] + np.arange(c) * 50) % (top + 1)
    noise = rng.integers(0, 40 if depth == 8 else 9000, (h, w, c))
    return ((ramp + noise) % (top + 1)).astype(np.uint16 if depth == 16 else np.uint8)


def filtered_rows(a, depth, filters):
    """Rows filtered with filters[r % len(filters)] (0 None .. 4 Paeth), computed from the raw bytes."""
    h, w, c = a.shape
    raw = (a.astype(">u2") if depth == 16 else a).reshape(h, -1).view(np.uint8).reshape(h, -1).astype(np.int32)
    bpp = c * depth // 8
    out = bytearray()
    for r in range(h):
        x = raw[r]
        up = raw[r - 1] if r else np.zeros_like(x)
        left = np.concatenate([np.zeros(bpp, np.int32), x[:-bpp]])
        ul = np.concatenate([np.zeros(bpp, np.int32), up[:-bpp]])
        f = filters[r % len(filters)]
        if f == 0:
            pred = np.zeros_like(x)
        elif f == 1:
            pred = left
        elif f == 2:
            pred = up
        elif f == 3:
            pred = (left + up) >> 1
        else:
            p = left + up - ul
            pa, pb, pc = np.abs(p - left), np.abs(p - up), np.abs(p - ul)
            pred = np.where((pa <= pb) & (pa <= pc), left, np.where(pb <= pc, up, ul))
        out.append(f)
        out += ((x - pred) & 0xFF).astype(np.uint8).tobytes()
    return bytes(out)


def our_png(a, ct, depth, filters, extra=b"", trns=None, idat_split=8192, level=6):
    h, w, _ = a.shape
    out = pngio.SIG + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, ct, 0, 0, 0))
    out += chunk(b"gAMA", struct.pack(">I", 45455)) + extra
    if trns is not None:
        out += chunk(b"tRNS", b"".join(struct.pack(">H", v) for v in trns))
    data = zlib.compress(filtered_rows(a, depth, filters), level)
    for i in range(0, len(data), idat_split):
        out += chunk(b"IDAT", data[i : i + idat_split])
    return out + chunk(b"tEXt", b"Comment\0after the image") + chunk(b"IEND", b"")


def to_cv(a):
    if a.shape[2] >= 3:
        a = a.copy()
        a[:, :, [0, 2]] = a[:, :, [2, 0]]
    return a[:, :, 0] if a.shape[2] == 1 else a


def pil_image(a, ct, depth):
    if depth == 16:
        return Image.fromarray(a[:, :, 0].astype(np.uint16), "I;16") if ct == pngio.GRAY else None
    mode = {pngio.GRAY: "L", pngio.GRAY_ALPHA: "LA", pngio.RGB: "RGB", pngio.RGBA: "RGBA"}[ct]
    return Image.fromarray(a[:, :, 0] if ct == pngio.GRAY else a, mode)


def make_inputs(d):
    """{file name: (samples, color type, depth, tRNS or None)}."""
    os.makedirs(d)
    cases = {}
    seed = 0
    for ct, depth in KINDS:
        for w in WIDTHS:
            h = 3 if w == 4097 else 23
            seed += 1
            a = samples(ct, depth, h, w, seed)
            base = f"k{ct}_{depth}_w{w}"
            for name, filters in [("f0", [0]), ("f1", [1]), ("f2", [2]), ("f3", [3]), ("f4", [4]),
                                  ("mixed", [4, 0, 3, 1, 2])]:
                split = 7 if name == "mixed" else 8192  # many tiny IDATs too
                open(os.path.join(d, f"{base}_{name}.png"), "wb").write(our_png(a, ct, depth, filters, idat_split=split))
                cases[f"{base}_{name}.png"] = (a, ct, depth, None)
            im = pil_image(a, ct, depth)
            if im is not None:
                im.save(os.path.join(d, f"{base}_pil.png"))
                cases[f"{base}_pil.png"] = (a, ct, depth, None)
            for lvl in (0, 1, 9) if ct != pngio.GRAY_ALPHA else ():  # cv2 writes no gray+alpha
                cv2.imwrite(os.path.join(d, f"{base}_cv{lvl}.png"), to_cv(a), [cv2.IMWRITE_PNG_COMPRESSION, lvl])
                cases[f"{base}_cv{lvl}.png"] = (a, ct, depth, None)
    # tRNS on gray and RGB (one transparent colour, present in the image) becomes an alpha channel:
    # the output is gray+alpha or RGBA, alpha 0 exactly on that colour, with no tRNS chunk.
    for ct, depth in [(pngio.GRAY, 8), (pngio.GRAY, 16), (pngio.RGB, 8), (pngio.RGB, 16)]:
        a = samples(ct, depth, 19, 21, 99 + depth + ct)
        trns = [int(v) for v in a[4, 6]]
        name = f"trns{ct}_{depth}.png"
        open(os.path.join(d, name), "wb").write(our_png(a, ct, depth, [2], trns=trns))
        alpha = np.where(np.all(a == a[4, 6], axis=2), 0, (1 << depth) - 1).astype(a.dtype)
        cases[name] = (np.concatenate([a, alpha[:, :, None]], axis=2), ct + 4, depth, trns)
    return cases


def equalize_copy(inp, out, env):
    r = run(["--input", inp, "--output", out, "--device", "copy"], env=env, timeout=300)
    assert not r.timed_out and r.rc == 0, str(r)


def ancillary(path):
    return [(k, p) for k, p, _ in pngio.chunks(open(path, "rb").read()) if k != b"IDAT"]


def check_decoders(path, a, ct, depth, trns):
    got = pngio.read(str(path))
    assert (got.color_type, got.depth) == (ct, depth), path
    assert_array_equal(got.samples, a, str(path))
    if trns is not None:  # the input's tRNS made the alpha channel: checked against pngio alone
        return
    if ct != pngio.GRAY_ALPHA:  # cv2 reads gray+alpha as BGRA
        assert_array_equal(cv2.imread(str(path), cv2.IMREAD_UNCHANGED), to_cv(a), f"cv2 {path}")
    if depth == 8 or ct == pngio.GRAY:
        with Image.open(path) as im:
            px = np.asarray(im)
        assert_array_equal(px.reshape(a.shape).astype(a.dtype), a, f"Pillow {path}")


def test_fast_path_matches_libpng(tmp):
    src = tmp / "in"
    cases = make_inputs(str(src))
    fast, slow = tmp / "fast", tmp / "slow"
    equalize_copy(src, fast, FAST_ON)
    equalize_copy(src, slow, FAST_OFF)
    for name, (a, ct, depth, trns) in cases.items():
        check_decoders(fast / name, a, ct, depth, trns)
        check_decoders(slow / name, a, ct, depth, trns)
        assert ancillary(fast / name) == ancillary(slow / name), name
        if trns is not None:
            assert b"tRNS" not in [k for k, _ in ancillary(fast / name)], name


def test_fast_output_is_smaller_than_raw(tmp):
    """A smooth 8-bit gray image compresses: the fast encoder is not writing stored blocks."""
    a = np.add.outer(np.arange(300), np.arange(400)).astype(np.uint8)[:, :, None] // 3
    p = tmp / "smooth.png"
    p.write_bytes(our_png(a, pngio.GRAY, 8, [0]))
    equalize_copy(p, tmp / "out.png", FAST_ON)
    assert os.path.getsize(tmp / "out.png") < a.size // 10
    assert_array_equal(pngio.read(str(tmp / "out.png")).samples, a, "smooth")


def damaged(kind, a):
    good = our_png(a, pngio.GRAY, 8, [1, 2])
    ch = pngio.chunks(good)
    idat = [(off, len(p)) for k, p, off in ch if k == b"IDAT"]
    off, n = idat[0]
    data = bytearray(good)
    if kind == "truncated_idat":
        return bytes(data[: off + n // 2])
    if kind == "bad_crc":
        data[off + n // 2] ^= 0x40
        return bytes(data)
    rows = bytearray(filtered_rows(a, 8, [1]))
    if kind == "bad_filter":
        rows[(a.shape[1] + 1) * 5] = 7
    elif kind == "short_zlib":
        rows = rows[: -a.shape[1] // 2]
    elif kind == "long_zlib":
        rows += bytes(a.shape[1] + 1)
    h, w, _ = a.shape
    return (pngio.SIG + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(bytes(rows), 6)) + chunk(b"IEND", b""))


@pytest.mark.parametrize("kind", ["truncated_idat", "bad_crc", "bad_filter", "short_zlib", "long_zlib"])
def test_damaged_inputs_fail_as_before(tmp, kind):
    a = samples(pngio.GRAY, 8, 30, 41, 5)
    p = tmp / "bad.png"
    p.write_bytes(damaged(kind, a))
    results = []
    for i, env in enumerate((FAST_ON, FAST_OFF)):
        out = tmp / f"out{i}.png"
        r = run(["--input", p, "--output", out, "--device", "copy", "-q"], env=env, timeout=120)
        results.append((r.rc, r.err_lines, pngio.read(str(out)).samples.tobytes() if r.rc == 0 else None))
    assert results[0] == results[1], results
    rc, lines, _ = results[0]
    if kind == "long_zlib":  # libpng takes extra image data as a warning, and so do we (through it)
        assert rc == 0, results
    else:
        assert rc == 4 and len(lines) == 1 and "bad.png" in lines[0], results


@pytest.mark.parametrize("ct,depth", [(pngio.GRAY, 8), (pngio.RGB, 16)])
def test_default_output_deflated_by_igzip(tmp, ct, depth):
    """Where the build has ISA-L (--version says so), the default PNG output is deflated by igzip:
    other bytes than libdeflate's (HQ_ISAL=0), the same samples for every decoder."""
    if "ISA-L" not in run(["--version"]).out:
        pytest.skip("built without ISA-L")
    a = samples(ct, depth, 120, 301, seed=5)
    inp = tmp / "in.png"
    pngio.write(str(inp), a if a.shape[2] > 1 else a[:, :, 0], depth, ct)
    outs = {}
    for name, env in (("igzip", {}), ("libdeflate", {"HQ_ISAL": "0"})):
        out = tmp / f"{name}.png"
        r = run(["--input", inp, "--output", out, "--device", "copy"], env=dict(env, **FAST_ON))
        assert r.rc == 0, str(r)
        outs[name] = out
    assert outs["igzip"].read_bytes() != outs["libdeflate"].read_bytes()
    for out in outs.values():
        got = cv2.imread(str(out), cv2.IMREAD_UNCHANGED)
        got = got if got.ndim == 2 else cv2.cvtColor(got, cv2.COLOR_BGR2RGB)
        assert_array_equal(got.reshape(a.shape), a, out.name)
