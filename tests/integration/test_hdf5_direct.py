"""The HDF5 direct path (io/hdf5/direct*.c): pixel bytes moved by the backend's workers with
pread/pwrite at the offsets HDF5 gives, deflate and shuffle run by the project itself (libdeflate),
filtered chunks written with H5Dwrite_chunk on one rank. HQ_HDF5_DIRECT=0 keeps the library path,
as before; both must give the same datasets on every layout (contiguous, chunked, chunks that do not
divide the image, gzip, shuffle+gzip, big-endian, RGB, stacks), for 1-4 ranks and several thread
counts. Where both paths write the same bytes (unfiltered outputs; filtered ones written
collectively by HDF5 on several ranks) the stored bytes of every dataset must be equal, each chunk
at the same place (the files themselves differ in the times HDF5 records in object headers)."""
import os
import re
import shutil
import subprocess
import zlib

import h5py
import numpy as np
import pytest

import reference as ref
from helpers import assert_array_equal, assert_same_output, run, run_ok

DIRECT_NOTE = re.compile(r"HDF5 direct path: (\d+) of (\d+) blocks read, (\d+) of (\d+) written \((\d+) threads?")


def plain_file(p):
    """Unfiltered datasets of every layout; {dataset: expected}."""
    stack = ref.stack_of(3, 203, 301, 900, 1400, np.uint16, seed=80)
    rgb = ref.low_contrast_rgb(150, 171, 40, 90, np.uint8, seed=81)
    rgb_stack = ref.stack_of(2, 61, 47, 30, 90, np.uint8, seed=82, rgb=True)
    wide = ref.low_contrast(90, 2000, 60, 120, np.uint8, seed=83)
    be = ref.low_contrast(77, 91, 300, 900, np.uint16, seed=84)
    be_stack = ref.stack_of(2, 70, 66, 1000, 3000, np.uint16, seed=85)
    even = ref.low_contrast(128, 192, 10, 200, np.uint8, seed=86)
    slices = ref.stack_of(5, 50, 60, 20, 90, np.uint8, seed=87)
    with h5py.File(p, "w") as f:
        f.create_dataset("stack", data=stack, chunks=(1, 64, 50))  # edge chunks are partial
        f.create_dataset("rgb", data=rgb, chunks=(32, 40, 1))  # a chunk holds one channel
        f.create_dataset("rgb_stack", data=rgb_stack, chunks=(1, 16, 16, 3))
        f.create_dataset("wide", data=wide)  # contiguous
        f.create_dataset("be", data=be.astype(">u2"))  # contiguous, big-endian
        f.create_dataset("be_chunked", data=be_stack.astype(">u2"), chunks=(1, 32, 32))
        f.create_dataset("even", data=even, chunks=(64, 64))  # chunks divide the image
        f.create_dataset("deep", data=stack, chunks=(2, 64, 64))  # chunks deeper than a slice
        f.create_dataset("slices", data=slices, chunks=(1, 50, 60))  # a chunk per slice
        f.create_dataset("be_slices", data=be_stack.astype(">u2"), chunks=(1, 70, 66))
    return {
        "/stack": ref.equalize_stack(stack, 16)[0],
        "/rgb": ref.equalize_one(rgb, 8),
        "/rgb_stack": ref.equalize_stack(rgb_stack, 8)[0],
        "/wide": ref.equalize_one(wide, 8),
        "/be": ref.equalize_one(be, 16),
        "/be_chunked": ref.equalize_stack(be_stack, 16)[0],
        "/even": ref.equalize_one(even, 8),
        "/deep": ref.equalize_stack(stack, 16)[0],
        "/slices": ref.equalize_stack(slices, 8)[0],
        "/be_slices": ref.equalize_stack(be_stack, 16)[0],
    }


def packed_file(p, big_endian=False):
    """Filtered datasets: gzip, shuffle+gzip, RGB, stacks, a filter HDF5 keeps (fletcher32), and
    with big_endian a big-endian gzip one; {dataset: expected}. Parallel HDF5 refuses to write a
    filtered dataset that needs a type conversion ("Can't perform independent write with filters in
    pipeline ... datatype conversions were required"), on any rank count: the direct path writes it
    with one rank, and the library path (several ranks, or HQ_HDF5_DIRECT=0) from a byte-swapped
    copy with the dataset's own type as the memory type (io/hdf5/blocks.c)."""
    stack = ref.stack_of(3, 130, 170, 900, 1400, np.uint16, seed=90)
    gray = ref.low_contrast(120, 130, 10, 60, np.uint8, seed=91)
    rgb = ref.low_contrast_rgb(100, 90, 40, 90, np.uint8, seed=92)
    be = ref.low_contrast(77, 91, 300, 900, np.uint16, seed=93)
    slices8 = ref.stack_of(4, 40, 50, 20, 90, np.uint8, seed=94)
    with h5py.File(p, "w") as f:
        f.create_dataset("gz", data=gray, chunks=(32, 32), compression="gzip", compression_opts=1)
        f.create_dataset("shuf_gz", data=stack, chunks=(1, 64, 50), compression="gzip", shuffle=True)
        # Shuffle of one-byte samples changes nothing: the backend skips it both ways.
        f.create_dataset("shuf_gz8", data=gray, chunks=(40, 65), compression="gzip", shuffle=True)
        # Chunks of whole slices: each lies in a block as one run, in row order too.
        f.create_dataset("gz_slices", data=slices8, chunks=(1, 40, 50), compression="gzip", shuffle=True)
        f.create_dataset("gz_rgb", data=rgb, chunks=(25, 30, 3), compression="gzip", compression_opts=6)
        if big_endian:
            f.create_dataset("gz_be", data=be.astype(">u2"), chunks=(20, 91), compression="gzip", shuffle=True)
        f.create_dataset("fletcher", data=gray, chunks=(60, 65), compression="gzip", fletcher32=True)
    want = {
        "/gz": ref.equalize_one(gray, 8),
        "/shuf_gz": ref.equalize_stack(stack, 16)[0],
        "/shuf_gz8": ref.equalize_one(gray, 8),
        "/gz_slices": ref.equalize_stack(slices8, 8)[0],
        "/gz_rgb": ref.equalize_one(rgb, 8),
        "/gz_be": ref.equalize_one(be, 16),
        "/fletcher": ref.equalize_one(gray, 8),
    }
    if not big_endian:
        del want["/gz_be"]
    return want


def stored_bytes(path):
    """{dataset: [(chunk offset, filter mask, file address, stored bytes)]}: what lies in the file."""
    found = {}
    with h5py.File(path, "r") as f, open(path, "rb") as raw:

        def grab(addr, size):
            raw.seek(addr)
            return raw.read(size)

        def visit(name, d):
            if not isinstance(d, h5py.Dataset) or name.startswith("histeq_dist"):
                return
            if d.chunks is None:
                found[name] = [((), 0, d.id.get_offset(), grab(d.id.get_offset(), d.id.get_storage_size()))]
                return
            infos = [d.id.get_chunk_info(i) for i in range(d.id.get_num_chunks())]
            found[name] = sorted((c.chunk_offset, c.filter_mask, c.byte_offset, grab(c.byte_offset, c.size))
                                 for c in infos)

        f.visititems(visit)
    return found


def assert_same_stored_bytes(a, b):
    sa, sb = stored_bytes(a), stored_bytes(b)
    assert sorted(sa) == sorted(sb)
    for name in sa:
        assert len(sa[name]) == len(sb[name]), name
        for x, y in zip(sa[name], sb[name]):
            assert x == y, f"{name}: chunk at {x[0]} stored differently (address {x[2]} vs {y[2]})"


def direct_counts(r):
    m = DIRECT_NOTE.search(r.err)
    assert m, f"no direct-path note\n{r}"
    return tuple(int(x) for x in m.groups())


def equalize_as(inp, out, np_, threads, direct, *opts, env=None):
    e = {"HQ_HDF5_DIRECT": "1" if direct else "0"}
    e.update(env or {})
    r = run_ok(["--input", inp, "--output", out, "--device", "cpu", "--force", "-v", "--threads", threads] +
               list(opts), np_, env=e)
    return direct_counts(r)


def library_reference(tmp, inp, np_, threads, *opts, env=None):
    """The library path's output (HQ_HDF5_DIRECT=0), under the name and with the options the new
    path will use, so that the recorded command line is the same."""
    out = tmp / "out.h5"
    counts = equalize_as(inp, out, np_, threads, False, *opts, env=env)
    assert counts[0] == 0 and counts[2] == 0, f"HQ_HDF5_DIRECT=0 moved blocks the direct way: {counts}"
    ref_out = tmp / f"library_{np_}.h5"
    os.replace(out, ref_out)
    return out, ref_out


CASES = [(1, 1), (1, 2), (1, 3), (2, 1), (2, 2), (3, 2), (4, 1), (4, 3)]


@pytest.mark.parametrize("np_,threads", CASES)
@pytest.mark.parametrize("block", ["default", "tiles", "row-order"])
def test_unfiltered_layouts_same_bytes_as_the_library(tmp, np_, threads, block):
    """row-order: blocks laid out [slice][row][col] (HQ_BLOCK_ORDER=row), where a whole slice's
    chunk is still one run of the block."""
    inp = tmp / "plain.h5"
    want = plain_file(inp)
    opts = ["--block", "12K"] if block == "tiles" else ["--block", "300K"] if block == "row-order" else []
    env = {"HQ_BLOCK_ORDER": "row"} if block == "row-order" else None
    out, lib = library_reference(tmp, inp, np_, threads, *opts, env=env)
    read, nread, wrote, nwrote, nthreads = equalize_as(inp, out, np_, threads, True, *opts, env=env)
    assert nthreads == threads
    assert read > 0 and wrote > 0, f"the direct path moved nothing: {read}/{nread} read, {wrote}/{nwrote} written"
    with h5py.File(out, "r") as f:
        for name, w in want.items():
            assert_array_equal(f[name][()].astype(w.dtype), w, f"{np_} ranks, {threads} threads: {name}")
        assert f["be"].dtype == np.dtype(">u2") and f["be_chunked"].dtype == np.dtype(">u2")
    assert_same_stored_bytes(out, lib)


MAP_NOTE = "pixels written through a shared mapping"


@pytest.mark.parametrize("np_,threads", [(1, 2), (2, 1), (3, 2), (4, 3)])
@pytest.mark.parametrize("block", ["default", "tiles"])
def test_mapped_writes_same_bytes_as_the_library(tmp, np_, threads, block):
    """HQ_RESERVE=map (the default on tmpfs where a rank has 4 cores, forced here on any
    filesystem): every rank maps the output's pixel region and the workers copy blocks into it. The
    stored bytes must be the library path's, chunk for chunk."""
    inp = tmp / "plain.h5"
    want = plain_file(inp)
    opts = ["--block", "12K"] if block == "tiles" else []
    out, lib = library_reference(tmp, inp, np_, threads, *opts)
    r = run_ok(["--input", inp, "--output", out, "--device", "cpu", "--force", "-v", "--threads", threads] + opts,
               np_, env={"HQ_RESERVE": "map"})
    assert MAP_NOTE in r.err, f"the mapping was not used\n{r}"
    read, nread, wrote, nwrote, nthreads = direct_counts(r)
    assert wrote > 0, f"nothing written the direct way: {wrote}/{nwrote}"
    with h5py.File(out, "r") as f:
        for name, w in want.items():
            assert_array_equal(f[name][()].astype(w.dtype), w, f"{np_} ranks, {threads} threads: {name}")
    assert_same_stored_bytes(out, lib)


VIEW_NOTE = re.compile(r"; (\d+) read in place, from a mapping of the input")


@pytest.mark.parametrize("np_,threads,scope", [(1, 2, "image"), (2, 1, "image"), (3, 2, "image"), (1, 2, "global"),
                                               (2, 2, "tiles")])
def test_blocks_read_in_place(tmp, np_, threads, scope):
    """The CPU engine takes a block that lies in the file as it would in memory (one run of
    unfiltered native-order bytes) straight from a read-only mapping of the input: a whole-image
    block is remapped from there into the block it writes; a block of a bigger group (scope global,
    an image cut into blocks) is counted there in pass 1 and remapped from there in pass 2, nothing
    held between. The output is the one made with every block read (HQ_INPUT_VIEW=0), byte for
    byte, big-endian and partial-chunk layouts (read as before) included, and the input is
    unchanged; --device copy writes the input's pixels back."""
    inp = tmp / "plain.h5"
    if scope == "global":  # one layout for the one histogram: checked against the read path only
        want = None
        with h5py.File(inp, "w") as f:
            f.create_dataset("wide", data=ref.low_contrast(90, 2000, 60, 120, np.uint8, seed=96))
            f.create_dataset("slices", data=ref.stack_of(5, 50, 60, 20, 90, np.uint8, seed=97), chunks=(1, 50, 60))
            f.create_dataset("tiled", data=ref.low_contrast(150, 170, 30, 80, np.uint8, seed=98), chunks=(64, 64))
    else:
        want = plain_file(inp)
    before = inp.read_bytes()
    opts = ["--scope", "global"] if scope == "global" else ["--block", "12K"] if scope == "tiles" else []
    outs = {}
    for views in ("1", "0"):
        out = tmp / f"out_view{views}.h5"
        r = run_ok(["--input", inp, "--output", out, "--device", "cpu", "-v", "--threads", threads] + opts, np_,
                   env={"HQ_INPUT_VIEW": views})
        m = VIEW_NOTE.search(r.err)
        if views == "1":
            assert m and int(m.group(1)) > 0, f"no block was read in place\n{r}"
        else:
            assert not m, f"HQ_INPUT_VIEW=0 read blocks in place\n{r}"
        outs[views] = out
        with h5py.File(out, "r") as f:
            for name, w in (want or {}).items():
                assert_array_equal(f[name][()].astype(w.dtype), w, f"views {views}, {np_} ranks: {name}")
    assert_same_stored_bytes(outs["1"], outs["0"])
    assert inp.read_bytes() == before
    out = tmp / "copy.h5"
    r = run_ok(["--input", inp, "--output", out, "--device", "copy", "-v"] + opts, np_, env={"HQ_INPUT_VIEW": "1"})
    assert VIEW_NOTE.search(r.err), f"--device copy read no block in place\n{r}"
    # It counts nothing by design: no "nothing counted" note per image, and the closing line
    # says what it did.
    assert "nothing counted" not in r.err, f"--device copy noted empty histograms\n{r}"
    assert re.search(r"histeq_dist: copied \d+ image", r.err), f"--device copy's closing line\n{r}"
    with h5py.File(out, "r") as f, h5py.File(inp, "r") as g:
        for name in g:
            assert_array_equal(f[name][()], g[name][()], f"--device copy: {name}")


READS_NOTE = re.compile(r"; none read in place: a page of a mapping of the input took (\d+) ns to reach, a pread of it "
                        r"(\d+) ns")


@pytest.mark.parametrize("np_", [1, 2])
def test_views_only_where_they_pay(tmp, np_):
    """Unless HQ_INPUT_VIEW says, the first block of 64 pages or more measures what reaching its
    pages in the mapping costs against a pread of them, and the rank keeps the cheaper way: in a
    guest whose page tables the hypervisor shadows (the 2-core VM) a mapped page took ~2 us to
    reach and a pread of it ~0.3 us, and views made a 1 GiB run 1.7x slower. -v says which way
    was taken and, for reads, both figures; the output is the same either way."""
    inp = tmp / "in.h5"
    st = ref.stack_of(6, 256, 1024, 20, 90, np.uint8, seed=77)  # 256 KiB slices: 64 pages a block
    with h5py.File(inp, "w") as f:
        f.create_dataset("st", data=st, chunks=(1, 256, 1024))
    r = run_ok(["--input", inp, "--output", tmp / "auto.h5", "--device", "cpu", "-v"], np_)
    viewed, reads = VIEW_NOTE.search(r.err), READS_NOTE.search(r.err)
    assert bool(viewed) != bool(reads), f"-v says neither or both ways\n{r}"
    if reads:
        assert int(reads.group(1)) > int(reads.group(2)), f"reads taken where the mapping was cheaper\n{r}"
    run_ok(["--input", inp, "--output", tmp / "read.h5", "--device", "cpu"], np_, env={"HQ_INPUT_VIEW": "0"})
    assert_same_stored_bytes(tmp / "auto.h5", tmp / "read.h5")
    with h5py.File(tmp / "auto.h5", "r") as f:
        assert_array_equal(f["st"][()], np.stack([ref.equalize_one(s, 8) for s in st]), "stack")


def test_misaligned_data_read_not_viewed(tmp):
    """HDF5 may place a contiguous dataset at any byte of the file. A 16-bit image at an odd offset
    is read into a block, not worked on in place (the engines would read its samples through
    misaligned pointers, which UBSan caught); the same image one pad byte later is aligned and
    viewed. Both equalize exactly as the reference does. (Float data is never viewed.)"""
    img = ref.low_contrast(40, 30, 100, 900, np.uint16, seed=88)
    for pad in (3, 2):  # a misaligned start, then an aligned one
        inp = tmp / f"pad{pad}.h5"
        with h5py.File(inp, "w") as f:
            f.create_dataset("pad", data=np.zeros(pad, np.uint8))
            off = f.create_dataset("img", data=img).id.get_offset()
        aligned = off % 2 == 0
        assert aligned == (pad == 2), f"offset {off} for a pad of {pad}: the layout this test assumes changed"
        out = tmp / f"out{pad}.h5"
        r = run_ok(["--input", f"{inp}:/img", "--output", out, "--device", "cpu", "-v"], env={"HQ_INPUT_VIEW": "1"})
        m = VIEW_NOTE.search(r.err)
        viewed = int(m.group(1)) if m else 0
        assert (viewed > 0) == aligned, f"offset {off} (aligned: {aligned}) but {viewed} blocks read in place\n{r}"
        with h5py.File(out, "r") as f:
            assert_array_equal(f["img"][()], ref.equalize_one(img, 16), f"offset {off}")


@pytest.mark.parametrize("np_,threads", CASES)
def test_filtered_layouts_same_data_as_the_library(tmp, np_, threads):
    inp = tmp / "packed.h5"
    want = packed_file(inp)
    out, lib = library_reference(tmp, inp, np_, threads)
    read, nread, wrote, nwrote, _ = equalize_as(inp, out, np_, threads, True)
    assert read > 0, f"no block read the direct way ({read} of {nread})"
    if np_ == 1:
        assert wrote > 0, f"one rank: no filtered block written with H5Dwrite_chunk ({wrote} of {nwrote})"
    else:
        assert wrote == 0, "several ranks must write filtered datasets collectively, through HDF5"
    assert_same_output(str(out), str(lib))
    with h5py.File(out, "r") as f:
        for name, w in want.items():
            assert_array_equal(f[name][()].astype(w.dtype), w, f"{np_} ranks, {threads} threads: {name}")
        assert f["shuf_gz"].shuffle and f["shuf_gz"].compression == "gzip"
        assert f["gz_rgb"].compression_opts == 6
        assert f["fletcher"].fletcher32
    if np_ > 1:  # HDF5 wrote the same compressed bytes either way
        assert_same_stored_bytes(out, lib)


@pytest.mark.skipif(shutil.which("h5dump") is None, reason="h5dump not installed")
def test_chunks_written_directly_read_back_with_h5dump(tmp):
    inp = tmp / "packed.h5"
    want = packed_file(inp, big_endian=True)
    out = tmp / "out.h5"
    equalize_as(inp, out, 1, 2, True)
    for name, w in want.items():
        p = subprocess.run(["h5dump", "-d", name, "-b", "LE", "-o", str(tmp / "raw.bin"), str(out)],
                           capture_output=True, text=True)
        assert p.returncode == 0, f"h5dump cannot read {name}: {p.stderr}"
        got = np.fromfile(tmp / "raw.bin", dtype=w.dtype.newbyteorder("<")).reshape(w.shape)
        assert_array_equal(got.astype(w.dtype), w, f"h5dump {name}")


@pytest.mark.parametrize("np_,threads,direct", [(1, 1, True), (1, 2, True), (1, 2, False), (2, 2, True),
                                                 (3, 1, True)])
def test_big_endian_gzip_on_any_rank_count(tmp, np_, threads, direct):
    inp = tmp / "packed.h5"
    want = packed_file(inp, big_endian=True)
    out = tmp / "out.h5"
    read, nread, wrote, nwrote, _ = equalize_as(inp, out, np_, threads, direct)
    assert (wrote > 0) == (np_ == 1 and direct), (wrote, nwrote)
    with h5py.File(out, "r") as f:
        assert f["gz_be"].dtype == np.dtype(">u2") and f["gz_be"].shuffle
        for name, w in want.items():
            assert_array_equal(f[name][()].astype(w.dtype), w, name)


def test_level_one_deflate_by_igzip(tmp):
    """Level-1 chunks are deflated by ISA-L's igzip where the build has it (--version says so): their
    stored bytes differ from libdeflate's (HQ_ISAL=0), the data they decode to does not, and the
    other levels are libdeflate's either way."""
    version = run_ok(["--version"], None).out
    if "ISA-L" not in version:
        pytest.skip("built without ISA-L")
    inp = tmp / "packed.h5"
    packed_file(inp)
    a, b = tmp / "igzip.h5", tmp / "libdeflate.h5"
    equalize_as(inp, a, 1, 2, True)
    equalize_as(inp, b, 1, 2, True, env={"HQ_ISAL": "0"})
    assert_same_output(str(a), str(b))
    sa, sb = stored_bytes(a), stored_bytes(b)
    assert [x[3] for x in sa["gz"]] != [x[3] for x in sb["gz"]], "level 1: the same stored bytes with igzip"
    assert [x[3] for x in sa["gz_rgb"]] == [x[3] for x in sb["gz_rgb"]], "level 6 must stay libdeflate's"
    with h5py.File(a, "r") as f:
        assert f["gz"].compression_opts == 1


def test_compressed_chunks_same_bytes_for_any_thread_count(tmp):
    """One rank deflates chunks on its workers (igzip at level 1, libdeflate otherwise): each chunk's
    stored bytes are the same whichever worker, and however many, deflated it. igzip once let the
    address of its state pick a hash-table bucket (io/zfast.c; tests/unit/test_zfast.c)."""
    inp = tmp / "packed.h5"
    packed_file(inp, big_endian=True)
    runs = {}
    for threads in (1, 2, 3):
        out = tmp / f"t{threads}.h5"
        equalize_as(inp, out, 1, threads, True)
        runs[threads] = {name: [(c[0], c[1], c[3]) for c in chunks] for name, chunks in stored_bytes(out).items()}
    for threads in (2, 3):
        assert sorted(runs[threads]) == sorted(runs[1])
        for name in runs[1]:
            assert runs[threads][name] == runs[1][name], f"{name}: chunks stored differently with {threads} threads"


def test_corrupt_chunk_reads_the_same_on_either_path(tmp):
    """A chunk that does not inflate: the direct path hands the block back to HDF5, whose message
    the user sees, as before."""
    inp = tmp / "bad.h5"
    img = ref.low_contrast(64, 64, 10, 60, np.uint8, seed=95)
    with h5py.File(inp, "w") as f:
        f.create_dataset("gz", data=img, chunks=(32, 32), compression="gzip")
        off = f["gz"].id.get_chunk_info(1).byte_offset
    with open(inp, "r+b") as fh:
        fh.seek(off + 2)
        fh.write(b"\xff" * 16)
    errs = []
    for direct in ("0", "1"):
        r = run_ok_or_fail(["--input", inp, "--output", tmp / "o.h5", "--device", "cpu", "--force"], direct)
        errs.append(r)
    assert errs[0] == errs[1], f"library path: {errs[0]}\ndirect path: {errs[1]}"
    assert errs[0][0] == 4 and "cannot decompress" in errs[0][1]


@pytest.mark.parametrize("np_", [None, 2], ids=["single", "np2"])
@pytest.mark.parametrize("length", ["short", "long"])
def test_chunk_decoding_to_another_length_is_corrupt(tmp, np_, length):
    """A whole, valid zlib stream of 100 bytes (or 1300) where the chunk holds 1200: HDF5 1.10's
    deflate filter takes it and leaves the rest of the chunk as its buffer was, so the output held
    heap bytes, different on every run, marked complete. The direct path decodes every compressed
    chunk and refuses it (exit 4), naming the dataset."""
    a = np.random.default_rng(11).integers(0, 250, (4, 30, 40)).astype(np.uint8)
    inp = tmp / "short.h5"
    with h5py.File(inp, "w") as f:
        d = f.create_dataset("g", (4, 30, 40), dtype=np.uint8, chunks=(1, 30, 40), compression="gzip")
        for s in range(4):
            raw = a[s].tobytes()
            bad = raw[:100] if length == "short" else raw + raw[:100]
            d.id.write_direct_chunk((s, 0, 0), zlib.compress(bad if s == 1 else raw))
    before = inp.read_bytes()
    out = tmp / "o.h5"
    r = run(["--input", inp, "--output", out, "--device", "cpu"], np_)
    assert not r.timed_out and r.rc == 4, f"want exit 4\n{r}"
    lines = r.err_lines if np_ is None else r.hq_lines
    assert len(lines) == 1 and "short.h5:/g" in lines[0] and "cannot decompress" in lines[0], str(r)
    assert not out.exists() and inp.read_bytes() == before


def run_ok_or_fail(args, direct):
    r = run(args, 1, env={"HQ_HDF5_DIRECT": direct})
    assert not r.timed_out, str(r)
    return r.rc, "\n".join(r.hq_lines)
