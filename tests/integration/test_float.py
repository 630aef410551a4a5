"""Float and signed HDF5 data against an independent numpy reference of README's rule.

Float data (float32, float64): pass 0 reduces each histogram group's finite minimum and maximum,
b = min(N-1, floor((x - min) * N / (max - min))) in float64 (numpy's elementwise operations round
each step once, as the engines do), the integer LUT rule over the N bins, output lut[b] / (N - 1)
in the input's type; NaN is not counted and comes back unchanged; +-inf is refused (exit 4);
--range LO:HI replaces min and max. Signed integers (int8, int16) are equalized offset to
unsigned (v + 2^(n-1)) and shifted back. Every case must give the same bytes at 1..4 ranks,
any thread count, any block size, and on every engine of HQ_DEVICES."""
import h5py
import numpy as np
import pytest

import reference as ref
from helpers import DEVICES, assert_array_equal, equalize, run, run_ok, BIN

E_USAGE, E_INPUT = 2, 4


# ---- the reference --------------------------------------------------------------------------------


def fbins(x, lo, hi, n):
    """Bins of finite float64 samples x, README's rule (clamped to the end bins outside [lo, hi])."""
    x = np.asarray(x, np.float64)
    if not hi > lo:
        return np.zeros(x.shape, np.int64)
    t = ((x - lo) * float(n)) / (hi - lo)
    b = np.minimum(np.floor(np.where(x > lo, t, 0.0)), n - 1).astype(np.int64)
    b[x <= lo] = 0
    b[x >= hi] = n - 1
    return b


def equalize_float_group(images, n, method="equalize", rng_=None):
    """One histogram over `images` (a list of float arrays): (outputs, lo, hi, lut)."""
    xs = [np.asarray(a).astype(np.float64) for a in images]
    fin = [np.isfinite(x) for x in xs]
    if rng_ is not None:
        lo, hi = rng_
    else:
        allfin = np.concatenate([x[f] for x, f in zip(xs, fin)])
        lo, hi = (float(allfin.min()), float(allfin.max())) if allfin.size else (np.nan, np.nan)
    bins = [fbins(x[f], lo, hi, n) for x, f in zip(xs, fin)]
    hist = np.bincount(np.concatenate(bins), minlength=n) if n else None
    lut = ref.build_lut(method, hist, n)
    outs = []
    for a, x, f, b in zip(images, xs, fin, bins):
        o = x.copy()
        o[f] = lut[b].astype(np.float64) / float(n - 1)
        o = o.astype(np.asarray(a).dtype)
        nanpos = ~f
        o[nanpos] = np.asarray(a)[nanpos]  # NaN comes back as it was
        outs.append(o)
    return outs, lo, hi, lut


def equalize_float_stack(stack, n, scope="image", method="equalize", rng_=None):
    if stack.ndim == 2:
        outs, lo, hi, lut = equalize_float_group([stack], n, method, rng_)
        return outs[0], [(lo, hi)], [lut]
    if scope == "global":
        outs, lo, hi, lut = equalize_float_group(list(stack), n, method, rng_)
        return np.stack(outs), [(lo, hi)], [lut]
    res = [equalize_float_group([s], n, method, rng_) for s in stack]
    return np.stack([r[0][0] for r in res]), [(r[1], r[2]) for r in res], [r[3] for r in res]


def equalize_signed(stack, scope="image"):
    """int8/int16: offset to unsigned, the integer rule at the full depth, shifted back."""
    bits = stack.dtype.itemsize * 8
    udt = np.uint8 if bits == 8 else np.uint16
    u = (stack.astype(np.int64) + (1 << (bits - 1))).astype(udt)
    if u.ndim == 2:
        out = ref.equalize_one(u, bits)
    else:
        out, _ = ref.equalize_stack(u, bits, scope=scope)
    return (out.astype(np.int64) - (1 << (bits - 1))).astype(stack.dtype)


# ---- inputs ---------------------------------------------------------------------------------------


def float_stack(n, h, w, dtype, seed, nan_frac=0.0):
    rng = np.random.default_rng(seed)
    base = np.stack([ref.smooth_field(h, w, rng) for _ in range(n)])
    a = (base * rng.uniform(0.5, 20, size=(n, 1, 1)) + rng.normal(0, 0.05, size=base.shape) +
         rng.uniform(-50, 50, size=(n, 1, 1))).astype(dtype)
    if nan_frac:
        a.flat[rng.choice(a.size, int(a.size * nan_frac), replace=False)] = np.nan
    return a


def write_h5(path, dsets, **kw):
    with h5py.File(path, "w") as f:
        for k, v in dsets.items():
            f.create_dataset(k, data=v, **kw.get(k, {}))
    return str(path)


def read(path, name):
    with h5py.File(path, "r") as f:
        return f[name][()]


def same_bytes(got, want, what):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, f"{what}: {got.dtype}{got.shape} vs {want.dtype}{want.shape}"
    if got.tobytes() != want.tobytes():
        g = got.view(np.uint32 if got.itemsize == 4 else np.uint64)
        w = want.view(g.dtype)
        bad = np.argwhere(g != w)
        i = tuple(bad[0])
        raise AssertionError(f"{what}: {len(bad)} of {got.size} samples differ; first at {i}: got {got[i]!r}, "
                             f"want {want[i]!r}")


# ---- float data -----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bins", [256, 1000, 65536])
def test_float_stack_scope_image(tmp, dtype, bins):
    stack = float_stack(3, 48, 64, dtype, seed=bins, nan_frac=0.01)
    inp = write_h5(tmp / "in.h5", {"s": stack})
    out = tmp / "out.h5"
    equalize(inp, out, "--bins", str(bins), np_=2)
    want, ranges, luts = equalize_float_stack(stack, bins)
    got = read(out, "s")
    same_bytes(got, want, f"{np.dtype(dtype).name} stack, {bins} bins")
    assert np.nanmin(got) == 0.0 and np.nanmax(got) == 1.0
    assert np.array_equal(np.isnan(got), np.isnan(stack))
    with h5py.File(out, "r") as f:
        assert int(f.attrs["bins"]) == bins
        assert f.attrs["range_from"] in ("data", b"data")
        r = f["histeq_dist/range/s"][()]
        assert r.dtype == np.float64 and r.shape == (3, 2)
        assert np.array_equal(r, np.array(ranges)), f"{r} vs {ranges}"
        lut = f["histeq_dist/lut/s"][()]
        assert lut.shape == (3, 1, bins)
        for k in range(3):
            assert np.array_equal(lut[k, 0], luts[k]), f"LUT of slice {k}"


@pytest.mark.parametrize("bins", [1000, 65536])
def test_float_bin_edges(tmp, bins):
    """Samples on the bin edges of ranges whose width is not a power of two: here the order of the
    operations (x - min) * N / (max - min) decides bins, and a different order (or a fused
    multiply-add) would move some of them."""
    rng = np.random.default_rng(bins)
    stack = []
    for lo, hi in ((0.1, 0.7), (-1024.0, 3071.0), (1e-3, 0.3)):
        v = lo + (hi - lo) * rng.integers(0, bins + 1, size=(40, 50)) / bins
        v.flat[0], v.flat[-1] = lo, lo + (hi - lo) * bins / bins
        stack.append(v)
    stack = np.stack(stack)
    inp = write_h5(tmp / "in.h5", {"e": stack})
    out = tmp / "out.h5"
    equalize(inp, out, "--bins", str(bins), np_=2)
    want, _, luts = equalize_float_stack(stack, bins)
    same_bytes(read(out, "e"), want, f"bin edges, {bins} bins")
    with h5py.File(out, "r") as f:
        for k in range(3):
            assert np.array_equal(f["histeq_dist/lut/e"][k, 0], luts[k])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_global_and_stretch(tmp, dtype):
    stack = float_stack(4, 30, 41, dtype, seed=7, nan_frac=0.02)
    inp = write_h5(tmp / "in.h5", {"g/s": stack})
    for method in ("equalize", "stretch"):
        out = tmp / f"out_{method}.h5"
        equalize(inp, out, "--scope", "global", "--method", method, "--bins", "4096", np_=3)
        want, ranges, luts = equalize_float_stack(stack, 4096, scope="global", method=method)
        same_bytes(read(out, "g/s"), want, f"global {method}")
        with h5py.File(out, "r") as f:
            assert f.attrs["min"] == ranges[0][0] and f.attrs["max"] == ranges[0][1]
            assert np.array_equal(f["histeq_dist/global_lut"][()][0], luts[0])


def test_float_single_image_nan_and_constant(tmp):
    img = float_stack(1, 70, 50, np.float32, seed=3, nan_frac=0.05)[0]
    const = np.full((20, 30), -2.5, np.float32)
    const[0, :5] = np.nan
    allnan = np.full((6, 7), np.nan, np.float64)
    u8 = ref.low_contrast(30, 40, 60, 90, np.uint8, seed=9)  # integer data beside float data
    inp = write_h5(tmp / "in.h5", {"img": img, "const": const, "allnan": allnan, "u8": u8})
    out = tmp / "out.h5"
    equalize(inp, out)
    assert_array_equal(read(out, "u8"), ref.equalize_one(u8, 8), "uint8 beside floats")
    want, _, _ = equalize_float_stack(img, 65536)
    same_bytes(read(out, "img"), want, "float32 image with NaNs")
    got = read(out, "const")
    # A constant image: every finite sample in bin 0, whose LUT entry is 0 (README).
    assert np.array_equal(got[1:], np.zeros_like(got[1:])) and np.isnan(got[0, :5]).all()
    same_bytes(got, equalize_float_stack(const, 65536)[0], "constant")
    # NaN samples come back with their own bits, and the note says why nothing was counted: no
    # mask and no --ignore here, so not "masked out or ignored".
    assert read(out, "allnan").tobytes() == allnan.tobytes()
    r = equalize(inp, tmp / "out2.h5")
    assert "allnan: nothing counted (no finite sample); left unchanged" in r.err, str(r)
    assert "masked out" not in r.err and "ignored" not in r.err, str(r)
    with h5py.File(out, "r") as f:
        assert np.isnan(f["histeq_dist/range/allnan"][()]).all()
        assert tuple(f["histeq_dist/range/const"][()][0]) == (-2.5, -2.5)


def test_float_range_clamps(tmp):
    stack = float_stack(2, 40, 33, np.float64, seed=11, nan_frac=0.01)
    inp = write_h5(tmp / "in.h5", {"s": stack})
    lo, hi = float(np.nanpercentile(stack, 10)), float(np.nanpercentile(stack, 80))
    out = tmp / "out.h5"
    equalize(inp, out, "--range", f"{lo!r}:{hi!r}", "--bins", "1000", np_=2)
    want, _, _ = equalize_float_stack(stack, 1000, rng_=(lo, hi))
    same_bytes(read(out, "s"), want, "--range")
    with h5py.File(out, "r") as f:
        assert f.attrs["range_from"] in ("--range", b"--range")
        assert np.array_equal(f["histeq_dist/range/s"][()], np.array([[lo, hi], [lo, hi]]))
        assert "--range" in str(f.attrs["options"])


@pytest.mark.parametrize("extra", [[], ["--block", "4K"], ["--range", "0:1"]], ids=["whole", "tiles", "range"])
@pytest.mark.parametrize("np_", [None, 3])
def test_float_inf_refused(tmp, extra, np_):
    """Found where the extremes are taken: in pass 1 for whole images in one block, in pass 0 for
    tiles (--block 4K), while histogramming with --range."""
    stack = float_stack(3, 60, 80, np.float32, seed=5)
    stack[2, 7, 9] = -np.inf
    inp = write_h5(tmp / "in.h5", {"ok": stack[:1], "vol": stack})
    out = tmp / "out.h5"
    for dev in DEVICES:
        r = run(["--input", inp, "--output", out, "--device", dev] + extra, np_)
        assert not r.timed_out and r.rc == E_INPUT, f"want exit 4\n{r}"
        lines = r.hq_lines
        assert len(lines) == 1 and "in.h5:/vol" in lines[0] and "infinite" in lines[0], str(r)
        assert not out.exists() and not (tmp / "out.h5.part").exists()


def test_float_rank_thread_block_invariance(tmp):
    """One big float image cut into tiles over ranks (pass 0 and the histogram in lockstep), a
    compressed chunked float stack (collective transfers), at 1..4 ranks, 1 or 2 threads, and
    small blocks: always the same bytes."""
    big = float_stack(1, 300, 257, np.float32, seed=21, nan_frac=0.003)[0]
    stack = float_stack(5, 64, 48, np.float64, seed=22, nan_frac=0.01)
    inp = write_h5(tmp / "in.h5", {"big": big, "stack": stack},
                   stack={"chunks": (2, 32, 48), "compression": "gzip", "shuffle": True}, big={"chunks": (64, 64)})
    want_big, _, _ = equalize_float_stack(big, 65536)
    want_stack, _, _ = equalize_float_stack(stack, 65536)
    runs = [(None, []), (2, ["--threads", "1"]), (3, ["--threads", "2", "--block", "40K"]),
            (4, ["--block", "16K", "--memory", "1M"])]
    for k, (np_, opts) in enumerate(runs):
        out = tmp / f"out{k}.h5"
        equalize(inp, out, *opts, np_=np_)
        same_bytes(read(out, "big"), want_big, f"big image, np {np_} {opts}")
        same_bytes(read(out, "stack"), want_stack, f"compressed stack, np {np_} {opts}")
    with h5py.File(tmp / "out3.h5", "r") as f:
        assert f["stack"].compression == "gzip" and f["stack"].dtype == np.float64


def test_float_global_over_ranks_with_tiles(tmp):
    big = float_stack(2, 200, 180, np.float32, seed=31, nan_frac=0.01)
    inp = write_h5(tmp / "in.h5", {"v": big})
    want, ranges, _ = equalize_float_stack(big, 512, scope="global")
    for np_ in (1, 4):
        out = tmp / f"out{np_}.h5"
        equalize(inp, out, "--scope", "global", "--bins", "512", "--block", "20K", np_=np_)
        same_bytes(read(out, "v"), want, f"global, np {np_}")


# ---- signed integers ------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.int8, np.int16])
def test_signed(tmp, dtype):
    rng = np.random.default_rng(41)
    if dtype == np.int16:  # CT in Hounsfield units: air, soft tissue, bone
        hu = ref.smooth_field(60, 70, rng) * 1800 - 1024
        stack = np.stack([hu + rng.normal(0, 20, hu.shape) for _ in range(3)]).clip(-1024, 3071).astype(np.int16)
        stack[0, :10] = -1024
    else:
        stack = (ref.smooth_field(3 * 40, 50, rng).reshape(3, 40, 50) * 60 - 30).astype(np.int8)
    inp = write_h5(tmp / "in.h5", {"ct": stack, "one": stack[1]})
    out = tmp / "out.h5"
    equalize(inp, out, np_=2)
    assert_array_equal(read(out, "ct"), equalize_signed(stack), f"{np.dtype(dtype).name} stack")
    assert_array_equal(read(out, "one"), equalize_signed(stack[1]), f"{np.dtype(dtype).name} image")
    out2 = tmp / "out2.h5"
    equalize(inp, out2, "--scope", "global", "--block", "4K", np_=3)
    assert_array_equal(read(out2, "ct"), equalize_signed(np.concatenate([stack, stack[1:2]]), "global")[:3],
                       "global")


def test_signed_bits_refused(tmp):
    inp = write_h5(tmp / "in.h5", {"ct": np.arange(-50, 50, dtype=np.int16).reshape(10, 10)})
    r = run(["--input", inp, "--output", tmp / "out.h5", "--bits", "12"])
    assert r.rc == E_USAGE and "signed" in r.err, str(r)


def test_help_lists_float_options():
    r = run_ok(["--help"])
    assert "--bins N" in r.out and "--range LO:HI" in r.out


def test_float_scaleoffset_input_dropped_in_output(tmp):
    """A float scale-offset filter keeps a fixed number of decimals (lossy, fitted to the input's
    range): the output goes without it and holds the exact values; its other filters stay."""
    a = np.round(float_stack(2, 32, 40, np.float32, seed=51), 2)
    inp = write_h5(tmp / "in.h5", {"so": a, "gz": a}, so={"chunks": (1, 16, 40), "scaleoffset": 2},
                   gz={"chunks": (1, 16, 40), "compression": "gzip"})
    out = tmp / "out.h5"
    equalize(inp, out, np_=2)
    with h5py.File(inp, "r") as f:
        stored = f["so"][()]  # what the input's filter kept
    want, _, _ = equalize_float_stack(stored, 65536)
    same_bytes(read(out, "so"), want, "scale-offset input")
    with h5py.File(out, "r") as f:
        assert f["so"].scaleoffset is None and f["gz"].compression == "gzip"


@pytest.mark.parametrize("np_,kill,opts", [
    (None, "0:2", ["--block", "40K"]),
    (3, "1:2", ["--block", "40K"]),
    (2, "0:1", ["--scope", "global", "--block", "40K"]),
], ids=["single", "np3-image", "np2-global"])
def test_float_kill_and_resume(tmp, np_, kill, opts):
    """A float run killed after some writes and resumed: pass 0 is made again (the ranges come out
    the same), the journaled histograms are kept, and the output equals an uninterrupted run's."""
    from test_resume import killed_then_resumed
    from helpers import assert_same_output
    big = float_stack(1, 260, 200, np.float32, seed=61, nan_frac=0.01)[0]
    # scope global needs one sample type throughout
    stack = float_stack(6, 50, 60, np.float32 if "global" in opts else np.float64, seed=62)
    inp = write_h5(tmp / "in.h5", {"big": big, "stack": stack}, big={"chunks": (52, 200)})
    want, out = tmp / "want.h5", tmp / "out.h5"
    run_ok(["--input", inp, "--output", want, "-q"] + opts, np_)
    r = killed_then_resumed(inp, str(out), opts, np_, kill)
    if r is None:
        pytest.skip("the kill point was past the end of that rank's work")
    assert "resuming" in r.err
    assert_same_output(str(want), str(out))
    with h5py.File(want, "r") as fw, h5py.File(out, "r") as fo:
        for k in ("range/big", "range/stack", "lut/big", "lut/stack"):
            if f"histeq_dist/{k}" in fw:
                assert np.array_equal(fw[f"histeq_dist/{k}"][()], fo[f"histeq_dist/{k}"][()], equal_nan=True), k


@pytest.mark.parametrize("apply", ["all", "inside"])
def test_float_mask(tmp, apply):
    """--mask on float data: the extremes and the histogram come from the masked-in finite samples
    only; every finite sample is remapped (out-of-range ones clamp to the end bins), or with
    --mask-apply inside the masked-out ones are left as they were."""
    rng = np.random.default_rng(71)
    stack = float_stack(3, 40, 50, np.float32, seed=71, nan_frac=0.01)
    mask = (rng.random((40, 50)) > 0.3).astype(np.uint8)
    stack[:, mask == 0] *= 5  # outside the mask the values go well beyond the counted range
    inp = write_h5(tmp / "in.h5", {"s": stack})
    msk = write_h5(tmp / "mask.h5", {"m": mask})
    out = tmp / "out.h5"
    equalize(inp, out, "--mask", f"{msk}:/m", "--mask-apply", apply, "--bins", "1000", np_=2)
    want = []
    for img in stack:
        x = img.astype(np.float64)
        counted = np.isfinite(x) & (mask != 0)
        lo, hi = float(x[counted].min()), float(x[counted].max())
        hist = np.bincount(fbins(x[counted], lo, hi, 1000), minlength=1000)
        lut = ref.build_lut("equalize", hist, 1000)
        o = img.copy()
        todo = np.isfinite(x) & ((mask != 0) if apply == "inside" else True)
        o[todo] = (lut[fbins(x[todo], lo, hi, 1000)].astype(np.float64) / 999.0).astype(np.float32)
        want.append(o)
    same_bytes(read(out, "s"), np.stack(want), f"--mask, --mask-apply {apply}")


@pytest.mark.parametrize("dtype", [np.float32, np.int16])
@pytest.mark.parametrize("opts", [["--ignore", "0"], ["--method", "match", "--reference", "global"]],
                         ids=["ignore", "match"])
def test_float_and_signed_refuse_integer_level_options(tmp, dtype, opts):
    inp = write_h5(tmp / "in.h5", {"d": np.arange(200, dtype=dtype).reshape(10, 20)})
    r = run(["--input", inp, "--output", tmp / "out.h5"] + opts)
    assert r.rc == E_USAGE and len(r.hq_lines) == 1 and "does not apply" in r.hq_lines[0], str(r)


@pytest.mark.parametrize("np_,opts", [(None, []), (3, ["--block", "8K"])], ids=["whole", "tiles-np3"])
def test_float_scope_dataset(tmp, np_, opts):
    """--scope dataset: one binning and one histogram per dataset (each float volume as one 3-D
    image), recorded on every slice's row of /histeq_dist/range."""
    a = float_stack(4, 30, 40, np.float32, seed=81, nan_frac=0.01)
    b = float_stack(3, 20, 25, np.float64, seed=82)
    inp = write_h5(tmp / "in.h5", {"a": a, "b": b})
    out = tmp / "out.h5"
    equalize(inp, out, "--scope", "dataset", "--bins", "2000", *opts, np_=np_)
    for name, v in (("a", a), ("b", b)):
        want, ranges, _ = equalize_float_stack(v, 2000, scope="global")
        same_bytes(read(out, name), want, f"scope dataset /{name}")
        with h5py.File(out, "r") as f:
            assert np.array_equal(f[f"histeq_dist/range/{name}"][()], np.array(ranges * v.shape[0]))
