#!/bin/sh
# replay_library_faults.sh BIN FILE... — each input that crashes or hangs libhdf5 1.10.8 itself
# (fuzz/regress/hdf5/lib-*.h5, fuzz/README.md) must end histeq_dist with exit status 4 and exactly
# one line on stderr, naming the file: with --on-error stop and skip (skip gets past the scan to
# the attribute copies), one rank (a singleton, as CI has no mpirun here). Part of make fuzz-regress.
set -u
BIN=$1
shift
fail=0
out=$(mktemp -d)
for f in "$@"; do
    for mode in stop skip; do
        rm -rf "$out/o.h5"
        err=$("$BIN" --input "$f" --output "$out/o.h5" --on-error "$mode" -q 2>&1 >/dev/null)
        rc=$?
        lines=$(printf '%s\n' "$err" | grep -c .)
        if [ "$rc" != 4 ] || [ "$lines" != 1 ] || ! printf '%s' "$err" | grep -qF "$f"; then
            echo "FAILED $f --on-error $mode: exit $rc, $lines lines:"
            printf '%s\n' "$err" | head -20
            fail=1
        elif [ -e "$out/o.h5" ] || [ -e "$out/o.h5.part" ]; then
            echo "FAILED $f --on-error $mode: an output was left"
            fail=1
        else
            echo "ok $f --on-error $mode: $err"
        fi
    done
done
rm -rf "$out"
exit $fail
