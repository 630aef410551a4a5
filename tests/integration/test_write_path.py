"""Chunked transfers: an uncompressed chunked dataset is read and written one chunk at a time
(io/hdf5_io.c by_chunk; HDF5 would issue one pwrite per chunk row), its blocks in chunk order
(io/io.h), or with HQ_BLOCK_ORDER=row in row order, packed through a dense buffer. The bytes must
equal the reference on 1 and 3 ranks for stacks with partial edge chunks cut into 2-D tiles,
chunks that cut the colour channels, contiguous images cut into pieces of rows, 16-bit samples,
a big-endian dataset and a compressed one (written collectively, never staged); the layout of
every dataset (type, chunks, filters) is kept."""
import json

import h5py
import numpy as np
import pytest

import reference as ref
from helpers import assert_array_equal, equalize


def inputs(tmp):
    """(path, options, {dataset: expected})."""
    p = tmp / "mixed.h5"
    stack = ref.stack_of(3, 203, 301, 900, 1400, np.uint16, seed=70)
    rgb = ref.low_contrast_rgb(150, 171, 40, 90, np.uint8, seed=71)
    wide = ref.low_contrast(90, 2000, 60, 120, np.uint8, seed=72)
    big_endian = ref.low_contrast(77, 91, 300, 900, np.uint16, seed=73)
    packed = ref.low_contrast(120, 130, 10, 60, np.uint8, seed=74)
    with h5py.File(p, "w") as f:
        f.create_dataset("stack", data=stack, chunks=(1, 64, 50))  # edge chunks are partial
        f.create_dataset("rgb", data=rgb, chunks=(32, 40, 1))  # a chunk holds one channel
        f.create_dataset("wide", data=wide)  # contiguous
        f.create_dataset("be", data=big_endian.astype(">u2"), chunks=(16, 16))
        f.create_dataset("gz", data=packed, chunks=(32, 32), compression="gzip")
    want = {
        "stack": ref.equalize_stack(stack, 16)[0],
        "rgb": ref.equalize_one(rgb, 8),
        "wide": ref.equalize_one(wide, 8),
        "be": ref.equalize_one(big_endian, 16),
        "gz": ref.equalize_one(packed, 8),
    }
    return p, ["--block", "12K"], want


@pytest.mark.parametrize("order", ["chunk", "row"])
@pytest.mark.parametrize("np_", [1, 3])
def test_chunked_transfers_give_the_reference(tmp, np_, order, monkeypatch):
    if order == "row":
        monkeypatch.setenv("HQ_BLOCK_ORDER", "row")
    inp, opts, want = inputs(tmp)
    out = tmp / "out.h5"
    equalize(inp, out, *opts, np_=np_)
    with h5py.File(out, "r") as f:
        for name, w in want.items():
            assert_array_equal(f[name][()].astype(w.dtype), w, f"{np_} ranks: {name}")
        assert f["be"].dtype == np.dtype(">u2")
        assert f["gz"].compression == "gzip"
        assert f["rgb"].chunks == (32, 40, 1)
        assert f["stack"].chunks == (1, 64, 50)


@pytest.mark.parametrize("scope", ["image", "global"])
@pytest.mark.parametrize("np_", [1, 3])
def test_blocks_read_in_place_equal_blocks_read(tmp, np_, scope):
    """Blocks of unfiltered chunked datasets of the native type are read in place (io.h
    map_block): mapped, not read; the GPU engine copies them from the mapping, the CPU engine
    gathers them. Edge chunks cut by the dataset and chunks bigger than a block are read as
    before. The output must be the reference, the same as with HQ_MAP_INPUT=0, and --summary must
    count blocks read in place only when mapping is on."""
    p = tmp / "in.h5"
    stack = ref.stack_of(5, 100, 96, 40, 200, np.uint8, seed=75)
    # Scope global needs one sample layout; scope image also tries 16-bit samples.
    deep = ref.stack_of(3, 64, 64, 900, 3000, np.uint16, seed=76) if scope == "image" else \
        ref.stack_of(3, 64, 64, 10, 90, np.uint8, seed=76)
    with h5py.File(p, "w") as f:
        f.create_dataset("stack", data=stack, chunks=(1, 32, 32))  # the last row of chunks is cut
        f.create_dataset("deep", data=deep, chunks=(1, 16, 64))
    if scope == "image":
        want = {"stack": ref.equalize_stack(stack, 8)[0], "deep": ref.equalize_stack(deep, 16)[0]}
    else:  # one histogram over every slice of both datasets
        outs = ref.equalize_images(list(stack) + list(deep), 8, "luma", "equalize", "global")[0]
        want = {"stack": np.stack(outs[:5]).astype(np.uint8), "deep": np.stack(outs[5:]).astype(np.uint8)}
    outs, counts = {}, {}
    for mapping in ["1", "0"]:
        out = tmp / f"out{mapping}.h5"
        summary = tmp / f"s{mapping}.json"
        equalize(p, out, "--block", "8K", "--scope", scope, "--summary", summary, np_=np_,
                 env={"HQ_MAP_INPUT": mapping})
        s = json.loads(summary.read_text())
        counts[mapping] = (s["blocks_read"], s["blocks_read_in_place"])
        with h5py.File(out, "r") as f:
            outs[mapping] = {name: f[name][()] for name in want}
    for name, w in want.items():
        assert_array_equal(outs["1"][name], w, f"{np_} ranks, scope {scope}: {name}")
        assert_array_equal(outs["0"][name], w, f"{np_} ranks, scope {scope}, HQ_MAP_INPUT=0: {name}")
    read, in_place = counts["1"]
    assert 0 < in_place < read, counts  # some in place, the cut edge chunks read
    assert counts["0"][1] == 0, counts
