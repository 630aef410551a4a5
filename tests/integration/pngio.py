"""pngio.py — a small, independent PNG writer and reader for the tests.

PIL cannot write 16-bit RGB(A) or 16-bit gray+alpha, and it widens low bit depths when reading,
so the tests write and read PNGs here, at the sample level: any colour type, bit depths 1..16,
palettes with tRNS, every row filter (the reader), CRCs checked. Non-interlaced only.
"""
import struct
import zlib

import numpy as np

SIG = b"\x89PNG\r\n\x1a\n"
GRAY, RGB, PALETTE, GRAY_ALPHA, RGBA = 0, 2, 3, 4, 6
CHANNELS = {GRAY: 1, RGB: 3, PALETTE: 1, GRAY_ALPHA: 2, RGBA: 4}


def _chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def _pack_rows(samples, depth):
    """samples: (H, W*C) unsigned ints -> list of row byte strings (without filter byte)."""
    h, n = samples.shape
    if depth == 16:
        return [samples[r].astype(">u2").tobytes() for r in range(h)]
    if depth == 8:
        return [samples[r].astype(np.uint8).tobytes() for r in range(h)]
    per = 8 // depth
    padded = np.zeros((h, -(-n // per) * per), dtype=np.uint16)
    padded[:, :n] = samples
    padded = padded.reshape(h, -1, per)
    packed = np.zeros(padded.shape[:2], dtype=np.uint16)
    for k in range(per):
        packed |= padded[:, :, k] << (8 - depth * (k + 1))
    return [packed[r].astype(np.uint8).tobytes() for r in range(h)]


def encode(samples, depth, color_type, palette=None, trns=None, level=6, filter_type=0):
    """samples: (H, W) or (H, W, C) array of sample values (palette: indices).
    palette: list of (r, g, b); trns: list of alpha values for the first palette entries."""
    a = np.asarray(samples)
    if a.ndim == 2:
        a = a[:, :, None]
    h, w, c = a.shape
    assert c == CHANNELS[color_type], (c, color_type)
    assert a.max(initial=0) < (1 << depth)
    rows = _pack_rows(a.reshape(h, w * c).astype(np.uint32), depth)
    raw = bytearray()
    bpp = max(1, c * depth // 8)
    prev = bytes(len(rows[0])) if rows else b""
    for row in rows:
        raw.append(filter_type)
        if filter_type == 0:
            raw += row
        elif filter_type == 1:
            raw += bytes((row[i] - (row[i - bpp] if i >= bpp else 0)) & 0xFF for i in range(len(row)))
        elif filter_type == 2:
            raw += bytes((row[i] - prev[i]) & 0xFF for i in range(len(row)))
        else:
            raise ValueError("encode supports filters 0, 1, 2")
        prev = row
    out = SIG + _chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, color_type, 0, 0, 0))
    if palette is not None:
        out += _chunk(b"PLTE", bytes(int(v) for rgb in palette for v in rgb))
    if trns is not None:
        out += _chunk(b"tRNS", bytes(int(v) for v in trns))
    data = zlib.compress(bytes(raw), level)
    # Several IDAT chunks, as real encoders write them.
    for i in range(0, len(data), 8192):
        out += _chunk(b"IDAT", data[i : i + 8192])
    if not data:
        out += _chunk(b"IDAT", data)
    out += _chunk(b"IEND", b"")
    return out


def write(path, samples, depth, color_type, **kw):
    with open(path, "wb") as f:
        f.write(encode(samples, depth, color_type, **kw))


def chunks(data):
    """[(kind, payload, offset_of_payload)], checking CRCs."""
    assert data[:8] == SIG, "not a PNG signature"
    pos, out = 8, []
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        payload = data[pos + 8 : pos + 8 + n]
        (crc,) = struct.unpack(">I", data[pos + 8 + n : pos + 12 + n])
        assert crc == zlib.crc32(kind + payload) & 0xFFFFFFFF, f"bad CRC in {kind!r}"
        out.append((kind, payload, pos + 8))
        pos += 12 + n
        if kind == b"IEND":
            break
    return out


def _paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def _unfilter(raw, h, stride, bpp):
    out = np.zeros((h, stride), dtype=np.uint8)
    prev = np.zeros(stride, dtype=np.int64)
    pos = 0
    for r in range(h):
        ft = raw[pos]
        line = np.frombuffer(raw, dtype=np.uint8, count=stride, offset=pos + 1).astype(np.int64)
        pos += 1 + stride
        if ft == 0:
            cur = line
        elif ft == 2:
            cur = (line + prev) & 0xFF
        elif ft in (1, 3, 4):
            cur = line.copy()
            for i in range(stride):
                a = int(cur[i - bpp]) if i >= bpp else 0
                b = int(prev[i])
                c = int(prev[i - bpp]) if i >= bpp else 0
                if ft == 1:
                    pred = a
                elif ft == 3:
                    pred = (a + b) >> 1
                else:
                    pred = _paeth(a, b, c)
                cur[i] = (cur[i] + pred) & 0xFF
        else:
            raise AssertionError(f"unknown PNG filter type {ft}")
        out[r] = cur
        prev = cur
    return out


class Png:
    """A decoded PNG: .samples (H, W, C) raw samples (palette: indices), .depth, .color_type,
    .palette (N, 3) or None, .trns bytes or None, .width, .height."""

    def rgb(self):
        """Samples with the palette expanded (RGB, or RGBA when a tRNS chunk is present)."""
        if self.color_type != PALETTE:
            return self.samples
        idx = self.samples[:, :, 0]
        rgb = self.palette[idx]
        if self.trns is None:
            return rgb
        alpha = np.full(len(self.palette), 255, dtype=np.uint16)
        alpha[: len(self.trns)] = np.frombuffer(self.trns, dtype=np.uint8)
        return np.concatenate([rgb, alpha[idx][:, :, None]], axis=2)


def decode(data):
    cs = chunks(data)
    assert cs[0][0] == b"IHDR", "first chunk is not IHDR"
    w, h, depth, ct, comp, filt, interlace = struct.unpack(">IIBBBBB", cs[0][1])
    assert interlace == 0, "interlaced PNGs are not handled by this reader"
    c = CHANNELS[ct]
    idat = b"".join(p for k, p, _ in cs if k == b"IDAT")
    raw = zlib.decompress(idat)
    stride = (w * c * depth + 7) // 8
    assert len(raw) == h * (1 + stride), "IDAT size does not match the header"
    rows = _unfilter(raw, h, stride, max(1, c * depth // 8))
    if depth == 16:
        s = rows.view(">u2").astype(np.uint16)[:, : w * c]
    elif depth == 8:
        s = rows.astype(np.uint8)[:, : w * c]
    else:
        per = 8 // depth
        bits = np.zeros((h, stride * per), dtype=np.uint8)
        for k in range(per):
            bits[:, k::per] = (rows >> (8 - depth * (k + 1))) & ((1 << depth) - 1)
        s = bits[:, : w * c]
    p = Png()
    p.width, p.height, p.depth, p.color_type = w, h, depth, ct
    p.samples = s.reshape(h, w, c)
    p.palette = None
    p.trns = None
    for k, payload, _ in cs:
        if k == b"PLTE":
            p.palette = np.frombuffer(payload, dtype=np.uint8).reshape(-1, 3).astype(np.uint16)
        elif k == b"tRNS":
            p.trns = payload
    return p


def read(path):
    with open(path, "rb") as f:
        return decode(f.read())


def idat_offsets(data):
    """(offset, length) of each IDAT payload in the file bytes, for corrupting tests."""
    return [(off, len(p)) for k, p, off in chunks(data) if k == b"IDAT"]
