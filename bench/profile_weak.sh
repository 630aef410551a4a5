#!/bin/bash
# profile_weak.sh — where does the host's time go in a weak-scaling run? One call on a GPU machine
# (device tool, carry [".devdeps"], which must hold a perf binary and its libraries in
# .devdeps/perf: see bench/README.md):
#
#   bash bench/profile_weak.sh [G] [PER_RANK_GIB]
#
# Writes one 4096 x 4096 uint8 stack of PER_RANK_GIB (default 8) per rank to /dev/shm, as
# bench/scaling.sh does, runs histeq_dist on 1 rank and on G ranks (default: every GPU), each under
# a system-wide `perf record -a -g` (499 Hz on every CPU), and prints per run: the phase times
# (--summary), the samples by command, and the top symbols (kernel and user) with their callers.
# Why system-wide: what bounds the G-rank run is contention between processes, inside the kernel.
# Output also goes to $OUT/profile_weak.txt (OUT default /tmp/hq-out).
set -u
OUT=${OUT:-/tmp/hq-out}
DIR=${DIR:-/dev/shm/hq_profile}
PERF=${PERF:-.devdeps/perf/perf}
mkdir -p "$OUT" "$DIR"
LOG=$OUT/profile_weak.txt
: > "$LOG"
say() { echo "$*" | tee -a "$LOG"; }
fail() { say "profile_weak.sh: $*"; exit 1; }
perf_() { LD_LIBRARY_PATH="$(dirname "$PERF")/lib" "$PERF" "$@"; }

. bench/device/env.sh
make -j16 > "$OUT/profile_build.log" 2>&1 || { tail -20 "$OUT/profile_build.log"; fail "build failed"; }
mpicc -O2 -o build/make_image bench/make_image.c -lhdf5 || fail "cannot build bench/make_image.c"
perf_ --version > /dev/null 2>&1 || fail "no working perf at $PERF"
G=${1:-$(nvidia-smi -L | wc -l)}
PER=${2:-8}
. bench/summary_json.sh
slices=$(weak_slices "$PER")
echo -1 > /proc/sys/kernel/perf_event_paranoid 2>/dev/null
echo 0 > /proc/sys/kernel/kptr_restrict 2>/dev/null
say "# bash bench/profile_weak.sh $G $PER — $(hostname), $(nproc) cores, $(date -u +%FT%TZ), commit ${HQ_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null)}"
say "# $(lscpu | grep -E '^(Model name|Thread\(s\) per core|Core\(s\) per socket|Socket\(s\))' | tr -s ' ' | paste -sd ';')"
# As scaling.sh's WARM_GIB: memory used the first time costs more on the lent VMs.
fallocate -l "$((4 * G * PER + 8))G" "$DIR/warm" && rm -f "$DIR/warm"

for n in 1 "$G"; do
    input=$DIR/weak_$n.h5
    build/make_image "$input" $((slices * n)) 4096 4096 > /dev/null || fail "cannot write $input"
    LD_LIBRARY_PATH="$(dirname "$PERF")/lib" "$PERF" record -a -g -F 499 -o "/tmp/perf_$n.data" -- sleep 600 > /dev/null 2>&1 &
    pp=$!
    sleep 2
    mpirun --oversubscribe --allow-run-as-root --bind-to none -np "$n" build/histeq_dist --input "$input" \
        --output "$DIR/out.h5" --force --progress 0 --summary "$OUT/prof_$n.json" > "$OUT/prof_$n.log" 2>&1 ||
        { kill -INT $pp; cat "$OUT/prof_$n.log"; fail "run with $n ranks failed"; }
    kill -INT $pp
    wait $pp
    rm -f "$input" "$DIR/out.h5"
    say "(perf data: $(du -h /tmp/perf_$n.data | cut -f1))"
    say ""
    say "## $n rank(s): wall $(field "$OUT/prof_$n.json" wall_s) s"
    phase_rows "$OUT/prof_$n.json" |
        awk '{printf "   %-10s max %7.3f  mean %7.3f\n", $1, $2, $3}' | tee -a "$LOG"
    say "### samples by command"
    perf_ report -i "/tmp/perf_$n.data" --no-children --sort comm --stdio -g none 2>/dev/null | grep -v '^#' | grep -v '^$' |
        head -12 | tee -a "$LOG"
    say "### top symbols (self), histeq_dist processes"
    perf_ report -i "/tmp/perf_$n.data" --no-children --comms histeq_dist --sort sym --stdio -g none 2>/dev/null |
        grep -v '^#' | grep -v '^$' | head -40 | tee -a "$LOG"
    say "### samples by library, histeq_dist processes"
    perf_ report -i "/tmp/perf_$n.data" --no-children --comms histeq_dist --sort dso --stdio -g none 2>/dev/null |
        grep -v '^#' | grep -v '^$' | head -15 | tee -a "$LOG"
    say "### where the kernel time of histeq_dist comes from (callers, 2% and up)"
    perf_ report -i "/tmp/perf_$n.data" --no-children --comms histeq_dist --dsos '[kernel.kallsyms]' --sort sym --stdio \
        -g caller,0.5,callee,function --percent-limit 2 2>/dev/null | grep -v '^#' | grep -v '^$' | head -120 | tee -a "$LOG"
done
rm -rf "$DIR"
