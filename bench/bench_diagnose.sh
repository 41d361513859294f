#!/bin/bash
# Benchmark (issue 4): `tilescope diagnose` on a GPT-2-small-shaped synth dump (12 layers x 12 heads,
# B = 1, T = 1024, D = 64, one step) against bench/bench_diagnose_torch.py, a numpy/torch script
# computing the same core metrics (items 1a and 1b plus the hp and lp replays), run side by side in
# this one invocation. Prints wall time, CPU time and peak RSS of both, and the ratios.
# usage: bench/bench_diagnose.sh [TILESCOPE_BINARY] [THREADS] [RESULTS_FILE]
#        (default build/tilescope, 2 threads, bench/results/diagnose.tsv)
# Both sides get the same number of threads (OMP_NUM_THREADS / torch.set_num_threads).
# Also prints cpu/wall of each side (2.0 at 2 threads: both cores busy throughout) and the load
# average at the start and the end (bench/load.sh). On a busy machine (the load rule of bench/load.sh
# at the start; at the end, the load that others added while it ran, its own threads taken out:
# bench_others) the wall-time ratio is not claimed: the script says so and gives the CPU-time ratio only.
# Results file (tab-separated): '# key=value' lines (bench, date, machine, cores, threads,
# load_before, load_after, quiet, max_load), then a header line and one row per side:
#   side  wall_s  user_s  sys_s  cpu_s  cpu_per_wall  rss_mib
# then '# ratio_wall=X|busy', '# ratio_cpu=X', '# ratio_rss=X' (torch / tilescope) and '# floor_s=S': the FLOP floor
# of diagnose's method at the FMA peak measured in the same run (bench/diagnose_floor.py).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
TSC=${1:-${TSC:-$here/../build/tilescope}}
THREADS=${2:-2}
RESULTS=${3:-$here/results/diagnose.tsv}
CORES=$(nproc)
load() { cut -d' ' -f1-3 /proc/loadavg | tr ' ' ','; }
mkdir -p "$(dirname "$RESULTS")"
PY=$(bash "$here/../scripts/find_python.sh" h5py numpy torch) || {
    echo "needs a python3 with h5py, numpy and torch (scripts/setup.sh --bench)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$TSC" synth --shape gpt2-small -o "$tmp/g.h5" --quiet
measure() { # name, command...: runs it under /usr/bin/time, prints "wall user sys rss_kib"
    local name=$1; shift
    /usr/bin/time -f "%e %U %S %M" -o "$tmp/$name.time" "$@" > "$tmp/$name.out" 2> "$tmp/$name.err" || {
        echo "$name failed:"; cat "$tmp/$name.err"; exit 1; }
    cat "$tmp/$name.time"
}
export OMP_NUM_THREADS=$THREADS
. "$here/load.sh"
bench_load start
load_before=$(load)
busy_start=$BENCH_BUSY
l0=$(cut -d' ' -f1 /proc/loadavg)
t_start=$(date +%s.%N)
read -r t_wall t_user t_sys t_rss < <(measure tilescope "$TSC" diagnose "$tmp/g.h5" -o "$tmp/diag" -q -v)
read -r p_wall p_user p_sys p_rss < <(measure torch "$PY" "$here/bench_diagnose_torch.py" "$tmp/g.h5" "$tmp/base.json" "$THREADS")
load_after=$(load)
bench_others "$l0" "$(awk -v a="$t_start" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')" "$THREADS"
quiet=1
if [ "$busy_start" = 1 ] || [ "$BENCH_BUSY" = 1 ]; then quiet=0; fi
t_cpu=$(awk -v a="$t_user" -v b="$t_sys" 'BEGIN { printf "%.2f", a + b }')
p_cpu=$(awk -v a="$p_user" -v b="$p_sys" 'BEGIN { printf "%.2f", a + b }')
n_risk=$("$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))['diagnosis']['n_at_risk'])" "$tmp/diag/summary.json")
echo "diagnose (GPT-2 small synth dump, 144 heads, T=1024, $THREADS threads; $n_risk at-risk heads examined in depth)"
awk -v w="$t_wall" -v c="$t_cpu" -v r="$t_rss" 'BEGIN {
    printf "  tilescope diagnose : wall %8.2f s  cpu %8.2f s  cpu/wall %.2f  peak RSS %6d MiB\n", w, c, c / w, r / 1024 }'
awk -v w="$p_wall" -v c="$p_cpu" -v r="$p_rss" 'BEGIN {
    printf "  numpy/torch script : wall %8.2f s  cpu %8.2f s  cpu/wall %.2f  peak RSS %6d MiB\n", w, c, c / w, r / 1024 }'
r_wall=busy
[ "$quiet" = 1 ] && r_wall=$(awk -v a="$p_wall" -v b="$t_wall" 'BEGIN { printf "%.2f", a / b }')
r_cpu=$(awk -v a="$p_cpu" -v b="$t_cpu" 'BEGIN { printf "%.2f", a / b }')
r_rss=$(awk -v a="$p_rss" -v b="$t_rss" 'BEGIN { printf "%.2f", a / b }')
if [ "$quiet" = 1 ]; then
    echo "  ratio torch/tilescope: wall ${r_wall}x, cpu ${r_cpu}x, peak RSS ${r_rss}x (goal: >= 5x faster, RSS >= 4x lower)"
else
    echo "  machine busy (load above $(bench_load_limit)): no wall-time ratio claimed; cpu ${r_cpu}x, peak RSS ${r_rss}x (torch/tilescope)"
fi
# The floor: the method's work counted from the formulas (diagnose -v counts its attention replays;
# bench/diagnose_floor.py the rest from the dump) at the FMA peak measured now (bench_peak.h).
attn_gflop=$(sed -n 's/^attention work of this process: .*; \([0-9.]*\) GFLOP.*/\1/p' "$tmp/tilescope.err")
peak_bin=$(dirname "$TSC")/bench_peak
floor_s=
if [ -n "$attn_gflop" ] && [ -x "$peak_bin" ]; then
    peak_line=$("$peak_bin")
    echo "  $peak_line"
    peak=$(echo "$peak_line" | sed -n 's/^peak: FP32 FMA \([0-9.]*\) GFLOP.*/\1/p')
    "$PY" "$here/diagnose_floor.py" "$tmp/g.h5" "$attn_gflop" "$peak" > "$tmp/floor.txt"
    floor_s=$(sed -n 's/^FLOOR_S=//p' "$tmp/floor.txt")
    echo "  $(head -1 "$tmp/floor.txt")"
    awk -v w="$t_wall" -v f="$floor_s" 'BEGIN { printf "  tilescope diagnose at %.1fx its floor (goal: within 3x)\n", w / f }'
fi
if [ "$quiet" = 1 ]; then
    ratio=$(awk -v a="$p_wall" -v b="$t_wall" -v e="$p_rss" -v f="$t_rss" 'BEGIN { printf "%.1fx faster, %.1fx less memory", a / b, e / f }')
else
    ratio="not claimed (machine busy)"
fi
echo "TABLE | \`diagnose\`, GPT-2-small synth dump (144 heads, T = 1024, $THREADS threads) vs a numpy/torch script of its core metrics | $t_wall s, $((t_rss / 1024)) MiB | $p_wall s, $((p_rss / 1024)) MiB | $ratio |"
{
    echo "# bench=diagnose"
    echo "# date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "# machine=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
    echo "# cores=$CORES"
    echo "# threads=$THREADS"
    echo "# load_before=$load_before"
    echo "# load_after=$load_after"
    echo "# quiet=$quiet"
    echo "# max_load=$(bench_load_limit)"
    printf "side\twall_s\tuser_s\tsys_s\tcpu_s\tcpu_per_wall\trss_mib\n"
    awk -v w="$t_wall" -v u="$t_user" -v s="$t_sys" -v r="$t_rss" 'BEGIN {
        printf "tilescope\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%d\n", w, u, s, u + s, (u + s) / w, r / 1024 }'
    awk -v w="$p_wall" -v u="$p_user" -v s="$p_sys" -v r="$p_rss" 'BEGIN {
        printf "torch\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%d\n", w, u, s, u + s, (u + s) / w, r / 1024 }'
    echo "# ratio_wall=$r_wall"
    echo "# ratio_cpu=$r_cpu"
    echo "# ratio_rss=$r_rss"
    echo "# floor_s=${floor_s:-unknown}"
} > "$RESULTS"
echo "results: $RESULTS"
head -3 "$tmp/tilescope.out" | cut -c1-200
