#!/bin/bash
# Benchmark: `tilescope analyze` on long Llama-style contexts. One layer (the planted layer 1 of
# llama-gqa, unplanted: the planting construction is only defined for the shape's own T), step 0,
# the first HEADS heads, at T = 4096 and at each larger T given; prints wall time and peak RSS,
# and the T = 4096 run scaled by the expected growth (time x (T/4096)^2, memory x T/4096).
# A run longer than LIMIT seconds is stopped: the RSS it had reached is then reported (memory is
# bounded by O(T*(D + C)) per thread, so it stays flat after the first head's allocation).
# The load average is printed at the start and the end (bench/load.sh); it claims no ratio.
# usage: bench/bench_longctx.sh [TILESCOPE] [HEADS] [LIMIT_S] [T ...]   (default 32768)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
TSC=${1:-$here/../build/tilescope}
HEADS=${2:-2}
LIMIT=${3:-1800}
shift $(( $# < 3 ? $# : 3 ))
LENS=${*:-32768}
. "$here/load.sh"
bench_load start
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() { # T: synth, then analyze under a time limit, sampling the peak RSS
    local T=$1 peak=0 rss start end rc
    "$TSC" synth -o "$tmp/L$T.h5" --shape llama-gqa --layers 1 --steps 0 --seq-len "$T" --no-plant --quiet
    start=$(date +%s.%N)
    timeout "$LIMIT" "$TSC" analyze "$tmp/L$T.h5" -o "$tmp/A$T" --heads "0:$HEADS" > /dev/null 2>&1 &
    local pid=$!
    while kill -0 "$pid" 2> /dev/null; do
        for p in $(pgrep -P "$pid") "$pid"; do
            rss=$(awk '/VmHWM/ {print $2}' "/proc/$p/status" 2> /dev/null || echo 0)
            [ "${rss:-0}" -gt "$peak" ] && peak=$rss
        done
        sleep 1
    done
    rc=0; wait "$pid" || rc=$?
    end=$(date +%s.%N)
    wall=$(echo "$end - $start" | bc)
    echo "T=$T heads=$HEADS wall_s=$wall peak_rss_kib=$peak rc=$rc$([ "$rc" = 124 ] && echo ' (stopped at the limit)')"
    eval "W$T=$wall; M$T=$peak"
}
run 4096
for T in $LENS; do
    run "$T"
    f=$(echo "$T / 4096" | bc -l)
    printf '  expected from T=4096: wall %.0f s (x%.0f), rss <= %.0f KiB (x%.0f)\n' \
        "$(echo "$W4096 * $f * $f" | bc -l)" "$(echo "$f * $f" | bc -l)" "$(echo "$M4096 * $f" | bc -l)" "$f"
done
bench_load end
