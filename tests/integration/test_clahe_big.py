"""CLAHE beyond 32 bits: test_big.py's compressed 65536 x 66000 uint8 slide (2^32 + 30 million
pixels, nearly all one value) with --clahe-grid 2x1: two tiles of 2.16e9 pixels each, past the
int OpenCV counts them in, whose background bin alone holds more than 2^31 counts and is clipped
by tens of millions. Run by 2 ranks in 2-D tiles with re-reads; the tile LUTs the output records
must equal clahe_ref's from exact counts, and sampled chunks (the patterned ones, chunks at both
tiles' centres and across their boundary, the corners) must equal the blend computed here."""
import hashlib
import os
import zlib

import h5py
import numpy as np

import clahe_ref
from helpers import DEVICES, run_ok
from test_big import BACKGROUND, BIG_TIMEOUT, CH, CW, H, W, in_extent, write_input

GRID = (2, 1)
CLIP = 2.0


def tile_histograms(special):
    """Exact counts per tile (rows [0, H/2) and [H/2, H)), in Python ints."""
    hists = [[0] * 256 for _ in range(2)]
    covered = [0, 0]
    for (r, c), a in special.items():
        t = (r * CH) // (H // 2)
        part = in_extent(r, c, a)
        covered[t] += part.size
        for v, n in enumerate(np.bincount(part.ravel(), minlength=256)):
            hists[t][v] += int(n)
    for t in range(2):
        hists[t][BACKGROUND] += (H // 2) * W - covered[t]
    return hists


def test_clahe_beyond_32_bits(tmp):
    inp = tmp / "slide.h5"
    special = write_input(inp)
    hists = tile_histograms(special)
    area = (H // 2) * W
    assert area > 2**31 and all(h[BACKGROUND] > 2**31 for h in hists)
    geo = clahe_ref.geometry(H, W, GRID)
    assert geo == (2, 1, H // 2, W)
    luts = np.stack([clahe_ref.lut_of(h, 256, area, CLIP) for h in hists])[:, None, :]  # (2, 1, 256)

    out = tmp / "slide_clahe.h5"
    run_ok(["--input", inp, "--output", out, "--device", DEVICES[0], "--method", "clahe", "--clahe-grid", "2x1",
            "--clip-limit", str(CLIP), "--block", "16M", "--memory", "256M", "-q"], 2, timeout=BIG_TIMEOUT)
    assert os.path.getsize(out) < 256 << 20
    nr, nc = (H + CH - 1) // CH, (W + CW - 1) // CW
    samples = set(special) | {(0, nc - 1), (nr - 1, 0), (15, 3), (16, 7), (31, 0), (32, 0), (47, 12)}
    with h5py.File(out, "r") as f:
        rec = f["histeq_dist/lut/slide"]
        assert rec.shape == (1, 2, 1, 1, 256)
        assert np.array_equal(rec[0, :, :, 0, :].astype(np.int64), luts), "recorded tile LUTs"
        assert int(rec.attrs["clip_count"]) == int(CLIP * area / 256) > 2**24
        d = f["slide"]
        assert d.shape == (H, W) and d.chunks == (CH, CW) and d.compression == "gzip"
        for (r, c) in sorted(samples):
            mask, raw = d.id.read_direct_chunk((r * CH, c * CW))
            assert mask == 0
            got = in_extent(r, c, np.frombuffer(zlib.decompress(raw), np.uint8).reshape(CH, CW))
            src = special.get((r, c))
            key = np.full(got.shape, BACKGROUND, np.uint8) if src is None else in_extent(r, c, src)
            want = clahe_ref.blend(luts, key, r * CH, c * CW, H, W, geo)
            assert np.array_equal(got, want.astype(np.uint8)), f"chunk ({r}, {c}) differs from the blend"
    # Every chunk was written (the ones not sampled decompress; identical streams checked once).
    with h5py.File(out, "r") as f:
        d, seen = f["slide"], set()
        assert d.id.get_num_chunks() == nr * nc
        for r in range(nr):
            for c in range(nc):
                _, raw = d.id.read_direct_chunk((r * CH, c * CW))
                k = hashlib.sha1(raw).digest()
                if k not in seen:
                    seen.add(k)
                    zlib.decompress(raw)
