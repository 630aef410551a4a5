#!/bin/bash
# device_full.sh — on a GPU machine (the device tool), from the repository root: build the whole
# histeq_dist with the GPU engine and the carried parallel HDF5, then
#   0. make gpu-check: the GPU engine against the CPU engine on random data, every mode
#   1. the integration suite with every case on --device cpu AND --device gpu, outputs compared
#      byte for byte (make test-gpu's job; the machine's own python3 has numpy, h5py, cv2, pytest)
#   2. compute-sanitizer memcheck on a real histeq_dist run (HDF5 stack, GPU engine)
#   3. the end-to-end benchmark: an 8 GiB uint8 HDF5 stack, --device gpu beside --device copy
#   io:    the ways of reserving and writing the output (bench/reserve_ab.sh: sync, background,
#          map), 1 rank, copy and gpu, beside cat and cp of the same 8 GiB stack, interleaved
#   clahe: bench/clahe_gpu_bench (CLAHE kernels on a device-resident image, against the copy
#          roofline and OpenCV on the host's cores); built where OpenCV's C++ library is (here:
#          carried as .devdeps/bin/clahe_gpu_bench with its libraries in .devdeps/opencv)
# Needs carry [".devdeps"], made here by bench/device/make_devdeps.sh (parallel HDF5, libpng's
# headers, libdeflate, ISA-L; with --clahe-bench the CLAHE bench and its OpenCV).
#   scale: bench/scaling.sh over every GPU of the machine, weak series, 8 GiB a rank, on tmpfs and
#          on the node's disk (the nvidia-h200-x2 / -x4 / -x8 kinds; SCALE_FS="tmpfs" for one of them)
#   e2e1:  bench/e2e.sh's raw stack (E2E_GIB), 1 rank, on the node's disk (with the "+ sync" rows
#          beside cp + sync) and on tmpfs
#   ab:    this tree against an older one, on the same inputs in the same call: BASE names a copy
#          of the older tree (e.g. git archive OLD | tar -x -C base; carried beside .devdeps), built
#          here too; runs the weak series of bench/scaling.sh over every GPU (tmpfs) with both
#          builds interleaved, then bench/clahe_e2e.sh (E2E_GIB, 1 and every GPU) with each
# Usage: bash bench/device_full.sh [all|test|e2e|io|clahe|scale|e2e1|ab] [E2E_GIB=8]
set -u
what=${1:-all}
gib=${2:-8}
OUT=${OUT:-/tmp/hq-out}
mkdir -p "$OUT"
log() { echo "[$(date +%H:%M:%S)] $*" | tee -a "$OUT/full_summary.txt"; }
. bench/device/env.sh
export HQ_MPIRUN_FLAGS="--oversubscribe --allow-run-as-root"
t0=$(date +%s)
make -j16 CUDA_ARCH=-arch=sm_90 > "$OUT/full_build.log" 2>&1 || { log "build failed"; tail -30 "$OUT/full_build.log"; exit 1; }
log "built build/histeq_dist in $(( $(date +%s) - t0 )) s: $(build/histeq_dist --version)"
rc=0
if [ "$what" = all ] || [ "$what" = test ]; then
    t0=$(date +%s)
    make gpu-check > "$OUT/gpu_check.log" 2>&1
    r=$?; [ $r -ne 0 ] && rc=1
    log "gpu-check, GPU engine vs CPU engine (rc $r, $(( $(date +%s) - t0 )) s): $(tail -1 "$OUT/gpu_check.log")"
    t0=$(date +%s)
    # One pytest per test file, eight at a time (the files share nothing but the machine), so that
    # the whole suite fits one device call; each file's last line is its verdict. Two files need what
    # the GPU image lacks (man-db for test_install, OpenCV's C++ library for the benchmarks test_docs
    # builds): where it is missing they are left out, and the summary says so.
    out_files=""
    # (a minimized Ubuntu's /usr/bin/man is a stub that prints a notice)
    man --version 2>&1 | grep -q '^man ' || out_files="$out_files test_install.py"
    pkg-config --exists opencv4 2> /dev/null || out_files="$out_files test_docs.py"
    [ -n "$out_files" ] && log "left out (the machine lacks what they need):$out_files"
    files=$(for f in tests/integration/test_*.py; do case " $out_files " in *" ${f##*/} "*) ;; *) echo "$f" ;; esac; done)
    echo "$files" | HQ_BIN=$PWD/build/histeq_dist HQ_DEVICES="cpu gpu" timeout 420 xargs -P 8 -I{} \
        sh -c 'python3 -m pytest -q -p no:cacheprovider {} > "$0/test_gpu_$(basename {} .py).log" 2>&1' "$OUT"
    r=$?; [ $r -ne 0 ] && rc=1
    for f in "$OUT"/test_gpu_*.log; do echo "$(basename "$f" .log): $(tail -1 "$f")"; done > "$OUT/test_gpu.log"
    log "test-gpu, every case on cpu and gpu, per file (rc $r, $(( $(date +%s) - t0 )) s):"
    cat "$OUT/test_gpu.log" | tee -a "$OUT/full_summary.txt"
    grep -hE "^(FAILED|ERROR)" "$OUT"/test_gpu_*.log | head -10
    # A failing file's own account (its log may not come back: the files a call returns are few).
    for f in "$OUT"/test_gpu_*.log; do
        tail -1 "$f" | grep -qE "failed|error" && { echo "---- $(basename "$f")"; grep -E "^(E  |FAILED|ERROR|_____)" "$f" | head -40; }
    done | tee -a "$OUT/full_summary.txt"
    # One real run under memcheck: a stack whose row bands and slices exercise both block kinds.
    mpicc -O2 -o build/make_stack bench/make_stack.c -lhdf5 && build/make_stack /tmp/hq_small.h5 0.02 300 257 > /dev/null
    t0=$(date +%s)
    timeout 240 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 build/histeq_dist \
        --input /tmp/hq_small.h5 --output /tmp/hq_small_eq.h5 --device gpu --force --block 64K -v > "$OUT/memcheck_full.log" 2>&1
    r=$?; [ $r -ne 0 ] && rc=1
    log "memcheck histeq_dist (rc $r, $(( $(date +%s) - t0 )) s): $(grep -E 'ERROR SUMMARY' "$OUT/memcheck_full.log" | tr '\n' ' ')"
    log "rank -> GPU map: $(build/histeq_dist --input /tmp/hq_small.h5 --output /tmp/hq_map.h5 --force -v 2>&1 | grep 'rank 0')"
fi
if [ "$what" = all ] || [ "$what" = e2e ]; then
    t0=$(date +%s)
    HQ_BIN=build/histeq_dist timeout 400 bash bench/e2e_hdf5.sh "$gib" 3 /tmp/hq_e2e > "$OUT/e2e.log" 2>&1
    r=$?; [ $r -ne 0 ] && rc=1
    log "e2e (rc $r, $(( $(date +%s) - t0 )) s): $(tail -1 "$OUT/e2e.log")"
fi
if [ "$what" = io ]; then
    mpicc -O2 -o build/make_stack bench/make_stack.c -lhdf5 && mkdir -p /dev/shm/hq_io &&
        build/make_stack /dev/shm/hq_io/in.h5 "$gib" > /dev/null || { log "make_stack failed"; exit 1; }
    for k in 1 2 3; do
        s0=$(date +%s.%N); cat /dev/shm/hq_io/in.h5 > /dev/null; s1=$(date +%s.%N)
        cp /dev/shm/hq_io/in.h5 /dev/shm/hq_io/cp.h5; s2=$(date +%s.%N); rm -f /dev/shm/hq_io/cp.h5
        log "$gib GiB: cat $(awk "BEGIN{print $s1 - $s0}") s, cp $(awk "BEGIN{print $s2 - $s1}") s"
    done
    timeout 420 bash bench/reserve_ab.sh /dev/shm/hq_io/in.h5 --runs 3 --devices "copy gpu" --dir /dev/shm/hq_io/ab \
        2>&1 | tee "$OUT/reserve_ab.txt" | tee -a "$OUT/full_summary.txt"
    [ "${PIPESTATUS[0]}" = 0 ] || rc=1
    rm -rf /dev/shm/hq_io
fi
if [ "$what" = clahe ]; then
    b=build/bench/clahe_gpu_bench
    [ -x "$b" ] || b=.devdeps/bin/clahe_gpu_bench
    LD_LIBRARY_PATH="$PWD/.devdeps/opencv:$LD_LIBRARY_PATH" timeout 300 "$b" --threads "$(nproc)" > "$OUT/clahe_gpu.txt" 2>&1
    r=$?; [ $r -ne 0 ] && rc=1
    log "clahe_gpu_bench (rc $r):"; cat "$OUT/clahe_gpu.txt" | tee -a "$OUT/full_summary.txt"
fi
if [ "$what" = scale ]; then
    g=$(nvidia-smi -L | wc -l)
    for fs in ${SCALE_FS:-tmpfs disk}; do
        t0=$(date +%s)
        if [ $fs = tmpfs ]; then
            STRONG=0 DIR=/dev/shm/hq_scaling OUT=$OUT/scale_$fs timeout 270 bash bench/scaling.sh "$g" 0 8 > "$OUT/scale_$fs.log" 2>&1
        else
            STRONG=0 WARM_GIB=0 DIR=/tmp/hq_scaling OUT=$OUT/scale_$fs timeout 270 bash bench/scaling.sh "$g" 0 8 > "$OUT/scale_$fs.log" 2>&1
        fi
        r=$?; [ $r -ne 0 ] && rc=1
        log "scaling.sh $g 0 8 on $fs (rc $r, $(( $(date +%s) - t0 )) s):"
        grep -vE "^(histeq_dist|#)" "$OUT/scale_$fs/scaling.txt" 2>/dev/null | tee -a "$OUT/full_summary.txt" || tail -5 "$OUT/scale_$fs.log"
    done
fi
if [ "$what" = ab ]; then
    base=${BASE:?BASE must name a copy of the older tree}
    g=$(nvidia-smi -L | wc -l)
    make -C "$base" -j16 CUDA_ARCH=-arch=sm_90 > "$OUT/ab_base_build.log" 2>&1 || { log "BASE build failed"; exit 1; }
    t0=$(date +%s)
    STRONG=0 DIR=/dev/shm/hq_scaling OUT=$OUT/ab_scale VARIANTS="default HQ_BIN=$base/build/histeq_dist" \
        timeout 300 bash bench/scaling.sh "$g" 0 8 > "$OUT/ab_scale.log" 2>&1
    r=$?; [ $r -ne 0 ] && rc=1
    log "scaling.sh $g 0 8, this tree (default) and $base (rc $r, $(( $(date +%s) - t0 )) s):"
    grep -vE "^(histeq_dist|#)" "$OUT/ab_scale/scaling.txt" 2>/dev/null | sed -n '1,/^## rank/p' | tee -a "$OUT/full_summary.txt"
    for tree in base new; do
        t0=$(date +%s)
        if [ $tree = base ]; then bin=$base/build/histeq_dist; else bin=build/histeq_dist; fi
        HQ_BIN=$bin OUT=$OUT/ab_clahe_$tree timeout 200 bash bench/clahe_e2e.sh "$gib" "$g" 1 > "$OUT/ab_clahe_$tree.log" 2>&1
        r=$?; [ $r -ne 0 ] && rc=1
        log "clahe_e2e.sh $gib $g 1 with $bin (rc $r, $(( $(date +%s) - t0 )) s):"
        grep -A8 "^## round" "$OUT/ab_clahe_$tree.log" | tee -a "$OUT/full_summary.txt"
    done
fi
if [ "$what" = e2e1 ]; then
    for d in /tmp/hq_e2e_disk /dev/shm/hq_e2e; do
        t0=$(date +%s)
        timeout 270 bash bench/e2e.sh --size "$gib" --cases raw --ranks 1 --runs 2 --warmup 0 --dir "$d" \
            --out "$OUT/e2e1_$(basename "$d").txt" > /dev/null 2>&1
        r=$?; [ $r -ne 0 ] && rc=1
        log "e2e.sh raw ${gib} GiB, 1 rank, $d (rc $r, $(( $(date +%s) - t0 )) s):"
        grep -E "^\|" "$OUT/e2e1_$(basename "$d").txt" | tee -a "$OUT/full_summary.txt"
        rm -rf "$d"
    done
fi
echo "---- summary"
cat "$OUT/full_summary.txt"
exit $rc
