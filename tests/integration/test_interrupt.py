"""SIGINT, SIGTERM, SIGHUP and SIGXCPU: a run they end prints one line that says how to finish it, ends with
the signal's status (the shell's 128 + N), leaves its output unfinished and its journal in place,
and leaves nothing in TMPDIR; --resume then finishes it, equal to an uninterrupted run. A signal the
run was started with ignored stays ignored. What a kill -9 leaves in TMPDIR (a singleton's private
Open MPI session directory) is removed by the next run, never a live run's.

The runs are stopped mid-way by the HQ_FAULT_STALL=RANK:N test hook (the rank stops, alive, after
its N-th written block) and then signalled for real."""
import fcntl
import glob
import os
import signal
import socket
import subprocess
import time

import h5py
import numpy as np
import pytest

from helpers import BIN, assert_same_output, command, run_env, run_ok

NAMES = {signal.SIGINT: "SIGINT", signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP", signal.SIGXCPU: "SIGXCPU"}


def make_stack(path):
    rng = np.random.default_rng(11)
    with h5py.File(path, "w") as f:
        f.create_dataset("stack", data=rng.normal(120, 30, (12, 200, 300)).clip(0, 255).astype(np.uint8),
                         chunks=(1, 200, 300))


def start(args, tmpdir, np_=None, stall="0:3", ignore=()):
    """Starts a run that stops after its rank's 3rd written block; returns the Popen."""
    cmd = command(args, np_)
    e = run_env({"TMPDIR": str(tmpdir), "HQ_FAULT_STALL": stall, "HQ_JOURNAL_FLUSH_S": "0"})

    def ignore_signals():
        # The signals' default dispositions, as a shell gives a job, whatever the test runner has.
        for s in NAMES:
            signal.signal(s, signal.SIG_DFL)
        for s in ignore:
            signal.signal(s, signal.SIG_IGN)

    return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e,
                            start_new_session=True, text=True, preexec_fn=ignore_signals)


def wait_stalled(p, out, timeout=60):
    """Waits until the run has claimed a block in its journal (it then stops at the hook)."""
    log = os.path.join(str(out) + ".journal", "rank-000000.log")
    t0 = time.time()
    while time.time() - t0 < timeout:
        assert p.poll() is None, f"the run ended early: {p.returncode}\n{p.communicate()[1]}"
        if os.path.exists(log) and os.path.getsize(log) > 0:
            time.sleep(0.3)  # the rank reaches the hook right after its claim
            return
        time.sleep(0.05)
    p.kill()
    pytest.fail(f"no journal record after {timeout} s")


def finish(p, timeout=60):
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        pytest.fail("the signalled run did not end")
    return p.returncode, err


def session_dirs(tmpdir):
    return sorted(glob.glob(os.path.join(str(tmpdir), "histeq_dist-mpi.*")))


def interrupted_lines(err):
    return [l for l in err.splitlines() if "interrupted by" in l]


# SIGXCPU: a CPU-time limit ran out (ulimit -t; a batch system's h_cpu), the batch system's word
# for "time is up" as SIGTERM is SLURM's; it used to end the run silently (exit 152).
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGXCPU])
def test_signal_keeps_the_work_and_resume_finishes(tmp, sig):
    inp, out, ref = tmp / "in.h5", tmp / "out.h5", tmp / "ref.h5"
    work = tmp / "tmpdir"
    work.mkdir()
    make_stack(inp)
    opts = ["--block", "100K", "--threads", "1"]
    p = start(["-i", inp, "-o", out, "-q"] + opts, work)
    wait_stalled(p, out)
    assert len(session_dirs(work)) == 1, "a singleton keeps its Open MPI session files in a directory of its own"
    p.send_signal(sig)
    rc, err = finish(p)
    assert rc == -sig, f"the run must end as the signal ends it, not {rc}\n{err}"
    want = (f"histeq_dist: {out}: interrupted by {NAMES[sig]}; the work done is kept ({out}.journal): "
            "run again with --resume to finish")
    assert interrupted_lines(err) == [want], err
    assert session_dirs(work) == [], "the session directory must go with the run"
    assert not out.exists() and (tmp / "out.h5.part").exists() and (tmp / "out.h5.journal").is_dir()
    assert not (tmp / ".out.h5.lock").exists(), "the run lock must go with the run"
    r = run_ok(["-i", inp, "-o", out, "--resume"] + opts)
    assert "resuming" in r.err
    run_ok(["-i", inp, "-o", ref] + opts)
    assert_same_output(str(out), str(ref))
    assert not (tmp / "out.h5.journal").exists()


def test_signal_ignored_at_start_stays_ignored(tmp):
    inp, out = tmp / "in.h5", tmp / "out.h5"
    make_stack(inp)
    p = start(["-i", inp, "-o", out, "-q", "--block", "100K", "--threads", "1"], tmp, ignore=(signal.SIGHUP,))
    wait_stalled(p, out)
    p.send_signal(signal.SIGHUP)
    time.sleep(0.5)
    assert p.poll() is None, "SIGHUP was ignored when the run started (nohup): it must not end the run"
    p.send_signal(signal.SIGTERM)
    rc, err = finish(p)
    assert rc == -signal.SIGTERM, err
    assert len(interrupted_lines(err)) == 1, err


def test_kill9_leftovers_go_with_the_next_run_never_a_live_one(tmp):
    inp = tmp / "in.h5"
    work = tmp / "tmpdir"
    work.mkdir()
    make_stack(inp)
    opts = ["--block", "100K", "--threads", "1", "-q"]
    # A run killed by SIGKILL leaves its directory.
    a = start(["-i", inp, "-o", tmp / "a.h5"] + opts, work)
    wait_stalled(a, tmp / "a.h5")
    a_dir = session_dirs(work)
    assert len(a_dir) == 1 and os.path.exists(os.path.join(a_dir[0], "owner.lock"))
    a.send_signal(signal.SIGKILL)
    finish(a)
    assert session_dirs(work) == a_dir
    # A live run, and a directory of the same name that no run of ours locks: both stay.
    b = start(["-i", inp, "-o", tmp / "b.h5"] + opts, work)
    wait_stalled(b, tmp / "b.h5")
    b_dir = [d for d in session_dirs(work) if d not in a_dir]
    assert len(b_dir) == 1
    # Left alone too: one of this host without the lock file, and one of another host (a TMPDIR
    # shared by nodes) whose lock file nobody here holds.
    assert os.path.basename(a_dir[0]).startswith(f"histeq_dist-mpi.{socket.gethostname()}.")
    foreign = work / f"histeq_dist-mpi.{socket.gethostname()}.nolock"
    (foreign / "sub").mkdir(parents=True)
    (foreign / "sub" / "f").write_text("x")
    other = work / "histeq_dist-mpi.some-other-node.Ab12Cd"
    other.mkdir()
    (other / "owner.lock").write_text("")
    # The next run removes what the killed one left.
    env = {"TMPDIR": str(work)}
    run_ok(["-i", inp, "-o", tmp / "c.h5"] + opts, env=env)
    assert session_dirs(work) == sorted(b_dir + [str(foreign), str(other)])
    assert (foreign / "sub" / "f").exists()
    assert b.poll() is None
    b.send_signal(signal.SIGTERM)
    rc, err = finish(b)
    assert rc == -signal.SIGTERM, err
    assert session_dirs(work) == sorted([str(foreign), str(other)])


def test_leftovers_of_a_kill_while_a_directory_was_made_or_swept_go_too(tmp):
    """A kill -9 between making the directory and locking it, or of a sweeper while it emptied
    one, left a directory without owner.lock that no later run removed (3 of 60 early kills). The
    first now has a -new name until it is locked (removed once a minute old: its maker takes
    microseconds), the second a -gone name (removed whatever it holds)."""
    inp = tmp / "in.h5"
    work = tmp / "tmpdir"
    work.mkdir()
    make_stack(inp)
    host = socket.gethostname()
    gone = work / f"histeq_dist-mpi-gone.{host}.Ab12Cd"
    (gone / "ompi" / "jf.0").mkdir(parents=True)
    (gone / "ompi" / "jf.0" / "f").write_text("x")
    stale, young = work / f"histeq_dist-mpi-new.{host}.Ef34Gh", work / f"histeq_dist-mpi-new.{host}.Ij56Kl"
    stale.mkdir()
    (stale / "owner.lock").write_text("")
    young.mkdir()
    old = time.time() - 3600
    os.utime(stale, (old, old))
    other = work / "histeq_dist-mpi-gone.some-other-node.Mn78Op"  # another node's: never ours
    other.mkdir()
    # Node "HOST.lab" of a shared TMPDIR: its free-looking lock is not this node's to judge.
    dotted = work / f"histeq_dist-mpi.{host}.lab.Qr90St"
    dotted.mkdir()
    (dotted / "owner.lock").write_text("")
    # A -new one a minute old whose maker still holds the lock (stopped, or the server's clock).
    held = work / f"histeq_dist-mpi-new.{host}.Uv12Wx"
    held.mkdir()
    lock = open(held / "owner.lock", "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    os.utime(held, (old, old))
    run_ok(["-i", inp, "-o", tmp / "c.h5", "-q"], env={"TMPDIR": str(work)})
    lock.close()
    assert sorted(os.listdir(work)) == sorted([young.name, other.name, dotted.name, held.name])


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_to_mpirun_one_line_and_resume(tmp, sig):
    """mpirun passes Ctrl-C (SIGINT) on to the ranks as SIGTERM: the line says so, rather than name
    a signal the user did not send."""
    inp, out, ref = tmp / "in.h5", tmp / "out.h5", tmp / "ref.h5"
    make_stack(inp)
    opts = ["--block", "100K", "--threads", "1"]
    p = start(["-i", inp, "-o", out, "-q"] + opts, tmp, np_=2, stall="0:2")
    wait_stalled(p, out)
    p.send_signal(sig)
    rc, err = finish(p)
    assert rc != 0, err
    lines = interrupted_lines(err)
    assert len(lines) <= 1, f"rank 0 alone prints the line\n{err}"
    assert all("interrupted by SIGTERM (mpirun passes Ctrl-C and kill on as SIGTERM)" in l for l in lines), err
    assert not out.exists() and (tmp / "out.h5.journal").is_dir()
    run_ok(["-i", inp, "-o", out, "--resume"] + opts, 2)
    run_ok(["-i", inp, "-o", ref] + opts)
    assert_same_output(str(out), str(ref))


def kill_while_encoding(p, outdir, prefix, sig=signal.SIGKILL):
    """Sends sig to run p as soon as one of its PNG encodes (a `.NAME.part-PID` file whose NAME
    starts with prefix) appears in outdir; returns that file's name."""
    t0 = time.time()
    while time.time() - t0 < 60 and p.poll() is None:
        try:
            names = os.listdir(outdir)
        except FileNotFoundError:
            names = []
        temps = [n for n in names if n.startswith("." + prefix) and ".part-" in n]
        if temps:
            p.send_signal(sig)
            return temps[0]
        time.sleep(0.001)
    finish(p)
    pytest.fail(f"no encode seen in {outdir} (rc {p.returncode})")


def big_png(path, seed):
    import pngio
    rng = np.random.default_rng(seed)
    pngio.write(str(path), rng.integers(0, 256, (3000, 4000), dtype=np.uint8), 8, 0, level=1)


def test_png_encodes_a_kill_left_are_removed(tmp):
    """A PNG being encoded lives under a hidden temporary name beside its output; what a kill -9
    leaves there is removed by the next run on that output: --resume of a directory, which then
    holds only finished images and its mark, and a rerun of a single file (a leftover of a process
    still alive is kept)."""
    (tmp / "in").mkdir()
    for i in range(4):
        big_png(tmp / "in" / f"im{i}.png", i)
    out = tmp / "out"
    p = start(["-i", tmp / "in", "-o", out, "-q", "--threads", "1"], tmp, stall="0:1000")
    left = kill_while_encoding(p, out, "im")
    finish(p)
    assert (out / left).exists()
    run_ok(["-i", tmp / "in", "-o", out, "--resume", "--threads", "1"])
    assert sorted(os.listdir(out)) == ["histeq_dist.complete"] + [f"im{i}.png" for i in range(4)]

    single = tmp / "one.png"
    p = start(["-i", tmp / "in" / "im0.png", "-o", single, "-q", "--threads", "1"], tmp, stall="0:1000")
    left = kill_while_encoding(p, tmp, "one.png")
    finish(p)
    live = tmp / f".one.png.part-{os.getpid()}"
    live.write_bytes(b"x")
    run_ok(["-i", tmp / "in" / "im0.png", "-o", single])
    assert not (tmp / left).exists(), "the dead run's encode must go"
    assert live.exists(), "a live process's encode must stay"
    assert single.exists()
    # One of an earlier process that had this run's id goes too (the run's probe creates that name).
    sh = f'touch "{tmp}/.two.png.part-$$"; exec "{BIN}" -q -i "{tmp / "in" / "im1.png"}" -o "{tmp / "two.png"}"'
    r = subprocess.run(["sh", "-c", sh], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert [n for n in os.listdir(tmp) if n.startswith(".two.png")] == []
    # One of a process that has exited but is not reaped yet (a zombie: kill(pid, 0) still
    # succeeds on it) goes too; a container's init reaped a killed job's rank 0 seconds late,
    # after the resume that should have removed its temporary had run.
    zombie = subprocess.Popen(["true"])
    while open(f"/proc/{zombie.pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z":
        time.sleep(0.01)
    undead = tmp / f".three.png.part-{zombie.pid}"
    undead.write_bytes(b"x")
    run_ok(["-i", tmp / "in" / "im2.png", "-o", tmp / "three.png"])
    zombie.wait()
    assert not undead.exists(), "an exited process's encode must go, reaped or not"


@pytest.mark.parametrize("outdir", [False, True])
def test_signal_during_png_encode_leaves_no_temporary(tmp, outdir):
    """SIGTERM while a PNG is being encoded: the encode's temporary file goes with the run."""
    (tmp / "in").mkdir()
    for i in range(3):
        big_png(tmp / "in" / f"im{i}.png", 10 + i)
    if outdir:
        src, out, where, prefix = tmp / "in", tmp / "out", tmp / "out", "im"
    else:
        src, out, where, prefix = tmp / "in" / "im0.png", tmp / "one.png", tmp, "one.png"
    p = start(["-i", src, "-o", out, "-q", "--threads", "1"], tmp, stall="0:1000")
    left = kill_while_encoding(p, where, prefix, signal.SIGTERM)
    rc, err = finish(p)
    assert rc == -signal.SIGTERM, err
    assert not (where / left).exists(), f"{left} must go with the run"
    assert [n for n in os.listdir(where) if ".part-" in n] == []
    tail = f"the work done is kept ({out}.journal): run again with --resume to finish" if outdir else "it was not written"
    assert interrupted_lines(err) == [f"histeq_dist: {out}: interrupted by SIGTERM; {tail}"], err


def test_ranks_whose_launcher_dies_while_they_start_end_too(tmp):
    """A rank inside MPI_Init when its launcher dies waited for it for ever (Open MPI's PMIx_Init has
    no timeout): a kill -9 of a whole job in its first half second left one asleep. Until MPI_Init
    returns, a watcher ends the rank when its parent is no longer the launcher. Here the ranks pause
    before MPI_Init (HQ_TEST_INIT_PAUSE_S) and mpirun is killed meanwhile: they are gone within a
    second, not at the pause's end."""
    inp = tmp / "in.h5"
    with h5py.File(inp, "w") as f:
        f["x"] = np.arange(64 * 64, dtype=np.uint8).reshape(64, 64)
    out = tmp / "launcher_gone.h5"
    e = run_env({"HQ_TEST_INIT_PAUSE_S": "20"})
    p = subprocess.Popen(command(["--input", inp, "--output", out], 2), env=e, start_new_session=True,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def ranks(parent=None):
        """The run's processes (the ranks, and rank 0's scan child while it reads the input), or
        those that parent started."""
        found = []
        for d in os.listdir("/proc"):
            try:
                with open(f"/proc/{d}/cmdline", "rb") as fh:
                    argv = fh.read().split(b"\0")
                with open(f"/proc/{d}/stat") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if argv and argv[0] == os.fsencode(BIN) and os.fsencode(str(out)) in argv and parent in (None, ppid):
                found.append(int(d))
        return found

    try:
        # Killed once both ranks say they pause with the watcher running (under AddressSanitizer a
        # rank's process exists a good while before its main starts).
        import select
        said, buf, deadline = 0, b"", time.monotonic() + 30
        while said < 2 and time.monotonic() < deadline:
            if select.select([p.stderr], [], [], 0.2)[0]:
                chunk = os.read(p.stderr.fileno(), 4096)
                if not chunk:
                    break
                buf += chunk
                said = buf.count(b"watching before MPI_Init")
        assert said == 2 and b"not watching" not in buf, buf.decode(errors="replace")
        assert len(ranks(p.pid)) == 2, "the two ranks are not there"
        os.kill(p.pid, signal.SIGKILL)  # mpirun alone, as a batch system's kill of the launcher would
        p.wait()
        deadline = time.monotonic() + 3
        while ranks() and time.monotonic() < deadline:
            time.sleep(0.1)
        left = ranks()
        assert not left, f"ranks {left} still alive 3 s after their launcher died (paused for 20 s)"
    finally:
        for pid in ranks():
            os.kill(pid, signal.SIGKILL)
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert not out.exists()
