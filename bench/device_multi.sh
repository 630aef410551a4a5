#!/bin/bash
# device_multi.sh — on a machine with several GPUs (device tool kind nvidia-h200-x2 or -x4), from the
# repository root: build histeq_dist, then run one HDF5 stack and one single row-banded image with
# -np 1, G and 2G (two ranks a GPU), print the rank -> GPU map from -v, and check that every output
# is byte-identical to the -np 1 output. Needs carry [".devdeps"] (see device_full.sh).
# Usage: bash bench/device_multi.sh [SIZE_GIB=1]
set -u
gib=${1:-1}
OUT=${OUT:-/tmp/hq-out}
mkdir -p "$OUT"
. bench/device/env.sh
make -j16 > "$OUT/multi_build.log" 2>&1 || { tail -20 "$OUT/multi_build.log"; exit 1; }
mpicc -O2 -o build/make_stack bench/make_stack.c -lhdf5 || exit 1
build/make_stack /tmp/hq_stack.h5 "$gib" > /dev/null                  # a stack of 4096^2 slices
build/make_stack /tmp/hq_one.h5 0.25 16384 16384 > /dev/null            # one image: row bands
G=$(nvidia-smi -L | wc -l)
echo "GPUs: $G"
rc=0
for input in /tmp/hq_stack.h5 /tmp/hq_one.h5; do
    for np in 1 "$G" $((2 * G)); do
        out=/tmp/out_np$np.h5
        t0=$(date +%s.%N)
        mpirun --oversubscribe --allow-run-as-root -np "$np" build/histeq_dist --input "$input" --output "$out" \
            --device gpu --force -v > "$OUT/multi_$np.log" 2>&1 || { echo "np $np failed"; cat "$OUT/multi_$np.log"; rc=1; }
        t1=$(date +%s.%N)
        echo "== $(basename "$input") -np $np: $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f s", b - a}')"
        grep -E "rank [0-9]+ on|note:" "$OUT/multi_$np.log"
        if [ "$np" != 1 ]; then
            if python3 -c "
import h5py, sys
a, b = h5py.File('/tmp/out_np1.h5', 'r'), h5py.File('$out', 'r')
sys.exit(0 if all(a[k][()].tobytes() == b[k][()].tobytes() for k in a if k != 'histeq_dist') else 1)"; then
                echo "   identical to -np 1"
            else
                echo "   DIFFERS from -np 1"; rc=1
            fi
        fi
    done
done
exit $rc
