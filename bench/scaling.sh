#!/bin/bash
# scaling.sh — weak and strong scaling of histeq_dist over 1, 2, 4, ... G GPUs of one machine, one
# command for the whole table (device tool kinds nvidia-h200-x2 / -x4 / -x8, carry [".devdeps"]):
#
#   bash bench/scaling.sh [G] [SIZE_GIB] [PER_RANK_GIB]
#
#   G             scale to this many GPUs, one rank each: runs with 1, 2, 4, ... G ranks
#                 (default: every GPU nvidia-smi lists)
#   SIZE_GIB      strong scaling: one uint8 image of about this size, 2-D tiles of 1024 x 1024 chunks,
#                 scope global (default: 30, or the largest that input + output fit on the disk)
#   PER_RANK_GIB  weak scaling: a stack of 4096 x 4096 slices, this much per rank (default 2)
#
# VARIANTS (default "default"): the weak series runs once per entry, side by side on the same
# input; an entry is "default" or VAR=VALUE, an environment setting for that series (for instance
# HQ_HDF5_COLLECTIVE=1, or HQ_BLOCK_ORDER=row: blocks in row order, not chunk order); HQ_BIN=PATH
# runs another build instead (an older tree's, for a before/after on the same inputs). STRONG=0 leaves
# the strong series out; STRONG_VARIANTS (default "default") does for the strong series what
# VARIANTS does for the weak one.
#
# WARM_GIB: before anything is timed, this much memory is taken once and given back (a file in
# /dev/shm, reserved with fallocate): on the lent VMs memory used for the first time costs 14-37%
# more than memory used again (bench/vm_memory.sh), which would otherwise land in the timings of
# whichever case first needs more memory than the ones before it, always the largest. Default: the
# largest footprint of the runs (input + output, plus the strong series' held share), capped by
# what /dev/shm has free; 0 skips the warm-up.
#
# Prints, and writes to $OUT/scaling.txt: per run the wall time the program measured (--summary
# JSON), the throughput, the efficiency (weak: T1/Tn; strong: T1/(n Tn)), the allreduce's max time
# over ranks and its share of the wall time, the peak RSS and device memory (max over ranks), and
# the rank -> GPU map of the G-rank runs (-v). Data goes to DIR, deleted as the runs finish.
#
# Environment: DEVICE=gpu (cpu: try the script where there is no GPU, e.g. `DEVICE=cpu bash
# bench/scaling.sh 2 0.05 0.02` on the build machine); DIR (default /tmp/hq_scaling: on several
# nodes it must be a filesystem every rank sees); OUT (default /tmp/hq-out); HQ_BIN (default
# build/histeq_dist, built here on a GPU machine); HQ_MPIRUN_FLAGS (default --oversubscribe
# --allow-run-as-root --bind-to none: the engine and I/O threads of a rank must not share one core).
set -u
DEVICE=${DEVICE:-gpu}
OUT=${OUT:-/tmp/hq-out}
DIR=${DIR:-/tmp/hq_scaling}
BIN=${HQ_BIN:-build/histeq_dist}
read -r -a MPIRUN_FLAGS <<< "${HQ_MPIRUN_FLAGS:---oversubscribe --allow-run-as-root --bind-to none}"
mkdir -p "$OUT" "$DIR" build
LOG=$OUT/scaling.txt
: > "$LOG"
say() { echo "$*" | tee -a "$LOG"; }
fail() { say "scaling.sh: $*"; exit 1; }

if [ "$DEVICE" = gpu ]; then
    . bench/device/env.sh
    make -j16 > "$OUT/scaling_build.log" 2>&1 || { tail -20 "$OUT/scaling_build.log"; fail "build failed"; }
    HDF5_FLAGS=(-lhdf5)
    GPUS=$(nvidia-smi -L | wc -l)
else
    HDF5_FLAGS=($(pkg-config --cflags --libs hdf5-openmpi 2>/dev/null || echo -lhdf5))
    GPUS=0
fi
G=${1:-$GPUS}
[ "$G" -ge 1 ] 2>/dev/null || fail "G must be a GPU count of 1 or more (got '$G')"
[ "$DEVICE" != gpu ] || [ "$G" -le "$GPUS" ] || fail "G = $G, but this machine has $GPUS GPUs"
PER_RANK=${3:-2}
mpicc -O2 -o build/make_image bench/make_image.c "${HDF5_FLAGS[@]}" || fail "cannot build bench/make_image.c"
[ -x "$BIN" ] || fail "$BIN is not built"

# The strong-scaling image: 30 GiB unless the disk cannot hold it twice (input + output) with room
# to spare; the weak-scaling stacks are made and deleted one at a time, before it.
free_gib=$(df -Pk "$DIR" | awk 'NR == 2 {printf "%.1f", $4 / 1048576}')
fit=$(awk -v f="$free_gib" 'BEGIN {printf "%.1f", f / 2.3}')
SIZE=${2:-$(awk -v f="$fit" 'BEGIN {print (f < 30 ? f : 30)}')}
side=$(awk -v s="$SIZE" 'BEGIN {x = int(sqrt(s * 1073741824) / 1024) * 1024; if (x < 1024) x = int(sqrt(s * 1073741824)); print x}')

# The warm-up (WARM_GIB above).
need=$(awk -v g="$G" -v p="$PER_RANK" -v s="$SIZE" -v strong="${STRONG:-1}" 'BEGIN {
    w = 2 * g * p; t = strong == 0 ? 0 : 3 * s; printf "%d", (w > t ? w : t) + 4 }')
shm_free=$(df -Pk /dev/shm 2>/dev/null | awk 'NR == 2 {printf "%d", $4 / 1048576 * 0.9}')
WARM=${WARM_GIB:-$(( need < ${shm_free:-0} ? need : ${shm_free:-0} ))}
warm_note="no warm-up"
if [ "$WARM" -gt 0 ] 2>/dev/null; then
    t0=$(date +%s.%N)
    fallocate -l "${WARM}G" /dev/shm/hq_scaling_warm.$$ && rm -f /dev/shm/hq_scaling_warm.$$ ||
        { rm -f /dev/shm/hq_scaling_warm.$$; fail "warm-up: cannot take $WARM GiB in /dev/shm (WARM_GIB=0 skips it)"; }
    warm_note=$(awk -v a="$t0" -v b="$(date +%s.%N)" -v w="$WARM" 'BEGIN {printf "memory warmed first: %d GiB taken and given back in %.2f s", w, b - a}')
fi

ranks=()
for ((n = 1; n <= G; n *= 2)); do ranks+=("$n"); done
[ "${ranks[-1]}" = "$G" ] || ranks+=("$G")

. bench/summary_json.sh # field, phase_max, phase_rows, weak_slices
mib() { awk -v b="${1:-0}" 'BEGIN {printf "%.0f", b / 1048576}'; }
# ext TAG N: the run's time under mpirun, start-up included.
ext() { awk '{printf "%.2f", $2 - $1}' "$OUT/$1_$2.time"; }

# row_args TAG N: the awk settings (-v) a table row takes from TAG_N's run: n, b (bytes), w (wall),
# t1 (the table's first wall time: reset t1 before a table), a (allreduce), r (peak RSS, MiB),
# d (device MiB, or -), e (mpirun's time), cr / rd / wr (create, read, write phases).
row_args() {
    local j=$OUT/$1_$2.json w dev d=-
    w=$(field "$j" wall_s)
    t1=${t1:-$w}
    dev=$(field "$j" device_peak_bytes)
    [ -z "$dev" ] || d=$(mib "$dev")
    ARGS=(-v n="$2" -v b="$(field "$j" bytes)" -v w="$w" -v t1="$t1" -v a="$(phase_max "$j" allreduce)"
          -v r="$(mib "$(field "$j" peak_rss_bytes)")" -v d="$d" -v e="$(ext "$1" "$2")"
          -v cr="$(phase_max "$j" create)" -v rd="$(phase_max "$j" read)" -v wr="$(phase_max "$j" write)")
}

# run_case TAG N INPUT: one run; leaves $OUT/TAG_N.json and .log, prints nothing.
# VARIANT (VAR=VALUE, or default/unset): one more environment setting for this run.
# A variant's name as part of a file name (HQ_BIN=a/b -> HQ_BIN_a_b).
vtag() { printf '%s' "$1" | tr '/=' '__'; }

run_case() {
    local tag=$1 n=$2 input=$3 out=$DIR/out.h5 t0 t1 pre=() bin=$BIN
    case "${VARIANT:-default}" in
        default) ;;
        HQ_BIN=*) bin=${VARIANT#HQ_BIN=} ;;
        *) pre=(env "$VARIANT") ;;
    esac
    rm -f "$out"
    t0=$(date +%s.%N)
    "${pre[@]}" mpirun "${MPIRUN_FLAGS[@]}" -np "$n" "$bin" --input "$input" --output "$out" --device "$DEVICE" --force -v \
        --progress 0 --summary "$OUT/${tag}_$n.json" > "$OUT/${tag}_$n.log" 2>&1
    local rc=$?
    t1=$(date +%s.%N)
    rm -f "$out"
    echo "$t0 $t1" > "$OUT/${tag}_$n.time"
    [ $rc = 0 ] || { cat "$OUT/${tag}_$n.log"; fail "$tag with $n ranks failed (exit $rc)"; }
}

say "# bash bench/scaling.sh $G $SIZE $PER_RANK — device $DEVICE, $(hostname), $(date -u +%FT%TZ), commit ${HQ_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null)}"
[ "$DEVICE" = gpu ] && say "# $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | sort | uniq -c | tr -s ' ')"
say "# $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB RAM, $free_gib GiB free in $DIR; mpirun ${MPIRUN_FLAGS[*]}"
say "# wall: the program's own (--summary wall_s); mpirun start-up excluded. Inputs were just written: read from the page cache."
say "# $warm_note (WARM_GIB); transparent huge pages: $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || echo unknown)"

say ""
# Each weak input is written once and run under every entry of VARIANTS, side by side.
slices_per_rank=$(weak_slices "$PER_RANK")
read -r -a PATHS <<< "${VARIANTS:-default}"
# Each entry names its runs' files: one listed twice would overwrite the first's.
for list in "${VARIANTS:-default}" "${STRONG_VARIANTS:-default}"; do
    [ -z "$(printf '%s\n' $list | sort | uniq -d)" ] || fail "VARIANTS and STRONG_VARIANTS must not list an entry twice"
done
for n in "${ranks[@]}"; do
    input=$DIR/weak_$n.h5
    build/make_image "$input" $((slices_per_rank * n)) 4096 4096 > /dev/null || fail "cannot write $input"
    for wp in "${PATHS[@]}"; do
        VARIANT=$wp run_case "weak-$(vtag "$wp")" "$n" "$input"
    done
    rm -f "$input"
done
for wp in "${PATHS[@]}"; do
    say "## weak scaling: $PER_RANK GiB per rank (a stack of 4096 x 4096 uint8 slices), scope image, $wp"
    say "ranks  GiB      wall_s  mpirun_s  GiB/s   efficiency  allreduce_s  peak_RSS_MiB  device_MiB  create_s  read_s  write_s"
    t1=""
    for n in "${ranks[@]}"; do
        row_args "weak-$(vtag "$wp")" "$n"
        awk "${ARGS[@]}" 'BEGIN {
            printf "%5d  %7.2f  %7.3f  %8s  %6.2f  %9.1f%%  %11.4f  %12s  %10s  %8.3f  %6.3f  %7.3f\n", n, b / 2^30, w, e,
                   b / 2^30 / w, 100 * t1 / w, a, r, d, cr, rd, wr }' | tee -a "$LOG"
    done
    say ""
done

input=$DIR/strong.h5
read -r -a SPATHS <<< "${STRONG_VARIANTS:-default}"
[ "${STRONG:-1}" = 0 ] || {
build/make_image "$input" 1 "$side" "$side" 1024 1024 > "$OUT/strong_make.log" || fail "cannot write $input"
for n in "${ranks[@]}"; do
    for sp in "${SPATHS[@]}"; do
        VARIANT=$sp run_case "strong-$(vtag "$sp")" "$n" "$input"
    done
done
rm -f "$input"
for sp in "${SPATHS[@]}"; do
say "## strong scaling: one $side x $side uint8 image ($(awk -v s="$side" 'BEGIN {printf "%.1f", s * s / 2^30}') GiB, chunks 1024 x 1024), scope global, $sp"
say "ranks  wall_s   mpirun_s  GiB/s   speedup  efficiency  allreduce_s  allreduce_%  peak_RSS_MiB  device_MiB  read_s  write_s"
t1=""
for n in "${ranks[@]}"; do
    row_args "strong-$(vtag "$sp")" "$n"
    awk "${ARGS[@]}" 'BEGIN {
        printf "%5d  %7.3f  %8s  %6.2f  %7.2f  %9.1f%%  %11.4f  %10.4f%%  %12s  %10s  %6.3f  %7.3f\n", n, w, e, b / 2^30 / w, t1 / w,
               100 * t1 / (n * w), a, 100 * a / w, r, d, rd, wr }' | tee -a "$LOG"
done
say ""
done
}

say "## rank -> GPU map, $G ranks (-v)"
grep -hE "histeq_dist: rank [0-9]+ on|note:" "$OUT/weak-$(vtag "${PATHS[0]}")_$G.log" | tee -a "$LOG"
tags=()
for wp in "${PATHS[@]}"; do tags+=("weak-$(vtag "$wp")"); done
[ "${STRONG:-1}" = 0 ] || for sp in "${SPATHS[@]}"; do tags+=("strong-$(vtag "$sp")"); done
for tag in "${tags[@]}"; do
    for n in 1 "$G"; do
        say ""
        say "## per phase, $tag, $n rank(s) (max / mean over ranks, seconds)"
        phase_rows "$OUT/${tag}_$n.json" |
            awk '{printf "%-10s %9.3f %9.3f\n", $1, $2, $3}' | tee -a "$LOG"
    done
done
say ""
say "## one shared file vs write paths, no HDF5 (bench/write_paths.c): 1 process, then $G at once, 4 GiB each"
gcc -O2 -o build/write_paths bench/write_paths.c && build/write_paths "$DIR" "${WP_GIB:-4}" "$G" | tee -a "$LOG"
# The logs and JSON of every run, in one file (the device tool brings back a limited number of files).
tail -n +1 "$OUT"/weak-*.json "$OUT"/strong-*.json "$OUT"/weak-*.log "$OUT"/strong-*.log > "$OUT/scaling_runs.txt" 2>/dev/null
rm -f "$OUT"/weak-*.* "$OUT"/strong-*.*
