"""An output disk that fills up mid-run: one clear line naming the output, exit 1, nothing marked
complete, nothing left under the final name, the input untouched. The disk is a small tmpfs
mounted by the test (root only; skipped where mounting is not allowed)."""
import os
import subprocess

import h5py
import numpy as np
import pytest

import reference as ref
import pngio
from helpers import run


@pytest.fixture
def small_disk(tmp):
    mnt = tmp / "disk"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mnt)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode().strip()}")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)])


@pytest.mark.parametrize("np_,compressed", [(None, False), (3, False), (3, True)])
def test_hdf5_output_disk_full(tmp, small_disk, np_, compressed):
    rng = np.random.default_rng(11)
    inp = tmp / "in.h5"
    with h5py.File(inp, "w") as f:
        data = rng.integers(0, 256, (40, 256, 256), dtype=np.uint8)  # 2.5 MiB, incompressible
        if compressed:
            f.create_dataset("s", data=np.concatenate([data, data]), chunks=(1, 256, 256), compression="gzip")
        else:
            f.create_dataset("s", data=np.concatenate([data, data]))
    before = inp.read_bytes()
    out = small_disk / "out.h5"
    r = run(["--input", inp, "--output", out, "--block", "256K"], np_)
    assert not r.timed_out, str(r)
    assert r.rc == 1, str(r)
    assert len(r.hq_lines) == 1 and str(out) in r.hq_lines[0], str(r)
    assert "space" in r.hq_lines[0] or "No space" in r.hq_lines[0], str(r)
    assert not out.exists() and not os.path.exists(str(out) + ".part")
    assert not os.path.exists(str(out) + ".journal")
    assert inp.read_bytes() == before


def test_png_directory_disk_full(tmp, small_disk):
    inp = tmp / "in"
    inp.mkdir()
    rng = np.random.default_rng(12)
    for k in range(30):  # 4.8 MB of output for a 3 MB disk
        pngio.write(str(inp / f"im{k:02d}.png"), rng.integers(0, 256, (400, 400), dtype=np.uint8), 8, pngio.GRAY, level=0)
    out = small_disk / "out"
    r = run(["--input", inp, "--output", out, "--png-level", "0"], 2)
    assert not r.timed_out and r.rc == 1, str(r)
    assert len(r.hq_lines) == 1 and str(out) in r.hq_lines[0], str(r)
    assert not (out / "histeq_dist.complete").exists()
    assert not out.exists() or not any(n.endswith(".png") for n in os.listdir(out))
