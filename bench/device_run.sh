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
# Objects already compiled for sm_90 may be carried in .devbuild/ (see bench/NOTES-gpu.md); any
# missing one is built here. No HDF5 is needed: only core/, engine/cpu_engine.c and gpu/.
set -u
what=${1:-all}
filter=${2:-}
OUT=${OUT:-/tmp/hq-out}
mkdir -p "$OUT"
B=.devbuild
mkdir -p "$B"
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
CUDA_HOME=$(dirname "$(dirname "$NVCC")")
NVFLAGS="-O3 -std=c++17 -arch=sm_90 -lineinfo -Xcompiler -Wall,-Wextra,-fPIC,-fopenmp"
CFLAGS="-std=c11 -O3 -g -Wall -Wextra -D_POSIX_C_SOURCE=200809L -fopenmp"
LIBS="-L$CUDA_HOME/lib64 -L$CUDA_HOME/targets/x86_64-linux/lib -lcudart_static -ldl -lrt -lpthread -lstdc++ -lm"
log() { echo "[$(date +%H:%M:%S)] $*" | tee -a "$OUT/summary.txt"; }

{ nvidia-smi; nvcc --version; uname -a; nproc; } > "$OUT/build.log" 2>&1
log "device: $(nvidia-smi --query-gpu=name,pci.bus_id,driver_version,clocks.sm,clocks.mem --format=csv,noheader 2>&1 | head -1)"

# ---- build
t0=$(date +%s)
pids=()
for f in gpu/gpu_launch gpu/gpu_fused gpu/gpu_engine; do
    o=$B/$(basename $f).o
    if [ ! -s "$o" ]; then
        ( $NVCC $NVFLAGS -c $f.cu -o $o > $B/$(basename $f).log 2>&1 || echo "BUILD FAILED: $f.cu" >> $B/fail ) &
        pids+=($!)
    fi
done
for f in core/error core/lut engine/cpu_engine engine/block_pool tests/gpu/gpu_equal; do
    gcc $CFLAGS -c $f.c -o $B/$(basename $f).o || echo "BUILD FAILED: $f.c" >> $B/fail
done
npp=""
rm -f $B/gpu_bench_main.o
for variant in "-DHQ_WITH_NPP" "-DHQ_WITH_NPP -DHQ_NPP_NO_C3" ""; do
    if $NVCC $NVFLAGS $variant -c bench/gpu_bench.cu -o $B/gpu_bench_main.o > $B/gpu_bench.log 2>&1; then
        npp="$variant"
        break
    fi
    cp $B/gpu_bench.log "$OUT/gpu_bench_build_fail.log"
done
[ -s $B/gpu_bench_main.o ] || echo "BUILD FAILED: bench/gpu_bench.cu" >> $B/fail
wait "${pids[@]}" 2>/dev/null
cat $B/*.log >> "$OUT/build.log" 2>/dev/null
if [ -e $B/fail ]; then
    cat $B/fail | tee -a "$OUT/summary.txt"
    cat "$OUT/build.log"
    exit 1
fi
GPU_OBJ="$B/gpu_launch.o $B/gpu_fused.o $B/gpu_engine.o"
HOST_OBJ="$B/error.o $B/lut.o $B/cpu_engine.o $B/block_pool.o"
gcc -fopenmp -o $B/gpu_equal $B/gpu_equal.o $HOST_OBJ $GPU_OBJ $LIBS || { log "link gpu_equal failed"; exit 1; }
npplibs=""
[ -n "$npp" ] && npplibs="-lnppist -lnppicc -lnppc"
g++ -fopenmp -o $B/gpu_bench $B/gpu_bench_main.o $HOST_OBJ $GPU_OBJ -L$CUDA_HOME/lib64 $npplibs $LIBS ||
    { log "link gpu_bench failed"; exit 1; }
log "built in $(( $(date +%s) - t0 )) s (bench NPP flags: '${npp:-none}')"

# The hot kernels' machine code, for counting instructions per pixel.
for k in _ZN3hqg7k_remapIhLi1ELi0ELi0EEEvPT_NS_4GeomENS_4BinsEPKt \
         _ZN3hqg6k_histIhLi1ELi0ELb0EEEvPKT_NS_4GeomENS_4BinsENS_10HistLayoutEPy \
         _ZN3hqg7k_remapIhLi3ELi0ELi0EEEvPT_NS_4GeomENS_4BinsEPKt \
         _ZN3hqg6k_histIhLi3ELi0ELb0EEEvPKT_NS_4GeomENS_4BinsENS_10HistLayoutEPy; do
    echo "==== $k"
    cuobjdump -sass -fun "$k" $B/gpu_launch.o 2>&1
done > "$OUT/sass.txt"
{ echo "==== k_equalize_onchip<false, false>"
  cuobjdump -sass $B/gpu_fused.o 2>&1 | awk '/Function :/{f=index($0,"k_equalize_onchipILb0ELb0E")>0} f'; } >> "$OUT/sass.txt"

rc=0
# Order: the quick checks, then the benchmark, then the sanitizers (slow; a timeout there must not
# cost the benchmark).
if [ "$what" = all ] || [ "$what" = check ]; then
    t0=$(date +%s)
    timeout 200 $B/gpu_equal > "$OUT/gpu_equal.log" 2>&1
    r=$?; [ $r -ne 0 ] && rc=1
    log "gpu_equal (rc $r, $(( $(date +%s) - t0 )) s): $(tail -2 "$OUT/gpu_equal.log" | tr '\n' ' ')"
    grep FAIL "$OUT/gpu_equal.log" | head -20

    t0=$(date +%s)
    timeout 120 $B/gpu_bench --check > "$OUT/bench_check.log" 2>&1
    r=$?; [ $r -ne 0 ] && rc=1
    log "gpu_bench --check (rc $r, $(( $(date +%s) - t0 )) s): $(grep -E 'differences|cases' "$OUT/bench_check.log" | tr '\n' ' ')"
    grep FAIL "$OUT/bench_check.log" | head -10
fi
if [ "$what" = all ] || [ "$what" = bench ]; then
    t0=$(date +%s)
    timeout 300 $B/gpu_bench $filter > "$OUT/gpu_bench.log" 2>&1
    r=$?; [ $r -ne 0 ] && rc=1
    log "gpu_bench (rc $r, $(( $(date +%s) - t0 )) s)"
    sed -n '/^SUMMARY/,$p' "$OUT/gpu_bench.log"
    grep -E "MISMATCH|FAIL|failed|npp:" "$OUT/gpu_bench.log" | head -20
fi
if [ "$what" = all ] || [ "$what" = check ] || [ "$what" = sanitize ]; then
    t0=$(date +%s)
    timeout 150 compute-sanitizer --tool memcheck --leak-check no $B/gpu_equal --small > "$OUT/memcheck.log" 2>&1
    r=$?; [ $r -ne 0 ] && rc=1
    log "memcheck gpu_equal (rc $r, $(( $(date +%s) - t0 )) s): $(grep -E 'ERROR SUMMARY|passed' "$OUT/memcheck.log" | tr '\n' ' ')"
    t0=$(date +%s)
    timeout 150 compute-sanitizer --tool memcheck --leak-check no $B/gpu_bench --sweep > "$OUT/memcheck_bench.log" 2>&1
    r=$?; [ $r -ne 0 ] && rc=1
    log "memcheck gpu_bench --sweep (rc $r, $(( $(date +%s) - t0 )) s): $(grep -E 'ERROR SUMMARY|cases' "$OUT/memcheck_bench.log" | tr '\n' ' ')"

    t0=$(date +%s)
    timeout 200 compute-sanitizer --tool racecheck --racecheck-report all $B/gpu_equal --small --every 3 \
        > "$OUT/racecheck.log" 2>&1
    r=$?; [ $r -ne 0 ] && rc=1
    log "racecheck gpu_equal (rc $r, $(( $(date +%s) - t0 )) s): $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|passed' "$OUT/racecheck.log" | tr '\n' ' ')"
    t0=$(date +%s)
    timeout 150 compute-sanitizer --tool racecheck --racecheck-report all $B/gpu_bench --sweep \
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
