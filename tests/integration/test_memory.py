"""--memory: a per-rank budget for the pixels a rank holds at once (the blocks in flight and those
kept between the passes). Blocks shrink to fit it; a budget below three of the smallest blocks the
input allows (a compressed chunk, a whole PNG) is refused up front, naming the smallest that works,
and that one does work. The end-of-run summary reports the peak RSS (and device memory)."""
import json
import os
import re

import h5py
import numpy as np
import pytest

import clahe_ref
import pngio
import reference as ref
from helpers import DEVICES, assert_array_equal, equalize, read_png, run, run_ok

E_USAGE = 2
MIN_HINT = re.compile(r"use --memory (\d+)K or more")


def inputs(tmp, kind):
    """(input, output, check(out)) with 32 KiB compressed chunks (h5) or a 176 KiB image (png)."""
    if kind == "h5":
        a = ref.low_contrast(500, 600, 1000, 3000, np.uint16, seed=80)
        inp = tmp / "in.h5"
        with h5py.File(inp, "w") as f:
            f.create_dataset("img", data=a, chunks=(128, 128), compression="gzip")

        def check(out):
            with h5py.File(out, "r") as f:
                assert_array_equal(f["img"][()], ref.equalize_one(a, 16), "img")

        return inp, "out.h5", "in.h5:/img", 3 * 32, check
    a = ref.low_contrast_rgb(200, 300, 40, 90, np.uint8, seed=81)
    inp = tmp / "in.png"
    pngio.write(inp, a, 8, pngio.RGB)

    def check(out):
        assert_array_equal(read_png(out).samples.reshape(a.shape), ref.equalize_one(a, 8), "png")

    return inp, "out.png", "in.png", (3 * 200 * 300 * 3 + 1023) // 1024, check


@pytest.mark.parametrize("np_", [None, 2], ids=["single", "np2"])
@pytest.mark.parametrize("kind", ["h5", "png"])
def test_memory_too_small_is_refused_with_the_minimum(tmp, kind, np_):
    inp, out_name, named, min_k, check = inputs(tmp, kind)
    out = tmp / out_name
    r = run(["--input", inp, "--output", out, "--device", DEVICES[0], "--memory", "40K"], np_, timeout=60)
    assert not r.timed_out and r.rc == E_USAGE, f"want exit 2\n{r}"
    lines = r.err_lines if np_ is None else r.hq_lines
    assert len(lines) == 1 and named in lines[0] and "--memory" in lines[0], f"want one line naming {named}\n{r}"
    m = MIN_HINT.search(lines[0])
    assert m and int(m.group(1)) == min_k, f"want the minimum {min_k}K\n{r}"
    assert not out.exists()
    # The minimum works, and one KiB less does not.
    equalize(inp, out, "--memory", f"{min_k}K", np_=np_)
    check(out)
    r = run(["--input", inp, "--output", tmp / ("less_" + out_name), "--device", DEVICES[0], "--memory",
             f"{min_k - 1}K"], np_, timeout=60)
    assert r.rc == E_USAGE, str(r)


def test_blocks_shrink_to_the_budget(tmp):
    """--block 256M, --memory 300K: blocks of at most 100K, so several of them, same bytes."""
    a = ref.low_contrast(1000, 777, 20000, 23000, np.uint16, seed=82)
    inp = tmp / "in.h5"
    with h5py.File(inp, "w") as f:
        f.create_dataset("big", data=a)
    r = equalize(inp, tmp / "small.h5", "-v", "--memory", "300K", "--block", "256M")
    blocks = [int(m.group(1)) for m in re.finditer(r"; (\d+) blocks, \d+ pixels", r.err)]
    assert blocks and blocks[0] >= 1000 * 777 * 2 // (100 * 1024), f"want blocks of at most 100K\n{r}"
    with h5py.File(tmp / "small.h5", "r") as f:
        assert_array_equal(f["big"][()], ref.equalize_one(a, 16), "big")


def summary_of(tmp, inp, name, *opts, np_=None):
    s = tmp / f"{name}.json"
    # Views as a fixed choice: left to the rank's own measurement (in_view.c), one run could view
    # its blocks and the other read them, and a view's populated pages count in the RSS compared.
    r = run_ok(["--input", inp, "--output", tmp / f"{name}.h5", "--device", DEVICES[0], "--summary", s] +
               list(opts), np_, env={"HQ_INPUT_VIEW": "1"})
    return json.loads(s.read_text()), r


def test_peak_memory_reported_and_bounded(tmp):
    """A 48 MB image, half of it held by each of two ranks between the passes (scope global), against
    the same under an 8M budget: the summary's peak RSS shows the difference, in the JSON and on the
    summary line."""
    a = np.tile(ref.low_contrast(600, 800, 50, 90, np.uint8, seed=83), (10, 10))
    inp = tmp / "in.h5"
    with h5py.File(inp, "w") as f:
        f.create_dataset("img", data=a)
    big, r = summary_of(tmp, inp, "big", np_=2)
    small, _ = summary_of(tmp, inp, "small", "--memory", "8M", np_=2)
    assert isinstance(big["peak_rss_bytes"], int) and big["peak_rss_bytes"] >= 24_000_000, big
    assert small["peak_rss_bytes"] + 12_000_000 < big["peak_rss_bytes"], (small["peak_rss_bytes"], big["peak_rss_bytes"])
    if DEVICES[0] == "cpu":
        assert big["device_peak_bytes"] is None
    else:
        assert big["device_peak_bytes"] is None or big["device_peak_bytes"] > 0
    assert re.search(r"; peak RSS \d+\.\d MiB", r.err), str(r)


def blocks_of(r):
    return [int(m.group(1)) for m in re.finditer(r"; (\d+) blocks, \d+ pixels", r.err)]


@pytest.mark.parametrize("np_", [None, 2], ids=["single", "np2"])
def test_default_blocks_cut_a_share_into_sixteen(tmp, np_):
    """Without --block a rank's share is cut into at least 16 blocks, none under 16 MiB and none over
    256 MiB: 64 images of 1 MiB make 16 MiB blocks (4 for one rank, 2 for each of two), 512 of them
    (never written: only the blocks are counted) make 32 MiB blocks at one rank; --block as given
    stays."""
    small = tmp / "small.h5"
    with h5py.File(small, "w") as f:
        f.create_dataset("stack", data=np.tile(ref.low_contrast(1024, 1024, 10, 200, np.uint8, seed=84), (64, 1, 1)),
                         chunks=(1, 1024, 1024))
    r = equalize(small, tmp / "small_eq.h5", "-v", np_=np_)
    assert blocks_of(r) == ([4] if np_ is None else [2, 2]), str(r)
    r = equalize(small, tmp / "small_b.h5", "-v", "--block", "4M", np_=np_)
    assert blocks_of(r) == ([16] if np_ is None else [8, 8]), str(r)
    if np_ is None:
        big = tmp / "big.h5"
        with h5py.File(big, "w") as f:
            f.create_dataset("stack", shape=(512, 1024, 1024), dtype=np.uint8, chunks=(1, 1024, 1024))
        r = run_ok(["--input", big, "--output", tmp / "big_eq.h5", "-v", "--device", "copy"])
        assert blocks_of(r) == [16], str(r)


@pytest.mark.parametrize("np_", [None, 2], ids=["single", "np2"])
def test_image_luts_go_to_the_output_not_into_memory(tmp, np_):
    """Each image's LUT is written into the output as it is built, not held until close: a 16-bit
    CLAHE image's tile LUTs are 8 MiB (64 tiles of 65,536 levels), so 24 images held would add
    168 MiB to the peak RSS of 3 (measured before the change: 88 -> 257 MiB). Every one of them is in
    the output all the same, equal to the reference's."""
    rng = np.random.default_rng(86)
    peaks = {}
    for n in (3, 24):
        a = rng.integers(0, 65536, (n, 64, 64), dtype=np.uint16)
        inp = tmp / f"in{n}.h5"
        with h5py.File(inp, "w") as f:
            f["s"] = a
        s, _ = summary_of(tmp, inp, f"clahe{n}", "--method", "clahe", np_=np_)
        peaks[n] = s["peak_rss_bytes"]
        with h5py.File(tmp / f"clahe{n}.h5", "r") as f:
            lut = f["histeq_dist/lut/s"]
            assert lut.shape == (n, 8, 8, 1, 65536), lut.shape
            geo = clahe_ref.geometry(64, 64, (8, 8))
            for k in (0, n // 2, n - 1):  # first, middle, last: each written by the rank that built it
                want = clahe_ref.tile_luts(a[k], 65536, geo, 40.0).astype(np.uint16)
                assert_array_equal(lut[k, :, :, 0, :], want, f"slice {k}")
    assert peaks[24] - peaks[3] < 48 * 2**20, peaks


# ---- address-space limits (ulimit -v) -------------------------------------------------------------
# Clusters that bound jobs with `ulimit -v` (h_vmem) made libgomp end the run with its own message
# (exit 1) and HDF5 1.10 crash in H5Fcreate (SIGSEGV). The threads now start before any work, the
# pixel budget fits what the limit leaves, and what cannot be done is one line and exit 6 (out of
# memory), never a crash and never an output. The CPU engine: CUDA maps far more address space than
# such limits leave, which is the driver's business.

E_MEM = 6
# AddressSanitizer maps terabytes of shadow memory at start: nothing runs under a ulimit -v.
no_asan = pytest.mark.skipif("ASAN_OPTIONS" in os.environ,
                             reason="AddressSanitizer cannot start under an address-space limit")


def limited(args, kib, np_=None, timeout=60):
    """The program under `ulimit -v kib` (the shell sets it, then execs mpirun or the program)."""
    import subprocess

    from helpers import Result, command, run_env
    cmd = ["sh", "-c", f'ulimit -v {kib} && exec "$@"', "sh"] + command(args, np_)
    p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, errors="replace",
                       env=run_env(), timeout=timeout)
    return Result(cmd, p.returncode, p.stdout, p.stderr, False)


_STARTS = {}


def starts_under(kib, np_=None):
    """Whether the program gets through MPI_Init and option parsing (--version) under the limit:
    some MPI stacks abort in their own start-up below a platform-dependent floor (Ubuntu 24.04's
    Open MPI: 'PTHREAD ERROR in pthread_scheduler_init', SIGABRT, at 1 GB on a 16-core node),
    before this program runs a line; such limits say nothing about it."""
    key = (kib, np_)
    if key not in _STARTS:
        _STARTS[key] = limited(["--version"], kib, np_).rc == 0
    return _STARTS[key]


def limit_input(tmp):
    a = ref.low_contrast(512, 640, 30, 200, np.uint8, seed=84)
    stack = np.stack([a, a[::-1], a[:, ::-1], a[::-1, ::-1]])
    inp = tmp / "in.h5"
    with h5py.File(inp, "w") as f:
        f.create_dataset("stack", data=stack, chunks=(1, 128, 640))
    return inp, stack


def no_output_left(out):
    d = out.parent
    left = [p.name for p in d.iterdir() if p.name.startswith(out.name)]
    assert not left, f"left behind: {left}"


@no_asan
def test_too_many_threads_for_the_limit_is_one_line(tmp):
    if not starts_under(200000):
        pytest.skip("this platform's MPI cannot start under ulimit -v 200000")
    inp, _ = limit_input(tmp)
    out = tmp / "out.h5"
    r = limited(["-i", inp, "-o", out, "--device", "cpu", "--threads", "16"], 200000)
    assert r.rc == E_MEM, f"want exit 6\n{r}"
    assert len(r.err_lines) == 1 and "16 threads" in r.err_lines[0] and "ulimit -v 200000" in r.err_lines[0], str(r)
    assert "libgomp" not in r.err, str(r)
    no_output_left(out)


@no_asan
def test_memory_beyond_the_limit_is_refused(tmp):
    kib = next((k for k in (600000, 1000000, 2000000, 3000000) if starts_under(k)), None)
    if kib is None:
        pytest.skip("this platform's MPI cannot start under a ulimit -v of 3 GB")
    inp, _ = limit_input(tmp)
    out = tmp / "out.h5"
    r = limited(["-i", inp, "-o", out, "--device", "cpu", "--threads", "2", "--memory", "4G"], kib)
    assert r.rc == E_MEM, f"want exit 6\n{r}"
    assert len(r.err_lines) == 1 and "--memory 4.0 GiB" in r.err_lines[0] and "ulimit -v" in r.err_lines[0], str(r)
    no_output_left(out)


@no_asan
@pytest.mark.parametrize("np_", [None, 2], ids=["single", "np2"])
def test_default_budget_fits_the_limit(tmp, np_):
    """The default budget (RAM/4/ranks, gigabytes here) would not fit 600 MB of address space: it
    shrinks to what does, and the output is the unlimited run's."""
    kib = next((k for k in (600000, 1000000, 2000000, 3000000) if starts_under(k, np_)), None)
    if kib is None:
        pytest.skip("this platform's MPI cannot start under a ulimit -v of 3 GB")
    inp, stack = limit_input(tmp)
    out = tmp / "out.h5"
    r = limited(["-i", inp, "-o", out, "--device", "cpu", "--threads", "2", "-q"], kib, np_)
    assert r.rc == 0, str(r)
    with h5py.File(out, "r") as f:
        got = f["stack"][()]
    for k in range(len(stack)):
        assert_array_equal(got[k], ref.equalize_one(stack[k], 8), f"slice {k}")


def png_limit_input(tmp):
    """Three 2048x2048 PNGs: blocks of a whole image (4 MiB), so that a budget cut by the limit can
    fall below three of them (it was then a usage error, exit 2, advising a --memory the same limit
    refused)."""
    d = tmp / "pngs"
    d.mkdir()
    imgs = [ref.low_contrast(2048, 2048, 30 + 10 * k, 200, np.uint8, seed=85 + k) for k in range(3)]
    for k, im in enumerate(imgs):
        pngio.write(d / f"p{k}.png", im, 8, pngio.GRAY)
    return d, imgs


@no_asan
@pytest.mark.parametrize("threads,kind", [(1, "h5"), (16, "h5"), (2, "png")])
def test_any_limit_ends_in_a_result_or_one_line(tmp, threads, kind):
    """From limits too small for anything to ones that fit (from the lowest at which this platform's
    MPI starts at all): each run either equalizes correctly or stops with exit 6 and one line naming
    the limit; never a signal, never libgomp's exit 1, never a usage error for a budget the user
    did not give, never an output left by a failed run."""
    if kind == "h5":
        inp, stack = limit_input(tmp)
    else:
        inp, imgs = png_limit_input(tmp)
    seen = set()
    floor = next((k for k in range(100000, 4000001, 100000) if starts_under(k)), None)
    if floor is None:
        pytest.skip("this platform's MPI cannot start under a ulimit -v of 4 GB")
    # Fine steps near the floor, then coarse ones up to where a 16-core node's runs fit too. Whole
    # 4 MiB images leave a window of a few MiB in which the budget holds one or two blocks, not
    # three: steps of 4 MB find it.
    step = 50000 if kind == "h5" else 4000
    for kib in list(range(floor, floor + 600001, step)) + [1000000, 1500000, 2000000, 3000000, 4000000]:
        if 0 in seen or not starts_under(kib):
            continue
        out = tmp / (f"out_{kib}.h5" if kind == "h5" else f"out_{kib}")
        args = ["-i", inp, "-o", out, "--device", "cpu", "--threads", str(threads), "-q"]
        r = limited(args, kib)
        # Near the floor Open MPI's own start-up fails now and then (GPU node: 'PTHREAD ERROR',
        # SIGABRT; 'unable to open mca_...'), before a line of this program runs: such a run is
        # tried once more, and where it still says nothing of its own and --version cannot start
        # either, the limit is the platform's.
        if r.rc not in (0, E_MEM) and not [l for l in r.err.splitlines() if l.startswith("histeq_dist")]:
            r = limited(args, kib)
            if (r.rc not in (0, E_MEM) and not [l for l in r.err.splitlines() if l.startswith("histeq_dist")]
                    and limited(["--version"], kib).rc != 0):
                continue
        assert r.rc in (0, E_MEM), f"ulimit -v {kib}: want 0 or 6\n{r}"
        seen.add(r.rc)
        if r.rc == 0 and kind == "h5":
            with h5py.File(out, "r") as f:
                assert_array_equal(f["stack"][1], ref.equalize_one(stack[1], 8), f"ulimit -v {kib}")
        elif r.rc == 0:
            assert_array_equal(read_png(out / "p1.png").samples[:, :, 0], ref.equalize_one(imgs[1], 8),
                               f"ulimit -v {kib}")
        else:
            # Near the floor Open MPI may also say that it could not map one of its components
            # ('[host:pid] mca_base_component_repository_open: ... (ignored)'): its line, not ours.
            assert len(r.hq_lines) == 1 and ("ulimit -v" in r.hq_lines[0] or "out of memory" in r.hq_lines[0]), \
                f"ulimit -v {kib}\n{r}"
            no_output_left(out)
    assert 0 in seen, f"no limit up to 4 GB let the run through: {seen}"
    if floor <= 200000:  # where the MPI starts that low (this 2-core VM), the lowest limits refuse
        assert E_MEM in seen, f"the sweep should cross from refusals to runs: {seen}"


@pytest.mark.skipif("ASAN_OPTIONS" in os.environ, reason="AddressSanitizer keeps freed batches in quarantine")
def test_many_tiny_16bit_images_in_one_block_stay_within_memory(tmp):
    """A block of many whole images held a u64 histogram and a u16 LUT of 65,536 bins for each at
    once: 640 KiB an image, so a stack of 4 x 4 16-bit slices took 1 GB of memory at 8,000 slices and
    ended in exit 6 (or, for float data, the kernel's OOM killer) at 64,000, whatever --memory said.
    The tables now go in batches of at most 64 MiB; every image comes out as before."""
    a = np.random.default_rng(2).integers(10, 60, (1600, 4, 5)).astype(np.uint16)
    inp, few = tmp / "in.h5", tmp / "few_in.h5"
    with h5py.File(inp, "w") as f:
        f.create_dataset("s", data=a)
    with h5py.File(few, "w") as f:
        f.create_dataset("s", data=a[:50])
    s, _ = summary_of(tmp, inp, "out")
    base, _ = summary_of(tmp, few, "few")  # the same run on 50 slices: what the process takes anyway
    # 1,550 slices more held 1 GB of tables before (peak 249 MB against 47 MB, as most bins are
    # never touched); now at most a 64 MiB batch.
    assert s["peak_rss_bytes"] - base["peak_rss_bytes"] < 90_000_000, (s["peak_rss_bytes"], base["peak_rss_bytes"])
    with h5py.File(tmp / "out.h5", "r") as f:
        for k in (0, 799, 1599):
            assert_array_equal(f["s"][k], ref.equalize_one(a[k], 16), f"slice {k}")


@pytest.mark.skipif("ASAN_OPTIONS" in os.environ, reason="AddressSanitizer's shadow and quarantine count in the RSS")
def test_a_million_chunks_stay_within_memory(tmp):
    """HDF5's metadata cache counts a chunk B-tree node by its 2.6 KiB on disk, but holds it with
    native keys of 33 offsets each, about 18 KiB: with 1.10's default ceiling of 32 MiB a file's
    cache grew to hundreds of MiB on an image of a million chunks (its index walked once to check
    the one-pass reader), outside --memory. The caches of the input and the output are now capped
    at 2 MiB. A 4 MB image in 2 x 2 chunks against the same image in 256 x 256 chunks, each under
    --memory 1M: the difference is what a million chunks cost, the chunk tables (24 bytes a chunk)
    and the capped caches; the output is the same."""
    a = (np.add.outer(np.arange(2048), np.arange(2048)) // 64 % 50 + 100).astype(np.uint8)
    many, few = tmp / "many.h5", tmp / "few.h5"
    with h5py.File(many, "w") as f:
        f.create_dataset("img", data=a, chunks=(2, 2))
    with h5py.File(few, "w") as f:
        f.create_dataset("img", data=a, chunks=(256, 256))
    opts = ("--memory", "1M", "--block", "64K")
    s, _ = summary_of(tmp, many, "many_out", *opts)
    base, _ = summary_of(tmp, few, "few_out", *opts)
    # Before: 120 MB more (143 MB against 23 MB on the 2-core VM); now 63 MB, 25 MB of it the tables.
    assert s["peak_rss_bytes"] - base["peak_rss_bytes"] < 90_000_000, (s["peak_rss_bytes"], base["peak_rss_bytes"])
    with h5py.File(tmp / "many_out.h5", "r") as f:
        assert_array_equal(f["img"][()], ref.equalize_one(a, 8), "img")
