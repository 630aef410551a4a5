"""HDF5 links: a whole-file input's further names come back in the output. A dataset or group
reachable by several hard links is written once and every other hard link made again to the
output's object; soft links are made again with the same target path (dangling ones too);
external links are left out. A selected dataset (FILE.h5:/dset) gives that dataset alone, links
under /histeq_dist of an input this tool wrote are its record and are not copied, and --resume
does not make the links a second time (io/hdf5/links.c)."""
import os
import shutil

import h5py
import numpy as np
import pytest

import reference as ref
from helpers import assert_array_equal, equalize, run, run_ok

X = np.random.default_rng(0).integers(50, 100, (20, 30), dtype=np.uint8)
Z = np.random.default_rng(1).integers(0, 9, (8, 8), dtype=np.uint8)


def write_links(path):
    """The repro: x with a second hard link y and a soft link s; group g with a second hard link g2."""
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=X)
        f["y"] = f["x"]
        f["s"] = h5py.SoftLink("/x")
        g = f.create_group("g")
        g.create_dataset("z", data=Z)
        f["g2"] = g
    return str(path)


def links(path, under_own=False):
    """{link path: ('hard', object address) | ('soft', target) | ('external', (file, path))}, every link
    of the file as H5Lvisit meets them (each group entered once)."""
    found = {}
    with h5py.File(path, "r") as f:
        names = []
        f.id.links.visit(lambda n: names.append(n.decode()))
        for n in names:
            if n.startswith("histeq_dist") and not under_own:
                continue
            l = f.get(n, getlink=True)
            if isinstance(l, h5py.SoftLink):
                found["/" + n] = ("soft", l.path)
            elif isinstance(l, h5py.ExternalLink):
                found["/" + n] = ("external", (l.filename, l.path))
            else:
                found["/" + n] = ("hard", h5py.h5o.get_info(f.id, n.encode()).addr)
    return found


def check_repro_output(out):
    got = links(out)
    assert sorted(got) == ["/g", "/g/z", "/g2", "/s", "/x", "/y"], got
    assert got["/y"] == got["/x"], "y must be the same object as x"
    assert got["/g2"] == got["/g"], "g2 must be the same group as g"
    assert got["/s"] == ("soft", "/x")
    with h5py.File(out, "r") as f:
        assert f["x"].id == f["y"].id
        assert f["g"].id == f["g2"].id
        want_x = ref.equalize_one(X, 8)
        assert_array_equal(f["x"][()], want_x, "/x")
        assert_array_equal(f["y"][()], want_x, "/y")
        assert_array_equal(f["s"][()], want_x, "/s")
        assert_array_equal(f["g2/z"][()], ref.equalize_one(Z, 8), "/g2/z")
        assert f["g/z"].id == f["g2/z"].id


@pytest.mark.parametrize("np_", [None, 3], ids=["1rank", "3ranks"])
def test_hard_and_soft_links_made_again(tmp, np_):
    inp = write_links(tmp / "links.h5")
    out = tmp / "out.h5"
    equalize(inp, out, np_=np_)
    check_repro_output(out)
    with h5py.File(out, "r") as f:
        # Each image once: the LUTs are recorded under the datasets' own names only.
        assert sorted(f["histeq_dist/lut"].keys()) == ["g", "x"]
        assert list(f["histeq_dist/lut/g"].keys()) == ["z"]


@pytest.mark.parametrize("np_", [None, 3], ids=["1rank", "3ranks"])
def test_output_as_input_keeps_links_and_not_our_record(tmp, np_):
    inp = write_links(tmp / "links.h5")
    once, twice = tmp / "once.h5", tmp / "twice.h5"
    equalize(inp, once, np_=np_)
    first_own = links(once, under_own=True)
    with h5py.File(once, "a") as f:
        # Names under /histeq_dist of our own output are our record, not the user's: not copied.
        f["histeq_dist/extra_soft"] = h5py.SoftLink("/x")
        f["histeq_dist/lut/again"] = f["histeq_dist/lut/x"]
    equalize(once, twice, np_=np_)
    got = links(twice)
    assert sorted(got) == ["/g", "/g/z", "/g2", "/s", "/x", "/y"], got
    assert got["/y"] == got["/x"] and got["/g2"] == got["/g"] and got["/s"] == ("soft", "/x")
    own = {k for k in links(twice, under_own=True) if k.startswith("/histeq_dist")}
    assert own == {k for k in first_own if k.startswith("/histeq_dist")}, own
    with h5py.File(once, "r") as fo, h5py.File(twice, "r") as ft:
        want = ref.equalize_one(fo["x"][()], 8)
        assert_array_equal(ft["x"][()], want, "/x, second pass")
        assert_array_equal(ft["y"][()], want, "/y, second pass")


def test_selected_dataset_gives_it_alone(tmp):
    inp = write_links(tmp / "links.h5")
    out = tmp / "out.h5"
    equalize(inp + ":/x", out)
    assert sorted(links(out)) == ["/x"]
    with h5py.File(out, "r") as f:
        assert_array_equal(f["x"][()], ref.equalize_one(X, 8), "/x")


@pytest.mark.parametrize("np_", [None, 3], ids=["1rank", "3ranks"])
def test_external_left_out_dangling_soft_kept(tmp, np_):
    other = tmp / "other.h5"
    with h5py.File(other, "w") as f:
        f.create_dataset("o", data=Z)
    inp = write_links(tmp / "links.h5")
    with h5py.File(inp, "a") as f:
        f["ext"] = h5py.ExternalLink(str(other), "/o")
        f["dangling"] = h5py.SoftLink("/no/such")
        # A group without images: its soft link makes it, and then its second name too.
        meta = f.create_group("meta")
        meta["to_z"] = h5py.SoftLink("/g/z")
        f["meta_again"] = meta
        f.create_group("empty")  # a group of no image: carried at close (carry.c), its second name too
        f["empty_again"] = f["empty"]
    out = tmp / "out.h5"
    r = equalize(inp, out, np_=np_)
    assert [l for l in r.hq_lines if " equalized " not in l] == [], str(r)
    got = links(out)
    assert sorted(got) == ["/dangling", "/empty", "/empty_again", "/g", "/g/z", "/g2", "/meta", "/meta/to_z",
                           "/meta_again", "/s", "/x", "/y"], got
    assert got["/dangling"] == ("soft", "/no/such")
    assert got["/empty_again"] == got["/empty"]
    assert got["/meta_again"] == got["/meta"]
    with h5py.File(out, "r") as f:
        assert_array_equal(f["meta_again/to_z"][()], ref.equalize_one(Z, 8), "/meta_again/to_z")


@pytest.mark.parametrize("np_", [None, 2], ids=["1rank", "2ranks"])
@pytest.mark.parametrize("layout", ["contiguous", "gzip"])
@pytest.mark.parametrize("how", ["input", "mask", "group"])
def test_selection_through_an_external_link_is_refused(tmp, np_, layout, how):
    """file.h5:/ext, an external link (or a group reached through one), named a dataset of another
    file, whose bytes were then read at its offsets in this one: another dataset's pixels, exit 0
    (and a --mask through one was silently another dataset). Refused, naming the selection."""
    rng = np.random.default_rng(8)
    kw = {"chunks": (1, 20, 35), "compression": "gzip"} if layout == "gzip" else {}
    with h5py.File(tmp / "target.h5", "w") as f:
        f.create_dataset("t", data=rng.integers(0, 250, (3, 40, 70)).astype(np.uint8), **kw)
        f.create_dataset("g/t", data=rng.integers(0, 250, (3, 40, 70)).astype(np.uint8), **kw)
    decoy = rng.integers(0, 250, (3, 40, 70)).astype(np.uint8)
    with h5py.File(tmp / "links.h5", "w") as f:
        f.create_dataset("own", data=decoy, **kw)  # where the target's offsets land in this file
        f["ext"] = h5py.ExternalLink(str(tmp / "target.h5"), "/t")
        f["extg"] = h5py.ExternalLink(str(tmp / "target.h5"), "/g")
    out = tmp / "out.h5"
    if how == "mask":
        args = ["-i", f"{tmp}/target.h5:/t", "-o", out, "--mask", f"{tmp}/links.h5:/ext"]
        named = "links.h5:/ext"
    else:
        sel = "/ext" if how == "input" else "/extg/t"
        args = ["-i", f"{tmp}/links.h5:{sel}", "-o", out]
        named = f"links.h5:{sel}"
    r = run(args, np_)
    assert not r.timed_out and r.rc == 4, f"want exit 4\n{r}"
    lines = r.err_lines if np_ is None else r.hq_lines
    assert len(lines) == 1 and named in lines[0] and "another file" in lines[0], str(r)
    assert not out.exists() and not (tmp / "out.h5.part").exists()


def test_resume_does_not_make_links_twice(tmp):
    rng = np.random.default_rng(7)
    inp = str(tmp / "in.h5")
    with h5py.File(inp, "w") as f:
        f["stack"] = rng.integers(40, 120, (6, 60, 80), dtype=np.uint8)
        f["alias"] = f["stack"]
        f["soft"] = h5py.SoftLink("/stack")
    out = tmp / "out.h5"
    opts = ["--block", "8K", "-q"]
    r = run(["--input", inp, "--output", out] + opts, 2, env={"HQ_JOURNAL_FLUSH_S": "0", "HQ_FAULT_KILL": "0:1"})
    assert not r.timed_out and r.rc != 0, str(r)
    assert os.path.exists(str(out) + ".part")
    run_ok(["--input", inp, "--output", out, "--resume"] + opts, 2, env={"HQ_JOURNAL_FLUSH_S": "0"})
    got = links(out)
    assert sorted(got) == ["/alias", "/soft", "/stack"], got
    assert got["/alias"] == got["/stack"] and got["/soft"] == ("soft", "/stack")
    with h5py.File(inp, "r") as fi, h5py.File(out, "r") as fo:
        assert_array_equal(fo["alias"][()], ref.equalize_stack(fi["stack"][()], 8)[0], "/alias")


def test_whole_file_of_one_image_keeps_its_links_and_a_selection_does_not(tmp):
    """Whole file or one named dataset is what the command line said (FILE.h5 against
    FILE.h5:/dset), not a guess from the number of images."""
    inp = tmp / "one.h5"
    with h5py.File(inp, "w") as f:
        f.create_dataset("x", data=X)
        f["again"] = f["x"]
        f["s"] = h5py.SoftLink("/x")
    equalize(inp, tmp / "whole.h5")
    assert sorted(links(tmp / "whole.h5")) == ["/again", "/s", "/x"]
    equalize(str(inp) + ":/x", tmp / "one_named.h5")
    assert sorted(links(tmp / "one_named.h5")) == ["/x"]


@pytest.mark.parametrize("kind", ["hard-group", "hard-dataset", "soft"])
def test_someone_elses_histeq_dist_link_keeps_its_names_whatever_the_order(tmp, kind):
    """In a file this tool did not write, a link named /histeq_dist (a hard link to a group holding an
    image, a group holding a hard link to an image, a soft link) was dropped or replaced by the run's
    own group, silently, when the image's first name sorted before it (/g); a group named /z kept
    everything and said so. Now any such link keeps the input's names, with the note, in any order."""
    im = np.random.default_rng(1).integers(10, 90, (20, 20)).astype(np.uint8)
    inp, out = tmp / "in.h5", tmp / "out.h5"
    with h5py.File(inp, "w") as f:
        if kind == "hard-group":
            f["g/img"] = im
            f["histeq_dist"] = f["g"]
        elif kind == "hard-dataset":
            f["a"] = im
            f.create_group("histeq_dist")
            f["histeq_dist/x"] = f["a"]
        else:
            f["g/img"] = im
            f["histeq_dist"] = h5py.SoftLink("/g")
    r = run_ok(["--input", inp, "--output", out])
    assert "of its own" in r.err, str(r)
    with h5py.File(inp, "r") as a, h5py.File(out, "r") as b:
        names = {"hard-group": ["g/img", "histeq_dist/img"], "hard-dataset": ["a", "histeq_dist/x"],
                 "soft": ["g/img", "histeq_dist/img"]}[kind]
        for n in names:
            assert n in b and np.array_equal(b[n][()], ref.equalize_one(im, 8)), n
        if kind == "soft":
            assert isinstance(b.get("histeq_dist", getlink=True), h5py.SoftLink)


def write_archive(path):
    """Images beside what an archive keeps with them: strings, a table, axes, scalars, an enum, a
    compressed 1-D series, groups of only such (with attributes), an empty group, a second hard
    link and a soft link to metadata, a dataset of object references, and a skipped image."""
    with h5py.File(path, "w") as f:
        f.create_dataset("scan/image", data=X)
        f.create_dataset("scan/stack", data=np.stack([Z, Z[::-1]]))
        f["scan/exposure_s"] = np.float32(0.25)
        f["scan/axis_um"] = np.linspace(0, 1, 30)
        f["scan/axis_um"].attrs["units"] = "um"
        f["meta/patient"] = "anonymous 17"
        f["meta/notes"] = np.array(["a", "bb", "ccc"], dtype=h5py.string_dtype())
        f["meta/table"] = np.array([(1, 2.5), (3, 4.5)], dtype=[("id", "<i4"), ("value", "<f8")])
        f.create_dataset("meta/kind", data=np.array([0, 1, 1], np.uint8),
                         dtype=h5py.enum_dtype({"dark": 0, "light": 1}, basetype="u1"))
        f.create_dataset("meta/series", data=np.arange(20000, dtype=np.int64), chunks=(1000,), compression="gzip",
                         shuffle=True)
        f["meta"].attrs["instrument"] = "scope 3"
        f.create_group("meta/deeper/empty").attrs["why"] = "kept"
        f["alias"] = f["meta/table"]
        f["scan/patient"] = h5py.SoftLink("/meta/patient")
        f.create_dataset("refs", data=[f["scan/image"].ref], dtype=h5py.ref_dtype)
        f["meta/refs_again"] = f["refs"]  # left out under both names, not linked to what is not there
        f.create_dataset("meta/half", data=np.zeros((4, 4), np.float16))  # an image of a type refused
    return str(path)


CARRIED = ["scan/exposure_s", "scan/axis_um", "meta/patient", "meta/notes", "meta/table", "meta/kind", "meta/series"]


@pytest.mark.parametrize("np_", [None, 2], ids=["1rank", "2ranks"])
def test_what_is_not_an_image_is_carried_as_it_is(tmp, np_):
    """A whole file's metadata reaches the output unchanged (type, values, compression, attributes,
    links, groups); the images are equalized as ever; a refused image stays refused, or left out
    under --on-error skip; references, which would point into the input, are left out and said."""
    inp, out = write_archive(tmp / "in.h5"), tmp / "out.h5"
    r = run(["-i", inp, "-o", out], np_)
    assert r.rc == 4 and "in.h5:/meta/half: unsupported type" in r.err, str(r)
    r = run(["-i", inp, "-o", out, "--on-error", "skip"], np_)
    assert r.rc == 3, str(r)
    notes = [l for l in r.err.splitlines() if "does not equalize" in l]
    assert notes == [f"histeq_dist: note: {out}: 7 datasets of the input that the run does not equalize (strings, "
                     "tables, 1-D arrays, scalars, the mask) copied as they are; 1 left out, as it holds references "
                     "into the input"], r.err
    with h5py.File(inp, "r") as fi, h5py.File(out, "r") as fo:
        assert_array_equal(fo["scan/image"][()], ref.equalize_one(X, 8), "/scan/image")
        assert_array_equal(fo["scan/stack"][()], ref.equalize_stack(fi["scan/stack"][()], 8)[0], "/scan/stack")
        for name in CARRIED:
            a, b = fi[name], fo[name]
            assert a.dtype == b.dtype and a.shape == b.shape and a.chunks == b.chunks, name
            assert a.compression == b.compression and a.shuffle == b.shuffle, name
            assert np.array_equal(a[()], b[()]), name
            assert dict(a.attrs) == dict(b.attrs), name
        assert h5py.check_enum_dtype(fo["meta/kind"].dtype) == {"dark": 0, "light": 1}
        assert fo["meta"].attrs["instrument"] == "scope 3" and fo["meta/deeper/empty"].attrs["why"] == "kept"
        assert len(fo["meta/deeper/empty"]) == 0
        assert fo["scan/patient"][()] == b"anonymous 17"
        assert "refs" not in fo and "refs_again" not in fo["meta"] and "half" not in fo["meta"]
    got = links(out)
    assert got["/alias"] == got["/meta/table"] and got["/scan/patient"] == ("soft", "/meta/patient")
    # -q: no note; a selected metadata dataset is still not an image.
    r = run(["-i", inp, "-o", tmp / "q.h5", "--on-error", "skip", "-q"], np_)
    assert r.rc == 3 and "does not equalize" not in r.err, str(r)
    r = run(["-i", inp + ":/meta/patient", "-o", tmp / "one.h5"])
    assert r.rc == 4 and "in.h5:/meta/patient: unsupported type (string)" in r.err, str(r)


def test_metadata_only_file_has_no_images_and_output_carries_on_resume(tmp):
    """A file of metadata alone is still 'no image datasets'; a run killed before its close and
    resumed carries the metadata once."""
    meta = tmp / "meta.h5"
    with h5py.File(meta, "w") as f:
        f["a"] = np.arange(4)
    r = run(["-i", meta, "-o", tmp / "m_eq.h5"])
    assert r.rc == 4 and "meta.h5: no image datasets" in r.err, str(r)
    inp, out = tmp / "in.h5", tmp / "out.h5"
    with h5py.File(inp, "w") as f:
        f["stack"] = np.random.default_rng(3).integers(0, 255, (6, 60, 70), dtype=np.uint8)
        f["times"] = np.arange(6.0)
        f["g/label"] = "six slices"
    r = run(["-i", inp, "-o", out, "--block", "8K", "-q"], None, env={"HQ_JOURNAL_FLUSH_S": "0", "HQ_FAULT_KILL": "0:2"})
    assert r.rc != 0 and os.path.isdir(str(out) + ".journal"), str(r)
    run_ok(["-i", inp, "-o", out, "--block", "8K", "--resume", "-q"])
    run_ok(["-i", inp, "-o", tmp / "whole.h5", "--block", "8K", "-q"])
    with h5py.File(out, "r") as fo, h5py.File(tmp / "whole.h5", "r") as fw:
        assert np.array_equal(fo["stack"][()], fw["stack"][()])
        assert np.array_equal(fo["times"][()], np.arange(6.0)) and fo["g/label"][()] == b"six slices"
        assert sorted(fo) == sorted(fw) == ["g", "histeq_dist", "stack", "times"]


def test_variable_length_metadata_behind_a_filter_this_hdf5_lacks_is_left_out(tmp):
    """Copying variable-length data runs its filters; with one this HDF5 lacks (lzf, which h5py
    brings) H5Ocopy crashed: small, the scan's trial crashed and the file was called damaged
    (exit 4); over 64 MiB, the close crashed after all the work, and every --resume again. Such a
    dataset is left out and said; the same filter on plain numbers is copied as stored."""
    inp, out = tmp / "in.h5", tmp / "out.h5"
    with h5py.File(inp, "w") as f:
        f["img"] = X
        f.create_dataset("notes", data=np.array(["a", "bb"] * 50, dtype=h5py.string_dtype()), chunks=(10,),
                         compression="lzf")
        f.create_dataset("axis", data=np.arange(100.0), chunks=(10,), compression="lzf")
        # Variable-length strings as an array's elements: H5Tdetect_class does not see them.
        arr = f.create_dataset("meta/arr", (50,), dtype=np.dtype((h5py.string_dtype(), (3,))), chunks=(10,),
                               compression="lzf")
        arr[:] = np.array([["a" * i, "b", "c"] for i in range(50)], dtype=object)
    r = run_ok(["-i", inp, "-o", out])
    assert f"{out}: 1 dataset of the input that the run does not equalize (strings, tables, 1-D arrays, scalars, " \
           "the mask) copied as it is; 2 of variable-length data left out, as copying them needs a filter this HDF5 " \
           "lacks" in r.err, r.err
    with h5py.File(out, "r") as f:
        assert "notes" not in f and "arr" not in f["meta"]
        assert np.array_equal(f["axis"][()], np.arange(100.0)) and f["axis"].compression == "lzf"
        assert_array_equal(f["img"][()], ref.equalize_one(X, 8), "/img")



@pytest.mark.parametrize("np_", [None, 2], ids=["1rank", "2ranks"])
def test_variable_length_metadata_keeps_its_own_fill_value(tmp, np_):
    """HDF5 1.10's H5Ocopy copies a variable-length fill value as stored, a global heap id of the
    input's: in the output it named our own provenance's version string ("0.1.0"), and h5py
    crashed on some such properties. Such a dataset is made again with the input's creation
    properties (chunks, filters, fill value, stored in the output's own heap) and its values copied:
    every written chunk, an unwritten one staying unwritten (HDF5 1.10 reads one only from a file
    open for writing, in the input as in the output)."""
    inp, out = tmp / "in.h5", tmp / "out.h5"
    with h5py.File(inp, "w") as f:
        f["img"] = X
        d = f.create_dataset("names", shape=(3,), dtype=h5py.string_dtype(), fillvalue=b"unset")
        d[0] = "alpha"
        d = f.create_dataset("meta/tags", shape=(6,), dtype=h5py.string_dtype(), chunks=(2,), compression="gzip",
                             fillvalue=b"none")
        d[:] = ["t%d" % i for i in range(6)]
        d = f.create_dataset("meta/runs", shape=(3,), dtype=h5py.vlen_dtype(np.int32))
        d[0], d[1], d[2] = [1, 2], [3], []
        d = f.create_dataset("meta/sparse", shape=(6, 4), maxshape=(None, 4), dtype=h5py.string_dtype(),
                             chunks=(2, 2), compression="gzip", fillvalue=b"-")
        d[0, 0], d[5, 3] = "first", "last"  # chunks (0, 0) and (4, 2) written, four never
        # More written chunks than HDF5 1.10 lists in reasonable time (it walks its index from the
        # start for each): they come from the one-pass chunk table; before, HDF5's copy and its fill.
        d = f.create_dataset("meta/many", shape=(10000,), maxshape=(None,), dtype=h5py.string_dtype(), chunks=(1,),
                             fillvalue=b"unset")
        for i in range(0, 10000, 2):
            d[i] = "v%d" % i
    run_ok(["-i", inp, "-o", out, "-q"], np_)
    with h5py.File(out, "r") as f:
        assert f["names"].fillvalue == b"unset" and list(f["names"][()]) == [b"alpha", b"unset", b"unset"]
        assert f["meta/tags"].fillvalue == b"none" and list(f["meta/tags"][()]) == [b"t%d" % i for i in range(6)]
        assert f["meta/tags"].chunks == (2,) and f["meta/tags"].compression == "gzip"
        sp = f["meta/sparse"]
        assert sp.fillvalue == b"-" and sp.chunks == (2, 2) and sp.maxshape == (None, 4)
        assert sp.id.get_num_chunks() == 2
        assert sp[0:2, 0:2].tolist() == [[b"first", b"-"], [b"-", b"-"]] and sp[4:6, 2:4].tolist() == [[b"-", b"-"],
                                                                                                       [b"-", b"last"]]
        assert [list(v) for v in f["meta/runs"][()]] == [[1, 2], [3], []]
        many = f["meta/many"]
        assert many.fillvalue == b"unset" and many.id.get_num_chunks() == 5000
        assert many[0] == b"v0" and many[9998] == b"v9998"
        assert_array_equal(f["img"][()], ref.equalize_one(X, 8), "/img")
    # An unwritten chunk reads as the fill value only from a file open for writing (HDF5 1.10).
    shutil.copy(out, tmp / "writable.h5")
    with h5py.File(tmp / "writable.h5", "r+") as f:
        assert f["meta/many"][1] == b"unset" and f["meta/many"][9999] == b"unset"


@pytest.mark.parametrize("np_", [None, 2], ids=["1rank", "2ranks"])
def test_metadata_in_other_files_is_copied_by_value(tmp, np_, monkeypatch):
    """Metadata whose bytes lie in external raw files, or a virtual dataset's sources: H5Ocopy
    copied the file names, and the output's dataset could not be read ("unable to open external
    raw data file") from anywhere but the input's directory, nor at all once the input went. The
    values are copied into the output (a relative raw file is found beside the input when the
    working directory lacks it, as the file's maker most likely meant); a raw file or source file
    that is missing leaves its dataset out, counted in the note."""
    src = tmp / "src"
    src.mkdir()
    inp, out = src / "in.h5", tmp / "out.h5"
    axis = np.arange(9 << 20, dtype="<f8") * 0.25  # 72 MiB: two pieces of 64 MiB
    table = np.array([[b"ab", b"cde", b"f"], [b"g", b"", b"hijklmno"]], dtype="S8")
    monkeypatch.chdir(src)  # h5py writes external raw files from the working directory
    with h5py.File(src / "part.h5", "w") as f:
        f["t"] = np.arange(7, dtype=np.int16)
    with h5py.File(inp, "w") as f:
        f["img"] = X
        d = f.create_dataset("axis", shape=axis.shape, dtype="<f8", external=[("axis.raw", 0, axis.nbytes)])
        d[:] = axis
        d.attrs["unit"] = "mm"
        d = f.create_dataset("meta/table", shape=table.shape, dtype="S8",
                             external=[("table.raw", 0, 20), ("table2.raw", 0, 100)])
        d[:] = table
        lay = h5py.VirtualLayout(shape=(7,), dtype=np.int16)
        lay[:] = h5py.VirtualSource("part.h5", "t", shape=(7,))
        f.create_virtual_dataset("v", lay)
    monkeypatch.undo()
    assert sorted(os.listdir(src)) == ["axis.raw", "in.h5", "part.h5", "table.raw", "table2.raw"]
    r = run(["-i", inp, "-o", out, "-q"], np_, cwd=tmp)  # from outside the input's directory
    assert r.rc == 0, str(r)
    # A source file that lacks the source dataset is missing too (then put back).
    with h5py.File(src / "part.h5", "a") as f:
        f.move("t", "t_renamed")
    r = run(["-i", inp, "-o", tmp / "renamed.h5", "-q"], np_, cwd=tmp)
    assert r.rc == 0, str(r)
    with h5py.File(tmp / "renamed.h5", "r") as f:
        assert "v" not in f and np.array_equal(f["axis"][()], axis)
    with h5py.File(src / "part.h5", "a") as f:
        f.move("t_renamed", "t")
    (src / "part.h5").rename(tmp / "part_moved.h5")
    for raw in ("axis.raw", "table.raw", "table2.raw"):
        (src / raw).unlink()
    with h5py.File(out, "r") as f:
        assert f["axis"].external is None and f["meta/table"].external is None and not f["v"].is_virtual
        assert np.array_equal(f["axis"][()], axis) and f["axis"].attrs["unit"] == "mm"
        assert np.array_equal(f["meta/table"][()], table) and f["meta/table"].dtype == table.dtype
        assert np.array_equal(f["v"][()], np.arange(7, dtype=np.int16))
        assert_array_equal(f["img"][()], ref.equalize_one(X, 8), "/img")
    # Raw files and the virtual dataset's source gone: those datasets are left out and counted, as a
    # dataset of references is; the rest of the run goes on (one whose copy failed at the end threw
    # all the work away). The virtual one read as fill values, and its copy held zeros for data.
    r = run(["-i", inp, "-o", tmp / "again.h5"], np_, cwd=tmp)
    assert r.rc == 0 and "3 left out, as their values lie in external files that cannot be read" in r.err, str(r)
    with h5py.File(tmp / "again.h5", "r") as f:
        assert "axis" not in f and "table" not in f["meta"] and "v" not in f
        assert_array_equal(f["img"][()], ref.equalize_one(X, 8), "/img")


def test_metadata_by_value_of_an_extendible_dataset(tmp):
    """An external or virtual dataset with an unlimited maximum shape: its copy is contiguous,
    which takes no unlimited dimension, and the whole run failed (exit 4, or exit 1 after all
    the work for one over 64 MiB). The copy is fixed at its size, as an image's is."""
    inp, out = tmp / "in.h5", tmp / "out.h5"
    raw = np.arange(50, dtype="<i4")
    (tmp / "ext.raw").write_bytes(raw.tobytes())
    with h5py.File(inp, "w") as f:
        f["img"] = X
        # h5py's high level takes no maxshape with external storage: its low level does.
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_external(str(tmp / "ext.raw").encode(), 0, h5py.h5f.UNLIMITED)
        h5py.h5d.create(f.id, b"ext", h5py.h5t.STD_I32LE, h5py.h5s.create_simple((50,), (h5py.h5s.UNLIMITED,)),
                        dcpl=dcpl)
        f["ext"].attrs["fill"] = "none"
        f.create_dataset("src", data=np.arange(5, dtype=np.int16), maxshape=(None,), chunks=(5,))
        lay = h5py.VirtualLayout(shape=(5,), maxshape=(None,), dtype=np.int16)
        src = h5py.VirtualSource(".", "src", shape=(5,), maxshape=(None,))
        lay[0:h5py.h5s.UNLIMITED] = src[0:h5py.h5s.UNLIMITED]
        f.create_virtual_dataset("v", lay, fillvalue=-1)
    run_ok(["-i", inp, "-o", out, "-q"])
    with h5py.File(out, "r") as f:
        assert np.array_equal(f["ext"][()], raw) and f["ext"].maxshape == (50,) and f["ext"].attrs["fill"] == "none"
        assert np.array_equal(f["v"][()], np.arange(5, dtype=np.int16)) and f["v"].fillvalue == -1


def test_output_over_a_file_the_input_reads_is_refused(tmp, monkeypatch):
    """-o naming a file the input's other datasets read their values from (an external raw file, a
    virtual dataset's source), with --force: the output replaced it, and the input's dataset then
    read the output's bytes (or zeros). Refused, exit 2, one line; the file left as it was."""
    monkeypatch.chdir(tmp)  # h5py writes external raw files from the working directory
    with h5py.File(tmp / "part.h5", "w") as f:
        f["t"] = np.arange(7, dtype=np.int16)
    (tmp / "raw.bin").write_bytes(bytes(range(200)))
    with h5py.File(tmp / "in.h5", "w") as f:
        f["img"] = X
        f.create_dataset("axis", shape=(200,), dtype=np.uint8, external=[("raw.bin", 0, 200)])
        lay = h5py.VirtualLayout(shape=(7,), dtype=np.int16)
        lay[:] = h5py.VirtualSource("part.h5", "t", shape=(7,))
        f.create_virtual_dataset("v", lay)
    monkeypatch.undo()
    for victim in ("raw.bin", "part.h5"):
        before = (tmp / victim).read_bytes()
        for cwd in (tmp, tmp.parent):  # named from beside the input and from elsewhere
            r = run(["-i", tmp / "in.h5", "-o", tmp / victim, "--force"], cwd=cwd)
            assert r.rc == 2 and len(r.hq_lines) == 1 and "read values from this file" in r.hq_lines[0], str(r)
            assert (tmp / victim).read_bytes() == before
    run_ok(["-i", tmp / "in.h5", "-o", tmp / "out.h5", "-q"])
    run_ok(["-i", tmp / "in.h5", "-o", tmp / "out.h5", "-q", "--force"])
