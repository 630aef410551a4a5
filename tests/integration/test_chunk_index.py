"""The one-pass chunk table (io/hdf5/chunk_index.c): every chunk's address, size and filter mask read
in one walk of the chunk index instead of one H5Dget_chunk_info_by_coord call per chunk (each of which
walks the whole index in HDF5 1.10.8). Outputs must be the library path's (HQ_HDF5_DIRECT=0), byte
for byte, on datasets of many small chunks: chunks that do not divide the image, chunks never
written, gzip, stacks; files in the earliest format (v1 B-tree: the table) and in the latest
(implicit index: the table; fixed array, extensible array, v2 B-tree: HDF5's per-chunk calls for
small grids, HDF5's own reads for large ones); a file behind a user block; 1-3 ranks."""
import re

import h5py
import numpy as np
import pytest

import reference as ref
from helpers import assert_same_output, run_ok

ONE_PASS = re.compile(r"HDF5 chunk index read in one pass: (\d+) input datasets? \((\d+) chunks\), "
                      r"(\d+) output datasets? \((\d+) chunks\)")
DIRECT_NOTE = re.compile(r"HDF5 direct path: (\d+) of (\d+) blocks read, (\d+) of (\d+) written")


def earliest_file(p, userblock=0):
    """h5py's defaults: v1 B-tree chunk indexes. About 56,000 chunks over four datasets."""
    edge = ref.low_contrast(603, 701, 20, 90, np.uint8, seed=201)
    sparse = ref.low_contrast(400, 400, 300, 900, np.uint16, seed=202)
    gz = ref.low_contrast(500, 520, 10, 70, np.uint8, seed=203)
    stack = ref.stack_of(2, 200, 210, 900, 1400, np.uint16, seed=204)
    kw = {"userblock_size": userblock} if userblock else {}
    with h5py.File(p, "w", **kw) as f:
        f.create_dataset("edge", data=edge, chunks=(4, 4))  # 151 x 176 chunks, the last ones partial
        d = f.create_dataset("sparse", shape=sparse.shape, dtype=np.uint16, chunks=(4, 4), fillvalue=7)
        d[0:200, 0:150] = sparse[0:200, 0:150]  # the rest of its 10,000 chunks never written
        d[301:398, 322:400] = sparse[301:398, 322:400]  # chunks written in part: HDF5 filled the rest
        f.create_dataset("gz", data=gz, chunks=(4, 4), compression="gzip", compression_opts=1)
        f.create_dataset("stack", data=stack, chunks=(1, 5, 5))


def latest_file(p):
    """The 1.10 format (libver='latest' of HDF5 1.10): fixed arrays (fixed shape), an extensible
    array (one unlimited dimension), a v2 B-tree (two), and the implicit index (early allocation, no
    filters, fixed shape). Pinned to v110: an h5py built on HDF5 1.14 (the GPU machines') would
    otherwise write its own layout messages, which the 1.10 library refuses."""
    small = ref.low_contrast(300, 300, 20, 90, np.uint8, seed=211)
    big = ref.low_contrast(250, 320, 20, 90, np.uint8, seed=212)  # 4,960 chunks: past the per-chunk limit
    ext = ref.low_contrast(200, 300, 300, 900, np.uint16, seed=213)
    bt2 = ref.low_contrast(150, 170, 20, 90, np.uint8, seed=214)
    imp = ref.low_contrast(600, 641, 20, 90, np.uint8, seed=215)  # 150 x 161 chunks
    with h5py.File(p, "w", libver=("v110", "v110")) as f:
        f.create_dataset("farray", data=small, chunks=(8, 8))
        f.create_dataset("farray_big", data=big, chunks=(4, 4))
        f.create_dataset("farray_gz", data=small, chunks=(8, 8), compression="gzip")
        f.create_dataset("earray", data=ext, chunks=(8, 8), maxshape=(None, 300))
        f.create_dataset("bt2", data=bt2, chunks=(8, 8), maxshape=(None, None))
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_chunk((4, 4))
        dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_EARLY)
        space = h5py.h5s.create_simple(imp.shape)
        h5py.h5d.create(f.id, b"implicit", h5py.h5t.NATIVE_UINT8, space, dcpl=dcpl)
        f["implicit"][...] = imp
    with h5py.File(p, "r") as f:  # the layouts the test means
        assert f["implicit"].id.get_chunk_info(0).byte_offset is not None


def stored_chunks(path, filtered):
    """{dataset: bytes of every stored chunk, in grid order} (read_direct_chunk: one index lookup each,
    no walk), or the contiguous bytes; compressed datasets only with `filtered`."""
    out = {}
    with h5py.File(path, "r") as f:

        def visit(name, d):
            if not isinstance(d, h5py.Dataset) or name.startswith("histeq_dist"):
                return
            if d.compression and not filtered:
                return
            if d.chunks is None:
                out[name] = [d[()].tobytes()]
                return
            grid = [range(0, s, c) for s, c in zip(d.shape, d.chunks)]
            chunks = []
            for off in np.ndindex(*[len(g) for g in grid]):
                coord = tuple(g[i] for g, i in zip(grid, off))
                try:
                    chunks.append(d.id.read_direct_chunk(coord))
                except Exception:  # not allocated
                    chunks.append(None)
            out[name] = chunks

        f.visititems(visit)
    return out


def equalize(inp, out, np_, direct, env=None):
    e = {"HQ_HDF5_DIRECT": "1" if direct else "0"}
    e.update(env or {})
    return run_ok(["--input", inp, "--output", out, "--device", "cpu", "--force", "-v", "--threads", 2], np_, env=e)


def one_pass(r):
    m = ONE_PASS.search(r.err)
    return tuple(int(x) for x in m.groups()) if m else (0, 0, 0, 0)


def same_as_library(tmp, inp, np_):
    lib, new = tmp / "lib.h5", tmp / "new.h5"
    equalize(inp, lib, np_, False)
    r = equalize(inp, new, np_, True)
    assert_same_output(str(new), str(lib))
    # One rank compresses with its own deflate (H5Dwrite_chunk): the same data, other bytes.
    a, b = stored_chunks(new, np_ > 1), stored_chunks(lib, np_ > 1)
    assert sorted(a) == sorted(b)
    for name in a:
        assert a[name] == b[name], f"{name}: stored chunks differ from the library path's"
    return r


@pytest.mark.parametrize("np_", [1, 2, 3])
def test_earliest_format_many_chunks_same_as_library(tmp, np_):
    inp = tmp / "many.h5"
    earliest_file(inp)
    r = same_as_library(tmp, inp, np_)
    n_in, c_in, n_out, c_out = one_pass(r)
    assert n_in >= 1 and c_in >= 10000, f"the input's chunk index was not read in one pass\n{r}"
    # edge, sparse and stack: unfiltered chunked outputs (gzip stays with H5Dwrite_chunk or HDF5)
    assert n_out == 3 and c_out == 151 * 176 + 100 * 100 + 2 * 40 * 42, r.err
    read, nread, wrote, nwrote = (int(x) for x in DIRECT_NOTE.search(r.err).groups())
    assert read > 0 and wrote > 0, r.err


@pytest.mark.parametrize("np_", [1, 3])
def test_latest_format_same_as_library(tmp, np_):
    inp = tmp / "latest.h5"
    latest_file(inp)
    r = same_as_library(tmp, inp, np_)
    n_in, c_in, _, _ = one_pass(r)
    assert n_in >= 1 and c_in >= 150 * 161 or np_ > 1, f"the implicit index was not read in one pass\n{r}"


@pytest.mark.parametrize("np_", [None, 2], ids=["single", "np2"])
def test_latest_format_large_grids_read_without_per_chunk_walks(tmp, np_):
    """32,768 chunks in a fixed array (and an extensible array, a v2 B-tree of 16,384 each): the
    check each read made before it (one H5Dget_chunk_info_by_coord a chunk, each a walk of the
    index) took 17 s at 16,384 chunks and minutes at 65,536. With no one-pass table and a grid past
    the per-chunk limit, the read is left to HDF5's own checks: the run takes about a second, and
    its output equals the earliest format's (the v1 B-tree, read through the table)."""
    a = ref.low_contrast(1024, 2048, 20, 90, np.uint8, seed=220)
    b = ref.low_contrast(1024, 1024, 300, 900, np.uint16, seed=221)
    for name, libver in (("latest", ("v110", "v110")), ("earliest", "earliest")):
        with h5py.File(tmp / f"{name}.h5", "w", libver=libver) as f:
            f.create_dataset("farray", data=a, chunks=(8, 8))
            f.create_dataset("earray", data=b, chunks=(8, 8), maxshape=(None, 1024))
            f.create_dataset("bt2", data=b[::-1], chunks=(8, 8), maxshape=(None, None))
    outs = {}
    for name in ("latest", "earliest"):
        outs[name] = tmp / f"out_{name}.h5"
        run_ok(["-i", tmp / f"{name}.h5", "-o", outs[name], "--device", "cpu", "-q"], np_, timeout=60)
    with h5py.File(outs["latest"], "r") as fl, h5py.File(outs["earliest"], "r") as fe:
        for k in ("farray", "earray", "bt2"):
            assert np.array_equal(fl[k][()], fe[k][()]), k
        assert np.array_equal(fl["farray"][()], ref.equalize_one(a, 8))


def test_user_block_same_as_library(tmp):
    """HDF5 gives chunk addresses relative to the base address (after the user block); pread needs
    them absolute."""
    inp = tmp / "ub.h5"
    earliest_file(inp, userblock=4096)
    r = same_as_library(tmp, inp, 2)
    read, nread, wrote, nwrote = (int(x) for x in DIRECT_NOTE.search(r.err).groups())
    assert read > 0, r.err


def test_damaged_index_falls_back(tmp):
    """A B-tree key whose chunk offset is not a multiple of the chunk shape: the table is refused,
    and the run does whatever the per-chunk path does, on either path alike."""
    inp = tmp / "bad.h5"
    img = ref.low_contrast(64, 64, 10, 60, np.uint8, seed=221)
    with h5py.File(inp, "w") as f:
        f.create_dataset("x", data=img, chunks=(8, 8))
    raw = bytearray(inp.read_bytes())
    at = raw.find(b"TREE")
    while at >= 0 and raw[at + 4] != 1:  # a raw-data chunk node
        at = raw.find(b"TREE", at + 1)
    assert at >= 0
    key = at + 24 + 32 + 8  # the second key: after the header, the first key (8 + 8 * 3 bytes), a child
    raw[key + 8:key + 16] = (9).to_bytes(8, "little")  # row offset 9: no chunk's
    inp.write_bytes(bytes(raw))
    from helpers import run
    outs = []
    for direct in ("0", "1"):
        r = run(["--input", inp, "--output", tmp / f"o{direct}.h5", "--device", "cpu", "--force", "-v"], 1,
                env={"HQ_HDF5_DIRECT": direct})
        assert not r.timed_out, str(r)
        assert "chunk index read in one pass: 1 input" not in r.err, str(r)
        outs.append((r.rc, [l for l in r.hq_lines if "note" not in l and "rank 0 on" not in l]))
    assert outs[0][0] == outs[1][0], outs
