#!/bin/bash
# Benchmark: tilescope's commands on one layer at the longest contexts it accepts (T up to 131072),
# from random BF16-valued q, k, v, dO saved with numpy (.npz) and brought in with `tilescope import`
# (synth computes O and LSE under a policy for every head of a layer, which at T = 131072 takes
# hours; no command here needs them: without o they replay). HEADS query heads sharing one KV head
# (grouped-query, Llama-style), D = 64, causal. Runs each command at T = 4096 and at each T given,
# prints wall time and the kernel's peak RSS (GNU time's %M, from wait4's rusage: it covers the
# containment child too), and the T = 4096 run scaled by the expected growth (time x (T/4096)^2,
# memory x T/4096: every command streams, O(T*(D + C)) per thread).
#   analyze   `tilescope analyze` of the layer (every head)
#   replay    `tilescope replay --policy fp32 --policy bf16-torch` (forward and backward, every head)
#   diagnose  `tilescope diagnose --alpha 1 --min-ulp 0 --max-heads 1 --max-steps 1`: the analysis,
#             then one head examined in depth (~30 replays of it; the flag rule is opened so a
#             random head is at risk and the examination always runs)
#   figure    `tilescope figure attn --rows T-128:T` of head 0 (the last 128 query rows)
# A run longer than LIMIT seconds is stopped; the RSS it had reached is then reported (memory is
# allocated per head at its start and stays flat). On a busy machine (bench/load.sh) the time ratios
# are not claimed.
# usage: bench/bench_long_context_import.sh [TILESCOPE] [LIMIT_S] [T ...]   (default 131072)
#   TSC_BENCH_CMDS="analyze replay diagnose figure" picks the commands (default analyze);
#   TSC_BENCH_HEADS=N the query heads (default 1).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
TSC=${1:-$here/../build/tilescope}
LIMIT=${2:-3600}
shift $(( $# < 2 ? $# : 2 ))
LENS=${*:-131072}
CMDS=${TSC_BENCH_CMDS:-analyze}
HEADS=${TSC_BENCH_HEADS:-1}
py=$(bash "$here/../scripts/find_python.sh" numpy) || { echo "skipped: no python3 with numpy"; exit 0; }
[ -x /usr/bin/time ] || { echo "skipped: needs GNU time (/usr/bin/time; scripts/setup.sh --bench)"; exit 0; }
. "$here/load.sh"
bench_load start
echo "one layer, $HEADS query head(s) sharing 1 KV head, D 64, causal; commands: $CMDS; limit $LIMIT s"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '%-9s %7s %10s %12s %3s\n' command T wall_s peak_rss_kib rc
for T in 4096 $LENS; do
    mkdir -p "$tmp/npy$T"
    "$py" - "$tmp/npy$T" "$T" "$HEADS" <<'PY'
import sys
import numpy as np
out, T, H = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(T)
t = {}
for name, h in (("q", H), ("k", 1), ("v", 1), ("do", H)):
    x = rng.standard_normal((1, h, T, 64), dtype=np.float32)
    t[name] = (x.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)  # BF16 values
np.savez("%s/t.npz" % out, **t)
PY
    TSC_PYTHON=$py "$TSC" import "$tmp/npy$T/t.npz" -o "$tmp/L$T.h5" --policy bf16-torch > /dev/null
    rm -rf "$tmp/npy$T"
    for c in $CMDS; do
        case $c in
        analyze) args=(analyze "$tmp/L$T.h5" -o "$tmp/an$T" -q) ;;
        replay) args=(replay "$tmp/L$T.h5" --policy fp32 --policy bf16-torch -o "$tmp/r$T.h5" -q) ;;
        diagnose) args=(diagnose "$tmp/L$T.h5" -o "$tmp/dg$T" -q --alpha 1 --min-ulp 0 --max-heads 1 --max-steps 1) ;;
        figure) args=(figure attn "$tmp/L$T.h5" --layer 0 --head 0 --rows "$((T - 128)):$T" -o "$tmp/f$T.png") ;;
        *) echo "unknown command $c (analyze replay diagnose figure)" >&2; exit 2 ;;
        esac
        start=$(date +%s.%N)
        rc=0
        /usr/bin/time -f %M -o "$tmp/rss" timeout "$LIMIT" "$TSC" "${args[@]}" > /dev/null 2>&1 || rc=$?
        end=$(date +%s.%N)
        peak=$(tail -1 "$tmp/rss" | tr -dc 0-9)
        wall=$(echo "$end - $start" | bc)
        printf '%-9s %7d %10.1f %12d %3d%s\n' "$c" "$T" "$wall" "${peak:-0}" "$rc" \
            "$([ "$rc" = 124 ] && echo '  (stopped at the limit)')"
        eval "W_${c}_$T=$wall; M_${c}_$T=${peak:-0}"
        rm -rf "$tmp/an$T" "$tmp/r$T.h5" "$tmp/dg$T" "$tmp/f$T.png"
    done
    rm -f "$tmp/L$T.h5"
done
echo
echo "expected from T=4096 (wall x (T/4096)^2, rss x T/4096):"
for T in $LENS; do
    f=$(echo "$T / 4096" | bc -l)
    for c in $CMDS; do
        eval "w=\$W_${c}_4096 m=\$M_${c}_4096 wt=\$W_${c}_$T mt=\$M_${c}_$T"
        if [ "$BENCH_BUSY" = 1 ]; then
            printf '  %-9s T=%d: wall not claimed (busy machine); rss %d KiB, at most %.0f KiB expected (x%.0f)\n' \
                "$c" "$T" "$mt" "$(echo "$m * $f" | bc -l)" "$f"
        else
            printf '  %-9s T=%d: wall %.0f s expected %.0f s (x%.0f); rss %d KiB, at most %.0f KiB expected (x%.0f)\n' \
                "$c" "$T" "$wt" "$(echo "$w * $f * $f" | bc -l)" "$(echo "$f * $f" | bc -l)" "$mt" \
                "$(echo "$m * $f" | bc -l)" "$f"
        fi
    done
done
bench_load end
