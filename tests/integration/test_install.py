"""make install PREFIX=... puts the binary in PREFIX/bin, the man page (made at build time from the
--help text) in PREFIX/share/man/man1 and the SLURM scripts in PREFIX/share/histeq_dist/; the
installed binary runs; `man -l` renders the page, which lists every option of --help; make
uninstall leaves no file behind. Uses the build that HQ_BIN belongs to (BUILD=its directory)."""
import os
import re
import subprocess

import h5py
import numpy as np
import pytest

import reference as ref
from helpers import BIN, MPIRUN_FLAGS, ROOT, assert_same_output, run_ok

SCRIPTS = sorted(n for n in os.listdir(os.path.join(ROOT, "slurm")) if n.endswith(".sbatch"))


def make(*args):
    build = os.path.relpath(os.path.dirname(os.path.abspath(BIN)), ROOT)
    if build.startswith(".."):
        pytest.skip(f"{BIN} is not built inside the source tree")
    # The build's flavour: a CUDA=0 build holds gpu_none.o and no GPU objects.
    cuda = [] if os.path.exists(os.path.join(ROOT, build, "gpu", "gpu_engine.o")) else ["CUDA=0"]
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    p = subprocess.run(["make", "--no-print-directory", f"BUILD={build}"] + cuda + list(args), cwd=ROOT, env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    assert p.returncode == 0, p.stdout
    return p.stdout


def files_under(d):
    return sorted(os.path.relpath(os.path.join(dp, f), d) for dp, _, fs in os.walk(d) for f in fs)


def test_install_run_man_uninstall(tmp):
    prefix = tmp / "prefix"
    make("install", f"PREFIX={prefix}")
    want = ["bin/histeq_dist", "share/man/man1/histeq_dist.1"] + [f"share/histeq_dist/{n}" for n in SCRIPTS]
    assert files_under(prefix) == sorted(want)
    exe = prefix / "bin" / "histeq_dist"
    assert os.access(exe, os.X_OK)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_btl_vader_single_copy_mechanism="none", LANG="C", LC_ALL="C")

    # The installed binary runs, under mpirun, and writes what the build's binary writes.
    with h5py.File(tmp / "d.h5", "w") as f:
        f["s"] = ref.stack_of(3, 20, 30, 100, 900, np.uint16, seed=95)
    p = subprocess.run(["mpirun", "-np", "2"] + MPIRUN_FLAGS + [str(exe), "--input", "d.h5", "-q"], cwd=tmp, env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    run_ok(["--input", tmp / "d.h5", "--output", tmp / "want.h5"], 2)
    assert_same_output(str(tmp / "want.h5"), str(tmp / "d_eq.h5"))
    help_text = subprocess.run([str(exe), "--help"], env=env, stdout=subprocess.PIPE, text=True, timeout=60).stdout

    # The man page renders without warnings and carries every option of --help.
    page = prefix / "share" / "man" / "man1" / "histeq_dist.1"
    m = subprocess.run(["man", "--warnings", "-l", str(page)], env=dict(env, MANWIDTH="100", MANPAGER="cat", PAGER="cat"),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    assert m.returncode == 0 and m.stderr.strip() == "", m.stderr
    text = m.stdout
    assert "histeq_dist - histogram equalization" in text and "EXIT STATUS" in text, text
    options = sorted(set(re.findall(r"^ +(?:-\w, )?(--[a-z0-9-]+)", help_text, re.M)))
    assert len(options) > 20, help_text
    for o in options:
        assert re.search(rf"^ +(-\w, )?{re.escape(o)}\b", text, re.M), f"{o} is not in the man page"
    # The same words as --help, whatever the line breaks.
    words = lambda s: re.sub(r"\s+", " ", s.replace("\u2010", "-")).strip()
    assert words("Ranks histogram their share, reduce the histograms") in words(text)

    make("uninstall", f"PREFIX={prefix}")
    assert files_under(prefix) == []
    assert not os.path.exists(prefix / "share" / "histeq_dist")
