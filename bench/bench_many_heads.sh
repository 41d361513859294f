#!/bin/bash
# Benchmark: how `tilescope analyze` and `tilescope view` scale with the number of heads of a dump
# (docs/SECURITY.md, "the stored-bytes check"). Writes dumps of one step and one layer with H heads
# (H = each of SIZES; T = 16, D = 8, fp32, q k v o do; one head's [T, D] per chunk, as
# docs/FORMAT.md §1.3 lays them out) with examples/write_dump.py, times each command REPS times on
# each, and prints the median time per head at each size and the ratio of the per-head times of the
# largest and the smallest size: linear in heads reads ≈ 1, quadratic ≈ the ratio of the sizes.
# Not a timing assertion. Prints the load average at the start and the end (bench/load.sh).
# usage: bench/bench_many_heads.sh [TILESCOPE_BINARY] [REPS] [SIZES]
#        (default build/tilescope, 3, "512 4096"; TSC_BENCH_CMDS="analyze view" picks the commands)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
TSC=${1:-${TSC:-$here/../build/tilescope}}
REPS=${2:-3}
SIZES=${3:-512 4096}
CMDS=${TSC_BENCH_CMDS:-analyze view}
PY=${PYTHON:-$(bash "$here/../scripts/find_python.sh" h5py numpy 2>/dev/null || echo python3)}
threads=${OMP_NUM_THREADS:-1} # given to the commands only: nproc (load.sh) reads OMP_NUM_THREADS
. "$here/load.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for h in $SIZES; do
    PYTHONPATH="$here/../examples" "$PY" - "$tmp/h$h.h5" "$h" <<'EOF'
import sys
import numpy as np
from write_dump import write_dump
path, H = sys.argv[1], int(sys.argv[2])
B, T, D = 1, 16, 8
rng = np.random.default_rng(H)
q, k, v = (rng.standard_normal((B, H, T, D)).astype(np.float32) for _ in range(3))
s = np.einsum("bhtd,bhsd->bhts", q, k) / np.sqrt(D)
s = np.where(np.tril(np.ones((T, T), bool)), s, -np.inf)
p = np.exp(s - s.max(-1, keepdims=True))
o = np.einsum("bhts,bhsd->bhtd", p / p.sum(-1, keepdims=True), v).astype(np.float32)
do = (1e-3 * rng.standard_normal((B, H, T, D))).astype(np.float32)
write_dump(path, {0: {0: {"q": q, "k": k, "v": v, "o": o, "do": do}}}, n_layer=1, dtype="fp32",
           policy="bf16-torch", producer="bench_many_heads")
EOF
done

wall() { # command...: its wall time in seconds
    local t0 t1
    t0=$(date +%s.%N)
    OMP_NUM_THREADS=$threads "$@" > /dev/null 2> "$tmp/err" || { echo "failed: $*" >&2; cat "$tmp/err" >&2; exit 1; }
    t1=$(date +%s.%N)
    echo "$t1 - $t0" | bc -l
}
median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
run_cmd() { # command, heads, dump
    case $1 in
    analyze) wall "$TSC" analyze "$3" -o "$tmp/a$2" -q --no-census ;;
    view) wall "$TSC" view "$3" -o "$tmp/v$2.html" --overview 16 --max-mb 256 ;;
    esac
}

bench_load start
echo "time per head ($threads threads, T = 16, D = 8, one step and layer, median of $REPS; $TSC)"
for c in $CMDS; do
    first="" last=""
    for h in $SIZES; do
        run_cmd "$c" "$h" "$tmp/h$h.h5" > /dev/null # warm the page cache
        : > "$tmp/times"
        for _ in $(seq "$REPS"); do run_cmd "$c" "$h" "$tmp/h$h.h5" >> "$tmp/times"; done
        med=$(median < "$tmp/times")
        per=$(awk -v m="$med" -v h="$h" 'BEGIN { printf "%.6f", m / h }')
        awk -v c="$c" -v h="$h" -v m="$med" -v p="$per" 'BEGIN {
            printf "  %-8s %6d heads  %8.3f s  %8.3f ms per head\n", c, h, m, 1000 * p }'
        [ -z "$first" ] && first=$per
        last=$per
    done
    if [ "$BENCH_BUSY" = 1 ]; then
        echo "  $c ratio of the per-head times: $BENCH_NOT_CLAIMED"
    else
        awk -v c="$c" -v a="$first" -v b="$last" -v s="$SIZES" 'BEGIN {
            n = split(s, z, " ")
            printf "  %-8s ratio of the per-head times (%d / %d heads): %.2f (linear: 1; quadratic: %.0f)\n",
                   c, z[n], z[1], b / a, z[n] / z[1] }'
    fi
done
bench_load end
