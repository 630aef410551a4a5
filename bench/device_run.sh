#!/bin/bash
# device_run.sh — on the GPU machine (the device tool), from the repository root: build the GPU
# engine, its equality harness and the benchmark with nvcc -arch=sm_90, then run
#   1. tests/gpu/gpu_equal            GPU engine vs CPU engine, every mode (exit 1 on a difference)
#   2. compute-sanitizer memcheck     on gpu_equal --small and gpu_bench --sweep
#   3. compute-sanitizer racecheck    on gpu_equal --small --every 3 and gpu_bench --sweep
#   4. bench/gpu_bench                ours vs NPP, data resident on the GPU
# (gpu_bench --check: the 8-bit luma fast path against core/pixel.h on every colour, then --sweep:
# the resident pipeline against the CPU engine on small sizes around its boundaries.)
# Logs go to $OUT (the device tool's result folder; /tmp/hq-out elsewhere). A short summary is
# printed last. Usage: bench/device_run.sh [all|check|bench|sanitize] [bench case filter]
# Everything is built by the Makefile (build/, sm_90): gpu_equal as `make gpu-check` builds it, and
# bench/gpu_bench with NPP where the machine has it. Needs carry [".devdeps"] for bench/device/env.sh
# (the link lines name the carried libraries).
set -u
what=${1:-all}
filter=${2:-}
OUT=${OUT:-/tmp/hq-out}
mkdir -p "$OUT"
B=build
log() { echo "[$(date +%H:%M:%S)] $*" | tee -a "$OUT/summary.txt"; }
. bench/device/env.sh

{ nvidia-smi; nvcc --version; uname -a; nproc; } > "$OUT/build.log" 2>&1
log "device: $(nvidia-smi --query-gpu=name,pci.bus_id,driver_version,clocks.sm,clocks.mem --format=csv,noheader 2>&1 | head -1)"

# ---- build
t0=$(date +%s)
make -j16 CUDA_ARCH=-arch=sm_90 $B/tests/gpu_equal >> "$OUT/build.log" 2>&1 ||
    { log "BUILD FAILED: gpu_equal"; tail -30 "$OUT/build.log"; exit 1; }
# The richest NPP this machine's headers offer: the 3-channel histogram is missing from some.
npp=""
for variant in "-DHQ_WITH_NPP" "-DHQ_WITH_NPP -DHQ_NPP_NO_C3" ""; do
    rm -f $B/bench/gpu_bench
    libs=""
    [ -n "$variant" ] && libs="-lnppist -lnppicc -lnppc" # the Makefile's CUDA_LIBS say where
    if make -j16 CUDA_ARCH=-arch=sm_90 GPU_BENCH_NPP="$variant" NPP_LIBS="$libs" $B/bench/gpu_bench \
            > "$OUT/gpu_bench_build.log" 2>&1; then
        npp="$variant"
        break
    fi
done
cat "$OUT/gpu_bench_build.log" >> "$OUT/build.log"
[ -x $B/bench/gpu_bench ] || { log "BUILD FAILED: bench/gpu_bench.cu"; tail -30 "$OUT/build.log"; exit 1; }
log "built in $(( $(date +%s) - t0 )) s (bench NPP flags: '${npp:-none}')"

# The hot kernels' machine code, for counting instructions per pixel.
for k in _ZN3hqg7k_remapIhLi1ELi0ELi0EEEvPT_NS_4GeomENS_4BinsEPKt \
         _ZN3hqg6k_histIhLi1ELi0ELb0EEEvPKT_NS_4GeomENS_4BinsENS_10HistLayoutEPy \
         _ZN3hqg7k_remapIhLi3ELi0ELi0EEEvPT_NS_4GeomENS_4BinsEPKt \
         _ZN3hqg6k_histIhLi3ELi0ELb0EEEvPKT_NS_4GeomENS_4BinsENS_10HistLayoutEPy; do
    echo "==== $k"
    cuobjdump -sass -fun "$k" $B/gpu/gpu_launch.o 2>&1
done > "$OUT/sass.txt"
{ echo "==== k_equalize_onchip<false, false>"
  cuobjdump -sass $B/gpu/gpu_fused.o 2>&1 | awk '/Function :/{f=index($0,"k_equalize_onchipILb0ELb0E")>0} f'; } >> "$OUT/sass.txt"

rc=0
# Order: the quick checks, then the benchmark, then the sanitizers (slow; a timeout there must not
# cost the benchmark).
if [ "$what" = all ] || [ "$what" = check ]; then
    t0=$(date +%s)
    timeout 200 $B/tests/gpu_equal > "$OUT/gpu_equal.log" 2>&1
    r=$?; [ $r -ne 0 ] && rc=1
    log "gpu_equal (rc $r, $(( $(date +%s) - t0 )) s): $(tail -2 "$OUT/gpu_equal.log" | tr '\n' ' ')"
    grep FAIL "$OUT/gpu_equal.log" | head -20

    t0=$(date +%s)
    timeout 120 $B/bench/gpu_bench --check > "$OUT/bench_check.log" 2>&1
    r=$?; [ $r -ne 0 ] && rc=1
    log "gpu_bench --check (rc $r, $(( $(date +%s) - t0 )) s): $(grep -E 'differences|cases' "$OUT/bench_check.log" | tr '\n' ' ')"
    grep FAIL "$OUT/bench_check.log" | head -10
fi
if [ "$what" = all ] || [ "$what" = bench ]; then
    t0=$(date +%s)
    timeout 300 $B/bench/gpu_bench $filter > "$OUT/gpu_bench.log" 2>&1
    r=$?; [ $r -ne 0 ] && rc=1
    log "gpu_bench (rc $r, $(( $(date +%s) - t0 )) s)"
    sed -n '/^SUMMARY/,$p' "$OUT/gpu_bench.log"
    grep -E "MISMATCH|FAIL|failed|npp:" "$OUT/gpu_bench.log" | head -20
fi
if [ "$what" = all ] || [ "$what" = check ] || [ "$what" = sanitize ]; then
    t0=$(date +%s)
    timeout 150 compute-sanitizer --tool memcheck --leak-check no $B/tests/gpu_equal --small > "$OUT/memcheck.log" 2>&1
    r=$?; [ $r -ne 0 ] && rc=1
    log "memcheck gpu_equal (rc $r, $(( $(date +%s) - t0 )) s): $(grep -E 'ERROR SUMMARY|passed' "$OUT/memcheck.log" | tr '\n' ' ')"
    t0=$(date +%s)
    timeout 150 compute-sanitizer --tool memcheck --leak-check no $B/bench/gpu_bench --sweep > "$OUT/memcheck_bench.log" 2>&1
    r=$?; [ $r -ne 0 ] && rc=1
    log "memcheck gpu_bench --sweep (rc $r, $(( $(date +%s) - t0 )) s): $(grep -E 'ERROR SUMMARY|cases' "$OUT/memcheck_bench.log" | tr '\n' ' ')"

    t0=$(date +%s)
    timeout 200 compute-sanitizer --tool racecheck --racecheck-report all $B/tests/gpu_equal --small --every 3 \
        > "$OUT/racecheck.log" 2>&1
    r=$?; [ $r -ne 0 ] && rc=1
    log "racecheck gpu_equal (rc $r, $(( $(date +%s) - t0 )) s): $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|passed' "$OUT/racecheck.log" | tr '\n' ' ')"
    t0=$(date +%s)
    timeout 150 compute-sanitizer --tool racecheck --racecheck-report all $B/bench/gpu_bench --sweep \
        > "$OUT/racecheck_bench.log" 2>&1
    r=$?; [ $r -ne 0 ] && rc=1
    log "racecheck gpu_bench --sweep (rc $r, $(( $(date +%s) - t0 )) s): $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|cases' "$OUT/racecheck_bench.log" | tr '\n' ' ')"
fi
# The device tool returns at most 8 files: keep the three read first, pack the rest.
( cd "$OUT" && tar czf all_logs.tgz --exclude=all_logs.tgz ./*.log ./*.txt 2>/dev/null &&
  find . -maxdepth 1 -type f ! -name all_logs.tgz ! -name summary.txt ! -name gpu_bench.log ! -name sass.txt -delete )
echo "---- summary"
cat "$OUT/summary.txt"
exit $rc
