"""Damaged files never crash the run: the inputs of fuzz/regress/hdf5/lib-*.h5 crash or hang
libhdf5 1.10.8 itself (a damaged local heap met by the scan; a damaged global heap behind a
variable-length attribute, met when the attributes are read for copying; recorded storage shorter
than the data, which H5Dread copies past when the pixels are read). Rank 0 reads that metadata in a
child process with a time limit (io/scan_isolated.c), and that child also checks the recorded
storage of every dataset against its data (hdf5_check_storage_size), so each ends the run with
exit 4 and one line naming the file, on one rank and on several, leaving no output. The same holds
for the files of --mask and --reference, scanned the same way."""
import glob
import os
import subprocess
import time

import h5py
import numpy as np
import pytest

from helpers import ROOT, command, run, run_env

FILES = sorted(glob.glob(os.path.join(ROOT, "fuzz", "regress", "hdf5", "lib-*.h5")))
LIMIT = {"HQ_METADATA_TIMEOUT_S": "5"}  # the hang is cut after 5 s instead of 300


def test_the_inputs_are_there():
    names = [os.path.basename(f) for f in FILES]
    assert names == ["lib-chunk-btree-record-short-memcpy.h5", "lib-chunk-btree-record-size0-memcpy.h5",
                     "lib-compact-storage-short-memcpy.h5", "lib-local-heap-accumulator-memcpy.h5",
                     "lib-vlen-attr-global-heap-hang.h5", "lib-vlen-attr-global-heap-memcpy.h5"]


@pytest.mark.parametrize("np_", [None, 3], ids=["single", "np3"])
@pytest.mark.parametrize("mode", ["stop", "skip"])
@pytest.mark.parametrize("path", FILES, ids=[os.path.basename(f) for f in FILES])
def test_exit_4_one_line(tmp, path, mode, np_):
    out = tmp / "o.h5"
    r = run(["--input", path, "--output", out, "--on-error", mode], np_, timeout=120, env=LIMIT)
    assert not r.timed_out, str(r)
    assert r.rc == 4, f"want exit 4\n{r}"
    lines = r.hq_lines if np_ else r.err_lines
    assert len(lines) == 1 and lines[0].startswith(f"histeq_dist: {path}"), str(r)
    assert "Segmentation fault" not in r.err.replace(lines[0], "") and "backtrace" not in r.err.lower(), str(r)
    assert os.listdir(tmp) == [], f"left behind: {os.listdir(tmp)}"


SHORT = {  # caught before any read by the storage check, each with what it found
    "lib-chunk-btree-record-short-memcpy.h5": ":/s: damaged: its chunk index records 448 bytes for 4 uncompressed "
                                              "chunks of 128 bytes",
    "lib-chunk-btree-record-size0-memcpy.h5": ":/s: damaged: its chunk index records 286 bytes for 4 uncompressed "
                                              "chunks of 128 bytes",
    "lib-compact-storage-short-memcpy.h5": ":/s: damaged: its compact storage records 8 bytes, its data take 384",
}


def test_damaged_metadata_named(tmp):
    """What the line says: a crash, the time limit, or the storage that does not hold the data
    (with --on-error skip the file's one dataset is left out, and the line gives the reason)."""
    crash = [f for f in FILES if "memcpy" in f and os.path.basename(f) not in SHORT]
    hang = [f for f in FILES if "hang" in f]
    assert len(crash) == 2 and len(hang) == 1
    # Under AddressSanitizer (make test-asan) the library's overrun is caught before it can crash:
    # the child exits with ASan's status instead of dying by a signal, and the line says so.
    ended = ("crashed", "ended abnormally") if "ASAN_OPTIONS" in os.environ else ("crashed",)
    for f in crash:
        r = run(["--input", f, "--output", tmp / "o.h5", "--on-error", "skip"], env=LIMIT)
        assert "damaged" in r.err_lines[0] and any(w in r.err_lines[0] for w in ended), str(r)
    for f in hang:
        r = run(["--input", f, "--output", tmp / "o.h5", "--on-error", "skip"], env=LIMIT)
        assert "took over 5 s" in r.err_lines[0], str(r)
        # Stopping at the first bad image: its own reason, at once, before any attribute is read
        # (the scan that read each image's attributes as it went met the hanging one first, and
        # waited out the limit to say less).
        r = run(["--input", f, "--output", tmp / "o.h5", "--on-error", "stop"], env=LIMIT)
        assert r.err_lines == [f"histeq_dist: {f}:/five_d: unsupported shape (5 dimensions)"], str(r)
    for name, why in SHORT.items():
        f = os.path.join(ROOT, "fuzz", "regress", "hdf5", name)
        r = run(["--input", f, "--output", tmp / "o.h5", "--on-error", "stop"], env=LIMIT)
        assert r.err_lines == [f"histeq_dist: {f}{why}"], str(r)
        r = run(["--input", f, "--output", tmp / "o.h5", "--on-error", "skip"], env=LIMIT)
        assert r.err_lines == [f"histeq_dist: {f}: nothing to equalize (every input was left out: {f}{why})"], str(r)


@pytest.mark.parametrize("np_", [None, 2], ids=["single", "np2"])
@pytest.mark.parametrize("role", ["mask", "reference"])
def test_damaged_mask_or_reference(tmp, role, np_):
    """--mask and --reference files are scanned in a child too: a libhdf5 crash there, or a
    dataset whose pixels libhdf5 would read past a buffer, is one line and exit 4, no output."""
    inp = tmp / "in.h5"
    with h5py.File(inp, "w") as f:
        f.create_dataset("s", data=(np.arange(3 * 8 * 8) % 251).astype(np.uint16).reshape(3, 8, 8))
    out = tmp / "o.h5"
    regress = os.path.join(ROOT, "fuzz", "regress", "hdf5")
    for name, why in [("lib-local-heap-accumulator-memcpy.h5",
                       ": damaged: reading its metadata crashed the format library (Segmentation fault)"),
                      ("lib-chunk-btree-record-short-memcpy.h5", SHORT["lib-chunk-btree-record-short-memcpy.h5"])]:
        src = f"{os.path.join(regress, name)}:/s"
        args = ["--mask", src] if role == "mask" else ["--method", "match", "--reference", src]
        r = run(["--input", inp, "--output", out] + args, np_, timeout=120, env=LIMIT)
        assert not r.timed_out and r.rc == 4, str(r)
        lines = r.hq_lines if np_ else r.err_lines
        want = f"histeq_dist: {src}{why}" if "crashed" in why else f"histeq_dist: {os.path.join(regress, name)}{why}"
        assert lines == [want], str(r)
        assert "backtrace" not in r.err.lower() and "Segmentation fault" not in r.err.replace(lines[0], ""), str(r)
        assert sorted(os.listdir(tmp)) == ["in.h5"], f"left behind: {os.listdir(tmp)}"


def _children(pid):
    """The processes pid forked that are still alive (a zombie is dead, whoever reaps it)."""
    kids = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                kids += [int(k) for k in f.read().split()]
        except OSError:
            pass
    return [k for k in kids if _alive(k)]


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_scan_child_ends_with_its_parent(tmp):
    """A scan hung on damaged metadata is killed at the deadline by the process that forked it
    (rank 0 forks it before MPI_Init, app/main.c). Where that process is killed first, the child
    goes with it instead of hanging on, its parent gone."""
    hang = [f for f in FILES if "hang" in f][0]
    p = subprocess.Popen(command(["--input", hang, "--output", tmp / "o.h5", "--on-error", "skip"]),
                         env=run_env({"HQ_METADATA_TIMEOUT_S": "60"}), stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        kids, until = [], time.monotonic() + 30
        while not kids and time.monotonic() < until and p.poll() is None:
            time.sleep(0.05)
            kids = _children(p.pid)
        assert kids, "no scan child seen"
        time.sleep(0.5)  # the child is in the hang by now
        assert p.poll() is None and all(_alive(k) for k in kids), "the scan did not hang"
    finally:
        p.kill()
        p.wait()
    until = time.monotonic() + 10
    while any(_alive(k) for k in kids) and time.monotonic() < until:
        time.sleep(0.05)
    assert not any(_alive(k) for k in kids), f"scan child {kids} outlived its parent"
