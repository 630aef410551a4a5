"""Rank and thread invariance: mpirun -np 1..4 and --threads 1 / 2 give byte-identical outputs,
which also equal the reference. Small --block / --memory force several blocks per rank and the
path where blocks are dropped after pass 1 and read again for pass 2."""
import os
import subprocess

import h5py
import numpy as np
import pytest

import pngio
import reference as ref
from helpers import BIN, assert_array_equal, assert_same_output, equalize, file_hash, read_png, run_ok

RANKS = [1, 2, 3, 4]


def across_ranks(tmp, inp, suffix, *opts):
    outs = []
    for n in RANKS:
        out = tmp / f"out_np{n}{suffix}"
        equalize(inp, out, *opts, np_=n)
        outs.append(out)
    # The MPI singleton (no mpirun) too.
    out = tmp / f"out_single{suffix}"
    equalize(inp, out, *opts)
    outs.append(out)
    for o in outs[1:]:
        assert_same_output(str(outs[0]), str(o))
    return outs[0]


def test_hdf5_stack(tmp):
    stack = ref.stack_of(9, 60, 70, 700, 1500, np.uint16, seed=60)
    stack[2, 5, 5] = 50000  # clamped with --bits 12
    inp = tmp / "in.h5"
    with h5py.File(inp, "w") as f:
        f.create_dataset("scans/ct", data=stack, chunks=(1, 30, 70), compression="gzip")
    out = across_ranks(tmp, inp, ".h5", "--bits", "12", "--block", "16K", "--memory", "40K")
    with h5py.File(out, "r") as f:
        assert_array_equal(f["scans/ct"][()], ref.equalize_stack(stack, 12)[0], "stack")


def test_hdf5_single_image_row_bands(tmp):
    img = ref.low_contrast(1000, 777, 20000, 23000, np.uint16, seed=61)
    inp = tmp / "in.h5"
    with h5py.File(inp, "w") as f:
        f.create_dataset("big", data=img)
    out = across_ranks(tmp, inp, ".h5", "--block", "64K", "--memory", "100K")
    with h5py.File(out, "r") as f:
        assert_array_equal(f["big"][()], ref.equalize_one(img, 16), "1000x777 row bands")


def test_hdf5_single_image_chunked(tmp):
    img = ref.low_contrast_rgb(301, 203, 40, 90, np.uint8, seed=62)
    inp = tmp / "in.h5"
    with h5py.File(inp, "w") as f:
        f.create_dataset("rgb", data=img, chunks=(64, 64, 3), compression="gzip")
    out = across_ranks(tmp, inp, ".h5", "--block", "32K", "--color", "value")
    with h5py.File(out, "r") as f:
        assert_array_equal(f["rgb"][()], ref.equalize_one(img, 8, "value"), "chunked RGB row bands")


def test_hdf5_global_scope(tmp):
    a = ref.stack_of(5, 40, 50, 30, 90, np.uint8, seed=63, rgb=True)
    b = ref.low_contrast_rgb(70, 30, 100, 200, np.uint8, seed=64)
    inp = tmp / "in.h5"
    with h5py.File(inp, "w") as f:
        f.create_dataset("a", data=a)
        f.create_dataset("g/b", data=b)
    out = across_ranks(tmp, inp, ".h5", "--scope", "global", "--color", "channels", "--block", "8K")
    want, gh = ref.equalize_images(list(a) + [b], 8, "channels", scope="global")
    with h5py.File(out, "r") as f:
        assert_array_equal(f["a"][()], np.stack(want[:5]), "/a global")
        assert_array_equal(f["g/b"][()], want[5], "/g/b global")
        assert_array_equal(f["histeq_dist/global_histogram"][()], gh, "global histograms")


def test_hdf5_compressed_collection(tmp):
    """Several compressed datasets, each owned by one rank: parallel HDF5 compresses chunks only in
    collective writes, so these must go through the lockstep path even though no item is shared."""
    stacks = {f"d{k}": ref.stack_of(3, 40, 32, 100, 130, np.uint8, seed=70 + k) for k in range(5)}
    inp = tmp / "in.h5"
    with h5py.File(inp, "w") as f:
        for name, st in stacks.items():
            f.create_dataset(name, data=st, chunks=(1, 20, 32), compression="gzip", shuffle=True)
    out = across_ranks(tmp, inp, ".h5")
    with h5py.File(out, "r") as f:
        for name, st in stacks.items():
            assert f[name].compression == "gzip" and f[name].shuffle
            assert_array_equal(f[name][()], ref.equalize_stack(st, 8)[0], name)


def test_png_directory(tmp):
    d = tmp / "in"
    os.makedirs(d)
    want = {}
    for i in range(6):
        if i % 3 == 2:
            im = ref.low_contrast_rgb(30 + i, 40, 50, 120, np.uint8, 70 + i)
            pngio.write(d / f"p{i}.png", im, 8, pngio.RGB)
        elif i % 3 == 1:
            im = ref.low_contrast(25, 31 + i, 9000, 9900, np.uint16, 70 + i)
            pngio.write(d / f"p{i}.png", im, 16, pngio.GRAY)
        else:
            im = ref.low_contrast(44, 20 + i, 70, 110, np.uint8, 70 + i)
            pngio.write(d / f"p{i}.png", im, 8, pngio.GRAY)
        want[f"p{i}.png"] = ref.equalize_one(im, 16 if i % 3 == 1 else 8)
    outs = []
    for n in RANKS:
        out = tmp / f"out_np{n}"
        equalize(d, out, "--block", "2K", np_=n)
        outs.append(out)
    for name, w in want.items():
        for o in outs:
            assert_array_equal(read_png(o / name).samples.reshape(w.shape), w, f"{o.name}/{name}")
        hashes = {file_hash(o / name) for o in outs}
        assert len(hashes) == 1, f"{name}: PNG file bytes differ across rank counts"


@pytest.mark.parametrize("kind", ["h5", "png"])
def test_threads(tmp, kind):
    if kind == "h5":
        img = ref.stack_of(2, 700, 500, 100, 140, np.uint8, seed=80)  # slices above 2^18 pixels
        inp = tmp / "in.h5"
        with h5py.File(inp, "w") as f:
            f.create_dataset("s", data=img)
    else:
        img = ref.low_contrast_rgb(200, 150, 10, 60, np.uint8, seed=81)
        inp = tmp / "in.png"
        pngio.write(inp, img, 8, pngio.RGB)
    ext = "." + kind
    for t in ("1", "2"):
        equalize(inp, tmp / f"t{t}{ext}", "--threads", t)
    assert_same_output(str(tmp / f"t1{ext}"), str(tmp / f"t2{ext}"))


def start_up(r):
    line = [ln for ln in r.err.splitlines() if "note: start-up:" in ln]
    assert len(line) == 1, str(r)
    return dict(kv.split("=", 1) for kv in line[0].split("start-up:")[1].split())


def test_start_up_settings_chosen_and_kept(tmp):
    """What the start-up sets for a short run on few cores (-v says it): OpenMP workers that sleep;
    for a lone process Open MPI without a daemon and hwloc without its search for I/O devices; for
    ranks hwloc without its OpenCL search, and ob1 where they share one node; what the user set
    stays as it was."""
    names = ("OMP_WAIT_POLICY", "OMPI_MCA_pml", "OMPI_MCA_ess_singleton_isolated", "HWLOC_COMPONENTS")
    if any(n in os.environ for n in names):
        pytest.skip("the environment sets these already")
    a = ref.low_contrast(64, 80, 10, 90, np.uint8, seed=85)
    inp = tmp / "in.h5"
    with h5py.File(inp, "w") as f:
        f.create_dataset("img", data=a)
    alone = start_up(run_ok(["-i", inp, "-o", tmp / "a.h5", "-v"]))
    assert alone == {"OMP_WAIT_POLICY": "passive", "OMPI_MCA_pml": "ob1", "OMPI_MCA_ess_singleton_isolated": "1",
                     "HWLOC_COMPONENTS": "-linuxio,-pci,-opencl,-cuda,-nvml,-rsmi,-levelzero,-gl"}
    two = start_up(run_ok(["-i", inp, "-o", tmp / "b.h5", "-v"], 2))
    assert two["OMP_WAIT_POLICY"] == "passive" and two["OMPI_MCA_pml"] == "ob1", two
    assert two["OMPI_MCA_ess_singleton_isolated"] == "(unset)" and two["HWLOC_COMPONENTS"] == "-opencl", two
    kept = start_up(run_ok(["-i", inp, "-o", tmp / "c.h5", "-v"], env={"OMP_WAIT_POLICY": "active",
                                                                      "OMPI_MCA_pml": "^ucx", "HWLOC_COMPONENTS": "-x86"}))
    assert kept["OMP_WAIT_POLICY"] == "active" and kept["OMPI_MCA_pml"] == "^ucx", kept
    assert kept["HWLOC_COMPONENTS"] == "-x86", kept
    for name in ("a.h5", "b.h5", "c.h5"):
        with h5py.File(tmp / name, "r") as f:
            assert_array_equal(f["img"][()], ref.equalize_one(a, 8), name)


def test_many_singletons_at_once(tmp):
    """Sixteen runs started at once, four times, without mpirun (a script over many files): each is an
    isolated MPI singleton, and all of them used to share one Open MPI session directory, where MPI-IO keeps
    a shared-file-pointer segment; one finishing removed it under the others (MPI_File_open failed
    in 1-8% of them on the 2-core VM). Every run must succeed, and nothing may stay behind in TMPDIR."""
    inp = tmp / "in.h5"
    with h5py.File(inp, "w") as f:
        f.create_dataset("img", data=ref.low_contrast(64, 80, 10, 90, np.uint8, seed=74))
    tmpdir = tmp / "tmpdir"
    tmpdir.mkdir()
    env = dict(os.environ, TMPDIR=str(tmpdir), OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    for k in ("OMPI_MCA_orte_tmpdir_base", "OMPI_MCA_ess_singleton_isolated"):
        env.pop(k, None)
    for _ in range(4):
        procs = [subprocess.Popen([BIN, "--input", str(inp), "--output", str(tmp / f"out{i}.h5"), "--force"], env=env,
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for i in range(16)]
        for i, p in enumerate(procs):
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0, f"run {i}: exit {p.returncode}\n{err}"
    for i in range(1, 16):
        assert_same_output(str(tmp / "out0.h5"), str(tmp / f"out{i}.h5"))
    assert os.listdir(tmpdir) == [], os.listdir(tmpdir)
