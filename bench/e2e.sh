#!/bin/bash
# e2e.sh — end to end against the floors a user compares with, interleaved on the same files:
# cat, cp, cp + sync, histeq_dist --device copy, histeq_dist on the CPU engine and (where a GPU is
# seen) the GPU engine, with 1 rank, G ranks (G = GPUs) and one rank per core, for
#   raw  an 8-bit HDF5 stack, chunks of one 4096 x 4096 slice (bench/make_stack.c), beside h5py
#        reading and writing it slice by slice;
#   gzip the same stack with shuffle + gzip level 1, beside h5py and `h5repack -f SHUF -f GZIP=1`;
#   png  a collection of gray PNGs (bench/make_pngs.c), beside a one-process-per-core OpenCV pool
#        doing cv2.imread -> cv2.equalizeHist -> cv2.imwrite;
#   many one HDF5 file of many small 8-bit images, a dataset each in groups of 1000 (--many N of
#        --many-side S pixels square), beside a script that reads each with h5py, equalizes it with
#        cv2.equalizeHist and writes it into a new file (HDF5 allows one writer to a file).
# Every repetition runs every command once, in turn, so load from elsewhere falls on all alike.
# Prints the median and min wall time of each, and the median's ratio to cp (and to OpenCV).
#
#   bash bench/e2e.sh [--size GIB] [--gzip-size GIB] [--pngs N] [--png-side S] [--runs R]
#                     [--warmup W] [--dir DIR] [--cases raw,gzip,png,many] [--ranks "1 2"]
#                     [--many N] [--many-side S]
#                     [--bin PATH] [--compare PATH] [--out FILE]
# Defaults: --size 1 --gzip-size 1 --pngs 64 --png-side 2048 --runs 3 --warmup 1 --many 20000
# --many-side 64 (many is left out unless named in --cases)
# --dir /dev/shm/hq_e2e (give a disk path to measure a disk); ranks: 1, G and the cores, less
# repeats. --compare adds the same histeq_dist rows for another binary (e.g. a build of main),
# labelled "before". Data is made once per size and kept in DIR (runs at the same time may share
# it); each run writes its outputs in a directory of its own under DIR, removed after each command
# (not timed) and at the end. The device run: --size 8 --gzip-size 8 --pngs 192 --png-side 4096.
#
# mpirun gets $HQ_MPIRUN_FLAGS (default: --oversubscribe, and --allow-run-as-root as root) and
# nothing else: histeq_dist is run as a user would run it; one rank runs without mpirun. Where DIR
# is not tmpfs, 1-rank rows "+ sync" also sync the output, beside cp + sync.
set -euo pipefail

size=1; gzip_size=""; pngs=64; png_side=2048; runs=3; warmup=1; dir=/dev/shm/hq_e2e; cases=raw,gzip,png
ranks=""; bin=${HQ_BIN:-build/histeq_dist}; compare=""; out=""; many=20000; many_side=64
while [ $# -gt 0 ]; do
  case "$1" in
    --size) size=$2 ;; --gzip-size) gzip_size=$2 ;; --pngs) pngs=$2 ;; --png-side) png_side=$2 ;;
    --runs) runs=$2 ;; --warmup) warmup=$2 ;; --dir) dir=$2 ;; --cases) cases=$2 ;; --ranks) ranks=$2 ;;
    --bin) bin=$2 ;; --compare) compare=$2 ;; --out) out=$2 ;; --many) many=$2 ;; --many-side) many_side=$2 ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "e2e.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift 2
done
gzip_size=${gzip_size:-$size}
# The peers (h5py, the OpenCV pool) need a python3 with h5py and cv2: Debian's on a build machine, the
# GPU image's own python3 (not /usr/bin's) there. PYTHON overrides.
py=${PYTHON:-}
if [ -z "$py" ]; then
  for c in /usr/bin/python3 python3; do
    if "$c" -c "import h5py, cv2" >/dev/null 2>&1; then py=$c; break; fi
  done
  py=${py:-/usr/bin/python3}
fi
tools=${BUILD:-build}/bench-tools
export OMPI_MCA_btl_vader_single_copy_mechanism=${OMPI_MCA_btl_vader_single_copy_mechanism:-none}
default_flags="--oversubscribe"
[ "$(id -u)" = 0 ] && default_flags="$default_flags --allow-run-as-root"
mpirun_flags=${HQ_MPIRUN_FLAGS:-$default_flags}
[ -x "$bin" ] || { echo "e2e.sh: $bin is not built (make, or --bin PATH)" >&2; exit 2; }
[ -z "$compare" ] || [ -x "$compare" ] || { echo "e2e.sh: --compare $compare is not executable" >&2; exit 2; }
[ -n "$out" ] && exec > >(tee "$out") 2>&1

cores=$(nproc)
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ -z "$ranks" ]; then
  ranks=$(printf '%s\n' 1 "$gpus" "$cores" | awk '$1 > 0' | sort -n | uniq | xargs)
fi
has_py() { "$py" -c "import $1" >/dev/null 2>&1; }

# ---- what ran, where ----
echo "# bench/e2e.sh $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "# command: bash bench/e2e.sh --size $size --gzip-size $gzip_size --pngs $pngs --png-side $png_side --runs $runs --warmup $warmup --dir $dir --cases $cases --ranks \"$ranks\"${compare:+ --compare $compare} --many $many --many-side $many_side"
echo "# host: $(hostname), $cores CPUs ($(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)), $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo), GPUs: $gpus"
nvidia-smi -L 2>/dev/null | sed 's/^/#   /' || true
mkdir -p "$dir"
on_tmpfs=0; [ "$(stat -f -c %T "$dir")" = tmpfs ] && on_tmpfs=1
echo "# data: $dir on $(stat -f -c %T "$dir") ($(df -h --output=avail "$dir" | tail -1 | tr -d ' ') free)"
rev='not a git checkout'
if git rev-parse --git-dir >/dev/null 2>&1; then
  rev=$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . 2>/dev/null || echo ', with local changes')
fi
echo "# histeq_dist: $bin ($rev)${compare:+; before: $compare}"
echo "# mpirun flags: $mpirun_flags"

# ---- data, made once ----
mkdir -p "$tools"
if [[ $cases == *raw* || $cases == *gzip* ]] && [ ! -x "$tools/make_stack" ]; then
  mpicc -O2 $(pkg-config --cflags hdf5-openmpi 2>/dev/null) -o "$tools/make_stack" bench/make_stack.c \
    $(pkg-config --libs hdf5-openmpi 2>/dev/null || echo -lhdf5)
fi
if [[ $cases == *png* ]] && [ ! -x "$tools/make_pngs" ]; then
  cc -O2 -fopenmp -o "$tools/make_pngs" bench/make_pngs.c $(pkg-config --cflags --libs libpng)
fi
raw=$dir/raw_${size}g.h5
gz=$dir/gzip_${gzip_size}g.h5
pngdir=$dir/png_${pngs}x${png_side}
# Made under a name of this run's own and renamed into place: runs at the same time never see a
# half-made input (the loser of a race throws its copy away).
make_raw() { # path GiB
  [ -f "$1" ] || { "$tools/make_stack" "$1.tmp$$" "$2" >/dev/null && mv "$1.tmp$$" "$1"; }
}
if [[ $cases == *raw* ]]; then make_raw "$raw" "$size"; fi
if [[ $cases == *gzip* ]] && [ ! -f "$gz" ]; then
  make_raw "$dir/raw_${gzip_size}g.h5" "$gzip_size"
  if command -v h5repack >/dev/null; then
    h5repack -f SHUF -f GZIP=1 "$dir/raw_${gzip_size}g.h5" "$gz.tmp$$"
  else # the GPU image has h5py but no hdf5-tools: the same filters, chunk for chunk
    "$py" -c 'import sys, h5py
with h5py.File(sys.argv[1], "r") as fi, h5py.File(sys.argv[2], "w") as fo:
    d = fi["stack"]
    o = fo.create_dataset("stack", shape=d.shape, dtype=d.dtype, chunks=d.chunks, shuffle=True, compression="gzip", compression_opts=1)
    for i in range(d.shape[0]):
        o[i] = d[i]' "$dir/raw_${gzip_size}g.h5" "$gz.tmp$$"
  fi && mv "$gz.tmp$$" "$gz"
fi
manyh5=$dir/many_${many}x${many_side}.h5
if [[ $cases == *many* ]] && [ ! -f "$manyh5" ]; then
  "$py" -c 'import sys, h5py, numpy as np
n, side = int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(7)
y, x = np.mgrid[0:side, 0:side]
with h5py.File(sys.argv[1], "w") as f:
    for i in range(n):
        lo = int(rng.integers(20, 90))
        img = lo + (x * 0.3 + y * 0.2 + rng.integers(0, 40, (side, side))) % 60
        f.create_dataset(f"g{i // 1000:04d}/img{i % 1000:04d}", data=img.astype(np.uint8))' "$manyh5.tmp$$" "$many" "$many_side" &&
    mv "$manyh5.tmp$$" "$manyh5"
fi
if [[ $cases == *png* ]] && [ ! -d "$pngdir" ]; then
  mkdir -p "$pngdir.tmp$$" && "$tools/make_pngs" "$pngdir.tmp$$" "$pngs" "$png_side"
  mv -T "$pngdir.tmp$$" "$pngdir" 2>/dev/null || rm -rf "$pngdir.tmp$$"
fi

cat > "$tools/h5py_copy.py" <<'EOF'
import sys
import h5py
src, dst, gz = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
with h5py.File(src, "r") as fi, h5py.File(dst, "w") as fo:
    d = fi["stack"]
    kw = dict(compression="gzip", compression_opts=1, shuffle=True) if gz else {}
    o = fo.create_dataset("stack", shape=d.shape, dtype=d.dtype, chunks=d.chunks, **kw)
    for i in range(d.shape[0]):
        o[i] = d[i]
EOF
cat > "$tools/h5py_opencv.py" <<'EOF'
import sys
import cv2
import h5py
src, dst = sys.argv[1], sys.argv[2]
with h5py.File(src, "r") as fi, h5py.File(dst, "w") as fo:
    def one(name, obj):
        if isinstance(obj, h5py.Dataset):
            fo.create_dataset(name, data=cv2.equalizeHist(obj[()]))
    fi.visititems(one)
EOF
cat > "$tools/opencv_pool.py" <<'EOF'
import os
import sys
from multiprocessing import Pool
import cv2
cv2.setNumThreads(1)
src, dst, procs = sys.argv[1], sys.argv[2], int(sys.argv[3])
def one(name):
    a = cv2.imread(os.path.join(src, name), cv2.IMREAD_UNCHANGED)
    if a is None or not cv2.imwrite(os.path.join(dst, name), cv2.equalizeHist(a)):
        raise SystemExit(f"opencv: {name} failed")
if __name__ == "__main__":
    os.makedirs(dst, exist_ok=True)
    names = sorted(n for n in os.listdir(src) if n.endswith(".png"))
    with Pool(procs) as p:
        p.map(one, names, chunksize=1)
EOF

# ---- the rows: case, label, ranks, input bytes, command (OUT is the output path) ----
R_CASE=(); R_LABEL=(); R_RANKS=(); R_BYTES=(); R_CMD=()
row() { R_CASE+=("$1"); R_LABEL+=("$2"); R_RANKS+=("$3"); R_BYTES+=("$4"); R_CMD+=("$5"); }
hq_rows() { # case input bytes
  local c=$1 in=$2 b=$3 np dev
  for np in $ranks; do
    # One rank is started as a user starts one process, without mpirun (usage's first line).
    local launch="mpirun -np $np $mpirun_flags"
    [ "$np" = 1 ] && launch=""
    # auto: what a user gets without --device (the GPU unless ranks share it); it must never lose
    # to the better of cpu and gpu at the same rank count.
    for dev in copy cpu $( [ "$gpus" -gt 0 ] && echo gpu auto ); do
      row "$c" "histeq_dist $dev" "$np" "$b" "$launch $bin -i $in -o OUT --device $dev -q"
      # On a disk, beside cp + sync: the output's last writes reach the disk too.
      [ "$np" = 1 ] && [ "$on_tmpfs" = 0 ] && [ "$dev" != auto ] &&
        row "$c" "histeq_dist $dev + sync" "$np" "$b" "$launch $bin -i $in -o OUT --device $dev -q && sync OUT"
    done
    if [ -n "$compare" ]; then
      for dev in cpu $( [ "$gpus" -gt 0 ] && echo gpu ); do
        row "$c" "before $dev" "$np" "$b" "$launch $compare -i $in -o OUT --device $dev -q"
      done
    fi
  done
}
file_rows() { # case input
  local c=$1 in=$2 b
  b=$(stat -c %s "$in")
  row "$c" "cat" 1 "$b" "cat $in > /dev/null"
  row "$c" "cp" 1 "$b" "cp $in OUT"
  row "$c" "cp + sync" 1 "$b" "cp $in OUT && sync OUT"
}
for c in ${cases//,/ }; do
  case $c in
    raw)
      b=$(stat -c %s "$raw"); file_rows raw "$raw"
      has_py h5py && row raw "h5py read+write" 1 "$b" "$py $tools/h5py_copy.py $raw OUT 0"
      hq_rows raw "$raw" "$b" ;;
    gzip)
      b=$(stat -c %s "$gz"); file_rows gzip "$gz"
      has_py h5py && row gzip "h5py read+write" 1 "$b" "$py $tools/h5py_copy.py $gz OUT 1"
      command -v h5repack >/dev/null && row gzip "h5repack SHUF+GZIP=1" 1 "$b" "h5repack -f SHUF -f GZIP=1 $gz OUT"
      hq_rows gzip "$gz" "$b" ;;
    png)
      b=$(du -sb "$pngdir" | cut -f1)
      row png "cat" 1 "$b" "cat $pngdir/*.png > /dev/null"
      row png "cp" 1 "$b" "cp -r $pngdir OUT"
      row png "cp + sync" 1 "$b" "cp -r $pngdir OUT && find OUT -type f -exec sync {} +"
      has_py cv2 && row png "opencv pool" "$cores" "$b" "$py $tools/opencv_pool.py $pngdir OUT $cores"
      hq_rows png "$pngdir" "$b" ;;
    many)
      b=$(stat -c %s "$manyh5"); file_rows many "$manyh5"
      has_py cv2 && row many "h5py + opencv" 1 "$b" "$py $tools/h5py_opencv.py $manyh5 OUT"
      hq_rows many "$manyh5" "$b" ;;
    *) echo "e2e.sh: unknown case $c" >&2; exit 2 ;;
  esac
done

n=${#R_CMD[@]}
times=$(mktemp -d)
outs=$(mktemp -d "$dir/run.XXXXXX") # this run's outputs, on the data's file system
trap 'rm -rf "$times" "$outs"' EXIT
run_row() { # index -> seconds on stdout, or FAIL
  local k=$1 o="$outs/out_$k" cmd t0 t1
  rm -rf "$o" "$o.journal"
  cmd=${R_CMD[$k]//OUT/$o}
  t0=$(date +%s.%N)
  if ! bash -c "$cmd" > "$times/last.log" 2>&1; then
    echo "FAIL"; { echo "# failed: $cmd"; sed 's/^/#   /' "$times/last.log" | tail -5; } >&2
    rm -rf "$o" "$o.journal"; return
  fi
  t1=$(date +%s.%N)
  rm -rf "$o" "$o.journal"
  awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.4f\n", b - a}'
}
for _ in $(seq "$warmup"); do for k in $(seq 0 $((n - 1))); do run_row "$k" >/dev/null; done; done
for r in $(seq "$runs"); do
  for k in $(seq 0 $((n - 1))); do run_row "$k" >> "$times/$k"; done
  echo "# repetition $r of $runs done" >&2
done

# ---- the table ----
stat_of() { # file -> "median min" over numeric lines, or "FAIL FAIL"
  grep -v FAIL "$1" 2>/dev/null | sort -n | awk '{a[NR]=$1} END {if (!NR) {print "FAIL FAIL"; exit}
    m = NR % 2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2; printf "%.3f %.3f\n", m, a[1]}'
}
printf '\n| case | what | ranks | median s | min s | x cp | x OpenCV | MiB/s |\n|---|---|---|---|---|---|---|---|\n'
declare -A CP CV
for k in $(seq 0 $((n - 1))); do
  read -r med _ <<< "$(stat_of "$times/$k")"
  [ "${R_LABEL[$k]}" = cp ] && CP[${R_CASE[$k]}]=$med
  { [ "${R_LABEL[$k]}" = "opencv pool" ] || [ "${R_LABEL[$k]}" = "h5py + opencv" ]; } && CV[${R_CASE[$k]}]=$med
done
for k in $(seq 0 $((n - 1))); do
  read -r med min <<< "$(stat_of "$times/$k")"
  cpm=${CP[${R_CASE[$k]}]:-}; cvm=${CV[${R_CASE[$k]}]:-}
  awk -v c="${R_CASE[$k]}" -v l="${R_LABEL[$k]}" -v np="${R_RANKS[$k]}" -v m="$med" -v mn="$min" -v cp="$cpm" \
      -v cv="$cvm" -v b="${R_BYTES[$k]}" 'BEGIN {
    ok = m != "FAIL"
    xcp = ok && cp != "" && cp != "FAIL" && cp > 0 ? sprintf("%.2f", m / cp) : ""
    xcv = ok && cv != "" && cv != "FAIL" && cv > 0 ? sprintf("%.2f", m / cv) : ""
    rate = ok && m > 0 ? sprintf("%.0f", b / 1048576 / m) : ""
    printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", c, l, np, m, mn, xcp, xcv, rate }'
done
echo
echo "x cp, x OpenCV: median time / the median of cp (of OpenCV) on the same data; below 1 is faster."
