#!/bin/bash
# Benchmark (issue 4): `tilescope diagnose` on a GPT-2-small-shaped synth dump (12 layers x 12 heads,
# B = 1, T = 1024, D = 64, one step) against bench/bench_diagnose_torch.py, a numpy/torch script
# computing the same core metrics (items 1a and 1b plus the hp and lp replays), run side by side in
# this one invocation. Prints wall time, CPU time and peak RSS of both, and the ratios.
# usage: bench/bench_diagnose.sh [TILESCOPE_BINARY] [THREADS]   (default build/tilescope, 2 threads)
# Both sides get the same number of threads (OMP_NUM_THREADS / torch.set_num_threads). Prints the load
# average at the start and the end, and claims no ratio when the machine is busy (bench/load.sh).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
TSC=${1:-${TSC:-$here/../build/tilescope}}
THREADS=${2:-2}
PY=$(bash "$here/../scripts/find_python.sh" h5py numpy torch) || {
    echo "needs a python3 with h5py, numpy and torch (scripts/setup.sh --bench)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$TSC" synth --shape gpt2-small -o "$tmp/g.h5" --quiet
measure() { # name, command...: runs it under /usr/bin/time, prints "wall cpu rss_kib"
    local name=$1; shift
    /usr/bin/time -f "%e %U %S %M" -o "$tmp/$name.time" "$@" > "$tmp/$name.out" 2> "$tmp/$name.err" || {
        echo "$name failed:"; cat "$tmp/$name.err"; exit 1; }
    awk '{printf "%s %.2f %.2f %d\n", $1, $1, $2 + $3, $4}' "$tmp/$name.time" | cut -d' ' -f2-
}
export OMP_NUM_THREADS=$THREADS
. "$here/load.sh"
bench_load start
read -r t_wall t_cpu t_rss < <(measure tilescope "$TSC" diagnose "$tmp/g.h5" -o "$tmp/diag" -q)
read -r p_wall p_cpu p_rss < <(measure torch "$PY" "$here/bench_diagnose_torch.py" "$tmp/g.h5" "$tmp/base.json" "$THREADS")
n_risk=$("$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))['diagnosis']['n_at_risk'])" "$tmp/diag/summary.json")
echo "diagnose (GPT-2 small synth dump, 144 heads, T=1024, $THREADS threads; $n_risk at-risk heads examined in depth)"
printf "  tilescope diagnose : wall %8.2f s  cpu %8.2f s  peak RSS %6d MiB\n" "$t_wall" "$t_cpu" $((t_rss / 1024))
printf "  numpy/torch script : wall %8.2f s  cpu %8.2f s  peak RSS %6d MiB\n" "$p_wall" "$p_cpu" $((p_rss / 1024))
busy=$BENCH_BUSY
bench_load end
if [ "$busy" = 1 ]; then
    echo "  ratio torch/tilescope: $BENCH_NOT_CLAIMED"
    ratio="not claimed (machine busy)"
else
    awk -v a="$p_wall" -v b="$t_wall" -v c="$p_cpu" -v d="$t_cpu" -v e="$p_rss" -v f="$t_rss" 'BEGIN {
        printf "  ratio torch/tilescope: wall %.2fx, cpu %.2fx, peak RSS %.2fx (goal: >= 3x faster, lower memory)\n",
               a / b, c / d, e / f }'
    ratio=$(awk -v a="$p_wall" -v b="$t_wall" -v e="$p_rss" -v f="$t_rss" 'BEGIN {
        printf "%.1fx faster, %.1fx less memory", a / b, e / f }')
fi
echo "TABLE | \`diagnose\`, GPT-2-small synth dump (144 heads, T = 1024, $THREADS threads) vs a numpy/torch script of its core metrics | $t_wall s, $((t_rss / 1024)) MiB | $p_wall s, $((p_rss / 1024)) MiB | $ratio |"
head -3 "$tmp/tilescope.out" | cut -c1-200
