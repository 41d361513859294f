#!/usr/bin/env bash
# Benchmark: `diagnose` (or `analyze`) of a run of 8 rank dumps on 1 and 2 MPI processes (strong scaling), with
# the byte-identity of the results checked in every run. The dump: GPT-2-small shape, layers 0-3,
# T = 256, 8 batch rows over 8 ranks (4 (step, layer) pairs of 12 heads + 4 weight matrices).
#   bench/bench_mpi_analysis.sh [TILESCOPE] [RUNS] [COMMAND]   (defaults build/tilescope, 5, diagnose)
# diagnose distributes its analysis and the examination of the at-risk heads; the fit and the O/LSE
# check run on rank 0 alone (part of Amdahl's serial part below).
# Each run times, interleaved: one process without a launcher (1 thread), `mpirun -n 1` (1
# thread: the launcher's own cost), `mpirun -n 2` (1 thread each), and one process with 2 OpenMP
# threads (the same two cores shared by threads instead of processes). Printed: the median and
# min-max of each, the speed-up of 2 processes over 1 under the launcher, and Amdahl's serial part
# s = 2*T2 - T1 (what rank 0 alone does: the launcher, setup, HDF5 writes, the pooled flags), from
# which T(N) = s + (T1 - s)/N models larger jobs while N <= the items of a pair times the pairs.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
TSC=${1:-$here/../build/tilescope}
RUNS=${2:-5}
CMD=${3:-diagnose}
. "$here/load.sh"
bench_mpi_env || exit 1
"$TSC" mpi-info >/dev/null || exit 1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ID=0123456789abcdef0123456789abcdef
"$TSC" synth -q -o "$tmp/run.h5" --shape gpt2-small --layers 0:4 --seq-len 256 --batch 8 --ranks 8 || exit 1
echo "$CMD on MPI processes: GPT-2-small shape, 4 layers, T = 256, 8 rank dumps of 1 row each; $(nproc) CPUs"
echo "load average (start): $(cut -d' ' -f1-3 /proc/loadavg) (limit $(bench_load_limit), $(nproc) CPUs)"
t() { # t NAME CMD...: wall seconds appended to $tmp/NAME, output folder $tmp/NAME.out
    local name=$1; shift
    rm -rf "$tmp/$name.out"
    /usr/bin/time -f %e -o "$tmp/$name.t" "$@" "$CMD" -q "$tmp/run.h5" -o "$tmp/$name.out" --run-id $ID \
        > "$tmp/$name.txt" 2> "$tmp/$name.err" || { echo "$name failed:"; cat "$tmp/$name.err"; exit 1; }
    cat "$tmp/$name.t" >> "$tmp/$name"
}
bad=0
for i in $(seq 1 "$RUNS"); do
    OMP_NUM_THREADS=1 t plain "$TSC"
    t mpi1 mpirun --bind-to none -x OMP_NUM_THREADS=1 -n 1 "$TSC"
    t mpi2 mpirun --bind-to none -x OMP_NUM_THREADS=1 -n 2 "$TSC"
    OMP_NUM_THREADS=2 t omp2 "$TSC"
    for name in mpi1 mpi2 omp2; do
        for f in analysis.h5 summary.json; do
            cmp -s "$tmp/plain.out/$f" "$tmp/$name.out/$f" || { echo "run $i: $name's $f differs"; bad=1; }
        done
        cmp -s "$tmp/plain.txt" "$tmp/$name.txt" || { echo "run $i: $name's printed verdict differs"; bad=1; }
    done
done
echo "load average (end): $(cut -d' ' -f1-3 /proc/loadavg) (limit $(bench_load_limit), $(nproc) CPUs)"
stats() { bench_stats "$tmp/$1"; }
read -r p pl ph <<< "$(stats plain)"
read -r m1 m1l m1h <<< "$(stats mpi1)"
read -r m2 m2l m2h <<< "$(stats mpi2)"
read -r o2 o2l o2h <<< "$(stats omp2)"
printf '  %-34s median %6.2f s  [%.2f-%.2f] over %d runs\n' "1 process, no launcher, 1 thread" "$p" "$pl" "$ph" "$RUNS" \
    "mpirun -n 1, 1 thread" "$m1" "$m1l" "$m1h" "$RUNS" "mpirun -n 2, 1 thread each" "$m2" "$m2l" "$m2h" "$RUNS" \
    "1 process, 2 OpenMP threads" "$o2" "$o2l" "$o2h" "$RUNS"
awk -v t1="$m1" -v t2="$m2" -v p="$p" 'BEGIN {
    s = 2 * t2 - t1; if (s < 0) s = 0
    printf "  speed-up of 2 processes over 1 (both under mpirun): %.2fx (efficiency %.0f%%); launcher cost %.2f s\n",
        t1 / t2, 50 * t1 / t2, t1 - p
    printf "  Amdahl: serial part s = 2*T2 - T1 = %.2f s of T1 = %.2f s; model T(N) = s + (T1 - s)/N:", s, t1
    n = split("4 8 16 64", N, " ")
    for (i = 1; i <= n; i++) printf " N=%d %.2f s", N[i], s + (t1 - s) / N[i]
    printf "\n"
}'
[ $bad = 0 ] && echo "  results: analysis.h5, summary.json and the verdict byte-identical in every run and configuration" ||
    { echo "  results DIFFER (a bug)"; exit 1; }
