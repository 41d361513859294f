#!/usr/bin/env bash
# Heatmap benchmark: tilescope vs matplotlib, 4096 x 4096 with colour bar to PNG, same run.
#   bench/run_heatmap.sh [BUILD_DIR] [extra bench_heatmap flags]
# Builds bench_heatmap in BUILD_DIR (default: build) if needed, then runs it.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build}
shift || true
cmake --build "$build" --target bench_heatmap -j2 >/dev/null
exec "$build/bench_heatmap" --mpl "$src/bench/mpl_heatmap.py" "$@"
