#!/usr/bin/env bash
# Dump I/O benchmark: tilescope vs h5py writing/reading one GPT-2-small layer in BF16.
# usage: bench/bench_dump_io.sh [BUILD_DIR] [extra bench_dump_io options, e.g. --reps 5]
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}; shift || true
py=$(bash "$src/scripts/find_python.sh" h5py numpy) || { echo "needs a python3 with h5py and numpy"; exit 1; }
cmake --build "$build" --target bench_dump_io >/dev/null
exec "$build/bench_dump_io" --python "$py" --script "$src/bench/h5py_io.py" "$@"
