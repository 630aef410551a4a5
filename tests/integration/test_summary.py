"""--summary FILE: the end-of-run summary as JSON, with counts that match the run, written once by
rank 0; an unwritable summary path is an I/O error (exit 1) named in one line."""
import json

import h5py
import numpy as np
import pytest

import reference as ref
from helpers import DEVICES, run, run_ok


@pytest.mark.parametrize("np_", [None, 3], ids=["single", "np3"])
def test_summary_json(tmp, np_):
    stack = ref.stack_of(5, 30, 40, 60, 90, np.uint8, seed=90)
    inp = tmp / "in.h5"
    with h5py.File(inp, "w") as f:
        f.create_dataset("s", data=stack)
    summ = tmp / "run.json"
    run_ok(["--input", inp, "--output", tmp / "out.h5", "--device", DEVICES[0], "--summary", summ, "-q"], np_)
    s = json.loads(summ.read_text())
    assert s["images"] == 5 and s["pixels"] == 5 * 30 * 40 and s["bytes"] == 5 * 30 * 40
    assert s["ranks"] == (np_ or 1) and s["skipped"] == 0 and s["scope"] == "image"
    assert s["input"] == str(inp) and s["output"] == str(tmp / "out.h5")
    assert set(s["phases"]) == {"create", "read", "histogram", "allreduce", "remap", "write", "close"}
    assert all(p["max_s"] >= p["mean_s"] >= 0 for p in s["phases"].values())
    assert not (tmp / "run.json.part").exists()


def test_summary_unwritable(tmp):
    stack = ref.stack_of(2, 10, 10, 60, 90, np.uint8, seed=91)
    inp = tmp / "in.h5"
    with h5py.File(inp, "w") as f:
        f.create_dataset("s", data=stack)
    r = run(["--input", inp, "--output", tmp / "out.h5", "--device", DEVICES[0], "--summary", "/proc/x/run.json"])
    assert r.rc == 1 and len(r.err_lines) == 1 and "/proc/x/run.json" in r.err_lines[0], str(r)
