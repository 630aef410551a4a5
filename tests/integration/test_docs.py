"""Every command shown in README.md and bench/README.md runs as written.

The shell commands of both files are extracted (indented code blocks and ```sh/```bash fences;
a command ends where `bash -n` accepts the lines so far, so continuation lines and multi-line
loops stay whole) and run one after the other, in the order of the documents, with bash, from the
root of a fresh copy of the source tree (its tracked and untracked, not ignored files, plus a copy
of the build that HQ_BIN belongs to as build/), with histeq_dist on PATH. README's ```python
blocks run with python3 the same way. The files the usage examples name (dataset.h5, scans.h5,
body.h5, slides/, huge.h5, phantoms.h5, in.h5/out.h5) are made first, small.

What cannot run here is in SKIP, each with its reason: a GPU, a SLURM controller, the network, the
reader's own data, placeholders, or minutes of benchmark. A chain `A && B` is judged piece by
piece, so `sh .ci/deps.sh && make demo` runs `make demo`. test_skip_list_is_used keeps SKIP honest.
"""
import os
import re
import shutil
import subprocess
import sys

import h5py
import numpy as np
import pytest

import pngio
import reference as ref
from helpers import BIN, ROOT

DOCS = ["README.md", "bench/README.md"]
SHELL_LANGS = {"", "sh", "bash", "shell", "console"}
TIMEOUT = 900

GPU = "GPU machine only (nvcc for sm_90, a GPU, the device tool)"
SLURM = "needs a SLURM controller (make test-slurm runs the slurm/ scripts on one it starts)"
PLACEHOLDERS = "a synopsis: its upper-case words and [brackets] are placeholders"
# (regex over one command or one piece of an && chain, reason)
SKIP = [
    (r"^(sudo )?sh \.ci/deps\.sh$", "installs Debian packages with apt-get: root and the network (.ci/run runs it in CI)"),
    (r"^make test$", "runs this very suite, and test-slurm as root (.ci/run runs it in CI)"),
    (r"\[options\]", PLACEHOLDERS),
    (r"\bsbatch\b", SLURM),
    (r"^(squeue|sacct|scontrol) ", SLURM),
    (r"^tail -f histeq-JOBID", "follows a running job's log (JOBID: a placeholder) until interrupted"),
    (r"^find /data/slides", "lists the reader's own data (/data/slides)"),
    (r"^\[\d{4}-\d\d-\d\dT", "sample output, not a command"),
    (r"^build/bench/cpu_bench +# everything", "the full benchmark, minutes of both cores; the --only gray8 line runs the same binary"),
    (r"^build/bench/cpu_bench --threads 1,2", "a benchmark, minutes of both cores; the --only gray8 line runs the same binary"),
    (r"^(HQ_PNG_FAST=0 )?build/bench/png_bench 5", "a benchmark: about 3 minutes of both cores here; its build line runs"),
    (r"^bash bench/(device_run|device_full|profile_weak)\.sh", GPU),
    (r"\bnvcc\b|build/dma_paths|^WAYS=", GPU),
    (r"^bash bench/(e2e_hdf5|scaling|vm_memory|clahe_e2e)\.sh \[", PLACEHOLDERS + " (and its default device is the GPU or 32 GiB of /dev/shm)"),
    (r"^sh bench/device/make_devdeps\.sh", "downloads Debian packages with apt-get (the network) for the GPU machines"),
    (r"\.devdeps/perf|ldd /usr/bin/perf", "copies linux-perf for the GPU machines (a device-run aid; perf is not installed here)"),
    (r"^build/write_paths DIR GIB_PER_PROC P$", PLACEHOLDERS),
]


def bash_complete(text):
    return subprocess.run(["bash", "-n"], input=text, text=True, capture_output=True).returncode == 0


def code_blocks(path):
    """[(language, [(line number, text)])] of a Markdown file: fences and indented blocks."""
    lines = open(path, encoding="utf-8").read().split("\n")
    out, i, prev_blank = [], 0, True
    while i < len(lines):
        m = re.match(r"^```(\w*)\s*$", lines[i])
        if m:
            j, body = i + 1, []
            while j < len(lines) and not lines[j].startswith("```"):
                body.append((j + 1, lines[j]))
                j += 1
            out.append((m.group(1), body))
            i, prev_blank = j + 1, False
            continue
        if lines[i].startswith("    ") and prev_blank:
            body = []
            while i < len(lines) and (lines[i].startswith("    ") or
                                      (lines[i] == "" and i + 1 < len(lines) and lines[i + 1].startswith("    "))):
                body.append((i + 1, lines[i][4:]))
                i += 1
            out.append(("", body))
            prev_blank = False
            continue
        prev_blank = lines[i].strip() == ""
        i += 1
    return out


def commands(doc):
    """[(doc:line, language, text)]: shell commands one by one, python blocks whole."""
    found = []
    for lang, body in code_blocks(os.path.join(ROOT, doc)):
        if lang == "python":
            found.append((f"{doc}:{body[0][0]}", "python", "\n".join(t for _, t in body)))
            continue
        if lang not in SHELL_LANGS:
            continue
        cur, start = [], None
        for no, text in body:
            if not cur and (not text.strip() or text.lstrip().startswith("#")):
                continue
            start = start if cur else no
            cur.append(text)
            joined = "\n".join(cur)
            if not joined.endswith("\\") and bash_complete(joined):
                found.append((f"{doc}:{start}", "sh", joined))
                cur = []
        if cur:
            found.append((f"{doc}:{start}", "sh", "\n".join(cur)))
    return found


def skip_reason(piece):
    flat = re.sub(r"\s*\\\n\s*", " ", piece.strip())
    flat = re.sub(r"\s+#.*$", "", flat) if "\n" not in flat else flat
    for pattern, reason in SKIP:
        if re.search(pattern, flat) or re.search(pattern, piece.strip()):
            return pattern, reason
    return None, None


def plan(text):
    """What runs of a command, and why the rest does not: pieces of a top-level && chain are
    judged one by one (a chain split inside quotes or $() is not written in these documents)."""
    pieces = [p.strip() for p in text.split(" && ")] if "\n" not in text else [text]
    run_pieces, skipped = [], []
    for p in pieces:
        pattern, reason = skip_reason(p)
        if reason:
            skipped.append((pattern, reason))
        else:
            run_pieces.append(p)
    return " && ".join(run_pieces), skipped


ALL = [c for d in DOCS for c in commands(d)]


def h5_stack(path, dsets):
    with h5py.File(path, "w") as f:
        for name, (data, kw) in dsets.items():
            f.create_dataset(name, data=data, **kw)


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    """A fresh copy of the source tree with the current build, the example inputs, and the env."""
    top = tmp_path_factory.mktemp("docs")
    root = top / "src"
    try:
        listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                                check=True, stdout=subprocess.PIPE).stdout.decode().split("\0")
    except (OSError, subprocess.CalledProcessError):
        pytest.fail("git is needed to list the source tree")
    for rel in filter(None, listed):
        src = os.path.join(ROOT, rel)
        if os.path.isfile(src):
            os.makedirs(root / os.path.dirname(rel), exist_ok=True)
            shutil.copy2(src, root / rel, follow_symlinks=False)
    build = os.path.dirname(os.path.abspath(BIN))
    assert os.access(BIN, os.X_OK), f"{BIN} is not built"
    subprocess.run(["cp", "-a", build, str(root / "build")], check=True)
    bindir = top / "bin"
    bindir.mkdir()
    os.symlink(root / "build" / "histeq_dist", bindir / "histeq_dist")

    env = {k: v for k, v in os.environ.items()
           if k not in ("HQ_BIN", "HQ_MPIRUN_FLAGS", "MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    env.update(PATH=f"{bindir}:{env.get('PATH', '/usr/bin:/bin')}", OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1",
               OMPI_MCA_btl_vader_single_copy_mechanism="none",
               # scaling.sh's scratch and log places, and its closing write_paths run (4 GiB a
               # process by default) kept small.
               DIR=str(top / "scratch"), OUT=str(top / "out"), WP_GIB="0.25",
               # A command's own `mktemp -d` (bench/README.md's e2e_hdf5.sh line makes a 1 GiB stack and
               # two outputs there) lands in this workspace, which pytest removes, not in /tmp, where
               # every run of the suite left 3.1 GB behind.
               TMPDIR=str(top / "tmp"))
    (top / "tmp").mkdir()
    if not os.path.exists(os.path.join(build, "gpu", "gpu_engine.o")):
        env["CUDA"] = "0"  # the build is CPU-only: make must not add the GPU engine to it

    # The inputs the usage examples name.
    u16 = lambda n, s, seed: ref.stack_of(n, s, s, 1000, 1400, np.uint16, seed=seed)
    h5_stack(root / "dataset.h5", {"stack": (u16(4, 48, 100), {})})
    h5_stack(root / "scans.h5", {"ct/volume": (u16(5, 40, 101), {"chunks": (1, 40, 40), "compression": "gzip"}),
                                 "ct/scout": (u16(1, 50, 102)[0], {})})
    y, x = np.mgrid[0:40, 0:40]
    h5_stack(root / "body.h5", {"mask": ((((y - 20) ** 2 + (x - 20) ** 2) < 15 ** 2).astype(np.uint8), {})})
    h5_stack(root / "huge.h5", {"image": (ref.low_contrast(300, 400, 60, 120, np.uint8, seed=103),
                                          {"chunks": (100, 100)})})
    h5_stack(root / "in.h5", {"ct/volume": (u16(8, 32, 104), {})})
    (root / "slides").mkdir()
    for k in range(3):
        pngio.write(str(root / "slides" / f"s{k}.png"),
                    ref.low_contrast_rgb(40, 50, 30 + k, 140, np.uint8, seed=105 + k), 8, 2)
    subprocess.run([sys.executable, "tests/make_phantom.py", "make", "phantoms.h5", "--slices", "4", "--size", "64"],
                   cwd=root, check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["histeq_dist", "-q", "-i", "in.h5", "-o", "out.h5"], cwd=root, env=env, check=True)
    return root, env


@pytest.mark.parametrize("where,lang,text", ALL, ids=[w for w, _, _ in ALL])
def test_doc_command(ws, where, lang, text):
    root, env = ws
    if lang == "python":
        cmd = [sys.executable, "-c", text]
        shown = text
    else:
        runnable, skipped = plan(text)
        if not runnable:
            pytest.skip("; ".join(reason for _, reason in skipped))
        cmd = ["bash", "-c", runnable]
        shown = runnable
    p = subprocess.run(cmd, cwd=root, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, errors="replace", timeout=TIMEOUT)
    assert p.returncode == 0, f"{where}: exit {p.returncode}\n$ {shown}\n{p.stdout[-6000:]}"


def test_docs_have_commands():
    """The extraction finds the commands a reader meets first, whole."""
    texts = [t for _, _, t in ALL]
    assert "sh .ci/deps.sh && make demo" in texts
    assert any(t.startswith("mpirun -np 8 histeq_dist --input dataset.h5") for t in texts)
    assert any(t.startswith("make build/bench/cpu_bench") for t in texts)
    ran = [t for _, lang, t in ALL if lang == "python" or plan(t)[0]]
    assert len(ran) >= 15, ran


def test_skip_list_is_used():
    """Every entry of SKIP still matches a command: the list names only what exists."""
    used = {pattern for _, lang, t in ALL if lang != "python" for pattern, _ in plan(t)[1]}
    unused = [p for p, _ in SKIP if p not in used]
    assert not unused, f"SKIP entries that match no command: {unused}"
