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
from helpers import assert_same_output, run, run_ok


def mounted_tmpfs(mnt, size):
    """A tmpfs of size mounted at mnt (made here) for the test, unmounted after it; skipped where
    mounting is not allowed."""
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode().strip()}")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)])


@pytest.fixture
def small_disk(tmp):
    yield from mounted_tmpfs(tmp / "disk", "3m")


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


@pytest.mark.parametrize("np_", [None, 2])
def test_metadata_to_carry_counts_in_the_space_asked_for(tmp, small_disk, np_):
    """A file whose other datasets (copied at close, io/hdf5/carry.c) do not fit the disk beside its
    images was refused by nothing before the work: H5Ocopy then met the full disk at close and
    crashed (SIGSEGV), and --resume crashed the same way. Their storage now counts in the space
    reserved up front: one line, exit 1, nothing left. With room, they land in the reserved blocks."""
    inp = tmp / "in.h5"
    with h5py.File(inp, "w") as f:
        f["img"] = np.random.default_rng(12).integers(0, 256, (4, 128, 128), dtype=np.uint8)  # 64 KiB
        f["series"] = np.random.default_rng(13).random(500_000)  # 4 MB of metadata: more than the disk
    out = small_disk / "out.h5"
    r = run(["--input", inp, "--output", out], np_)
    assert not r.timed_out and r.rc == 1, str(r)
    assert len(r.hq_lines) == 1 and "not enough disk space" in r.hq_lines[0], str(r)
    assert not out.exists() and not os.path.exists(str(out) + ".part") and not os.path.exists(str(out) + ".journal")
    with h5py.File(inp, "a") as f:
        del f["series"]
        f["series"] = np.arange(200_000, dtype=np.float64)  # 1.6 MB: fits beside the image
    run_ok(["--input", inp, "--output", out, "-q"], np_)
    with h5py.File(out, "r") as f:
        assert np.array_equal(f["series"][()], np.arange(200_000, dtype=np.float64))


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


def _six_pngs(tmp, seed, np_=None):
    """tmp/in: six 64 x 96 gray PNGs; tmp/want: their uninterrupted run's output."""
    inp, want = tmp / "in", tmp / "want"
    inp.mkdir()
    rng = np.random.default_rng(seed)
    for k in range(6):
        pngio.write(str(inp / f"im{k}.png"), rng.integers(0, 200, (64, 96), dtype=np.uint8), 8, pngio.GRAY)
    run_ok(["--input", inp, "--output", want, "-q"], np_)
    return inp, want


def _fill(path):
    """Writes zeros into path until the disk is full."""
    with open(path, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError:
            pass


def _mount_inodes(mnt, n, remount=False):
    opts = f"{'remount,' if remount else ''}size=8m,nr_inodes={n}"
    return subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(mnt)], capture_output=True).returncode == 0


def _mark_fails(r, out):
    return r.rc == 1 and len(r.hq_lines) == 1 and str(out / "histeq_dist.complete") in r.hq_lines[0]


@pytest.mark.parametrize("np_,then", [(None, "--resume"), (3, "--resume"), (3, None)])
def test_png_directory_disk_full_at_the_completion_mark(tmp, np_, then):
    """The disk fills exactly when the directory's completion mark is written, after every PNG is in
    place: the run has failed like any other, so it takes back the files it wrote (a directory of
    unmarked PNGs with its journal gone was refused by the next --resume, exit 2 "output exists"),
    one line naming the output and the full disk, exit 1. Once space is freed the next run, plain
    or --resume (a batch script's), gives the uninterrupted run's PNGs byte for byte.

    The disk is a tmpfs with few inodes: every file takes one and the mark is the last one this run
    creates (its journal's are made first), so the largest inode count that fails is the one that
    fails exactly at the mark; found by counting down from one that is surely enough."""
    inp, want = _six_pngs(tmp, 17, np_)
    mnt = tmp / "disk"
    mnt.mkdir()
    out = mnt / "out"
    n = 6 + 2 * (np_ or 1) + 12
    if not _mount_inodes(mnt, n):
        pytest.skip("cannot mount a tmpfs here")
    try:
        while True:
            r = run(["--input", inp, "--output", out, "-q"], np_)
            assert not r.timed_out, str(r)
            if r.rc != 0:
                break
            subprocess.run(["umount", "-l", str(mnt)])
            n -= 1
            assert n > 6 and _mount_inodes(mnt, n), str(r)
        assert _mark_fails(r, out), f"the first failure counting down is not at the mark:\n{r}"
        assert "No space left on device" in r.hq_lines[0], str(r)
        assert not out.exists(), f"left under the output's name: {os.listdir(out)}"
        assert sorted(os.listdir(mnt)) == [], "nothing of the run is left (journal, lock, temporaries)"
        assert _mount_inodes(mnt, 1000, remount=True)  # space freed
        r = run_ok(["--input", inp, "--output", out, "-q"] + ([then] if then else []), np_)
        assert_same_output(str(want), str(out))
        assert (out / "histeq_dist.complete").exists()
    finally:
        subprocess.run(["umount", "-l", str(mnt)])


def test_png_directory_disk_full_at_the_mark_of_a_resumed_run(tmp):
    """A killed run resumed on a disk that fills at the completion mark: the resumed run fails in
    good order and takes back the files it wrote; the interrupted run's PNGs are not its to remove
    (another run's images may be among the directory's files), so they stay, and so does the
    journal that claims them: the next --resume finishes the output with the uninterrupted run's
    PNGs.

    With several I/O threads, what the killed run leaves depends on timing (its codec workers run
    ahead of the kill: 3 or 4 PNGs, one half written, some not yet journaled, which the resumed run
    writes again beside the old file), and the first failure counting down fell on a PNG on the
    16-core node and under ASan. The killed run has one I/O thread, which leaves the same every
    time; each round still gives the resumed run inodes for the PNGs missing, less half-written
    ones, and `spare` more, counted down."""
    inp, want = _six_pngs(tmp, 18)
    mnt = tmp / "disk"
    mnt.mkdir()
    out = mnt / "out"
    flush_now = {"HQ_JOURNAL_FLUSH_S": "0"}
    spare = 12
    if not _mount_inodes(mnt, 1000):
        pytest.skip("cannot mount a tmpfs here")
    try:
        while True:
            subprocess.run(["umount", "-l", str(mnt)])
            assert spare >= 0 and _mount_inodes(mnt, 1000)
            r = run(["--input", inp, "--output", out, "-q", "--io-threads", "1"], None,
                    env=dict(flush_now, HQ_FAULT_KILL="0:3"))
            assert r.rc != 0 and not r.timed_out, str(r)
            done = sum(x.endswith(".png") for x in os.listdir(out))
            halves = sum(x.startswith(".") and ".png.part" in x for x in os.listdir(out))
            assert 0 < done < 6, f"the killed run finished {done} files"
            st = os.statvfs(mnt)
            assert _mount_inodes(mnt, st.f_files - st.f_ffree + 6 - done - halves + spare, remount=True)
            r = run(["--input", inp, "--output", out, "-q", "--resume"], None, env=flush_now)
            assert not r.timed_out, str(r)
            if r.rc != 0:
                break
            spare -= 1
        assert _mark_fails(r, out), f"the first failure counting down is not at the mark:\n{r}"
        kept = sorted(os.listdir(out))
        assert kept and all(k.endswith(".png") for k in kept) and len(kept) < 6, kept
        assert sorted(os.listdir(mnt)) == ["out", "out.journal"], "only the interrupted run's work is left"
        assert _mount_inodes(mnt, 1000, remount=True)
        run_ok(["--input", inp, "--output", out, "-q", "--resume"], None, env=flush_now)
        assert_same_output(str(want), str(out))
    finally:
        subprocess.run(["umount", "-l", str(mnt)])


@pytest.mark.parametrize("np_", [None, 2, 3])
def test_hdf5_disk_fills_under_background_reservation(tmp, small_disk, np_):
    """The output's space is reserved in the background while pass 1 runs, each rank a slice of it.
    The free space check at create is told the disk is big enough (HQ_TEST_RESERVE_LIE), so the disk
    fills under the background reservation: the writes that meet it must fail before writing, and
    the ranks agree on one clear line."""
    rng = np.random.default_rng(13)
    inp = tmp / "in.h5"
    with h5py.File(inp, "w") as f:
        f.create_dataset("s", data=rng.integers(0, 256, (80, 256, 256), dtype=np.uint8))  # 5 MiB
    before = inp.read_bytes()
    out = small_disk / "out.h5"
    r = run(["--input", inp, "--output", out, "--block", "256K"], np_, env={"HQ_TEST_RESERVE_LIE": "1", "HQ_RESERVE": "background"})
    assert not r.timed_out, str(r)
    assert r.rc == 1, str(r)
    assert len(r.hq_lines) == 1 and str(out) in r.hq_lines[0], str(r)
    assert "write failed: not enough disk space" in r.hq_lines[0], str(r)
    assert not out.exists() and not os.path.exists(str(out) + ".part")
    assert not os.path.exists(str(out) + ".journal")
    assert inp.read_bytes() == before


@pytest.mark.parametrize("np_", [None, 2, 3])
def test_background_reservation_same_bytes(tmp, np_):
    """The output is the same byte for byte whether its space was reserved in the background (one
    rank), at create (HQ_RESERVE=sync) or by populating a shared mapping of the pixel region
    (HQ_RESERVE=map), and no reserved block is left past its end."""
    rng = np.random.default_rng(14)
    inp = tmp / "in.h5"
    with h5py.File(inp, "w") as f:
        f.create_dataset("s", data=rng.integers(0, 256, (48, 512, 512), dtype=np.uint8), chunks=(1, 512, 512))
        f.create_dataset("c", data=rng.integers(0, 4096, (6, 256, 256), dtype=np.uint16), chunks=(1, 256, 256),
                         compression="gzip")
    outs = {}
    for mode in ("background", "sync", "map"):
        out = tmp / f"out_{mode}.h5"
        env = {"HQ_RESERVE": mode}
        r = run(["--input", inp, "--output", out, "--block", "1M"], np_, env=env)
        assert not r.timed_out and r.rc == 0, str(r)
        st = os.stat(out)
        assert st.st_blocks * 512 <= st.st_size + (1 << 20), f"{mode}: reserved blocks left past the end"
        with h5py.File(out, "r") as f:
            outs[mode] = (f["s"][...], f["c"][...])
    for mode in ("background", "map"):
        assert np.array_equal(outs[mode][0], outs["sync"][0]), mode
        assert np.array_equal(outs[mode][1], outs["sync"][1]), mode


@pytest.mark.parametrize("np_,inodes", [(None, 3), (None, 4), (2, 5)])
def test_journal_that_cannot_be_written_leaves_nothing(tmp, np_, inodes):
    """A disk out of inodes: the output's file fits, the journal's do not (3: its id file, 4: rank 0's
    log, 5 with two ranks: rank 1's log). One clear line, exit 1, and no half journal left behind to
    resume from, whichever rank met it."""
    mnt = tmp / "disk"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size=8m,nr_inodes={inodes}", "tmpfs", str(mnt)],
                       capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode().strip()}")
    try:
        inp = tmp / "in.h5"
        with h5py.File(inp, "w") as f:
            f.create_dataset("s", data=np.random.default_rng(16).integers(0, 256, (8, 256, 256), dtype=np.uint8))
        out = mnt / "out.h5"
        r = run(["--input", inp, "--output", out], np_)
        assert not r.timed_out and r.rc == 1, str(r)
        assert len(r.hq_lines) == 1 and str(out) + ".journal" in r.hq_lines[0], str(r)
        assert "not enough disk space for the journal" in r.hq_lines[0], str(r)
        assert os.listdir(mnt) == [], str(r)
    finally:
        subprocess.run(["umount", "-l", str(mnt)])


@pytest.fixture
def disk_64m(tmp):
    yield from mounted_tmpfs(tmp / "disk64", "64m")


def test_many_small_datasets_fit_a_small_disk_and_give_back_the_reservation(tmp, disk_64m):
    """Past ~2,000 datasets the output's size was estimated at 1 MiB a dataset (as if every one were
    aligned to 1 MiB, which HDF5 does only for storage of 1 MiB or more): 2,500 datasets of 64
    bytes, a 3.3 MB output, reserved 2.6 GB and failed on this 64 MB disk (exit 1, 'not enough disk
    space'). And what a run reserved past the output's end stayed held after a resumed run (which
    reserves nothing itself) and on ext4 (which ignores a hole punched past the end)."""
    inp = tmp / "in.h5"
    a = np.random.default_rng(3).integers(10, 60, (8, 8)).astype(np.uint8)
    with h5py.File(inp, "w") as f:
        for i in range(2500):
            f.create_dataset(f"d{i:05d}", data=a + i % 7)
    out = disk_64m / "out.h5"
    r = run(["--input", inp, "--output", out, "-q"], None, env={"HQ_JOURNAL_FLUSH_S": "0.05", "HQ_FAULT_KILL": "0:1800"})
    assert not r.timed_out and r.rc != 0 and (disk_64m / "out.h5.part").exists(), str(r)
    r = run(["--input", inp, "--output", out, "-q", "--resume"])
    assert r.rc == 0, str(r)
    st = os.stat(out)
    assert st.st_blocks * 512 - st.st_size < 1 << 20, (st.st_size, st.st_blocks * 512)
    with h5py.File(out, "r") as f:
        for i in (0, 1799, 1800, 2499):
            want = ref.equalize_one(a + i % 7, 8)
            assert np.array_equal(f[f"d{i:05d}"][()], want), i


def test_summary_on_a_full_disk_says_the_output_is_kept(tmp, small_disk):
    """--summary is written after the output is committed: a full disk there ended the run with only
    'sum.json: cannot write (No space left on device)', exit 1, though the output was complete.
    As for --report, the line now says the output is complete and kept."""
    inp, out = tmp / "in.h5", tmp / "out.h5"
    with h5py.File(inp, "w") as f:
        f["a"] = np.random.default_rng(4).integers(0, 200, (64, 64)).astype(np.uint8)
    _fill(small_disk / "filler")
    r = run(["--input", inp, "--output", out, "--summary", small_disk / "sum.json"])
    bad = [l for l in r.err_lines if "sum.json" in l]
    assert r.rc == 1 and len(bad) == 1 and bad[0].endswith("the output is complete and kept"), str(r)
    with h5py.File(out, "r") as f:
        assert f.attrs["histeq_dist_complete"] == 1


def test_a_failed_resume_keeps_another_runs_images(tmp, small_disk):
    """Run A completes a PNG directory; run B (--force, another method) is killed after two images;
    its --resume fails (the disk filled meanwhile). The failed resume removed every file named like
    an input, run A's images among them, and the directory. Now it takes back only what it wrote:
    run A's other images stay, the interrupted run's journal stays, and once there is room again
    --resume finishes run B's output."""
    inp, want = _six_pngs(tmp, 19)
    out = small_disk / "out"
    flush_now = {"HQ_JOURNAL_FLUSH_S": "0"}
    run_ok(["--input", inp, "--output", out, "-q", "--method", "stretch"])
    a_images = {p.name: p.read_bytes() for p in out.iterdir() if p.suffix == ".png"}
    r = run(["--input", inp, "--output", out, "-q", "--force"], None, env=dict(flush_now, HQ_FAULT_KILL="0:2"))
    assert r.rc != 0 and (small_disk / "out.journal").exists(), str(r)
    filler = small_disk / "filler"
    _fill(filler)
    r = run(["--input", inp, "--output", out, "-q", "--resume"], None, env=flush_now)
    assert r.rc == 1, str(r)
    left = {p.name: p.read_bytes() for p in out.iterdir() if p.suffix == ".png"}
    untouched = [n for n in a_images if left.get(n) == a_images[n]]
    assert len(untouched) >= 3, f"run A's images were removed: {sorted(left)}"
    assert (small_disk / "out.journal").exists()
    filler.unlink()
    run_ok(["--input", inp, "--output", out, "-q", "--resume"], None, env=flush_now)
    for k in range(6):
        assert (out / f"im{k}.png").read_bytes() == (want / f"im{k}.png").read_bytes(), k
