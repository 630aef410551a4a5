#!/usr/bin/python3
"""make_seeds.py — writes the fuzzers' seed corpus: small valid PNG and HDF5 files of every form
histeq_dist accepts, and damaged variants of them (truncated, flipped bytes, bad CRCs, huge or zero
dimensions), so that both the fuzzers and the replay start from files that reach deep into the
readers.

    /usr/bin/python3 fuzz/make_seeds.py [OUTDIR]      (default: fuzz/seeds)

Writes OUTDIR/png/*.png and OUTDIR/hdf5/*.h5. Deterministic (fixed random seed), so that running it
again changes nothing but what h5py itself writes differently between versions. The PNG writer is
our own (PIL cannot write 2/4-bit gray, 16-bit gray+alpha or Adam7 interlacing); HDF5 files come
from h5py, with the byte-level damage applied here.
"""
import os
import struct
import sys
import zlib

import numpy as np

SIG = b"\x89PNG\r\n\x1a\n"
GRAY, RGB, PALETTE, GRAY_ALPHA, RGBA = 0, 2, 3, 4, 6
CHANNELS = {GRAY: 1, RGB: 3, PALETTE: 1, GRAY_ALPHA: 2, RGBA: 4}
# Adam7: (first row, first column, row step, column step) of each pass.
ADAM7 = [(0, 0, 8, 8), (0, 4, 8, 8), (4, 0, 8, 4), (0, 2, 4, 4), (2, 0, 4, 2), (0, 1, 2, 2), (1, 0, 2, 1)]

rng = np.random.default_rng(20261121)


# ---- PNG -------------------------------------------------------------------------------------

def chunk(kind, data, crc=None):
    if crc is None:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)


def ihdr(w, h, depth, ctype, interlace=0):
    return chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, interlace))


def pack_row(samples, depth):
    """One row of sample values (1-D) -> bytes, big-endian, sub-byte samples packed MSB first."""
    if depth == 16:
        return samples.astype(">u2").tobytes()
    if depth == 8:
        return samples.astype(np.uint8).tobytes()
    per = 8 // depth
    out = bytearray(-(-len(samples) // per))
    for i, v in enumerate(samples):
        out[i // per] |= int(v) << (8 - depth * (i % per + 1))
    return bytes(out)


def filtered(rows, bpp, kind):
    """Rows of bytes -> the IDAT stream before zlib, every row with filter `kind` (0..4)."""
    raw = bytearray()
    prev = None
    for row in rows:
        up = prev if prev is not None else bytes(len(row))
        raw.append(kind)
        for i, x in enumerate(row):
            a = row[i - bpp] if i >= bpp else 0
            b = up[i]
            c = up[i - bpp] if i >= bpp else 0
            if kind == 0:
                pred = 0
            elif kind == 1:
                pred = a
            elif kind == 2:
                pred = b
            elif kind == 3:
                pred = (a + b) // 2
            else:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else b if pb <= pc else c
            raw.append((x - pred) & 0xFF)
        prev = row
    return bytes(raw)


def png_bytes(img, depth, ctype, palette=None, trns=None, interlace=0, filt=0, extra=b"", idat_split=0):
    """img: (H, W, C) sample values. Returns a complete PNG file."""
    h, w, c = img.shape
    bpp = max(1, c * depth // 8)
    if interlace:
        raw = b""
        for y0, x0, dy, dx in ADAM7:
            sub = img[y0::dy, x0::dx]
            if sub.shape[0] and sub.shape[1]:
                rows = [pack_row(sub[r].reshape(-1), depth) for r in range(sub.shape[0])]
                raw += filtered(rows, bpp, filt)
    else:
        rows = [pack_row(img[r].reshape(-1), depth) for r in range(h)]
        raw = filtered(rows, bpp, filt)
    out = SIG + ihdr(w, h, depth, ctype, interlace) + extra
    if palette is not None:
        out += chunk(b"PLTE", bytes(v for rgb in palette for v in rgb))
    if trns is not None:
        out += chunk(b"tRNS", trns)
    data = zlib.compress(raw, 9)
    if idat_split:
        for i in range(0, len(data), idat_split):
            out += chunk(b"IDAT", data[i : i + idat_split])
    else:
        out += chunk(b"IDAT", data)
    return out + chunk(b"IEND", b"")


def sample_img(h, w, c, depth):
    return rng.integers(0, 1 << depth, size=(h, w, c), dtype=np.uint32)


def valid_pngs():
    """name -> bytes. Small odd sizes, so that packing, padding and Adam7 passes all have work."""
    out = {}
    for depth in (1, 2, 4, 8, 16):
        out[f"gray{depth}"] = png_bytes(sample_img(7, 13, 1, depth), depth, GRAY, filt=depth % 5)
    for depth in (8, 16):
        out[f"gray_alpha{depth}"] = png_bytes(sample_img(6, 9, 2, depth), depth, GRAY_ALPHA, filt=4)
        out[f"rgb{depth}"] = png_bytes(sample_img(5, 11, 3, depth), depth, RGB, filt=3)
        out[f"rgba{depth}"] = png_bytes(sample_img(9, 6, 4, depth), depth, RGBA, filt=1)
    for depth in (1, 2, 4, 8):
        n = min(1 << depth, 40)
        pal = [tuple(int(v) for v in rng.integers(0, 256, 3)) for _ in range(n)]
        out[f"palette{depth}"] = png_bytes(sample_img(8, 10, 1, depth) % n, depth, PALETTE, palette=pal)
    pal = [tuple(int(v) for v in rng.integers(0, 256, 3)) for _ in range(16)]
    out["palette4_trns"] = png_bytes(sample_img(8, 10, 1, 4), 4, PALETTE, palette=pal, trns=bytes(range(0, 240, 30)))
    out["gray8_trns"] = png_bytes(sample_img(7, 7, 1, 8), 8, GRAY, trns=struct.pack(">H", 17))
    out["rgb16_trns"] = png_bytes(sample_img(4, 5, 3, 16), 16, RGB, trns=struct.pack(">HHH", 1, 2, 3))
    # Adam7: sizes below 8 leave some passes empty, which decoders get wrong most often.
    out["gray1_adam7"] = png_bytes(sample_img(9, 11, 1, 1), 1, GRAY, interlace=1)
    out["gray16_adam7"] = png_bytes(sample_img(3, 5, 1, 16), 16, GRAY, interlace=1, filt=2)
    out["rgb8_adam7"] = png_bytes(sample_img(10, 9, 3, 8), 8, RGB, interlace=1, filt=4)
    out["rgba16_adam7"] = png_bytes(sample_img(5, 3, 4, 16), 16, RGBA, interlace=1, filt=1)
    out["palette4_trns_adam7"] = png_bytes(sample_img(9, 9, 1, 4), 4, PALETTE, palette=pal,
                                           trns=bytes(range(0, 160, 20)), interlace=1)
    out["gray_alpha8_adam7_1x1"] = png_bytes(sample_img(1, 1, 2, 8), 8, GRAY_ALPHA, interlace=1)
    # Ancillary chunks before and after PLTE, and the image data split over many IDATs.
    text = chunk(b"tEXt", b"Comment\x00seed") + chunk(b"gAMA", struct.pack(">I", 45455))
    out["gray8_chunks_split"] = png_bytes(sample_img(12, 12, 1, 8), 8, GRAY, extra=text, idat_split=7)
    return out


def set_ihdr(png, w=None, h=None, depth=None, ctype=None, interlace=None, fix_crc=True):
    """A copy of png with IHDR fields replaced (and its CRC recomputed unless fix_crc is False)."""
    w0, h0, d0, c0, cm, fm, i0 = struct.unpack(">IIBBBBB", png[16:29])
    body = struct.pack(">IIBBBBB", w0 if w is None else w, h0 if h is None else h, d0 if depth is None else depth,
                       c0 if ctype is None else ctype, cm, fm, i0 if interlace is None else interlace)
    crc = zlib.crc32(b"IHDR" + body) & 0xFFFFFFFF if fix_crc else struct.unpack(">I", png[29:33])[0]
    return png[:16] + body + struct.pack(">I", crc) + png[33:]


def chunk_offsets(png):
    """[(kind, offset of the length field, payload length)]."""
    pos, out = 8, []
    while pos + 8 <= len(png):
        (n,) = struct.unpack(">I", png[pos : pos + 4])
        out.append((png[pos + 4 : pos + 8], pos, n))
        pos += 12 + n
    return out


def flip(data, offsets):
    b = bytearray(data)
    for o in offsets:
        b[o % len(b)] ^= 0xFF
    return bytes(b)


def damaged_pngs(v):
    out = {}
    g8, rgba16, pal4 = v["gray8"], v["rgba16"], v["palette4_trns"]
    out["trunc_sig"] = g8[:5]
    out["trunc_ihdr"] = g8[:20]
    out["trunc_after_ihdr"] = g8[:33]
    out["trunc_mid_idat"] = g8[: len(g8) // 2]
    out["trunc_no_iend"] = g8[:-12]
    out["trunc_adam7"] = v["rgb8_adam7"][: len(v["rgb8_adam7"]) * 2 // 3]
    idat = [c for c in chunk_offsets(g8) if c[0] == b"IDAT"][0]
    out["flip_idat"] = flip(g8, [idat[1] + 8 + 3, idat[1] + 8 + 9])
    out["flip_idat_fixed_crc"] = fix_crcs(flip(g8, [idat[1] + 8 + 5, idat[1] + 8 + 11]))
    out["bad_crc_ihdr"] = set_ihdr(g8, w=14, fix_crc=False)
    out["bad_crc_idat"] = flip(g8, [idat[1] + 8 + idat[2]])
    out["bad_crc_iend"] = flip(g8, [len(g8) - 1])
    big = (1 << 31) - 1
    out["huge_both_rgba16"] = set_ihdr(rgba16, w=big, h=big)
    out["huge_width_gray8"] = set_ihdr(g8, w=big)
    out["huge_height_gray1"] = set_ihdr(v["gray1"], h=big)
    out["huge_100k_palette"] = set_ihdr(pal4, w=100000, h=100000)
    out["huge_width_over_limit"] = set_ihdr(g8, w=1 << 31)
    out["huge_adam7"] = set_ihdr(v["rgb8_adam7"], w=50000, h=50000)
    out["zero_width"] = set_ihdr(g8, w=0)
    out["zero_height"] = set_ihdr(g8, h=0)
    out["zero_both_adam7"] = set_ihdr(v["gray16_adam7"], w=0, h=0)
    out["bad_depth"] = set_ihdr(g8, depth=3)
    out["bad_ctype"] = set_ihdr(g8, ctype=5)
    out["palette_depth16"] = set_ihdr(pal4, depth=16)
    out["bad_interlace"] = set_ihdr(g8, interlace=2)
    # A palette image without PLTE, one whose indices pass the palette's end, a tRNS too long.
    out["palette_no_plte"] = strip_chunk(pal4, b"PLTE")
    small_pal = [(255, 0, 0), (0, 255, 0)]
    out["palette_index_past_end"] = png_bytes(sample_img(6, 6, 1, 8), 8, PALETTE, palette=small_pal)
    out["palette_trns_too_long"] = png_bytes(sample_img(4, 4, 1, 2) % 2, 2, PALETTE, palette=small_pal,
                                             trns=bytes(range(9)))
    out["gray_trns_wrong_len"] = png_bytes(sample_img(4, 4, 1, 8), 8, GRAY, trns=b"\x00\x01\x02")
    # IDAT holding too few and too many rows' worth of data.
    out["idat_short"] = replace_idat(g8, zlib.compress(b"\x00" * 20))
    out["idat_long"] = replace_idat(g8, zlib.compress(b"\x00" * 14 * 40))
    out["idat_bad_filter"] = replace_idat(g8, zlib.compress(b"\x07" + b"\x00" * 13 + b"\x00" * 14 * 6))
    out["idat_not_zlib"] = replace_idat(g8, b"not zlib at all")
    out["huge_chunk_length"] = g8[:33] + struct.pack(">I", 0x7FFFFFF0) + b"tEXt" + b"x" * 16
    out["iccp_bomb"] = insert_after_ihdr(g8, chunk(b"iCCP", b"icc\x00\x00" + zlib.compress(b"\x00" * 2000000)))
    return out


def fix_crcs(png):
    b = bytearray(png)
    for kind, off, n in chunk_offsets(png):
        if off + 12 + n <= len(b):
            b[off + 8 + n : off + 12 + n] = struct.pack(">I", zlib.crc32(bytes(b[off + 4 : off + 8 + n])) & 0xFFFFFFFF)
    return bytes(b)


def strip_chunk(png, kind):
    out = png[:8]
    for k, off, n in chunk_offsets(png):
        if k != kind:
            out += png[off : off + 12 + n]
    return out


def replace_idat(png, data):
    out, done = png[:8], False
    for k, off, n in chunk_offsets(png):
        if k == b"IDAT":
            if not done:
                out += chunk(b"IDAT", data)
                done = True
        else:
            out += png[off : off + 12 + n]
    return out


def insert_after_ihdr(png, extra):
    return png[:33] + extra + png[33:]


# ---- HDF5 ------------------------------------------------------------------------------------

def write_h5(path, build, libver="earliest"):
    import h5py

    with h5py.File(path, "w", libver=libver) as f:
        build(f)


def valid_h5s(d):
    """Writes valid HDF5 seeds into directory d; returns their paths."""
    import h5py

    def img(shape, dt):
        top = 255 if dt == np.uint8 else 4095
        return rng.integers(0, top + 1, size=shape).astype(dt)

    specs = {
        "u8_2d_contig": lambda f: f.create_dataset("img", data=img((12, 10), np.uint8)),
        "u16_2d_contig": lambda f: f.create_dataset("img", data=img((9, 14), np.uint16)),
        "u16be_2d": lambda f: f.create_dataset("img", data=img((6, 7), np.uint16).astype(">u2")),
        "u8_3d_stack_chunked": lambda f: f.create_dataset("stack", data=img((4, 8, 9), np.uint8), chunks=(1, 4, 4)),
        "u16_3d_rgb": lambda f: f.create_dataset("rgb", data=img((7, 6, 3), np.uint16)),
        "u8_3d_rgba_chunked": lambda f: f.create_dataset("rgba", data=img((8, 8, 4), np.uint8), chunks=(4, 4, 4)),
        "u8_4d_rgb_deflate_shuffle": lambda f: f.create_dataset("s", data=img((3, 6, 5, 3), np.uint8), chunks=(1, 3, 5, 3),
                                                                compression="gzip", compression_opts=4, shuffle=True),
        "u16_4d_c1_deflate": lambda f: f.create_dataset("s", data=img((2, 5, 6, 1), np.uint16), chunks=(1, 5, 6, 1),
                                                        compression="gzip"),
        "u16_3d_deflate_fletcher": lambda f: f.create_dataset("s", data=img((3, 8, 8), np.uint16), chunks=(2, 4, 8),
                                                              compression="gzip", fletcher32=True),
        "u8_compact": lambda f: compact(f, img((5, 5), np.uint8)),
        "u8_unallocated_fill": lambda f: f.create_dataset("empty", shape=(6, 6), dtype=np.uint8, fillvalue=7),
        "u16_chunked_partial": lambda f: partial_chunks(f, img),
        "mixed_groups_attrs": lambda f: mixed(f, img),
        "u8_scaleoffset": lambda f: f.create_dataset("so", data=img((8, 8), np.uint8), chunks=(4, 4), scaleoffset=0),
    }
    paths = []
    for name, build in specs.items():
        p = os.path.join(d, name + ".h5")
        write_h5(p, build)
        paths.append(p)
    # The newest file format (superblock v2, version-2 object headers, fractal heaps, new chunk indexes).
    for name, build in [("latest_u8_2d", specs["u8_2d_contig"]), ("latest_4d_deflate", specs["u8_4d_rgb_deflate_shuffle"]),
                        ("latest_mixed", specs["mixed_groups_attrs"]), ("latest_u16_chunked_partial", specs["u16_chunked_partial"])]:
        p = os.path.join(d, name + ".h5")
        write_h5(p, build, libver="latest")
        paths.append(p)
    # A user block: the superblock sits at 512.
    p = os.path.join(d, "userblock_u8.h5")
    with h5py.File(p, "w", userblock_size=512) as f:
        f.create_dataset("img", data=img((4, 4), np.uint8))
    paths.append(p)
    return paths


def compact(f, data):
    import h5py

    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_layout(h5py.h5d.COMPACT)
    space = h5py.h5s.create_simple(data.shape)
    ds = h5py.h5d.create(f.id, b"c", h5py.h5t.NATIVE_UINT8, space, dcpl=dcpl)
    ds.write(h5py.h5s.ALL, h5py.h5s.ALL, data)


def partial_chunks(f, img):
    # Resizable, chunked, some chunks never written (read as fill value), an edge chunk partly used.
    ds = f.create_dataset("grow", shape=(3, 10, 10), maxshape=(None, 10, 10), dtype=np.uint16, chunks=(1, 4, 4),
                          fillvalue=3)
    ds[0] = img((10, 10), np.uint16)
    ds[2, 5:, 5:] = img((5, 5), np.uint16)


def mixed(f, img):
    g = f.create_group("a/b")
    g.create_dataset("gray", data=img((5, 6), np.uint8))
    g["gray"].attrs["units"] = "counts"
    g["gray"].attrs["scale"] = np.arange(4, dtype=np.float32)
    g["gray"].attrs["vstr"] = np.array(["x", "yy"], dtype=object)
    f.create_dataset("float", data=np.ones((4, 4), np.float32))
    f.create_dataset("int16", data=np.ones((4, 4), np.int16))
    f.create_dataset("vector", data=np.arange(10, dtype=np.uint8))
    f.create_dataset("five_d", data=np.zeros((1, 1, 2, 2, 1), np.uint8))
    f.create_dataset("wide4d", data=np.zeros((1, 2, 2, 6), np.uint8))
    f.create_dataset("scalar", data=np.uint8(3))
    f.create_dataset("text", data="hello")
    f["hard_link"] = g["gray"]
    f["soft"] = __import__("h5py").SoftLink("/a/b/gray")
    f["dangling"] = __import__("h5py").SoftLink("/nowhere")
    f.attrs["histeq_dist_version"] = "0.1.0"
    f.create_dataset("histeq_dist/global_histogram", data=np.arange(256, dtype=np.uint64))


def h5_special(d):
    """Valid-format files whose shapes are hostile: zero, huge, and sizes that overflow 64 bits."""
    import h5py

    out = []

    def mk(name, shape, dt, chunks):
        p = os.path.join(d, name + ".h5")
        with h5py.File(p, "w") as f:
            f.create_dataset("x", shape=shape, dtype=dt, chunks=chunks, maxshape=tuple(None for _ in shape))
        out.append(p)

    mk("zero_rows", (0, 5), np.uint8, (1, 5))
    mk("zero_slices", (0, 4, 4), np.uint16, (1, 4, 4))
    mk("huge_2d_unallocated", (1 << 40, 1 << 40), np.uint8, (1, 1024))
    mk("huge_rows_narrow", (1 << 50, 1), np.uint16, (1024, 1))
    # slices*height*width*channels*bytes = 2^64 + small: wraps around in 64-bit arithmetic.
    mk("overflow_4d_rgba16", (1, 1073807362, 2147352580, 4), np.uint16, (1, 1, 1024, 4))
    mk("overflow_stack_u8", (1 << 24, 1 << 20, 1 << 20), np.uint8, (1, 1, 1024))
    return out


def float_signed_h5s(d):
    """Float and signed seeds (their own random stream, so the older seeds stay as they were):
    float32/float64 stacks with NaN and a scale-offset float filter, big-endian float64, int8 and
    int16 with a scale-offset integer filter, and one float dataset holding an infinity."""
    frng = np.random.default_rng(20261125)

    def fimg(shape, dt):
        a = (frng.normal(size=shape) * 100).astype(dt)
        a.flat[::7] = np.nan
        return a

    specs = {
        "f32_3d_deflate_nan": lambda f: f.create_dataset("s", data=fimg((3, 8, 9), np.float32), chunks=(1, 4, 9),
                                                         compression="gzip", shuffle=True),
        "f64be_2d": lambda f: f.create_dataset("img", data=fimg((7, 6), np.float64).astype(">f8")),
        "f32_scaleoffset": lambda f: f.create_dataset("so", data=np.nan_to_num(fimg((8, 8), np.float32)),
                                                      chunks=(4, 4), scaleoffset=2),
        "f32_inf": lambda f: f.create_dataset("inf", data=np.array([[1, np.inf], [np.nan, -np.inf]], np.float32)),
        "i16_3d_scaleoffset": lambda f: f.create_dataset("ct", data=frng.integers(-1024, 3071, size=(2, 8, 8))
                                                         .astype(np.int16), chunks=(1, 4, 4), scaleoffset=0),
        "i8_2d": lambda f: f.create_dataset("img", data=frng.integers(-128, 128, size=(5, 6)).astype(np.int8)),
    }
    paths = []
    for name, build in specs.items():
        p = os.path.join(d, name + ".h5")
        write_h5(p, build)
        paths.append(p)
    return paths


def damaged_h5(paths):
    """name -> bytes: truncations and byte flips of valid files."""
    out = {}
    for p in paths:
        base = os.path.splitext(os.path.basename(p))[0]
        data = open(p, "rb").read()
        n = len(data)
        out[f"{base}_trunc_half"] = data[: n // 2]
        out[f"{base}_trunc_tail"] = data[: n - 64]
        offs = sorted(int(x) for x in rng.integers(0, n, 4))
        out[f"{base}_flip4"] = flip(data, offs)
    return out


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "seeds")
    pdir, hdir = os.path.join(root, "png"), os.path.join(root, "hdf5")
    os.makedirs(pdir, exist_ok=True)
    os.makedirs(hdir, exist_ok=True)
    v = valid_pngs()
    for name, data in list(v.items()) + [("dmg_" + k, b) for k, b in damaged_pngs(v).items()]:
        with open(os.path.join(pdir, name + ".png"), "wb") as f:
            f.write(data)
    good = valid_h5s(hdir)
    h5_special(hdir)
    picked = [p for p in good if os.path.basename(p).startswith(("u8_2d", "u8_3d_stack", "u8_4d", "latest_mixed",
                                                                 "latest_4d", "u16_chunked", "userblock"))]
    for name, data in damaged_h5(picked).items():
        with open(os.path.join(hdir, "dmg_" + name + ".h5"), "wb") as f:
            f.write(data)
    float_signed_h5s(hdir)
    print(f"{len(os.listdir(pdir))} PNG and {len(os.listdir(hdir))} HDF5 seeds in {root}")


if __name__ == "__main__":
    main()
