#!/usr/bin/env bash
# Benchmark: data-parallel training on MPI processes against one process, the same bits.
#   bench/bench_mpi_train.sh [TILESCOPE] [RUNS] [STEPS]     (defaults build/tilescope, 5, 20)
# gpt2-mini, batch 8, the model's context, STEPS steps, validation only at the end. Timed,
# interleaved, RUNS times each (1 OpenMP thread per process unless said):
#   one process, the whole batch at once (G = 1)            the plain trainer
#   one process, --grad-shards 2                            what the shards cost by themselves
#   mpirun -n 2, --grad-shards 2                            the same run on two processes
#   one process, G = 2, 2 OpenMP threads                    the same two cores shared by threads
# The G = 2 runs are compared: log.csv and ckpt.bin byte-identical on 1 and 2 processes, log.csv
# with 2 threads (run.cfg, inside ckpt.bin, records the thread count).
# Printed: median and min-max per configuration, the speed-up of 2 processes over one with the
# same G, and the gradient chain's traffic per step (the parameters' bytes, sent N - 1 times and
# broadcast once), and the chain's share of process 0's step time (its wait for the sum to come
# round: the other process's compute beyond its own, and the transfers), median and range.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
TSC=${1:-$here/../build/tilescope}
RUNS=${2:-5}
STEPS=${3:-20}
. "$here/load.sh"
bench_mpi_env || exit 1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
A=(--model gpt2-mini --batch 8 --steps "$STEPS" --val-every 100000 --stats-every 100000 --ckpt-every 100000 -q)
echo "train on MPI processes: gpt2-mini, batch 8, $STEPS steps; $(nproc) CPUs"
echo "load average (start): $(cut -d' ' -f1-3 /proc/loadavg) (limit $(bench_load_limit), $(nproc) CPUs)"
t() { # t NAME THREADS CMD...: wall seconds appended to $tmp/NAME; the run folder $tmp/NAME.run
    local name=$1 thr=$2; shift 2
    rm -rf "$tmp/$name.run"
    OMP_NUM_THREADS=$thr /usr/bin/time -f %e -o "$tmp/$name.t" "$@" train -o "$tmp/$name.run" "${A[@]}" "${G[@]}" \
        > "$tmp/$name.out" 2> "$tmp/$name.err" || { echo "$name failed:"; cat "$tmp/$name.err"; exit 1; }
    cat "$tmp/$name.t" >> "$tmp/$name"
    # on several processes the final line says how long process 0 waited for the gradient chain
    sed -n "s/.*process 0 waited \([0-9.]*\) s of the steps' \([0-9.]*\) s.*/\1 \2/p" "$tmp/$name.out" |
        awk '{printf "%.4f\n", $1 / $2}' >> "$tmp/$name.chain"
}
bad=0
for i in $(seq 1 "$RUNS"); do
    G=(); t g1 1 "$TSC"
    G=(--grad-shards 2); t g2 1 "$TSC"
    t mpi2 1 mpirun --bind-to none -x OMP_NUM_THREADS -n 2 "$TSC"
    t omp2 2 "$TSC"
    # run.cfg (and so ckpt.bin) records the thread count: 2 threads compare by their log
    for f in mpi2/log.csv mpi2/ckpt.bin omp2/log.csv; do
        cmp -s "$tmp/g2.run/${f#*/}" "$tmp/${f%%/*}.run/${f#*/}" || { echo "run $i: ${f%%/*}'s ${f#*/} differs from one process's"; bad=1; }
    done
done
echo "load average (end): $(cut -d' ' -f1-3 /proc/loadavg) (limit $(bench_load_limit), $(nproc) CPUs)"
stats() { bench_stats "$tmp/$1"; }
read -r a al ah <<< "$(stats g1)"
read -r b bl bh <<< "$(stats g2)"
read -r c cl ch <<< "$(stats mpi2)"
read -r d dl dh <<< "$(stats omp2)"
printf '  %-40s median %6.2f s  [%.2f-%.2f] over %d runs\n' "1 process, G = 1, 1 thread" "$a" "$al" "$ah" "$RUNS" \
    "1 process, G = 2, 1 thread" "$b" "$bl" "$bh" "$RUNS" "mpirun -n 2, G = 2, 1 thread each" "$c" "$cl" "$ch" "$RUNS" \
    "1 process, G = 2, 2 OpenMP threads" "$d" "$dl" "$dh" "$RUNS"
bytes=$(stat -c %s "$tmp/g2.run/ckpt.bin")
awk -v b="$b" -v c="$c" -v d="$d" -v a="$a" -v bytes="$bytes" -v steps="$STEPS" 'BEGIN {
    printf "  speed-up of 2 processes over 1 (G = 2): %.2fx (efficiency %.0f%%); over 2 threads: %.2fx; shards alone cost %+.0f%%\n",
        b / c, 50 * b / c, d / c, 100 * (b / a - 1)
    printf "  gradient chain: %.1f MB of gradients per step (a third of ckpt.bin), sent once and broadcast once on 2 processes\n",
        bytes / 3 / 1e6
}'
read -r e el eh <<< "$(stats mpi2.chain)"
awk -v e="$e" -v el="$el" -v eh="$eh" 'BEGIN {
    printf "  chain share of process 0'"'"'s step time on 2 processes: %.1f%% [%.1f-%.1f]\n", 100 * e, 100 * el, 100 * eh }'
[ $bad = 0 ] && echo "  results: for G = 2, log.csv and ckpt.bin byte-identical on 1 and 2 processes, log.csv with 2 threads, every run" ||
    { echo "  results DIFFER (a bug)"; exit 1; }
