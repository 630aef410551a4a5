"""Write paths: uncompressed datasets written through shared mappings of OUT.part (io/mapped_write.h,
chosen when several ranks of a host write one file) and through HDF5 (staged one chunk a pwrite)
give the same bytes, equal to the reference, for chunked stacks with partial edge chunks and 2-D
tiles, chunks that cut the colour channels, contiguous images cut into pieces of rows, 16-bit
samples, a big-endian dataset (which the mapped path must leave to HDF5) and a compressed one
(always HDF5's, collectively). Verbose mode says which path a run took, and why."""
import h5py
import numpy as np
import pytest

import reference as ref
from helpers import assert_array_equal, equalize

MAPPED = "go through shared mappings"


def inputs(tmp):
    """(path, options, {dataset: expected}, datasets that may be mapped)."""
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


@pytest.mark.parametrize("path,np_", [("hdf5", 1), ("hdf5", 3), ("mapped", 1), ("mapped", 3), ("auto", 1), ("auto", 2)])
def test_write_paths_give_the_reference(tmp, path, np_):
    inp, opts, want = inputs(tmp)
    out = tmp / "out.h5"
    env = {"HQ_WRITE_PATH": path, "HQ_STORE_THREADS": "3"}
    r = equalize(inp, out, *opts, "-v", np_=np_, env=env)
    mapped = path == "mapped" or (path == "auto" and np_ > 1)
    assert (MAPPED in r.err) == mapped, r
    if not mapped:
        assert "written through HDF5" in r.err, r
    if path == "auto" and np_ == 1:
        assert "one writer on this host" in r.err, r
    with h5py.File(out, "r") as f:
        for name, w in want.items():
            assert_array_equal(f[name][()].astype(w.dtype), w, f"{path}, {np_} ranks: {name}")
        assert f["be"].dtype == np.dtype(">u2")
        assert f["gz"].compression == "gzip"
        assert f["rgb"].chunks == (32, 40, 1)
