#!/bin/bash
# Chunk lookups: a whole run over uint8 images of many small chunks (16 x 16, v1 B-tree: the
# earliest file format), timed for two binaries side by side: BEFORE (per-chunk
# H5Dget_chunk_info_by_coord, which HDF5 1.10.8 answers by walking the chunk index from its start:
# quadratic) and AFTER (the one-pass chunk table, io/hdf5/chunk_index.c). One rank, CPU, direct path
# on (the default). A run of BEFORE longer than LIMIT seconds is stopped and reported as such.
#
#   bash bench/chunk_index.sh BEFORE_BIN AFTER_BIN [SIDES="2048 2896 8192"] [LIMIT=300] [DIR=/dev/shm/hq_chunks]
# SIDE x SIDE pixels in 16 x 16 chunks: 2048 -> 16,384 chunks, 2896 -> 32,761, 8192 -> 262,144.
# Needs mpicc + HDF5 (bench/make_image.c).
set -uo pipefail
before=$1
after=$2
sides=${3:-2048 2896 8192}
limit=${4:-300}
dir=${5:-/dev/shm/hq_chunks}
mpirun_flags=${HQ_MPIRUN_FLAGS:---oversubscribe --allow-run-as-root}
export OMPI_MCA_btl_vader_single_copy_mechanism=none
mkdir -p "$dir" build
[ -x build/make_image ] || mpicc -O2 $(pkg-config --cflags hdf5-openmpi 2>/dev/null) -o build/make_image \
  bench/make_image.c $(pkg-config --libs hdf5-openmpi 2>/dev/null || echo -lhdf5)

run() { # bin in -> "wall_s" or ">LIMIT"
  local t0 t1 rc
  rm -f "$dir/out.h5"
  t0=$(date +%s.%N)
  # shellcheck disable=SC2086
  timeout "$limit" mpirun $mpirun_flags -np 1 "$1" --input "$2" --output "$dir/out.h5" --device cpu -q --force \
    > /dev/null 2>&1
  rc=$?
  t1=$(date +%s.%N)
  if [ $rc -eq 124 ]; then echo ">$limit"; elif [ $rc -ne 0 ]; then echo "failed($rc)"; else
    awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}'; fi
}

echo "chunk_index: whole runs, 1 rank, uint8 images in 16x16 chunks; $(nproc) cores; $(date -u +%FT%TZ)"
echo "before: $before"
echo "after:  $after"
printf '%-12s %10s %12s %12s\n' side chunks before_s after_s
for s in $sides; do
  f="$dir/img_$s.h5"
  [ -f "$f" ] || build/make_image "$f" 1 "$s" "$s" 16 16 > /dev/null
  n=$(( ((s + 15) / 16) * ((s + 15) / 16) ))
  a=$(run "$after" "$f") # also warms the page cache
  a=$(run "$after" "$f")
  b=$(run "$before" "$f")
  printf '%-12s %10s %12s %12s\n' "$s" "$n" "$b" "$a"
done
