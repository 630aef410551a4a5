#!/bin/bash
# vm_memory.sh — how fast this machine hands out memory it has not handed out before.
#
#   bash bench/vm_memory.sh [DIR] [GIB] [PASSES]
#
# The lent GPU machines are virtual machines whose memory "starts small and grows as it is used"
# (/work/.library/device/KINDS.md: MemTotal 31 GiB at start, about 3 s for each 8 GiB more). A
# benchmark whose largest case needs more memory than any case before it pays that growth inside
# its timings. This puts a figure on it: PASSES times, it reserves a GIB GiB file in DIR (tmpfs:
# memory) with fallocate, times that, writes the same size again with dd into a fresh file, and
# frees both; MemTotal is shown before each pass. If the first pass is much slower than the next
# ones, the first use of memory is the cost, and a benchmark must warm the memory it will need
# (bench/scaling.sh WARM_GIB) before it times anything.
set -u
DIR=${1:-/dev/shm}
GIB=${2:-32}
PASSES=${3:-3}
f=$DIR/vm_memory.probe.$$
trap 'rm -f "$f" "$f.dd"' EXIT
now() { date +%s.%N; }
memtotal() { awk '/MemTotal/ {printf "%.1f", $2 / 1048576}' /proc/meminfo; }
echo "# bash bench/vm_memory.sh $DIR $GIB $PASSES — $(hostname), $(nproc) cores, $(date -u +%FT%TZ)"
echo "pass  MemTotal_GiB  fallocate_s  fallocate_GB/s  dd_write_s  dd_GB/s"
for ((p = 1; p <= PASSES; p++)); do
    m=$(memtotal)
    t0=$(now)
    fallocate -l "${GIB}G" "$f" || { echo "vm_memory.sh: fallocate of $GIB GiB in $DIR failed"; exit 1; }
    t1=$(now)
    dd if=/dev/zero of="$f.dd" bs=16M count=$((GIB * 64)) status=none || { echo "vm_memory.sh: dd failed"; exit 1; }
    t2=$(now)
    rm -f "$f" "$f.dd"
    awk -v p="$p" -v m="$m" -v a="$t0" -v b="$t1" -v c="$t2" -v g="$GIB" 'BEGIN {
        printf "%4d  %12s  %11.2f  %14.2f  %10.2f  %7.2f\n", p, m, b - a, g * 1.073741824 / (b - a), c - b,
               g * 1.073741824 / (c - b) }'
done
echo "MemTotal after: $(memtotal) GiB"
