#!/bin/bash
# Benchmark: the cost of containment (docs/SECURITY.md, "Containment"): `tilescope info` and
# `tilescope diagnose` on the GPT-2-small synth dump (12 layers x 12 heads, T = 1024, 163 MiB),
# with containment on (the CLI's default: a forked child reads the dump's metadata first) and off
# (TSC_CONTAIN=0), REPS runs each, alternating. Prints the median wall times, the ratio on/off and
# the containment share of each command's time ((on - off) / on).
# Prints the load average at the start and the end; on a busy machine no ratio is claimed (bench/load.sh).
# usage: bench/bench_contain.sh [TILESCOPE_BINARY] [REPS] [THREADS]   (default build/tilescope, 5, 2)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
TSC=${1:-${TSC:-$here/../build/tilescope}}
REPS=${2:-5}
export OMP_NUM_THREADS=${3:-2}
. "$here/load.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$TSC" synth --shape gpt2-small -o "$tmp/d.h5" --quiet
wall() { # command...: its wall time in seconds
    local t0 t1
    t0=$(date +%s.%N)
    "$@" > /dev/null 2> "$tmp/err" || { echo "failed: $*"; cat "$tmp/err"; exit 1; }
    t1=$(date +%s.%N)
    echo "$t1 - $t0" | bc -l
}
median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
bench() { # name, command...
    local name=$1; shift
    "$@" > /dev/null 2>&1 || true # warm the page cache
    : > "$tmp/on" ; : > "$tmp/off"
    for _ in $(seq "$REPS"); do
        wall "$@" >> "$tmp/on"
        TSC_CONTAIN=0 wall "$@" >> "$tmp/off"
    done
    local on off
    on=$(median < "$tmp/on"); off=$(median < "$tmp/off")
    if [ "$BENCH_BUSY" = 1 ]; then
        printf '  %-9s on %7.3f s  off %7.3f s  ratio %s\n' "$name" "$on" "$off" "$BENCH_NOT_CLAIMED"
        return
    fi
    awk -v n="$name" -v a="$on" -v b="$off" -v r="$REPS" 'BEGIN {
        printf "  %-9s on %7.3f s  off %7.3f s  ratio %.3fx  containment share %5.1f%% (%.3f s; median of %d)\n",
               n, a, b, a / b, 100 * (a - b) / a, a - b, r }'
}
size=$(stat -c %s "$tmp/d.h5")
bench_load start
echo "containment cost (GPT-2 small synth dump, $((size >> 20)) MiB, $OMP_NUM_THREADS threads, $REPS reps)"
bench info "$TSC" info "$tmp/d.h5"
bench info-q "$TSC" info "$tmp/d.h5" --quick
bench diagnose "$TSC" diagnose "$tmp/d.h5" -o "$tmp/diag" -q
bench_load end
