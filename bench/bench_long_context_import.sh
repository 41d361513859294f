#!/bin/bash
# Benchmark: `tilescope analyze` on one attention head at the longest context it accepts
# (T = 131072, and T = 4096 for the scaling), from random BF16-valued q, k, v, dO saved with numpy (.npz)
# and brought in with `tilescope import` (synth computes O and LSE under a policy for every head of
# a layer, which at T = 131072 takes hours; analyze does not need them: without o it replays). One
# head, D = 64, causal. Prints wall time and the kernel's peak RSS (GNU time) per T, and the
# T = 4096 run scaled by the expected growth (time x (T/4096)^2, memory x T/4096).
# usage: bench/bench_long_context_import.sh [TILESCOPE] [LIMIT_S] [T ...]   (default 131072)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
TSC=${1:-$here/../build/tilescope}
LIMIT=${2:-3600}
shift $(( $# < 2 ? $# : 2 ))
LENS=${*:-131072}
py=$(bash "$here/../scripts/find_python.sh" numpy) || { echo "skipped: no python3 with numpy"; exit 0; }
. "$here/load.sh"
bench_load start
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '%-9s %7s %10s %12s %3s\n' command T wall_s peak_rss_kib rc
for T in 4096 $LENS; do
    mkdir -p "$tmp/npy$T"
    "$py" - "$tmp/npy$T" "$T" <<'PY'
import sys
import numpy as np
out, T = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(T)
t = {}
for name in ("q", "k", "v", "do"):
    x = rng.standard_normal((1, 1, T, 64), dtype=np.float32)
    t[name] = (x.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)  # BF16 values
np.savez("%s/t.npz" % out, **t)
PY
    TSC_PYTHON=$py "$TSC" import "$tmp/npy$T/t.npz" -o "$tmp/L$T.h5" --policy bf16-torch > /dev/null
    rm -rf "$tmp/npy$T"
    start=$(date +%s.%N)
    rc=0
    /usr/bin/time -f %M -o "$tmp/rss" timeout "$LIMIT" "$TSC" analyze "$tmp/L$T.h5" -o "$tmp/an$T" -q \
        > /dev/null 2>&1 || rc=$?
    end=$(date +%s.%N)
    peak=$(tail -1 "$tmp/rss" | tr -dc 0-9)
    wall=$(echo "$end - $start" | bc)
    printf '%-9s %7d %10.1f %12d %3d%s\n' analyze "$T" "$wall" "${peak:-0}" "$rc" \
        "$([ "$rc" = 124 ] && echo '  (stopped at the limit)')"
    eval "W_$T=$wall; M_$T=${peak:-0}"
    rm -f "$tmp/L$T.h5"
done
echo
for T in $LENS; do
    f=$(echo "$T / 4096" | bc -l)
    eval "w=\$W_4096 m=\$M_4096 wt=\$W_$T mt=\$M_$T"
    if [ "$BENCH_BUSY" = 1 ]; then
        printf '  T=%d: wall not claimed (busy machine); rss %d KiB, at most %.0f KiB expected (x%.0f)\n' "$T" "$mt" \
            "$(echo "$m * $f" | bc -l)" "$f"
    else
        printf '  T=%d: wall %.0f s expected %.0f s (x%.0f); rss %d KiB, at most %.0f KiB expected (x%.0f)\n' "$T" \
            "$wt" "$(echo "$w * $f * $f" | bc -l)" "$(echo "$f * $f" | bc -l)" "$mt" "$(echo "$m * $f" | bc -l)" "$f"
    fi
done
bench_load end
