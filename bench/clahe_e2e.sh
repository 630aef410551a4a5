#!/bin/bash
# clahe_e2e.sh — CLAHE end to end on one large HDF5 image, on 1 and G GPUs (one rank each), beside
# `cp` of the same file, histeq_dist --device copy (our own I/O, no compute) and plain equalization,
# interleaved round by round. Shows each run's phases: the tile-row exchange between the ranks
# that share the image (the "halo": tile rows summed where several ranks count into them, and their
# LUTs' histograms sent to the ranks that blend them) is the allreduce phase, apart from the rest.
#
#   bash bench/clahe_e2e.sh [SIZE_GIB=16] [G=every GPU] [RUNS=2]
#
# The image: one 2-D uint8 dataset of about SIZE_GIB (a square whose side is a multiple of 4096),
# chunks of CHUNK x CHUNK (default 4096), made by bench/make_image.c in DIR (default /dev/shm/hq_clahe;
# input + output must fit there twice over). CLAHE settings: CLAHE_ARGS (default "--clahe-tile 4096
# --clip-limit 2": tiles of one chunk, as one would on a slide). Checks that the G-rank output equals
# the 1-rank output byte for byte (python3 with h5py, where present). Environment as bench/scaling.sh:
# DEVICE=gpu (cpu runs the same on the CPU engine, e.g. `DEVICE=cpu bash bench/clahe_e2e.sh 0.05 2 1`
# on the build machine), OUT (default /tmp/hq-out), HQ_BIN, HQ_MPIRUN_FLAGS. Prints, and writes to
# $OUT/clahe_e2e.txt.
set -u
DEVICE=${DEVICE:-gpu}
OUT=${OUT:-/tmp/hq-out}
DIR=${DIR:-/dev/shm/hq_clahe}
BIN=${HQ_BIN:-build/histeq_dist}
CHUNK=${CHUNK:-4096}
read -r -a CLAHE_ARGS <<< "${CLAHE_ARGS:---clahe-tile 4096 --clip-limit 2}"
read -r -a MPIRUN_FLAGS <<< "${HQ_MPIRUN_FLAGS:---oversubscribe --allow-run-as-root --bind-to none}"
mkdir -p "$OUT" "$DIR" build
LOG=$OUT/clahe_e2e.txt
: > "$LOG"
say() { echo "$*" | tee -a "$LOG"; }
fail() { say "clahe_e2e.sh: $*"; exit 1; }

if [ "$DEVICE" = gpu ]; then
    . bench/device/env.sh
    make -j"$(nproc)" CUDA_ARCH=-arch=sm_90 > "$OUT/clahe_e2e_build.log" 2>&1 ||
        { tail -20 "$OUT/clahe_e2e_build.log"; fail "build failed"; }
    HDF5_FLAGS=(-lhdf5)
    GPUS=$(nvidia-smi -L | wc -l)
else
    HDF5_FLAGS=($(pkg-config --cflags --libs hdf5-openmpi 2>/dev/null || echo -lhdf5))
    GPUS=0
fi
SIZE=${1:-16}
G=${2:-$GPUS}
RUNS=${3:-2}
[ "$G" -ge 1 ] 2>/dev/null || fail "G must be a rank count of 1 or more (got '$G')"
mpicc -O2 -o build/make_image bench/make_image.c "${HDF5_FLAGS[@]}" || fail "cannot build bench/make_image.c"
[ -x "$BIN" ] || fail "$BIN is not built"
. bench/summary_json.sh # field, phase_max

side=$(awk -v s="$SIZE" -v c="$CHUNK" 'BEGIN {x = int(sqrt(s * 1073741824) / 4096) * 4096; if (x < c) x = int(sqrt(s * 1073741824)); print x}')
in=$DIR/in.h5
t0=$(date +%s.%N)
build/make_image "$in" 1 "$side" "$side" "$CHUNK" "$CHUNK" > /dev/null || fail "cannot write $in"
bytes=$(stat -c %s "$in")
say "# bash bench/clahe_e2e.sh $SIZE $G $RUNS — device $DEVICE, $(hostname), $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD 2>/dev/null)"
[ "$DEVICE" = gpu ] && say "# $(nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c | tr -s ' ')"
say "# $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB RAM; data in $DIR ($(df -PT "$DIR" | awk 'NR == 2 {print $2}'))"
say "# image: ${side} x ${side} uint8 ($(awk -v b="$bytes" 'BEGIN {printf "%.2f", b / 1073741824}') GiB file), chunks ${CHUNK} x ${CHUNK}, written in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}') s"
say "# clahe: ${CLAHE_ARGS[*]}; wall: the program's own (--summary), mpirun start-up excluded; cp: the whole command"
say "# exchange: the CLAHE tile rows summed and sent between ranks (the allreduce phase; 0 with one rank)"

# one TAG N ARGS...: a run, its summary in $OUT/TAG.json, its log in $OUT/TAG.log.
one() {
    local tag=$1 n=$2
    shift 2
    rm -f "$DIR/out.h5"
    mpirun "${MPIRUN_FLAGS[@]}" -np "$n" "$BIN" --input "$in" --output "$DIR/out_$tag.h5" --force -v --progress 0 \
        --summary "$OUT/$tag.json" "$@" > "$OUT/$tag.log" 2>&1 || { cat "$OUT/$tag.log"; fail "$tag failed"; }
}
row() { # row LABEL TAG
    local j=$OUT/$2.json w
    w=$(field "$j" wall_s)
    printf "%-26s %8.2f %7.2f %7.2f %7.2f %9.3f %7.2f %7.2f %9.2f\n" "$1" "$w" "$(awk -v w="$w" -v c="$cp_s" 'BEGIN {print w / c}')" \
        "$(phase_max "$j" read)" "$(phase_max "$j" histogram)" "$(phase_max "$j" allreduce)" "$(phase_max "$j" remap)" \
        "$(phase_max "$j" write)" "$(awk -v b="$bytes" -v w="$w" 'BEGIN {printf "%.2f", b / w / 1073741824}')" | tee -a "$LOG"
}
dev=$DEVICE
for ((k = 1; k <= RUNS; k++)); do
    s0=$(date +%s.%N)
    cp "$in" "$DIR/cp.h5"
    s1=$(date +%s.%N)
    rm -f "$DIR/cp.h5"
    cp_s=$(awk -v a="$s0" -v b="$s1" 'BEGIN {print b - a}')
    one copy 1 --device copy
    one eq1 1 --device "$dev"
    one clahe1 1 --device "$dev" --method clahe "${CLAHE_ARGS[@]}"
    [ "$G" -gt 1 ] && one "clahe$G" "$G" --device "$dev" --method clahe "${CLAHE_ARGS[@]}"
    say ""
    say "## round $k: cp $(printf %.2f "$cp_s") s"
    say "run                          wall_s   vs_cp  read_s  hist_s exchange_s remap_s write_s     GiB/s"
    row "--device copy, 1 rank" copy
    row "equalize, 1 rank $dev" eq1
    row "clahe, 1 rank $dev" clahe1
    [ "$G" -gt 1 ] && row "clahe, $G ranks $dev" "clahe$G"
    [ "$G" -gt 1 ] && say "   $(grep -h 'CLAHE tile rows exchanged' "$OUT/clahe$G.log" | sed 's/histeq_dist: //' | tr '\n' ';')"
    rm -f "$DIR"/out_copy.h5 "$DIR"/out_eq1.h5
    if [ "$G" -gt 1 ]; then
        if python3 -c "import h5py" 2> /dev/null; then
            if python3 -c "
import h5py, sys
a, b = h5py.File('$DIR/out_clahe1.h5', 'r'), h5py.File('$DIR/out_clahe$G.h5', 'r')
sys.exit(0 if a['image'][()].tobytes() == b['image'][()].tobytes() else 1)"; then
                say "   $G-rank output equals the 1-rank output byte for byte"
            else
                say "   $G-rank output DIFFERS from the 1-rank output"; rm -rf "$DIR"; exit 1
            fi
        else
            say "   (no h5py here: outputs not compared)"
        fi
    fi
    rm -f "$DIR"/out_clahe*.h5
done
grep -h "rank [0-9]* on" "$OUT/clahe$G.log" "$OUT/clahe1.log" 2> /dev/null | sed 's/^/# /' | sort -u | tee -a "$LOG"
rm -rf "$DIR"
