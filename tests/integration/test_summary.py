"""--summary FILE: the end-of-run summary as JSON, with counts that match the run, written once by
rank 0; an unwritable summary path is an I/O error (exit 1) named in one line; a path that names
a directory or a file the run reads or writes is refused before the run (exit 2), and nothing of
the user's is touched."""
import json
import os

import h5py
import numpy as np
import pytest

import pngio
import reference as ref
from helpers import DEVICES, run, run_ok, tree_hash


@pytest.mark.parametrize("np_", [None, 3], ids=["single", "np3"])
def test_summary_json(tmp, np_):
    stack = ref.stack_of(5, 30, 40, 60, 90, np.uint8, seed=90)
    inp = tmp / "in.h5"
    with h5py.File(inp, "w") as f:
        f.create_dataset("s", data=stack)
    summ = tmp / "run.json"
    run_ok(["--input", inp, "--output", tmp / "out.h5", "--device", DEVICES[0], "--summary", summ, "-q"], np_)
    s = json.loads(summ.read_text())
    assert s["images"] == 5 and s["pixels"] == 5 * 30 * 40 and s["bytes"] == 5 * 30 * 40
    assert s["ranks"] == (np_ or 1) and s["skipped"] == 0 and s["scope"] == "image"
    assert s["input"] == str(inp) and s["output"] == str(tmp / "out.h5")
    assert set(s["phases"]) == {"create", "read", "histogram", "allreduce", "remap", "write", "close"}
    assert all(p["max_s"] >= p["mean_s"] >= 0 for p in s["phases"].values())
    assert not [n for n in os.listdir(tmp) if ".part" in n]


def test_summary_unwritable(tmp):
    stack = ref.stack_of(2, 10, 10, 60, 90, np.uint8, seed=91)
    inp = tmp / "in.h5"
    with h5py.File(inp, "w") as f:
        f.create_dataset("s", data=stack)
    r = run(["--input", inp, "--output", tmp / "out.h5", "--device", DEVICES[0], "--summary", "/proc/x/run.json"])
    assert r.rc == 1 and len(r.err_lines) == 1 and "/proc/x/run.json" in r.err_lines[0], str(r)


def test_summary_leaves_a_users_part_file_alone(tmp):
    stack = ref.stack_of(2, 10, 10, 60, 90, np.uint8, seed=92)
    inp = tmp / "in.h5"
    with h5py.File(inp, "w") as f:
        f.create_dataset("s", data=stack)
    (tmp / "run.json.part").write_text("precious")
    run_ok(["--input", inp, "--output", tmp / "out.h5", "--device", DEVICES[0], "--summary", tmp / "run.json", "-q"])
    assert (tmp / "run.json.part").read_text() == "precious"
    assert json.loads((tmp / "run.json").read_text())["images"] == 2


def guarded_cases(tmp):
    """(name, args, summary path, files that must not change) for each file a run reads or writes."""
    a = ref.low_contrast(30, 40, 50, 100, np.uint8, seed=93)
    with h5py.File(tmp / "in.h5", "w") as f:
        f.create_dataset("img", data=a)
    with h5py.File(tmp / "done.h5", "w") as f:
        f.create_dataset("img", data=a)
    (tmp / "pngs").mkdir()
    for k in range(3):
        pngio.write(str(tmp / "pngs" / f"p{k}.png"), ref.low_contrast(20, 30, 40, 90, np.uint8, seed=94 + k), 8,
                    pngio.GRAY)
    pngio.write(str(tmp / "ref.png"), a, 8, pngio.GRAY)
    (tmp / "outdir").mkdir()
    (tmp / "adir").mkdir()
    os.symlink("in.h5", tmp / "link_to_in")
    os.symlink("out.h5", tmp / "link_to_out")
    os.symlink(".out.h5.lock", tmp / "link_to_lock")
    os.symlink("outdir/p0.png", tmp / "link_to_p0")
    h5 = ["--input", tmp / "in.h5", "--output", tmp / "out.h5"]
    return [
        ("input", h5, tmp / "in.h5", [tmp / "in.h5"]),
        ("input, spelled otherwise", h5, tmp / "." / "in.h5", [tmp / "in.h5"]),
        ("output not made yet", h5, tmp / "out.h5", []),
        ("output that exists", ["--input", tmp / "in.h5", "--output", tmp / "done.h5", "--force"], tmp / "done.h5",
         [tmp / "done.h5"]),
        ("directory", h5, tmp / "adir", [tmp / "adir"]),
        ("reference", h5 + ["--method", "match", "--reference", tmp / "ref.png"], tmp / "ref.png", [tmp / "ref.png"]),
        ("mask dataset's file", h5 + ["--mask", f"{tmp / 'done.h5'}:/img"], tmp / "done.h5", [tmp / "done.h5"]),
        ("an input PNG", ["--input", tmp / "pngs", "--output", tmp / "outdir"], tmp / "pngs" / "p1.png",
         [tmp / "pngs"]),
        ("a PNG the output directory will hold", ["--input", tmp / "pngs", "--output", tmp / "outdir"],
         tmp / "outdir" / "p2.png", [tmp / "pngs"]),
        ("the report's page", h5 + ["--report", tmp / "rep"], tmp / "rep" / "index.html", []),
        ("the report directory, not made yet", h5 + ["--report", tmp / "rep2"], tmp / "rep2", []),
        ("the output's journal", h5, tmp / "out.h5.journal", []),
        ("a file in the output's journal", h5, tmp / "out.h5.journal" / "id", []),
        ("the output's lock", h5, tmp / ".out.h5.lock", []),
        ("the output directory's completion mark", ["--input", tmp / "pngs", "--output", tmp / "outdir"],
         tmp / "outdir" / "histeq_dist.complete", [tmp / "pngs"]),
        ("the input through a link", h5, tmp / "link_to_in", [tmp / "in.h5"]),
        ("the output through a link, before it exists", h5, tmp / "link_to_out", []),
        ("the lock through a link, before it exists", h5, tmp / "link_to_lock", []),
        ("a PNG of the output directory through a link", ["--input", tmp / "pngs", "--output", tmp / "outdir"],
         tmp / "link_to_p0", [tmp / "pngs"]),
    ]


@pytest.mark.parametrize("np_", [None, 2], ids=["single", "np2"])
def test_summary_refuses_the_runs_own_files(tmp, np_):
    for name, args, summ, keep in guarded_cases(tmp):
        before = {str(p): tree_hash(str(p)) for p in keep}
        r = run(args + ["--device", DEVICES[0], "--summary", summ], np_)
        lines = r.err_lines if np_ is None else r.hq_lines
        assert r.rc == 2 and len(lines) == 1 and "--summary" in lines[0], f"{name}\n{r}"
        assert os.path.basename(str(summ)) in lines[0], f"{name}\n{r}"
        assert {str(p): tree_hash(str(p)) for p in keep} == before, name
        assert not (tmp / "out.h5").exists() and not os.listdir(tmp / "outdir"), name
        assert not [n for n in os.listdir(tmp) if ".part" in n], name


def test_summary_into_a_fifo_a_device_or_through_a_link(tmp):
    """FILE that is not a regular file (a FIFO, /dev/stdout, a link to /dev/null) is written into,
    not replaced: the summary went to FILE.part-PID and was renamed over it, which turned a FIFO
    into a file nobody read and, as root, /dev/null itself into a regular file. A link to a regular
    file has that file replaced and stays a link."""
    import stat
    import threading
    a = ref.low_contrast(20, 30, 40, 90, np.uint8, seed=97)
    inp = tmp / "in.h5"
    with h5py.File(inp, "w") as f:
        f.create_dataset("img", data=a)
    args = ["--input", inp, "--device", DEVICES[0], "--force", "-q"]
    fifo = tmp / "fifo"
    os.mkfifo(fifo)
    got = {}
    reader = threading.Thread(target=lambda: got.setdefault("text", open(fifo).read()))
    reader.start()
    run_ok(args + ["--output", tmp / "o1.h5", "--summary", fifo])
    reader.join(30)
    assert json.loads(got["text"])["images"] == 1 and stat.S_ISFIFO(os.lstat(fifo).st_mode)
    r = run_ok(args + ["--output", tmp / "o2.h5", "--summary", "/dev/stdout"])
    assert json.loads(r.out)["pixels"] == 20 * 30
    os.symlink("/dev/null", tmp / "null")
    run_ok(args + ["--output", tmp / "o3.h5", "--summary", tmp / "null"])
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode) and os.readlink(tmp / "null") == "/dev/null"
    (tmp / "real.json").write_text("old")
    os.symlink("real.json", tmp / "link.json")
    run_ok(args + ["--output", tmp / "o4.h5", "--summary", tmp / "link.json"])
    assert os.readlink(tmp / "link.json") == "real.json"
    assert json.loads((tmp / "real.json").read_text())["output"] == str(tmp / "o4.h5")
    assert not [n for n in os.listdir(tmp) if ".part" in n]
    # A socket passed the check (writable), then after all the work waited 10 s as for a FIFO.
    import socket
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp / "sock"))
    try:
        r = run(args + ["--output", tmp / "o5.h5", "--summary", tmp / "sock"])
        assert r.rc == 2 and r.err_lines == [f"histeq_dist: {tmp / 'sock'}: --summary FILE is a socket"], str(r)
        assert not (tmp / "o5.h5").exists()
    finally:
        sock.close()


def test_progress_told_through_both_passes(tmp):
    """--progress SEC: a line every SEC seconds, the percentage growing through pass 1 (histograms,
    nothing written) as through pass 2, not silent until the first write; --progress 0: none."""
    import re
    inp = tmp / "in.h5"
    with h5py.File(inp, "w") as f:
        # 32 Mpixel in 128-byte blocks: 12 s on a 2-core VM. 16 Mpixel took 5-10 s there, but
        # under 2 s on a 16-core host once small blocks stopped waking every thread: too short for
        # two lines a second apart.
        f.create_dataset("d", data=np.random.default_rng(3).integers(0, 255, (8192, 4096), dtype=np.uint8))
    args = ["--input", inp, "--output", tmp / "out.h5", "--device", DEVICES[0], "--block", "128", "--force"]
    r = run_ok(args + ["--progress", "1"])
    lines = progress_lines(r.err)
    pct = [p for p, *_ in lines]
    assert len(pct) >= 2 and pct == sorted(pct) and pct[-1] <= 100, r.err
    assert pct[0] < 50, f"pass 1 told nothing: {pct}\n{r.err}"
    for p, wpx, tpx, mib, tmib, secs in lines:
        # The MiB are the percentage's share of the input (32 MiB), and pass 1 writes nothing: the
        # MiB were half of both passes' bytes, the Mpixel only those written (80% done, 48 of 60).
        assert tpx == 33.6 and tmib == 32.0 and abs(mib - p / 100 * tmib) <= 0.1, r.err
        assert wpx <= tpx * max(0.0, 2 * p / 100 - 1) + 0.1, r.err
    r = run_ok(args + ["--progress", "0"])
    assert "% done" not in r.err


def progress_lines(err):
    """(percent, Mpixel written, of Mpixel, MiB, of MiB, seconds) of each progress line."""
    import re
    pat = (r"histeq_dist: (\d+\.\d)% done, (\d+\.\d) of (\d+\.\d) Mpixel written, (\d+\.\d) of (\d+\.\d) MiB in "
           r"(\d+\.\d) s \(\d+\.\d MiB/s\)")
    return [tuple(float(v) for v in m.groups()) for m in re.finditer(pat, err)]


def test_progress_of_a_resume_with_kept_histograms_reaches_its_end(tmp):
    """Killed in pass 2 of a global run, the resume keeps the journal's histogram and reads each
    block once; its progress still counted a histogram pass for them and stopped near 50%."""
    inp = tmp / "in.h5"
    with h5py.File(inp, "w") as f:
        f.create_dataset("d", data=np.random.default_rng(4).integers(0, 255, (8192, 4096), dtype=np.uint8))
    args = ["--input", inp, "--output", tmp / "out.h5", "--device", DEVICES[0], "--block", "128"]
    r = run(args + ["-q"], env={"HQ_FAULT_KILL": "0:100", "HQ_JOURNAL_FLUSH_S": "0"})
    assert r.rc != 0 and os.path.isdir(str(tmp / "out.h5") + ".journal"), str(r)
    r = run_ok(args + ["--resume", "--progress", "1"])
    assert "its histograms are kept" in r.err, r.err
    lines = progress_lines(r.err)
    assert lines and all(abs(mib - p / 100 * tmib) <= 0.1 for p, _, _, mib, tmib, _ in lines), r.err
    # Each line's percentage is the share of the pixels written, as the resume only writes.
    assert all(abs(p / 100 * tpx - wpx) <= 0.02 * tpx + 0.1 for p, wpx, tpx, *_ in lines), r.err


def test_names_that_are_not_utf8_keep_the_json_and_the_page_valid(tmp):
    """A Latin-1 file name ("caf\\xe9") is bytes the file system holds, not UTF-8: the --summary JSON
    and the --report page (both UTF-8) carry U+FFFD for it and stay valid."""
    d = os.fsencode(str(tmp)) + b"/lat\xe9"
    os.mkdir(d)
    for k, name in enumerate([b"caf\xe9.png", b"plain.png"]):
        pngio.write(os.fsdecode(d + b"/" + name), ref.low_contrast(20, 30, 40, 90, np.uint8, seed=60 + k), 8,
                    pngio.GRAY)
    summ = tmp / "run.json"
    run_ok(["--input", os.fsdecode(d), "--output", tmp / "out", "--device", DEVICES[0], "--summary", summ,
            "--report", tmp / "rep", "-q"])
    s = json.loads(summ.read_bytes().decode("utf-8", errors="strict"))
    assert s["input"].endswith("lat\ufffd") and s["images"] == 2
    page = (tmp / "rep" / "index.html").read_bytes().decode("utf-8", errors="strict")
    assert "caf\ufffd.png" in page or "caf&#xfffd;.png" in page


def test_summary_named_global_beside_reference_global(tmp):
    """'--reference global' names no file: a summary file called 'global' in the working
    directory is not "a file of --reference"."""
    stack = ref.stack_of(3, 20, 30, 60, 90, np.uint8, seed=93)
    inp = tmp / "in.h5"
    with h5py.File(inp, "w") as f:
        f.create_dataset("s", data=stack)
    r = run(["--input", inp, "--output", tmp / "out.h5", "--device", DEVICES[0], "--method", "match",
             "--reference", "global", "--summary", "global", "-q"], cwd=tmp)
    assert r.rc == 0, str(r)
    assert json.loads((tmp / "global").read_text())["images"] == 3


def test_progress_rounds_of_unequal_ranks_end_together(tmp):
    """Rank 0 (the progress reduction's root) passing a progress mark after another rank's last
    block: that round completes only once every rank has posted it. The end of the run used to
    wait for it before the ranks agreed how many rounds to post, and hung for ever (found by a
    helper: 2 ranks, --progress 1, an uneven collection). Rank 0's share here takes seconds (noise
    at zlib level 9 on one thread), rank 1's a moment (flat images)."""
    rng = np.random.default_rng(7)
    d = tmp / "in"
    d.mkdir()
    for i in range(40):
        pngio.write(d / f"a{i:02d}.png", rng.integers(0, 256, (1024, 1024), dtype=np.uint8), 8, pngio.GRAY, level=1)
    for i in range(40):
        pngio.write(d / f"b{i:02d}.png", np.full((1024, 1024), i * 5, np.uint8), 8, pngio.GRAY)
    for k in range(2):
        out = tmp / f"out{k}"
        r = run(["-i", d, "-o", out, "--png-level", "9", "--io-threads", "1", "--threads", "1",
                 "--progress", "1"], 2, timeout=60)
        assert not r.timed_out and r.rc == 0, str(r)
        assert (out / "histeq_dist.complete").exists()
