"""Without --output the output goes beside the input, named for the method before the extension:
dataset.h5 -> dataset_eq.h5, FILE.h5:/dset -> FILE_eq.h5, a.png -> a_eq.png, photos/ -> photos_eq/,
list.txt -> list_eq/. Rank 0 names it in one stderr line (none under -q); an existing output is
refused without --force (exit 2) and replaced with it. The signature command,
`mpirun -np 8 histeq_dist --input dataset.h5`, runs as written."""
import os

import h5py
import numpy as np

import pngio
import reference as ref
from helpers import assert_array_equal, assert_same_output, run, run_ok

E_USAGE = 2


def notes(r, word="no --output given"):
    return [l for l in r.err.splitlines() if word in l]


def make_h5(path):
    with h5py.File(path, "w") as f:
        f["ct"] = ref.stack_of(4, 30, 40, 100, 900, np.uint16, seed=90)
        f["img"] = ref.low_contrast(20, 30, 50, 90, np.uint8, seed=91)


def test_signature_command(tmp):
    make_h5(tmp / "dataset.h5")
    r = run_ok(["--input", "dataset.h5"], 8, cwd=tmp)
    assert notes(r) == ["histeq_dist: note: no --output given: writing dataset_eq.h5"], str(r)
    run_ok(["--input", "dataset.h5", "--output", "want.h5"], 2, cwd=tmp)
    assert_same_output(str(tmp / "want.h5"), str(tmp / "dataset_eq.h5"))
    with h5py.File(tmp / "dataset_eq.h5", "r") as f:
        assert f.attrs["histeq_dist_complete"] == 1
    # Again: refused, the output kept; with --force, replaced.
    before = (tmp / "dataset_eq.h5").read_bytes()
    r = run(["--input", "dataset.h5"], 2, cwd=tmp)
    assert r.rc == E_USAGE and any("dataset_eq.h5" in l and "--force" in l for l in r.hq_lines), str(r)
    assert (tmp / "dataset_eq.h5").read_bytes() == before
    r = run_ok(["--input", "dataset.h5", "--force", "-q"], 2, cwd=tmp)
    assert r.err.strip() == "", f"-q prints nothing\n{r}"
    assert_same_output(str(tmp / "want.h5"), str(tmp / "dataset_eq.h5"))


def test_one_dataset_and_absolute_paths(tmp):
    make_h5(tmp / "scans.v2.h5")
    r = run_ok(["--input", f"{tmp}/scans.v2.h5:/img"])
    assert notes(r) == [f"histeq_dist: note: no --output given: writing {tmp}/scans.v2_eq.h5"], str(r)
    with h5py.File(tmp / "scans.v2_eq.h5", "r") as f:
        assert list(k for k in f if k != "histeq_dist") == ["img"]


def test_method_names_the_suffix(tmp):
    make_h5(tmp / "d.h5")
    run_ok(["--input", "d.h5", "--method", "stretch"], 2, cwd=tmp)
    assert os.path.exists(tmp / "d_eq.h5")


def test_png_file_directory_and_list(tmp):
    photos = tmp / "photos"
    photos.mkdir()
    for k in range(3):
        pngio.write(str(photos / f"p{k}.png"), ref.low_contrast(20, 25, 30, 60 + k, np.uint8, seed=92 + k), 8, 0)
    # One PNG file.
    r = run_ok(["--input", "photos/p0.png"], None, cwd=tmp)
    assert notes(r) == ["histeq_dist: note: no --output given: writing photos/p0_eq.png"], str(r)
    assert os.path.isfile(photos / "p0_eq.png")
    os.remove(photos / "p0_eq.png")
    # A directory, with its trailing slash.
    r = run_ok(["--input", "photos/"], 2, cwd=tmp)
    assert notes(r) == ["histeq_dist: note: no --output given: writing photos_eq"], str(r)
    assert sorted(n for n in os.listdir(tmp / "photos_eq") if n.endswith(".png")) == ["p0.png", "p1.png", "p2.png"]
    run_ok(["--input", "photos", "--output", "want"], 2, cwd=tmp)
    assert_same_output(str(tmp / "want"), str(tmp / "photos_eq"))
    # "." is named by its real name, beside it.
    r = run_ok(["--input", ".", "--force"], 2, cwd=photos)
    assert notes(r) == [f"histeq_dist: note: no --output given: writing {os.path.realpath(tmp)}/photos_eq"], str(r)
    # A list file: a directory named after it.
    (tmp / "list.txt").write_text("photos/p0.png\nphotos/p2.png\n")
    r = run_ok(["--input", "list.txt"], 2, cwd=tmp)
    assert notes(r) == ["histeq_dist: note: no --output given: writing list_eq"], str(r)
    assert sorted(n for n in os.listdir(tmp / "list_eq") if n.endswith(".png")) == ["p0.png", "p2.png"]


def test_input_named_for_the_other_format_gets_its_own_extension(tmp):
    """Without -o, a PNG named photo.h5 got photo_eq.h5, which the program then refused as a PNG
    output named .h5 (exit 2), and an HDF5 file named stack.png likewise: a usage error for a
    command that gave no output name at all."""
    im = ref.low_contrast(20, 30, 30, 70, np.uint8, 70)
    pngio.write(tmp / "photo.h5", im, 8, pngio.GRAY)
    with h5py.File(tmp / "stack.png", "w") as f:
        f["s"] = np.stack([im, im[::-1]])
    run_ok(["-i", tmp / "photo.h5", "-q"])
    run_ok(["-i", tmp / "stack.png", "-q"])
    assert (tmp / "photo_eq.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with h5py.File(tmp / "stack_eq.h5", "r") as f:
        assert f["s"].shape == (2, 20, 30)
    assert not (tmp / "photo_eq.h5").exists() and not (tmp / "stack_eq.png").exists()


def test_long_legal_names(tmp):
    """A legal name near the 255-byte limit failed the run at its end (exit 1, all work lost):
    a PNG's temporary `.NAME.part-PID` and OUT.journal passed the limit, and Open MPI's
    shared-file-pointer file named after OUT.part printed an error line (and its fallback left
    OUT.part.data.RANK files behind a kill). Now an input's long name works (its temporary name
    takes a stem and a hash), and an output name without room for what is named after it is
    refused up front (exit 2): 247 bytes, 229 for HDF5."""
    src = tmp / "in"
    src.mkdir()
    long_png = "L" * 240 + ".png"
    ims = {"ok.png": ref.low_contrast(20, 30, 30, 70, np.uint8, 71), long_png: ref.low_contrast(20, 30, 40, 90, np.uint8, 72)}
    for n, im in ims.items():
        pngio.write(src / n, im, 8, pngio.GRAY)
    r = run_ok(["-i", src, "-o", tmp / "out", "-q"], 2)
    assert r.err.strip() == "", str(r)
    for n, im in ims.items():
        assert_array_equal(pngio.read(tmp / "out" / n).samples.reshape(im.shape).astype(np.uint8), ref.equalize_one(im, 8), n)
    assert sorted(os.listdir(tmp / "out")) == sorted(list(ims) + ["histeq_dist.complete"])
    # The longest names that work: nothing but the output made, one rank and two, no other line.
    with h5py.File(tmp / "s.h5", "w") as f:
        f["x"] = ims["ok.png"]
    for np_ in (None, 2):
        out = tmp / ("H" * 226 + ".h5")
        r = run_ok(["-i", tmp / "s.h5", "-o", out, "-q"], np_)
        assert r.err.strip() == "", str(r)
        with h5py.File(out, "r") as f:
            assert_array_equal(f["x"][()], ref.equalize_one(ims["ok.png"], 8))
        assert sorted(n for n in os.listdir(tmp) if n.startswith("H")) == [out.name], os.listdir(tmp)
        os.remove(out)
    out = tmp / ("P" * 243 + ".png")
    run_ok(["-i", src / "ok.png", "-o", out, "-q"])
    assert_array_equal(pngio.read(out).samples.reshape(20, 30).astype(np.uint8), ref.equalize_one(ims["ok.png"], 8))
    # One byte more: refused before anything is made, for each kind of output.
    for args, out, most in ((["-i", tmp / "s.h5"], "H" * 227 + ".h5", 229), (["-i", src / "ok.png"], "Q" * 244 + ".png", 247),
                            (["-i", src], "D" * 248, 247)):
        r = run(args + ["-o", tmp / out])
        assert r.rc == E_USAGE and len(r.hq_lines) == 1 and "name too long" in r.hq_lines[0], str(r)
        assert f"at most {most} bytes" in r.hq_lines[0], str(r)
        assert not any(n.startswith(out[:10]) or n.startswith("." + out[:10]) for n in os.listdir(tmp)), os.listdir(tmp)
    # A --summary FILE whose temporary FILE.part-PID cannot be made: said before the run.
    r = run(["-i", tmp / "s.h5", "-o", tmp / "o.h5", "--summary", tmp / ("S" * 250 + ".json")])
    assert r.rc != 0 and len(r.hq_lines) == 1 and "File name too long" in r.hq_lines[0], str(r)
    assert not (tmp / "o.h5").exists()
