#!/bin/bash
# Benchmark: `tilescope analyze` and `tilescope diagnose` on long Llama-style contexts. One layer (the
# planted layer 1 of llama-gqa, unplanted: the planting construction is only defined for the shape's
# own T), step 0, the first HEADS heads, at T = 4096 and at each larger T given; prints wall time and
# peak RSS per command, and the T = 4096 run scaled by the expected growth (time x (T/4096)^2 for the
# attention work, memory x T/4096: both commands stream, O(T*(D + C)) per thread).
# diagnose examines one head on one step (--max-heads 1 --max-steps 1); an unplanted dump has no
# head at risk under the default flag rule, so --alpha 1 --min-ulp 0 puts every head at risk and
# the examination (substitution, beta sweep, rounding event: ~30 replays of the head) always runs.
# A run longer than LIMIT seconds is stopped: the RSS it had reached is then reported (memory stays
# flat after the first head's allocation). Needs GNU time (/usr/bin/time, Debian's package time).
# The load average is printed at the start and the end (bench/load.sh); on a busy machine the
# growth ratios are not claimed.
# usage: bench/bench_long_context.sh [TILESCOPE] [HEADS] [LIMIT_S] [T ...]   (default 32768)
#   TSC_BENCH_CMDS="analyze diagnose" (default) picks the commands.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
TSC=${1:-$here/../build/tilescope}
HEADS=${2:-2}
LIMIT=${3:-1800}
shift $(( $# < 3 ? $# : 3 ))
LENS=${*:-32768}
CMDS=${TSC_BENCH_CMDS:-analyze diagnose}
. "$here/load.sh"
bench_load start
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# measure CMD T: runs CMD on the dump of length T under the time limit. The peak RSS is the
# kernel's own count (GNU time's %M, from wait4's rusage, which also covers the containment child);
# sampling /proc every second, as this script once did, missed the peak of runs that end between
# two samples (a 2 s run at T = 4096 read 68 MiB where its peak is 145 MiB).
measure() {
    local cmd=$1 T=$2 peak start end rc extra=()
    [ "$cmd" = diagnose ] && extra=(--alpha 1 --min-ulp 0 --max-heads 1 --max-steps 1)
    start=$(date +%s.%N)
    rc=0
    /usr/bin/time -f %M -o "$tmp/rss" timeout "$LIMIT" "$TSC" "$cmd" "$tmp/L$T.h5" -o "$tmp/$cmd$T" \
        --heads "0:$HEADS" -q "${extra[@]}" > /dev/null 2>&1 || rc=$?
    end=$(date +%s.%N)
    peak=$(tail -1 "$tmp/rss" 2> /dev/null | tr -dc 0-9)
    wall=$(echo "$end - $start" | bc)
    printf '%-9s %7d %5d %10.1f %12d %3d%s\n' "$cmd" "$T" "$HEADS" "$wall" "${peak:-0}" "$rc" \
        "$([ "$rc" = 124 ] && echo '  (stopped at the limit)')"
    eval "W_${cmd}_$T=$wall; M_${cmd}_$T=${peak:-0}"
}
printf '%-9s %7s %5s %10s %12s %3s\n' command T heads wall_s peak_rss_kib rc
for T in 4096 $LENS; do
    "$TSC" synth -o "$tmp/L$T.h5" --shape llama-gqa --layers 1 --steps 0 --seq-len "$T" --no-plant --quiet
    for c in $CMDS; do measure "$c" "$T"; done
    rm -f "$tmp/L$T.h5"
done
echo
echo "expected from T=4096 (wall x (T/4096)^2, rss x T/4096):"
for T in $LENS; do
    f=$(echo "$T / 4096" | bc -l)
    for c in $CMDS; do
        eval "w=\$W_${c}_4096 m=\$M_${c}_4096 wt=\$W_${c}_$T mt=\$M_${c}_$T"
        if [ "$BENCH_BUSY" = 1 ]; then
            printf '  %-9s T=%d: %s\n' "$c" "$T" "$BENCH_NOT_CLAIMED"
        else
            printf '  %-9s T=%d: wall %.0f s expected %.0f s (x%.0f); rss %d KiB, at most %.0f KiB expected (x%.0f)\n' \
                "$c" "$T" "$wt" "$(echo "$w * $f * $f" | bc -l)" "$(echo "$f * $f" | bc -l)" "$mt" \
                "$(echo "$m * $f" | bc -l)" "$f"
        fi
    done
done
bench_load end
