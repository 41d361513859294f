#!/usr/bin/env bash
# The program under a launcher: each process learns its rank (`tilescope mpi-info` prints rank and
# size through the communicator the jobs use), and a build without MPI refuses N > 1 processes.
. "$(dirname "$0")/lib_mpi.sh"
out=$(mpi 3 "$TSC" mpi-info 2>&1)
[ "$(printf '%s\n' "$out" | grep -c '^rank ')" = 3 ] && ok || bad "3 processes did not each report: $out"
for r in 0 1 2; do printf '%s\n' "$out" | grep -qx "rank $r of 3 (mpi)" && ok || bad "rank $r missing: $out"; done
# alone, no launcher: one process, MPI never initialised
[ "$("$TSC" mpi-info)" = "rank 0 of 1 (serial)" ] && ok || bad "a plain run is not serial: $("$TSC" mpi-info)"
finish
