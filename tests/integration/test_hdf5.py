"""HDF5 inputs: every layout the program accepts, checked against reference.py."""
import h5py
import numpy as np
import pytest

import reference as ref
from helpers import assert_array_equal, equalize, file_hash, h5_datasets, run


def write_h5(path, datasets, **dset_kw):
    with h5py.File(path, "w") as f:
        for name, arr in datasets.items():
            f.create_dataset(name, data=arr, **dset_kw)
    return str(path)


def read_dset(path, name):
    with h5py.File(path, "r") as f:
        return f[name][()]


def attr_str(v):
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, np.ndarray) and v.shape == ():
        v = v[()]
    return v.decode() if isinstance(v, bytes) else str(v)


def root_attrs(path):
    with h5py.File(path, "r") as f:
        return {k: f.attrs[k] for k in f.attrs}


def check_attrs(path, method, scope, color):
    """color None: gray data, where no colour mode applied and none may be recorded."""
    a = root_attrs(path)
    for k in ("histeq_dist_version", "method", "scope", "bits", "source") + (("color",) if color else ()):
        assert k in a, f"root attribute {k} missing in {path}: {sorted(a)}"
    assert attr_str(a["method"]) == method
    assert attr_str(a["scope"]) == scope
    if color:
        assert attr_str(a["color"]) == color
        assert f"--color {color}" in attr_str(a["options"])
    else:
        assert "color" not in a, f"gray data, yet color = {a['color']!r}"
        assert "--color" not in attr_str(a["options"])


def test_u8_2d(tmp):
    img = ref.low_contrast(150, 170, 90, 140, np.uint8, seed=1)
    inp = write_h5(tmp / "in.h5", {"img": img})
    before = file_hash(inp)
    out = tmp / "out.h5"
    equalize(inp, out)
    got = read_dset(out, "img")
    assert_array_equal(got, ref.equalize_one(img, 8), "u8 (H,W)")
    assert got.min() == 0 and got.max() == 255
    check_attrs(out, "equalize", "global", None)  # a single image: global by default
    assert file_hash(inp) == before


def test_u16_2d(tmp):
    img = ref.low_contrast(130, 140, 30000, 34000, np.uint16, seed=2)
    inp = write_h5(tmp / "in.h5", {"img": img})
    out = tmp / "out.h5"
    equalize(inp, out)
    assert_array_equal(read_dset(out, "img"), ref.equalize_one(img, 16), "u16 (H,W)")


def test_bits12_clamps_above(tmp):
    img = ref.low_contrast(120, 100, 1000, 1400, np.uint16, seed=3)
    rng = np.random.default_rng(3)
    idx = rng.choice(img.size, 25, replace=False)
    img.flat[idx] = rng.integers(4096, 65536, 25)  # a stray 13th..16th bit: clamped to 4095
    img.flat[0] = 65535
    inp = write_h5(tmp / "in.h5", {"ct": img})
    out = tmp / "out.h5"
    equalize(inp, out, "--bits", "12")
    got = read_dset(out, "ct")
    want = ref.equalize_one(img, 12)
    assert want.max() <= 4095 and (want.flat[idx] == 4095).all()
    assert_array_equal(got, want, "u16 --bits 12")
    assert int(np.asarray(root_attrs(out)["bits"])) == 12


@pytest.mark.parametrize("scope", ["image", "global", None])
def test_stack_scope(tmp, scope):
    stack = ref.stack_of(6, 64, 80, 60, 160, np.uint8, seed=4)
    inp = write_h5(tmp / "in.h5", {"stack": stack})
    out = tmp / "out.h5"
    opts = ["--scope", scope] if scope else []
    equalize(inp, out, *opts)
    eff = scope or "image"  # a stack holds several images: image by default
    want, gh = ref.equalize_stack(stack, 8, scope=eff)
    assert_array_equal(read_dset(out, "stack"), want, f"(N,H,W) scope {eff}")
    check_attrs(out, "equalize", eff, None)
    with h5py.File(out, "r") as f:
        if eff == "global":
            h = f["histeq_dist/global_histogram"]
            assert h.dtype == np.uint64 and h.shape == (1, 256)
            assert_array_equal(h[()], gh, "global histogram")
        else:
            assert "histeq_dist/global_histogram" not in f


def test_stack_u16_bits12_global(tmp):
    stack = ref.stack_of(4, 50, 60, 800, 1600, np.uint16, seed=5)
    stack[1, 3, 4] = 60000
    inp = write_h5(tmp / "in.h5", {"s": stack})
    out = tmp / "out.h5"
    equalize(inp, out, "--bits", "12", "--scope", "global")
    want, gh = ref.equalize_stack(stack, 12, scope="global")
    assert_array_equal(read_dset(out, "s"), want, "u16 stack bits 12 global")
    with h5py.File(out, "r") as f:
        assert f["histeq_dist/global_histogram"].shape == (1, 4096)
        assert_array_equal(f["histeq_dist/global_histogram"][()], gh, "global histogram")


@pytest.mark.parametrize("color", ["luma", "channels", "value"])
def test_rgb_2d_u8(tmp, color):
    img = ref.low_contrast_rgb(90, 110, 70, 150, np.uint8, seed=6)
    img[0, 0] = (0, 0, 0)  # a black pixel: V = 0 in value mode
    img[0, 1] = (255, 10, 10)  # saturated: luma clamps
    inp = write_h5(tmp / "in.h5", {"rgb": img})
    out = tmp / "out.h5"
    equalize(inp, out, "--color", color)
    assert_array_equal(read_dset(out, "rgb"), ref.equalize_one(img, 8, color), f"(H,W,3) u8 {color}")
    check_attrs(out, "equalize", "global", color)


@pytest.mark.parametrize("color", ["luma", "channels", "value"])
def test_rgb_stack_u16(tmp, color):
    stack = ref.stack_of(3, 40, 56, 20000, 28000, np.uint16, seed=7, rgb=True)
    inp = write_h5(tmp / "in.h5", {"rgbs": stack})
    out = tmp / "out.h5"
    equalize(inp, out, "--color", color)
    want, _ = ref.equalize_stack(stack, 16, color, scope="image")
    assert_array_equal(read_dset(out, "rgbs"), want, f"(N,H,W,3) u16 {color}")


def test_rgb_stack_channels_global(tmp):
    stack = ref.stack_of(3, 30, 40, 50, 120, np.uint8, seed=8, rgb=True)
    inp = write_h5(tmp / "in.h5", {"rgbs": stack})
    out = tmp / "out.h5"
    equalize(inp, out, "--color", "channels", "--scope", "global")
    want, gh = ref.equalize_stack(stack, 8, "channels", scope="global")
    assert_array_equal(read_dset(out, "rgbs"), want, "(N,H,W,3) channels global")
    with h5py.File(out, "r") as f:
        h = f["histeq_dist/global_histogram"]
        assert h.shape == (3, 256)
        assert_array_equal(h[()], gh, "global histograms (3 channels)")


def test_chunked_gzip_kept(tmp):
    stack = ref.stack_of(5, 100, 120, 3000, 3600, np.uint16, seed=9)
    inp = write_h5(tmp / "in.h5", {"vol": stack}, chunks=(1, 50, 60), compression="gzip", compression_opts=4,
                   shuffle=True)
    out = tmp / "out.h5"
    equalize(inp, out)
    (data, chunks, comp, opts, shuffle), = h5_datasets(out).values()
    assert chunks == (1, 50, 60)
    assert comp == "gzip" and opts == 4 and shuffle
    want, _ = ref.equalize_stack(stack, 16)
    assert_array_equal(data, want, "chunked gzip stack")


def test_chunks_across_slices(tmp):
    """Chunks spanning several slices and partial edge chunks."""
    stack = ref.stack_of(7, 45, 33, 100, 140, np.uint8, seed=10)
    inp = write_h5(tmp / "in.h5", {"v": stack}, chunks=(3, 16, 16), compression="gzip")
    out = tmp / "out.h5"
    equalize(inp, out, "--block", "4K")
    d = h5_datasets(out)["/v"]
    assert d[1] == (3, 16, 16) and d[2] == "gzip"
    assert_array_equal(d[0], ref.equalize_stack(stack, 8)[0], "chunks (3,16,16)")


def test_several_datasets_in_groups(tmp):
    a = ref.low_contrast(40, 50, 10, 60, np.uint8, seed=11)
    b = ref.stack_of(3, 30, 20, 5000, 9000, np.uint16, seed=12)
    c = ref.low_contrast_rgb(25, 35, 100, 200, np.uint8, seed=13)
    inp = str(tmp / "in.h5")
    with h5py.File(inp, "w") as f:
        f.create_dataset("a", data=a)
        f.create_group("g1").create_dataset("b", data=b, chunks=(1, 10, 20))
        f["g1"].create_group("g2").create_dataset("c", data=c)
    out = tmp / "out.h5"
    equalize(inp, out)
    got = h5_datasets(out)
    assert sorted(got) == ["/a", "/g1/b", "/g1/g2/c"]
    assert_array_equal(got["/a"][0], ref.equalize_one(a, 8), "/a")
    assert_array_equal(got["/g1/b"][0], ref.equalize_stack(b, 16)[0], "/g1/b")
    assert got["/g1/b"][1] == (1, 10, 20)
    assert_array_equal(got["/g1/g2/c"][0], ref.equalize_one(c, 8), "/g1/g2/c")


def test_select_one_dataset(tmp):
    a = ref.low_contrast(40, 50, 10, 60, np.uint8, seed=14)
    b = ref.low_contrast(30, 20, 5000, 9000, np.uint16, seed=15)
    inp = str(tmp / "in.h5")
    with h5py.File(inp, "w") as f:
        f.create_dataset("a", data=a)
        f.create_group("group").create_dataset("dset", data=b)
    out = tmp / "out.h5"
    equalize(inp + ":/group/dset", out)
    got = h5_datasets(out)
    assert "/group/dset" in got
    assert_array_equal(got["/group/dset"][0], ref.equalize_one(b, 16), "/group/dset")
    assert "/a" not in got, "only the selected dataset is written"


@pytest.mark.parametrize("np_", [None, 3], ids=["single", "np3"])
@pytest.mark.parametrize("filt", [{}, {"compression": "gzip", "shuffle": True}], ids=["raw", "gzip"])
def test_chunks_longer_than_a_growable_stack(tmp, filt, np_):
    """A stack made to grow (maxshape None) whose chunks hold more slices than were written, as
    h5py appends: HDF5 allows such a chunk only where the dataset may grow, so the output keeps
    the input's maximum along that axis, and its chunks."""
    stack = ref.stack_of(3, 40, 50, 50, 100, np.uint8, seed=41)
    inp = str(tmp / "grow.h5")
    with h5py.File(inp, "w") as f:
        d = f.create_dataset("s", shape=(0, 40, 50), maxshape=(None, 40, 50), dtype="u1", chunks=(4, 40, 30), **filt)
        d.resize((3, 40, 50))
        d[:] = stack
    out = tmp / "out.h5"
    equalize(inp, out, np_=np_)
    with h5py.File(out, "r") as f:
        assert f["s"].shape == (3, 40, 50) and f["s"].chunks == (4, 40, 30) and f["s"].maxshape == (None, 40, 50)
        assert f["s"].compression == filt.get("compression")
        assert_array_equal(f["s"][()], ref.equalize_stack(stack, 8)[0], "growable stack")


@pytest.mark.parametrize("np_", [None, 2, 3], ids=["single", "np2", "np3"])
def test_big_endian_compressed_on_any_rank_count(tmp, np_):
    """Compressed datasets stored big-endian (int16, float32, float64, uint16 shuffled) give the
    data their native-endian copies give, on every rank count: parallel HDF5 refuses a filtered
    write that converts types, so the backend writes them in their own byte order."""
    r = np.random.default_rng(43)
    data = {"i16": (r.integers(-3000, 3000, (3, 20, 24)).astype(np.int16), {"compression": "gzip"}),
            "f32": (r.random((3, 20, 24)).astype(np.float32), {"compression": "gzip"}),
            "f64": (r.random((20, 24)), {"compression": "gzip", "shuffle": True}),
            "u16": (r.integers(0, 4000, (3, 20, 24)).astype(np.uint16), {"shuffle": True})}
    for order, name in (("<", "le.h5"), (">", "be.h5")):
        with h5py.File(tmp / name, "w") as f:
            for k, (a, kw) in data.items():
                f.create_dataset(k, data=a.astype(a.dtype.newbyteorder(order)), chunks=(1,) * (a.ndim - 2) + (7, 24),
                                 **kw)
    equalize(tmp / "le.h5", tmp / "le_eq.h5", np_=np_)
    equalize(tmp / "be.h5", tmp / "be_eq.h5", np_=np_)
    with h5py.File(tmp / "le_eq.h5", "r") as a, h5py.File(tmp / "be_eq.h5", "r") as b:
        for k in data:
            assert b[k].dtype.byteorder == ">" and b[k].compression == data[k][1].get("compression")
            assert_array_equal(b[k][()].astype(a[k].dtype), a[k][()], k)


def test_dataset_name_with_a_colon(tmp):
    """FILE:DATASET splits at the rightmost ':' whose prefix is a file: "f.h5:/a:b" is /a:b of f.h5."""
    a = ref.low_contrast(20, 30, 50, 100, np.uint8, seed=42)
    inp = str(tmp / "f.h5")
    with h5py.File(inp, "w") as f:
        f.create_dataset("a:b", data=a)
        f.create_dataset("c", data=a[::-1])
    out = tmp / "out.h5"
    equalize(inp + ":/a:b", out)
    got = h5_datasets(out)
    assert sorted(got) == ["/a:b"]
    assert_array_equal(got["/a:b"][0], ref.equalize_one(a, 8), "/a:b")


@pytest.mark.parametrize("color", ["luma", "channels"])
def test_stretch(tmp, color):
    gray = ref.low_contrast(60, 70, 80, 130, np.uint8, seed=16)
    rgb = ref.low_contrast_rgb(50, 40, 1000, 3000, np.uint16, seed=17)
    inp = str(tmp / "in.h5")
    with h5py.File(inp, "w") as f:
        f.create_dataset("gray", data=gray)
        f.create_dataset("rgb", data=rgb)
    out = tmp / "out.h5"
    equalize(inp, out, "--method", "stretch", "--color", color)
    got = h5_datasets(out)
    assert_array_equal(got["/gray"][0], ref.equalize_one(gray, 8, method="stretch"), "stretch gray")
    assert_array_equal(got["/rgb"][0], ref.equalize_one(rgb, 16, color, method="stretch"), f"stretch rgb {color}")
    check_attrs(out, "stretch", "image", color)


def test_constant_image_unchanged(tmp):
    img = np.full((30, 40), 77, np.uint8)
    inp = write_h5(tmp / "in.h5", {"c": img})
    out = tmp / "out.h5"
    equalize(inp, out)
    assert_array_equal(read_dset(out, "c"), img, "constant image")


def test_block_and_memory_limits(tmp):
    """Small blocks and a small budget: several blocks, blocks dropped and re-read for pass 2."""
    stack = ref.stack_of(3, 200, 150, 10000, 12000, np.uint16, seed=18)
    inp = write_h5(tmp / "in.h5", {"s": stack})
    out = tmp / "out.h5"
    equalize(inp, out, "--block", "64K", "--memory", "100K", "--scope", "global")
    assert_array_equal(read_dset(out, "s"), ref.equalize_stack(stack, 16, scope="global")[0], "64K blocks")


@pytest.mark.parametrize("color", ["luma", "value"])
def test_rgba(tmp, color):
    """(H,W,4) and (N,H,W,4): RGBA, alpha untouched (even above 2^bits - 1)."""
    img = ref.low_contrast_rgb(30, 44, 90, 160, np.uint8, seed=19, channels=4)
    stack = ref.stack_of(2, 20, 24, 3000, 3900, np.uint16, seed=20, rgb=True)
    alpha = np.full(stack.shape[:3] + (1,), 65535, np.uint16)
    stack = np.concatenate([stack, alpha], axis=3)
    inp = str(tmp / "in.h5")
    with h5py.File(inp, "w") as f:
        f.create_dataset("rgba", data=img)
        f.create_dataset("stack", data=stack)
    out = tmp / "out.h5"
    equalize(inp, out, "--color", color)
    got = h5_datasets(out)
    assert_array_equal(got["/rgba"][0], ref.equalize_one(img, 8, color), f"(H,W,4) {color}")
    assert_array_equal(got["/stack"][0], ref.equalize_stack(stack, 16, color)[0], f"(N,H,W,4) {color}")


def test_big_endian_u16(tmp):
    """Samples stored big-endian: read by value, written back in the input's byte order."""
    img = ref.low_contrast(70, 90, 4000, 4300, np.uint16, seed=21)
    inp = write_h5(tmp / "in.h5", {"be": img.astype(">u2")})
    out = tmp / "out.h5"
    equalize(inp, out)
    got = read_dset(out, "be")
    assert got.dtype == np.dtype(">u2")
    assert_array_equal(got.astype(np.uint16), ref.equalize_one(img, 16), "big-endian u16")


def test_own_output_as_input(tmp):
    """An output of ours fed back in: /histeq_dist/global_histogram is a record, not an image."""
    stack = ref.stack_of(3, 40, 50, 100, 140, np.uint8, seed=22)
    inp = write_h5(tmp / "in.h5", {"s": stack})
    once, twice = tmp / "once.h5", tmp / "twice.h5"
    equalize(inp, once, "--scope", "global")
    first = read_dset(once, "s")
    equalize(once, twice, "--scope", "global")
    assert sorted(h5_datasets(twice)) == ["/s"]
    assert_array_equal(read_dset(twice, "s"), ref.equalize_stack(first, 8, scope="global")[0], "second pass")


@pytest.mark.parametrize("np_", [None, 2], ids=["single", "np2"])
def test_fill_time_never_reads_as_zeros(tmp, np_):
    """Storage never written with fill time H5D_FILL_TIME_NEVER (legal; h5py reads zeros): HDF5
    writes nothing into the read's buffer there, so a 1-rank output held heap bytes, different
    from the 2-rank one. Such blocks read as zeros now, on every path: a contiguous dataset never
    written, chunked ones (uint8, float32) with one chunk written; --device copy gives h5py's view."""
    inp = tmp / "in.h5"
    with h5py.File(inp, "w") as f:
        f.create_dataset("c", data=np.random.default_rng(0).integers(0, 250, (3, 30, 40)).astype(np.uint8),
                         chunks=(1, 10, 10))
        for name, t, chunk in (("k", h5py.h5t.NATIVE_UINT8, None), ("k8", h5py.h5t.NATIVE_UINT8, (1, 10, 40)),
                               ("kf", h5py.h5t.NATIVE_FLOAT, (1, 10, 40))):
            dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
            if chunk:
                dcpl.set_chunk(chunk)
            dcpl.set_fill_time(h5py.h5d.FILL_TIME_NEVER)
            dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_LATE)
            h5py.h5d.create(f.id, name.encode(), t, h5py.h5s.create_simple((3, 30, 40)), dcpl)
        f["k8"][0, :10] = 7
        f["kf"][0, :10] = 0.25
    with h5py.File(inp, "r") as f:
        seen = {k: f[k][()] for k in ("c", "k", "k8", "kf")}
    before = file_hash(inp)
    copy = tmp / "copy.h5"
    equalize(inp, copy, "--device", "copy", np_=np_)
    with h5py.File(copy, "r") as f:
        for k, v in seen.items():
            assert_array_equal(f[k][()], v, f"--device copy {k}")
    out = tmp / "out.h5"
    equalize(inp, out, np_=np_)
    with h5py.File(out, "r") as f:
        for k in ("c", "k", "k8"):
            for s in range(3):
                assert_array_equal(f[k][s], ref.equalize_one(seen[k][s], 8), f"{k}[{s}]")
        assert np.array_equal(f["kf"][1], np.zeros((30, 40), np.float32)), "kf[1]: a constant slice"
    assert file_hash(inp) == before


@pytest.mark.parametrize("np_", [None, 2], ids=["single", "np2"])
@pytest.mark.parametrize("whole_png", [True, False], ids=["png_thumbnail", "png_signature"])
def test_user_block_starting_with_a_png_is_hdf5(tmp, np_, whole_png):
    """An HDF5 file whose user block holds a PNG thumbnail was classified by its first bytes: the
    thumbnail was equalized and written as out.h5, exit 0 (or 'corrupt PNG', exit 4, for a bare
    signature). The superblock's signature is looked for first now."""
    import io as _io

    from PIL import Image
    img = ref.low_contrast(60, 70, 40, 90, np.uint8, seed=12)
    stack = np.stack([img, img[::-1], img[:, ::-1]])
    inp = tmp / "scan.h5"
    with h5py.File(inp, "w", userblock_size=1024) as f:
        f.create_dataset("img", data=stack)
    buf = _io.BytesIO()
    Image.fromarray(img[:16, :16]).save(buf, format="PNG")
    head = buf.getvalue() if whole_png else b"\x89PNG\r\n\x1a\n"
    assert len(head) <= 1024
    with open(inp, "r+b") as fh:
        fh.write(head)
    out = tmp / "out.h5"
    equalize(inp, out, np_=np_)
    with h5py.File(out, "r") as f:
        for s in range(3):
            assert_array_equal(f["img"][s], ref.equalize_one(stack[s], 8), f"img[{s}]")


@pytest.mark.parametrize("np_", [None, 2], ids=["single", "np2"])
def test_input_with_its_own_histeq_dist_group_says_no_record(tmp, np_):
    """A user's file holding /histeq_dist/notes (not written by this tool): the images are equalized,
    the user's dataset keeps its name, and the output records no LUTs there. That used to happen
    silently; rank 0 says it once (and -q keeps it quiet)."""
    from helpers import run
    img = ref.low_contrast(20, 30, 40, 90, np.uint8, seed=13)
    notes = ref.low_contrast(20, 30, 10, 50, np.uint8, seed=14)
    inp = tmp / "in.h5"
    with h5py.File(inp, "w") as f:
        f["img"] = img
        f["histeq_dist/notes"] = notes
    out = tmp / "out.h5"
    r = run(["-i", inp, "-o", out, "--device", "cpu"], np_)
    assert r.rc == 0, str(r)
    said = [l for l in r.err.splitlines() if "of its own" in l]
    assert len(said) == 1 and "in.h5" in said[0] and "no LUTs" in said[0], str(r)
    with h5py.File(out, "r") as f:
        assert_array_equal(f["img"][()], ref.equalize_one(img, 8), "img")
        assert_array_equal(f["histeq_dist/notes"][()], ref.equalize_one(notes, 8), "notes")
        assert "lut" not in f["histeq_dist"]
    r = run(["-i", inp, "-o", tmp / "q.h5", "--device", "cpu", "-q"], np_)
    assert r.rc == 0 and "of its own" not in r.err, str(r)
    # Equalized again: the output's /histeq_dist is still the user's (it was taken for our record
    # and dropped, the user's dataset replaced by our LUTs, exit 0 and no word).
    r = run(["-i", out, "-o", tmp / "again.h5", "--device", "cpu"], np_)
    assert r.rc == 0 and any("of its own" in l for l in r.err.splitlines()), str(r)
    with h5py.File(tmp / "again.h5", "r") as f:
        once = ref.equalize_one(notes, 8)
        assert_array_equal(f["histeq_dist/notes"][()], ref.equalize_one(once, 8), "notes, twice")
        assert "lut" not in f["histeq_dist"]


def test_signed_type_with_fewer_bits_is_unsupported_not_corrupt(tmp):
    """int16 with 12 significant bits is legal HDF5 (h5py and h5dump read it): refused as an
    unsupported type, not called corrupt."""
    from helpers import run
    inp = tmp / "in.h5"
    with h5py.File(inp, "w") as f:
        t = h5py.h5t.STD_I16LE.copy()
        t.set_precision(12)
        d = h5py.h5d.create(f.id, b"ct", t, h5py.h5s.create_simple((20, 30)))
        d.write(h5py.h5s.ALL, h5py.h5s.ALL, np.arange(600, dtype=np.int16).reshape(20, 30) - 300)
    out = tmp / "out.h5"
    r = run(["-i", inp, "-o", out])
    assert r.rc == 4 and len(r.err_lines) == 1, str(r)
    assert "in.h5:/ct: unsupported type" in r.err_lines[0] and "corrupt" not in r.err_lines[0], str(r)
    assert not out.exists()


@pytest.mark.parametrize("np_", [None, 2], ids=["single", "np2"])
def test_long_paths_do_not_abort_mpi_io(tmp, np_):
    """Open MPI 4.1's 'lockedfile' shared-file-pointer component, queried at every MPI_File_open,
    formats a name from the path into a fixed buffer: an input or output path past about 230
    characters aborted the run ('buffer overflow detected', SIGABRT) before a pixel was read. The
    component is left out at start-up (this program uses no shared file pointers)."""
    deep = tmp / ("d" * 200) / ("e" * 200)
    deep.mkdir(parents=True)
    img = ref.low_contrast(64, 80, 40, 90, np.uint8, seed=15)
    inp = deep / "in.h5"
    with h5py.File(inp, "w") as f:
        f["img"] = img
    out = deep / "out.h5"
    equalize(inp, out, np_=np_)
    with h5py.File(out, "r") as f:
        assert_array_equal(f["img"][()], ref.equalize_one(img, 8), "img")


def _szip_encodes():
    return h5py.h5z.filter_avail(h5py.h5z.FILTER_SZIP) and \
        h5py.h5z.get_filter_info(h5py.h5z.FILTER_SZIP) & h5py.h5z.FILTER_CONFIG_ENCODE_ENABLED


@pytest.mark.skipif(not _szip_encodes(), reason="this h5py's HDF5 cannot write szip")
@pytest.mark.parametrize("np_", [None, 2, 3], ids=["single", "np2", "np3"])
def test_szip_chunks_szip_could_not_shrink_read_back(tmp, np_):
    """szip is optional: a chunk it cannot shrink is stored without it, its bit set in the chunk's
    filter mask. Parallel HDF5 1.10.8 (every output goes through it) stored such chunks with mask 0:
    exit 0, marked complete, and every reader failed on them ('szip_filter: decompression failed'),
    or worse, decoded some into garbage without an error. Equalized noise does not compress, so
    most chunks here are such chunks; 8- and 16-bit, with and without shuffle, chunks that do not
    divide the image."""
    r = np.random.default_rng(11)
    data = {"u16": (r.integers(1000, 1400, (4, 96, 80)).astype(np.uint16), {}),
            "u8": (r.integers(0, 200, (3, 70, 64)).astype(np.uint8), {"shuffle": True}),
            "smooth": (np.tile(np.arange(80, dtype=np.uint16)[None, None, :] * 50, (2, 96, 1)), {})}
    with h5py.File(tmp / "in.h5", "w") as f:
        for k, (a, kw) in data.items():
            f.create_dataset(k, data=a, chunks=(1, 32, 32), compression="szip", **kw)
    equalize(tmp / "in.h5", tmp / "out.h5", "--scope", "image", np_=np_)
    uncoded = 0
    with h5py.File(tmp / "out.h5", "r") as f:
        for k, (a, _) in data.items():
            d = f[k]
            assert d.compression == "szip"
            want = ref.equalize_stack(a, 8 * a.dtype.itemsize)[0]
            assert_array_equal(d[()], want, k)
            full = 32 * 32 * a.dtype.itemsize
            for i in range(d.id.get_num_chunks()):
                c = d.id.get_chunk_info(i)
                raw = d.id.read_direct_chunk(c.chunk_offset)[1]
                stored_plain = c.size == full and int.from_bytes(raw[:4], "little") != full
                assert stored_plain == bool(c.filter_mask), (k, c)
                uncoded += stored_plain
    assert uncoded > 10, "the noise should have given chunks szip could not shrink"


@pytest.mark.parametrize("np_", [None, 2], ids=["single", "np2"])
def test_attributes_of_every_type_on_datasets_groups_and_the_root(tmp, np_):
    """Dataset attributes of enum, bool, compound, array, variable-length, empty and zero-length
    types were dropped, and 128-bit numbers came out as other values (read through a native type);
    the root's and the groups' attributes were all dropped. Now each is carried with its type and
    bytes; references (they would point into the input) are not. Equalizing the output again does
    not pass on its completion mark or its record of the first run."""
    with h5py.File(tmp / "in.h5", "w") as f:
        f.attrs["instrument"] = "microCT-7"
        f.attrs["voxel_um"] = np.array([1.5, 1.5, 2.0])
        f.attrs["method"] = "theirs"  # a name the run records itself: the run's own value wins
        for k in ("ignore", "mask", "mask_apply", "reference"):  # what an earlier run recorded
            f.attrs[k] = "stale"
        g = f.create_group("scan")
        g.attrs["patient"] = "anon-17"
        d = g.create_dataset("vol", data=ref.stack_of(2, 40, 40, 100, 140, np.uint8, seed=3))
        d.attrs["calibrated"] = True
        d.attrs.create("kind", 1, dtype=h5py.enum_dtype({"A": 0, "B": 1}, basetype="i1"))
        d.attrs["origin"] = np.array([(1.0, 2, b"xy")], dtype=[("x", "f8"), ("n", "i4"), ("s", "S2")])
        d.attrs.create("arr3", np.arange(6, dtype="i2").reshape(2, 3), dtype=np.dtype(("i2", (3,))))
        d.attrs.create("ragged", [np.arange(3, dtype="i4"), np.arange(1, dtype="i4")],
                       dtype=h5py.vlen_dtype(np.int32))
        d.attrs["empty"] = h5py.Empty("f4")
        d.attrs["zero_len"] = np.zeros(0, np.int16)
        d.attrs["units"] = "HU"
        d.attrs["ref"] = g.ref
        t = h5py.h5t.STD_U64LE.copy()
        t.set_size(16)
        t.set_precision(128)
        a = h5py.h5a.create(d.id, b"u128", t, h5py.h5s.create(h5py.h5s.SCALAR))
        a.write(np.frombuffer((2 ** 100 + 12345).to_bytes(16, "little"), dtype="V16").reshape(()), mtype=t)
    equalize(tmp / "in.h5", tmp / "out.h5", np_=np_)
    equalize(tmp / "out.h5", tmp / "again.h5", np_=np_)
    for name in ("out.h5", "again.h5"):
        with h5py.File(tmp / "in.h5", "r") as a, h5py.File(tmp / name, "r") as b:
            assert b.attrs["instrument"] == "microCT-7" and list(b.attrs["voxel_um"]) == [1.5, 1.5, 2.0]
            assert attr_str(b.attrs["method"]) == "equalize"
            assert not any(k in b.attrs for k in ("ignore", "mask", "mask_apply", "reference")), dict(b.attrs)
            assert b["scan"].attrs["patient"] == "anon-17"
            da, db = a["scan/vol"], b["scan/vol"]
            for k in ("calibrated", "kind", "origin", "arr3", "zero_len"):
                assert np.asarray(db.attrs[k]).dtype == np.asarray(da.attrs[k]).dtype, k
                assert np.array_equal(db.attrs[k], da.attrs[k]), k
            assert db.attrs["units"] == "HU"
            assert [list(x) for x in db.attrs["ragged"]] == [[0, 1, 2], [0]]
            assert isinstance(db.attrs["empty"], h5py.Empty)
            assert "ref" not in db.attrs
            ai = h5py.h5a.open(db.id, b"u128")
            buf = np.zeros((), dtype="V16")
            ai.read(buf, mtype=ai.get_type())
            assert int.from_bytes(buf.tobytes(), "little") == 2 ** 100 + 12345
            assert b.attrs["histeq_dist_complete"] == 1
    with h5py.File(tmp / "again.h5", "r") as f:
        assert attr_str(f.attrs["source"]).endswith("out.h5")


def _szip_dataset(f, name, a, chunks, before=(), after=()):
    """A dataset whose pipeline is before + szip (nearest-neighbour, 8 pixels a block) + after."""
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_chunk(chunks)
    for flt in before:
        if flt == h5py.h5z.FILTER_DEFLATE:
            dcpl.set_deflate(4)
        else:
            dcpl.set_filter(flt, 0)
    dcpl.set_szip(h5py.h5z.SZIP_NN_OPTION_MASK, 8)
    for flt in after:
        if flt == h5py.h5z.FILTER_DEFLATE:
            dcpl.set_deflate(4)
        else:
            dcpl.set_filter(flt, 0)
    d = h5py.h5d.create(f.id, name.encode(), h5py.h5t.py_create(a.dtype), h5py.h5s.create_simple(a.shape), dcpl=dcpl)
    d.write(h5py.h5s.ALL, h5py.h5s.ALL, a)


@pytest.mark.skipif(not _szip_encodes(), reason="this h5py's HDF5 cannot write szip")
@pytest.mark.parametrize("np_", [None, 2], ids=["single", "np2"])
def test_szip_chunks_behind_or_before_other_filters_and_lookalike_headers(tmp, np_):
    """The first repair told an uncoded chunk by its size and szip's 4-byte header, or by reading
    it back where those could not tell: szip's decoder took uncoded chunks of noise after nbit
    without an error and gave other pixels (exit 0, complete, 8 of 64 chunks wrong); chunks whose
    pixels spelled the header (0, 4, 0, 0: 1024) were taken for coded; behind deflate the partial
    edge chunks (szip skipped, deflate shrank their padding) stayed unreadable. A chunk now counts
    as coded only if it decodes to its header's size and codes back to the same bytes."""
    r = np.random.default_rng(5)
    noise16 = r.integers(0, 65536, (6, 64, 64)).astype(np.uint16)
    spelled = r.integers(0, 256, (6, 64, 64)).astype(np.uint8)
    spelled[:, ::32, :128:32] = 0  # each chunk starts 0, 4, 0, 0: szip's header for 1024 bytes
    spelled[:, ::32, 1::32] = 4
    spelled[:, ::32, 2::32] = 0
    spelled[:, ::32, 3::32] = 0
    spelled[:, 5, 5] = 255
    edge = r.integers(0, 256, (100, 90)).astype(np.uint8)
    with h5py.File(tmp / "in.h5", "w") as f:
        _szip_dataset(f, "nbit_szip", noise16, (1, 32, 32), before=(h5py.h5z.FILTER_NBIT,))
        _szip_dataset(f, "spelled", spelled, (1, 32, 32))
        _szip_dataset(f, "szip_deflate", edge, (32, 32), after=(h5py.h5z.FILTER_DEFLATE,))
        _szip_dataset(f, "szip_fletcher", noise16, (1, 32, 32), after=(h5py.h5z.FILTER_FLETCHER32,))
    equalize(tmp / "in.h5", tmp / "out.h5", "--scope", "image", np_=np_)
    equalize(tmp / "in.h5", tmp / "st.h5", "--scope", "image", "--method", "stretch", np_=np_)
    with h5py.File(tmp / "out.h5", "r") as f, h5py.File(tmp / "st.h5", "r") as s:
        assert_array_equal(f["nbit_szip"][()], ref.equalize_stack(noise16, 16)[0], "nbit then szip")
        assert_array_equal(f["szip_fletcher"][()], ref.equalize_stack(noise16, 16)[0], "szip then fletcher32")
        assert_array_equal(f["szip_deflate"][()], ref.equalize_one(edge, 8), "szip then deflate")
        assert_array_equal(s["spelled"][()], ref.equalize_stack(spelled, 8, method="stretch")[0], "lookalike headers")
        assert np.array_equal(s["spelled"][()], spelled), "stretch of full-range images is the identity"


@pytest.mark.skipif(not _szip_encodes(), reason="this h5py's HDF5 cannot write szip")
def test_szip_after_deflate_is_refused_not_a_hang(tmp):
    """deflate then szip: parallel HDF5 1.10.8 reads back, within the write, chunks whose szip skip
    bit it lost, as garbage: 'inflate() failed' with one rank, a hang with two (beside another
    dataset). Refused at the scan, one line, exit 4; left out under --on-error skip."""
    r = np.random.default_rng(5)
    a = r.integers(0, 256, (100, 90)).astype(np.uint8)
    with h5py.File(tmp / "in.h5", "w") as f:
        f.create_dataset("a", data=a, chunks=(32, 32), compression="szip")
        _szip_dataset(f, "b", a, (32, 32), before=(h5py.h5z.FILTER_DEFLATE,))
    res = run(["--input", tmp / "in.h5", "--output", tmp / "out.h5"], 2, timeout=120)
    assert not res.timed_out and res.rc == 4, str(res)
    assert len(res.hq_lines) == 1 and "in.h5:/b: unsupported filter order" in res.hq_lines[0], str(res)
    res = run(["--input", tmp / "in.h5", "--output", tmp / "out.h5", "--on-error", "skip"], 2, timeout=120)
    assert res.rc == 3, str(res)
    with h5py.File(tmp / "out.h5", "r") as f:
        assert "b" not in f and np.array_equal(f["a"][()], ref.equalize_one(a, 8))


def test_attributes_left_out_are_counted(tmp):
    """An attribute over 32 KiB (a calibration table, say) or one holding references into the input
    is not copied; that used to happen without a word. Rank 0 now counts them in one note."""
    from helpers import run
    img = ref.low_contrast(8, 8, 10, 90, np.uint8, seed=15)
    inp = tmp / "in.h5"
    with h5py.File(inp, "w", libver="latest") as f:
        d = f.create_dataset("img", data=img)
        d.attrs["calib"] = np.arange(9000, dtype=np.int32)  # 36,000 bytes
        d.attrs["small"] = 1
        f.attrs["where"] = np.array([d.ref], dtype=h5py.ref_dtype)
    for np_ in (None, 2):
        out = tmp / f"out{np_}.h5"
        r = run(["-i", inp, "-o", out], np_)
        said = [l for l in r.err.splitlines() if "of the input left out" in l]
        assert r.rc == 0 and said == [f"histeq_dist: note: {out}: 2 attributes of the input left out: 1 over 32 KiB, "
                                      "1 holding references into the input"], str(r)
        with h5py.File(out, "r") as f:
            assert list(f["img"].attrs) == ["small"] and "where" not in f.attrs
    r = run(["-i", inp, "-o", tmp / "q.h5", "-q"])
    assert r.rc == 0 and r.err.strip() == "", str(r)
    # Killed after its first write, then resumed: the copies made before the kill are counted too
    # (the resumed run said "1 attribute", or nothing, as it counted only its own copies).
    with h5py.File(inp, "a") as f:
        f["img2"] = img
        f["img2"].attrs["calib2"] = np.arange(9000, dtype=np.int32)
    out = tmp / "killed.h5"
    r = run(["-i", inp, "-o", out, "-q"], None, env={"HQ_JOURNAL_FLUSH_S": "0", "HQ_FAULT_KILL": "0:1"})
    assert r.rc != 0 and not out.exists(), str(r)
    r = run(["-i", inp, "-o", out, "--resume"])
    said = [l for l in r.err.splitlines() if "of the input left out" in l]
    assert r.rc == 0 and said == [f"histeq_dist: note: {out}: 3 attributes of the input left out: 2 over 32 KiB, "
                                  "1 holding references into the input"], str(r)
