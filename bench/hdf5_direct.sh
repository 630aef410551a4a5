#!/bin/bash
# The HDF5 direct path (io/hdf5/direct*.c) against the library path (HQ_HDF5_DIRECT=0), interleaved
# on the same files: a raw uint8 stack of SIZE_GIB GiB (chunks of one 4096x4096 slice), the same
# stack gzip-1, and gzip-1 + shuffle (h5repack), each with 1 and 2 ranks, beside `cat` and `cp` of
# the raw file. /usr/bin/time gives wall, user and system seconds; the medians are printed, with
# the ratio library/direct of the wall times.
#
#   bash bench/hdf5_direct.sh [SIZE_GIB=1] [RUNS=3] [DIR=/dev/shm/hq_direct]
# Needs build/histeq_dist, mpicc + HDF5 (the stack generator) and h5repack.
set -euo pipefail
size_gib=${1:-1}
runs=${2:-3}
dir=${3:-/dev/shm/hq_direct}
bin=${HQ_BIN:-build/histeq_dist}
dev=${HQ_DIRECT_DEVICE:-cpu}
mpirun_flags=${HQ_MPIRUN_FLAGS:---oversubscribe --allow-run-as-root}
export OMPI_MCA_btl_vader_single_copy_mechanism=none
mkdir -p "$dir"
if [ ! -f "$dir/raw.h5" ]; then
  mkdir -p build
  mpicc -O2 $(pkg-config --cflags hdf5-openmpi 2>/dev/null) -o build/make_stack bench/make_stack.c \
    $(pkg-config --libs hdf5-openmpi 2>/dev/null || echo -lhdf5)
  build/make_stack "$dir/raw.h5" "$size_gib"
fi
[ -f "$dir/gz1.h5" ] || h5repack -f GZIP=1 "$dir/raw.h5" "$dir/gz1.h5"
[ -f "$dir/shgz1.h5" ] || h5repack -f SHUF -f GZIP=1 "$dir/raw.h5" "$dir/shgz1.h5"

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
timed() { # label command... : appends "wall user sys" to $dir/LABEL.t
  local label=$1
  shift
  /usr/bin/time -f "%e %U %S" -o "$dir/time.tmp" "$@" > /dev/null
  cat "$dir/time.tmp" >> "$dir/$label.t"
}
labels=()
for f in raw gz1 shgz1; do for np in 1 2; do for d in 0 1; do labels+=("$f.np$np.direct$d"); done; done; done
rm -f "$dir"/*.t
timed cat cat "$dir/raw.h5" # warm the page cache once
rm -f "$dir"/*.t
for _ in $(seq "$runs"); do
  timed cat cat "$dir/raw.h5"
  timed cp cp "$dir/raw.h5" "$dir/copy.h5"
  rm -f "$dir/copy.h5"
  for l in "${labels[@]}"; do
    IFS=. read -r f np d <<< "$l"
    rm -f "$dir/out.h5"
    # shellcheck disable=SC2086
    timed "$l" env HQ_HDF5_DIRECT="${d#direct}" mpirun $mpirun_flags -np "${np#np}" "$bin" --input "$dir/$f.h5" \
      --output "$dir/out.h5" --device "$dev" -q --force
  done
done
col() { awk -v c="$1" '{print $c}' "$dir/$2.t" | median; }
echo "hdf5_direct: ${size_gib} GiB uint8 stack, $runs runs interleaved, medians; $(nproc) cores; $(date -u +%FT%TZ)"
printf '%-22s %8s %8s %8s\n' what wall_s user_s sys_s
for l in cat cp "${labels[@]}"; do
  printf '%-22s %8.2f %8.2f %8.2f\n' "$l" "$(col 1 "$l")" "$(col 2 "$l")" "$(col 3 "$l")"
done
for f in raw gz1 shgz1; do for np in 1 2; do
  a=$(col 1 "$f.np$np.direct0"); b=$(col 1 "$f.np$np.direct1"); c=$(col 1 cp)
  awk -v f="$f" -v np="$np" -v a="$a" -v b="$b" -v c="$c" 'BEGIN {
    printf "%s, %d rank%s: library %.2f s, direct %.2f s: %.2fx faster; direct/cp %.2f\n",
           f, np, np > 1 ? "s" : "", a, b, a / b, b / c }'
done; done
