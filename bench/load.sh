# bench/load.sh: the load rule of the shell benchmarks, sourced by them (bench/bench_load.h states
# the same rule for the C ones). A benchmark prints the load average when it starts and when it
# ends, and claims no ratio (it says "not claimed" and why) when the 1-minute load average at its
# start exceeds the limit: $TSC_BENCH_MAX_LOAD, else 0.75 x the online CPUs (1.5 on 2 cores).
#   bench_load WHEN   prints "load average (WHEN): ..."; sets BENCH_BUSY=1 when above the limit
#   bench_others L0 S N  after a run of S seconds on N threads that started at 1-minute load L0: the
#                     load that others added on average meanwhile (the 1-minute average is an
#                     exponential one, time constant 60 s: L = L0 e^(-S/60) + (N + others)(1 - e^(-S/60)));
#                     sets BENCH_BUSY=1 when it is above 0.5 (half a CPU taken from the run); a run
#                     under 15 s (the average moves in 5 s steps) is held to the start's limit instead
#   bench_settle [S]  waits up to S seconds (default 60) for the load to fall to the limit
#   bench_stats FILE  "median min max" (%.2f) of the numbers in FILE, one a line
#   bench_mpi_env     mpirun present (else says how to install it, status 1); the environment of one
#                     node's runs: as root allowed, shared memory and self transports only
bench_load_limit() {
    awk -v e="${TSC_BENCH_MAX_LOAD:-}" -v n="$(nproc)" 'BEGIN { printf "%.2f\n", e != "" ? e + 0 : 0.75 * n }'
}
bench_load() {
    local lim la
    lim=$(bench_load_limit)
    read -r -a la < /proc/loadavg
    BENCH_BUSY=$(awk -v a="${la[0]}" -v l="$lim" 'BEGIN { print (a > l) ? 1 : 0 }')
    echo "load average ($1): ${la[0]} ${la[1]} ${la[2]} (limit $lim, $(nproc) CPUs)$([ "$BENCH_BUSY" = 1 ] && echo ': BUSY')"
}
bench_others() {
    local la
    read -r -a la < /proc/loadavg
    local o
    o=$(awk -v l0="$1" -v s="$2" -v n="$3" -v l="${la[0]}" 'BEGIN { d = exp(-s / 60);
        if (s < 15) { print "unknown"; exit } printf "%.2f", (l - l0 * d) / (1 - d) - n }')
    if [ "$o" = unknown ]; then # under 15 s: the start rule
        BENCH_BUSY=$(awk -v a="${la[0]}" -v l="$(bench_load_limit)" 'BEGIN { print (a > l) ? 1 : 0 }')
    else
        BENCH_BUSY=$(awk -v o="$o" 'BEGIN { print (o + 0 > 0.5) ? 1 : 0 }')
    fi
    echo "load average (end): ${la[0]} ${la[1]} ${la[2]}; added by others during the run: $o (limit 0.50)$([ "$BENCH_BUSY" = 1 ] && echo ': BUSY')"
}
bench_settle() {
    local end=$((SECONDS + ${1:-60})) lim
    lim=$(bench_load_limit)
    while [ $SECONDS -lt $end ] && awk -v l="$lim" '{ exit !($1 > l) }' /proc/loadavg; do sleep 5; done
}
# What a benchmark prints instead of a ratio on a busy machine.
BENCH_NOT_CLAIMED="not claimed: machine busy at the start (load average above the limit)"
bench_stats() {
    sort -n "$1" | awk '{v[NR] = $1} END {m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
        printf "%.2f %.2f %.2f", m, v[1], v[NR]}'
}
bench_mpi_env() {
    command -v mpirun >/dev/null || { echo "mpirun not found (apt-get install openmpi-bin libopenmpi-dev)"; return 1; }
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
    export OMPI_MCA_btl_vader_single_copy_mechanism=none
}
