"""I/O threads (--io-threads) and where a rank runs: a PNG collection decoded and encoded several at
a time gives the same files as one at a time, for any thread count and 1-3 ranks; skipped inputs
are listed in the same order; the pipeline's depth follows --io-threads and --memory; HDF5 keeps one
I/O thread whatever is asked; a launcher's one-core binding is widened to the rank's share of the
node (HQ_KEEP_BINDING=1 keeps it); --device auto leaves a GPU that ranks would share to the CPU
engine (checked where a GPU is)."""
import os
import re
import subprocess

import h5py
import numpy as np
import pytest

import pngio
import reference as ref
from helpers import DEVICES, MPIRUN_FLAGS, assert_array_equal, run, run_ok, tree_hash
from test_errors import flip_idat, good_png
from test_png import make_pngs

E_USAGE, E_SKIPPED = 2, 3
PLAN = re.compile(r"rank (\d+) on .*?: (.*?); \d+ blocks, \d+ pixels; (\d+) CPUs? ?(\(bound to (\d+)[^)]*\))?, "
                  r"(\d+) I/O threads?, (\d+) blocks in flight")


def collection(d, bad=()):
    """Every PNG kind of test_png, and 30 gray images of varied sizes (more than any pipeline's
    depth here), some of them (names in bad) with a corrupt image stream."""
    make_pngs(d)
    for i in range(30):
        name = f"z{i:02d}.png"
        if name in bad:
            good_png(d / name, shape=(40 + i, 50))
            flip_idat(str(d / name), fix_crc=True)
        else:
            pngio.write(d / name, ref.low_contrast(20 + 3 * i, 30 + 5 * (i % 7), 50, 120, np.uint8, 300 + i), 8,
                        pngio.GRAY)
    return d


def plans(r):
    return [m.groups() for m in PLAN.finditer(r.err)]


def test_png_same_for_any_io_threads_and_ranks(tmp):
    inp = collection(tmp / "in")
    want = tmp / "serial"
    run_ok(["--input", inp, "--output", want, "--device", DEVICES[0], "-q"], env={"HQ_SERIAL_IO": "1"})
    h = tree_hash(want)
    for np_ in (None, 2, 3):
        for t in (1, 2, 4):
            out = tmp / f"out_{np_}_{t}"
            r = run_ok(["--input", inp, "--output", out, "--device", DEVICES[0], "--io-threads", t, "-v"], np_)
            got = plans(r)
            assert len(got) == (np_ or 1) and all(int(p[5]) == t for p in got), f"want {t} I/O threads\n{r}"
            assert tree_hash(out) == h, f"--io-threads {t}, {np_ or 1} rank(s): output differs from one thread's"


def test_png_skipped_listed_alike(tmp):
    """Bad images met by several decoding threads are listed in the collection's order, as with one."""
    inp = collection(tmp / "in", bad={"z03.png", "z11.png", "z12.png", "z25.png"})
    lines = {}
    for t in (1, 4):
        out = tmp / f"out{t}"
        r = run(["--input", inp, "--output", out, "--device", DEVICES[0], "--on-error", "skip", "--io-threads", t])
        assert not r.timed_out and r.rc == E_SKIPPED, f"want exit 3\n{r}"
        lines[t] = [l for l in r.err_lines if "skipped" in l]
        assert len(lines[t]) == 4, str(r)
    assert lines[1] == lines[4]
    assert [re.search(r"z\d\d\.png", l).group(0) for l in lines[4]] == ["z03.png", "z11.png", "z12.png", "z25.png"]
    assert tree_hash(tmp / "out1") == tree_hash(tmp / "out4")


@pytest.mark.parametrize("value", ["0", "-2", "many", "5000"])
def test_io_threads_checked(tmp, value):
    r = run(["--input", tmp / "x.png", "--output", tmp / "y.png", "--io-threads", value])
    assert r.rc == E_USAGE and "--io-threads" in r.err, str(r)


def test_depth_follows_io_threads_and_memory(tmp):
    """Blocks in flight: --io-threads + 2, and no more than --memory holds (at least 3)."""
    d = tmp / "in"
    os.makedirs(d)
    for i in range(12):
        pngio.write(d / f"p{i:02d}.png", ref.low_contrast(100, 100, 40, 90, np.uint8, 400 + i), 8, pngio.GRAY)
    r = run_ok(["--input", d, "--output", tmp / "a", "--device", DEVICES[0], "--io-threads", "5", "-v"])
    assert [int(p[6]) for p in plans(r)] == [7], str(r)
    # Room for four 10,000-byte images: four in flight, whatever --io-threads asks.
    r = run_ok(["--input", d, "--output", tmp / "b", "--device", DEVICES[0], "--io-threads", "5", "-v",
                "--memory", "40000"])
    assert [int(p[6]) for p in plans(r)] == [4], str(r)
    r = run_ok(["--input", d, "--output", tmp / "c", "--device", DEVICES[0], "--io-threads", "5", "-v",
                "--memory", "30000"])
    assert [int(p[6]) for p in plans(r)] == [3], str(r)
    assert tree_hash(tmp / "a") == tree_hash(tmp / "b") == tree_hash(tmp / "c")


def test_hdf5_keeps_one_io_thread(tmp):
    a = ref.stack_of(9, 40, 50, 30, 90, np.uint8, 500)
    inp = tmp / "in.h5"
    with h5py.File(inp, "w") as f:
        f.create_dataset("s", data=a, chunks=(1, 40, 50))
    r = run_ok(["--input", inp, "--output", tmp / "out.h5", "--device", DEVICES[0], "--io-threads", "4", "-v",
                "--block", "4K"])
    got = plans(r)
    assert got and all(int(p[5]) == 1 and int(p[6]) == 3 for p in got), f"want one I/O thread, 3 in flight\n{r}"
    with h5py.File(tmp / "out.h5", "r") as f:
        assert_array_equal(f["s"][()], ref.equalize_stack(a, 8)[0], "s")


def launcher_binding():
    """CPUs a rank started by `mpirun -np 1` may use (None when it cannot be told)."""
    try:
        p = subprocess.run(["mpirun", "-np", "1"] + MPIRUN_FLAGS + ["grep", "Cpus_allowed_list", "/proc/self/status"],
                           capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1"))
        spec = p.stdout.split(":", 1)[1].strip()
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return None
    n = 0
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        n += int(hi or lo) - int(lo) + 1
    return n


def test_one_core_binding_widened(tmp):
    """mpirun binds one rank to one core: the rank widens it to the node (HQ_KEEP_BINDING=1: kept)."""
    bound, cpus = launcher_binding(), len(os.sched_getaffinity(0))
    if bound is None or bound >= cpus:
        pytest.skip(f"mpirun does not bind a single rank narrower than the node here ({bound} of {cpus} CPUs)")
    inp = collection(tmp / "in")
    r = run_ok(["--input", inp, "--output", tmp / "a", "--device", DEVICES[0], "-v"], 1)
    (p,) = plans(r)
    assert int(p[2]) == cpus and p[4] == str(bound) and int(p[5]) == cpus, f"want {cpus} CPUs, widened\n{r}"
    r = run_ok(["--input", inp, "--output", tmp / "b", "--device", DEVICES[0], "-v"], 1, env={"HQ_KEEP_BINDING": "1"})
    (p,) = plans(r)
    assert int(p[2]) == bound and p[3] is None, f"want the binding kept\n{r}"
    assert tree_hash(tmp / "a") == tree_hash(tmp / "b")


@pytest.mark.skipif("gpu" not in DEVICES, reason="needs a GPU (HQ_DEVICES with gpu)")
def test_auto_leaves_a_shared_gpu_to_the_cpu(tmp):
    """--device auto: one rank per GPU takes it; more ranks than GPUs take the CPU engine, said once.
    Images under 4 Mpixel on average go to the CPU engine too, faster for them (measured on an H200
    node: 64 x 64 to 1024 x 1024), said once; so does a share under 4 GiB, whose run is over before
    a GPU pays for its start (HQ_AUTO_GPU_MIN_SHARE=0 lifts that bar for the other cases)."""
    ngpu = int(subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout.count("GPU "))
    small = collection(tmp / "small")
    r = run_ok(["--input", small, "--output", tmp / "small_out", "--device", "auto", "-v"], 1)
    assert all(p[1].startswith("cpu") for p in plans(r)), str(r)
    assert sum("pixels on average: using the CPU engine" in l for l in r.err.splitlines()) == 1, str(r)
    inp = tmp / "in"
    inp.mkdir()
    for k in range(2):
        pngio.write(inp / f"big{k}.png", ref.low_contrast(2048, 2048, 50, 120, np.uint8, 400 + k), 8, pngio.GRAY)
    r = run_ok(["--input", inp, "--output", tmp / "little", "--device", "auto", "-v"], 1)
    assert plans(r)[0][1].startswith("cpu"), str(r)
    assert sum("MiB a rank at most: using the CPU engine" in l for l in r.err.splitlines()) == 1, str(r)
    anyshare = {"HQ_AUTO_GPU_MIN_SHARE": "0"}
    r = run_ok(["--input", inp, "--output", tmp / "one", "--device", "auto", "-v"], 1, env=anyshare)
    assert plans(r)[0][1].startswith("gpu"), str(r)
    r = run_ok(["--input", inp, "--output", tmp / "shared", "--device", "auto", "-v"], ngpu + 1, env=anyshare)
    assert all(p[1].startswith("cpu") for p in plans(r)), str(r)
    assert sum("using the CPU engine" in l for l in r.err.splitlines()) == 1, str(r)
    r = run_ok(["--input", inp, "--output", tmp / "forced", "--device", "gpu", "-v"], ngpu + 1)
    assert all(p[1].startswith("gpu") for p in plans(r)), str(r)
    assert tree_hash(tmp / "one") == tree_hash(tmp / "shared") == tree_hash(tmp / "forced") == tree_hash(tmp / "little")

