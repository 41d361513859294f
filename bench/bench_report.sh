#!/usr/bin/env bash
# Report benchmark: `tilescope report` of a 12-layer x 12-head analysis (GPT-2-small shape,
# T = 1024: 144 head records, 17 figure recipes, PDF + HTML), timed over several runs, printed
# beside the heatmap benchmark (bench/run_heatmap.sh) of the same build in the same run.
#   bench/bench_report.sh [BUILD_DIR] [RUNS]
# The analysis itself (synth + analyze, minutes on 2 cores) is made once and timed separately;
# set TSC_BENCH_KEEP=DIR to keep (and reuse) it. The load average is printed at the start and the end
# (bench/load.sh); this benchmark times tilescope alone and claims no ratio.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build}
runs=${2:-3}
cmake --build "$build" --target tilescope bench_heatmap -j2 >/dev/null
T="$build/tilescope"
work=${TSC_BENCH_KEEP:-$(mktemp -d)}
mkdir -p "$work"
[ -n "${TSC_BENCH_KEEP:-}" ] || trap 'rm -rf "$work"' EXIT
. "$src/bench/load.sh"
bench_load start
now() { date +%s.%N; }
if [ ! -s "$work/an/summary.json" ]; then
    t0=$(now)
    "$T" synth -o "$work/g.h5" --shape gpt2-small --quiet
    "$T" analyze "$work/g.h5" -o "$work/an" --no-census -q > /dev/null
    t1=$(now)
    printf 'analysis (synth + analyze --no-census, 12 x 12 heads, T 1024): %.1f s (made once)\n' "$(echo "$t1 - $t0" | bc)"
fi
printf 'step,val_loss\n0,10.9\n1,6.0\n2,4.2\n' > "$work/a.csv"
best=""
for i in $(seq 1 "$runs"); do
    t0=$(now)
    "$T" report "$work/an" --log "bench=$work/a.csv" -o "$work/report.pdf" -q > "$work/report.txt"
    t1=$(now)
    dt=$(echo "$t1 - $t0" | bc)
    printf 'report run %d: %.2f s  (%s)\n' "$i" "$dt" "$(head -1 "$work/report.txt")"
    if [ -z "$best" ] || [ "$(echo "$dt < $best" | bc)" = 1 ]; then best=$dt; fi
done
printf 'report, 12 layers x 12 heads: best of %d runs %.2f s; PDF %s bytes, HTML %s bytes\n' "$runs" "$best" \
    "$(stat -c %s "$work/report.pdf")" "$(stat -c %s "$work/report.html")"
bench_load end
echo "--- heatmap benchmark, same build, same run (bench/run_heatmap.sh) ---"
{ bash "$src/bench/run_heatmap.sh" "$build" || echo "(heatmap benchmark failed)"; } | grep -v '^TABLE |' # its README row is run_heatmap.sh's own
