#!/usr/bin/env bash
# Runs every benchmark of bench/ against its baseline, in one go: `make bench`.
#   bench/run_all.sh [BUILD_DIR]
# Each prints its own ratios; see the comment at the top of each script for what it measures.
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$src/build}" && pwd)
rc=0
run() { echo; echo "== $*"; "$@" || { echo "(failed: $*)"; rc=1; }; }
run bash "$src/bench/bench_dump_io.sh" "$build"
run bash "$src/bench/run_attention.sh" "$build"
run bash "$src/bench/bench_diagnose.sh" "$build/tilescope"
run bash "$src/bench/bench_diagnose_scaling.sh" "$build/tilescope"
run bash "$src/bench/run_heatmap.sh" "$build"
run bash "$src/bench/bench_report.sh" "$build"
run "$build/bench_formats"
exit $rc
