# summary_json.sh — sourced by bench/scaling.sh and bench/profile_weak.sh, so that both read
# histeq_dist's --summary JSON (one "key": value per line, each phase inline) and size the weak
# stacks the same way.

# field FILE KEY: a number from the JSON.
field() { sed -n "s/.*\"$2\": *\([0-9.e+-]*\).*/\1/p" "$1" | head -1; }
# phase_max FILE PHASE: the phase's max_s over ranks.
phase_max() { sed -n "s/.*\"$2\": {\"max_s\": *\([0-9.e+-]*\).*/\1/p" "$1" | head -1; }
# phase_rows FILE: "name max_s mean_s", a line per phase.
phase_rows() { sed -n 's/^ *"\([a-z]*\)": {"max_s": \([0-9.]*\), "mean_s": \([0-9.]*\)}.*/\1 \2 \3/p' "$1"; }
# weak_slices GIB: how many 4096 x 4096 uint8 slices (16 MiB each) make about GIB GiB; at least 1.
weak_slices() { awk -v p="$1" 'BEGIN {s = int(p * 64 + 0.5); print (s < 1 ? 1 : s)}'; }
