#!/bin/bash
# End-to-end on one rank and one GPU: an HDF5 uint8 stack of SIZE_GIB GiB equalized with
# --device gpu, beside --device copy (the same reads and writes through the same HDF5 calls, no
# equalization). Prints the median wall time of each and their ratio; the bar is gpu/copy <= 1.15.
#
#   bash bench/e2e_hdf5.sh [SIZE_GIB=8] [RUNS=3] [DIR=/tmp/hq_e2e]
# Needs build/histeq_dist (with the GPU engine) and mpicc + HDF5 to build the data generator.
set -euo pipefail
size_gib=${1:-8}
runs=${2:-3}
dir=${3:-/tmp/hq_e2e}
bin=${HQ_BIN:-build/histeq_dist}
dev=${HQ_E2E_DEVICE:-gpu}   # cpu to try the script where there is no GPU
mpirun_flags=${HQ_MPIRUN_FLAGS:---oversubscribe --allow-run-as-root}
mkdir -p "$dir"
in=$dir/stack.h5
if [ ! -f "$in" ]; then
  # A C generator: the GPU machines have HDF5 but no h5py.
  mkdir -p build
  mpicc -O2 $(pkg-config --cflags hdf5-openmpi 2>/dev/null) -o build/make_stack bench/make_stack.c \
    $(pkg-config --libs hdf5-openmpi 2>/dev/null || echo -lhdf5)
  build/make_stack "$in" "$size_gib"
fi
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
run_once() { # device -> seconds
  rm -f "$dir/out_$1.h5"
  local t0 t1
  t0=$(date +%s.%N)
  # shellcheck disable=SC2086
  mpirun $mpirun_flags -np 1 "$bin" --input "$in" --output "$dir/out_$1.h5" --device "$1" -q --force
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.4f\n", b - a}'
}
run_once copy >/dev/null   # warm the page cache and the GPU driver once
run_once "$dev" >/dev/null
: > "$dir/copy.t"; : > "$dir/dev.t"
for _ in $(seq "$runs"); do
  run_once copy >> "$dir/copy.t"
  run_once "$dev" >> "$dir/dev.t"
done
c=$(median < "$dir/copy.t"); g=$(median < "$dir/dev.t")
bytes=$(stat -c %s "$in")
awk -v s="$size_gib" -v c="$c" -v g="$g" -v b="$bytes" -v d="$dev" 'BEGIN {
  printf "e2e %s GiB uint8 stack, 1 rank: copy %.3f s  %s %.3f s  %s/copy %.3f  (%s %.0f MiB/s of input)\n",
         s, c, d, g, d, g / c, d, b / 1048576 / g }'
