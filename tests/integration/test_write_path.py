"""Chunked transfers: an uncompressed chunked dataset is read and written one chunk at a time
(io/hdf5/blocks.c by_chunk; HDF5 would issue one pwrite per chunk row), its blocks in chunk order
(io/io.h), or with HQ_BLOCK_ORDER=row in row order, packed through a dense buffer. The bytes must
equal the reference on 1 and 3 ranks for stacks with partial edge chunks cut into 2-D tiles,
chunks that cut the colour channels, contiguous images cut into pieces of rows, 16-bit samples,
a big-endian dataset and a compressed one (written collectively, never staged); the layout of
every dataset (type, chunks, filters) is kept."""
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
