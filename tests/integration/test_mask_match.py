"""--ignore, --mask, --mask-apply and --method match --reference, against the independent numpy /
Python-int reference in reference.py (counted_histograms, lut_match, process_one), across rank
counts, and beside scikit-image (equalize_hist(mask=), match_histograms) as a peer."""
import os

import h5py
import numpy as np
import pytest

import pngio
import reference as ref
from helpers import assert_array_equal, assert_same_output, equalize, run, run_ok
from helpers import read_png as _read_png

E_INPUT = 4
E_USAGE = 2


def ct_stack(n, h, w, seed, dtype=np.uint16, lo=900, hi=1500):
    """CT-like slices: a disc of low-contrast tissue in a zero (air) background that dominates."""
    st = ref.stack_of(n, h, w, lo, hi, dtype, seed)
    y, x = np.mgrid[0:h, 0:w]
    st[:, (y - h / 2) ** 2 + (x - w / 2) ** 2 > (0.35 * min(h, w)) ** 2] = 0
    return st


def disc_mask(h, w, r=0.3, dtype=np.uint8, value=1):
    y, x = np.mgrid[0:h, 0:w]
    return (((y - h / 2) ** 2 + (x - w / 2) ** 2 <= (r * min(h, w)) ** 2) * value).astype(dtype)


def read_png(path):
    """The samples of a PNG: (H, W) for gray, (H, W, C) otherwise."""
    s = _read_png(path).samples
    return s[:, :, 0] if s.shape[2] == 1 else s


def read_h5(path, name):
    with h5py.File(path, "r") as f:
        return f[name][()]


def write_h5(path, **datasets):
    with h5py.File(path, "w") as f:
        for k, v in datasets.items():
            f.create_dataset(k, data=v)


# ---- --ignore ---------------------------------------------------------------------------------


@pytest.mark.parametrize("inside", [False, True])
def test_ignore_gray16_bits12(tmp, inside):
    st = ct_stack(4, 40, 44, seed=1)
    st[1, 3, 3] = 50000  # above 12 bits: clamped to 4095, in the histogram and the output
    st[2, :, :5] = 4095
    inp = tmp / "in.h5"
    write_h5(inp, ct=st)
    out = tmp / "out.h5"
    opts = ["--bits", "12", "--ignore", "0"] + (["--mask-apply", "inside"] if inside else [])
    equalize(inp, out, *opts)
    want = np.stack([ref.process_one(s, 12, ignore=(0, 0), inside=inside) for s in st])
    assert_array_equal(read_h5(out, "ct"), want, "ignore 0")
    got = read_h5(out, "ct")
    if inside:
        assert (got[st == 0] == 0).all()
    # The background is left out of the counts: without --ignore the LUTs differ.
    plain = np.stack([ref.process_one(s, 12) for s in st])
    assert not np.array_equal(plain, want)


def test_ignore_range_above_top_bin_and_wide(tmp):
    """A range reaching past 2^bits - 1 stops at the top bin; the clamped stray sample is ignored
    with it."""
    st = ct_stack(2, 30, 30, seed=2)
    st[0, 0, 0] = 60000
    inp = tmp / "in.h5"
    write_h5(inp, ct=st)
    out = tmp / "out.h5"
    equalize(inp, out, "--bits", "12", "--ignore", "1400:65535", "--mask-apply", "inside")
    want = np.stack([ref.process_one(s, 12, ignore=(1400, 65535), inside=True) for s in st])
    assert_array_equal(read_h5(out, "ct"), want, "ignore 1400:65535")


@pytest.mark.parametrize("color", ["luma", "channels", "value"])
@pytest.mark.parametrize("inside", [False, True])
def test_ignore_rgb(tmp, color, inside):
    """RGB: the histogrammed quantity is compared with the range (Y, each channel, V)."""
    img = ref.low_contrast_rgb(50, 60, 40, 200, np.uint8, seed=3)
    img[:12] = 0
    img[12:20, :, 1] = 255
    inp = tmp / "in.png"
    pngio.write(inp, img, 8, pngio.RGB)
    out = tmp / "out.png"
    opts = ["--color", color, "--ignore", "0:60"] + (["--mask-apply", "inside"] if inside else [])
    equalize(inp, out, *opts)
    want = ref.process_one(img, 8, color, ignore=(0, 60), inside=inside)
    assert_array_equal(read_png(out), want, f"ignore rgb {color}")


def test_ignore_everything_leaves_images_unchanged(tmp):
    st = ct_stack(3, 20, 20, seed=4)
    st[1] = 0
    inp = tmp / "in.h5"
    write_h5(inp, ct=st)
    out = tmp / "out.h5"
    r = equalize(inp, out, "--ignore", "0")
    got = read_h5(out, "ct")
    assert_array_equal(got[1], st[1], "blank slice")
    assert "slice 1: nothing counted" in r.err, r
    want = np.stack([ref.process_one(s, 16, ignore=(0, 0)) for s in st])
    assert_array_equal(got, want, "stack")


# ---- --mask -----------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", ["2d", "stack"])
@pytest.mark.parametrize("inside", [False, True])
def test_mask_hdf5(tmp, shape, inside):
    st = ct_stack(3, 36, 40, seed=5)
    if shape == "2d":
        mk = disc_mask(36, 40)
        masks = [mk] * 3
    else:
        mk = np.stack([disc_mask(36, 40, r) for r in (0.2, 0.3, 0.45)]).astype(np.uint16) * 7
        masks = list(mk)
    inp, mfile = tmp / "in.h5", tmp / "mask.h5"
    write_h5(inp, ct=st)
    write_h5(mfile, m=mk)
    out = tmp / "out.h5"
    opts = ["--mask", f"{mfile}:/m"] + (["--mask-apply", "inside"] if inside else [])
    equalize(inp, out, *opts)
    want = np.stack([ref.process_one(s, 16, mask=m, inside=inside) for s, m in zip(st, masks)])
    assert_array_equal(read_h5(out, "ct"), want, f"mask {shape}")


@pytest.mark.parametrize("np_", [None, 3])
def test_mask_stack_of_images_three_or_four_wide(tmp, np_):
    """An N x H x W mask is a stack of planes whatever W is: with W = 3 or 4 it was read as one colour
    image (the rule for image datasets) and refused as "H x W with channels"."""
    st = ct_stack(5, 11, 3, seed=21)[..., None]  # a gray stack of 11 x 3 images, stored N x H x W x 1
    fl = np.random.default_rng(22).normal(size=(4, 9, 4))  # a 3-D float dataset is always a stack
    rng = np.random.default_rng(23)
    m3 = (rng.random((5, 11, 3)) < 0.6).astype(np.uint8)
    m4 = (rng.random((4, 9, 4)) < 0.6).astype(np.uint16) * 300
    inp = tmp / "in.h5"
    write_h5(inp, st=st, fl=fl, m3=m3, m4=m4, m4x1=m4[..., None])
    r = run_ok(["-i", f"{inp}:/st", "-o", tmp / "o3.h5", "--mask", f"{inp}:/m3"], np_)
    want = np.stack([ref.process_one(s[..., 0], 16, mask=m) for s, m in zip(st, m3)])[..., None]
    assert_array_equal(read_h5(tmp / "o3.h5", "st"), want, "gray stack, 3-wide mask")
    # Float: the same as the mask stored N x H x W x 1, which was always read as planes.
    run_ok(["-i", f"{inp}:/fl", "-o", tmp / "o4.h5", "--mask", f"{inp}:/m4"], np_)
    run_ok(["-i", f"{inp}:/fl", "-o", tmp / "o4b.h5", "--mask", f"{inp}:/m4x1"], np_)
    got, ref4 = read_h5(tmp / "o4.h5", "fl"), read_h5(tmp / "o4b.h5", "fl")
    assert got.tobytes() == ref4.tobytes() and not np.array_equal(got, fl), "float stack, 4-wide mask"


@pytest.mark.parametrize("kind", ["int32", "bool"])
def test_mask_of_another_type_says_what_a_mask_is(tmp, kind):
    """A mask's type error speaks of masks: the image rule's list ("... float32 and float64
    images") sent users to a float mask, which is refused in turn."""
    inp, mfile = tmp / "in.h5", tmp / "mask.h5"
    write_h5(inp, ct=ct_stack(2, 12, 12, seed=24))
    write_h5(mfile, m=np.ones((12, 12), np.int32 if kind == "int32" else bool))
    r = run(["-i", inp, "-o", tmp / "o.h5", "--mask", f"{mfile}:/m"])
    one_line(r, E_INPUT, "mask.h5:/m: unsupported type for a mask")
    assert "float" not in r.err and "8- or 16-bit integers" in r.err, str(r)
    assert ("store a bool mask as uint8" in r.err) == (kind == "bool"), str(r)
    assert not os.path.exists(tmp / "o.h5")


def test_mask_inside_input_file_is_left_out(tmp):
    st = ct_stack(2, 30, 30, seed=6)
    mk = disc_mask(30, 30)
    inp = tmp / "in.h5"
    write_h5(inp, ct=st, m=mk)
    out = tmp / "out.h5"
    r = equalize(inp, out, "--mask", f"{inp}:m", "--ignore", "0", "--mask-apply", "inside")
    assert "is the mask" in r.err
    with h5py.File(out, "r") as f:
        assert np.array_equal(f["m"][()], mk)  # not equalized: copied as it is, as the file's other datasets
        assert f.attrs["options"].find("--mask") >= 0
        assert f.attrs["mask"] == f"{inp}:m" and f.attrs["ignore"] == "0:0" and f.attrs["mask_apply"] == "inside"
    want = np.stack([ref.process_one(s, 16, mask=mk, ignore=(0, 0), inside=True) for s in st])
    assert_array_equal(read_h5(out, "ct"), want, "mask in the input file")


def test_mask_luma_ignore_inside_keeps_pixels_exactly(tmp):
    """Luma pixels with an ignored Y are kept bit for bit (a plane, not an identity LUT entry)."""
    rng = np.random.default_rng(7)
    img = rng.integers(0, 256, (40, 50, 3), dtype=np.uint8)
    img[:10] = img[:10] // 4
    mk = (rng.random((40, 50)) > 0.3).astype(np.uint8)
    inp = tmp / "in.png"
    mpath = tmp / "m.png"
    pngio.write(inp, img, 8, pngio.RGB)
    pngio.write(mpath, mk * 255, 8, pngio.GRAY)
    out = tmp / "out.png"
    equalize(inp, out, "--mask", mpath, "--ignore", "0:40", "--mask-apply", "inside")
    want = ref.process_one(img, 8, "luma", mask=mk, ignore=(0, 40), inside=True)
    got = read_png(out)
    assert_array_equal(got, want, "luma ignore inside")
    y = (ref.luma_fx(*[img[:, :, k].astype(np.int64) for k in range(3)]) + 8192) >> 14
    keep = (mk == 0) | (y <= 40)
    assert np.array_equal(got[keep], img[keep])


def test_mask_png_directory_and_file(tmp):
    d, md = tmp / "in", tmp / "masks"
    os.makedirs(d)
    os.makedirs(md)
    imgs, masks = {}, {}
    for k in range(3):
        name = f"s{k}.png"
        imgs[name] = ref.low_contrast(30 + k, 40, 50, 120, np.uint8, seed=10 + k)
        masks[name] = disc_mask(30 + k, 40, 0.25 + 0.05 * k)
        pngio.write(d / name, imgs[name], 8, pngio.GRAY)
        pngio.write(md / name, masks[name], 8, pngio.GRAY)
    out = tmp / "out"
    equalize(d, out, "--mask", md)
    for name, img in imgs.items():
        assert_array_equal(read_png(out / name), ref.process_one(img, 8, mask=masks[name]), name)
    # Masks read by several I/O threads at once, on 1 and 2 ranks: the same files.
    for n in (None, 2):
        out_t = tmp / f"out_threads{n}"
        equalize(d, out_t, "--mask", md, "--io-threads", "3", np_=n)
        assert_same_output(str(out), str(out_t))
    # A mask PNG inside the input directory masks the others and is not equalized itself.
    d2 = tmp / "in2"
    os.makedirs(d2)
    mk0 = disc_mask(30, 40, 0.3) * 255
    pngio.write(d2 / "a.png", imgs["s0.png"], 8, pngio.GRAY)
    pngio.write(d2 / "mask.png", mk0, 8, pngio.GRAY)
    out2 = tmp / "out2"
    r = equalize(d2, out2, "--mask", d2 / "mask.png", "--ignore", "0:55")
    assert "is the mask" in r.err and not os.path.exists(out2 / "mask.png")
    assert_array_equal(read_png(out2 / "a.png"), ref.process_one(imgs["s0.png"], 8, mask=mk0, ignore=(0, 55)), "a")
    # One PNG mask for a single PNG input.
    out1 = tmp / "one.png"
    equalize(d / "s1.png", out1, "--mask", md / "s1.png", "--mask-apply", "inside")
    assert_array_equal(read_png(out1), ref.process_one(imgs["s1.png"], 8, mask=masks["s1.png"], inside=True), "one")


def test_mask_everything_out_leaves_image_unchanged(tmp):
    """Luma: an identity LUT alone would still move pixels whose Y is a .5 tie; nothing counted
    means untouched."""
    rng = np.random.default_rng(8)
    img = rng.integers(0, 256, (30, 30, 3), dtype=np.uint8)
    inp, mpath = tmp / "in.png", tmp / "m.png"
    pngio.write(inp, img, 8, pngio.RGB)
    pngio.write(mpath, np.zeros((30, 30), np.uint8), 8, pngio.GRAY)
    out = tmp / "out.png"
    r = equalize(inp, out, "--mask", mpath)
    assert "nothing counted" in r.err
    assert_array_equal(read_png(out), img, "all masked out")


def one_line(r, code, named):
    assert not r.timed_out and r.rc == code, f"exit {r.rc}, want {code}\n{r}"
    lines = r.hq_lines
    assert len(lines) == 1 and lines[0].startswith("histeq_dist: ") and named in lines[0], str(r)


@pytest.mark.parametrize("np_", [None, 2])
def test_mask_mismatches(tmp, np_):
    st = ct_stack(3, 20, 24, seed=9)
    inp, mfile = tmp / "in.h5", tmp / "mask.h5"
    write_h5(inp, ct=st)
    write_h5(mfile, wrong=np.ones((20, 25), np.uint8), slices=np.ones((2, 20, 24), np.uint8),
             floats=np.ones((20, 24), np.float32))  # read as integers, 1.0f would be all zeros
    for dset in ("wrong", "slices", "absent", "floats"):
        r = run(["-i", inp, "-o", tmp / "o.h5", "--mask", f"{mfile}:/{dset}"], np_)
        one_line(r, E_INPUT, "mask.h5")
        assert not os.path.exists(tmp / "o.h5")
    d, md = tmp / "pngs", tmp / "masks"
    os.makedirs(d)
    os.makedirs(md)
    for k in range(2):
        pngio.write(d / f"a{k}.png", ref.low_contrast(10, 10, 0, 99, np.uint8, k), 8, pngio.GRAY)
    pngio.write(md / "a0.png", np.ones((10, 10), np.uint8), 8, pngio.GRAY)
    r = run(["-i", d, "-o", tmp / "o", "--mask", md], np_)
    one_line(r, E_INPUT, "a1.png")
    write_h5(tmp / "pm.h5", m=np.ones((10, 10), np.uint8))
    r = run(["-i", d, "-o", tmp / "o", "--mask", f"{tmp / 'pm.h5'}:/m"], np_)
    one_line(r, E_INPUT, "pm.h5")
    r = run(["-i", d, "-o", tmp / "o", "--mask-apply", "inside"], np_)
    one_line(r, E_USAGE, "--mask-apply")


def test_a_list_given_as_mask_or_reference_names_the_option(tmp):
    """A text file is read as a list of PNG paths; when an entry fails, the line named only the
    entry ("./hello: cannot open"), which said nothing of the --mask or --reference it came from."""
    st = ct_stack(2, 16, 16, seed=61)
    inp = tmp / "in.h5"
    write_h5(inp, s=st)
    (tmp / "notes.txt").write_text("hello\n")
    for opt in (["--mask"], ["--method", "match", "--reference"]):
        r = run(["-i", inp, "-o", tmp / "o.h5"] + opt + [tmp / "notes.txt"])
        one_line(r, E_INPUT, f"{opt[-1]} {tmp / 'notes.txt'}: ")
        assert "hello" in r.hq_lines[0] and not os.path.exists(tmp / "o.h5")


def test_options_that_do_nothing_here_say_so(tmp):
    """--ignore above every level and --range without float data ran silently, as if they had
    done something; each now gets a note (not an error: a script may pass them to any input)."""
    inp = tmp / "in.h5"
    write_h5(inp, s=ct_stack(2, 16, 16, seed=62, dtype=np.uint8, lo=10, hi=200))
    r = run(["-i", inp, "-o", tmp / "o.h5", "--ignore", "300:400"])
    assert r.rc == 0 and "--ignore 300:400 lies above every level" in r.err and "(0..255)" in r.err, str(r)
    r = run(["-i", inp, "-o", tmp / "o2.h5", "--range", "0:1"])
    assert r.rc == 0 and "holds no float data: --range does nothing" in r.err, str(r)
    for extra, words in ((["--ignore", "255"], "lies above"), (["--ignore", "300", "-q"], "lies above")):
        r = run(["-i", inp, "-o", tmp / "o3.h5", "--force"] + extra)
        assert r.rc == 0 and words not in r.err, str(r)
    write_h5(tmp / "f.h5", x=np.linspace(0, 1, 256, dtype=np.float32).reshape(16, 16))
    r = run(["-i", tmp / "f.h5", "-o", tmp / "f_o.h5", "--range", "0:1"])
    assert r.rc == 0 and "--range does nothing" not in r.err, str(r)


def test_mask_names_match_byte_for_byte_in_any_order(tmp):
    """Masks are found by name, whatever order either side lists them in: case counts, digits are
    not numbers, a byte above 0x7f sorts last, and a list's entry in a subdirectory goes by its base
    name. Every mask differs, so a mask taken for another image's shows in the output."""
    names = ["b.png", "A.png", "a.png", "img10.png", "img9.png", "img100.png", "Img2.png", "_x.png",
             "\u00e9.png"]
    d, md = tmp / "in", tmp / "masks"
    os.makedirs(d)
    os.makedirs(md / "sub")
    imgs, masks, sub = {}, {}, set(names[::3])
    for k, name in enumerate(names):
        imgs[name] = ref.low_contrast(12, 14, 40, 160, np.uint8, seed=60 + k)
        masks[name] = np.random.default_rng(80 + k).integers(0, 2, (12, 14)).astype(np.uint8)
        pngio.write(d / name, imgs[name], 8, pngio.GRAY)
        pngio.write(md / ("sub" if name in sub else ".") / name, masks[name], 8, pngio.GRAY)
    # A mask of no image, named like some: it must not be taken for theirs.
    for extra in ("img1.png", "B.png", "img2.png"):
        pngio.write(md / extra, np.ones((12, 14), np.uint8), 8, pngio.GRAY)
    listed = list(reversed(names)) + ["img1.png", "B.png", "img2.png"]
    mlist = md / "masks.txt"
    mlist.write_text("".join(f"sub/{n}\n" if n in sub else f"{n}\n" for n in listed), encoding="utf-8")
    ilist = d / "images.txt"
    ilist.write_text("".join(n + "\n" for n in names), encoding="utf-8")
    mdir = tmp / "maskdir"
    os.makedirs(mdir)
    for name in names:
        pngio.write(mdir / name, masks[name], 8, pngio.GRAY)
    # The input's directory against the mask list, and the input's list against a mask directory.
    for inp, msrc, tag in ((d, mlist, "dir"), (ilist, mdir, "list")):
        out = tmp / f"out_{tag}"
        equalize(inp, out, "--mask", msrc, "--mask-apply", "inside")
        for name, img in imgs.items():
            assert_array_equal(read_png(out / name), ref.process_one(img, 8, mask=masks[name], inside=True),
                               f"{tag} {name}")
    # Missing masks: the first image (in the input's order) without one is named, on every rank count.
    os.remove(mdir / "Img2.png")
    os.remove(mdir / "img9.png")
    for np_ in (None, 2):
        r = run(["-i", ilist, "-o", tmp / "o", "--mask", mdir], np_)
        one_line(r, E_INPUT, "no mask named img9.png (for ")
        assert not os.path.exists(tmp / "o")


# ---- --method match ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype,bits", [(np.uint8, 8), (np.uint16, 16), (np.uint16, 12)])
def test_match_reference_gray(tmp, dtype, bits):
    maxv = (1 << bits) - 1
    st = np.stack([ref.low_contrast(40, 50, maxv // 5 + 30 * k, maxv // 3 + 40 * k, dtype, seed=20 + k) for k in range(3)])
    target = ref.low_contrast(33, 47, maxv // 4, maxv - maxv // 8, dtype, seed=30, noise=0.05)
    inp, rfile = tmp / "in.h5", tmp / "ref.h5"
    write_h5(inp, s=st)
    write_h5(rfile, t=target)
    out = tmp / "out.h5"
    opts = ["--method", "match", "--reference", f"{rfile}:/t"] + (["--bits", str(bits)] if bits != 8 * st.itemsize else [])
    equalize(inp, out, *opts)
    t = ref.counted_histograms(target, bits, "luma")
    want = np.stack([ref.process_one(s, bits, method="match", target=t) for s in st])
    assert_array_equal(read_h5(out, "s"), want, "match")
    with h5py.File(out, "r") as f:
        assert f.attrs["method"] == "match"
        assert f.attrs["reference"] == f"{rfile}:/t"
        assert "ignore" not in f.attrs and "mask" not in f.attrs
        assert f"{rfile}:/t" in f.attrs["options"]
        for k in range(3):
            assert np.array_equal(f["histeq_dist/lut/s"][k, 0], ref.lut_match(ref.counted_histograms(st[k], bits, "luma")[0], t[0], 1 << bits))


@pytest.mark.parametrize("color", ["luma", "channels", "value"])
def test_match_reference_rgb_png_stack(tmp, color):
    """A reference stack is summed; each RGB image keeps its own source histogram(s)."""
    imgs = [ref.low_contrast_rgb(30, 40, 30 + 20 * k, 120 + 20 * k, np.uint8, seed=40 + k) for k in range(3)]
    refs = np.stack([ref.low_contrast_rgb(20, 25, 0, 255, np.uint8, seed=50 + k) for k in range(2)])
    d = tmp / "in"
    os.makedirs(d)
    for k, im in enumerate(imgs):
        pngio.write(d / f"i{k}.png", im, 8, pngio.RGB)
    rfile = tmp / "ref.h5"
    write_h5(rfile, r=refs)
    out = tmp / "out"
    equalize(d, out, "--method", "match", "--reference", f"{rfile}:/r", "--color", color, "--ignore", "0:3")
    t = [a + b for a, b in zip(*[ref.counted_histograms(x, 8, color, ignore=(0, 3)) for x in refs])]
    for k, im in enumerate(imgs):
        want = ref.process_one(im, 8, color, method="match", target=t, ignore=(0, 3))
        assert_array_equal(read_png(out / f"i{k}.png"), want, f"match rgb {color}")


def test_match_reference_mismatch(tmp):
    st = ct_stack(2, 16, 16, seed=60)
    inp, rfile = tmp / "in.h5", tmp / "ref.h5"
    write_h5(inp, s=st)
    write_h5(rfile, u8=np.ones((8, 8), np.uint8), rgb=np.ones((8, 8, 3), np.uint16), zero=np.zeros((8, 8), np.uint16))
    for dset, code in (("u8", E_INPUT), ("rgb", E_INPUT), ("zero", None)):
        r = run(["-i", inp, "-o", tmp / "o.h5", "--method", "match", "--reference", f"{rfile}:/{dset}"]
                + (["--ignore", "0"] if dset == "zero" else []))
        one_line(r, E_INPUT, "ref.h5")
    one_line(run(["-i", inp, "-o", tmp / "o.h5", "--method", "match"]), E_USAGE, "--reference")
    one_line(run(["-i", inp, "-o", tmp / "o.h5", "--reference", "global"]), E_USAGE, "--reference")


def test_match_global_with_mask_and_ignore(tmp):
    st = ct_stack(5, 30, 34, seed=70)
    mk = disc_mask(30, 34, 0.4)
    inp, mfile = tmp / "in.h5", tmp / "m.h5"
    write_h5(inp, ct=st)
    write_h5(mfile, m=mk)
    out = tmp / "out.h5"
    equalize(inp, out, "--method", "match", "--reference", "global", "--mask", f"{mfile}:/m", "--ignore", "0",
             "--bits", "12")
    hs = [ref.counted_histograms(s, 12, "luma", mask=mk, ignore=(0, 0)) for s in st]
    g = [sum(h[0] for h in hs)]
    want = np.stack([ref.process_one(s, 12, method="match", target=g, mask=mk, ignore=(0, 0)) for s in st])
    assert_array_equal(read_h5(out, "ct"), want, "match global")


# ---- rank invariance --------------------------------------------------------------------------


@pytest.mark.parametrize("case", ["mask", "match-global"])
def test_ranks_split_images(tmp, case):
    """Images split over 1-4 ranks in small blocks (row bands and chunk tiles of one big image, and
    a stack): outputs identical to each other and to the reference."""
    big = ct_stack(1, 300, 257, seed=80)[0]
    st = ct_stack(5, 40, 30, seed=81)
    mk_big, mk_st = disc_mask(300, 257, 0.33), disc_mask(40, 30, 0.4)
    inp, mfile = tmp / "in.h5", tmp / "m.h5"
    with h5py.File(inp, "w") as f:
        f.create_dataset("big", data=big, chunks=(64, 64), compression="gzip")
    write_h5(mfile, m=mk_big)
    if case == "mask":
        opts = ["--mask", f"{mfile}:/m", "--ignore", "0", "--mask-apply", "inside"]
        want = ref.process_one(big, 16, mask=mk_big, ignore=(0, 0), inside=True)
    else:
        with h5py.File(inp, "a") as f:
            f.create_dataset("small", data=big[:40, :30].copy())
        opts = ["--method", "match", "--reference", "global", "--ignore", "0"]
        hs = [ref.counted_histograms(x, 16, "luma", ignore=(0, 0))[0] for x in (big, big[:40, :30])]
        g = [hs[0] + hs[1]]
        want = ref.process_one(big, 16, method="match", target=g, ignore=(0, 0))
    outs = []
    for n in (1, 2, 3, 4):
        out = tmp / f"out{n}.h5"
        equalize(inp, out, *opts, "--block", "8K", "--memory", "200K", np_=n)
        outs.append(out)
        assert_array_equal(read_h5(out, "big"), want, f"{case} np={n}")
    for o in outs[1:]:
        assert_same_output(str(outs[0]), str(o))
    # A stack of small images dealt over ranks, 2-D mask for every slice.
    inp2, m2 = tmp / "st.h5", tmp / "m2.h5"
    write_h5(inp2, st=st)
    write_h5(m2, m=mk_st)
    want2 = np.stack([ref.process_one(s, 16, mask=mk_st, ignore=(0, 0), inside=True) for s in st])
    for n in (1, 3):
        out = tmp / f"st{n}.h5"
        equalize(inp2, out, "--mask", f"{m2}:/m", "--ignore", "0", "--mask-apply", "inside", "--block", "3K", np_=n)
        assert_array_equal(read_h5(out, "st"), want2, f"stack np={n}")


# ---- scikit-image as a peer -------------------------------------------------------------------

skimage = pytest.importorskip("skimage.exposure")


def test_skimage_equalize_hist_mask(tmp):
    """skimage's equalize_hist(mask=) counts the masked pixels and maps every pixel through
    cdf(v) / N (each integer its own bin). Our LUT is round((c(v) - c(h0)) * 255 / (N - c(h0))):
    the same counted cdf, offset and rounded; applied to skimage's output, it must give ours."""
    img = ref.low_contrast(120, 140, 30, 200, np.uint8, seed=90, noise=0.03)
    mk = disc_mask(120, 140, 0.35)
    inp, mpath = tmp / "in.png", tmp / "m.png"
    pngio.write(inp, img, 8, pngio.GRAY)
    pngio.write(mpath, mk, 8, pngio.GRAY)
    out = tmp / "out.png"
    equalize(inp, out, "--mask", mpath)
    got = read_png(out).astype(np.int64)
    sk = skimage.equalize_hist(img, mask=mk.astype(bool))
    counted = img[mk != 0]
    n, c0 = counted.size, int((counted == counted.min()).sum())
    mapped = np.floor((sk * n - c0) * 255 / (n - c0) + 0.5)
    mapped = np.clip(mapped, 0, 255).astype(np.int64)
    differ = np.count_nonzero(mapped != got)
    print(f"skimage equalize_hist(mask=): {differ} of {got.size} pixels differ after the offset")
    assert differ <= got.size // 1000 and np.abs(mapped - got).max() <= 1


def test_skimage_match_histograms(tmp):
    """A peer, not the reference: skimage interpolates between the target's quantiles, we take the
    first target level whose cumulative share reaches the source's. Reports the share of pixels that
    differ and by how much."""
    from skimage.exposure import match_histograms
    rng = np.random.default_rng(91)
    report = []
    for k in range(3):
        src = ref.low_contrast(160, 200, 40 + 10 * k, 110 + 15 * k, np.uint8, seed=92 + k, noise=0.02)
        tgt = ref.low_contrast(150, 180, 20, 235, np.uint8, seed=95 + k, noise=0.04)
        tgt = np.clip(tgt.astype(np.int64) + rng.integers(-3, 4, tgt.shape), 0, 255).astype(np.uint8)
        inp, rpath, out = tmp / f"s{k}.png", tmp / f"t{k}.png", tmp / f"o{k}.png"
        pngio.write(inp, src, 8, pngio.GRAY)
        pngio.write(rpath, tgt, 8, pngio.GRAY)
        equalize(inp, out, "--method", "match", "--reference", rpath)
        got = read_png(out).astype(np.int64)
        sk = np.rint(match_histograms(src, tgt)).astype(np.int64)
        d = np.abs(got - sk)
        report.append((np.count_nonzero(d) / d.size, float(d.mean()), int(d.max())))
        # Both are monotone maps onto the same target: they must stay close.
        assert d.mean() < 3 and np.percentile(d, 99) <= 8, report[-1]
    for share, mean, mx in report:
        print(f"skimage match_histograms: {100 * share:.1f}% of pixels differ, mean {mean:.2f} levels, max {mx}")


@pytest.mark.parametrize("np_", [1, 4])
def test_scope_global_records_the_lut_applied(tmp, np_):
    """Scope global with more ranks than blocks: every rank records the same global LUT, the one
    applied (match onto the reference, ignored levels kept with --mask-apply inside)."""
    img = ct_stack(1, 24, 20, seed=100)[0]
    target = ref.low_contrast(20, 20, 0, 65535, np.uint16, seed=101, noise=0.05)
    inp, rfile = tmp / "in.h5", tmp / "ref.h5"
    write_h5(inp, img=img)
    write_h5(rfile, t=target)
    out = tmp / "out.h5"
    equalize(inp, out, "--scope", "global", "--method", "match", "--reference", f"{rfile}:/t", "--ignore", "0",
             "--mask-apply", "inside", np_=np_)
    t = ref.counted_histograms(target, 16, "luma", ignore=(0, 0))
    h = ref.counted_histograms(img, 16, "luma", ignore=(0, 0))
    lut = ref.lut_match(h[0], t[0], 65536)
    lut[0] = 0
    with h5py.File(out, "r") as f:
        assert np.array_equal(f["histeq_dist/global_histogram"][0].astype(np.int64), h[0])
        assert np.array_equal(f["histeq_dist/global_lut"][0].astype(np.int64), lut)
        assert_array_equal(f["img"][()], ref.process_one(img, 16, method="match", target=t, ignore=(0, 0), inside=True), "img")


def test_resume_with_mask_and_match_global(tmp):
    """A rank killed mid-run; --resume redoes the target pre-pass and finishes with the output of an
    uninterrupted run."""
    st = ref.stack_of(6, 60, 50, 300, 900, np.uint16, seed=110)
    mk = disc_mask(60, 50, 0.4)
    inp, mfile = tmp / "in.h5", tmp / "m.h5"
    with h5py.File(inp, "w") as f:
        f.create_dataset("s", data=st, chunks=(1, 30, 50), compression="gzip")
    write_h5(mfile, m=mk)
    opts = ["-i", inp, "--mask", f"{mfile}:/m", "--method", "match", "--reference", "global", "--ignore", "0",
            "--block", "4K", "--device", "cpu"]
    full = tmp / "full.h5"
    r = run(opts + ["-o", full], 2)
    assert r.rc == 0, str(r)
    part = tmp / "part.h5"
    r = run(opts + ["-o", part], 2, env={"HQ_FAULT_KILL": "1:2", "HQ_JOURNAL_FLUSH_S": "0"})
    assert r.rc != 0 and not os.path.exists(part), str(r)
    r = run(opts + ["-o", part, "--resume"], 2)
    assert r.rc == 0 and "resuming" in r.err, str(r)
    assert_array_equal(read_h5(part, "s"), read_h5(full, "s"), "resumed")
    hs = [ref.counted_histograms(s, 16, "luma", mask=mk, ignore=(0, 0)) for s in st]
    g = [sum(h[0] for h in hs)]
    want = np.stack([ref.process_one(s, 16, method="match", target=g, mask=mk, ignore=(0, 0)) for s in st])
    assert_array_equal(read_h5(full, "s"), want, "full")


@pytest.mark.parametrize("alpha", [False, True])
def test_palette_png_mask_inside(tmp, alpha):
    """A palette PNG under --mask with --mask-apply inside: pixels of one palette index are left as
    they were outside the mask and remapped inside it, which one palette entry per index cannot
    hold, so the output is RGB(A), and it equals the run on the same image stored as RGB(A)."""
    from test_png import palette_image
    idx, pal, trns = palette_image(48, 52, 31, alpha=alpha)
    pngio.write(tmp / "pal.png", idx, 8, pngio.PALETTE, palette=pal, trns=trns)
    rgb = _read_png(tmp / "pal.png").rgb().astype(np.uint8)
    pngio.write(tmp / "rgb.png", rgb, 8, pngio.RGBA if alpha else pngio.RGB)
    pngio.write(tmp / "mask.png", disc_mask(48, 52, r=0.35), 8, pngio.GRAY)
    opts = ["--mask", tmp / "mask.png", "--mask-apply", "inside", "--color", "value"]
    equalize(tmp / "pal.png", tmp / "pal_out.png", *opts)
    equalize(tmp / "rgb.png", tmp / "rgb_out.png", *opts)
    got = _read_png(tmp / "pal_out.png")
    assert got.color_type == (pngio.RGBA if alpha else pngio.RGB) and got.depth == 8
    want = _read_png(tmp / "rgb_out.png").samples
    assert_array_equal(got.samples, want, "palette input vs the same pixels as RGB(A)")
    outside = disc_mask(48, 52, r=0.35) == 0
    assert_array_equal(got.samples[outside], rgb[outside], "masked-out pixels left as they were")
    assert not np.array_equal(got.samples, rgb), "the masked-in pixels were remapped"


@pytest.mark.parametrize("np_", [None, 2])
def test_output_never_replaces_the_mask_or_reference(tmp, np_):
    """--force replaces an output; it must not replace what the run reads besides its input: a
    --mask or --reference file given as the output, a PNG mask directory given as the output
    directory, or a mask or reference PNG that the output directory would overwrite. Each is one
    line, exit 2, and every file is left as it was."""
    img = ref.low_contrast(20, 24, 10, 90, np.uint8, seed=4)
    inp, mfile, rfile = tmp / "in.h5", tmp / "mask.h5", tmp / "ref.h5"
    write_h5(inp, x=img)
    write_h5(mfile, m=np.ones((20, 24), np.uint8))
    write_h5(rfile, r=ref.low_contrast(20, 24, 0, 255, np.uint8, seed=5))
    d, md = tmp / "pngs", tmp / "masks"
    os.makedirs(d)
    os.makedirs(md)
    for name in ("a.png", "b.png"):
        pngio.write(d / name, img, 8, pngio.GRAY)
        pngio.write(md / name, np.ones((20, 24), np.uint8), 8, pngio.GRAY)
    rpng = tmp / "out" / "b.png"
    os.makedirs(rpng.parent)
    pngio.write(rpng, img[::-1], 8, pngio.GRAY)
    cases = [
        (["-i", f"{inp}:/x", "-o", mfile, "--mask", f"{mfile}:/m"], "the --mask file"),
        (["-i", f"{inp}:/x", "-o", rfile, "--method", "match", "--reference", f"{rfile}:/r"], "the --reference file"),
        (["-i", d, "-o", md, "--mask", md], "the --mask file"),
        (["-i", d, "-o", tmp / "elsewhere", "--mask", md / "a.png"], None),  # no file of the mask's: allowed
        (["-i", d, "-o", rpng.parent, "--method", "match", "--reference", rpng], "would replace the --reference"),
        (["-i", d, "-o", md, "--mask", md / "a.png"], "would replace the --mask"),
    ]
    before = {p: p.read_bytes() for p in (mfile, rfile, rpng, md / "a.png", md / "b.png")}
    for args, named in cases:
        r = run(args + ["--force"], np_)
        if named is None:
            assert r.rc == 0, str(r)
            continue
        one_line(r, E_USAGE, named)
        assert all(p.read_bytes() == b for p, b in before.items()), args


def test_match_reference_float_or_signed_is_refused(tmp):
    """A float or signed reference was refused for its depth only: with --bits it got through and
    its stored bits were counted as unsigned levels (a float32 target made every pixel 255, an
    int8 one of -128 every pixel 128), exit 0."""
    u8 = np.random.default_rng(61).integers(0, 256, (30, 40), dtype=np.uint8)
    u16 = np.random.default_rng(62).integers(0, 4096, (30, 40), dtype=np.uint16)
    inp8, inp16, rfile = tmp / "in8.h5", tmp / "in16.h5", tmp / "ref.h5"
    write_h5(inp8, d=u8)
    write_h5(inp16, d=u16)
    write_h5(rfile, f32=np.random.default_rng(63).uniform(0, 1, (20, 20)).astype(np.float32),
             f64=np.zeros((20, 20)), i8=np.full((20, 20), -128, np.int8), i16=np.full((20, 20), -5, np.int16))
    for inp, bits, dset in ((inp8, "8", "f32"), (inp8, "8", "f64"), (inp8, "8", "i8"), (inp16, "16", "i16"),
                            (inp16, "16", "f32"), (inp8, None, "i8")):
        r = run(["-i", inp, "-o", tmp / "o.h5", "--method", "match", "--reference", f"{rfile}:/{dset}"]
                + (["--bits", bits] if bits else []))
        one_line(r, E_INPUT, f"ref.h5:/{dset}")
        assert "float" in r.err or "signed" in r.err, str(r)
        assert not (tmp / "o.h5").exists()


@pytest.mark.parametrize("spec", ["/mask_link", "/x_again", "//masks/body", "/./masks/body"])
def test_mask_inside_input_file_under_another_name_is_left_out(tmp, spec):
    """The mask was left out only under the very path the scan listed: named through a soft link,
    a further hard link, '//' or '/./', it was equalized as an image, masked by itself, and the
    output's copy of the mask rewritten (0/10/200 -> 0/255), exit 0."""
    img = np.random.default_rng(64).integers(0, 256, (30, 40), dtype=np.uint8)
    mk = np.zeros((30, 40), np.uint8)
    mk[5:25, 5:35] = 200
    mk[10:12, 10:12] = 10
    inp, out = tmp / "in.h5", tmp / "out.h5"
    with h5py.File(inp, "w") as f:
        f["img"] = img
        f["masks/body"] = mk
        f["mask_link"] = h5py.SoftLink("/masks/body")
        f["x_again"] = f["masks/body"]
    r = run(["-i", inp, "-o", out, "--mask", f"{inp}:{spec}"])
    assert r.rc == 0 and "is the mask; it is not equalized" in r.err and "equalized 1 image " in r.err, str(r)
    with h5py.File(out, "r") as f:
        assert np.array_equal(f["masks/body"][()], mk) and np.array_equal(f["x_again"][()], mk)
        assert_array_equal(f["img"][()], ref.process_one(img, 8, mask=mk), "img")


def test_mask_that_is_the_only_image_of_a_whole_file(tmp):
    """A whole file whose only image is the mask holds nothing to equalize: one line, exit 4 (it
    was equalized, masked by itself, exit 0). Named alone (FILE.h5:/m) it is the image, masked by
    itself, as before."""
    mk = np.zeros((20, 20), np.uint8)
    mk[4:16, 4:16] = 200
    mk[0, 0] = 10
    inp = tmp / "in.h5"
    with h5py.File(inp, "w") as f:
        f["mask"] = mk
        f["label"] = "one mask"
    r = run(["-i", inp, "-o", tmp / "o.h5", "--mask", f"{inp}:/mask"])
    one_line(r, E_INPUT, "only image is the --mask")
    assert not (tmp / "o.h5").exists()
    run_ok(["-i", f"{inp}:/mask", "-o", tmp / "alone.h5", "--mask", f"{inp}:/mask", "-q"])
    assert_array_equal(read_h5(tmp / "alone.h5", "mask"), ref.process_one(mk, 8, mask=mk), "alone")
