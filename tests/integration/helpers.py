"""helpers.py — how the integration tests run the program and compare its outputs.

HQ_BIN          the binary (the Makefile exports the absolute path of build/histeq_dist)
HQ_MPIRUN_FLAGS extra mpirun flags (the Makefile passes --oversubscribe [--allow-run-as-root])
HQ_DEVICES      engines to run every case on, default "cpu"; with "cpu gpu" each case runs on both
                and the outputs must be byte-identical.
"""
import hashlib
import os
import shlex
import signal
import stat
import subprocess
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pngio  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
BIN = os.environ.get("HQ_BIN") or os.path.join(ROOT, "build", "histeq_dist")
MPIRUN_FLAGS = shlex.split(os.environ.get("HQ_MPIRUN_FLAGS", "--oversubscribe"))
if os.geteuid() == 0 and "--allow-run-as-root" not in MPIRUN_FLAGS:
    MPIRUN_FLAGS.append("--allow-run-as-root")
DEVICES = os.environ.get("HQ_DEVICES", "cpu").split()
TIMEOUT = 120


class Result:
    def __init__(self, cmd, rc, out, err, timed_out):
        self.cmd, self.rc, self.out, self.err, self.timed_out = cmd, rc, out, err, timed_out

    @property
    def err_lines(self):
        """Non-empty stderr lines, less the program's notices ("histeq_dist: note: ...")."""
        return [l for l in self.err.splitlines() if l.strip() and not l.startswith("histeq_dist: note:")]

    @property
    def hq_lines(self):
        """The program's own stderr lines (mpirun adds its banners around them), less its notices
        ("histeq_dist: note: ..."), which are not errors."""
        return [l for l in self.err.splitlines() if l.startswith("histeq_dist") and not l.startswith("histeq_dist: note:")]

    def __str__(self):
        return f"$ {' '.join(map(shlex.quote, self.cmd))}\nexit {self.rc}\n--- stdout\n{self.out}--- stderr\n{self.err}"


def command(args, np_=None):
    """The program's command line: alone (np_=None, an MPI singleton) or under mpirun -np np_."""
    cmd = [BIN] + [str(a) for a in args]
    return cmd if np_ is None else ["mpirun", "-np", str(np_)] + MPIRUN_FLAGS + cmd


def run_env(env=None):
    """The environment the program runs in: this one, with what Open MPI needs here (root, more
    ranks than cores, no cross-process memory attach in containers) unless set, then env."""
    e = dict(os.environ)
    e.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    e.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    e.setdefault("OMPI_MCA_rmaps_base_oversubscribe", "1")
    e.setdefault("OMPI_MCA_btl_vader_single_copy_mechanism", "none")
    if env:
        e.update(env)
    return e


def run(args, np_=None, timeout=TIMEOUT, cwd=None, env=None):
    """Runs the program: directly (np_=None, an MPI singleton) or under mpirun -np np_.
    Never hangs: the whole process group is killed at the timeout."""
    cmd, e = command(args, np_), run_env(env)
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd, env=e,
                         start_new_session=True, text=True, errors="replace")
    try:
        out, err = p.communicate(timeout=timeout)
        return Result(cmd, p.returncode, out, err, False)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        return Result(cmd, None, out, err, True)


def run_ok(args, np_=None, **kw):
    r = run(args, np_, **kw)
    assert not r.timed_out, f"timed out\n{r}"
    assert r.rc == 0, f"expected success\n{r}"
    return r


def device_output(path, dev):
    """Where the run on a second device writes: a sibling folder named for the device."""
    if dev == DEVICES[0]:
        return path
    d = os.path.join(os.path.dirname(path), f"_{dev}")
    os.makedirs(d, exist_ok=True)
    return os.path.join(d, os.path.basename(path))


def equalize(inp, out, *opts, np_=None, **kw):
    """Runs the case on every device of HQ_DEVICES; the outputs must agree byte for byte.
    Returns the last Result (of the first device's output path)."""
    first = None
    for dev in DEVICES:
        o = device_output(str(out), dev)
        r = run_ok(["--input", inp, "--output", o, "--device", dev] + list(opts), np_, **kw)
        if first is None:
            first = r
        else:
            assert_same_output(str(out), o)
    return first


# ---- comparing outputs ------------------------------------------------------------------------


def h5_datasets(path):
    """{dataset path: (array, chunks, compression, compression_opts, shuffle)} outside /histeq_dist."""
    found = {}
    with h5py.File(path, "r") as f:

        def visit(name, obj):
            if isinstance(obj, h5py.Dataset) and not name.startswith("histeq_dist"):
                found["/" + name] = (obj[()], obj.chunks, obj.compression, obj.compression_opts, obj.shuffle)

        f.visititems(visit)
    return found


def assert_same_output(a, b):
    if os.path.isdir(a):
        # Only what the program writes: a --force run into a directory keeps the user's other files,
        # which the second device's fresh directory does not have.
        pngs = lambda d: sorted(n for n in os.listdir(d) if n.lower().endswith(".png"))
        na, nb = pngs(a), pngs(b)
        assert na == nb, f"{a} and {b} hold different files: {na} vs {nb}"
        for n in na:
            assert_same_output(os.path.join(a, n), os.path.join(b, n))
    elif h5py.is_hdf5(a):
        da, db = h5_datasets(a), h5_datasets(b)
        assert sorted(da) == sorted(db)
        for k in da:
            assert da[k][0].dtype == db[k][0].dtype and da[k][0].shape == db[k][0].shape, k
            assert da[k][0].tobytes() == db[k][0].tobytes(), f"{a} and {b} differ in {k}"
        with h5py.File(a, "r") as fa, h5py.File(b, "r") as fb:
            if "histeq_dist/global_histogram" in fa:
                assert np.array_equal(fa["histeq_dist/global_histogram"][()], fb["histeq_dist/global_histogram"][()])
    else:
        assert file_hash(a) == file_hash(b), f"{a} and {b} differ"


def assert_array_equal(got, want, what=""):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, want {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, want {want.dtype}"
    if not np.array_equal(got, want):
        bad = np.argwhere(got != want)
        i = tuple(bad[0])
        raise AssertionError(
            f"{what}: {len(bad)} of {got.size} samples differ; first at {i}: got {got[i]}, want {want[i]}")


def file_hash(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def tree_hash(path):
    """Hash of a file or of every file under a directory (names and contents; a FIFO or another
    special file by its name and kind, never opened)."""
    if os.path.isfile(path):
        return file_hash(path)
    h = hashlib.sha256()
    for dp, dns, fns in sorted(os.walk(path)):
        dns.sort()
        for n in sorted(fns):
            p = os.path.join(dp, n)
            what = file_hash(p) if os.path.isfile(p) else f"special {stat.S_IFMT(os.lstat(p).st_mode):o}"
            h.update(os.path.relpath(p, path).encode() + b"\0" + what.encode())
    return h.hexdigest()


def read_png(path):
    return pngio.read(path)
