#!/bin/bash
# Where diagnose's time goes (issue: "say where the time goes"): `perf record` of one `tilescope
# diagnose` of the GPT-2-small synth dump (bench_diagnose.sh's input), its samples grouped by the part
# of the method each function belongs to, with the part's FLOP floor beside it (bench/diagnose_floor.py).
# usage: bench/profile_diagnose.sh [TILESCOPE_BINARY] [THREADS]   (needs perf; skips without it)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
TSC=${1:-$here/../build/tilescope}
THREADS=${2:-2}
command -v perf > /dev/null || { echo "profile_diagnose: perf is not installed: skipped"; exit 0; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$TSC" synth --shape gpt2-small -o "$tmp/g.h5" --quiet
export OMP_NUM_THREADS=$THREADS
perf record -q -F 499 -o "$tmp/perf.data" "$TSC" diagnose "$tmp/g.h5" -o "$tmp/d" -q > /dev/null 2> "$tmp/perf.err" || {
    echo "profile_diagnose: perf record failed: $(tail -2 "$tmp/perf.err")"; exit 0; }
perf report -i "$tmp/perf.data" --no-children --sort dso,sym --stdio 2> /dev/null | grep -E '^ +[0-9.]+%' > "$tmp/top.txt"
# part of the method, by function name (the replay kernels carry the instance suffix _x/_v/_f/_d)
awk '{
    pct = $1; sub(/%/, "", pct); sym = $NF; dso = $2
    if (sym ~ /^check_row|^tsc_check/) part = "consistency check (FP64 rows)"
    else if (sym ~ /^(dot4|gram_times_block|orthonormalize|ritz|sym_extremes|filter_step|power_sym|tsc_spectral)/) part = "spectral norms of the weights (Gram, iteration)"
    else if (sym ~ /_[xvfd](\.part\.[0-9]+|\.isra\.[0-9]+|\._omp_fn\.[0-9]+)?$/) part = "attention replays (forward, delta)"
    else if (dso ~ /libm/ || sym ~ /^exp|^log/) part = "libm (exp, log)"
    else if (dso ~ /blas|lapack/) part = "BLAS (rank-1 Gram, LAPACK)"
    else if (dso ~ /hdf5|libz|libsz/ || sym ~ /^H5|^tsc_dump|^tsc_convert|^read_checked/) part = "reading the dump"
    else if (sym ~ /^an_|^tsc_moments|^tsc_stats|^tsc_linalg|^pair_compute|^tsc_census|^tsc_round/) part = "analysis of every head (ties, census, bias, rank-1)"
    else part = "other"
    share[part] += pct
} END { for (p in share) printf "%.1f\t%s\n", share[p], p }' "$tmp/top.txt" | sort -rn > "$tmp/parts.txt"
echo "where diagnose's CPU time goes (perf record, $THREADS threads, GPT-2-small synth dump):"
echo
echo "| part | share of samples |"
echo "| --- | --- |"
awk -F'\t' '{ printf "| %s | %.1f%% |\n", $2, $1 }' "$tmp/parts.txt"
echo
echo "the functions above 1%:"
awk '{ pct = $1; sub(/%/, "", pct); if (pct + 0 >= 1) printf "  %6s  %s\n", $1, $NF }' "$tmp/top.txt"
