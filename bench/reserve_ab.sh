#!/bin/bash
# reserve_ab.sh — the ways the output's space is reserved and its pixels written, same binary,
# interleaved, with each run's phases (--summary), and optionally a second binary (e.g. a build of
# main) as "before": HQ_RESERVE=sync (fallocate at create, pwrite), background (fallocate on a
# thread while pass 1 runs, pwrite), map (tmpfs: the pixel region populated through a shared
# mapping by every rank's workers, memcpy into it; io/hdf5/out_map.c).
#
#   bash bench/reserve_ab.sh INPUT.h5 [--runs R] [--devices "copy cpu"] [--np N] [--bin PATH]
#                            [--compare PATH] [--dir DIR] [--modes "sync background map"]
# Prints one line a run (wall, create, read, write, close, load) and the median wall of each.
set -euo pipefail
in=$1; shift
runs=5; devices="copy cpu"; np=1; bin=${HQ_BIN:-build/histeq_dist}; compare=""; dir=/dev/shm/hq_reserve_ab
modes="sync background map"
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2 ;; --devices) devices=$2 ;; --np) np=$2 ;; --bin) bin=$2 ;; --compare) compare=$2 ;;
    --dir) dir=$2 ;; --modes) modes=$2 ;; *) echo "reserve_ab.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift 2
done
export OMPI_MCA_btl_vader_single_copy_mechanism=${OMPI_MCA_btl_vader_single_copy_mechanism:-none}
flags="--oversubscribe"; [ "$(id -u)" = 0 ] && flags="$flags --allow-run-as-root"
mkdir -p "$dir"
echo "# bench/reserve_ab.sh $in --runs $runs --devices \"$devices\" --np $np --modes \"$modes\" --bin $bin${compare:+ --compare $compare} ($(date -u +%Y-%m-%dT%H:%M:%SZ), $(hostname), $(nproc) CPUs, $(stat -f -c %T "$dir"))"
variants=$modes; [ -n "$compare" ] && variants="before $variants"
log=$(mktemp)
for r in $(seq "$runs"); do
  for dev in $devices; do
    for v in $variants; do
      b=$bin; mode=$v
      [ "$v" = before ] && { b=$compare; mode=""; }
      rm -f "$dir/o.h5" "$dir/s.json"
      t0=$(date +%s.%N)
      HQ_RESERVE=$mode mpirun -np "$np" $flags "$b" -i "$in" -o "$dir/o.h5" --device "$dev" -q --summary "$dir/s.json"
      t1=$(date +%s.%N)
      python3 - "$dir/s.json" "$dev" "$v" "$t0" "$t1" <<'PY' | tee -a "$log"
import json, sys
s = json.load(open(sys.argv[1])); p = s["phases"]
ph = " ".join("%s %.3f" % (k, p[k]["max_s"]) for k in ("create", "read", "write", "close"))
print("%s %s wall %.3f %s load %s" % (sys.argv[2], sys.argv[3], float(sys.argv[5]) - float(sys.argv[4]), ph,
                                      open("/proc/loadavg").read().split()[0]))
PY
    done
  done
done
echo "# median wall s (min):"
awk '{k = $1 " " $2; w[k] = w[k] " " $4} END {for (k in w) print k, w[k]}' "$log" | sort | while read -r d v rest; do
  printf '%-6s %-10s %s\n' "$d" "$v" "$(echo "$rest" | tr ' ' '\n' | sort -n | awk '{a[NR]=$1} END {printf "%.3f (%.3f)", (NR % 2 ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2), a[1]}')"
done
rm -rf "$log" "$dir"
