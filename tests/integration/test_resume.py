"""--resume: a run killed at any point (a rank killed by SIGKILL, the whole job killed) is finished
by --resume with output equal, dataset for dataset and file for file, to an uninterrupted run; an
unfinished output is never marked complete; a resume under other options or a changed input is
refused; the journal is gone once the output is complete.

Kill points are made with the HQ_FAULT_KILL=RANK:N test hook (the rank raises SIGKILL right after
its N-th written block is journaled) and with a real `kill -9` of the whole mpirun process group
at a random moment. HQ_JOURNAL_FLUSH_S=0 makes each record durable at once, so the resumed run
has real work to skip."""
import json
import os
import shutil
import signal
import subprocess
import time

import h5py
import numpy as np
import pytest

import reference as ref
from helpers import BIN, assert_same_output, command, read_png, run, run_env, run_ok, tree_hash
import pngio

FLUSH_NOW = {"HQ_JOURNAL_FLUSH_S": "0"}


def make_h5(path):
    rng = np.random.default_rng(5)
    with h5py.File(path, "w") as f:
        f["stack"] = rng.normal(100, 20, (12, 200, 300)).clip(0, 255).astype(np.uint8)
        f.create_dataset("big", data=rng.normal(1000, 300, (700, 500)).clip(0, 4095).astype(np.uint16),
                         chunks=(100, 500), compression="gzip", shuffle=True)
        f.create_dataset("rgb", data=rng.integers(0, 200, (3, 80, 90, 3), dtype=np.uint8), chunks=(1, 40, 90, 3))


def complete_attr(path):
    with h5py.File(path, "r") as f:
        return f.attrs.get("histeq_dist_complete")


def killed_then_resumed(inp, out, opts, np_, kill, env=None):
    """Runs once with a rank killed, checks the wreck, then resumes; returns the resume's Result."""
    e = dict(FLUSH_NOW, HQ_FAULT_KILL=kill, **(env or {}))
    r = run(["--input", inp, "--output", out, "-q"] + opts, np_, env=e)
    assert not r.timed_out, str(r)
    if r.rc == 0:
        return None  # the rank had fewer writes than the kill point: nothing to resume
    assert r.rc != 0
    assert not os.path.exists(out) or os.path.isdir(out), "a killed run must not leave OUT in place"
    assert os.path.isdir(str(out) + ".journal")
    rank = kill.split(":")[0]
    if np_:
        assert f"rank {rank}" in r.err, f"mpirun should name the killed rank\n{r}"
    return run_ok(["--input", inp, "--output", out, "--resume"] + opts, np_, env=dict(FLUSH_NOW, **(env or {})))


@pytest.mark.parametrize("np_,kill,opts", [
    (None, "0:1", []),
    (None, "0:4", ["--block", "100K"]),
    (3, "0:1", ["--block", "100K"]),
    (3, "0:3", ["--block", "100K"]),
    (3, "1:2", ["--block", "100K"]),
    (3, "2:4", ["--block", "100K"]),
    (2, "1:1", ["--block", "64K", "--memory", "300K"]),  # 3 compressed chunks in flight, none held
], ids=["single-first", "single-4", "np3-r0-1", "np3-r0-3", "np3-r1-2", "np3-r2-4", "np2-reread"])
def test_hdf5_kill_and_resume(tmp, np_, kill, opts):
    inp, want, out = tmp / "in.h5", tmp / "want.h5", tmp / "out.h5"
    make_h5(inp)
    before = inp.read_bytes()
    run_ok(["--input", inp, "--output", want, "-q"] + opts, np_)
    r = killed_then_resumed(inp, out, opts, np_, kill)
    if r is None:
        pytest.skip("the kill point was past the end of that rank's work")
    assert "resuming" in r.err
    assert_same_output(str(want), str(out))
    assert complete_attr(out) == 1
    assert not os.path.exists(str(out) + ".journal") and not os.path.exists(str(out) + ".part")
    assert inp.read_bytes() == before
    # The provenance of images finished before the kill survives the resume.
    with h5py.File(want, "r") as fw, h5py.File(out, "r") as fo:
        for name in ("stack", "big", "rgb"):
            assert np.array_equal(fw[f"histeq_dist/lut/{name}"][()], fo[f"histeq_dist/lut/{name}"][()]), name


@pytest.mark.parametrize("np_,kill", [(None, "0:4"), (3, "1:2")])
def test_hdf5_kill_and_resume_through_the_mapping(tmp, np_, kill):
    """Killed and resumed with the output's pixels written through a shared mapping (HQ_RESERVE=map,
    the default on tmpfs); the resume, which reserves nothing, writes the rest with pwrite. The result
    is an uninterrupted run's."""
    inp, want, out = tmp / "in.h5", tmp / "want.h5", tmp / "out.h5"
    make_h5(inp)
    opts = ["--block", "100K"]
    run_ok(["--input", inp, "--output", want, "-q"] + opts, np_)
    r = killed_then_resumed(inp, out, opts, np_, kill, env={"HQ_RESERVE": "map"})
    if r is None:
        pytest.skip("the kill point was past the end of that rank's work")
    assert "resuming" in r.err
    assert_same_output(str(want), str(out))
    assert complete_attr(out) == 1


@pytest.mark.parametrize("np_,kill", [(None, "0:3"), (2, "1:2"), (3, "0:2")])
def test_global_scope_resumes_without_pass1(tmp, np_, kill):
    """Killed in pass 2: the reduced histogram comes from the journal, pass 1 is not redone."""
    rng = np.random.default_rng(6)
    img = rng.normal(30000, 9000, (600, 700)).clip(0, 65535).astype(np.uint16)
    inp, want, out = tmp / "in.h5", tmp / "want.h5", tmp / "out.h5"
    with h5py.File(inp, "w") as f:
        f.create_dataset("img", data=img, chunks=(50, 700), compression="gzip")
    opts = ["--block", "100K", "--summary", tmp / "s.json"]
    run_ok(["--input", inp, "--output", want, "-q", "--block", "100K"], np_)
    r = killed_then_resumed(inp, out, opts, np_, kill)
    assert r is not None
    assert "its histograms are kept" in r.err, str(r)
    assert_same_output(str(want), str(out))
    s = json.loads((tmp / "s.json").read_text())
    assert s["phases"]["histogram"]["max_s"] == 0, "pass 1 must not run again"
    with h5py.File(out, "r") as f:
        assert f["histeq_dist/global_histogram"][()].sum() == img.size
        assert np.array_equal(f["img"][()], ref.equalize_one(img, 16))


def make_pngs(d, n=9):
    d.mkdir()
    for k in range(n):
        a = ref.low_contrast(40 + 3 * k, 50, 60, 120, np.uint8, seed=k)
        pngio.write(str(d / f"im{k:02d}.png"), a, 8, pngio.GRAY)


@pytest.mark.parametrize("np_,kill", [(None, "0:4"), (3, "1:2"), (3, "0:1")])
def test_png_directory_kill_and_resume(tmp, np_, kill):
    inp = tmp / "in"
    make_pngs(inp)
    want, out = tmp / "want", tmp / "out"
    run_ok(["--input", inp, "--output", want, "-q"], np_)
    assert (want / "histeq_dist.complete").exists()
    e = dict(FLUSH_NOW, HQ_FAULT_KILL=kill)
    r = run(["--input", inp, "--output", out, "-q"], np_, env=e)
    assert r.rc != 0 and not r.timed_out, str(r)
    assert not (out / "histeq_dist.complete").exists(), "a killed run's directory must not be marked complete"
    r = run_ok(["--input", inp, "--output", out, "--resume"], np_, env=FLUSH_NOW)
    assert "resuming" in r.err
    assert_same_output(str(want), str(out))
    assert (out / "histeq_dist.complete").exists()
    assert not os.path.exists(str(out) + ".journal")


def test_png_directory_replaced_after_the_kill_is_not_resumed_into(tmp):
    """A killed run's output directory moved away and another put at its name, holding a file of
    the user's named like an output: --resume wrote into it, replacing that file, and would take
    a valid PNG there for a claimed output, then mark the directory complete. The journal records
    the directory it was made beside: exit 2, nothing touched; --force starts over in it."""
    inp = tmp / "in"
    make_pngs(inp)
    want, out = tmp / "want", tmp / "out"
    run_ok(["--input", inp, "--output", want, "-q"])
    r = run(["--input", inp, "--output", out, "-q"], None, env=dict(FLUSH_NOW, HQ_FAULT_KILL="0:4"))
    assert r.rc != 0 and os.path.isdir(str(out) + ".journal"), str(r)
    os.rename(out, tmp / "moved")
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    shutil.copyfile(inp / "im01.png", out / "im01.png")  # a valid PNG where a claimed output was
    before = tree_hash(str(out))
    r = run(["--input", inp, "--output", out, "--resume"])
    assert r.rc == 2 and len(r.err_lines) == 1 and "not the directory the interrupted run wrote" in r.err_lines[0], str(r)
    assert tree_hash(str(out)) == before
    run_ok(["--input", inp, "--output", out, "--resume", "--force", "-q"])
    assert_same_output(str(want), str(out))
    assert (out / "notes.txt").read_text() == "mine\n" and not os.path.exists(str(out) + ".journal")


@pytest.mark.parametrize("damage", ["removed", "emptied", "cut"])
def test_png_removed_from_an_unfinished_directory_is_made_again(tmp, damage):
    """The journal claims a finished PNG; a user removes that file, or it is cut short (to nothing,
    or by its last bytes), before --resume: the claim no longer holds, and the file is written again
    rather than left missing or undecodable in a directory marked complete."""
    inp = tmp / "in"
    make_pngs(inp)
    want, out = tmp / "want", tmp / "out"
    run_ok(["--input", inp, "--output", want, "-q"])
    r = run(["--input", inp, "--output", out, "-q"], None, env=dict(FLUSH_NOW, HQ_FAULT_KILL="0:4"))
    assert r.rc != 0 and not r.timed_out, str(r)
    done = sorted(n for n in os.listdir(out) if n.endswith(".png"))
    assert done, "the killed run finished no file"
    f = out / done[0]
    if damage == "removed":
        os.remove(f)
    else:
        os.truncate(f, 0 if damage == "emptied" else f.stat().st_size - 5)
    run_ok(["--input", inp, "--output", out, "--resume", "-q"], None, env=FLUSH_NOW)
    assert f.exists()
    assert_same_output(str(want), str(out))


def test_whole_job_killed_at_random_moments(tmp):
    """A real kill -9 of mpirun and every rank, at several moments; each time --resume finishes."""
    inp, want = tmp / "in.h5", tmp / "want.h5"
    rng = np.random.default_rng(8)
    with h5py.File(inp, "w") as f:
        f["s"] = rng.integers(0, 256, (64, 256, 512), dtype=np.uint8)
        f.create_dataset("c", data=rng.integers(0, 4096, (1200, 900), dtype=np.uint16), chunks=(100, 900),
                         compression="gzip")
    opts = ["--block", "256K", "-q"]
    run_ok(["--input", inp, "--output", want] + opts, 3)
    env = run_env(FLUSH_NOW)
    for k, delay in enumerate([0.3, 0.6, 0.9, 1.2]):
        out = tmp / f"out{k}.h5"
        cmd = command(["--input", inp, "--output", out] + opts, 3)
        p = subprocess.Popen(cmd, env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        time.sleep(delay)
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()
        # The killed job's ranks notice their launcher is gone and die, some later than others
        # (under AddressSanitizer, seconds later): until the last one has, a resume is refused, as
        # they may still be writing.
        deadline = time.monotonic() + 60
        while True:
            r = run(["--input", inp, "--output", out, "--resume"] + opts, 3, env=FLUSH_NOW)
            if r.rc != 2 or "in use" not in r.err or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert r.rc == 0, f"expected success\n{r}"
        assert_same_output(str(want), str(out))
        assert complete_attr(out) == 1


def test_a_second_run_on_the_same_output_is_refused_while_the_first_lives(tmp):
    """Each rank holds its journal log locked while it runs: a second run on the same output, with
    --resume or --force, is refused in one line (exit 2) instead of resuming or removing what the
    first is still writing; the first then finishes as if alone."""
    inp, want, out = tmp / "in.h5", tmp / "want.h5", tmp / "out.h5"
    make_h5(inp)
    opts = ["--block", "100K", "-q"]
    run_ok(["--input", inp, "--output", want] + opts)
    first = subprocess.Popen([BIN, "--input", str(inp), "--output", str(out)] + opts,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    log = tmp / "out.h5.journal" / "rank-000000.log"
    deadline = time.monotonic() + 30
    while not log.exists() and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    first.send_signal(signal.SIGSTOP)
    try:
        if not log.exists():
            pytest.skip("the first run ended before its journal could be seen")
        for extra in (["--resume"], ["--force"]):
            r = run(["--input", inp, "--output", out] + opts + extra)
            assert r.rc == 2 and len(r.err_lines) == 1, str(r)
            assert str(out) in r.err_lines[0] and "in use" in r.err_lines[0], str(r)
    finally:
        first.send_signal(signal.SIGCONT)
    _, err = first.communicate(timeout=120)
    assert first.returncode == 0, err.decode()
    assert_same_output(str(want), str(out))
    assert complete_attr(out) == 1


def test_refusals(tmp):
    inp, out = tmp / "in.h5", tmp / "out.h5"
    make_h5(inp)
    r = run(["--input", inp, "--output", out, "--block", "100K", "-q"], None,
            env=dict(FLUSH_NOW, HQ_FAULT_KILL="0:2"))
    assert r.rc != 0
    # A journal is there: a plain run is refused, not silently started over.
    r = run(["--input", inp, "--output", out, "--block", "100K"])
    assert r.rc == 2 and len(r.err_lines) == 1 and "--resume" in r.err_lines[0] and str(out) in r.err_lines[0], str(r)
    # Other options.
    r = run(["--input", inp, "--output", out, "--block", "100K", "--resume", "--method", "stretch"])
    assert r.rc == 2 and "other options" in r.err_lines[0], str(r)
    # A changed input (same size, new time).
    st = os.stat(inp)
    os.utime(inp, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    r = run(["--input", inp, "--output", out, "--block", "100K", "--resume"])
    assert r.rc == 2 and "input changed" in r.err_lines[0], str(r)
    assert os.path.exists(str(out) + ".part") and not out.exists()
    # --force starts over.
    run_ok(["--input", inp, "--output", out, "--block", "100K", "--force", "-q"])
    assert complete_attr(out) == 1 and not os.path.exists(str(out) + ".journal")


def test_refusals_for_what_the_journal_did_not_cover(tmp):
    """A changed --mask or --reference file is a changed input; a run killed under --device copy
    (pixels written as they were) is not resumed by one that equalizes."""
    inp = tmp / "in.h5"
    make_h5(inp)
    rng = np.random.default_rng(7)
    with h5py.File(tmp / "m.h5", "w") as f:
        f["m"] = (rng.random((200, 300)) > 0.3).astype(np.uint8)
    with h5py.File(tmp / "r.h5", "w") as f:
        f["r"] = rng.integers(0, 255, (200, 300), dtype=np.uint8)
    single = f"{inp}:/stack"
    cases = [(["--mask", f"{tmp / 'm.h5'}:/m"], tmp / "m.h5", "m"),
             (["--method", "match", "--reference", f"{tmp / 'r.h5'}:/r"], tmp / "r.h5", "r")]
    for k, (opts, path, name) in enumerate(cases):
        out = tmp / f"out{k}.h5"
        args = ["--input", single, "--output", out, "--block", "100K"] + opts
        r = run(args + ["-q"], None, env=dict(FLUSH_NOW, HQ_FAULT_KILL="0:2"))
        assert r.rc != 0 and os.path.isdir(str(out) + ".journal"), str(r)
        with h5py.File(path, "a") as f:
            f[name][...] = 255 - f[name][()]
        r = run(args + ["--resume"])
        assert r.rc == 2 and len(r.err_lines) == 1 and "input changed" in r.err_lines[0], f"{opts}\n{r}"
    out = tmp / "copy.h5"
    r = run(["--input", single, "--output", out, "--block", "100K", "--device", "copy", "-q"], None,
            env=dict(FLUSH_NOW, HQ_FAULT_KILL="0:2"))
    assert r.rc != 0 and os.path.isdir(str(out) + ".journal"), str(r)
    r = run(["--input", single, "--output", out, "--block", "100K", "--resume"])
    assert r.rc == 2 and "other options" in r.err_lines[0], str(r)


def test_luts_recorded_before_the_kill_are_kept_and_checked(tmp):
    """Each image's LUT goes into OUT.part as it is built, and the journal keeps none: the ones of
    images finished before the kill are read back from OUT.part's own LUT datasets, so a resume from
    an OUT.part without them (one from an older build) is refused in one line, not finished with
    LUTs missing."""
    inp, want, out = tmp / "in.h5", tmp / "want.h5", tmp / "out.h5"
    make_h5(inp)
    opts = ["--block", "100K"]
    run_ok(["--input", inp, "--output", want, "-q"] + opts)
    r = run(["--input", inp, "--output", out, "-q"] + opts, None, env=dict(FLUSH_NOW, HQ_FAULT_KILL="0:6"))
    assert r.rc != 0, str(r)
    part = str(out) + ".part"
    # Images finished before the kill already have their LUTs in OUT.part.
    with h5py.File(want, "r") as fw, h5py.File(part, "r") as fp:
        kept = [(name, s) for name in ("stack", "big", "rgb") for s in range(fw[name].shape[0] if name != "big" else 1)
                if np.array_equal(fw[f"histeq_dist/lut/{name}"][s], fp[f"histeq_dist/lut/{name}"][s])]
    assert ("big", 0) in kept, kept
    with h5py.File(part, "r+") as f:
        del f["histeq_dist/lut/stack"]
    r = run(["--input", inp, "--output", out, "--resume"] + opts, None, env=FLUSH_NOW)
    assert r.rc == 2 and len(r.err_lines) == 1, str(r)
    assert part in r.err_lines[0] and "histeq_dist/lut/stack" in r.err_lines[0] and "--force" in r.err_lines[0], str(r)
    assert not out.exists()


def test_resume_when_there_is_nothing_to_resume(tmp):
    inp, out = tmp / "in.h5", tmp / "out.h5"
    make_h5(inp)
    # No journal, no output: a fresh run (batch scripts always pass --resume).
    run_ok(["--input", inp, "--output", out, "--resume", "-q"])
    assert complete_attr(out) == 1
    mtime = os.stat(out).st_mtime_ns
    # Complete already: nothing to do, exit 0, output untouched.
    r = run_ok(["--input", inp, "--output", out, "--resume"])
    assert "complete already" in r.err
    assert os.stat(out).st_mtime_ns == mtime


@pytest.mark.parametrize("np_", [None, 2], ids=["single", "np2"])
def test_interrupted_force_over_a_finished_output_resumes(tmp, np_):
    """A --force over a finished OUT, killed: OUT (the old output), OUT.part and the journal stay.
    Every --resume then said "output exists (use --force to replace)", exit 2, for ever, and a
    batch script that always passes --resume never finished. It now finishes the journaled run,
    which was let replace OUT."""
    inp, out = tmp / "in.h5", tmp / "out.h5"
    make_h5(inp)
    run_ok(["--input", inp, "--output", out, "-q"], np_)
    whole = tmp / "whole.h5"
    run_ok(["--input", inp, "--output", whole, "--block", "100K", "-q"], np_)
    r = run(["--input", inp, "--output", out, "--force", "--block", "100K", "-q"], np_,
            env=dict(FLUSH_NOW, HQ_FAULT_KILL="0:3"))
    assert r.rc != 0 and out.exists() and os.path.isdir(str(out) + ".journal"), str(r)
    assert os.path.exists(str(out) + ".part")
    r = run_ok(["--input", inp, "--output", out, "--resume", "--block", "100K"], np_, env=FLUSH_NOW)
    assert "resuming" in r.err, str(r)
    assert not os.path.exists(str(out) + ".part") and not os.path.exists(str(out) + ".journal")
    assert complete_attr(out) == 1
    assert_same_output(out, whole)
    # Only a finished output of this same run may be replaced so: a file the user put at OUT after
    # a kill of a run without --force (a note, a copy of the input) stays, and the resume is
    # refused as any run over an existing output is.
    for k, put in enumerate([lambda p: p.write_text("precious\n"), lambda p: shutil.copyfile(inp, p)]):
        out = tmp / f"later{k}.h5"
        r = run(["--input", inp, "--output", out, "--block", "100K", "-q"], np_,
                env=dict(FLUSH_NOW, HQ_FAULT_KILL="0:3"))
        assert r.rc != 0 and not out.exists() and os.path.isdir(str(out) + ".journal"), str(r)
        put(out)
        before = out.read_bytes()
        r = run(["--input", inp, "--output", out, "--resume", "--block", "100K"], np_, env=FLUSH_NOW)
        lines = r.err_lines if np_ is None else r.hq_lines
        assert r.rc == 2 and len(lines) == 1 and "is not this run's finished output" in lines[0], str(r)
        assert out.read_bytes() == before
        # The journal and .part stay for a --resume --force, which finishes the run over OUT.
        assert os.path.isdir(str(out) + ".journal") and os.path.exists(str(out) + ".part")
        run_ok(["--input", inp, "--output", out, "--resume", "--force", "--block", "100K", "-q"], np_, env=FLUSH_NOW)
        assert_same_output(out, whole)


def test_resumed_counts_are_this_runs(tmp):
    """After a resume the closing line and --summary counted every image of the input beside the
    pixels of this run alone ("equalized 32 images (1.0 Mpixel)" for 16 images' pixels). The
    images the interrupted run finished are left out of both."""
    inp, out = tmp / "in.h5", tmp / "out.h5"
    with h5py.File(inp, "w") as f:
        f.create_dataset("s", data=np.random.default_rng(8).integers(0, 200, (32, 256, 256), dtype=np.uint8),
                         chunks=(1, 256, 256))
    r = run(["--input", inp, "--output", out, "--block", "64K", "-q"], env=dict(FLUSH_NOW, HQ_FAULT_KILL="0:16"))
    assert r.rc != 0 and os.path.isdir(str(out) + ".journal"), str(r)
    r = run_ok(["--input", inp, "--output", out, "--block", "64K", "--resume", "--summary", tmp / "s.json"],
               env=FLUSH_NOW)
    s = json.loads((tmp / "s.json").read_text())
    assert 0 < s["images"] < 32 and s["pixels"] == s["images"] * 256 * 256, s
    assert f"equalized {s['images']} images" in r.err, str(r)


def test_resume_takes_the_same_input_under_another_spelling(tmp):
    """The run's identity hashed the input's words: resuming with -i ./in.h5, an absolute path or
    sub/../in.h5 (or from another directory) was "the input changed since it was made", exit 2,
    though nothing had. The input and the --mask file count by their real paths, device and
    inode; a finished output is "complete already" under any spelling too."""
    (tmp / "sub").mkdir()
    (tmp / "m").mkdir()
    with h5py.File(tmp / "in.h5", "w") as f:
        f.create_dataset("s", data=np.random.default_rng(9).integers(0, 200, (32, 128, 128), dtype=np.uint8),
                         chunks=(1, 128, 128))
    with h5py.File(tmp / "m" / "mask.h5", "w") as f:
        f["m"] = (np.arange(128 * 128).reshape(128, 128) % 3 != 0).astype(np.uint8)
    common = ["--block", "16K", "-q"]
    run_ok(["-i", tmp / "in.h5", "-o", tmp / "whole.h5", "--mask", f"{tmp}/m/mask.h5:/m"] + common)
    for k, (spelling, mask, cwd) in enumerate([("./in.h5", "m/mask.h5:/m", tmp),
                                               (str(tmp / "in.h5"), "./m/../m/mask.h5:/m", tmp),
                                               ("../in.h5", "../m/mask.h5:/m", tmp / "sub")]):
        out = tmp / f"out{k}.h5"
        r = run(["-i", "in.h5", "-o", out, "--mask", "m/mask.h5:/m"] + common, cwd=tmp,
                env=dict(FLUSH_NOW, HQ_FAULT_KILL="0:8"))
        assert r.rc != 0 and os.path.isdir(str(out) + ".journal"), str(r)
        r = run(["-i", spelling, "-o", out, "--mask", mask, "--resume"] + common, cwd=cwd, env=FLUSH_NOW)
        assert r.rc == 0, str(r)
        assert_same_output(out, tmp / "whole.h5")
        r = run(["-i", spelling, "-o", out, "--mask", mask, "--resume"], cwd=cwd)
        assert r.rc == 0 and "complete already" in r.err, str(r)
    # One dataset, its path spelled otherwise.
    out = tmp / "one.h5"
    r = run(["-i", f"{tmp}/in.h5:/s", "-o", out] + common, env=dict(FLUSH_NOW, HQ_FAULT_KILL="0:8"))
    assert r.rc != 0 and os.path.isdir(str(out) + ".journal"), str(r)
    run_ok(["-i", f"{tmp}/in.h5://s", "-o", out, "--resume"] + common, env=FLUSH_NOW)
    r = run(["-i", "in.h5:/./s", "-o", out, "--resume"], cwd=tmp)
    assert r.rc == 0 and "complete already" in r.err, str(r)
    # A PNG directory from another working directory.
    make_pngs(tmp / "pngs")
    r = run(["-i", "pngs", "-o", tmp / "pout", "--io-threads", "1", "-q"], cwd=tmp, env=dict(FLUSH_NOW, HQ_FAULT_KILL="0:3"))
    assert r.rc != 0 and os.path.isdir(str(tmp / "pout") + ".journal"), str(r)
    r = run(["-i", "../pngs/", "-o", tmp / "pout", "--io-threads", "1", "--resume", "-q"], cwd=tmp / "sub")
    assert r.rc == 0, str(r)


def test_resume_does_not_take_a_foreign_file_for_a_finished_output(tmp):
    """Only a file this program finished (marked complete) is "complete already": a text file, or
    an HDF5 file without the mark, at OUT is refused as any existing output is, and left alone."""
    inp = tmp / "in.h5"
    make_h5(inp)
    for name, make in [("text.h5", lambda p: p.write_text("precious\n")),
                       ("other.h5", lambda p: h5py.File(p, "w").create_dataset("x", data=np.arange(6)))]:
        out = tmp / name
        make(out)
        before = out.read_bytes()
        r = run(["--input", inp, "--output", out, "--resume"])
        assert r.rc == 2 and len(r.err_lines) == 1 and name in r.err_lines[0], str(r)
        assert "complete already" not in r.err and out.read_bytes() == before
        assert not os.path.exists(str(out) + ".journal")


def test_resume_refuses_a_finished_output_of_another_run(tmp):
    """A finished output records the identity of the run that made it (options and input): a
    --resume (batch scripts always pass it) with other options or another input is refused, not
    taken for done; the same run again is done. HDF5 and a PNG directory."""
    inp, other, out = tmp / "in.h5", tmp / "other.h5", tmp / "out.h5"
    make_h5(inp)
    make_h5(other)
    with h5py.File(other, "a") as f:
        f["stack"][0, 0, 0] += 1
    run_ok(["--input", inp, "--output", out, "--bits", "7", "-q"])
    before = out.read_bytes()
    for args, why in [(["--input", inp, "--output", out], "other options"),
                      (["--input", other, "--output", out, "--bits", "7"], "input changed")]:
        r = run(args + ["--resume"])
        assert r.rc == 2 and len(r.err_lines) == 1 and why in r.err_lines[0] and "--force" in r.err_lines[0], str(r)
        assert out.read_bytes() == before
    r = run_ok(["--input", inp, "--output", out, "--bits", "7", "--resume"])
    assert "complete already" in r.err and out.read_bytes() == before
    make_pngs(tmp / "pngs", 3)
    run_ok(["--input", tmp / "pngs", "--output", tmp / "pout", "-q"])
    r = run(["--input", tmp / "pngs", "--output", tmp / "pout", "--method", "stretch", "--resume"])
    assert r.rc == 2 and "other options" in r.err, str(r)
    run_ok(["--input", tmp / "pngs", "--output", tmp / "pout", "--resume"])


def test_single_png_keeps_no_journal(tmp):
    """A single PNG is written whole at the end: no journal. It records the run that made it, so a
    batch script that always passes --resume finds it complete (a second run said "output exists",
    exit 2), and one with other options is told so; a PNG at OUT that records no run (another
    tool's) stays "output exists"."""
    a = np.random.default_rng(9).integers(50, 90, (30, 40), dtype=np.uint8)
    pngio.write(str(tmp / "a.png"), a, 8, pngio.GRAY)
    run_ok(["--input", tmp / "a.png", "--output", tmp / "b.png", "--resume", "-q"])
    assert not os.path.exists(str(tmp / "b.png") + ".journal")
    assert np.array_equal(read_png(tmp / "b.png").rgb()[..., 0], ref.equalize_one(a, 8))
    made = (tmp / "b.png").read_bytes()
    r = run_ok(["--input", tmp / "a.png", "--output", tmp / "b.png", "--resume"])
    assert "complete already; nothing to resume" in r.err and (tmp / "b.png").read_bytes() == made, str(r)
    r = run(["--input", tmp / "a.png", "--output", tmp / "b.png", "--resume", "--method", "stretch"])
    assert r.rc == 2 and "complete already, but" in r.err and "other options" in r.err, str(r)
    r = run(["--input", tmp / "a.png", "--output", tmp / "b.png"])
    assert r.rc == 2 and "output exists" in r.err, str(r)
    pngio.write(str(tmp / "c.png"), a, 8, pngio.GRAY)
    r = run(["--input", tmp / "a.png", "--output", tmp / "c.png", "--resume"])
    assert r.rc == 2 and "output exists" in r.err, str(r)
    run_ok(["--input", tmp / "a.png", "--output", tmp / "c.png", "--force", "-q"])
    assert (tmp / "c.png").read_bytes() == made


# ---- the run lock and the journal's own identity ----------------------------------------------


def lock_of(out):
    return out.parent / f".{out.name}.lock"


def test_the_run_lock_is_honoured_before_anything_is_touched(tmp):
    """Two runs started together on one output both passed the journal's in-use check before
    either had made its journal, then truncated each other's .part: an output of one run's method
    with the other's pixels, marked complete. Rank 0 now holds .NAME.lock from before the checks to
    the end: while another process holds it, a run (plain, --force or --resume) is refused in one
    line and leaves the interrupted output and its journal as they were; after a run, no lock file
    is left."""
    import fcntl
    inp, out = tmp / "in.h5", tmp / "out.h5"
    make_h5(inp)
    r = run(["--input", inp, "--output", out, "--block", "100K", "-q"], None, env=dict(FLUSH_NOW, HQ_FAULT_KILL="0:2"))
    assert r.rc != 0 and (tmp / "out.h5.part").exists()
    before = {p.name: p.read_bytes() for p in [tmp / "out.h5.part"] + sorted((tmp / "out.h5.journal").iterdir())}
    with open(lock_of(out), "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        for extra in ([], ["--force"], ["--resume"]):
            r = run(["--input", inp, "--output", out, "--block", "100K"] + extra)
            assert r.rc == 2 and len(r.err_lines) == 1 and "another run is still writing it" in r.err_lines[0], str(r)
    after = {p.name: p.read_bytes() for p in [tmp / "out.h5.part"] + sorted((tmp / "out.h5.journal").iterdir())}
    assert after == before, "a refused run touched the output or its journal"
    run_ok(["--input", inp, "--output", out, "--block", "100K", "--resume", "-q"])
    want = tmp / "want.h5"
    run_ok(["--input", inp, "--output", want, "--block", "100K", "-q"])
    assert_same_output(str(want), str(out))
    assert not lock_of(out).exists() and not lock_of(want).exists()


def test_an_output_that_is_a_loop_of_links_is_an_error_not_a_crash(tmp):
    """Following --output's links to name the lock went round a loop (a -> b -> a) for ever: a stack
    overflow, exit 139. A loop is named as given: one line, no crash. An HDF5 output through a link
    leaves no lock file behind (the unlock named the lock again after the rename had replaced the
    link, and missed the one taken)."""
    d = tmp / "pngs"
    make_pngs(d, 2)
    os.symlink("b", tmp / "a")
    os.symlink("a", tmp / "b")
    r = run(["-i", d, "-o", tmp / "a"])
    assert r.rc == 1 and len(r.err_lines) == 1 and "Too many levels of symbolic links" in r.err_lines[0], str(r)
    inp = tmp / "in.h5"
    make_h5(inp)
    os.symlink("real.h5", tmp / "l.h5")
    run_ok(["-i", inp, "-o", tmp / "l.h5", "-q"])
    assert not [n for n in os.listdir(tmp) if n.endswith(".lock")], os.listdir(tmp)


@pytest.mark.parametrize("luts", [[], ["--luts", "none"]])
def test_luts_none_is_no_part_of_a_png_runs_identity(tmp, luts):
    """--luts changes nothing for PNG outputs: a killed PNG run resumes with or without it."""
    inp, out = tmp / "in", tmp / "out"
    make_pngs(inp)
    r = run(["--input", inp, "--output", out, "-q"] + luts, None, env=dict(FLUSH_NOW, HQ_FAULT_KILL="0:4"))
    assert r.rc != 0, str(r)
    run_ok(["--input", inp, "--output", out, "--resume", "-q"] + (["--luts", "none"] if not luts else []),
           None, env=FLUSH_NOW)


@pytest.mark.parametrize("spelling", ["link", "link/", "chain/", "dangling", "to_slash", "to_dot"])
def test_the_lock_follows_an_output_named_through_a_symbolic_link(tmp, spelling):
    """The lock was named after OUT as typed: a run writing outd/ and another given a symbolic link
    to it (--force) held two locks and wrote one directory; the first, failing, took back the
    second's images and left a completion mark beside a partial set. A link names its target's lock,
    also through a chain of links and before the target exists (the first run has not made it)."""
    import fcntl
    d = tmp / "pngs"
    make_pngs(d, 3)
    target = tmp / "outd"
    os.symlink("outd", tmp / "link")
    os.symlink("link", tmp / "chain")
    os.symlink("outd", tmp / "dangling")
    os.symlink("link/", tmp / "to_slash")  # a target's trailing slash made lstat stop at "link"
    os.symlink("outd/.", tmp / "to_dot")  # named the lock "outd/..lock", inside the output
    with open(lock_of(target), "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        r = run(["-i", d, "-o", str(tmp / spelling), "--force"])
        assert r.rc == 2 and len(r.err_lines) == 1 and "another run is still writing it" in r.err_lines[0], str(r)
        assert not target.exists()
    target.mkdir()  # a link to a directory not made yet is not a directory to make
    run_ok(["-i", d, "-o", str(tmp / spelling), "-q"])
    assert sorted(os.listdir(target)) == sorted(os.listdir(d) + ["histeq_dist.complete"])
    assert not lock_of(target).exists() and not (tmp / ".link.lock").exists()


@pytest.mark.parametrize("kind", ["symlink", "fifo"])
def test_a_planted_lock_name_is_refused_not_followed(tmp, kind):
    """A symbolic link planted under the lock's name was followed: the run created (or held) the
    file it pointed at, wherever that was, and at its end removed only the link. A FIFO there could
    block the open. No run makes either: refused in one line, exit 2, the target left alone."""
    inp, out = tmp / "in.h5", tmp / "out.h5"
    make_h5(inp)
    target = tmp / "elsewhere" / "victim"
    target.parent.mkdir()
    if kind == "symlink":
        lock_of(out).symlink_to(target)
    else:
        os.mkfifo(lock_of(out))
    r = run(["--input", inp, "--output", out, "--block", "100K"])
    assert r.rc == 2 and len(r.err_lines) == 1 and str(lock_of(out)) in r.err_lines[0], str(r)
    assert ("symbolic link" if kind == "symlink" else "not a regular file") in r.err_lines[0], str(r)
    assert not target.exists() and not out.exists() and not (tmp / "out.h5.part").exists()
    assert os.path.lexists(lock_of(out))


@pytest.mark.parametrize("kind", ["symlink", "user-dir", "file"])
def test_a_journal_name_taken_by_something_else_is_left_alone(tmp, kind):
    """OUT.journal as a symbolic link to a user's directory: every file in that directory was
    deleted (exit 1, 'File exists'); as a user's own directory: it was emptied and removed, exit 0.
    Only what a journal holds is ever removed, and a name taken by anything else is refused."""
    inp, out = tmp / "in.h5", tmp / "out.h5"
    make_h5(inp)
    victim = tmp / "victim"
    victim.mkdir()
    for n in ("notes.txt", "id", "rank-000000.log"):
        (victim / n).write_text("mine")
    j = tmp / "out.h5.journal"
    if kind == "symlink":
        j.symlink_to(victim)
    elif kind == "user-dir":
        j.mkdir()
        (j / "notes.txt").write_text("mine")
    else:
        j.write_text("mine")
    for extra in ([], ["--force"], ["--resume"]):
        r = run(["--input", inp, "--output", out, "--block", "100K"] + extra)
        assert r.rc == 2 and len(r.err_lines) == 1 and "the name of its journal" in r.err_lines[0], str(r)
    assert sorted(p.name for p in victim.iterdir()) == ["id", "notes.txt", "rank-000000.log"]
    assert os.path.lexists(j) and not out.exists() and not (tmp / "out.h5.part").exists()


@pytest.mark.parametrize("case", ["input-is-journal", "input-is-lock", "mask-is-lock", "summary-is-lock",
                                  "report-is-journal"])
def test_the_runs_own_files_cannot_be_what_it_reads(tmp, case):
    """The run removes its lock at the end and empties its journal: an input PNG directory named
    OUT.journal lost its files, an HDF5 input or a --mask file named .OUT.lock was gone after an exit 0,
    a --summary written there was removed with the lock. Refused up front, exit 2, nothing touched."""
    import pngio
    out = tmp / "o"
    img = (np.arange(48 * 40) % 200).reshape(48, 40).astype(np.uint8)
    if case == "input-is-journal":
        inp = tmp / "o.journal"
        inp.mkdir()
        pngio.write(str(inp / "a.png"), img, 8, pngio.GRAY)
        args = ["--input", inp, "--output", out]
    elif case == "input-is-lock":
        out = tmp / "b.h5"
        inp = tmp / ".b.h5.lock"
        make_h5(inp)
        args = ["--input", inp, "--output", out]
    else:
        src = tmp / "src"
        src.mkdir()
        pngio.write(str(src / "a.png"), img, 8, pngio.GRAY)
        if case == "mask-is-lock":
            inp = tmp / ".o.lock"
            pngio.write(str(inp), np.ones_like(img), 8, pngio.GRAY)
            args = ["--input", src, "--output", out, "--mask", inp]
        elif case == "report-is-journal":
            inp = tmp / "o.journal"
            args = ["--input", src, "--output", out, "--report", inp]
        else:
            inp = tmp / ".o.lock"
            args = ["--input", src, "--output", out, "--summary", inp]
    before = sorted((p.name, p.read_bytes()) for p in ([inp] if inp.is_file() else inp.iterdir())) if inp.exists() else None
    r = run(args)
    assert r.rc == 2 and len(r.err_lines) == 1, str(r)
    assert ("lock" in r.err_lines[0] or "journal" in r.err_lines[0]), str(r)
    after = sorted((p.name, p.read_bytes()) for p in ([inp] if inp.is_file() else inp.iterdir())) if inp.exists() else None
    assert after == before and not out.exists()


def test_an_input_rewritten_in_place_with_its_time_set_back_is_a_changed_input(tmp):
    """Size, modification time and inode were the input's fingerprint: slice 0 rewritten in place and
    the modification time set back (touch -d, rsync --times) and --resume finished the output, exit
    0, marked complete, with old pixels beside new. The change time counts too now."""
    inp, out = tmp / "in.h5", tmp / "out.h5"
    with h5py.File(inp, "w") as f:  # contiguous: its bytes can be rewritten where they lie
        f["v"] = np.random.default_rng(8).integers(20, 90, (12, 64, 64), dtype=np.uint8)
        offset = f["v"].id.get_offset()
    r = run(["--input", inp, "--output", out, "--block", "8K", "-q"], None, env=dict(FLUSH_NOW, HQ_FAULT_KILL="0:3"))
    assert r.rc != 0 and (tmp / "out.h5.journal").exists()
    st = os.stat(inp)
    time.sleep(0.05)
    with open(inp, "r+b") as f:
        f.seek(offset)
        f.write(bytes(200 for _ in range(64 * 64)))
    os.utime(inp, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(inp).st_size == st.st_size and os.stat(inp).st_mtime_ns == st.st_mtime_ns
    r = run(["--input", inp, "--output", out, "--block", "8K", "--resume"])
    assert r.rc == 2 and len(r.err_lines) == 1 and "the input changed" in r.err_lines[0], str(r)


def test_resume_with_the_input_spelled_with_a_trailing_slash(tmp):
    """A run started with `-i in/` could not be resumed with `-i in` ('the input changed'): the
    journal's id held the input as typed. One directory, one id."""
    d = tmp / "in"
    make_pngs(d)
    out = tmp / "out"
    r = run(["--input", str(d) + "/", "--output", out, "-q"], None, env=dict(FLUSH_NOW, HQ_FAULT_KILL="0:2"))
    assert r.rc != 0 and (tmp / "out.journal").exists(), str(r)
    run_ok(["--input", d, "--output", out, "-q", "--resume"])
    want = tmp / "want"
    run_ok(["--input", d, "--output", want, "-q"])
    for p in sorted(want.glob("*.png")):
        assert (out / p.name).read_bytes() == p.read_bytes(), p.name


@pytest.mark.parametrize("left", ["empty", "id.tmp"])
@pytest.mark.parametrize("resume", [True, False], ids=["resume", "plain"])
def test_a_journal_killed_while_being_made_starts_over(tmp, left, resume):
    """A kill between the journal's mkdir and its id's rename left OUT.journal/ without an id, and
    every --resume then failed (exit 1, 'cannot read the journal's id'), a plain run asked for
    --resume: only --force got out. Such a journal claims nothing: the run starts over."""
    inp, out = tmp / "in.h5", tmp / "out.h5"
    make_h5(inp)
    r = run(["--input", inp, "--output", out, "--block", "100K", "-q"], None, env=dict(FLUSH_NOW, HQ_FAULT_KILL="0:2"))
    assert r.rc != 0
    j = tmp / "out.h5.journal"
    for p in j.iterdir():
        p.unlink()
    if left == "id.tmp":
        (j / "id.tmp").write_text("histeq_dist journal 2\noptions")
    run_ok(["--input", inp, "--output", out, "--block", "100K", "-q"] + (["--resume"] if resume else []))
    want = tmp / "want.h5"
    run_ok(["--input", inp, "--output", want, "--block", "100K", "-q"])
    assert_same_output(str(want), str(out))
    assert complete_attr(out) == 1 and not j.exists()


def test_a_log_from_another_outputs_journal_is_not_read(tmp):
    """Two outputs of one input with the same options: their journals' ids were equal, so a rank
    log copied from one into the other was taken for its own: its blocks were never written, the
    output marked complete. Each journal now has a nonce of its own in its id, and the logs carry
    its mark: the copied log is passed over and its work done."""
    inp = tmp / "in.h5"
    make_h5(inp)
    outs = [tmp / "o1.h5", tmp / "o2.h5"]
    for o, kill in zip(outs, ("0:6", "0:1")):
        r = run(["--input", inp, "--output", o, "--block", "100K", "-q"], None, env=dict(FLUSH_NOW, HQ_FAULT_KILL=kill))
        assert r.rc != 0
    ids = [(o.parent / (o.name + ".journal") / "id").read_text() for o in outs]
    assert ids[0] != ids[1] and ids[0].rsplit("nonce ", 1)[0] == ids[1].rsplit("nonce ", 1)[0], ids
    log = "rank-000000.log"
    (tmp / "o2.h5.journal" / log).write_bytes((tmp / "o1.h5.journal" / log).read_bytes())
    r = run_ok(["--input", inp, "--output", outs[1], "--block", "100K", "--resume"])
    want = tmp / "want.h5"
    run_ok(["--input", inp, "--output", want, "--block", "100K", "-q"])
    assert_same_output(str(want), str(outs[1]))


@pytest.mark.skipif(not shutil.which("gdb"), reason="needs gdb to stop the run at the journal's creation")
def test_force_killed_before_its_journal_does_not_keep_the_old_claims(tmp):
    """A --force run killed after it made a new .part but before it replaced the old journal left the
    old claims beside the new file, and --resume took them: exit 0, an output marked complete with
    most of its pixels never written. The old journal now goes before the output is touched. The
    kill lands where it did (gdb stops the run as it starts the new journal, then kills it)."""
    inp, out = tmp / "in.h5", tmp / "out.h5"
    make_h5(inp)
    r = run(["--input", inp, "--output", out, "--block", "100K", "-q"], None, env=dict(FLUSH_NOW, HQ_FAULT_KILL="0:6"))
    assert r.rc != 0
    g = subprocess.run(["gdb", "-q", "-batch", "-ex", "break hq_journal_create", "-ex", "run", "-ex", "kill", "--args",
                        BIN, "--input", str(inp), "--output", str(out), "--block", "100K", "--force", "-q"],
                       capture_output=True, text=True, timeout=120, env=run_env(FLUSH_NOW))
    assert "Breakpoint 1, hq_journal_create" in g.stdout, g.stdout + g.stderr
    assert (tmp / "out.h5.part").exists() and not (tmp / "out.h5.journal").exists()
    run_ok(["--input", inp, "--output", out, "--block", "100K", "--resume", "-q"])
    want = tmp / "want.h5"
    run_ok(["--input", inp, "--output", want, "--block", "100K", "-q"])
    assert_same_output(str(want), str(out))


def test_resume_over_a_finished_output_still_writes_the_summary(tmp):
    """A batch script that always passes --resume and --summary read no file after a submission that
    found the output finished already (exit 0, no F). The summary is written, and says nothing was
    done this time."""
    inp, out = tmp / "in.h5", tmp / "out.h5"
    make_h5(inp)
    run_ok(["--input", inp, "--output", out, "-q"])
    summ = tmp / "again.json"
    r = run_ok(["--input", inp, "--output", out, "--resume", "--summary", summ])
    assert "complete already" in r.err, str(r)
    s = json.loads(summ.read_text())
    assert s["images"] == 0 and s["pixels"] == 0 and s["output"] == str(out), s
    assert "complete already" in s["engine"], s


def test_outd_and_outd_slash_are_one_output(tmp):
    """A PNG directory output spelled 'outd/' made its lock and journal inside the directory
    ('outd/..lock', 'outd/.journal'), 'outd' beside it: a second run spelled the other way was not
    refused while the first wrote. One name now, whatever the trailing slashes."""
    import fcntl
    d = tmp / "in"
    make_pngs(d)
    with open(tmp / ".outd.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        r = run(["--input", d, "--output", str(tmp / "outd") + "/", "-q"])
        assert r.rc == 2 and "another run is still writing it" in r.err, str(r)
    r = run(["--input", d, "--output", str(tmp / "outd") + "//", "-q"], None, env=dict(FLUSH_NOW, HQ_FAULT_KILL="0:2"))
    assert r.rc != 0
    assert (tmp / "outd.journal").is_dir() and not (tmp / "outd" / ".journal").exists()
    run_ok(["--input", d, "--output", tmp / "outd", "--resume", "-q"])
    want = tmp / "want"
    run_ok(["--input", d, "--output", want, "-q"])
    assert_same_output(str(want), str(tmp / "outd"))
    assert not (tmp / ".outd.lock").exists() and not (tmp / "outd.journal").exists()


def test_long_input_paths_keep_their_whole_identity(tmp):
    """The run's id was cut at 2,047 bytes: with an input path of ~2,000 characters the input's
    fingerprint fell off, an interrupted run could never be resumed ('the input changed'), and
    --resume over an output finished from another input said 'complete already', exit 0."""
    deep = tmp
    for k in range(10):
        deep = deep / (f"{k}" * 200)
    deep.mkdir(parents=True)
    inp, other, out = deep / "in.h5", deep / "in2.h5", tmp / "out.h5"
    assert len(str(inp)) > 2000
    make_h5(inp)
    with h5py.File(other, "w") as f:
        f["stack"] = np.full((12, 200, 300), 7, np.uint8)
    r = run(["--input", inp, "--output", out, "--block", "100K", "-q"], None, env=dict(FLUSH_NOW, HQ_FAULT_KILL="0:3"))
    assert r.rc != 0
    r = run_ok(["--input", inp, "--output", out, "--block", "100K", "--resume"], None, env=FLUSH_NOW)
    assert "resuming" in r.err, str(r)
    want = tmp / "want.h5"
    run_ok(["--input", inp, "--output", want, "--block", "100K", "-q"])
    assert_same_output(str(want), str(out))
    r = run(["--input", other, "--output", out, "--block", "100K", "--resume"])
    assert r.rc == 2 and "input changed" in r.err, str(r)


def test_one_dataset_and_the_whole_file_are_other_runs(tmp):
    """With one image in the file, FILE:/img and FILE had the same identity, though only the second
    writes the file's other datasets and attributes: --resume of either took the other's finished
    output (or its journal) for its own, exit 0, and the output lacked /axis."""
    inp = tmp / "one.h5"
    with h5py.File(inp, "w") as f:
        f["img"] = np.random.default_rng(1).integers(0, 200, (256, 256)).astype(np.uint8)
        f["axis"] = np.arange(64.0)
        f.attrs["patient"] = "x"
    for first, then in ((f"{inp}:/img", str(inp)), (str(inp), f"{inp}:/img")):
        out = tmp / f"out{len(first)}.h5"
        run_ok(["-i", first, "-o", out, "-q"])
        r = run(["-i", then, "-o", out, "--resume"])
        assert r.rc == 2 and "complete already, but" in r.err, str(r)
        r = run_ok(["-i", first, "-o", out, "--resume"])
        assert "nothing to resume" in r.err, str(r)
    # Killed, then resumed with the other spelling: refused, the journal kept for the right one.
    out = tmp / "killed.h5"
    r = run(["-i", f"{inp}:/img", "-o", out, "-q", "--block", "4K"], None, env=dict(FLUSH_NOW, HQ_FAULT_KILL="0:2"))
    assert r.rc != 0 and os.path.exists(str(out) + ".journal"), str(r)
    r = run(["-i", inp, "-o", out, "--resume"])
    assert r.rc == 2, str(r)
    run_ok(["-i", f"{inp}:/img", "-o", out, "-q", "--resume"])
    with h5py.File(out, "r") as f:
        assert "axis" not in f and "img" in f
