"""PNG inputs: single files of every colour type and depth, directories and list files."""
import os

import numpy as np
import pytest
from PIL import Image

import pngio
import reference as ref
from helpers import assert_array_equal, equalize, file_hash, read_png, run, run_ok, tree_hash


def palette_image(h, w, seed, n=40, alpha=False):
    """Indices into a low-contrast palette (greenish greys), optionally with tRNS alpha."""
    rng = np.random.default_rng(seed)
    f = ref.smooth_field(h, w, rng)
    idx = np.minimum((f * n).astype(np.int64), n - 1)
    pal = [(90 + i, 100 + i // 2, 80 + (i * 7) % 30) for i in range(n)]
    trns = [255 - 3 * i for i in range(n // 2)] if alpha else None
    return idx, pal, trns


def make_pngs(d):
    """One PNG of each kind in directory d; returns {name: (depth, color_type)}."""
    os.makedirs(d, exist_ok=True)
    kinds = {}

    def put(name, samples, depth, ct, **kw):
        pngio.write(os.path.join(d, name), samples, depth, ct, **kw)
        kinds[name] = (depth, ct)

    put("gray8.png", ref.low_contrast(48, 64, 100, 150, np.uint8, 21), 8, pngio.GRAY)
    put("gray16.png", ref.low_contrast(40, 52, 20000, 21000, np.uint16, 22), 16, pngio.GRAY)
    ga = np.stack([ref.low_contrast(30, 44, 40, 90, np.uint8, 23),
                   np.tile(np.arange(44, dtype=np.uint8) * 5, (30, 1))], axis=2)
    put("graya8.png", ga, 8, pngio.GRAY_ALPHA)
    ga16 = np.stack([ref.low_contrast(30, 20, 500, 900, np.uint16, 24),
                     np.full((30, 20), 65535, np.uint16)], axis=2)
    put("graya16.png", ga16, 16, pngio.GRAY_ALPHA)
    put("rgb8.png", ref.low_contrast_rgb(36, 50, 60, 140, np.uint8, 25), 8, pngio.RGB)
    put("rgb16.png", ref.low_contrast_rgb(28, 30, 30000, 36000, np.uint16, 26), 16, pngio.RGB)
    put("rgba8.png", ref.low_contrast_rgb(33, 41, 120, 180, np.uint8, 27, channels=4), 8, pngio.RGBA)
    put("rgba16.png", ref.low_contrast_rgb(20, 24, 1000, 5000, np.uint16, 28, channels=4), 16, pngio.RGBA)
    idx, pal, _ = palette_image(40, 45, 29)
    put("pal.png", idx, 8, pngio.PALETTE, palette=pal)
    idx, pal, trns = palette_image(35, 30, 30, alpha=True)
    put("pal_trns.png", idx, 8, pngio.PALETTE, palette=pal, trns=trns)
    put("gray4.png", ref.low_contrast(26, 37, 5, 9, np.uint8, 31), 4, pngio.GRAY)
    put("gray2.png", ref.low_contrast(17, 23, 1, 2, np.uint8, 32), 2, pngio.GRAY)
    return kinds


def expected_png(path, color="luma", method="equalize", bits=None):
    p = read_png(path)
    px = p.rgb()
    b = bits or (8 if p.color_type == pngio.PALETTE else p.depth)
    return ref.equalize_one(px, b, color, method)


def check_png(out_path, in_path, **kw):
    pin, pout = read_png(in_path), read_png(out_path)
    assert (pout.depth, pout.color_type) == (pin.depth, pin.color_type), \
        f"{out_path}: depth/colour type {pout.depth}/{pout.color_type}, want {pin.depth}/{pin.color_type}"
    assert (pout.width, pout.height) == (pin.width, pin.height)
    assert_array_equal(pout.rgb().astype(np.int64), expected_png(in_path, **kw).astype(np.int64),
                       os.path.basename(str(out_path)))


KINDS = ["gray8", "gray16", "graya8", "graya16", "rgb8", "rgb16", "rgba8", "rgba16", "pal", "pal_trns",
         "gray4", "gray2"]


@pytest.fixture(scope="module")
def pngdir(tmp_path_factory):
    d = tmp_path_factory.mktemp("pngs")
    make_pngs(str(d))
    return d


def test_reader_agrees_with_pil(pngdir):
    """The tests' own PNG reader against PIL, where PIL reads samples exactly."""
    for name in ["gray8", "graya8", "rgb8", "rgba8", "pal", "gray16"]:
        p = read_png(pngdir / f"{name}.png")
        im = Image.open(pngdir / f"{name}.png")
        a = np.array(im)
        if name == "pal":
            assert im.mode == "P"
            assert_array_equal(p.samples[:, :, 0].astype(np.uint8), a, name)
        else:
            assert_array_equal(p.samples.reshape(a.shape).astype(a.dtype), a, name)


@pytest.mark.parametrize("kind", KINDS)
def test_single_png(tmp, pngdir, kind):
    src = pngdir / f"{kind}.png"
    before = file_hash(src)
    out = tmp / f"{kind}_eq.png"
    equalize(src, out)
    check_png(out, src)
    assert file_hash(src) == before


@pytest.mark.parametrize("color", ["channels", "value"])
@pytest.mark.parametrize("kind", ["rgb8", "rgba16", "pal"])
def test_png_color_modes(tmp, pngdir, kind, color):
    src = pngdir / f"{kind}.png"
    out = tmp / "eq.png"
    equalize(src, out, "--color", color)
    check_png(out, src, color=color)


def test_png_stretch(tmp, pngdir):
    for kind, color in [("gray16", "luma"), ("rgb8", "channels")]:
        src = pngdir / f"{kind}.png"
        out = tmp / f"{kind}_st.png"
        equalize(src, out, "--method", "stretch", "--color", color)
        check_png(out, src, color=color, method="stretch")


def test_png_filters_and_levels(tmp):
    """Sub/up-filtered input rows; --png-level 0 and 9 give the same pixels."""
    img = ref.low_contrast(40, 30, 10, 40, np.uint8, 33)
    src = tmp / "f.png"
    pngio.write(src, img, 8, pngio.GRAY, filter_type=1)
    for level in ("0", "9"):
        out = tmp / f"f{level}.png"
        equalize(src, out, "--png-level", level)
        check_png(out, src)


def test_png_directory(tmp, pngdir):
    d = tmp / "in"
    kinds = make_pngs(str(d))
    (d / "notes.txt").write_text("not an image\n")
    os.makedirs(d / "sub")
    pngio.write(d / "sub" / "nested.png", np.zeros((4, 4), np.uint8), 8, pngio.GRAY)  # not directly inside
    before = tree_hash(d)
    out = tmp / "out"
    equalize(d, out)
    assert sorted(os.listdir(out)) == sorted(list(kinds) + ["histeq_dist.complete"]), \
        "the output holds exactly the input's *.png names and the completion record"
    for name in kinds:
        check_png(out / name, d / name)
    assert tree_hash(d) == before


def test_png_directory_global(tmp):
    d = tmp / "in"
    os.makedirs(d)
    imgs = [ref.low_contrast(30 + 5 * i, 40, 60 + 10 * i, 110 + 10 * i, np.uint8, 40 + i) for i in range(4)]
    for i, im in enumerate(imgs):
        pngio.write(d / f"img{i}.png", im, 8, pngio.GRAY)
    out = tmp / "out"
    equalize(d, out, "--scope", "global")
    want, _ = ref.equalize_images(imgs, 8, scope="global")
    for i in range(4):
        assert_array_equal(read_png(out / f"img{i}.png").samples[:, :, 0], want[i], f"img{i} (global)")


def test_png_list_file(tmp):
    d = tmp / "lst"
    os.makedirs(d)
    imgs = {n: ref.low_contrast(20, 30, 30, 70, np.uint8, 50 + i) for i, n in enumerate(["a", "b", "c"])}
    for n, im in imgs.items():
        pngio.write(d / f"{n}.png", im, 8, pngio.GRAY)
    # A byte-order mark first (editors on Windows write one) and CRLF line ends: both ignored.
    (d / "list.txt").write_bytes(b"\xef\xbb\xbfa.png\r\n# the scans to equalize\r\n\r\n# b.png is left out\r\nc.png\r\n")
    os.makedirs(tmp / "elsewhere")
    out = tmp / "out"
    # Run from another directory: entries are relative to the list file, not to the cwd.
    equalize(d / "list.txt", out, cwd=str(tmp / "elsewhere"))
    assert sorted(os.listdir(out)) == ["a.png", "c.png", "histeq_dist.complete"]
    for n in ("a", "c"):
        assert_array_equal(read_png(out / f"{n}.png").samples[:, :, 0], ref.equalize_one(imgs[n], 8), n)


def test_png_list_entry_named_like_the_completion_mark(tmp):
    """A list names files by any name: a PNG called histeq_dist.complete was overwritten by the
    output directory's completion mark, exit 0 (and, killed, left a directory that looked
    finished). Refused up front with one line, exit 4; nothing is written."""
    d = tmp / "lst"
    os.makedirs(d)
    pngio.write(d / "histeq_dist.complete", ref.low_contrast(20, 30, 30, 70, np.uint8, 60), 8, pngio.GRAY)
    pngio.write(d / "b.png", ref.low_contrast(20, 30, 30, 70, np.uint8, 61), 8, pngio.GRAY)
    (d / "list.txt").write_text("histeq_dist.complete\nb.png\n")
    r = run(["--input", d / "list.txt", "--output", tmp / "out"])
    assert r.rc == 4 and len(r.err_lines) == 1 and "histeq_dist.complete" in r.err_lines[0], str(r)
    assert not (tmp / "out").exists() or not os.listdir(tmp / "out")


def trns_payload(key, channels):
    return [b for v in ([key] if channels == 1 else list(key)) for b in (int(v) >> 8, int(v) & 0xFF)]


@pytest.mark.parametrize("kind", ["gray8", "gray16", "gray4", "gray1", "rgb8", "rgb16"])
def test_png_transparent_colour_becomes_alpha(tmp, kind):
    """A tRNS colour key: the output is gray+alpha or RGBA with alpha 0 exactly where the input had
    that colour, the colours equalized as those of the same image given with that alpha channel
    (1/2/4-bit gray read as libpng widens it to 8 bits). Kept as a key, the colour would follow
    the remap and make other pixels transparent."""
    depth = 16 if kind.endswith("16") else int(kind[4:]) if kind.startswith("gray") and kind[4:] != "8" else 8
    rgb = kind.startswith("rgb")
    hi = (1 << depth) - 1
    if rgb:
        samples = ref.low_contrast_rgb(31, 43, hi // 4, hi // 2, np.uint16 if depth == 16 else np.uint8, 41)
        key = tuple(samples[5, 7])
        transparent = np.all(samples == np.array(key), axis=2)
    else:
        samples = ref.low_contrast(31, 43, 0 if depth < 8 else hi // 4, hi if depth < 8 else hi // 2,
                                   np.uint16 if depth == 16 else np.uint8, 42)
        key = int(samples[5, 7])
        transparent = samples == key
    assert 0 < transparent.sum() < transparent.size
    pngio.write(str(tmp / "key.png"), samples, depth, pngio.RGB if rgb else pngio.GRAY,
                trns=trns_payload(key, 3 if rgb else 1))
    wide = depth if depth >= 8 else 8
    colour = samples.astype(np.int64) * (255 // hi if depth < 8 else 1)
    alpha = np.where(transparent, 0, (1 << wide) - 1)
    full = np.concatenate([colour.reshape(31, 43, -1), alpha[:, :, None]], axis=2)
    pngio.write(str(tmp / "alpha.png"), full.astype(np.uint16 if wide == 16 else np.uint8), wide,
                pngio.RGBA if rgb else pngio.GRAY_ALPHA)
    equalize(tmp / "key.png", tmp / "key_eq.png")
    equalize(tmp / "alpha.png", tmp / "alpha_eq.png")
    got, want = read_png(tmp / "key_eq.png"), read_png(tmp / "alpha_eq.png")
    assert (got.depth, got.color_type) == (wide, pngio.RGBA if rgb else pngio.GRAY_ALPHA)
    assert got.trns is None
    assert_array_equal(got.samples, want.samples, kind)
    assert np.array_equal(got.samples[:, :, -1] == 0, transparent)


@pytest.mark.parametrize("shape,opts", [((1, 1000001), ["--png-level", "6"]), ((1000001, 1), ["--png-level", "6"]),
                                        ((1, 1000001), ["--palette-wide"])], ids=["wide", "tall", "palette"])
def test_a_side_over_a_million_pixels_is_written(tmp, shape, opts):
    """libpng refuses to write a side over 1,000,000 pixels unless told otherwise; reading was told,
    writing was not: 'cannot encode PNG (Invalid IHDR data)', exit 1, after all the work."""
    from PIL import Image
    a = (np.arange(shape[0] * shape[1]) % 97 + 20).astype(np.uint8).reshape(shape)
    src = tmp / "in.png"
    palette = opts == ["--palette-wide"]
    (Image.fromarray(a).convert("P") if palette else Image.fromarray(a)).save(src)
    out = tmp / "out.png"
    run_ok(["--input", src, "--output", out] + ([] if palette else opts))
    got = np.asarray(Image.open(out).convert("L") if palette else Image.open(out))
    want = ref.equalize_one(np.asarray(Image.open(src).convert("L")) if palette else a, 8)
    assert got.shape == shape and (palette or np.array_equal(got, want))
