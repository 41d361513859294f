#!/usr/bin/env bash
# Benchmark: how `diagnose`'s time grows with a run's ranks, and a model for runs of 64 and 1 024 ranks.
#   bench/bench_mpi_ranks.sh [TILESCOPE] [RUNS]     (defaults build/tilescope, 3)
# A data-parallel run of R ranks of b rows each is a manifest over R rank dumps holding R*b batch rows.
# Three synthetic runs of the GPT-2-small shape (layers 0-3, T = 256, the same generator) separate the
# costs, each diagnosed RUNS times (1 thread per process), interleaved:
#   A: 8 rows in 8 rank dumps      B: 32 rows in 8 rank dumps      C: 32 rows in 32 rank dumps
# A, B and C on one process, B and C on `mpirun -n 2` (each process's peak memory recorded too).
# Model T(files, rows, N) = K + F*files + S*rows + D*rows/N, fitted to A, B, C and C on 2 processes:
#   D (per batch row, the distributed items: the heads' statistics)       = 2 (C1 - C2) / 32
#   S (per batch row, what rank 0 alone does: the fit, the O/LSE check)  = (B1 - A1) / 24 - D
#   F (per rank dump: opening and checking it, on every process)          = (C1 - B1) / 24
#   K (the rest: set-up, rank 0's writes)                                  = A1 - 8F - 8S - 8D
# checked on B on 2 processes (measured against predicted), then evaluated for runs of 64 and 1 024
# ranks of one row each on 1, 64 and 1 024 processes. Useful processes are bounded by the work items:
# (H + 4) per (step, layer) pair, here 16 x 4 pairs = 64; beyond that the D term stops shrinking.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
TSC=${1:-$here/../build/tilescope}
RUNS=${2:-3}
. "$here/load.sh"
bench_mpi_env || exit 1
"$TSC" mpi-info >/dev/null || exit 1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
S=(--shape gpt2-small --layers 0:4 --seq-len 256)
"$TSC" synth -q -o "$tmp/a.h5" "${S[@]}" --batch 8 --ranks 8 || exit 1
"$TSC" synth -q -o "$tmp/b.h5" "${S[@]}" --batch 32 --ranks 8 || exit 1
"$TSC" synth -q -o "$tmp/c.h5" "${S[@]}" --batch 32 --ranks 32 || exit 1
echo "diagnose against the run's ranks: GPT-2-small shape, 4 layers, T = 256; $(nproc) CPUs"
bench_load start
t() { # t NAME DUMP CMD...: wall seconds appended to $tmp/NAME
    local name=$1 dump=$2; shift 2
    rm -rf "$tmp/$name.out"
    /usr/bin/time -f %e -o "$tmp/$name.t" "$@" diagnose -q "$dump" -o "$tmp/$name.out" \
        > /dev/null 2> "$tmp/$name.err" || { echo "$name failed:"; cat "$tmp/$name.err"; exit 1; }
    cat "$tmp/$name.t" >> "$tmp/$name"
}
# on 2 processes each one's peak resident memory (kB) goes to $tmp/NAME.mem.RANK
mpi2() { local name=$1 dump=$2
    t "$name" "$dump" mpirun --bind-to none -x OMP_NUM_THREADS=1 -n 2 sh -c \
        '/usr/bin/time -f %M -o "$0.mem.$OMPI_COMM_WORLD_RANK" "$@"' "$tmp/$name" "$TSC"
}
for i in $(seq 1 "$RUNS"); do
    OMP_NUM_THREADS=1 t a1 "$tmp/a.h5" "$TSC"
    OMP_NUM_THREADS=1 t b1 "$tmp/b.h5" "$TSC"
    OMP_NUM_THREADS=1 t c1 "$tmp/c.h5" "$TSC"
    mpi2 b2 "$tmp/b.h5"
    mpi2 c2 "$tmp/c.h5"
done
bench_load end
stats() { bench_stats "$tmp/$1"; }
read -r a al ah <<< "$(stats a1)"
read -r b bl bh <<< "$(stats b1)"
read -r c cl ch <<< "$(stats c1)"
read -r b2 b2l b2h <<< "$(stats b2)"
read -r c2 c2l c2h <<< "$(stats c2)"
printf '  %-44s median %6.2f s  [%.2f-%.2f] over %d runs\n' "A: 8 rows, 8 rank dumps, 1 process" "$a" "$al" "$ah" "$RUNS" \
    "B: 32 rows, 8 rank dumps, 1 process" "$b" "$bl" "$bh" "$RUNS" "C: 32 rows, 32 rank dumps, 1 process" "$c" "$cl" "$ch" "$RUNS" \
    "B on mpirun -n 2" "$b2" "$b2l" "$b2h" "$RUNS" "C on mpirun -n 2" "$c2" "$c2l" "$c2h" "$RUNS"
printf '  peak memory per process, C on 2 processes (last run): rank 0 %.0f MB, rank 1 %.0f MB\n' \
    "$(awk '{print $1 / 1024}' "$tmp/c2.mem.0")" "$(awk '{print $1 / 1024}' "$tmp/c2.mem.1")"
awk -v a="$a" -v b="$b" -v c="$c" -v b2="$b2" -v c2="$c2" 'BEGIN {
    D = 2 * (c - c2) / 32; S = (b - a) / 24 - D; F = (c - b) / 24; K = a - 8 * F - 8 * S - 8 * D
    printf "  per batch row: distributed D = %.3f s, rank 0 alone S = %.3f s; per rank dump F = %.3f s; the rest K = %.2f s\n",
        D, S, F, K
    p = K + 8 * F + 32 * S + 32 * D / 2
    printf "  model check: B on 2 processes predicted %.2f s, measured %.2f s (%+.0f%%)\n", p, b2, 100 * (b2 / p - 1)
    split("64 1024", R, " "); split("1 64 1024", N, " ")
    for (i = 1; i <= 2; i++) {
        printf "  model, %d ranks of 1 row:", R[i]
        for (j = 1; j <= 3; j++) {
            n = N[j] > 64 ? 64 : N[j]   # at most 64 useful processes on this shape (16 items x 4 pairs)
            t = K + (F + S) * R[i] + D * R[i] / n
            printf "%s%d processes %.0f s%s", (j > 1 ? "; " : " "), N[j], t, (N[j] > 64 ? " (64 useful)" : "")
        }
        printf " (serial part %.0f%% on 64)\n", 100 * (K + (F + S) * R[i]) / (K + (F + S) * R[i] + D * R[i] / 64)
    }
}'
