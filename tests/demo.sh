#!/bin/sh
# demo.sh BIN — equalizes a low-contrast phantom stack with two MPI ranks and shows the result.
#
# Writes into demo/ (git-ignored): phantoms.h5 (8 slices 256x256 uint16, 12-bit CT-like values
# squeezed into 1000..1400), phantoms_eq.h5 (the equalized stack), before.png and after.png
# (montages on one common scale), and prints per-slice statistics before and after.
set -eu

BIN=${1:-build/histeq_dist}
case "$BIN" in /*) ;; *) BIN="$(pwd)/$BIN" ;; esac
cd "$(dirname "$0")/.."

PY=/usr/bin/python3
FLAGS=${HQ_MPIRUN_FLAGS:---oversubscribe}
if [ "$(id -u)" = 0 ]; then
    case "$FLAGS" in *--allow-run-as-root*) ;; *) FLAGS="$FLAGS --allow-run-as-root" ;; esac
fi

if [ ! -x "$BIN" ]; then
    echo "demo.sh: $BIN is not built (run make first)" >&2
    exit 1
fi

mkdir -p demo
$PY tests/make_phantom.py make demo/phantoms.h5 --slices 8 --size 256
echo "+ mpirun -np 2 $BIN --input demo/phantoms.h5 --output demo/phantoms_eq.h5 --bits 12 --force -v"
# shellcheck disable=SC2086 # FLAGS is a list of options
mpirun -np 2 $FLAGS "$BIN" --input demo/phantoms.h5 --output demo/phantoms_eq.h5 --bits 12 --force -v
$PY tests/make_phantom.py summary demo/phantoms.h5 demo/phantoms_eq.h5 demo/before.png demo/after.png
