#!/bin/bash
# Benchmark: how `tilescope diagnose` grows with the number of steps in a dump. Synthesises dumps of
# the GPT-2-small shape (12 heads, T = 1024, D = 64, C = 768) with one layer captured (the planted
# layer 1) and 1, 5, 10 and 20 steps (override with STEPS="1 5 10 20"), diagnoses each and reports
# the time per head record (one (step, layer, head) of the analysis) and the marginal cost of a
# record: the slope of a least-squares line through (records, time). Linear growth means a constant
# marginal cost; a cost that rises with the step count means per-step work is being redone.
#
# usage: bench/bench_diagnose_scaling.sh [TILESCOPE_BINARY] [THREADS] [RESULTS_FILE]
#        (defaults: build/tilescope, 2 threads, bench/results/diagnose_scaling.tsv)
#
# CPU time (user + sys) is reported always: it barely depends on what else the machine runs. Wall
# time, cpu/wall and the wall slope are claimed only on a quiet machine: when the 1-minute load
# average before or after the run is >= MAX_LOAD (default: number of cores - 0.5), the script says
# so and marks those columns "busy" instead.
#
# Results file (tab-separated, one header line starting with '#' for each key=value of the run):
#   # bench=diagnose_scaling  # date=...  # machine=...  # cores=N  # threads=N  # tilescope=...
#   # load_before=L1,L5,L15  # load_after=...  # quiet=1|0  # max_load=X
#   steps  records  user_s  sys_s  cpu_s  wall_s  cpu_per_wall  rss_mib  cpu_s_per_record  wall_s_per_record
#   (one row per dump; wall_s, cpu_per_wall and wall_s_per_record are "busy" when quiet=0)
#   # slope_cpu_s_per_record=...  # intercept_cpu_s=...  # slope_wall_s_per_record=...|busy
#   # marginal_cpu_s_per_record=a,b,c (between consecutive dumps: linear growth keeps these flat)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
TSC=${1:-${TSC:-$here/../build/tilescope}}
THREADS=${2:-2}
RESULTS=${3:-$here/results/diagnose_scaling.tsv}
STEPS=${STEPS:-"1 5 10 20"}
CORES=$(nproc)
MAX_LOAD=${MAX_LOAD:-$(awk -v c="$CORES" 'BEGIN { print c - 0.5 }')}
mkdir -p "$(dirname "$RESULTS")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=$THREADS
load() { cut -d' ' -f1-3 /proc/loadavg | tr ' ' ','; }
busy() { awk -v l="${1%%,*}" -v m="$MAX_LOAD" 'BEGIN { exit !(l >= m) }'; }
load_before=$(load)
rows=()
for n in $STEPS; do
    "$TSC" synth --shape gpt2-small --steps "0:$n" --layers 1 -o "$tmp/s$n.h5" --quiet
    /usr/bin/time -f "%e %U %S %M" -o "$tmp/t$n" "$TSC" diagnose "$tmp/s$n.h5" -o "$tmp/d$n" -q \
        > "$tmp/o$n" 2> "$tmp/e$n" || { echo "diagnose of the $n-step dump failed:"; cat "$tmp/e$n"; exit 1; }
    recs=$(python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["heads"]))' "$tmp/d$n/summary.json")
    read -r wall user sys rss < "$tmp/t$n"
    rows+=("$n $recs $user $sys $wall $rss")
    rm -f "$tmp/s$n.h5"
done
load_after=$(load)
quiet=1
if busy "$load_before" || busy "$load_after"; then quiet=0; fi
{
    echo "# bench=diagnose_scaling"
    echo "# date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "# machine=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
    echo "# cores=$CORES"
    echo "# threads=$THREADS"
    echo "# tilescope=$("$TSC" --version 2>/dev/null | head -1)"
    echo "# load_before=$load_before"
    echo "# load_after=$load_after"
    echo "# quiet=$quiet"
    echo "# max_load=$MAX_LOAD"
    printf "steps\trecords\tuser_s\tsys_s\tcpu_s\twall_s\tcpu_per_wall\trss_mib\tcpu_s_per_record\twall_s_per_record\n"
    for r in "${rows[@]}"; do
        echo "$r"
    done | awk -v q="$quiet" '{
        cpu = $3 + $4
        if (q) printf "%d\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%d\t%.4f\t%.4f\n", $1, $2, $3, $4, cpu, $5, cpu / $5, $6 / 1024, cpu / $2, $5 / $2
        else printf "%d\t%d\t%.2f\t%.2f\t%.2f\tbusy\tbusy\t%d\t%.4f\tbusy\n", $1, $2, $3, $4, cpu, $6 / 1024, cpu / $2 }'
    for r in "${rows[@]}"; do echo "$r"; done | awk -v q="$quiet" '
        { n++; x[n] = $2; c[n] = $3 + $4; w[n] = $5 }
        function slope(y,   i, sx, sy, sxx, sxy) {
            for (i = 1; i <= n; i++) { sx += x[i]; sy += y[i]; sxx += x[i] * x[i]; sxy += x[i] * y[i] }
            return n > 1 && n * sxx != sx * sx ? (n * sxy - sx * sy) / (n * sxx - sx * sx) : 0 }
        END {
            b = slope(c); sx = 0; sy = 0
            for (i = 1; i <= n; i++) { sx += x[i]; sy += c[i] }
            printf "# slope_cpu_s_per_record=%.4f\n# intercept_cpu_s=%.2f\n", b, (sy - b * sx) / n
            if (q) printf "# slope_wall_s_per_record=%.4f\n", slope(w); else print "# slope_wall_s_per_record=busy"
            m = ""
            for (i = 2; i <= n; i++) m = m (i > 2 ? "," : "") sprintf("%.4f", (c[i] - c[i-1]) / (x[i] - x[i-1]))
            print "# marginal_cpu_s_per_record=" m }'
} > "$RESULTS"
echo "diagnose scaling (GPT-2-small shape, layer 1 only, 12 head records per step, $THREADS threads)"
echo "load average before $load_before, after $load_after on $CORES cores (quiet below $MAX_LOAD)"
column -t -s $'\t' < <(grep -v '^#' "$RESULTS")
grep '^# slope\|^# intercept\|^# marginal' "$RESULTS" | sed 's/^# /  /'
if [ "$quiet" = 0 ]; then
    echo "machine busy (load >= $MAX_LOAD): wall times and the wall slope are not claimed; CPU times stand"
fi
echo "results: $RESULTS"
