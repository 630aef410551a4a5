"""Beyond 32 bits: one deflate-compressed uint8 image of 65536 x 66000 pixels (2^32 + 30 million),
almost all of one value, so that it is small on disk and one histogram bin counts more than 2^32.
Equalized by several ranks in 2-D tiles with a memory budget that forces re-reads; the output is
checked chunk by chunk against the LUT computed here with Python integers, and the global histogram
the output records must hold the exact counts.

The input is written chunk by chunk with write_direct_chunk: every constant chunk is the same
deflate stream, compressed once."""
import hashlib
import os
import zlib

import h5py
import numpy as np

import reference as ref
from helpers import DEVICES, run_ok

H, W = 65536, 66000
CH, CW = 1024, 4096
BACKGROUND = 100
BIG_TIMEOUT = 600


def pattern_chunks():
    """{chunk (row, col): its full CH x CW contents} for the chunks that are not all BACKGROUND: a
    ramp in the first chunk, noise in a middle one, a ramp in the clipped corner chunk (464 wide)."""
    y, x = np.mgrid[0:CH, 0:CW]
    rng = np.random.default_rng(7)
    last_r, last_c = (H - 1) // CH, (W - 1) // CW
    return {
        (0, 0): ((x // 16 + y // 4) % 200 + 20).astype(np.uint8),
        (31, 8): rng.integers(0, 256, (CH, CW), dtype=np.uint8),
        (last_r, last_c): np.where(x < W - last_c * CW, (x * 7 + y) % 256, BACKGROUND).astype(np.uint8),
    }


def in_extent(r, c, a):
    """The part of chunk (r, c)'s contents that lies inside the dataset."""
    return a[: min(CH, H - r * CH), : min(CW, W - c * CW)]


def write_input(path):
    constant = zlib.compress(np.full((CH, CW), BACKGROUND, np.uint8).tobytes(), 1)
    special = pattern_chunks()
    with h5py.File(path, "w") as f:
        # Level 1: the fastest to decode here and to encode in the output, which copies the filter.
        d = f.create_dataset("slide", shape=(H, W), dtype=np.uint8, chunks=(CH, CW), compression="gzip",
                             compression_opts=1)
        for r in range((H + CH - 1) // CH):
            for c in range((W + CW - 1) // CW):
                a = special.get((r, c))
                d.id.write_direct_chunk((r * CH, c * CW), constant if a is None else zlib.compress(a.tobytes(), 1))
    return special


def expected_histogram(special):
    """Exact counts, in Python ints: the patterns' own, the rest BACKGROUND."""
    hist = [0] * 256
    covered = 0
    for (r, c), a in special.items():
        part = in_extent(r, c, a)
        covered += part.size
        for v, n in enumerate(np.bincount(part.ravel(), minlength=256)):
            hist[v] += int(n)
    hist[BACKGROUND] += H * W - covered
    return hist


def check_output(path, lut, special):
    """Every chunk of the output, decompressed here (identical streams once), equals lut[input]."""
    want_constant = np.uint8(lut[BACKGROUND])
    seen = {}
    with h5py.File(path, "r") as f:
        d = f["slide"]
        assert d.shape == (H, W) and d.chunks == (CH, CW) and d.compression == "gzip" and not d.shuffle
        assert d.id.get_num_chunks() == ((H + CH - 1) // CH) * ((W + CW - 1) // CW)
        for r in range((H + CH - 1) // CH):
            for c in range((W + CW - 1) // CW):
                mask, raw = d.id.read_direct_chunk((r * CH, c * CW))
                assert mask == 0, f"chunk ({r}, {c}): filter mask {mask}"
                key = hashlib.sha1(raw).digest()
                if key not in seen:
                    seen[key] = np.frombuffer(zlib.decompress(raw), np.uint8).reshape(CH, CW)
                got = in_extent(r, c, seen[key])
                src = special.get((r, c))
                if src is None:
                    ok = bool((got == want_constant).all())
                else:
                    ok = np.array_equal(got, lut[in_extent(r, c, src)].astype(np.uint8))
                assert ok, f"chunk ({r}, {c}) differs from the expected LUT"
        gh = f["histeq_dist/global_histogram"][()]
    return gh


def test_beyond_32_bits(tmp):
    inp = tmp / "slide.h5"
    special = write_input(inp)
    assert os.path.getsize(inp) < 32 << 20, "the input should be small on disk"
    hist = expected_histogram(special)
    assert sum(hist) == H * W > 2**32 and hist[BACKGROUND] > 2**32
    lut = ref.lut_equalize(hist, 256)

    out = tmp / "slide_eq.h5"
    # Tiles of 4 chunks (a chunk row of 67 MB does not fit 16M); 256M per rank holds a tenth of the
    # image between the passes, the rest is read again.
    run_ok(["--input", inp, "--output", out, "--device", DEVICES[0], "--block", "16M", "--memory", "256M", "-q"], 2,
           timeout=BIG_TIMEOUT)
    assert os.path.getsize(out) < 64 << 20
    gh = check_output(out, lut, special)
    assert gh.shape == (1, 256) and gh.dtype == np.uint64
    assert [int(v) for v in gh[0]] == hist, "the recorded global histogram is not exact"
    assert int(gh[0][BACKGROUND]) > 2**32
