#!/bin/bash
# auto_ab.sh — --device auto against the engines it chooses between, on one input, in alternating
# rounds beside cp (bench/ab.py): the check that auto never takes the slower route for a share.
#
#   bash bench/auto_ab.sh [raw|gzip] [GIB] [ROUNDS] [DIR]
# Defaults: gzip 2 6 /dev/shm/hq_auto_ab. Makes an 8-bit stack of 4096 x 4096 slices
# (bench/make_stack.c), for gzip then shuffle + gzip level 1 (h5repack, or h5py where the machine
# has no hdf5-tools), and times 1 rank of histeq_dist --device cpu, gpu (where nvidia-smi sees a
# GPU) and auto. HQ_BIN: the binary (default build/histeq_dist). Inputs are kept in DIR.
set -eu
kind=${1:-gzip}
gib=${2:-2}
rounds=${3:-6}
dir=${4:-/dev/shm/hq_auto_ab}
bin=${HQ_BIN:-build/histeq_dist}
case $kind in raw|gzip) ;; *) echo "auto_ab.sh: raw or gzip, not $kind" >&2; exit 2 ;; esac
[ -x "$bin" ] || { echo "auto_ab.sh: $bin is not built (make, or HQ_BIN=PATH)" >&2; exit 2; }
mkdir -p "$dir"
tools=$dir/tools
mkdir -p "$tools"
[ -x "$tools/make_stack" ] || mpicc -O2 $(pkg-config --cflags hdf5-openmpi 2>/dev/null) -o "$tools/make_stack" \
    bench/make_stack.c $(pkg-config --libs hdf5-openmpi 2>/dev/null || echo -lhdf5)
raw=$dir/raw_${gib}g.h5
[ -f "$raw" ] || { "$tools/make_stack" "$raw.tmp" "$gib" > /dev/null && mv "$raw.tmp" "$raw"; }
in=$raw
if [ "$kind" = gzip ]; then
    in=$dir/gzip_${gib}g.h5
    if [ ! -f "$in" ]; then
        if command -v h5repack > /dev/null; then
            h5repack -f SHUF -f GZIP=1 "$raw" "$in.tmp"
        else
            python3 -c 'import sys, h5py
with h5py.File(sys.argv[1], "r") as fi, h5py.File(sys.argv[2], "w") as fo:
    d = fi["stack"]
    o = fo.create_dataset("stack", shape=d.shape, dtype=d.dtype, chunks=d.chunks, shuffle=True, compression="gzip", compression_opts=1)
    for i in range(d.shape[0]):
        o[i] = d[i]' "$raw" "$in.tmp"
        fi
        mv "$in.tmp" "$in"
    fi
fi
variants=("cpu=$bin -q -i {in} -o {out} --force --device cpu")
nvidia-smi -L > /dev/null 2>&1 && variants+=("gpu=$bin -q -i {in} -o {out} --force --device gpu")
variants+=("auto=$bin -q -i {in} -o {out} --force --device auto")
echo "# bench/auto_ab.sh $kind $gib $rounds $dir ($(date -u +%FT%TZ), $(hostname), $(nproc) CPUs)"
python3 bench/ab.py --rounds "$rounds" --input "$in" "${variants[@]}"
